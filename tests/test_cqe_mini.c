/* CQE compression (issue 18 item 2): the poll loop's expansion of compressed sessions
 * (mlx5/cqe_mini.c) on rings filled by hand, and the emulator's side at the system-call
 * boundary (the kernel's create_cq_user rules and cqe_comp_caps; the NIC's sessions).
 * The layout, from which every expected value below is derived: a title CQE (struct
 * mlx5_cqe64, infiniband/mlx5dv.h) with CQE format 3 (MLX5_COMPRESSED) whose byte_cnt is the
 * number N of mini-CQEs; N slots from the title on; mini-CQE array k (8 struct mlx5_mini_cqe8
 * of 8 bytes, include/linux/mlx5/device.h: bytes 0..3 hash / checksum+stride index /
 * s_wqe_info {wqe_counter BE16, opcode}, bytes 4..7 byte_cnt BE32) in slot title+1 (k 0) and
 * title+8k; a responder mini-CQE's wqe_counter is the title's + its place (DPDK
 * drivers/net/mlx5/mlx5_rx.c mlx5_rx_poll_len, Linux en_rx.c mlx5e_decompress_cqe). */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/mlx5dv.h>
#include "driver.h"
#include "fake_qp.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "test_emu_kernel.h"
#include "util.h"

struct spec {
    uint8_t opcode, top;                 /* top: WQE opcode (requester) / drop counter (responder) */
    bool se;
    uint32_t qpn, uidx, byte_cnt, imm_be, flags_rqpn;
    uint16_t wqe_counter;
    uint64_t ts;
};

static uint8_t *slot(struct mlxd_cq *cq, uint32_t pi)
{
    volatile void *ring; uint32_t ncqe; volatile uint32_t *db;
    ck_assert_int_eq(mlxd_cq_ring(cq, &ring, &ncqe, &db), 0);
    return (uint8_t *)(uintptr_t)ring + (size_t)(pi & (ncqe - 1)) * 64;
}

/* The CQE of s at producer index pi with byte_cnt and format as given, op_own last. */
static void put_cqe(struct mlxd_cq *cq, uint32_t pi, const struct spec *s, uint32_t byte_cnt, uint8_t fmt)
{
    uint8_t *d = slot(cq, pi);
    struct mlx5_cqe64 c;
    memset(&c, 0, sizeof c);
    c.flags_rqpn = htobe32(s->flags_rqpn);
    c.srqn_uidx = htobe32(s->uidx);
    c.imm_inval_pkey = s->imm_be;
    c.byte_cnt = htobe32(byte_cnt);
    c.timestamp = htobe64(s->ts);
    c.sop_drop_qpn = htobe32((uint32_t)s->top << 24 | s->qpn);
    c.wqe_counter = htobe16(s->wqe_counter);
    c.op_own = (uint8_t)(s->opcode << 4 | fmt << 2 | (s->se ? 2 : 0) | ((pi & mlxd_cq_size(cq)) ? 1 : 0));
    memcpy(d, &c, 63);
    __atomic_store_n(&d[63], c.op_own, __ATOMIC_RELEASE);
}

static void put_full(struct mlxd_cq *cq, uint32_t pi, const struct spec *s) { put_cqe(cq, pi, s, s->byte_cnt, 0); }

/* A mini-CQE: bytes 0..3 as given (big-endian), byte_cnt. */
static void mini(uint8_t m[8], uint32_t first, uint32_t byte_cnt)
{
    uint32_t a = htobe32(first), b = htobe32(byte_cnt);
    memcpy(m, &a, 4);
    memcpy(m + 4, &b, 4);
}

/* s_wqe_info: wqe_counter BE16, s_wqe_opcode, reserved. */
static void mini_req(uint8_t m[8], uint16_t wc, uint8_t wop, uint32_t byte_cnt)
{
    mini(m, (uint32_t)wc << 16 | (uint32_t)wop << 8, byte_cnt);
}

/* A session of n mini-CQEs with title t at pi: arrays first (unused entries 0xcd), title last. */
static void put_session(struct mlxd_cq *cq, uint32_t pi, const struct spec *t, uint32_t n, uint8_t (*m)[8])
{
    for (uint32_t k = 0; k * 8 < n; k++) {
        uint8_t arr[64];
        memset(arr, 0xcd, sizeof arr);
        for (uint32_t j = 0; j < 8 && k * 8 + j < n; j++) memcpy(arr + 8 * j, m[k * 8 + j], 8);
        memcpy(slot(cq, pi + (k ? 8 * k : 1)), arr, 64);
    }
    put_cqe(cq, pi, t, n, 3);
}

static uint32_t record_ci(struct mlxd_cq *cq)
{
    volatile uint32_t *db;
    mlxd_cq_ring(cq, NULL, NULL, &db);
    return be32toh(db[0]);
}


static struct mlxd_cq *cq_new(uint32_t entries, uint32_t comp)
{
    struct mlxd_cq *cq;
    struct mlxd_detached_cq_opts o = { .sz = sizeof o, .cqe_comp = comp };
    ck_assert_msg(mlxd_cq_create_detached_opts(entries, &o, &cq) == 0, "%s", mlxd_errmsg());
    cq->qp_table = table;        /* as a NIC's CQ: the user index (cqe_version 1) indexes it */
    return cq;
}

static void cq_done(struct mlxd_cq *cq)
{
    cq->qp_table = NULL;
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}

/* Polls n completions with batches of max into w (fails on an error or an empty poll). */
static void poll_n(struct mlxd_cq *cq, struct mlxd_completion *w, int n, int max)
{
    int got = 0;
    while (got < n) {
        int want = n - got < max ? n - got : max;
        int r = mlxd_cq_poll(cq, w + got, want);
        ck_assert_msg(r > 0, "poll after %d of %d: %d %s", got, n, r, mlxd_errmsg());
        got += r;
    }
    ck_assert_int_eq(mlxd_cq_poll(cq, w, max), 0);
}

/* The same CQEs written full into an uncompressed ring: what the session must give. */
static void full_reference(const struct spec *s, uint32_t n, struct mlxd_completion *w, uint32_t *rq, uint64_t *sq)
{
    struct mlxd_cq *cq = cq_new(64, 0);
    struct fq a;
    fq_init(&a, 0x0a0a0a, 3, 100);
    for (uint32_t i = 0; i < n; i++) put_full(cq, i, &s[i]);
    poll_n(cq, w, (int)n, 64);
    for (uint32_t i = 0; i < n; i++) w[i].qp = w[i].qp == &a.qp ? (struct mlxd_qp *)1 : NULL;
    *rq = a.qp.rq_ci;
    *sq = a.qp.sq_ci;
    cq_done(cq);
}

/* Every responder format: 11 WRITE_IMM mini-CQEs (two arrays), polled at batches of 1, 4, 64,
 * give the completions the 11 full CQEs give (with the title's timestamp) and exact values. */
START_TEST(responder_formats)
{
    static const uint32_t fmts[3] = { MLXD_CQE_COMP_HASH, MLXD_CQE_COMP_CSUM, MLXD_CQE_COMP_CSUM_STRIDX };
    static const int batch[3] = { 1, 4, 64 };
    enum { N = 11 };
    struct spec s[N];
    uint8_t m[N][8];
    for (uint32_t i = 0; i < N; i++) {
        s[i] = (struct spec){ .opcode = MLX5_CQE_RESP_WR_IMM, .top = 2, .se = true, .qpn = 0x0a0a0a, .uidx = 3,
                              .byte_cnt = 4096 + i, .imm_be = htobe32(0x1234abcd), .flags_rqpn = 0x10000000u | 0x4242,
                              .wqe_counter = (uint16_t)(0xfffb + i), .ts = 0x1122334455ull };
        mini(m[i], 0xdeadbe00u + i, 4096 + i);   /* hash / checksum, stride index: not returned */
    }
    struct mlxd_completion ref[N];
    uint32_t ref_rq; uint64_t ref_sq;
    full_reference(s, N, ref, &ref_rq, &ref_sq);
    for (int f = 0; f < 3; f++)
        for (int b = 0; b < 3; b++) {
            struct mlxd_cq *cq = cq_new(64, fmts[f]);
            struct fq a;
            fq_init(&a, 0x0a0a0a, 3, 100);
            put_session(cq, 0, &s[0], N, m);
            struct mlxd_completion w[N];
            memset(w, 0xee, sizeof w);
            poll_n(cq, w, N, batch[b]);
            for (int i = 0; i < N; i++) {
                ck_assert_ptr_eq(w[i].qp, &a.qp);
                ck_assert_uint_eq(w[i].wr_id, 100 + ((0xfffbu + (unsigned)i) & 7));
                ck_assert_uint_eq(w[i].byte_len, 4096 + (unsigned)i);
                ck_assert_uint_eq(w[i].wqe_counter, (uint16_t)(0xfffb + i));    /* wraps at 2^16 */
                ck_assert_uint_eq(w[i].imm, 0x1234abcd);
                ck_assert_uint_eq(w[i].opcode, 129);                  /* IBV_WC_RECV_RDMA_WITH_IMM */
                ck_assert_uint_eq(w[i].status, 0);
                /* the source QPN and GRH flag are a UD QP's only (mlx5/poll.c reads_src); this QP
                 * is not one: the title's flags_rqpn gives none, as the full CQEs' does not */
                ck_assert_uint_eq(w[i].flags, MLXD_WC_SOLICITED | MLXD_WC_WITH_IMM);
                ck_assert_uint_eq(w[i].qpn, 0x0a0a0a);
                ck_assert_uint_eq(w[i].timestamp, 0x1122334455ull);
                ck_assert_uint_eq(w[i].hw_drops, 2);
                ck_assert_uint_eq(w[i].cqe_opcode, MLX5_CQE_RESP_WR_IMM);
                w[i].qp = (struct mlxd_qp *)1;
                ck_assert_msg(memcmp(&w[i], &ref[i], sizeof w[i]) == 0, "format %u batch %d: completion %d "
                              "differs from the full CQE's", fmts[f], batch[b], i);
            }
            ck_assert_uint_eq(a.qp.rq_ci, N);
            ck_assert_uint_eq(ref_rq, N);
            ck_assert_uint_eq(cq->ci, N);
            ck_assert_uint_eq(record_ci(cq), N);
            for (uint32_t j = 0; j < N; j++) ck_assert_uint_eq(slot(cq, j)[63], 0xF0);   /* invalidated */
            cq_done(cq);
        }
}
END_TEST

/* The requester format (s_wqe_info): opcode, byte_len rules and wr_id of each mini-CQE's own
 * WQE, the send ring freed up to the last one. */
START_TEST(requester_format)
{
    enum { N = 5 };
    static const uint8_t wop[N] = { MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_SEND, MLX5_OPCODE_RDMA_READ,
                                    MLX5_OPCODE_ATOMIC_FA, MLX5_OPCODE_RDMA_WRITE_IMM };
    static const uint16_t wcs[N] = { 0, 1, 3, 4, 6 };
    static const uint32_t bc[N] = { 0, 64, 4096, 8, 0 };
    static const uint32_t want_op[N] = { 1, 0, 2, 4, 1 };      /* IBV_WC_RDMA_WRITE, SEND, RDMA_READ, FETCH_ADD */
    static const uint32_t want_len[N] = { 0, 0, 4096, 8, 0 };  /* READ: bytes read; atomics 8; else 0 */
    struct spec s[N];
    uint8_t m[N][8];
    for (uint32_t i = 0; i < N; i++) {
        s[i] = (struct spec){ .opcode = MLX5_CQE_REQ, .top = wop[i], .qpn = 0x0a0a0a, .uidx = 3, .byte_cnt = bc[i],
                              .wqe_counter = wcs[i], .ts = 99 };
        mini_req(m[i], wcs[i], wop[i], bc[i]);
    }
    struct mlxd_completion ref[N];
    uint32_t ref_rq; uint64_t ref_sq;
    full_reference(s, N, ref, &ref_rq, &ref_sq);
    struct mlxd_cq *cq = cq_new(16, MLXD_CQE_COMP_CSUM);
    struct fq a;
    fq_init(&a, 0x0a0a0a, 3, 100);
    put_session(cq, 0, &s[0], N, m);
    struct mlxd_completion w[N];
    poll_n(cq, w, N, 2);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(w[i].wr_id, 200 + wcs[i]);
        ck_assert_uint_eq(w[i].opcode, want_op[i]);
        ck_assert_uint_eq(w[i].byte_len, want_len[i]);
        ck_assert_uint_eq(w[i].wqe_counter, wcs[i]);
        ck_assert_uint_eq(w[i].wqe_opcode, wop[i]);
        ck_assert_uint_eq(w[i].timestamp, 99);
        w[i].qp = w[i].qp == &a.qp ? (struct mlxd_qp *)1 : NULL;
        ck_assert_msg(memcmp(&w[i], &ref[i], sizeof w[i]) == 0, "completion %d differs from the full CQE's", i);
    }
    ck_assert_uint_eq(a.qp.sq_ci, (uint64_t)56 << 32 | 1006);  /* snext[6]: after the last WQE */
    ck_assert_uint_eq(ref_sq, a.qp.sq_ci);
    ck_assert_uint_eq(a.qp.rq_ci, 0);
    cq_done(cq);
}
END_TEST

/* Sessions across the ring's end, between full CQEs, at every batch size: a ring of 16; 10
 * full CQEs consumed; then a session of 13 at 10 (slots 10..15 and 0..6 of the next pass, array
 * 0 in slot 11, array 1 in slot 18 = 2), a full CQE at 23 (slot 7, owner 1), a session of 2 at
 * 24 (slot 8, owner 1; its array in slot 9).  The wqe_counters run on: 10 .. 25. */
START_TEST(sessions_across_ring_end)
{
    static const int batch[4] = { 1, 3, 7, 64 };
    for (int b = 0; b < 4; b++) {
        struct mlxd_cq *cq = cq_new(16, MLXD_CQE_COMP_HASH);
        struct fq a;
        fq_init(&a, 0x0a0a0a, 3, 100);
        struct spec s = { .opcode = MLX5_CQE_RESP_SEND, .qpn = 0x0a0a0a, .uidx = 3, .ts = 5 };
        for (uint32_t i = 0; i < 10; i++) { s.wqe_counter = (uint16_t)i; s.byte_cnt = i; put_full(cq, i, &s); }
        struct mlxd_completion w[16];
        poll_n(cq, w, 10, 64);
        uint8_t m[13][8];
        for (uint32_t i = 0; i < 13; i++) mini(m[i], 0, 1000 + 10 + i);
        s.wqe_counter = 10; s.ts = 6;
        /* stale CQEs of an older pass in the holes: they must not be read */
        memset(slot(cq, 12), 0x77, 64);
        put_session(cq, 10, &s, 13, m);
        s.wqe_counter = 23; s.byte_cnt = 1023; s.ts = 7;
        put_full(cq, 23, &s);
        uint8_t m2[2][8];
        mini(m2[0], 0, 1024); mini(m2[1], 0, 1025);
        s.wqe_counter = 24; s.ts = 8;
        put_session(cq, 24, &s, 2, m2);
        ck_assert_uint_eq(slot(cq, 23)[63] & 1, 1);             /* the next pass's owner */
        memset(w, 0xee, sizeof w);
        poll_n(cq, w, 16, batch[b]);
        for (uint32_t i = 0; i < 16; i++) {
            uint32_t wc = 10 + i;
            ck_assert_uint_eq(w[i].wqe_counter, wc);
            ck_assert_uint_eq(w[i].byte_len, 1000 + wc);
            ck_assert_uint_eq(w[i].wr_id, 100 + (wc & 7));
            ck_assert_uint_eq(w[i].opcode, 128);                 /* IBV_WC_RECV */
            ck_assert_uint_eq(w[i].timestamp, i < 13 ? 6 : i == 13 ? 7 : 8);
            ck_assert_ptr_eq(w[i].qp, &a.qp);
        }
        ck_assert_uint_eq(cq->ci, 26);
        ck_assert_uint_eq(record_ci(cq), 26);
        ck_assert_uint_eq(a.qp.rq_ci, 26);
        for (uint32_t j = 10; j < 23; j++) ck_assert_uint_eq(slot(cq, j)[63], 0xF0);
        ck_assert_uint_eq(slot(cq, 24)[63], 0xF0);
        ck_assert_uint_eq(slot(cq, 25)[63], 0xF0);
        cq_done(cq);
    }
}
END_TEST

/* Sessions of one array (2 and 8 mini-CQEs), of two (9) and of a whole ring (64 in 64 slots:
 * 8 arrays), back to back in a ring of 64 polled at batch 64, as they fill it. */
START_TEST(session_sizes)
{
    static const uint32_t sizes[4] = { 2, 8, 9, 64 };
    struct mlxd_cq *cq = cq_new(64, MLXD_CQE_COMP_CSUM_STRIDX);
    struct fq a;
    fq_init(&a, 0x0a0a0a, 3, 100);
    uint32_t pi = 0;
    for (int k = 0; k < 4; k++) {
        uint32_t n = sizes[k];
        uint8_t (*m)[8] = calloc(n, 8);
        for (uint32_t i = 0; i < n; i++) mini(m[i], 0xffff0000u | i, pi + i);
        struct spec s = { .opcode = MLX5_CQE_RESP_SEND_IMM, .qpn = 0x0a0a0a, .uidx = 3, .imm_be = htobe32(77),
                          .wqe_counter = (uint16_t)pi };
        put_session(cq, pi, &s, n, m);
        free(m);
        struct mlxd_completion w[64];
        poll_n(cq, w, (int)n, 64);
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_uint_eq(w[i].byte_len, pi + i);
            ck_assert_uint_eq(w[i].wqe_counter, pi + i);
            ck_assert_uint_eq(w[i].imm, 77);
            ck_assert_uint_eq(w[i].opcode, 128);                 /* IBV_WC_RECV (with imm) */
            ck_assert_uint_eq(w[i].flags, MLXD_WC_WITH_IMM);
        }
        pi += n;
        ck_assert_uint_eq(cq->ci, pi);
        ck_assert_uint_eq(a.qp.rq_ci, pi);
    }
    cq_done(cq);
}
END_TEST

/* A title that cannot start a session is reported (-EPROTO, the message naming it), not
 * decoded, and nothing is consumed; completions before it are returned first. */
START_TEST(bad_sessions_reported)
{
    struct spec s = { .opcode = MLX5_CQE_RESP_SEND, .qpn = 0x0a0a0a, .uidx = 3 };
    static const uint32_t bad[3] = { 0, 1, 17 };       /* a ring of 16 */
    for (int k = 0; k < 3; k++) {
        struct mlxd_cq *cq = cq_new(16, MLXD_CQE_COMP_HASH);
        struct fq a;
        fq_init(&a, 0x0a0a0a, 3, 100);
        put_full(cq, 0, &s);
        put_cqe(cq, 1, &s, bad[k], 3);
        struct mlxd_completion w[4];
        ck_assert_int_eq(mlxd_cq_poll(cq, w, 4), 1);
        ck_assert_int_eq(mlxd_cq_poll(cq, w, 4), -EPROTO);
        ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "announces"));
        ck_assert_int_eq(mlxd_cq_poll(cq, w, 1), -EPROTO);     /* still there: nothing consumed */
        ck_assert_uint_eq(cq->ci, 1);
        ck_assert_uint_eq(record_ci(cq), 1);
        cq_done(cq);
    }
    /* an error CQE with format 3: no session has it */
    struct mlxd_cq *cq = cq_new(16, MLXD_CQE_COMP_HASH);
    struct spec e = { .opcode = MLX5_CQE_RESP_ERR, .qpn = 0x0a0a0a, .uidx = 3 };
    put_cqe(cq, 0, &e, 4, 3);
    struct mlxd_completion w[4];
    ck_assert_int_eq(mlxd_cq_poll(cq, w, 4), -EPROTO);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "opcode 14"));
    cq_done(cq);
}
END_TEST

START_TEST(detached_option_misuse)
{
    struct mlxd_cq *cq = NULL;
    struct mlxd_detached_cq_opts o = { .sz = sizeof o, .cqe_comp = 3 };
    ck_assert_int_eq(mlxd_cq_create_detached_opts(16, &o, &cq), -EINVAL);
    o.cqe_comp = 8;
    ck_assert_int_eq(mlxd_cq_create_detached_opts(16, &o, &cq), -EINVAL);
    o.sz = 4;
    o.cqe_comp = 0;
    ck_assert_int_eq(mlxd_cq_create_detached_opts(16, &o, &cq), -EINVAL);
    ck_assert_ptr_null(cq);
}
END_TEST

/* ---- the emulator, at the system-call boundary ------------------------------------------ */

static void caps(int fd, uint32_t *max_num, uint32_t *fmts)
{
    struct ib_uverbs_ex_query_device q = { 0 };
    struct ib_uverbs_ex_query_device_resp r;
    struct mlx5_ib_query_device_resp mr;
    memset(&mr, 0, sizeof mr);
    ck_assert_int_eq(tk_invoke(fd, IB_USER_VERBS_EX_CMD_QUERY_DEVICE | IB_USER_VERBS_CMD_FLAG_EXTENDED,
                               &q, sizeof q, &r, sizeof r, NULL, 0, &mr, sizeof mr), 0);
    *max_num = mr.cqe_comp_caps.max_num;
    *fmts = mr.cqe_comp_caps.supported_format;
}

static int raw_cq(struct tk_env *e, uint8_t en, uint8_t fmt, uint32_t cqe_size)
{
    struct tk_mem mem;
    tk_mem_alloc(&mem, 64 * 128);
    struct tk_cq_opts o = { .ncqe = 64, .cqe_size = cqe_size, .uar_page = e->uar_page, .comp_fd = -1,
                            .event_fd = -1, .comp_en = en, .comp_fmt = fmt };
    uint32_t h;
    int r = tk_create_cq(e->fd, &o, &mem, &h, NULL);
    if (!r) ck_assert_int_eq(tk_destroy_cq(e->fd, h), 0);
    return r;
}

/* drivers/infiniband/hw/mlx5/cq.c create_cq_user and main.c mlx5_ib_query_device. */
START_TEST(kernel_rules_and_caps)
{
    tk_unique_devices();
    struct tk_env e;
    tk_env_open(&e, 0);
    uint32_t max, fmts;
    caps(e.fd, &max, &fmts);
    ck_assert_uint_eq(max, 64);
    ck_assert_uint_eq(fmts, MLX5_IB_CQE_RES_FORMAT_HASH | MLX5_IB_CQE_RES_FORMAT_CSUM |
                      MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX);
    ck_assert_int_eq(raw_cq(&e, 1, MLX5_IB_CQE_RES_FORMAT_HASH, 64), 0);
    ck_assert_int_eq(raw_cq(&e, 1, MLX5_IB_CQE_RES_FORMAT_CSUM, 64), 0);
    ck_assert_int_eq(raw_cq(&e, 1, MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX, 64), 0);
    ck_assert_int_eq(raw_cq(&e, 1, 0, 64), -EINVAL);            /* mini_cqe_res_format_to_hw */
    ck_assert_int_eq(raw_cq(&e, 1, 3, 64), -EINVAL);            /* two formats */
    ck_assert_int_eq(raw_cq(&e, 1, 8, 64), -EINVAL);
    ck_assert_int_eq(raw_cq(&e, 1, MLX5_IB_CQE_RES_FORMAT_HASH, 128), -EOPNOTSUPP);  /* no cqe_compression_128 */
    ck_assert_int_eq(raw_cq(&e, 2, 0xff, 64), 0);              /* cqe_comp_en other than 1: ignored */
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(64, false), 0);      /* no mini_cqe_resp_stride_index */
    caps(e.fd, &max, &fmts);
    ck_assert_uint_eq(fmts, MLX5_IB_CQE_RES_FORMAT_HASH | MLX5_IB_CQE_RES_FORMAT_CSUM);
    ck_assert_int_eq(raw_cq(&e, 1, MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX, 64), -EOPNOTSUPP);
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(0, true), 0);        /* no cqe_compression */
    caps(e.fd, &max, &fmts);
    ck_assert_uint_eq(max, 0);
    ck_assert_uint_eq(fmts, 0);
    ck_assert_int_eq(raw_cq(&e, 1, MLX5_IB_CQE_RES_FORMAT_HASH, 64), -EOPNOTSUPP);
    ck_assert_int_eq(raw_cq(&e, 0, MLX5_IB_CQE_RES_FORMAT_HASH, 64), 0);
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(1, true), -EINVAL);
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(257, true), -EINVAL);
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(64, true), 0);
    close(e.fd);
}
END_TEST

/* mlxd_cq_create's option: checked against the caps, as libmlx5 checks them. */
START_TEST(driver_option)
{
    mlxd_test_emu_two_devices();
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    struct mlxd_cq *cq;
    struct mlxd_cq_opts o = { .sz = sizeof o, .cqe_comp = 3 };
    ck_assert_int_eq(mlxd_cq_create(nic, 16, &o, &cq), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "cqe_comp"));
    o.cqe_comp = MLXD_CQE_COMP_CSUM_STRIDX;
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(64, false), 0);
    ck_assert_int_eq(mlxd_cq_create(nic, 16, &o, &cq), -EOPNOTSUPP);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "supported_format"));
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(0, true), 0);
    o.cqe_comp = MLXD_CQE_COMP_HASH;
    ck_assert_int_eq(mlxd_cq_create(nic, 16, &o, &cq), -EOPNOTSUPP);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "max_num 0"));
    ck_assert_int_eq(mlxd_emu_cqe_comp_set(64, true), 0);
    ck_assert_msg(mlxd_cq_create(nic, 16, &o, &cq) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_cq_record_start(cq, "/dev/null", NULL, &(struct mlxd_recorder *){ NULL }), -EINVAL);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    ck_assert_int_eq(mlxd_close(nic), 0);
}
END_TEST

/* ---- end to end through the emulated NIC ------------------------------------------------ */

struct side {
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_region *reg;
    unsigned char *buf;
};

static void side_open(struct side *s, const char *dev, uint32_t comp)
{
    memset(s, 0, sizeof *s);
    mlxd_test_open_region(dev, 65536, &s->nic, &s->buf, &s->reg);
    struct mlxd_cq_opts co = { .sz = sizeof co, .cqe_comp = comp };
    ck_assert_msg(mlxd_cq_create(s->nic, 64, &co, &s->cq) == 0, "%s", mlxd_errmsg());
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 32, .recv_depth = 32 };
    ck_assert_msg(mlxd_qp_create(s->cq, &qo, &s->qp) == 0, "%s", mlxd_errmsg());
}

static void connect_pair(struct side *a, struct side *b)
{
    struct mlxd_endpoint ea, eb;
    ck_assert_int_eq(mlxd_qp_endpoint(a->qp, &ea), 0);
    ck_assert_int_eq(mlxd_qp_endpoint(b->qp, &eb), 0);
    struct mlxd_connect_opts co = { .sz = sizeof co, .peer_access = MLXD_ACCESS_REMOTE_WRITE };
    ck_assert_int_eq(mlxd_qp_connect(a->qp, &eb, &co), 0);
    ck_assert_int_eq(mlxd_qp_connect(b->qp, &ea, &co), 0);
}

static void pair(struct side *a, struct side *b, uint32_t comp_a, uint32_t comp_b)
{
    side_open(a, "mlx5_0", comp_a);
    side_open(b, "mlx5_1", comp_b);
    connect_pair(a, b);
}

static void pair_close(struct side *a, struct side *b)
{
    ck_assert_int_eq(mlxd_close(a->nic), 0);
    ck_assert_int_eq(mlxd_close(b->nic), 0);
    free(a->buf);
    free(b->buf);
}

static uint64_t cqes_written(unsigned dev)
{
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(dev, &st), 0);
    return st.cqes;
}

/* Waits until the device has written `want` CQEs in all (a session counts its mini-CQEs), then
 * returns the number of compressed titles among the CQEs from cq's consumer index on. */
static unsigned sessions_ahead(struct mlxd_cq *cq, unsigned dev, uint64_t want)
{
    for (int i = 0; i < 50000 && cqes_written(dev) < want; i++) usleep(100);
    ck_assert_uint_ge(cqes_written(dev), want);
    unsigned titles = 0;
    for (uint32_t ci = cq->ci; ; ) {
        const uint8_t *c = (const uint8_t *)(uintptr_t)cq->buf + (size_t)(ci & (cq->ncqe - 1)) * 64;
        uint8_t op = __atomic_load_n(&c[63], __ATOMIC_ACQUIRE);
        if ((op & 1) != ((ci & cq->ncqe) != 0) || op >> 4 == 0xF) break;
        if (((op >> 2) & 3) == 3) { titles++; ci += be32toh(*(const uint32_t *)(c + 44)); }
        else ci++;
    }
    return titles;
}

/* 16 SENDs of different sizes in one doorbell: B's compressing CQ gets them as sessions (one
 * burst: the emulator's rule), which expand to the 16 receives in order with their sizes.  16
 * WRITE_IMMs with 16 immediates are never compressed; with one immediate they are. */
static void e2e_round(struct side *a, struct side *b, int round, uint32_t op, bool same_imm, unsigned *titles)
{
    enum { N = 16 };
    struct mlxd_local lb;
    ck_assert_int_eq(mlxd_region_slice(b->reg, 0, 4096, &lb), 0);
    struct mlxd_recv rv[N];
    for (int i = 0; i < N; i++) rv[i] = (struct mlxd_recv){ .wr_id = 1000u * (unsigned)round + (unsigned)i, .num_local = 1, .local = &lb };
    ck_assert_int_eq(mlxd_qp_receive(b->qp, rv, N), N);
    struct mlxd_remote rb = mlxd_region_remote(b->reg);
    uint64_t before = cqes_written(1);
    for (int i = 0; i < N; i++) {
        struct mlxd_entry e = { .wr_id = (uint64_t)i, .op = op, .flags = i == N - 1 ? MLXD_SIGNALED : 0,
                                .imm = same_imm ? 0xabcd : 0xab00u + (unsigned)i, .num_local = 1,
                                .local = { (uintptr_t)a->buf, 100u + (unsigned)i, 0 },
                                .remote = { rb.addr + 8192, 0, rb.rkey, 0 } };
        struct mlxd_local la;
        ck_assert_int_eq(mlxd_region_slice(a->reg, 0, 100 + (size_t)i, &la), 0);
        e.local = la;
        ck_assert_int_eq(mlxd_qp_post(a->qp, &e), 0);
    }
    ck_assert_int_eq(mlxd_qp_ring(a->qp), 0);
    *titles = sessions_ahead(b->cq, 1, before + N);
    struct mlxd_completion w[N];
    poll_n(b->cq, w, N, 5);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(w[i].status, 0);
        ck_assert_uint_eq(w[i].wr_id, 1000u * (unsigned)round + (unsigned)i);
        ck_assert_uint_eq(w[i].byte_len, 100u + (unsigned)i);
        ck_assert_ptr_eq(w[i].qp, b->qp);
        if (op == MLXD_OP_SEND) ck_assert_uint_eq(w[i].opcode, 128);            /* IBV_WC_RECV */
        else ck_assert_uint_eq(w[i].imm, same_imm ? 0xabcd : 0xab00u + (unsigned)i);
    }
    struct mlxd_completion s;
    mlxd_test_wait_one(a->cq, 5, &s);
    ck_assert_uint_eq(s.wr_id, N - 1);
    ck_assert_uint_eq(s.status, 0);
}

START_TEST(e2e_responder_sessions)
{
    mlxd_test_emu_two_devices();
    struct side a, b;
    pair(&a, &b, 0, MLXD_CQE_COMP_HASH);
    unsigned titles = 0, t;
    /* a burst may be split by the engine's timing (a pass reads what has arrived): a few rounds */
    for (int r = 0; r < 8; r++) { e2e_round(&a, &b, r, MLXD_OP_SEND, false, &t); titles += t; }
    ck_assert_uint_gt(titles, 0);
    for (int r = 8; r < 12; r++) {
        e2e_round(&a, &b, r, MLXD_OP_WRITE_IMM, false, &t);
        ck_assert_uint_eq(t, 0);                                  /* immediates differ: never */
    }
    titles = 0;
    for (int r = 12; r < 20; r++) { e2e_round(&a, &b, r, MLXD_OP_WRITE_IMM, true, &t); titles += t; }
    ck_assert_uint_gt(titles, 0);
    pair_close(&a, &b);
}
END_TEST

/* Requester CQEs (s_wqe_info): 16 signaled WRITEs complete on A's compressing CQ in order. */
START_TEST(e2e_requester_sessions)
{
    mlxd_test_emu_two_devices();
    struct side a, b;
    pair(&a, &b, MLXD_CQE_COMP_CSUM, 0);
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    struct mlxd_local la;
    ck_assert_int_eq(mlxd_region_slice(a.reg, 0, 256, &la), 0);
    unsigned titles = 0;
    for (int r = 0; r < 8; r++) {
        uint64_t before = cqes_written(0);
        for (int i = 0; i < 16; i++) {
            struct mlxd_entry e = { .wr_id = 100u * (unsigned)r + (unsigned)i, .op = MLXD_OP_WRITE,
                                    .flags = MLXD_SIGNALED, .num_local = 1, .local = la,
                                    .remote = { rb.addr, 0, rb.rkey, 0 } };
            ck_assert_int_eq(mlxd_qp_post(a.qp, &e), 0);
        }
        ck_assert_int_eq(mlxd_qp_ring(a.qp), 0);
        titles += sessions_ahead(a.cq, 0, before + 16);
        struct mlxd_completion w[16];
        poll_n(a.cq, w, 16, 16);
        for (int i = 0; i < 16; i++) {
            ck_assert_uint_eq(w[i].wr_id, 100u * (unsigned)r + (unsigned)i);
            ck_assert_uint_eq(w[i].status, 0);
            ck_assert_uint_eq(w[i].opcode, 1);                    /* IBV_WC_RDMA_WRITE */
        }
        ck_assert_int_eq(mlxd_qp_send_room(a.qp), mlxd_qp_send_room(a.qp));
    }
    ck_assert_uint_gt(titles, 0);
    pair_close(&a, &b);
}
END_TEST

/* A compressing CQ with events whose QP takes its receives from an SRQ: each burst arms, waits
 * for the completion event (the NIC fires it when the session is written), then polls 16
 * receives whose wr_ids are the SRQ's entries in order (the NIC takes them in list order, the
 * decoder derives each one's WQE index from the title's). */
START_TEST(e2e_srq_events)
{
    mlxd_test_emu_two_devices();
    struct side a, b;
    memset(&b, 0, sizeof b);
    side_open(&a, "mlx5_0", 0);
    mlxd_test_open_region("mlx5_1", 65536, &b.nic, &b.buf, &b.reg);
    struct mlxd_cq_opts co = { .sz = sizeof co, .events = true, .cqe_comp = MLXD_CQE_COMP_CSUM };
    ck_assert_msg(mlxd_cq_create(b.nic, 64, &co, &b.cq) == 0, "%s", mlxd_errmsg());
    struct mlxd_srq *srq;
    struct mlxd_srq_opts so = { .sz = sizeof so, .depth = 64 };
    ck_assert_msg(mlxd_srq_create(b.nic, &so, &srq) == 0, "%s", mlxd_errmsg());
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 4, .srq = srq };
    ck_assert_msg(mlxd_qp_create(b.cq, &qo, &b.qp) == 0, "%s", mlxd_errmsg());
    connect_pair(&a, &b);
    struct mlxd_local lb, la;
    ck_assert_int_eq(mlxd_region_slice(b.reg, 0, 4096, &lb), 0);
    ck_assert_int_eq(mlxd_region_slice(a.reg, 0, 64, &la), 0);
    unsigned titles = 0;
    uint64_t next = 0;
    for (int r = 0; r < 8; r++) {
        struct mlxd_recv rv[16];
        for (int i = 0; i < 16; i++) rv[i] = (struct mlxd_recv){ .wr_id = next + (unsigned)i, .num_local = 1, .local = &lb };
        ck_assert_int_eq(mlxd_srq_receive(srq, rv, 16), 16);
        ck_assert_int_eq(mlxd_cq_arm(b.cq, false), 0);
        uint64_t before = cqes_written(1);
        for (int i = 0; i < 16; i++) {
            struct mlxd_entry e = { .wr_id = (uint64_t)i, .op = MLXD_OP_SEND, .flags = i == 15 ? MLXD_SIGNALED : 0,
                                    .num_local = 1, .local = la };
            ck_assert_int_eq(mlxd_qp_post(a.qp, &e), 0);
        }
        ck_assert_int_eq(mlxd_qp_ring(a.qp), 0);
        struct mlxd_event ev[4];
        int n = mlxd_wait(b.nic, 5000, ev, 4);
        ck_assert_int_ge(n, 1);
        ck_assert_uint_eq(ev[0].kind, MLXD_EVENT_COMPLETION);
        ck_assert_ptr_eq(ev[0].cq, b.cq);
        titles += sessions_ahead(b.cq, 1, before + 16);
        struct mlxd_completion w[16];
        poll_n(b.cq, w, 16, 16);
        for (int i = 0; i < 16; i++) {
            ck_assert_uint_eq(w[i].status, 0);
            ck_assert_uint_eq(w[i].wr_id, next + (unsigned)i);
            ck_assert_uint_eq(w[i].byte_len, 64);
        }
        next += 16;
        struct mlxd_completion s;
        mlxd_test_wait_one(a.cq, 5, &s);
        ck_assert_uint_eq(s.status, 0);
    }
    ck_assert_uint_gt(titles, 0);
    pair_close(&a, &b);
}
END_TEST

Suite *cqe_mini_suite(void)
{
    Suite *s = suite_create("cqe_mini");
    TCase *t = tcase_create("ring");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, responder_formats);
    tcase_add_test(t, requester_format);
    tcase_add_test(t, sessions_across_ring_end);
    tcase_add_test(t, session_sizes);
    tcase_add_test(t, bad_sessions_reported);
    tcase_add_test(t, detached_option_misuse);
    suite_add_tcase(s, t);
    t = tcase_create("emu");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, kernel_rules_and_caps);
    tcase_add_test(t, driver_option);
    tcase_add_test(t, e2e_responder_sessions);
    tcase_add_test(t, e2e_requester_sessions);
    tcase_add_test(t, e2e_srq_events);
    suite_add_tcase(s, t);
    return s;
}
