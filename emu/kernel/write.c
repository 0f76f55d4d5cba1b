/* write.c: the legacy write() command ABI and the commands it carries (also reached through
 * DEVICE/INVOKE_WRITE).  Header rules from k: core/uverbs_main.c ib_uverbs_write + verify_hdr
 * and core/uverbs_uapi.c uapi_get_method:
 *   count < 8 -> EINVAL; header unreadable -> EFAULT; bits outside FLAG_EXTENDED|COMMAND_MASK
 *   -> EINVAL; unknown command -> EOPNOTSUPP;
 *   non-EX: in_words * 4 != count -> EINVAL; shorter than the command's request or response
 *   -> ENOSPC;  EX: count < 24 -> EINVAL; (in_words + provider_in_words) * 8 != rest -> EINVAL;
 *   core shorter than the request -> ENOSPC; cmd_hdr_reserved -> EINVAL; response given with no
 *   out words, or out words without a response -> EINVAL; response shorter than the command's
 *   response -> ENOSPC.
 * A handler that needs a ucontext and has none gives EINVAL (ib_uverbs_get_ucontext).
 * Responses: min(out, size) bytes, the rest of the caller's buffer zeroed (uverbs_response). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>
#include "kernel.h"

struct wdesc {
    uint32_t cmd; bool ex; const char *name;
    uint16_t req, resp;          /* kernel req_size / resp_size */
    bool has_resp;               /* non-EX: request starts with the response pointer */
    bool has_udata;
};

static const struct wdesc wtab[] = {
    { IB_USER_VERBS_CMD_GET_CONTEXT, 0, "GET_CONTEXT", 8, 8, 1, 1 },
    { IB_USER_VERBS_CMD_QUERY_DEVICE, 0, "QUERY_DEVICE", 8, sizeof(struct ib_uverbs_query_device_resp), 1, 0 },
    { IB_USER_VERBS_CMD_QUERY_PORT, 0, "QUERY_PORT", sizeof(struct ib_uverbs_query_port), sizeof(struct ib_uverbs_query_port_resp), 1, 0 },
    { IB_USER_VERBS_CMD_ALLOC_PD, 0, "ALLOC_PD", 8, 4, 1, 1 },
    { IB_USER_VERBS_CMD_DEALLOC_PD, 0, "DEALLOC_PD", 4, 0, 0, 0 },
    { IB_USER_VERBS_CMD_REG_MR, 0, "REG_MR", sizeof(struct ib_uverbs_reg_mr), sizeof(struct ib_uverbs_reg_mr_resp), 1, 1 },
    { IB_USER_VERBS_CMD_DEREG_MR, 0, "DEREG_MR", 4, 0, 0, 0 },
    { IB_USER_VERBS_CMD_ALLOC_MW, 0, "ALLOC_MW", sizeof(struct ib_uverbs_alloc_mw), sizeof(struct ib_uverbs_alloc_mw_resp), 1, 1 },
    { IB_USER_VERBS_CMD_DEALLOC_MW, 0, "DEALLOC_MW", sizeof(struct ib_uverbs_dealloc_mw), 0, 0, 0 },
    { IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, 0, "CREATE_COMP_CHANNEL", 8, 4, 1, 0 },
    { IB_USER_VERBS_CMD_CREATE_CQ, 0, "CREATE_CQ", sizeof(struct ib_uverbs_create_cq), sizeof(struct ib_uverbs_create_cq_resp), 1, 1 },
    { IB_USER_VERBS_CMD_DESTROY_CQ, 0, "DESTROY_CQ", sizeof(struct ib_uverbs_destroy_cq), sizeof(struct ib_uverbs_destroy_cq_resp), 1, 0 },
    { IB_USER_VERBS_CMD_CREATE_QP, 0, "CREATE_QP", sizeof(struct ib_uverbs_create_qp), sizeof(struct ib_uverbs_create_qp_resp), 1, 1 },
    { IB_USER_VERBS_CMD_QUERY_QP, 0, "QUERY_QP", sizeof(struct ib_uverbs_query_qp), sizeof(struct ib_uverbs_query_qp_resp), 1, 0 },
    { IB_USER_VERBS_CMD_MODIFY_QP, 0, "MODIFY_QP", sizeof(struct ib_uverbs_modify_qp), 0, 0, 0 },
    { IB_USER_VERBS_CMD_DESTROY_QP, 0, "DESTROY_QP", sizeof(struct ib_uverbs_destroy_qp), sizeof(struct ib_uverbs_destroy_qp_resp), 1, 0 },
    { IB_USER_VERBS_CMD_MODIFY_SRQ, 0, "MODIFY_SRQ", sizeof(struct ib_uverbs_modify_srq), 0, 0, 1 },
    { IB_USER_VERBS_CMD_QUERY_SRQ, 0, "QUERY_SRQ", sizeof(struct ib_uverbs_query_srq), sizeof(struct ib_uverbs_query_srq_resp), 1, 0 },
    { IB_USER_VERBS_CMD_CREATE_AH, 0, "CREATE_AH", sizeof(struct ib_uverbs_create_ah), sizeof(struct ib_uverbs_create_ah_resp), 1, 1 },
    { IB_USER_VERBS_CMD_DESTROY_AH, 0, "DESTROY_AH", sizeof(struct ib_uverbs_destroy_ah), 0, 0, 0 },
    { IB_USER_VERBS_EX_CMD_QUERY_DEVICE, 1, "EX_QUERY_DEVICE", 8, offsetof(struct ib_uverbs_ex_query_device_resp, response_length) + 4, 0, 1 },
    { IB_USER_VERBS_EX_CMD_MODIFY_QP, 1, "EX_MODIFY_QP", sizeof(struct ib_uverbs_modify_qp), 8, 0, 1 },
};

static const struct wdesc *wfind(uint32_t cmd, bool ex)
{
    for (size_t i = 0; i < sizeof wtab / sizeof wtab[0]; i++)
        if (wtab[i].cmd == cmd && wtab[i].ex == ex) return &wtab[i];
    return NULL;
}

int emu_write_cmd_min(uint32_t cmd, bool ex, size_t *req, size_t *resp, bool *known)
{
    const struct wdesc *d = wfind(cmd, ex);
    *known = d != NULL;
    *req = d ? d->req : 0;
    *resp = d ? d->resp : 0;
    return 0;
}

const char *emu_write_cmd_name(uint32_t cmd, bool ex)
{
    const struct wdesc *d = wfind(cmd, ex);
    return d ? d->name : "UNKNOWN_WRITE";
}

/* uverbs_response */
static int respond(const struct emu_wcmd *w, const void *resp, size_t len)
{
    size_t n = w->outlen < len ? w->outlen : len;
    if (n && emu_copy_to_user(w->out, resp, n)) return -EFAULT;
    if (w->outlen > len && emu_clear_user(w->out + len, w->outlen - len)) return -EFAULT;
    return 0;
}

/* ib_copy_to_udata: exactly len bytes to the driver response (EFAULT if there is none) */
static int udata_out(const struct emu_wcmd *w, const void *src, size_t len, bool clamp)
{
    if (clamp && w->uhw_outlen < len) len = w->uhw_outlen;
    if (!len) return 0;
    if (!w->uhw_outlen && !clamp) return -EFAULT;
    return emu_copy_to_user(w->uhw_out, src, len) ? -EFAULT : 0;
}

/* uverbs_request: copy the request; bytes past what the kernel knows must be zero */
static int request(const struct emu_wcmd *w, void *dst, size_t size)
{
    memset(dst, 0, size);
    memcpy(dst, w->in, w->inlen < size ? w->inlen : size);
    if (w->inlen > size) {
        const uint8_t *p = (const uint8_t *)w->in + size;
        for (size_t i = 0; i < w->inlen - size; i++) if (p[i]) return -EOPNOTSUPP;
    }
    return 0;
}

static int cmd_get_context(struct emu_file *f, const struct emu_wcmd *w)
{
    uint8_t resp[sizeof(struct mlx5_ib_alloc_ucontext_resp)];
    size_t rlen = 0;
    int r = emu_k_get_context(f, w->uhw_in, w->uhw_inlen, resp, &rlen, w->uhw_outlen);
    if (r) return r;
    int fd = -1;
    r = emu_k_async_alloc(f, &fd);
    if (!r) r = udata_out(w, resp, rlen, true);
    struct ib_uverbs_get_context_resp core = { .async_fd = (uint32_t)fd,
                                               .num_comp_vectors = EMU_NUM_COMP_VECTORS };
    if (!r) r = respond(w, &core, sizeof core);
    return r;
}

static int cmd_query_device(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    struct ib_uverbs_query_device_resp resp;
    emu_k_fill_device_attr(f, &resp);
    return respond(w, &resp, sizeof resp);
}

static int cmd_ex_query_device(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    struct ib_uverbs_ex_query_device cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    if (cmd.comp_mask || cmd.reserved) return -EINVAL;
    /* mlx5_ib_query_device: driver input must be zero */
    for (size_t i = 0; i < w->uhw_inlen; i++) if (((const uint8_t *)w->uhw_in)[i]) return -EINVAL;
    struct ib_uverbs_ex_query_device_resp resp;
    memset(&resp, 0, sizeof resp);
    emu_k_fill_device_attr(f, &resp.base);
    resp.response_length = (uint32_t)(w->outlen < sizeof resp ? w->outlen : sizeof resp);
    resp.timestamp_mask = emu_nic_clock_mask();  /* the internal timer (emu/nic/nic_clock.c) */
    resp.hca_core_clock = emu_nic_clock_khz();     /* kHz */
    struct mlx5_ib_query_device_resp mresp;
    memset(&mresp, 0, sizeof mresp);
    mresp.response_length = (uint32_t)(w->uhw_outlen < sizeof mresp ? w->uhw_outlen : sizeof mresp);
    /* k: mlx5_ib_query_device: cqe_comp_caps from the HCA caps cqe_compression,
     * cqe_compression_max_num and mini_cqe_resp_stride_index */
    if (emu_nic_cqe_comp_max()) {
        mresp.cqe_comp_caps.max_num = emu_nic_cqe_comp_max();
        mresp.cqe_comp_caps.supported_format = MLX5_IB_CQE_RES_FORMAT_HASH | MLX5_IB_CQE_RES_FORMAT_CSUM |
                                               (emu_nic_cqe_comp_stridx() ? MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX : 0);
    }
    r = udata_out(w, &mresp, sizeof mresp, true);
    if (!r) r = respond(w, &resp, sizeof resp);
    return r;
}

static int cmd_query_port(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    struct ib_uverbs_query_port cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    if (cmd.port_num != 1) return -EINVAL;
    struct ib_uverbs_query_port_resp resp;
    emu_k_fill_port(f, &resp);
    return respond(w, &resp, sizeof resp);
}

static int cmd_alloc_pd(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    uint32_t h, pdn;
    int r = emu_k_alloc_pd(f, &h, &pdn);
    if (r) return r;
    struct mlx5_ib_alloc_pd_resp mresp = { .pdn = pdn };
    r = udata_out(w, &mresp, sizeof mresp, false);        /* mlx5_ib_alloc_pd */
    struct ib_uverbs_alloc_pd_resp resp = { .pd_handle = h };
    if (!r) r = respond(w, &resp, sizeof resp);
    if (r) { void *o; if (!emu_uobj_get(f, h, UO_PD, &o)) emu_k_dealloc_pd(f, o); }
    return r;
}

/* destroy by handle (uobj_perform_destroy: ENOENT absent, EINVAL other type, EBUSY in use) */
static int cmd_dealloc_pd(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_dealloc_pd cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (!r) r = emu_uobj_get(f, cmd.pd_handle, UO_PD, &o);
    return r ? r : emu_k_dealloc_pd(f, o);
}

static int cmd_reg_mr(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    struct ib_uverbs_reg_mr cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    void *pd = NULL;
    /* ib_uverbs_reg_mr: in-page offsets, then access, then the PD lookup (EINVAL) */
    if ((cmd.start ^ cmd.hca_va) & (EMU_PAGE - 1)) return -EINVAL;
    if (emu_uobj_get(f, cmd.pd_handle, UO_PD, &pd)) pd = NULL;
    uint32_t h, lkey, rkey;
    r = emu_k_reg_mr(f, pd, cmd.start, cmd.length, cmd.hca_va, cmd.access_flags, -1, 0, &h, &lkey, &rkey);
    if (r) return r;
    struct ib_uverbs_reg_mr_resp resp = { .mr_handle = h, .lkey = lkey, .rkey = rkey };
    r = respond(w, &resp, sizeof resp);
    if (r) { void *o; if (!emu_uobj_get(f, h, UO_MR, &o)) emu_k_dereg_mr(f, o); }
    return r;
}

static int cmd_dereg_mr(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_dereg_mr cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (!r) r = emu_uobj_get(f, cmd.mr_handle, UO_MR, &o);
    return r ? r : emu_k_dereg_mr(f, o);
}

/* ALLOC_MW (k: uverbs_cmd.c ib_uverbs_alloc_mw; the mlx5 response, comp_mask and
 * response_length, is written as far as the caller's driver buffer reaches) */
static int cmd_alloc_mw(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    struct ib_uverbs_alloc_mw cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    void *pd = NULL;
    if (emu_uobj_get(f, cmd.pd_handle, UO_PD, &pd)) pd = NULL;
    uint32_t h, rkey;
    r = emu_k_alloc_mw(f, pd, cmd.mw_type, w->uhw_in, w->uhw_inlen, &h, &rkey);
    if (r) return r;
    uint32_t mresp[2] = { 0, w->uhw_outlen < 8 ? (uint32_t)w->uhw_outlen : 8 };
    r = udata_out(w, mresp, sizeof mresp, true);
    struct ib_uverbs_alloc_mw_resp resp = { .mw_handle = h, .rkey = rkey };
    if (!r) r = respond(w, &resp, sizeof resp);
    if (r) { void *o; if (!emu_uobj_get(f, h, UO_MW, &o)) emu_k_dealloc_mw(f, o); }
    return r;
}

static int cmd_dealloc_mw(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_dealloc_mw cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (!r) r = emu_uobj_get(f, cmd.mw_handle, UO_MW, &o);
    return r ? r : emu_k_dealloc_mw(f, o);
}

static int cmd_create_comp_channel(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    int fd;
    int r = emu_k_comp_channel(f, &fd);
    if (r) return r;
    struct ib_uverbs_create_comp_channel_resp resp = { .fd = (uint32_t)fd };
    return respond(w, &resp, sizeof resp);
}

static int cmd_create_cq(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    struct ib_uverbs_create_cq cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    struct emu_cq_args a;
    memset(&a, 0, sizeof a);
    a.cqe = cmd.cqe;
    a.user_handle = cmd.user_handle;
    a.comp_vector = cmd.comp_vector;
    a.comp_channel_fd = cmd.comp_channel;
    a.event_fd = -1;
    a.uhw_in = w->uhw_in;
    a.uhw_inlen = w->uhw_inlen;
    if (cmd.comp_channel >= 0) {
        struct k_evq *q = emu_evq_by_fd(cmd.comp_channel);
        if (!q || q->is_async || q->chan.ctx != &f->ctx) return -EBADF;   /* lookup_comp_file */
    }
    uint32_t h, cqe, cqn;
    r = emu_k_create_cq(f, &a, &h, &cqe, &cqn);
    if (r) return r;
    r = udata_out(w, &cqn, sizeof cqn, false);
    struct ib_uverbs_create_cq_resp resp = { .cq_handle = h, .cqe = cqe };
    if (!r) r = respond(w, &resp, sizeof resp);
    if (r) { void *o; if (!emu_uobj_get(f, h, UO_CQ, &o)) emu_k_destroy_cq(f, o, NULL, NULL); }
    return r;
}

static int cmd_destroy_cq(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_destroy_cq cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (!r) r = emu_uobj_get(f, cmd.cq_handle, UO_CQ, &o);
    if (r) return r;
    struct ib_uverbs_destroy_cq_resp resp = { 0 };
    r = emu_k_destroy_cq(f, o, &resp.comp_events_reported, &resp.async_events_reported);
    return r ? r : respond(w, &resp, sizeof resp);
}

static int cmd_create_qp(struct emu_file *f, const struct emu_wcmd *w)
{
    if (!f->ctx.has_ucontext) return -EINVAL;
    struct ib_uverbs_create_qp cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    struct emu_qp_args a;
    memset(&a, 0, sizeof a);
    a.type = cmd.qp_type;
    if (cmd.is_srq) {
        void *srq;
        if (emu_uobj_get(f, cmd.srq_handle, UO_SRQ, &srq)) return -EINVAL;
        a.srq = srq;
    }
    a.user_handle = cmd.user_handle;
    a.max_send_wr = cmd.max_send_wr;
    a.max_recv_wr = cmd.max_recv_wr;
    a.max_send_sge = cmd.max_send_sge;
    a.max_recv_sge = cmd.max_recv_sge;
    a.max_inline = cmd.max_inline_data;
    a.sq_sig_all = cmd.sq_sig_all;
    a.event_fd = -1;
    a.uhw_in = w->uhw_in;
    a.uhw_inlen = w->uhw_inlen;
    a.uhw_outlen = w->uhw_outlen;
    void *pd = NULL, *scq = NULL, *rcq = NULL;
    /* create_qp (uverbs_cmd.c): objects that cannot be looked up -> EINVAL */
    if (emu_uobj_get(f, cmd.pd_handle, UO_PD, &pd) ||
        emu_uobj_get(f, cmd.send_cq_handle, UO_CQ, &scq) ||
        emu_uobj_get(f, cmd.recv_cq_handle, UO_CQ, &rcq))
        return -EINVAL;
    uint32_t h, qpn;
    struct mlx5_ib_create_qp_resp mresp;
    r = emu_k_create_qp(f, &a, pd, scq, rcq, &h, &qpn, &mresp);
    if (r) return r;
    r = udata_out(w, &mresp, sizeof mresp, true);
    struct ib_uverbs_create_qp_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.qp_handle = h;
    resp.qpn = qpn;
    resp.max_send_wr = a.max_send_wr;
    resp.max_recv_wr = a.srq ? 0 : a.max_recv_wr;   /* k: qp.c set_rq_size without an RQ */
    resp.max_send_sge = a.max_send_sge;
    resp.max_recv_sge = a.srq ? 0 : a.max_recv_sge;
    resp.max_inline_data = a.max_inline;
    if (!r) r = respond(w, &resp, sizeof resp);
    if (r) { void *o; if (!emu_uobj_get(f, h, UO_QP, &o)) emu_k_destroy_qp(f, o, NULL); }
    return r;
}

static int cmd_query_qp(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_query_qp cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    void *o;
    if (emu_uobj_get(f, cmd.qp_handle, UO_QP, &o)) return -EINVAL;
    struct ib_uverbs_query_qp_resp resp;
    emu_k_query_qp(f, o, &resp);
    return respond(w, &resp, sizeof resp);
}

static int cmd_modify_qp(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_modify_qp cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    return emu_k_modify_qp(f, &cmd, false);
}

static int cmd_ex_modify_qp(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_ex_modify_qp cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    r = emu_k_modify_qp(f, &cmd.base, true);
    if (r) return r;
    struct ib_uverbs_ex_modify_qp_resp resp = { 0 };
    resp.response_length = (uint32_t)(w->outlen < sizeof resp ? w->outlen : sizeof resp);
    return respond(w, &resp, sizeof resp);
}

static int cmd_destroy_qp(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_destroy_qp cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (!r) r = emu_uobj_get(f, cmd.qp_handle, UO_QP, &o);
    if (r) return r;
    struct ib_uverbs_destroy_qp_resp resp = { 0 };
    r = emu_k_destroy_qp(f, o, &resp.events_reported);
    return r ? r : respond(w, &resp, sizeof resp);
}

/* ib_uverbs_modify_srq / ib_uverbs_query_srq (uverbs_cmd.c): an SRQ that cannot be looked up
 * -> EINVAL; the rules of the change itself in srq.c */
static int cmd_modify_srq(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_modify_srq cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (r) return r;
    if (emu_uobj_get(f, cmd.srq_handle, UO_SRQ, &o)) return -EINVAL;
    return emu_k_modify_srq(f, o, cmd.attr_mask, cmd.max_wr, cmd.srq_limit);
}

static int cmd_query_srq(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_query_srq cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (r) return r;
    if (emu_uobj_get(f, cmd.srq_handle, UO_SRQ, &o)) return -EINVAL;
    struct ib_uverbs_query_srq_resp resp;
    memset(&resp, 0, sizeof resp);
    emu_k_query_srq(f, o, &resp.max_wr, &resp.max_sge, &resp.srq_limit);
    return respond(w, &resp, sizeof resp);
}

/* k: uverbs_cmd.c ib_uverbs_create_ah: an unknown PD handle -> EINVAL */
static int cmd_create_ah(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_create_ah cmd;
    int r = request(w, &cmd, sizeof cmd);
    if (r) return r;
    if (!f->ctx.has_ucontext) return -EINVAL;
    void *pd;
    if (emu_uobj_get(f, cmd.pd_handle, UO_PD, &pd)) return -EINVAL;
    uint32_t h;
    struct mlx5_ib_create_ah_resp uresp;
    size_t ulen;
    r = emu_k_create_ah(f, pd, &cmd.attr, w->uhw_outlen, &h, &uresp, &ulen);
    if (r) return r;
    struct ib_uverbs_create_ah_resp resp = { .ah_handle = h };
    r = udata_out(w, &uresp, ulen, true);
    if (!r) r = respond(w, &resp, sizeof resp);
    if (r) { void *o; if (!emu_uobj_get(f, h, UO_AH, &o)) emu_k_destroy_ah(f, o); }
    return r;
}

static int cmd_destroy_ah(struct emu_file *f, const struct emu_wcmd *w)
{
    struct ib_uverbs_destroy_ah cmd;
    int r = request(w, &cmd, sizeof cmd);
    void *o;
    if (!r && emu_uobj_get(f, cmd.ah_handle, UO_AH, &o)) r = -EINVAL;
    return r ? r : emu_k_destroy_ah(f, o);
}

int emu_run_write_cmd(struct emu_file *f, struct emu_wcmd *w)
{
    if (!w->ex) {
        switch (w->cmd) {
        case IB_USER_VERBS_CMD_GET_CONTEXT: return cmd_get_context(f, w);
        case IB_USER_VERBS_CMD_QUERY_DEVICE: return cmd_query_device(f, w);
        case IB_USER_VERBS_CMD_QUERY_PORT: return cmd_query_port(f, w);
        case IB_USER_VERBS_CMD_ALLOC_PD: return cmd_alloc_pd(f, w);
        case IB_USER_VERBS_CMD_DEALLOC_PD: return cmd_dealloc_pd(f, w);
        case IB_USER_VERBS_CMD_REG_MR: return cmd_reg_mr(f, w);
        case IB_USER_VERBS_CMD_DEREG_MR: return cmd_dereg_mr(f, w);
        case IB_USER_VERBS_CMD_ALLOC_MW: return cmd_alloc_mw(f, w);
        case IB_USER_VERBS_CMD_DEALLOC_MW: return cmd_dealloc_mw(f, w);
        case IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: return cmd_create_comp_channel(f, w);
        case IB_USER_VERBS_CMD_CREATE_CQ: return cmd_create_cq(f, w);
        case IB_USER_VERBS_CMD_DESTROY_CQ: return cmd_destroy_cq(f, w);
        case IB_USER_VERBS_CMD_CREATE_QP: return cmd_create_qp(f, w);
        case IB_USER_VERBS_CMD_QUERY_QP: return cmd_query_qp(f, w);
        case IB_USER_VERBS_CMD_MODIFY_QP: return cmd_modify_qp(f, w);
        case IB_USER_VERBS_CMD_DESTROY_QP: return cmd_destroy_qp(f, w);
        case IB_USER_VERBS_CMD_MODIFY_SRQ: return cmd_modify_srq(f, w);
        case IB_USER_VERBS_CMD_QUERY_SRQ: return cmd_query_srq(f, w);
        case IB_USER_VERBS_CMD_CREATE_AH: return cmd_create_ah(f, w);
        case IB_USER_VERBS_CMD_DESTROY_AH: return cmd_destroy_ah(f, w);
        }
    } else {
        switch (w->cmd) {
        case IB_USER_VERBS_EX_CMD_QUERY_DEVICE: return cmd_ex_query_device(f, w);
        case IB_USER_VERBS_EX_CMD_MODIFY_QP: return cmd_ex_modify_qp(f, w);
        }
    }
    return -EOPNOTSUPP;
}

/* write() on the uverbs fd */
ssize_t emu_write(struct emu_file *f, const void *buf, size_t count)
{
    int fe = emu_fault_check(NULL);
    if (fe) return -fe;
    struct ib_uverbs_cmd_hdr hdr;
    if (count < sizeof hdr) return -EINVAL;
    if (emu_copy_from_user(&hdr, (uintptr_t)buf, sizeof hdr)) return -EFAULT;
    if (hdr.command & ~(uint32_t)(IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_CMD_COMMAND_MASK))
        return -EINVAL;
    bool ex = hdr.command & IB_USER_VERBS_CMD_FLAG_EXTENDED;
    uint32_t cmd = hdr.command & IB_USER_VERBS_CMD_COMMAND_MASK;
    const struct wdesc *d = wfind(cmd, ex);
    if (!d) return -EOPNOTSUPP;
    struct emu_wcmd w;
    memset(&w, 0, sizeof w);
    w.cmd = cmd;
    w.ex = ex;
    uint8_t *in = NULL;
    int r;
    if (!ex) {
        if ((size_t)hdr.in_words * 4 != count) return -EINVAL;
        if (count < d->req + sizeof hdr) return -ENOSPC;
        if ((size_t)hdr.out_words * 4 < d->resp) return -ENOSPC;
        size_t in_len = count - sizeof hdr;
        in = malloc(in_len ? in_len : 1);
        if (!in) return -ENOMEM;
        if (emu_copy_from_user(in, (uintptr_t)buf + sizeof hdr, in_len)) { free(in); return -EFAULT; }
        w.in = in;
        w.inlen = d->req;
        if (d->has_udata) { w.uhw_in = in + d->req; w.uhw_inlen = in_len - d->req; }
        else w.inlen = in_len;
        if (d->has_resp) {
            uint64_t response;
            memcpy(&response, in, 8);
            w.out = response;
            w.outlen = d->resp;
            if (d->has_udata) {
                w.uhw_outlen = (size_t)hdr.out_words * 4 - d->resp;
                w.uhw_out = w.uhw_outlen ? response + d->resp : 0;
            } else {
                w.outlen = (size_t)hdr.out_words * 4;
            }
        }
    } else {
        struct ib_uverbs_ex_cmd_hdr eh;
        if (count < sizeof hdr + sizeof eh) return -EINVAL;
        if (emu_copy_from_user(&eh, (uintptr_t)buf + sizeof hdr, sizeof eh)) return -EFAULT;
        size_t rest = count - sizeof hdr - sizeof eh;
        if (((size_t)hdr.in_words + eh.provider_in_words) * 8 != rest) return -EINVAL;
        if ((size_t)hdr.in_words * 8 < d->req) return -ENOSPC;
        if (eh.cmd_hdr_reserved) return -EINVAL;
        if (eh.response) {
            if (!hdr.out_words && !eh.provider_out_words) return -EINVAL;
            if ((size_t)hdr.out_words * 8 < d->resp) return -ENOSPC;
        } else if (hdr.out_words || eh.provider_out_words) {
            return -EINVAL;
        }
        in = malloc(rest ? rest : 1);
        if (!in) return -ENOMEM;
        if (emu_copy_from_user(in, (uintptr_t)buf + sizeof hdr + sizeof eh, rest)) { free(in); return -EFAULT; }
        w.in = in;
        w.inlen = (size_t)hdr.in_words * 8;
        w.uhw_in = in + w.inlen;
        w.uhw_inlen = (size_t)eh.provider_in_words * 8;
        w.out = eh.response;
        w.outlen = (size_t)hdr.out_words * 8;
        w.uhw_outlen = (size_t)eh.provider_out_words * 8;
        w.uhw_out = w.uhw_outlen ? eh.response + w.outlen : 0;
    }
    fe = emu_fault_check(d->name);
    r = fe ? -fe : emu_run_write_cmd(f, &w);
    free(in);
    return r ? r : (ssize_t)count;
}
