/* libFuzzer target: the expansion of compressed CQE sessions (mlx5/cqe_mini.c) on ring
 * contents of any kind: titles with any mini-CQE count and opcode, mini-CQE arrays of any
 * bytes, full CQEs in between, across the ring's end.
 *
 * Input: [format u8][start u8][batch sizes: 8 x u8][slots: n x 64 bytes, n <= 64].  The CQ is
 * a detached ring of 64 entries created with the mini-CQE format (format % 3: HASH, CSUM,
 * CSUM_STRIDX) and a QP table holding A (user index 3, QPN 0x0a0a0a, a receive ring of 8).
 * Slot k of the input goes to producer index start + k: its 63 bytes as given, then op_own
 * with the owner bit of that pass (the software owns it unless its opcode is INVALID, 0xF);
 * the slots not given hold 0xF0 (INVALID).  Bits 0-1 of byte 32 == 1 steer a CQE to A (its QPN
 * and user index made A's).
 *
 * Oracle (besides ASan/UBSan):
 *   - polling ends: at most 128 completions (a session begun in one pass of the ring may end
 *     in the next, where nothing else is owned), then 0 or an error;
 *   - an error is -EPROTO and only where the reference walk below finds a title that cannot
 *     start a session (a count below 2 or above 64, or an opcode other than REQ and 1..4):
 *     bad sessions are reported, never decoded;
 *   - a full CQE or title whose QPN is MLXD__QPN_CLEANED (0xFFFFFF, a unit a QP destroy
 *     marked: mlx5/cq_clean.c) gives no completion, its slots are consumed;
 *   - the completions are those of the reference walk: the same number, each one's wqe_counter
 *     (a full CQE's own; a responder mini-CQE's the title's + its place; a requester one's from
 *     its s_wqe_info) and a responder mini-CQE's byte_len (its byte_cnt);
 *   - polling with max 1, max 64 and the input's batch sizes gives the same completions, the
 *     same consumer index, doorbell record and receive count of A. */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "driver.h"
#include "mlxd_mlx5.h"

#define NCQE 64u
#define MAXC (2 * NCQE)          /* completions at most: a session begun in one pass may end in
                                    the next, whose slots then hold nothing owned */

static struct mlxd_qp *table[MLXD_MAX_QPS];

struct outcome {
    struct mlxd_completion wc[MAXC];
    unsigned n;
    int err;                     /* the poll's final negative result, 0 if it ended empty */
    uint32_t ci, dbrec, rq_ci;
};

struct expect {
    uint16_t wc[MAXC];
    uint32_t len[MAXC];          /* UINT32_MAX: not checked */
    unsigned n;
    bool bad;                    /* the walk stopped at a bad title */
};

static const uint32_t formats[3] = { MLXD_CQE_COMP_HASH, MLXD_CQE_COMP_CSUM, MLXD_CQE_COMP_CSUM_STRIDX };

static void fill(struct mlxd_cq *cq, const uint8_t *d, size_t n, uint32_t start)
{
    volatile void *ring; uint32_t ncqe; volatile uint32_t *db;
    mlxd_cq_ring(cq, &ring, &ncqe, &db);
    uint8_t *r = (uint8_t *)(uintptr_t)ring;
    for (uint32_t i = 0; i < NCQE; i++) r[(size_t)i * 64 + 63] = 0xF0;
    for (size_t k = 0; k < n / 64 && k < NCQE; k++) {
        uint32_t pi = start + (uint32_t)k;
        uint8_t *c = r + (size_t)(pi & (NCQE - 1)) * 64;
        memcpy(c, d + k * 64, 63);
        if ((c[32] & 3) == 1) {
            uint32_t q = htobe32((uint32_t)c[56] << 24 | 0x0a0a0a), u = htobe32(3);
            memcpy(c + 56, &q, 4);
            memcpy(c + 32, &u, 4);
        }
        c[63] = (uint8_t)((d[k * 64 + 63] & ~1u) | ((pi & NCQE) ? 1 : 0));
    }
    cq->ci = start;
}

/* What the session layout says the ring holds (mlx5/cqe_mini.c's header, independently), on a
 * copy of the ring, invalidating each session's slots when it ends as the consumer must. */
static void walk(const uint8_t *ring, uint32_t start, struct expect *x)
{
    static uint8_t r[64 * NCQE];
    memcpy(r, ring, sizeof r);
    memset(x, 0, sizeof *x);
    uint32_t ci = start;
    while (x->n < MAXC) {
        const uint8_t *c = r + (size_t)(ci & (NCQE - 1)) * 64;
        uint8_t op = c[63];
        if ((op & 1) != ((ci & NCQE) != 0) || op >> 4 == 0xF) return;
        /* a unit a QP destroy marked (QPN 0xFFFFFF, MLXD__QPN_CLEANED) gives no completion */
        bool gone = c[57] == 0xff && c[58] == 0xff && c[59] == 0xff;
        if (((op >> 2) & 3) != 3) {
            if (!gone) {
                x->wc[x->n] = (uint16_t)(c[60] << 8 | c[61]);
                x->len[x->n++] = UINT32_MAX;
            }
            ci++;
            continue;
        }
        uint32_t cnt = (uint32_t)c[44] << 24 | (uint32_t)c[45] << 16 | (uint32_t)c[46] << 8 | c[47];
        uint8_t opc = op >> 4;
        if (cnt < 2 || cnt > NCQE || (opc != 0 && (opc < 1 || opc > 4))) { x->bad = true; return; }
        uint16_t twc = (uint16_t)(c[60] << 8 | c[61]);
        for (uint32_t i = 0; i < cnt && x->n < MAXC && !gone; i++) {
            uint32_t a = i & ~7u;
            const uint8_t *m = r + (size_t)((ci + (a ? a : 1)) & (NCQE - 1)) * 64 + (i & 7) * 8;
            x->wc[x->n] = opc == 0 ? (uint16_t)(m[0] << 8 | m[1]) : (uint16_t)(twc + i);
            x->len[x->n++] = opc == 0 ? UINT32_MAX
                                      : (uint32_t)m[4] << 24 | (uint32_t)m[5] << 16 | (uint32_t)m[6] << 8 | m[7];
        }
        for (uint32_t j = 0; j < cnt; j++) r[(size_t)((ci + j) & (NCQE - 1)) * 64 + 63] = 0xF0;
        ci += cnt;
    }
}

static void run(const uint8_t *d, size_t n, uint32_t fmt, uint32_t start, const uint8_t *plan, unsigned mode,
                struct outcome *o, struct expect *x)
{
    struct mlxd_cq *cq;
    struct mlxd_detached_cq_opts opts = { .sz = sizeof opts, .cqe_comp = fmt };
    if (mlxd_cq_create_detached_opts(NCQE, &opts, &cq)) abort();
    struct mlxd_qp a;
    uint64_t rwrid[8] = { 100, 101, 102, 103, 104, 105, 106, 107 };
    memset(&a, 0, sizeof a);
    a.qpn = 0x0a0a0a; a.uidx = 3; a.state = OBJ_LIVE; a.rq_wqe_cnt = 8; a.rq_wrid = rwrid;
    memset(table, 0, sizeof table);
    table[3] = &a;
    cq->qp_table = table;
    fill(cq, d, n, start);
    if (x) {
        volatile void *ring; uint32_t ncqe; volatile uint32_t *db;
        mlxd_cq_ring(cq, &ring, &ncqe, &db);
        walk((const uint8_t *)(uintptr_t)ring, start, x);
    }
    memset(o, 0, sizeof *o);
    for (unsigned step = 0;; step++) {
        int max = mode == 0 ? 1 : mode == 1 ? 64 : 1 + plan[step & 7] % 64;
        if (o->n + (unsigned)max > MAXC + 1) max = (int)(MAXC + 1 - o->n);
        struct mlxd_completion w[MAXC + 1];
        int r = mlxd_cq_poll(cq, w, max);
        if (r < 0) { o->err = r; break; }
        if (r == 0) break;
        if (o->n + (unsigned)r > MAXC) { fprintf(stderr, "fuzz_cqe_mini: more than %u completions\n", MAXC); abort(); }
        memcpy(o->wc + o->n, w, (size_t)r * sizeof *w);
        o->n += (unsigned)r;
    }
    for (unsigned i = 0; i < o->n; i++) o->wc[i].qp = o->wc[i].qp == &a ? (struct mlxd_qp *)1 : NULL;
    volatile void *ring; uint32_t ncqe; volatile uint32_t *db;
    mlxd_cq_ring(cq, &ring, &ncqe, &db);
    o->ci = cq->ci;
    o->dbrec = be32toh(db[0]);
    o->rq_ci = a.rq_ci;
    cq->qp_table = NULL;
    mlxd_cq_destroy(cq);
}

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "fuzz_cqe_mini: " __VA_ARGS__); fputc('\n', stderr); abort(); } } while (0)

/* Seeds (MLXD_FUZZ_MKSEEDS=<dir>, tests/fuzz/run.sh): well-formed sessions of every format and
 * size class, across the ring's end, between full CQEs, and bad titles. */
static void seed(const char *dir, unsigned *k, uint8_t fmt, uint8_t start, const uint8_t *slots, size_t n)
{
    uint8_t buf[10 + 64 * NCQE];
    buf[0] = fmt; buf[1] = start;
    for (int i = 0; i < 8; i++) buf[2 + i] = (uint8_t)(1 + 3 * i);
    memcpy(buf + 10, slots, n * 64);
    char p[4096];
    snprintf(p, sizeof p, "%s/seed-%04u", dir, (*k)++);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(buf, 1, 10 + n * 64, f) != 10 + n * 64) { fprintf(stderr, "cannot write %s\n", p); exit(1); }
    fclose(f);
}

static void title(uint8_t *c, uint8_t opcode, uint32_t cnt, uint16_t wc)
{
    memset(c, 0, 64);
    c[32] = 1;                                   /* steer to A */
    c[44] = (uint8_t)(cnt >> 24); c[45] = (uint8_t)(cnt >> 16); c[46] = (uint8_t)(cnt >> 8); c[47] = (uint8_t)cnt;
    c[60] = (uint8_t)(wc >> 8); c[61] = (uint8_t)wc;
    c[63] = (uint8_t)(opcode << 4 | 3 << 2);
}

static void make_seeds(const char *dir)
{
    static uint8_t s[64 * NCQE];
    unsigned k = 0;
    static const uint32_t sizes[5] = { 2, 8, 9, 24, 64 };
    for (int f = 0; f < 3; f++)
        for (int z = 0; z < 5; z++) {
            memset(s, 0, sizeof s);
            uint32_t n = sizes[z];
            title(s, 1, n, 7);
            for (uint32_t i = 0; i < n; i++) {
                uint32_t a = i & ~7u;
                uint8_t *m = s + (size_t)(a ? a : 1) * 64 + (i & 7) * 8;
                m[0] = (uint8_t)i; m[7] = (uint8_t)(100 + i);
            }
            for (uint32_t j = 1; j < n; j++) if (j != 1 && (j & 7)) s[j * 64 + 63] = 0xF1;   /* holes */
            seed(dir, &k, (uint8_t)f, (uint8_t)(z * 50), s, n);
        }
    /* full, requester session of 5, full, responder session of 3, across the end (start 60) */
    memset(s, 0, sizeof s);
    s[32] = 1; s[63] = 2 << 4;                    /* RESP_SEND */
    title(s + 64, 0, 5, 0);
    for (int i = 0; i < 5; i++) { uint8_t *m = s + 2 * 64 + i * 8; m[1] = (uint8_t)i; m[2] = 0x08; m[7] = 1; }
    s[6 * 64 + 32] = 1; s[6 * 64 + 63] = 2 << 4;
    title(s + 7 * 64, 2, 3, 9);
    seed(dir, &k, 0, 60, s, 10);
    /* bad titles: count 0, 1, 65; an error opcode */
    static const uint32_t bad[3] = { 0, 1, 65 };
    for (int b = 0; b < 3; b++) { memset(s, 0, 128); title(s + 64, 1, bad[b], 0); s[32] = 1; s[63] = 2 << 4; seed(dir, &k, 1, 3, s, 2); }
    memset(s, 0, 64); title(s, 14, 4, 0); seed(dir, &k, 2, 0, s, 5);
    fprintf(stderr, "%u seeds written to %s\n", k, dir);
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    const char *dir = getenv("MLXD_FUZZ_MKSEEDS");
    if (dir) make_seeds(dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 10) return 0;
    uint32_t fmt = formats[d[0] % 3], start = d[1];
    const uint8_t *plan = d + 2;
    d += 10; n -= 10;
    if (n > 64 * NCQE) n = 64 * NCQE;
    static struct outcome o[3];
    struct expect x;
    for (unsigned mode = 0; mode < 3; mode++) run(d, n, fmt, start, plan, mode, &o[mode], mode ? NULL : &x);
    CHECK(o[0].err == 0 || o[0].err == -EPROTO, "poll returned %d", o[0].err);
    CHECK((o[0].err == -EPROTO) == x.bad, "bad title %s but poll returned %d", x.bad ? "found" : "absent", o[0].err);
    CHECK(o[0].n == x.n, "%u completions, the layout gives %u", o[0].n, x.n);
    for (unsigned i = 0; i < x.n; i++) {
        CHECK(o[0].wc[i].wqe_counter == x.wc[i], "completion %u: wqe_counter %u, the layout gives %u", i,
              o[0].wc[i].wqe_counter, x.wc[i]);
        CHECK(x.len[i] == UINT32_MAX || o[0].wc[i].byte_len == x.len[i], "completion %u: byte_len %u, the layout gives %u",
              i, o[0].wc[i].byte_len, x.len[i]);
    }
    for (unsigned m = 1; m < 3; m++) {
        CHECK(o[m].n == o[0].n && o[m].err == o[0].err, "batch plan %u: %u completions (%d), max 1: %u (%d)", m,
              o[m].n, o[m].err, o[0].n, o[0].err);
        CHECK(memcmp(o[m].wc, o[0].wc, o[0].n * sizeof o[0].wc[0]) == 0, "batch plan %u: completions differ", m);
        CHECK(o[m].ci == o[0].ci && o[m].dbrec == o[0].dbrec && o[m].rq_ci == o[0].rq_ci,
              "batch plan %u: ci %u dbrec %u rq_ci %u, max 1: %u %u %u", m, o[m].ci, o[m].dbrec, o[m].rq_ci,
              o[0].ci, o[0].dbrec, o[0].rq_ci);
    }
    return 0;
}
