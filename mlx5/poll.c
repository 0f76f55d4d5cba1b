/* poll.c: the completion hot path (mlx5-uverbs-abi.md 6.1-6.5; poll-loop-survey.md A.0, A.1,
 * A.12): ownership = opcode != INVALID and owner bit == !!(ci & ncqe), then a read barrier,
 * then the fields; the consumer index doorbell record once per call.  No system call, lock,
 * allocation or division. */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "barrier.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_cqe.h"
#include "mlxd_error.h"

/* Error CQE syndrome -> ibv_wc_status, as libmlx5 maps them (abi doc 6.4; enum ibv_wc_status
 * values from infiniband/verbs.h).  Anything else is IBV_WC_GENERAL_ERR (19). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const uint8_t syndrome_status[256] = {
    [0 ... 255] = 19,
    [0x01] = 1,   /* LOCAL_LENGTH_ERR      -> IBV_WC_LOC_LEN_ERR */
    [0x02] = 2,   /* LOCAL_QP_OP_ERR       -> IBV_WC_LOC_QP_OP_ERR */
    [0x04] = 4,   /* LOCAL_PROT_ERR        -> IBV_WC_LOC_PROT_ERR */
    [0x05] = 5,   /* WR_FLUSH_ERR          -> IBV_WC_WR_FLUSH_ERR */
    [0x06] = 6,   /* MW_BIND_ERR           -> IBV_WC_MW_BIND_ERR */
    [0x10] = 7,   /* BAD_RESP_ERR          -> IBV_WC_BAD_RESP_ERR */
    [0x11] = 8,   /* LOCAL_ACCESS_ERR      -> IBV_WC_LOC_ACCESS_ERR */
    [0x12] = 9,   /* REMOTE_INVAL_REQ_ERR  -> IBV_WC_REM_INV_REQ_ERR */
    [0x13] = 10,  /* REMOTE_ACCESS_ERR     -> IBV_WC_REM_ACCESS_ERR */
    [0x14] = 11,  /* REMOTE_OP_ERR         -> IBV_WC_REM_OP_ERR */
    [0x15] = 12,  /* TRANSPORT_RETRY_EXC   -> IBV_WC_RETRY_EXC_ERR */
    [0x16] = 13,  /* RNR_RETRY_EXC_ERR     -> IBV_WC_RNR_RETRY_EXC_ERR */
    [0x22] = 16,  /* REMOTE_ABORTED_ERR    -> IBV_WC_REM_ABORT_ERR */
};
#pragma GCC diagnostic pop

uint32_t mlxd__syndrome_status(uint8_t s) { return syndrome_status[s]; }

static inline uint32_t req_opcode(uint8_t wqe_op)
{
    switch (wqe_op) {
    case 0x08: case 0x09: return MLXD_WC_RDMA_WRITE;
    case 0x0a: case 0x0b: case 0x01: return MLXD_WC_SEND;
    case 0x10: return MLXD_WC_RDMA_READ;
    default: return MLXD_WC_NOP;
    }
}

/* The local QP of a CQE: by user index (cqe_version 1) or by QPN. */
static inline struct mlxd_qp *cqe_qp(const struct mlxd_cq *cq, const uint8_t *c, uint32_t qpn)
{
    if (!cq->qp_table) return NULL;
    struct mlxd_qp *qp = NULL;
    if (mlxd_likely(cq->cqe_version)) {
        uint32_t uidx = mlxd_cqe_srqn_uidx(c);
        if (uidx < MLXD_MAX_QPS) qp = __atomic_load_n(&cq->qp_table[uidx], __ATOMIC_ACQUIRE);
        if (mlxd_likely(qp && qp->qpn == qpn)) return qp;
    }
    for (uint32_t i = 0; i < MLXD_MAX_QPS; i++) {   /* cqe_version 0 (rare): a scan */
        qp = __atomic_load_n(&cq->qp_table[i], __ATOMIC_ACQUIRE);
        if (qp && qp->qpn == qpn && qp->state == OBJ_LIVE) return qp;
    }
    return NULL;
}

int mlxd_cq_poll(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    if (mlxd_unlikely(!cq || cq->state != OBJ_LIVE || (max > 0 && !out)))
        return mlxd_err(EINVAL, "mlxd_cq_poll: invalid or destroyed CQ, or out NULL");
    const uint8_t *buf = (const uint8_t *)(uintptr_t)cq->buf;
    const uint32_t ncqe = cq->ncqe, mask = ncqe - 1;
    uint32_t ci = cq->ci;
    int n = 0;
    for (; n < max; n++) {
        const uint8_t *c = buf + ((size_t)(ci & mask) << 6);
        uint8_t op_own = mlxd_shared_load(c + MLXD_CQE_OFF_OP_OWN);
        uint8_t opcode = op_own >> MLXD_CQE_OPCODE_SHIFT;
        if (opcode == MLXD_CQE_INVALID || (op_own & MLXD_CQE_OWNER_MASK) != !!(ci & ncqe)) break;
        mlxd_rmb();
        ci++;
        __builtin_prefetch(buf + ((size_t)(ci & mask) << 6));   /* the next CQE (survey A.12) */
        struct mlxd_completion *w = &out[n];
        uint32_t sop = mlxd_load_be32(c + MLXD_CQE_OFF_SOP_DROP_QPN);
        uint32_t qpn = sop & MLXD_QPN_MASK;
        uint16_t wc = mlxd_cqe_wqe_counter(c);
        struct mlxd_qp *qp = cqe_qp(cq, c, qpn);
        w->qp = qp;
        w->qpn = qpn;
        w->wqe_counter = wc;
        w->cqe_opcode = opcode;
        w->timestamp = mlxd_cqe_timestamp(c);
        w->flags = (op_own >> MLXD_CQE_SE_SHIFT) & 1 ? MLXD_WC_SOLICITED : 0;
        w->imm = 0;
        w->syndrome = w->vendor_syndrome = 0;
        w->hw_drops = 0;
        w->wqe_opcode = 0;
        w->reserved = 0;
        w->byte_len = 0;
        w->status = MLXD_WC_SUCCESS;
        w->wr_id = wc;
        switch (opcode) {
        case MLXD_CQE_REQ: {
            w->wqe_opcode = (uint8_t)(sop >> 24);
            w->opcode = req_opcode(w->wqe_opcode);
            if (w->opcode == MLXD_WC_RDMA_READ) w->byte_len = mlxd_cqe_byte_cnt(c);
            if (qp && qp->sq_wrid) {
                uint32_t idx = wc & (qp->sq_wqebbs - 1);
                w->wr_id = qp->sq_wrid[idx];
                atomic_store_explicit(&qp->sq_ci, qp->sq_next[idx], memory_order_release);
            }
            break;
        }
        case MLXD_CQE_RESP_WR_IMM:
        case MLXD_CQE_RESP_SEND:
        case MLXD_CQE_RESP_SEND_IMM:
        case MLXD_CQE_RESP_SEND_INV:
            w->opcode = opcode == MLXD_CQE_RESP_WR_IMM ? MLXD_WC_RECV_RDMA_WITH_IMM : MLXD_WC_RECV;
            w->byte_len = mlxd_cqe_byte_cnt(c);
            w->hw_drops = (uint8_t)(sop >> 24);
            if (opcode == MLXD_CQE_RESP_WR_IMM || opcode == MLXD_CQE_RESP_SEND_IMM) {
                w->imm = mlxd_load_be32(c + MLXD_CQE_OFF_IMM_INVAL_PKEY);
                w->flags |= MLXD_WC_WITH_IMM;
            }
            if (qp && qp->rq_wrid) {
                w->wr_id = qp->rq_wrid[wc & (qp->rq_wqe_cnt - 1)];
                atomic_store_explicit(&qp->rq_ci, atomic_load_explicit(&qp->rq_ci, memory_order_relaxed) + 1,
                                      memory_order_release);
            }
            break;
        case MLXD_CQE_REQ_ERR:
        case MLXD_CQE_RESP_ERR:
            w->syndrome = c[MLXD_ERR_CQE_OFF_SYNDROME];
            w->vendor_syndrome = c[MLXD_ERR_CQE_OFF_VENDOR_SYND];
            w->status = syndrome_status[w->syndrome];
            w->wqe_opcode = (uint8_t)(sop >> 24);
            if (opcode == MLXD_CQE_REQ_ERR) {
                w->opcode = req_opcode(w->wqe_opcode);
                if (qp && qp->sq_wrid) {
                    uint32_t idx = wc & (qp->sq_wqebbs - 1);
                    w->wr_id = qp->sq_wrid[idx];
                    atomic_store_explicit(&qp->sq_ci, qp->sq_next[idx], memory_order_release);
                }
            } else {
                w->opcode = MLXD_WC_RECV;
                if (qp && qp->rq_wrid) {
                    w->wr_id = qp->rq_wrid[wc & (qp->rq_wqe_cnt - 1)];
                    atomic_store_explicit(&qp->rq_ci, atomic_load_explicit(&qp->rq_ci, memory_order_relaxed) + 1,
                                          memory_order_release);
                }
            }
            break;
        default:                          /* RESIZE_CQ, NO_PACKET, SIG_ERR: not expected here */
            w->opcode = MLXD_WC_NOP;
            w->status = 19;               /* IBV_WC_GENERAL_ERR */
            break;
        }
    }
    if (n) {
        cq->ci = ci;
        mlxd_wmb();                       /* CQE reads before the slots are handed back */
        mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32(ci & MLXD_CQ_CI_MASK));
    }
    return n;
}

int mlxd_cq_arm(struct mlxd_cq *cq, bool solicited_only)
{
    if (mlxd_unlikely(!cq || cq->state != OBJ_LIVE || !cq->events))
        return mlxd_err(EINVAL, "mlxd_cq_arm: invalid or destroyed CQ, or a CQ created without events");
    uint32_t sn = atomic_load_explicit(&cq->arm_sn, memory_order_relaxed) & MLXD_CQ_ARM_SN_MASK;
    uint32_t word = sn << MLXD_CQ_ARM_SN_SHIFT |
                    (solicited_only ? MLXD_CQ_DB_REQ_NOT_SOL : MLXD_CQ_DB_REQ_NOT) |
                    (cq->ci & MLXD_CQ_CI_MASK);
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_ARM_DB], htobe32(word));
    mlxd_wc_start();
    mlxd_shared_store(cq->arm_db, htobe64((uint64_t)word << 32 | cq->cqn));
    mlxd_wc_flush();
    return 0;
}
