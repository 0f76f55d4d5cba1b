/* The batch poll loop (mlx5/poll.c, the inline test in mlxd_mlx5.h) on rings filled by hand:
 * batches that straddle the end of the ring (the owner parity flips there), a batch of exactly
 * ncqe, error CQEs in the middle of a batch, runs of CQEs of different QPs in one batch (wr_id
 * tables and receive/send accounting per QP), the QPN scan of cqe_version 0, every responder
 * opcode with every CQE format and SE, and the mlxd_cq_poll symbol against the inline call.
 * Expected values come from <infiniband/mlx5dv.h> (struct mlx5_cqe64 / mlx5_err_cqe, MLX5_CQE_*),
 * enum ibv_wc_status / ibv_wc_opcode numbering (infiniband/verbs.h) and rdma-core
 * providers/mlx5/cq.c (mlx5_parse_cqe, mlx5_handle_error_cqe). */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/mlx5dv.h>
#include "driver.h"
#include "fake_qp.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"

struct spec {
    uint8_t opcode, fmt, syndrome, top;   /* top: WQE opcode (requester) / drop counter (responder) */
    bool se;
    uint32_t qpn, uidx, byte_cnt, imm_be;
    uint32_t flags_rqpn;                  /* host order: 'g' bits 29:28, source QPN 23:0 */
    uint16_t wqe_counter;
    uint64_t ts;
};

/* Writes the CQE at producer index pi as the NIC does: 63 bytes, then op_own (owner = pass). */
static void put(struct mlxd_cq *cq, uint32_t pi, const struct spec *s)
{
    volatile void *ring; uint32_t ncqe; volatile uint32_t *db;
    ck_assert_int_eq(mlxd_cq_ring(cq, &ring, &ncqe, &db), 0);
    uint8_t *slot = (uint8_t *)(uintptr_t)ring + (size_t)(pi & (ncqe - 1)) * 64;
    uint8_t own = (pi & ncqe) ? 1 : 0;
    if (s->opcode == MLX5_CQE_REQ_ERR || s->opcode == MLX5_CQE_RESP_ERR) {
        struct mlx5_err_cqe e;
        memset(&e, 0, sizeof e);
        e.srqn = htobe32(s->uidx);
        e.syndrome = s->syndrome;
        e.vendor_err_synd = 0x42;
        e.s_wqe_opcode_qpn = htobe32((uint32_t)s->top << 24 | s->qpn);
        e.wqe_counter = htobe16(s->wqe_counter);
        e.op_own = (uint8_t)(s->opcode << 4 | own);
        memcpy(slot, &e, 63);
        __atomic_store_n(&slot[63], e.op_own, __ATOMIC_RELEASE);
        return;
    }
    struct mlx5_cqe64 c;
    memset(&c, 0, sizeof c);
    c.srqn_uidx = htobe32(s->uidx);
    c.imm_inval_pkey = s->imm_be;
    c.byte_cnt = htobe32(s->byte_cnt);
    c.flags_rqpn = htobe32(s->flags_rqpn);
    c.timestamp = htobe64(s->ts);
    c.sop_drop_qpn = htobe32((uint32_t)s->top << 24 | s->qpn);
    c.wqe_counter = htobe16(s->wqe_counter);
    c.signature = 0x5a;
    c.op_own = (uint8_t)(s->opcode << 4 | s->fmt << 2 | (s->se ? 2 : 0) | own);
    memcpy(slot, &c, 63);
    __atomic_store_n(&slot[63], c.op_own, __ATOMIC_RELEASE);
}

static uint32_t record_ci(struct mlxd_cq *cq)
{
    volatile uint32_t *db;
    mlxd_cq_ring(cq, NULL, NULL, &db);
    return be32toh(db[0]);                  /* doorbell record [0]: SET_CI (update_cons_index) */
}


static struct mlxd_cq *cq_with_table(uint32_t entries)
{
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(entries, &cq), 0);
    memset(table, 0, sizeof table);
    cq->qp_table = table;        /* as a NIC's CQ: uidx (cqe_version 1) indexes this table */
    return cq;
}

static void cq_done(struct mlxd_cq *cq)
{
    cq->qp_table = NULL;
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}

static struct spec recv_of(const struct fq *f, uint16_t wc)
{
    struct spec s = { .opcode = MLX5_CQE_RESP_WR_IMM, .qpn = f->qp.qpn, .uidx = f->qp.uidx,
                      .byte_cnt = 100u + wc, .imm_be = htobe32(0xabc00000u | wc), .wqe_counter = wc };
    return s;
}

START_TEST(batch_straddles_ring_end)
{
    struct mlxd_cq *cq = cq_with_table(8);
    struct fq a, b;
    fq_init(&a, 0x111, 3, 1000);
    fq_init(&b, 0x222, 9, 2000);
    struct mlxd_completion wc[16];
    uint32_t pi = 0;
    for (; pi < 5; pi++) { struct spec s = recv_of(&a, (uint16_t)pi); put(cq, pi, &s); }
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 5), 5);
    ck_assert_uint_eq(a.qp.rq_ci, 5);
    /* slots 5, 6, 7 (pass 0, owner 0) then 0, 1, 2 (pass 1, owner 1): QP a before the end,
     * QP b after it */
    for (; pi < 11; pi++) {
        struct spec s = pi < 8 ? recv_of(&a, (uint16_t)pi) : recv_of(&b, (uint16_t)(pi - 8));
        put(cq, pi, &s);
    }
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 16), 6);
    for (uint32_t i = 0; i < 6; i++) {
        uint32_t p = 5 + i;
        const struct fq *f = p < 8 ? &a : &b;
        uint16_t w = (uint16_t)(p < 8 ? p : p - 8);
        ck_assert_uint_eq(wc[i].wqe_counter, w);
        ck_assert_uint_eq(wc[i].wr_id, f->rwrid[w & 7]);
        ck_assert_ptr_eq(wc[i].qp, &f->qp);
        ck_assert_uint_eq(wc[i].qpn, f->qp.qpn);
        ck_assert_uint_eq(wc[i].byte_len, 100u + w);
        ck_assert_uint_eq(wc[i].imm, 0xabc00000u | w);
        ck_assert_uint_eq(wc[i].opcode, 129);                  /* IBV_WC_RECV_RDMA_WITH_IMM */
    }
    ck_assert_uint_eq(a.qp.rq_ci, 8);                          /* each QP's receives, once */
    ck_assert_uint_eq(b.qp.rq_ci, 3);
    ck_assert_uint_eq(record_ci(cq), 11);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 16), 0);
    /* max stops a batch exactly at the ring end, and one past it */
    for (; pi < 17; pi++) { struct spec s = recv_of(&a, (uint16_t)pi); put(cq, pi, &s); }
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 5), 5);              /* ci 11 -> 16 = the end of pass 1 */
    ck_assert_uint_eq(record_ci(cq), 16);
    for (; pi < 21; pi++) { struct spec s = recv_of(&a, (uint16_t)pi); put(cq, pi, &s); }
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 16), 5);             /* 16 .. 20, pass 2 */
    ck_assert_uint_eq(wc[4].wqe_counter, 20);
    ck_assert_uint_eq(record_ci(cq), 21);
    cq_done(cq);
}
END_TEST

START_TEST(batch_of_exactly_ncqe)
{
    struct mlxd_cq *cq = cq_with_table(16);
    struct fq a;
    fq_init(&a, 0x333, 0, 500);
    struct mlxd_completion wc[40];
    uint32_t pi = 0, ci = 0;
    for (int round = 0; round < 6; round++) {
        /* from ci (0, then mid-ring) fill the whole ring: pi - ci == ncqe */
        for (; pi < ci + 16; pi++) { struct spec s = recv_of(&a, (uint16_t)pi); put(cq, pi, &s); }
        ck_assert_int_eq(mlxd_cq_poll(cq, wc, 40), 16);
        for (int i = 0; i < 16; i++) ck_assert_uint_eq(wc[i].wqe_counter, (uint16_t)(ci + (uint32_t)i));
        ci += 16;
        ck_assert_uint_eq(record_ci(cq), ci);
        ck_assert_int_eq(mlxd_cq_poll(cq, wc, 40), 0);         /* the last pass's CQEs are stale */
        /* move the start by 3: the next full batch straddles the end */
        for (; pi < ci + 3; pi++) { struct spec s = recv_of(&a, (uint16_t)pi); put(cq, pi, &s); }
        ck_assert_int_eq(mlxd_cq_poll(cq, wc, 40), 3);
        ci += 3;
    }
    ck_assert_uint_eq(a.qp.rq_ci, ci);
    cq_done(cq);
}
END_TEST

START_TEST(error_in_the_middle_stops_nothing)
{
    struct mlxd_cq *cq = cq_with_table(8);
    struct fq a;
    fq_init(&a, 0x444, 5, 7000);
    struct spec s[6] = {
        recv_of(&a, 0), recv_of(&a, 1),
        { .opcode = MLX5_CQE_RESP_ERR, .syndrome = 0x05, .qpn = 0x444, .uidx = 5, .wqe_counter = 2 },
        { .opcode = MLX5_CQE_REQ_ERR, .syndrome = 0x15, .top = MLX5_OPCODE_SEND, .qpn = 0x444, .uidx = 5,
          .wqe_counter = 6 },
        { .opcode = MLX5_CQE_REQ, .top = MLX5_OPCODE_RDMA_READ, .qpn = 0x444, .uidx = 5, .byte_cnt = 333,
          .wqe_counter = 7 },
        recv_of(&a, 3),
    };
    for (uint32_t i = 0; i < 6; i++) put(cq, i, &s[i]);
    struct mlxd_completion wc[8];
    memset(wc, 0xff, sizeof wc);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 6);
    ck_assert_uint_eq(wc[0].status, 0);
    ck_assert_uint_eq(wc[1].status, 0);
    ck_assert_uint_eq(wc[2].status, 5);                        /* IBV_WC_WR_FLUSH_ERR */
    ck_assert_uint_eq(wc[2].opcode, 128);                      /* IBV_WC_RECV */
    ck_assert_uint_eq(wc[2].syndrome, 0x05);
    ck_assert_uint_eq(wc[2].vendor_syndrome, 0x42);
    ck_assert_uint_eq(wc[2].wr_id, 7002);                      /* the receive's wr_id */
    ck_assert_uint_eq(wc[2].byte_len, 0);
    ck_assert_uint_eq(wc[2].cqe_opcode, MLX5_CQE_RESP_ERR);
    ck_assert_uint_eq(wc[3].status, 12);                       /* IBV_WC_RETRY_EXC_ERR */
    ck_assert_uint_eq(wc[3].opcode, 0);                        /* IBV_WC_SEND */
    ck_assert_uint_eq(wc[3].wqe_opcode, MLX5_OPCODE_SEND);
    ck_assert_uint_eq(wc[3].wr_id, 7106);                      /* the send's wr_id */
    ck_assert_uint_eq(wc[4].status, 0);
    ck_assert_uint_eq(wc[4].opcode, 2);                        /* IBV_WC_RDMA_READ */
    ck_assert_uint_eq(wc[4].byte_len, 333);
    ck_assert_uint_eq(wc[4].wr_id, 7107);
    ck_assert_uint_eq(wc[4].hw_drops, 0);
    ck_assert_uint_eq(wc[5].status, 0);
    ck_assert_uint_eq(wc[5].wr_id, 7003);
    ck_assert_uint_eq(wc[5].imm, 0xabc00003u);
    for (int i = 0; i < 6; i++) {
        ck_assert_ptr_eq(wc[i].qp, &a.qp);
        ck_assert_uint_eq(wc[i].qpn, 0x444);
        ck_assert_uint_eq(wc[i].reserved, 0);
    }
    ck_assert_uint_eq(a.qp.rq_ci, 4);                          /* 3 receives + the flushed one */
    ck_assert_uint_eq(a.qp.sq_ci, (uint64_t)57 << 32 | 1007);  /* sq_next of the last send CQE */
    ck_assert_uint_eq(record_ci(cq), 6);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 0);
    cq_done(cq);
}
END_TEST

START_TEST(runs_of_qps_in_one_batch)
{
    struct mlxd_cq *cq = cq_with_table(32);
    struct fq a, b;
    fq_init(&a, 0x0a0a0a, 3, 100);
    fq_init(&b, 0x0b0b0b, 4000, 200);
    /* a a b a (unknown QPN, uidx 5 empty) b b a, then a send of b */
    struct spec s[9] = { recv_of(&a, 0), recv_of(&a, 1), recv_of(&b, 0), recv_of(&a, 2),
                         { .opcode = MLX5_CQE_RESP_SEND, .qpn = 0x777, .uidx = 5, .wqe_counter = 0x1234 },
                         recv_of(&b, 1), recv_of(&b, 2), recv_of(&a, 3),
                         { .opcode = MLX5_CQE_REQ, .top = MLX5_OPCODE_RDMA_WRITE, .qpn = 0x0b0b0b, .uidx = 4000,
                           .wqe_counter = 10 } };
    for (uint32_t i = 0; i < 9; i++) put(cq, i, &s[i]);
    struct mlxd_completion wc[9];
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 9), 9);
    static const uint64_t want[9] = { 100, 101, 200, 102, 0x1234, 201, 202, 103, 302 };
    for (int i = 0; i < 9; i++) ck_assert_uint_eq(wc[i].wr_id, want[i]);
    ck_assert_ptr_null(wc[4].qp);                              /* no QP: wr_id = wqe_counter */
    ck_assert_ptr_eq(wc[2].qp, &b.qp);
    ck_assert_ptr_eq(wc[7].qp, &a.qp);
    ck_assert_uint_eq(wc[8].opcode, 1);                        /* IBV_WC_RDMA_WRITE */
    ck_assert_uint_eq(a.qp.rq_ci, 4);
    ck_assert_uint_eq(b.qp.rq_ci, 3);
    ck_assert_uint_eq(b.qp.sq_ci, (uint64_t)52 << 32 | 1002);  /* sq_next[10 & 7] */
    ck_assert_uint_eq(a.qp.sq_ci, 0);
    /* cqe_version 0: the user index means nothing, the QP is found by its QPN */
    cq->cqe_version = 0;
    struct spec v0 = recv_of(&b, 5);
    v0.uidx = 3;                                                /* a's index: must not be used */
    put(cq, 9, &v0);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 9), 1);
    ck_assert_ptr_eq(wc[0].qp, &b.qp);
    ck_assert_uint_eq(wc[0].wr_id, 205);
    ck_assert_uint_eq(b.qp.rq_ci, 4);
    cq_done(cq);
}
END_TEST

START_TEST(responder_opcodes_formats_se)
{
    /* every responder opcode x CQE format 0..3 (scatter-to-CQE uses 1 and 2) x SE: the opcode
     * table of the loop is indexed by these bits */
    static const struct { uint8_t op; uint32_t wc_op; bool imm, inv; } ops[] = {
        { MLX5_CQE_RESP_WR_IMM, 129, true, false }, { MLX5_CQE_RESP_SEND, 128, false, false },
        { MLX5_CQE_RESP_SEND_IMM, 128, true, false }, { MLX5_CQE_RESP_SEND_INV, 128, false, true } };
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(64, &cq), 0);
    uint32_t pi = 0;
    for (int k = 0; k < 4; k++)
        for (uint8_t fmt = 0; fmt < 4; fmt++)
            for (int se = 0; se < 2; se++, pi++) {
                struct spec s = { .opcode = ops[k].op, .fmt = fmt, .se = se, .qpn = 0xfedcba, .top = 9,
                                  .byte_cnt = pi, .imm_be = htobe32(0x01020304u + pi),
                                  .wqe_counter = (uint16_t)(0xff00 + pi), .ts = 0x1122334455667788ull + pi };
                put(cq, pi, &s);
            }
    struct mlxd_completion wc[32];
    memset(wc, 0xee, sizeof wc);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 32), 32);
    for (uint32_t i = 0; i < 32; i++) {
        int k = (int)i / 8;
        bool se = i & 1;
        ck_assert_uint_eq(wc[i].status, 0);
        ck_assert_uint_eq(wc[i].opcode, ops[k].wc_op);
        ck_assert_uint_eq(wc[i].cqe_opcode, ops[k].op);
        ck_assert_uint_eq(wc[i].flags, (ops[k].imm ? MLXD_WC_WITH_IMM : 0u) | (ops[k].inv ? MLXD_WC_WITH_INV : 0u) |
                                       (se ? MLXD_WC_SOLICITED : 0u));
        /* SEND_INV: the invalidated rkey in imm's place (libmlx5 wc->invalidated_rkey, host order) */
        ck_assert_uint_eq(wc[i].imm, ops[k].imm || ops[k].inv ? 0x01020304u + i : 0);
        ck_assert_uint_eq(wc[i].byte_len, i);
        ck_assert_uint_eq(wc[i].qpn, 0xfedcba);
        ck_assert_uint_eq(wc[i].wqe_counter, 0xff00 + i);
        ck_assert_uint_eq(wc[i].wr_id, 0xff00 + i);
        ck_assert_uint_eq(wc[i].timestamp, 0x1122334455667788ull + i);
        ck_assert_uint_eq(wc[i].hw_drops, 9);
        ck_assert_uint_eq(wc[i].wqe_opcode, 0);
        ck_assert_uint_eq(wc[i].syndrome, 0);
        ck_assert_uint_eq(wc[i].vendor_syndrome, 0);
        ck_assert_uint_eq(wc[i].reserved, 0);
        ck_assert_ptr_null(wc[i].qp);
    }
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

START_TEST(symbol_matches_inline)
{
    int (*fn)(struct mlxd_cq *, struct mlxd_completion *, int) = mlxd_cq_poll;   /* the symbol */
    struct mlxd_completion wc[4], wi[4];
    ck_assert_int_eq(fn(NULL, wc, 1), -EINVAL);
    struct mlxd_cq *a, *b;
    ck_assert_int_eq(mlxd_cq_create_detached(4, &a), 0);
    ck_assert_int_eq(mlxd_cq_create_detached(4, &b), 0);
    ck_assert_int_eq(fn(a, NULL, 1), -EINVAL);
    ck_assert_int_eq(mlxd_cq_poll(a, NULL, 1), -EINVAL);
    ck_assert_int_eq(fn(a, wc, 0), 0);
    ck_assert_int_eq(fn(a, wc, -3), -EINVAL);                /* the symbol and the inline call agree */
    ck_assert_int_eq(mlxd_cq_poll(a, wc, -3), -EINVAL);
    for (uint32_t pi = 0; pi < 3; pi++) {
        struct spec s = { .opcode = MLX5_CQE_RESP_SEND_IMM, .qpn = 9, .byte_cnt = pi, .imm_be = htobe32(pi),
                          .wqe_counter = (uint16_t)pi, .ts = pi };
        put(a, pi, &s);
        put(b, pi, &s);
    }
    ck_assert_int_eq(mlxd_cq_poll(a, wi, 0), 0);               /* max 0 consumes nothing */
    ck_assert_int_eq(mlxd_cq_poll(a, wi, -1), -EINVAL);        /* and consumes nothing either */
    ck_assert_int_eq(fn(b, wc, 4), 3);
    ck_assert_int_eq(mlxd_cq_poll(a, wi, 4), 3);
    ck_assert_mem_eq(wc, wi, 3 * sizeof wc[0]);
    ck_assert_uint_eq(record_ci(a), 3);
    ck_assert_uint_eq(record_ci(b), 3);
    ck_assert_int_eq(fn(b, wc, 4), 0);
    ck_assert_int_eq(mlxd_cq_destroy(a), 0);
    ck_assert_int_eq(mlxd_cq_destroy(b), 0);
}
END_TEST

/* The hot path (responder CQEs of the QP of the previous batch's last run) and the general
 * path give the same completions: one stream of CQEs, mixing two QPs, requester, error, rare
 * and unknown-QP CQEs and every responder opcode with SE and hw_drops, polled once in batches
 * of 1, once of 3 and once of 32, must give identical completions and ring accounting. */
/* Writes the n CQEs of s from producer index 0 and fills got (n completions) with 0xee. */
static void put_stream(struct mlxd_cq *cq, const struct spec *s, uint32_t n, struct mlxd_completion *got)
{
    for (uint32_t i = 0; i < n; i++) put(cq, i, &s[i]);
    memset(got, 0xee, n * sizeof *got);
}

/* One poll of up to max that must find at least one completion. */
static int poll_some(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    int m = mlxd_cq_poll(cq, out, max);
    ck_assert_int_gt(m, 0);
    return m;
}

START_TEST(hot_path_same_as_general)
{
    enum { N = 24 };
    struct spec s[N];
    for (uint32_t i = 0; i < N; i++) s[i] = (struct spec){ .opcode = MLX5_CQE_RESP_WR_IMM, .qpn = 0x0a0a0a, .uidx = 3,
        .byte_cnt = 1000 + i, .imm_be = htobe32(0x5000 + i), .wqe_counter = (uint16_t)i, .ts = 77 + i };
    s[3].opcode = MLX5_CQE_RESP_SEND; s[3].se = true;
    s[4].opcode = MLX5_CQE_RESP_SEND_IMM; s[4].top = 3;          /* 3 packets dropped before it */
    s[5] = (struct spec){ .opcode = MLX5_CQE_REQ, .top = MLX5_OPCODE_RDMA_WRITE, .qpn = 0x0a0a0a, .uidx = 3, .wqe_counter = 4 };
    s[8].qpn = 0x0b0b0b; s[8].uidx = 4;                          /* b, then a again */
    s[9].qpn = 0x0b0b0b; s[9].uidx = 4;
    s[12] = (struct spec){ .opcode = MLX5_CQE_RESP_ERR, .syndrome = 0x05, .qpn = 0x0a0a0a, .uidx = 3, .wqe_counter = 12 };
    s[13].opcode = MLX5_CQE_RESP_SEND_INV;
    s[15].qpn = 0x777; s[15].uidx = 9;                           /* no such QP */
    s[16].fmt = 1;                                               /* inline scatter format */
    s[20] = (struct spec){ .opcode = MLX5_CQE_REQ, .top = MLX5_OPCODE_SEND, .qpn = 0x0b0b0b, .uidx = 4, .wqe_counter = 6 };
    static const int batch[3] = { 1, 3, 32 };
    struct mlxd_completion got[3][N];
    uint64_t sq[3][2];
    uint32_t rq[3][2];
    for (int b = 0; b < 3; b++) {
        struct mlxd_cq *cq = cq_with_table(32);
        struct fq a, bq;
        fq_init(&a, 0x0a0a0a, 3, 100);
        fq_init(&bq, 0x0b0b0b, 4, 200);
        a.qp.recv_cq = bq.qp.recv_cq = cq;      /* both QPs' receives complete here */
        put_stream(cq, s, N, got[b]);
        int n = 0;
        while (n < N) {
            int m = poll_some(cq, got[b] + n, batch[b]);
            if (n == 0 && b == 0)
                ck_assert_ptr_eq(cq->hot_qp, &a.qp);   /* the next polls take the hot path */
            n += m;
        }
        ck_assert_int_eq(n, N);
        ck_assert_int_eq(mlxd_cq_poll(cq, got[b], batch[b]), 0);
        for (int i = 0; i < N; i++)         /* QPs as indices: the objects differ per round */
            got[b][i].qp = got[b][i].qp == &a.qp ? (struct mlxd_qp *)1 : got[b][i].qp == &bq.qp ? (struct mlxd_qp *)2 : NULL;
        sq[b][0] = a.qp.sq_ci; sq[b][1] = bq.qp.sq_ci;
        rq[b][0] = a.qp.rq_ci; rq[b][1] = bq.qp.rq_ci;
        cq_done(cq);
    }
    for (int b = 1; b < 3; b++) {
        for (int i = 0; i < N; i++)
            ck_assert_msg(memcmp(&got[0][i], &got[b][i], sizeof got[0][i]) == 0,
                          "completion %d differs between batches of 1 and %d", i, batch[b]);
        ck_assert_uint_eq(sq[b][0], sq[0][0]);
        ck_assert_uint_eq(sq[b][1], sq[0][1]);
        ck_assert_uint_eq(rq[b][0], rq[0][0]);
        ck_assert_uint_eq(rq[b][1], rq[0][1]);
    }
    /* and the values, from the CQEs (mlx5dv.h layout) and the wr_id tables of fq_init */
    ck_assert_uint_eq(rq[0][0], 19);       /* a: 24 - 3 of b - 2 requester - 1 unknown + the flush */
    ck_assert_uint_eq(rq[0][1], 2);
    ck_assert_uint_eq(sq[0][0], (uint64_t)54 << 32 | 1004);     /* snext[4] of a */
    ck_assert_uint_eq(sq[0][1], (uint64_t)56 << 32 | 1006);     /* snext[6] of b */
    const struct mlxd_completion *w = got[0];
    ck_assert_uint_eq(w[0].wr_id, 100);
    ck_assert_uint_eq(w[0].opcode, 129);                        /* IBV_WC_RECV_RDMA_WITH_IMM */
    ck_assert_uint_eq(w[0].imm, 0x5000);
    ck_assert_uint_eq(w[0].byte_len, 1000);
    ck_assert_uint_eq(w[0].timestamp, 77);
    ck_assert_uint_eq(w[3].flags, MLXD_WC_SOLICITED);
    ck_assert_uint_eq(w[3].imm, 0);                             /* SEND: no immediate */
    ck_assert_uint_eq(w[4].hw_drops, 3);
    ck_assert_uint_eq(w[4].flags, MLXD_WC_WITH_IMM);
    ck_assert_uint_eq(w[5].wr_id, 204);                         /* a's send table: base 100 + 100 + 4 */
    ck_assert_uint_eq(w[5].opcode, 1);                          /* IBV_WC_RDMA_WRITE */
    ck_assert_ptr_eq(w[8].qp, (struct mlxd_qp *)2);
    ck_assert_uint_eq(w[8].wr_id, 200);
    ck_assert_uint_eq(w[12].status, 5);
    ck_assert_uint_eq(w[12].wr_id, 100 + (12 & 7));
    ck_assert_ptr_null(w[15].qp);
    ck_assert_uint_eq(w[15].wr_id, 15);                         /* no QP: the wqe_counter */
    ck_assert_uint_eq(w[20].wr_id, 306);
    ck_assert_uint_eq(w[23].wr_id, 100 + (23 & 7));
    ck_assert_ptr_eq(w[23].qp, (struct mlxd_qp *)1);
}
END_TEST

/* The source QPN and GRH flag (flags_rqpn: 'g' bits 29:28, source QPN 23:0; mlx5dv.h
 * struct mlx5_cqe64) are a UD QP's (ibv_poll_cq(3): src_qp and IBV_WC_GRH are valid for UD QPs only;
 * libmlx5 handle_responder decides IBV_WC_GRH from those bits): a UD QP's receives carry them
 * exactly, in every batch size, also after many batches of its own (a UD QP is never the hot
 * QP); an RC/UC QP's receives never do (0 in flags' bits 31:2 but for SE/imm), also on the hot
 * path; a CQE of no known QP (replay) does, since its QP type is unknown. */
START_TEST(src_qpn_only_for_ud)
{
    enum { N = 40 };
    const uint32_t g_src_u = 2u << 28 | 0x654321, g_src_a = 1u << 28 | 0x123456;
    struct spec s[N];
    for (uint32_t i = 0; i < N; i++) {
        bool ud = i >= 16 && i < 32;                /* a (UC) x16, u (UD) x16, a x8 */
        s[i] = (struct spec){ .opcode = i & 1 ? MLX5_CQE_RESP_SEND_IMM : MLX5_CQE_RESP_WR_IMM,
                              .qpn = ud ? 0x0c0c0c : 0x0a0a0a, .uidx = ud ? 5 : 3, .byte_cnt = 500 + i,
                              .imm_be = htobe32(0x7000 + i), .flags_rqpn = ud ? g_src_u : g_src_a,
                              .wqe_counter = (uint16_t)i, .ts = 9 + i };
    }
    s[20].flags_rqpn = 0x000abc;                    /* a UD datagram without the GRH bits */
    s[37].qpn = 0x999; s[37].uidx = 9;              /* no such QP: type unknown, read */
    static const int batch[3] = { 1, 3, 32 };
    struct mlxd_completion got[3][N];
    for (int b = 0; b < 3; b++) {
        struct mlxd_cq *cq = cq_with_table(64);
        struct fq a, u;
        fq_init(&a, 0x0a0a0a, 3, 100);
        fq_init(&u, 0x0c0c0c, 5, 300);
        a.qp.type = MLXD_QP_UC;
        u.qp.type = MLXD_QP_UD;
        a.qp.recv_cq = u.qp.recv_cq = cq;
        put_stream(cq, s, N, got[b]);
        int n = 0;
        while (n < N) {
            n += poll_some(cq, got[b] + n, batch[b]);
            if (n == 8) ck_assert_ptr_eq(cq->hot_qp, &a.qp);   /* a's receives on the hot path */
            if (n == 28) ck_assert_ptr_null(cq->hot_qp);        /* u's: never */
        }
        ck_assert_int_eq(mlxd_cq_poll(cq, got[b], batch[b]), 0);
        cq_done(cq);
    }
    for (int b = 0; b < 3; b++)
        for (uint32_t i = 0; i < N; i++) {
            const struct mlxd_completion *w = &got[b][i];
            bool ud = i >= 16 && i < 32;
            uint32_t base = MLXD_WC_WITH_IMM;
            ck_assert_uint_eq(w->status, 0);
            ck_assert_uint_eq(w->imm, 0x7000 + i);
            ck_assert_uint_eq(w->byte_len, 500 + i);
            ck_assert_uint_eq(w->timestamp, 9 + i);
            ck_assert_uint_eq(w->wqe_counter, i);
            if (i == 37) {
                ck_assert_ptr_null(w->qp);
                ck_assert_uint_eq(w->flags, base | MLXD_WC_GRH | 0x123456u << 8);
                ck_assert_uint_eq(mlxd_completion_src_qp(w), 0x123456);
            } else if (i == 20) {
                ck_assert_uint_eq(w->flags, base | 0xabcu << 8);
                ck_assert_uint_eq(mlxd_completion_src_qp(w), 0xabc);
            } else if (ud) {
                ck_assert_uint_eq(w->wr_id, 300 + (i & 7));
                ck_assert_uint_eq(w->qpn, 0x0c0c0c);
                ck_assert_uint_eq(w->flags, base | MLXD_WC_GRH | 0x654321u << 8);
                ck_assert_uint_eq(mlxd_completion_src_qp(w), 0x654321);
            } else {
                ck_assert_uint_eq(w->wr_id, 100 + (i & 7));
                ck_assert_uint_eq(w->qpn, 0x0a0a0a);
                ck_assert_uint_eq(w->flags, base);              /* no GRH, no source QPN */
                ck_assert_uint_eq(mlxd_completion_src_qp(w), 0);
            }
        }
}
END_TEST

/* A detached ring (no QP table: replay, mlxd_cq_create_detached) decodes its responder CQEs on
 * the hot path's no-QP variant (mlx5/poll.c, no_qp_ring), with no QP lookup per batch.  Its
 * completions at batch 1 and 64 must equal those of the general path, which a CQ with an empty
 * QP table takes (every lookup fails there too: qp NULL, wr_id the wqe_counter): one stream of
 * every responder opcode with SE, formats, immediates and hw_drops, any QPN, and a requester,
 * an error and a rare CQE in between, across the ring's end. */
START_TEST(detached_ring_same_as_general)
{
    enum { N = 40, RING = 16 };
    static const uint8_t ops[4] = { MLX5_CQE_RESP_WR_IMM, MLX5_CQE_RESP_SEND, MLX5_CQE_RESP_SEND_IMM,
                                    MLX5_CQE_RESP_SEND_INV };
    struct spec s[N];
    for (uint32_t i = 0; i < N; i++)
        s[i] = (struct spec){ .opcode = ops[i & 3], .fmt = (uint8_t)(i >> 2 & 3), .se = (i % 5) == 0,
                              .top = (uint8_t)(i % 7), .qpn = 0x100000u + (i / 6), .uidx = i,
                              .byte_cnt = 4096 + i, .imm_be = htobe32(0xbeef0000u + i),
                              .wqe_counter = (uint16_t)(0xfff0 + i), .ts = 0x0102030405060708ull * (i + 1) };
    s[9] = (struct spec){ .opcode = MLX5_CQE_REQ, .top = MLX5_OPCODE_RDMA_WRITE, .qpn = 0x55, .wqe_counter = 9 };
    s[17] = (struct spec){ .opcode = MLX5_CQE_RESP_ERR, .syndrome = 0x05, .qpn = 0x56, .wqe_counter = 17 };
    s[26] = (struct spec){ .opcode = MLX5_CQE_INVALID - 1 /* 0xe: RESIZE_CQ, rare */, .qpn = 0x57, .wqe_counter = 26 };
    static const int batch[3] = { 1, 1, 64 };
    struct mlxd_completion got[3][N];
    for (int r = 0; r < 3; r++) {
        struct mlxd_cq *cq;
        if (r == 1) {
            cq = cq_with_table(RING);                /* the general path (an empty QP table) */
        } else {
            ck_assert_int_eq(mlxd_cq_create_detached(RING, &cq), 0);
            ck_assert_ptr_null(cq->qp_table);
        }
        memset(got[r], 0xee, sizeof got[r]);
        uint32_t pi = 0, n = 0;
        while (n < N) {
            while (pi < N && pi - n < RING) { put(cq, pi, &s[pi]); pi++; }
            int m = mlxd_cq_poll(cq, got[r] + n, batch[r]);
            ck_assert_int_gt(m, 0);
            ck_assert_int_le(m, batch[r]);
            n += (uint32_t)m;
            ck_assert_uint_eq(record_ci(cq), n);   /* the doorbell record after each batch */
            ck_assert_ptr_null(cq->hot_qp);
        }
        ck_assert_int_eq(mlxd_cq_poll(cq, got[r], batch[r]), 0);
        if (r == 1) cq_done(cq);
        else ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    }
    for (int r = 1; r < 3; r++)
        for (int i = 0; i < N; i++)
            ck_assert_msg(memcmp(&got[0][i], &got[r][i], sizeof got[0][i]) == 0,
                          "completion %d of the detached ring at batch 1 differs from run %d", i, r);
    /* the values, from the CQEs (mlx5dv.h layout; ibv_wc_opcode / ibv_wc_status numbering) */
    for (uint32_t i = 0; i < N; i++) {
        const struct mlxd_completion *w = &got[0][i];
        ck_assert_ptr_null(w->qp);
        ck_assert_uint_eq(w->wr_id, (uint16_t)(0xfff0 + i) * (i != 9 && i != 17 && i != 26) +
                                    i * (i == 9 || i == 17 || i == 26));
        if (i == 9 || i == 17 || i == 26) continue;
        bool imm = ops[i & 3] == MLX5_CQE_RESP_WR_IMM || ops[i & 3] == MLX5_CQE_RESP_SEND_IMM;
        bool inv = ops[i & 3] == MLX5_CQE_RESP_SEND_INV;
        ck_assert_uint_eq(w->status, 0);
        ck_assert_uint_eq(w->opcode, ops[i & 3] == MLX5_CQE_RESP_WR_IMM ? 129u : 128u);
        ck_assert_uint_eq(w->cqe_opcode, ops[i & 3]);
        ck_assert_uint_eq(w->flags, (imm ? MLXD_WC_WITH_IMM : 0u) | (inv ? MLXD_WC_WITH_INV : 0u) |
                                    ((i % 5) == 0 ? MLXD_WC_SOLICITED : 0u));
        ck_assert_uint_eq(w->imm, imm || inv ? 0xbeef0000u + i : 0);
        ck_assert_uint_eq(w->byte_len, 4096 + i);
        ck_assert_uint_eq(w->qpn, 0x100000u + i / 6);
        ck_assert_uint_eq(w->wqe_counter, (uint16_t)(0xfff0 + i));
        ck_assert_uint_eq(w->timestamp, 0x0102030405060708ull * (i + 1));
        ck_assert_uint_eq(w->hw_drops, i % 7);
        ck_assert_uint_eq(w->syndrome, 0);
        ck_assert_uint_eq(w->reserved, 0);
    }
    ck_assert_uint_eq(got[0][9].opcode, 1);          /* IBV_WC_RDMA_WRITE */
    ck_assert_uint_eq(got[0][9].status, 0);
    ck_assert_uint_eq(got[0][17].status, 5);         /* WR_FLUSH_ERR -> IBV_WC_WR_FLUSH_ERR */
    ck_assert_uint_eq(got[0][17].opcode, 128);       /* IBV_WC_RECV */
    ck_assert_uint_eq(got[0][26].status, MLXD_WC_GENERAL_ERR);
    ck_assert_uint_eq(got[0][26].cqe_opcode, 0xe);
}
END_TEST

/* mlxd_qp_destroy removes the QP's completions nobody polled (mlx5/cq_clean.c, as libmlx5's
 * __mlx5_cq_clean): the other QPs' CQEs move up over them, keeping their order, each with the
 * owner bit of its new slot's pass (here across the ring's end), the consumer index skips the
 * freed slots and the doorbell record says so; CQEs written afterwards are found. */
START_TEST(destroyed_qp_cqes_cleaned)
{
    struct mlxd_cq *cq = cq_with_table(8);
    struct fq a, b;
    fq_init(&a, 0x0a0a0a, 3, 100);
    fq_init(&b, 0x0b0b0b, 4, 200);
    cq->ci = 5;                                  /* CQEs at 5..10: the ring ends after 7 */
    struct spec s[6] = { recv_of(&a, 0), recv_of(&b, 0), recv_of(&a, 1), recv_of(&b, 1), recv_of(&b, 2),
                         { .opcode = MLX5_CQE_RESP_ERR, .syndrome = 0x05, .qpn = 0x0a0a0a, .uidx = 3,
                           .wqe_counter = 2 } };
    for (uint32_t i = 0; i < 6; i++) put(cq, 5 + i, &s[i]);
    ck_assert_uint_eq(mlxd__cq_clean(cq, 0x0c0c0c), 0);          /* no such QP: nothing moves */
    ck_assert_uint_eq(cq->ci, 5);
    ck_assert_uint_eq(mlxd__cq_clean(cq, 0x0a0a0a), 3);
    ck_assert_uint_eq(cq->ci, 8);
    ck_assert_uint_eq(record_ci(cq), 8);
    volatile void *ring; uint32_t ncqe; volatile uint32_t *db;
    mlxd_cq_ring(cq, &ring, &ncqe, &db);
    const volatile uint8_t *r = ring;
    for (int k = 0; k < 3; k++)                  /* slots 0..2 of the second pass: owner bit 1 */
        ck_assert_uint_eq(r[k * 64 + 63], MLX5_CQE_RESP_WR_IMM << 4 | 1);
    struct mlxd_completion wc[8];
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 3);
    for (int k = 0; k < 3; k++) {
        ck_assert_ptr_eq(wc[k].qp, &b.qp);
        ck_assert_uint_eq(wc[k].wr_id, 200 + (uint64_t)k);
        ck_assert_uint_eq(wc[k].byte_len, 100u + (uint32_t)k);
    }
    ck_assert_uint_eq(b.qp.rq_ci, 3);
    ck_assert_uint_eq(a.qp.rq_ci, 0);
    /* the NIC goes on at its producer index 11 */
    struct spec next = recv_of(&b, 3);
    put(cq, 11, &next);
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 8), 1);
    ck_assert_uint_eq(wc[0].wr_id, 203);
    ck_assert_uint_eq(record_ci(cq), 12);
    cq_done(cq);
}
END_TEST

/* Ring slots are freed only after the CQ's doorbell record has handed the CQE slots of their
 * completions back: otherwise a poster can reuse a slot while the NIC still sees the CQ full
 * (an overrun, a CQ sized to the rings' depths is then not enough: see struct release in
 * mlx5/poll.c).  Each QP lives on its own read-only page: the poll loop's first store into it
 * (rq_ci or sq_ci, the only QP fields it writes) faults, and the handler records what the CQ's
 * doorbell record said at that moment, then makes the page writable so that the store goes on. */
static volatile uint32_t *order_dbrec;
static void *order_page[2];
static uint32_t order_seen[2];
static int order_faults[2];

static void order_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig; (void)uc;
    long pg = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < 2; i++) {
        uintptr_t a = (uintptr_t)si->si_addr, p = (uintptr_t)order_page[i];
        if (a >= p && a < p + (uintptr_t)pg) {
            order_seen[i] = be32toh(*order_dbrec);
            order_faults[i]++;
            mprotect(order_page[i], (size_t)pg, PROT_READ | PROT_WRITE);
            return;
        }
    }
    signal(SIGSEGV, SIG_DFL);          /* a real fault: let it crash */
}

START_TEST(rings_freed_after_cq_slots_return)
{
    long pg = sysconf(_SC_PAGESIZE);
    struct mlxd_cq *cq = cq_with_table(16);
    struct fq *q[2];
    for (int i = 0; i < 2; i++) {
        order_page[i] = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne(order_page[i], MAP_FAILED);
        ck_assert_uint_le(sizeof(struct fq), (size_t)pg);
        q[i] = order_page[i];
        order_faults[i] = 0;
    }
    fq_init(q[0], 0x0a0a0a, 3, 100);
    fq_init(q[1], 0x0b0b0b, 9, 200);
    mlxd_cq_ring(cq, NULL, NULL, &order_dbrec);
    /* a: two receives, b: one send, a: one receive */
    struct spec s[4] = { recv_of(q[0], 0), recv_of(q[0], 1),
                         { .opcode = MLX5_CQE_REQ, .top = MLX5_OPCODE_RDMA_WRITE, .qpn = 0x0b0b0b, .uidx = 9,
                           .wqe_counter = 2 },
                         recv_of(q[0], 2) };
    for (uint32_t i = 0; i < 4; i++) put(cq, i, &s[i]);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = order_segv;
    sa.sa_flags = SA_SIGINFO;
    ck_assert_int_eq(sigaction(SIGSEGV, &sa, &old), 0);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(mprotect(order_page[i], (size_t)pg, PROT_READ), 0);
    struct mlxd_completion wc[4];
    int n = mlxd_cq_poll(cq, wc, 4);
    sigaction(SIGSEGV, &old, NULL);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(order_faults[0], 1);
    ck_assert_int_eq(order_faults[1], 1);
    ck_assert_uint_eq(order_seen[0], 2);       /* a's first run (2 CQEs) freed once CI >= 2 */
    ck_assert_uint_eq(order_seen[1], 3);       /* b's send freed once CI >= 3 */
    ck_assert_uint_eq(q[0]->qp.rq_ci, 3);
    ck_assert_uint_eq(q[1]->qp.sq_ci, (uint64_t)52 << 32 | 1002);   /* snext[2] */
    ck_assert_uint_eq(record_ci(cq), 4);
    cq_done(cq);
    for (int i = 0; i < 2; i++) munmap(order_page[i], (size_t)pg);
}
END_TEST


/* The same order for a QP whose receives come from an SRQ: the SRQ WQEs a run completed are
 * counted free (srq->free_wqes, what mlxd_srq_receive may fill) once per run and only after the
 * CQ's doorbell record has handed the run's CQE slots back; a receive CQ as deep as the SRQ
 * would overrun otherwise.  The SRQ lies across two pages with free_wqes on the second,
 * read-only one: the first store there faults and the handler records the doorbell record.
 * The WQEs are linked on the first page meanwhile (next_wqe_index of the old tail). */
START_TEST(srq_freed_after_cq_slots_return)
{
    long pg = sysconf(_SC_PAGESIZE);
    struct mlxd_cq *cq = cq_with_table(16);
    uint8_t *two = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(two, MAP_FAILED);
    /* 8-byte aligned, free_wqes (and posted, which the poll loop never writes) on the second
     * page, tail (which it writes) on the first */
    const size_t at = offsetof(struct mlxd_srq, free_wqes) & ~(size_t)7;
    ck_assert_uint_le(offsetof(struct mlxd_srq, tail) + sizeof(uint32_t), at);
    ck_assert_uint_le(offsetof(struct mlxd_srq, buf) + sizeof(void *), at);
    struct mlxd_srq *srq = (struct mlxd_srq *)(void *)(two + pg - at);
    static uint8_t wqes[8 * 32];
    static uint64_t wrid[8];
    memset(wqes, 0, sizeof wqes);
    for (int i = 0; i < 8; i++) wrid[i] = 500 + (uint64_t)i;
    srq->buf = wqes;
    srq->wqe_shift = 5;
    srq->nwqe = 8;
    srq->depth = 7;
    srq->tail = 7;
    srq->wrid = wrid;
    srq->state = OBJ_LIVE;
    atomic_store(&srq->free_wqes, 2);
    struct fq a;
    fq_init(&a, 0x0c0c0c, 4, 0);
    a.qp.rq_wrid = NULL;            /* receives from the SRQ */
    a.qp.rq_wqe_cnt = 0;
    a.qp.srq = srq;
    order_page[0] = two + pg;
    order_page[1] = NULL;
    order_faults[0] = 0;
    mlxd_cq_ring(cq, NULL, NULL, &order_dbrec);
    for (uint32_t i = 0; i < 3; i++) { struct spec sp = recv_of(&a, (uint16_t)(2 + i)); put(cq, i, &sp); }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = order_segv;
    sa.sa_flags = SA_SIGINFO;
    ck_assert_int_eq(sigaction(SIGSEGV, &sa, &old), 0);
    ck_assert_int_eq(mprotect(two + pg, (size_t)pg, PROT_READ), 0);
    struct mlxd_completion wc[4];
    int n = mlxd_cq_poll(cq, wc, 4);
    sigaction(SIGSEGV, &old, NULL);
    ck_assert_int_eq(n, 3);
    for (int i = 0; i < 3; i++) ck_assert_uint_eq(wc[i].wr_id, 502 + (uint64_t)i);
    ck_assert_int_eq(order_faults[0], 1);
    ck_assert_uint_eq(order_seen[0], 3);                /* freed once CI >= 3, not at the first CQE */
    ck_assert_uint_eq(atomic_load(&srq->free_wqes), 2 + 3);
    ck_assert_uint_eq(srq->tail, 4);                    /* 7 -> 2 -> 3 -> 4 linked */
    ck_assert_uint_eq(wqes[7 * 32 + 3], 2);
    ck_assert_uint_eq(wqes[2 * 32 + 3], 3);
    ck_assert_uint_eq(wqes[3 * 32 + 3], 4);
    ck_assert_uint_eq(record_ci(cq), 3);
    /* the same order when a destroyed QP's completions are cleaned from the CQ (mlxd_qp_destroy):
     * their WQEs go back to the SRQ after the record has handed the slots back */
    for (uint32_t i = 3; i < 5; i++) { struct spec sp = recv_of(&a, (uint16_t)(2 + i)); put(cq, i, &sp); }
    order_faults[0] = 0;
    ck_assert_int_eq(sigaction(SIGSEGV, &sa, &old), 0);
    ck_assert_int_eq(mprotect(two + pg, (size_t)pg, PROT_READ), 0);
    uint32_t cleaned = mlxd__cq_clean_srq(cq, a.qp.qpn, srq);
    sigaction(SIGSEGV, &old, NULL);
    ck_assert_uint_eq(cleaned, 2);
    ck_assert_int_eq(order_faults[0], 1);
    ck_assert_uint_eq(order_seen[0], 5);
    ck_assert_uint_eq(atomic_load(&srq->free_wqes), 2 + 3 + 2);
    ck_assert_uint_eq(srq->tail, 5);                    /* cleaned from the newest down: 6, then 5 */
    cq_done(cq);
    munmap(two, 2 * (size_t)pg);
}
END_TEST

Suite *poll_suite(void)
{
    Suite *s = suite_create("poll");
    TCase *tc = tcase_create("poll");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, batch_straddles_ring_end);
    tcase_add_test(tc, batch_of_exactly_ncqe);
    tcase_add_test(tc, error_in_the_middle_stops_nothing);
    tcase_add_test(tc, runs_of_qps_in_one_batch);
    tcase_add_test(tc, rings_freed_after_cq_slots_return);
    tcase_add_test(tc, srq_freed_after_cq_slots_return);
    tcase_add_test(tc, hot_path_same_as_general);
    tcase_add_test(tc, detached_ring_same_as_general);
    tcase_add_test(tc, src_qpn_only_for_ud);
    tcase_add_test(tc, destroyed_qp_cqes_cleaned);
    tcase_add_test(tc, responder_opcodes_formats_se);
    tcase_add_test(tc, symbol_matches_inline);
    suite_add_tcase(s, tc);
    return s;
}
