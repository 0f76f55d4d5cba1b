/* rdma_core_mw: memory windows as libibverbs + libmlx5 (rdma-core) make them, on the emulator
 * (run preloaded; tests/test_rdma_core.c).  One process, two devices: mlx5_0 owns a region
 * registered with LOCAL_WRITE | MW_BIND only (no remote rights of its own); mlx5_1 writes into
 * it through windows.  Checks (IB spec vol. 1 10.6.7; rdma-core providers/mlx5 mlx5_bind_mw,
 * set_bind_wr, cq.c):
 *   1. type 1: ibv_bind_mw completes as IBV_WC_BIND_MW and moves mw->rkey's key byte on by one;
 *      an RDMA WRITE through it lands; the region's own rkey is refused (IBV_WC_REM_ACCESS_ERR);
 *   2. a zero-length ibv_bind_mw unbinds: the window's rkey is then refused;
 *   3. type 2: IBV_WR_BIND_MW with ibv_inc_rkey(mw->rkey), WRITE through it, IBV_WR_LOCAL_INV
 *      (IBV_WC_LOCAL_INV), WRITE refused; bound again, an IBV_WR_SEND_WITH_INV from the peer lands
 *      as IBV_WC_RECV with IBV_WC_WITH_INV and invalidated_rkey, and the window is unbound;
 *   4. ibv_dealloc_mw leaves no window in the emulator.
 * The QPs made after an error are a context's second, third ... QP: libmlx5 puts them on the
 * second bfreg of a dynamic UAR page, which the kernel does not know of (the emulated NIC must
 * take their doorbells there: emu/nic/nic_doorbell.c). 
 * usage: rdma_core_mw      prints "OK mw ..." and exits 0 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_emu.h"

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#include "rc_connect.h"
#define BUF 65536

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    unsigned char *buf;
    union ibv_gid gid;
};

static void setup(struct side *s, struct ibv_device *d, int access)
{
    if (!(s->ctx = ibv_open_device(d))) FAIL("open %s", ibv_get_device_name(d));
    struct ibv_device_attr da;
    if (ibv_query_device(s->ctx, &da)) FAIL("query_device");
    if (!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) || !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B))
        FAIL("device_cap_flags 0x%x: no MEM_WINDOW / TYPE_2B", da.device_cap_flags);
    if (!(s->pd = ibv_alloc_pd(s->ctx))) FAIL("pd");
    if (!(s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0))) FAIL("cq");
    s->buf = aligned_alloc(4096, BUF);
    memset(s->buf, 0, BUF);
    if (!(s->mr = ibv_reg_mr(s->pd, s->buf, BUF, access))) FAIL("mr: %s", strerror(errno));
    if (ibv_query_gid(s->ctx, 1, 3, &s->gid)) FAIL("gid");
}

static struct ibv_qp *make_qp(struct side *s)
{
    struct ibv_qp_init_attr a = {
        .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 16, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
    };
    struct ibv_qp *qp = ibv_create_qp(s->pd, &a);
    if (!qp) FAIL("qp: %s", strerror(errno));
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
    if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) FAIL("INIT");
    return qp;
}

static struct ibv_wc wait_one(struct ibv_cq *cq, const char *what)
{
    struct ibv_wc wc;
    int n;
    for (long k = 0; (n = ibv_poll_cq(cq, 1, &wc)) == 0; k++)
        if (k > 400000000L) FAIL("no completion: %s", what);
    if (n < 0) FAIL("poll %d", n);
    return wc;
}

/* A connected pair: a (owner) <-> b (peer). */
static void pair(struct side *a, struct side *b, struct ibv_qp **qa, struct ibv_qp **qb)
{
    *qa = make_qp(a);
    *qb = make_qp(b);
    connect_to(*qa, *qb, &b->gid);
    connect_to(*qb, *qa, &a->gid);
}

/* b writes 64 bytes (tag) at a's buf + off through rkey; returns b's completion status. */
static int write_via(struct side *a, struct side *b, struct ibv_qp *qb, uint32_t rkey, unsigned off, unsigned tag)
{
    memset(b->buf, tag, 64);
    struct ibv_sge s = {(uintptr_t)b->buf, 64, b->mr->lkey};
    struct ibv_send_wr w = {.wr_id = tag, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                            .send_flags = IBV_SEND_SIGNALED,
                            .wr.rdma = {.remote_addr = (uintptr_t)a->buf + off, .rkey = rkey}}, *bad;
    if (ibv_post_send(qb, &w, &bad)) FAIL("post write");
    struct ibv_wc wc = wait_one(b->cq, "write");
    if (!wc.status && a->buf[off] != tag) FAIL("write of 0x%x did not land", tag);
    return wc.status;
}

static void expect_wc(struct side *s, enum ibv_wc_opcode op, uint64_t wr_id, const char *what)
{
    struct ibv_wc wc = wait_one(s->cq, what);
    if (wc.status || wc.opcode != op || wc.wr_id != wr_id)
        FAIL("%s: status %d opcode %d wr_id %llu (want opcode %d wr_id %llu)", what, wc.status, wc.opcode,
             (unsigned long long)wc.wr_id, op, (unsigned long long)wr_id);
}

int main(void)
{
    int n;
    struct ibv_device **l = ibv_get_device_list(&n);
    if (!l || n < 2) FAIL("need 2 devices, have %d", n);
    struct side a, b;
    setup(&a, l[0], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    setup(&b, l[1], IBV_ACCESS_LOCAL_WRITE);
    struct ibv_qp *qa, *qb;
    pair(&a, &b, &qa, &qb);
    /* 1. type 1 */
    struct ibv_mw *m1 = ibv_alloc_mw(a.pd, IBV_MW_TYPE_1);
    if (!m1) FAIL("alloc_mw type 1: %s", strerror(errno));
    uint32_t k0 = m1->rkey;
    struct ibv_mw_bind bind = {.wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
                               .bind_info = {.mr = a.mr, .addr = (uintptr_t)a.buf + 4096, .length = 8192,
                                             .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
    if (ibv_bind_mw(qa, m1, &bind)) FAIL("bind_mw: %s", strerror(errno));
    expect_wc(&a, IBV_WC_BIND_MW, 1, "type 1 bind");
    if (m1->rkey != ((k0 & ~0xffu) | ((k0 + 1) & 0xff))) FAIL("rkey 0x%x after bind of 0x%x", m1->rkey, k0);
    if (write_via(&a, &b, qb, m1->rkey, 4096, 0x11)) FAIL("write through the type 1 window");
    if (write_via(&a, &b, qb, a.mr->rkey, 0, 0x12) != IBV_WC_REM_ACCESS_ERR) FAIL("the region's own rkey worked");
    pair(&a, &b, &qa, &qb);                                       /* the old pair is in ERR */
    /* 2. unbind */
    uint32_t bound = m1->rkey;
    struct ibv_mw_bind unbind = {.wr_id = 2, .send_flags = IBV_SEND_SIGNALED};
    if (ibv_bind_mw(qa, m1, &unbind)) FAIL("unbind: %s", strerror(errno));
    expect_wc(&a, IBV_WC_BIND_MW, 2, "type 1 unbind");
    if (write_via(&a, &b, qb, bound, 4096, 0x13) != IBV_WC_REM_ACCESS_ERR) FAIL("unbound window still writable");
    pair(&a, &b, &qa, &qb);
    /* 3. type 2 */
    struct ibv_mw *m2 = ibv_alloc_mw(a.pd, IBV_MW_TYPE_2);
    if (!m2) FAIL("alloc_mw type 2: %s", strerror(errno));
    uint32_t r2 = ibv_inc_rkey(m2->rkey);
    struct ibv_send_wr bw = {.wr_id = 3, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
                             .bind_mw = {.mw = m2, .rkey = r2, .bind_info = bind.bind_info}}, *bad;
    if (ibv_post_send(qa, &bw, &bad)) FAIL("post BIND_MW: %s", strerror(errno));
    expect_wc(&a, IBV_WC_BIND_MW, 3, "type 2 bind");
    if (write_via(&a, &b, qb, r2, 4096, 0x21)) FAIL("write through the type 2 window");
    struct ibv_send_wr iw = {.wr_id = 4, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
                             .invalidate_rkey = r2};
    if (ibv_post_send(qa, &iw, &bad)) FAIL("post LOCAL_INV");
    expect_wc(&a, IBV_WC_LOCAL_INV, 4, "local invalidate");
    if (write_via(&a, &b, qb, r2, 4096, 0x22) != IBV_WC_REM_ACCESS_ERR) FAIL("invalidated window still writable");
    pair(&a, &b, &qa, &qb);
    m2->rkey = r2;
    r2 = ibv_inc_rkey(r2);
    bw.wr_id = 5;
    bw.bind_mw.rkey = r2;
    if (ibv_post_send(qa, &bw, &bad)) FAIL("post BIND_MW again");
    expect_wc(&a, IBV_WC_BIND_MW, 5, "type 2 bind again");
    struct ibv_sge rs = {(uintptr_t)a.buf + 32768, 256, a.mr->lkey};
    struct ibv_recv_wr rw = {.wr_id = 6, .sg_list = &rs, .num_sge = 1}, *rbad;
    if (ibv_post_recv(qa, &rw, &rbad)) FAIL("post_recv");
    struct ibv_sge ss = {(uintptr_t)b.buf, 32, b.mr->lkey};
    struct ibv_send_wr sw = {.wr_id = 7, .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
                             .sg_list = &ss, .num_sge = 1, .invalidate_rkey = r2};
    if (ibv_post_send(qb, &sw, &bad)) FAIL("post SEND_WITH_INV");
    expect_wc(&b, IBV_WC_SEND, 7, "send with invalidate");
    struct ibv_wc rwc = wait_one(a.cq, "recv with invalidate");
    if (rwc.status || rwc.opcode != IBV_WC_RECV || rwc.wr_id != 6 || !(rwc.wc_flags & IBV_WC_WITH_INV) ||
        rwc.invalidated_rkey != r2 || rwc.byte_len != 32)
        FAIL("recv: status %d opcode %d flags 0x%x invalidated 0x%x (want 0x%x) len %u", rwc.status, rwc.opcode,
             rwc.wc_flags, rwc.invalidated_rkey, r2, rwc.byte_len);
    if (write_via(&a, &b, qb, r2, 4096, 0x23) != IBV_WC_REM_ACCESS_ERR) FAIL("remotely invalidated window writable");
    /* 4. teardown */
    if (ibv_dealloc_mw(m1) || ibv_dealloc_mw(m2)) FAIL("dealloc_mw");
    unsigned (*live)(void) = (unsigned (*)(void))dlsym(RTLD_DEFAULT, "mlxd_emu_live_total");
    if (!live) FAIL("not run under the emulator");
    struct mlxd_emu_counts c = {.sz = sizeof c};
    int (*counts)(struct mlxd_emu_counts *) = (int (*)(struct mlxd_emu_counts *))dlsym(RTLD_DEFAULT, "mlxd_emu_get_counts");
    if (!counts || counts(&c) || c.mw != 0) FAIL("windows left after dealloc: %u", c.mw);
    printf("OK mw: type 1 bind/unbind, type 2 bind/local invalidate/send with invalidate\n");
    return 0;
}
