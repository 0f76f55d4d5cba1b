/* libFuzzer target: the poll loop (mlx5/poll.c) on CQEs of any content, through both of its
 * paths: the hot path (receive completions of the CQ's hot QP) and the general one (any QP,
 * opcode, error), across batch sizes and the ring's end.
 *
 * Input: [start u8][batch sizes: 8 x u8][CQEs: n x 64 bytes, n <= 48].  Each CQE is written as
 * the NIC writes it, at producer index start + k of a 64-entry ring: its 63 bytes as given, then
 * op_own with the owner bit of that pass (so the software owns it unless its opcode is INVALID,
 * 0xF, where polling stops).  Two QPs are in the CQ's table: A (user index 3, a receive ring of
 * 8) and B (user index 4, no receive ring); bits 0-1 of byte 32 (the user index's low byte)
 * steer a CQE to A or B (its QPN and user index made theirs), or leave it as given.  A is a UD
 * QP when bit 7 of the first batch size is set (its receives then carry the source QPN and take
 * the general path only), else UC; B is RC.
 *
 * Oracle (besides ASan/UBSan): the stream is polled three times from the same state, with
 * max 1, with max 64 and with the input's batch sizes; the three must return the same
 * completions (the QP pointers compared as A, B or none), the same number of them (every
 * CQE up to the first INVALID one), and leave the same rq_ci / sq_ci on both QPs and the same
 * consumer-index doorbell record.  Then the same stream on a ring with no QP table (a detached
 * ring: the no-QP path) at the three batch plans must give what the general path gives with an
 * empty table. */
#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "driver.h"
#include "mlxd_mlx5.h"
#include "seeds.h"

#define NCQE 64u
#define MAX_CQES 48u

struct fake {
    struct mlxd_qp a, b;
    uint64_t a_rwrid[8], a_swrid[8], a_snext[8], b_swrid[8], b_snext[8];
};

struct outcome {
    struct mlxd_completion wc[MAX_CQES];
    unsigned n;
    uint32_t a_rq_ci, b_rq_ci, dbrec_ci;
    uint64_t a_sq_ci, b_sq_ci;
};

static struct mlxd_qp *table[MLXD_MAX_QPS];

static void fake_init(struct fake *f)
{
    memset(f, 0, sizeof *f);
    f->a.qpn = 0x0a0a0a; f->a.uidx = 3; f->a.state = OBJ_LIVE;
    f->a.rq_wqe_cnt = 8; f->a.rq_wrid = f->a_rwrid;
    f->a.sq_wqebbs = 8; f->a.sq_wrid = f->a_swrid; f->a.sq_next = f->a_snext;
    f->b.qpn = 0x0b0b0b; f->b.uidx = 4; f->b.state = OBJ_LIVE;
    f->b.sq_wqebbs = 8; f->b.sq_wrid = f->b_swrid; f->b.sq_next = f->b_snext;
    for (uint64_t i = 0; i < 8; i++) {
        f->a_rwrid[i] = 100 + i; f->a_swrid[i] = 200 + i; f->b_swrid[i] = 300 + i;
        f->a_snext[i] = (50 + i) << 32 | (1000 + i); f->b_snext[i] = (60 + i) << 32 | (2000 + i);
    }
    memset(table, 0, sizeof table);
    table[3] = &f->a;
    table[4] = &f->b;
}

/* mode 0: max 1; 1: max 64; 2: the input's sizes in turn.  qps: QPS_AB, A and B in the table;
 * QPS_NONE, no table at all (a detached ring, as replay's: the poll loop's no-QP path);
 * QPS_EMPTY, an empty table (every lookup fails: the general path's no-QP completions). */
enum qps { QPS_AB, QPS_NONE, QPS_EMPTY };
static void run(const uint8_t *d, size_t n, unsigned mode, enum qps qps, struct outcome *o)
{
    struct fake f;
    fake_init(&f);
    f.a.type = d[1] & 0x80 ? MLXD_QP_UD : MLXD_QP_UC;
    f.b.type = MLXD_QP_RC;
    if (qps != QPS_AB) memset(table, 0, sizeof table);
    struct mlxd_cq *cq;
    if (mlxd_cq_create_detached(NCQE, &cq)) abort();
    cq->qp_table = qps == QPS_NONE ? NULL : table;
    f.a.recv_cq = f.b.recv_cq = cq;            /* the hot path needs a QP whose receives land here */
    uint32_t start = d[0];
    cq->ci = start;
    const uint8_t *sizes = d + 1, *cqes = d + 9;
    unsigned ncqes = (unsigned)((n - 9) / 64);
    if (ncqes > MAX_CQES) ncqes = MAX_CQES;
    volatile void *ring;
    volatile uint32_t *db;
    uint32_t ncqe;
    mlxd_cq_ring(cq, &ring, &ncqe, &db);
    unsigned owned = 0;
    bool stopped = false;
    for (unsigned k = 0; k < ncqes; k++) {
        uint8_t c[64];
        memcpy(c, cqes + 64 * k, 64);
        unsigned steer = c[32] & 3;
        if (steer == 1 || steer == 2) {
            struct mlxd_qp *q = steer == 1 ? &f.a : &f.b;
            uint32_t u = htobe32(q->uidx);
            memcpy(c + 32, &u, 4);
            c[57] = (uint8_t)(q->qpn >> 16); c[58] = (uint8_t)(q->qpn >> 8); c[59] = (uint8_t)q->qpn;
        }
        uint32_t pi = start + k;
        c[63] = (uint8_t)((c[63] & 0xfe) | ((pi & NCQE) ? 1 : 0));
        uint8_t *slot = (uint8_t *)(uintptr_t)ring + (size_t)(pi & (NCQE - 1)) * 64;
        memcpy(slot, c, 63);
        __atomic_store_n(&slot[63], c[63], __ATOMIC_RELEASE);
        if ((c[63] >> 4) == 0xf) stopped = true;
        if (!stopped) owned++;
    }
    memset(o, 0, sizeof *o);
    memset(o->wc, 0xee, sizeof o->wc);
    for (unsigned i = 0;; i++) {
        int max = mode == 0 ? 1 : mode == 1 ? 64 : 1 + sizes[i % 8] % 64;
        if (o->n + (unsigned)max > MAX_CQES) max = (int)(MAX_CQES - o->n);
        if (max <= 0) break;
        int got = mlxd_cq_poll(cq, o->wc + o->n, max);
        if (got < 0 || got > max) abort();
        if (!got) break;
        o->n += (unsigned)got;
    }
    if (o->n != owned) abort();                          /* every owned CQE, nothing else */
    for (unsigned i = 0; i < o->n; i++)
        o->wc[i].qp = o->wc[i].qp == &f.a ? (struct mlxd_qp *)1 : o->wc[i].qp == &f.b ? (struct mlxd_qp *)2
                    : o->wc[i].qp ? (struct mlxd_qp *)3 : NULL;
    o->a_rq_ci = f.a.rq_ci; o->b_rq_ci = f.b.rq_ci;
    o->a_sq_ci = f.a.sq_ci; o->b_sq_ci = f.b.sq_ci;
    o->dbrec_ci = be32toh(db[0]);
    if (o->dbrec_ci != (o->n ? (start + o->n) & 0xffffff : 0)) abort();   /* untouched if none */
    cq->qp_table = NULL;
    if (mlxd_cq_destroy(cq)) abort();
}

/* Seeds (MLXD_FUZZ_MKSEEDS=<dir>, tests/fuzz/run.sh): streams of well-formed CQEs steered to A
 * and B: receive completions of every responder opcode with SE and drops, A's and B's
 * requester completions, a flush error, a CQE of no QP; from the ring's start, and across its
 * end; then the fuzzer mutates them. */
static void put_cqe(uint8_t *c, unsigned steer, uint8_t opcode, uint8_t se, uint8_t drops, uint16_t wc)
{
    memset(c, 0, 64);
    c[32] = (uint8_t)steer;
    c[36] = 0xab; c[39] = (uint8_t)wc;                     /* immediate */
    c[46] = 0x10; c[47] = (uint8_t)wc;                     /* byte_cnt */
    c[55] = opcode == 13 || opcode == 14 ? 0x05 : 0;       /* error CQE: syndrome WR_FLUSH */
    c[56] = drops;
    c[57] = 0x07; c[58] = 0x77; c[59] = 0x77;              /* QPN 0x077777 unless steered */
    c[60] = (uint8_t)(wc >> 8); c[61] = (uint8_t)wc;
    c[63] = (uint8_t)(opcode << 4 | se << 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    const char *dir = getenv("MLXD_FUZZ_MKSEEDS");
    if (!dir) return 0;
    static uint8_t s[9 + MAX_CQES * 64];
    for (unsigned v = 0; v < 4; v++) {
        s[0] = v & 1 ? 40 : 0;                             /* 40: the stream crosses the end */
        for (unsigned i = 0; i < 8; i++) s[1 + i] = (uint8_t)(v * 5 + i * 3);
        unsigned k = 0;
        for (; k < 32; k++) {
            uint8_t *c = s + 9 + 64 * k;
            unsigned steer = v >= 2 && (k % 7) == 3 ? 2 : 1;
            uint8_t op = (uint8_t)(1 + k % 4);             /* RESP_WR_IMM .. RESP_SEND_INV */
            if (k % 9 == 5) op = 0;                        /* MLX5_CQE_REQ */
            if (k == 20) op = 14;                          /* MLX5_CQE_RESP_ERR */
            put_cqe(c, k == 25 ? 0 : steer, op, (uint8_t)(k & 1), (uint8_t)(k == 6 ? 3 : 0), (uint16_t)k);
            if (op == 0) c[56] = 0x08;                     /* requester: MLX5_OPCODE_RDMA_WRITE */
        }
        seed_write(dir, v, s, 9 + 64 * k);
    }
    exit(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 9 + 64) return 0;
    static struct outcome o[3], none[3], empty;
    for (unsigned m = 0; m < 3; m++) run(d, n, m, QPS_AB, &o[m]);
    for (unsigned m = 1; m < 3; m++)
        if (memcmp(&o[0], &o[m], sizeof o[0])) abort();   /* batch size must not matter */
    /* a ring with no QP table gives, at every batch size, what the general path gives when
     * no QP is found */
    run(d, n, 0, QPS_EMPTY, &empty);
    for (unsigned m = 0; m < 3; m++) {
        run(d, n, m, QPS_NONE, &none[m]);
        if (memcmp(&empty, &none[m], sizeof empty)) abort();
    }
    return 0;
}
