/* The emulated NVIDIA driver for the tests: build/tests/fakecuda/libcuda.so.1 (soname
 * libcuda.so.1), found by the test runner through its RPATH ($ORIGIN/fakecuda) and by tools
 * run from the tests through LD_LIBRARY_PATH.  Never installed.
 *
 * It implements the CUDA driver API calls the library, mlxd-capture --gpu and the tests make,
 * with the documented signatures and CUresult codes (receiver/cuda_api.h names the sources):
 * cuInit, cuDriverGetVersion, cuDeviceGetCount/Get/GetAttribute, primary and created contexts
 * with a current context per thread, cuMemAlloc/Free, cuMemAllocHost/FreeHost, cuPointerGetAttribute(s),
 * cuMemGetHandleForAddressRange (CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD), cuMemcpyDtoH/HtoD and
 * cuGetErrorName/String.
 *
 * Device memory: each allocation is memfd pages mapped read-write only here ("real"), while the
 * address handed out (the CUdeviceptr) is a PROT_NONE reservation of the same size: a program
 * that dereferences a device pointer faults, as it would on a GPU, instead of passing.  A dma-buf
 * export is a descriptor for the memfd holding the range, at offset 0 = the range's first byte:
 * the emulated kernel's REG_DMABUF_MR maps it, so the emulated NIC writes into device memory.
 * A memfd cannot be a view at an offset, so exporting a range that starts inside a segment splits
 * the segment (its bytes move to new memfds); splitting one already exported is not emulated and
 * returns CUDA_ERROR_NOT_SUPPORTED with a line on stderr naming this limitation.
 *
 * Stricter than a real driver (so that library bugs show): device-memory copies need the
 * allocation's own context current on the calling thread (CUDA_ERROR_INVALID_CONTEXT otherwise).
 *
 * Built with -DFAKECUDA_BEFORE_11_7 (build/tests/fakecuda-11.6/) it is a driver before CUDA 11.7:
 * no cuMemGetHandleForAddressRange, cuDriverGetVersion 11060.
 *
 * Fault injection: fakecuda_fail(call, result, count) makes the next `count` calls (-1: all) of
 * `call` (its exported name, e.g. "cuMemcpyDtoH_v2") return `result` without acting;
 * fakecuda_fail(NULL, 0, 0) clears every fault.  FAKECUDA_FAIL="call=result[,call=result]" in
 * the environment does the same (all calls) for programs the tests start. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "cuda_api.h"

#define MAX_ALLOCS 64
#define MAX_SEGS 8
#define MAX_CTX 16
#define MAX_FAULTS 8
#define ALLOC_ALIGN (64u << 10)     /* a GPU page */
#ifdef FAKECUDA_BEFORE_11_7          /* fakecuda-11.6/: no cuMemGetHandleForAddressRange */
#define DRIVER_VERSION 11060        /* reported as CUDA 11.6 */
#else
#define DRIVER_VERSION 12040        /* reported as CUDA 12.4 */
#endif

struct mlxd_cu_ctx_st { int dev; bool primary, alive; int refs; };

struct seg { size_t off, len; int fd; bool exported; };

struct alloc {
    bool used, host;
    uint64_t ptr;                /* device: the PROT_NONE reservation; host: the memory */
    size_t size, span;           /* asked, mapped (ALLOC_ALIGN multiple) */
    uint8_t *real;               /* device: the mapping only this file uses */
    struct mlxd_cu_ctx_st *ctx;
    struct seg seg[MAX_SEGS];
    unsigned nseg;
};

struct fault { char call[48]; int result; int count; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized;
static struct alloc allocs[MAX_ALLOCS];
static struct mlxd_cu_ctx_st ctxs[MAX_CTX];
static struct fault faults[MAX_FAULTS];
/* The current context of each thread.  A pthread key, not __thread: a dlopen'ed library's
 * __thread variables are dynamic TLS, which LeakSanitizer's exit-time scan of threads mis-reads
 * (it crashed in the ASan pass: "Tracer caught signal 11"). */
static pthread_key_t current_key;
static pthread_once_t current_once = PTHREAD_ONCE_INIT;
static void current_key_make(void) { pthread_key_create(&current_key, NULL); }
static struct mlxd_cu_ctx_st *get_current(void)
{
    pthread_once(&current_once, current_key_make);
    return pthread_getspecific(current_key);
}
static void set_current(struct mlxd_cu_ctx_st *c)
{
    pthread_once(&current_once, current_key_make);
    pthread_setspecific(current_key, c);
}

/* ---- fault injection ------------------------------------------------------------------- */
int fakecuda_fail(const char *call, int result, int count)
{
    pthread_mutex_lock(&lock);
    if (!call) {
        memset(faults, 0, sizeof faults);
        pthread_mutex_unlock(&lock);
        return 0;
    }
    int rc = -1;
    for (int i = 0; i < MAX_FAULTS && rc; i++)
        if (!faults[i].call[0] || !strcmp(faults[i].call, call)) {
            snprintf(faults[i].call, sizeof faults[i].call, "%s", call);
            faults[i].result = result;
            faults[i].count = count;
            rc = 0;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

__attribute__((constructor)) static void env_faults(void)
{
    const char *e = getenv("FAKECUDA_FAIL");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", e ? e : "");
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq) {
            *eq = 0;
            fakecuda_fail(t, atoi(eq + 1), -1);
        }
    }
}

/* The injected result for this call of `call`, or 0. */
static int injected(const char *call)
{
    int r = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_FAULTS; i++)
        if (faults[i].call[0] && faults[i].count && !strcmp(faults[i].call, call)) {
            r = faults[i].result;
            if (faults[i].count > 0)
                faults[i].count--;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

#define ENTER(name)                                        \
    do {                                                   \
        int inj_ = injected(name);                         \
        if (inj_) return inj_;                             \
        if (!initialized) return MLXD_CUDA_ERROR_NOT_INITIALIZED; \
    } while (0)

/* ---- errors -------------------------------------------------------------------------------- */
static const struct { int e; const char *name, *text; } errs[] = {
    { MLXD_CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { MLXD_CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { MLXD_CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { MLXD_CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { MLXD_CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { MLXD_CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { MLXD_CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { MLXD_CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { MLXD_CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
      "an illegal memory access was encountered" },
    { MLXD_CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
};

static mlxd_cu_result error_text(mlxd_cu_result e, const char **out, bool name)
{
    if (!out)
        return MLXD_CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].e == e) {
            *out = name ? errs[i].name : errs[i].text;
            return MLXD_CUDA_SUCCESS;
        }
    *out = NULL;
    return MLXD_CUDA_ERROR_INVALID_VALUE;
}

mlxd_cu_result cuGetErrorName(mlxd_cu_result e, const char **s) { return error_text(e, s, true); }
mlxd_cu_result cuGetErrorString(mlxd_cu_result e, const char **s) { return error_text(e, s, false); }

/* ---- initialization, devices, contexts ------------------------------------------------------ */
mlxd_cu_result cuInit(unsigned flags)
{
    int inj = injected("cuInit");
    if (inj) return inj;
    if (flags) return MLXD_CUDA_ERROR_INVALID_VALUE;
    initialized = true;
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuDriverGetVersion(int *v)
{
    int inj = injected("cuDriverGetVersion");
    if (inj) return inj;
    if (!v) return MLXD_CUDA_ERROR_INVALID_VALUE;
    *v = DRIVER_VERSION;
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuDeviceGetCount(int *n)
{
    ENTER("cuDeviceGetCount");
    if (!n) return MLXD_CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuDeviceGet(mlxd_cu_dev *d, int ordinal)
{
    ENTER("cuDeviceGet");
    if (!d) return MLXD_CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return MLXD_CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return MLXD_CUDA_SUCCESS;
}

/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (124) only: 0 while its export is made to fail */
mlxd_cu_result cuDeviceGetAttribute(int *v, int attr, mlxd_cu_dev d)
{
    ENTER("cuDeviceGetAttribute");
    if (!v || attr != 124) return MLXD_CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return MLXD_CUDA_ERROR_INVALID_DEVICE;
    bool fails = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_FAULTS; i++)
        fails |= faults[i].count && !strcmp(faults[i].call, "cuMemGetHandleForAddressRange");
    pthread_mutex_unlock(&lock);
    *v = !fails;
    return MLXD_CUDA_SUCCESS;
}

static struct mlxd_cu_ctx_st *new_ctx(int dev, bool primary)
{
    for (int i = 0; i < MAX_CTX; i++)
        if (!ctxs[i].alive) {
            ctxs[i] = (struct mlxd_cu_ctx_st){ .dev = dev, .primary = primary, .alive = true };
            return &ctxs[i];
        }
    return NULL;
}

static bool valid_ctx(const struct mlxd_cu_ctx_st *c)
{
    return c >= ctxs && c < ctxs + MAX_CTX && c->alive;
}

mlxd_cu_result cuDevicePrimaryCtxRetain(mlxd_cu_ctx *out, mlxd_cu_dev d)
{
    ENTER("cuDevicePrimaryCtxRetain");
    if (!out) return MLXD_CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return MLXD_CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    struct mlxd_cu_ctx_st *c = NULL;
    for (int i = 0; i < MAX_CTX && !c; i++)
        if (ctxs[i].alive && ctxs[i].primary && ctxs[i].dev == d)
            c = &ctxs[i];
    if (!c)
        c = new_ctx(d, true);
    if (c)
        c->refs++;
    pthread_mutex_unlock(&lock);
    if (!c) return MLXD_CUDA_ERROR_OUT_OF_MEMORY;
    *out = c;
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuDevicePrimaryCtxRelease_v2(mlxd_cu_dev d)
{
    ENTER("cuDevicePrimaryCtxRelease_v2");
    if (d != 0) return MLXD_CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_CTX; i++)
        if (ctxs[i].alive && ctxs[i].primary && ctxs[i].refs > 0)
            ctxs[i].refs--;   /* the primary context stays (a real driver resets it at 0) */
    pthread_mutex_unlock(&lock);
    return MLXD_CUDA_SUCCESS;
}

/* cuCtxCreate (the CUDA 3.2 signature): a new context, made current on this thread. */
mlxd_cu_result cuCtxCreate_v2(mlxd_cu_ctx *out, unsigned flags, mlxd_cu_dev d)
{
    ENTER("cuCtxCreate_v2");
    (void)flags;
    if (!out) return MLXD_CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return MLXD_CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    struct mlxd_cu_ctx_st *c = new_ctx(d, false);
    pthread_mutex_unlock(&lock);
    if (!c) return MLXD_CUDA_ERROR_OUT_OF_MEMORY;
    *out = c;
    set_current(c);
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuCtxDestroy_v2(mlxd_cu_ctx c)
{
    ENTER("cuCtxDestroy_v2");
    pthread_mutex_lock(&lock);
    bool ok = valid_ctx(c) && !c->primary;
    if (ok)
        c->alive = false;
    pthread_mutex_unlock(&lock);
    if (!ok) return MLXD_CUDA_ERROR_INVALID_CONTEXT;
    if (get_current() == c)
        set_current(NULL);
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuCtxGetCurrent(mlxd_cu_ctx *out)
{
    ENTER("cuCtxGetCurrent");
    if (!out) return MLXD_CUDA_ERROR_INVALID_VALUE;
    *out = get_current();
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuCtxSetCurrent(mlxd_cu_ctx c)
{
    ENTER("cuCtxSetCurrent");
    pthread_mutex_lock(&lock);
    bool ok = !c || valid_ctx(c);
    pthread_mutex_unlock(&lock);
    if (!ok) return MLXD_CUDA_ERROR_INVALID_CONTEXT;
    set_current(c);
    return MLXD_CUDA_SUCCESS;
}

/* ---- memory ------------------------------------------------------------------------------- */
/* The allocation holding [p, p+n) (n 0: holding p), under lock; NULL when none. */
static struct alloc *find(uint64_t p, size_t n)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        struct alloc *a = &allocs[i];
        if (a->used && p >= a->ptr && p - a->ptr < a->size && n <= a->size - (p - a->ptr))
            return a;
    }
    return NULL;
}

static struct alloc *slot(void)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!allocs[i].used)
            return &allocs[i];
    return NULL;
}

mlxd_cu_result cuMemAlloc_v2(mlxd_cu_ptr *out, size_t size)
{
    ENTER("cuMemAlloc_v2");
    struct mlxd_cu_ctx_st *current = get_current();
    if (!current) return MLXD_CUDA_ERROR_INVALID_CONTEXT;
    if (!out || !size) return MLXD_CUDA_ERROR_INVALID_VALUE;
    size_t span = (size + ALLOC_ALIGN - 1) & ~(size_t)(ALLOC_ALIGN - 1);
    if (span < size) return MLXD_CUDA_ERROR_OUT_OF_MEMORY;
    int fd = memfd_create("fakecuda-device-memory", MFD_CLOEXEC);
    if (fd < 0) return MLXD_CUDA_ERROR_OUT_OF_MEMORY;
    void *real = MAP_FAILED, *resv = MAP_FAILED;
    if (ftruncate(fd, (off_t)span) == 0)
        real = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (real != MAP_FAILED)
        resv = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    pthread_mutex_lock(&lock);
    struct alloc *a = resv != MAP_FAILED ? slot() : NULL;
    if (a)
        *a = (struct alloc){ .used = true, .ptr = (uint64_t)(uintptr_t)resv, .size = size,
                             .span = span, .real = real, .ctx = current, .nseg = 1,
                             .seg = { { .off = 0, .len = span, .fd = fd } } };
    pthread_mutex_unlock(&lock);
    if (!a) {
        if (resv != MAP_FAILED) munmap(resv, span);
        if (real != MAP_FAILED) munmap(real, span);
        close(fd);
        return MLXD_CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = a->ptr;
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuMemAllocHost_v2(void **out, size_t size)
{
    ENTER("cuMemAllocHost_v2");
    struct mlxd_cu_ctx_st *current = get_current();
    if (!current) return MLXD_CUDA_ERROR_INVALID_CONTEXT;
    if (!out || !size) return MLXD_CUDA_ERROR_INVALID_VALUE;
    size_t span = (size + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return MLXD_CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    struct alloc *a = slot();
    if (a)
        *a = (struct alloc){ .used = true, .host = true, .ptr = (uint64_t)(uintptr_t)p,
                             .size = size, .span = span, .ctx = current };
    pthread_mutex_unlock(&lock);
    if (!a) {
        munmap(p, span);
        return MLXD_CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = p;
    return MLXD_CUDA_SUCCESS;
}

static mlxd_cu_result free_alloc(uint64_t p, bool host)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find(p, 0);
    if (!a || a->ptr != p || a->host != host) {
        pthread_mutex_unlock(&lock);
        return MLXD_CUDA_ERROR_INVALID_VALUE;
    }
    struct alloc gone = *a;
    a->used = false;
    pthread_mutex_unlock(&lock);
    munmap((void *)(uintptr_t)gone.ptr, gone.span);
    if (gone.real)
        munmap(gone.real, gone.span);
    for (unsigned i = 0; i < gone.nseg; i++)
        close(gone.seg[i].fd);   /* exported dma-bufs keep their own descriptors */
    return MLXD_CUDA_SUCCESS;
}

mlxd_cu_result cuMemFree_v2(mlxd_cu_ptr p) { ENTER("cuMemFree_v2"); return free_alloc(p, false); }
mlxd_cu_result cuMemFreeHost(void *p) { ENTER("cuMemFreeHost"); return free_alloc((uintptr_t)p, true); }

/* One attribute of the allocation a (NULL: not a CUDA pointer: the "default NULL values"). */
static mlxd_cu_result attribute(const struct alloc *a, int attr, void *out, uint64_t p)
{
    switch (attr) {
    case MLXD_CU_POINTER_ATTRIBUTE_CONTEXT:
        *(mlxd_cu_ctx *)out = a ? a->ctx : NULL;
        return MLXD_CUDA_SUCCESS;
    case MLXD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)out = !a ? 0 : a->host ? MLXD_CU_MEMORYTYPE_HOST : MLXD_CU_MEMORYTYPE_DEVICE;
        return MLXD_CUDA_SUCCESS;
    case 3:   /* CU_POINTER_ATTRIBUTE_DEVICE_POINTER */
        *(mlxd_cu_ptr *)out = a ? p : 0;
        return MLXD_CUDA_SUCCESS;
    case 4:   /* CU_POINTER_ATTRIBUTE_HOST_POINTER: device memory has none */
        *(void **)out = a && a->host ? (void *)(uintptr_t)p : NULL;
        return MLXD_CUDA_SUCCESS;
    case 9:   /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
        *(int *)out = a ? 0 : -2;
        return MLXD_CUDA_SUCCESS;
    case MLXD_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(mlxd_cu_ptr *)out = a ? a->ptr : 0;
        return MLXD_CUDA_SUCCESS;
    case MLXD_CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)out = a ? a->size : 0;
        return MLXD_CUDA_SUCCESS;
    default:
        return MLXD_CUDA_ERROR_INVALID_VALUE;
    }
}

mlxd_cu_result cuPointerGetAttributes(unsigned n, int *attrs, void **data, mlxd_cu_ptr p)
{
    ENTER("cuPointerGetAttributes");
    if (!n || !attrs || !data) return MLXD_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    const struct alloc *a = find(p, 0);
    mlxd_cu_result e = MLXD_CUDA_SUCCESS;
    for (unsigned i = 0; i < n && !e; i++)
        e = data[i] ? attribute(a, attrs[i], data[i], p) : MLXD_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return e;
}

mlxd_cu_result cuPointerGetAttribute(void *data, int attr, mlxd_cu_ptr p)
{
    ENTER("cuPointerGetAttribute");
    if (!data) return MLXD_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    const struct alloc *a = find(p, 0);
    mlxd_cu_result e = a ? attribute(a, attr, data, p) : MLXD_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return e;
}

#ifndef FAKECUDA_BEFORE_11_7
/* Moves segment bytes [off, off+len) of a into a memfd of their own (under lock): up to three
 * pieces replace the segment, each remapped over the real mapping after its bytes are copied. */
static int split_out(struct alloc *a, unsigned si, size_t off, size_t len)
{
    struct seg s = a->seg[si];
    size_t cut[3][2] = { { s.off, off - s.off }, { off, len }, { off + len, s.off + s.len - off - len } };
    unsigned n = (cut[0][1] != 0) + 1 + (cut[2][1] != 0);
    if (a->nseg - 1 + n > MAX_SEGS)
        return -1;
    struct seg out[3];
    n = 0;
    for (int i = 0; i < 3; i++) {
        if (!cut[i][1])
            continue;
        int fd = memfd_create("fakecuda-device-memory", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)cut[i][1]) ||
            pwrite(fd, a->real + cut[i][0], cut[i][1], 0) != (ssize_t)cut[i][1] ||
            mmap(a->real + cut[i][0], cut[i][1], PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                 0) == MAP_FAILED) {
            /* half-moved bytes cannot be put back: a test machine out of memory */
            fprintf(stderr, "fakecuda: cannot split device memory: %s\n", strerror(errno));
            abort();
        }
        out[n++] = (struct seg){ .off = cut[i][0], .len = cut[i][1], .fd = fd };
    }
    close(s.fd);
    memmove(&a->seg[si + n], &a->seg[si + 1], (a->nseg - si - 1) * sizeof a->seg[0]);
    memcpy(&a->seg[si], out, n * sizeof out[0]);
    a->nseg += n - 1;
    return 0;
}

mlxd_cu_result cuMemGetHandleForAddressRange(void *handle, mlxd_cu_ptr p, size_t size, int type,
                                             unsigned long long flags)
{
    ENTER("cuMemGetHandleForAddressRange");
    long pg = sysconf(_SC_PAGESIZE);
    if (!handle || type != MLXD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags > 1 || !size ||
        (p | size) & (uint64_t)(pg - 1))
        return MLXD_CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct alloc *a = find(p, 0);
    size_t off = a ? p - a->ptr : 0;
    mlxd_cu_result e = MLXD_CUDA_SUCCESS;
    /* the range must be one device allocation's (its last page may be partly past the size) */
    if (!a || a->host || size > ((a->size + (size_t)pg - 1) & ~(size_t)(pg - 1)) - off)
        e = MLXD_CUDA_ERROR_INVALID_VALUE;
    unsigned si = 0;
    while (!e && !(off >= a->seg[si].off && off - a->seg[si].off < a->seg[si].len))
        si++;
    if (!e && (a->seg[si].off != off || a->seg[si].len != size)) {
        if (a->seg[si].exported || off + size > a->seg[si].off + a->seg[si].len ||
            split_out(a, si, off, size)) {
            fprintf(stderr, "fakecuda: cuMemGetHandleForAddressRange(0x%llx, %zu): a range across "
                    "or inside an already exported range is not emulated\n", p, size);
            e = MLXD_CUDA_ERROR_NOT_SUPPORTED;
        } else if (a->seg[si].off != off) {
            si++;   /* the piece before the range came first */
        }
    }
    int fd = -1;
    if (!e) {
        fd = fcntl(a->seg[si].fd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            e = MLXD_CUDA_ERROR_OUT_OF_MEMORY;
        else
            a->seg[si].exported = true;
    }
    pthread_mutex_unlock(&lock);
    if (!e)
        *(int *)handle = fd;
    return e;
}

#endif

/* The device bytes [p, p+n) as a host pointer into the real mapping, checked (under lock). */
static mlxd_cu_result device_bytes(uint64_t p, size_t n, uint8_t **out)
{
    struct mlxd_cu_ctx_st *current = get_current();
    if (!current) return MLXD_CUDA_ERROR_INVALID_CONTEXT;
    const struct alloc *a = find(p, n);
    if (!a || a->host) return MLXD_CUDA_ERROR_INVALID_VALUE;
    if (a->ctx != current || !current->alive) return MLXD_CUDA_ERROR_INVALID_CONTEXT;
    *out = a->real + (p - a->ptr);
    return MLXD_CUDA_SUCCESS;
}

/* A copy between host memory and device bytes [dev, dev+n), either way. */
static mlxd_cu_result copy(void *host, mlxd_cu_ptr dev, size_t n, bool to_host)
{
    if (!host && n) return MLXD_CUDA_ERROR_INVALID_VALUE;
    uint8_t *d = NULL;
    pthread_mutex_lock(&lock);
    mlxd_cu_result e = device_bytes(dev, n, &d);
    pthread_mutex_unlock(&lock);
    if (!e && n)   /* a free racing with a copy is the caller's bug, as on a GPU */
        memcpy(to_host ? host : d, to_host ? d : host, n);
    return e;
}

mlxd_cu_result cuMemcpyDtoH_v2(void *dst, mlxd_cu_ptr src, size_t n)
{
    ENTER("cuMemcpyDtoH_v2");
    return copy(dst, src, n, true);
}

mlxd_cu_result cuMemcpyHtoD_v2(mlxd_cu_ptr dst, const void *src, size_t n)
{
    ENTER("cuMemcpyHtoD_v2");
    return copy((void *)src, dst, n, false);
}
