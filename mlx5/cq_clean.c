/* cq_clean.c: removing a destroyed QP's completions from a CQ ring.
 *
 * Once QP_DESTROY has returned, the NIC writes no more CQEs of that QP, but the ones it wrote
 * and nobody polled stay in the CQ.  Left there they would be returned for a QP that no longer
 * exists (or for a later QP given the same number), and they would take CQ slots that no live
 * QP's depth accounts for: a CQ sized send_depth + recv_depth per QP could then overrun.
 * rdma-core's libmlx5 does the same on ibv_destroy_qp (providers/mlx5/cq.c, __mlx5_cq_clean):
 * the CQEs of other QPs move up over the removed ones, the consumer index skips the freed
 * slots, and the doorbell record hands them back.
 *
 * Only the CQEs the software owns now (from ci up to the first one the NIC has not written)
 * are looked at and moved; the NIC may go on writing beyond them meanwhile.  Each moved CQE
 * gets the owner bit of its new slot's pass, written last.  The caller guarantees that no
 * poll of the CQ runs (the rule of mlxd_qp_destroy). */
#include <endian.h>
#include <string.h>
#include "barrier.h"
#include "cqe_owner.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_cqe.h"

static inline uint8_t *slot(const struct mlxd_cq *cq, uint32_t i)
{
    return (uint8_t *)(uintptr_t)cq->buf + ((size_t)(i & (cq->ncqe - 1)) << 6);
}

static inline uint8_t owner_of(const struct mlxd_cq *cq, uint32_t i) { return (i & cq->ncqe) ? 1 : 0; }

/* A receive completion (opcode RESP_WR_IMM .. RESP_SEND_INV, or RESP_ERR: mlx5dv.h MLX5_CQE_*). */
static bool is_resp(const uint8_t *c)
{
    uint8_t op = c[MLXD_CQE_OFF_OP_OWN] >> 4;
    return (op >= 1 && op <= 4) || op == 14;
}

uint32_t mlxd__cq_clean(struct mlxd_cq *cq, uint32_t qpn) { return mlxd__cq_clean_srq(cq, qpn, NULL); }

/* With srq: the receive WQEs of the removed receive completions go back to it, as libmlx5's
 * __mlx5_cq_clean frees them (mlx5_free_srq_wqe): nobody will poll them now. */
uint32_t mlxd__cq_clean_srq(struct mlxd_cq *cq, uint32_t qpn, struct mlxd_srq *srq)
{
    if (!cq || !cq->buf || !cq->ncqe) return 0;
    const uint32_t ci = cq->ci;
    uint32_t pi = ci;
    /* a compressed CQ (mlx5/cqe_mini.c): only the full CQEs before the first compressed
     * session are looked at (a session's array slots are no CQEs; moving them would break it):
     * the destroyed QP's completions behind it stay, and complete with qp NULL */
    while (pi - ci < cq->ncqe && mlxd__cqe_sw_owned(slot(cq, pi), owner_of(cq, pi)) &&
           !(cq->cqe_comp && mlxd_cqe_format(slot(cq, pi)) == 3))
        pi++;
    mlxd_rmb();                               /* owner bytes before the QPNs and the copies */
    uint32_t freed = 0, srq_freed = 0;
    for (uint32_t i = pi; i-- != ci;) {       /* from the newest down: a CQE moves up by freed */
        uint8_t *c = slot(cq, i);
        if ((mlxd_cqe_qpn(c) & MLXD_QPN_MASK) == (qpn & MLXD_QPN_MASK)) {
            if (srq && is_resp(c)) {
                mlxd__srq_complete(srq, mlxd_cqe_wqe_counter(c));
                srq_freed++;
            }
            freed++;
        } else if (freed) {
            uint8_t *d = slot(cq, i + freed);
            uint8_t op_own = (uint8_t)((c[MLXD_CQE_OFF_OP_OWN] & ~1u) | owner_of(cq, i + freed));
            memcpy(d, c, MLXD_CQE_OFF_OP_OWN);
            mlxd_wmb();                       /* the CQE before its owner byte */
            mlxd_shared_store(d + MLXD_CQE_OFF_OP_OWN, op_own);
        }
    }
    if (!freed) return 0;
    cq->ci = ci + freed;
    mlxd_wmb();                               /* the moves before the slots are handed back */
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32(cq->ci & MLXD_CQ_CI_MASK));
    if (srq_freed)                            /* after the record, as the poll loop (struct release) */
        mlxd__srq_free(srq, srq_freed);
    return freed;
}
