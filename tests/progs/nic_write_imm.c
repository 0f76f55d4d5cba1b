/* nic_write_imm: an RDMA WRITE with immediate between two (emulated) mlx5 ports, using nothing
 * but system calls (open, ioctl, mmap) and the kernel/rdma-core headers for the layouts: no
 * libibverbs, no project code.  Run it under the emulator:
 *
 *     LD_PRELOAD=build/lib/libmlx5direct-emu.so build/tests/progs/nic_write_imm
 *
 * Device 0 holds the receiver: a CQ and a UC QP with one posted receive.  Device 1 holds the
 * sender, a UC QP connected to it.  The sender posts RDMA WRITE with immediate (4000 bytes,
 * MTU 1024: four packets); the program polls both CQs by hand and checks every CQE field.
 * Layouts: uapi rdma headers, infiniband/mlx5dv.h; protocol: kernel drivers/infiniband/core
 * (uverbs_std_types_*.c, uverbs_cmd.c, verbs.c) and rdma-core providers/mlx5 (cq.c, qp.c).
 * Exit status 0 = every check passed; otherwise the failed check is printed. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/mlx5dv.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <rdma/mlx5_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "nic_write_imm: %s:%d: %s failed (errno %d %s)\n", __FILE__, __LINE__, #c, errno, strerror(errno)); exit(1); } } while (0)
#define CHECK_EQ(a, b) do { unsigned long long a_ = (a), b_ = (b); if (a_ != b_) { fprintf(stderr, "nic_write_imm: %s:%d: %s = 0x%llx, expected %s = 0x%llx\n", __FILE__, __LINE__, #a, a_, #b, b_); exit(1); } } while (0)

/* ---- RDMA_VERBS_IOCTL (uapi rdma_user_ioctl_cmds.h) ---- */
struct req { struct ib_uverbs_ioctl_hdr hdr; struct ib_uverbs_attr attr[16]; };

static void req_init(struct req *r, uint16_t object, uint16_t method)
{
    memset(r, 0, sizeof *r);
    r->hdr.object_id = object;
    r->hdr.method_id = method;
    r->hdr.driver_id = RDMA_DRIVER_MLX5;
}
static struct ib_uverbs_attr *attr(struct req *r, uint16_t id, uint16_t len, uint64_t data)
{
    struct ib_uverbs_attr *a = &r->attr[r->hdr.num_attrs++];
    a->attr_id = id;
    a->len = len;
    a->flags = UVERBS_ATTR_F_MANDATORY;
    a->data = data;
    return a;
}
static void ptr_in(struct req *r, uint16_t id, const void *p, uint16_t len)
{
    if (len <= 8) { uint64_t v = 0; memcpy(&v, p, len); attr(r, id, len, v); }
    else attr(r, id, len, (uintptr_t)p);
}
static int run(int fd, struct req *r)
{
    r->hdr.length = (uint16_t)(sizeof r->hdr + r->hdr.num_attrs * sizeof r->attr[0]);
    return ioctl(fd, RDMA_VERBS_IOCTL, r);
}
/* A legacy command through DEVICE/INVOKE_WRITE (kernel
 * drivers/infiniband/core/uverbs_std_types_device.c, UVERBS_METHOD_INVOKE_WRITE). */
static int invoke_write(int fd, uint32_t cmd, const void *in, uint16_t inlen, void *out,
                        uint16_t outlen, void *uhw_out, uint16_t uhw_outlen)
{
    struct req r;
    req_init(&r, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE);
    ptr_in(&r, UVERBS_ATTR_CORE_IN, in, inlen);
    if (outlen) attr(&r, UVERBS_ATTR_CORE_OUT, outlen, (uintptr_t)out);
    attr(&r, UVERBS_ATTR_WRITE_CMD, 8, cmd);
    if (uhw_outlen) attr(&r, UVERBS_ATTR_UHW_OUT, uhw_outlen, (uintptr_t)uhw_out);
    return run(fd, &r);
}

/* attr_mask bits (IB_QP_*; kernel include/rdma/ib_verbs.h enum ib_qp_attr_mask) */
enum { QP_STATE = 1, QP_ACCESS_FLAGS = 8, QP_PKEY_INDEX = 0x10, QP_PORT = 0x20, QP_AV = 0x80,
       QP_PATH_MTU = 0x100, QP_RQ_PSN = 0x1000, QP_SQ_PSN = 0x10000, QP_DEST_QPN = 0x100000 };

struct port {
    int fd, async_fd;
    uint8_t cqe_version;
    uint32_t pd, uar_handle, uar_page_id;
    volatile uint8_t *uar;
    uint8_t gid[16];
    uint32_t gid_index;
};

static void port_open(struct port *p, int n)
{
    memset(p, 0, sizeof *p);
    char path[64];
    snprintf(path, sizeof path, "/dev/infiniband/uverbs%d", n);
    p->fd = open(path, O_RDWR | O_CLOEXEC);
    CHECK(p->fd >= 0);
    /* GET_CONTEXT: cqe_version 1, 4K + dynamic UARs */
    struct mlx5_ib_alloc_ucontext_req_v2 ureq = {.total_num_bfregs = 16, .num_low_latency_bfregs = 4,
                                                  .max_cqe_version = 1, .lib_caps = 3};
    struct mlx5_ib_alloc_ucontext_resp uresp;
    memset(&uresp, 0, sizeof uresp);
    struct req r;
    req_init(&r, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT);
    attr(&r, UVERBS_ATTR_UHW_IN, sizeof ureq, (uintptr_t)&ureq);
    attr(&r, UVERBS_ATTR_UHW_OUT, sizeof uresp, (uintptr_t)&uresp);
    CHECK(run(p->fd, &r) == 0);
    p->cqe_version = uresp.cqe_version;
    /* async event fd */
    req_init(&r, UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC);
    struct ib_uverbs_attr *a = attr(&r, UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, 0, 0);
    CHECK(run(p->fd, &r) == 0);
    p->async_fd = (int)a->data;
    /* port 1 must be active, Ethernet */
    struct ib_uverbs_query_port_resp_ex pr;
    memset(&pr, 0, sizeof pr);
    req_init(&r, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    attr(&r, UVERBS_ATTR_QUERY_PORT_PORT_NUM, 8, 1);
    attr(&r, UVERBS_ATTR_QUERY_PORT_RESP, sizeof pr, (uintptr_t)&pr);
    CHECK(run(p->fd, &r) == 0);
    CHECK_EQ(pr.legacy_resp.state, 4);           /* IB_PORT_ACTIVE */
    CHECK_EQ(pr.legacy_resp.link_layer, 2);      /* Ethernet */
    /* the RoCE v2 GID with an IPv4-mapped address */
    struct ib_uverbs_gid_entry gids[16];
    uint64_t ngid = 0;
    req_init(&r, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE);
    attr(&r, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, 8, sizeof gids[0]);
    attr(&r, UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, sizeof gids, (uintptr_t)gids);
    attr(&r, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, 8, (uintptr_t)&ngid);
    CHECK(run(p->fd, &r) == 0);
    p->gid_index = ~0u;
    static const uint8_t v4pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    for (uint64_t i = 0; i < ngid; i++)
        if (gids[i].gid_type == IB_UVERBS_GID_TYPE_ROCE_V2 && gids[i].port_num == 1 &&
            !memcmp(gids[i].gid, v4pfx, 12)) {
            memcpy(p->gid, gids[i].gid, 16);
            p->gid_index = gids[i].gid_index;
            break;
        }
    CHECK(p->gid_index != ~0u);
    /* one non-cached UAR: CQ arm doorbell and QP send doorbell */
    uint64_t off = 0;
    uint32_t len = 0;
    req_init(&r, MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_ALLOC);
    a = attr(&r, MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, 0, 0);
    attr(&r, MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, 8, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC);
    attr(&r, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, 8, (uintptr_t)&off);
    attr(&r, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, 4, (uintptr_t)&len);
    attr(&r, MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, 4, (uintptr_t)&p->uar_page_id);
    CHECK(run(p->fd, &r) == 0);
    p->uar_handle = (uint32_t)a->data;
    void *m = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_WRITE, MAP_SHARED, p->fd, (off_t)off);
    CHECK(m != MAP_FAILED);
    p->uar = m;
    /* PD */
    struct ib_uverbs_alloc_pd cmd = {0};
    struct ib_uverbs_alloc_pd_resp pdr = {0};
    struct mlx5_ib_alloc_pd_resp mpdr = {0};
    CHECK(invoke_write(p->fd, IB_USER_VERBS_CMD_ALLOC_PD, &cmd, sizeof cmd, &pdr, sizeof pdr,
                       &mpdr, sizeof mpdr) == 0);
    p->pd = pdr.pd_handle;
}

/* Rings, doorbell records and buffers of this thread: freed after the uverbs fd is closed
 * (closing it destroys the objects that use them: kernel drivers/infiniband/core/uverbs_main.c
 * ib_uverbs_close, rdma_core.c uverbs_destroy_ufile_hw). */
static __thread void *allocs[32];
static __thread int nallocs;

static void *page_alloc(size_t len)
{
    void *b = NULL;
    CHECK(posix_memalign(&b, 4096, (len + 4095) & ~(size_t)4095) == 0);
    memset(b, 0, (len + 4095) & ~(size_t)4095);
    CHECK(nallocs < 32);
    allocs[nallocs++] = b;
    return b;
}

static void free_all(void)
{
    while (nallocs) free(allocs[--nallocs]);
}

static void reg_mr(struct port *p, void *buf, size_t len, uint32_t access, uint32_t *lkey, uint32_t *rkey)
{
    struct ib_uverbs_reg_mr cmd = {.start = (uintptr_t)buf, .length = len, .hca_va = (uintptr_t)buf,
                                   .pd_handle = p->pd, .access_flags = access};
    struct ib_uverbs_reg_mr_resp resp = {0};
    CHECK(invoke_write(p->fd, IB_USER_VERBS_CMD_REG_MR, &cmd, sizeof cmd, &resp, sizeof resp, NULL, 0) == 0);
    *lkey = resp.lkey;
    *rkey = resp.rkey;
}

struct cq { uint32_t handle, cqn, ncqe, ci; uint8_t *buf; volatile uint32_t *db; };

static void cq_create(struct port *p, struct cq *c, uint32_t ncqe, uint64_t user_handle)
{
    memset(c, 0, sizeof *c);
    c->ncqe = ncqe;
    c->buf = page_alloc(ncqe * 64);
    for (uint32_t i = 0; i < ncqe; i++) c->buf[i * 64 + 63] = MLX5_CQE_INVALID << 4;
    c->db = page_alloc(64);
    struct mlx5_ib_create_cq ucmd = {.buf_addr = (uintptr_t)c->buf, .db_addr = (uintptr_t)c->db,
                                     .cqe_size = 64, .flags = MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX,
                                     .uar_page_index = (uint16_t)p->uar_page_id};
    struct mlx5_ib_create_cq_resp uresp = {0};
    uint32_t cqe = ncqe - 1, resp_cqe = 0, vec = 0;
    struct req r;
    req_init(&r, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    struct ib_uverbs_attr *h = attr(&r, UVERBS_ATTR_CREATE_CQ_HANDLE, 0, 0);
    ptr_in(&r, UVERBS_ATTR_CREATE_CQ_CQE, &cqe, 4);
    ptr_in(&r, UVERBS_ATTR_CREATE_CQ_USER_HANDLE, &user_handle, 8);
    ptr_in(&r, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, &vec, 4);
    attr(&r, UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4, (uintptr_t)&resp_cqe);
    attr(&r, UVERBS_ATTR_UHW_IN, sizeof ucmd, (uintptr_t)&ucmd);
    attr(&r, UVERBS_ATTR_UHW_OUT, sizeof uresp, (uintptr_t)&uresp);
    CHECK(run(p->fd, &r) == 0);
    c->handle = (uint32_t)h->data;
    c->cqn = uresp.cqn;
}

struct qp { uint32_t handle, qpn, sq_cnt, rq_cnt, rq_shift, uidx; uint8_t *buf, *sq, *rq; volatile uint32_t *db; uint16_t sq_pi, rq_pi; };

static void qp_create(struct port *p, struct qp *q, struct cq *cq, uint32_t uidx, uint64_t user_handle)
{
    memset(q, 0, sizeof *q);
    q->sq_cnt = 16; q->rq_cnt = 16; q->rq_shift = 4;      /* 1 receive SGE: 16-byte stride */
    q->uidx = uidx;
    size_t rq_bytes = (size_t)q->rq_cnt << q->rq_shift;
    q->buf = page_alloc(rq_bytes + q->sq_cnt * 64);
    q->rq = q->buf;
    q->sq = q->buf + rq_bytes;
    q->db = page_alloc(64);
    struct mlx5_ib_create_qp ucmd;
    memset(&ucmd, 0, sizeof ucmd);
    ucmd.buf_addr = (uintptr_t)q->buf;
    ucmd.db_addr = (uintptr_t)q->db;
    ucmd.sq_wqe_count = q->sq_cnt;
    ucmd.rq_wqe_count = q->rq_cnt;
    ucmd.rq_wqe_shift = q->rq_shift;
    ucmd.flags = MLX5_QP_FLAG_UAR_PAGE_INDEX;
    ucmd.uidx = p->cqe_version ? uidx : 0xffffff;
    ucmd.bfreg_index = p->uar_page_id;
    struct mlx5_ib_create_qp_resp uresp;
    memset(&uresp, 0, sizeof uresp);
    struct ib_uverbs_qp_cap cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
                                   .max_recv_sge = 1, .max_inline_data = 0}, rcap;
    uint32_t qpn = 0;
    struct req r;
    req_init(&r, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
    struct ib_uverbs_attr *h = attr(&r, UVERBS_ATTR_CREATE_QP_HANDLE, 0, 0);
    attr(&r, UVERBS_ATTR_CREATE_QP_PD_HANDLE, 0, p->pd);
    attr(&r, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, 0, cq->handle);
    attr(&r, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, 0, cq->handle);
    ptr_in(&r, UVERBS_ATTR_CREATE_QP_USER_HANDLE, &user_handle, 8);
    attr(&r, UVERBS_ATTR_CREATE_QP_CAP, sizeof cap, (uintptr_t)&cap);
    attr(&r, UVERBS_ATTR_CREATE_QP_TYPE, 8, IB_UVERBS_QPT_UC);
    attr(&r, UVERBS_ATTR_CREATE_QP_RESP_CAP, sizeof rcap, (uintptr_t)&rcap);
    attr(&r, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4, (uintptr_t)&qpn);
    attr(&r, UVERBS_ATTR_UHW_IN, sizeof ucmd, (uintptr_t)&ucmd);
    attr(&r, UVERBS_ATTR_UHW_OUT, sizeof uresp, (uintptr_t)&uresp);
    CHECK(run(p->fd, &r) == 0);
    q->handle = (uint32_t)h->data;
    q->qpn = qpn;
}

/* RESET -> INIT -> RTR -> RTS, UC over RoCE v2 (kernel drivers/infiniband/core/verbs.c
 * qp_state_table; uverbs_cmd.c modify_qp). */
static void qp_connect(struct port *p, struct qp *q, const uint8_t peer_gid[16], uint32_t peer_qpn,
                       uint32_t sq_psn, uint32_t rq_psn)
{
    struct ib_uverbs_modify_qp m;
    memset(&m, 0, sizeof m);
    m.qp_handle = q->handle;
    m.attr_mask = QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS;
    m.qp_state = 1;
    m.pkey_index = 0;
    m.port_num = 1;
    m.qp_access_flags = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;
    CHECK(invoke_write(p->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof m, NULL, 0, NULL, 0) == 0);
    memset(&m, 0, sizeof m);
    m.qp_handle = q->handle;
    m.attr_mask = QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN;
    m.qp_state = 2;
    m.path_mtu = 3;                        /* 1024 */
    m.dest_qp_num = peer_qpn;
    m.rq_psn = rq_psn;
    memcpy(m.dest.dgid, peer_gid, 16);
    m.dest.is_global = 1;
    m.dest.sgid_index = (uint8_t)p->gid_index;
    m.dest.hop_limit = 64;
    m.dest.port_num = 1;
    CHECK(invoke_write(p->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof m, NULL, 0, NULL, 0) == 0);
    memset(&m, 0, sizeof m);
    m.qp_handle = q->handle;
    m.attr_mask = QP_STATE | QP_SQ_PSN;
    m.qp_state = 3;
    m.sq_psn = sq_psn;
    CHECK(invoke_write(p->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof m, NULL, 0, NULL, 0) == 0);
}

static int cq_poll(struct cq *c, struct mlx5_cqe64 *out, int timeout_ms)
{
    for (int i = 0; i < timeout_ms * 10; i++) {
        struct mlx5_cqe64 *e = (struct mlx5_cqe64 *)(c->buf + (c->ci & (c->ncqe - 1)) * 64);
        uint8_t op = __atomic_load_n(&e->op_own, __ATOMIC_ACQUIRE);
        if ((op >> 4) != MLX5_CQE_INVALID && (op & MLX5_CQE_OWNER_MASK) == !!(c->ci & c->ncqe)) {
            memcpy(out, e, sizeof *out);
            c->ci++;
            __atomic_store_n(&c->db[0] /* SET_CI */, htobe32(c->ci & 0xffffff), __ATOMIC_RELEASE);
            return 1;
        }
        usleep(100);
    }
    return 0;
}

/* The device's internal timer as the CORE_CLOCK page shows it (mmap command 5, read-only;
 * hca_core_clock_offset 0 on the emulator): internal_timer_h/l, big-endian, high word first.
 * The page is refreshed every millisecond, so it may lag the timer by that much. */
static uint64_t core_clock(int fd)
{
    static const volatile uint32_t *w;
    if (!w) {
        void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (off_t)MLX5_IB_MMAP_CORE_CLOCK << 20);
        CHECK(m != MAP_FAILED);
        w = m;
    }
    uint32_t hi, lo;
    do { hi = be32toh(w[0]); lo = be32toh(w[1]); } while (hi != be32toh(w[0]));
    return (uint64_t)hi << 32 | lo;
}

/* What the two sides tell each other out of band (a real program would use TCP). */
struct endpoint { uint32_t qpn, rkey; uint64_t addr; uint8_t gid[16]; };

static void xfer(int wfd, int rfd, const struct endpoint *mine, struct endpoint *theirs)
{
    CHECK(write(wfd, mine, sizeof *mine) == (ssize_t)sizeof *mine);
    CHECK(read(rfd, theirs, sizeof *theirs) == (ssize_t)sizeof *theirs);
}

static const size_t len = 4000;
static const uint32_t imm_host = 0x600dcafe;

/* Receiver: device 0, CQ + UC QP + one posted receive; waits for the CQE and checks it. */
static int receiver(int wfd, int rfd)
{
    struct port rx;
    port_open(&rx, 0);
    CHECK_EQ(rx.cqe_version, 1);
    struct cq rcq;
    cq_create(&rx, &rcq, 16, 0xc0ffee01);
    struct qp rq;
    qp_create(&rx, &rq, &rcq, 0x1234, 0xabc1);
    uint8_t *dst = page_alloc(65536);
    uint32_t dst_lkey, dst_rkey;
    reg_mr(&rx, dst, 65536, IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE, &dst_lkey, &dst_rkey);
    /* the receive that WRITE with immediate consumes (rdma-core providers/mlx5/qp.c
     * mlx5_post_recv): one SGE, then the ring slot is full (16-byte stride), so no
     * terminator */
    struct mlx5_wqe_data_seg *rseg = (struct mlx5_wqe_data_seg *)(rq.rq + (rq.rq_pi & (rq.rq_cnt - 1)) * 16);
    rseg->byte_count = htobe32(64);
    rseg->lkey = htobe32(dst_lkey);
    rseg->addr = htobe64((uintptr_t)dst + 60000);
    rq.rq_pi++;
    __atomic_store_n(&rq.db[MLX5_RCV_DBR], htobe32(rq.rq_pi), __ATOMIC_RELEASE);
    struct endpoint me = {.qpn = rq.qpn, .rkey = dst_rkey, .addr = (uintptr_t)dst + 100}, peer;
    memcpy(me.gid, rx.gid, 16);
    xfer(wfd, rfd, &me, &peer);
    qp_connect(&rx, &rq, peer.gid, peer.qpn, 0x100, 0x200);
    uint64_t t0 = core_clock(rx.fd);
    CHECK(write(wfd, "g", 1) == 1);                 /* ready: the sender may post */

    struct mlx5_cqe64 c;
    CHECK(cq_poll(&rcq, &c, 5000));
    uint64_t ts = be64toh(c.timestamp), t1 = core_clock(rx.fd);
    for (int i = 0; i < 1000 && t1 < ts; i++) {     /* the page lags by up to a refresh */
        usleep(1000);
        t1 = core_clock(rx.fd);
    }
    /* every field of the responder's CQE (mlx5dv.h struct mlx5_cqe64) */
    CHECK_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_RESP_WR_IMM);
    CHECK_EQ(mlx5dv_get_cqe_owner(&c), 0);
    CHECK_EQ(mlx5dv_get_cqe_se(&c), 1);
    CHECK_EQ(mlx5dv_get_cqe_format(&c), 0);
    CHECK_EQ(be32toh(c.byte_cnt), len);
    CHECK_EQ(be32toh(c.imm_inval_pkey), imm_host);
    CHECK_EQ(be32toh(c.sop_drop_qpn), rq.qpn);          /* opcode byte 0 on the responder */
    CHECK_EQ(be32toh(c.srqn_uidx), rq.uidx);
    CHECK_EQ(be16toh(c.wqe_counter), 0);
    CHECK(ts >= t0 && ts <= t1);    /* the device's free-running timer (docs/emulator.md) */
    static const uint8_t zero[64];
    CHECK(!memcmp(&c, zero, 32));   /* bytes 0..31 unused for RC/UC (no scatter-to-CQE) */
    CHECK_EQ(be32toh(c.flags_rqpn), 0);
    for (size_t i = 0; i < len; i++) CHECK_EQ(dst[100 + i], (uint8_t)(i * 11 + 3));
    CHECK(dst[99] == 0 && dst[100 + len] == 0);
    for (int i = 0; i < 64; i++) CHECK(dst[60000 + i] == 0);   /* the receive's buffer is untouched */
    CHECK(!cq_poll(&rcq, &c, 20));                            /* exactly one CQE */
    printf("nic_write_imm: receiver ok: %zu bytes, imm 0x%08x, QPN 0x%x, uidx 0x%x\n", len,
           imm_host, rq.qpn, rq.uidx);
    munmap((void *)rx.uar, (size_t)sysconf(_SC_PAGESIZE));
    close(rx.async_fd);
    close(rx.fd);
    free_all();
    return 0;
}

/* Sender: device 1, UC QP; posts RDMA WRITE with immediate and checks its own CQE. */
static int sender(int wfd, int rfd)
{
    struct port tx;
    port_open(&tx, 1);
    struct cq scq;
    cq_create(&tx, &scq, 16, 0xc0ffee02);
    struct qp sq;
    qp_create(&tx, &sq, &scq, 0x5678, 0xabc2);
    uint8_t *src = page_alloc(65536);
    for (size_t i = 0; i < len; i++) src[i] = (uint8_t)(i * 11 + 3);
    uint32_t src_lkey, src_rkey;
    reg_mr(&tx, src, 65536, IB_UVERBS_ACCESS_LOCAL_WRITE, &src_lkey, &src_rkey);
    struct endpoint me = {.qpn = sq.qpn}, peer;
    memcpy(me.gid, tx.gid, 16);
    xfer(wfd, rfd, &me, &peer);
    qp_connect(&tx, &sq, peer.gid, peer.qpn, 0x200, 0x100);
    char go;
    CHECK(read(rfd, &go, 1) == 1);

    /* RDMA WRITE with immediate: ctrl + raddr + data = 3 x 16 bytes (mlx5dv.h segments;
     * rdma-core providers/mlx5/qp.c _mlx5_post_send) */
    uint8_t *w = sq.sq + (sq.sq_pi & (sq.sq_cnt - 1)) * 64;
    memset(w, 0, 64);
    struct mlx5_wqe_ctrl_seg *ctrl = (struct mlx5_wqe_ctrl_seg *)w;
    struct mlx5_wqe_raddr_seg *raddr = (struct mlx5_wqe_raddr_seg *)(w + 16);
    struct mlx5_wqe_data_seg *data = (struct mlx5_wqe_data_seg *)(w + 32);
    ctrl->opmod_idx_opcode = htobe32((uint32_t)sq.sq_pi << 8 | MLX5_OPCODE_RDMA_WRITE_IMM);
    ctrl->qpn_ds = htobe32(sq.qpn << 8 | 3);
    ctrl->fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED;
    ctrl->imm = htobe32(imm_host);
    raddr->raddr = htobe64(peer.addr);
    raddr->rkey = htobe32(peer.rkey);
    data->byte_count = htobe32((uint32_t)len);
    data->lkey = htobe32(src_lkey);
    data->addr = htobe64((uintptr_t)src);
    uint16_t wqe_idx = sq.sq_pi;
    sq.sq_pi++;
    /* the WQE before the doorbell record (release), the record before the UAR write (a release
     * store orders every earlier store): rdma-core providers/mlx5/qp.c post_send_db */
    __atomic_store_n(&sq.db[MLX5_SND_DBR], htobe32(sq.sq_pi), __ATOMIC_RELEASE);
    uint64_t ctrl8;
    memcpy(&ctrl8, w, 8);
    __atomic_store_n((volatile uint64_t *)(tx.uar + 0x800), ctrl8, __ATOMIC_SEQ_CST);  /* doorbell */

    struct mlx5_cqe64 c;
    CHECK(cq_poll(&scq, &c, 5000));
    CHECK_EQ(mlx5dv_get_cqe_opcode(&c), MLX5_CQE_REQ);
    CHECK_EQ(be32toh(c.sop_drop_qpn) >> 24, MLX5_OPCODE_RDMA_WRITE_IMM);
    CHECK_EQ(be32toh(c.sop_drop_qpn) & 0xffffff, sq.qpn);
    CHECK_EQ(be16toh(c.wqe_counter), wqe_idx);
    CHECK_EQ(be32toh(c.srqn_uidx) & 0xffffff, sq.uidx);
    CHECK_EQ(mlx5dv_get_cqe_owner(&c), 0);
    printf("nic_write_imm: sender ok: QPN 0x%x, WQE %u completed\n", sq.qpn, wqe_idx);
    munmap((void *)tx.uar, (size_t)sysconf(_SC_PAGESIZE));
    close(tx.async_fd);
    close(tx.fd);
    free_all();
    return 0;
}

struct thread_arg { int wfd, rfd, rc; };
static void *receiver_thread(void *a)
{
    struct thread_arg *t = a;
    t->rc = receiver(t->wfd, t->rfd);
    return NULL;
}

/* nic_write_imm          both ports in this process (the receiver on a second thread)
 * nic_write_imm --fork   the receiver in a child process: two processes, two emulators */
int main(int argc, char **argv)
{
    int to_rx[2], to_tx[2];
    CHECK(pipe(to_rx) == 0 && pipe(to_tx) == 0);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && !strcmp(argv[1], "--fork")) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) _exit(receiver(to_tx[1], to_rx[0]));
        int rc = sender(to_rx[1], to_tx[0]);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        printf("nic_write_imm: ok (two processes)\n");
        return rc;
    }
    struct thread_arg t = {to_tx[1], to_rx[0], -1};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, receiver_thread, &t) == 0);
    int rc = sender(to_rx[1], to_tx[0]);
    pthread_join(th, NULL);
    CHECK_EQ(t.rc, 0);
    printf("nic_write_imm: ok\n");
    return rc;
}
