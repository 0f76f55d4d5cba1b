/* ud.c: unreliable datagram: address handles (CREATE_AH / DESTROY_AH through INVOKE_WRITE), the
 * UD state machine (RESET -> INIT -> RTR -> RTS with a Q_Key) and the UD send WQE size.
 * Sources: rdma-core providers/mlx5/verbs.c mlx5_create_ah (the address vector, the kernel's
 * dmac on RoCE), mlx5_calc_send_wqe (IBV_QPT_UD: ctrl + datagram segment); mlx5dv.h struct
 * mlx5_wqe_av; kernel drivers/infiniband/core/uverbs_cmd.c ib_uverbs_create_ah, verbs.c
 * qp_state_table (IB_QPT_UD), hw/mlx5/ah.c mlx5_ib_create_ah. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "driver.h"
#include "ioctl.h"
#include "opts.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"

uint32_t mlxd__ud_send_wqe_size(uint32_t max_inline, uint32_t max_send_sge)
{
    uint32_t data = max_send_sge * MLXD_WQE_DATA_SIZE;
    uint32_t inl = max_inline ? (MLXD_WQE_INL_HDR_SIZE + max_inline + 15) & ~15u : 0;
    uint32_t sz = MLXD_WQE_CTRL_SIZE + MLXD_WQE_AV_SIZE + (data > inl ? data : inl);
    return (sz + MLXD_SEND_WQE_BB - 1) & ~(MLXD_SEND_WQE_BB - 1);
}

/* IB_QP_* attribute mask bits (include/rdma/ib_verbs.h enum ib_qp_attr_mask) */
enum { QPA_STATE = 1, QPA_PKEY = 0x10, QPA_PORT = 0x20, QPA_QKEY = 0x40, QPA_SQ_PSN = 0x10000 };

static int ud_modify(struct mlxd_qp *qp, uint32_t state, uint32_t mask, uint32_t qkey)
{
    struct ib_uverbs_modify_qp m;
    memset(&m, 0, sizeof m);
    m.qp_handle = qp->handle;
    m.qp_state = state;
    m.attr_mask = QPA_STATE | mask;
    m.port_num = 1;
    m.qkey = qkey;
    m.sq_psn = qp->psn;
    return mlxd__invoke_write(qp->nic->fd, IB_USER_VERBS_CMD_MODIFY_QP, &m, sizeof m, NULL, 0, NULL, 0, NULL, 0);
}

int mlxd_qp_ud_ready(struct mlxd_qp *qp, uint32_t qkey)
{
    static const char fn[] = "mlxd_qp_ud_ready";
    static const struct { uint32_t state, mask; const char *what; } steps[] = {
        { 1, QPA_PKEY | QPA_PORT | QPA_QKEY, "RESET->INIT" },
        { 2, 0, "INIT->RTR" },
        { 3, QPA_SQ_PSN, "RTR->RTS" },
    };
    if (!qp || qp->state != OBJ_LIVE || !nic_ok(qp->nic))
        return mlxd_err(EINVAL, "%s: invalid or destroyed QP, or closed NIC", fn);
    if (qp->type != MLXD_QP_UD) return mlxd_err(EINVAL, "%s: QP 0x%x is not a UD QP (type %u)", fn, qp->qpn, qp->type);
    if (qp->ib_state != 0) return mlxd_err(EINVAL, "%s: QP 0x%x is not in RESET (state %u)", fn, qp->qpn, qp->ib_state);
    for (unsigned i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int rc = ud_modify(qp, steps[i].state, steps[i].mask, qkey);
        if (rc)
            return mlxd_err(-rc, "%s %s: the kernel refused MODIFY_QP %s of QP 0x%x (Q_Key 0x%x): %s (QP left in state %u)",
                            fn, qp->nic->name, steps[i].what, qp->qpn, qkey, strerror(-rc), qp->ib_state);
        qp->ib_state = steps[i].state;
    }
    qp->qkey = qkey;
    return 0;
}

static const uint8_t *gid_at(const struct mlxd_nic *nic, uint32_t idx)
{
    for (unsigned i = 0; i < nic->ngids; i++)
        if (nic->gids[i].index == idx) return nic->gids[i].raw;
    return NULL;
}

/* The address vector as libmlx5's mlx5_create_ah fills it for a RoCE port: SL in
 * stat_rate_sl, the GRH part (grh_gid_fl bit 30, source GID index, flow label, hop limit,
 * traffic class, destination GID) and the kernel's destination MAC. */
static void fill_av(uint8_t *av, const uint8_t gid[16], uint32_t sgid, uint8_t hop, uint8_t tclass,
                    uint8_t sl, uint32_t flow, const uint8_t dmac[6])
{
    memset(av, 0, MLXD_WQE_AV_SIZE);
    av[MLXD_WQE_AV_OFF_STAT_RATE_SL] = (uint8_t)(sl << 4);
    memcpy(av + MLXD_WQE_AV_OFF_RMAC, dmac, 6);
    av[MLXD_WQE_AV_OFF_TCLASS] = tclass;
    av[MLXD_WQE_AV_OFF_HOP_LIMIT] = hop;
    uint32_t fl = htobe32(flow | 1u << 30 | (sgid & 0xff) << 20);
    memcpy(av + MLXD_WQE_AV_OFF_GRH_GID_FL, &fl, 4);
    memcpy(av + MLXD_WQE_AV_OFF_RGID, gid, 16);
}

int mlxd_ah_create(struct mlxd_nic *nic, const uint8_t gid[16], const struct mlxd_ah_opts *o,
                   struct mlxd_ah **out)
{
    static const char fn[] = "mlxd_ah_create";
    if (!nic_ok(nic) || !gid || !out) return mlxd_err(EINVAL, "%s: invalid or closed nic, or gid/out NULL", fn);
    if (o && o->sz < offsetof(struct mlxd_ah_opts, flow_label) + sizeof o->flow_label)
        return mlxd_err(EINVAL, "%s: opts->sz %zu is too small", fn, o->sz);
    int trc = o ? mlxd__opts_tail_check(fn, "opts", o, o->sz, sizeof *o) : 0;
    if (trc) return trc;
    uint32_t sgid = o && o->has_gid_index ? o->gid_index : (uint32_t)nic->default_gid;
    if (!gid_at(nic, sgid)) return mlxd_err(EINVAL, "%s: GID index %u is not a valid GID of port 1", fn, sgid);
    if (o && (o->sl > 7 || o->flow_label > 0xfffff))
        return mlxd_err(EINVAL, "%s: sl %u (0..7 on RoCE) or flow_label 0x%x (20 bits) out of range", fn, o->sl, o->flow_label);
    uint8_t hop = o && o->hop_limit ? o->hop_limit : 64, tclass = o ? o->traffic_class : 0, sl = o ? o->sl : 0;
    uint32_t flow = o ? o->flow_label : 0;
    struct mlxd_ah *ah = calloc(1, sizeof *ah);
    if (!ah) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    struct ib_uverbs_create_ah req;
    memset(&req, 0, sizeof req);
    req.user_handle = (uintptr_t)ah;
    req.pd_handle = nic->pd_handle;
    memcpy(req.attr.grh.dgid, gid, 16);
    req.attr.grh.flow_label = flow;
    req.attr.grh.sgid_index = (uint8_t)sgid;
    req.attr.grh.hop_limit = hop;
    req.attr.grh.traffic_class = tclass;
    req.attr.sl = sl;
    req.attr.is_global = 1;
    req.attr.port_num = 1;
    struct ib_uverbs_create_ah_resp resp = {0};
    struct mlx5_ib_create_ah_resp uresp;
    memset(&uresp, 0, sizeof uresp);
    int rc = mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_CREATE_AH, &req, sizeof req, &resp, sizeof resp,
                                NULL, 0, &uresp, sizeof uresp);
    if (rc) {
        free(ah);
        return mlxd_err(-rc, "%s %s: the kernel refused CREATE_AH: %s", fn, nic->name, strerror(-rc));
    }
    fill_av(ah->av, gid, sgid, hop, tclass, sl, flow, uresp.dmac);
    ah->nic = nic;
    ah->handle = resp.ah_handle;
    ah->state = OBJ_LIVE;
    pthread_mutex_lock(&nic->lock);
    ah->next = nic->ahs;
    nic->ahs = ah;
    pthread_mutex_unlock(&nic->lock);
    *out = ah;
    return 0;
}

int mlxd_ah_destroy(struct mlxd_ah *ah)
{
    if (!ah || !nic_ok(ah->nic)) return mlxd_err(EINVAL, "mlxd_ah_destroy: ah is NULL or its NIC is closed");
    if (ah->state == OBJ_DEAD)
        return ah->destroy_result ? mlxd_err(-ah->destroy_result, "mlxd_ah_destroy: the first call failed: %s",
                                             strerror(-ah->destroy_result)) : 0;
    struct ib_uverbs_destroy_ah req = { .ah_handle = ah->handle };
    int rc = mlxd__invoke_write(ah->nic->fd, IB_USER_VERBS_CMD_DESTROY_AH, &req, sizeof req, NULL, 0, NULL, 0, NULL, 0);
    ah->state = OBJ_DEAD;
    ah->destroy_result = rc;
    if (rc) return mlxd_err(-rc, "mlxd_ah_destroy %s: the kernel refused DESTROY_AH: %s", ah->nic->name, strerror(-rc));
    return 0;
}

int mlxd__ah_destroy_all(struct mlxd_nic *nic)
{
    int result = 0;
    for (struct mlxd_ah *ah = nic->ahs; ah; ah = ah->next)
        if (ah->state == OBJ_LIVE && mlxd_ah_destroy(ah) < 0 && !result) result = ah->destroy_result;
    return result;
}
