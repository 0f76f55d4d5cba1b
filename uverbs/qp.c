/* qp.c: queue pairs: the buffer and doorbell record this process owns, the kernel's QP
 * (QP_CREATE / QP_DESTROY ioctls) and the state machine through MODIFY_QP (INVOKE_WRITE 26).
 * Sources: kernel drivers/infiniband/core/uverbs_std_types_qp.c (QP_CREATE / QP_DESTROY),
 * uverbs_cmd.c (MODIFY_QP), drivers/infiniband/hw/mlx5/qp.c (create_user_qp), hw/mlx5/main.c
 * (UAR objects); rdma-core providers/mlx5/verbs.c (mlx5_calc_* sizes); kernel verbs.c
 * qp_state_table. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include "driver.h"
#include "opts.h"
#include "ioctl.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"

/* Send WQE bytes for the largest entry the QP accepts (libmlx5 mlx5_calc_send_wqe): ctrl +
 * raddr + max(one data segment, the inline header + max_inline bytes), in 64-byte units. */
uint32_t mlxd__send_wqe_size(uint32_t max_inline, uint32_t max_send_sge)
{
    uint32_t data = max_send_sge * MLXD_WQE_DATA_SIZE;
    uint32_t inl = max_inline ? (MLXD_WQE_INL_HDR_SIZE + max_inline + 15) & ~15u : 0;
    uint32_t sz = MLXD_WQE_CTRL_SIZE + MLXD_WQE_RADDR_SIZE + (data > inl ? data : inl);
    return (sz + MLXD_SEND_WQE_BB - 1) & ~(MLXD_SEND_WQE_BB - 1);
}

void mlxd__qp_release(struct mlxd_qp *qp)
{
    mlxd__pinned_add(MLXD_PIN_RING, -(int64_t)qp->pinned_ring);
    mlxd__pinned_add(MLXD_PIN_DBREC, -(int64_t)qp->pinned_db);
    qp->pinned_ring = qp->pinned_db = 0;
    if (qp->mem) munmap(qp->mem, qp->mem_len);   /* the doorbell record is in the mapping */
    free(qp->sq_wrid);
    free(qp->sq_next);
    free(qp->rq_wrid);
    qp->mem = qp->db = NULL;
    qp->sq_wrid = NULL;
    qp->sq_next = NULL;
    qp->rq_wrid = NULL;
    qp->sq = qp->rq = NULL;
    qp->dbrec = NULL;
}

static uint32_t random_psn(void)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != sizeof v) v = (uint32_t)(uintptr_t)&v ^ (uint32_t)getpid();
    v &= 0xffffff;
    return v ? v : 1;
}

/* Marks a user index taken by a QP being created: its qpn never matches a CQE's 24-bit QPN. */
static struct mlxd_qp reserved_slot = { .qpn = 0xffffffffu, .state = OBJ_DEAD };

/* The poll loop reads the table without the lock: entries are published with release stores. */
static void table_set(struct mlxd_nic *nic, uint32_t i, struct mlxd_qp *qp)
{
    __atomic_store_n(&nic->qp_table[i], qp, __ATOMIC_RELEASE);
}

static const uint8_t *gid_by_index(const struct mlxd_nic *nic, uint32_t idx)
{
    for (unsigned i = 0; i < nic->ngids; i++)
        if (nic->gids[i].index == idx) return nic->gids[i].raw;
    return NULL;
}

/* Whether the QP's sends use BlueFlame: the device must have write-combining registers
 * (bf_reg_size != 0); MLXD_BLUEFLAME_OFF never, _ON always then, _DEFAULT unless the environment
 * says MLX5_SHUT_UP_BF (set and not "0"), as libmlx5 reads it (rdma-core providers/mlx5/mlx5.c
 * get_shut_up_bf). */
static bool want_blueflame(const struct mlxd_nic *nic, const struct mlxd_qp_opts *opts, uint32_t sq_wqebbs)
{
    if (!nic->bf_reg_size || !sq_wqebbs)
        return false;
    uint8_t bf = opts->sz > offsetof(struct mlxd_qp_opts, blueflame) ? opts->blueflame : MLXD_BLUEFLAME_DEFAULT;
    if (bf != MLXD_BLUEFLAME_DEFAULT)
        return bf == MLXD_BLUEFLAME_ON;
    const char *env = getenv("MLX5_SHUT_UP_BF");
    return !env || !strcmp(env, "0");
}

/* A doorbell UAR of the QP's own: BlueFlame (write-combining) when wanted, else a non-cached
 * doorbell page (kernel drivers/infiniband/hw/mlx5/main.c UAR_OBJ_ALLOC: MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC,
 * what libmlx5 maps with MLX5_SHUT_UP_BF).  Sets uar_handle, uar_map, uar_bf, bf_reg,
 * bf_buf_size (0: the ring writes the doorbell only, never the BlueFlame copy). */
static int qp_doorbell_uar(struct mlxd_nic *nic, struct mlxd_qp *qp, const struct mlxd_qp_opts *opts,
                           uint32_t sq_wqebbs, uint32_t *page_id)
{
    static const char fn[] = "mlxd_qp_create";
    int rc = -EOPNOTSUPP;
    if (want_blueflame(nic, opts, sq_wqebbs)) {
        rc = mlxd__uar_alloc(nic, MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF, &qp->uar_handle, page_id, &qp->uar_map);
        qp->uar_bf = rc == 0;
    }
    if (rc == -EOPNOTSUPP)      /* no BlueFlame (not wanted, or the kernel has no WC UARs) */
        rc = mlxd__uar_alloc(nic, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC, &qp->uar_handle, page_id, &qp->uar_map);
    if (rc == MLXD__UAR_TOO_SMALL)
        return mlxd_err(ENOSPC, "%s %s: UAR_OBJ_ALLOC gave a doorbell register mapping smaller than a system page",
                        fn, nic->name);
    if (rc)
        return mlxd_err(-rc, "%s %s: the kernel refused UAR_OBJ_ALLOC + MMAP: %s", fn, nic->name, strerror(-rc));
    qp->bf_reg = (uint8_t *)qp->uar_map + MLXD_UAR_BF_OFFSET;
    qp->bf_buf_size = qp->uar_bf ? nic->bf_reg_size / 2 : 0;
    return 0;
}

bool mlxd_qp_blueflame(const struct mlxd_qp *qp)
{
    return qp && qp->state == OBJ_LIVE && qp->bf_buf_size != 0;
}

/* QP_CREATE (mlx5 driver data: the buffer, its doorbell record, the UAR page of its own) for a
 * QP whose rings and fields are set; sets qp->handle and the kernel's QPN.  A refusal explains
 * RLIMIT_MEMLOCK when that is the cause (memlock.c); success counts the pages the kernel pinned. */
static int kernel_create_qp(struct mlxd_qp *qp, struct mlxd_cq *cq, struct mlxd_cq *rcq, uint32_t send_depth,
                            uint32_t recv_depth, uint32_t page_id, uint32_t *qpn)
{
    static const char fn[] = "mlxd_qp_create";
    struct mlxd_nic *nic = qp->nic;
    uint64_t buf_bytes = ((uint64_t)qp->rq_wqe_cnt << qp->rq_wqe_shift) + (uint64_t)qp->sq_wqebbs * MLXD_SEND_WQE_BB;
    struct mlx5_ib_create_qp req;
    struct mlx5_ib_create_qp_resp resp;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    req.buf_addr = (uintptr_t)qp->mem;
    req.db_addr = (uintptr_t)qp->dbrec;
    req.sq_wqe_count = qp->sq_wqebbs;
    req.rq_wqe_count = qp->rq_wqe_cnt;
    req.rq_wqe_shift = qp->rq_wqe_shift;
    req.flags = MLX5_QP_FLAG_UAR_PAGE_INDEX;
    req.uidx = nic->cqe_version ? qp->uidx : 0xffffff;
    req.bfreg_index = page_id;
    struct ib_uverbs_qp_cap cap = {
        .max_send_wr = send_depth, .max_recv_wr = recv_depth,
        .max_send_sge = send_depth ? qp->max_send_sge : 0, .max_recv_sge = recv_depth ? qp->max_recv_sge : 0,
        .max_inline_data = qp->max_inline,
    }, rcap;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
    int h = ioc_obj(&c, UVERBS_ATTR_CREATE_QP_HANDLE, 0);
    ioc_obj(&c, UVERBS_ATTR_CREATE_QP_PD_HANDLE, nic->pd_handle);
    ioc_obj(&c, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, cq->handle);
    ioc_obj(&c, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, rcq->handle);
    if (qp->srq) ioc_obj(&c, UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, qp->srq->handle);
    ioc_in_u64(&c, UVERBS_ATTR_CREATE_QP_USER_HANDLE, (uintptr_t)qp);
    ioc_in(&c, UVERBS_ATTR_CREATE_QP_CAP, &cap, sizeof cap);
    ioc_in_u64(&c, UVERBS_ATTR_CREATE_QP_TYPE, qp->type);
    ioc_out(&c, UVERBS_ATTR_CREATE_QP_RESP_CAP, &rcap, sizeof rcap);
    ioc_out(&c, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, qpn, sizeof *qpn);
    ioc_in(&c, UVERBS_ATTR_UHW_IN, &req, sizeof req);
    ioc_out(&c, UVERBS_ATTR_UHW_OUT, &resp, sizeof resp);
    int rc = mlxd__ioctl(nic->fd, &c);
    uint64_t ring_pages = mlxd__pin_pages(req.buf_addr, buf_bytes);
    if (rc) {
        int m = mlxd__memlock_error(fn, nic->name, "QP_CREATE", rc, ring_pages + 1);
        return m ? m : mlxd_err(-rc, "%s %s: the kernel refused QP_CREATE: %s", fn, nic->name, strerror(-rc));
    }
    qp->handle = (uint32_t)ioc_value(&c, h);
    qp->pinned_ring = ring_pages;      /* and the doorbell record's page */
    qp->pinned_db = 1;
    mlxd__pinned_add(MLXD_PIN_RING, (int64_t)ring_pages);
    mlxd__pinned_add(MLXD_PIN_DBREC, 1);
    return 0;
}

/* The send ring in WQEBBs for send_depth entries of the largest WQE the options allow (rdma-core
 * providers/mlx5/verbs.c mlx5_calc_send_wqe, mlx5_calc_sq_size; UD: the datagram segment in place
 * of the remote address); 0 or -EINVAL naming the device bound exceeded. */
static int sq_size(const struct mlxd_nic *nic, uint32_t type, const struct mlxd_qp_opts *opts, uint32_t send_sge,
                   uint32_t *sq_wqebbs)
{
    static const char fn[] = "mlxd_qp_create";
    *sq_wqebbs = 0;
    if (!opts->send_depth) return 0;
    uint32_t wqe_size = type == MLXD_QP_UD ? mlxd__ud_send_wqe_size(opts->max_inline, send_sge)
                                           : mlxd__send_wqe_size(opts->max_inline, send_sge);
    uint32_t max_desc = nic->max_sq_desc_sz ? nic->max_sq_desc_sz : 1024;
    if (wqe_size > max_desc) return mlxd_err(EINVAL, "%s: a %u-byte WQE exceeds the device's maximum %u", fn, wqe_size, max_desc);
    uint64_t bytes = (uint64_t)opts->send_depth * wqe_size;
    if (bytes > (1ull << 31)) return mlxd_err(EINVAL, "%s: send ring too large", fn);
    *sq_wqebbs = mlxd__roundup_pow2((uint32_t)bytes) / MLXD_SEND_WQE_BB;
    if (nic->max_send_wqebb && *sq_wqebbs > nic->max_send_wqebb)
        return mlxd_err(EINVAL, "%s: send depth %u needs %u WQEBBs, exceeds the device's maximum %u", fn,
                        opts->send_depth, *sq_wqebbs, nic->max_send_wqebb);
    return 0;
}

/* The receive ring: a power-of-two stride holding recv_sge data segments, at least 64 bytes in
 * all (rdma-core providers/mlx5/verbs.c mlx5_calc_rq_size); none for depth 0. */
static void rq_geometry(uint32_t depth, uint32_t recv_sge, uint32_t *cnt, uint32_t *shift)
{
    *cnt = *shift = 0;
    if (!depth) return;
    uint32_t stride = mlxd__roundup_pow2(recv_sge * MLXD_WQE_DATA_SIZE);
    uint32_t bytes = mlxd__roundup_pow2(depth) * stride;
    if (bytes < 64) bytes = 64;
    *cnt = bytes / stride;
    *shift = (uint32_t)__builtin_ctz(stride);
}

/* What mlxd_qp_create derives from its arguments (create_plan). */
struct qp_plan {
    struct mlxd_cq *cq, *rcq;
    struct mlxd_srq *srq;
    uint32_t type, send_depth, recv_depth, send_sge, recv_sge, gid_index;
    uint32_t sq_wqebbs, rq_cnt, rq_shift;
    bool share;
    const uint8_t *gid;
};

/* The arguments of mlxd_qp_create, checked (each refusal names what is wrong), into *p. */
static int create_plan(struct mlxd_cq *cq, const struct mlxd_qp_opts *opts, struct qp_plan *p)
{
    static const char fn[] = "mlxd_qp_create";
    struct mlxd_nic *nic = cq->nic;
    if (opts->sz < offsetof(struct mlxd_qp_opts, user_data) + sizeof opts->user_data)
        return mlxd_err(EINVAL, "%s: opts->sz %zu is too small", fn, opts->sz);
    int trc = mlxd__opts_tail_check(fn, "opts", opts, opts->sz, sizeof *opts);
    if (trc) return trc;
    if (opts->psn > 0xffffff) return mlxd_err(EINVAL, "%s: psn 0x%x exceeds 24 bits", fn, opts->psn);
    if (opts->sz > offsetof(struct mlxd_qp_opts, blueflame) && opts->blueflame > MLXD_BLUEFLAME_OFF)
        return mlxd_err(EINVAL, "%s: blueflame %u is not DEFAULT (0), ON (1) or OFF (2)", fn, opts->blueflame);
    memset(p, 0, sizeof *p);
    p->cq = cq;
    p->type = opts->type ? opts->type : MLXD_QP_RC;
    if (p->type != MLXD_QP_RC && p->type != MLXD_QP_UC && p->type != MLXD_QP_UD)
        return mlxd_err(EINVAL, "%s: type %u is not RC (2), UC (3) or UD (4)", fn, p->type);
    /* srq came after blueflame: an older caller's smaller struct does not have it */
    struct mlxd_srq *srq = opts->sz >= offsetof(struct mlxd_qp_opts, srq) + sizeof opts->srq ? opts->srq : NULL;
    if (srq && (srq->state != OBJ_LIVE || srq->nic != nic))
        return mlxd_err(EINVAL, "%s: srq is destroyed or of another NIC", fn);
    if (srq && (opts->recv_depth || opts->max_recv_sge))
        return mlxd_err(EINVAL, "%s: recv_depth %u / max_recv_sge %u with an SRQ (its receives come from the SRQ: "
                        "both must be 0)", fn, opts->recv_depth, opts->max_recv_sge);
    if (!opts->send_depth && !opts->recv_depth && !srq)
        return mlxd_err(EINVAL, "%s: send and receive depth are both 0 and no SRQ", fn);
    p->srq = srq;
    p->rcq = opts->recv_cq ? opts->recv_cq : cq;
    if (p->rcq->state != OBJ_LIVE || p->rcq->nic != nic) return mlxd_err(EINVAL, "%s: recv_cq is destroyed or of another NIC", fn);
    p->recv_sge = opts->max_recv_sge ? opts->max_recv_sge : 1;
    /* max_send_sge came after user_data: an older caller's smaller struct does not have it */
    bool has_send_sge = opts->sz >= offsetof(struct mlxd_qp_opts, max_send_sge) + sizeof opts->max_send_sge;
    p->send_sge = has_send_sge && opts->max_send_sge ? opts->max_send_sge : 1;
    if (p->send_sge > nic->max_sge) return mlxd_err(EINVAL, "%s: max_send_sge %u exceeds the device's maximum %u", fn, p->send_sge, nic->max_sge);
    if (p->recv_sge > nic->max_sge) return mlxd_err(EINVAL, "%s: max_recv_sge %u exceeds the device's maximum %u", fn, p->recv_sge, nic->max_sge);
    if (opts->send_depth > nic->max_qp_wr) return mlxd_err(EINVAL, "%s: send depth %u exceeds the device's maximum %u", fn, opts->send_depth, nic->max_qp_wr);
    if (opts->recv_depth > nic->max_qp_wr) return mlxd_err(EINVAL, "%s: receive depth %u exceeds the device's maximum %u", fn, opts->recv_depth, nic->max_qp_wr);
    if (opts->max_inline > nic->port.max_inline) return mlxd_err(EINVAL, "%s: max_inline %u exceeds the device's maximum %u", fn, opts->max_inline, nic->port.max_inline);
    p->send_depth = opts->send_depth;
    p->recv_depth = opts->recv_depth;
    p->share = opts->sz >= offsetof(struct mlxd_qp_opts, share_cq) + sizeof opts->share_cq && opts->share_cq;
    p->gid_index = opts->has_gid_index ? opts->gid_index : (uint32_t)nic->default_gid;
    p->gid = gid_by_index(nic, p->gid_index);
    if (!p->gid) return mlxd_err(EINVAL, "%s: GID index %u is not a valid GID of port 1", fn, p->gid_index);
    int src = sq_size(nic, p->type, opts, p->send_sge, &p->sq_wqebbs);
    if (src) return src;
    rq_geometry(opts->recv_depth, p->recv_sge, &p->rq_cnt, &p->rq_shift);
    return 0;
}

static struct mlxd_srq_cq **srq_cq_slot(struct mlxd_srq *srq, const struct mlxd_cq *rcq)
{
    struct mlxd_srq_cq **u = &srq->rcqs;
    while (*u && (*u)->cq != rcq) u = &(*u)->next;
    return u;
}

/* The overrun checks and the reservation of the depths they check, in one critical section
 * (under nic->lock): two creations at once cannot both pass on the same room.  A CQ must hold
 * every completion its QPs can have outstanding (ibv_create_cq(3)), else the NIC overruns it,
 * raises a CQ error and the QPs go to error (issue 13: a busy-polling user saw 4 of 16
 * completions, then silence): send_depth on cq, recv_depth on rcq, and for a QP of an SRQ the
 * SRQ's depth on rcq, once per receive CQ of the SRQ's QPs (no more of its receives can be
 * outstanding).  share_cq skips the check, but not for an overrun-ignoring CQ, which must never
 * overrun (mlxd_uverbs.h: the device would overwrite CQEs nobody polled).  Returns 0 with the
 * depths reserved, or -EINVAL / -ENOMEM changing nothing. */
static int cq_reserve_locked(const struct qp_plan *p)
{
    static const char fn[] = "mlxd_qp_create";
    struct mlxd_cq *cq = p->cq, *rcq = p->rcq;
    struct mlxd_srq_cq **slot = p->srq ? srq_cq_slot(p->srq, rcq) : NULL;
    uint32_t srq_d = slot && !*slot ? p->srq->depth : 0;     /* the first QP of the SRQ on rcq */
    uint64_t recv = (uint64_t)p->recv_depth + srq_d, on_cq = p->send_depth + (rcq == cq ? recv : 0);
    uint64_t have = cq->committed, rhave = rcq->committed;
    char srq_on_cq[40] = "", srq_on_rcq[40] = "";
    if (srq_d) snprintf(srq_on_rcq, sizeof srq_on_rcq, " + SRQ depth %u", srq_d);
    if (srq_d && rcq == cq) memcpy(srq_on_cq, srq_on_rcq, sizeof srq_on_cq);
    if (!p->share && !cq->ignore_overrun && !rcq->ignore_overrun) {
        if (have + on_cq > cq->ncqe)
            return mlxd_err(EINVAL, "%s: send_depth %u + recv_depth %u%s + %llu of %u QP%s already on the CQ "
                            "= %llu completions could be outstanding, more than the CQ's %u entries (it would overrun: "
                            "CQ error, its QPs to error); create the CQ with at least %llu entries, or set opts.share_cq "
                            "to share it deliberately", fn, p->send_depth, rcq == cq ? p->recv_depth : 0,
                            srq_on_cq, (unsigned long long)have, cq->qps, cq->qps == 1 ? "" : "s",
                            (unsigned long long)(have + on_cq), cq->ncqe, (unsigned long long)(have + on_cq));
        if (rcq != cq && rhave + recv > rcq->ncqe)
            return mlxd_err(EINVAL, "%s: recv_depth %u%s + %llu of %u QP%s already on recv_cq = %llu "
                            "completions could be outstanding, more than recv_cq's %u entries (it would overrun); create "
                            "it with at least %llu entries, or set opts.share_cq to share it deliberately", fn,
                            p->recv_depth, srq_on_rcq, (unsigned long long)rhave, rcq->qps, rcq->qps == 1 ? "" : "s",
                            (unsigned long long)(rhave + recv), rcq->ncqe, (unsigned long long)(rhave + recv));
    }
    if (cq->ignore_overrun && have + on_cq > cq->ncqe)
        return mlxd_err(EINVAL, "%s: the overrun-ignoring CQ 0x%x has %u entries, its QPs' depths would need %llu",
                        fn, cq->cqn, cq->ncqe, (unsigned long long)(have + on_cq));
    if (rcq != cq && rcq->ignore_overrun && rhave + recv > rcq->ncqe)
        return mlxd_err(EINVAL, "%s: the overrun-ignoring recv_cq 0x%x has %u entries, its QPs' depths would need "
                        "%llu", fn, rcq->cqn, rcq->ncqe, (unsigned long long)(rhave + recv));
    if (slot && !*slot && !(*slot = calloc(1, sizeof **slot)))
        return mlxd_err(ENOMEM, "%s: out of memory", fn);
    if (slot) {
        (*slot)->cq = rcq;
        (*slot)->users++;
    }
    cq->committed += p->send_depth;
    rcq->committed += recv;
    return 0;
}

static int cq_reserve(const struct qp_plan *p)
{
    pthread_mutex_lock(&p->cq->nic->lock);
    int rc = cq_reserve_locked(p);
    pthread_mutex_unlock(&p->cq->nic->lock);
    return rc;
}

/* Gives back what cq_reserve_locked reserved (under nic->lock). */
static void cq_unreserve_locked(struct mlxd_cq *cq, struct mlxd_cq *rcq, uint32_t send_depth, uint32_t recv_depth,
                                struct mlxd_srq *srq)
{
    cq->committed -= send_depth;
    rcq->committed -= recv_depth;
    struct mlxd_srq_cq **slot = srq ? srq_cq_slot(srq, rcq) : NULL;
    if (slot && *slot && --(*slot)->users == 0) {
        struct mlxd_srq_cq *u = *slot;
        rcq->committed -= srq->depth;
        *slot = u->next;
        free(u);
    }
}

static void cq_unreserve(const struct qp_plan *p)
{
    pthread_mutex_lock(&p->cq->nic->lock);
    cq_unreserve_locked(p->cq, p->rcq, p->send_depth, p->recv_depth, p->srq);
    pthread_mutex_unlock(&p->cq->nic->lock);
}

/* The QP's memory (its rings and doorbell record in one mapping, the wr_id tables) and the
 * fields of the plan; 0 or -ENOMEM (what was allocated stays for mlxd__qp_release). */
static int qp_memory(struct mlxd_qp *qp, const struct qp_plan *p, const struct mlxd_qp_opts *opts)
{
    static const char fn[] = "mlxd_qp_create";
    size_t rq_bytes = (size_t)p->rq_cnt << p->rq_shift;
    size_t bufl = rq_bytes + (size_t)p->sq_wqebbs * MLXD_SEND_WQE_BB;
    long pg = sysconf(_SC_PAGESIZE);
    bufl = (bufl + (size_t)pg - 1) & ~((size_t)pg - 1);
    size_t len = bufl + (size_t)pg;       /* + one page for the doorbell record */
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return mlxd_err(ENOMEM, "%s: cannot allocate a %zu-byte QP buffer", fn, len);
    madvise(m, len, MADV_DONTFORK);
    qp->mem = m;
    qp->mem_len = len;
    qp->db = (uint8_t *)m + bufl;
    if (p->sq_wqebbs) {
        qp->sq_wrid = calloc(p->sq_wqebbs, sizeof *qp->sq_wrid);
        qp->sq_next = calloc(p->sq_wqebbs, sizeof *qp->sq_next);
    }
    if (p->rq_cnt) qp->rq_wrid = calloc(p->rq_cnt, sizeof *qp->rq_wrid);
    if ((p->sq_wqebbs && (!qp->sq_wrid || !qp->sq_next)) || (p->rq_cnt && !qp->rq_wrid))
        return mlxd_err(ENOMEM, "%s: out of memory", fn);
    qp->dbrec = qp->db;
    qp->rq = p->rq_cnt ? (uint8_t *)m : NULL;
    qp->sq = p->sq_wqebbs ? (uint8_t *)m + rq_bytes : NULL;
    qp->sq_wqebbs = p->sq_wqebbs;
    qp->sq_depth = p->send_depth;
    qp->rq_wqe_cnt = p->rq_cnt;
    qp->rq_depth = p->recv_depth;
    qp->rq_wqe_shift = p->rq_shift;
    qp->max_recv_sge = p->recv_sge;
    qp->max_send_sge = p->send_sge;
    qp->max_inline = opts->max_inline;
    qp->type = p->type;
    qp->nic = p->cq->nic;
    qp->send_cq = p->cq;
    qp->recv_cq = p->rcq;
    qp->srq = p->srq;
    qp->user_data = opts->user_data;
    qp->gid_index = p->gid_index;
    memcpy(qp->gid, p->gid, 16);
    qp->psn = opts->psn ? (opts->psn & 0xffffff) : random_psn();
    return 0;
}

/* A free user index (cqe_version 1), marked taken; 0 or -ENOSPC. */
static int take_uidx(struct mlxd_nic *nic, struct mlxd_qp *qp)
{
    pthread_mutex_lock(&nic->lock);
    uint32_t uidx = 0;
    while (uidx < MLXD_MAX_QPS && nic->qp_table[uidx]) uidx++;
    if (uidx < MLXD_MAX_QPS) table_set(nic, uidx, &reserved_slot);
    pthread_mutex_unlock(&nic->lock);
    if (uidx == MLXD_MAX_QPS)
        return mlxd_err(ENOSPC, "mlxd_qp_create %s: the NIC's table of %u QPs is full", nic->name, MLXD_MAX_QPS);
    qp->uidx = uidx;
    return 0;
}

/* The created QP goes live: in the NIC's table and list, counted on its CQs and SRQ. */
static void publish_qp(struct mlxd_nic *nic, struct mlxd_qp *qp)
{
    pthread_mutex_lock(&nic->lock);
    table_set(nic, qp->uidx, qp);
    qp->next = nic->qps;
    nic->qps = qp;
    qp->send_cq->qps++;
    if (qp->recv_cq != qp->send_cq) qp->recv_cq->qps++;
    if (qp->srq) qp->srq->qps++;
    pthread_mutex_unlock(&nic->lock);
}

int mlxd_qp_create(struct mlxd_cq *cq, const struct mlxd_qp_opts *opts, struct mlxd_qp **out)
{
    if (!cq || cq->detached || cq->state != OBJ_LIVE || !cq->nic || !nic_ok(cq->nic) || !opts || !out)
        return mlxd_err(EINVAL, "mlxd_qp_create: invalid/destroyed/detached CQ, closed NIC, or NULL opts/out");
    struct mlxd_nic *nic = cq->nic;
    struct qp_plan p;
    int rc = create_plan(cq, opts, &p);
    if (rc) return rc;
    rc = cq_reserve(&p);
    if (rc) return rc;
    struct mlxd_qp *qp = calloc(1, sizeof *qp);
    if (!qp) {
        cq_unreserve(&p);
        return mlxd_err(ENOMEM, "mlxd_qp_create: out of memory");
    }
    rc = qp_memory(qp, &p, opts);
    if (rc) goto fail_mem;
    rc = take_uidx(nic, qp);
    if (rc) goto fail_mem;
    uint32_t page_id = 0;
    rc = qp_doorbell_uar(nic, qp, opts, p.sq_wqebbs, &page_id);
    if (rc) goto fail_uidx;
    uint32_t qpn = 0;
    rc = kernel_create_qp(qp, cq, p.rcq, p.send_depth, p.recv_depth, page_id, &qpn);
    if (rc) goto fail_uar;
    qp->qpn = qpn & 0xffffff;
    qp->ib_state = 0;
    qp->state = OBJ_LIVE;
    publish_qp(nic, qp);
    *out = qp;
    mlxd_err_clear();   /* no stale message from an earlier refusal */
    return 0;

fail_uar:
    mlxd__uar_free(nic, qp->uar_handle, qp->uar_map);
fail_uidx:
    pthread_mutex_lock(&nic->lock);
    table_set(nic, qp->uidx, NULL);
    pthread_mutex_unlock(&nic->lock);
fail_mem:
    mlxd__qp_release(qp);
    free(qp);
    cq_unreserve(&p);
    return rc;
}

int mlxd_qp_endpoint(const struct mlxd_qp *qp, struct mlxd_endpoint *out)
{
    if (!qp || qp->state != OBJ_LIVE || !out) return mlxd_err(EINVAL, "mlxd_qp_endpoint: invalid or destroyed QP, or out NULL");
    memset(out, 0, sizeof *out);
    out->qpn = qp->qpn;
    out->psn = qp->psn;
    memcpy(out->gid, qp->gid, 16);
    return 0;
}

int mlxd_qp_state(const struct mlxd_qp *qp)
{
    if (!qp || qp->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_qp_state: invalid or destroyed QP");
    return (int)qp->ib_state;
}

static int modify(struct mlxd_qp *qp, struct ib_uverbs_modify_qp *m)
{
    m->qp_handle = qp->handle;
    return mlxd__invoke_write(qp->nic->fd, IB_USER_VERBS_CMD_MODIFY_QP, m, sizeof *m, NULL, 0, NULL, 0, NULL, 0);
}

/* IB_QP_* attribute mask bits (rdma/ib_user_verbs.h has no names for them; values from
 * include/rdma/ib_verbs.h enum ib_qp_attr_mask = IBV_QP_*) */
enum {
    QPA_STATE = 1, QPA_ACCESS = 8, QPA_PKEY = 0x10, QPA_PORT = 0x20, QPA_AV = 0x80,
    QPA_PATH_MTU = 0x100, QPA_TIMEOUT = 0x200, QPA_RETRY = 0x400, QPA_RNR_RETRY = 0x800,
    QPA_RQ_PSN = 0x1000, QPA_MAX_RD_ATOMIC = 0x2000, QPA_MIN_RNR = 0x8000, QPA_SQ_PSN = 0x10000,
    QPA_MAX_DEST_RD_ATOMIC = 0x20000, QPA_DEST_QPN = 0x100000,
};

int mlxd_qp_connect(struct mlxd_qp *qp, const struct mlxd_endpoint *peer,
                    const struct mlxd_connect_opts *o)
{
    static const char fn[] = "mlxd_qp_connect";
    if (!qp || qp->state != OBJ_LIVE || !nic_ok(qp->nic) || !peer)
        return mlxd_err(EINVAL, "%s: invalid or destroyed QP, closed NIC, or peer NULL", fn);
    if (o && o->sz < offsetof(struct mlxd_connect_opts, max_rd_atomic) + sizeof o->max_rd_atomic)
        return mlxd_err(EINVAL, "%s: opts->sz %zu is too small", fn, o->sz);
    if (qp->type == MLXD_QP_UD) return mlxd_err(EINVAL, "%s: QP 0x%x is a UD QP: not connected, see mlxd_qp_ud_ready", fn, qp->qpn);
    /* INIT: a connect whose RTR step failed (e.g. ETIMEDOUT resolving the peer) resumes there */
    if (qp->ib_state > 1) return mlxd_err(EINVAL, "%s: QP 0x%x is not in RESET (state %u): connect once", fn, qp->qpn, qp->ib_state);
    uint32_t access = o ? o->peer_access : 0;
    uint32_t allowed = qp->type == MLXD_QP_UC ? MLXD_ACCESS_REMOTE_WRITE
                     : MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ | MLXD_ACCESS_REMOTE_ATOMIC;
    if (access & ~allowed) return mlxd_err(EINVAL, "%s: peer_access 0x%x not allowed on this QP type (allowed 0x%x)", fn, access, allowed);
    if (o && o->path_mtu > 5) return mlxd_err(EINVAL, "%s: path_mtu %u is not an IB MTU enum 1..5", fn, o->path_mtu);
    int trc = o ? mlxd__opts_tail_check(fn, "opts", o, o->sz, sizeof *o) : 0;
    if (trc) return trc;
    /* the widths of these fields in the NIC's QP context (kernel include/linux/mlx5/mlx5_ifc.h:
     * ads ack_timeout 5 bits and sl 4 bits, qpc retry_count and rnr_retry 3 bits, min_rnr_nak
     * 5 bits): a larger value would be cut silently or refused halfway through connect */
    if (o && (o->timeout > 31 || o->retry_cnt > 7 || o->rnr_retry > 7 || o->min_rnr_timer > 31 || o->sl > 15))
        return mlxd_err(EINVAL, "%s: timeout %u (0..31), retry_cnt %u (0..7), rnr_retry %u (0..7), "
                        "min_rnr_timer %u (0..31) or sl %u (0..15) out of range", fn, o->timeout, o->retry_cnt,
                        o->rnr_retry, o->min_rnr_timer, o->sl);
    /* RoCE (the only link layer mlxd_open accepts): the SL is the 802.1p priority, 3 bits (kernel
     * hw/mlx5/qp.c mlx5_set_path keeps ah->sl & 0x7 on RoCE), so 8..15 would be cut silently */
    if (o && o->sl > 7)
        return mlxd_err(EINVAL, "%s: sl %u: on RoCE the service level is the 3-bit 802.1p priority (0..7)",
                        fn, o->sl);
    if (o && o->max_rd_atomic > qp->nic->max_qp_rd_atom)
        return mlxd_err(EINVAL, "%s: max_rd_atomic %u exceeds the device's maximum %u", fn, o->max_rd_atomic,
                        qp->nic->max_qp_rd_atom);
    if (peer->qpn > 0xffffff) return mlxd_err(EINVAL, "%s: peer QPN 0x%x exceeds 24 bits", fn, peer->qpn);
    if (peer->psn > 0xffffff) return mlxd_err(EINVAL, "%s: peer PSN 0x%x exceeds 24 bits", fn, peer->psn);
    struct mlxd_nic *nic = qp->nic;
    bool rc_qp = qp->type == MLXD_QP_RC;
    uint8_t mtu = o && o->path_mtu ? o->path_mtu : (uint8_t)nic->port.active_mtu;
    if (mtu > nic->port.active_mtu) mtu = (uint8_t)nic->port.active_mtu;
    uint8_t rd_atomic = o && o->max_rd_atomic ? o->max_rd_atomic : 1;

    struct ib_uverbs_modify_qp m;
    int rc;
    if (qp->ib_state == 0) {
        memset(&m, 0, sizeof m);
        m.qp_state = 1;                               /* INIT */
        m.attr_mask = QPA_STATE | QPA_PKEY | QPA_PORT | QPA_ACCESS;
        m.pkey_index = 0;
        m.port_num = 1;
        m.qp_access_flags = access;
        rc = modify(qp, &m);
        if (rc) return mlxd_err(-rc, "%s %s: the kernel refused MODIFY_QP RESET->INIT of QP 0x%x: %s", fn, nic->name, qp->qpn, strerror(-rc));
        qp->ib_state = 1;
    }

    memset(&m, 0, sizeof m);
    m.qp_state = 2;                                   /* RTR */
    m.attr_mask = QPA_STATE | QPA_AV | QPA_PATH_MTU | QPA_DEST_QPN | QPA_RQ_PSN;
    m.path_mtu = mtu;
    m.dest_qp_num = peer->qpn;
    m.rq_psn = peer->psn & 0xffffff;
    memcpy(m.dest.dgid, peer->gid, 16);
    m.dest.is_global = 1;
    m.dest.sgid_index = (uint8_t)qp->gid_index;
    m.dest.hop_limit = o && o->hop_limit ? o->hop_limit : 64;
    m.dest.traffic_class = o ? o->traffic_class : 0;
    m.dest.sl = o ? o->sl : 0;
    m.dest.port_num = 1;
    if (rc_qp) {
        m.attr_mask |= QPA_MAX_DEST_RD_ATOMIC | QPA_MIN_RNR;
        m.max_dest_rd_atomic = rd_atomic;
        m.min_rnr_timer = o && o->min_rnr_timer ? o->min_rnr_timer : 12;
    }
    rc = modify(qp, &m);
    if (rc) return mlxd_err(-rc, "%s %s: the kernel refused MODIFY_QP INIT->RTR of QP 0x%x: %s (QP left in INIT)", fn, nic->name, qp->qpn, strerror(-rc));
    qp->ib_state = 2;
    if (o && o->receive_only) return 0;

    memset(&m, 0, sizeof m);
    m.qp_state = 3;                                   /* RTS */
    m.attr_mask = QPA_STATE | QPA_SQ_PSN;
    m.sq_psn = qp->psn;
    if (rc_qp) {
        m.attr_mask |= QPA_TIMEOUT | QPA_RETRY | QPA_RNR_RETRY | QPA_MAX_RD_ATOMIC;
        m.timeout = o && o->timeout ? o->timeout : 14;
        m.retry_cnt = o && o->retry_cnt ? o->retry_cnt : 7;
        m.rnr_retry = o && o->rnr_retry ? o->rnr_retry : 7;
        m.max_rd_atomic = rd_atomic;
    }
    rc = modify(qp, &m);
    if (rc) return mlxd_err(-rc, "%s %s: the kernel refused MODIFY_QP RTR->RTS of QP 0x%x: %s (QP left in RTR)", fn, nic->name, qp->qpn, strerror(-rc));
    qp->ib_state = 3;
    return 0;
}

int mlxd_qp_to_error(struct mlxd_qp *qp)
{
    if (!qp || qp->state != OBJ_LIVE || !nic_ok(qp->nic)) return mlxd_err(EINVAL, "mlxd_qp_to_error: invalid or destroyed QP");
    struct ib_uverbs_modify_qp m;
    memset(&m, 0, sizeof m);
    m.qp_state = 6;
    m.attr_mask = QPA_STATE;
    int rc = modify(qp, &m);
    if (rc) return mlxd_err(-rc, "mlxd_qp_to_error %s: the kernel refused MODIFY_QP ->ERR of QP 0x%x: %s", qp->nic->name, qp->qpn, strerror(-rc));
    qp->ib_state = 6;
    return 0;
}

int mlxd_qp_destroy(struct mlxd_qp *qp)
{
    if (!qp || !qp->nic) return mlxd_err(EINVAL, "mlxd_qp_destroy: qp is NULL");
    struct mlxd_nic *nic = qp->nic;
    if (nic->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_qp_destroy: its NIC is closed");
    if (NIC_FORKED(nic)) return mlxd__forked_child("mlxd_qp_destroy", nic);
    if (qp->state == OBJ_DEAD)
        return qp->destroy_result ? mlxd_err(-qp->destroy_result, "mlxd_qp_destroy: the first call failed: %s",
                                             strerror(-qp->destroy_result)) : 0;
    uint32_t events = 0;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY);
    ioc_obj(&c, UVERBS_ATTR_DESTROY_QP_HANDLE, qp->handle);
    ioc_out(&c, UVERBS_ATTR_DESTROY_QP_RESP, &events, sizeof events);
    int rc = mlxd__ioctl(nic->fd, &c);
    pthread_mutex_lock(&nic->lock);
    qp->state = OBJ_DEAD;
    qp->destroy_result = rc;
    if (nic->qp_table[qp->uidx] == qp) table_set(nic, qp->uidx, NULL);
    if (qp->send_cq->hot_qp == qp) qp->send_cq->hot_qp = NULL;
    if (qp->recv_cq->hot_qp == qp) qp->recv_cq->hot_qp = NULL;
    mlxd__cq_mini_forget_qp(qp->send_cq, qp);
    mlxd__cq_mini_forget_qp(qp->recv_cq, qp);
    qp->send_cq->qps--;
    if (qp->recv_cq != qp->send_cq) qp->recv_cq->qps--;
    if (qp->srq && !rc) qp->srq->qps--;       /* a QP the kernel kept still holds its SRQ */
    cq_unreserve_locked(qp->send_cq, qp->recv_cq, qp->sq_depth, qp->rq_depth, qp->srq);
    pthread_mutex_unlock(&nic->lock);
    if (rc) return mlxd_err(-rc, "mlxd_qp_destroy %s: the kernel refused QP_DESTROY of QP 0x%x: %s", nic->name, qp->qpn, strerror(-rc));
    /* its completions nobody polled leave the CQs too (as libmlx5's ibv_destroy_qp): they would
     * come back for a QP that is gone and hold CQ slots no live QP's depth accounts for */
    mlxd__cq_clean_srq(qp->send_cq, qp->qpn, qp->srq);
    if (qp->recv_cq != qp->send_cq) mlxd__cq_clean_srq(qp->recv_cq, qp->qpn, qp->srq);
    mlxd__uar_free(nic, qp->uar_handle, qp->uar_map);
    qp->uar_map = NULL;
    qp->bf_reg = NULL;
    mlxd__qp_release(qp);
    return 0;
}
