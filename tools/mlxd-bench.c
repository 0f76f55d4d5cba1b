/* mlxd-bench: poll-loop benchmarks of mlx5direct, on the emulator (or a real ConnectX).
 *
 *   empty      cost of one mlxd_cq_poll of an empty CQ: ns (TSC) and instructions (perf counter)
 *   ring       CQE throughput: a ring filled (synthetic CQEs or a CQE fixture) and drained with
 *              mlxd_cq_poll in batches of 1, 4, 16 and 64: ns per CQE; on a detached ring, and on
 *              a CQ + UC QP of the emulated NIC filled by the emulator (the rings libmlx5 is fed
 *              by tools/mlxd-bench-verbs.c, for the ratios)
 *   replay     replay throughput: the replay feeder (its own thread) plays a fixture into a
 *              detached ring drained at batch 1, 16, 64: M CQE/s
 *   handoff    from a CQE becoming valid in the receiver's ring (emulator hook
 *              mlxd_emu_bench_write_imm, emu/mlxd_emu_bench.h, stamps the TSC just before the
 *              op_own store) to mlxd_receiver_get_next_frame returning in the consumer; busy-poll
 *              and event monitor
 *   e2e        frames/s and Gb/s that the receiver + emulator sustain with the sensor-bridge
 *              generator (mlxd_gen_run over the emulated RoCE v2 wire), 4 KiB .. 8 MiB frames
 *
 * Reports t_min, t_typical (median), t_avg, t_stdev (double), p99, p99.9 (nearest rank) and the
 * true maximum (perftest prints the second largest; perftest src/perftest_parameters.c), the TSC
 * frequency and how it was obtained, the CPU pinning and the iteration counts.  --json, --csv,
 * and --plot-dir DIR (hand-off samples for scripts/bench.sh's gnuplot CDF/histogram).
 * docs/performance.md has the figures and how to reproduce them.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "mlxd_abi.h"
#include "mlxd_capture.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_fixture.h"
#include "mlxd_hsb.h"
#include "mlxd_mlx5.h"
#include "mlxd_receiver.h"
#include "mlxd_uverbs.h"
#include "stats.h"
#include "tsc.h"

#define REEXEC_ENV "MLXD_BENCH_EMULATED"

typedef int (*write_imm_fn)(unsigned, uint32_t, uint32_t, uint32_t, uint64_t *);

/* ---------------------------------------------------------------------------------------- */
/* time stamp counter                                                                         */


static inline void cpu_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}


static double g_tsc_hz;          /* ticks per second */
static char g_tsc_how[512];

/* The TSC frequency: calibrated against CLOCK_MONOTONIC_RAW (7 windows of 30 ms, median),
 * cross-checked with what the CPU says (CPUID leaf 0x15, or the hypervisor's timing leaf
 * 0x40000010) and the kernel's "cpu MHz"; the architectural value is used when it is within
 * 0.5 % of the calibration (aarch64: CNTFRQ_EL0, exact by definition). */
static void tsc_init(void)
{
    double w[7];
    for (int i = 0; i < 7; i++) {
        double s0 = bench_mono_raw_s();
        uint64_t t0 = mlxd__tsc();
        while (bench_mono_raw_s() - s0 < 0.030) {}
        uint64_t t1 = mlxd__tsc();
        double s1 = bench_mono_raw_s();
        w[i] = (double)(t1 - t0) / (s1 - s0);
    }
    qsort(w, 7, sizeof w[0], bench_cmp_double);
    double cal = w[3];
    double arch = 0;
    const char *arch_src = NULL;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) >= 0x15) {
        __cpuid(0x15, a, b, c, d);
        if (a && b && c) { arch = (double)c * b / a; arch_src = "CPUID leaf 0x15"; }
    }
    __cpuid(1, a, b, c, d);
    if (!arch && (c & (1u << 31))) {           /* running under a hypervisor */
        __cpuid(0x40000000, a, b, c, d);
        if (a >= 0x40000010) {
            __cpuid(0x40000010, a, b, c, d);
            if (a) { arch = a * 1000.0; arch_src = "CPUID leaf 0x40000010 (hypervisor TSC kHz)"; }
        }
    }
#elif defined(__aarch64__)
    uint64_t f;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
    arch = (double)f;
    arch_src = "CNTFRQ_EL0";
#endif
    double mhz = 0;
    FILE *fp = fopen("/proc/cpuinfo", "r");
    char line[512];
    bool constant = false, nonstop = false;
    while (fp && fgets(line, sizeof line, fp)) {
        if (!mhz && !strncmp(line, "cpu MHz", 7)) {
            char *colon = strchr(line, ':');
            if (colon) mhz = atof(colon + 1);
        }
        if (!strncmp(line, "flags", 5)) {
            constant = strstr(line, " constant_tsc") != NULL;
            nonstop = strstr(line, " nonstop_tsc") != NULL;
        }
    }
    if (fp) fclose(fp);
    bool use_arch = arch > 0 && fabs(arch - cal) / cal < 0.005;
    g_tsc_hz = use_arch ? arch : cal;
    int n = snprintf(g_tsc_how, sizeof g_tsc_how,
                     "%s; calibrated %.3f MHz against CLOCK_MONOTONIC_RAW (median of 7 x 30 ms, "
                     "spread %.3f..%.3f MHz)", use_arch ? arch_src : "calibration",
                     cal / 1e6, w[0] / 1e6, w[6] / 1e6);
    if (arch > 0 && !use_arch)
        n += snprintf(g_tsc_how + n, sizeof g_tsc_how - (size_t)n, "; %s says %.3f MHz (not used: "
                      "differs by more than 0.5%%)", arch_src, arch / 1e6);
    else if (arch > 0)
        n += snprintf(g_tsc_how + n, sizeof g_tsc_how - (size_t)n, "; %s: %.3f MHz", arch_src, arch / 1e6);
    else
        n += snprintf(g_tsc_how + n, sizeof g_tsc_how - (size_t)n, "; no CPUID frequency leaf");
    if (mhz > 0)
        n += snprintf(g_tsc_how + n, sizeof g_tsc_how - (size_t)n, "; /proc/cpuinfo cpu MHz %.3f", mhz);
#if defined(__x86_64__)
    snprintf(g_tsc_how + n, sizeof g_tsc_how - (size_t)n, "; constant_tsc %s, nonstop_tsc %s",
             constant ? "yes" : "no", nonstop ? "yes" : "no");
#else
    (void)constant;     /* the TSC flags of /proc/cpuinfo are x86's */
    (void)nonstop;
#endif
}

static inline double ticks_ns(double t) { return t * 1e9 / g_tsc_hz; }

/* ---------------------------------------------------------------------------------------- */
/* statistics and results                                                                     */

#define MAX_RESULTS 64

struct result {
    char name[48];
    char unit[16];
    char what[240];
    size_t iters;
    bool available;
    char reason[400];
    struct bench_stats s;
    double instr;                /* instructions per operation (<0: not measured) */
    char instr_note[160];
};

static struct result g_res[MAX_RESULTS];
static int g_nres;

static struct result *result_new(const char *name, const char *unit, const char *what)
{
    struct result *r = &g_res[g_nres < MAX_RESULTS - 1 ? g_nres++ : g_nres];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    snprintf(r->what, sizeof r->what, "%s", what);
    r->instr = -1;
    return r;
}

static void result_unavailable(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void result_unavailable(struct result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    r->available = false;
}

struct e2e_row {
    uint64_t frame_size;
    uint64_t sent, received;
    double seconds, fps, gbps, send_gbps;
    uint64_t window, timeouts;
    const char *mode;            /* "<monitor>/<consumer>": busy/nap, event/spin, ... */
    bool ok;
    char reason[300];
    char note[300];              /* where the frames not received went (e2e_note) */
};
#define MAX_E2E 32
static struct e2e_row g_e2e[MAX_E2E];
static int g_ne2e;

/* rdma-core comparison (tools/mlxd-bench-verbs.c) */
struct cmp_row { char name[48]; double typical, avg, p99; size_t iters; };
static struct cmp_row g_cmp[MAX_RESULTS];
static int g_ncmp;
static bool g_cmp_ok;
static char g_cmp_reason[600];

/* ---------------------------------------------------------------------------------------- */
/* configuration                                                                              */

struct cfg {
    bool json, csv, quiet;
    bool no_park;                /* --no-park: the emulator's engine stays awake in busy hand-off */
    const char *json_out, *csv_out;   /* also write these files */
    const char *plot_dir;
    const char *fixture;
    const char *tests;           /* comma list: empty,ring,emu-ring,handoff,e2e,compare */
    int cpu_monitor, cpu_consumer, cpu_producer;   /* -1 = not pinned */
    const char *producer_mode;   /* "thread" | "inline" | NULL = by CPU count */
    size_t empty_samples;        /* samples of 100 polls */
    size_t ring_passes;          /* passes per batch size */
    size_t emu_samples, emu_passes;   /* the same on the emulated NIC's ring (and libmlx5) */
    size_t handoff_iters;
    size_t handoff_event_iters;
    double e2e_mb;               /* bytes sent per frame size (MiB) */
    const char *e2e_sizes;
    const char *e2e_modes;
    const char *e2e_consumers;   /* comma list: nap, spin (how the e2e consumer waits) */
    int e2e_window;              /* frames in flight; -1 = pages / 2; 0 = no pacing */
    /* e2e receiver geometry (0 = by frame size / the receiver's defaults) */
    unsigned e2e_pages, e2e_queue, e2e_recv_depth;
    unsigned e2e_packet;         /* RDMA payload bytes per packet (the generator's payload_size) */
    int ncpus;
};

static struct cfg C = {
    .cpu_monitor = -2, .cpu_consumer = -2, .cpu_producer = -2,
    .empty_samples = 20000, .ring_passes = 400, .emu_samples = 5000, .emu_passes = 100, .handoff_iters = 100000, .handoff_event_iters = 20000,
    .e2e_mb = 192, .e2e_sizes = "4096,65536,1048576,8388608", .e2e_modes = "busy,event", .e2e_consumers = "nap", .e2e_window = -1, .e2e_packet = 4096,
};

static bool want(const char *t)
{
    if (!C.tests) return true;
    size_t n = strlen(t);
    for (const char *p = C.tests; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, t, n)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

static void pin_self(int cpu)
{
    if (cpu < 0) return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    if (C.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------------------------------- */
/* 1. empty poll                                                                              */

static int perf_instr_open(char *why, size_t len)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0)
        snprintf(why, len, "perf_event_open(PERF_COUNT_HW_INSTRUCTIONS): %s (a VM without a virtual "
                 "PMU, or perf_event_paranoid; use scripts/callgrind.sh)", strerror(errno));
    return fd;
}

/* Instructions per call of fn(arg) over k calls, the counting overhead (k = 0) subtracted. */
static double perf_instr_per(int fd, void (*fn)(void *, size_t), void *arg, size_t k)
{
    uint64_t base = UINT64_MAX, with = UINT64_MAX;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t v = 0;
        ioctl(fd, PERF_EVENT_IOC_RESET, 0);
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
        fn(arg, 0);
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        if (read(fd, &v, sizeof v) == sizeof v && v < base) base = v;
        ioctl(fd, PERF_EVENT_IOC_RESET, 0);
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
        fn(arg, k);
        ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
        if (read(fd, &v, sizeof v) == sizeof v && v < with) with = v;
    }
    return with >= base ? (double)(with - base) / (double)k : -1;
}

static struct mlxd_completion g_wc[64];
static volatile int g_sink;

static void empty_polls(void *arg, size_t k)
{
    struct mlxd_cq *cq = arg;
    int s = 0;
    for (size_t i = 0; i < k; i++) s += mlxd_cq_poll(cq, g_wc, 16);
    g_sink = s;
}

static void bench_empty(void)
{
    struct result *r = result_new("empty_poll", "ns",
                                  "mlxd_cq_poll(cq, wc, 16) of an empty detached CQ (4096 CQEs); sample = mean of 100 polls");
    struct mlxd_cq *cq = NULL;
    if (mlxd_cq_create_detached(4096, &cq) < 0) {
        result_unavailable(r, "mlxd_cq_create_detached: %s", mlxd_errmsg());
        return;
    }
    const size_t K = 100, S = C.empty_samples;
    double *v = malloc(S * sizeof *v);
    empty_polls(cq, 100000);                          /* warm up */
    for (size_t i = 0; i < S; i++) {
        uint64_t t0 = mlxd__tsc();
        empty_polls(cq, K);
        uint64_t t1 = mlxd__tsc();
        v[i] = ticks_ns((double)(t1 - t0)) / (double)K;
    }
    r->s = bench_stats_of(v, S);
    r->iters = S * K;
    r->available = true;
    char why[256];
    int fd = perf_instr_open(why, sizeof why);
    if (fd >= 0) {
        r->instr = perf_instr_per(fd, empty_polls, cq, 100000);
        snprintf(r->instr_note, sizeof r->instr_note, "user-space instructions retired (perf counter)");
        close(fd);
    } else {
        snprintf(r->instr_note, sizeof r->instr_note, "%.150s", why);
    }
    free(v);
    mlxd_cq_destroy(cq);
}

/* ---------------------------------------------------------------------------------------- */
/* 2. CQE throughput on a detached ring                                                       */

static void synth_cqe(uint8_t c[64], uint32_t i);

/* 2b. Replay throughput: the replay feeder (mlxd_replay_start, its own thread) plays a fixture
 * of 4096 synthetic RESP_WR_IMM CQEs, unpaced, into a detached ring of 4096 while this thread
 * drains it with mlxd_cq_poll(max B).  Sample = one pass of 4096 CQEs; unit M CQE/s. */
static void bench_replay(void)
{
    char path[] = "/tmp/mlxd-bench-replay-XXXXXX";
    int fd = mkstemp(path);
    struct mlxd_fixture_writer *w = NULL;
    struct mlxd_fixture_header h = { .version = 1, .cqe_size = 64, .ring_size = 4096, .cqn = 1 };
    snprintf(h.source, sizeof h.source, "mlxd-bench: synthetic RESP_WR_IMM CQEs");
    if (fd >= 0) close(fd);
    if (fd < 0 || mlxd_fixture_writer_open(path, &h, &w) < 0) {
        struct result *r = result_new("replay", "MCQE/s", "replay feeder");
        result_unavailable(r, "cannot write the fixture %s: %s", path, fd < 0 ? strerror(errno) : mlxd_errmsg());
        return;
    }
    const uint32_t NCQE = 4096;
    for (uint32_t i = 0; i < NCQE; i++) {
        uint8_t c[64];
        synth_cqe(c, i);
        mlxd_fixture_write(w, c, false, 0);
    }
    mlxd_fixture_writer_close(w);
    static const int batches[] = { 1, 16, 64 };
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        int B = batches[b];
        char name[48], what[200];
        snprintf(name, sizeof name, "replay_batch%d", B);
        snprintf(what, sizeof what, "replay feeder (own thread, monitor CPU, unpaced) into a detached ring of %u, drained "
                 "with mlxd_cq_poll(max %d); sample = one pass of %u CQEs, M CQE/s", NCQE, B, NCQE);
        struct result *r = result_new(name, "MCQE/s", what);
        size_t P = C.ring_passes;
        struct mlxd_cq *cq = NULL;
        struct mlxd_replay *rp = NULL;
        struct mlxd_replay_opts ro = { .sz = sizeof ro, .paced = false, .loops = (uint32_t)(P + 5) };
        /* the feeder thread inherits the creating thread's CPU affinity: start it from the
         * monitor's CPU, so that it does not share the consumer's */
        pin_self(C.cpu_monitor);
        int src = mlxd_cq_create_detached(NCQE, &cq) < 0 ? -1 : mlxd_replay_start(cq, path, &ro, &rp);
        pin_self(C.cpu_consumer);
        if (src < 0) {
            result_unavailable(r, "%s", mlxd_errmsg());
            if (cq) mlxd_cq_destroy(cq);
            continue;
        }
        double *v = malloc(P * sizeof *v);
        for (size_t pass = 0; pass < P + 5; pass++) {
            uint32_t got = 0;
            uint64_t t0 = mlxd__tsc();
            while (got < NCQE) {   /* not past the pass: the feeder writes exactly P + 5 passes */
                int m = mlxd_cq_poll(cq, g_wc, NCQE - got < (uint32_t)B ? (int)(NCQE - got) : B);
                if (m < 0) break;
                got += (uint32_t)m;
            }
            uint64_t t1 = mlxd__tsc();
            if (pass >= 5) v[pass - 5] = NCQE / ticks_ns((double)(t1 - t0)) * 1e3;   /* 5 warm-up passes */
        }
        mlxd_replay_finish(rp, false);
        r->s = bench_stats_of(v, P);
        r->iters = P * NCQE;
        r->available = true;
        free(v);
        mlxd_cq_destroy(cq);
    }
    unlink(path);
}

/* A synthetic responder CQE (struct mlx5_cqe64): RDMA WRITE with immediate, as the NIC writes
 * one for a sensor frame. */
static void synth_cqe(uint8_t c[64], uint32_t i)
{
    memset(c, 0, 64);
    uint32_t v = htonl(i & 0xfff);                     /* immediate: page */
    memcpy(c + MLXD_CQE_OFF_IMM_INVAL_PKEY, &v, 4);
    v = htonl(4096);
    memcpy(c + MLXD_CQE_OFF_BYTE_CNT, &v, 4);
    v = htonl(0x000123);
    memcpy(c + MLXD_CQE_OFF_SOP_DROP_QPN, &v, 4);
    uint16_t w = htons((uint16_t)i);
    memcpy(c + MLXD_CQE_OFF_WQE_COUNTER, &w, 2);
    c[MLXD_CQE_OFF_OP_OWN] = (uint8_t)(MLXD_CQE_RESP_WR_IMM << 4);
}

struct ring_src {
    uint8_t (*cqe)[64];
    size_t n;
    char name[300];
};

/* Writes ncqe CQEs (the next pass over the ring) as the NIC does: 63 bytes, then op_own with
 * the pass's owner bit. */
static void ring_fill(volatile uint8_t *ring, uint32_t ncqe, uint32_t *pi, const struct ring_src *src,
                      size_t *k)
{
    for (uint32_t i = 0; i < ncqe; i++, (*pi)++) {
        const uint8_t *s = src->cqe[(*k)++ % src->n];
        volatile uint8_t *d = ring + ((size_t)(*pi & (ncqe - 1)) << 6);
        memcpy((void *)d, s, 63);
        /* the owner byte last, with release: the poll loop's acquire pairs with it */
        __atomic_store_n((uint8_t *)&d[63], (uint8_t)((s[63] & ~1u) | ((*pi & ncqe) ? 1 : 0)),
                         __ATOMIC_RELEASE);
    }
}

static void bench_ring_detached(void)
{
    struct ring_src src = { 0 };
    if (C.fixture) {
        struct mlxd_fixture *fx = NULL;
        struct result *r = result_new("ring_fixture", "ns", "fixture");
        g_nres--;
        if (mlxd_fixture_load(C.fixture, &fx) < 0 || !fx->count) {
            result_unavailable(r, "fixture %s: %s", C.fixture, fx ? "no records" : mlxd_errmsg());
            g_nres++;
            if (fx) mlxd_fixture_free(fx);
            return;
        }
        src.n = fx->count;
        src.cqe = malloc(src.n * 64);
        for (size_t i = 0; i < src.n; i++) {
            const struct mlxd_fixture_record *rec = &fx->records[i];
            memcpy(src.cqe[i], rec->cqe + (rec->cqe_size == 128 ? 64 : 0), 64);
        }
        snprintf(src.name, sizeof src.name, "fixture %s (%zu CQEs, cycled)", C.fixture, src.n);
        mlxd_fixture_free(fx);
    } else {
        src.n = 4096;
        src.cqe = malloc(src.n * 64);
        for (size_t i = 0; i < src.n; i++) synth_cqe(src.cqe[i], (uint32_t)i);
        snprintf(src.name, sizeof src.name, "synthetic RESP_WR_IMM CQEs");
    }
    static const int batches[] = { 1, 4, 16, 64 };
    const uint32_t NCQE = 4096;
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        int B = batches[b];
        char name[48], what[160];
        snprintf(name, sizeof name, "ring_batch%d", B);
        snprintf(what, sizeof what, "detached ring of %u, %.60s, drained with mlxd_cq_poll(max %d); sample = one pass, per CQE",
                 NCQE, src.name, B);
        struct result *r = result_new(name, "ns/CQE", what);
        struct mlxd_cq *cq = NULL;
        volatile void *ringv;
        uint32_t n;
        volatile uint32_t *dbrec;
        if (mlxd_cq_create_detached(NCQE, &cq) < 0 || mlxd_cq_ring(cq, &ringv, &n, &dbrec) < 0) {
            result_unavailable(r, "detached CQ: %s", mlxd_errmsg());
            continue;
        }
        volatile uint8_t *ring = (volatile uint8_t *)ringv;
        size_t P = C.ring_passes, k = 0;
        double *v = malloc(P * sizeof *v);
        uint32_t pi = 0;
        for (size_t pass = 0; pass < P + 5; pass++) {
            ring_fill(ring, n, &pi, &src, &k);
            uint32_t got = 0;
            uint64_t t0 = mlxd__tsc();
            while (got < n) {
                int m = mlxd_cq_poll(cq, g_wc, B);
                if (m <= 0) break;
                got += (uint32_t)m;
            }
            uint64_t t1 = mlxd__tsc();
            if (got != n) {
                result_unavailable(r, "poll consumed %u of %u CQEs", got, n);
                break;
            }
            if (pass >= 5) v[pass - 5] = ticks_ns((double)(t1 - t0)) / n;   /* 5 warm-up passes */
            r->available = true;
        }
        if (r->available) {
            r->s = bench_stats_of(v, P);
            r->iters = P * n;
        }
        free(v);
        mlxd_cq_destroy(cq);
    }
    free(src.cqe);
}

/* ---------------------------------------------------------------------------------------- */
/* 2c. CQE compression (issue 18 item 2): compressed sessions against full CQEs               */
/* A detached ring of COMP_RING entries filled, one pass at a time, with the same stream of
 * responder completions (RDMA SEND receives of one QP, byte_cnt 4096, wqe_counter = producer
 * index) either as full 64-byte CQEs (a ring without compression: the poll loop's hot path) or
 * as compressed sessions of COMP_SESSION mini-CQEs (a ring created with MLXD_CQE_COMP_HASH):
 * the title CQE (format 3, byte_cnt = the count) and its mini-CQE arrays in slots 1, 8, 16, ...
 * (mlx5/cqe_mini.c).  Reported per completion: the poll loop's time, and the CQ bytes it reads
 * (the 64-byte slots whose bytes it loads: every slot of full CQEs; of a session its title and
 * its ceil(N/8) array slots; the invalidation byte it stores into each of a session's slots is
 * counted apart).  scripts/callgrind.sh counts the instructions of bench_comp_drain_B /
 * bench_full_drain_B.  libmlx5 is not compared: its ibv_poll_cq / ibv_start_poll do not expand
 * compressed CQEs (rdma-core providers/mlx5/cq.c reads no CQE format 3), although
 * mlx5dv_create_cq creates such CQs for a DV consumer. */
#define COMP_RING 4096u
#define COMP_SESSION 64u           /* the emulated device's cqe_comp_caps.max_num */

static void comp_fill(volatile uint8_t *ring, uint32_t *pi, bool compressed)
{
    const uint32_t per = compressed ? COMP_SESSION : 1;
    for (uint32_t done = 0; done < COMP_RING; done += per, *pi += per) {
        uint8_t c[64];
        memset(c, 0, sizeof c);
        uint32_t v = htonl(compressed ? COMP_SESSION : 4096);
        memcpy(c + MLXD_CQE_OFF_BYTE_CNT, &v, 4);
        v = htonl(0x000123);
        memcpy(c + MLXD_CQE_OFF_SOP_DROP_QPN, &v, 4);
        uint16_t w = htons((uint16_t)*pi);
        memcpy(c + MLXD_CQE_OFF_WQE_COUNTER, &w, 2);
        if (compressed)
            for (uint32_t k = 0; k * 8 < COMP_SESSION; k++) {
                uint8_t arr[64];
                for (uint32_t j = 0; j < 8; j++) {
                    uint32_t h = htonl(0x5a5a0000u + k * 8 + j), b = htonl(4096);
                    memcpy(arr + 8 * j, &h, 4);
                    memcpy(arr + 8 * j + 4, &b, 4);
                }
                memcpy((void *)(ring + ((size_t)((*pi + (k ? 8 * k : 1)) & (COMP_RING - 1)) << 6)), arr, 64);
            }
        volatile uint8_t *d = ring + ((size_t)(*pi & (COMP_RING - 1)) << 6);
        memcpy((void *)d, c, 63);
        uint8_t op = (uint8_t)(MLXD_CQE_RESP_SEND << 4 | (compressed ? 3u << 2 : 0) | ((*pi & COMP_RING) ? 1 : 0));
        __atomic_store_n((uint8_t *)&d[63], op, __ATOMIC_RELEASE);
    }
}

#define COMP_DRAIN(KIND, B)                                                                       \
    __attribute__((noinline)) unsigned bench_##KIND##_drain_##B(struct mlxd_cq *cq)                \
    {                                                                                             \
        unsigned got = 0;                                                                         \
        while (got < COMP_RING) {                                                                 \
            int m = mlxd_cq_poll(cq, g_wc, B);                                                    \
            if (m <= 0) break;                                                                    \
            got += (unsigned)m;                                                                   \
        }                                                                                         \
        return got;                                                                               \
    }
COMP_DRAIN(full, 16)
COMP_DRAIN(full, 64)
COMP_DRAIN(comp, 16)
COMP_DRAIN(comp, 64)

static void bench_cqe_comp(void)
{
    static const int batches[2] = { 16, 64 };
    static unsigned (*const drain[2][2])(struct mlxd_cq *) = { { bench_full_drain_16, bench_full_drain_64 },
                                                               { bench_comp_drain_16, bench_comp_drain_64 } };
    for (int kind = 0; kind < 2; kind++) {
        for (int b = 0; b < 2; b++) {
            char name[48], what[240];
            snprintf(name, sizeof name, "cqe_%s_batch%d", kind ? "compressed" : "full", batches[b]);
            snprintf(what, sizeof what, "detached ring of %u, RESP_SEND %s, mlxd_cq_poll(max %d); per completion",
                     COMP_RING, kind ? "in sessions of 64 mini-CQEs (HASH)" : "as full CQEs", batches[b]);
            struct result *r = result_new(name, "ns/CQE", what);
            struct mlxd_detached_cq_opts o = { .sz = sizeof o, .cqe_comp = kind ? MLXD_CQE_COMP_HASH : 0 };
            struct mlxd_cq *cq = NULL;
            volatile void *ringv;
            uint32_t n;
            volatile uint32_t *dbrec;
            if (mlxd_cq_create_detached_opts(COMP_RING, &o, &cq) < 0 || mlxd_cq_ring(cq, &ringv, &n, &dbrec) < 0) {
                result_unavailable(r, "detached CQ: %s", mlxd_errmsg());
                continue;
            }
            size_t P = C.ring_passes;
            double *v = malloc(P * sizeof *v);
            uint32_t pi = 0;
            for (size_t pass = 0; pass < P + 5; pass++) {
                comp_fill((volatile uint8_t *)ringv, &pi, kind);
                uint64_t t0 = mlxd__tsc();
                unsigned got = drain[kind][b](cq);
                uint64_t t1 = mlxd__tsc();
                if (got != COMP_RING || g_wc[0].byte_len != 4096) {
                    result_unavailable(r, "poll returned %u of %u completions (byte_len %u)", got, COMP_RING,
                                       g_wc[0].byte_len);
                    break;
                }
                if (pass >= 5) v[pass - 5] = ticks_ns((double)(t1 - t0)) / COMP_RING;
                r->available = true;
            }
            if (r->available) {
                r->s = bench_stats_of(v, P);
                r->iters = P * COMP_RING;
            }
            free(v);
            mlxd_cq_destroy(cq);
        }
        /* CQ bytes read per completion, from the layout the pass was written in */
        char name[48], what[240];
        snprintf(name, sizeof name, "cqe_%s_bytes", kind ? "compressed" : "full");
        const double lines = kind ? 1.0 + (COMP_SESSION + 7) / 8 : COMP_SESSION;
        snprintf(what, sizeof what, "CQ bytes the poll loop reads per completion (%s)%s",
                 kind ? "title + 8 array slots per 64" : "one slot each",
                 kind ? "; plus 1 invalidation byte stored per slot" : "");
        struct result *r = result_new(name, "B/CQE", what);
        double bytes[1] = { lines * 64.0 / COMP_SESSION };
        r->s = bench_stats_of(bytes, 1);
        r->iters = 1;
        r->available = true;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* 2b. rings of the emulated NIC filled by the emulator (what libmlx5 is compared on)         */

static write_imm_fn g_write_imm;
static int (*g_park)(int);          /* mlxd_emu_bench_park, when the emulator has it */

static bool emu_hook(char *why, size_t len)
{
    if (!g_write_imm)
        g_write_imm = (write_imm_fn)dlsym(RTLD_DEFAULT, "mlxd_emu_bench_write_imm");
    if (!g_park) g_park = (int (*)(int))dlsym(RTLD_DEFAULT, "mlxd_emu_bench_park");
    if (!g_write_imm)
        snprintf(why, len, "the emulator's mlxd_emu_bench_write_imm is not loaded (not running on "
                 "libmlx5direct-emu.so: a real NIC writes its CQEs itself)");
    return g_write_imm != NULL;
}

#define EMU_RING 1024u

/* Named, never inlined, so that scripts/callgrind.sh can count their instructions (inclusive):
 * the same wrappers exist in mlxd-bench-verbs.c around ibv_poll_cq / ibv_start_poll. */
__attribute__((noinline)) int bench_empty_poll(struct mlxd_cq *cq)
{
    return mlxd_cq_poll(cq, g_wc, 16);
}
#define DRAIN(B)                                                                                  \
    __attribute__((noinline)) unsigned bench_drain_##B(struct mlxd_cq *cq)                        \
    {                                                                                             \
        unsigned got = 0;                                                                         \
        while (got < EMU_RING) {                                                                  \
            int m = mlxd_cq_poll(cq, g_wc, B);                                                    \
            if (m <= 0) break;                                                                    \
            got += (unsigned)m;                                                                   \
        }                                                                                         \
        return got;                                                                               \
    }
DRAIN(1)
DRAIN(4)
DRAIN(16)
DRAIN(64)
static unsigned (*const drains[4])(struct mlxd_cq *) = { bench_drain_1, bench_drain_4, bench_drain_16, bench_drain_64 };

static void bench_ring_emu(void)
{
    static const int batches[] = { 1, 4, 16, 64 };
    struct result *re = result_new("emu_empty_poll", "ns",
                                   "mlxd_cq_poll(cq, wc, 16) of an empty CQ of the emulated NIC (1024 CQEs, UC QP)");
    struct result *rb[4];
    for (int b = 0; b < 4; b++) {
        char name[48], what[160];
        snprintf(name, sizeof name, "emu_batch%d", batches[b]);
        snprintf(what, sizeof what, "CQ of the emulated NIC, %u RESP_WR_IMM CQEs written by the emulator, "
                 "mlxd_cq_poll(max %d) + re-post; per CQE", EMU_RING, batches[b]);
        rb[b] = result_new(name, "ns/CQE", what);
    }
    char why[300];
    if (!emu_hook(why, sizeof why)) {
        result_unavailable(re, "%s", why);
        for (int b = 0; b < 4; b++) result_unavailable(rb[b], "%s", why);
        return;
    }
    struct mlxd_nic *nic = NULL;
    struct mlxd_cq *cq = NULL;
    struct mlxd_qp *qp = NULL;
    struct mlxd_endpoint me;
    int rc;
    if ((rc = mlxd_open("mlx5_0", NULL, &nic)) < 0 || (rc = mlxd_cq_create(nic, EMU_RING, NULL, &cq)) < 0) goto fail;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UC, .recv_depth = EMU_RING };
    if ((rc = mlxd_qp_create(cq, &qo, &qp)) < 0 || (rc = mlxd_qp_endpoint(qp, &me)) < 0) goto fail;
    struct mlxd_connect_opts co = { .sz = sizeof co, .peer_access = MLXD_ACCESS_REMOTE_WRITE, .receive_only = true };
    if ((rc = mlxd_qp_connect(qp, &me, &co)) < 0) goto fail;
    struct mlxd_recv *rv = calloc(EMU_RING, sizeof *rv);
    for (uint32_t i = 0; i < EMU_RING; i++) rv[i].wr_id = i;
    /* empty */
    {
        const size_t S = C.emu_samples, K = 100;
        double *v = malloc(S * sizeof *v);
        int sink = 0;
        for (int i = 0; i < 10000; i++) sink += bench_empty_poll(cq);   /* warm-up */
        for (size_t i = 0; i < S; i++) {
            uint64_t t0 = mlxd__tsc();
            for (size_t k = 0; k < K; k++) sink += bench_empty_poll(cq);
            v[i] = ticks_ns((double)(mlxd__tsc() - t0)) / (double)K;
        }
        g_sink = sink;
        re->s = bench_stats_of(v, S);
        re->iters = S * K;
        re->available = true;
        free(v);
    }
    for (int b = 0; b < 4; b++) {
        size_t P = C.emu_passes;
        double *v = malloc(P * sizeof *v);
        for (size_t pass = 0; pass < P + 2; pass++) {
            if ((rc = mlxd_qp_receive(qp, rv, EMU_RING)) < 0) { free(v); goto fail; }
            for (uint32_t i = 0; i < EMU_RING; i++) {
                if ((rc = g_write_imm(0, me.qpn, i & 0xfff, 4096, NULL)) < 0) {
                    mlxd_err(-rc, "mlxd_emu_bench_write_imm: %s", strerror(-rc));
                    free(v);
                    goto fail;
                }
            }
            uint64_t t0 = mlxd__tsc();
            uint32_t got = drains[b](cq);
            uint64_t t1 = mlxd__tsc();
            if (got != EMU_RING) {
                result_unavailable(rb[b], "poll consumed %u of %u CQEs", got, EMU_RING);
                break;
            }
            if (pass >= 2) v[pass - 2] = ticks_ns((double)(t1 - t0)) / EMU_RING;
            rb[b]->available = true;
        }
        if (rb[b]->available) {
            rb[b]->s = bench_stats_of(v, P);
            rb[b]->iters = P * EMU_RING;
        }
        free(v);
    }
    free(rv);
    mlxd_close(nic);
    return;
fail:
    snprintf(why, sizeof why, "%s", mlxd_errmsg());
    if (!re->available) result_unavailable(re, "%s", why);
    for (int b = 0; b < 4; b++)
        if (!rb[b]->available) result_unavailable(rb[b], "%s", why);
    if (nic) mlxd_close(nic);
}

/* ---------------------------------------------------------------------------------------- */
/* 3. hand-off latency: CQE valid in the receiver's ring -> get_next_frame returns             */

#define HO_FRAME 4096u
#define HO_PAGES 16u

struct handoff {
    struct mlxd_receiver *r;
    uint8_t *buf;
    size_t page_size, md_off;
    uint32_t qpn;
    size_t n;
    bool inline_producer;
    bool event;
    double gap_ns;
    _Atomic uint64_t consumed;   /* frames the consumer got */
    _Atomic uint64_t *t0;        /* per frame: TSC before the op_own store (0: not yet) */
    double *lat;                 /* ns */
    int mon_rc;
    char mon_err[300];
    _Atomic int prod_rc;
};

static void *ho_monitor(void *arg)
{
    struct handoff *h = arg;
    pin_self(C.cpu_monitor);
    h->mon_rc = mlxd_receiver_blocking_monitor(h->r);
    if (h->mon_rc < 0) snprintf(h->mon_err, sizeof h->mon_err, "%s", mlxd_errmsg());
    return NULL;
}

/* Writes frame i's metadata block (as the device's DMA does) and its CQE; returns the TSC. */
static int ho_produce(struct handoff *h, uint64_t i)
{
    uint32_t page = (uint32_t)(i % HO_PAGES), psn = (uint32_t)(i & 0xfffff);
    struct mlxd_hsb_metadata md = { .psn = psn, .bytes_written = HO_FRAME, .frame_number32 = (uint32_t)i };
    mlxd_hsb_metadata_encode(&md, h->buf + page * h->page_size + h->md_off, 128);
    uint32_t imm = mlxd_hsb_imm_make(page, psn, MLXD_HSB_IMM_12_20);
    uint64_t t0 = 0;
    int rc;
    while ((rc = g_write_imm(0, h->qpn, imm, HO_FRAME + 128, &t0)) == -EAGAIN) cpu_relax();
    if (rc < 0) return rc;
    atomic_store_explicit(&h->t0[i], t0, memory_order_release);
    return 0;
}

/* One store per 4 KiB into [p, p + len): the pages exist before a timed loop writes them. */
static void prefault(void *p, size_t len)
{
    volatile char *v = p;
    for (size_t i = 0; v && i < len; i += 4096) v[i] = 0;
}

static void gap(double ns)
{
    if (ns <= 0) return;
    uint64_t end = mlxd__tsc() + (uint64_t)(ns * g_tsc_hz / 1e9);
    while (mlxd__tsc() < end) cpu_relax();
}

static void *ho_producer(void *arg)
{
    struct handoff *h = arg;
    pin_self(C.cpu_producer);
    for (uint64_t i = 0; i < h->n; i++) {
        while (atomic_load_explicit(&h->consumed, memory_order_acquire) < i) cpu_relax();
        gap(h->gap_ns);
        int rc = ho_produce(h, i);
        if (rc < 0) { atomic_store(&h->prod_rc, rc); return NULL; }
    }
    return NULL;
}

/* The timed loop: frame i produced (inline, or by ho_producer once frame i - 1 was consumed),
 * the consumer spinning in get_next_frame(timeout 0) until it comes; h->lat[i] the hand-off.
 * Returns false when a frame did not come within 5 s, came out of order (*rc -EPROTO) or could
 * not be produced (*rc). */
static bool ho_measure(struct handoff *h, bool inl, int *rc)
{
    struct mlxd_receiver_frame f;
    for (uint64_t i = 0; i < h->n; i++) {
        if (inl) {
            gap(h->gap_ns);
            if ((*rc = ho_produce(h, i)) < 0) return false;
        }
        uint64_t t1;
        double deadline = bench_mono_raw_s() + 5;
        for (unsigned spin = 1;; spin++) {
            if (mlxd_receiver_get_next_frame(h->r, 0, &f)) { t1 = mlxd__tsc(); break; }
            /* the clock only now and then: between two calls of get_next_frame is the resolution */
            if ((spin & 1023) == 0 && (atomic_load(&h->prod_rc) < 0 || bench_mono_raw_s() > deadline))
                return false;
            cpu_relax();
        }
        uint64_t idx = f.received_frame_number - 1, t0;
        if (idx != i) { *rc = -EPROTO; return false; }     /* lock-step: frame i is the i-th */
        while (!(t0 = atomic_load_explicit(&h->t0[idx], memory_order_acquire))) cpu_relax();
        h->lat[i] = ticks_ns((double)(int64_t)(t1 - t0));
        atomic_store_explicit(&h->consumed, i + 1, memory_order_release);
    }
    return true;
}

/* --plot-dir: DIR/<name>.dat, the samples (sorted by bench_stats_of) with their cumulative
 * fraction. */
static void write_plot(const char *name, const double *lat, size_t n)
{
    if (!C.plot_dir) return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.dat", C.plot_dir, name);
    FILE *fp = fopen(path, "w");
    if (!fp) return;
    fprintf(fp, "# %s: ns, cumulative fraction (%zu samples)\n", name, n);
    for (size_t i = 0; i < n; i++) fprintf(fp, "%.1f %.6f\n", lat[i], (double)(i + 1) / (double)n);
    fclose(fp);
}

/* The hand-off's buffers, sample arrays (written once now: calloc's fresh pages fault on their
 * first write, which inside the loop put a ~1.5 us page fault into every 512th sample) and
 * receiver, started.  false with r unavailable when it cannot. */
static bool ho_setup(struct handoff *h, bool event, bool inl, struct result *r)
{
    memset(h, 0, sizeof *h);
    h->n = event ? C.handoff_event_iters : C.handoff_iters;
    h->inline_producer = inl;
    h->event = event;
    h->gap_ns = event ? 30000 : 500;       /* event: let the monitor fall asleep in poll() */
    h->page_size = mlxd_hsb_min_page_size(HO_FRAME);
    h->md_off = mlxd_hsb_metadata_offset(HO_FRAME);
    size_t size = h->page_size * HO_PAGES;
    if (posix_memalign((void **)&h->buf, 4096, size)) { h->buf = NULL; result_unavailable(r, "out of memory"); return false; }
    memset(h->buf, 0, size);
    h->t0 = calloc(h->n, sizeof *h->t0);
    h->lat = calloc(h->n, sizeof *h->lat);
    /* Volatile stores: a memset of zeros after calloc is removed by the compiler. */
    prefault(h->t0, h->n * sizeof *h->t0);
    prefault(h->lat, h->n * sizeof *h->lat);
    h->r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .port = 1, .buffer = (uintptr_t)h->buf,
        .buffer_size = size, .frame_size = HO_FRAME, .page_size = h->page_size, .pages = HO_PAGES,
        .metadata_offset = h->md_off, .peer_ip = "127.0.0.1", .queue_size = HO_PAGES,
        .mode = event ? MLXD_RECEIVER_EVENT : MLXD_RECEIVER_BUSY_POLL };
    if (mlxd_receiver_start(h->r, &o) < 0) {
        result_unavailable(r, "mlxd_receiver_start: %s", mlxd_errmsg());
        return false;
    }
    h->qpn = mlxd_receiver_qp_number(h->r);
    return true;
}

static void bench_handoff(bool event)
{
    char name[48], what[240];
    bool inl = C.producer_mode ? !strcmp(C.producer_mode, "inline") : C.ncpus < 3;
    snprintf(name, sizeof name, "handoff_%s", event ? "event" : "busy");
    snprintf(what, sizeof what, "CQE op_own store (TSC) -> mlxd_receiver_get_next_frame returns; %s monitor; "
             "producer %s; consumer spins get_next_frame(timeout 0)%s", event ? "event" : "busy-poll",
             inl ? "= the consumer thread (inline)" : "thread",
             event || C.no_park ? "" : "; emulator engine parked");
    struct result *r = result_new(name, "ns", what);
    char why[300];
    if (!emu_hook(why, sizeof why)) { result_unavailable(r, "%s", why); return; }
    struct handoff h;
    if (!ho_setup(&h, event, inl, r))
        goto out;
    pthread_t mon, prod;
    pthread_create(&mon, NULL, ho_monitor, &h);
    pin_self(C.cpu_consumer);
    /* the consumer's first get_next_frame call ends the "newest only" phase (receiver.md) */
    struct mlxd_receiver_frame f;
    mlxd_receiver_get_next_frame(h.r, 0, &f);
    bool prod_started = false;
    if (!inl) prod_started = pthread_create(&prod, NULL, ho_producer, &h) == 0;
    /* busy-poll: the emulator's engine has nothing to do here (the producer writes the CQEs), and
     * its idle wake-ups on the consumer's CPU would be counted as hand-off time; park it */
    bool parked = !event && g_park && !C.no_park && g_park(1) == 0;
    int rc = 0;
    bool failed = !ho_measure(&h, inl, &rc);
    if (parked) g_park(0);
    if (prod_started) {
        if (failed) atomic_store(&h.consumed, UINT64_MAX);
        pthread_join(prod, NULL);
    }
    if (atomic_load(&h.prod_rc) < 0) rc = atomic_load(&h.prod_rc);
    mlxd_receiver_close(h.r);
    pthread_join(mon, NULL);
    if (failed) {
        result_unavailable(r, "%s", rc == -EPROTO ? "a frame came out of order (lock-step broken)" :
                           rc < 0 ? strerror(-rc) : h.mon_rc < 0 ? h.mon_err : "a frame did not arrive within 5 s");
        goto out;
    }
    /* plot data: the sorted samples (before stats_of sorts them anyway) */
    r->s = bench_stats_of(h.lat, h.n);
    r->iters = h.n;
    r->available = true;
    write_plot(name, h.lat, h.n);
out:
    mlxd_receiver_destroy(h.r);
    free(h.buf);
    free(h.t0);
    free(h.lat);
}

/* ---------------------------------------------------------------------------------------- */
/* 4. end to end: generator -> emulated wire -> emulated NIC -> receiver -> consumer          */

struct e2e {
    struct mlxd_receiver *r;
    struct mlxd_replay_map map;
    struct mlxd_send_opts so;
    struct mlxd_gen_opts g;
    struct mlxd_send_stats st;
    int gen_rc;
    _Atomic bool gen_done;
    int mon_rc;
    _Atomic uint64_t seen;       /* 1 + the highest generator frame number the consumer took */
    uint64_t window;             /* frames in flight the generator allows itself */
    uint64_t window_timeouts;    /* frames it stopped waiting for (lost on the wire) */
    bool nap;                    /* the consumer sleeps when its queue is empty */
    double t0, t_last;           /* the generator's start; when the consumer took the last frame */
    struct mlxd_emu_nic_stats es;   /* the emulated port's counters at the end (have_es) */
    bool have_es;
    /* CPU time (ns) of the generator, monitor and consumer threads over the run, and of the
     * whole process: the rest is the emulated NIC's engine thread */
    uint64_t cpu_gen, cpu_mon, cpu_con, cpu_all;
};

static uint64_t cpu_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define E2E_NAP_NS 100000     /* the nap consumer's sleep when its queue is empty */

/* The generator's flow control (a sensor bridge has none): frame k is sent only once the consumer
 * has taken frame k - window (by the frame number in its metadata, so that a frame lost on the
 * emulated UC wire does not hold the window), so that what is measured is the rate sustained
 * without overrunning the emulated wire; the wait gives up after 100 ms. */
static bool e2e_window(void *ctx, uint64_t frame)
{
    struct e2e *e = ctx;
    double end = 0;
    while (frame + 1 > atomic_load_explicit(&e->seen, memory_order_acquire) + e->window) {
        if (!end) end = bench_mono_raw_s() + 0.1;
        else if (bench_mono_raw_s() > end) { e->window_timeouts++; break; }
        struct timespec ts = { 0, 20000 };     /* leave the CPU to the engine and the consumer */
        nanosleep(&ts, NULL);
    }
    return true;
}

static void *e2e_monitor(void *arg)
{
    struct e2e *e = arg;
    pin_self(C.cpu_monitor);
    uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    e->mon_rc = mlxd_receiver_blocking_monitor(e->r);
    e->cpu_mon = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

static void *e2e_gen(void *arg)
{
    struct e2e *e = arg;
    pin_self(C.cpu_producer >= 0 ? C.cpu_producer : C.cpu_consumer);
    uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    e->gen_rc = mlxd_gen_run(&e->map, &e->g, &e->so, &e->st);
    e->cpu_gen = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    atomic_store(&e->gen_done, true);
    return NULL;
}

/* Default geometry: pages enough for 4 MiB (3 ms at 10 Gb/s, so that a consumer that naps
 * 100 us, or is descheduled for a while, does not hold the generator), at least 16 (8 from
 * 1 MiB frames, 4 from 4 MiB), at most 4096; the window half the pages (the device then never
 * comes back to a page the consumer has not taken) and half the receives posted (the monitor
 * re-posts in batches: the port never runs out of receives). */
static unsigned e2e_default_pages(uint64_t fsize, size_t page)
{
    unsigned min = fsize >= (4u << 20) ? 4 : fsize >= (1u << 20) ? 8 : 16;
    uint64_t want = ((4u << 20) + page - 1) / page;
    return want > 4096 ? 4096 : want > min ? (unsigned)want : min;
}

/* Starts the receiver and sets up the generator's map and options.  false (row->reason set) on
 * failure, with nothing left started. */
static bool e2e_start(struct e2e *e, struct e2e_row *row, uint64_t fsize, bool event, uint8_t **bufp)
{
    size_t page = mlxd_hsb_min_page_size(fsize);
    unsigned pages = C.e2e_pages ? C.e2e_pages : e2e_default_pages(fsize, page);
    size_t size = page * pages;
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, size)) { snprintf(row->reason, sizeof row->reason, "out of memory"); return false; }
    memset(buf, 0, size);
    uint64_t frames = (uint64_t)(C.e2e_mb * 1048576.0 / (double)fsize);
    if (frames < 16) frames = 16;
    if (frames > 20000) frames = 20000;
    e->r = mlxd_receiver_new();
    unsigned depth = C.e2e_recv_depth ? C.e2e_recv_depth : 256;    /* the receiver's default */
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .port = 1, .buffer = (uintptr_t)buf,
        .buffer_size = size, .frame_size = fsize, .page_size = page, .pages = pages,
        .metadata_offset = mlxd_hsb_metadata_offset(fsize), .peer_ip = "127.0.0.1",
        .queue_size = C.e2e_queue ? C.e2e_queue : pages, .recv_depth = C.e2e_recv_depth,
        .mode = event ? MLXD_RECEIVER_EVENT : MLXD_RECEIVER_BUSY_POLL };
    if (mlxd_receiver_start(e->r, &o) < 0) {
        snprintf(row->reason, sizeof row->reason, "mlxd_receiver_start: %s", mlxd_errmsg());
        mlxd_receiver_destroy(e->r);
        free(buf);
        return false;
    }
    uint32_t lip = mlxd_receiver_local_ipv4(e->r);
    static char dst[32];
    snprintf(dst, sizeof dst, "%u.%u.%u.%u", lip >> 24, (lip >> 16) & 255, (lip >> 8) & 255, lip & 255);
    e->map = (struct mlxd_replay_map){ .qpn = mlxd_receiver_qp_number(e->r), .rkey = mlxd_receiver_rkey(e->r),
                                       .base_va = mlxd_receiver_external_frame_memory(e->r),
                                       .page_size = page, .pages = pages };
    uint64_t half = (pages < depth ? pages : depth) / 2;
    e->window = C.e2e_window < 0 ? (half ? half : 1) : (uint64_t)C.e2e_window;
    e->so = (struct mlxd_send_opts){ .sz = sizeof e->so, .dst_ip = dst, .src_ip = "127.0.0.1",
                                     .sent_frame = e->window ? e2e_window : NULL, .ctx = e };
    e->g = (struct mlxd_gen_opts){ .sz = sizeof e->g, .frame_size = fsize, .frames = frames, .first_page = 1,
                                   .payload_size = C.e2e_packet };
    *bufp = buf;
    return true;
}

/* The consumer: takes frames (nap: without waiting, and sleeps E2E_NAP_NS when none is queued;
 * spin: get_next_frame with a timeout, which spins while frames keep coming) until the
 * generator is done and the last frame is in or 0.3 s passed without one. */
static void e2e_consume(struct e2e *e)
{
    struct mlxd_receiver_frame f;
    uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    mlxd_receiver_get_next_frame(e->r, 0, &f);      /* the consumer is ready: frames queue */
    e->t0 = e->t_last = bench_mono_raw_s();
    for (;;) {
        if (mlxd_receiver_get_next_frame(e->r, e->nap ? 0 : 20, &f)) {
            uint64_t fn = (uint64_t)f.metadata.frame_number32 + 1;    /* the generator's frame k */
            if (fn > atomic_load_explicit(&e->seen, memory_order_relaxed))
                atomic_store_explicit(&e->seen, fn, memory_order_release);
            e->t_last = bench_mono_raw_s();
            continue;
        }
        if (atomic_load(&e->gen_done) && !mlxd_receiver_frames_ready(e->r)) {
            struct mlxd_receiver_stats st;      /* (reads sysfs: only once the generator is done) */
            mlxd_receiver_stats(e->r, &st);
            if (st.frames >= e->g.frames || bench_mono_raw_s() - e->t_last > 0.3) break;
        }
        if (bench_mono_raw_s() - e->t0 > 60) break;
        if (e->nap) {
            /* the queue is empty: sleep instead of spinning, so that the CPU goes to the
             * generator and the emulated NIC; what came meanwhile is taken in one go */
            struct timespec ts = { 0, E2E_NAP_NS };
            nanosleep(&ts, NULL);
        }
    }
    e->cpu_con = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
}

/* Where the frames that were sent but not received went, and those the consumer never saw:
 * the note after the row ("" when every frame was received and taken). */
static void e2e_note(struct e2e_row *row, const struct e2e *e, const struct mlxd_receiver_stats *st)
{
    char *n = row->note;
    size_t cap = sizeof row->note, len = 0;
#define NOTE(...) do { if (len < cap) len += (size_t)snprintf(n + len, cap - len, __VA_ARGS__); } while (0)
    uint64_t missing = row->sent > row->received ? row->sent - row->received : 0;
    if (missing) {
        uint64_t no_recv = st->hw_counters_valid ? st->out_of_buffer : st->hw_drops;
        NOTE("  (%" PRIu64 " not received: %" PRIu64 " packets dropped for want of a posted receive", missing, no_recv);
        if (e->have_es) NOTE(", %" PRIu64 " packets lost before the port (its socket full)", e->es.rx_dropped_socket);
        NOTE(")");
    }
    if (st->dropped) NOTE("  (%" PRIu64 " received but dropped from the full queue)", st->dropped);
    if (row->timeouts) NOTE("  (the window waited 100 ms %" PRIu64 " times)", row->timeouts);
#undef NOTE
}

/* Where the CPU time went, per frame received: the profile of the run in four numbers (CPU
 * time, not wall time: what other work on the machine takes does not count) and the frame rate
 * they would allow if the threads had the machine's CPUs to themselves. */
static void e2e_say_cpu(const struct e2e *e, uint64_t frames, const char *mode, uint64_t fsize)
{
    if (!frames) return;
    uint64_t known = e->cpu_gen + e->cpu_mon + e->cpu_con;
    double nic = e->cpu_all > known ? (double)(e->cpu_all - known) : 0;
    double us = 1e3 * (double)frames;
    double total = (double)e->cpu_all / us;
    say("mlxd-bench: e2e %" PRIu64 " B %s: CPU per frame: generator %.1f us, emulated NIC %.1f us, "
        "monitor %.1f us, consumer %.1f us; %.1f us in all (%d CPUs: at most %.1f Gb/s)\n",
        fsize, mode, (double)e->cpu_gen / us, nic / us, (double)e->cpu_mon / us, (double)e->cpu_con / us,
        total, C.ncpus, total > 0 ? C.ncpus * 1e6 / total * (double)fsize * 8 / 1e9 : 0);
}

static void bench_e2e_one(uint64_t fsize, bool event, bool nap, const char *name)
{
    struct e2e_row *row = &g_e2e[g_ne2e < MAX_E2E - 1 ? g_ne2e++ : g_ne2e];
    memset(row, 0, sizeof *row);
    row->frame_size = fsize;
    row->mode = name;
    struct e2e e;
    memset(&e, 0, sizeof e);
    e.nap = nap;
    uint8_t *buf = NULL;
    if (!e2e_start(&e, row, fsize, event, &buf)) return;
    pthread_t mon, gen;
    uint64_t c0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    pthread_create(&mon, NULL, e2e_monitor, &e);
    pin_self(C.cpu_consumer);
    pthread_create(&gen, NULL, e2e_gen, &e);
    e2e_consume(&e);
    pthread_join(gen, NULL);
    struct mlxd_receiver_stats st;
    mlxd_receiver_stats(e.r, &st);
    /* the emulated port's counters (emu/mlxd_emu.h, found with dlsym), while it is still open */
    int (*nic_stats)(unsigned, struct mlxd_emu_nic_stats *) =
        (int (*)(unsigned, struct mlxd_emu_nic_stats *))dlsym(RTLD_DEFAULT, "mlxd_emu_nic_stats");
    e.es.sz = sizeof e.es;
    e.have_es = nic_stats && nic_stats(0, &e.es) == 0;
    mlxd_receiver_close(e.r);
    pthread_join(mon, NULL);
    e.cpu_all = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
    e2e_say_cpu(&e, st.frames, row->mode, fsize);
    row->window = e.window;
    row->timeouts = e.window_timeouts;
    row->sent = e.st.frames;
    row->received = st.frames;
    row->seconds = e.t_last - e.t0;
    if (e.gen_rc < 0) {
        snprintf(row->reason, sizeof row->reason, "generator: %d", e.gen_rc);
    } else if (row->seconds > 0 && st.frames) {
        row->fps = (double)st.frames / row->seconds;
        row->gbps = row->fps * (double)fsize * 8 / 1e9;
        row->send_gbps = (double)e.st.bytes * 8 / 1e9 / row->seconds;
        row->ok = true;
        e2e_note(row, &e, &st);
    } else {
        snprintf(row->reason, sizeof row->reason, "no frame received");
    }
    mlxd_receiver_destroy(e.r);
    free(buf);
}

static void bench_e2e(void)
{
    static const struct { const char *mode, *consumer, *name; } runs[] = {
        { "busy", "nap", "busy/nap" }, { "busy", "spin", "busy/spin" },
        { "event", "nap", "event/nap" }, { "event", "spin", "event/spin" },
    };
    char sizes[256];
    snprintf(sizes, sizeof sizes, "%s", C.e2e_sizes);
    for (char *s = strtok(sizes, ","); s; s = strtok(NULL, ",")) {
        uint64_t fs = strtoull(s, NULL, 0);
        if (!fs) continue;
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            if (!strstr(C.e2e_modes, runs[i].mode) || !strstr(C.e2e_consumers, runs[i].consumer)) continue;
            say("mlxd-bench: e2e %" PRIu64 " B, %s monitor, %s consumer...\n", fs, runs[i].mode, runs[i].consumer);
            bench_e2e_one(fs, !strcmp(runs[i].mode, "event"), !strcmp(runs[i].consumer, "nap"), runs[i].name);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* 5. rdma-core's libmlx5 on the same emulated rings (tools/mlxd-bench-verbs.c)                */

/* 127.0.<n>.1/.2 with UDP 4791 free on both (each emulator instance binds its ports). */
static bool udp_free(unsigned n, unsigned host)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return true;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4791),
                             .sin_addr.s_addr = htonl(0x7f000000u | n << 8 | host) };
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static void emu_devices(char *out, size_t len, unsigned start)
{
    unsigned base = start + (unsigned)getpid() % 97;
    for (unsigned k = 0; k < 250; k++) {
        unsigned n = 1 + (base + k) % 250;
        if (udp_free(n, 1) && udp_free(n, 2)) {
            snprintf(out, len, "mlx5_0:127.7.%u.1:mtu=4096,mlx5_1:127.7.%u.2:mtu=4096", n, n);
            return;
        }
    }
    snprintf(out, len, "mlx5_0:127.0.0.1:mtu=4096,mlx5_1:127.0.0.2:mtu=4096");
}

static void bench_compare(const char *self_dir)
{
    char exe[PATH_MAX + 32];
    snprintf(exe, sizeof exe, "%.4000s/mlxd-bench-verbs", self_dir);
    if (access(exe, X_OK)) {
        g_cmp_ok = false;
        snprintf(g_cmp_reason, sizeof g_cmp_reason, "%.500s is not built", exe);
        return;
    }
    char devs[160], cmd[PATH_MAX + 640], hz[64], cpu[32] = "";
    emu_devices(devs, sizeof devs, 131);
    snprintf(hz, sizeof hz, "%.0f", g_tsc_hz);
    if (C.cpu_consumer >= 0) snprintf(cpu, sizeof cpu, " --cpu %d", C.cpu_consumer);
    /* the child gets its own emulated devices (ours still hold their UDP ports) */
    snprintf(cmd, sizeof cmd, "MLXD_EMU_DEVICES='%s' MLXD_EMU_SPIN_US=0 '%s' --csv --tsc-hz %s --passes %zu "
             "--samples %zu%s 2>&1", devs, exe, hz, C.emu_passes, C.emu_samples, cpu);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(g_cmp_reason, sizeof g_cmp_reason, "popen %.400s: %s", exe, strerror(errno));
        return;
    }
    char line[1024];
    g_cmp_reason[0] = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "unavailable,", 12)) {
            snprintf(g_cmp_reason, sizeof g_cmp_reason, "%.590s", line + 12);
            continue;
        }
        if (!strncmp(line, "verbs_", 6) && g_ncmp < MAX_RESULTS) {
            struct cmp_row *c = &g_cmp[g_ncmp];
            char name[48];
            if (sscanf(line, "%47[^,],%*[^,],%zu,%*f,%lf,%lf,%*f,%lf", name, &c->iters, &c->typical, &c->avg,
                       &c->p99) == 5) {
                snprintf(c->name, sizeof c->name, "%s", name);
                g_ncmp++;
            }
        }
    }
    int st = pclose(p);
    g_cmp_ok = g_ncmp > 0;
    if (!g_cmp_ok && !g_cmp_reason[0])
        snprintf(g_cmp_reason, sizeof g_cmp_reason, "mlxd-bench-verbs printed no result (exit status %d)",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static const struct cmp_row *cmp_find(const char *name)
{
    for (int i = 0; i < g_ncmp; i++)
        if (!strcmp(g_cmp[i].name, name)) return &g_cmp[i];
    return NULL;
}

static const struct result *res_find(const char *name)
{
    for (int i = 0; i < g_nres; i++)
        if (!strcmp(g_res[i].name, name) && g_res[i].available) return &g_res[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* output                                                                                     */

static char g_pinning[256];
static char g_load0[64], g_load1[64];   /* /proc/loadavg before and after */

static void read_load(char *out, size_t len)
{
    FILE *f = fopen("/proc/loadavg", "r");
    out[0] = 0;
    if (f && fgets(out, (int)len, f)) out[strcspn(out, "\n")] = 0;
    if (f) fclose(f);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void print_table(FILE *f)
{
    struct utsname u;
    uname(&u);
    fprintf(f, "mlxd-bench: %s %s, %d CPUs online\n", u.sysname, u.release, C.ncpus);
    fprintf(f, "TSC: %.3f MHz (%s)\n", g_tsc_hz / 1e6, g_tsc_how);
    fprintf(f, "pinning: %s\n", g_pinning);
    fprintf(f, "load (/proc/loadavg) before: %s; after: %s%s\n", g_load0, g_load1,
            atof(g_load0) > 0.5 * C.ncpus || atof(g_load1) > 0.5 * C.ncpus
                ? "  -- other work shares these CPUs: tails and medians are inflated" : "");
    fprintf(f, "percentiles: nearest rank; t_typical = median; t_max = the true maximum\n\n");
    fprintf(f, "%-18s %10s %9s %9s %9s %9s %9s %9s %10s  %s\n", "#test", "#iter", "t_min", "t_typical",
            "t_avg", "t_stdev", "99%", "99.9%", "t_max", "unit");
    for (int i = 0; i < g_nres; i++) {
        const struct result *r = &g_res[i];
        if (!r->available) {
            fprintf(f, "%-18s unavailable: %s\n", r->name, r->reason);
            continue;
        }
        fprintf(f, "%-18s %10zu %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f  %s\n", r->name, r->iters, r->s.min,
                r->s.typical, r->s.avg, r->s.stdev, r->s.p99, r->s.p999, r->s.max, r->unit);
        if (r->instr >= 0) fprintf(f, "%-18s %10s instructions per poll: %.1f (%s)\n", "", "", r->instr, r->instr_note);
        else if (r->instr_note[0]) fprintf(f, "%-18s %10s instructions: unavailable: %s\n", "", "", r->instr_note);
    }
    if (g_ne2e) {
        fprintf(f, "\n%-8s %-10s %10s %10s %10s %12s %10s %10s %7s\n", "#e2e", "mode", "frame_B", "sent", "received",
                "frames/s", "Gb/s", "seconds", "window");
        for (int i = 0; i < g_ne2e; i++) {
            const struct e2e_row *e = &g_e2e[i];
            if (!e->ok) {
                fprintf(f, "%-8s %-10s %10" PRIu64 " unavailable: %s\n", "e2e", e->mode, e->frame_size, e->reason);
                continue;
            }
            fprintf(f, "%-8s %-10s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %12.1f %10.3f %10.3f %7" PRIu64 "%s\n", "e2e",
                    e->mode, e->frame_size, e->sent, e->received, e->fps, e->gbps, e->seconds, e->window, e->note);
        }
    }
    if (want("compare")) {
        fprintf(f, "\nrdma-core libmlx5 on the same emulated rings (ratio = mlx5direct / libmlx5, median):\n");
        if (!g_cmp_ok) {
            fprintf(f, "  unavailable: %s\n", g_cmp_reason);
        } else {
            static const char *pairs[][2] = {
                { "emu_empty_poll", "verbs_poll_cq_empty" }, { "emu_empty_poll", "verbs_start_poll_empty" },
                { "emu_batch1", "verbs_poll_cq_batch1" }, { "emu_batch4", "verbs_poll_cq_batch4" },
                { "emu_batch16", "verbs_poll_cq_batch16" }, { "emu_batch64", "verbs_poll_cq_batch64" },
                { "emu_batch64", "verbs_next_poll_batch64" },
            };
            int shown = 0;
            for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
                const struct result *a = res_find(pairs[i][0]);
                const struct cmp_row *b = cmp_find(pairs[i][1]);
                if (a && b && b->typical > 0) {
                    fprintf(f, "  %-16s %8.2f ns  vs %-24s %8.2f ns   ratio %.2f\n", pairs[i][0], a->s.typical,
                            pairs[i][1], b->typical, a->s.typical / b->typical);
                    shown++;
                }
            }
            if (!shown) {
                fprintf(f, "  no ratio: the emu-ring tests did not run (add emu-ring to --tests); libmlx5 alone:\n");
                for (int i = 0; i < g_ncmp; i++)
                    fprintf(f, "  %-24s %8.2f ns (median)\n", g_cmp[i].name, g_cmp[i].typical);
            }
            if (g_cmp_reason[0]) fprintf(f, "  note: %s\n", g_cmp_reason);
        }
    }
}

static void print_csv(FILE *f)
{
    fprintf(f, "test,unit,iterations,t_min,t_typical,t_avg,t_stdev,p99,p99_9,t_max,instructions\n");
    for (int i = 0; i < g_nres; i++) {
        const struct result *r = &g_res[i];
        if (!r->available) { fprintf(f, "%s,unavailable,0,,,,,,,,\n", r->name); continue; }
        fprintf(f, "%s,%s,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,", r->name, r->unit, r->iters, r->s.min,
                r->s.typical, r->s.avg, r->s.stdev, r->s.p99, r->s.p999, r->s.max);
        if (r->instr >= 0) fprintf(f, "%.2f", r->instr);
        fputc('\n', f);
    }
    for (int i = 0; i < g_ncmp; i++)         /* libmlx5 (what mlxd-bench-verbs reported) */
        fprintf(f, "%s,ns,%zu,,%.3f,%.3f,,%.3f,,,\n", g_cmp[i].name, g_cmp[i].iters, g_cmp[i].typical,
                g_cmp[i].avg, g_cmp[i].p99);
    if (g_ne2e) {
        fprintf(f, "\ne2e,mode,frame_size,sent,received,seconds,frames_per_s,gbps,window\n");
        for (int i = 0; i < g_ne2e; i++) {
            const struct e2e_row *e = &g_e2e[i];
            fprintf(f, "e2e,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.4f,%.2f,%.4f,%" PRIu64 "\n", e->mode, e->frame_size,
                    e->sent, e->received, e->seconds, e->ok ? e->fps : 0, e->ok ? e->gbps : 0, e->window);
        }
    }
}

static void print_json(FILE *f)
{
    struct utsname u;
    uname(&u);
    fprintf(f, "{\"tool\":\"mlxd-bench\",\"kernel\":");
    json_str(f, u.release);
    fprintf(f, ",\"cpus_online\":%d,\"tsc_hz\":%.0f,\"tsc_method\":", C.ncpus, g_tsc_hz);
    json_str(f, g_tsc_how);
    fprintf(f, ",\"pinning\":");
    json_str(f, g_pinning);
    fprintf(f, ",\"loadavg_before\":");
    json_str(f, g_load0);
    fprintf(f, ",\"loadavg_after\":");
    json_str(f, g_load1);
    fprintf(f, ",\"percentiles\":\"nearest rank\",\"results\":[");
    for (int i = 0; i < g_nres; i++) {
        const struct result *r = &g_res[i];
        fprintf(f, "%s{\"test\":", i ? "," : "");
        json_str(f, r->name);
        fprintf(f, ",\"what\":");
        json_str(f, r->what);
        if (!r->available) {
            fprintf(f, ",\"available\":false,\"reason\":");
            json_str(f, r->reason);
            fputc('}', f);
            continue;
        }
        fprintf(f, ",\"available\":true,\"unit\":");
        json_str(f, r->unit);
        fprintf(f, ",\"iterations\":%zu,\"t_min\":%.3f,\"t_typical\":%.3f,\"t_avg\":%.3f,\"t_stdev\":%.3f,"
                "\"percentile_99\":%.3f,\"percentile_99.9\":%.3f,\"t_max\":%.3f", r->iters, r->s.min, r->s.typical,
                r->s.avg, r->s.stdev, r->s.p99, r->s.p999, r->s.max);
        if (r->instr >= 0) fprintf(f, ",\"instructions\":%.2f", r->instr);
        else if (r->instr_note[0]) { fprintf(f, ",\"instructions_unavailable\":"); json_str(f, r->instr_note); }
        fputc('}', f);
    }
    fprintf(f, "],\"e2e\":[");
    for (int i = 0; i < g_ne2e; i++) {
        const struct e2e_row *e = &g_e2e[i];
        fprintf(f, "%s{\"mode\":\"%s\",\"frame_size\":%" PRIu64 ",\"sent\":%" PRIu64 ",\"received\":%" PRIu64
                ",\"seconds\":%.4f,\"fps\":%.2f,\"gbps\":%.4f,\"window\":%" PRIu64 ",\"window_timeouts\":%" PRIu64
                ",\"ok\":%s", i ? "," : "", e->mode, e->frame_size, e->sent, e->received, e->seconds, e->fps, e->gbps,
                e->window, e->timeouts, e->ok ? "true" : "false");
        if (!e->ok) { fprintf(f, ",\"reason\":"); json_str(f, e->reason); }
        fputc('}', f);
    }
    fprintf(f, "],\"libmlx5\":{\"available\":%s", g_cmp_ok ? "true" : "false");
    if (g_cmp_reason[0]) { fprintf(f, ",\"note\":"); json_str(f, g_cmp_reason); }
    fprintf(f, ",\"results\":[");
    for (int i = 0; i < g_ncmp; i++)
        fprintf(f, "%s{\"test\":\"%s\",\"iterations\":%zu,\"t_typical\":%.3f,\"t_avg\":%.3f,\"percentile_99\":%.3f}",
                i ? "," : "", g_cmp[i].name, g_cmp[i].iters, g_cmp[i].typical, g_cmp[i].avg, g_cmp[i].p99);
    fprintf(f, "]}}\n");
}

/* ---------------------------------------------------------------------------------------- */

static int reexec_emulated(char **argv)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) { fprintf(stderr, "mlxd-bench: /proc/self/exe: %s\n", strerror(errno)); return 1; }
    exe[n] = 0;
    char lib[PATH_MAX + 64];
    char *slash = strrchr(exe, '/');
    *slash = 0;
    snprintf(lib, sizeof lib, "%s/../lib/libmlx5direct-emu.so", exe);
    *slash = '/';
    if (access(lib, R_OK)) { fprintf(stderr, "mlxd-bench: the emulator %s is missing (run make)\n", lib); return 1; }
    const char *old = getenv("LD_PRELOAD");
    char pre[2 * PATH_MAX];
    snprintf(pre, sizeof pre, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", pre, 1);
    setenv(REEXEC_ENV, "1", 1);
    if (dlsym(RTLD_DEFAULT, "__asan_init")) {
        /* an ASan build: the emulator now comes before the ASan runtime in the preload list */
        const char *ao = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", ao ? ao : "", ao && *ao ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
    }
    if (!getenv("MLXD_EMU_DEVICES") && !getenv("MLXD_EMU_CONFIG")) {
        char devs[160];
        emu_devices(devs, sizeof devs, 0);
        setenv("MLXD_EMU_DEVICES", devs, 1);
    }
    execv(exe, argv);
    fprintf(stderr, "mlxd-bench: exec %s: %s\n", exe, strerror(errno));
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* options                                                                                    */

/* v as an unsigned integer in [lo, hi]; else a message naming the option and the bound. */
static bool opt_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    bool number = *v && !*end && v[strspn(v, " \t")] != '-';    /* strtoull takes "-1" */
    if (!number || errno == ERANGE || x < lo || x > hi) {
        fprintf(stderr, "mlxd-bench: %s %s: %s (%" PRIu64 "..%" PRIu64 ")\n", opt, v,
                number ? "out of range" : "not a whole number", lo, hi);
        return false;
    }
    *out = x;
    return true;
}

/* Every item of a comma list is one of the names in `known` (a comma list too). */
static bool opt_list(const char *opt, const char *v, const char *known)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    if (!*v) { fprintf(stderr, "mlxd-bench: %s: an empty list (known: %s)\n", opt, known); return false; }
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(t);
        bool ok = false;
        for (const char *k = known; *k && !ok;) {
            const char *e = strchr(k, ',');
            size_t len = e ? (size_t)(e - k) : strlen(k);
            ok = len == n && !strncmp(k, t, n);
            k = e ? e + 1 : k + len;
        }
        if (!ok) { fprintf(stderr, "mlxd-bench: %s: unknown '%s' (known: %s)\n", opt, t, known); return false; }
    }
    return true;
}

/* mkdir -p in C (a path is never handed to a shell), then: a directory this process can write. */
static bool make_dir(const char *opt, const char *path)
{
    char p[PATH_MAX];
    if (!*path || strlen(path) >= sizeof p) { fprintf(stderr, "mlxd-bench: %s: an empty or too long path\n", opt); return false; }
    snprintf(p, sizeof p, "%s", path);
    for (char *q = p + 1; ; q++) {
        if (*q == '/' || !*q) {
            char c = *q;
            *q = 0;
            if (mkdir(p, 0777) < 0 && errno != EEXIST) {
                fprintf(stderr, "mlxd-bench: %s %s: cannot create %s: %s\n", opt, path, p, strerror(errno));
                return false;
            }
            *q = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode) || access(path, W_OK | X_OK) < 0) {
        fprintf(stderr, "mlxd-bench: %s %s: not a directory this process can write\n", opt, path);
        return false;
    }
    return true;
}

#define TEST_NAMES "empty,ring,replay,emu-ring,cqe-comp,handoff,handoff-event,e2e,compare"

static void usage(FILE *f)
{
    fprintf(f,
"usage: mlxd-bench [options]\n"
"  --tests LIST         comma list of: empty,ring,replay,emu-ring,cqe-comp,handoff,handoff-event,e2e,compare (default all)\n"
"  --quick              fewer iterations (a smoke run)\n"
"  --json | --csv       machine-readable output on stdout instead of the table\n"
"  --json-out FILE, --csv-out FILE   also write them to files\n"
"  --plot-dir DIR       write DIR/handoff_{busy,event}.dat (sorted ns, cumulative fraction)\n"
"  --fixture FILE       fill the detached ring from a CQE fixture (abi/mlxd_fixture.h) instead of synthetic CQEs\n"
"  --cpus M,C[,P]       pin the monitor to CPU M, the consumer (and main thread) to C, the producer to P\n"
"                       (default: monitor on the last allowed CPU, consumer on the first; -1 = no pinning)\n"
"  --producer MODE      hand-off producer: thread (its own thread) or inline (the consumer thread writes\n"
"                       the CQE, then polls get_next_frame); default thread with >= 3 CPUs, else inline\n"
"  --iters N            hand-off iterations (busy, default 100000; event gets N/5)\n"
"  --emu-passes N       passes per batch size on the emulated ring (and libmlx5's), default 100\n"
"  --emu-samples N      samples of 100 empty polls on the emulated ring (and libmlx5's), default 5000\n"
"  --e2e-sizes LIST     frame sizes for e2e (default 4096,65536,1048576,8388608)\n"
"  --e2e-modes LIST     the receiver's monitor: busy,event (default both)\n"
"  --e2e-consumer LIST  how the consumer waits: nap (takes what is queued, sleeps 100 us when nothing\n"
"                       is), spin (get_next_frame with a timeout: spins while frames keep coming);\n"
"                       default nap.  The e2e rows name both: busy/nap, event/spin, ...\n"
"  --e2e-mb N           MiB sent per frame size (default 192)\n"
"  --e2e-packet N       RDMA payload bytes per packet of the e2e generator (128..4096, multiple of 128;\n"
"                       default 4096: the emulated ports' MTU)\n"
"  --e2e-pages N        e2e receiver geometry: pages (1..4096; default enough for 4 MiB, at least 16, 8 from\n"
"                       1 MiB, 4 from 4 MiB frames),\n"
"  --e2e-queue N        queue_size (1..pages; default pages), --e2e-recv-depth N (2..32768; default\n"
"  --e2e-recv-depth N   the receiver's); the mode is --e2e-modes\n"
"  --e2e-window N       frames the generator may have in flight before it waits for the consumer\n"
"                       (default -1 = half the pages and of the receives posted); 0: no pacing, as fast\n"
"                       as the generator goes, and what overruns the emulated UC wire is lost (sent -\n"
"                       received, the causes after the row)\n"
"  --no-emulate         do not re-execute under the emulator (a real ConnectX; hand-off and the\n"
"                       emulated rings are then unavailable)\n"
"  --no-park            keep the emulator's engine thread awake during the busy-poll hand-off (by\n"
"                       default it is parked: its idle wake-ups would preempt the measured threads)\n"
"  -q                   no progress lines\n");
}

/* The options of the end-to-end test (--e2e-*), argv[*i] with its value v (NULL: none), *i
 * moved past the value.  Returns 0 when taken, 2 on a usage error (said), -1 when a is none of
 * them. */
static int e2e_option(const char *a, const char *v, int *i)
{
    static const char *const names[] = { "--e2e-sizes", "--e2e-modes", "--e2e-consumer", "--e2e-mb", "--e2e-window",
                                         "--e2e-packet", "--e2e-pages", "--e2e-queue", "--e2e-recv-depth" };
    bool known = false;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) known |= !strcmp(a, names[k]);
    if (!known) return -1;
    if (!v) { fprintf(stderr, "mlxd-bench: %s needs a value\n", a); return 2; }
    (*i)++;
    uint64_t x;
    if (!strcmp(a, "--e2e-sizes")) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", v);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (!opt_u64(a, t, 4096, 256ull << 20, &x)) return 2;   /* a page .. 256 MiB */
        if (!*v || strlen(v) >= sizeof buf) { fprintf(stderr, "mlxd-bench: --e2e-sizes: an empty or too long list\n"); return 2; }
        C.e2e_sizes = v;
    }
    else if (!strcmp(a, "--e2e-modes")) { if (!opt_list(a, v, "busy,event")) return 2; C.e2e_modes = v; }
    else if (!strcmp(a, "--e2e-consumer")) { if (!opt_list(a, v, "nap,spin")) return 2; C.e2e_consumers = v; }
    else if (!strcmp(a, "--e2e-mb")) { if (!opt_u64(a, v, 1, 4096, &x)) return 2; C.e2e_mb = (double)x; }
    else if (!strcmp(a, "--e2e-window")) {
        if (!strcmp(v, "-1")) C.e2e_window = -1;
        else if (!opt_u64(a, v, 0, 1u << 20, &x)) return 2;
        else C.e2e_window = (int)x;
    }
    else if (!strcmp(a, "--e2e-packet")) {      /* mlxd_gen_opts.payload_size; the ports' MTU is 4096 */
        if (!opt_u64(a, v, 128, 4096, &x)) return 2;
        if (x % 128) { fprintf(stderr, "mlxd-bench: --e2e-packet %s: not a multiple of 128\n", v); return 2; }
        C.e2e_packet = (unsigned)x;
    }
    /* the receiver's limits (mlxd_receiver.h) */
    else if (!strcmp(a, "--e2e-pages")) { if (!opt_u64(a, v, 1, 4096, &x)) return 2; C.e2e_pages = (unsigned)x; }
    else if (!strcmp(a, "--e2e-queue")) { if (!opt_u64(a, v, 1, 4096, &x)) return 2; C.e2e_queue = (unsigned)x; }
    else { if (!opt_u64(a, v, 2, 32768, &x)) return 2; C.e2e_recv_depth = (unsigned)x; }   /* --e2e-recv-depth */
    return 0;
}

/* Reads the command line into C (*no_emulate: --no-emulate).  Returns -1 to go on, else the
 * exit status (--help: 0; a usage error, said: 2). */
static int parse_args(int argc, char **argv, bool *no_emulate)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int er = e2e_option(a, v, &i);
        if (er >= 0) { if (er) return er; continue; }
#define NEEDV() do { if (!v) { fprintf(stderr, "mlxd-bench: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "--json")) C.json = true;
        else if (!strcmp(a, "--csv")) C.csv = true;
        else if (!strcmp(a, "-q")) C.quiet = true;
        else if (!strcmp(a, "--quick")) {
            C.empty_samples = 2000; C.ring_passes = 40; C.handoff_iters = 2000; C.handoff_event_iters = 500;
            C.e2e_mb = 16; C.emu_samples = 500; C.emu_passes = 10;
        }
        else if (!strcmp(a, "--emu-samples")) {
            NEEDV(); uint64_t x; if (!opt_u64(a, v, 1, 10000000, &x)) return 2; C.emu_samples = x;
        }
        else if (!strcmp(a, "--emu-passes")) {
            NEEDV(); uint64_t x; if (!opt_u64(a, v, 1, 100000, &x)) return 2; C.emu_passes = x;
        }
        else if (!strcmp(a, "--no-emulate")) *no_emulate = true;
        else if (!strcmp(a, "--no-park")) C.no_park = true;
        else if (!strcmp(a, "--json-out")) { NEEDV(); C.json_out = v; }
        else if (!strcmp(a, "--csv-out")) { NEEDV(); C.csv_out = v; }
        else if (!strcmp(a, "--tests")) { NEEDV(); if (!opt_list(a, v, TEST_NAMES)) return 2; C.tests = v; }
        else if (!strcmp(a, "--plot-dir")) { NEEDV(); if (!make_dir(a, v)) return 2; C.plot_dir = v; }
        else if (!strcmp(a, "--fixture")) {
            NEEDV();
            if (access(v, R_OK) < 0) { fprintf(stderr, "mlxd-bench: --fixture %s: %s\n", v, strerror(errno)); return 2; }
            C.fixture = v;
        }
        else if (!strcmp(a, "--producer")) {
            NEEDV(); C.producer_mode = v;
            if (strcmp(v, "thread") && strcmp(v, "inline")) { fprintf(stderr, "mlxd-bench: --producer thread|inline\n"); return 2; }
        }
        else if (!strcmp(a, "--iters")) {
            /* 16 bytes of samples per iteration, held in memory: 10 million is 160 MB */
            NEEDV(); uint64_t x; if (!opt_u64(a, v, 1, 10000000, &x)) return 2;
            C.handoff_iters = x;
            C.handoff_event_iters = x / 5 ? x / 5 : 1;
        }
        else if (!strcmp(a, "--cpus")) {
            NEEDV();
            int m = -2, c = -2, p = -2;
            if (sscanf(v, "%d,%d,%d", &m, &c, &p) < 2) { fprintf(stderr, "mlxd-bench: --cpus M,C[,P]\n"); return 2; }
            C.cpu_monitor = m; C.cpu_consumer = c; C.cpu_producer = p;    /* checked in choose_cpus */
        }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else { fprintf(stderr, "mlxd-bench: unknown option %s\n", a); usage(stderr); return 2; }
#undef NEEDV
    }
    return -1;
}

/* The CPUs of the monitor, the consumer (and this thread) and the hand-off producer: --cpus,
 * each one this process may run on, else the last, the first and the second allowed; this
 * thread pinned.  Returns -1 to go on, else 2 (a CPU not allowed, said). */
static int choose_cpus(void)
{
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    sched_getaffinity(0, sizeof allowed, &allowed);
    C.ncpus = CPU_COUNT(&allowed);
    const int want_cpu[3] = { C.cpu_monitor, C.cpu_consumer, C.cpu_producer };
    for (int k = 0; k < 3; k++)
        if (want_cpu[k] != -2 && want_cpu[k] != -1 &&
            (want_cpu[k] < 0 || want_cpu[k] >= CPU_SETSIZE || !CPU_ISSET(want_cpu[k], &allowed))) {
            fprintf(stderr, "mlxd-bench: --cpus: CPU %d is not one this process may run on (%d allowed)\n",
                    want_cpu[k], C.ncpus);
            return 2;
        }
    int first = -1, last = -1, second = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) { if (first < 0) first = c; else if (second < 0) second = c; last = c; }
    if (C.cpu_monitor == -2) C.cpu_monitor = last;
    if (C.cpu_consumer == -2) C.cpu_consumer = first;
    if (C.cpu_producer == -2) C.cpu_producer = C.ncpus >= 3 ? second : first;
    bool inl = C.producer_mode ? !strcmp(C.producer_mode, "inline") : C.ncpus < 3;
    snprintf(g_pinning, sizeof g_pinning, "monitor CPU %d, consumer + main CPU %d, hand-off producer %s%d%s "
             "(%d CPUs allowed)", C.cpu_monitor, C.cpu_consumer, inl ? "inline on CPU " : "thread on CPU ",
             inl ? C.cpu_consumer : C.cpu_producer, C.cpu_monitor == C.cpu_consumer ? "; monitor and consumer share a CPU" : "",
             C.ncpus);
    pin_self(C.cpu_consumer);
    return -1;
}

/* Every test --tests names (all by default), in order. */
static void run_tests(void)
{
    if (want("empty")) { say("mlxd-bench: empty poll...\n"); bench_empty(); }
    if (want("ring")) { say("mlxd-bench: detached ring...\n"); bench_ring_detached(); }
    if (want("replay")) { say("mlxd-bench: replay feeder...\n"); bench_replay(); }
    if (want("emu-ring")) { say("mlxd-bench: emulated ring...\n"); bench_ring_emu(); }
    if (want("cqe-comp")) { say("mlxd-bench: CQE compression...\n"); bench_cqe_comp(); }
    if (want("handoff")) { say("mlxd-bench: hand-off busy-poll...\n"); bench_handoff(false); }
    if (want("handoff-event")) { say("mlxd-bench: hand-off event...\n"); bench_handoff(true); }
    if (want("e2e")) bench_e2e();
    if (want("compare")) {
        say("mlxd-bench: rdma-core libmlx5 (mlxd-bench-verbs)...\n");
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        bench_compare(exe);
    }
}

/* The results on stdout and into --json-out / --csv-out.  Returns the exit status: 1 when a
 * file could not be written (said). */
static int write_results(void)
{
    if (C.json) print_json(stdout);
    else if (C.csv) print_csv(stdout);
    else print_table(stdout);
    int status = 0;
    FILE *f;
    if (C.json_out) {
        if ((f = fopen(C.json_out, "w"))) { print_json(f); fclose(f); }
        else { fprintf(stderr, "mlxd-bench: %s: %s\n", C.json_out, strerror(errno)); status = 1; }
    }
    if (C.csv_out) {
        if ((f = fopen(C.csv_out, "w"))) { print_csv(f); fclose(f); }
        else { fprintf(stderr, "mlxd-bench: %s: %s\n", C.csv_out, strerror(errno)); status = 1; }
    }
    return status;
}

int main(int argc, char **argv)
{
    bool no_emulate = false;
    int status = parse_args(argc, argv, &no_emulate);
    if (status >= 0) return status;
    if (!no_emulate && !getenv(REEXEC_ENV)) return reexec_emulated(argv);
    /* the emulator's engine: no spinning after work, so that it does not take a CPU from the
     * threads measured (it never writes the rings measured here; the hook does) */
    if (!getenv("MLXD_EMU_SPIN_US")) setenv("MLXD_EMU_SPIN_US", "0", 1);
    if ((status = choose_cpus()) >= 0) return status;

    read_load(g_load0, sizeof g_load0);
    tsc_init();
    say("mlxd-bench: TSC %.3f MHz; %s\n", g_tsc_hz / 1e6, g_pinning);
    run_tests();
    read_load(g_load1, sizeof g_load1);
    return write_results();
}
