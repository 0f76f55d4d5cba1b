/* rdma_core_srq: shared receive queues as libibverbs + libmlx5 (rdma-core) use them, on the
 * emulator (run preloaded; tests/test_rdma_core.c).  One process, two devices: mlx5_1's three RC
 * QPs send to three RC QPs of mlx5_0 that share one SRQ of 8 receives.  Checks:
 *   1. 40 SENDs round-robin over the QPs (the SRQ's WQEs reused 5 times): each receive
 *      completion has the wr_id posted first (the SRQ is FIFO), the QP it arrived on, the
 *      length and the bytes; each WQE is posted again after its completion;
 *   2. the limit: ibv_modify_srq(srq_limit 4) reads back 4 from ibv_query_srq; consuming WQEs
 *      until fewer than 4 are posted raises IBV_EVENT_SRQ_LIMIT_REACHED for this SRQ on the
 *      async fd, once, and the limit reads back 0 (disarmed);
 *   3. an empty SRQ: a SEND waits (RNR NAK, rnr_retry 7) with no completion until a receive is
 *      posted, then completes on both sides;
 *   4. misuse: srq_limit >= max_wr + 1 -> EINVAL; destroying the SRQ while QPs use it -> EBUSY.
 * With "faults": each new kernel call (SRQ_CREATE, MODIFY_SRQ, QUERY_SRQ, SRQ_DESTROY) fails in
 * turn with EINVAL, ENOMEM, EFAULT and EIO (the preloaded emulator's mlxd_emu_fail_method):
 * the verb returns that errno, a failed create leaves no SRQ (mlxd_emu_get_counts), a failed
 * modify leaves the limit as it was, a failed destroy leaves the SRQ usable and destroyable,
 * and after closing the device the emulator holds nothing (mlxd_emu_live_total 0).
 * usage: rdma_core_srq [faults]      prints "OK ..." and exits 0 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlxd_emu.h"

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#include "rc_connect.h"
#define NQP 3
#define SRQ_WR 8

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *scq, *rcq;
    struct ibv_srq *srq;
    struct ibv_qp *qp[NQP];
    struct ibv_mr *mr;
    unsigned char *buf;
    union ibv_gid gid;
};

static void setup(struct side *s, struct ibv_device *d, int with_srq)
{
    if (!(s->ctx = ibv_open_device(d))) FAIL("open %s", ibv_get_device_name(d));
    if (!(s->pd = ibv_alloc_pd(s->ctx))) FAIL("pd");
    s->scq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
    s->rcq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
    if (!s->scq || !s->rcq) FAIL("cq");
    s->buf = aligned_alloc(4096, 65536);
    memset(s->buf, 0xee, 65536);
    if (!(s->mr = ibv_reg_mr(s->pd, s->buf, 65536, IBV_ACCESS_LOCAL_WRITE))) FAIL("mr");
    if (with_srq) {
        struct ibv_srq_init_attr sa = {.attr = {.max_wr = SRQ_WR, .max_sge = 1}};
        if (!(s->srq = ibv_create_srq(s->pd, &sa))) FAIL("create_srq: %s", strerror(errno));
    }
    if (ibv_query_gid(s->ctx, 1, 3, &s->gid)) FAIL("gid");
    for (int i = 0; i < NQP; i++) {
        struct ibv_qp_init_attr a = {
            .send_cq = s->scq, .recv_cq = s->rcq, .srq = s->srq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
            .cap = {.max_send_wr = 16, .max_recv_wr = s->srq ? 0 : 16, .max_send_sge = 1,
                    .max_recv_sge = 1},
        };
        if (!(s->qp[i] = ibv_create_qp(s->pd, &a))) FAIL("qp: %s", strerror(errno));
        struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1};
        if (ibv_modify_qp(s->qp[i], &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            FAIL("INIT");
    }
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, long spins)
{
    int n;
    for (long k = 0; (n = ibv_poll_cq(cq, 1, wc)) == 0; k++)
        if (k > spins) return 0;
    if (n < 0) FAIL("poll %d", n);
    return 1;
}

static unsigned stage;
static struct ibv_wc wait_one(struct ibv_cq *cq)
{
    struct ibv_wc wc;
    if (!poll_one(cq, &wc, 200000000L)) FAIL("no completion (%s) stage %u", cq->context->device->name, stage);
    return wc;
}

static void post_recv(struct side *a, unsigned slot, uint64_t wr_id)
{
    struct ibv_sge s = {(uintptr_t)a->buf + slot * 4096, 4096, a->mr->lkey};
    struct ibv_recv_wr w = {.wr_id = wr_id, .sg_list = &s, .num_sge = 1}, *bad;
    if (ibv_post_srq_recv(a->srq, &w, &bad)) FAIL("post_srq_recv");
}

static void send_msg(struct side *b, unsigned q, unsigned len, unsigned tag)
{
    for (unsigned i = 0; i < len; i++) b->buf[i] = (unsigned char)(i * 13 + tag);
    struct ibv_sge s = {(uintptr_t)b->buf, len, b->mr->lkey};
    struct ibv_send_wr w = {.wr_id = tag, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND}, *bad;
    if (ibv_post_send(b->qp[q], &w, &bad)) FAIL("post_send");
}

/* One message from b's QP q, received through the SRQ into the WQE posted as wr_id at slot. */
static void exchange(struct side *a, struct side *b, unsigned q, unsigned len, unsigned tag,
                     uint64_t want_wr_id, unsigned slot)
{
    stage = tag;
    send_msg(b, q, len, tag);
    struct ibv_wc ws = wait_one(b->scq), w = wait_one(a->rcq);
    if (ws.status || ws.wr_id != tag) FAIL("tag %u: send status %d wr_id %llu", tag, ws.status,
                                           (unsigned long long)ws.wr_id);
    if (w.status || w.wr_id != want_wr_id || w.opcode != IBV_WC_RECV || w.byte_len != len ||
        w.qp_num != a->qp[q]->qp_num)
        FAIL("tag %u: recv status %d wr_id %llu (want %llu) opcode %d byte_len %u qp 0x%x (want 0x%x)",
             tag, w.status, (unsigned long long)w.wr_id, (unsigned long long)want_wr_id, w.opcode,
             w.byte_len, w.qp_num, a->qp[q]->qp_num);
    for (unsigned i = 0; i < len; i++)
        if (a->buf[slot * 4096 + i] != (unsigned char)(i * 13 + tag)) FAIL("tag %u: byte %u", tag, i);
}

/* the preloaded emulator's test interface, looked up at run time (not linked) */
static int (*fail_method)(const char *, unsigned, int);
static void (*fail_clear)(void);
static int (*get_counts)(struct mlxd_emu_counts *);
static unsigned (*live_total)(void);

static unsigned live_srqs(void)
{
    struct mlxd_emu_counts c = {.sz = sizeof c};
    if (get_counts(&c)) FAIL("mlxd_emu_get_counts");
    return c.srq;
}

static int faults(struct ibv_device *d)
{
    fail_method = (int (*)(const char *, unsigned, int))dlsym(RTLD_DEFAULT, "mlxd_emu_fail_method");
    fail_clear = (void (*)(void))dlsym(RTLD_DEFAULT, "mlxd_emu_fail_clear");
    get_counts = (int (*)(struct mlxd_emu_counts *))dlsym(RTLD_DEFAULT, "mlxd_emu_get_counts");
    live_total = (unsigned (*)(void))dlsym(RTLD_DEFAULT, "mlxd_emu_live_total");
    if (!fail_method || !fail_clear || !get_counts || !live_total) FAIL("not run under the emulator");
    static const int errs[] = {EINVAL, ENOMEM, EFAULT, EIO};
    unsigned n = 0;
    struct ibv_context *ctx = ibv_open_device(d);
    if (!ctx) FAIL("open");
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd) FAIL("pd");
    for (unsigned k = 0; k < 4; k++) {
        struct ibv_srq_init_attr sa = {.attr = {.max_wr = SRQ_WR, .max_sge = 1}};
        if (fail_method("SRQ_CREATE", 1, errs[k])) FAIL("fail_method");
        errno = 0;
        struct ibv_srq *srq = ibv_create_srq(pd, &sa);
        fail_clear();
        if (srq || errno != errs[k]) FAIL("SRQ_CREATE %d: srq %p errno %d", errs[k], (void *)srq, errno);
        if (live_srqs()) FAIL("SRQ_CREATE %d: an SRQ is live", errs[k]);
        n++;
        struct ibv_srq_init_attr sb = {.attr = {.max_wr = SRQ_WR, .max_sge = 1}};
        if (!(srq = ibv_create_srq(pd, &sb))) FAIL("create_srq");
        struct ibv_srq_attr arm = {.srq_limit = 2}, qa;
        if (fail_method("MODIFY_SRQ", 1, errs[k])) FAIL("fail_method");
        int rc = ibv_modify_srq(srq, &arm, IBV_SRQ_LIMIT);
        fail_clear();
        if (rc != errs[k]) FAIL("MODIFY_SRQ %d: %d", errs[k], rc);
        if (ibv_query_srq(srq, &qa) || qa.srq_limit != 0) FAIL("MODIFY_SRQ %d changed the limit", errs[k]);
        if (fail_method("QUERY_SRQ", 1, errs[k])) FAIL("fail_method");
        rc = ibv_query_srq(srq, &qa);
        fail_clear();
        if (rc != errs[k]) FAIL("QUERY_SRQ %d: %d", errs[k], rc);
        if (fail_method("SRQ_DESTROY", 1, errs[k])) FAIL("fail_method");
        rc = ibv_destroy_srq(srq);
        fail_clear();
        if (rc != errs[k] || live_srqs() != 1) FAIL("SRQ_DESTROY %d: %d, %u live", errs[k], rc, live_srqs());
        if (ibv_modify_srq(srq, &arm, IBV_SRQ_LIMIT)) FAIL("the SRQ is unusable after a failed destroy");
        if (ibv_destroy_srq(srq) || live_srqs()) FAIL("destroy after a failed destroy");
        n += 3;
    }
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    if (live_total()) FAIL("the emulator still holds %u objects", live_total());
    printf("OK srq faults: %u faults injected, each returned and undone\n", n);
    return 0;
}

int main(int argc, char **argv)
{
    /* BlueFlame on, libmlx5's default: its QPs' bfregs are its own picks in dynamic UAR pages
     * (two QPs share a page at 0x800 and 0xa00), which the emulator's doorbell takes in any
     * bfreg of the QP's page (emu/nic/nic_doorbell.c) */
    unsetenv("MLX5_SHUT_UP_BF");
    int num = 0;
    struct ibv_device **l = ibv_get_device_list(&num);
    if (!l || num < 2) FAIL("need two devices, have %d", num);
    if (argc > 1 && !strcmp(argv[1], "faults")) return faults(l[0]);
    struct side a = {0}, b = {0};   /* a = mlx5_0 receives through its SRQ, b = mlx5_1 sends */
    setup(&a, l[0], 1);
    setup(&b, l[1], 0);
    for (int i = 0; i < NQP; i++) {
        connect_to(a.qp[i], b.qp[i], &b.gid);
        connect_to(b.qp[i], a.qp[i], &a.gid);
    }
    struct ibv_srq_attr qa;
    if (ibv_query_srq(a.srq, &qa)) FAIL("query_srq");
    if (qa.max_wr < SRQ_WR || qa.srq_limit != 0) FAIL("query: max_wr %u limit %u", qa.max_wr, qa.srq_limit);

    /* 1. FIFO over 3 QPs, WQEs reused past the SRQ's size */
    uint64_t next_id = 100;
    uint64_t fifo[64];
    unsigned fslot[64], fh = 0, ft = 0;
    for (unsigned i = 0; i < SRQ_WR; i++) { post_recv(&a, i, next_id); fifo[ft] = next_id++; fslot[ft++] = i; }
    for (unsigned m = 0; m < 40; m++) {
        unsigned slot = fslot[fh % 64];
        exchange(&a, &b, m % NQP, 1 + m * 97 % 4000, m + 1, fifo[fh % 64], slot);
        fh++;
        post_recv(&a, slot, next_id);
        fifo[ft % 64] = next_id++; fslot[ft % 64] = slot; ft++;
    }

    /* 2. the limit: 8 posted, armed at 4: the 5th message leaves 3 < 4 */
    struct ibv_srq_attr bad = {.srq_limit = qa.max_wr + 1};
    errno = 0;
    int rc = ibv_modify_srq(a.srq, &bad, IBV_SRQ_LIMIT);
    if (rc != EINVAL) FAIL("modify_srq limit %u: %d, want EINVAL", bad.srq_limit, rc);
    struct ibv_srq_attr arm = {.srq_limit = 4};
    if (ibv_modify_srq(a.srq, &arm, IBV_SRQ_LIMIT)) FAIL("modify_srq limit 4");
    if (ibv_query_srq(a.srq, &qa) || qa.srq_limit != 4) FAIL("armed limit reads %u", qa.srq_limit);
    struct pollfd pf = {.fd = a.ctx->async_fd, .events = POLLIN};
    for (unsigned m = 0; m < 5; m++) {
        if (poll(&pf, 1, 0) != 0) FAIL("event before the limit (message %u)", m);
        exchange(&a, &b, m % NQP, 64, 50 + m, fifo[fh % 64], fslot[fh % 64]);
        fh++;
    }
    if (poll(&pf, 1, 5000) != 1) FAIL("no limit event");
    struct ibv_async_event ev;
    if (ibv_get_async_event(a.ctx, &ev)) FAIL("get_async_event");
    if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != a.srq)
        FAIL("event %d, want SRQ_LIMIT_REACHED", ev.event_type);
    ibv_ack_async_event(&ev);
    if (ibv_query_srq(a.srq, &qa) || qa.srq_limit != 0) FAIL("limit after the event reads %u", qa.srq_limit);

    /* 3. empty SRQ: 3 left, use them, then a SEND waits for a receive */
    for (unsigned m = 0; m < 3; m++) {
        exchange(&a, &b, m % NQP, 32, 60 + m, fifo[fh % 64], fslot[fh % 64]);
        fh++;
    }
    if (poll(&pf, 1, 0) != 0) FAIL("a second limit event without re-arming");
    send_msg(&b, 1, 100, 77);
    struct ibv_wc w;
    usleep(200000);
    if (poll_one(a.rcq, &w, 1000) || poll_one(b.scq, &w, 1000)) FAIL("a completion with the SRQ empty");
    post_recv(&a, 0, 999);
    w = wait_one(a.rcq);
    if (w.status || w.wr_id != 999 || w.byte_len != 100 || w.qp_num != a.qp[1]->qp_num)
        FAIL("after RNR: status %d wr_id %llu len %u", w.status, (unsigned long long)w.wr_id, w.byte_len);
    w = wait_one(b.scq);
    if (w.status || w.wr_id != 77) FAIL("send after RNR: status %d", w.status);

    /* 4. an SRQ in use cannot go */
    rc = ibv_destroy_srq(a.srq);
    if (rc != EBUSY) FAIL("destroy_srq with QPs: %d, want EBUSY", rc);
    for (int i = 0; i < NQP; i++) if (ibv_destroy_qp(a.qp[i])) FAIL("destroy_qp");
    if (ibv_destroy_srq(a.srq)) FAIL("destroy_srq");
    printf("OK srq: 40 SENDs over %d QPs, limit event once, RNR then delivery, EINVAL/EBUSY\n", NQP);
    return 0;
}
