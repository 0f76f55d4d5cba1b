/* nic_clock.c: the emulated ConnectX's clocks, which stamp its CQEs (struct mlx5_cqe64.timestamp,
 * mlx5dv.h), in the two formats a ConnectX has:
 *   - free-running: the HCA's internal timer, counting at hca_core_clock kHz (the device caps:
 *     ib_uverbs_ex_query_device_resp.hca_core_clock) and wrapping at timestamp_mask; the
 *     emulator drives it from CLOCK_MONOTONIC_RAW (a counter no time adjustment moves, as the
 *     crystal of a NIC);
 *   - real time (PTP), for a CQ created with MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS on a device
 *     that reports MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS: seconds in bits 63..32 and
 *     nanoseconds in bits 31..0 (the kernel's REAL_TIME_TO_NS, drivers/net/ethernet/mellanox/
 *     mlx5/core/lib/clock.h); the emulator drives it from CLOCK_REALTIME.
 * The defaults model a 156.25 MHz timer (hca_core_clock 156250 kHz) of 64 bits that started at 0
 * at boot (CLOCK_MONOTONIC_RAW 0), so that every process sharing an emulated device reads the
 * same timer; mlxd_emu_clock_set (mlxd_emu.h) changes them in the calling process, e.g. a narrow
 * counter near its wrap for tests. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include "nic.h"

#define API __attribute__((visibility("default")))

struct clock_model {
    uint32_t khz;
    uint64_t mask;
    uint64_t start;        /* cycles at base_ns */
    uint64_t base_ns;      /* CLOCK_MONOTONIC_RAW when the model was set; 0: boot */
    bool real_time;
};

/* The model, as relaxed atomics under a sequence counter (odd while mlxd_emu_clock_set rewrites
 * it): read per CQE by the engines, written rarely. */
static _Atomic uint32_t m_khz = 156250;
static _Atomic uint64_t m_mask = ~0ull, m_start, m_base_ns;
static _Atomic bool m_real_time = true;
static _Atomic unsigned model_seq;

static uint64_t raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ns * khz / 10^6 without overflow (ns up to ~2^63, khz up to 10^7) */
static uint64_t ns_to_cycles(uint64_t ns, uint32_t khz)
{
    return ns / 1000000u * khz + ns % 1000000u * khz / 1000000u;
}

static void model_read(struct clock_model *m)
{
    unsigned s;
    do {
        while ((s = atomic_load_explicit(&model_seq, memory_order_acquire)) & 1) {}
        m->khz = atomic_load_explicit(&m_khz, memory_order_relaxed);
        m->mask = atomic_load_explicit(&m_mask, memory_order_relaxed);
        m->start = atomic_load_explicit(&m_start, memory_order_relaxed);
        m->base_ns = atomic_load_explicit(&m_base_ns, memory_order_relaxed);
        m->real_time = atomic_load_explicit(&m_real_time, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
    } while (atomic_load_explicit(&model_seq, memory_order_relaxed) != s);
}

uint64_t emu_nic_clock_cycles(void)
{
    struct clock_model m;
    model_read(&m);
    return (m.start + ns_to_cycles(raw_ns() - m.base_ns, m.khz)) & m.mask;
}

uint32_t emu_nic_clock_khz(void)
{
    struct clock_model m;
    model_read(&m);
    return m.khz;
}

uint64_t emu_nic_clock_mask(void)
{
    struct clock_model m;
    model_read(&m);
    return m.mask;
}

bool emu_nic_clock_real_time(void)
{
    struct clock_model m;
    model_read(&m);
    return m.real_time;
}

unsigned emu_nic_clock_generation(void)
{
    return atomic_load_explicit(&model_seq, memory_order_acquire);
}

uint64_t emu_nic_real_time_ts(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec << 32 | (uint32_t)ts.tv_nsec;
}

uint64_t emu_nic_cqe_timestamp(const struct emu_cq *cq)
{
    return cq->real_time_ts ? emu_nic_real_time_ts() : emu_nic_clock_cycles();
}

API int mlxd_emu_clock_set(uint32_t khz, unsigned bits, uint64_t start, bool real_time)
{
    if (khz < 1000 || khz > 10000000 || bits < 32 || bits > 64)
        return -EINVAL;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (start > mask)
        return -EINVAL;
    static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&writer);
    atomic_fetch_add_explicit(&model_seq, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&m_khz, khz, memory_order_relaxed);
    atomic_store_explicit(&m_mask, mask, memory_order_relaxed);
    atomic_store_explicit(&m_start, start, memory_order_relaxed);
    atomic_store_explicit(&m_base_ns, raw_ns(), memory_order_relaxed);
    atomic_store_explicit(&m_real_time, real_time, memory_order_relaxed);
    atomic_fetch_add_explicit(&model_seq, 1, memory_order_release);
    pthread_mutex_unlock(&writer);
    return 0;
}
