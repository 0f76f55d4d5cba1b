/* ioctl.c: RDMA_VERBS_IOCTL decoding and the ioctl methods.
 *
 * The decoder follows k: drivers/infiniband/core/uverbs_ioctl.c step by step:
 *   ib_uverbs_ioctl      cmd != RDMA_VERBS_IOCTL -> ENOTTY; header unreadable -> EFAULT;
 *                        length > PAGE_SIZE or != 24 + 16 * num_attrs -> EINVAL;
 *                        reserved1/reserved2 != 0 -> EPROTONOSUPPORT
 *   ib_uverbs_cmd_verbs  driver_id != RDMA_DRIVER_MLX5 -> EINVAL; unknown object/method ->
 *                        EPROTONOSUPPORT
 *   ib_uverbs_run_method attrs unreadable -> EFAULT; per attr (uverbs_set_attr): unknown id with
 *                        UVERBS_ATTR_F_MANDATORY -> EPROTONOSUPPORT (else ignored); duplicate ->
 *                        EINVAL; then uverbs_process_attr; a missing mandatory attr -> EINVAL
 *   uverbs_process_attr  PTR_IN with zero_trailing: nonzero bytes past the struct -> EOPNOTSUPP;
 *                        len < min or (no zero_trailing) > len -> EINVAL; attr_data.reserved
 *                        -> EINVAL; pointer data unreadable -> EFAULT.  IDR/FD: reserved or
 *                        len != 0 -> EINVAL; handle lookup ENOENT / wrong type EINVAL / fd
 *                        not an event file of this uverbs file EBADF
 *   uverbs_copy_to       writes min(len, size) and sets UVERBS_ATTR_F_VALID_OUTPUT in the
 *                        caller's attr (EFAULT if either write fails)
 * Inline data: PTR_IN/PTR_OUT of len <= 8 carry the bytes in attr.data (PTR_OUT: only when the
 * spec says so; every PTR_OUT the emulator knows is a pointer).  CONST_IN is PTR_IN of exactly 8
 * bytes.  New handles/fds are written back into attr.data after the method succeeds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <rdma/rdma_user_ioctl.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include "kernel.h"
#include "ioctl_bundle.h"

#define RDMA_DRIVER_MLX5_ID 1
/* newer than the installed 6.1 uapi: UVERBS_ID_DRIVER_NS_WITH_UHW + 0 on CQ_CREATE (k >= 6.11) */
#ifndef MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX
#define MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX 0x1002
#endif

enum { T_PTR_IN, T_PTR_OUT, T_IDR, T_FD };
enum { ACC_READ, ACC_NEW, ACC_DESTROY };
#define MAND 1
#define ZT 2          /* zero_trailing (UVERBS_ATTR_STRUCT) */
#define UHW_ATTRS \
    { UVERBS_ATTR_UHW_IN, T_PTR_IN, 0, 0, 0xffff, 0, 0 }, \
    { UVERBS_ATTR_UHW_OUT, T_PTR_OUT, 0, 0, 0xffff, 0, 0 }

struct aspec { uint16_t id; uint8_t type; uint8_t fl; uint16_t min, max; uint8_t kind; uint8_t access; };

struct mspec;
typedef int (*handler_t)(struct bundle *b);
struct mspec {
    uint16_t obj, meth;
    const char *name;
    handler_t fn;
    bool has_udata;
    struct aspec a[MAX_BATTRS];
};

/* ---------------------------------------------------------------------------------------------
 * bundle accessors for the handlers */
#define SPEC_END(s, i) ((s)->a[i].id == 0 && (s)->a[i].type == 0 && (s)->a[i].min == 0 && (s)->a[i].max == 0)
static int nspec(const struct mspec *m);
static int find(const struct bundle *b, uint16_t id)
{
    int n = nspec(b->m);
    for (int i = 0; i < n; i++)
        if (b->m->a[i].id == id) return i;
    return -1;
}

static bool b_has(const struct bundle *b, uint16_t id)
{
    int i = find(b, id);
    return i >= 0 && b->at[i].present;
}

static const void *b_in(const struct bundle *b, uint16_t id, size_t *len)
{
    int i = find(b, id);
    if (i < 0 || !b->at[i].present) { if (len) *len = 0; return NULL; }
    if (len) *len = b->at[i].len;
    return b->at[i].buf;
}

static uint64_t b_u64(const struct bundle *b, uint16_t id)
{
    size_t len;
    const uint8_t *p = b_in(b, id, &len);
    uint64_t v = 0;
    if (p) memcpy(&v, p, len < 8 ? len : 8);
    return v;
}

static int set_valid_output(struct bundle *b, int i)
{
    uint16_t flags = b->ua[b->at[i].uidx].flags | UVERBS_ATTR_F_VALID_OUTPUT;
    uint64_t where = b->uattrs + 16ull * b->at[i].uidx + offsetof(struct ib_uverbs_attr, flags);
    return emu_copy_to_user(where, &flags, sizeof flags);
}

/* uverbs_copy_to: -ENOENT if the attr is absent */
static int b_out(struct bundle *b, uint16_t id, const void *src, size_t size)
{
    int i = find(b, id);
    if (i < 0 || !b->at[i].present) return -ENOENT;
    size_t n = b->at[i].len < size ? b->at[i].len : size;
    if (emu_copy_to_user(b->at[i].data, src, n)) return -EFAULT;
    return set_valid_output(b, i) ? -EFAULT : 0;
}

static void *b_obj(const struct bundle *b, uint16_t id)
{
    int i = find(b, id);
    return i >= 0 && b->at[i].present ? b->at[i].obj : NULL;
}

static int b_fd(const struct bundle *b, uint16_t id)
{
    int i = find(b, id);
    return i >= 0 && b->at[i].present ? (int)(int64_t)b->at[i].data : -1;
}

static void b_set_new(struct bundle *b, uint16_t id, uint64_t value)
{
    int i = find(b, id);
    if (i >= 0) { b->at[i].new_value = value; b->at[i].has_new = true; }
}

/* udata out: what the driver writes with ib_copy_to_udata (no length check: a missing or short
 * UHW_OUT makes the copy fail with EFAULT, as copy_to_user(NULL) does). */
static int b_uhw_out(struct bundle *b, const void *src, size_t size, bool clamp)
{
    int i = find(b, UVERBS_ATTR_UHW_OUT);
    if (i < 0 || !b->at[i].present) return size && !clamp ? -EFAULT : 0;
    size_t n = clamp && b->at[i].len < size ? b->at[i].len : size;
    return emu_copy_to_user(b->at[i].data, src, n) ? -EFAULT : 0;
}

static size_t b_uhw_outlen(const struct bundle *b)
{
    int i = find(b, UVERBS_ATTR_UHW_OUT);
    return i >= 0 && b->at[i].present ? b->at[i].len : 0;
}

/* ---------------------------------------------------------------------------------------------
 * handlers */
static struct emu_file *F(struct bundle *b) { return b->f; }

static int need_ctx(struct bundle *b) { return F(b)->ctx.has_ucontext ? 0 : -EINVAL; }

/* DEVICE/GET_CONTEXT (k: uverbs_std_types_device.c) */
static int h_get_context(struct bundle *b)
{
    size_t inlen;
    const void *in = b_in(b, UVERBS_ATTR_UHW_IN, &inlen);
    uint8_t resp[sizeof(struct mlx5_ib_alloc_ucontext_resp)];
    size_t rlen = 0;
    int r = emu_k_get_context(F(b), in, inlen, resp, &rlen, b_uhw_outlen(b));
    if (r) return r;
    r = b_uhw_out(b, resp, rlen, true);
    uint32_t ncv = EMU_NUM_COMP_VECTORS;
    uint64_t core = IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS;
    if (!r && b_has(b, UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS))
        r = b_out(b, UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, &ncv, sizeof ncv);
    if (!r && b_has(b, UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT))
        r = b_out(b, UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &core, sizeof core);
    return r;
}

static int h_query_context(struct bundle *b)
{
    int r = need_ctx(b);
    uint32_t ncv = EMU_NUM_COMP_VECTORS;
    uint64_t core = IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS;
    if (!r && b_has(b, UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS))
        r = b_out(b, UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS, &ncv, sizeof ncv);
    if (!r && b_has(b, UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT))
        r = b_out(b, UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT, &core, sizeof core);
    return r;
}

static int h_query_port(struct bundle *b)
{
    int r = need_ctx(b);
    if (r) return r;
    if (b_u64(b, UVERBS_ATTR_QUERY_PORT_PORT_NUM) != 1) return -EINVAL;   /* rdma_is_port_valid */
    struct ib_uverbs_query_port_resp_ex resp;
    memset(&resp, 0, sizeof resp);
    emu_k_fill_port(F(b), &resp.legacy_resp);
    return b_out(b, UVERBS_ATTR_QUERY_PORT_RESP, &resp, sizeof resp);
}

static void gid_entry(struct emu_file *f, unsigned i, struct ib_uverbs_gid_entry *e)
{
    const struct emu_gid *g = &f->ctx.dev->cfg.gids[i];
    memset(e, 0, sizeof *e);
    memcpy(e->gid, g->raw, 16);
    e->gid_index = i;
    e->port_num = 1;
    e->gid_type = g->type == 2 ? IB_UVERBS_GID_TYPE_ROCE_V2
                : g->type == 1 ? IB_UVERBS_GID_TYPE_ROCE_V1 : IB_UVERBS_GID_TYPE_IB;
    e->netdev_ifindex = 0;
}

/* DEVICE/QUERY_GID_TABLE (k: uverbs_std_types_device.c) */
static int h_query_gid_table(struct bundle *b)
{
    int r = need_ctx(b);
    if (r) return r;
    uint64_t esz = b_u64(b, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE);
    if (b_has(b, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS) && b_u64(b, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS))
        return -EINVAL;
    size_t flen;
    b_in(b, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, &flen);
    if (b_has(b, UVERBS_ATTR_QUERY_GID_TABLE_FLAGS) && flen != 4 && flen != 8) return -EINVAL;
    if (!esz) return -EINVAL;
    int i = find(b, UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES);
    uint64_t max = b->at[i].len / esz;
    if (!max) return -EINVAL;
    struct emu_file *f = F(b);
    uint64_t n = 0;
    size_t copy = esz < sizeof(struct ib_uverbs_gid_entry) ? esz : sizeof(struct ib_uverbs_gid_entry);
    for (unsigned g = 0; g < f->ctx.dev->cfg.ngids; g++) {
        if (!f->ctx.dev->cfg.gids[g].valid) continue;
        if (n >= max) return -EINVAL;         /* user buffer too small for all entries */
        struct ib_uverbs_gid_entry e;
        gid_entry(f, g, &e);
        uint64_t dst = b->at[i].data + n * esz;
        if (emu_copy_to_user(dst, &e, copy)) return -EFAULT;
        if (esz > copy && emu_clear_user(dst + copy, esz - copy)) return -EFAULT;
        n++;
    }
    if (set_valid_output(b, i)) return -EFAULT;
    return b_out(b, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &n, sizeof n);
}

/* DEVICE/QUERY_GID_ENTRY: bad port EINVAL, index past the table EINVAL, empty entry ENODATA
 * (k: core/cache.c rdma_get_gid_attr) */
static int h_query_gid_entry(struct bundle *b)
{
    int r = need_ctx(b);
    if (r) return r;
    size_t flen;
    b_in(b, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, &flen);
    if ((flen != 4 && flen != 8) || b_u64(b, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS)) return -EINVAL;
    uint64_t port = b_u64(b, UVERBS_ATTR_QUERY_GID_ENTRY_PORT);
    uint64_t idx = b_u64(b, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX);
    if (port > UINT32_MAX || idx > UINT32_MAX) return -EINVAL;      /* _uverbs_get_const bounds */
    if (port != 1) return -EINVAL;
    if (idx >= EMU_GID_TBL_LEN) return -EINVAL;
    const struct emu_device_cfg *c = &F(b)->ctx.dev->cfg;
    if (idx >= c->ngids || !c->gids[idx].valid) return -ENODATA;
    struct ib_uverbs_gid_entry e;
    gid_entry(F(b), (unsigned)idx, &e);
    return b_out(b, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, &e, sizeof e);
}

/* DEVICE/INVOKE_WRITE (k: uverbs_std_types_device.c) */
static int h_invoke_write(struct bundle *b)
{
    uint64_t cmd = b_u64(b, UVERBS_ATTR_WRITE_CMD);
    bool ex = cmd & IB_USER_VERBS_CMD_FLAG_EXTENDED;
    size_t req, resp;
    bool known;
    if (cmd & ~(uint64_t)(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_CMD_COMMAND_MASK))
        return -EINVAL;
    int r = emu_write_cmd_min((uint32_t)cmd & IB_USER_VERBS_CMD_COMMAND_MASK, ex, &req, &resp, &known);
    if (!known) return -EOPNOTSUPP;
    struct emu_wcmd w;
    memset(&w, 0, sizeof w);
    w.cmd = (uint32_t)cmd & IB_USER_VERBS_CMD_COMMAND_MASK;
    w.ex = ex;
    w.in = b_in(b, UVERBS_ATTR_CORE_IN, &w.inlen);
    int io = find(b, UVERBS_ATTR_CORE_OUT);
    if (io >= 0 && b->at[io].present) { w.out = b->at[io].data; w.outlen = b->at[io].len; }
    if (w.inlen < req || w.outlen < resp) return -ENOSPC;
    (void)r;
    w.uhw_in = b_in(b, UVERBS_ATTR_UHW_IN, &w.uhw_inlen);
    int uo = find(b, UVERBS_ATTR_UHW_OUT);
    if (uo >= 0 && b->at[uo].present) { w.uhw_out = b->at[uo].data; w.uhw_outlen = b->at[uo].len; }
    int fe = emu_fault_check(emu_write_cmd_name(w.cmd, ex));
    if (fe) return -fe;
    r = emu_run_write_cmd(F(b), &w);
    if (!r && io >= 0 && b->at[io].present) r = set_valid_output(b, io) ? -EFAULT : 0;
    return r;
}

/* PD/PD_DESTROY, MR/MR_DESTROY */
static int h_pd_destroy(struct bundle *b)
{ return emu_k_dealloc_pd(F(b), b_obj(b, UVERBS_ATTR_DESTROY_PD_HANDLE)); }
static int h_mr_destroy(struct bundle *b)
{ return emu_k_dereg_mr(F(b), b_obj(b, UVERBS_ATTR_DESTROY_MR_HANDLE)); }

/* MW/MW_DESTROY (k: uverbs_std_types_mw.c) */
static int h_mw_destroy(struct bundle *b)
{ return emu_k_dealloc_mw(F(b), b_obj(b, UVERBS_ATTR_DESTROY_MW_HANDLE)); }

/* MR/REG_DMABUF_MR (k: uverbs_std_types_mr.c) */
static int h_reg_dmabuf_mr(struct bundle *b)
{
    size_t flen;
    b_in(b, UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, &flen);
    if (flen != 4 && flen != 8) return -EINVAL;
    uint64_t access = b_u64(b, UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS);
    if (access & ~(uint64_t)(IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_READ |
                             IB_UVERBS_ACCESS_REMOTE_WRITE | IB_UVERBS_ACCESS_REMOTE_ATOMIC |
                             IB_UVERBS_ACCESS_RELAXED_ORDERING))
        return -EINVAL;
    int32_t fd = (int32_t)b_u64(b, UVERBS_ATTR_REG_DMABUF_MR_FD);
    if (fd < 0) return -EBADF;
    uint32_t h, lkey, rkey;
    int r = emu_k_reg_mr(F(b), b_obj(b, UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE), 0,
                         b_u64(b, UVERBS_ATTR_REG_DMABUF_MR_LENGTH),
                         b_u64(b, UVERBS_ATTR_REG_DMABUF_MR_IOVA), (uint32_t)access, fd,
                         b_u64(b, UVERBS_ATTR_REG_DMABUF_MR_OFFSET), &h, &lkey, &rkey);
    if (r) return r;
    r = b_out(b, UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, &lkey, sizeof lkey);
    if (!r) r = b_out(b, UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, &rkey, sizeof rkey);
    if (r) { void *o; if (!emu_uobj_get(F(b), h, UO_MR, &o)) emu_k_dereg_mr(F(b), o); return r; }
    b_set_new(b, UVERBS_ATTR_REG_DMABUF_MR_HANDLE, h);
    return 0;
}

/* CQ/CQ_CREATE (k: uverbs_std_types_cq.c + hw/mlx5/cq.c) */
static int h_cq_create(struct bundle *b)
{
    struct emu_cq_args a;
    memset(&a, 0, sizeof a);
    a.cqe = (uint32_t)b_u64(b, UVERBS_ATTR_CREATE_CQ_CQE);
    a.user_handle = b_u64(b, UVERBS_ATTR_CREATE_CQ_USER_HANDLE);
    a.comp_vector = (uint32_t)b_u64(b, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR);
    if (b_has(b, UVERBS_ATTR_CREATE_CQ_FLAGS)) {
        size_t flen;
        b_in(b, UVERBS_ATTR_CREATE_CQ_FLAGS, &flen);
        uint64_t fl = b_u64(b, UVERBS_ATTR_CREATE_CQ_FLAGS);
        if ((flen != 4 && flen != 8) ||
            (fl & ~(uint64_t)(IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION | IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN)))
            return -EINVAL;
        a.flags = (uint32_t)fl;
    }
    a.comp_channel_fd = b_fd(b, UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL);
    a.event_fd = b_fd(b, UVERBS_ATTR_CREATE_CQ_EVENT_FD);
    a.uhw_in = b_in(b, UVERBS_ATTR_UHW_IN, &a.uhw_inlen);
    if (b_has(b, MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX)) {
        a.uar_index_attr = true;
        a.uar_index = (uint32_t)b_u64(b, MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX);
    }
    uint32_t h, cqe, cqn;
    int r = emu_k_create_cq(F(b), &a, &h, &cqe, &cqn);
    if (r) return r;
    struct mlx5_ib_create_cq_resp resp = { .cqn = cqn };
    r = b_uhw_out(b, &resp, sizeof(uint32_t), false);         /* mlx5 copies the cqn (4 B) */
    if (!r) r = b_out(b, UVERBS_ATTR_CREATE_CQ_RESP_CQE, &cqe, sizeof cqe);
    if (r) { void *o; if (!emu_uobj_get(F(b), h, UO_CQ, &o)) emu_k_destroy_cq(F(b), o, NULL, NULL); return r; }
    b_set_new(b, UVERBS_ATTR_CREATE_CQ_HANDLE, h);
    return 0;
}

static int h_cq_destroy(struct bundle *b)
{
    struct ib_uverbs_destroy_cq_resp resp;
    memset(&resp, 0, sizeof resp);
    int r = emu_k_destroy_cq(F(b), b_obj(b, UVERBS_ATTR_DESTROY_CQ_HANDLE),
                             &resp.comp_events_reported, &resp.async_events_reported);
    if (r) return r;
    return b_out(b, UVERBS_ATTR_DESTROY_CQ_RESP, &resp, sizeof resp);
}

/* QP/QP_CREATE (k: uverbs_std_types_qp.c + hw/mlx5/qp.c) */
static int h_qp_create(struct bundle *b)
{
    struct emu_qp_args a;
    memset(&a, 0, sizeof a);
    uint64_t type = b_u64(b, UVERBS_ATTR_CREATE_QP_TYPE);
    if (type > 0xff) return -EINVAL;
    a.type = (uint32_t)type;
    if (b_has(b, UVERBS_ATTR_CREATE_QP_FLAGS)) {
        size_t flen;
        b_in(b, UVERBS_ATTR_CREATE_QP_FLAGS, &flen);
        uint64_t fl = b_u64(b, UVERBS_ATTR_CREATE_QP_FLAGS);
        if ((flen != 4 && flen != 8) ||
            (fl & ~(uint64_t)(IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK |
                              IB_UVERBS_QP_CREATE_SCATTER_FCS | IB_UVERBS_QP_CREATE_CVLAN_STRIPPING |
                              IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING |
                              IB_UVERBS_QP_CREATE_SQ_SIG_ALL)))
            return -EINVAL;
        if (fl & ~(uint64_t)IB_UVERBS_QP_CREATE_SQ_SIG_ALL) return -EOPNOTSUPP;  /* raw-packet only */
        a.sq_sig_all = fl & IB_UVERBS_QP_CREATE_SQ_SIG_ALL;
    }
    if (b_has(b, UVERBS_ATTR_CREATE_QP_SOURCE_QPN)) return -EINVAL;   /* UD only */
    if (b_has(b, UVERBS_ATTR_CREATE_QP_XRCD_HANDLE) || b_has(b, UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE))
        return -EINVAL;
    struct ib_uverbs_qp_cap cap;
    memcpy(&cap, b_in(b, UVERBS_ATTR_CREATE_QP_CAP, NULL), sizeof cap);
    a.max_send_wr = cap.max_send_wr;
    a.max_recv_wr = cap.max_recv_wr;
    a.max_send_sge = cap.max_send_sge;
    a.max_recv_sge = cap.max_recv_sge;
    a.max_inline = cap.max_inline_data;
    a.user_handle = b_u64(b, UVERBS_ATTR_CREATE_QP_USER_HANDLE);
    a.event_fd = b_fd(b, UVERBS_ATTR_CREATE_QP_EVENT_FD);
    a.srq = b_has(b, UVERBS_ATTR_CREATE_QP_SRQ_HANDLE) ? b_obj(b, UVERBS_ATTR_CREATE_QP_SRQ_HANDLE) : NULL;
    a.uhw_in = b_in(b, UVERBS_ATTR_UHW_IN, &a.uhw_inlen);
    a.uhw_outlen = b_uhw_outlen(b);
    /* uverbs_attr_get_obj on an absent IDR attr -> ENOENT */
    if (!b_has(b, UVERBS_ATTR_CREATE_QP_PD_HANDLE)) return -ENOENT;
    if (!b_has(b, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE) || !b_has(b, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE))
        return -EINVAL;
    uint32_t h, qpn;
    struct mlx5_ib_create_qp_resp resp;
    int r = emu_k_create_qp(F(b), &a, b_obj(b, UVERBS_ATTR_CREATE_QP_PD_HANDLE),
                            b_obj(b, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE),
                            b_obj(b, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE), &h, &qpn, &resp);
    if (r) return r;
    r = b_uhw_out(b, &resp, sizeof resp, true);
    if (!r && b_has(b, UVERBS_ATTR_CREATE_QP_RESP_CAP)) r = b_out(b, UVERBS_ATTR_CREATE_QP_RESP_CAP, &cap, sizeof cap);
    if (!r && b_has(b, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM)) r = b_out(b, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qpn, sizeof qpn);
    if (r) { void *o; if (!emu_uobj_get(F(b), h, UO_QP, &o)) emu_k_destroy_qp(F(b), o, NULL); return r; }
    b_set_new(b, UVERBS_ATTR_CREATE_QP_HANDLE, h);
    return 0;
}

static int h_qp_destroy(struct bundle *b)
{
    struct ib_uverbs_destroy_qp_resp resp = { 0 };
    int r = emu_k_destroy_qp(F(b), b_obj(b, UVERBS_ATTR_DESTROY_QP_HANDLE), &resp.events_reported);
    if (r) return r;
    return b_out(b, UVERBS_ATTR_DESTROY_QP_RESP, &resp, sizeof resp);
}

/* SRQ/CREATE, SRQ/DESTROY (k: uverbs_std_types_srq.c; the rules in srq.c) */
static int h_srq_create(struct bundle *b)
{
    struct emu_srq_args a;
    memset(&a, 0, sizeof a);
    uint64_t type = b_u64(b, UVERBS_ATTR_CREATE_SRQ_TYPE);
    if (type > UINT32_MAX) return -EINVAL;
    a.type = (uint32_t)type;
    /* XRCD / CQ / MAX_NUM_TAGS belong to XRC and TM SRQs, which this device lacks */
    if (b_has(b, UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE) || b_has(b, UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE) ||
        b_has(b, UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS))
        return -EINVAL;
    a.user_handle = b_u64(b, UVERBS_ATTR_CREATE_SRQ_USER_HANDLE);
    a.max_wr = (uint32_t)b_u64(b, UVERBS_ATTR_CREATE_SRQ_MAX_WR);
    a.max_sge = (uint32_t)b_u64(b, UVERBS_ATTR_CREATE_SRQ_MAX_SGE);
    a.limit = (uint32_t)b_u64(b, UVERBS_ATTR_CREATE_SRQ_LIMIT);
    a.event_fd = b_fd(b, UVERBS_ATTR_CREATE_SRQ_EVENT_FD);
    a.uhw_in = b_in(b, UVERBS_ATTR_UHW_IN, &a.uhw_inlen);
    uint32_t h, max_wr, max_sge, srqn;
    int r = emu_k_create_srq(F(b), b_obj(b, UVERBS_ATTR_CREATE_SRQ_PD_HANDLE), &a, &h, &max_wr,
                             &max_sge, &srqn);
    if (r) return r;
    struct mlx5_ib_create_srq_resp resp = { .srqn = srqn };
    r = b_uhw_out(b, &resp, sizeof resp, true);
    if (!r) r = b_out(b, UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, &max_wr, sizeof max_wr);
    if (!r) r = b_out(b, UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, &max_sge, sizeof max_sge);
    if (!r && b_has(b, UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM))
        r = b_out(b, UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, &srqn, sizeof srqn);
    if (r) { void *o; if (!emu_uobj_get(F(b), h, UO_SRQ, &o)) emu_k_destroy_srq(F(b), o, NULL); return r; }
    b_set_new(b, UVERBS_ATTR_CREATE_SRQ_HANDLE, h);
    return 0;
}

static int h_srq_destroy(struct bundle *b)
{
    struct ib_uverbs_destroy_srq_resp resp = { 0 };
    int r = emu_k_destroy_srq(F(b), b_obj(b, UVERBS_ATTR_DESTROY_SRQ_HANDLE), &resp.events_reported);
    if (r) return r;
    return b_out(b, UVERBS_ATTR_DESTROY_SRQ_RESP, &resp, sizeof resp);
}

/* ASYNC_EVENT/ALLOC (k: uverbs_std_types_async_fd.c) */
static int h_async_alloc(struct bundle *b)
{
    int r = need_ctx(b);
    if (r) return r;
    int fd;
    r = emu_k_async_alloc(F(b), &fd);
    if (r) return r;
    b_set_new(b, UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, (uint64_t)(int64_t)fd);
    return 0;
}

/* MLX5_IB_OBJECT_UAR (k: hw/mlx5/main.c) */
static int h_uar_alloc(struct bundle *b)
{
    uint64_t type = b_u64(b, MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE);
    if (type > UINT32_MAX) return -EINVAL;
    uint32_t h, page_id, len = EMU_PAGE;
    uint64_t off;
    int r = emu_k_uar_alloc(F(b), (uint32_t)type, &h, &off, &page_id);
    if (r) return r;
    r = b_out(b, MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &page_id, sizeof page_id);
    if (!r) r = b_out(b, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &off, sizeof off);
    if (!r) r = b_out(b, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &len, sizeof len);
    if (r) { void *o; if (!emu_uobj_get(F(b), h, UO_UAR, &o)) emu_k_uar_destroy(F(b), o); return r; }
    b_set_new(b, MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, h);
    return 0;
}

static int h_uar_destroy(struct bundle *b)
{ return emu_k_uar_destroy(F(b), b_obj(b, MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE)); }

/* ---------------------------------------------------------------------------------------------
 * method table */
#define IN(id, mn, mx, fl)  { id, T_PTR_IN, fl, mn, mx, 0, 0 }
#define OUT(id, mn, mx, fl) { id, T_PTR_OUT, fl, mn, mx, 0, 0 }
#define CONST(id, fl)       IN(id, 8, 8, fl)
#define FLAGS(id, fl)       IN(id, 4, 0xffff, fl)
#define IDR(id, k, acc, fl) { id, T_IDR, fl, 0, 0, k, acc }
#define FD(id, k, acc, fl)  { id, T_FD, fl, 0, 0, k, acc }

static const struct mspec methods[] = {
    { UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, "INVOKE_WRITE", h_invoke_write, true, {
        CONST(UVERBS_ATTR_WRITE_CMD, MAND),
        IN(UVERBS_ATTR_CORE_IN, 4, 0xffff, 0),
        OUT(UVERBS_ATTR_CORE_OUT, 0, 0xffff, 0),
        UHW_ATTRS } },
    { UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, "QUERY_PORT", h_query_port, false, {
        CONST(UVERBS_ATTR_QUERY_PORT_PORT_NUM, MAND),
        OUT(UVERBS_ATTR_QUERY_PORT_RESP, sizeof(struct ib_uverbs_query_port_resp_ex),
            sizeof(struct ib_uverbs_query_port_resp_ex), MAND | ZT) } },
    { UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT, "GET_CONTEXT", h_get_context, true, {
        OUT(UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, 4, 4, 0),
        OUT(UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, 8, 8, 0),
        UHW_ATTRS } },
    { UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_CONTEXT, "QUERY_CONTEXT", h_query_context, false, {
        OUT(UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS, 4, 4, 0),
        OUT(UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT, 8, 8, 0) } },
    { UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE, "QUERY_GID_TABLE", h_query_gid_table, false, {
        CONST(UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, MAND),
        FLAGS(UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0),
        OUT(UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, 0, 0xffff, MAND),
        OUT(UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, 8, 8, MAND) } },
    { UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY, "QUERY_GID_ENTRY", h_query_gid_entry, false, {
        CONST(UVERBS_ATTR_QUERY_GID_ENTRY_PORT, MAND),
        CONST(UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, MAND),
        FLAGS(UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, MAND),
        OUT(UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, sizeof(struct ib_uverbs_gid_entry),
            sizeof(struct ib_uverbs_gid_entry), MAND | ZT) } },
    { UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY, "PD_DESTROY", h_pd_destroy, false, {
        IDR(UVERBS_ATTR_DESTROY_PD_HANDLE, UO_PD, ACC_DESTROY, MAND) } },
    { UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY, "MR_DESTROY", h_mr_destroy, false, {
        IDR(UVERBS_ATTR_DESTROY_MR_HANDLE, UO_MR, ACC_DESTROY, MAND) } },
    { UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY, "MW_DESTROY", h_mw_destroy, false, {
        IDR(UVERBS_ATTR_DESTROY_MW_HANDLE, UO_MW, ACC_DESTROY, MAND) } },
    { UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR, "REG_DMABUF_MR", h_reg_dmabuf_mr, false, {
        IDR(UVERBS_ATTR_REG_DMABUF_MR_HANDLE, UO_MR, ACC_NEW, MAND),
        IDR(UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, UO_PD, ACC_READ, MAND),
        IN(UVERBS_ATTR_REG_DMABUF_MR_OFFSET, 8, 8, MAND),
        IN(UVERBS_ATTR_REG_DMABUF_MR_LENGTH, 8, 8, MAND),
        IN(UVERBS_ATTR_REG_DMABUF_MR_IOVA, 8, 8, MAND),
        IN(UVERBS_ATTR_REG_DMABUF_MR_FD, 4, 4, MAND),
        FLAGS(UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, MAND),
        OUT(UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, 4, 4, MAND),
        OUT(UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, 4, 4, MAND) } },
    { UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE, "CQ_CREATE", h_cq_create, true, {
        IDR(UVERBS_ATTR_CREATE_CQ_HANDLE, UO_CQ, ACC_NEW, MAND),
        IN(UVERBS_ATTR_CREATE_CQ_CQE, 4, 4, MAND),
        IN(UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 8, 8, MAND),
        FD(UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, UO_COMP_CHANNEL, ACC_READ, 0),
        IN(UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 4, 4, MAND),
        FLAGS(UVERBS_ATTR_CREATE_CQ_FLAGS, 0),
        OUT(UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4, 4, MAND),
        FD(UVERBS_ATTR_CREATE_CQ_EVENT_FD, UO_ASYNC, ACC_READ, 0),
        IN(MLX5_IB_ATTR_CREATE_CQ_UAR_INDEX, 4, 4, 0),
        UHW_ATTRS } },
    { UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY, "CQ_DESTROY", h_cq_destroy, false, {
        IDR(UVERBS_ATTR_DESTROY_CQ_HANDLE, UO_CQ, ACC_DESTROY, MAND),
        OUT(UVERBS_ATTR_DESTROY_CQ_RESP, sizeof(struct ib_uverbs_destroy_cq_resp),
            sizeof(struct ib_uverbs_destroy_cq_resp), MAND) } },
    { UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE, "QP_CREATE", h_qp_create, true, {
        IDR(UVERBS_ATTR_CREATE_QP_HANDLE, UO_QP, ACC_NEW, MAND),
        IDR(UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, UO_NONE, ACC_READ, 0),
        IDR(UVERBS_ATTR_CREATE_QP_PD_HANDLE, UO_PD, ACC_READ, 0),
        IDR(UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, UO_SRQ, ACC_READ, 0),
        IDR(UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, UO_CQ, ACC_READ, 0),
        IDR(UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, UO_CQ, ACC_READ, 0),
        IDR(UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE, UO_NONE, ACC_READ, 0),
        IN(UVERBS_ATTR_CREATE_QP_USER_HANDLE, 8, 8, MAND),
        IN(UVERBS_ATTR_CREATE_QP_CAP, sizeof(struct ib_uverbs_qp_cap), sizeof(struct ib_uverbs_qp_cap), MAND),
        CONST(UVERBS_ATTR_CREATE_QP_TYPE, MAND),
        FLAGS(UVERBS_ATTR_CREATE_QP_FLAGS, 0),
        IN(UVERBS_ATTR_CREATE_QP_SOURCE_QPN, 4, 4, 0),
        FD(UVERBS_ATTR_CREATE_QP_EVENT_FD, UO_ASYNC, ACC_READ, 0),
        OUT(UVERBS_ATTR_CREATE_QP_RESP_CAP, sizeof(struct ib_uverbs_qp_cap), sizeof(struct ib_uverbs_qp_cap), 0),
        OUT(UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4, 4, 0),
        UHW_ATTRS } },
    { UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY, "QP_DESTROY", h_qp_destroy, false, {
        IDR(UVERBS_ATTR_DESTROY_QP_HANDLE, UO_QP, ACC_DESTROY, MAND),
        OUT(UVERBS_ATTR_DESTROY_QP_RESP, 4, 4, MAND) } },
    { UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_CREATE, "SRQ_CREATE", h_srq_create, true, {
        IDR(UVERBS_ATTR_CREATE_SRQ_HANDLE, UO_SRQ, ACC_NEW, MAND),
        IDR(UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, UO_PD, ACC_READ, MAND),
        IDR(UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE, UO_NONE, ACC_READ, 0),
        IDR(UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE, UO_CQ, ACC_READ, 0),
        IN(UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, 8, 8, MAND),
        IN(UVERBS_ATTR_CREATE_SRQ_MAX_WR, 4, 4, MAND),
        IN(UVERBS_ATTR_CREATE_SRQ_MAX_SGE, 4, 4, MAND),
        IN(UVERBS_ATTR_CREATE_SRQ_LIMIT, 4, 4, MAND),
        IN(UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS, 4, 4, 0),
        CONST(UVERBS_ATTR_CREATE_SRQ_TYPE, MAND),
        FD(UVERBS_ATTR_CREATE_SRQ_EVENT_FD, UO_ASYNC, ACC_READ, 0),
        OUT(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, 4, 4, MAND),
        OUT(UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, 4, 4, MAND),
        OUT(UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, 4, 4, 0),
        UHW_ATTRS } },
    { UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY, "SRQ_DESTROY", h_srq_destroy, false, {
        IDR(UVERBS_ATTR_DESTROY_SRQ_HANDLE, UO_SRQ, ACC_DESTROY, MAND),
        OUT(UVERBS_ATTR_DESTROY_SRQ_RESP, sizeof(struct ib_uverbs_destroy_srq_resp),
            sizeof(struct ib_uverbs_destroy_srq_resp), MAND) } },
    { UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC, "ASYNC_EVENT_ALLOC", h_async_alloc, false, {
        FD(UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, UO_ASYNC, ACC_NEW, MAND) } },
    { MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_ALLOC, "UAR_OBJ_ALLOC", h_uar_alloc, false, {
        IDR(MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, UO_UAR, ACC_NEW, MAND),
        CONST(MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, MAND),
        OUT(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, 8, 8, MAND),
        OUT(MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, 4, 4, MAND),
        OUT(MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, 4, 4, MAND) } },
    { MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_DESTROY, "UAR_OBJ_DESTROY", h_uar_destroy, false, {
        IDR(MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, UO_UAR, ACC_DESTROY, MAND) } },
};

static int nspec(const struct mspec *m)
{
    int n = 0;
    while (n < MAX_BATTRS && !SPEC_END(m, n)) n++;
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * the decoder */
static int process_attr(struct bundle *b, int si, const struct ib_uverbs_attr *u, unsigned uidx)
{
    const struct aspec *s = &b->m->a[si];
    struct battr *at = &b->at[si];
    struct emu_file *f = b->f;
    at->uidx = uidx;
    at->len = u->len;
    at->data = u->data;
    switch (s->type) {
    case T_PTR_IN:
        if ((s->fl & ZT) && u->len > s->max) {
            int c = 1;
            if (u->len > 8) {
                c = emu_user_buffer_cleared(u->data + s->max, u->len - s->max);
            } else {
                const uint8_t *d = (const uint8_t *)&u->data;
                for (unsigned k = s->max; k < u->len; k++)
                    if (d[k]) c = 0;
            }
            if (c < 0) return -EFAULT;
            if (!c) return -EOPNOTSUPP;
        }
        /* fallthrough */
    case T_PTR_OUT:
        if (u->len < s->min || (!(s->fl & ZT) && u->len > s->max)) return -EINVAL;
        if (u->attr_data.reserved) return -EINVAL;
        if (s->type == T_PTR_IN) {
            at->buf = malloc(u->len ? u->len : 1);
            if (!at->buf) return -ENOMEM;
            if (u->len <= sizeof u->data) memcpy(at->buf, &u->data, u->len);
            else if (emu_copy_from_user(at->buf, u->data, u->len)) return -EFAULT;
        }
        return 0;
    case T_IDR:
    case T_FD:
        if (u->attr_data.reserved) return -EINVAL;
        if (u->len != 0) return -EINVAL;
        if (s->access == ACC_NEW) {
            /* alloc_uobj -> ib_uverbs_get_ucontext_file: no context -> EINVAL */
            return f->ctx.has_ucontext ? 0 : -EINVAL;
        }
        if (s->type == T_FD) {
            int64_t fd = (int64_t)u->data;
            struct k_evq *q = (fd >= 0 && fd < EMU_MAX_FD) ? emu_evq_by_fd((int)fd) : NULL;
            /* lookup_get_fd_uobject: not an event file of this type/file -> EBADF */
            if (!q || q->chan.ctx != &f->ctx || q->is_async != (s->kind == UO_ASYNC)) return -EBADF;
            at->obj = q;
            return 0;
        }
        if (s->kind == UO_NONE) {
            /* XRCD/IND_TABLE: objects the emulator never creates */
            return u->data > INT32_MAX ? -EINVAL : -ENOENT;
        }
        if (u->data > INT32_MAX) return -EINVAL;      /* lookup_get_idr_uobject: id range */
        return emu_uobj_get(f, (uint32_t)u->data, s->kind, &at->obj);
    }
    return -EOPNOTSUPP;
}

static void bundle_free(struct bundle *b)
{
    for (int i = 0; i < MAX_BATTRS; i++) free(b->at[i].buf);
    free(b->ua);
}

int emu_ioctl(struct emu_file *f, unsigned long req, void *arg)
{
    if (req != RDMA_VERBS_IOCTL) return -ENOTTY;
    int fe = emu_fault_check(NULL);
    if (fe) return -fe;
    struct ib_uverbs_ioctl_hdr hdr;
    if (emu_copy_from_user(&hdr, (uintptr_t)arg, sizeof hdr)) return -EFAULT;
    if (hdr.length > EMU_PAGE || hdr.length != sizeof hdr + 16u * hdr.num_attrs) return -EINVAL;
    if (hdr.reserved1 || hdr.reserved2) return -EPROTONOSUPPORT;
    if (hdr.driver_id != RDMA_DRIVER_MLX5_ID) return -EINVAL;
    const struct mspec *m = NULL;
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].obj == hdr.object_id && methods[i].meth == hdr.method_id) { m = &methods[i]; break; }
    if (!m) return -EPROTONOSUPPORT;

    struct bundle b;
    memset(&b, 0, sizeof b);
    b.f = f;
    b.m = m;
    b.uattrs = (uintptr_t)arg + sizeof hdr;
    b.n = hdr.num_attrs;
    int r = 0;
    b.ua = malloc(16u * (hdr.num_attrs ? hdr.num_attrs : 1));
    if (!b.ua) return -ENOMEM;
    if (emu_copy_from_user(b.ua, b.uattrs, 16u * hdr.num_attrs)) { r = -EFAULT; goto out; }
    int ns = nspec(m);
    for (unsigned i = 0; i < hdr.num_attrs; i++) {
        const struct ib_uverbs_attr *u = &b.ua[i];
        int si = -1;
        for (int k = 0; k < ns; k++) if (m->a[k].id == u->attr_id) { si = k; break; }
        if (si < 0) {
            if (u->flags & UVERBS_ATTR_F_MANDATORY) { r = -EPROTONOSUPPORT; goto out; }
            continue;
        }
        if (b.at[si].present) { r = -EINVAL; goto out; }
        r = process_attr(&b, si, u, i);
        if (r) goto out;
        b.at[si].present = true;
    }
    for (int k = 0; k < ns; k++)
        if ((m->a[k].fl & MAND) && !b.at[k].present) { r = -EINVAL; goto out; }
    if (m->fn != h_invoke_write) {
        fe = emu_fault_check(m->name);
        if (fe) { r = -fe; goto out; }
    }
    r = m->fn(&b);
    if (!r && m->has_udata && b_has(&b, UVERBS_ATTR_UHW_OUT))
        r = set_valid_output(&b, find(&b, UVERBS_ATTR_UHW_OUT)) ? -EFAULT : 0;
    if (!r) {
        /* write back new handles / fds (k: uverbs_process_attr ACCESS_NEW put_user) */
        for (int k = 0; k < ns; k++) {
            if (!b.at[k].has_new) continue;
            uint64_t where = b.uattrs + 16ull * b.at[k].uidx + offsetof(struct ib_uverbs_attr, data);
            if (emu_copy_to_user(where, &b.at[k].new_value, 8)) r = -EFAULT;
        }
    }
out:
    bundle_free(&b);
    return r;
}
