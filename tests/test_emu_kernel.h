/* test_emu_kernel.h: raw uverbs/mlx5 helpers for the emulated-kernel suites.  Everything is built
 * by hand from the kernel uapi headers (no project code), so the tests speak the ABI exactly as
 * a foreign program would.  Helpers return 0 or -errno. */
#ifndef MLXD_TEST_EMU_KERNEL_H
#define MLXD_TEST_EMU_KERNEL_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_user_ioctl.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <rdma/mlx5_user_ioctl_verbs.h>
#include "mlxd_emu.h"

#define TK_DRIVER_MLX5 1            /* RDMA_DRIVER_MLX5 (uapi ib_user_ioctl_verbs.h) */

struct tk_ioc {
    struct ib_uverbs_ioctl_hdr hdr;
    struct ib_uverbs_attr attrs[24];
};

static inline void tk_ioc_init(struct tk_ioc *c, uint16_t obj, uint16_t meth)
{
    memset(c, 0, sizeof *c);
    c->hdr.object_id = obj;
    c->hdr.method_id = meth;
    c->hdr.driver_id = TK_DRIVER_MLX5;
}

static inline struct ib_uverbs_attr *tk_attr(struct tk_ioc *c, uint16_t id, uint16_t len, uint64_t data)
{
    struct ib_uverbs_attr *a = &c->attrs[c->hdr.num_attrs++];
    a->attr_id = id;
    a->len = len;
    a->flags = UVERBS_ATTR_F_MANDATORY;    /* as libibverbs does */
    a->data = data;
    return a;
}

/* PTR_IN: inline when len <= 8 */
static inline struct ib_uverbs_attr *tk_in(struct tk_ioc *c, uint16_t id, const void *p, uint16_t len)
{
    uint64_t d = 0;
    if (len <= 8) memcpy(&d, p, len); else d = (uintptr_t)p;
    return tk_attr(c, id, len, d);
}
static inline struct ib_uverbs_attr *tk_out(struct tk_ioc *c, uint16_t id, void *p, uint16_t len)
{ return tk_attr(c, id, len, (uintptr_t)p); }
static inline struct ib_uverbs_attr *tk_const(struct tk_ioc *c, uint16_t id, uint64_t v)
{ return tk_attr(c, id, 8, v); }
static inline struct ib_uverbs_attr *tk_idr(struct tk_ioc *c, uint16_t id, uint64_t h)
{ return tk_attr(c, id, 0, h); }

static inline int tk_run(int fd, struct tk_ioc *c)
{
    c->hdr.length = (uint16_t)(sizeof c->hdr + c->hdr.num_attrs * sizeof c->attrs[0]);
    return ioctl(fd, RDMA_VERBS_IOCTL, c) ? -errno : 0;
}

static inline int tk_open(unsigned dev)
{
    char p[64];
    snprintf(p, sizeof p, "/dev/infiniband/uverbs%u", dev);
    return open(p, O_RDWR | O_CLOEXEC);
}

/* GET_CONTEXT ioctl with mlx5 req_v2: lib_caps given (3 = 4K_UAR | DYN_UAR). */
static inline int tk_get_context_caps(int fd, uint64_t lib_caps, uint32_t bfregs,
                                      struct mlx5_ib_alloc_ucontext_resp *resp)
{
    struct mlx5_ib_alloc_ucontext_req_v2 req;
    memset(&req, 0, sizeof req);
    req.total_num_bfregs = bfregs;
    req.num_low_latency_bfregs = 0;
    req.max_cqe_version = 1;
    req.lib_caps = lib_caps;
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT);
    tk_in(&c, UVERBS_ATTR_UHW_IN, &req, sizeof req);
    tk_out(&c, UVERBS_ATTR_UHW_OUT, resp, sizeof *resp);
    return tk_run(fd, &c);
}
static inline int tk_get_context(int fd, struct mlx5_ib_alloc_ucontext_resp *resp)
{ return tk_get_context_caps(fd, MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR, 0, resp); }

static inline int tk_async_alloc(int fd, int *afd)
{
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC);
    tk_idr(&c, UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, 0);
    int r = tk_run(fd, &c);
    if (!r) *afd = (int)c.attrs[0].data;
    return r;
}

/* A legacy command through DEVICE/INVOKE_WRITE. */
static inline int tk_invoke(int fd, uint32_t cmd, const void *in, uint16_t inlen, void *out,
                            uint16_t outlen, const void *uhw_in, uint16_t uhw_inlen,
                            void *uhw_out, uint16_t uhw_outlen)
{
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE);
    tk_const(&c, UVERBS_ATTR_WRITE_CMD, cmd);
    if (in) tk_in(&c, UVERBS_ATTR_CORE_IN, in, inlen);
    if (out) tk_out(&c, UVERBS_ATTR_CORE_OUT, out, outlen);
    if (uhw_in) tk_in(&c, UVERBS_ATTR_UHW_IN, uhw_in, uhw_inlen);
    if (uhw_out) tk_out(&c, UVERBS_ATTR_UHW_OUT, uhw_out, uhw_outlen);
    return tk_run(fd, &c);
}

static inline int tk_alloc_pd(int fd, uint32_t *h, uint32_t *pdn)
{
    struct ib_uverbs_alloc_pd req = { 0 };
    struct ib_uverbs_alloc_pd_resp resp = { 0 };
    struct mlx5_ib_alloc_pd_resp mresp = { 0 };
    int r = tk_invoke(fd, IB_USER_VERBS_CMD_ALLOC_PD, &req, sizeof req, &resp, sizeof resp, NULL, 0,
                      &mresp, sizeof mresp);
    if (!r) { *h = resp.pd_handle; if (pdn) *pdn = mresp.pdn; }
    return r;
}

static inline int tk_destroy(int fd, uint16_t obj, uint16_t meth, uint32_t h)
{
    struct tk_ioc c;
    tk_ioc_init(&c, obj, meth);
    tk_idr(&c, 0, h);
    return tk_run(fd, &c);
}
#define tk_dealloc_pd(fd, h) tk_destroy(fd, UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY, h)
#define tk_dereg_mr(fd, h)   tk_destroy(fd, UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY, h)

static inline int tk_reg_mr(int fd, uint32_t pd, void *addr, uint64_t len, uint32_t access,
                            uint32_t *h, uint32_t *lkey)
{
    struct ib_uverbs_reg_mr req = { 0 };
    req.start = (uintptr_t)addr;
    req.length = len;
    req.hca_va = (uintptr_t)addr;
    req.pd_handle = pd;
    req.access_flags = access;
    struct ib_uverbs_reg_mr_resp resp = { 0 };
    int r = tk_invoke(fd, IB_USER_VERBS_CMD_REG_MR, &req, sizeof req, &resp, sizeof resp, NULL, 0, NULL, 0);
    if (!r) { *h = resp.mr_handle; if (lkey) *lkey = resp.lkey; }
    return r;
}

static inline int tk_uar_alloc(int fd, uint32_t type, uint32_t *h, uint64_t *off, uint32_t *page)
{
    struct tk_ioc c;
    uint32_t len = 0;
    tk_ioc_init(&c, MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_ALLOC);
    tk_idr(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, 0);
    tk_const(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, type);
    tk_out(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, off, 8);
    tk_out(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &len, 4);
    tk_out(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, page, 4);
    int r = tk_run(fd, &c);
    if (!r) *h = (uint32_t)c.attrs[0].data;
    return r;
}
static inline int tk_uar_destroy(int fd, uint32_t h)
{
    struct tk_ioc c;
    tk_ioc_init(&c, MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_DESTROY);
    tk_idr(&c, MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, h);
    return tk_run(fd, &c);
}

/* Process memory for one CQ or QP: page-aligned ring + an 8-byte doorbell record. */
struct tk_mem { void *buf; size_t len; uint32_t *db; };
static inline void tk_mem_alloc(struct tk_mem *m, size_t len)
{
    m->len = (len + 4095) & ~(size_t)4095;
    if (!m->len) m->len = 4096;
    /* ring, then the doorbell page, then an unmapped guard page */
    m->buf = mmap(NULL, m->len + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(m->buf != MAP_FAILED);
    munmap((uint8_t *)m->buf + m->len + 4096, 4096);
    m->db = (uint32_t *)((uint8_t *)m->buf + m->len);
}

struct tk_cq_opts {
    uint32_t ncqe;            /* CQE attr sends ncqe - 1 */
    uint32_t cqe_size;        /* 64 */
    uint32_t uar_page;        /* UAR_PAGE_INDEX */
    uint64_t buf, db;         /* 0: from mem */
    int comp_fd, event_fd;    /* -1 none */
    uint32_t comp_vector;
    uint16_t uhw_len;         /* 0: sizeof(struct mlx5_ib_create_cq) */
    uint16_t flags;           /* mlx5 flags; default UAR_PAGE_INDEX */
    bool no_flags;
    uint8_t comp_en, comp_fmt;/* cqe_comp_en, cqe_comp_res_format */
};

static inline int tk_create_cq(int fd, const struct tk_cq_opts *o, struct tk_mem *m, uint32_t *h, uint32_t *cqn)
{
    struct mlx5_ib_create_cq u;
    memset(&u, 0, sizeof u);
    u.buf_addr = o->buf ? o->buf : (uintptr_t)m->buf;
    u.db_addr = o->db ? o->db : (uintptr_t)m->db;
    u.cqe_size = o->cqe_size ? o->cqe_size : 64;
    u.flags = o->no_flags ? o->flags : (uint16_t)(o->flags | MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX);
    u.uar_page_index = (uint16_t)o->uar_page;
    u.cqe_comp_en = o->comp_en;
    u.cqe_comp_res_format = o->comp_fmt;
    uint32_t cqe = o->ncqe - 1, resp_cqe = 0;
    uint64_t uh = 0x1234;
    struct mlx5_ib_create_cq_resp mresp = { 0 };
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    tk_idr(&c, UVERBS_ATTR_CREATE_CQ_HANDLE, 0);
    tk_in(&c, UVERBS_ATTR_CREATE_CQ_CQE, &cqe, 4);
    tk_in(&c, UVERBS_ATTR_CREATE_CQ_USER_HANDLE, &uh, 8);
    tk_in(&c, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, &o->comp_vector, 4);
    tk_out(&c, UVERBS_ATTR_CREATE_CQ_RESP_CQE, &resp_cqe, 4);
    if (o->comp_fd >= 0) tk_idr(&c, UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, (uint64_t)o->comp_fd);
    if (o->event_fd >= 0) tk_idr(&c, UVERBS_ATTR_CREATE_CQ_EVENT_FD, (uint64_t)o->event_fd);
    tk_in(&c, UVERBS_ATTR_UHW_IN, &u, o->uhw_len ? o->uhw_len : sizeof u);
    tk_out(&c, UVERBS_ATTR_UHW_OUT, &mresp, sizeof mresp);
    int r = tk_run(fd, &c);
    if (!r) { *h = (uint32_t)c.attrs[0].data; if (cqn) *cqn = mresp.cqn; ck_assert_uint_eq(resp_cqe, o->ncqe - 1); }
    return r;
}

static inline int tk_destroy_cq(int fd, uint32_t h)
{
    struct ib_uverbs_destroy_cq_resp resp;
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY);
    tk_idr(&c, UVERBS_ATTR_DESTROY_CQ_HANDLE, h);
    tk_out(&c, UVERBS_ATTR_DESTROY_CQ_RESP, &resp, sizeof resp);
    return tk_run(fd, &c);
}

struct tk_qp_opts {
    uint32_t type;                 /* IB_UVERBS_QPT_RC / UC */
    uint32_t pd, scq, rcq;
    struct ib_uverbs_qp_cap cap;
    uint32_t sq_wqe_count, rq_wqe_count, rq_wqe_shift;
    uint32_t flags;                /* mlx5 flags (UAR_PAGE_INDEX added unless no_flags) */
    bool no_flags;
    uint32_t uidx, bfreg_index;
    uint64_t buf, db;              /* 0: from mem */
    uint16_t uhw_len;              /* 0: sizeof(struct mlx5_ib_create_qp) */
};

/* Default geometry: 16 send WRs x 1 WQEBB, 16 recv WRs x 1 SGE (stride 16). */
static inline void tk_qp_defaults(struct tk_qp_opts *o, uint32_t type, uint32_t pd, uint32_t cq, uint32_t uar_page)
{
    memset(o, 0, sizeof *o);
    o->type = type;
    o->pd = pd;
    o->scq = o->rcq = cq;
    o->cap.max_send_wr = 16;
    o->cap.max_recv_wr = 16;
    o->cap.max_send_sge = 1;
    o->cap.max_recv_sge = 1;
    o->sq_wqe_count = 16;
    o->rq_wqe_count = 16;
    o->rq_wqe_shift = 4;
    o->bfreg_index = uar_page;
    o->uidx = 7;
}

static inline int tk_create_qp(int fd, const struct tk_qp_opts *o, struct tk_mem *m, uint32_t *h, uint32_t *qpn)
{
    struct mlx5_ib_create_qp u;
    memset(&u, 0, sizeof u);
    u.buf_addr = o->buf ? o->buf : (uintptr_t)m->buf;
    u.db_addr = o->db ? o->db : (uintptr_t)m->db;
    u.sq_wqe_count = o->sq_wqe_count;
    u.rq_wqe_count = o->rq_wqe_count;
    u.rq_wqe_shift = o->rq_wqe_shift;
    u.flags = o->no_flags ? o->flags : (o->flags | MLX5_QP_FLAG_UAR_PAGE_INDEX);
    u.uidx = o->uidx;
    u.bfreg_index = o->bfreg_index;
    struct mlx5_ib_create_qp_resp mresp;
    memset(&mresp, 0xee, sizeof mresp);
    uint64_t uh = 0x5678;
    uint32_t num = 0;
    struct ib_uverbs_qp_cap rcap;
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
    tk_idr(&c, UVERBS_ATTR_CREATE_QP_HANDLE, 0);
    tk_idr(&c, UVERBS_ATTR_CREATE_QP_PD_HANDLE, o->pd);
    tk_idr(&c, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, o->scq);
    tk_idr(&c, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, o->rcq);
    tk_in(&c, UVERBS_ATTR_CREATE_QP_USER_HANDLE, &uh, 8);
    tk_in(&c, UVERBS_ATTR_CREATE_QP_CAP, &o->cap, sizeof o->cap);
    tk_const(&c, UVERBS_ATTR_CREATE_QP_TYPE, o->type);
    tk_out(&c, UVERBS_ATTR_CREATE_QP_RESP_CAP, &rcap, sizeof rcap);
    tk_out(&c, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &num, 4);
    tk_in(&c, UVERBS_ATTR_UHW_IN, &u, o->uhw_len ? o->uhw_len : sizeof u);
    tk_out(&c, UVERBS_ATTR_UHW_OUT, &mresp, sizeof mresp);
    int r = tk_run(fd, &c);
    if (!r) { *h = (uint32_t)c.attrs[0].data; if (qpn) *qpn = num; }
    return r;
}

static inline int tk_destroy_qp(int fd, uint32_t h)
{
    struct ib_uverbs_destroy_qp_resp resp;
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY);
    tk_idr(&c, UVERBS_ATTR_DESTROY_QP_HANDLE, h);
    tk_out(&c, UVERBS_ATTR_DESTROY_QP_RESP, &resp, sizeof resp);
    return tk_run(fd, &c);
}

static inline int tk_modify_qp(int fd, const struct ib_uverbs_modify_qp *m)
{ return tk_invoke(fd, IB_USER_VERBS_CMD_MODIFY_QP, m, sizeof *m, NULL, 0, NULL, 0, NULL, 0); }

static inline int tk_query_qp_state(int fd, uint32_t h)
{
    struct ib_uverbs_query_qp req = { 0 };
    req.qp_handle = h;
    struct ib_uverbs_query_qp_resp resp;
    int r = tk_invoke(fd, IB_USER_VERBS_CMD_QUERY_QP, &req, sizeof req, &resp, sizeof resp, NULL, 0, NULL, 0);
    return r ? r : resp.qp_state;
}

/* Everything a test needs: an open device with a DYN_UAR context, an NC UAR, a PD, a CQ. */
struct tk_env {
    int fd;
    struct mlx5_ib_alloc_ucontext_resp ctx;
    uint32_t uar_h, uar_page, pd, cq, cqn;
    uint64_t uar_off;
    struct tk_mem cqmem;
};

static inline void tk_env_open(struct tk_env *e, unsigned dev)
{
    memset(e, 0, sizeof *e);
    e->fd = tk_open(dev);
    ck_assert_msg(e->fd >= 0, "open uverbs%u: %s", dev, strerror(errno));
    ck_assert_int_eq(tk_get_context(e->fd, &e->ctx), 0);
    ck_assert_int_eq(tk_uar_alloc(e->fd, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC, &e->uar_h, &e->uar_off, &e->uar_page), 0);
    ck_assert_int_eq(tk_alloc_pd(e->fd, &e->pd, NULL), 0);
    tk_mem_alloc(&e->cqmem, 64 * 64);
    struct tk_cq_opts o = { .ncqe = 64, .uar_page = e->uar_page, .comp_fd = -1, .event_fd = -1 };
    ck_assert_int_eq(tk_create_cq(e->fd, &o, &e->cqmem, &e->cq, &e->cqn), 0);
}

/* Devices on addresses of their own (127.<hi>.<lo>.1 and .2), so that tests running at the
 * same time as other emulated programs on the machine do not collide on the UDP port.  The
 * spec is also exported as MLXD_EMU_DEVICES for preloaded children. */
static unsigned char tk_net_hi, tk_net_lo;
static inline void tk_unique_devices(void)
{
    unsigned v = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    tk_net_hi = (unsigned char)(1 + (v >> 8) % 250);
    tk_net_lo = (unsigned char)(v >> 16);
    char spec[128];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2", tk_net_hi, tk_net_lo,
             tk_net_hi, tk_net_lo);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
    setenv("MLXD_EMU_DEVICES", spec, 1);
}

static inline struct mlxd_emu_counts tk_counts(void)
{
    struct mlxd_emu_counts c = { .sz = sizeof c };
    ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
    return c;
}

#endif
