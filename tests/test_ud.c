/* ud: unreliable datagram through the driver on the emulated NIC: UD QPs, address handles, the
 * Q_Key, the GRH in front of every receive, the source QPN of the completion, and the errors and
 * drops a ConnectX has.
 *
 * Expected values come from the specifications, not from what the code prints:
 *   - the 40 bytes in front of a UD receive hold the GRH (IB spec vol. 1 11.4.1.1); on RoCE v2
 *     over IPv4 bytes 0..19 are zero and 20..39 are the packet's IPv4 header (RFC 791: version 4,
 *     IHL 5, protocol 17 UDP, the sender's and receiver's addresses, which are bytes 12..15 of
 *     their IPv4-mapped GIDs), byte_len counts them (libmlx5, ibv_ud_pingpong posts size + 40);
 *   - the CQE's flags_rqpn carries the sender's QPN and the GRH flag (mlx5dv.h struct
 *     mlx5_cqe64; libmlx5 handle_responder: wc->src_qp, IBV_WC_GRH);
 *   - a datagram whose DETH Q_Key is not the QP's is dropped silently (IB spec 10.2.5, 9.6.1.1.1),
 *     one with no receive posted is dropped (IB spec 9.8.3.2.2 for UD: no RNR), both counted by
 *     the emulated NIC (rx_ud_bad_qkey, rx_ud_no_recv: docs/emulator.md);
 *   - a WQE Q_Key with the high bit set sends the QP's own Q_Key (IB spec 10.2.5);
 *   - a datagram larger than the port MTU completes with a local length error: syndrome 0x01
 *     (MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR), IBV_WC_LOC_LEN_ERR (1); the send queue stops and later
 *     sends are flushed (IBV_WC_WR_FLUSH_ERR 5), the receive queue keeps working (SQE state). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>     /* headers only: the enum values compared below */
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
#include "util.h"

#define BUF 65536
#define QKEY 0x11111111u
_Static_assert(MLXD_UD_GRH_LEN == 40, "GRH space");

struct side {
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_region *reg;
    uint8_t *buf;
    struct mlxd_endpoint ep;
};

static void side_open(struct side *s, const char *dev, uint32_t qkey)
{
    memset(s, 0, sizeof *s);
    ck_assert_msg(mlxd_open(dev, NULL, &s->nic) == 0, "open %s: %s", dev, mlxd_errmsg());
    s->buf = aligned_alloc(4096, BUF);
    memset(s->buf, 0, BUF);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE };
    ck_assert_msg(mlxd_region_register(s->nic, s->buf, BUF, &ro, &s->reg) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_cq_create(s->nic, 128, NULL, &s->cq) == 0, "%s", mlxd_errmsg());
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UD, .send_depth = 16, .recv_depth = 16,
                               .max_inline = 64 };
    ck_assert_msg(mlxd_qp_create(s->cq, &qo, &s->qp) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_qp_ud_ready(s->qp, qkey) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_state(s->qp), 3);
    ck_assert_int_eq(mlxd_qp_endpoint(s->qp, &s->ep), 0);
}

static void side_close(struct side *s)
{
    ck_assert_msg(mlxd_close(s->nic) == 0, "%s", mlxd_errmsg());
    free(s->buf);
}

/* One receive of 40 + len bytes at buf + off. */
static void recv_at(struct side *s, uint32_t off, uint32_t len, uint64_t wr_id)
{
    struct mlxd_local l;
    ck_assert_int_eq(mlxd_region_slice(s->reg, off, MLXD_UD_GRH_LEN + len, &l), 0);
    struct mlxd_recv r = { .wr_id = wr_id, .num_local = 1, .local = &l };
    ck_assert_int_eq(mlxd_qp_receive(s->qp, &r, 1), 1);
}

/* Posts a datagram of len bytes from buf + off through ah to (qpn, qkey); rings. */
static void send_dgram(struct side *s, const struct mlxd_ah *ah, uint32_t qpn, uint32_t qkey, uint32_t off,
                       uint32_t len, uint64_t wr_id, uint32_t op, uint32_t imm)
{
    struct mlxd_local l;
    ck_assert_int_eq(mlxd_region_slice(s->reg, off, len, &l), 0);
    struct mlxd_entry e = { .wr_id = wr_id, .op = op, .flags = MLXD_SIGNALED, .imm = imm, .num_local = 1,
                            .local = l, .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey };
    ck_assert_msg(mlxd_qp_post(s->qp, &e) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_ring(s->qp), 0);
}

static struct mlxd_completion wait_one(struct mlxd_cq *cq)
{
    struct mlxd_completion wc;
    mlxd_test_wait_one(cq, 10, &wc);
    return wc;
}

/* No completion on cq for ms milliseconds. */
static void expect_none(struct mlxd_cq *cq, unsigned ms)
{
    struct mlxd_completion wc;
    for (unsigned i = 0; i < ms; i++) {
        int n = mlxd_cq_poll(cq, &wc, 1);
        ck_assert_msg(n == 0, "unexpected completion: wr_id %llu status %u", (unsigned long long)wc.wr_id, wc.status);
        usleep(1000);
    }
}

static void fill(uint8_t *p, size_t n, unsigned seed) { for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 13); }

static struct mlxd_ah *ah_to(struct side *s, const struct side *peer)
{
    struct mlxd_ah *ah;
    ck_assert_msg(mlxd_ah_create(s->nic, peer->ep.gid, NULL, &ah) == 0, "%s", mlxd_errmsg());
    return ah;
}

static struct mlxd_emu_nic_stats stats(unsigned dev)
{
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(dev, &st), 0);
    return st;
}

/* The GRH space of a receive at p: zeros, then the IPv4 header from `from` to `to`. */
static void check_grh(const uint8_t *p, const uint8_t from_gid[16], const uint8_t to_gid[16], uint32_t len)
{
    for (int i = 0; i < 20; i++) ck_assert_msg(p[i] == 0, "GRH byte %d is 0x%02x", i, p[i]);
    const uint8_t *ip = p + 20;
    ck_assert_uint_eq(ip[0], 0x45);                        /* version 4, IHL 5 */
    ck_assert_uint_eq(ip[9], 17);                          /* UDP */
    /* total length: IPv4 20 + UDP 8 + BTH 12 + DETH 8 + payload + pad + iCRC 4 */
    ck_assert_uint_eq((unsigned)(ip[2] << 8 | ip[3]), 20 + 8 + 12 + 8 + ((len + 3) & ~3u) + 4);
    ck_assert_mem_eq(ip + 12, from_gid + 12, 4);
    ck_assert_mem_eq(ip + 16, to_gid + 12, 4);
}

START_TEST(datagram_exchange)
{
    struct side a, b;
    side_open(&a, "mlx5_0", QKEY);
    side_open(&b, "mlx5_1", QKEY);
    struct mlxd_ah *ab = ah_to(&a, &b), *ba = ah_to(&b, &a);
    recv_at(&b, 0, 1024, 100);
    recv_at(&b, 2048, 1024, 101);
    fill(a.buf + 8192, 1000, 7);
    send_dgram(&a, ab, b.ep.qpn, QKEY, 8192, 1000, 1, MLXD_OP_SEND, 0);
    send_dgram(&a, ab, b.ep.qpn, QKEY, 8192 + 1000, 5, 2, MLXD_OP_SEND_IMM, 0xa1b2c3d4);
    for (uint64_t i = 1; i <= 2; i++) {
        struct mlxd_completion s = wait_one(a.cq);
        ck_assert_msg(s.status == 0, "send status %u syndrome 0x%x", s.status, s.syndrome);
        ck_assert_uint_eq(s.wr_id, i);
        ck_assert_uint_eq(s.opcode, IBV_WC_SEND);
    }
    struct mlxd_completion r = wait_one(b.cq);
    ck_assert_msg(r.status == 0, "recv status %u syndrome 0x%x", r.status, r.syndrome);
    ck_assert_uint_eq(r.wr_id, 100);
    ck_assert_uint_eq(r.opcode, IBV_WC_RECV);
    ck_assert_uint_eq(r.byte_len, 40 + 1000);
    ck_assert_uint_eq(r.flags & 0xff, MLXD_WC_GRH);
    ck_assert_uint_eq(mlxd_completion_src_qp(&r), a.ep.qpn);
    ck_assert_uint_eq(r.qpn, b.ep.qpn);
    check_grh(b.buf, a.ep.gid, b.ep.gid, 1000);
    ck_assert_mem_eq(b.buf + 40, a.buf + 8192, 1000);
    r = wait_one(b.cq);
    ck_assert_uint_eq(r.wr_id, 101);
    ck_assert_uint_eq(r.byte_len, 40 + 5);
    ck_assert_uint_eq(r.flags & 0xff, MLXD_WC_GRH | MLXD_WC_WITH_IMM);
    ck_assert_uint_eq(r.imm, 0xa1b2c3d4);
    ck_assert_uint_eq(mlxd_completion_src_qp(&r), a.ep.qpn);
    ck_assert_mem_eq(b.buf + 2048 + 40, a.buf + 8192 + 1000, 5);
    /* and back, inline, with the QP's own Q_Key (high bit of the WQE's Q_Key) */
    recv_at(&a, 0, 64, 200);
    memcpy(b.buf + 8192, "pong", 4);
    struct mlxd_entry e = { .wr_id = 9, .op = MLXD_OP_SEND, .flags = MLXD_SIGNALED | MLXD_INLINE,
                            .num_local = 1, .local = { (uintptr_t)(b.buf + 8192), 4, 0 }, .ah = ba,
                            .remote_qpn = a.ep.qpn, .remote_qkey = 0x80000000u };
    ck_assert_msg(mlxd_qp_post(b.qp, &e) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_ring(b.qp), 0);
    ck_assert_uint_eq(wait_one(b.cq).wr_id, 9);
    r = wait_one(a.cq);
    ck_assert_msg(r.status == 0 && r.wr_id == 200 && r.byte_len == 44, "status %u wr_id %llu len %u", r.status,
                  (unsigned long long)r.wr_id, r.byte_len);
    ck_assert_uint_eq(mlxd_completion_src_qp(&r), b.ep.qpn);
    ck_assert_mem_eq(a.buf + 40, "pong", 4);
    ck_assert_uint_eq(stats(1).rx_ud_datagrams, 2);
    ck_assert_uint_eq(stats(0).rx_ud_datagrams, 1);
    ck_assert_int_eq(mlxd_ah_destroy(ab), 0);
    ck_assert_int_eq(mlxd_ah_destroy(ab), 0);              /* second call: the first's result */
    side_close(&a);
    side_close(&b);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* One QP sends to two QPs on another port through one address handle. */
START_TEST(one_to_many)
{
    struct side a, b;
    side_open(&a, "mlx5_0", QKEY);
    side_open(&b, "mlx5_1", QKEY);
    struct mlxd_qp *b2;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UD, .recv_depth = 4 };
    ck_assert_int_eq(mlxd_qp_create(b.cq, &qo, &b2), 0);
    ck_assert_int_eq(mlxd_qp_ud_ready(b2, QKEY), 0);
    struct mlxd_endpoint e2;
    ck_assert_int_eq(mlxd_qp_endpoint(b2, &e2), 0);
    struct mlxd_local l;
    ck_assert_int_eq(mlxd_region_slice(b.reg, 4096, 40 + 64, &l), 0);
    struct mlxd_recv rv = { .wr_id = 7, .num_local = 1, .local = &l };
    ck_assert_int_eq(mlxd_qp_receive(b2, &rv, 1), 1);
    recv_at(&b, 0, 64, 6);
    struct mlxd_ah *ab = ah_to(&a, &b);
    fill(a.buf + 8192, 64, 1);
    fill(a.buf + 8192 + 64, 64, 2);
    send_dgram(&a, ab, e2.qpn, QKEY, 8192 + 64, 64, 1, MLXD_OP_SEND, 0);
    send_dgram(&a, ab, b.ep.qpn, QKEY, 8192, 64, 2, MLXD_OP_SEND, 0);
    bool got6 = false, got7 = false;
    for (int i = 0; i < 2; i++) {
        struct mlxd_completion r = wait_one(b.cq);
        ck_assert_uint_eq(r.status, 0);
        ck_assert_uint_eq(mlxd_completion_src_qp(&r), a.ep.qpn);
        if (r.wr_id == 6) { got6 = true; ck_assert_uint_eq(r.qpn, b.ep.qpn); }
        if (r.wr_id == 7) { got7 = true; ck_assert_uint_eq(r.qpn, e2.qpn); }
    }
    ck_assert(got6 && got7);
    ck_assert_mem_eq(b.buf + 40, a.buf + 8192, 64);
    ck_assert_mem_eq(b.buf + 4096 + 40, a.buf + 8192 + 64, 64);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* A wrong Q_Key: dropped silently, counted; the receive stays posted for the next datagram. */
START_TEST(wrong_qkey_dropped_and_counted)
{
    struct side a, b;
    side_open(&a, "mlx5_0", QKEY);
    side_open(&b, "mlx5_1", QKEY);
    struct mlxd_ah *ab = ah_to(&a, &b);
    recv_at(&b, 0, 256, 50);
    uint64_t before = stats(1).rx_ud_bad_qkey;
    fill(a.buf + 8192, 16, 3);
    fill(a.buf + 9000, 16, 4);
    send_dgram(&a, ab, b.ep.qpn, QKEY + 1, 8192, 16, 1, MLXD_OP_SEND, 0);
    struct mlxd_completion s = wait_one(a.cq);
    ck_assert_uint_eq(s.status, 0);                        /* UD: the sender cannot know */
    for (int i = 0; i < 2000 && stats(1).rx_ud_bad_qkey == before; i++) usleep(1000);
    ck_assert_uint_eq(stats(1).rx_ud_bad_qkey, before + 1);
    expect_none(b.cq, 100);
    /* a.qp's own Q_Key is QKEY + 1: the high bit sends it, also dropped */
    struct side c;
    side_open(&c, "mlx5_0", QKEY + 1);
    struct mlxd_ah *cb = ah_to(&c, &b);
    send_dgram(&c, cb, b.ep.qpn, 0x80000000u, 8192, 16, 2, MLXD_OP_SEND, 0);
    ck_assert_uint_eq(wait_one(c.cq).status, 0);
    for (int i = 0; i < 2000 && stats(1).rx_ud_bad_qkey == before + 1; i++) usleep(1000);
    ck_assert_uint_eq(stats(1).rx_ud_bad_qkey, before + 2);
    send_dgram(&a, ab, b.ep.qpn, QKEY, 9000, 16, 3, MLXD_OP_SEND, 0);
    struct mlxd_completion r = wait_one(b.cq);
    ck_assert_uint_eq(r.status, 0);
    ck_assert_uint_eq(r.wr_id, 50);
    ck_assert_uint_eq(r.byte_len, 56);
    ck_assert_mem_eq(b.buf + 40, a.buf + 9000, 16);     /* the second datagram, not the first */
    side_close(&c);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* No receive posted: dropped and counted, no RNR, no error; a later receive gets the next one. */
START_TEST(no_receive_dropped_and_counted)
{
    struct side a, b;
    side_open(&a, "mlx5_0", QKEY);
    side_open(&b, "mlx5_1", QKEY);
    struct mlxd_ah *ab = ah_to(&a, &b);
    uint64_t before = stats(1).rx_ud_no_recv;
    fill(a.buf + 8192, 32, 5);
    fill(a.buf + 9000, 32, 6);
    for (uint64_t i = 0; i < 3; i++) send_dgram(&a, ab, b.ep.qpn, QKEY, 8192, 32, i, MLXD_OP_SEND, 0);
    for (int i = 0; i < 3; i++) ck_assert_uint_eq(wait_one(a.cq).status, 0);
    for (int i = 0; i < 2000 && stats(1).rx_ud_no_recv < before + 3; i++) usleep(1000);
    ck_assert_uint_eq(stats(1).rx_ud_no_recv, before + 3);
    expect_none(b.cq, 50);
    ck_assert_int_eq(mlxd_qp_state(b.qp), 3);
    recv_at(&b, 0, 32, 77);
    send_dgram(&a, ab, b.ep.qpn, QKEY, 9000, 32, 4, MLXD_OP_SEND, 0);
    struct mlxd_completion r = wait_one(b.cq);
    ck_assert_uint_eq(r.status, 0);
    ck_assert_uint_eq(r.wr_id, 77);
    ck_assert_mem_eq(b.buf + 40, a.buf + 9000, 32);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* Over the MTU: local length error (syndrome 0x01), the next send flushed, the receive side
 * still works; nothing reached the wire. */
START_TEST(over_mtu_is_local_length_error)
{
    struct side a, b;
    side_open(&a, "mlx5_0", QKEY);
    side_open(&b, "mlx5_1", QKEY);
    struct mlxd_port_info pi;
    ck_assert_int_eq(mlxd_port_info(a.nic, &pi), 0);
    uint32_t mtu = 128u << pi.active_mtu;                 /* IB MTU enum: 1 = 256 ... 5 = 4096 */
    struct mlxd_ah *ab = ah_to(&a, &b), *ba = ah_to(&b, &a);
    recv_at(&b, 0, 8192, 10);
    uint64_t tx0 = stats(0).tx_pkts;
    send_dgram(&a, ab, b.ep.qpn, QKEY, 16384, mtu + 1, 1, MLXD_OP_SEND, 0);
    send_dgram(&a, ab, b.ep.qpn, QKEY, 16384, 8, 2, MLXD_OP_SEND, 0);
    struct mlxd_completion s = wait_one(a.cq);
    ck_assert_uint_eq(s.wr_id, 1);
    ck_assert_uint_eq(s.status, IBV_WC_LOC_LEN_ERR);
    ck_assert_uint_eq(s.syndrome, 0x01);
    s = wait_one(a.cq);
    ck_assert_uint_eq(s.wr_id, 2);
    ck_assert_uint_eq(s.status, IBV_WC_WR_FLUSH_ERR);
    ck_assert_uint_eq(stats(0).tx_pkts, tx0);
    expect_none(b.cq, 50);
    /* exactly the MTU passes (from b, whose send queue is fine), and a's receive side works */
    recv_at(&a, 0, mtu, 11);
    send_dgram(&b, ba, a.ep.qpn, QKEY, 16384, mtu, 3, MLXD_OP_SEND, 0);
    ck_assert_uint_eq(wait_one(b.cq).status, 0);
    struct mlxd_completion r = wait_one(a.cq);
    ck_assert_uint_eq(r.status, 0);
    ck_assert_uint_eq(r.byte_len, 40 + mtu);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* A receive too small for 40 + the datagram: the receive completes with a local length error
 * (syndrome 0x01, IBV_WC_LOC_LEN_ERR) and the QP goes to ERR (IB spec 10.7.2.4, as for a SEND on
 * a connected QP); its other receive is flushed (IBV_WC_WR_FLUSH_ERR). */
START_TEST(receive_too_small_is_local_length_error)
{
    struct side a, b;
    side_open(&a, "mlx5_0", QKEY);
    side_open(&b, "mlx5_1", QKEY);
    struct mlxd_ah *ab = ah_to(&a, &b);
    recv_at(&b, 0, 8, 30);                                 /* 40 + 8 bytes */
    recv_at(&b, 4096, 64, 31);
    send_dgram(&a, ab, b.ep.qpn, QKEY, 8192, 16, 1, MLXD_OP_SEND, 0);
    ck_assert_uint_eq(wait_one(a.cq).status, 0);
    struct mlxd_completion r = wait_one(b.cq);
    ck_assert_uint_eq(r.wr_id, 30);
    ck_assert_uint_eq(r.status, IBV_WC_LOC_LEN_ERR);
    ck_assert_uint_eq(r.syndrome, 0x01);
    r = wait_one(b.cq);
    ck_assert_uint_eq(r.wr_id, 31);
    ck_assert_uint_eq(r.status, IBV_WC_WR_FLUSH_ERR);
    for (int i = 0; i < 16; i++) ck_assert_uint_eq(b.buf[i], 0);   /* nothing written */
    side_close(&a);
    side_close(&b);
}
END_TEST

START_TEST(misuse_is_refused)
{
    struct side a, b;
    side_open(&a, "mlx5_0", QKEY);
    side_open(&b, "mlx5_1", QKEY);
    struct mlxd_ah *ab = ah_to(&a, &b);
    struct mlxd_local l = mlxd_region_local(a.reg);
    l.length = 8;
    struct mlxd_entry e = { .op = MLXD_OP_WRITE, .num_local = 1, .local = l, .ah = ab, .remote_qpn = 2,
                            .remote_qkey = QKEY };
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), -EINVAL);     /* UD has no WRITE */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "SEND"));
    e.op = MLXD_OP_READ;
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), -EINVAL);
    e.op = MLXD_OP_SEND;
    e.ah = NULL;
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), -EINVAL);
    e.ah = ab;
    e.remote_qpn = 0x1000000;
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), -EINVAL);
    struct mlxd_ah *foreign = ah_to(&b, &a);
    e.remote_qpn = 2;
    e.ah = foreign;                                        /* of another NIC */
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), -EINVAL);
    struct mlxd_ah *gone = ah_to(&a, &b);
    ck_assert_int_eq(mlxd_ah_destroy(gone), 0);
    e.ah = gone;
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), -EINVAL);
    ck_assert_int_eq(mlxd_qp_send_room(a.qp), 16);         /* nothing was posted */
    /* UD is not connected; RC is not made ready as UD; ready once */
    ck_assert_int_eq(mlxd_qp_connect(a.qp, &b.ep, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_qp_ud_ready(a.qp, QKEY), -EINVAL);
    struct mlxd_qp *rc;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 4 };
    ck_assert_int_eq(mlxd_qp_create(a.cq, &qo, &rc), 0);
    ck_assert_int_eq(mlxd_qp_ud_ready(rc, QKEY), -EINVAL);
    /* a controlled Q_Key needs privilege (kernel uverbs_cmd.c modify_qp): EPERM at RESET->INIT */
    struct mlxd_qp *ud;
    qo.type = MLXD_QP_UD;
    ck_assert_int_eq(mlxd_qp_create(a.cq, &qo, &ud), 0);
    ck_assert_int_eq(mlxd_qp_ud_ready(ud, 0x80010000u), -EPERM);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "RESET->INIT"));
    ck_assert_int_eq(mlxd_qp_state(ud), 0);
    /* address handle options */
    struct mlxd_ah *ah;
    struct mlxd_ah_opts ao = { .sz = sizeof ao, .sl = 8 };
    ck_assert_int_eq(mlxd_ah_create(a.nic, b.ep.gid, &ao, &ah), -EINVAL);
    ao.sl = 0;
    ao.flow_label = 0x100000;
    ck_assert_int_eq(mlxd_ah_create(a.nic, b.ep.gid, &ao, &ah), -EINVAL);
    ao.flow_label = 0;
    ao.has_gid_index = true;
    ao.gid_index = 200;
    ck_assert_int_eq(mlxd_ah_create(a.nic, b.ep.gid, &ao, &ah), -EINVAL);
    ck_assert_int_eq(mlxd_ah_create(a.nic, NULL, NULL, &ah), -EINVAL);
    ck_assert_int_eq(mlxd_ah_destroy(NULL), -EINVAL);
    struct mlxd_emu_counts c = { .sz = sizeof c };
    ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
    ck_assert_uint_eq(c.ah, 2);                            /* ab and foreign */
    side_close(&a);
    side_close(&b);
    ck_assert_int_eq(mlxd_ah_destroy(ab), -EINVAL);        /* its NIC is closed */
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

struct xchg { struct mlxd_endpoint ep; };

/* Two processes: the parent on mlx5_0 sends a datagram, the child on mlx5_1 checks it (data, GRH
 * addresses, source QPN) and answers with one of its own. */
START_TEST(two_processes)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(sv[0]);
        struct side b;
        side_open(&b, "mlx5_1", QKEY);
        recv_at(&b, 0, 512, 1);
        struct xchg me = { .ep = b.ep }, peer;
        ck_assert_int_eq(write(sv[1], &me, sizeof me), sizeof me);
        ck_assert_int_eq(read(sv[1], &peer, sizeof peer), sizeof peer);
        struct mlxd_completion r = wait_one(b.cq);
        uint8_t want[300];
        fill(want, sizeof want, 9);
        int ok = r.status == 0 && r.byte_len == 340 && mlxd_completion_src_qp(&r) == peer.ep.qpn &&
                 (r.flags & MLXD_WC_GRH) && !memcmp(b.buf + 40, want, 300) &&
                 !memcmp(b.buf + 20 + 12, peer.ep.gid + 12, 4) && !memcmp(b.buf + 20 + 16, b.ep.gid + 12, 4);
        struct mlxd_ah *ba = ah_to(&b, &(struct side){ .ep = peer.ep });
        memcpy(b.buf + 8192, "ack!", 4);
        send_dgram(&b, ba, peer.ep.qpn, QKEY, 8192, 4, 2, MLXD_OP_SEND, 0);
        ok = ok && wait_one(b.cq).status == 0;
        char c;
        ck_assert_int_eq(read(sv[1], &c, 1), 1);              /* the parent is done */
        side_close(&b);
        _exit(ok ? 0 : 3);
    }
    close(sv[1]);
    struct side a;
    side_open(&a, "mlx5_0", QKEY);
    recv_at(&a, 0, 64, 5);
    struct xchg me = { .ep = a.ep }, peer;
    ck_assert_int_eq(read(sv[0], &peer, sizeof peer), sizeof peer);
    ck_assert_int_eq(write(sv[0], &me, sizeof me), sizeof me);
    struct mlxd_ah *ab = ah_to(&a, &(struct side){ .ep = peer.ep });
    fill(a.buf + 8192, 300, 9);
    send_dgram(&a, ab, peer.ep.qpn, QKEY, 8192, 300, 1, MLXD_OP_SEND, 0);
    ck_assert_uint_eq(wait_one(a.cq).status, 0);
    struct mlxd_completion r = wait_one(a.cq);
    ck_assert_uint_eq(r.status, 0);
    ck_assert_uint_eq(r.wr_id, 5);
    ck_assert_uint_eq(mlxd_completion_src_qp(&r), peer.ep.qpn);
    ck_assert_mem_eq(a.buf + 40, "ack!", 4);
    ck_assert_int_eq(write(sv[0], "d", 1), 1);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other process: status 0x%x", st);
    side_close(&a);
    close(sv[0]);
}
END_TEST

Suite *ud_suite(void)
{
    Suite *s = suite_create("ud");
    TCase *tc = tcase_create("ud");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, mlxd_test_private_devices, NULL);
    tcase_add_test(tc, datagram_exchange);
    tcase_add_test(tc, one_to_many);
    tcase_add_test(tc, wrong_qkey_dropped_and_counted);
    tcase_add_test(tc, no_receive_dropped_and_counted);
    tcase_add_test(tc, over_mtu_is_local_length_error);
    tcase_add_test(tc, receive_too_small_is_local_length_error);
    tcase_add_test(tc, misuse_is_refused);
    tcase_add_test(tc, two_processes);
    suite_add_tcase(s, tc);
    return s;
}
