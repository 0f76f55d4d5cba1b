/* security: the emulated port treats every packet as hostile (docs/security.md).
 *
 * A real process (this one) makes a NIC, regions and connected UC/RC QPs with the driver on the
 * emulator; the test then plays the network: it builds RoCE v2 packets with abi/mlxd_roce.h and
 * sends their UDP payload to the emulated port (127.a.b.1:4791) from a socket bound to the
 * connected peer's address (127.a.b.2) or to another one (127.a.b.3).  Memory is filled with a
 * pattern; after the engine has received the packets (its rx_pkts counter) the test checks
 * exactly which bytes changed.
 *
 * Rules checked, one test each (IB spec vol. 1 10.6.3 / 9.7.5.1.6 / C9-88: an RDMA WRITE is
 * executed only if the R_Key names a memory region of the QP's PD, the region grants Remote
 * Write, the QP grants Remote Write, and [VA, VA+len) lies inside the region; annex A17: a RoCE
 * v2 RC/UC QP takes packets only from the peer address it was connected to):
 *   write_lands_from_peer            the positive control: a correct packet is executed
 *   other_source_address_ignored     a correct packet from an address not connected: no write
 *   outside_region_refused           VA/length below, above, straddling, wrapping, huge RETH len
 *   wrong_rkey_refused               rkey of no region, off by one, another PD-less index
 *   region_without_remote_write      the rkey of a region registered LOCAL_WRITE only
 *   qp_without_remote_write          a QP connected with peer_access 0
 *   write_longer_than_reth           FIRST/MIDDLE/LAST carrying more than the RETH promised
 *   bad_icrc_ignored                 a correct packet with one bit of its iCRC flipped
 *   rc_access_error_breaks_qp        on RC the bad rkey also moves the QP to ERR (NAK, no write)
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_roce.h"
#include "mlxd_uverbs.h"

#define PAGE 4096u
#define PAT  0x5a

struct sec {
    unsigned a, b;                 /* 127.a.b.x */
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_region *rw, *lo;   /* REMOTE_WRITE region; LOCAL_WRITE-only region */
    uint8_t *mem;                  /* [guard page][rw: 2 pages][guard page][lo: 1 page] */
    size_t memlen;
    uint32_t qpn, psn;
    uint64_t rx0;
};

static uint32_t ip4(const struct sec *s, unsigned host) { return 127u << 24 | s->a << 16 | s->b << 8 | host; }

static void sec_up(struct sec *s, uint32_t qp_type, uint32_t peer_access)
{
    memset(s, 0, sizeof *s);
    unsigned v = (unsigned)getpid() * 2654435761u;
    s->a = 1 + (v >> 8) % 250;
    s->b = (v >> 16) & 0xff;
    char spec[64];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1", s->a, s->b);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
    ck_assert_msg(mlxd_open("mlx5_0", NULL, &s->nic) == 0, "%s", mlxd_errmsg());
    s->memlen = 5 * PAGE;
    s->mem = mmap(NULL, s->memlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(s->mem != MAP_FAILED);
    memset(s->mem, PAT, s->memlen);
    struct mlxd_region_opts ro = { .sz = sizeof ro,
                                   .access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE };
    ck_assert_int_eq(mlxd_region_register(s->nic, s->mem + PAGE, 2 * PAGE, &ro, &s->rw), 0);
    ro.access = MLXD_ACCESS_LOCAL_WRITE;
    ck_assert_int_eq(mlxd_region_register(s->nic, s->mem + 4 * PAGE, PAGE, &ro, &s->lo), 0);
    ck_assert_int_eq(mlxd_cq_create(s->nic, 64, NULL, &s->cq), 0);
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = qp_type, .recv_depth = 16 };
    ck_assert_int_eq(mlxd_qp_create(s->cq, &qo, &s->qp), 0);
    struct mlxd_recv r = { .wr_id = 1 };
    for (int i = 0; i < 16; i++) ck_assert_int_eq(mlxd_qp_receive(s->qp, &r, 1), 1);
    struct mlxd_endpoint peer = { .qpn = 0x4242, .psn = 100 };
    peer.gid[10] = peer.gid[11] = 0xff;
    uint32_t pip = htonl(ip4(s, 2));
    memcpy(peer.gid + 12, &pip, 4);
    struct mlxd_connect_opts co = { .sz = sizeof co, .peer_access = peer_access,
                                    .receive_only = true };
    ck_assert_msg(mlxd_qp_connect(s->qp, &peer, &co) == 0, "%s", mlxd_errmsg());
    struct mlxd_endpoint me;
    ck_assert_int_eq(mlxd_qp_endpoint(s->qp, &me), 0);
    s->qpn = me.qpn;
    s->psn = 100;
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &st), 0);
    s->rx0 = st.rx_pkts;
}

/* Releases everything sec_up made; the emulator then holds nothing of this process. */
static void sec_down(struct sec *s)
{
    ck_assert_int_eq(mlxd_close(s->nic), 0);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
    munmap(s->mem, s->memlen);
}

static uint64_t rx_pkts(void)
{
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &st), 0);
    return st.rx_pkts;
}

/* Sends the UDP payload of a packet built from p (+ len payload bytes of 0xC3) from host
 * 127.a.b.<from_host>; flips iCRC bit 0 when bad_icrc. */
static void send_pkt(struct sec *s, unsigned from_host, struct mlxd_roce_pkt p, uint32_t len,
                     bool bad_icrc)
{
    static uint8_t pay[4096], buf[8192];
    memset(pay, 0xc3, sizeof pay);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(ip4(s, from_host)) };
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    socklen_t sl = sizeof src;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&src, &sl), 0);
    struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(4791),
                               .sin_addr.s_addr = htonl(ip4(s, 1)) };
    /* the iCRC covers the IPv4/UDP headers the kernel will send: the real source port */
    p.src_ip = ip4(s, from_host);
    p.dst_ip = ip4(s, 1);
    p.src_port = ntohs(src.sin_port);
    ssize_t n = mlxd_roce_build(buf, sizeof buf, &p, pay, len);
    ck_assert_msg(n > 0, "build: %zd", n);
    if (bad_icrc) buf[n - 4] ^= 1;
    ck_assert_int_eq(sendto(fd, buf + MLXD_ROCE_BTH_OFF, (size_t)n - MLXD_ROCE_BTH_OFF, 0,
                            (struct sockaddr *)&dst, sizeof dst), (ssize_t)n - MLXD_ROCE_BTH_OFF);
    close(fd);
}

/* Waits until the engine has received `count` packets since setup (10 s at most). */
static void wait_rx(struct sec *s, uint64_t count)
{
    for (int i = 0; i < 10000 && rx_pkts() - s->rx0 < count; i++) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert_uint_eq(rx_pkts() - s->rx0, count);
    struct timespec ts = { 0, 5000000 };   /* rx_pkts counts before dispatch: let it finish */
    nanosleep(&ts, NULL);
}

/* WRITE Only (UC or RC per the QP) of len bytes at va with rkey. */
static struct mlxd_roce_pkt wr(struct sec *s, uint32_t transport, uint64_t va, uint32_t rkey,
                               uint32_t len)
{
    struct mlxd_roce_pkt p = { .opcode = (uint8_t)(transport | MLXD_ROCE_OP_WRITE_ONLY),
                               .dest_qp = s->qpn, .psn = s->psn++ & MLXD_ROCE_PSN_MASK,
                               .reth_va = va, .reth_rkey = rkey, .reth_len = len };
    return p;
}

/* Number of bytes of mem that differ from the pattern. */
static size_t changed(const struct sec *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->memlen; i++) n += s->mem[i] != PAT;
    return n;
}

static uint64_t rw_va(const struct sec *s) { return mlxd_region_remote(s->rw).addr; }
static uint32_t rw_key(const struct sec *s) { return mlxd_region_remote(s->rw).rkey; }

START_TEST(write_lands_from_peer)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, MLXD_ACCESS_REMOTE_WRITE);
    ck_assert_uint_eq(rw_va(&s), (uint64_t)(uintptr_t)(s.mem + PAGE));
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, rw_va(&s) + 100, rw_key(&s), 64), 64, false);
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, rw_va(&s) + 2 * PAGE - 64, rw_key(&s), 64), 64, false);
    wait_rx(&s, 2);
    ck_assert_uint_eq(changed(&s), 128);
    for (int i = 0; i < 64; i++) {
        ck_assert_uint_eq(s.mem[PAGE + 100 + i], 0xc3);
        ck_assert_uint_eq(s.mem[3 * PAGE - 64 + i], 0xc3);
    }
    sec_down(&s);
}
END_TEST

START_TEST(other_source_address_ignored)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, MLXD_ACCESS_REMOTE_WRITE);
    /* right QPN, rkey, VA, PSN and iCRC, but from 127.a.b.3: the QP is connected to .2 */
    send_pkt(&s, 3, wr(&s, MLXD_ROCE_TRANSPORT_UC, rw_va(&s), rw_key(&s), 256), 256, false);
    wait_rx(&s, 1);
    ck_assert_msg(changed(&s) == 0, "a packet from 127.%u.%u.3 wrote %zu bytes into a QP connected "
                  "to 127.%u.%u.2", s.a, s.b, changed(&s), s.a, s.b);
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &st), 0);
    ck_assert_uint_eq(st.rx_wrong_source, 1);
    sec_down(&s);
}
END_TEST

START_TEST(outside_region_refused)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, MLXD_ACCESS_REMOTE_WRITE);
    uint64_t va = rw_va(&s), end = va + 2 * PAGE;
    uint32_t k = rw_key(&s);
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, va - 1, k, 16), 16, false);            /* 1 below */
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, va - PAGE, k, 256), 256, false);       /* page below */
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, end - 15, k, 16), 16, false);          /* 1 past end */
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, end, k, 64), 64, false);               /* at end */
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, UINT64_MAX - 7, k, 16), 16, false);    /* wraps */
    /* a RETH promising 4 GiB - 1 bytes at the region start: the length check, not the payload,
     * must refuse it (it is a FIRST packet: the rest would follow) */
    struct mlxd_roce_pkt p = wr(&s, MLXD_ROCE_TRANSPORT_UC, va, k, 0xffffffffu);
    p.opcode = MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_FIRST;
    send_pkt(&s, 2, p, 1024, false);
    struct mlxd_roce_pkt m = { .opcode = MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_MIDDLE,
                               .dest_qp = s.qpn, .psn = s.psn++ };
    send_pkt(&s, 2, m, 1024, false);
    wait_rx(&s, 7);
    ck_assert_msg(changed(&s) == 0, "%zu bytes changed", changed(&s));
    sec_down(&s);
}
END_TEST

START_TEST(wrong_rkey_refused)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, MLXD_ACCESS_REMOTE_WRITE);
    uint32_t k = rw_key(&s);
    uint32_t bad[] = { k + 1, k - 1, k ^ 0x80000000u, k ^ 0xff, 0, 0xffffffffu, 0x100 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, rw_va(&s), bad[i], 32), 32, false);
    wait_rx(&s, sizeof bad / sizeof bad[0]);
    ck_assert_msg(changed(&s) == 0, "%zu bytes changed", changed(&s));
    sec_down(&s);
}
END_TEST

START_TEST(region_without_remote_write)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, MLXD_ACCESS_REMOTE_WRITE);
    struct mlxd_remote lo = mlxd_region_remote(s.lo);
    ck_assert_uint_eq(lo.addr, (uint64_t)(uintptr_t)(s.mem + 4 * PAGE));
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, lo.addr, lo.rkey, 64), 64, false);
    /* and the writable region's VA with the read-only region's key */
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, rw_va(&s), lo.rkey, 64), 64, false);
    wait_rx(&s, 2);
    ck_assert_msg(changed(&s) == 0, "%zu bytes changed", changed(&s));
    sec_down(&s);
}
END_TEST

START_TEST(qp_without_remote_write)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, 0);
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, rw_va(&s), rw_key(&s), 64), 64, false);
    wait_rx(&s, 1);
    ck_assert_msg(changed(&s) == 0, "%zu bytes changed", changed(&s));
    sec_down(&s);
}
END_TEST

START_TEST(write_longer_than_reth)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, MLXD_ACCESS_REMOTE_WRITE);
    struct mlxd_port_info pi;
    ck_assert_int_eq(mlxd_port_info(s.nic, &pi), 0);
    uint32_t mtu = pi.active_mtu_bytes;
    ck_assert_uint_le(2 * mtu, 2 * PAGE);
    /* region-end - mtu: a FIRST that promises mtu bytes (fits exactly), then a MIDDLE and a LAST
     * that would carry 2 * mtu more, past the region's end */
    uint64_t va = rw_va(&s) + 2 * PAGE - mtu;
    struct mlxd_roce_pkt f = wr(&s, MLXD_ROCE_TRANSPORT_UC, va, rw_key(&s), mtu);
    f.opcode = MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_FIRST;
    send_pkt(&s, 2, f, mtu, false);
    struct mlxd_roce_pkt m = { .opcode = MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_MIDDLE,
                               .dest_qp = s.qpn, .psn = s.psn++ };
    send_pkt(&s, 2, m, mtu, false);
    struct mlxd_roce_pkt l = { .opcode = MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_LAST,
                               .dest_qp = s.qpn, .psn = s.psn++ };
    send_pkt(&s, 2, l, mtu, false);
    wait_rx(&s, 3);
    /* the FIRST may land (mtu bytes at the region's end: inside), nothing else */
    size_t c = changed(&s);
    ck_assert_msg(c == 0 || c == mtu, "%zu bytes changed (FIRST is %u)", c, mtu);
    for (size_t i = 3 * PAGE; i < s.memlen; i++) ck_assert_uint_eq(s.mem[i], PAT);
    sec_down(&s);
}
END_TEST

START_TEST(bad_icrc_ignored)
{
    struct sec s;
    sec_up(&s, MLXD_QP_UC, MLXD_ACCESS_REMOTE_WRITE);
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_UC, rw_va(&s), rw_key(&s), 64), 64, true);
    wait_rx(&s, 1);
    ck_assert_uint_eq(changed(&s), 0);
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &st), 0);
    ck_assert_uint_eq(st.rx_bad_icrc, 1);
    sec_down(&s);
}
END_TEST

START_TEST(rc_access_error_breaks_qp)
{
    struct sec s;
    sec_up(&s, MLXD_QP_RC, MLXD_ACCESS_REMOTE_WRITE);
    /* RC: PSN must be the expected one (the peer's psn 100) */
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_RC, rw_va(&s), rw_key(&s) + 1, 64), 64, false);
    /* after the access error the QP is in ERR: even a correct packet is not executed */
    send_pkt(&s, 2, wr(&s, MLXD_ROCE_TRANSPORT_RC, rw_va(&s), rw_key(&s), 64), 64, false);
    wait_rx(&s, 2);
    ck_assert_uint_eq(changed(&s), 0);
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &st), 0);
    ck_assert_uint_eq(st.naks_sent, 1);
    ck_assert_uint_eq(st.rx_bad_state, 1);
    sec_down(&s);
}
END_TEST

Suite *security_suite(void)
{
    Suite *s = suite_create("security");
    TCase *tc = tcase_create("packets");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, write_lands_from_peer);
    tcase_add_test(tc, other_source_address_ignored);
    tcase_add_test(tc, outside_region_refused);
    tcase_add_test(tc, wrong_rkey_refused);
    tcase_add_test(tc, region_without_remote_write);
    tcase_add_test(tc, qp_without_remote_write);
    tcase_add_test(tc, write_longer_than_reth);
    tcase_add_test(tc, bad_icrc_ignored);
    tcase_add_test(tc, rc_access_error_breaks_qp);
    suite_add_tcase(s, tc);
    return s;
}
