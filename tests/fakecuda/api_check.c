/* make cuda-api-check: receiver/cuda_api.h (our declarations of the CUDA driver API, from its
 * documented interface) against the toolkit's cuda.h, where one is installed.  Compiled with
 * -fsyntax-only: every assertion below is checked by the compiler. */
#include <cuda.h>

#include "cuda_api.h"

#define SAME(ours, theirs) _Static_assert((long long)(ours) == (long long)(theirs), #ours " != " #theirs)
SAME(sizeof(mlxd_cu_result), sizeof(CUresult));
SAME(sizeof(mlxd_cu_ptr), sizeof(CUdeviceptr));
SAME(sizeof(mlxd_cu_dev), sizeof(CUdevice));
SAME(sizeof(mlxd_cu_ctx), sizeof(CUcontext));
SAME(sizeof(int), sizeof(CUpointer_attribute));
SAME(sizeof(int), sizeof(CUmemRangeHandleType));
SAME(MLXD_CUDA_SUCCESS, CUDA_SUCCESS);
SAME(MLXD_CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME(MLXD_CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(MLXD_CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME(MLXD_CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(MLXD_CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME(MLXD_CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_CONTEXT);
SAME(MLXD_CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME(MLXD_CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_ADDRESS);
SAME(MLXD_CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED);
SAME(MLXD_CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_CONTEXT);
SAME(MLXD_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
SAME(MLXD_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
SAME(MLXD_CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_RANGE_SIZE);
SAME(MLXD_CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST);
SAME(MLXD_CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
SAME(MLXD_CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_ARRAY);
SAME(MLXD_CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED);
SAME(MLXD_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
/* the fake's cuDeviceGetAttribute and the docs use attribute 124 */
SAME(124, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
/* the exported names the library and the fake use (dlsym strings in receiver/cuda_shim.c) are
 * declared by the toolkit: this fails to compile if one is not.  (cuCtxCreate_v2, which the
 * tests use for a second context, is exported by every driver but no longer declared by CUDA
 * 13's cuda.h.) */
static void *const names[] = {
    (void *)cuPointerGetAttributes, (void *)cuMemcpyDtoH_v2, (void *)cuCtxGetCurrent,
    (void *)cuCtxSetCurrent, (void *)cuGetErrorName, (void *)cuDriverGetVersion, (void *)cuInit,
    (void *)cuDeviceGet, (void *)cuDevicePrimaryCtxRetain, (void *)cuDevicePrimaryCtxRelease_v2,
    (void *)cuMemAlloc_v2, (void *)cuMemFree_v2, (void *)cuMemGetHandleForAddressRange,
    (void *)cuMemcpyHtoD_v2, (void *)cuCtxDestroy_v2,
    (void *)cuMemAllocHost_v2, (void *)cuMemFreeHost, (void *)cuPointerGetAttribute,
    (void *)cuDeviceGetCount, (void *)cuDeviceGetAttribute, (void *)cuGetErrorString,
};
void *mlxd_cuda_api_check_names(unsigned i);
void *mlxd_cuda_api_check_names(unsigned i) { return names[i % (sizeof names / sizeof names[0])]; }
