/* bf_copy.h (private): one 64-byte block of a WQE to the BlueFlame register.
 *
 * The NIC takes a BlueFlame write only when the whole 64-byte block arrives as one
 * write-combined burst; a partial one is dropped and the NIC fetches the WQE from memory (the
 * kernel's write-combining test, hw/mlx5/mem.c, relies on that), so the latency gain is lost.
 *   x86-64   eight 8-byte stores: the write-combining buffer merges them into one burst.
 *   aarch64  one 64-byte store (ST1 of four 128-bit registers) after one 64-byte load, as
 *            libmlx5 does (rdma-core util/mmio.h mmio_memcpy_x64: one NEON load/store pair per
 *            64 bytes); eight separate stores may leave the write-combining buffer in parts.
 * Both: dst and src 8-byte aligned (WQEBBs are 64-byte aligned, the register 256-byte). */
#ifndef MLXD_BF_COPY_H
#define MLXD_BF_COPY_H

#include <stdint.h>
#include "barrier.h"

static inline void mlxd_bf_copy64(volatile uint64_t *dst, const uint64_t *src)
{
#if defined(__aarch64__) && !defined(__SANITIZE_THREAD__)
    __asm__ __volatile__("ld1 {v16.2d, v17.2d, v18.2d, v19.2d}, [%1]\n\t"
                         "st1 {v16.2d, v17.2d, v18.2d, v19.2d}, [%0]"
                         : : "r"(dst), "r"(src) : "memory", "v16", "v17", "v18", "v19");
#else
    /* x86-64 (and ThreadSanitizer builds, which must see the stores as atomics) */
    for (unsigned i = 0; i < 8; i++) mlxd_shared_store(&dst[i], src[i]);
#endif
}

#endif
