/* mlxd-bench-verbs: the rdma-core side of mlxd-bench's comparison.  The only tool of this
 * project that links libibverbs (the library never does: tests/test_linkage.c).
 *
 * On the emulated NIC (libmlx5direct-emu.so preloaded) it creates, through libibverbs and the
 * mlx5 provider (rdma-core's libmlx5), a CQ and a UC QP in RTR, posts receives, has the emulator
 * write RESP_WR_IMM CQEs into the ring (mlxd_emu_bench_write_imm, emu/mlxd_emu_bench.h: the same
 * CQEs mlxd-bench's emu_* tests poll with mlxd_cq_poll), and times:
 *   verbs_poll_cq_empty        ibv_poll_cq(cq, 16, wc) of an empty CQ (per call)
 *   verbs_poll_cq_batch{1,4,16,64}   ibv_poll_cq draining 1024 CQEs, per CQE
 *   verbs_start_poll_empty     ibv_start_poll of an empty extended CQ (ENOENT), per call
 *   verbs_next_poll_batch{1,4,16,64} ibv_start_poll + ibv_next_poll... + ibv_end_poll sessions of
 *                              up to N CQEs, reading wr_id, status, opcode, byte_len and imm
 * Output (--csv): test,unit,iterations,t_min,t_typical,t_avg,t_stdev,p99,p99_9,t_max per line, or
 * one line "unavailable,<the failing call and errno>" when libibverbs cannot do it here.
 * Options: --tsc-hz HZ (else calibrated), --passes N, --samples N, --cpu C, --csv.
 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "stats.h"
#include "tsc.h"

typedef int (*write_imm_fn)(unsigned, uint32_t, uint32_t, uint32_t, uint64_t *);

#define RING 1024u

static double g_hz;
static bool g_csv;


/* The statistics of mlxd-bench (tools/common/stats.h), one line per test. */
static void report(const char *name, double *v, size_t n, size_t per)
{
    struct bench_stats s = bench_stats_of(v, n);
    if (g_csv)
        printf("%s,ns,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", name, n * per, s.min, s.typical, s.avg, s.stdev,
               s.p99, s.p999, s.max);
    else
        printf("%-26s %9zu %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %9.2f ns\n", name, n * per, s.min, s.typical, s.avg,
               s.stdev, s.p99, s.p999, s.max);
    fflush(stdout);
}

static int unavailable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int unavailable(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("unavailable,");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    return 1;
}

static int to_rtr(struct ibv_qp *qp, int gid_index, const union ibv_gid *gid)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.pkey_index = 0;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) return rc;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp->qp_num;
    a.rq_psn = 0;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = *gid;
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
}

static int post_recvs(struct ibv_qp *qp, unsigned n)
{
    static struct ibv_recv_wr wr[RING];
    for (unsigned i = 0; i < n; i++) {
        wr[i].wr_id = i;
        wr[i].sg_list = NULL;
        wr[i].num_sge = 0;
        wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    }
    struct ibv_recv_wr *bad = NULL;
    return ibv_post_recv(qp, wr, &bad);
}

static int fill(write_imm_fn w, uint32_t qpn, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int rc = w(0, qpn, i & 0xfff, 4096, NULL);
        if (rc) return rc;
    }
    return 0;
}

static volatile uint64_t g_sink;
static struct ibv_wc wc[64];

/* Named, never inlined: scripts/callgrind.sh counts their instructions (inclusive), as it does
 * for mlxd-bench's bench_empty_poll / bench_drain_N around mlxd_cq_poll. */
__attribute__((noinline)) int verbs_empty_poll(struct ibv_cq *cq) { return ibv_poll_cq(cq, 16, wc); }
__attribute__((noinline)) int verbs_empty_start_poll(struct ibv_cq_ex *cq)
{
    struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
    return ibv_start_poll(cq, &pa);
}
#define DRAIN(B)                                                                                  \
    __attribute__((noinline)) unsigned verbs_drain_##B(struct ibv_cq *cq)                         \
    {                                                                                             \
        unsigned got = 0;                                                                         \
        while (got < RING) {                                                                      \
            int n = ibv_poll_cq(cq, B, wc);                                                       \
            if (n <= 0) break;                                                                    \
            got += (unsigned)n;                                                                   \
        }                                                                                         \
        return got;                                                                               \
    }                                                                                             \
    __attribute__((noinline)) unsigned verbs_xdrain_##B(struct ibv_cq_ex *cqx, uint64_t *sink)    \
    {                                                                                             \
        struct ibv_poll_cq_attr pa = { .comp_mask = 0 };                                          \
        unsigned got = 0;                                                                         \
        while (got < RING) {                                                                      \
            if (ibv_start_poll(cqx, &pa)) break;                                                  \
            int k = 0;                                                                            \
            do {                                                                                  \
                *sink += cqx->wr_id + cqx->status + ibv_wc_read_opcode(cqx) +                     \
                         ibv_wc_read_byte_len(cqx) + ibv_wc_read_imm_data(cqx) +                  \
                         ibv_wc_read_qp_num(cqx) + ibv_wc_read_wc_flags(cqx) +                    \
                         ibv_wc_read_completion_ts(cqx);                                          \
                got++;                                                                            \
            } while (++k < B && ibv_next_poll(cqx) == 0);                                         \
            ibv_end_poll(cqx);                                                                    \
        }                                                                                         \
        return got;                                                                               \
    }
DRAIN(1)
DRAIN(4)
DRAIN(16)
DRAIN(64)
static unsigned (*const drains[4])(struct ibv_cq *) = { verbs_drain_1, verbs_drain_4, verbs_drain_16, verbs_drain_64 };
static unsigned (*const xdrains[4])(struct ibv_cq_ex *, uint64_t *) = { verbs_xdrain_1, verbs_xdrain_4,
                                                                        verbs_xdrain_16, verbs_xdrain_64 };

/* The options (--tsc-hz into g_hz, --csv into g_csv).  Returns -1 to go on, else 2 (usage). */
static int parse_args(int argc, char **argv, size_t *passes, size_t *samples, int *cpu)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--csv")) g_csv = true;
        else if (!strcmp(argv[i], "--tsc-hz") && i + 1 < argc) g_hz = atof(argv[++i]);
        else if (!strcmp(argv[i], "--passes") && i + 1 < argc) *passes = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--samples") && i + 1 < argc) *samples = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) *cpu = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: mlxd-bench-verbs [--csv] [--tsc-hz HZ] [--passes N] [--samples N] [--cpu C]\n"
                    "  run on the emulator: LD_PRELOAD=<build>/lib/libmlx5direct-emu.so (mlxd-bench does it)\n");
            return 2;
        }
    }
    if (!*passes) *passes = 1;
    if (!*samples) *samples = 1;
    return -1;
}

/* --cpu: this thread pinned; without --tsc-hz the TSC's rate measured over 0.1 s. */
static void pin_and_calibrate(int cpu)
{
    if (cpu >= 0) {
        cpu_set_t s;
        CPU_ZERO(&s);
        CPU_SET(cpu, &s);
        sched_setaffinity(0, sizeof s, &s);
    }
    if (g_hz <= 0) {
        double s0 = bench_mono_raw_s();
        uint64_t t0 = mlxd__tsc();
        while (bench_mono_raw_s() - s0 < 0.1) {}
        g_hz = (double)(mlxd__tsc() - t0) / (bench_mono_raw_s() - s0);
    }
}

/* The verbs objects measured: mlx5_0, its last IPv4-mapped GID, a PD, a CQ and a UC QP of RING
 * receives in RTR. */
struct verbs {
    struct ibv_device **list;
    struct ibv_context *ctx;
    int gid_index;
    union ibv_gid gid;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp_init_attr qa;
    struct ibv_qp *qp;
};

/* Opens mlx5_0 through libibverbs and makes V's objects.  Returns -1 to go on, else the exit
 * status (the "unavailable" line printed). */
static int open_verbs(struct verbs *V)
{
    int num = 0;
    V->list = ibv_get_device_list(&num);
    if (!V->list || !num)
        return unavailable("ibv_get_device_list: %s (%d devices): libibverbs finds no device on the emulator",
                           strerror(errno), num);
    struct ibv_device *dev = NULL;
    for (int i = 0; i < num; i++)
        if (!strcmp(ibv_get_device_name(V->list[i]), "mlx5_0")) dev = V->list[i];
    if (!dev) return unavailable("ibv_get_device_list: no mlx5_0 among %d devices", num);
    V->ctx = ibv_open_device(dev);
    if (!V->ctx)
        return unavailable("ibv_open_device(mlx5_0): %s (the mlx5 provider cannot open the emulated "
                           "device: see issue 8, rdma-core on the emulator)", strerror(errno));
    V->gid_index = -1;
    for (int i = 0; i < 16; i++) {
        union ibv_gid g;
        if (ibv_query_gid(V->ctx, 1, i, &g)) break;
        if (g.raw[10] == 0xff && g.raw[11] == 0xff) { V->gid_index = i; V->gid = g; }  /* last ::ffff: (v2) */
    }
    if (V->gid_index < 0) return unavailable("ibv_query_gid: no IPv4-mapped GID on port 1");
    V->pd = ibv_alloc_pd(V->ctx);
    if (!V->pd) return unavailable("ibv_alloc_pd: %s", strerror(errno));
    V->cq = ibv_create_cq(V->ctx, RING, NULL, NULL, 0);
    if (!V->cq) return unavailable("ibv_create_cq(%u): %s", RING, strerror(errno));
    V->qa = (struct ibv_qp_init_attr){ .send_cq = V->cq, .recv_cq = V->cq, .qp_type = IBV_QPT_UC,
        .cap = { .max_send_wr = 1, .max_recv_wr = RING, .max_send_sge = 1, .max_recv_sge = 1 } };
    V->qp = ibv_create_qp(V->pd, &V->qa);
    if (!V->qp) return unavailable("ibv_create_qp(UC, %u receives): %s", RING, strerror(errno));
    int rc = to_rtr(V->qp, V->gid_index, &V->gid);
    if (rc) return unavailable("ibv_modify_qp(UC -> INIT -> RTR): %s", strerror(rc));
    return -1;
}

static const int batches[] = { 1, 4, 16, 64 };

/* ibv_poll_cq: empty, then draining RING CQEs in each batch size.  Returns -1 to go on, else
 * the exit status (the "unavailable" line printed). */
static int measure_poll_cq(const struct verbs *V, write_imm_fn w, size_t passes, size_t samples)
{
    int rc;
    double *v = malloc(samples * sizeof *v);
    for (int i = 0; i < 10000; i++) g_sink += (uint64_t)verbs_empty_poll(V->cq);
    for (size_t s = 0; s < samples; s++) {
        uint64_t t0 = mlxd__tsc();
        for (int i = 0; i < 100; i++) g_sink += (uint64_t)verbs_empty_poll(V->cq);
        v[s] = (double)(mlxd__tsc() - t0) * 1e9 / g_hz / 100;
    }
    report("verbs_poll_cq_empty", v, samples, 100);
    free(v);
    for (int b = 0; b < 4; b++) {
        v = malloc(passes * sizeof *v);
        for (size_t p = 0; p < passes + 2; p++) {
            if ((rc = post_recvs(V->qp, RING))) return unavailable("ibv_post_recv(%u): %s", RING, strerror(rc));
            if ((rc = fill(w, V->qp->qp_num, RING)))
                return unavailable("mlxd_emu_bench_write_imm on QP 0x%x: %s", V->qp->qp_num, strerror(-rc));
            uint64_t t0 = mlxd__tsc();
            unsigned got = drains[b](V->cq);
            uint64_t t1 = mlxd__tsc();
            if (got != RING) return unavailable("ibv_poll_cq consumed %u of %u CQEs (status %d)", got, RING, wc[0].status);
            if (wc[0].status != IBV_WC_SUCCESS || wc[0].opcode != IBV_WC_RECV_RDMA_WITH_IMM)
                return unavailable("ibv_poll_cq: status %d opcode %d, not a successful RECV_RDMA_WITH_IMM",
                                   wc[0].status, wc[0].opcode);
            if (p >= 2) v[p - 2] = (double)(t1 - t0) * 1e9 / g_hz / RING;
        }
        char name[48];
        snprintf(name, sizeof name, "verbs_poll_cq_batch%d", batches[b]);
        report(name, v, passes, RING);
        free(v);
    }
    return -1;
}

/* The extended CQ (ibv_start_poll / ibv_next_poll / ibv_end_poll) on a second QP: empty, then
 * draining RING CQEs in each batch size.  Returns -1 to go on, else the exit status (said);
 * *qp2 and *cqx: what it made, for the caller to destroy. */
static int measure_cq_ex(const struct verbs *V, write_imm_fn w, size_t passes, size_t samples,
                         struct ibv_cq_ex **cqx_out, struct ibv_qp **qp2_out)
{
    int rc = 0;
    struct ibv_cq_init_attr_ex ca = { .cqe = RING, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
        IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
                                      .comp_mask = 0 };
    struct ibv_cq_ex *cqx = *cqx_out = ibv_create_cq_ex(V->ctx, &ca);
    if (!cqx) {
        printf("unavailable,ibv_create_cq_ex: %s (extended CQ not measured)\n", strerror(errno));
        return 0;
    }
    struct ibv_qp_init_attr qa2 = V->qa;
    qa2.send_cq = qa2.recv_cq = ibv_cq_ex_to_cq(cqx);
    struct ibv_qp *qp2 = *qp2_out = ibv_create_qp(V->pd, &qa2);
    if (!qp2 || (rc = to_rtr(qp2, V->gid_index, &V->gid))) {
        printf("unavailable,ibv_create_qp/modify on the extended CQ: %s\n", strerror(qp2 ? rc : errno));
        return 0;
    }
    double *v = malloc(samples * sizeof *v);
    for (int i = 0; i < 10000; i++) g_sink += (uint64_t)verbs_empty_start_poll(cqx);
    for (size_t s = 0; s < samples; s++) {
        uint64_t t0 = mlxd__tsc();
        for (int i = 0; i < 100; i++) g_sink += (uint64_t)verbs_empty_start_poll(cqx);
        v[s] = (double)(mlxd__tsc() - t0) * 1e9 / g_hz / 100;
    }
    report("verbs_start_poll_empty", v, samples, 100);
    free(v);
    for (int b = 0; b < 4; b++) {
        v = malloc(passes * sizeof *v);
        for (size_t p = 0; p < passes + 2; p++) {
            if ((rc = post_recvs(qp2, RING))) return unavailable("ibv_post_recv(%u): %s", RING, strerror(rc));
            if ((rc = fill(w, qp2->qp_num, RING)))
                return unavailable("mlxd_emu_bench_write_imm on QP 0x%x: %s", qp2->qp_num, strerror(-rc));
            uint64_t sink = 0;
            uint64_t t0 = mlxd__tsc();
            unsigned got = xdrains[b](cqx, &sink);
            uint64_t t1 = mlxd__tsc();
            g_sink += sink;
            if (got != RING) return unavailable("ibv_start_poll/next_poll consumed %u of %u CQEs", got, RING);
            if (p >= 2) v[p - 2] = (double)(t1 - t0) * 1e9 / g_hz / RING;
        }
        char name[48];
        snprintf(name, sizeof name, "verbs_next_poll_batch%d", batches[b]);
        report(name, v, passes, RING);
        free(v);
    }
    return -1;
}

int main(int argc, char **argv)
{
    size_t passes = 100, samples = 5000;
    int cpu = -1;
    int status = parse_args(argc, argv, &passes, &samples, &cpu);
    if (status >= 0) return status;
    pin_and_calibrate(cpu);
    write_imm_fn w = (write_imm_fn)dlsym(RTLD_DEFAULT, "mlxd_emu_bench_write_imm");
    if (!w)
        return unavailable("not running on the emulator (LD_PRELOAD=libmlx5direct-emu.so): nothing would "
                           "write CQEs into the rings on demand");
    struct verbs V = { 0 };
    if ((status = open_verbs(&V)) >= 0) return status;
    if ((status = measure_poll_cq(&V, w, passes, samples)) >= 0) return status;
    struct ibv_cq_ex *cqx = NULL;
    struct ibv_qp *qp2 = NULL;
    if ((status = measure_cq_ex(&V, w, passes, samples, &cqx, &qp2)) >= 0) return status;
    ibv_destroy_qp(qp2);
    ibv_destroy_qp(V.qp);
    ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
    ibv_destroy_cq(V.cq);
    ibv_dealloc_pd(V.pd);
    ibv_close_device(V.ctx);
    ibv_free_device_list(V.list);
    return 0;
}
