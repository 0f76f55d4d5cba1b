/* srq: shared receive queues through our driver, on the emulator (issue 20 item 3).
 * mlx5_1 sends to mlx5_0, whose QPs take their receives from one SRQ.  Expected values from
 * the semantics of an SRQ (IB spec 10.2.9: receives are taken in the order posted, by whichever
 * QP a message arrives on; 11.2.3 / 10.2.9.3: the limit event once, then disarmed; 9.7.5.2.8:
 * RNR NAK on RC when no receive is posted; UC: dropped) and the driver's documented errors. */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
#include "util.h"

#define NQP 3
#define DEPTH 8
#define SLOT 4096

struct rig {
    struct mlxd_nic *a, *b;             /* a receives through srq, b sends */
    struct mlxd_cq *acq, *bcq;
    struct mlxd_srq *srq;
    struct mlxd_qp *aqp[NQP], *bqp[NQP];
    struct mlxd_region *areg, *breg;
    unsigned char *abuf, *bbuf;
};


static void rig_open(struct rig *r, uint32_t type)
{
    memset(r, 0, sizeof *r);
    mlxd_test_open_region("mlx5_0", 16 * SLOT, &r->a, &r->abuf, &r->areg);
    mlxd_test_open_region("mlx5_1", 16 * SLOT, &r->b, &r->bbuf, &r->breg);
    ck_assert_int_eq(mlxd_cq_create(r->a, 64, NULL, &r->acq), 0);
    ck_assert_int_eq(mlxd_cq_create(r->b, 64, NULL, &r->bcq), 0);
    struct mlxd_srq_opts so = { .sz = sizeof so, .depth = DEPTH, .user_data = 0x5157 };
    ck_assert_msg(mlxd_srq_create(r->a, &so, &r->srq) == 0, "%s", mlxd_errmsg());
    for (int i = 0; i < NQP; i++) {
        struct mlxd_qp_opts qa = { .sz = sizeof qa, .type = type, .send_depth = 4, .srq = r->srq };
        struct mlxd_qp_opts qb = { .sz = sizeof qb, .type = type, .send_depth = 16, .recv_depth = 1 };
        ck_assert_msg(mlxd_qp_create(r->acq, &qa, &r->aqp[i]) == 0, "%s", mlxd_errmsg());
        ck_assert_msg(mlxd_qp_create(r->bcq, &qb, &r->bqp[i]) == 0, "%s", mlxd_errmsg());
        struct mlxd_endpoint ea, eb;
        ck_assert_int_eq(mlxd_qp_endpoint(r->aqp[i], &ea), 0);
        ck_assert_int_eq(mlxd_qp_endpoint(r->bqp[i], &eb), 0);
        /* 1024-byte path MTU: a 2000-byte SEND is two packets (uc_unfinished_message_flushed) */
        struct mlxd_connect_opts co = { .sz = sizeof co, .min_rnr_timer = 1, .path_mtu = 3 };
        ck_assert_msg(mlxd_qp_connect(r->aqp[i], &eb, &co) == 0, "%s", mlxd_errmsg());
        ck_assert_msg(mlxd_qp_connect(r->bqp[i], &ea, &co) == 0, "%s", mlxd_errmsg());
    }
}

static void rig_close(struct rig *r)
{
    ck_assert_int_eq(mlxd_close(r->a), 0);
    ck_assert_int_eq(mlxd_close(r->b), 0);
    free(r->abuf);
    free(r->bbuf);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}

static void post_one(struct rig *r, unsigned slot, uint64_t wr_id)
{
    struct mlxd_local l = mlxd_region_local(r->areg);
    l.addr += (uint64_t)slot * SLOT;
    l.length = SLOT;
    struct mlxd_recv rv = { .wr_id = wr_id, .num_local = 1, .local = &l };
    ck_assert_msg(mlxd_srq_receive(r->srq, &rv, 1) == 1, "%s", mlxd_errmsg());
}

static void send_one(struct rig *r, unsigned q, uint32_t len, unsigned tag)
{
    for (uint32_t i = 0; i < len; i++) r->bbuf[i] = (unsigned char)(tag + i * 7);
    struct mlxd_local l = mlxd_region_local(r->breg);
    struct mlxd_entry e = { .wr_id = tag, .op = MLXD_OP_SEND, .flags = MLXD_SIGNALED, .num_local = 1,
                            .local = { l.addr, len, l.lkey } };
    ck_assert_int_eq(mlxd_qp_post(r->bqp[q], &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(r->bqp[q]), 0);
}

/* One SEND on QP q received through the SRQ into the receive posted as wr_id at slot. */
static void exchange(struct rig *r, unsigned q, uint32_t len, unsigned tag, uint64_t wr_id, unsigned slot)
{
    send_one(r, q, len, tag);
    struct mlxd_completion ws, w;
    mlxd_test_wait_one(r->bcq, 5, &ws);
    ck_assert_uint_eq(ws.status, 0);
    ck_assert_uint_eq(ws.wr_id, tag);
    mlxd_test_wait_one(r->acq, 5, &w);
    ck_assert_uint_eq(w.status, 0);
    ck_assert_uint_eq(w.wr_id, wr_id);
    ck_assert_ptr_eq(w.qp, r->aqp[q]);
    ck_assert_uint_eq(w.byte_len, len);
    for (uint32_t i = 0; i < len; i++)
        ck_assert_uint_eq(r->abuf[slot * SLOT + i], (unsigned char)(tag + i * 7));
}

/* Several QPs share one SRQ: 40 SENDs round-robin take the receives in the order posted; each
 * completion names its QP and the wr_id posted; every WQE is reposted (used 5 times). */
START_TEST(shared_by_qps_fifo_reuse)
{
    struct rig r;
    rig_open(&r, MLXD_QP_RC);
    uint64_t ids[64]; unsigned slots[64], h = 0, t = 0;
    for (unsigned i = 0; i < DEPTH; i++) { post_one(&r, i, 100 + i); ids[t % 64] = 100 + i; slots[t++ % 64] = i; }
    ck_assert_int_eq(mlxd_srq_recv_room(r.srq), 0);
    ck_assert_int_eq(mlxd_srq_receive(r.srq, (struct mlxd_recv[]){ { .wr_id = 1 } }, 1), -EAGAIN);
    for (unsigned m = 0; m < 40; m++) {
        exchange(&r, m % NQP, 1 + m * 97 % 4000, m + 1, ids[h % 64], slots[h % 64]);
        unsigned s = slots[h++ % 64];
        post_one(&r, s, 1000 + m);
        ids[t % 64] = 1000 + m; slots[t++ % 64] = s;
    }
    rig_close(&r);
}
END_TEST

/* The limit: armed at 4 with 8 posted, the 5th message leaves 3 < 4: one MLXD_EVENT_SRQ_LIMIT
 * naming the SRQ and its user_data, none before, none after (disarmed). */
START_TEST(limit_event_once)
{
    struct rig r;
    rig_open(&r, MLXD_QP_RC);
    for (unsigned i = 0; i < DEPTH; i++) post_one(&r, i, 200 + i);
    ck_assert_int_eq(mlxd_srq_arm_limit(r.srq, DEPTH + 1), -EINVAL);
    ck_assert_int_eq(mlxd_srq_arm_limit(r.srq, 4), 0);
    struct mlxd_event ev[4];
    for (unsigned m = 0; m < 5; m++) {
        ck_assert_int_eq(mlxd_wait(r.a, 0, ev, 4), 0);
        exchange(&r, m % NQP, 64, 50 + m, 200 + m, m);
    }
    int n = mlxd_wait(r.a, 5000, ev, 4);
    ck_assert_int_eq(n, 1);
    ck_assert_uint_eq(ev[0].kind, MLXD_EVENT_SRQ_LIMIT);
    ck_assert_uint_eq(ev[0].kernel_type, 15);
    ck_assert_ptr_eq(ev[0].srq, r.srq);
    ck_assert_uint_eq(ev[0].user_data, 0x5157);
    exchange(&r, 0, 64, 60, 205, 5);
    ck_assert_int_eq(mlxd_wait(r.a, 100, ev, 4), 0);
    rig_close(&r);
}
END_TEST

/* An empty SRQ: RC is NAKed with RNR (counted) and completes once a receive is posted. */
START_TEST(empty_rc_rnr_then_delivery)
{
    struct rig r;
    rig_open(&r, MLXD_QP_RC);
    struct mlxd_emu_nic_stats s0 = { .sz = sizeof s0 }, s1 = { .sz = sizeof s1 };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &s0), 0);
    send_one(&r, 1, 100, 77);
    struct mlxd_completion w[2];
    for (int i = 0; i < 5000 && mlxd_emu_nic_stats(0, &s1) == 0 && s1.rnr_naks_sent == s0.rnr_naks_sent; i++)
        usleep(1000);
    ck_assert_uint_gt(s1.rnr_naks_sent, s0.rnr_naks_sent);
    ck_assert_int_eq(mlxd_cq_poll(r.acq, w, 2), 0);
    post_one(&r, 0, 999);
    mlxd_test_wait_one(r.acq, 5, &w[0]);
    ck_assert_uint_eq(w[0].status, 0);
    ck_assert_uint_eq(w[0].wr_id, 999);
    ck_assert_ptr_eq(w[0].qp, r.aqp[1]);
    ck_assert_uint_eq(w[0].byte_len, 100);
    mlxd_test_wait_one(r.bcq, 5, &w[1]);
    ck_assert_uint_eq(w[1].status, 0);
    ck_assert_uint_eq(w[1].wr_id, 77);
    rig_close(&r);
}
END_TEST

/* An empty SRQ under UC: the message is dropped and counted (rx_dropped_uc); the next one after
 * a receive is posted arrives. */
START_TEST(empty_uc_dropped_counted)
{
    struct rig r;
    rig_open(&r, MLXD_QP_UC);
    struct mlxd_emu_nic_stats s0 = { .sz = sizeof s0 }, s1 = { .sz = sizeof s1 };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &s0), 0);
    send_one(&r, 0, 100, 1);
    struct mlxd_completion w;
    mlxd_test_wait_one(r.bcq, 5, &w);              /* UC: complete when sent */
    for (int i = 0; i < 5000 && mlxd_emu_nic_stats(0, &s1) == 0 && s1.rx_dropped_uc == s0.rx_dropped_uc; i++)
        usleep(1000);
    ck_assert_uint_eq(s1.rx_dropped_uc, s0.rx_dropped_uc + 1);
    ck_assert_int_eq(mlxd_cq_poll(r.acq, &w, 1), 0);
    post_one(&r, 0, 5);
    exchange(&r, 0, 30, 2, 5, 0);
    rig_close(&r);
}
END_TEST

static void wait_stat(unsigned dev, size_t field, uint64_t want)
{
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    for (int i = 0; i < 5000; i++) {
        ck_assert_int_eq(mlxd_emu_nic_stats(dev, &st), 0);
        if (*(uint64_t *)((char *)&st + field) >= want) return;
        usleep(1000);
    }
    ck_assert_msg(0, "device %u: counter at %zu stays %llu < %llu", dev, field,
                  (unsigned long long)*(uint64_t *)((char *)&st + field), (unsigned long long)want);
}

static uint64_t stat_of(unsigned dev, size_t field)
{
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(dev, &st), 0);
    return *(uint64_t *)((char *)&st + field);
}

/* Waits for one async event on nic; fails after 5 s. */
static struct mlxd_event one_event(struct mlxd_nic *nic)
{
    struct mlxd_event ev[2];
    int n = mlxd_wait(nic, 5000, ev, 2);
    ck_assert_msg(n == 1, "%d events (%s)", n, n < 0 ? mlxd_errmsg() : "");
    return ev[0];
}

/* A QP attached to the SRQ goes to ERR (IB spec 10.2.9.5, 11.6.3.1): the SRQ's posted WQEs are
 * not flushed to it (no completion), IB_EVENT_QP_LAST_WQE_REACHED (16) names it, and the other
 * QPs still take those WQEs in order.  A QP without an SRQ raises no such event. */
START_TEST(qp_error_last_wqe_srq_kept)
{
    struct rig r;
    rig_open(&r, MLXD_QP_RC);
    post_one(&r, 0, 300);
    post_one(&r, 1, 301);
    struct mlxd_event ev[2];
    ck_assert_int_eq(mlxd_wait(r.a, 0, ev, 2), 0);
    ck_assert_int_eq(mlxd_qp_to_error(r.aqp[0]), 0);
    struct mlxd_event e = one_event(r.a);
    ck_assert_uint_eq(e.kind, MLXD_EVENT_QP_LAST_WQE);
    ck_assert_uint_eq(e.kernel_type, 16);
    ck_assert_ptr_eq(e.qp, r.aqp[0]);
    struct mlxd_completion w;
    ck_assert_int_eq(mlxd_cq_poll(r.acq, &w, 1), 0);
    ck_assert_int_eq(mlxd_srq_recv_room(r.srq), DEPTH - 2);
    exchange(&r, 1, 100, 5, 300, 0);
    exchange(&r, 2, 200, 6, 301, 1);
    ck_assert_int_eq(mlxd_qp_to_error(r.bqp[0]), 0);       /* own receive ring: no event */
    ck_assert_int_eq(mlxd_wait(r.b, 200, ev, 2), 0);
    ck_assert_int_eq(mlxd_wait(r.a, 0, ev, 2), 0);          /* and only one for aqp[0] */
    rig_close(&r);
}
END_TEST

/* UC, the LAST packet of a two-packet SEND lost on the wire: the SRQ WQE the FIRST took stays
 * bound to the QP; when the QP goes to ERR that WQE completes on it with IBV_WC_WR_FLUSH_ERR (5)
 * (it has left the SRQ: no other QP may take it, and nothing is lost silently), then the
 * LAST_WQE_REACHED event. */
START_TEST(uc_unfinished_message_flushed)
{
    struct rig r;
    rig_open(&r, MLXD_QP_UC);
    post_one(&r, 0, 400);
    post_one(&r, 1, 401);
    struct mlxd_emu_fault f = { .sz = sizeof f, .drop_idx = { 1 }, .n_drop_idx = 1 };
    ck_assert_int_eq(mlxd_emu_fault_set(1, &f), 0);
    uint64_t rx0 = stat_of(0, offsetof(struct mlxd_emu_nic_stats, rx_pkts));
    send_one(&r, 0, 2000, 9);
    struct mlxd_completion w;
    mlxd_test_wait_one(r.bcq, 5, &w);
    ck_assert_uint_eq(w.status, 0);
    wait_stat(0, offsetof(struct mlxd_emu_nic_stats, rx_pkts), rx0 + 1);
    ck_assert_int_eq(mlxd_emu_fault_set(1, &(struct mlxd_emu_fault){ .sz = sizeof f }), 0);
    ck_assert_int_eq(mlxd_cq_poll(r.acq, &w, 1), 0);
    ck_assert_int_eq(mlxd_qp_to_error(r.aqp[0]), 0);
    mlxd_test_wait_one(r.acq, 5, &w);
    ck_assert_uint_eq(w.status, 5);
    ck_assert_uint_eq(w.wr_id, 400);
    ck_assert_ptr_eq(w.qp, r.aqp[0]);
    struct mlxd_event e = one_event(r.a);
    ck_assert_uint_eq(e.kind, MLXD_EVENT_QP_LAST_WQE);
    ck_assert_ptr_eq(e.qp, r.aqp[0]);
    ck_assert_int_eq(mlxd_cq_poll(r.acq, &w, 1), 0);
    exchange(&r, 1, 100, 7, 401, 1);                       /* the other WQE went to QP 1 */
    rig_close(&r);
}
END_TEST

/* UD QPs on an SRQ (ConnectX and libmlx5 allow it): each datagram takes the SRQ's next receive,
 * whichever QP it arrives on, with the 40-byte GRH in front (IB spec 11.4.1.1; RoCE v2 over IPv4:
 * the IPv4 header at bytes 20..39), byte_len 40 + the payload, the sender's QPN; an empty SRQ
 * drops the datagram (IB spec 9.8.3.2.2, counted rx_ud_no_recv), no error. */
START_TEST(ud_on_srq)
{
    struct mlxd_nic *a, *b;
    unsigned char *abuf, *bbuf;
    struct mlxd_region *areg, *breg;
    struct mlxd_cq *acq, *bcq;
    struct mlxd_srq *srq;
    struct mlxd_qp *aq[2], *bq;
    struct mlxd_endpoint ea[2], eb;
    mlxd_test_open_region("mlx5_0", 16 * SLOT, &a, &abuf, &areg);
    mlxd_test_open_region("mlx5_1", 16 * SLOT, &b, &bbuf, &breg);
    ck_assert_int_eq(mlxd_cq_create(a, 64, NULL, &acq), 0);
    ck_assert_int_eq(mlxd_cq_create(b, 64, NULL, &bcq), 0);
    struct mlxd_srq_opts so = { .sz = sizeof so, .depth = DEPTH };
    ck_assert_msg(mlxd_srq_create(a, &so, &srq) == 0, "%s", mlxd_errmsg());
    for (int i = 0; i < 2; i++) {
        struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UD, .send_depth = 4, .srq = srq };
        ck_assert_msg(mlxd_qp_create(acq, &qo, &aq[i]) == 0, "%s", mlxd_errmsg());
        ck_assert_msg(mlxd_qp_ud_ready(aq[i], 0x1234) == 0, "%s", mlxd_errmsg());
        ck_assert_int_eq(mlxd_qp_endpoint(aq[i], &ea[i]), 0);
    }
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UD, .send_depth = 8, .recv_depth = 1 };
    ck_assert_int_eq(mlxd_qp_create(bcq, &qo, &bq), 0);
    ck_assert_int_eq(mlxd_qp_ud_ready(bq, 0x1234), 0);
    ck_assert_int_eq(mlxd_qp_endpoint(bq, &eb), 0);
    struct mlxd_ah *ah;
    ck_assert_int_eq(mlxd_ah_create(b, ea[0].gid, NULL, &ah), 0);
    for (unsigned i = 0; i < 3; i++) {
        struct mlxd_local l = mlxd_region_local(areg);
        l.addr += (uint64_t)i * SLOT;
        l.length = SLOT;
        struct mlxd_recv rv = { .wr_id = 500 + i, .num_local = 1, .local = &l };
        ck_assert_int_eq(mlxd_srq_receive(srq, &rv, 1), 1);
    }
    uint64_t no_recv = stat_of(0, offsetof(struct mlxd_emu_nic_stats, rx_ud_no_recv));
    static const unsigned to[4] = { 0, 1, 0, 1 }, len[4] = { 100, 200, 300, 50 };
    for (unsigned m = 0; m < 4; m++) {
        for (unsigned i = 0; i < len[m]; i++) bbuf[m * SLOT + i] = (unsigned char)(m * 31 + i);
        struct mlxd_local l = mlxd_region_local(breg);
        struct mlxd_entry e = { .wr_id = m, .op = MLXD_OP_SEND, .flags = MLXD_SIGNALED, .num_local = 1,
                                .local = { l.addr + m * SLOT, len[m], l.lkey }, .ah = ah,
                                .remote_qpn = ea[to[m]].qpn, .remote_qkey = 0x1234 };
        ck_assert_int_eq(mlxd_qp_post(bq, &e), 0);
        ck_assert_int_eq(mlxd_qp_ring(bq), 0);
        struct mlxd_completion w;
        mlxd_test_wait_one(bcq, 5, &w);
        ck_assert_uint_eq(w.status, 0);
        if (m == 3) break;
        mlxd_test_wait_one(acq, 5, &w);
        ck_assert_msg(w.status == 0, "status %u syndrome 0x%x", w.status, w.syndrome);
        ck_assert_uint_eq(w.wr_id, 500 + m);
        ck_assert_ptr_eq(w.qp, aq[to[m]]);
        ck_assert_uint_eq(w.byte_len, 40 + len[m]);
        ck_assert_uint_eq(w.flags & MLXD_WC_GRH, MLXD_WC_GRH);
        ck_assert_uint_eq(mlxd_completion_src_qp(&w), eb.qpn);
        const unsigned char *got = abuf + m * SLOT;
        ck_assert_uint_eq(got[20], 0x45);                  /* IPv4 header, IHL 5 */
        ck_assert_mem_eq(got + 20 + 12, eb.gid + 12, 4);
        ck_assert_mem_eq(got + 40, bbuf + m * SLOT, len[m]);
    }
    wait_stat(0, offsetof(struct mlxd_emu_nic_stats, rx_ud_no_recv), no_recv + 1);
    struct mlxd_completion w;
    ck_assert_int_eq(mlxd_cq_poll(acq, &w, 1), 0);
    ck_assert_int_eq(mlxd_qp_state(aq[1]), 3);
    ck_assert_int_eq(mlxd_close(a), 0);
    ck_assert_int_eq(mlxd_close(b), 0);
    free(abuf);
    free(bbuf);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* Misuse: -EINVAL (or -EBUSY for an SRQ in use), nothing changed: the SRQ still works after. */
START_TEST(misuse_changes_nothing)
{
    struct rig r;
    rig_open(&r, MLXD_QP_RC);
    struct mlxd_srq *x = NULL;
    struct mlxd_srq_opts so = { .sz = sizeof so, .depth = 4 };
    ck_assert_int_eq(mlxd_srq_create(NULL, &so, &x), -EINVAL);
    ck_assert_int_eq(mlxd_srq_create(r.a, NULL, &x), -EINVAL);
    so.sz = 4;
    ck_assert_int_eq(mlxd_srq_create(r.a, &so, &x), -EINVAL);
    so.sz = sizeof so; so.depth = 0;
    ck_assert_int_eq(mlxd_srq_create(r.a, &so, &x), -EINVAL);
    so.depth = 1u << 20;
    ck_assert_int_eq(mlxd_srq_create(r.a, &so, &x), -EINVAL);
    so.depth = 4; so.max_sge = 1000;
    ck_assert_int_eq(mlxd_srq_create(r.a, &so, &x), -EINVAL);
    ck_assert_ptr_null(x);
    struct mlxd_qp *q = NULL;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 4, .recv_depth = 4, .srq = r.srq };
    ck_assert_int_eq(mlxd_qp_create(r.acq, &qo, &q), -EINVAL);
    qo.srq = (struct mlxd_srq *)r.srq;
    ck_assert_int_eq(mlxd_qp_create(r.bcq, &(struct mlxd_qp_opts){ .sz = sizeof qo, .send_depth = 4, .srq = r.srq }, &q), -EINVAL);
    ck_assert_ptr_null(q);
    ck_assert_int_eq(mlxd_srq_arm_limit(NULL, 1), -EINVAL);
    ck_assert_int_eq(mlxd_srq_receive(NULL, NULL, 0), -EINVAL);
    struct mlxd_local l[2] = { mlxd_region_local(r.areg), mlxd_region_local(r.areg) };
    struct mlxd_recv two = { .wr_id = 1, .num_local = 2, .local = l };
    ck_assert_int_eq(mlxd_srq_receive(r.srq, &two, 1), -EINVAL);      /* max_sge 1 */
    struct mlxd_recv many[DEPTH + 1];
    memset(many, 0, sizeof many);
    ck_assert_int_eq(mlxd_srq_receive(r.srq, many, DEPTH + 1), -EINVAL);
    ck_assert_int_eq(mlxd_srq_recv_room(r.srq), DEPTH);
    ck_assert_int_eq(mlxd_srq_destroy(r.srq), -EBUSY);
    ck_assert_msg(strstr(mlxd_errmsg(), "live QP"), "%s", mlxd_errmsg());
    /* still works */
    post_one(&r, 0, 42);
    exchange(&r, 2, 10, 3, 42, 0);
    for (int i = 0; i < NQP; i++) ck_assert_int_eq(mlxd_qp_destroy(r.aqp[i]), 0);
    ck_assert_int_eq(mlxd_srq_destroy(r.srq), 0);
    ck_assert_int_eq(mlxd_srq_destroy(r.srq), 0);                       /* again: 0 */
    ck_assert_int_eq(mlxd_srq_receive(r.srq, many, 1), -EINVAL);
    rig_close(&r);
}
END_TEST

/* Fault injection at every new kernel call: the call returns -errno, its message names the
 * refused kernel call and the errno, nothing is left half made (the emulator holds no SRQ), and
 * after closing nothing at all. */
START_TEST(faults_leave_nothing)
{
    static const char *const names[] = { "SRQ_CREATE", "MODIFY_SRQ", "SRQ_DESTROY", "QP_CREATE" };
    static const int errs[] = { EINVAL, ENOMEM, EFAULT, EIO };
    for (unsigned m = 0; m < 4; m++)
        for (unsigned k = 0; k < 4; k++) {
            struct mlxd_nic *nic;
            unsigned char *buf;
            struct mlxd_region *reg;
            mlxd_test_open_region("mlx5_0", SLOT, &nic, &buf, &reg);
            struct mlxd_cq *cq;
            ck_assert_int_eq(mlxd_cq_create(nic, 16, NULL, &cq), 0);
            struct mlxd_srq_opts so = { .sz = sizeof so, .depth = 4 };
            struct mlxd_srq *srq = NULL;
            struct mlxd_qp *qp = NULL;
            int rc;
            ck_assert_int_eq(mlxd_emu_fail_method(names[m], 1, errs[k]), 0);
            if (m == 0) rc = mlxd_srq_create(nic, &so, &srq);
            else {
                ck_assert_int_eq(mlxd_srq_create(nic, &so, &srq), 0);
                struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 4, .srq = srq };
                if (m == 1) rc = mlxd_srq_arm_limit(srq, 2);
                else if (m == 2) rc = mlxd_srq_destroy(srq);
                else rc = mlxd_qp_create(cq, &qo, &qp);
            }
            mlxd_emu_fail_clear();
            ck_assert_msg(rc == -errs[k], "%s %d: %d", names[m], errs[k], rc);
            ck_assert_msg(strstr(mlxd_errmsg(), names[m]) && strstr(mlxd_errmsg(), strerror(errs[k])),
                          "%s: \"%s\"", names[m], mlxd_errmsg());
            struct mlxd_emu_counts c = { .sz = sizeof c };
            ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
            ck_assert_uint_eq(c.srq, m == 0 ? 0 : 1);
            ck_assert_uint_eq(c.qp, 0);
            if (m == 3) {
                ck_assert_ptr_null(qp);
                ck_assert_int_eq(mlxd_srq_destroy(srq), 0);     /* not held by the failed QP */
            }
            ck_assert_int_eq(mlxd_close(nic), 0);      /* a refused destroy was reported by it */
            free(buf);
            ck_assert_uint_eq(mlxd_emu_live_total(), 0);
        }
}
END_TEST


/* An SRQ's receives complete on the receive CQ of whichever of its QPs a message arrives on:
 * up to the SRQ's depth of them can be outstanding there, so mlxd_qp_create counts the depth on
 * each receive CQ of the SRQ's QPs, once (ibv_create_cq(3): a CQ holds every completion its QPs
 * can have outstanding).  A CQ exactly as deep as the SRQ cannot also take a QP's send
 * completions; one twice as deep takes two QPs of the SRQ (the depth counted once), not a third
 * QP's send depth beyond that; the depth goes back when the last QP of the SRQ on the CQ goes. */
START_TEST(srq_depth_counts_on_recv_cq)
{
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    struct mlxd_cq *small, *big, *scq;
    ck_assert_int_eq(mlxd_cq_create(nic, 16, NULL, &small), 0);
    uint32_t n = mlxd_cq_size(small);
    ck_assert_int_eq(mlxd_cq_create(nic, 2 * n, NULL, &big), 0);
    ck_assert_uint_eq(mlxd_cq_size(big), 2 * n);
    ck_assert_int_eq(mlxd_cq_create(nic, 16, NULL, &scq), 0);
    struct mlxd_srq_opts so = { .sz = sizeof so, .depth = n };
    struct mlxd_srq *srq;
    ck_assert_msg(mlxd_srq_create(nic, &so, &srq) == 0, "%s", mlxd_errmsg());
    struct mlxd_qp_opts o = { .sz = sizeof o, .type = MLXD_QP_RC, .send_depth = 1, .srq = srq };
    struct mlxd_qp *q1, *q2, *q3;
    ck_assert_int_eq(mlxd_qp_create(small, &o, &q1), -EINVAL);       /* 1 + n > n */
    char want[96];
    snprintf(want, sizeof want, "send_depth 1 + recv_depth 0 + SRQ depth %u + 0 of 0 QPs", n);
    ck_assert_msg(strstr(mlxd_errmsg(), want), "%s", mlxd_errmsg());
    /* receives on small (exactly the SRQ's depth), sends on scq: fits, twice (counted once) */
    o.recv_cq = small;
    ck_assert_msg(mlxd_qp_create(scq, &o, &q1) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_qp_create(scq, &o, &q2) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_destroy(q1), 0);
    ck_assert_int_eq(mlxd_qp_destroy(q2), 0);
    o.recv_cq = NULL;
    ck_assert_msg(mlxd_qp_create(big, &o, &q1) == 0, "%s", mlxd_errmsg());   /* 1 + n */
    ck_assert_msg(mlxd_qp_create(big, &o, &q2) == 0, "%s", mlxd_errmsg());   /* + 1: n + 2 */
    struct mlxd_qp_opts o3 = { .sz = sizeof o3, .type = MLXD_QP_RC, .send_depth = n - 1 };
    ck_assert_int_eq(mlxd_qp_create(big, &o3, &q3), -EINVAL);                /* 2n + 1 > 2n */
    o3.send_depth = n - 2;
    ck_assert_msg(mlxd_qp_create(big, &o3, &q3) == 0, "%s", mlxd_errmsg());  /* exactly 2n */
    ck_assert_int_eq(mlxd_qp_destroy(q3), 0);
    ck_assert_int_eq(mlxd_qp_destroy(q1), 0);
    o3.send_depth = n;
    ck_assert_int_eq(mlxd_qp_create(big, &o3, &q3), -EINVAL);   /* q2 still holds the SRQ's depth: 2n + 1 */
    ck_assert_int_eq(mlxd_qp_destroy(q2), 0);
    o3.send_depth = 2 * n;                                        /* the SRQ's depth went with q2 */
    ck_assert_msg(mlxd_qp_create(big, &o3, &q3) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_destroy(q3), 0);
    ck_assert_int_eq(mlxd_srq_destroy(srq), 0);
    ck_assert_int_eq(mlxd_close(nic), 0);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

Suite *srq_suite(void)
{
    Suite *s = suite_create("srq");
    TCase *tc = tcase_create("srq");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, mlxd_test_emu_two_devices, NULL);
    tcase_add_test(tc, shared_by_qps_fifo_reuse);
    tcase_add_test(tc, limit_event_once);
    tcase_add_test(tc, empty_rc_rnr_then_delivery);
    tcase_add_test(tc, empty_uc_dropped_counted);
    tcase_add_test(tc, misuse_changes_nothing);
    tcase_add_test(tc, faults_leave_nothing);
    tcase_add_test(tc, srq_depth_counts_on_recv_cq);
    tcase_add_test(tc, qp_error_last_wqe_srq_kept);
    tcase_add_test(tc, uc_unfinished_message_flushed);
    tcase_add_test(tc, ud_on_srq);
    suite_add_tcase(s, tc);
    return s;
}
