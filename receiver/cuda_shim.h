/* cuda_shim.h (private): the few CUDA driver calls the receiver makes, looked up at run time in
 * libcuda.so.1 (dlopen), so that a CUDA=1 build loads and runs on machines without the NVIDIA
 * driver (device memory is then refused with -ENOTSUP and AUTO memory means host memory).
 * The names are those of cuda.h's versioned entry points (cuMemcpyDtoH is cuMemcpyDtoH_v2). */
#ifndef MLXD_CUDA_SHIM_H
#define MLXD_CUDA_SHIM_H
#if MLXD_HAVE_CUDA
#include <cuda.h>

struct cuda_shim {
    CUresult (*PointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*MemGetHandleForAddressRange)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
                                            unsigned long long);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*GetErrorName)(CUresult, const char **);
};

/* The table, or NULL when libcuda.so.1 (or one of the calls) is not there.  Thread-safe. */
const struct cuda_shim *cuda_shim(void);
#endif
#endif
