/* libFuzzer target: the emulator's incoming-packet path (emu/nic/wire_udp.c rx_one ->
 * mlxd_roce_parse -> emu/nic/nic_resp.c nic_resp_packet), on a live emulated port whose RC and UC
 * QPs were made by the real driver (uverbs/, mlx5/).
 *
 * Input: up to 8 records [ctl u8][len u16 LE][len bytes of UDP payload: BTH .. iCRC].  Each
 * record becomes one packet from the connected peer's address, dispatched exactly as rx_one
 * does (rebuilt IPv4/UDP headers, parse with iCRC check, nic_resp_packet under dev->lock).
 * ctl steers the packet towards the interesting checks, so that the fuzzer need not guess
 * 24-bit QPNs and 32-bit keys:
 *   bits 0-1  1: dest QP := the RC QP, 2: := the UC QP, 3: := RC; 0: as given
 *   bit 2     RETH rkey := the writable region's rkey
 *   bit 3     RETH rkey := the rkey of a region registered without REMOTE_WRITE
 *   bit 4     RETH VA := somewhere from 64 bytes below the writable region to 64 above its end
 *   bit 5     PSN := the QP's expected PSN - 2 .. + 5 (duplicates, in order, jumps)
 *   bit 6     keep the input's iCRC (usually wrong) instead of recomputing it
 *   bit 7     opcode transport := the QP's (RC 0x00 / UC 0x20)
 *
 * Oracle (besides ASan/UBSan): after every input, the canary pages around the writable region
 * and the whole region without REMOTE_WRITE hold their pattern: no packet wrote outside a
 * registered region or through a key without the right.  The responder's PSN state is reset per
 * input; a QP that a packet moved to ERR is put back (see below). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "emu.h"
#include "nic/nic.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_roce.h"
#include "mlxd_uverbs.h"
#include "seeds.h"

/* seeds: the frames of fixtures/roce-pcaps, each packet steered to the UC QP, the writable
 * region's rkey and VA, in sequence (ctl 0xb6), and the same to the RC QP (ctl 0xb5) */
static void emit(const struct mlxd_capture *c, const char *dir, unsigned *n)
{
    static uint8_t s[8 * 1500];
    for (size_t f = 0; f < c->nframes && f < 8; f++) {
        for (int t = 0; t < 2; t++) {
            size_t o = 0;
            for (uint32_t k = 0; k < c->frames[f].count && k < 8; k++) {
                const struct mlxd_capture_packet *p = &c->pkts[c->frames[f].first + k];
                uint32_t ul = p->len - MLXD_ROCE_BTH_OFF;
                if (ul > 1400) ul = 1400;   /* keeps the seeds small; the MTU checks see it */
                s[o] = t ? 0xb5 : 0xb6;
                s[o + 1] = (uint8_t)ul;
                s[o + 2] = (uint8_t)(ul >> 8);
                memcpy(s + o + 3, p->ip + MLXD_ROCE_BTH_OFF, ul);
                o += 3 + ul;
            }
            seed_write(dir, (*n)++, s, o);
        }
    }
}

#define PAGE 4096u
#define RW_LEN (2 * PAGE)
#define CANARY 0xa5

static struct mlxd_nic *nic;
static struct mlxd_cq *cq;
static struct mlxd_region *rw, *ro;
static struct mlxd_qp *qps[2];        /* RC, UC */
static uint32_t qpn[2], epsn0[2];
static uint8_t *mem;                  /* [canary page][RW_LEN writable][canary page][RO page] */
static uint32_t peer_ip;
static struct nic_dev *nd;

static void die(const char *what)
{
    fprintf(stderr, "fuzz_wire: %s: %s\n", what, mlxd_errmsg());
    abort();
}

static void post_all(struct mlxd_qp *qp)
{
    int room = mlxd_qp_recv_room(qp);
    struct mlxd_local l = { (uint64_t)(uintptr_t)(mem + PAGE + PAGE), 512, 0 };
    l.lkey = mlxd_region_local(rw).lkey;
    struct mlxd_recv r[64];
    for (int i = 0; i < room && i < 64; i++)
        r[i] = (struct mlxd_recv){ .wr_id = (uint64_t)i, .num_local = 1, .local = &l };
    if (room > 0 && mlxd_qp_receive(qp, r, (size_t)(room < 64 ? room : 64)) < 0) die("receive");
}

static void make_qp(int i)
{
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = i ? MLXD_QP_UC : MLXD_QP_RC,
                               .send_depth = 16, .recv_depth = 64, .psn = 1 };
    if (mlxd_qp_create(cq, &qo, &qps[i])) die("qp_create");
    struct mlxd_endpoint peer = { .qpn = 0x77 + (uint32_t)i, .psn = 0x100 };
    peer.gid[10] = peer.gid[11] = 0xff;
    uint32_t ip = htonl(peer_ip);
    memcpy(peer.gid + 12, &ip, 4);
    struct mlxd_connect_opts co = { .sz = sizeof co,
        .peer_access = MLXD_ACCESS_REMOTE_WRITE | (i ? 0 : MLXD_ACCESS_REMOTE_READ), .path_mtu = 1 };
    if (mlxd_qp_connect(qps[i], &peer, &co)) die("connect");
    struct mlxd_endpoint me;
    mlxd_qp_endpoint(qps[i], &me);
    qpn[i] = me.qpn;
    post_all(qps[i]);
    pthread_mutex_lock(&nd->dev->lock);
    struct emu_qp *eq = nd->dev->qp_by_qpn(nd->dev, qpn[i]);
    epsn0[i] = ((struct nic_qp *)eq->nic)->epsn;
    pthread_mutex_unlock(&nd->dev->lock);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    seeds_from_pcaps(emit);
    setenv("MLXD_EMU_SPIN_US", "0", 1);
    unsigned v = (unsigned)getpid();
    char spec[96];
    unsigned a = 1 + v % 250, b = (v / 250) % 250;
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1", a, b);
    peer_ip = (127u << 24) | (a << 16) | (b << 8) | 2;
    if (mlxd_emu_configure(spec)) die("configure");
    if (mlxd_open("mlx5_0", NULL, &nic)) die("open");
    nd = nic_dev_get(0);
    if (!nd) die("no engine");
    mem = mmap(NULL, 4 * PAGE + RW_LEN - PAGE, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) abort();
    memset(mem, CANARY, 4 * PAGE + RW_LEN - PAGE);
    struct mlxd_region_opts o = { .sz = sizeof o, .access = MLXD_ACCESS_LOCAL_WRITE |
                                  MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ };
    if (mlxd_region_register(nic, mem + PAGE, RW_LEN, &o, &rw)) die("register rw");
    o.access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_READ;
    if (mlxd_region_register(nic, mem + 2 * PAGE + RW_LEN, PAGE, &o, &ro)) die("register ro");
    if (mlxd_cq_create(nic, 1024, NULL, &cq)) die("cq");
    make_qp(0);
    make_qp(1);
    return 0;
}

static void check_canaries(void)
{
    const uint8_t *c[3] = { mem, mem + PAGE + RW_LEN, mem + 2 * PAGE + RW_LEN };
    for (int k = 0; k < 3; k++)
        for (unsigned i = 0; i < PAGE; i++)
            if (c[k][i] != CANARY) {
                fprintf(stderr, "fuzz_wire: byte %u of %s was written\n", i,
                        k == 0 ? "the page below the region" : k == 1 ? "the page above the region"
                                                              : "the region without REMOTE_WRITE");
                abort();
            }
}

static void put24(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v; }
static uint32_t get24(const uint8_t *p) { return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t pkt[MLXD_ROCE_BTH_OFF + 65536];
    struct mlxd_remote rr = mlxd_region_remote(rw), rro = mlxd_region_remote(ro);
    pthread_mutex_lock(&nd->dev->lock);
    for (int i = 0; i < 2; i++) {
        struct nic_qp *q = nd->dev->qp_by_qpn(nd->dev, qpn[i])->nic;
        q->epsn = epsn0[i];
        q->in_msg = q->uc_drop = q->nak_sent = false;
    }
    size_t off = 0;
    for (int n = 0; n < 8 && off + 3 <= size; n++) {
        uint8_t ctl = data[off];
        size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
        off += 3;
        if (len > size - off) len = size - off;
        uint8_t *u = pkt + MLXD_ROCE_BTH_OFF;
        memcpy(u, data + off, len);
        off += len;
        int which = (ctl & 3) == 2 ? 1 : 0;
        if (len >= MLXD_ROCE_BTH_LEN) {
            if (ctl & 3) put24(u + 5, qpn[which]);
            if (ctl & 0x80) u[0] = (uint8_t)((u[0] & 0x1f) | (which ? MLXD_ROCE_TRANSPORT_UC : 0));
            if (ctl & 0x20) {
                struct emu_qp *eq = nd->dev->qp_by_qpn(nd->dev, get24(u + 5));
                uint32_t e = eq && eq->nic ? ((struct nic_qp *)eq->nic)->epsn : 0;
                put24(u + 9, (e + (get24(u + 9) & 7) - 2) & MLXD_ROCE_PSN_MASK);
            }
            uint8_t *reth = u + MLXD_ROCE_BTH_LEN;
            if ((mlxd_roce_opcode_hdrs(u[0]) & MLXD_ROCE_HAS_RETH) &&
                len >= MLXD_ROCE_BTH_LEN + MLXD_ROCE_RETH_LEN) {
                uint32_t k = ctl & 4 ? rr.rkey : ctl & 8 ? rro.rkey : 0;
                if (k) { uint32_t be = htonl(k); memcpy(reth + 8, &be, 4); }
                if (ctl & 0x10) {
                    uint64_t va;
                    memcpy(&va, reth, 8);
                    va = rr.addr - 64 + be64toh(va) % (RW_LEN + 128);
                    va = htobe64(va);
                    memcpy(reth, &va, 8);
                }
            }
        }
        mlxd_roce_wrap_udp(pkt, peer_ip, 4791, ntohl(nd->self.sin_addr.s_addr),
                           ntohs(nd->self.sin_port), len);
        uint32_t plen = (uint32_t)len + MLXD_ROCE_BTH_OFF;
        if (!(ctl & 0x40) && len >= MLXD_ROCE_BTH_LEN + 4) mlxd_roce_icrc_fill(pkt, plen);
        struct mlxd_roce_pkt p;
        int r = mlxd_roce_parse(pkt, plen, 0, true, &p);
        if (r == 0) nic_resp_packet(nd, &p);
    }
    /* A QP a packet moved to ERR: 63 times in 64 it is put back to RTS in place (what
     * ERR->RESET->INIT->RTR->RTS would do, minus the ring reset: the receives the engine flushed
     * are re-posted below); every 64th time it is destroyed and made again by the driver. */
    static unsigned nbroken;
    bool broken[2] = { false, false };
    for (int i = 0; i < 2; i++) {
        struct emu_qp *eq = nd->dev->qp_by_qpn(nd->dev, qpn[i]);
        if (eq->state != NIC_QPS_ERR) continue;
        if (++nbroken % 64) eq->state = NIC_QPS_RTS;
        else broken[i] = true;
    }
    pthread_mutex_unlock(&nd->dev->lock);
    check_canaries();
    struct mlxd_completion c[64];
    while (mlxd_cq_poll(cq, c, 64) > 0) {}
    for (int i = 0; i < 2; i++) {
        if (broken[i]) {
            if (mlxd_qp_destroy(qps[i])) die("qp_destroy");
            while (mlxd_cq_poll(cq, c, 64) > 0) {}
            make_qp(i);
        } else {
            post_all(qps[i]);
        }
    }
    return 0;
}
