/* CUDA device memory as the frame buffer, on every run: the test runner finds the emulated NVIDIA
 * driver (tests/fakecuda/libcuda.c, build/tests/fakecuda/libcuda.so.1) through its RPATH, so
 * the library's own dlopen("libcuda.so.1") gets it.  Its device memory is a PROT_NONE range in
 * this process (a direct dereference faults) whose bytes live in a memfd; its dma-buf is that
 * memfd, which the emulated kernel registers (REG_DMABUF_MR) and the emulated NIC writes into.
 *
 * Tcases "cuda_driver" (the driver alone) and "cuda" (frames into device memory) need only the
 * driver API: with MLXD_TEST_REAL_CUDA=1 and a runner built with FAKE_CUDA=0 they run against
 * the real driver (scripts/gpu-check.sh).  Tcase "cuda_faults" needs the fake's fault injection
 * (fakecuda_fail) and runs only with it. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "cuda_api.h"
#include "mlxd_capture.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_receiver.h"
#include "util.h"

/* ---- the driver, as a program sees it ---------------------------------------------------- */
static struct {
    void *h;
    mlxd_cuInit_fn Init;
    mlxd_cuDeviceGet_fn DeviceGet;
    mlxd_cuDevicePrimaryCtxRetain_fn Retain;
    mlxd_cuCtxSetCurrent_fn SetCurrent;
    mlxd_cuCtxGetCurrent_fn GetCurrent;
    mlxd_cuMemAlloc_fn MemAlloc;
    mlxd_cuMemFree_fn MemFree;
    mlxd_cuMemcpyDtoH_fn DtoH;
    mlxd_cu_result (*HtoD)(mlxd_cu_ptr, const void *, size_t);
    mlxd_cu_result (*CtxCreate)(mlxd_cu_ctx *, unsigned, mlxd_cu_dev);
    mlxd_cu_result (*CtxDestroy)(mlxd_cu_ctx);
    mlxd_cu_result (*AllocHost)(void **, size_t);
    mlxd_cu_result (*FreeHost)(void *);
    int (*inject)(const char *call, int result, int count);   /* the fake's; NULL on a real driver */
    mlxd_cu_dev dev;
    mlxd_cu_ctx ctx;
} cu;

static void cuda_up(void)
{
    cu.h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(cu.h, "libcuda.so.1: %s (the emulated driver is build/tests/fakecuda/libcuda.so.1, "
                  "found by the runner's RPATH)", dlerror());
#define SYM(f, name) ck_assert_msg((*(void **)&cu.f = dlsym(cu.h, name)) != NULL, "no %s", name)
    SYM(Init, "cuInit");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(Retain, "cuDevicePrimaryCtxRetain");
    SYM(SetCurrent, "cuCtxSetCurrent");
    SYM(GetCurrent, "cuCtxGetCurrent");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(DtoH, "cuMemcpyDtoH_v2");
    SYM(HtoD, "cuMemcpyHtoD_v2");
    SYM(CtxCreate, "cuCtxCreate_v2");
    SYM(CtxDestroy, "cuCtxDestroy_v2");
    SYM(AllocHost, "cuMemAllocHost_v2");
    SYM(FreeHost, "cuMemFreeHost");
#undef SYM
    *(void **)&cu.inject = dlsym(cu.h, "fakecuda_fail");
    const char *real = getenv("MLXD_TEST_REAL_CUDA");
    if (!(real && !strcmp(real, "1")))
        ck_assert_msg(cu.inject, "libcuda.so.1 is not the emulated driver (set MLXD_TEST_REAL_CUDA=1 "
                      "to run against a real one)");
    ck_assert_int_eq(cu.Init(0), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(cu.DeviceGet(&cu.dev, 0), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(cu.Retain(&cu.ctx, cu.dev), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(cu.SetCurrent(cu.ctx), MLXD_CUDA_SUCCESS);
}

static void inject(const char *call, int result, int count)
{
    ck_assert_int_eq(cu.inject(call, result, count), 0);
}

static mlxd_cu_ptr dev_alloc(size_t n)
{
    mlxd_cu_ptr d = 0;
    ck_assert_int_eq(cu.MemAlloc(&d, n), MLXD_CUDA_SUCCESS);
    return d;
}

/* ---- a receiver on device memory, fed by the generator or a capture ---------------------- */
struct rig {
    struct mlxd_receiver *r;
    mlxd_cu_ptr d;
    size_t frame, page, size;
    unsigned pages;
    pthread_t mon;
    bool mon_running;
    int mon_rc;
    char mon_err[512];
    struct mlxd_replay_map map;
    char dst[32];
};

static void *mon_main(void *arg)
{
    struct rig *g = arg;
    g->mon_rc = mlxd_receiver_blocking_monitor(g->r);
    if (g->mon_rc < 0)
        snprintf(g->mon_err, sizeof g->mon_err, "%s", mlxd_errmsg());
    return NULL;
}

static struct mlxd_receiver_opts rig_opts(struct rig *g, unsigned memory)
{
    return (struct mlxd_receiver_opts){ .sz = sizeof(struct mlxd_receiver_opts), .device = "mlx5_0",
        .buffer = g->d, .buffer_size = g->size, .frame_size = g->frame, .page_size = g->page,
        .pages = g->pages, .metadata_offset = mlxd_hsb_metadata_offset(g->frame),
        .peer_ip = "127.0.0.1", .queue_size = g->pages, .mode = MLXD_RECEIVER_EVENT, .memory = memory };
}

/* Sets up the geometry and allocates device memory (no start). */
static void rig_alloc(struct rig *g, size_t frame, unsigned pages)
{
    memset(g, 0, sizeof *g);
    mlxd_test_private_devices();
    cuda_up();
    g->frame = frame;
    g->page = mlxd_hsb_min_page_size(frame);
    g->pages = pages;
    g->size = pages * g->page;
    g->d = dev_alloc(g->size);
    g->r = mlxd_receiver_new();
}

/* Replaces the rig's allocation with one of `size` bytes; returns it. */
static mlxd_cu_ptr rig_realloc(struct rig *g, size_t size)
{
    ck_assert_int_eq(cu.MemFree(g->d), MLXD_CUDA_SUCCESS);
    return g->d = dev_alloc(size);
}

static void rig_run(struct rig *g, const struct mlxd_receiver_opts *o)
{
    int rc = mlxd_receiver_start(g->r, o);
    ck_assert_msg(rc == 0, "start on device memory: %s", mlxd_errmsg());
    g->map = (struct mlxd_replay_map){ .qpn = mlxd_receiver_qp_number(g->r), .rkey = mlxd_receiver_rkey(g->r),
        .base_va = mlxd_receiver_external_frame_memory(g->r), .page_size = g->page, .pages = g->pages };
    uint32_t ip = mlxd_receiver_local_ipv4(g->r);
    snprintf(g->dst, sizeof g->dst, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    ck_assert_int_eq(pthread_create(&g->mon, NULL, mon_main, g), 0);
    g->mon_running = true;
    /* the consumer's first get: from now on frames queue instead of replacing each other */
    struct mlxd_receiver_frame f;
    ck_assert(!mlxd_receiver_get_next_frame(g->r, 0, &f));
}

/* rig_alloc + start on `memory` + the monitor thread. */
static void rig_start(struct rig *g, size_t frame, unsigned pages, unsigned memory)
{
    rig_alloc(g, frame, pages);
    struct mlxd_receiver_opts o = rig_opts(g, memory);
    rig_run(g, &o);
}

/* Waits for the monitor to return (it stopped by itself). */
static void rig_join(struct rig *g)
{
    pthread_join(g->mon, NULL);
    g->mon_running = false;
}

static void rig_stop(struct rig *g, int want_mon_rc)
{
    ck_assert_int_eq(mlxd_receiver_close(g->r), 0);
    if (g->mon_running)
        pthread_join(g->mon, NULL);
    ck_assert_msg(g->mon_rc == want_mon_rc, "monitor returned %d (%s)", g->mon_rc, g->mon_err);
    mlxd_receiver_destroy(g->r);
    ck_assert_int_eq(cu.MemFree(g->d), MLXD_CUDA_SUCCESS);
}

static void gen(struct rig *g, uint32_t frames, uint32_t first_page)
{
    struct mlxd_gen_opts o = { .sz = sizeof o, .frame_size = g->frame, .payload_size = 1024,
                               .frames = frames, .first_page = first_page };
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = g->dst, .src_ip = "127.0.0.1" };
    ck_assert_msg(mlxd_gen_run(&g->map, &o, &so, NULL) == 0, "gen: %s", mlxd_errmsg());
}

/* Reads frame f's bytes out of device memory and checks payload, metadata and frame_check. */
static void check_gen_frame(struct rig *g, const struct mlxd_receiver_frame *f, uint32_t k, uint32_t first_page)
{
    ck_assert_uint_eq(f->page, (first_page + k) % g->pages);
    ck_assert_uint_eq(f->flags, 0);
    ck_assert_uint_eq(f->metadata.bytes_written, g->frame);
    ck_assert_uint_eq(f->metadata.frame_number32, k);
    ck_assert_uint_eq(f->frame_number, k);
    ck_assert_uint_eq(f->frame_memory, g->d + (uint64_t)f->page * g->page);
    uint8_t *host = malloc(g->page);
    ck_assert_int_eq(cu.DtoH(host, (mlxd_cu_ptr)f->frame_memory, g->page), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(mlxd_hsb_payload_check(host, g->frame, k), -1);
    /* the metadata the receiver decoded is the block in device memory */
    const uint8_t *md = host + mlxd_hsb_metadata_offset(g->frame);
    uint32_t psn = (uint32_t)md[4] << 24 | (uint32_t)md[5] << 16 | (uint32_t)md[6] << 8 | md[7];
    ck_assert_uint_eq(f->metadata.psn, psn);
    free(host);
    /* the next page the device writes may hold a frame not yet sent: AT_RISK, never OVERWRITTEN */
    int v = mlxd_receiver_frame_check(g->r, f);
    ck_assert_msg(v == MLXD_FRAME_INTACT || v == MLXD_FRAME_AT_RISK, "frame_check %d: %s", v, mlxd_errmsg());
}

/* ---- tcase cuda_driver: the driver alone -------------------------------------------------------- */

/* cuMemAlloc memory: what cuPointerGetAttributes says of it (the values the library relies on),
 * and its dma-buf (cuMemGetHandleForAddressRange): a descriptor whose size covers the range
 * (llseek SEEK_END, as the kernel sizes a dma-buf).  The fake's is a memfd; a real driver's the
 * kernel's dma-buf file.  Misaligned ranges are CUDA_ERROR_INVALID_VALUE. */
START_TEST(driver_exports_dmabuf)
{
    cuda_up();
    size_t size = 3 << 20;
    mlxd_cu_ptr d = dev_alloc(size);
    mlxd_cuPointerGetAttributes_fn get = (mlxd_cuPointerGetAttributes_fn)dlsym(cu.h, "cuPointerGetAttributes");
    mlxd_cuMemGetHandleForAddressRange_fn exp =
        (mlxd_cuMemGetHandleForAddressRange_fn)dlsym(cu.h, "cuMemGetHandleForAddressRange");
    ck_assert(get && exp);
    struct mlxd_cu_pointer_info pi;
    ck_assert_int_eq(mlxd_cu_pointer_info(get, d + 12345, &pi), MLXD_CUDA_SUCCESS);
    ck_assert_uint_eq(pi.type, MLXD_CU_MEMORYTYPE_DEVICE);
    ck_assert_ptr_eq(pi.ctx, cu.ctx);
    ck_assert_uint_eq(pi.start, d);
    ck_assert_uint_eq(pi.size, size);
    /* host memory is no CUDA pointer: success, memory type 0 (the documented default) */
    static uint8_t host[64];
    ck_assert_int_eq(mlxd_cu_pointer_info(get, (uintptr_t)host, &pi), MLXD_CUDA_SUCCESS);
    ck_assert_uint_eq(pi.type, 0);
    ck_assert_ptr_null(pi.ctx);
    int fd = -1;
    ck_assert_int_eq(exp(&fd, d + 4096, 1 << 20, MLXD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0), MLXD_CUDA_SUCCESS);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(lseek(fd, 0, SEEK_END), 1 << 20);
    char path[64], link[256] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ck_assert_int_gt(readlink(path, link, sizeof link - 1), 0);
    ck_assert_msg(strstr(link, cu.inject ? "memfd:fakecuda-device-memory" : "dmabuf"), "fd is %s", link);
    close(fd);
    ck_assert_int_eq(exp(&fd, d + 100, 4096, MLXD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
                     MLXD_CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cu.MemFree(d), MLXD_CUDA_SUCCESS);
}
END_TEST

/* ---- tcase cuda: device memory end to end --------------------------------------------------- */

/* Generated frames land in device memory; the receiver reads each metadata block through
 * cuMemcpyDtoH; the payload read back verifies; frame_check reads the PSN through the driver. */
START_TEST(frames_into_gpu_memory)
{
    struct rig g;
    rig_start(&g, 8000, 4, MLXD_RECEIVER_MEM_AUTO);   /* AUTO asks the driver */
    /* the region is the dma-buf: the device's page 0 is the buffer's offset in it */
    ck_assert_uint_eq(mlxd_receiver_external_frame_memory(g.r), 0);
    struct mlxd_receiver_frame f;
    gen(&g, 3, 1);
    for (uint32_t k = 0; k < 3; k++) {
        ck_assert_msg(mlxd_receiver_get_next_frame(g.r, 5000, &f), "frame %u did not come", k);
        check_gen_frame(&g, &f, k, 1);
    }
    struct mlxd_receiver_stats st;
    mlxd_receiver_stats(g.r, &st);
    ck_assert_uint_eq(st.frames, 3);
    ck_assert_uint_eq(st.overwritten, 0);
    ck_assert_uint_eq(st.errors, 0);
    rig_stop(&g, 0);
}
END_TEST

/* A buffer inside an allocation, not on a page boundary: the dma-buf covers its pages and the
 * device addresses page 0 at the buffer's offset in it. */
START_TEST(unaligned_buffer_in_allocation)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    mlxd_cu_ptr whole = rig_realloc(&g, g.size + 8192);
    g.d = whole + 4096 + 384;
    struct mlxd_receiver_opts o = rig_opts(&g, MLXD_RECEIVER_MEM_CUDA);
    rig_run(&g, &o);
    ck_assert_uint_eq(mlxd_receiver_external_frame_memory(g.r), 384);
    gen(&g, 2, 1);
    struct mlxd_receiver_frame f;
    for (uint32_t k = 0; k < 2; k++) {
        ck_assert(mlxd_receiver_get_next_frame(g.r, 5000, &f));
        check_gen_frame(&g, &f, k, 1);
    }
    g.d = whole;
    rig_stop(&g, 0);
}
END_TEST

static mlxd_cu_ctx seen_ctx;
static _Atomic int seen_rc = -1;
static void on_ready(void *arg)
{
    (void)arg;
    mlxd_cu_ctx c = NULL;
    int rc = cu.GetCurrent(&c);   /* on the monitor thread */
    seen_ctx = c;
    atomic_store(&seen_rc, rc);   /* after seen_ctx */
}

/* The monitor thread (made by the test, with no CUDA context of its own) runs with the context
 * current at start; with none current at start, with the buffer's. */
static void context_on_monitor(bool none_at_start)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    if (none_at_start)
        ck_assert_int_eq(cu.SetCurrent(NULL), MLXD_CUDA_SUCCESS);
    mlxd_receiver_set_frame_ready(g.r, on_ready, NULL);
    struct mlxd_receiver_opts o = rig_opts(&g, MLXD_RECEIVER_MEM_CUDA);
    rig_run(&g, &o);
    gen(&g, 1, 1);
    struct mlxd_receiver_frame f;
    ck_assert(mlxd_receiver_get_next_frame(g.r, 5000, &f));
    /* the callback runs after the frame is queued: wait for it */
    for (int i = 0; i < 5000 && atomic_load(&seen_rc) == -1; i++)
        usleep(1000);
    ck_assert_int_eq(atomic_load(&seen_rc), MLXD_CUDA_SUCCESS);
    ck_assert_ptr_eq(seen_ctx, cu.ctx);
    ck_assert_uint_eq(f.metadata.frame_number32, 0);
    ck_assert_uint_eq(f.metadata.bytes_written, 4096);
    ck_assert_int_eq(cu.SetCurrent(cu.ctx), MLXD_CUDA_SUCCESS);
    rig_stop(&g, 0);
}

START_TEST(start_context_current_on_monitor) { context_on_monitor(false); }
END_TEST
START_TEST(buffer_context_when_none_current) { context_on_monitor(true); }
END_TEST

static const struct mlxd_capture *replay_cap;
static struct rig *replay_rig;
static size_t replay_checked;

/* Lock-step (the replay's sent_frame): frame k came; its metadata is as recorded, its page read
 * back from device memory holds the capture's bytes, frame_check (through the driver) INTACT. */
static bool check_replayed(void *ctx, uint64_t k)
{
    (void)ctx;
    struct rig *g = replay_rig;
    const struct mlxd_capture *cap = replay_cap;
    struct mlxd_receiver_frame f;
    ck_assert_msg(mlxd_receiver_get_next_frame(g->r, 5000, &f), "frame %llu did not come",
                  (unsigned long long)k);
    const struct mlxd_capture_frame *cf = &cap->frames[k];
    ck_assert_uint_eq(f.page, cf->page);
    ck_assert_uint_eq(f.imm_data, cf->imm);
    ck_assert_uint_eq(f.flags, 0);
    ck_assert_uint_eq(f.metadata.psn, cf->md.psn);
    ck_assert_uint_eq(f.metadata.crc, cf->md.crc);
    ck_assert_uint_eq(f.metadata.timestamp_s, cf->md.timestamp_s);
    ck_assert_uint_eq(f.metadata.timestamp_ns, cf->md.timestamp_ns);
    ck_assert_uint_eq(f.metadata.bytes_written, cf->md.bytes_written);
    ck_assert_uint_eq(f.metadata.frame_number, cf->md.frame_number);
    ck_assert_uint_eq(f.frame_number, k);
    uint8_t *host = malloc(g->page);
    ck_assert_int_eq(cu.DtoH(host, (mlxd_cu_ptr)f.frame_memory, g->page), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(mlxd_hsb_payload_check(host, cap->geo.frame_size, (uint32_t)k), -1);
    const struct mlxd_roce_pkt *last = &cap->pkts[cf->first + cf->count - 1].hdr;
    ck_assert(memcmp(host + cap->geo.metadata_offset, last->payload + last->payload_len - 128, 128) == 0);
    free(host);
    ck_assert_int_eq(mlxd_receiver_frame_check(g->r, &f), MLXD_FRAME_INTACT);
    replay_checked++;
    return true;
}

/* A recorded capture replayed into device memory: every frame's metadata as recorded, its bytes
 * (read back with cuMemcpyDtoH) as the capture's packets put them. */
START_TEST(capture_replay_into_gpu_memory)
{
    mlxd_test_private_devices();
    cuda_up();
    struct mlxd_capture *cap = NULL;
    ck_assert_int_eq(mlxd_capture_load(mlxd_test_path("fixtures/roce-pcaps/hsb_small_4k_3pages.pcap"), &cap), 0);
    const struct mlxd_capture_geometry *geo = &cap->geo;
    struct rig g = { .frame = geo->frame_size, .page = geo->page_size, .pages = geo->pages,
                     .size = geo->pages * geo->page_size };
    g.d = dev_alloc(g.size);
    g.r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = rig_opts(&g, MLXD_RECEIVER_MEM_CUDA);
    o.metadata_offset = geo->metadata_offset;
    rig_run(&g, &o);
    replay_cap = cap;
    replay_rig = &g;
    replay_checked = 0;
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = g.dst, .src_ip = "127.0.0.1",
                                 .sent_frame = check_replayed };
    ck_assert_msg(mlxd_capture_replay(cap, &g.map, &so, NULL) == 0, "%s", mlxd_errmsg());
    ck_assert_uint_eq(replay_checked, cap->nframes);
    ck_assert_uint_ge(cap->nframes, 2);
    rig_stop(&g, 0);
    mlxd_capture_free(cap);
}
END_TEST

/* ---- tcase cuda_faults: what the emulated driver injects, and misuse ------------------------ */

static void start_fails(struct rig *g, unsigned memory, int want, const char *const *needles)
{
    struct mlxd_receiver_opts o = rig_opts(g, memory);
    ck_assert_int_eq(mlxd_receiver_start(g->r, &o), want);
    for (const char *const *n = needles; *n; n++)
        ck_assert_msg(strstr(mlxd_errmsg(), *n), "message '%s' lacks '%s'", mlxd_errmsg(), *n);
    ck_assert(!mlxd_receiver_started(g->r));
}

/* Drivers and kernels that cannot export GPU memory as a dma-buf (NCCL #778, perftest #346):
 * -ENOTSUP naming the call, its CUresult, the kernel and driver it needs (with the ones here)
 * and that nvidia-peermem is not used. */
START_TEST(dmabuf_export_unsupported)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    inject("cuMemGetHandleForAddressRange", MLXD_CUDA_ERROR_NOT_SUPPORTED, -1);
    struct utsname u;
    ck_assert_int_eq(uname(&u), 0);
    const char *n[] = { "mlxd_receiver_start: cuMemGetHandleForAddressRange(", "DMA_BUF_FD",
                        "CUDA_ERROR_NOT_SUPPORTED", "Linux 5.12 or newer", u.release, "R515",
                        "open GPU kernel modules", "this driver: CUDA 12.4", "nvidia-peermem",
                        "MLXD_RECEIVER_MEM_HOST", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_AUTO, -ENOTSUP, n);
    inject("cuMemGetHandleForAddressRange", MLXD_CUDA_ERROR_INVALID_VALUE, -1);
    const char *m[] = { "cuMemGetHandleForAddressRange(", "CUDA_ERROR_INVALID_VALUE", "cuMemAlloc", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_CUDA, -EIO, m);
    /* a CUresult the driver has no name for, and no driver version: both still said */
    inject("cuMemGetHandleForAddressRange", 12345, -1);
    const char *unnamed[] = { "cuMemGetHandleForAddressRange(", "CUresult 12345", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_CUDA, -EIO, unnamed);
    inject("cuMemGetHandleForAddressRange", MLXD_CUDA_ERROR_NOT_SUPPORTED, -1);
    inject("cuDriverGetVersion", MLXD_CUDA_ERROR_INVALID_VALUE, 1);
    const char *v[] = { "CUDA_ERROR_NOT_SUPPORTED", "this driver: unknown", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_CUDA, -ENOTSUP, v);
    /* the kernel (not the driver) refuses dma-buf regions: Linux before 5.12 */
    inject(NULL, 0, 0);
    ck_assert_int_eq(mlxd_emu_fail_method("REG_DMABUF_MR", 1, EOPNOTSUPP), 0);
    const char *k[] = { "the kernel cannot register the dma-buf cuMemGetHandleForAddressRange exported",
                        "REG_DMABUF_MR", "Linux 5.12 or newer", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_CUDA, -EOPNOTSUPP, k);
    /* nothing was left behind: with the fault gone the same receiver starts */
    inject(NULL, 0, 0);
    struct mlxd_receiver_opts o = rig_opts(&g, MLXD_RECEIVER_MEM_CUDA);
    ck_assert_msg(mlxd_receiver_start(g.r, &o) == 0, "%s", mlxd_errmsg());
    rig_stop(&g, 0);
}
END_TEST

/* The pointer query or the current-context query fails: what the library does. */
START_TEST(pointer_query_fails)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    /* CUDA not initialized: AUTO is host memory (none can be device memory); CUDA says so */
    inject("cuPointerGetAttributes", MLXD_CUDA_ERROR_NOT_INITIALIZED, -1);
    const char *n[] = { "cuPointerGetAttributes(", "CUDA_ERROR_NOT_INITIALIZED", "call cuInit", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_CUDA, -ENOTSUP, n);
    mlxd_cu_ptr dev = g.d;
    void *host = NULL;
    ck_assert_int_eq(posix_memalign(&host, 4096, g.size), 0);
    g.d = (uintptr_t)host;
    struct mlxd_receiver_opts o = rig_opts(&g, MLXD_RECEIVER_MEM_AUTO);
    ck_assert_msg(mlxd_receiver_start(g.r, &o) == 0, "%s", mlxd_errmsg());
    ck_assert_uint_eq(mlxd_receiver_external_frame_memory(g.r), (uintptr_t)host);   /* host: IOVA = VA */
    ck_assert_int_eq(mlxd_receiver_close(g.r), 0);
    g.d = dev;
    inject("cuPointerGetAttributes", MLXD_CUDA_ERROR_INVALID_VALUE, -1);
    const char *m[] = { "cuPointerGetAttributes(", "CUDA_ERROR_INVALID_VALUE", "MLXD_RECEIVER_MEM_HOST", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_AUTO, -EIO, m);
    inject(NULL, 0, 0);
    inject("cuCtxGetCurrent", MLXD_CUDA_ERROR_INVALID_CONTEXT, -1);
    const char *c[] = { "mlxd_receiver_start: cuCtxGetCurrent: CUDA_ERROR_INVALID_CONTEXT", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_AUTO, -EIO, c);
    inject(NULL, 0, 0);
    free(host);
    rig_stop(&g, 0);
}
END_TEST

/* The buffer's context is not the current one. */
START_TEST(context_mismatch)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    mlxd_cu_ctx other;
    ck_assert_int_eq(cu.CtxCreate(&other, 0, cu.dev), MLXD_CUDA_SUCCESS);   /* now current */
    const char *n[] = { "CUDA context mismatch", "cuPointerGetAttributes", "CU_POINTER_ATTRIBUTE_CONTEXT",
                        "cuCtxGetCurrent", "CUDA_ERROR_INVALID_CONTEXT", "cuCtxSetCurrent", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_AUTO, -EINVAL, n);
    ck_assert_int_eq(cu.CtxDestroy(other), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(cu.SetCurrent(cu.ctx), MLXD_CUDA_SUCCESS);
    rig_stop(&g, 0);
}
END_TEST

/* Memory CUDA asked for a buffer that is host memory after all (pinned by cuMemAllocHost, or
 * plain): -EINVAL saying so; AUTO takes cuMemAllocHost memory as host memory. */
START_TEST(host_memory_after_all)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    mlxd_cu_ptr dev = g.d;
    void *pinned = NULL;
    ck_assert_int_eq(cu.AllocHost(&pinned, g.size), MLXD_CUDA_SUCCESS);
    g.d = (uintptr_t)pinned;
    const char *n[] = { "memory CUDA but buffer", "host memory (CU_MEMORYTYPE_HOST)",
                        "cuPointerGetAttributes", "MLXD_RECEIVER_MEM_HOST", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_CUDA, -EINVAL, n);
    void *plain = NULL;
    ck_assert_int_eq(posix_memalign(&plain, 4096, g.size), 0);
    g.d = (uintptr_t)plain;
    const char *m[] = { "not CUDA device memory", "MLXD_RECEIVER_MEM_HOST", NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_CUDA, -EINVAL, m);
    free(plain);
    /* AUTO: pinned host memory is host memory (registered as it is, read directly) */
    g.d = (uintptr_t)pinned;
    struct mlxd_receiver_opts o = rig_opts(&g, MLXD_RECEIVER_MEM_AUTO);
    rig_run(&g, &o);
    ck_assert_uint_eq(mlxd_receiver_external_frame_memory(g.r), (uintptr_t)pinned);
    gen(&g, 1, 1);
    struct mlxd_receiver_frame f;
    ck_assert(mlxd_receiver_get_next_frame(g.r, 5000, &f));
    ck_assert_int_eq(mlxd_hsb_payload_check((const uint8_t *)(uintptr_t)f.frame_memory, 4096, 0), -1);
    ck_assert_int_eq(mlxd_receiver_close(g.r), 0);
    rig_join(&g);
    ck_assert_int_eq(cu.FreeHost(pinned), MLXD_CUDA_SUCCESS);
    g.d = dev;
    rig_stop(&g, 0);
}
END_TEST

/* A buffer_size past the end of the allocation: only part of the range could be registered. */
START_TEST(partially_registered_range)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    rig_realloc(&g, g.size - 100);
    char most[64], need[64];
    snprintf(most, sizeof most, "buffer_size of at most %zu", g.size - 100);
    snprintf(need, sizeof need, "allocate %zu bytes", g.size);
    const char *n[] = { "runs past the end of its CUDA allocation", "cuPointerGetAttributes",
                        "RANGE_SIZE", most, need, NULL };
    start_fails(&g, MLXD_RECEIVER_MEM_AUTO, -EINVAL, n);
    rig_stop(&g, 0);
}
END_TEST

/* The monitor cannot make the start context current: it returns -EIO naming cuCtxSetCurrent. */
START_TEST(monitor_context_fails)
{
    struct rig g;
    rig_alloc(&g, 4096, 2);
    inject("cuCtxSetCurrent", MLXD_CUDA_ERROR_INVALID_CONTEXT, 1);
    struct mlxd_receiver_opts o = rig_opts(&g, MLXD_RECEIVER_MEM_CUDA);
    rig_run(&g, &o);
    rig_join(&g);
    ck_assert_int_eq(g.mon_rc, -EIO);
    ck_assert_msg(strstr(g.mon_err, "cuCtxSetCurrent(") && strstr(g.mon_err, "CUDA_ERROR_INVALID_CONTEXT") &&
                  strstr(g.mon_err, "stay alive until mlxd_receiver_close"), "%s", g.mon_err);
    rig_stop(&g, -EIO);
}
END_TEST

/* frame_check's copy of the PSN fails: -EIO naming cuMemcpyDtoH, its CUresult, what to do. */
START_TEST(frame_check_copy_fails)
{
    struct rig g;
    rig_start(&g, 4096, 2, MLXD_RECEIVER_MEM_CUDA);
    gen(&g, 1, 1);
    struct mlxd_receiver_frame f;
    ck_assert(mlxd_receiver_get_next_frame(g.r, 5000, &f));
    inject("cuMemcpyDtoH_v2", MLXD_CUDA_ERROR_ILLEGAL_ADDRESS, 1);
    ck_assert_int_eq(mlxd_receiver_frame_check(g.r, &f), -EIO);
    ck_assert_msg(strstr(mlxd_errmsg(), "mlxd_receiver_frame_check: cuMemcpyDtoH(metadata PSN at 0x") &&
                  strstr(mlxd_errmsg(), "CUDA_ERROR_ILLEGAL_ADDRESS") &&
                  strstr(mlxd_errmsg(), "keep the buffer allocated"), "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_receiver_frame_check(g.r, &f), MLXD_FRAME_INTACT);
    rig_stop(&g, 0);
}
END_TEST

/* A metadata copy fails on the monitor: it stops with -EIO naming cuMemcpyDtoH and its CUresult;
 * the frame is not delivered. */
START_TEST(metadata_copy_fails)
{
    struct rig g;
    rig_start(&g, 4096, 2, MLXD_RECEIVER_MEM_CUDA);
    inject("cuMemcpyDtoH_v2", MLXD_CUDA_ERROR_INVALID_CONTEXT, -1);
    gen(&g, 1, 1);
    struct mlxd_receiver_frame f;
    rig_join(&g);
    ck_assert_int_eq(g.mon_rc, -EIO);
    ck_assert_msg(strstr(g.mon_err, "mlxd_receiver_blocking_monitor: cuMemcpyDtoH(metadata at 0x") &&
                  strstr(g.mon_err, "CUDA_ERROR_INVALID_CONTEXT") &&
                  strstr(g.mon_err, "context current at mlxd_receiver_start alive"), "%s", g.mon_err);
    ck_assert(!mlxd_receiver_get_next_frame(g.r, 0, &f));
    inject(NULL, 0, 0);
    rig_stop(&g, -EIO);
}
END_TEST

/* Where libcuda.so.1 cannot be loaded (tests/progs/no_libcuda: no RPATH to the emulated
 * driver): CUDA memory is -ENOTSUP naming libcuda.so.1; AUTO on memory the kernel cannot pin is
 * -EFAULT saying the library could not have recognized GPU memory, not a bare "Bad address". */
START_TEST(no_driver_explained)
{
    char cmd[2048], out[4096];
    unsigned a = 20 + (unsigned)getpid() % 200, b = 1 + ((unsigned)getpid() / 200) % 250;
    /* a sanitizer build's runtime must come first in the preload list (as mlxd-capture does) */
    const char *san = "";
    static const char *const inits[] = { "__asan_init", "__tsan_init" };
    for (unsigned i = 0; i < 2 && !*san; i++) {
        void *sym = dlsym(RTLD_DEFAULT, inits[i]);
        Dl_info di;
        if (sym && dladdr(sym, &di) && di.dli_fname && strstr(di.dli_fname, ".so"))
            san = di.dli_fname;
    }
    snprintf(cmd, sizeof cmd, "env ASAN_OPTIONS=verify_asan_link_order=0 LD_LIBRARY_PATH= "
             "MLXD_EMU_DEVICES=mlx5_0:127.%u.%u.1 LD_PRELOAD=%s%s%s/lib/libmlx5direct-emu.so "
             "%s/tests/progs/no_libcuda 2>&1", a, b, san, *san ? ":" : "", mlxd_test_build_dir(),
             mlxd_test_build_dir());
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
    char *nl = strchr(out, '\n');
    ck_assert_ptr_nonnull(nl);
    *nl = 0;
    const char *second = nl + 1;
    ck_assert_msg(!strncmp(out, "-14 mlxd_receiver_start: buffer 0x", 34) &&
                  strstr(out, "is not host memory the kernel can pin (") && strstr(out, "Bad address") &&
                  strstr(out, "if it is CUDA device memory: libcuda.so.1 (the NVIDIA driver) cannot be used") &&
                  strstr(out, "cannot recognize or register GPU memory"), "%s", out);
    ck_assert_msg(!strncmp(second, "-95 mlxd_receiver_start: memory CUDA asked but libcuda.so.1 (the NVIDIA "
                           "driver) cannot be used: ", 95) &&
                  strstr(second, "install the NVIDIA driver, or receive into host memory"), "%s", second);
}
END_TEST

/* The emulated device memory cannot be reached by a plain dereference (so a library bug that
 * does so fails the suite): a child that reads it does not exit normally. */
START_TEST(device_memory_faults_on_touch)
{
    cuda_up();
    mlxd_cu_ptr d = dev_alloc(65536);
    uint8_t want[16] = "device memory";
    ck_assert_int_eq(cu.HtoD(d + 4096, want, sizeof want), MLXD_CUDA_SUCCESS);
    uint8_t got[16] = { 0 };
    ck_assert_int_eq(cu.DtoH(got, d + 4096, sizeof got), MLXD_CUDA_SUCCESS);
    ck_assert(!memcmp(got, want, sizeof want));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {   /* (under ASan the child's fault is reported as a SEGV: that is the point) */
        volatile uint8_t *p = (volatile uint8_t *)(uintptr_t)(d + 4096);
        _exit(p[0] == 'd' ? 0 : 3);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "a device pointer was readable");
    /* a copy outside any allocation, or without a context, is refused as by a real driver */
    ck_assert_int_eq(cu.DtoH(got, 4096, 4), MLXD_CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cu.SetCurrent(NULL), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(cu.DtoH(got, d, 4), MLXD_CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cu.SetCurrent(cu.ctx), MLXD_CUDA_SUCCESS);
    ck_assert_int_eq(cu.MemFree(d), MLXD_CUDA_SUCCESS);
}
END_TEST

Suite *receiver_cuda_suite(void)
{
    Suite *s = suite_create("receiver_cuda");
    TCase *td = tcase_create("cuda_driver");
    tcase_set_timeout(td, 60);
    tcase_add_test(td, driver_exports_dmabuf);
    suite_add_tcase(s, td);
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, frames_into_gpu_memory);
    tcase_add_test(tc, unaligned_buffer_in_allocation);
    tcase_add_test(tc, start_context_current_on_monitor);
    tcase_add_test(tc, buffer_context_when_none_current);
    tcase_add_test(tc, capture_replay_into_gpu_memory);
    suite_add_tcase(s, tc);
    const char *real = getenv("MLXD_TEST_REAL_CUDA");
    if (real && !strcmp(real, "1"))
        return s;   /* the faults need the emulated driver */
    TCase *tf = tcase_create("cuda_faults");
    tcase_set_timeout(tf, 60);
    tcase_add_test(tf, dmabuf_export_unsupported);
    tcase_add_test(tf, context_mismatch);
    tcase_add_test(tf, pointer_query_fails);
    tcase_add_test(tf, host_memory_after_all);
    tcase_add_test(tf, partially_registered_range);
    tcase_add_test(tf, monitor_context_fails);
    tcase_add_test(tf, metadata_copy_fails);
    tcase_add_test(tf, frame_check_copy_fails);
    tcase_add_test(tf, device_memory_faults_on_touch);
    tcase_add_test(tf, no_driver_explained);
    suite_add_tcase(s, tf);
    return s;
}
