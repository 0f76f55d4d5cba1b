/* barrier.h (private): the memory barriers of the mlx5 ownership protocols.
 * Source: rdma-core util/udma_barrier.h semantics (our own code).
 *
 *   mlxd_rmb      after the CQE ownership test, before reading other CQE fields
 *                 (udma_from_device_barrier): x86-64 lfence, aarch64 dmb oshld
 *   mlxd_wmb      ring/WQE stores before the doorbell-record store (udma_to_device_barrier):
 *                 x86-64 compiler barrier (TSO keeps stores in order), aarch64 dmb oshst
 *   mlxd_wc_start doorbell record before the UAR MMIO (mmio_wc_start): x86-64 sfence, aarch64 dsb st
 *   mlxd_wc_flush after the UAR/BlueFlame stores, flushing write-combining buffers
 *                 (mmio_flush_writes): x86-64 sfence, aarch64 dsb st
 */
#ifndef MLXD_BARRIER_H
#define MLXD_BARRIER_H

#if defined(__x86_64__)
#define mlxd_rmb()      __asm__ __volatile__("lfence" ::: "memory")
#define mlxd_wmb()      __asm__ __volatile__("" ::: "memory")
#define mlxd_wc_start() __asm__ __volatile__("sfence" ::: "memory")
#define mlxd_wc_flush() __asm__ __volatile__("sfence" ::: "memory")
#elif defined(__aarch64__)
#define mlxd_rmb()      __asm__ __volatile__("dmb oshld" ::: "memory")
#define mlxd_wmb()      __asm__ __volatile__("dmb oshst" ::: "memory")
#define mlxd_wc_start() __asm__ __volatile__("dsb st" ::: "memory")
#define mlxd_wc_flush() __asm__ __volatile__("dsb st" ::: "memory")
#else
#error "mlx5direct: barriers are defined for x86-64 and aarch64 only"
#endif

/* The shared words (CQE op_own, doorbell records, UAR stores) are accessed as atomics: relaxed
 * normally -- plain loads/stores, the barriers above give the order the device needs -- and
 * acquire/release under ThreadSanitizer, so that it sees the happens-before edges the barriers
 * make (the emulated NIC is a thread of the process). */
#if defined(__SANITIZE_THREAD__)
#define MLXD_SHARED_LOAD  __ATOMIC_ACQUIRE
#define MLXD_SHARED_STORE __ATOMIC_RELEASE
#else
#define MLXD_SHARED_LOAD  __ATOMIC_RELAXED
#define MLXD_SHARED_STORE __ATOMIC_RELAXED
#endif
#define mlxd_shared_load(p)     __atomic_load_n((p), MLXD_SHARED_LOAD)
#define mlxd_shared_store(p, v) __atomic_store_n((p), (v), MLXD_SHARED_STORE)

#define mlxd_likely(x)   __builtin_expect(!!(x), 1)
#define mlxd_unlikely(x) __builtin_expect(!!(x), 0)

#endif
