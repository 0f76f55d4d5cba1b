/* cuda_shim.h (private): the CUDA driver calls the receiver makes, looked up at run time in
 * libcuda.so.1 (dlopen) by every build: no CUDA toolkit is needed to build, and a machine
 * without the NVIDIA driver still runs everything else (device memory is then refused with
 * -ENOTSUP naming libcuda.so.1, and AUTO memory means host memory).  The declarations are our
 * own, from the driver API's documented interface (cuda_api.h; docs/receiver.md says why).
 *
 * Every function here sets the message (mlxd_err) on failure, naming the CUDA call, its CUresult
 * name (cuGetErrorName) and what to do; `who` is the public function the message starts with. */
#ifndef MLXD_CUDA_SHIM_H
#define MLXD_CUDA_SHIM_H
#include <stdbool.h>
#include <stdint.h>

#include "cuda_api.h"

struct mlxd_nic;
struct mlxd_region;
struct mlxd_region_opts;

struct mlxd__cuda {
    mlxd_cuPointerGetAttributes_fn PointerGetAttributes;
    mlxd_cuMemcpyDtoH_fn MemcpyDtoH;
    mlxd_cuCtxGetCurrent_fn CtxGetCurrent;
    mlxd_cuCtxSetCurrent_fn CtxSetCurrent;
    mlxd_cuGetErrorName_fn GetErrorName;
    mlxd_cuDriverGetVersion_fn DriverGetVersion;
    /* NULL in drivers before CUDA 11.7 (R515): GPU memory is then refused, naming the version */
    mlxd_cuMemGetHandleForAddressRange_fn MemGetHandleForAddressRange;
    /* what a program needs to make device memory (tools/common/gpu_buffer.c, tests) */
    mlxd_cuInit_fn Init;
    mlxd_cuDeviceGet_fn DeviceGet;
    mlxd_cuDevicePrimaryCtxRetain_fn DevicePrimaryCtxRetain;
    mlxd_cuDevicePrimaryCtxRelease_fn DevicePrimaryCtxRelease;
    mlxd_cuMemAlloc_fn MemAlloc;
    mlxd_cuMemFree_fn MemFree;
};

/* The table, or NULL when libcuda.so.1 (or one of the calls every driver has) is not there;
 * then mlxd__cuda_why() says why (dlerror's text).  Thread-safe; loaded once per process. */
const struct mlxd__cuda *mlxd__cuda(void);
const char *mlxd__cuda_why(void);

/* "CUDA_ERROR_INVALID_VALUE" for e (the number when the driver does not know it). */
const char *mlxd__cuda_name(mlxd_cu_result e);

/* What `buffer` is, for mlxd_receiver_start (memory: enum mlxd_receiver_memory).  Sets *device
 * and, for device memory, *ctx: the context to make current on the monitor thread (the current
 * one, which must be the buffer's; the buffer's when none is current).  Refuses (-ENOTSUP,
 * -EINVAL, -EIO) CUDA memory asked without a driver, a host buffer passed as CUDA memory, a
 * buffer that runs past the end of its allocation and a context mismatch. */
int mlxd__cuda_classify(uint64_t buffer, uint64_t size, unsigned memory, bool *device, void **ctx);

/* Registers device memory [buffer, buffer+size) through its dma-buf; IOVA = the offset of
 * `buffer` in the dma-buf (the range exported starts at the host page holding `buffer`). */
int mlxd__cuda_register(struct mlxd_nic *nic, uint64_t buffer, uint64_t size,
                        const struct mlxd_region_opts *ro, struct mlxd_region **mr);

/* Makes ctx current on the calling thread (the monitor; the message names the CUDA call). */
int mlxd__cuda_set_current(void *ctx);

/* Copies n bytes of device memory to dst (cuMemcpyDtoH: synchronous); what names them; who may
 * be NULL (the message then starts with the CUDA call). */
int mlxd__cuda_read(void *dst, uint64_t src, size_t n, const char *who, const char *what);

/* After the kernel refused host registration of `buffer` with EFAULT ("Bad address"): when the
 * buffer may be GPU memory this process cannot recognize, the message says so and why. */
int mlxd__cuda_explain_efault(uint64_t buffer, unsigned memory, const char *who);
#endif
