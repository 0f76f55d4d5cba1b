/* A program linked with the library but not with the tests' emulated NVIDIA driver (no RUNPATH
 * to it), run preloaded with the emulator: receiver starts where libcuda.so.1 cannot be loaded.
 * Prints "<rc> <message>" for AUTO memory on a buffer the kernel cannot pin (PROT_NONE: what a
 * GPU pointer is to the kernel), then for CUDA memory.  tests/test_receiver_cuda.c checks them. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

#include "mlxd_error.h"
#include "mlxd_receiver.h"

static void try(void *buf, size_t size, unsigned memory)
{
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .buffer = (uintptr_t)buf,
        .buffer_size = size, .frame_size = 4096, .page_size = 4224, .pages = 2,
        .metadata_offset = 4096, .peer_ip = "127.0.0.1", .queue_size = 1, .memory = memory };
    int rc = mlxd_receiver_start(r, &o);
    printf("%d %s\n", rc, rc ? mlxd_errmsg() : "started");
    mlxd_receiver_destroy(r);
}

int main(void)
{
    size_t size = 3 * 4096;
    void *gpu_like = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gpu_like == MAP_FAILED)
        return 1;
    try(gpu_like, size, MLXD_RECEIVER_MEM_AUTO);
    try(gpu_like, size, MLXD_RECEIVER_MEM_CUDA);
    return 0;
}
