/* mw: memory windows through our driver on the emulated NIC (issue 20 item 5).
 * mlx5_0 ("a") owns the memory: a region registered with LOCAL_WRITE | MW_BIND only, so a peer
 * reaches it solely through a window; mlx5_1 ("b") writes and reads through the window's rkey.
 * Expected values come from the specifications, not from what the code prints:
 *   - IB spec vol. 1 10.6.7: a bound window grants its own rights on its own range; each bind
 *     gives a new rkey (libibverbs ibv_inc_rkey: the key byte + 1), the old one stops working;
 *     a zero-length bind unbinds a type 1 window; a type 2 window is bound to one QP, usable only
 *     through it, unbound by a local invalidation or a peer's SEND with Invalidate (9.4.1.1.3);
 *   - a peer access the window does not allow: the responder NAKs with remote access error,
 *     the requester completes with syndrome 0x13 MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR,
 *     IBV_WC_REM_ACCESS_ERR (10), and the responder's QP raises IB_EVENT_QP_ACCESS_ERR;
 *   - a bind the NIC refuses completes with syndrome 0x06 MLX5_CQE_SYNDROME_MW_BIND_ERR,
 *     IBV_WC_MW_BIND_ERR (6), the QP to ERR;
 *   - completions: IBV_WC_BIND_MW (5), IBV_WC_LOCAL_INV (6); a SEND with Invalidate lands as
 *     IBV_WC_RECV with IBV_WC_WITH_INV and the invalidated rkey (rdma-core providers/mlx5/cq.c). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "driver.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
#include "util.h"

#define BUF (64 * 1024)
#define WIN_OFF 4096u
#define WIN_LEN 8192u

struct side {
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_region *reg;
    unsigned char *buf;
};

struct pair { struct mlxd_qp *a, *b; };

static void side_open(struct side *s, const char *dev, uint32_t access)
{
    memset(s, 0, sizeof *s);
    ck_assert_msg(mlxd_open(dev, NULL, &s->nic) == 0, "open %s: %s", dev, mlxd_errmsg());
    s->buf = aligned_alloc(4096, BUF);
    memset(s->buf, 0, BUF);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = access };
    ck_assert_msg(mlxd_region_register(s->nic, s->buf, BUF, &ro, &s->reg) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_cq_create(s->nic, 64, NULL, &s->cq), 0);
}

static void side_close(struct side *s)
{
    ck_assert_msg(mlxd_close(s->nic) == 0, "%s", mlxd_errmsg());
    free(s->buf);
}

/* A connected RC pair: a's QP lets its peer write and read (the window still decides). */
static struct pair connect_pair(struct side *a, struct side *b)
{
    struct pair p;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 16, .recv_depth = 4 };
    ck_assert_int_eq(mlxd_qp_create(a->cq, &qo, &p.a), 0);
    ck_assert_int_eq(mlxd_qp_create(b->cq, &qo, &p.b), 0);
    struct mlxd_endpoint ea, eb;
    ck_assert_int_eq(mlxd_qp_endpoint(p.a, &ea), 0);
    ck_assert_int_eq(mlxd_qp_endpoint(p.b, &eb), 0);
    struct mlxd_connect_opts co = { .sz = sizeof co,
                                    .peer_access = MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ };
    ck_assert_msg(mlxd_qp_connect(p.a, &eb, &co) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_qp_connect(p.b, &ea, &co) == 0, "%s", mlxd_errmsg());
    return p;
}

static struct mlxd_completion wait_one(struct mlxd_cq *cq)
{
    struct mlxd_completion wc;
    mlxd_test_wait_one(cq, 10, &wc);
    return wc;
}

/* b writes (or reads) len bytes at window offset off through rkey; returns b's completion. */
static struct mlxd_completion access_(struct side *a, struct side *b, struct mlxd_qp *qp, uint32_t op,
                                      uint32_t rkey, uint64_t off, uint32_t len)
{
    struct mlxd_local l = mlxd_region_local(b->reg);
    l.addr += op == MLXD_OP_READ ? 32768 : 0;
    l.length = len;
    struct mlxd_entry e = { .wr_id = 77, .op = op, .flags = MLXD_SIGNALED, .num_local = 1, .local = l,
                            .remote = { .addr = (uintptr_t)a->buf + WIN_OFF + off, .rkey = rkey } };
    ck_assert_msg(mlxd_qp_post(qp, &e) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_ring(qp), 0);
    return wait_one(b->cq);
}

/* A remote access error at b (0x13, IBV_WC_REM_ACCESS_ERR), the QP-access event at a. */
static void expect_access_error(struct side *a, struct mlxd_completion wc)
{
    ck_assert_msg(wc.status == MLXD_WC_REM_ACCESS_ERR && wc.syndrome == 0x13, "status %u syndrome 0x%x",
                  wc.status, wc.syndrome);
    struct mlxd_event ev[2];
    ck_assert_int_eq(mlxd_wait(a->nic, 5000, ev, 2), 1);
    ck_assert_uint_eq(ev[0].kind, MLXD_EVENT_QP_ACCESS_ERROR);
}

static struct mlxd_mw_bind win(struct mlxd_mw *mw, struct side *a, uint32_t access)
{
    return (struct mlxd_mw_bind){ .mw = mw, .region = a->reg, .addr = (uintptr_t)a->buf + WIN_OFF,
                                  .length = WIN_LEN, .access = access };
}

static void bind_ok(struct side *a, struct mlxd_qp *qp, const struct mlxd_mw_bind *b, uint64_t wr_id)
{
    ck_assert_msg(mlxd_mw_bind(qp, b, wr_id) == 0, "%s", mlxd_errmsg());
    struct mlxd_completion wc = wait_one(a->cq);
    ck_assert_msg(wc.status == 0, "bind: status %u syndrome 0x%x", wc.status, wc.syndrome);
    ck_assert_uint_eq(wc.wr_id, wr_id);
    ck_assert_uint_eq(wc.opcode, MLXD_WC_BIND_MW);
}

/* a posts nrecv receives (wr_id 40, then 42) of 256 bytes at a.buf + 32768; b sends 100 bytes
 * with Invalidate of rkey (wr_id 41) and rings. */
static void send_inv(struct side *a, struct side *b, const struct pair *p, uint32_t rkey, unsigned nrecv)
{
    struct mlxd_local rl = mlxd_region_local(a->reg);
    rl.addr += 32768;
    rl.length = 256;
    struct mlxd_recv rv[2] = { { .wr_id = 40, .num_local = 1, .local = &rl },
                               { .wr_id = 42, .num_local = 1, .local = &rl } };
    ck_assert_int_eq(mlxd_qp_receive(p->a, rv, nrecv), (int)nrecv);
    struct mlxd_local l = mlxd_region_local(b->reg);
    l.length = 100;
    struct mlxd_entry e = { .wr_id = 41, .op = MLXD_OP_SEND_INV, .flags = MLXD_SIGNALED, .num_local = 1,
                            .local = l, .invalidate_rkey = rkey };
    ck_assert_int_eq(mlxd_qp_post(p->b, &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(p->b), 0);
}

static void setup(struct side *a, struct side *b)
{
    side_open(a, "mlx5_0", MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_MW_BIND);
    side_open(b, "mlx5_1", MLXD_ACCESS_LOCAL_WRITE);
    for (unsigned i = 0; i < BUF; i++) b->buf[i] = (unsigned char)(i * 7 + 1);
}

/* Type 1: the region's own rkey grants nothing remote; through a bound window b writes and
 * reads; the window's rkey changed with the bind; after a zero-length bind (unbind) the same
 * rkey fails with a remote access error and nothing is written. */
START_TEST(type1_bind_write_read_unbind)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b);
    struct mlxd_mw *mw;
    ck_assert_msg(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &mw) == 0, "%s", mlxd_errmsg());
    uint32_t rkey0 = mlxd_mw_rkey(mw);
    struct mlxd_mw_bind bd = win(mw, &a, MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ);
    bind_ok(&a, p.a, &bd, 11);
    uint32_t rkey = mlxd_mw_rkey(mw);
    ck_assert_uint_eq(rkey >> 8, rkey0 >> 8);                       /* same window (mkey index) */
    ck_assert_uint_eq(rkey & 0xff, (rkey0 + 1) & 0xff);             /* ibv_inc_rkey */
    struct mlxd_completion wc = access_(&a, &b, p.b, MLXD_OP_WRITE, rkey, 100, 1000);
    ck_assert_msg(wc.status == 0, "write: status %u syndrome 0x%x", wc.status, wc.syndrome);
    ck_assert_mem_eq(a.buf + WIN_OFF + 100, b.buf, 1000);
    wc = access_(&a, &b, p.b, MLXD_OP_READ, rkey, WIN_LEN - 500, 500);       /* its last bytes */
    ck_assert_uint_eq(wc.status, 0);
    ck_assert_uint_eq(wc.byte_len, 500);
    ck_assert_mem_eq(b.buf + 32768, a.buf + WIN_OFF + WIN_LEN - 500, 500);
    /* unbind: a zero-length bind */
    struct mlxd_mw_bind un = { .mw = mw };
    bind_ok(&a, p.a, &un, 12);
    ck_assert_uint_ne(mlxd_mw_rkey(mw), rkey);
    unsigned char before[64];
    memcpy(before, a.buf + WIN_OFF, 64);
    expect_access_error(&a, access_(&a, &b, p.b, MLXD_OP_WRITE, rkey, 0, 64));
    ck_assert_mem_eq(a.buf + WIN_OFF, before, 64);
    struct mlxd_emu_counts c = { .sz = sizeof c };
    ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
    ck_assert_uint_eq(c.mw, 1);
    ck_assert_int_eq(mlxd_mw_free(mw), 0);
    ck_assert_int_eq(mlxd_mw_free(mw), 0);                          /* the first call's result */
    side_close(&a);
    side_close(&b);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* A rebind moves a type 1 window and changes its rkey: the previous rkey fails. */
START_TEST(type1_rebind_old_rkey_fails)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b);
    struct mlxd_mw *mw;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &mw), 0);
    struct mlxd_mw_bind bd = win(mw, &a, MLXD_ACCESS_REMOTE_WRITE);
    bind_ok(&a, p.a, &bd, 1);
    uint32_t old = mlxd_mw_rkey(mw);
    bind_ok(&a, p.a, &bd, 2);
    uint32_t now = mlxd_mw_rkey(mw);
    ck_assert_uint_eq(now, (old & ~0xffu) | ((old + 1) & 0xff));
    ck_assert_uint_eq(access_(&a, &b, p.b, MLXD_OP_WRITE, now, 0, 16).status, 0);
    expect_access_error(&a, access_(&a, &b, p.b, MLXD_OP_WRITE, old, 0, 16));
    side_close(&a);
    side_close(&b);
}
END_TEST

/* Rights and range: a window granting READ only refuses a WRITE; one byte past its end is out of
 * range (both: remote access error, nothing written). */
START_TEST(wrong_access_and_out_of_range)
{
    struct side a, b;
    setup(&a, &b);
    struct mlxd_mw *mw;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &mw), 0);
    struct pair p = connect_pair(&a, &b);
    struct mlxd_mw_bind bd = win(mw, &a, MLXD_ACCESS_REMOTE_READ);
    bind_ok(&a, p.a, &bd, 1);
    ck_assert_uint_eq(access_(&a, &b, p.b, MLXD_OP_READ, mlxd_mw_rkey(mw), 0, 64).status, 0);
    expect_access_error(&a, access_(&a, &b, p.b, MLXD_OP_WRITE, mlxd_mw_rkey(mw), 0, 64));
    for (unsigned i = 0; i < 64; i++) ck_assert_uint_eq(a.buf[WIN_OFF + i], 0);
    p = connect_pair(&a, &b);                                       /* the first pair is in ERR */
    expect_access_error(&a, access_(&a, &b, p.b, MLXD_OP_READ, mlxd_mw_rkey(mw), WIN_LEN - 63, 64));
    p = connect_pair(&a, &b);
    expect_access_error(&a, access_(&a, &b, p.b, MLXD_OP_READ, mlxd_mw_rkey(mw), (uint64_t)-1, 2));
    side_close(&a);
    side_close(&b);
}
END_TEST

/* Type 2: bound to the QP that posted the bind (an entry, as ibv_post_send's IBV_WR_BIND_MW);
 * usable through that QP only; a local invalidation (IBV_WC_LOCAL_INV) unbinds it; binding it
 * again needs it free, and gives a new rkey. */
START_TEST(type2_bind_other_qp_local_inv)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b), q = connect_pair(&a, &b);
    struct mlxd_mw *mw;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_2, &mw), 0);
    struct mlxd_mw_bind bd = win(mw, &a, MLXD_ACCESS_REMOTE_WRITE);
    struct mlxd_entry e = { .wr_id = 5, .op = MLXD_OP_BIND_MW, .flags = MLXD_SIGNALED, .bind = &bd };
    ck_assert_int_eq(mlxd_qp_post(p.a, &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(p.a), 0);
    struct mlxd_completion wc = wait_one(a.cq);
    ck_assert_msg(wc.status == 0 && wc.opcode == MLXD_WC_BIND_MW, "status %u opcode %u", wc.status, wc.opcode);
    uint32_t rkey = mlxd_mw_rkey(mw);
    ck_assert_uint_eq(access_(&a, &b, p.b, MLXD_OP_WRITE, rkey, 0, 32).status, 0);
    ck_assert_mem_eq(a.buf + WIN_OFF, b.buf, 32);
    expect_access_error(&a, access_(&a, &b, q.b, MLXD_OP_WRITE, rkey, 64, 32));   /* another QP */
    struct mlxd_entry inv = { .wr_id = 6, .op = MLXD_OP_LOCAL_INV, .flags = MLXD_SIGNALED, .invalidate_rkey = rkey };
    ck_assert_int_eq(mlxd_qp_post(p.a, &inv), 0);
    ck_assert_int_eq(mlxd_qp_ring(p.a), 0);
    wc = wait_one(a.cq);
    ck_assert_msg(wc.status == 0 && wc.opcode == MLXD_WC_LOCAL_INV && wc.wr_id == 6, "status %u opcode %u",
                  wc.status, wc.opcode);
    expect_access_error(&a, access_(&a, &b, p.b, MLXD_OP_WRITE, rkey, 0, 32));
    /* bound again (through a fresh QP): free again, so allowed; a new rkey */
    struct pair r = connect_pair(&a, &b);
    bind_ok(&a, r.a, &bd, 7);
    ck_assert_uint_ne(mlxd_mw_rkey(mw), rkey);
    ck_assert_uint_eq(access_(&a, &b, r.b, MLXD_OP_WRITE, mlxd_mw_rkey(mw), 0, 8).status, 0);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* A peer's SEND with Invalidate: the receive completes with IBV_WC_WITH_INV and the rkey; the
 * window is unbound (a WRITE with that rkey then fails). */
START_TEST(type2_remote_invalidate)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b);
    struct mlxd_mw *mw;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_2, &mw), 0);
    struct mlxd_mw_bind bd = win(mw, &a, MLXD_ACCESS_REMOTE_WRITE);
    bind_ok(&a, p.a, &bd, 1);
    uint32_t rkey = mlxd_mw_rkey(mw);
    send_inv(&a, &b, &p, rkey, 1);
    struct mlxd_completion s = wait_one(b.cq), r = wait_one(a.cq);
    ck_assert_msg(s.status == 0 && s.opcode == MLXD_WC_SEND, "send: status %u opcode %u", s.status, s.opcode);
    ck_assert_msg(r.status == 0 && r.wr_id == 40 && r.opcode == MLXD_WC_RECV, "recv: status %u", r.status);
    ck_assert_uint_eq(r.byte_len, 100);
    ck_assert_uint_eq(r.flags & (MLXD_WC_WITH_INV | MLXD_WC_WITH_IMM), MLXD_WC_WITH_INV);
    ck_assert_uint_eq(r.imm, rkey);
    ck_assert_mem_eq(a.buf + 32768, b.buf, 100);
    expect_access_error(&a, access_(&a, &b, p.b, MLXD_OP_WRITE, rkey, 0, 8));
    side_close(&a);
    side_close(&b);
}
END_TEST

/* The entry after a bind carries the initiator small fence (1<<5) unless it asks for a fence
 * mode itself: a FENCE entry keeps FENCE (4<<5), fm is one 3-bit value and 5 names none
 * (mlx5dv.h MLX5_WQE_CTRL_FENCE / MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE).  A WQE whose fm is 5 is
 * refused by the NIC: syndrome 0x02 MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR. */
START_TEST(fence_after_bind)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b);
    struct mlxd_mw *mw;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &mw), 0);
    struct mlxd_mw_bind bd = win(mw, &a, MLXD_ACCESS_REMOTE_WRITE);
    bind_ok(&a, p.a, &bd, 1);
    uint32_t pi = p.a->sq_pi & (p.a->sq_wqebbs - 1);
    struct mlxd_entry e = { .wr_id = 2, .op = MLXD_OP_NOP, .flags = MLXD_SIGNALED | MLXD_FENCE };
    ck_assert_int_eq(mlxd_qp_post(p.a, &e), 0);
    ck_assert_uint_eq(p.a->sq[(size_t)pi * 64 + 11], 0x80 | 0x08);      /* FENCE | CQ_UPDATE */
    ck_assert_int_eq(mlxd_qp_ring(p.a), 0);
    struct mlxd_completion wc = wait_one(a.cq);
    ck_assert_msg(wc.status == 0 && wc.wr_id == 2, "status %u syndrome 0x%x", wc.status, wc.syndrome);
    /* without FENCE the small fence goes in */
    bind_ok(&a, p.a, &bd, 3);
    pi = p.a->sq_pi & (p.a->sq_wqebbs - 1);
    e.wr_id = 4;
    e.flags = MLXD_SIGNALED;
    ck_assert_int_eq(mlxd_qp_post(p.a, &e), 0);
    ck_assert_uint_eq(p.a->sq[(size_t)pi * 64 + 11], 0x20 | 0x08);
    ck_assert_int_eq(mlxd_qp_ring(p.a), 0);
    wc = wait_one(a.cq);
    ck_assert_msg(wc.status == 0 && wc.wr_id == 4, "status %u syndrome 0x%x", wc.status, wc.syndrome);
    /* fm 5 written into the ring (what ORing the two gave): the NIC refuses the WQE */
    pi = p.a->sq_pi & (p.a->sq_wqebbs - 1);
    e.wr_id = 5;
    ck_assert_int_eq(mlxd_qp_post(p.a, &e), 0);
    p.a->sq[(size_t)pi * 64 + 11] = 0xa0 | 0x08;
    ck_assert_int_eq(mlxd_qp_ring(p.a), 0);
    wc = wait_one(a.cq);
    ck_assert_msg(wc.wr_id == 5 && wc.status == MLXD_WC_LOC_QP_OP_ERR && wc.syndrome == 0x02,
                  "status %u syndrome 0x%x", wc.status, wc.syndrome);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* A SEND with Invalidate whose R_Key names no window bound to the QP (here the region's own
 * rkey): the responder's class J error.  The receive the message took completes with its cause,
 * syndrome 0x12 MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, IBV_WC_REM_INV_REQ_ERR (Linux rxe
 * RESPST_ERR_INVALIDATE_RKEY: the same status), not as a flush; the requester gets NAK Invalid
 * Request (0x12 on its side too) and the responder's QP raises IB_EVENT_QP_REQ_ERR. */
START_TEST(send_inv_refused)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b);
    send_inv(&a, &b, &p, mlxd_region_local(a.reg).lkey, 2);
    struct mlxd_completion s = wait_one(b.cq), r = wait_one(a.cq);
    ck_assert_msg(s.wr_id == 41 && s.status == MLXD_WC_REM_INV_REQ_ERR && s.syndrome == 0x12,
                  "send: status %u syndrome 0x%x", s.status, s.syndrome);
    ck_assert_msg(r.wr_id == 40 && r.status == MLXD_WC_REM_INV_REQ_ERR && r.syndrome == 0x12,
                  "recv: wr_id %llu status %u syndrome 0x%x", (unsigned long long)r.wr_id, r.status, r.syndrome);
    r = wait_one(a.cq);                                                  /* the other one flushed */
    ck_assert_msg(r.wr_id == 42 && r.status == MLXD_WC_WR_FLUSH_ERR, "status %u", r.status);
    struct mlxd_event ev[2];
    ck_assert_int_eq(mlxd_wait(a.nic, 5000, ev, 2), 1);
    ck_assert_uint_eq(ev[0].kind, MLXD_EVENT_QP_REQ_ERROR);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* A window outlives its region: a's region R is deregistered and a later region X takes R's
 * mkey slot with the same tag byte, so X's key equals R's (keys are slot << 8 | an 8-bit tag
 * that moves on per allocation, slots taken next-fit; k: hw/mlx5/mr.c, the key byte).  The
 * window still names R: an access through it is a remote access error (0x13), X (other memory
 * registered at R's IOVA) untouched.  The reuse is forced: 255 spare regions sit in the slots
 * just before R's; once the free-slot cursor has come round to them, as many spares are freed
 * as make the tag right at R's slot. */
START_TEST(window_region_reused)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b);
    enum { SPARES = 255 };
    static unsigned char small[4096] __attribute__((aligned(4096)));
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_MW_BIND };
    struct mlxd_region *pilot, *spare[SPARES], *r, *x = NULL;
    ck_assert_int_eq(mlxd_region_register(a.nic, small, sizeof small, &ro, &pilot), 0);
    uint32_t pilot_slot = mlxd_region_local(pilot).lkey >> 8;
    ck_assert_int_eq(mlxd_region_deregister(pilot), 0);
    for (unsigned i = 0; i < SPARES; i++)
        ck_assert_int_eq(mlxd_region_register(a.nic, small, sizeof small, &ro, &spare[i]), 0);
    unsigned char *rbuf = aligned_alloc(4096, BUF), *xbuf = aligned_alloc(4096, BUF);
    memset(rbuf, 0, BUF);
    memset(xbuf, 0x5a, BUF);
    ck_assert_int_eq(mlxd_region_register(a.nic, rbuf, BUF, &ro, &r), 0);
    uint32_t rkey_r = mlxd_region_local(r).lkey, slot = rkey_r >> 8;
    ck_assert_uint_eq(mlxd_region_local(spare[0]).lkey >> 8, pilot_slot + 1);   /* contiguous */
    ck_assert_uint_eq(slot, pilot_slot + 1 + SPARES);
    struct mlxd_mw *mw;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &mw), 0);
    struct mlxd_mw_bind bd = { .mw = mw, .region = r, .addr = (uintptr_t)rbuf + WIN_OFF, .length = WIN_LEN,
                               .access = MLXD_ACCESS_REMOTE_WRITE };
    bind_ok(&a, p.a, &bd, 1);
    uint32_t wkey = mlxd_mw_rkey(mw);
    ck_assert_int_eq(mlxd_region_deregister(r), 0);
    /* X: other memory at R's IOVA, so that R's key alone would translate into it */
    struct mlxd_region_opts xo = ro;
    xo.iova = (uintptr_t)rbuf;
    unsigned freed = 0;
    for (unsigned n = 0; n < 200000 && !x; n++) {
        struct mlxd_region *t;
        ck_assert_int_eq(mlxd_region_register(a.nic, xbuf, BUF, &xo, &t), 0);
        uint32_t k = mlxd_region_local(t).lkey;
        if (k >> 8 == slot) { x = t; break; }
        ck_assert_int_eq(mlxd_region_deregister(t), 0);
        if (k >> 8 == pilot_slot) {   /* next: the spares' slots (as freed), then R's */
            freed = (uint8_t)(rkey_r - k - 1);
            for (unsigned i = 0; i < freed; i++) ck_assert_int_eq(mlxd_region_deregister(spare[i]), 0);
        }
    }
    ck_assert_msg(x, "R's slot was not taken again");
    ck_assert_uint_eq(mlxd_region_local(x).lkey, rkey_r);                /* the same key */
    struct mlxd_local l = mlxd_region_local(b.reg);
    l.length = 64;
    struct mlxd_entry e = { .wr_id = 77, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = 1, .local = l,
                            .remote = { .addr = (uintptr_t)rbuf + WIN_OFF, .rkey = wkey } };
    ck_assert_int_eq(mlxd_qp_post(p.b, &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(p.b), 0);
    expect_access_error(&a, wait_one(b.cq));
    for (unsigned i = 0; i < BUF; i++) ck_assert_uint_eq(xbuf[i], 0x5a);
    ck_assert_uint_le(freed, SPARES);
    side_close(&a);
    side_close(&b);
    free(rbuf);
    free(xbuf);
}
END_TEST

/* Binds the NIC refuses: syndrome 0x06, IBV_WC_MW_BIND_ERR, the QP to ERR (the entry after it
 * flushed): a region without MW_BIND, a range past the region, a type 2 window bound twice. */
START_TEST(bind_errors)
{
    struct side a, b;
    setup(&a, &b);
    struct mlxd_region *plain;
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE };
    ck_assert_int_eq(mlxd_region_register(a.nic, a.buf, 4096, &ro, &plain), 0);
    struct mlxd_mw *m1, *m2;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &m1), 0);
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_2, &m2), 0);
    struct mlxd_mw_bind no_bind = { .mw = m1, .region = plain, .addr = (uintptr_t)a.buf, .length = 64,
                                    .access = MLXD_ACCESS_REMOTE_READ };
    struct mlxd_mw_bind past = win(m1, &a, MLXD_ACCESS_REMOTE_READ);
    past.length = BUF;                                              /* WIN_OFF + BUF > the region */
    struct mlxd_mw_bind twice = win(m2, &a, MLXD_ACCESS_REMOTE_READ);
    const struct mlxd_mw_bind *bad[] = { &no_bind, &past, &twice };
    for (unsigned i = 0; i < 3; i++) {
        struct pair p = connect_pair(&a, &b);
        if (i == 2) bind_ok(&a, p.a, &twice, 1);
        ck_assert_int_eq(mlxd_mw_bind(p.a, bad[i], 2), 0);
        struct mlxd_entry nop = { .wr_id = 3, .op = MLXD_OP_NOP, .flags = MLXD_SIGNALED };
        ck_assert_int_eq(mlxd_qp_post(p.a, &nop), 0);
        ck_assert_int_eq(mlxd_qp_ring(p.a), 0);
        struct mlxd_completion wc = wait_one(a.cq);
        ck_assert_msg(wc.wr_id == 2 && wc.status == MLXD_WC_MW_BIND_ERR && wc.syndrome == 0x06,
                      "case %u: wr_id %llu status %u syndrome 0x%x", i, (unsigned long long)wc.wr_id, wc.status,
                      wc.syndrome);
        wc = wait_one(a.cq);
        ck_assert_uint_eq(wc.wr_id, 3);
        ck_assert_uint_eq(wc.status, MLXD_WC_WR_FLUSH_ERR);
    }
    side_close(&a);
    side_close(&b);
}
END_TEST

/* Misuse: -EINVAL (-EOPNOTSUPP for a window over 2 GiB, as libmlx5), nothing posted. */
START_TEST(misuse_is_refused)
{
    struct side a, b;
    setup(&a, &b);
    struct pair p = connect_pair(&a, &b);
    struct mlxd_mw *m1, *m2, *x = NULL;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, 3, &x), -EINVAL);
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, 0, &x), -EINVAL);
    ck_assert_int_eq(mlxd_mw_alloc(NULL, 1, &x), -EINVAL);
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, 1, NULL), -EINVAL);
    ck_assert_ptr_null(x);
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &m1), 0);
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_2, &m2), 0);
    int room = mlxd_qp_send_room(p.a);
    struct mlxd_mw_bind zb = win(m1, &a, MLXD_ACCESS_REMOTE_READ);
    zb.flags = MLXD_MW_ZERO_BASED;
    ck_assert_int_eq(mlxd_mw_bind(p.a, &zb, 1), -EINVAL);           /* type 1 zero-based */
    struct mlxd_mw_bind big = win(m2, &a, MLXD_ACCESS_REMOTE_READ);
    big.length = (1ull << 31) + 1;
    ck_assert_int_eq(mlxd_mw_bind(p.a, &big, 1), -EOPNOTSUPP);
    struct mlxd_mw_bind un2 = { .mw = m2 };
    ck_assert_int_eq(mlxd_mw_bind(p.a, &un2, 1), -EINVAL);          /* type 2: LOCAL_INV */
    struct mlxd_mw_bind acc = win(m1, &a, MLXD_ACCESS_LOCAL_WRITE);
    ck_assert_int_eq(mlxd_mw_bind(p.a, &acc, 1), -EINVAL);
    ck_assert_int_eq(mlxd_mw_bind(p.a, NULL, 1), -EINVAL);
    struct mlxd_mw_bind foreign = win(m1, &b, MLXD_ACCESS_REMOTE_READ);  /* b's region */
    ck_assert_int_eq(mlxd_mw_bind(p.a, &foreign, 1), -EINVAL);
    struct mlxd_qp *uc, *ud;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UC, .send_depth = 4 };
    ck_assert_int_eq(mlxd_qp_create(a.cq, &qo, &uc), 0);
    struct mlxd_entry si = { .op = MLXD_OP_SEND_INV, .invalidate_rkey = 1 };
    ck_assert_int_eq(mlxd_qp_post(uc, &si), -EINVAL);               /* SEND_INV is RC only */
    qo.type = MLXD_QP_UD;
    ck_assert_int_eq(mlxd_qp_create(a.cq, &qo, &ud), 0);
    struct mlxd_mw_bind ok = win(m1, &a, MLXD_ACCESS_REMOTE_READ);
    ck_assert_int_eq(mlxd_mw_bind(ud, &ok, 1), -EINVAL);
    ck_assert_int_eq(mlxd_qp_send_room(p.a), room);
    ck_assert_uint_eq(mlxd_mw_type(m2), MLXD_MW_TYPE_2);
    ck_assert_int_eq(mlxd_mw_free(m2), 0);
    ck_assert_int_eq(mlxd_mw_bind(p.a, &big, 1), -EINVAL);          /* freed window */
    ck_assert_int_eq(mlxd_mw_free(NULL), -EINVAL);
    side_close(&a);
    side_close(&b);
    ck_assert_int_eq(mlxd_mw_free(m1), -EINVAL);                    /* its NIC is closed */
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* Fault injection at each new kernel call: the call returns -errno naming the refused call,
 * nothing is left half made, and after closing nothing at all. */
START_TEST(faults_leave_nothing)
{
    static const char *const names[] = { "ALLOC_MW", "MW_DESTROY" };
    static const int errs[] = { EINVAL, ENOMEM, EFAULT, EIO };
    for (unsigned m = 0; m < 2; m++)
        for (unsigned k = 0; k < 4; k++) {
            struct mlxd_nic *nic;
            ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
            struct mlxd_mw *mw = NULL;
            int rc;
            ck_assert_int_eq(mlxd_emu_fail_method(names[m], 1, errs[k]), 0);
            if (m == 0) rc = mlxd_mw_alloc(nic, MLXD_MW_TYPE_2, &mw);
            else {
                ck_assert_int_eq(mlxd_mw_alloc(nic, MLXD_MW_TYPE_2, &mw), 0);
                rc = mlxd_mw_free(mw);
            }
            mlxd_emu_fail_clear();
            ck_assert_msg(rc == -errs[k], "%s %d: %d", names[m], errs[k], rc);
            ck_assert_msg(strstr(mlxd_errmsg(), names[m]) && strstr(mlxd_errmsg(), strerror(errs[k])),
                          "%s: \"%s\"", names[m], mlxd_errmsg());
            struct mlxd_emu_counts c = { .sz = sizeof c };
            ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
            ck_assert_uint_eq(c.mw, m == 0 ? 0 : 1);
            if (m == 0) ck_assert_ptr_null(mw);
            else ck_assert_int_eq(mlxd_mw_free(mw), -errs[k]);      /* the first call's result */
            ck_assert_int_eq(mlxd_close(nic), 0);    /* a refused destroy was reported by it */
            ck_assert_uint_eq(mlxd_emu_live_total(), 0);
        }
}
END_TEST

struct xchg { struct mlxd_endpoint ep; uint64_t addr; uint32_t rkey; };

/* Two processes over the emulated wire: the parent (mlx5_0) binds a type 1 window and sends its
 * address and rkey; the child (mlx5_1) writes through it and reads it back; the parent unbinds;
 * the child's next write fails with 0x13. */
START_TEST(two_processes)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        struct side b;
        side_open(&b, "mlx5_1", MLXD_ACCESS_LOCAL_WRITE);
        for (unsigned i = 0; i < 4096; i++) b.buf[i] = (unsigned char)(i * 3 + 5);
        struct mlxd_qp *qp;
        struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 8, .recv_depth = 1 };
        ck_assert_int_eq(mlxd_qp_create(b.cq, &qo, &qp), 0);
        struct mlxd_endpoint me;
        ck_assert_int_eq(mlxd_qp_endpoint(qp, &me), 0);
        struct xchg mine = { .ep = me }, peer;
        ck_assert_int_eq(write(sv[1], &mine, sizeof mine), sizeof mine);
        ck_assert_int_eq(read(sv[1], &peer, sizeof peer), sizeof peer);
        struct mlxd_connect_opts co = { .sz = sizeof co };
        ck_assert_int_eq(mlxd_qp_connect(qp, &peer.ep, &co), 0);
        ck_assert_int_eq(write(sv[1], "c", 1), 1);
        char go;
        ck_assert_int_eq(read(sv[1], &go, 1), 1);                    /* bound */
        struct mlxd_local l = mlxd_region_local(b.reg);
        l.length = 3000;
        struct mlxd_entry w = { .wr_id = 1, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = 1, .local = l,
                                .remote = { .addr = peer.addr, .rkey = peer.rkey } };
        l.addr += 8192;
        struct mlxd_entry r = { .wr_id = 2, .op = MLXD_OP_READ, .flags = MLXD_SIGNALED, .num_local = 1, .local = l,
                                .remote = { .addr = peer.addr, .rkey = peer.rkey } };
        int ok = !mlxd_qp_post(qp, &w) && !mlxd_qp_post(qp, &r) && !mlxd_qp_ring(qp);
        struct mlxd_completion c1 = wait_one(b.cq), c2 = wait_one(b.cq);
        ok = ok && c1.status == 0 && c2.status == 0 && !memcmp(b.buf + 8192, b.buf, 3000);
        ck_assert_int_eq(write(sv[1], "w", 1), 1);
        ck_assert_int_eq(read(sv[1], &go, 1), 1);                    /* unbound */
        w.wr_id = 3;
        ok = ok && !mlxd_qp_post(qp, &w) && !mlxd_qp_ring(qp);
        struct mlxd_completion c3 = wait_one(b.cq);
        ok = ok && c3.status == MLXD_WC_REM_ACCESS_ERR && c3.syndrome == 0x13;
        side_close(&b);
        _exit(ok ? 0 : 3);
    }
    close(sv[1]);
    struct side a;
    side_open(&a, "mlx5_0", MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_MW_BIND);
    struct mlxd_qp *qp;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 8, .recv_depth = 1 };
    ck_assert_int_eq(mlxd_qp_create(a.cq, &qo, &qp), 0);
    struct mlxd_endpoint me;
    ck_assert_int_eq(mlxd_qp_endpoint(qp, &me), 0);
    struct xchg peer;
    ck_assert_int_eq(read(sv[0], &peer, sizeof peer), sizeof peer);
    struct mlxd_connect_opts co = { .sz = sizeof co,
                                    .peer_access = MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ };
    ck_assert_int_eq(mlxd_qp_connect(qp, &peer.ep, &co), 0);
    struct mlxd_mw *mw;
    ck_assert_int_eq(mlxd_mw_alloc(a.nic, MLXD_MW_TYPE_1, &mw), 0);
    struct mlxd_mw_bind bd = win(mw, &a, MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ);
    bind_ok(&a, qp, &bd, 1);
    struct xchg mine = { .ep = me, .addr = bd.addr, .rkey = mlxd_mw_rkey(mw) };
    ck_assert_int_eq(write(sv[0], &mine, sizeof mine), sizeof mine);
    char c;
    ck_assert_int_eq(read(sv[0], &c, 1), 1);                         /* the child connected */
    ck_assert_int_eq(write(sv[0], "b", 1), 1);
    ck_assert_int_eq(read(sv[0], &c, 1), 1);                         /* it wrote and read */
    struct mlxd_mw_bind un = { .mw = mw };
    bind_ok(&a, qp, &un, 2);
    /* read after a completion of this NIC: the engine's writes into a.buf precede the CQE it
     * released (a socket message from the other process orders nothing in this one, for TSan) */
    for (unsigned i = 0; i < 3000; i++) ck_assert_uint_eq(a.buf[WIN_OFF + i], (unsigned char)(i * 3 + 5));
    ck_assert_int_eq(write(sv[0], "u", 1), 1);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other process: status 0x%x", st);
    side_close(&a);
    close(sv[0]);
}
END_TEST

Suite *mw_suite(void)
{
    Suite *s = suite_create("mw");
    TCase *tc = tcase_create("mw");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, mlxd_test_emu_two_devices, NULL);
    tcase_add_test(tc, type1_bind_write_read_unbind);
    tcase_add_test(tc, type1_rebind_old_rkey_fails);
    tcase_add_test(tc, wrong_access_and_out_of_range);
    tcase_add_test(tc, type2_bind_other_qp_local_inv);
    tcase_add_test(tc, type2_remote_invalidate);
    tcase_add_test(tc, bind_errors);
    tcase_add_test(tc, fence_after_bind);
    tcase_add_test(tc, send_inv_refused);
    tcase_add_test(tc, misuse_is_refused);
    tcase_add_test(tc, faults_leave_nothing);
    tcase_add_test(tc, two_processes);
    suite_add_tcase(s, tc);
    /* some 65,000 registrations and deregistrations through the emulated kernel: minutes under
     * the sanitizers on a loaded machine */
    TCase *reuse = tcase_create("reuse");
    tcase_set_timeout(reuse, 900);
    tcase_add_checked_fixture(reuse, mlxd_test_emu_two_devices, NULL);
    tcase_add_test(reuse, window_region_reused);
    suite_add_tcase(s, reuse);
    return s;
}
