/* post_mw.c: the UMR WQE that binds, unbinds or invalidates a memory window, as rdma-core
 * providers/mlx5/qp.c set_bind_wr writes it (mlx5dv.h: struct mlx5_wqe_umr_ctrl_seg,
 * mlx5_wqe_mkey_context_seg, mlx5_wqe_umr_klm_seg and the MLX5_WQE_UMR_CTRL_* /
 * MLX5_WQE_MKEY_CONTEXT_* values):
 *   WQEBB 0: the control segment (opcode MLX5_OPCODE_UMR, imm = the window's current rkey, or the
 *     rkey to invalidate) and the UMR control segment: flags INLINE | TRNSLATION_OFFSET, plus
 *     CHECK_FREE for a type 2 bind or CHECK_QPN for an invalidation; klm_octowords 4 for a bind
 *     (one KLM rounded up to 8 entries, in 16-byte units / 2), else 0; mkey_mask FREE | MKEY
 *     (+ QPN for type 2) (+ LEN, START_ADDR and the four access bits for a bind);
 *   WQEBB 1: the mkey context: free (bit 6) for an unbind / invalidation, the access bits, the new
 *     key byte with the QPN of a type 2 bind above it (else 0xffffff), start address (0 when
 *     zero-based) and length;
 *   WQEBB 2 (bind only): one KLM (byte_count, the region's lkey, the address), zero padded to 64.
 * The WQE after one of these carries the initiator small fence (MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE,
 * libmlx5's next_fence), so that it waits for the window to be (un)bound.
 * Hot path: no system call, lock, allocation or division. */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"
#include "wqe.h"

enum {
    UMR_FLAG_INLINE = 1 << 7, UMR_FLAG_CHECK_FREE = 1 << 5, UMR_FLAG_TRANSLATION_OFFSET = 1 << 4,
    UMR_FLAG_CHECK_QPN = 1 << 3,
    MASK_LEN = 1 << 0, MASK_START_ADDR = 1 << 6, MASK_MKEY = 1 << 13, MASK_QPN = 1 << 14,
    MASK_LOCAL_WRITE = 1 << 18, MASK_REMOTE_READ = 1 << 19, MASK_REMOTE_WRITE = 1 << 20,
    MASK_ATOMIC = 1 << 21, MASK_FREE = 1 << 29,
    MKEY_FREE = 1 << 6,
    MKEY_REMOTE_READ = 1 << 4, MKEY_REMOTE_WRITE = 1 << 5, MKEY_ATOMIC = 1 << 6,
    BIND_BYTES = 192, INV_BYTES = 128,
};
#define BIND_ACCESS (MLXD_ACCESS_REMOTE_READ | MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_ATOMIC)

static int refuse(const struct mlxd_qp *qp, const char *why)
{
    return mlxd_err(EINVAL, "mlxd_qp_post: QP 0x%x: %s", qp->qpn, why);
}

int mlxd__umr_bytes(const struct mlxd_qp *qp, const struct mlxd_entry *e)
{
    if (qp->type == MLXD_QP_UD) return refuse(qp, "a UD QP cannot bind or invalidate memory windows");
    if (e->flags & ~(uint32_t)(MLXD_SIGNALED | MLXD_FENCE)) return refuse(qp, "flags other than SIGNALED/FENCE");
    if (e->op == MLXD_OP_LOCAL_INV) return INV_BYTES;
    const struct mlxd_mw_bind *b = e->bind;
    if (!b || !b->mw || b->mw->state != OBJ_LIVE || b->mw->nic != qp->nic)
        return refuse(qp, "BIND_MW: bind or bind->mw NULL, or the window freed or of another NIC");
    if (!b->length) return b->mw->type == MLXD_MW_TYPE_1 ? INV_BYTES
                           : refuse(qp, "BIND_MW: a type 2 window is unbound by LOCAL_INV or SEND_INV, not length 0");
    if (!b->region || b->region->state != OBJ_LIVE || b->region->nic != qp->nic)
        return refuse(qp, "BIND_MW: region NULL, deregistered or of another NIC");
    if ((b->access & ~(uint32_t)BIND_ACCESS) || (b->flags & ~(uint32_t)MLXD_MW_ZERO_BASED))
        return refuse(qp, "BIND_MW: access other than REMOTE_READ/WRITE/ATOMIC, or unknown flags");
    if ((b->flags & MLXD_MW_ZERO_BASED) && b->mw->type == MLXD_MW_TYPE_1)
        return refuse(qp, "BIND_MW: a type 1 window cannot be zero-based (libmlx5 mlx5_bind_mw)");
    if (b->length > 1ull << 31)        /* one KLM holds 2 GiB (libmlx5 set_bind_wr: EOPNOTSUPP) */
        return mlxd_err(EOPNOTSUPP, "mlxd_qp_post: QP 0x%x: BIND_MW: length %llu above 2 GiB (one KLM)", qp->qpn,
                        (unsigned long long)b->length);
    return BIND_BYTES;
}

static inline void st16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static inline void st32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static inline void st64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }

/* The next key byte of an rkey (libibverbs ibv_inc_rkey). */
static inline uint32_t next_rkey(uint32_t rkey) { return (rkey & ~0xffu) | ((rkey + 1) & 0xff); }

void mlxd__umr_build(struct mlxd_qp *qp, uint32_t pi, const struct mlxd_entry *e, uint32_t bytes)
{
    uint8_t *sq = (uint8_t *)(uintptr_t)qp->sq;
    uint8_t *bb[3];
    for (uint32_t i = 0; i < 3; i++) bb[i] = sq + (((pi + i) & (qp->sq_wqebbs - 1)) << MLXD_SEND_WQE_SHIFT);
    const struct mlxd_mw_bind *b = e->op == MLXD_OP_BIND_MW ? e->bind : NULL;
    bool bind = b && b->length, type2 = b ? b->mw->type == MLXD_MW_TYPE_2 : true;
    uint32_t key = b ? next_rkey(b->mw->rkey) & 0xff : 0;
    memset(bb[0], 0, MLXD_SEND_WQE_BB);
    memset(bb[1], 0, MLXD_SEND_WQE_BB);
    uint8_t *ctrl = bb[0];
    st32(ctrl + MLXD_WQE_CTRL_OFF_OPMOD_IDX_OPCODE, ((pi & 0xffff) << 8) | MLXD_WQE_UMR);
    st32(ctrl + MLXD_WQE_CTRL_OFF_QPN_DS, (qp->qpn << 8) | (bytes >> 4));
    ctrl[MLXD_WQE_CTRL_OFF_FM_CE_SE] = (uint8_t)(((e->flags & MLXD_SIGNALED) ? MLXD_WQE_CTRL_CQ_UPDATE : 0) |
                                                 ((e->flags & MLXD_FENCE) ? MLXD_WQE_CTRL_FENCE : 0));
    st32(ctrl + MLXD_WQE_CTRL_OFF_IMM, b ? b->mw->rkey : e->invalidate_rkey);
    uint8_t *umr = ctrl + MLXD_WQE_CTRL_SIZE;
    umr[0] = UMR_FLAG_INLINE | UMR_FLAG_TRANSLATION_OFFSET |
             (bind && type2 ? UMR_FLAG_CHECK_FREE : 0) | (!bind && type2 ? UMR_FLAG_CHECK_QPN : 0);
    st16(umr + 4, bind ? 4 : 0);                        /* klm_octowords: get_klm_octo(1 or 0) */
    uint64_t mask = MASK_FREE | MASK_MKEY | (type2 ? MASK_QPN : 0);
    if (bind)
        mask |= MASK_LEN | MASK_START_ADDR | MASK_LOCAL_WRITE | MASK_REMOTE_READ | MASK_REMOTE_WRITE | MASK_ATOMIC;
    st64(umr + 8, mask);
    uint8_t *mkey = bb[1];
    st32(mkey + 4, key | (bind && type2 ? qp->qpn << 8 : 0xffffff00u));
    if (!bind) {
        mkey[0] = MKEY_FREE;
        return;
    }
    mkey[2] = (uint8_t)((b->access & MLXD_ACCESS_REMOTE_READ ? MKEY_REMOTE_READ : 0) |
                        (b->access & MLXD_ACCESS_REMOTE_WRITE ? MKEY_REMOTE_WRITE : 0) |
                        (b->access & MLXD_ACCESS_REMOTE_ATOMIC ? MKEY_ATOMIC : 0));
    st64(mkey + 16, b->flags & MLXD_MW_ZERO_BASED ? 0 : b->addr);
    st64(mkey + 24, b->length);
    memset(bb[2], 0, MLXD_SEND_WQE_BB);
    st32(bb[2], (uint32_t)b->length);
    st32(bb[2] + 4, b->region->lkey);
    st64(bb[2] + 8, b->addr);
}

void mlxd__umr_posted(const struct mlxd_entry *e)
{
    if (e->op == MLXD_OP_BIND_MW) e->bind->mw->rkey = next_rkey(e->bind->mw->rkey);
}

int mlxd_mw_bind(struct mlxd_qp *qp, const struct mlxd_mw_bind *b, uint64_t wr_id)
{
    struct mlxd_entry e = { .wr_id = wr_id, .op = MLXD_OP_BIND_MW, .flags = MLXD_SIGNALED, .bind = b };
    int rc = mlxd_qp_post(qp, &e);
    return rc ? rc : mlxd_qp_ring(qp);
}
