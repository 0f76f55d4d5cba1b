/* cuda_api.h (private): the part of the CUDA driver API (libcuda.so.1) this project uses,
 * declared from its documented interface so that every build loads the driver at run time
 * without the CUDA toolkit's headers (docs/receiver.md, "GPU memory").
 *
 * Source of each fact: the CUDA Driver API reference (docs.nvidia.com/cuda/cuda-driver-api):
 * "Data types used by CUDA driver" (CUresult values, CUpointer_attribute, CUmemorytype,
 * CUmemRangeHandleType), "Memory Management" (cuMemGetHandleForAddressRange, cuMemAlloc,
 * cuMemcpyDtoH), "Unified Addressing" (cuPointerGetAttributes), "Context Management" and
 * "Error Handling".  The exported symbol of a call is its versioned name (cuMemAlloc is exported
 * as cuMemAlloc_v2 since CUDA 3.2); the names below are those symbols.
 *
 * The names carry our prefix (mlxd_cu_*, MLXD_CU_*) so that `make cuda-api-check` can compile
 * them next to the toolkit's cuda.h and assert every value equal where a toolkit is installed. */
#ifndef MLXD_CUDA_API_H
#define MLXD_CUDA_API_H
#include <stddef.h>

typedef int mlxd_cu_result;                  /* CUresult */
typedef unsigned long long mlxd_cu_ptr;      /* CUdeviceptr (CUdeviceptr_v2, 64-bit hosts) */
typedef int mlxd_cu_dev;                     /* CUdevice */
typedef struct mlxd_cu_ctx_st *mlxd_cu_ctx;  /* CUcontext: an opaque handle */

/* CUresult */
enum {
    MLXD_CUDA_SUCCESS = 0,
    MLXD_CUDA_ERROR_INVALID_VALUE = 1,
    MLXD_CUDA_ERROR_OUT_OF_MEMORY = 2,
    MLXD_CUDA_ERROR_NOT_INITIALIZED = 3,
    MLXD_CUDA_ERROR_NO_DEVICE = 100,
    MLXD_CUDA_ERROR_INVALID_DEVICE = 101,
    MLXD_CUDA_ERROR_INVALID_CONTEXT = 201,
    MLXD_CUDA_ERROR_NOT_FOUND = 500,
    MLXD_CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    MLXD_CUDA_ERROR_NOT_SUPPORTED = 801,
};

/* CUpointer_attribute */
enum {
    MLXD_CU_POINTER_ATTRIBUTE_CONTEXT = 1,          /* CUcontext */
    MLXD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,      /* unsigned int, a CUmemorytype */
    MLXD_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,/* CUdeviceptr: start of the allocation */
    MLXD_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,      /* size_t: size of the allocation */
};

/* CUmemorytype */
enum {
    MLXD_CU_MEMORYTYPE_HOST = 1,
    MLXD_CU_MEMORYTYPE_DEVICE = 2,
    MLXD_CU_MEMORYTYPE_ARRAY = 3,
    MLXD_CU_MEMORYTYPE_UNIFIED = 4,
};

/* CUmemRangeHandleType */
enum { MLXD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1 };

/* The signatures, as function-pointer types (the library looks every call up with dlsym). */
typedef mlxd_cu_result (*mlxd_cuInit_fn)(unsigned flags);
typedef mlxd_cu_result (*mlxd_cuDriverGetVersion_fn)(int *version);   /* 1000*major + 10*minor */
typedef mlxd_cu_result (*mlxd_cuDeviceGetCount_fn)(int *count);
typedef mlxd_cu_result (*mlxd_cuDeviceGet_fn)(mlxd_cu_dev *dev, int ordinal);
typedef mlxd_cu_result (*mlxd_cuDevicePrimaryCtxRetain_fn)(mlxd_cu_ctx *ctx, mlxd_cu_dev dev);
typedef mlxd_cu_result (*mlxd_cuDevicePrimaryCtxRelease_fn)(mlxd_cu_dev dev);   /* _v2 */
typedef mlxd_cu_result (*mlxd_cuCtxGetCurrent_fn)(mlxd_cu_ctx *ctx);
typedef mlxd_cu_result (*mlxd_cuCtxSetCurrent_fn)(mlxd_cu_ctx ctx);
typedef mlxd_cu_result (*mlxd_cuMemAlloc_fn)(mlxd_cu_ptr *dptr, size_t bytes);   /* _v2 */
typedef mlxd_cu_result (*mlxd_cuMemFree_fn)(mlxd_cu_ptr dptr);                   /* _v2 */
typedef mlxd_cu_result (*mlxd_cuMemcpyDtoH_fn)(void *dst, mlxd_cu_ptr src, size_t bytes);   /* _v2 */
typedef mlxd_cu_result (*mlxd_cuPointerGetAttributes_fn)(unsigned n, int *attributes, void **data,
                                                         mlxd_cu_ptr ptr);
typedef mlxd_cu_result (*mlxd_cuMemGetHandleForAddressRange_fn)(void *handle, mlxd_cu_ptr dptr,
                                                                size_t size, int handle_type,
                                                                unsigned long long flags);
typedef mlxd_cu_result (*mlxd_cuGetErrorName_fn)(mlxd_cu_result e, const char **name);
typedef mlxd_cu_result (*mlxd_cuGetErrorString_fn)(mlxd_cu_result e, const char **text);

/* What cuPointerGetAttributes says of a pointer: memory type (0 when it is no CUDA pointer:
 * "the attributes are assigned default NULL values"), context, and the allocation holding it. */
struct mlxd_cu_pointer_info {
    unsigned type;
    mlxd_cu_ctx ctx;
    mlxd_cu_ptr start;
    size_t size;
};

static inline mlxd_cu_result mlxd_cu_pointer_info(mlxd_cuPointerGetAttributes_fn get, mlxd_cu_ptr p,
                                                  struct mlxd_cu_pointer_info *out)
{
    int attrs[] = { MLXD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, MLXD_CU_POINTER_ATTRIBUTE_CONTEXT,
                    MLXD_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, MLXD_CU_POINTER_ATTRIBUTE_RANGE_SIZE };
    void *data[] = { &out->type, &out->ctx, &out->start, &out->size };
    *out = (struct mlxd_cu_pointer_info){ 0 };
    return get(4, attrs, data, p);
}
#endif
