/* tsc.h (private): the CPU's time-stamp counter, read the same way by the benchmark tools
 * (mlxd-bench, mlxd-bench-verbs) and by the emulator's benchmark injection
 * (emu/nic/bench_inject.c, mlxd_emu_bench.h), so that a stamp taken in one can be subtracted
 * from a stamp taken in the other.
 * x86-64: lfence; rdtsc (the lfence keeps earlier loads from being timed after the read);
 * aarch64: isb; mrs cntvct_el0 (the generic timer's virtual count); elsewhere CLOCK_MONOTONIC_RAW
 * in ns.  Ticks, not ns: the tools calibrate the frequency and say how. */
#ifndef MLXD_TSC_H
#define MLXD_TSC_H
#include <stdint.h>
#include <time.h>

static inline uint64_t mlxd__tsc(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ __volatile__("lfence; rdtsc" : "=a"(lo), "=d"(hi) :: "memory");
    return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}
#endif
