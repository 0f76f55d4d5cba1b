/* cuda_shim.c: see cuda_shim.h. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>

#include "cuda_shim.h"
#include "mlxd_error.h"
#include "mlxd_receiver.h"
#include "mlxd_uverbs.h"

static struct mlxd__cuda table;
static const struct mlxd__cuda *loaded;
static char why[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "%s", e ? e : "libcuda.so.1: cannot be loaded");
        return;
    }
#define GET(field, name)                                                                      \
    if (!(*(void **)&table.field = dlsym(h, name))) {                                         \
        snprintf(why, sizeof why, "libcuda.so.1 has no %s (a driver older than CUDA 4.0?)",   \
                 name);                                                                       \
        return;                                                                               \
    }
    GET(PointerGetAttributes, "cuPointerGetAttributes");
    GET(MemcpyDtoH, "cuMemcpyDtoH_v2");
    GET(CtxGetCurrent, "cuCtxGetCurrent");
    GET(CtxSetCurrent, "cuCtxSetCurrent");
    GET(GetErrorName, "cuGetErrorName");
    GET(DriverGetVersion, "cuDriverGetVersion");
    GET(Init, "cuInit");
    GET(DeviceGet, "cuDeviceGet");
    GET(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    GET(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    GET(MemAlloc, "cuMemAlloc_v2");
    GET(MemFree, "cuMemFree_v2");
#undef GET
    /* CUDA 11.7 (driver R515) and later */
    *(void **)&table.MemGetHandleForAddressRange = dlsym(h, "cuMemGetHandleForAddressRange");
    loaded = &table;   /* the handle stays open for the life of the process */
}

const struct mlxd__cuda *mlxd__cuda(void)
{
    pthread_once(&once, load);
    return loaded;
}

const char *mlxd__cuda_why(void)
{
    pthread_once(&once, load);
    return loaded ? "" : why;
}

const char *mlxd__cuda_name(mlxd_cu_result e)
{
    static __thread char num[32];
    const char *s = NULL;
    if (mlxd__cuda() && loaded->GetErrorName(e, &s) == MLXD_CUDA_SUCCESS && s)
        return s;
    snprintf(num, sizeof num, "CUresult %d", e);
    return num;
}

/* "CUDA 12.4" for the driver's cuDriverGetVersion (1000 * major + 10 * minor). */
static void driver_version(char *out, size_t n)
{
    int v = 0;
    if (loaded->DriverGetVersion(&v) == MLXD_CUDA_SUCCESS && v > 0)
        snprintf(out, n, "CUDA %d.%d", v / 1000, v % 1000 / 10);
    else
        snprintf(out, n, "unknown");
}

int mlxd__cuda_classify(uint64_t buffer, uint64_t size, unsigned memory, bool *device, void **ctx)
{
    *device = false;
    *ctx = NULL;
    if (memory == MLXD_RECEIVER_MEM_HOST)
        return 0;
    const struct mlxd__cuda *cu = mlxd__cuda();
    if (!cu) {
        if (memory != MLXD_RECEIVER_MEM_CUDA)
            return 0;   /* without a driver there is no device memory: AUTO is host memory */
        return mlxd_err(ENOTSUP, "mlxd_receiver_start: memory CUDA asked but libcuda.so.1 (the NVIDIA "
                        "driver) cannot be used: %s; install the NVIDIA driver, or receive into "
                        "host memory", why);
    }
    struct mlxd_cu_pointer_info pi;
    mlxd_cu_result e = mlxd_cu_pointer_info(cu->PointerGetAttributes, buffer, &pi);
    unsigned type = pi.type;
    mlxd_cu_ctx owner = pi.ctx;
    uint64_t start = pi.start, range = pi.size;
    if (e == MLXD_CUDA_ERROR_NOT_INITIALIZED && memory != MLXD_RECEIVER_MEM_CUDA)
        return 0;       /* CUDA not initialized in this process: no device memory exists */
    if (e != MLXD_CUDA_SUCCESS)
        return mlxd_err(e == MLXD_CUDA_ERROR_NOT_INITIALIZED ? ENOTSUP : EIO,
                        "mlxd_receiver_start: cuPointerGetAttributes(0x%llx): %s: cannot tell what "
                        "memory the buffer is%s", (unsigned long long)buffer, mlxd__cuda_name(e),
                        e == MLXD_CUDA_ERROR_NOT_INITIALIZED ? " (call cuInit and allocate the "
                        "buffer with cuMemAlloc first)" : "; pass .memory = MLXD_RECEIVER_MEM_HOST "
                        "for host memory");
    if (type != MLXD_CU_MEMORYTYPE_DEVICE) {
        if (memory != MLXD_RECEIVER_MEM_CUDA)
            return 0;
        return mlxd_err(EINVAL, "mlxd_receiver_start: memory CUDA but buffer 0x%llx is %s "
                        "(cuPointerGetAttributes: CU_POINTER_ATTRIBUTE_MEMORY_TYPE %u): pass .memory "
                        "= MLXD_RECEIVER_MEM_HOST or AUTO for host memory",
                        (unsigned long long)buffer, type == MLXD_CU_MEMORYTYPE_HOST ?
                        "host memory (CU_MEMORYTYPE_HOST)" : "not CUDA device memory", type);
    }
    if (buffer + size < buffer || buffer + size > start + range)
        return mlxd_err(EINVAL, "mlxd_receiver_start: buffer [0x%llx, +%llu) runs past the end of its "
                        "CUDA allocation [0x%llx, +%llu) (cuPointerGetAttributes: RANGE_START_ADDR, "
                        "RANGE_SIZE): only part of it could be registered; pass a buffer_size of at "
                        "most %llu or allocate %llu bytes", (unsigned long long)buffer,
                        (unsigned long long)size, (unsigned long long)start, (unsigned long long)range,
                        (unsigned long long)(start + range - buffer),
                        (unsigned long long)(buffer - start + size));
    mlxd_cu_ctx cur = NULL;
    e = cu->CtxGetCurrent(&cur);
    if (e != MLXD_CUDA_SUCCESS)
        return mlxd_err(EIO, "mlxd_receiver_start: cuCtxGetCurrent: %s", mlxd__cuda_name(e));
    if (cur && owner && cur != owner)
        return mlxd_err(EINVAL, "mlxd_receiver_start: CUDA context mismatch: buffer 0x%llx belongs to "
                        "context %p (cuPointerGetAttributes: CU_POINTER_ATTRIBUTE_CONTEXT) but context "
                        "%p is current (cuCtxGetCurrent): the monitor thread would read the buffer under "
                        "a context not its own (CUDA_ERROR_INVALID_CONTEXT, or a copy across GPUs); "
                        "make the buffer's context current (cuCtxSetCurrent) before mlxd_receiver_start", (unsigned long long)buffer,
                        (void *)owner, (void *)cur);
    *device = true;
    *ctx = cur ? cur : owner;
    return 0;
}

static int dmabuf_unsupported(mlxd_cu_result e, uint64_t start, uint64_t len)
{
    struct utsname u;
    char ver[32];
    driver_version(ver, sizeof ver);
    if (uname(&u) < 0)
        snprintf(u.release, sizeof u.release, "unknown");
    return mlxd_err(ENOTSUP, "mlxd_receiver_start: cuMemGetHandleForAddressRange(0x%llx, %llu, "
                    "DMA_BUF_FD): %s: GPU memory cannot be exported as a dma-buf here; that needs "
                    "Linux 5.12 or newer (running %s) and the NVIDIA open GPU kernel modules, driver "
                    "R515 or newer (CUDA 11.7; this driver: %s).  Upgrade, or receive into host "
                    "memory (MLXD_RECEIVER_MEM_HOST); nvidia-peermem is not used (dma-buf only)",
                    (unsigned long long)start, (unsigned long long)len, mlxd__cuda_name(e),
                    u.release, ver);
}

int mlxd__cuda_register(struct mlxd_nic *nic, uint64_t buffer, uint64_t size,
                        const struct mlxd_region_opts *ro, struct mlxd_region **mr)
{
    const struct mlxd__cuda *cu = mlxd__cuda();
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = buffer & ~(pg - 1);
    uint64_t off = buffer - start;
    uint64_t len = (off + size + pg - 1) & ~(pg - 1);
    if (!cu->MemGetHandleForAddressRange) {
        char ver[32];
        driver_version(ver, sizeof ver);
        return mlxd_err(ENOTSUP, "mlxd_receiver_start: libcuda.so.1 (%s) has no "
                        "cuMemGetHandleForAddressRange: exporting GPU memory as a dma-buf needs "
                        "driver R515 (CUDA 11.7) or newer with the NVIDIA open GPU kernel modules, "
                        "and Linux 5.12 or newer; upgrade, or receive into host memory", ver);
    }
    int fd = -1;
    mlxd_cu_result e = cu->MemGetHandleForAddressRange(&fd, start, len,
                                                       MLXD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (e == MLXD_CUDA_ERROR_NOT_SUPPORTED)
        return dmabuf_unsupported(e, start, len);
    if (e != MLXD_CUDA_SUCCESS)
        return mlxd_err(EIO, "mlxd_receiver_start: cuMemGetHandleForAddressRange(0x%llx, %llu, "
                        "DMA_BUF_FD): %s: the driver refused to export the buffer's pages; the "
                        "buffer must be one cuMemAlloc allocation (or fully mapped cuMemMap memory)",
                        (unsigned long long)start, (unsigned long long)len, mlxd__cuda_name(e));
    struct mlxd_region_opts o = *ro;
    o.iova = off;   /* page 0 at IOVA `off`: the offset within the dma-buf */
    int rc = mlxd_region_register_dmabuf(nic, fd, off, size, &o, mr);
    close(fd);      /* the kernel holds its own reference */
    if (rc == -EOPNOTSUPP || rc == -EPROTONOSUPPORT)
        return mlxd_err(-rc, "mlxd_receiver_start: the kernel cannot register the dma-buf "
                        "cuMemGetHandleForAddressRange exported (REG_DMABUF_MR: %s): RDMA regions "
                        "on dma-bufs need Linux 5.12 or newer", mlxd_errmsg());
    return rc;
}

int mlxd__cuda_set_current(void *ctx)
{
    mlxd_cu_result e = mlxd__cuda()->CtxSetCurrent((mlxd_cu_ctx)ctx);
    if (e != MLXD_CUDA_SUCCESS)
        return mlxd_err(EIO, "cuCtxSetCurrent(%p) on the monitor thread: %s: the CUDA context "
                        "current at mlxd_receiver_start must stay alive until mlxd_receiver_close",
                        ctx, mlxd__cuda_name(e));
    return 0;
}

int mlxd__cuda_read(void *dst, uint64_t src, size_t n, const char *who, const char *what)
{
    mlxd_cu_result e = mlxd__cuda()->MemcpyDtoH(dst, src, n);
    if (e == MLXD_CUDA_SUCCESS)
        return 0;
    return mlxd_err(EIO, "%s%scuMemcpyDtoH(%s at 0x%llx, %zu bytes): %s: %s", who ? who : "",
                    who ? ": " : "", what,
                    (unsigned long long)src, n, mlxd__cuda_name(e),
                    e == MLXD_CUDA_ERROR_INVALID_CONTEXT ? "the buffer's CUDA context is not current "
                    "on this thread or was destroyed: keep the context current at "
                    "mlxd_receiver_start alive until mlxd_receiver_close" :
                    "the device memory cannot be read: keep the buffer allocated until "
                    "mlxd_receiver_close");
}

int mlxd__cuda_explain_efault(uint64_t buffer, unsigned memory, const char *who)
{
    if (memory != MLXD_RECEIVER_MEM_AUTO || mlxd__cuda())
        return -EFAULT;
    char was[256];
    snprintf(was, sizeof was, "%s", mlxd_errmsg());
    return mlxd_err(EFAULT, "%s: buffer 0x%llx is not host memory the kernel can pin (%s); if it is "
                    "CUDA device memory: libcuda.so.1 (the NVIDIA driver) cannot be used by this "
                    "process (%s), so the library cannot recognize or register GPU memory",
                    who, (unsigned long long)buffer, was, why);
}
