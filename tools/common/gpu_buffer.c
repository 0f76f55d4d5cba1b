/* gpu_buffer.c: see gpu_buffer.h. */
#include <errno.h>

#include "cuda_shim.h"
#include "gpu_buffer.h"
#include "mlxd_error.h"

static mlxd_cu_dev dev;

int gpu_buffer_alloc(size_t size, uint64_t *dptr)
{
    const struct mlxd__cuda *cu = mlxd__cuda();
    if (!cu)
        return mlxd_err(ENOTSUP, "--gpu: libcuda.so.1 (the NVIDIA driver) cannot be used: %s; on a "
                        "machine without a GPU the tests' emulated driver serves: "
                        "LD_LIBRARY_PATH=build/tests/fakecuda (make fakecuda; docs/receiver.md)",
                        mlxd__cuda_why());
    mlxd_cu_ctx ctx = NULL;
    mlxd_cu_ptr d = 0;
    mlxd_cu_result e;
    const char *call = "cuInit";
    if ((e = cu->Init(0)) || (call = "cuDeviceGet", e = cu->DeviceGet(&dev, 0)) ||
        (call = "cuDevicePrimaryCtxRetain", e = cu->DevicePrimaryCtxRetain(&ctx, dev)))
        return mlxd_err(ENODEV, "--gpu: %s: %s: no usable GPU (check nvidia-smi)", call,
                        mlxd__cuda_name(e));
    if ((e = cu->CtxSetCurrent(ctx))) {
        cu->DevicePrimaryCtxRelease(dev);
        return mlxd_err(EIO, "--gpu: cuCtxSetCurrent: %s", mlxd__cuda_name(e));
    }
    if ((e = cu->MemAlloc(&d, size))) {
        cu->DevicePrimaryCtxRelease(dev);
        return mlxd_err(ENOMEM, "--gpu: cuMemAlloc(%zu bytes): %s: the GPU does not have that much free "
                        "memory; use fewer --pages or a smaller --page-size, or free GPU memory",
                        size, mlxd__cuda_name(e));
    }
    *dptr = d;
    return 0;
}

int gpu_buffer_read(void *dst, uint64_t src, size_t n)
{
    return mlxd__cuda_read(dst, src, n, "--gpu", "frame bytes");
}

void gpu_buffer_free(uint64_t dptr)
{
    if (!dptr)
        return;
    mlxd__cuda()->MemFree(dptr);
    mlxd__cuda()->DevicePrimaryCtxRelease(dev);
}
