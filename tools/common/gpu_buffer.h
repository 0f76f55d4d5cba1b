/* gpu_buffer.h: CUDA device memory for a tool's frame buffer (mlxd-capture --gpu), through the
 * NVIDIA driver the library loads at run time (receiver/cuda_shim.h): device 0's primary context,
 * cuMemAlloc, cuMemcpyDtoH.  Errors set the message (mlxd_errmsg) naming the CUDA call, its
 * CUresult name and what to do. */
#ifndef MLXD_GPU_BUFFER_H
#define MLXD_GPU_BUFFER_H
#include <stddef.h>
#include <stdint.h>

/* Makes device 0's primary context current on this thread and allocates size bytes. */
int gpu_buffer_alloc(size_t size, uint64_t *dptr);
/* Copies n bytes at device address src to dst. */
int gpu_buffer_read(void *dst, uint64_t src, size_t n);
/* Frees what gpu_buffer_alloc gave (0: nothing) and releases the context. */
void gpu_buffer_free(uint64_t dptr);
#endif
