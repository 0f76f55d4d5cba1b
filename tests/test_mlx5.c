/* The data path on rings filled by hand (no NIC, no emulator): the poll loop's ownership test
 * across wraps and batch boundaries, the consumer-index doorbell record, error CQEs, the WQE
 * builders against layouts computed from <infiniband/mlx5dv.h>, the doorbell / BlueFlame and
 * receive batches.  Expected values come from mlx5dv.h structs and constants, the IB spec's
 * ibv_wc_status numbering (infiniband/verbs.h) and rdma-core providers/mlx5/cq.c, qp.c. */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/mlx5dv.h>
#include "driver.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "wqe.h"

/* ---- a producer that writes CQEs the way the NIC does ---- */
struct cqe_spec {
    uint8_t opcode;       /* MLX5_CQE_* */
    uint8_t syndrome, vendor;
    uint8_t wqe_op;       /* requester: MLX5_OPCODE_*, responder: drop counter */
    uint32_t qpn, byte_cnt, imm_be, uidx;
    uint16_t wqe_counter;
    uint64_t ts;
    bool se;
};

static void produce(struct mlxd_cq *cq, uint32_t pi, const struct cqe_spec *s)
{
    volatile void *ring; uint32_t ncqe; volatile uint32_t *db;
    ck_assert_int_eq(mlxd_cq_ring(cq, &ring, &ncqe, &db), 0);
    uint8_t *slot = (uint8_t *)(uintptr_t)ring + (size_t)(pi & (ncqe - 1)) * 64;
    if (s->opcode == MLX5_CQE_REQ_ERR || s->opcode == MLX5_CQE_RESP_ERR) {
        struct mlx5_err_cqe e;
        memset(&e, 0, sizeof e);
        e.srqn = htobe32(s->uidx);
        e.vendor_err_synd = s->vendor;
        e.syndrome = s->syndrome;
        e.s_wqe_opcode_qpn = htobe32((uint32_t)s->wqe_op << 24 | s->qpn);
        e.wqe_counter = htobe16(s->wqe_counter);
        e.op_own = (uint8_t)(s->opcode << 4 | ((pi & ncqe) ? 1 : 0));
        memcpy(slot, &e, 63);
        __atomic_store_n(&slot[63], e.op_own, __ATOMIC_RELEASE);
        return;
    }
    struct mlx5_cqe64 c;
    memset(&c, 0, sizeof c);
    c.srqn_uidx = htobe32(s->uidx);
    c.imm_inval_pkey = s->imm_be;
    c.byte_cnt = htobe32(s->byte_cnt);
    c.timestamp = htobe64(s->ts);
    c.sop_drop_qpn = htobe32((uint32_t)s->wqe_op << 24 | s->qpn);
    c.wqe_counter = htobe16(s->wqe_counter);
    c.op_own = (uint8_t)(s->opcode << 4 | (s->se ? 2 : 0) | ((pi & ncqe) ? 1 : 0));
    memcpy(slot, &c, 63);
    __atomic_store_n(&slot[63], c.op_own, __ATOMIC_RELEASE);
}

static uint32_t dbrec_ci(struct mlxd_cq *cq)
{
    volatile uint32_t *db;
    mlxd_cq_ring(cq, NULL, NULL, &db);
    return db[0];
}

START_TEST(ring_initialised_invalid)
{
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(5, &cq), 0);
    ck_assert_uint_eq(mlxd_cq_size(cq), 8);     /* rounded up to a power of two */
    volatile void *ring; uint32_t n; volatile uint32_t *db;
    ck_assert_int_eq(mlxd_cq_ring(cq, &ring, &n, &db), 0);
    ck_assert_uint_eq(((uintptr_t)ring) & 4095, 0);   /* page aligned */
    ck_assert_uint_eq(((uintptr_t)db) & 4095, 0);     /* so is the doorbell record */
    for (uint32_t i = 0; i < n; i++) ck_assert_uint_eq(((volatile uint8_t *)ring)[i * 64 + 63], 0xF0);
    ck_assert_uint_eq(db[0], 0);
    ck_assert_uint_eq(db[1], 0);
    struct mlxd_completion wc[4];
    db[0] = 0xdeadbeef;                                  /* nothing consumed: record untouched */
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 4), 0);
    ck_assert_uint_eq(db[0], 0xdeadbeef);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

START_TEST(batches_and_wraps)
{
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(16, &cq), 0);
    uint32_t pi = 0, ci = 0, seed = 12345;
    struct mlxd_completion wc[40];
    for (int round = 0; round < 3000; round++) {
        seed = seed * 1103515245 + 12345;
        uint32_t k = (seed >> 16) % (16 - (pi - ci) + 1);     /* never more than the free slots */
        for (uint32_t i = 0; i < k; i++, pi++) {
            struct cqe_spec s = { .opcode = MLX5_CQE_RESP_SEND, .qpn = 0x123, .byte_cnt = pi,
                                  .wqe_counter = (uint16_t)pi };
            if (pi % 7 == 3) {  /* error CQEs mixed in */
                s.opcode = MLX5_CQE_RESP_ERR; s.syndrome = 0x01; s.vendor = 0x55;
            }
            produce(cq, pi, &s);
        }
        seed = seed * 1103515245 + 12345;
        int want = (int)((seed >> 16) % 40);
        volatile uint32_t *db;
        mlxd_cq_ring(cq, NULL, NULL, &db);
        db[0] = 0xa5a5a5a5;                               /* sentinel: must change only when n > 0 */
        int n = mlxd_cq_poll(cq, wc, want);
        int expect = (int)(pi - ci) < want ? (int)(pi - ci) : want;
        ck_assert_int_eq(n, expect);
        for (int i = 0; i < n; i++, ci++) {
            ck_assert_uint_eq(wc[i].wqe_counter, (uint16_t)ci);
            ck_assert_ptr_null(wc[i].qp);
            ck_assert_uint_eq(wc[i].wr_id, (uint16_t)ci);          /* no QP: wr_id = wqe_counter */
            if (ci % 7 == 3) {
                ck_assert_uint_eq(wc[i].status, 1);                 /* IBV_WC_LOC_LEN_ERR */
                ck_assert_uint_eq(wc[i].syndrome, 0x01);
                ck_assert_uint_eq(wc[i].vendor_syndrome, 0x55);
            } else {
                ck_assert_uint_eq(wc[i].status, 0);
                ck_assert_uint_eq(wc[i].byte_len, ci);
                ck_assert_uint_eq(wc[i].opcode, 128);               /* IBV_WC_RECV */
            }
        }
        if (n) ck_assert_uint_eq(db[0], htobe32(ci & 0xffffff));
        else ck_assert_uint_eq(db[0], 0xa5a5a5a5);
        db[0] = htobe32(ci & 0xffffff);
    }
    ck_assert_uint_gt(pi, 16 * 50);    /* many wraps happened */
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

START_TEST(stale_pass_not_consumed)
{
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(4, &cq), 0);
    struct mlxd_completion wc[8];
    struct cqe_spec s = { .opcode = MLX5_CQE_REQ, .wqe_op = MLX5_OPCODE_NOP, .qpn = 7 };
    for (uint32_t pi = 0; pi < 4; pi++) produce(cq, pi, &s);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 4);
    /* second pass expects owner 1: the pass-0 entries (owner 0, valid opcode) are stale */
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 0);
    produce(cq, 4, &s);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 1);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 0);
    /* an entry with owner right but opcode INVALID is not consumed */
    volatile void *ring; mlxd_cq_ring(cq, &ring, NULL, NULL);
    ((volatile uint8_t *)ring)[1 * 64 + 63] = 0xF1;
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 0);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

START_TEST(ci_24_bits)
{
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(8, &cq), 0);
    /* start near the 24-bit limit: the record carries ci & 0xffffff (cq.c update_cons_index) */
    uint32_t start = 0xfffffc;
    cq->ci = start;
    struct cqe_spec s = { .opcode = MLX5_CQE_RESP_SEND, .qpn = 1 };
    for (uint32_t pi = start; pi < start + 8; pi++) produce(cq, pi, &s);
    struct mlxd_completion wc[8];
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 8);
    ck_assert_uint_eq(dbrec_ci(cq), htobe32((start + 8) & 0xffffff));
    ck_assert_uint_eq(be32toh(dbrec_ci(cq)), 4);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

START_TEST(completion_fields)
{
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(8, &cq), 0);
    struct cqe_spec a = { .opcode = MLX5_CQE_RESP_WR_IMM, .qpn = 0xabcdef, .byte_cnt = 4096,
                          .imm_be = htobe32(0x12345678), .wqe_counter = 0, .ts = 0x0102030405060708ull,
                          .wqe_op = 3 /* drop counter */, .se = true };
    struct cqe_spec b = { .opcode = MLX5_CQE_REQ_ERR, .qpn = 0x11, .syndrome = 0x13, .vendor = 0x88,
                          .wqe_op = MLX5_OPCODE_RDMA_WRITE, .wqe_counter = 9 };
    struct cqe_spec c = { .opcode = MLX5_CQE_REQ, .qpn = 0x11, .wqe_op = MLX5_OPCODE_RDMA_READ,
                          .byte_cnt = 77, .wqe_counter = 10 };
    struct cqe_spec d = { .opcode = MLX5_CQE_RESP_ERR, .qpn = 0x11, .syndrome = 0x99 };
    struct cqe_spec e = { .opcode = MLX5_CQE_RESP_SEND_IMM, .qpn = 2, .imm_be = htobe32(7), .byte_cnt = 5 };
    produce(cq, 0, &a); produce(cq, 1, &b); produce(cq, 2, &c); produce(cq, 3, &d); produce(cq, 4, &e);
    struct mlxd_completion wc[8];
    memset(wc, 0xff, sizeof wc);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 5);
    ck_assert_uint_eq(wc[0].status, 0);
    ck_assert_uint_eq(wc[0].opcode, 129);                  /* IBV_WC_RECV_RDMA_WITH_IMM */
    ck_assert_uint_eq(wc[0].imm, 0x12345678);
    ck_assert_uint_eq(wc[0].flags, MLXD_WC_WITH_IMM | MLXD_WC_SOLICITED);
    ck_assert_uint_eq(wc[0].byte_len, 4096);
    ck_assert_uint_eq(wc[0].qpn, 0xabcdef);
    ck_assert_uint_eq(wc[0].timestamp, 0x0102030405060708ull);
    ck_assert_uint_eq(wc[0].hw_drops, 3);
    ck_assert_uint_eq(wc[0].cqe_opcode, MLX5_CQE_RESP_WR_IMM);
    ck_assert_uint_eq(wc[1].status, 10);                   /* IBV_WC_REM_ACCESS_ERR */
    ck_assert_uint_eq(wc[1].syndrome, 0x13);
    ck_assert_uint_eq(wc[1].vendor_syndrome, 0x88);
    ck_assert_uint_eq(wc[1].wqe_opcode, MLX5_OPCODE_RDMA_WRITE);
    ck_assert_uint_eq(wc[1].opcode, 1);                    /* IBV_WC_RDMA_WRITE */
    ck_assert_uint_eq(wc[1].wqe_counter, 9);
    ck_assert_uint_eq(wc[1].hw_drops, 0);
    ck_assert_uint_eq(wc[2].status, 0);
    ck_assert_uint_eq(wc[2].opcode, 2);                    /* IBV_WC_RDMA_READ */
    ck_assert_uint_eq(wc[2].byte_len, 77);
    ck_assert_uint_eq(wc[3].status, 21);                   /* unknown syndrome: IBV_WC_GENERAL_ERR (verbs.h) */
    ck_assert_uint_eq(wc[4].opcode, 128);
    ck_assert_uint_eq(wc[4].imm, 7);
    ck_assert_uint_eq(wc[4].flags, MLXD_WC_WITH_IMM);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

START_TEST(poll_misuse)
{
    struct mlxd_completion wc[2];
    ck_assert_int_eq(mlxd_cq_poll(NULL, wc, 2), -EINVAL);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(4, &cq), 0);
    ck_assert_int_eq(mlxd_cq_poll(cq, NULL, 2), -EINVAL);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, -1), -EINVAL);   /* a negative count is misuse */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "max -1"));
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 0), 0);           /* asking for none is not */
    ck_assert_int_eq(mlxd_cq_arm(cq, false), -EINVAL);     /* detached: no events */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "mlxd_cq_arm"));
    ck_assert_int_eq(mlxd_cq_create_detached(0, &cq), -EINVAL);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

/* ---- WQEs: a QP built by hand around a local ring ---- */
struct fake {
    struct mlxd_qp qp;
    uint8_t *ring, *rq;
    uint64_t wrid[16];
    uint64_t next[16];
    uint64_t rwrid[16];
    uint32_t db[16] __attribute__((aligned(64)));
    uint8_t uar[4096] __attribute__((aligned(4096)));
};

static struct fake *fake_qp(uint32_t wqebbs, uint32_t max_inline, uint32_t bf_buf_size)
{
    struct fake *f = aligned_alloc(4096, sizeof(struct fake) + 4095 - (sizeof(struct fake) + 4095) % 4096);
    memset(f, 0, sizeof *f);
    f->ring = aligned_alloc(4096, 4096 * 4);
    memset(f->ring, 0xEE, 4096 * 4);
    f->rq = aligned_alloc(4096, 4096);
    memset(f->rq, 0xEE, 4096);
    struct mlxd_qp *q = &f->qp;
    q->sq = f->ring;
    q->sq_wqebbs = wqebbs;
    q->sq_depth = wqebbs;
    q->sq_wrid = f->wrid;
    q->sq_next = f->next;
    q->dbrec = f->db;
    q->bf_reg = f->uar + 0x800;
    q->bf_buf_size = bf_buf_size;
    q->qpn = 0x0abcde;
    q->max_inline = max_inline;
    q->max_send_sge = 1;
    q->state = OBJ_LIVE;
    q->type = MLXD_QP_RC;
    q->rq = f->rq;
    q->rq_wqe_cnt = 4;
    q->rq_depth = 4;
    q->rq_wqe_shift = 4;
    q->max_recv_sge = 1;
    q->rq_wrid = f->rwrid;
    return f;
}

static void fake_free(struct fake *f) { free(f->ring); free(f->rq); free(f); }

START_TEST(wqe_write_layout)
{
    struct fake *f = fake_qp(8, 0, 0);
    struct mlxd_entry e = { .wr_id = 42, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED | MLXD_FENCE,
                            .num_local = 1, .local = { 0x1000200030004000ull, 4096, 0x1111 },
                            .remote = { 0x5000600070008000ull, 0, 0x2222, 0 } };
    f->qp.sq_pi = 0x10005;    /* 16-bit index in the ctrl segment, WQEBB 5 of 8 */
    f->qp.sq_ci = 0x10000;
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), 0);
    struct mlx5_wqe_ctrl_seg c; struct mlx5_wqe_raddr_seg r; struct mlx5_wqe_data_seg d;
    memset(&c, 0, sizeof c); memset(&r, 0, sizeof r);
    c.opmod_idx_opcode = htobe32((0x0005u << 8) | MLX5_OPCODE_RDMA_WRITE);
    c.qpn_ds = htobe32(0x0abcde << 8 | 3);           /* ctrl + raddr + data = 48 B = 3 x 16 */
    c.fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE;
    r.raddr = htobe64(0x5000600070008000ull);
    r.rkey = htobe32(0x2222);
    d.byte_count = htobe32(4096); d.lkey = htobe32(0x1111); d.addr = htobe64(0x1000200030004000ull);
    uint8_t *w = f->ring + 5 * 64;
    ck_assert_mem_eq(w, &c, 16);
    ck_assert_mem_eq(w + 16, &r, 16);
    ck_assert_mem_eq(w + 32, &d, 16);
    ck_assert_uint_eq(w[48], 0xEE);                     /* nothing beyond the WQE's 48 bytes */
    ck_assert_uint_eq(f->wrid[5], 42);
    ck_assert_uint_eq(f->qp.sq_pi, 0x10006);
    fake_free(f);
}
END_TEST

START_TEST(wqe_each_opcode)
{
    static const struct { uint32_t op; uint8_t mlx5; uint32_t ds; } t[] = {
        { MLXD_OP_NOP, MLX5_OPCODE_NOP, 1 },
        { MLXD_OP_WRITE, MLX5_OPCODE_RDMA_WRITE, 3 },
        { MLXD_OP_WRITE_IMM, MLX5_OPCODE_RDMA_WRITE_IMM, 3 },
        { MLXD_OP_SEND, MLX5_OPCODE_SEND, 2 },
        { MLXD_OP_SEND_IMM, MLX5_OPCODE_SEND_IMM, 2 },
        { MLXD_OP_READ, MLX5_OPCODE_RDMA_READ, 3 },
    };
    for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct fake *f = fake_qp(8, 0, 0);
        struct mlxd_entry e = { .op = t[i].op, .flags = MLXD_SOLICITED, .imm = 0xcafe0001, .num_local = 1,
                                .local = { 0x4000, 8, 5 }, .remote = { 0x8000, 0, 6, 0 } };
        ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), 0);
        struct mlx5_wqe_ctrl_seg *c = (void *)f->ring;
        ck_assert_uint_eq(be32toh(c->opmod_idx_opcode), t[i].mlx5);
        ck_assert_uint_eq(be32toh(c->qpn_ds) & 0x3f, t[i].ds);
        ck_assert_uint_eq(c->fm_ce_se, MLX5_WQE_CTRL_SOLICITED);
        bool imm = t[i].op == MLXD_OP_WRITE_IMM || t[i].op == MLXD_OP_SEND_IMM;
        ck_assert_uint_eq(c->imm, imm ? htobe32(0xcafe0001) : 0);   /* sent big-endian */
        if (t[i].op == MLXD_OP_SEND || t[i].op == MLXD_OP_SEND_IMM) {
            struct mlx5_wqe_data_seg *d = (void *)(f->ring + 16);
            ck_assert_uint_eq(be64toh(d->addr), 0x4000);
        }
        fake_free(f);
    }
    /* zero-length WRITE_IMM: ctrl + raddr only (byte_count 0 would mean 2 GiB) */
    struct fake *f = fake_qp(8, 0, 0);
    struct mlxd_entry z = { .op = MLXD_OP_WRITE_IMM, .imm = 1, .num_local = 0, .remote = { 0x8000, 0, 6, 0 } };
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &z), 0);
    ck_assert_uint_eq(be32toh(((struct mlx5_wqe_ctrl_seg *)f->ring)->qpn_ds) & 0x3f, 2);
    fake_free(f);
}
END_TEST

START_TEST(wqe_inline_wraps)
{
    struct fake *f = fake_qp(4, 200, 0);
    uint8_t src[100];
    for (int i = 0; i < 100; i++) src[i] = (uint8_t)(i + 1);
    f->qp.sq_pi = 3;          /* last WQEBB: the WQE (16+16+112 = 144 B, 3 WQEBBs) wraps */
    f->qp.sq_ci = 3;
    struct mlxd_entry e = { .wr_id = 9, .op = MLXD_OP_WRITE, .flags = MLXD_INLINE | MLXD_SIGNALED, .num_local = 1,
                            .local = { (uintptr_t)src, 100, 0 }, .remote = { 0x9000, 0, 0x77, 0 } };
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), 0);
    ck_assert_uint_eq(f->qp.sq_pi, 6);
    uint8_t *w = f->ring + 3 * 64;
    ck_assert_uint_eq(be32toh(*(uint32_t *)(w + 4)) & 0x3f, 9);       /* 144 / 16 */
    struct mlx5_wqe_inl_data_seg *h = (void *)(w + 32);
    ck_assert_uint_eq(be32toh(h->byte_count), 100 | MLX5_INLINE_SEG);
    /* bytes 36..63 of block 3 hold src[0..28), the rest continues at the ring's start */
    ck_assert_mem_eq(w + 36, src, 28);
    ck_assert_mem_eq(f->ring, src + 28, 72);
    for (int i = 72; i < 80; i++) ck_assert_uint_eq(f->ring[i], 0);  /* padding to 16 B */
    ck_assert_uint_eq(f->ring[80], 0xEE);
    /* inline longer than max_inline: EINVAL, nothing written */
    uint8_t big[300] = {0};
    struct mlxd_entry b = e;
    b.local.addr = (uintptr_t)big; b.local.length = 201;
    f->qp.sq_ci = 6;
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &b), -EINVAL);
    ck_assert_uint_eq(f->qp.sq_pi, 6);
    fake_free(f);
}
END_TEST

START_TEST(send_ring_full_and_reclaim)
{
    struct fake *f = fake_qp(4, 0, 0);
    struct mlxd_entry nop = { .op = MLXD_OP_NOP };
    for (int i = 0; i < 4; i++) { nop.wr_id = 100 + i; nop.flags = i == 3 ? MLXD_SIGNALED : 0;
                                  ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), 0); }
    uint8_t before[256];
    memcpy(before, f->ring, 256);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), -EAGAIN);          /* full: never overwrites */
    ck_assert_mem_eq(before, f->ring, 256);
    ck_assert_int_eq(mlxd_qp_send_room(&f->qp), 0);
    /* a requester CQE for WQE 3 releases everything up to it */
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(4, &cq), 0);
    struct mlxd_qp *table[MLXD_MAX_QPS] = {0};
    f->qp.uidx = 7;
    table[7] = &f->qp;
    cq->qp_table = table;
    struct cqe_spec s = { .opcode = MLX5_CQE_REQ, .wqe_op = MLX5_OPCODE_NOP, .qpn = 0x0abcde, .uidx = 7, .wqe_counter = 3 };
    produce(cq, 0, &s);
    struct mlxd_completion wc[2];
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 2), 1);
    ck_assert_uint_eq(wc[0].wr_id, 103);
    ck_assert_ptr_eq(wc[0].qp, &f->qp);
    ck_assert_int_eq(mlxd_qp_send_room(&f->qp), 4);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), 0);                 /* wraps to WQEBB 0 */
    ck_assert_uint_eq(be32toh(*(uint32_t *)f->ring), 4u << 8);       /* index 4, opcode NOP */
    cq->qp_table = NULL;
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    fake_free(f);
}
END_TEST

START_TEST(depths_bound_outstanding_entries)
{
    /* a ring of 8 WQEBBs for send_depth 4 (as max_inline makes room for larger WQEs): 4 NOPs
     * of one WQEBB each fill it, the CQ having been sized for 4 completions */
    struct fake *f = fake_qp(8, 0, 0);
    f->qp.sq_depth = 4;
    struct mlxd_entry nop = { .op = MLXD_OP_NOP, .flags = MLXD_SIGNALED };
    for (int i = 0; i < 4; i++) ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), 0);
    ck_assert_int_eq(mlxd_qp_send_room(&f->qp), 0);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), -EAGAIN);
    ck_assert_uint_eq(f->qp.sq_pi, 4);                                 /* nothing written */
    ck_assert_uint_eq(f->qp.sq_posted, 4);
    ck_assert_uint_eq(f->next[3], (uint64_t)4 << 32 | 4);              /* entries << 32 | WQEBBs */
    f->qp.sq_ci = f->next[1];                                          /* two completed */
    ck_assert_int_eq(mlxd_qp_send_room(&f->qp), 2);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), 0);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), 0);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &nop), -EAGAIN);
    /* receives: a ring of 4 for recv_depth 3 */
    f->qp.rq_depth = 3;
    struct mlxd_recv r[4] = { { 1, 0, 0, NULL }, { 2, 0, 0, NULL }, { 3, 0, 0, NULL }, { 4, 0, 0, NULL } };
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, r, 4), -EINVAL);           /* more than recv_depth: never */
    ck_assert_uint_eq(f->qp.rq_head, 0);
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, r, 3), 3);
    ck_assert_int_eq(mlxd_qp_recv_room(&f->qp), 0);
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, r, 1), -EAGAIN);
    f->qp.rq_ci = 1;
    ck_assert_int_eq(mlxd_qp_recv_room(&f->qp), 1);
    fake_free(f);
}
END_TEST

START_TEST(doorbell_and_blueflame)
{
    /* doorbell only (NC UAR): record, then the ctrl's first 8 bytes at UAR+0x800 */
    struct fake *f = fake_qp(8, 64, 0);
    struct mlxd_entry e = { .op = MLXD_OP_SEND, .flags = MLXD_SIGNALED, .num_local = 1, .local = { 0x1000, 4, 1 } };
    ck_assert_int_eq(mlxd_qp_ring(&f->qp), 0);                       /* nothing posted: nothing */
    ck_assert_uint_eq(f->db[1], 0);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), 0);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(&f->qp), 0);
    ck_assert_uint_eq(f->db[1], htobe32(2));
    ck_assert_mem_eq(f->uar + 0x800, f->ring + 64, 8);                /* the LAST WQE's ctrl */
    ck_assert_uint_eq(f->qp.bf_offset, 0);
    fake_free(f);
    /* BlueFlame (WC UAR, 256-byte halves): a lone WQE is copied whole; halves alternate */
    f = fake_qp(8, 64, 256);
    uint8_t data[40]; memset(data, 0x3c, sizeof data);
    struct mlxd_entry i = { .op = MLXD_OP_SEND, .flags = MLXD_INLINE | MLXD_SIGNALED, .num_local = 1,
                            .local = { (uintptr_t)data, 40, 0 } };
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &i), 0);
    ck_assert_int_eq(mlxd_qp_ring(&f->qp), 0);
    ck_assert_mem_eq(f->uar + 0x800, f->ring, 64);
    ck_assert_uint_eq(f->qp.bf_offset, 256);
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &i), 0);
    ck_assert_int_eq(mlxd_qp_ring(&f->qp), 0);
    ck_assert_mem_eq(f->uar + 0x800 + 256, f->ring + 64, 64);
    ck_assert_uint_eq(f->qp.bf_offset, 0);
    ck_assert_uint_eq(f->db[1], htobe32(2));
    fake_free(f);
}
END_TEST

START_TEST(receive_batches)
{
    struct fake *f = fake_qp(8, 0, 0);
    struct mlxd_local l[3] = { { 0x1000, 100, 0x11 }, { 0x2000, 200, 0x22 }, { 0x3000, 300, 0x33 } };
    struct mlxd_recv r[3] = { { 1, 1, 0, &l[0] }, { 2, 0, 0, NULL }, { 3, 1, 0, &l[2] } };
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, r, 3), 3);
    ck_assert_uint_eq(f->db[0], htobe32(3));                          /* one record write: head 3 */
    struct mlx5_wqe_data_seg *d = (void *)f->rq;
    ck_assert_uint_eq(be32toh(d[0].byte_count), 100);
    ck_assert_uint_eq(be32toh(d[0].lkey), 0x11);
    ck_assert_uint_eq(be64toh(d[0].addr), 0x1000);
    /* no scatter entry: the first segment is the terminator (MLX5_INVALID_LKEY) */
    ck_assert_uint_eq(d[1].byte_count, 0);
    ck_assert_uint_eq(be32toh(d[1].lkey), MLX5_INVALID_LKEY);
    ck_assert_uint_eq(d[1].addr, 0);
    ck_assert_uint_eq(f->rwrid[2], 3);
    ck_assert_int_eq(mlxd_qp_recv_room(&f->qp), 1);
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, r, 2), -EAGAIN);          /* all or nothing */
    ck_assert_uint_eq(f->db[0], htobe32(3));
    struct mlxd_recv bad = { 4, 2, 0, l };                              /* 2 > max_recv_sge 1 */
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, &bad, 1), -EINVAL);
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, r, 1), 1);
    ck_assert_uint_eq(f->db[0], htobe32(4));
    /* stride 32 (2 SGEs): one SGE is followed by a terminator */
    f->qp.rq_wqe_shift = 5; f->qp.max_recv_sge = 2; f->qp.rq_head = 0; f->qp.rq_ci = 0;
    memset(f->rq, 0xEE, 128);
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, r, 1), 1);
    ck_assert_uint_eq(be32toh(d[1].lkey), MLX5_INVALID_LKEY);
    fake_free(f);
}
END_TEST

START_TEST(post_misuse)
{
    struct fake *f = fake_qp(8, 16, 0);
    struct mlxd_entry e = { .op = 99 };
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), -EINVAL);
    e.op = MLXD_OP_WRITE; e.flags = 0x100;
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), -EINVAL);
    e.flags = 0; e.num_local = 2;
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), -EINVAL);
    e.op = MLXD_OP_READ; e.num_local = 1; e.local.length = 8; e.flags = MLXD_INLINE;
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), -EINVAL);
    f->qp.type = MLXD_QP_UC; e.flags = 0;
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), -EINVAL);               /* UC has no READ */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "UC"));
    /* 2^31 bytes: bit 31 of byte_count is the inline flag (MLX5_INLINE_SEG) */
    f->qp.type = MLXD_QP_RC;
    struct mlxd_entry big = { .op = MLXD_OP_WRITE, .num_local = 1, .local = { 0x1000, 0x80000000u, 1 } };
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &big), -EINVAL);
    big.local.length = 0x7fffffffu;                                      /* the largest: accepted */
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &big), 0);
    f->qp.sq_pi = 0; f->qp.sq_posted = 0;
    memset(f->ring, 0xEE, 4096);
    /* more receives at once than recv_depth: EINVAL before r[] is read (r is one entry here) */
    struct mlxd_recv one = { .wr_id = 1 };
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, &one, 5), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "recv_depth 4"));
    ck_assert_uint_eq(f->qp.rq_head, 0);
    ck_assert_uint_eq(f->qp.sq_pi, 0);
    ck_assert_uint_eq(f->ring[0], 0xEE);
    ck_assert_int_eq(mlxd_qp_post(NULL, &e), -EINVAL);
    f->qp.state = OBJ_DEAD;
    e.op = MLXD_OP_NOP;
    ck_assert_int_eq(mlxd_qp_post(&f->qp, &e), -EINVAL);
    ck_assert_int_eq(mlxd_qp_ring(&f->qp), -EINVAL);
    ck_assert_int_eq(mlxd_qp_receive(&f->qp, NULL, 0), -EINVAL);
    fake_free(f);
}
END_TEST

Suite *mlx5_suite(void)
{
    Suite *s = suite_create("mlx5");
    TCase *tc = tcase_create("synthetic");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ring_initialised_invalid);
    tcase_add_test(tc, batches_and_wraps);
    tcase_add_test(tc, stale_pass_not_consumed);
    tcase_add_test(tc, ci_24_bits);
    tcase_add_test(tc, completion_fields);
    tcase_add_test(tc, poll_misuse);
    tcase_add_test(tc, wqe_write_layout);
    tcase_add_test(tc, wqe_each_opcode);
    tcase_add_test(tc, wqe_inline_wraps);
    tcase_add_test(tc, send_ring_full_and_reclaim);
    tcase_add_test(tc, depths_bound_outstanding_entries);
    tcase_add_test(tc, doorbell_and_blueflame);
    tcase_add_test(tc, receive_batches);
    tcase_add_test(tc, post_misuse);
    suite_add_tcase(s, tc);
    return s;
}
