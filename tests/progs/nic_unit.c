/* nic_unit: the emulated NIC exercised directly, with every object built by hand the way the
 * kernel half builds them (emu.h), and every ring written and read by hand the way a driver
 * does (rdma-core providers/mlx5/cq.c, qp.c and verbs.c; mlx5dv.h layouts).
 *
 *   nic_unit <case> [udp_port]     exit status 0 = pass; a failure prints file:line and exits 1
 *
 * The NIC sources are compiled into this program (their hooks are hidden inside the emulator
 * library); tests/test_emu_nic.c runs one case per Check test. */
#define NIC_NO_WEAK_SERVICES 1
#include "../../emu/nic/nic_engine.c"
#include "../../emu/nic/nic_clock.c"
#include "../../emu/nic/nic_cq.c"
#include "../../emu/nic/nic_cqe_comp.c"
#include "../../emu/nic/nic_req.c"
#include "../../emu/nic/nic_doorbell.c"
#include "../../emu/nic/nic_resp.c"
#include "../../emu/nic/nic_atomic.c"
#include "../../emu/nic/nic_srq.c"
#include "../../emu/nic/nic_ud.c"
#include "../../emu/nic/nic_mw.c"
#include "../../emu/nic/wire_udp.c"
#include "../../emu/nic/pcap_writer.c"
#include "../../emu/nic/port_share.c"
#include "../../emu/nic/nic_peer.c"
#include "../../abi/roce.c"
#include "../../abi/error.c"

#include <arpa/inet.h>
#include <stdarg.h>
#include <sys/wait.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); exit(1); } } while (0)
#define CHECK_EQ(a, b) do { unsigned long long _a = (a), _b = (b); if (_a != _b) { fprintf(stderr, "%s:%d: %s == 0x%llx, expected %s == 0x%llx\n", __FILE__, __LINE__, #a, _a, #b, _b); exit(1); } } while (0)

/* ---- recorded events (the kernel half's services, here) ---- */
struct ev { int fd; uint64_t element; uint32_t type; };
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ev async_evs[256];
static unsigned n_async;
static uint64_t comp_evs[256];
static unsigned n_comp;

void emu_async_event(int async_fd, uint64_t element, uint32_t event_type)
{
    pthread_mutex_lock(&ev_lock);
    if (n_async < 256) async_evs[n_async++] = (struct ev){async_fd, element, event_type};
    pthread_mutex_unlock(&ev_lock);
}
void emu_comp_event(struct emu_cq *cq)
{
    pthread_mutex_lock(&ev_lock);
    if (n_comp < 256) comp_evs[n_comp++] = cq->user_handle;
    pthread_mutex_unlock(&ev_lock);
}
static unsigned count_comp(uint64_t h)
{
    pthread_mutex_lock(&ev_lock);
    unsigned n = 0;
    for (unsigned i = 0; i < n_comp; i++) n += comp_evs[i] == h;
    pthread_mutex_unlock(&ev_lock);
    return n;
}
/* Waits (up to 2 s on a busy machine) for at least `expect` completion events of CQ h, then
 * 10 ms more for any extra one; returns how many there were. */
static unsigned wait_comp(uint64_t h, unsigned expect)
{
    for (int i = 0; i < 200 && count_comp(h) < expect; i++) usleep(10000);
    usleep(10000);
    return count_comp(h);
}

/* Reads device d's counters into *st until cond holds (up to 2 s: the engine may lag on a loaded
 * machine), then once more 10 ms later so that an extra count shows; the caller then checks the
 * exact values.  Instead of a fixed sleep that a starved engine outlasts. */
#define WAIT_STATS(d, st, cond) do {                                                  \
        for (int w_ = 0; w_ < 200; w_++) {                                            \
            CHECK_EQ(mlxd_emu_nic_stats((d), (st)), 0);                               \
            if (cond) break;                                                          \
            usleep(10000);                                                            \
        }                                                                             \
        usleep(10000);                                                                \
        CHECK_EQ(mlxd_emu_nic_stats((d), (st)), 0);                                   \
    } while (0)

static unsigned count_async(uint64_t h, uint32_t type)
{
    pthread_mutex_lock(&ev_lock);
    unsigned n = 0;
    for (unsigned i = 0; i < n_async; i++) n += async_evs[i].element == h && async_evs[i].type == type;
    pthread_mutex_unlock(&ev_lock);
    return n;
}

/* ---- hand-built kernel objects ---- */
#define NDEV 2
static struct emu_device devs[NDEV];
static struct emu_context ctxs[NDEV];
static struct emu_pd pds[NDEV];
static struct emu_mr *mrs[NDEV][16];
static struct emu_qp *qps[NDEV][16];
static uint8_t *uar_pages[NDEV];
static struct emu_uar uars[NDEV];

static int dev_of(struct emu_device *d) { return (int)(d - devs); }
static struct emu_mr *mr_by_key(struct emu_device *d, uint32_t key)
{
    for (int i = 0; i < 16; i++) {
        struct emu_mr *m = mrs[dev_of(d)][i];
        if (m && (m->lkey == key || m->rkey == key)) return m;
    }
    return NULL;
}
static struct emu_qp *qp_by_qpn(struct emu_device *d, uint32_t qpn)
{
    for (int i = 0; i < 16; i++) {
        struct emu_qp *q = qps[dev_of(d)][i];
        if (q && q->qpn == qpn) return q;
    }
    return NULL;
}

static void lock(int d) { pthread_mutex_lock(&devs[d].lock); }
static void unlock(int d) { pthread_mutex_unlock(&devs[d].lock); }

static void dev_open(int d, uint16_t port, unsigned mtu)
{
    struct emu_device *dev = &devs[d];
    memset(dev, 0, sizeof *dev);
    pthread_mutex_init(&dev->lock, NULL);
    snprintf(dev->cfg.name, sizeof dev->cfg.name, "mlx5_%d", d);
    dev->cfg.index = (unsigned)d;
    dev->cfg.ipv4.s_addr = htonl(0x7f000000u | (uint32_t)(100 + d));
    dev->cfg.udp_port = port;
    dev->cfg.dst_udp_port = port;
    dev->cfg.mtu = mtu;
    dev->cfg.link_up = true;
    dev->cfg.ethernet = true;
    dev->qp_by_qpn = qp_by_qpn;
    dev->mr_by_key = mr_by_key;
    ctxs[d] = (struct emu_context){.dev = dev, .fd = 100 + d, .has_ucontext = true,
                                   .cqe_version = 1, .default_async_fd = 200 + d};
    pds[d] = (struct emu_pd){.handle = 1, .pdn = 1, .ctx = &ctxs[d]};
    uar_pages[d] = aligned_alloc(4096, 4096);
    memset(uar_pages[d], 0, 4096);
    uars[d] = (struct emu_uar){.handle = 1, .page_id = 1, .type = 1, .page = uar_pages[d]};
    lock(d);
    dev->open_contexts = 1;
    int rc = emu_nic_device_open(dev);
    unlock(d);
    CHECK_EQ(rc, 0);
}

static void dev_close(int d)
{
    lock(d);
    emu_nic_device_close(&devs[d]);
    unlock(d);
}

static struct emu_mr *mr_new(int d, size_t len, uint32_t key, uint32_t access)
{
    struct emu_mr *m = calloc(1, sizeof *m);
    uint8_t *buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    memset(buf, 0, len);
    *m = (struct emu_mr){.handle = key, .lkey = key, .rkey = key, .addr = (uintptr_t)buf,
                         .iova = (uintptr_t)buf, .length = len, .access = access,
                         .dmabuf_fd = -1, .pd = &pds[d]};
    lock(d);
    for (int i = 0; i < 16; i++) if (!mrs[d][i]) { mrs[d][i] = m; break; }
    unlock(d);
    return m;
}
#define MRP(m) ((uint8_t *)(uintptr_t)(m)->addr)

struct hcq { struct emu_cq cq; uint8_t *buf; volatile uint32_t *db; uint32_t ci, n; int dev; };

static struct hcq *cq_new(int d, uint32_t n, uint64_t handle)
{
    struct hcq *h = calloc(1, sizeof *h);
    h->buf = aligned_alloc(4096, (n * 64 + 4095) & ~4095u);
    memset(h->buf, 0, n * 64);
    /* INVALID, owner 0 (rdma-core providers/mlx5/cq.c mlx5_alloc_cq_buf) */
    for (uint32_t i = 0; i < n; i++) h->buf[i * 64 + 63] = 0xf0;
    h->db = aligned_alloc(64, 64);
    memset((void *)h->db, 0, 64);
    h->n = n;
    h->dev = d;
    h->cq = (struct emu_cq){.handle = (uint32_t)handle, .cqn = (uint32_t)(0x80 + handle),
                            .user_handle = handle, .buf = h->buf, .ncqe = n, .cqe_size = 64,
                            .dbrec = h->db, .uar = &uars[d], .async_fd = 200 + d, .ctx = &ctxs[d]};
    lock(d);
    CHECK_EQ(emu_nic_cq_create(&h->cq), 0);
    unlock(d);
    return h;
}

/* polls one CQE (rdma-core providers/mlx5/cq.c get_sw_cqe); returns 1 and copies it, 0 on
 * timeout */
static int cq_poll(struct hcq *h, uint8_t out[64], int timeout_ms)
{
    uint64_t end = nic_now_ns() + (uint64_t)timeout_ms * 1000000;
    for (;;) {
        uint8_t *e = h->buf + (h->ci & (h->n - 1)) * 64;
        uint8_t op = __atomic_load_n(&e[63], __ATOMIC_ACQUIRE);
        if ((op >> 4) != 0xf && (op & 1) == ((h->ci & h->n) ? 1 : 0)) {
            memcpy(out, e, 64);
            h->ci++;
            __atomic_store_n(&h->db[0], htonl(h->ci & 0xffffff), __ATOMIC_RELEASE);
            return 1;
        }
        if (nic_now_ns() > end) return 0;
        usleep(50);
    }
}

static void cq_arm(struct hcq *h, uint32_t sn, bool solicited)
{
    uint32_t word = (sn & 3) << 28 | (solicited ? 1u << 24 : 0) | (h->ci & 0xffffff);
    __atomic_store_n(&h->db[1], htonl(word), __ATOMIC_RELEASE);
    uint64_t v = htobe64((uint64_t)word << 32 | h->cq.cqn);
    __atomic_store_n((uint64_t *)(uar_pages[h->dev] + 0x20), v, __ATOMIC_RELEASE);
}

struct hqp { struct emu_qp qp; uint8_t *buf; volatile uint32_t *db; uint16_t sq_pi, rq_pi; int dev; };

static struct hqp *qp_new(int d, uint32_t type, uint32_t qpn, struct hcq *scq, struct hcq *rcq,
                          uint32_t sq_cnt, uint32_t rq_cnt)
{
    struct hqp *h = calloc(1, sizeof *h);
    uint32_t rq_shift = 6;  /* 4 data segments per receive WQE */
    size_t len = ((size_t)rq_cnt << rq_shift) + sq_cnt * 64;
    h->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    memset(h->buf, 0, len);
    h->db = aligned_alloc(64, 64);
    memset((void *)h->db, 0, 64);
    h->dev = d;
    h->qp = (struct emu_qp){.handle = qpn, .qpn = qpn, .type = type, .state = NIC_QPS_RESET,
                            .user_handle = 0x1000 + qpn, .pd = &pds[d], .send_cq = &scq->cq,
                            .recv_cq = &rcq->cq, .buf = h->buf, .rq = h->buf,
                            .sq = h->buf + ((size_t)rq_cnt << rq_shift), .sq_wqe_cnt = sq_cnt,
                            .rq_wqe_cnt = rq_cnt, .rq_wqe_shift = rq_shift, .dbrec = h->db,
                            .uar = &uars[d], .bf_off = 0x800, .uidx = qpn & 0xfff, .max_inline = 128,
                            .async_fd = 200 + d, .ctx = &ctxs[d]};
    lock(d);
    for (int i = 0; i < 16; i++) if (!qps[d][i]) { qps[d][i] = &h->qp; break; }
    CHECK_EQ(emu_nic_qp_create(&h->qp), 0);
    unlock(d);
    return h;
}

static uint32_t qp_state(struct hqp *h)
{
    lock(h->dev);
    uint32_t st = h->qp.state;
    unlock(h->dev);
    return st;
}

static void qp_modify(struct hqp *h, uint32_t state)
{
    lock(h->dev);
    uint32_t old = h->qp.state;
    h->qp.state = state;
    emu_nic_qp_modified(&h->qp, old);
    unlock(h->dev);
}

/* RC timer attributes qp_connect uses: 4.096 us x 2^12 = 16.8 ms, 7 retries (generous: the
 * machine is shared, an engine thread may not run for tens of milliseconds) */
static uint8_t g_timeout = 12, g_retry = 7;

/* RESET -> INIT -> RTR -> RTS towards peer (IPv4-mapped GID of the peer's device) */
static void qp_connect(struct hqp *h, int peer_dev, uint32_t peer_qpn, uint32_t my_psn,
                       uint32_t peer_psn, uint8_t mtu_enum)
{
    struct emu_qp_attr *a = &h->qp.attr;
    a->port_num = 1;
    a->access_flags = NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE | NIC_ACC_REMOTE_READ;
    qp_modify(h, NIC_QPS_INIT);
    a->path_mtu = mtu_enum;
    a->dest_qp_num = peer_qpn;
    a->rq_psn = peer_psn;
    a->max_dest_rd_atomic = 1;
    a->min_rnr_timer = 1;     /* 0.01 ms */
    memset(a->dgid, 0, 16);
    a->dgid[10] = a->dgid[11] = 0xff;
    uint32_t ip = devs[peer_dev].cfg.ipv4.s_addr;
    memcpy(a->dgid + 12, &ip, 4);
    a->hop_limit = 64;
    qp_modify(h, NIC_QPS_RTR);
    a->sq_psn = my_psn;
    a->timeout = g_timeout;
    a->retry_cnt = g_retry;
    a->rnr_retry = 7;
    a->max_rd_atomic = 1;
    qp_modify(h, NIC_QPS_RTS);
}

struct sge { uint32_t len, lkey; uint64_t addr; };
static bool g_skip_dbrec;   /* ring only the UAR doorbell (as BlueFlame-only posting would) */
static bool g_skip_uar;     /* write only the doorbell record (a driver without the UAR write) */

/* Posts one send WQE (rdma-core providers/mlx5/qp.c _mlx5_post_send, post_send_db): ctrl
 * [+ raddr] + data segments; rings the doorbell. */
static uint16_t post_send(struct hqp *h, uint8_t opcode, uint8_t fm_ce_se, uint32_t imm_be,
                          uint64_t raddr, uint32_t rkey, const struct sge *sg, int nsg)
{
    uint8_t w[256];
    memset(w, 0, sizeof w);
    unsigned off = 16;
    if (opcode == NIC_OP_RDMA_WRITE || opcode == NIC_OP_RDMA_WRITE_IMM || opcode == NIC_OP_RDMA_READ) {
        uint64_t ra = htobe64(raddr);
        uint32_t rk = htonl(rkey);
        memcpy(w + 16, &ra, 8);
        memcpy(w + 24, &rk, 4);
        off = 32;
    }
    for (int i = 0; i < nsg; i++, off += 16) {
        uint32_t bc = htonl(sg[i].len), lk = htonl(sg[i].lkey);
        uint64_t ad = htobe64(sg[i].addr);
        memcpy(w + off, &bc, 4); memcpy(w + off + 4, &lk, 4); memcpy(w + off + 8, &ad, 8);
    }
    uint32_t ds = off / 16;
    uint16_t idx = h->sq_pi;
    uint32_t v = htonl((uint32_t)idx << 8 | opcode);
    memcpy(w, &v, 4);
    v = htonl(h->qp.qpn << 8 | ds);
    memcpy(w + 4, &v, 4);
    w[11] = fm_ce_se;
    memcpy(w + 12, &imm_be, 4);
    uint32_t wqebbs = (ds + 3) / 4;
    for (uint32_t b = 0; b < wqebbs; b++)
        memcpy((uint8_t *)h->qp.sq + ((h->sq_pi + b) & (h->qp.sq_wqe_cnt - 1)) * 64, w + b * 64, 64);
    h->sq_pi = (uint16_t)(h->sq_pi + wqebbs);
    if (!g_skip_dbrec) __atomic_store_n(&h->db[1], htonl(h->sq_pi), __ATOMIC_RELEASE);
    uint64_t ctrl8;
    memcpy(&ctrl8, w, 8);
    if (!g_skip_uar) __atomic_store_n((uint64_t *)(uar_pages[h->dev] + 0x800), ctrl8, __ATOMIC_RELEASE);
    return idx;
}

static uint16_t post_recv(struct hqp *h, const struct sge *sg, int nsg)
{
    uint16_t idx = h->rq_pi;
    uint8_t *w = (uint8_t *)h->qp.rq + ((size_t)(idx & (h->qp.rq_wqe_cnt - 1)) << h->qp.rq_wqe_shift);
    memset(w, 0, 1u << h->qp.rq_wqe_shift);
    int i;
    for (i = 0; i < nsg; i++) {
        uint32_t bc = htonl(sg[i].len), lk = htonl(sg[i].lkey);
        uint64_t ad = htobe64(sg[i].addr);
        memcpy(w + i * 16, &bc, 4); memcpy(w + i * 16 + 4, &lk, 4); memcpy(w + i * 16 + 8, &ad, 8);
    }
    if (i < (int)((1u << h->qp.rq_wqe_shift) / 16)) {
        uint32_t lk = htonl(0x100);           /* MLX5_INVALID_LKEY terminator */
        memcpy(w + i * 16 + 4, &lk, 4);
    }
    h->rq_pi++;
    __atomic_store_n(&h->db[0], htonl(h->rq_pi), __ATOMIC_RELEASE);
    return idx;
}

/* The CQE the mlx5 layout says the hardware writes (mlx5dv.h struct mlx5_cqe64 offsets). */
static void expect_cqe(uint8_t e[64], uint8_t opcode, uint8_t wqe_op, uint32_t qpn, uint32_t uidx,
                       uint16_t wqe_counter, uint32_t byte_cnt, uint32_t imm_be, bool se,
                       uint8_t owner)
{
    memset(e, 0, 64);
    e[32] = 0; e[33] = (uint8_t)(uidx >> 16); e[34] = (uint8_t)(uidx >> 8); e[35] = (uint8_t)uidx;
    memcpy(e + 36, &imm_be, 4);
    e[44] = (uint8_t)(byte_cnt >> 24); e[45] = (uint8_t)(byte_cnt >> 16);
    e[46] = (uint8_t)(byte_cnt >> 8); e[47] = (uint8_t)byte_cnt;
    e[56] = wqe_op; e[57] = (uint8_t)(qpn >> 16); e[58] = (uint8_t)(qpn >> 8); e[59] = (uint8_t)qpn;
    e[60] = (uint8_t)(wqe_counter >> 8); e[61] = (uint8_t)wqe_counter;
    e[63] = (uint8_t)(opcode << 4 | (se ? 2 : 0) | owner);
}
static void expect_err_cqe(uint8_t e[64], uint8_t opcode, uint8_t synd, uint8_t vendor,
                           uint8_t wqe_op, uint32_t qpn, uint32_t uidx, uint16_t wqe_counter,
                           uint8_t owner)
{
    memset(e, 0, 64);
    e[33] = (uint8_t)(uidx >> 16); e[34] = (uint8_t)(uidx >> 8); e[35] = (uint8_t)uidx;
    e[54] = vendor; e[55] = synd;
    e[56] = wqe_op; e[57] = (uint8_t)(qpn >> 16); e[58] = (uint8_t)(qpn >> 8); e[59] = (uint8_t)qpn;
    e[60] = (uint8_t)(wqe_counter >> 8); e[61] = (uint8_t)wqe_counter;
    e[63] = (uint8_t)(opcode << 4 | owner);
}

static void dump(const char *what, const uint8_t *b)
{
    fprintf(stderr, "%s:", what);
    for (int i = 0; i < 64; i++) fprintf(stderr, "%s%02x", i % 16 ? " " : "\n  ", b[i]);
    fprintf(stderr, "\n");
}

/* Compares a CQE with the expected bytes; the timestamp (48..55: the device timer, emu/nic/nic_clock.c)
 * must lie in [t0, t1]. */
static void check_cqe(const uint8_t got[64], uint8_t want[64], uint64_t t0, uint64_t t1, int line)
{
    if (want[63] >> 4 < 13) {
        uint64_t ts;
        memcpy(&ts, got + 48, 8);
        ts = be64toh(ts);
        if (ts < t0 || ts > t1) {
            fprintf(stderr, "line %d: timestamp %llu outside [%llu, %llu]\n", line,
                    (unsigned long long)ts, (unsigned long long)t0, (unsigned long long)t1);
            exit(1);
        }
        memcpy(want + 48, got + 48, 8);
    }
    if (memcmp(got, want, 64)) {
        fprintf(stderr, "line %d: CQE differs\n", line);
        dump("got", got);
        dump("want", want);
        exit(1);
    }
}
#define CHECK_CQE(got, want, t0, t1) check_cqe(got, want, t0, t1, __LINE__)

static uint32_t be(uint32_t x) { return htonl(x); }

static uint16_t g_port = 24791;

/* ---- cases ---------------------------------------------------------------------------------- */

/* UC RDMA WRITE with immediate, 3000 bytes over MTU 1024 (FIRST/MIDDLE/LAST_IMM), and every CQE
 * byte on both sides. */
static void case_uc_write_imm(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct hcq *sc = cq_new(0, 16, 1), *rc = cq_new(1, 16, 2);
    struct hqp *a = qp_new(0, 3, 0x11, sc, sc, 16, 0), *b = qp_new(1, 3, 0x22, rc, rc, 16, 16);
    qp_connect(a, 1, 0x22, 100, 200, 3);
    qp_connect(b, 0, 0x11, 200, 100, 3);
    struct emu_mr *src = mr_new(0, 8192, 0x501, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *dst = mr_new(1, 8192, 0x601, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    for (int i = 0; i < 3000; i++) MRP(src)[i] = (uint8_t)(i * 7 + 1);
    uint16_t r = post_recv(b, NULL, 0);
    uint64_t t0 = emu_nic_clock_cycles();
    struct sge sg = {3000, 0x501, src->addr};
    uint16_t w = post_send(a, NIC_OP_RDMA_WRITE_IMM, 0x08 | 0x02, be(0xdeadbeef), dst->addr + 100, 0x601, &sg, 1);
    uint8_t got[64], want[64];
    CHECK(cq_poll(rc, got, 2000));
    uint64_t t1 = emu_nic_clock_cycles();
    /* responder: RESP_WR_IMM (1), byte_cnt 3000, imm as sent, QPN 0x22, uidx 0x22, RQ WQE 0,
     * SE set (the WQE asked for a solicited event), owner 0 (first pass) */
    expect_cqe(want, NIC_CQE_RESP_WR_IMM, 0, 0x22, 0x22, r, 3000, be(0xdeadbeef), true, 0);
    CHECK_CQE(got, want, t0, t1);
    CHECK(cq_poll(sc, got, 2000));
    t1 = emu_nic_clock_cycles();
    /* requester: REQ (0), WQE opcode 0x09 in sop_drop_qpn[31:24], QPN 0x11, WQE counter 0 */
    expect_cqe(want, NIC_CQE_REQ, NIC_OP_RDMA_WRITE_IMM, 0x11, 0x11, w, 3000, 0, false, 0);
    CHECK_CQE(got, want, t0, t1);
    CHECK(memcmp(MRP(dst) + 100, MRP(src), 3000) == 0);
    CHECK(MRP(dst)[99] == 0 && MRP(dst)[3100] == 0);
    CHECK(!cq_poll(rc, got, 50) && !cq_poll(sc, got, 1));
    dev_close(0);
    dev_close(1);
}

struct pair { struct hcq *sa, *ra, *sb, *rb; struct hqp *a, *b; };

static struct pair pair_new(uint32_t type, uint32_t qa, uint32_t qb, uint32_t ncqe, uint8_t mtu_enum)
{
    struct pair p;
    p.sa = cq_new(0, ncqe, 10 + qa); p.ra = cq_new(0, ncqe, 20 + qa);
    p.sb = cq_new(1, ncqe, 10 + qb); p.rb = cq_new(1, ncqe, 20 + qb);
    p.a = qp_new(0, type, qa, p.sa, p.ra, 64, 64);
    p.b = qp_new(1, type, qb, p.sb, p.rb, 64, 64);
    qp_connect(p.a, 1, qb, 0xfffff0, 0x10, mtu_enum);   /* A's PSNs wrap past 2^24 */
    qp_connect(p.b, 0, qa, 0x10, 0xfffff0, mtu_enum);
    return p;
}

/* Every RC opcode, CQEs byte for byte, a 4-entry CQ so the owner bit flips every pass. */
static void case_rc_ops(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x31, 0x42, 4, 3);
    struct emu_mr *la = mr_new(0, 65536, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 65536, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE | NIC_ACC_REMOTE_READ);
    for (int i = 0; i < 65536; i++) { MRP(la)[i] = (uint8_t)(i * 13 + 5); MRP(lb)[i] = (uint8_t)(i * 3 + 1); }
    uint8_t got[64], want[64];
    uint32_t na = 0, nb = 0;   /* CQEs consumed on A's send CQ / B's recv CQ: owner = (n / 4) & 1 */
    uint64_t t0 = emu_nic_clock_cycles();

    /* 1. SEND 5000 B (5 packets) into two receive segments 3000 + 3000 */
    struct sge rs[2] = {{3000, 0x800, lb->addr + 10000}, {3000, 0x800, lb->addr + 20000}};
    uint16_t r = post_recv(p.b, rs, 2);
    struct sge s1 = {5000, 0x700, la->addr};
    uint16_t w = post_send(p.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s1, 1);
    CHECK(cq_poll(p.rb, got, 2000));
    expect_cqe(want, NIC_CQE_RESP_SEND, 0, 0x42, 0x42, r, 5000, 0, false, (nb++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    CHECK(cq_poll(p.sa, got, 2000));
    expect_cqe(want, NIC_CQE_REQ, NIC_OP_SEND, 0x31, 0x31, w, 5000, 0, false, (na++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    CHECK(!memcmp(MRP(lb) + 10000, MRP(la), 3000) && !memcmp(MRP(lb) + 20000, MRP(la) + 3000, 2000));
    CHECK(MRP(lb)[22000] == (uint8_t)(22000 * 3 + 1));

    /* 2. SEND with immediate, solicited, 10 bytes */
    r = post_recv(p.b, rs, 1);
    struct sge s2 = {10, 0x700, la->addr + 40000};
    w = post_send(p.a, NIC_OP_SEND_IMM, 0x08 | 0x02, be(0x01020304), 0, 0, &s2, 1);
    CHECK(cq_poll(p.rb, got, 2000));
    expect_cqe(want, NIC_CQE_RESP_SEND_IMM, 0, 0x42, 0x42, r, 10, be(0x01020304), true, (nb++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    CHECK(cq_poll(p.sa, got, 2000));
    expect_cqe(want, NIC_CQE_REQ, NIC_OP_SEND_IMM, 0x31, 0x31, w, 10, 0, false, (na++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    CHECK(!memcmp(MRP(lb) + 10000, MRP(la) + 40000, 10));

    /* 3. unsignalled RDMA WRITE 8000 B then a signalled NOP: one CQE, for the NOP */
    struct sge s3 = {8000, 0x700, la->addr + 1000};
    post_send(p.a, NIC_OP_RDMA_WRITE, 0, 0, lb->addr + 30000, 0x800, &s3, 1);
    w = post_send(p.a, NIC_OP_NOP, 0x08, 0, 0, 0, NULL, 0);
    CHECK(cq_poll(p.sa, got, 2000));
    expect_cqe(want, NIC_CQE_REQ, NIC_OP_NOP, 0x31, 0x31, w, 0, 0, false, (na++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    CHECK(!memcmp(MRP(lb) + 30000, MRP(la) + 1000, 8000));

    /* 4. RDMA READ 6000 B from B into A, two local segments */
    struct sge s4[2] = {{2500, 0x700, la->addr + 50000}, {3500, 0x700, la->addr + 60000}};
    w = post_send(p.a, NIC_OP_RDMA_READ, 0x08, 0, lb->addr + 100, 0x800, s4, 2);
    CHECK(cq_poll(p.sa, got, 2000));
    expect_cqe(want, NIC_CQE_REQ, NIC_OP_RDMA_READ, 0x31, 0x31, w, 6000, 0, false, (na++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    CHECK(!memcmp(MRP(la) + 50000, MRP(lb) + 100, 2500) && !memcmp(MRP(la) + 60000, MRP(lb) + 2600, 3500));

    /* 5. RDMA WRITE with immediate, 0 bytes */
    r = post_recv(p.b, rs, 1);
    w = post_send(p.a, NIC_OP_RDMA_WRITE_IMM, 0x08, be(0xa5a5a5a5), 0, 0, NULL, 0);
    CHECK(cq_poll(p.rb, got, 2000));
    expect_cqe(want, NIC_CQE_RESP_WR_IMM, 0, 0x42, 0x42, r, 0, be(0xa5a5a5a5), false, (nb++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    CHECK(cq_poll(p.sa, got, 2000));
    expect_cqe(want, NIC_CQE_REQ, NIC_OP_RDMA_WRITE_IMM, 0x31, 0x31, w, 0, 0, false, (na++ / 4) & 1);
    CHECK_CQE(got, want, t0, emu_nic_clock_cycles());

    /* 6. 20 more signalled WRITEs: the ring wraps several times */
    for (int i = 0; i < 20; i++) {
        struct sge s = {100, 0x700, la->addr + (uint64_t)i * 100};
        w = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + 40000 + (uint64_t)i * 100, 0x800, &s, 1);
        CHECK(cq_poll(p.sa, got, 2000));
        expect_cqe(want, NIC_CQE_REQ, NIC_OP_RDMA_WRITE, 0x31, 0x31, w, 100, 0, false, (na++ / 4) & 1);
        CHECK_CQE(got, want, t0, emu_nic_clock_cycles());
    }
    CHECK(!memcmp(MRP(lb) + 40000, MRP(la), 2000));
    CHECK(qp_state(p.a) == NIC_QPS_RTS && qp_state(p.b) == NIC_QPS_RTS);
    dev_close(0);
    dev_close(1);
}

static void set_faults(int d, double drop, double dup, double reorder, double corrupt, uint64_t seed)
{
    struct mlxd_emu_fault f;
    memset(&f, 0, sizeof f);
    f.sz = sizeof f;
    f.drop_rate = drop; f.dup_rate = dup; f.reorder_rate = reorder; f.corrupt_rate = corrupt;
    f.seed = seed;
    CHECK_EQ(mlxd_emu_fault_set((unsigned)d, &f), 0);
}

/* RC over a lossy wire (both directions): drop, duplicate, reorder, corrupt; every byte arrives
 * once and in order, every WQE completes successfully. */
static void case_rc_faults(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x51, 0x62, 256, 3);
    set_faults(0, 0.05, 0.05, 0.05, 0.02, 7);
    set_faults(1, 0.05, 0.05, 0.05, 0.02, 9);
    struct emu_mr *la = mr_new(0, 1 << 20, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 1 << 20, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE | NIC_ACC_REMOTE_READ);
    for (int i = 0; i < (1 << 20); i++) MRP(la)[i] = (uint8_t)(i * 31 + (i >> 9));
    uint8_t got[64];
    for (int i = 0; i < 120; i++) {
        uint32_t len = 1000 + (uint32_t)i * 37;
        uint64_t off = (uint64_t)i * 8192;
        struct sge s = {len, 0x700, la->addr + off};
        if (i % 2) {
            struct sge rs = {8192, 0x800, lb->addr + off};
            post_recv(p.b, &rs, 1);
            post_send(p.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s, 1);
            CHECK(cq_poll(p.rb, got, 5000));
            CHECK_EQ(got[63] >> 4, NIC_CQE_RESP_SEND);
            CHECK_EQ(rd_be32(got + 44), len);
        } else {
            post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + off, 0x800, &s, 1);
        }
        CHECK(cq_poll(p.sa, got, 5000));
        if ((got[63] >> 4) != NIC_CQE_REQ) { dump("error", got); CHECK(0); }
        CHECK(!memcmp(MRP(lb) + off, MRP(la) + off, len));
    }
    CHECK(!cq_poll(p.rb, got, 100));   /* duplicates never complete twice */
    struct mlxd_emu_nic_stats st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(0, &st), 0);
    fprintf(stderr, "dev0: tx %llu retransmits %llu timeouts %llu dropped %llu dup %llu reord %llu corrupt %llu\n",
            (unsigned long long)st.tx_pkts, (unsigned long long)st.retransmits,
            (unsigned long long)st.timeouts, (unsigned long long)st.tx_dropped_fault,
            (unsigned long long)st.tx_dup_fault, (unsigned long long)st.tx_reordered_fault,
            (unsigned long long)st.tx_corrupted_fault);
    CHECK(st.retransmits > 0 && st.tx_dropped_fault > 0 && st.tx_dup_fault > 0);
    struct mlxd_emu_nic_stats sb = {.sz = sizeof sb};
    CHECK_EQ(mlxd_emu_nic_stats(1, &sb), 0);
    CHECK(sb.rx_bad_icrc > 0 && sb.rx_dup > 0);
    dev_close(0);
    dev_close(1);
}

/* One RC pair per error class; the requester's error CQE, the flush of the WQEs after it, the
 * responder's state and async event. */
static void rc_access_error(uint32_t qa, uint32_t qb, uint64_t va_off, uint32_t rkey, uint32_t mr_access)
{
    struct pair p = pair_new(2, qa, qb, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700 + qa, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800 + qb, mr_access);
    memset(MRP(lb), 0x5a, 8192);
    struct sge rs = {64, 0x800 + qb, lb->addr};
    uint16_t r = post_recv(p.b, &rs, 1);
    struct sge s = {100, 0x700 + qa, la->addr};
    memset(MRP(la), 0xc3, 100);
    uint16_t w = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + va_off, rkey ? rkey : 0x800 + qb, &s, 1);
    uint8_t got[64], want[64];
    CHECK(cq_poll(p.sa, got, 2000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x13, 0x88, NIC_OP_RDMA_WRITE, qa, qa, w, 0);
    CHECK_CQE(got, want, 0, 0);
    /* WQEs posted after the error are flushed (0x05, vendor 0xf9), signalled or not */
    uint16_t w2 = post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);
    CHECK(cq_poll(p.sa, got, 2000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x05, 0xf9, NIC_OP_SEND, qa, qa, w2, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK_EQ(qp_state(p.a), NIC_QPS_ERR);
    /* the responder NAKed, went to ERR with QP_ACCESS_ERR, and flushed its receive */
    CHECK(cq_poll(p.rb, got, 2000));
    expect_err_cqe(want, NIC_CQE_RESP_ERR, 0x05, 0xf9, 0, qb, qb, r, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK_EQ(qp_state(p.b), NIC_QPS_ERR);
    CHECK_EQ(count_async(0x1000 + qb, NIC_EV_QP_ACCESS_ERR), 1);
    for (int i = 0; i < 8192; i++) CHECK_EQ(MRP(lb)[i], 0x5a);   /* nothing written */
}

static void case_err_remote_access(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    rc_access_error(0x101, 0x201, 0, 0x1234567, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);   /* bad rkey */
    rc_access_error(0x102, 0x202, 8150, 0, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);        /* VA+len outside */
    rc_access_error(0x103, 0x203, 0, 0, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_READ);            /* no REMOTE_WRITE */
    dev_close(0);
    dev_close(1);
}

static void case_err_local_length(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x111, 0x211, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE);
    struct sge rs = {16, 0x800, lb->addr};
    uint16_t r = post_recv(p.b, &rs, 1);
    uint16_t r2 = post_recv(p.b, &rs, 1);
    struct sge s = {100, 0x700, la->addr};
    uint16_t w = post_send(p.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s, 1);
    uint8_t got[64], want[64];
    CHECK(cq_poll(p.rb, got, 2000));
    expect_err_cqe(want, NIC_CQE_RESP_ERR, 0x01, 0x69, 0, 0x211, 0x211, r, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK(cq_poll(p.rb, got, 2000));
    expect_err_cqe(want, NIC_CQE_RESP_ERR, 0x05, 0xf9, 0, 0x211, 0x211, r2, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK(cq_poll(p.sa, got, 2000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x12, 0x8a, NIC_OP_SEND, 0x111, 0x111, w, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK_EQ(qp_state(p.b), NIC_QPS_ERR);
    dev_close(0);
    dev_close(1);
}

static void case_err_rnr(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x121, 0x221, 16, 3);
    p.a->qp.attr.rnr_retry = 2;
    lock(0); ((struct nic_qp *)p.a->qp.nic)->rnr_left = 2; unlock(0);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct sge s = {100, 0x700, la->addr};
    uint64_t t0 = emu_nic_clock_cycles();
    uint16_t w = post_send(p.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s, 1);
    uint8_t got[64], want[64];
    CHECK(cq_poll(p.sa, got, 3000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x16, 0x82, NIC_OP_SEND, 0x121, 0x121, w, 0);
    CHECK_CQE(got, want, 0, 0);
    /* Each copy of the SEND that reaches B gets one RNR NAK for its PSN.  A sends the first try,
     * one copy per accepted RNR NAK before the last (rnr_retry = 2), and one per expiry of its
     * retransmit timer (16.7 ms): on a loaded machine an RNR NAK can come back later than that,
     * and the local ACK timeout rightly retransmits (IB spec, transport timer), so B's count is 3 only when A's
     * timer never fired, and 3 + A's timeouts always. */
    struct mlxd_emu_nic_stats sa = {.sz = sizeof sa}, st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(0, &sa), 0);
    CHECK_EQ(sa.retransmits, 2 + sa.timeouts);
    CHECK_EQ(sa.tx_pkts, 1 + sa.retransmits);
    for (int i = 0; i < 200; i++) {       /* B's engine may still be answering the last copy */
        CHECK_EQ(mlxd_emu_nic_stats(1, &st), 0);
        if (st.rx_pkts >= sa.tx_pkts) break;
        usleep(10000);
    }
    CHECK_EQ(st.rx_pkts, sa.tx_pkts);
    CHECK_EQ(st.rnr_naks_sent, st.rx_pkts);  /* every copy answered by an RNR NAK ... */
    CHECK_EQ(st.rx_dup, 0);                  /* ... for the PSN B expects (never a duplicate) */
    CHECK_EQ(st.rx_out_of_seq, 0);
    CHECK_EQ(st.acks_sent + st.naks_sent, 0);
    CHECK(st.rnr_naks_sent >= 3);            /* the first try plus rnr_retry = 2 retries */
    CHECK(nic_now_ns() - t0 >= 2 * 10000);   /* 2 waits of the responder's 0.01 ms timer */
    CHECK_EQ(qp_state(p.b), NIC_QPS_RTS);    /* RNR is not an error for the responder */
    CHECK(!cq_poll(p.rb, got, 20));
    dev_close(0);
    dev_close(1);
}

static void case_err_retry(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    /* the peer QP number does not exist on device 1: every packet is dropped there */
    struct hcq *sc = cq_new(0, 16, 1);
    struct hqp *a = qp_new(0, 2, 0x131, sc, sc, 16, 16);
    g_timeout = 10;           /* 4.2 ms */
    g_retry = 3;
    qp_connect(a, 1, 0x999, 5, 5, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct sge s = {100, 0x700, la->addr};
    uint64_t t0 = emu_nic_clock_cycles();
    uint16_t w = post_send(a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);     /* unsignalled: errors still complete */
    uint16_t w2 = post_send(a, NIC_OP_RDMA_WRITE, 0x08, 0, 0, 0, &s, 1);
    uint8_t got[64], want[64];
    CHECK(cq_poll(sc, got, 3000));
    uint64_t dt = nic_now_ns() - t0;
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x15, 0x81, NIC_OP_SEND, 0x131, 0x131, w, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK(cq_poll(sc, got, 1000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x05, 0xf9, NIC_OP_RDMA_WRITE, 0x131, 0x131, w2, 0);
    CHECK_CQE(got, want, 0, 0);
    /* timeout 10 = 4.194 ms, retry_cnt 3: 4 expiries before the error */
    CHECK(dt >= 4 * 4194304ull);
    struct mlxd_emu_nic_stats st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(0, &st), 0);
    CHECK_EQ(st.timeouts, 4);
    CHECK_EQ(st.retransmits, 3);
    /* 2 packets x 4 transmissions reach device 1 (whose engine may lag on a busy machine) */
    for (int i = 0; i < 200; i++) {
        CHECK_EQ(mlxd_emu_nic_stats(1, &st), 0);
        if (st.rx_unknown_qp >= 8) break;
        usleep(10000);
    }
    CHECK_EQ(st.rx_unknown_qp, 8);
    dev_close(0);
    dev_close(1);
}

/* A UDP socket on device 0's address (me, its port filled in), for packets to device 1 (to). */
static int crafted_socket(struct sockaddr_in *me, struct sockaddr_in *to)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    *me = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = devs[0].cfg.ipv4, .sin_port = 0};
    CHECK(bind(s, (struct sockaddr *)me, sizeof *me) == 0);
    socklen_t ml = sizeof *me;
    getsockname(s, (struct sockaddr *)me, &ml);
    *to = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = devs[1].cfg.ipv4, .sin_port = htons(g_port)};
    return s;
}

/* UC: errors drop the message silently; the QP stays usable. */
static void case_uc_errors(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(3, 0x141, 0x241, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    memset(MRP(lb), 0x77, 8192);
    memset(MRP(la), 0x11, 8192);
    uint8_t got[64];
    struct sge s = {3000, 0x700, la->addr};
    struct mlxd_emu_nic_stats st0 = {.sz = sizeof st0}, st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(1, &st0), 0);
    post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0xbad, &s, 1);        /* bad rkey */
    post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + 6000, 0x800, &s, 1); /* outside */
    post_send(p.a, NIC_OP_SEND_IMM, 0x08, be(7), 0, 0, &s, 1);                  /* no receive: drop */
    struct sge small = {16, 0x800, lb->addr};
    for (int i = 0; i < 3; i++) CHECK(cq_poll(p.sa, got, 2000) && (got[63] >> 4) == NIC_CQE_REQ);
    /* B has seen all 9 packets (3 x 3000 B at MTU 1024) before the receive is posted */
    WAIT_STATS(1, &st, st.rx_pkts - st0.rx_pkts >= 9);
    post_recv(p.b, &small, 1);
    post_send(p.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s, 1);                          /* too long: drop */
    CHECK(cq_poll(p.sa, got, 2000) && (got[63] >> 4) == NIC_CQE_REQ);
    WAIT_STATS(1, &st, st.rx_pkts - st0.rx_pkts >= 12);
    CHECK(!cq_poll(p.rb, got, 20));
    for (int i = 16; i < 8192; i++) CHECK_EQ(MRP(lb)[i], 0x77);
    CHECK_EQ(qp_state(p.b), NIC_QPS_RTS);
    /* still works: a good WRITE_IMM consumes the receive posted above */
    struct sge s2 = {50, 0x700, la->addr};
    post_send(p.a, NIC_OP_RDMA_WRITE_IMM, 0x08, be(9), lb->addr + 1000, 0x800, &s2, 1);
    CHECK(cq_poll(p.rb, got, 2000));
    CHECK_EQ(got[63] >> 4, NIC_CQE_RESP_WR_IMM);
    CHECK_EQ(rd_be32(got + 44), 50);
    CHECK_EQ(MRP(lb)[1000], 0x11);
    dev_close(0);
    dev_close(1);
}

/* Opcodes of RC only, arriving on a UC QP with the UC transport bits and a valid iCRC: SEND
 * LAST/ONLY with Invalidate (0x36/0x37) and READ request (0x2c) exist on RC only (IB spec vol. 1
 * 9.2, table 38: UC has no invalidate, no READ).  Each is malformed: counted, dropped, no CQE,
 * the receive not taken, the QP stays usable. */
static void case_uc_rc_only_ops(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(3, 0x1a1, 0x2a1, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE |
                                             NIC_ACC_REMOTE_READ);
    memset(MRP(lb), 0x77, 8192);
    memset(MRP(la), 0x11, 8192);
    struct sge rs = {256, 0x800, lb->addr};
    post_recv(p.b, &rs, 1);
    struct sockaddr_in me, to;
    int s = crafted_socket(&me, &to);
    uint8_t pl[64], pkt[512];
    memset(pl, 0xee, sizeof pl);
    struct mlxd_emu_nic_stats st0 = {.sz = sizeof st0}, st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(1, &st0), 0);
    /* built as the RC opcode (mlxd_roce_build knows no UC invalidate), then given the UC
     * transport bits and a fresh iCRC */
    static const uint8_t ops[] = { MLXD_ROCE_OP_SEND_ONLY_INV, MLXD_ROCE_OP_SEND_LAST_INV,
                                   MLXD_ROCE_OP_READ_REQUEST };
    for (unsigned i = 0; i < sizeof ops; i++) {
        bool rd = ops[i] == MLXD_ROCE_OP_READ_REQUEST;
        struct mlxd_roce_pkt w = {.src_ip = ntohl(me.sin_addr.s_addr), .src_port = ntohs(me.sin_port),
                                  .dst_ip = ntohl(to.sin_addr.s_addr), .dst_port = g_port,
                                  .opcode = ops[i], .dest_qp = 0x2a1, .psn = 0x10, .ieth_rkey = 0x800,
                                  .reth_va = lb->addr, .reth_rkey = 0x800, .reth_len = 64};
        ssize_t n = mlxd_roce_build(pkt, sizeof pkt, &w, pl, rd ? 0 : 64);
        CHECK(n > 0);
        pkt[MLXD_ROCE_BTH_OFF] = (uint8_t)(MLXD_ROCE_TRANSPORT_UC | ops[i]);
        mlxd_roce_icrc_fill(pkt, (size_t)n);
        CHECK(sendto(s, pkt + 28, (size_t)n - 28, 0, (struct sockaddr *)&to, sizeof to) == n - 28);
    }
    WAIT_STATS(1, &st, st.rx_malformed - st0.rx_malformed >= 3);
    CHECK_EQ(st.rx_malformed - st0.rx_malformed, 3);
    CHECK_EQ(st.rx_bad_icrc - st0.rx_bad_icrc, 0);
    uint8_t got[64];
    CHECK(!cq_poll(p.rb, got, 20));
    CHECK(!cq_poll(p.sb, got, 0));
    CHECK_EQ(qp_state(p.b), NIC_QPS_RTS);
    for (int i = 0; i < 8192; i++) CHECK_EQ(MRP(lb)[i], 0x77);
    /* the receive is still there: a UC SEND from A lands in it */
    struct sge ss = {40, 0x700, la->addr};
    post_send(p.a, NIC_OP_SEND, 0x08, 0, 0, 0, &ss, 1);
    CHECK(cq_poll(p.rb, got, 2000));
    CHECK_EQ(got[63] >> 4, NIC_CQE_RESP_SEND);
    CHECK_EQ(rd_be32(got + 44), 40);
    CHECK_EQ(MRP(lb)[0], 0x11);
    close(s);
    dev_close(0);
    dev_close(1);
}

/* Arming: exactly one event per arm; solicited-only waits for a solicited completion. */
static void case_arm(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x151, 0x251, 64, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE);
    struct sge s = {10, 0x700, la->addr}, rs = {100, 0x800, lb->addr};
    uint8_t got[64];
    uint64_t h = p.rb->cq.user_handle;
    for (int i = 0; i < 8; i++) post_recv(p.b, &rs, 1);
    cq_arm(p.rb, 0, false);
    CHECK_EQ(wait_comp(h, 0), 0);
    post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);
    post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);
    CHECK(cq_poll(p.rb, got, 2000) && cq_poll(p.rb, got, 2000));
    CHECK_EQ(wait_comp(h, 1), 1);               /* two completions, one arm: one event */
    post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);
    CHECK(cq_poll(p.rb, got, 2000));
    CHECK_EQ(wait_comp(h, 1), 1);               /* not re-armed: none */
    cq_arm(p.rb, 0, false);                   /* stale sn (the event was not consumed): ignored */
    post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);
    CHECK(cq_poll(p.rb, got, 2000));
    CHECK_EQ(wait_comp(h, 1), 1);
    cq_arm(p.rb, 1, true);                    /* solicited only, sn 1 */
    post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);
    CHECK(cq_poll(p.rb, got, 2000));
    CHECK_EQ(wait_comp(h, 1), 1);
    post_send(p.a, NIC_OP_SEND, 0x02, 0, 0, 0, &s, 1);   /* solicited */
    CHECK(cq_poll(p.rb, got, 2000));
    CHECK_EQ(got[63] & 2, 2);
    CHECK_EQ(wait_comp(h, 2), 2);
    /* armed while a completion is unconsumed: the event fires at once (closes the race) */
    post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &s, 1);
    usleep(20000);
    cq_arm(p.rb, 2, false);
    CHECK_EQ(wait_comp(h, 3), 3);
    CHECK(cq_poll(p.rb, got, 2000));
    dev_close(0);
    dev_close(1);
}

/* Crafted packets from a raw UDP socket: truncated, bad iCRC, unknown QPN, rkey or VA outside
 * any region, bad opcode sequence: dropped or NAKed, never written. */
static void case_crafted(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x161, 0x261, 16, 3);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    memset(MRP(lb), 0x3c, 8192);
    /* the crafted packets come from the address QP B is connected to (device 0's), as an
     * attacker on the peer's host would send them; another address is ignored outright */
    struct sockaddr_in me, to;
    int s = crafted_socket(&me, &to);
    uint8_t pl[256], pkt[512];
    memset(pl, 0xee, sizeof pl);
    struct mlxd_roce_pkt w = {.src_ip = ntohl(me.sin_addr.s_addr), .src_port = ntohs(me.sin_port),
                              .dst_ip = ntohl(to.sin_addr.s_addr), .dst_port = g_port,
                              .opcode = 0x0a, .dest_qp = 0x261, .psn = 0xfffff0, .ackreq = true,
                              .reth_va = lb->addr, .reth_rkey = 0x800, .reth_len = 256};
    struct mlxd_emu_nic_stats st0 = {.sz = sizeof st0}, st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(1, &st0), 0);
#define SEND_PKT(n) CHECK(sendto(s, pkt + 28, (size_t)(n) - 28, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)(n) - 28)
    ssize_t n;
    /* a correct packet from another address: ignored, nothing written */
    {
        int o = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in oa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f0000c8)};
        CHECK(bind(o, (struct sockaddr *)&oa, sizeof oa) == 0);
        socklen_t ol = sizeof oa;
        getsockname(o, (struct sockaddr *)&oa, &ol);
        struct mlxd_roce_pkt ow = w;
        ow.src_ip = 0x7f0000c8;
        ow.src_port = ntohs(oa.sin_port);
        ssize_t on = mlxd_roce_build(pkt, sizeof pkt, &ow, pl, 256);
        CHECK(sendto(o, pkt + 28, (size_t)on - 28, 0, (struct sockaddr *)&to, sizeof to) == on - 28);
        close(o);
        WAIT_STATS(1, &st, st.rx_wrong_source - st0.rx_wrong_source >= 1);
        CHECK_EQ(st.rx_wrong_source - st0.rx_wrong_source, 1);
        for (int i = 0; i < 8192; i++) CHECK_EQ(MRP(lb)[i], 0x3c);
    }
    /* truncated: BTH cut */
    n = mlxd_roce_build(pkt, sizeof pkt, &w, pl, 256);
    SEND_PKT(28 + 8);
    /* truncated: RETH cut (the iCRC is recomputed so that only the length is wrong) */
    SEND_PKT(28 + 12 + 10);
    /* wrong iCRC */
    pkt[n - 1] ^= 1;
    SEND_PKT(n);
    /* unknown QPN */
    w.dest_qp = 0x7777;
    n = mlxd_roce_build(pkt, sizeof pkt, &w, pl, 256);
    SEND_PKT(n);
    WAIT_STATS(1, &st, st.rx_malformed - st0.rx_malformed >= 2 && st.rx_bad_icrc - st0.rx_bad_icrc >= 1 &&
                       st.rx_unknown_qp - st0.rx_unknown_qp >= 1);
    CHECK_EQ(st.rx_malformed - st0.rx_malformed, 2);
    CHECK_EQ(st.rx_bad_icrc - st0.rx_bad_icrc, 1);
    CHECK_EQ(st.rx_unknown_qp - st0.rx_unknown_qp, 1);
    CHECK_EQ(qp_state(p.b), NIC_QPS_RTS);
    /* VA outside any region, on a UC-opcode to the RC QP (wrong transport: dropped) */
    w.dest_qp = 0x261;
    w.opcode = 0x2a;
    n = mlxd_roce_build(pkt, sizeof pkt, &w, pl, 256);
    SEND_PKT(n);
    /* MIDDLE without FIRST at the expected PSN: invalid request -> NAK, QP to ERR */
    /* (first, the VA outside the region with a valid iCRC: NAK remote access, QP ERR) */
    w.opcode = 0x0a;
    w.reth_va = lb->addr + 8000;
    n = mlxd_roce_build(pkt, sizeof pkt, &w, pl, 256);
    SEND_PKT(n);
    /* the NAK goes to the QP's connected peer (its address vector), not to the packet's source:
     * device 0 receives a NAK for a PSN it never sent and ignores it */
    WAIT_STATS(1, &st, st.naks_sent - st0.naks_sent >= 1);
    CHECK_EQ(st.naks_sent - st0.naks_sent, 1);
    CHECK_EQ(qp_state(p.a), NIC_QPS_RTS);
    usleep(5000);
    CHECK_EQ(qp_state(p.b), NIC_QPS_ERR);
    for (int i = 0; i < 8192; i++) CHECK_EQ(MRP(lb)[i], 0x3c);
    close(s);
    dev_close(0);
    dev_close(1);
}

/* The wire in a pcap that tshark dissects as RoCE without malformed packets. */
static void case_pcap(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    char path[256];
    snprintf(path, sizeof path, "/tmp/nic_unit_%d.pcap", (int)getpid());
    CHECK_EQ(mlxd_emu_pcap(0, path), 0);
    struct pair p = pair_new(2, 0x171, 0x271, 64, 3);
    struct pair u = pair_new(3, 0x172, 0x272, 64, 3);
    struct emu_mr *la = mr_new(0, 65536, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 65536, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE | NIC_ACC_REMOTE_READ);
    uint8_t got[64];
    struct sge s = {3001, 0x700, la->addr}, rs = {8192, 0x800, lb->addr};
    post_recv(p.b, &rs, 1);
    post_recv(u.b, &rs, 1);
    post_recv(u.b, &rs, 1);
    post_send(p.a, NIC_OP_SEND_IMM, 0x08, be(1), 0, 0, &s, 1);
    post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
    post_send(p.a, NIC_OP_RDMA_READ, 0x08, 0, lb->addr, 0x800, &s, 1);
    post_send(u.a, NIC_OP_RDMA_WRITE_IMM, 0x08, be(2), lb->addr, 0x800, &s, 1);
    post_send(u.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s, 1);
    for (int i = 0; i < 3; i++) CHECK(cq_poll(p.sa, got, 2000) && (got[63] >> 4) == NIC_CQE_REQ);
    for (int i = 0; i < 2; i++) CHECK(cq_poll(u.sa, got, 2000) && (got[63] >> 4) == NIC_CQE_REQ);
    for (int i = 0; i < 2; i++) CHECK(cq_poll(u.rb, got, 2000));
    usleep(20000);
    CHECK_EQ(mlxd_emu_pcap(0, NULL), 0);
    char cmd[512];
    /* tshark dissects UDP port 4791 as RoCE; this test's port is another one, so say so */
    snprintf(cmd, sizeof cmd, "tshark -d udp.port==%u,infiniband -r %s -T fields -e frame.protocols -e _ws.col.Info 2>/dev/null", g_port, path);
    FILE *f = popen(cmd, "r");
    CHECK(f);
    char line[1024];
    unsigned ib = 0, total = 0;
    while (fgets(line, sizeof line, f)) {
        total++;
        if (strstr(line, "infiniband")) ib++;
        if (strstr(line, "alformed") || strstr(line, "rror")) { fprintf(stderr, "tshark: %s", line); CHECK(0); }
    }
    pclose(f);
    fprintf(stderr, "pcap: %u frames, %u dissected as InfiniBand\n", total, ib);
    /* RC: SEND 3 + WRITE 3 + READ 1 + responses 3 + ACKs; UC: 3 + 3 */
    CHECK(total >= 17 && ib == total);
    snprintf(cmd, sizeof cmd, "tshark -d udp.port==%u,infiniband -r %s -V 2>&1 | grep -c 'Opcode: Reliable Connection (RC) - RDMA READ Request'", g_port, path);
    f = popen(cmd, "r");
    CHECK(f && fgets(line, sizeof line, f));
    pclose(f);
    CHECK(atoi(line) >= 1);
    if (!getenv("NIC_UNIT_KEEP")) unlink(path);
    dev_close(0);
    dev_close(1);
}

/* Port down: nothing moves, PORT_ERR/PORT_ACTIVE events; RC retries exhaust while down. */
static void case_port(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x181, 0x281, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    CHECK_EQ(mlxd_emu_port_set(1, false), 0);
    CHECK_EQ(count_async(1, NIC_EV_PORT_ERR), 1);
    CHECK(!devs[1].cfg.link_up);
    struct sge s = {100, 0x700, la->addr};
    uint16_t w = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
    uint8_t got[64], want[64];
    CHECK(cq_poll(p.sa, got, 3000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x15, 0x81, NIC_OP_RDMA_WRITE, 0x181, 0x181, w, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK_EQ(mlxd_emu_port_set(1, true), 0);
    CHECK_EQ(count_async(1, NIC_EV_PORT_ACTIVE), 1);
    CHECK_EQ(mlxd_emu_port_set(7, true), -ENODEV);
    dev_close(0);
    dev_close(1);
}

/* Two processes, each with its own emulator and device (fork): RC SENDs, RC RDMA WRITEs and UC
 * WRITE_IMMs across the wire, data verified by the receiving process. */
static uint8_t pattern(unsigned msg, unsigned i) { return (uint8_t)(msg * 31 + i * 7 + (i >> 8)); }

static void case_two_proc(void)
{
    int ready[2], done[2];
    CHECK(pipe(ready) == 0 && pipe(done) == 0);
    const unsigned nmsg = 20, len = 3000;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* receiver: device 1, RC QP 0x22 and UC QP 0x24 */
        dev_open(1, g_port, 4096);
        struct hcq *rc = cq_new(1, 64, 2), *sc = cq_new(1, 64, 3);
        struct hqp *b = qp_new(1, 2, 0x22, sc, rc, 64, 64), *d = qp_new(1, 3, 0x24, sc, rc, 64, 64);
        devs[0].cfg.ipv4.s_addr = htonl(0x7f000064);   /* the peer device's address */
        qp_connect(b, 0, 0x11, 500, 1000, 3);
        qp_connect(d, 0, 0x13, 600, 2000, 3);
        struct emu_mr *m = mr_new(1, 1 << 20, 0x900, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
        for (unsigned i = 0; i < nmsg; i++) {
            struct sge rs = {4096, 0x900, m->addr + (uint64_t)i * 4096};
            post_recv(b, &rs, 1);
            post_recv(d, &rs, 1);       /* consumed by the WRITE_IMMs (no data goes there) */
        }
        uint64_t base = m->addr;        /* out of band, as a real exchange would send it */
        CHECK(write(ready[1], &base, 8) == 8);
        uint8_t got[64];
        unsigned sends = 0, imms = 0;
        while (sends + imms < 2 * nmsg) {
            CHECK(cq_poll(rc, got, 5000));
            uint32_t qpn = rd_be32(got + 56) & 0xffffff;
            if ((got[63] >> 4) == NIC_CQE_RESP_SEND) {
                CHECK_EQ(qpn, 0x22);
                CHECK_EQ(rd_be32(got + 44), len);
                unsigned idx = (unsigned)(got[60] << 8 | got[61]);
                for (unsigned i = 0; i < len; i++) CHECK_EQ(MRP(m)[idx * 4096 + i], pattern(idx, i));
                sends++;
            } else {
                CHECK_EQ(got[63] >> 4, NIC_CQE_RESP_WR_IMM);
                CHECK_EQ(qpn, 0x24);
                uint32_t k = rd_be32(got + 36);
                for (unsigned i = 0; i < len; i++)
                    CHECK_EQ(MRP(m)[512 * 1024 + k * 4096 + i], pattern(k + 100, i));
                imms++;
            }
        }
        char c;
        CHECK(read(done[0], &c, 1) == 1);   /* the RC WRITEs are acknowledged by now */
        lock(1);                            /* (orders the engine's writes before our reads) */
        unlock(1);
        for (unsigned k = 0; k < nmsg; k++)
            for (unsigned i = 0; i < len; i++)
                CHECK_EQ(MRP(m)[256 * 1024 + k * 4096 + i], pattern(k + 50, i));
        dev_close(1);
        _exit(0);
    }
    dev_open(0, g_port, 4096);
    struct hcq *sc = cq_new(0, 256, 1), *rc = cq_new(0, 16, 4);
    struct hqp *a = qp_new(0, 2, 0x11, sc, rc, 256, 16), *u = qp_new(0, 3, 0x13, sc, rc, 256, 16);
    devs[1].cfg.ipv4.s_addr = htonl(0x7f000065);
    qp_connect(a, 1, 0x22, 1000, 500, 3);
    qp_connect(u, 1, 0x24, 2000, 600, 3);
    struct emu_mr *m = mr_new(0, 1 << 20, 0x700, NIC_ACC_LOCAL_WRITE);
    for (unsigned k = 0; k < nmsg; k++)
        for (unsigned i = 0; i < len; i++) {
            MRP(m)[k * 4096 + i] = pattern(k, i);
            MRP(m)[256 * 1024 + k * 4096 + i] = pattern(k + 50, i);
            MRP(m)[512 * 1024 + k * 4096 + i] = pattern(k + 100, i);
        }
    uint64_t rbase = 0;
    CHECK(read(ready[0], &rbase, 8) == 8);
    uint8_t got[64];
    unsigned completions = 0;
    for (unsigned k = 0; k < nmsg; k++) {
        struct sge s1 = {len, 0x700, m->addr + k * 4096};
        post_send(a, NIC_OP_SEND, 0x08, 0, 0, 0, &s1, 1);
        struct sge s2 = {len, 0x700, m->addr + 256 * 1024 + k * 4096};
        post_send(a, NIC_OP_RDMA_WRITE, 0x08, 0, rbase + 256 * 1024 + k * 4096, 0x900, &s2, 1);
        struct sge s3 = {len, 0x700, m->addr + 512 * 1024 + k * 4096};
        post_send(u, NIC_OP_RDMA_WRITE_IMM, 0x08, be(k), rbase + 512 * 1024 + k * 4096, 0x900, &s3, 1);
        /* pace UC (no flow control on UC: a receiver that falls behind drops, as it should) */
        while (completions < 3 * (k + 1)) {
            CHECK(cq_poll(sc, got, 5000));
            CHECK_EQ(got[63] >> 4, NIC_CQE_REQ);
            completions++;
        }
    }
    char c = 'd';
    CHECK(write(done[1], &c, 1) == 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    dev_close(0);
}

/* The hardware acts on the UAR doorbell: a WQE announced only there (the doorbell record not
 * updated) is executed all the same, and a later record update does not execute it twice. */
static void case_uar_doorbell(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x191, 0x291, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    memset(MRP(la), 0x42, 100);
    struct sge s = {100, 0x700, la->addr};
    uint8_t got[64];
    g_skip_dbrec = true;
    uint16_t w = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
    g_skip_dbrec = false;
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[63] >> 4, NIC_CQE_REQ);
    CHECK_EQ(got[60] << 8 | got[61], w);
    CHECK_EQ(MRP(lb)[99], 0x42);
    /* the driver now writes the record (late): nothing more happens */
    __atomic_store_n(&p.a->db[1], htonl(p.a->sq_pi), __ATOMIC_RELEASE);
    CHECK(!cq_poll(p.sa, got, 50));
    /* and the next WQE goes normally */
    w = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + 200, 0x800, &s, 1);
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[60] << 8 | got[61], w);
    CHECK(!cq_poll(p.sa, got, 50));
    CHECK_EQ(MRP(lb)[299], 0x42);
    dev_close(0);
    dev_close(1);
}

/* Two devices, an RC pair qa -> qb, A's region (key 0x700, its first 100 bytes `fill`) and B's
 * remotely writable one (key 0x800), 8 KiB each: the setup of the doorbell cases. */
static struct pair write_pair(uint32_t qa, uint32_t qb, uint8_t fill, struct emu_mr **la, struct emu_mr **lb)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, qa, qb, 16, 3);
    *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    memset(MRP(*la), fill, 100);
    return p;
}

/* The doorbell record alone starts nothing (a ConnectX acts on the UAR doorbell register):
 * WQEs posted with the record moved but no UAR write are not executed; the UAR write of the
 * last one runs them all, and only up to the index it names. */
static void case_no_uar(void)
{
    struct emu_mr *la, *lb;
    struct pair p = write_pair(0x1b1, 0x2b1, 0x5a, &la, &lb);
    struct sge s = {100, 0x700, la->addr};
    uint8_t got[64];
    g_skip_uar = true;
    uint16_t w0 = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
    post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + 1000, 0x800, &s, 1);
    g_skip_uar = false;
    CHECK(!cq_poll(p.sa, got, 300));
    struct mlxd_emu_nic_stats st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(0, &st), 0);
    CHECK_EQ(st.tx_pkts, 0);
    CHECK_EQ(MRP(lb)[0], 0);
    /* ring the first WQE only (its ctrl bytes at UAR + 0x800): it runs, the second does not */
    uint64_t ctrl8;
    memcpy(&ctrl8, (const void *)p.a->qp.sq, 8);
    __atomic_store_n((uint64_t *)(uar_pages[0] + 0x800), ctrl8, __ATOMIC_RELEASE);
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[60] << 8 | got[61], w0);
    CHECK(!cq_poll(p.sa, got, 200));
    CHECK_EQ(MRP(lb)[99], 0x5a);
    CHECK_EQ(MRP(lb)[1000], 0);
    /* a third WQE rung normally runs the second one too */
    uint16_t w2 = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + 2000, 0x800, &s, 1);
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[60] << 8 | got[61], (uint16_t)(w0 + 1));
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[60] << 8 | got[61], w2);
    CHECK_EQ(MRP(lb)[1099], 0x5a);
    CHECK_EQ(MRP(lb)[2099], 0x5a);
    dev_close(0);
    dev_close(1);
}

/* An ACK of a PSN sent before a retransmission rewound the requester (its timer expired, the
 * ACK was late) still acknowledges: the message completes though the retransmission has not
 * gone out again (a responder that completed and destroyed its QP would never answer it). */
static void case_late_ack(void)
{
    struct emu_mr *la, *lb;
    struct pair p = write_pair(0x1e1, 0x2e1, 0, &la, &lb);
    struct sge s = {3000, 0x700, la->addr};           /* 3 packets at MTU 1024: PSNs first..+2 */
    uint8_t got[64];
    lock(1);                                          /* B's NIC does not run: no ACK */
    uint16_t w0 = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
    struct nic_qp *q = p.a->qp.nic;
    for (int t = 0; t < 2000; t++) {                  /* A sent the 3 packets */
        lock(0);
        bool sent = q->send == q->tail && q->head + 1 == q->tail;
        unlock(0);
        if (sent) break;
        usleep(1000);
    }
    lock(0);
    CHECK_EQ(q->send, q->head + 1);
    uint32_t first = M(q, q->head)->first_psn;
    go_back(q);                                       /* the timer's retransmission, not yet sent */
    struct mlxd_roce_pkt ack = {.opcode = MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_ACKNOWLEDGE,
                                .psn = (first + 2) & MLXD_ROCE_PSN_MASK, .aeth_syndrome = 0};
    nic_req_on_ack(q, &ack);                          /* the late ACK of the last packet */
    CHECK_EQ(q->head, q->tail);                       /* completed: nothing left to send */
    CHECK_EQ(q->send, q->tail);
    CHECK_EQ(q->next_psn, (first + 3) & MLXD_ROCE_PSN_MASK);
    unlock(0);
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[63] >> 4, NIC_CQE_REQ);
    CHECK_EQ(got[60] << 8 | got[61], w0);
    unlock(1);
    dev_close(0);
    dev_close(1);
}

/* A ring may come in any bfreg of the QP's UAR page (0x800 + 0x200 k, either 256-byte half), as
 * libmlx5 places its own bfregs in a page the kernel knows only by its index
 * (MLX5_QP_FLAG_UAR_PAGE_INDEX, rdma-core providers/mlx5/verbs.c mlx5_insert_dyn_uuars): the ring
 * names the QP.  A ring naming a QP not of this UAR starts nothing. */
static void case_bfreg_any(void)
{
    struct emu_mr *la, *lb;
    struct pair p = write_pair(0x1d1, 0x2d1, 0x5a, &la, &lb);
    struct sge s = {100, 0x700, la->addr};
    uint8_t got[64];
    g_skip_uar = true;
    uint16_t w0 = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
    uint16_t w1 = post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr + 1000, 0x800, &s, 1);
    g_skip_uar = false;
    uint64_t c0, c1;
    memcpy(&c0, (const void *)p.a->qp.sq, 8);
    memcpy(&c1, (const void *)(p.a->qp.sq + 64), 8);
    /* the first WQE's ring with another QP number (0x1d2: no QP of this UAR) in the 0xc00 bfreg */
    uint64_t other = c0;
    ((uint8_t *)&other)[6] = (uint8_t)(0x1d2 & 0xff);
    __atomic_store_n((uint64_t *)(uar_pages[0] + 0xc00), other, __ATOMIC_RELEASE);
    CHECK(!cq_poll(p.sa, got, 300));
    CHECK_EQ(MRP(lb)[0], 0);
    /* the first WQE rung in the second half of the 0xa00 bfreg: it runs, the second does not */
    __atomic_store_n((uint64_t *)(uar_pages[0] + 0xb00), c0, __ATOMIC_RELEASE);
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[60] << 8 | got[61], w0);
    CHECK(!cq_poll(p.sa, got, 200));
    CHECK_EQ(MRP(lb)[99], 0x5a);
    CHECK_EQ(MRP(lb)[1000], 0);
    /* the second rung in the last half of the page (0xf00) */
    __atomic_store_n((uint64_t *)(uar_pages[0] + 0xf00), c1, __ATOMIC_RELEASE);
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[60] << 8 | got[61], w1);
    CHECK_EQ(MRP(lb)[1099], 0x5a);
    dev_close(0);
    dev_close(1);
}

/* A receive scatter entry of byte_count 0 means 2 GiB to a ConnectX (kernel hw/mlx5/odp.c):
 * a SEND into {0 bytes at buf, 4096 bytes at buf + 4096} lands at buf[0]. */
static void case_zero_len_recv(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x1c1, 0x2c1, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE);
    for (int i = 0; i < 300; i++) MRP(la)[i] = (uint8_t)(i + 1);
    struct sge rs[2] = {{0, 0x800, lb->addr}, {4096, 0x800, lb->addr + 4096}};
    uint16_t r = post_recv(p.b, rs, 2);
    struct sge s = {300, 0x700, la->addr};
    post_send(p.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s, 1);
    uint8_t got[64], want[64];
    CHECK(cq_poll(p.rb, got, 2000));
    expect_cqe(want, NIC_CQE_RESP_SEND, 0, 0x2c1, 0x2c1, r, 300, 0, false, 0);
    CHECK_CQE(got, want, 0, nic_now_ns());
    CHECK(!memcmp(MRP(lb), MRP(la), 300));
    CHECK_EQ(MRP(lb)[4096], 0);
    CHECK(cq_poll(p.sa, got, 2000));
    CHECK_EQ(got[63] >> 4, NIC_CQE_REQ);
    dev_close(0);
    dev_close(1);
}

/* Local protection: a send WQE with a bad lkey fails on the requester without a packet; a
 * receive with a bad lkey fails on the responder (RESP_ERR 0x04) and NAKs the requester
 * (remote operational error, 0x14). */
static void case_err_local_prot(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x1a1, 0x2a1, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    uint8_t got[64], want[64];
    struct sge bad = {100, 0x7777, la->addr};
    uint16_t w = post_send(p.a, NIC_OP_SEND, 0, 0, 0, 0, &bad, 1);
    CHECK(cq_poll(p.sa, got, 2000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x04, 0x52, NIC_OP_SEND, 0x1a1, 0x1a1, w, 0);
    CHECK_CQE(got, want, 0, 0);
    struct mlxd_emu_nic_stats st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(0, &st), 0);
    CHECK_EQ(st.tx_pkts, 0);
    /* a second pair: the receive names an lkey that does not exist */
    struct pair q = pair_new(2, 0x1a2, 0x2a2, 16, 3);
    struct sge rbad = {4096, 0x6666, 0x1000};
    uint16_t r = post_recv(q.b, &rbad, 1);
    struct sge s = {100, 0x700, la->addr};
    w = post_send(q.a, NIC_OP_SEND, 0x08, 0, 0, 0, &s, 1);
    CHECK(cq_poll(q.rb, got, 2000));
    expect_err_cqe(want, NIC_CQE_RESP_ERR, 0x04, 0x52, 0, 0x2a2, 0x2a2, r, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK(cq_poll(q.sa, got, 2000));
    expect_err_cqe(want, NIC_CQE_REQ_ERR, 0x14, 0x89, NIC_OP_SEND, 0x1a2, 0x1a2, w, 0);
    CHECK_CQE(got, want, 0, 0);
    CHECK_EQ(qp_state(q.b), NIC_QPS_ERR);
    dev_close(0);
    dev_close(1);
}

/* CQ overrun: a 4-entry CQ nobody consumes; the fifth CQE raises IB_EVENT_CQ_ERR once and the
 * QP goes to ERR with IB_EVENT_QP_FATAL. */
static void case_cq_overrun(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x1b1, 0x2b1, 4, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    struct sge s = {10, 0x700, la->addr};
    for (int i = 0; i < 6; i++) post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
    for (int i = 0; i < 200 && qp_state(p.a) != NIC_QPS_ERR; i++) usleep(10000);
    CHECK_EQ(qp_state(p.a), NIC_QPS_ERR);
    CHECK_EQ(count_async(p.sa->cq.user_handle, NIC_EV_CQ_ERR), 1);
    CHECK_EQ(count_async(0x1000 + 0x1b1, NIC_EV_QP_FATAL), 1);
    uint8_t got[64];
    for (int i = 0; i < 4; i++) {
        CHECK(cq_poll(p.sa, got, 100));
        CHECK_EQ(got[63] >> 4, NIC_CQE_REQ);
    }
    dev_close(0);
    dev_close(1);
}

/* Faults by index (UC): packet 1 of a 3-packet WRITE_IMM is dropped, so that message is lost
 * silently; packet 4 (the next message's ONLY) is duplicated and must complete once. */
static void case_fault_idx(void)
{
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(3, 0x1c1, 0x2c1, 16, 3);
    struct mlxd_emu_fault f;
    memset(&f, 0, sizeof f);
    f.sz = sizeof f;
    f.drop_idx[0] = 1; f.n_drop_idx = 1;
    f.dup_idx[0] = 3; f.n_dup_idx = 1;
    CHECK_EQ(mlxd_emu_fault_set(0, &f), 0);
    f.drop_rate = 2;
    CHECK_EQ(mlxd_emu_fault_set(0, &f), -EINVAL);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    memset(MRP(la), 0x61, 8192);
    struct sge rs = {16, 0x800, lb->addr + 7000};
    for (int i = 0; i < 3; i++) post_recv(p.b, &rs, 1);
    struct sge big = {2500, 0x700, la->addr}, small = {10, 0x700, la->addr};
    post_send(p.a, NIC_OP_RDMA_WRITE_IMM, 0x08, be(1), lb->addr, 0x800, &big, 1);         /* pkts 0-2 */
    post_send(p.a, NIC_OP_RDMA_WRITE_IMM, 0x08, be(2), lb->addr + 4000, 0x800, &small, 1); /* pkt 3 */
    uint8_t got[64];
    CHECK(cq_poll(p.rb, got, 2000));
    CHECK_EQ(rd_be32(got + 36), 2);
    CHECK(!cq_poll(p.rb, got, 100));
    CHECK_EQ(MRP(lb)[4000], 0x61);
    CHECK_EQ(MRP(lb)[1500], 0);        /* the dropped middle packet's bytes never arrived */
    struct mlxd_emu_nic_stats st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(0, &st), 0);
    CHECK_EQ(st.tx_dropped_fault, 1);
    CHECK_EQ(st.tx_dup_fault, 1);
    CHECK_EQ(mlxd_emu_nic_stats(1, &st), 0);
    CHECK(st.rx_dropped_uc >= 1 && st.rx_dup + st.rx_out_of_seq >= 1);
    dev_close(0);
    dev_close(1);
}

/* The same faults from the environment (MLXD_EMU_FAULT_0, set by the test runner). */
static void case_fault_env(void)
{
    CHECK(getenv("MLXD_EMU_FAULT_0"));
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct pair p = pair_new(2, 0x1d1, 0x2d1, 16, 3);
    struct emu_mr *la = mr_new(0, 8192, 0x700, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *lb = mr_new(1, 8192, 0x800, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    memset(MRP(la), 0x5f, 8192);
    struct sge s = {3000, 0x700, la->addr};
    uint8_t got[64];
    for (int i = 0; i < 3; i++) {
        post_send(p.a, NIC_OP_RDMA_WRITE, 0x08, 0, lb->addr, 0x800, &s, 1);
        CHECK(cq_poll(p.sa, got, 3000));
        CHECK_EQ(got[63] >> 4, NIC_CQE_REQ);
    }
    CHECK(!memcmp(MRP(lb), MRP(la), 3000));
    struct mlxd_emu_nic_stats st = {.sz = sizeof st};
    CHECK_EQ(mlxd_emu_nic_stats(0, &st), 0);
    /* MLXD_EMU_FAULT_0="drop_idx=0:4,corrupt_idx=6": 2 dropped, 1 corrupted, recovered */
    CHECK_EQ(st.tx_dropped_fault, 2);
    CHECK_EQ(st.tx_corrupted_fault, 1);
    CHECK(st.retransmits >= 1);
    dev_close(0);
    dev_close(1);
}

static double thread_cpu_s(pthread_t t)
{
    clockid_t c;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &c) || clock_gettime(c, &ts)) return 0;
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Throughput benchmark (not a test): UC RDMA WRITE, 4 KiB payload per packet (MTU 4096), from
 * device 0 to device 1 for NIC_BENCH_S seconds (default 3).  Prints the goodput delivered into
 * the responder's memory and the CPU time of each engine thread. */
static void case_bench(void)
{
    const char *e = getenv("NIC_BENCH_S");
    double secs = e ? atof(e) : 3;
    uint32_t type = getenv("NIC_BENCH_RC") ? 2 : 3;
    dev_open(0, g_port, 4096);
    dev_open(1, g_port, 4096);
    struct hcq *sc = cq_new(0, 1024, 1), *rc = cq_new(1, 16, 2);
    struct hqp *a = qp_new(0, type, 0x11, sc, sc, 1024, 0), *b = qp_new(1, type, 0x22, rc, rc, 16, 16);
    qp_connect(a, 1, 0x22, 0, 0, 5);
    qp_connect(b, 0, 0x11, 0, 0, 5);
    struct emu_mr *src = mr_new(0, 1 << 22, 0x501, NIC_ACC_LOCAL_WRITE);
    struct emu_mr *dst = mr_new(1, 1 << 22, 0x601, NIC_ACC_LOCAL_WRITE | NIC_ACC_REMOTE_WRITE);
    memset(MRP(src), 0xab, 1 << 22);
    double c0a = thread_cpu_s(((struct nic_dev *)devs[0].nic)->thread);
    double c0b = thread_cpu_s(((struct nic_dev *)devs[1].nic)->thread);
    struct mlxd_emu_nic_stats s0 = {.sz = sizeof s0}, s1 = {.sz = sizeof s1};
    mlxd_emu_nic_stats(1, &s0);
    uint64_t t0 = emu_nic_clock_cycles(), end = t0 + (uint64_t)(secs * 1e9);
    uint64_t posted = 0, completed = 0;
    uint8_t got[64];
    const uint32_t depth = 512, batch = 32;
    while (nic_now_ns() < end) {
        while (posted - completed < depth) {
            uint64_t off = (posted % 1024) * 4096;
            struct sge sg = {4096, 0x501, src->addr + off};
            post_send(a, NIC_OP_RDMA_WRITE, (posted % batch) == batch - 1 ? 0x08 : 0, 0,
                      dst->addr + off, 0x601, &sg, 1);
            posted++;
        }
        while (cq_poll(sc, got, 0)) {
            CHECK_EQ(got[63] >> 4, NIC_CQE_REQ);
            completed += batch;
        }
        sched_yield();
    }
    uint64_t t1 = emu_nic_clock_cycles();
    mlxd_emu_nic_stats(1, &s1);
    double ca = thread_cpu_s(((struct nic_dev *)devs[0].nic)->thread) - c0a;
    double cb = thread_cpu_s(((struct nic_dev *)devs[1].nic)->thread) - c0b;
    double dt = (double)(t1 - t0) / 1e9;
    uint64_t good = s1.rx_pkts - s0.rx_pkts - (s1.rx_bad_icrc - s0.rx_bad_icrc) -
                    (s1.rx_malformed - s0.rx_malformed) - (s1.rx_out_of_seq - s0.rx_out_of_seq) -
                    (s1.rx_dup - s0.rx_dup);
    double gbps = (double)good * 4096 * 8 / dt / 1e9;
    printf("bench %s WRITE 4096 B: %.2f s, %llu packets delivered, %.2f Gb/s payload, "
           "%.0f kpkt/s; sender engine %.0f%% of a core, receiver engine %.0f%% of a core\n",
           type == 2 ? "RC" : "UC", dt, (unsigned long long)good, gbps, good / dt / 1e3,
           100 * ca / dt, 100 * cb / dt);
    printf("bench per-core: receiver %.2f Gb/s per core-second, sender %.2f Gb/s per core-second\n",
           cb > 0 ? (double)good * 4096 * 8 / cb / 1e9 : 0, ca > 0 ? (double)good * 4096 * 8 / ca / 1e9 : 0);
    CHECK(!memcmp(MRP(dst), MRP(src), 4096));
    dev_close(0);
    dev_close(1);
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: nic_unit <case> [port]\n"); return 2; }
    if (argc > 2) g_port = (uint16_t)atoi(argv[2]);
    struct { const char *name; void (*fn)(void); } cases[] = {
        {"uc_write_imm", case_uc_write_imm}, {"rc_ops", case_rc_ops},
        {"rc_faults", case_rc_faults}, {"err_remote_access", case_err_remote_access},
        {"err_local_length", case_err_local_length}, {"err_rnr", case_err_rnr},
        {"err_retry", case_err_retry}, {"uc_errors", case_uc_errors}, {"arm", case_arm},
        {"crafted", case_crafted}, {"pcap", case_pcap}, {"port", case_port},
        {"bench", case_bench}, {"two_proc", case_two_proc},
        {"uar_doorbell", case_uar_doorbell}, {"err_local_prot", case_err_local_prot},
        {"cq_overrun", case_cq_overrun}, {"fault_idx", case_fault_idx},
        {"fault_env", case_fault_env}, {"no_uar", case_no_uar},
        {"bfreg_any", case_bfreg_any}, {"late_ack", case_late_ack},
        {"zero_len_recv", case_zero_len_recv}, {"uc_rc_only_ops", case_uc_rc_only_ops},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!strcmp(argv[1], cases[i].name)) { cases[i].fn(); printf("ok %s\n", argv[1]); return 0; }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
