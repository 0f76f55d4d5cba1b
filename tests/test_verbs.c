/* The verbs beyond a single-buffer WRITE/SEND/READ, through the driver on the emulated NIC:
 * atomics (compare-and-swap and fetch-and-add on RC) and scatter/gather lists.
 *
 * Atomics:
 * Expected values come from the operations' definitions (IB spec vol. 1 9.4.5: the responder
 * returns the original 8 bytes; compare-and-swap writes the swap value only when the original
 * equals the compare value; fetch-and-add adds modulo 2^64), the mlx5 syndromes of the errors a
 * ConnectX reports (mlx5dv.h MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR 0x12 for a misaligned VA,
 * MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR 0x13 for a region without REMOTE_ATOMIC; ibv_wc_status 9
 * and 10), ibv_wc_opcode (IBV_WC_COMP_SWAP 3, IBV_WC_FETCH_ADD 4) and libmlx5's byte_len of 8.
 * The 8 bytes are in host byte order on both sides (the device's host-endianness atomic mode,
 * which mlx5_ib requires before it advertises IB_ATOMIC_HCA).
 * Scatter/gather lists: the entries are gathered (sends) or scattered (receives, READ responses)
 * in order, a zero-length entry carries no data segment (a byte_count of 0 means 2 GiB to the
 * NIC), and num_local is bounded by the QP's max_send_sge / max_recv_sge (IB spec vol. 1 10.7;
 * libmlx5 providers/mlx5/qp.c). */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>     /* headers only: the enum values compared below */
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
#include "util.h"

#define BUF 4096
_Static_assert((int)MLXD_WC_COMP_SWAP == (int)IBV_WC_COMP_SWAP, "ibv_wc_opcode");
_Static_assert((int)MLXD_WC_FETCH_ADD == (int)IBV_WC_FETCH_ADD, "ibv_wc_opcode");
#define NQP 2
#define SGE 4

struct side {
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp[NQP];
    struct mlxd_region *reg;
    uint8_t *buf;
};


/* One NIC, one CQ, `nqp` RC QPs, one 4 KiB region with the given remote access. */
static void side_open(struct side *s, const char *dev, uint32_t access, unsigned nqp)
{
    memset(s, 0, sizeof *s);
    ck_assert_msg(mlxd_open(dev, NULL, &s->nic) == 0, "open %s: %s", dev, mlxd_errmsg());
    s->buf = aligned_alloc(4096, BUF);
    memset(s->buf, 0, BUF);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE | access };
    ck_assert_msg(mlxd_region_register(s->nic, s->buf, BUF, &ro, &s->reg) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_cq_create(s->nic, 256, NULL, &s->cq) == 0, "%s", mlxd_errmsg());
    for (unsigned i = 0; i < nqp; i++) {
        struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 32,
                                   .recv_depth = 32, .max_send_sge = SGE, .max_recv_sge = SGE };
        ck_assert_msg(mlxd_qp_create(s->cq, &qo, &s->qp[i]) == 0, "%s", mlxd_errmsg());
    }
}

static void connect_qp(struct mlxd_qp *qp, const struct mlxd_endpoint *peer)
{
    struct mlxd_connect_opts co = { .sz = sizeof co, .peer_access = MLXD_ACCESS_REMOTE_WRITE |
                                    MLXD_ACCESS_REMOTE_READ | MLXD_ACCESS_REMOTE_ATOMIC };
    ck_assert_msg(mlxd_qp_connect(qp, peer, &co) == 0, "%s", mlxd_errmsg());
}

/* a on mlx5_0 and b on mlx5_1, QP i of a connected to QP i of b; b's region has `b_access`. */
static void pair(struct side *a, struct side *b, uint32_t b_access, unsigned nqp)
{
    side_open(a, "mlx5_0", 0, nqp);
    side_open(b, "mlx5_1", b_access, nqp);
    for (unsigned i = 0; i < nqp; i++) {
        struct mlxd_endpoint ea, eb;
        ck_assert_int_eq(mlxd_qp_endpoint(a->qp[i], &ea), 0);
        ck_assert_int_eq(mlxd_qp_endpoint(b->qp[i], &eb), 0);
        connect_qp(a->qp[i], &eb);
        connect_qp(b->qp[i], &ea);
    }
}

static void side_close(struct side *s)
{
    ck_assert_int_eq(mlxd_close(s->nic), 0);
    free(s->buf);
}

static struct mlxd_completion wait_one(struct mlxd_cq *cq)
{
    struct mlxd_completion wc;
    time_t t0 = time(NULL);
    for (;;) {
        int n = mlxd_cq_poll(cq, &wc, 1);
        ck_assert_int_ge(n, 0);
        if (n == 1) return wc;
        ck_assert_msg(time(NULL) - t0 < 10, "no completion within 10 s");
        usleep(20);
    }
}

static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Posts one atomic from a's QP 0 into a->buf + local_off, targeting b's region at remote_off. */
static struct mlxd_completion atomic(struct side *a, struct side *b, uint32_t op, uint64_t compare,
                                     uint64_t swap_add, uint32_t local_off, uint64_t remote_off,
                                     uint64_t wr_id)
{
    struct mlxd_local la;
    ck_assert_int_eq(mlxd_region_slice(a->reg, local_off, 8, &la), 0);
    struct mlxd_remote rb = mlxd_region_remote(b->reg);
    struct mlxd_entry e = { .wr_id = wr_id, .op = op, .flags = MLXD_SIGNALED, .num_local = 1,
                            .local = la, .remote = { rb.addr + remote_off, 0, rb.rkey, 0 },
                            .compare = compare, .swap_add = swap_add };
    ck_assert_msg(mlxd_qp_post(a->qp[0], &e) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_ring(a->qp[0]), 0);
    struct mlxd_completion wc = wait_one(a->cq);
    ck_assert_uint_eq(wc.wr_id, wr_id);
    return wc;
}

static void check_ok(const struct mlxd_completion *wc, uint32_t opcode)
{
    ck_assert_msg(wc->status == 0, "status %u syndrome 0x%x", wc->status, wc->syndrome);
    ck_assert_uint_eq(wc->opcode, opcode);
    ck_assert_uint_eq(wc->byte_len, 8);
}

START_TEST(fetch_add_and_compare_swap)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_ATOMIC, 1);
    wr64(b.buf + 64, 100);
    struct mlxd_completion wc = atomic(&a, &b, MLXD_OP_FETCH_ADD, 0, 5, 0, 64, 1);
    check_ok(&wc, 4);                                        /* IBV_WC_FETCH_ADD */
    ck_assert_uint_eq(rd64(a.buf), 100);                     /* the original value */
    ck_assert_uint_eq(rd64(b.buf + 64), 105);
    /* compare matches: swapped, original returned */
    wc = atomic(&a, &b, MLXD_OP_CMP_SWAP, 105, 0x1122334455667788ull, 8, 64, 2);
    check_ok(&wc, 3);                                        /* IBV_WC_COMP_SWAP */
    ck_assert_uint_eq(rd64(a.buf + 8), 105);
    ck_assert_uint_eq(rd64(b.buf + 64), 0x1122334455667788ull);
    /* compare differs: memory unchanged, the current value returned */
    wc = atomic(&a, &b, MLXD_OP_CMP_SWAP, 105, 7, 16, 64, 3);
    check_ok(&wc, 3);
    ck_assert_uint_eq(rd64(a.buf + 16), 0x1122334455667788ull);
    ck_assert_uint_eq(rd64(b.buf + 64), 0x1122334455667788ull);
    /* fetch-and-add wraps modulo 2^64 */
    wc = atomic(&a, &b, MLXD_OP_FETCH_ADD, 0, UINT64_MAX, 24, 64, 4);
    check_ok(&wc, 4);
    ck_assert_uint_eq(rd64(a.buf + 24), 0x1122334455667788ull);
    ck_assert_uint_eq(rd64(b.buf + 64), 0x1122334455667787ull);
    /* the neighbouring bytes are untouched */
    ck_assert_uint_eq(rd64(b.buf + 56), 0);
    ck_assert_uint_eq(rd64(b.buf + 72), 0);
    side_close(&a);
    side_close(&b);
}
END_TEST

START_TEST(misaligned_is_remote_invalid_request)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_ATOMIC, 1);
    wr64(b.buf + 64, 42);
    struct mlxd_completion wc = atomic(&a, &b, MLXD_OP_FETCH_ADD, 0, 1, 0, 68, 9);
    ck_assert_uint_eq(wc.status, 9);                         /* IBV_WC_REM_INV_REQ_ERR */
    ck_assert_uint_eq(wc.syndrome, 0x12);                    /* REMOTE_INVAL_REQ_ERR */
    ck_assert_uint_eq(rd64(b.buf + 64), 42);                 /* nothing executed */
    side_close(&a);
    side_close(&b);
}
END_TEST

START_TEST(region_without_remote_atomic_is_access_error)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ, 1);
    wr64(b.buf, 42);
    struct mlxd_completion wc = atomic(&a, &b, MLXD_OP_CMP_SWAP, 42, 1, 0, 0, 10);
    ck_assert_uint_eq(wc.status, 10);                        /* IBV_WC_REM_ACCESS_ERR */
    ck_assert_uint_eq(wc.syndrome, 0x13);                    /* REMOTE_ACCESS_ERR */
    ck_assert_uint_eq(rd64(b.buf), 42);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* Two QPs add 1 to one counter, interleaved: every original value 0 .. 2N-1 comes back exactly
 * once and the counter ends at 2N, which holds only if no two adds overlapped. */
START_TEST(concurrent_fetch_adds_are_atomic)
{
    enum { N = 200 };
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_ATOMIC, NQP);
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    static uint8_t seen[2 * N];
    memset(seen, 0, sizeof seen);
    unsigned posted = 0, done = 0;
    while (done < 2 * N) {
        for (unsigned q = 0; q < NQP && posted < 2 * N; q++) {
            unsigned slot = posted;
            struct mlxd_local la;
            ck_assert_int_eq(mlxd_region_slice(a.reg, 8 * slot % BUF, 8, &la), 0);
            struct mlxd_entry e = { .wr_id = slot, .op = MLXD_OP_FETCH_ADD, .flags = MLXD_SIGNALED,
                                    .num_local = 1, .local = la,
                                    .remote = { rb.addr + 128 * 8, 0, rb.rkey, 0 }, .swap_add = 1 };
            int rc = mlxd_qp_post(a.qp[q], &e);
            if (rc == -EAGAIN) break;
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(mlxd_qp_ring(a.qp[q]), 0);
            posted++;
        }
        struct mlxd_completion wc[16];
        int n = mlxd_cq_poll(a.cq, wc, 16);
        ck_assert_int_ge(n, 0);
        for (int i = 0; i < n; i++) {
            check_ok(&wc[i], 4);
            /* slots are reused only after their completion: read the result now */
            uint64_t orig = rd64(a.buf + 8 * wc[i].wr_id % BUF);
            ck_assert_uint_lt(orig, 2 * N);
            ck_assert_msg(!seen[orig], "original value %" PRIu64 " returned twice", orig);
            seen[orig] = 1;
            done++;
        }
    }
    ck_assert_uint_eq(rd64(b.buf + 128 * 8), 2 * N);
    side_close(&a);
    side_close(&b);
}
END_TEST

START_TEST(malformed_atomics_are_refused)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_ATOMIC, 1);
    struct mlxd_local la = mlxd_region_local(a.reg);
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    struct mlxd_entry e = { .op = MLXD_OP_FETCH_ADD, .flags = MLXD_SIGNALED, .num_local = 1,
                            .local = { la.addr, 4, la.lkey }, .remote = { rb.addr, 0, rb.rkey, 0 } };
    ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), -EINVAL);    /* not 8 bytes */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "8-byte"));
    e.local.length = 8;
    e.num_local = 0;
    ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), -EINVAL);    /* no local buffer */
    e.num_local = 1;
    e.flags |= MLXD_INLINE;
    ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), -EINVAL);    /* inline */
    e.flags = MLXD_SIGNALED;
    ck_assert_int_eq(mlxd_qp_send_room(a.qp[0]), 32);        /* nothing was written */
    side_close(&a);
    side_close(&b);

    /* UC has no atomics (IB spec table 38) */
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    ck_assert_int_eq(mlxd_cq_create(nic, 64, NULL, &cq), 0);
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UC, .send_depth = 16, .recv_depth = 16 };
    ck_assert_int_eq(mlxd_qp_create(cq, &qo, &qp), 0);
    ck_assert_int_eq(mlxd_qp_post(qp, &e), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "UC"));
    ck_assert_int_eq(mlxd_close(nic), 0);
}
END_TEST

/* The responder in another process: its counter, reached over the emulated wire. */
struct xchg { struct mlxd_endpoint ep; struct mlxd_remote rm; };

START_TEST(two_processes)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        struct side b;
        side_open(&b, "mlx5_1", MLXD_ACCESS_REMOTE_ATOMIC, 1);
        wr64(b.buf + 8, 1000);
        struct xchg me = { .rm = mlxd_region_remote(b.reg) }, peer;
        mlxd_qp_endpoint(b.qp[0], &me.ep);
        ck_assert_int_eq(write(sv[1], &me, sizeof me), sizeof me);
        ck_assert_int_eq(read(sv[1], &peer, sizeof peer), sizeof peer);
        connect_qp(b.qp[0], &peer.ep);
        char c;
        ck_assert_int_eq(write(sv[1], "g", 1), 1);
        ck_assert_int_eq(read(sv[1], &c, 1), 1);              /* the parent is done */
        /* the NIC wrote it before the peer's completions, and the peer's 'd' came after those:
         * an order through another process that TSan cannot see, so an acquire load says it */
        int ok = __atomic_load_n((const uint64_t *)(const void *)(b.buf + 8), __ATOMIC_ACQUIRE) == 1000 + 3 * 7;
        side_close(&b);
        _exit(ok ? 0 : 3);
    }
    close(sv[1]);
    struct side a;
    side_open(&a, "mlx5_0", 0, 1);
    struct xchg me = { .rm = mlxd_region_remote(a.reg) }, peer;
    mlxd_qp_endpoint(a.qp[0], &me.ep);
    ck_assert_int_eq(read(sv[0], &peer, sizeof peer), sizeof peer);
    ck_assert_int_eq(write(sv[0], &me, sizeof me), sizeof me);
    connect_qp(a.qp[0], &peer.ep);
    char go;
    ck_assert_int_eq(read(sv[0], &go, 1), 1);
    struct mlxd_local la = mlxd_region_local(a.reg);
    for (unsigned i = 0; i < 3; i++) {
        struct mlxd_entry e = { .wr_id = i, .op = MLXD_OP_FETCH_ADD, .flags = MLXD_SIGNALED,
                                .num_local = 1, .local = { la.addr + 8 * i, 8, la.lkey },
                                .remote = { peer.rm.addr + 8, 0, peer.rm.rkey, 0 }, .swap_add = 7 };
        ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), 0);
    }
    ck_assert_int_eq(mlxd_qp_ring(a.qp[0]), 0);
    for (unsigned i = 0; i < 3; i++) {
        struct mlxd_completion wc = wait_one(a.cq);
        check_ok(&wc, 4);
        ck_assert_uint_eq(wc.wr_id, i);                       /* in order */
        ck_assert_uint_eq(rd64(a.buf + 8 * i), 1000 + 7 * i);
    }
    ck_assert_int_eq(write(sv[0], "d", 1), 1);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "responder process: status 0x%x", st);
    side_close(&a);
    close(sv[0]);
}
END_TEST

/* ---- scatter/gather lists ---------------------------------------------------------------- */
static void fill(uint8_t *p, size_t n, unsigned seed) { for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 7); }

static void post_ring_wait(struct side *a, const struct mlxd_entry *e)
{
    ck_assert_msg(mlxd_qp_post(a->qp[0], e) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_ring(a->qp[0]), 0);
    struct mlxd_completion wc = wait_one(a->cq);      /* RC: acknowledged, so it has landed */
    ck_assert_msg(wc.status == 0, "status %u syndrome 0x%x", wc.status, wc.syndrome);
    ck_assert_uint_eq(wc.wr_id, e->wr_id);
}

START_TEST(write_gathers_a_list)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_WRITE, 1);
    fill(a.buf, BUF, 3);
    struct mlxd_local l[3];
    ck_assert_int_eq(mlxd_region_slice(a.reg, 0, 100, &l[0]), 0);
    ck_assert_int_eq(mlxd_region_slice(a.reg, 500, 0, &l[1]), 0);     /* zero-length: skipped */
    ck_assert_int_eq(mlxd_region_slice(a.reg, 1000, 300, &l[2]), 0);
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    struct mlxd_entry e = { .wr_id = 1, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = 3,
                            .sgl = l, .remote = { rb.addr + 64, 0, rb.rkey, 0 } };
    post_ring_wait(&a, &e);
    ck_assert_mem_eq(b.buf + 64, a.buf, 100);
    ck_assert_mem_eq(b.buf + 164, a.buf + 1000, 300);
    ck_assert_uint_eq(b.buf[63], 0);
    ck_assert_uint_eq(b.buf[464], 0);
    side_close(&a);
    side_close(&b);
}
END_TEST

START_TEST(send_scatters_into_a_list)
{
    struct side a, b;
    pair(&a, &b, 0, 1);
    fill(a.buf, BUF, 11);
    struct mlxd_local rl[3];
    ck_assert_int_eq(mlxd_region_slice(b.reg, 0, 10, &rl[0]), 0);
    ck_assert_int_eq(mlxd_region_slice(b.reg, 100, 10, &rl[1]), 0);
    ck_assert_int_eq(mlxd_region_slice(b.reg, 200, 3000, &rl[2]), 0);
    struct mlxd_recv r = { .wr_id = 77, .num_local = 3, .local = rl };
    ck_assert_int_eq(mlxd_qp_receive(b.qp[0], &r, 1), 1);
    struct mlxd_local sl[4];
    ck_assert_int_eq(mlxd_region_slice(a.reg, 0, 200, &sl[0]), 0);
    ck_assert_int_eq(mlxd_region_slice(a.reg, 1000, 100, &sl[1]), 0);
    ck_assert_int_eq(mlxd_region_slice(a.reg, 2000, 150, &sl[2]), 0);
    ck_assert_int_eq(mlxd_region_slice(a.reg, 3000, 50, &sl[3]), 0);
    struct mlxd_entry e = { .wr_id = 2, .op = MLXD_OP_SEND, .flags = MLXD_SIGNALED, .num_local = 4,
                            .sgl = sl };
    post_ring_wait(&a, &e);
    struct mlxd_completion wc = wait_one(b.cq);
    ck_assert_uint_eq(wc.status, 0);
    ck_assert_uint_eq(wc.wr_id, 77);
    ck_assert_uint_eq(wc.byte_len, 500);
    uint8_t msg[500];                                  /* the gathered message */
    memcpy(msg, a.buf, 200);
    memcpy(msg + 200, a.buf + 1000, 100);
    memcpy(msg + 300, a.buf + 2000, 150);
    memcpy(msg + 450, a.buf + 3000, 50);
    ck_assert_mem_eq(b.buf, msg, 10);                  /* scattered over the receive's entries */
    ck_assert_mem_eq(b.buf + 100, msg + 10, 10);
    ck_assert_mem_eq(b.buf + 200, msg + 20, 480);
    ck_assert_uint_eq(b.buf[10], 0);
    ck_assert_uint_eq(b.buf[110], 0);
    ck_assert_uint_eq(b.buf[680], 0);
    side_close(&a);
    side_close(&b);
}
END_TEST

START_TEST(read_scatters_into_a_list)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_READ, 1);
    fill(b.buf, BUF, 29);
    struct mlxd_local l[2];
    ck_assert_int_eq(mlxd_region_slice(a.reg, 0, 100, &l[0]), 0);
    ck_assert_int_eq(mlxd_region_slice(a.reg, 2000, 1900, &l[1]), 0);
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    struct mlxd_entry e = { .wr_id = 3, .op = MLXD_OP_READ, .flags = MLXD_SIGNALED, .num_local = 2,
                            .sgl = l, .remote = { rb.addr + 8, 0, rb.rkey, 0 } };
    post_ring_wait(&a, &e);
    ck_assert_mem_eq(a.buf, b.buf + 8, 100);
    ck_assert_mem_eq(a.buf + 2000, b.buf + 108, 1900);
    ck_assert_uint_eq(a.buf[100], 0);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* Four-entry WQEs take two WQEBBs; 200 of them through a 32-deep ring wrap it many times, and
 * a WQE may start in the ring's last WQEBB. */
START_TEST(lists_wrap_the_ring)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_WRITE, 1);
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    for (unsigned i = 0; i < 200; i++) {
        fill(a.buf, 64, i);
        struct mlxd_local l[SGE];
        for (unsigned k = 0; k < SGE; k++)
            ck_assert_int_eq(mlxd_region_slice(a.reg, 16 * (SGE - 1 - k), 16, &l[k]), 0);
        struct mlxd_entry e = { .wr_id = i, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED,
                                .num_local = SGE, .sgl = l, .remote = { rb.addr, 0, rb.rkey, 0 } };
        post_ring_wait(&a, &e);
        for (unsigned k = 0; k < SGE; k++)            /* the 16-byte pieces in reverse order */
            ck_assert_mem_eq(b.buf + 16 * k, a.buf + 16 * (SGE - 1 - k), 16);
    }
    side_close(&a);
    side_close(&b);
}
END_TEST

START_TEST(list_misuse_is_refused)
{
    struct side a, b;
    pair(&a, &b, MLXD_ACCESS_REMOTE_WRITE, 1);
    struct mlxd_local l[SGE + 1];
    for (unsigned k = 0; k <= SGE; k++) ck_assert_int_eq(mlxd_region_slice(a.reg, 0, 8, &l[k]), 0);
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    struct mlxd_entry e = { .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = SGE + 1,
                            .sgl = l, .remote = { rb.addr, 0, rb.rkey, 0 } };
    ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), -EINVAL);     /* above max_send_sge */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "max_send_sge 4"));
    e.num_local = 2;
    e.sgl = NULL;
    ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), -EINVAL);     /* a list needs sgl */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "sgl NULL"));
    e.sgl = l;
    e.flags |= MLXD_INLINE;
    ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), -EINVAL);     /* inline takes one buffer */
    ck_assert_int_eq(mlxd_qp_send_room(a.qp[0]), 32);         /* nothing was written */
    struct mlxd_qp *qp;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 8, .max_send_sge = 100000 };
    ck_assert_int_eq(mlxd_qp_create(a.cq, &qo, &qp), -EINVAL); /* above the device's max_sge */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "max_send_sge 100000 exceeds the device's maximum"));
    side_close(&a);
    side_close(&b);
}
END_TEST

/* Zero-based regions (IOVA 0, as Holoscan Sensor Bridge registers its rings with
 * ibv_reg_mr_iova(pd, addr, len, 0, access)): b's second region is addressed from 0 by peers and
 * a's from 0 in its own work entries; the NIC translates IOVA - region IOVA + the pages' VA. */
static struct mlxd_region *zero_based(struct side *s, uint8_t *mem, uint32_t access)
{
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE | access,
                                   .iova = 0, .flags = MLXD_REGION_IOVA_EXACT };
    struct mlxd_region *r;
    ck_assert_msg(mlxd_region_register(s->nic, mem, BUF, &ro, &r) == 0, "%s", mlxd_errmsg());
    return r;
}

START_TEST(zero_based_regions)
{
    struct side a, b;
    pair(&a, &b, 0, 1);
    uint8_t *am = aligned_alloc(4096, BUF), *bm = aligned_alloc(4096, BUF);
    fill(am, BUF, 3);
    fill(bm, BUF, 101);
    struct mlxd_region *az = zero_based(&a, am, 0);
    struct mlxd_region *bz = zero_based(&b, bm, MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ |
                                                    MLXD_ACCESS_REMOTE_ATOMIC);
    struct mlxd_remote rb = mlxd_region_remote(bz);
    ck_assert_uint_eq(rb.addr, 0);
    ck_assert_uint_eq(rb.length, BUF);
    struct mlxd_local la;
    ck_assert_int_eq(mlxd_region_slice(az, 16, 100, &la), 0);
    ck_assert_uint_eq(la.addr, 16);
    /* WRITE 100 bytes from a's IOVA 16 to b's IOVA 1000 */
    struct mlxd_entry e = { .wr_id = 1, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = 1,
                            .local = la, .remote = { 1000, 0, rb.rkey, 0 } };
    post_ring_wait(&a, &e);
    ck_assert_mem_eq(bm + 1000, am + 16, 100);
    ck_assert_uint_eq(bm[999], (uint8_t)(101 + 999 * 7));
    ck_assert_uint_eq(bm[1100], (uint8_t)(101 + 1100 * 7));
    /* READ b's IOVA 3000..3099 into a's IOVA 200 */
    ck_assert_int_eq(mlxd_region_slice(az, 200, 100, &la), 0);
    e = (struct mlxd_entry){ .wr_id = 2, .op = MLXD_OP_READ, .flags = MLXD_SIGNALED, .num_local = 1,
                             .local = la, .remote = { 3000, 0, rb.rkey, 0 } };
    post_ring_wait(&a, &e);
    ck_assert_mem_eq(am + 200, bm + 3000, 100);
    /* fetch-and-add at b's IOVA 64 */
    wr64(bm + 64, 40);
    ck_assert_int_eq(mlxd_region_slice(az, 512, 8, &la), 0);
    e = (struct mlxd_entry){ .wr_id = 3, .op = MLXD_OP_FETCH_ADD, .flags = MLXD_SIGNALED, .num_local = 1,
                             .local = la, .remote = { 64, 0, rb.rkey, 0 }, .swap_add = 2 };
    post_ring_wait(&a, &e);
    ck_assert_uint_eq(rd64(am + 512), 40);
    ck_assert_uint_eq(rd64(bm + 64), 42);
    /* the region's VA is not its address: a WRITE there is outside it, remote access error */
    ck_assert_int_eq(mlxd_region_slice(az, 0, 8, &la), 0);
    e = (struct mlxd_entry){ .wr_id = 4, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = 1,
                             .local = la, .remote = { (uintptr_t)bm, 0, rb.rkey, 0 } };
    ck_assert_int_eq(mlxd_qp_post(a.qp[0], &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(a.qp[0]), 0);
    struct mlxd_completion wc = wait_one(a.cq);
    ck_assert_uint_eq(wc.wr_id, 4);
    ck_assert_uint_eq(wc.syndrome, 0x13);                     /* MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR */
    ck_assert_uint_eq(wc.status, 10);                         /* IBV_WC_REM_ACCESS_ERR */
    side_close(&a);
    side_close(&b);
    free(am);
    free(bm);
}
END_TEST

START_TEST(zero_based_misuse)
{
    struct side a;
    side_open(&a, "mlx5_0", 0, 0);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .iova = 0, .flags = MLXD_REGION_IOVA_EXACT };
    struct mlxd_region *r = NULL;
    /* iova 0 needs the first byte on a page boundary (the kernel's in-page offset rule) */
    ck_assert_int_eq(mlxd_region_register(a.nic, a.buf + 8, 64, &ro, &r), -EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "different offsets in their page"));
    ro.flags = 2;
    ck_assert_int_eq(mlxd_region_register(a.nic, a.buf, 64, &ro, &r), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "unknown flags 0x2"));
    /* without the flag, iova 0 keeps meaning "the VA" */
    ro.flags = 0;
    ck_assert_int_eq(mlxd_region_register(a.nic, a.buf + 8, 64, &ro, &r), 0);
    ck_assert_uint_eq(mlxd_region_remote(r).addr, (uintptr_t)(a.buf + 8));
    side_close(&a);
}
END_TEST

Suite *verbs_suite(void)
{
    Suite *s = suite_create("verbs");
    TCase *tc = tcase_create("rc");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, mlxd_test_emu_two_devices, NULL);
    tcase_add_test(tc, fetch_add_and_compare_swap);
    tcase_add_test(tc, misaligned_is_remote_invalid_request);
    tcase_add_test(tc, region_without_remote_atomic_is_access_error);
    tcase_add_test(tc, concurrent_fetch_adds_are_atomic);
    tcase_add_test(tc, malformed_atomics_are_refused);
    tcase_add_test(tc, two_processes);
    suite_add_tcase(s, tc);

    TCase *sg = tcase_create("sge");
    tcase_set_timeout(sg, 60);
    tcase_add_checked_fixture(sg, mlxd_test_emu_two_devices, NULL);
    tcase_add_test(sg, write_gathers_a_list);
    tcase_add_test(sg, send_scatters_into_a_list);
    tcase_add_test(sg, read_scatters_into_a_list);
    tcase_add_test(sg, lists_wrap_the_ring);
    tcase_add_test(sg, list_misuse_is_refused);
    suite_add_tcase(s, sg);

    TCase *zb = tcase_create("zero_based");
    tcase_set_timeout(zb, 60);
    tcase_add_checked_fixture(zb, mlxd_test_emu_two_devices, NULL);
    tcase_add_test(zb, zero_based_regions);
    tcase_add_test(zb, zero_based_misuse);
    suite_add_tcase(s, zb);
    return s;
}
