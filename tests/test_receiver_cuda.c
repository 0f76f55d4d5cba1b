/* CUDA device memory as the frame buffer (builds with CUDA=1).  Without CUDA in the build, asking
 * for device memory is refused with -ENOTSUP.  With CUDA but without a GPU the GPU case reports
 * itself as skipped.  With a GPU: the buffer's dma-buf (cuMemGetHandleForAddressRange) is
 * registered, frames from the generator land in device memory and are read back. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlxd_error.h"
#include "mlxd_receiver.h"
#if MLXD_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include "mlxd_capture.h"
#endif

/* Device memory asked where it cannot be had (a build without CUDA, or no NVIDIA driver): -ENOTSUP
 * naming the reason, nothing started. */
START_TEST(cuda_memory_without_cuda_build)
{
#if MLXD_HAVE_CUDA
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        printf("receiver_cuda: cuda_memory_without_cuda_build: SKIPPED (the NVIDIA driver is here)\n");
        return;
    }
    const char *why = "libcuda";
#else
    const char *why = "CUDA=1";
#endif
    {
    static uint8_t buf[2 * 4224];
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .buffer = (uintptr_t)buf,
        .buffer_size = sizeof buf, .frame_size = 4096, .page_size = 4224, .pages = 2,
        .metadata_offset = 4096, .peer_ip = "127.0.0.1", .queue_size = 1,
        .memory = MLXD_RECEIVER_MEM_CUDA };
    ck_assert_int_eq(mlxd_receiver_start(r, &o), -ENOTSUP);
    ck_assert_msg(strstr(mlxd_errmsg(), why) != NULL, "message '%s' lacks '%s'", mlxd_errmsg(), why);
    ck_assert(!mlxd_receiver_started(r));
    mlxd_receiver_destroy(r);
    }
}
END_TEST

#if MLXD_HAVE_CUDA
static void *mon(void *arg) { mlxd_receiver_blocking_monitor(arg); return NULL; }
#endif

START_TEST(frames_into_gpu_memory)
{
#if !MLXD_HAVE_CUDA
    printf("receiver_cuda: frames_into_gpu_memory: SKIPPED (built without CUDA=1)\n");
#else
    /* libcuda.so.1 at run time, as the library does: a build with CUDA=1 runs without the driver */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("receiver_cuda: frames_into_gpu_memory: SKIPPED (no NVIDIA driver: %s)\n", dlerror());
        return;
    }
    CUresult (*Init)(unsigned) = (CUresult (*)(unsigned))dlsym(h, "cuInit");
    CUresult (*DeviceGetCount)(int *) = (CUresult (*)(int *))dlsym(h, "cuDeviceGetCount");
    CUresult (*DeviceGet)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
    CUresult (*Retain)(CUcontext *, CUdevice) = (CUresult (*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
    CUresult (*Release)(CUdevice) = (CUresult (*)(CUdevice))dlsym(h, "cuDevicePrimaryCtxRelease_v2");
    CUresult (*SetCurrent)(CUcontext) = (CUresult (*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
    CUresult (*MemAlloc)(CUdeviceptr *, size_t) = (CUresult (*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
    CUresult (*MemFree)(CUdeviceptr) = (CUresult (*)(CUdeviceptr))dlsym(h, "cuMemFree_v2");
    CUresult (*DtoH)(void *, CUdeviceptr, size_t) = (CUresult (*)(void *, CUdeviceptr, size_t))dlsym(h, "cuMemcpyDtoH_v2");
    ck_assert(Init && DeviceGetCount && DeviceGet && Retain && Release && SetCurrent && MemAlloc && MemFree && DtoH);
    int n = 0;
    if (Init(0) != CUDA_SUCCESS || DeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
        printf("receiver_cuda: frames_into_gpu_memory: SKIPPED (no GPU)\n");
        return;
    }
    CUdevice dev;
    CUcontext ctx;
    ck_assert_int_eq(DeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(Retain(&ctx, dev), CUDA_SUCCESS);
    ck_assert_int_eq(SetCurrent(ctx), CUDA_SUCCESS);
    size_t frame = 8000, page = mlxd_hsb_min_page_size(frame), size = (2 * page + 65535) & ~(size_t)65535;
    CUdeviceptr d;
    ck_assert_int_eq(MemAlloc(&d, size), CUDA_SUCCESS);
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .buffer = d, .buffer_size = size,
        .frame_size = frame, .page_size = page, .pages = 2, .metadata_offset = mlxd_hsb_metadata_offset(frame),
        .peer_ip = "127.0.0.1", .queue_size = 2, .memory = MLXD_RECEIVER_MEM_AUTO };
    int rc = mlxd_receiver_start(r, &o);
    ck_assert_msg(rc == 0, "start on device memory: %s", mlxd_errmsg());
    pthread_t t;
    pthread_create(&t, NULL, mon, r);
    struct mlxd_receiver_frame f;
    ck_assert(!mlxd_receiver_get_next_frame(r, 0, &f));
    struct mlxd_replay_map m = { .qpn = mlxd_receiver_qp_number(r), .rkey = mlxd_receiver_rkey(r),
        .base_va = mlxd_receiver_external_frame_memory(r), .page_size = page, .pages = 2 };
    uint32_t ip = mlxd_receiver_local_ipv4(r);
    char dst[32];
    snprintf(dst, sizeof dst, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    struct mlxd_gen_opts g = { .sz = sizeof g, .frame_size = frame, .payload_size = 1024, .frames = 1, .first_page = 1 };
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = dst, .src_ip = "127.0.0.1" };
    ck_assert_int_eq(mlxd_gen_run(&m, &g, &so, NULL), 0);
    ck_assert(mlxd_receiver_get_next_frame(r, 2000, &f));
    ck_assert_uint_eq(f.page, 1);
    ck_assert_uint_eq(f.metadata.bytes_written, frame);
    ck_assert_uint_eq(f.frame_memory, d + page);
    uint8_t *host = malloc(frame);
    ck_assert_int_eq(DtoH(host, (CUdeviceptr)f.frame_memory, frame), CUDA_SUCCESS);
    ck_assert_int_eq(mlxd_hsb_payload_check(host, frame, 0), -1);
    free(host);
    ck_assert_int_eq(mlxd_receiver_close(r), 0);
    pthread_join(t, NULL);
    mlxd_receiver_destroy(r);
    MemFree(d);
    Release(dev);
#endif
}
END_TEST

Suite *receiver_cuda_suite(void)
{
    Suite *s = suite_create("receiver_cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, cuda_memory_without_cuda_build);
    tcase_add_test(tc, frames_into_gpu_memory);
    suite_add_tcase(s, tc);
    return s;
}
