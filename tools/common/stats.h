/* stats.h: the latency statistics both benchmark tools report (mlxd-bench, mlxd-bench-verbs), so
 * that their ratios compare like with like.  perftest's columns (the latency report of
 * ib_write_lat: perftest src/perftest_parameters.h and .c), with these differences: the
 * standard deviation is computed in double precision (perftest truncates every deviation to
 * int microseconds), the maximum is the true one (perftest prints the second largest), no
 * sample is dropped (perftest drops 2), percentiles use the nearest rank, v[ceil(p n) - 1],
 * and t_typical is the median. */
#ifndef MLXD_TOOLS_STATS_H
#define MLXD_TOOLS_STATS_H
#include <math.h>
#include <stdlib.h>
#include <time.h>

struct bench_stats {
    double min, typical, avg, stdev, p99, p999, max;
};

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v[0..n) and returns its statistics (all zero when n is 0). */
static inline struct bench_stats bench_stats_of(double *v, size_t n)
{
    struct bench_stats s = { 0 };
    if (!n) return s;
    qsort(v, n, sizeof v[0], bench_cmp_double);
    s.min = v[0];
    s.max = v[n - 1];
    s.typical = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    s.avg = sum / (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - s.avg) * (v[i] - s.avg);
    s.stdev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
    size_t r99 = (size_t)ceil(0.99 * (double)n), r999 = (size_t)ceil(0.999 * (double)n);
    s.p99 = v[(r99 ? r99 : 1) - 1];
    s.p999 = v[(r999 ? r999 : 1) - 1];
    return s;
}

/* CLOCK_MONOTONIC_RAW in seconds: the reference the TSC is calibrated against (vDSO, no
 * system call). */
static inline double bench_mono_raw_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
#endif
