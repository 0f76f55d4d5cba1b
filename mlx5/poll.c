/* poll.c: the completion hot path.  CQE layout and ownership: struct mlx5_cqe64 /
 * struct mlx5_err_cqe, MLX5_CQE_OWNER_MASK, MLX5_CQE_INVALID (infiniband/mlx5dv.h); the consumer
 * index doorbell record as rdma-core's providers/mlx5/cq.c (update_cons_index) writes it.  No
 * system call, lock, allocation or division.
 *
 * Shape (docs/performance.md, issue 7):
 *   - mlxd_cq_poll is inline in mlxd_mlx5.h: it tests the ownership of the CQE at ci and
 *     returns 0 when the CQ is empty, without a call, a barrier or a saved register;
 *   - mlxd__cq_poll_ready (here) consumes the ready CQEs: a batch (poll_batch) counts the
 *     consecutive CQEs the software owns (owner bytes only), issues ONE read barrier, then
 *     decodes them all; a batch of one (max 1) skips the count; the consumer-index doorbell
 *     record is written once per batch (and at a change of QP inside a batch when the earlier
 *     QP's run freed ring slots);
 *   - the hot path: receive completions of the CQ's hot QP (the QP of the previous batch's
 *     last run, a receiver's only QP) are decoded with no QP lookup and no accounting per
 *     CQE (the receives completed are the CQEs decoded); the first other CQE hands the rest
 *     of the batch to the general path (poll_general), which takes any QP, opcode or error;
 *   - a ring with no QP table (a detached ring: replay, mlxd_cq_create_detached; issue 16)
 *     has no hot QP: its receive completions take the same decoding with qp NULL and wr_id the
 *     wqe_counter (what the general path gives them), so it costs what the hot path costs;
 *     a recorded CQ (mlx5/record.c) takes the general path, where the recorder copies;
 *   - in the general path the QP of a run of CQEs is looked up once (user index ->
 *     nic->qp_table, QPN checked) and its wr_id table, mask and receive count stay in
 *     registers; the QP's rq_ci / sq_ci are published once per run, not once per CQE, and
 *     only after the CQ's doorbell record has handed the run's CQE slots back (struct release:
 *     why a CQ as deep as its rings suffices);
 *   - the general path reads a CQE's 8-byte tail (sop_drop_qpn, wqe_counter, signature,
 *     op_own) once, byte-swapped, and takes the QPN, wqe_counter and opcode from that word;
 *     the hot path loads op_own, wqe_counter and sop_drop_qpn by themselves and compares
 *     sop_drop_qpn whole, big-endian, with the QPN and a hw_drops byte of 0 (a CQE after drops
 *     takes the general path; fewer instructions, issue 18); then the timestamp, imm and
 *     byte_cnt (srqn_uidx only when the QP changes); flags_rqpn (source QPN, GRH) only for a
 *     UD QP or a CQE of no known QP (reads_src), so a UD QP is never the hot QP;
 *   - each responder completion is written with six 8-byte stores and two 4-byte ones
 *     (byte_len, imm), its op_own-dependent words from four tables indexed by op_own - 0x10;
 *     error CQEs and rare opcodes go to an out-of-line function, so the common path has no
 *     per-opcode branch but one.
 */
#define MLXD__NO_INLINE_POLL 1      /* this file defines the mlxd_cq_poll symbol itself */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include "barrier.h"
#include "cqe_owner.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_cqe.h"
#include "mlxd_error.h"
#include "record.h"

/* The inline test in mlxd_mlx5.h reads struct mlxd_cq through mlxd__cq_head. */
_Static_assert(offsetof(struct mlxd_cq, buf) == offsetof(mlxd__cq_head, buf), "cq head: buf");
_Static_assert(offsetof(struct mlxd_cq, ci) == offsetof(mlxd__cq_head, ci), "cq head: ci");
_Static_assert(offsetof(struct mlxd_cq, ncqe) == offsetof(mlxd__cq_head, ncqe), "cq head: ncqe");
_Static_assert(offsetof(struct mlxd_cq, state) == offsetof(mlxd__cq_head, state), "cq head: state");
_Static_assert(sizeof(((struct mlxd_cq *)0)->ci) == 4 && sizeof(((struct mlxd_cq *)0)->ncqe) == 4 &&
               sizeof(((struct mlxd_cq *)0)->state) == 4, "cq head: widths");
_Static_assert(MLXD__CQ_LIVE == OBJ_LIVE, "cq head: live");
/* The 8-byte words of a completion (the public layout of struct mlxd_completion). */
_Static_assert(sizeof(struct mlxd_completion) == 56, "completion: 56 bytes");
_Static_assert(offsetof(struct mlxd_completion, timestamp) == 8 &&
               offsetof(struct mlxd_completion, qp) == 16 &&
               offsetof(struct mlxd_completion, status) == 24 && offsetof(struct mlxd_completion, opcode) == 28 &&
               offsetof(struct mlxd_completion, byte_len) == 32 && offsetof(struct mlxd_completion, imm) == 36 &&
               offsetof(struct mlxd_completion, qpn) == 40 && offsetof(struct mlxd_completion, flags) == 44 &&
               offsetof(struct mlxd_completion, wqe_counter) == 48 &&
               offsetof(struct mlxd_completion, syndrome) == 50 &&
               offsetof(struct mlxd_completion, vendor_syndrome) == 51 &&
               offsetof(struct mlxd_completion, cqe_opcode) == 52 &&
               offsetof(struct mlxd_completion, wqe_opcode) == 53 &&
               offsetof(struct mlxd_completion, hw_drops) == 54 &&
               offsetof(struct mlxd_completion, reserved) == 55, "completion: layout");
_Static_assert(MLXD_WC_SOLICITED == 1u << MLXD_CQE_SE_SHIFT, "SE bit of op_own = MLXD_WC_SOLICITED");

/* Error CQE syndrome -> ibv_wc_status, as libmlx5 maps them (rdma-core providers/mlx5/cq.c,
 * mlx5_handle_error_cqe; MLX5_CQE_SYNDROME_* from mlx5dv.h; enum ibv_wc_status values from
 * infiniband/verbs.h).  Anything else is IBV_WC_GENERAL_ERR (21, MLXD_WC_GENERAL_ERR). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const uint8_t syndrome_status[256] = {
    [0 ... 255] = MLXD_WC_GENERAL_ERR,
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
/* The WQE opcode of a requester CQE (sop_drop_qpn >> 24, MLX5_OPCODE_*) -> enum mlxd_wc_opcode. */
static const uint8_t req_wc_opcode[256] = {
    [0 ... 255] = MLXD_WC_NOP,
    [0x08] = MLXD_WC_RDMA_WRITE, [0x09] = MLXD_WC_RDMA_WRITE,   /* RDMA_WRITE, RDMA_WRITE_IMM */
    [0x0a] = MLXD_WC_SEND, [0x0b] = MLXD_WC_SEND, [0x01] = MLXD_WC_SEND, /* SEND, SEND_IMM, SEND_INVAL */
    [0x10] = MLXD_WC_RDMA_READ,
    [0x11] = MLXD_WC_COMP_SWAP, [0x12] = MLXD_WC_FETCH_ADD,        /* ATOMIC_CS, ATOMIC_FA */
    [0x25] = MLXD_WC_BIND_MW,                                      /* UMR: see umr_wc_opcode */
};
#pragma GCC diagnostic pop

uint32_t mlxd__syndrome_status(uint8_t s) { return syndrome_status[s]; }

/* ---- the completion, written in 8-byte words -------------------------------------------- */

/* Two adjacent 32-bit fields (the first at the lower address) as one 8-byte store. */
static inline void put_2x32(struct mlxd_completion *w, size_t off, uint32_t first, uint32_t second)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v = first | (uint64_t)second << 32;
#else
    uint64_t v = (uint64_t)first << 32 | second;
#endif
    memcpy((char *)w + off, &v, sizeof v);
}

/* The last 8 bytes: wqe_counter, syndrome, vendor_syndrome, cqe_opcode, wqe_opcode, hw_drops,
 * reserved (0). */
static inline void put_tail(struct mlxd_completion *w, uint32_t wqe_counter, uint32_t syndrome, uint32_t vendor,
                            uint32_t cqe_opcode, uint32_t wqe_opcode, uint32_t hw_drops)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v = wqe_counter | syndrome << 16 | vendor << 24 | (uint64_t)cqe_opcode << 32 |
                 (uint64_t)wqe_opcode << 40 | (uint64_t)hw_drops << 48;
#else
    uint64_t v = (uint64_t)wqe_counter << 48 | (uint64_t)syndrome << 40 | (uint64_t)vendor << 32 |
                 cqe_opcode << 24 | wqe_opcode << 16 | hw_drops << 8;
#endif
    memcpy((char *)w + offsetof(struct mlxd_completion, wqe_counter), &v, sizeof v);
}

/* ---- the QP of a CQE --------------------------------------------------------------------- */

/* Out of line, when the user-index lookup found nothing: by QPN (cqe_version 0, rare: a scan).
 * NULL for a detached CQ, a destroyed QP or a QPN of no QP. */
static __attribute__((noinline, cold)) struct mlxd_qp *qp_by_qpn(const struct mlxd_cq *cq, uint32_t qpn)
{
    if (!cq->qp_table) return NULL;
    for (uint32_t i = 0; i < MLXD_MAX_QPS; i++) {
        struct mlxd_qp *qp = __atomic_load_n(&cq->qp_table[i], __ATOMIC_ACQUIRE);
        if (qp && qp->qpn == qpn && qp->state == OBJ_LIVE) return qp;
    }
    return NULL;
}

/* ---- rare CQEs: errors, RESIZE_CQ, NO_PACKET, SIG_ERR ------------------------------------- */

enum side { SIDE_NONE, SIDE_SEND, SIDE_RECV };

/* Fills status, opcode, byte_len/imm (0), qpn/flags and the tail of w; returns which ring the
 * CQE completes an entry of (wr_id and accounting are the caller's). */
static __attribute__((noinline, cold)) enum side decode_rare(struct mlxd_completion *w, const uint8_t *c,
                                                              uint64_t tail, uint32_t qpn)
{
    uint32_t op_own = (uint8_t)tail, opcode = op_own >> MLXD_CQE_OPCODE_SHIFT;
    uint32_t wqe_op = (uint32_t)(tail >> 56), wc = (uint16_t)(tail >> 16);
    put_2x32(w, offsetof(struct mlxd_completion, byte_len), 0, 0);
    put_2x32(w, offsetof(struct mlxd_completion, qpn), qpn, op_own & MLXD_WC_SOLICITED);
    if (opcode == MLXD_CQE_REQ_ERR || opcode == MLXD_CQE_RESP_ERR) {
        uint32_t synd = c[MLXD_ERR_CQE_OFF_SYNDROME], vendor = c[MLXD_ERR_CQE_OFF_VENDOR_SYND];
        bool req = opcode == MLXD_CQE_REQ_ERR;
        put_2x32(w, offsetof(struct mlxd_completion, status), syndrome_status[synd],
                 req ? req_wc_opcode[wqe_op] : MLXD_WC_RECV);
        put_tail(w, wc, synd, vendor, opcode, wqe_op, 0);
        return req ? SIDE_SEND : SIDE_RECV;
    }
    put_2x32(w, offsetof(struct mlxd_completion, status), MLXD_WC_GENERAL_ERR, MLXD_WC_NOP);
    put_tail(w, wc, 0, 0, opcode, 0, 0);
    return SIDE_NONE;
}

/* A UMR's completion opcode: libmlx5 keeps IBV_WC_BIND_MW or IBV_WC_LOCAL_INV per WQE
 * (sq.wr_data); we read it from the WQE itself, still in the ring until this completion frees
 * it: an invalidation is the UMR that frees a type 2 window (UMR control flags CHECK_QPN, bit 3,
 * and the mkey context's free bit 6: mlx5/post_mw.c). */
static __attribute__((noinline, cold)) uint32_t umr_wc_opcode(const struct mlxd_qp *qp, uint32_t wc)
{
    if (!qp || !qp->sq_wqebbs) return MLXD_WC_BIND_MW;
    const volatile uint8_t *w = qp->sq + ((size_t)(wc & (qp->sq_wqebbs - 1)) << MLXD_SEND_WQE_SHIFT);
    const volatile uint8_t *mkey = qp->sq + ((size_t)((wc + 1) & (qp->sq_wqebbs - 1)) << MLXD_SEND_WQE_SHIFT);
    return (w[MLXD_WQE_CTRL_SIZE] & (1 << 3)) && (mkey[0] & (1 << 6)) ? MLXD_WC_LOCAL_INV : MLXD_WC_BIND_MW;
}

/* A requester CQE (or a requester error's accounting): the wr_id of the WQE; the send ring is
 * freed up to the WQE's end when the run is released (see struct release). */
static inline uint64_t send_done(struct mlxd_qp *qp, uint32_t wc, const uint64_t **sq_next)
{
    if (!qp || !qp->sq_wrid) return wc;
    uint32_t i = wc & (qp->sq_wqebbs - 1);
    *sq_next = &qp->sq_next[i];
    return qp->sq_wrid[i];
}

/* What a run of CQEs of one QP frees in that QP's rings (its receive ring, or the SRQ its
 * receives come from).  It is published only after the CQ's
 * doorbell record has handed the run's CQE slots back to the NIC.  In the other order a poster
 * could reuse a freed WQE or receive slot while the NIC still counts the CQE slot of its
 * completion as occupied, so a CQ exactly as deep as its QPs' rings would overrun (CQ error,
 * the QP to ERR, the rest flushed: seen with one thread posting RC WRITEs while another polls,
 * under TSan).  In this order every entry the NIC can still complete has a free CQE slot
 * whenever the CQ has at least send_depth + recv_depth entries per QP (the sizing rule of
 * ibv_create_cq(3)). */
#define release mlxd__run        /* uverbs/driver.h: shared with mlx5/cqe_mini.c */

static inline void release_rings(const struct release *r)
{
    if (mlxd_unlikely(r->rq_done && r->qp->srq))
        mlxd__srq_free(r->qp->srq, r->rq_done);     /* one update per run, as rq_ci */
    else if (r->rq_done)
        atomic_store_explicit(&r->qp->rq_ci, atomic_load_explicit(&r->qp->rq_ci, memory_order_relaxed) + r->rq_done,
                              memory_order_release);
    if (r->sq_next) atomic_store_explicit(&r->qp->sq_ci, *r->sq_next, memory_order_release);
}

/* A run ended inside a batch (the next CQE is another QP's): the CQE slots up to the run's end
 * go back to the NIC first, then the run's ring slots are freed. */
static __attribute__((noinline)) void release_mid_batch(const struct mlxd_cq *cq, uint32_t consumed,
                                                        struct release r)
{
    mlxd_wmb();                               /* CQE reads before the slots are handed back */
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32((cq->ci + consumed) & MLXD_CQ_CI_MASK));
    release_rings(&r);
}

/* Responder CQEs (opcodes 1..4: MLX5_CQE_RESP_WR_IMM, _SEND, _SEND_IMM, _SEND_INV) are looked
 * up by op_own (opcode, CQE format, SE, owner): index op_own - 0x10 is 0..63 exactly for them,
 * so the range check is the opcode check, and the table holds every word of the completion that
 * depends on op_own alone (each twice: the owner bit changes nothing).  Four arrays, not an
 * array of structs: an entry's words are then loaded from the table's address plus the index
 * times 8 and a constant, with no shift or add per CQE to find the entry.  WR_IMM and SEND_IMM
 * carry an immediate, SEND_INV the rkey it invalidated in the same place. */
struct resp_table {
    uint64_t status_opcode[64]; /* status (0) and opcode: the 8 bytes at offsetof(status) */
    uint64_t flags_hi[64];      /* flags (SOLICITED, WITH_IMM) in the qpn/flags word */
    uint64_t tail[64];          /* cqe_opcode in the tail word (wqe_counter, ..., hw_drops) */
    uint64_t imm_mask[64];      /* 0xffffffff when imm is valid (its low half masks imm) */
};
#define R_OP(j)   (1 + ((j) >> 4))                                   /* CQE opcode of entry j */
#define R_IMM(j)  (R_OP(j) == MLXD_CQE_RESP_WR_IMM || R_OP(j) == MLXD_CQE_RESP_SEND_IMM)
#define R_INV(j)  (R_OP(j) == MLXD_CQE_RESP_SEND_INV)    /* imm: the invalidated rkey */
#define R_WC(j)   (R_OP(j) == MLXD_CQE_RESP_WR_IMM ? MLXD_WC_RECV_RDMA_WITH_IMM : MLXD_WC_RECV)
#define R_FLAGS(j) (((j) & 2 ? MLXD_WC_SOLICITED : 0) | (R_IMM(j) ? MLXD_WC_WITH_IMM : 0) | \
                    (R_INV(j) ? MLXD_WC_WITH_INV : 0))
#define R_MASK(j) (R_IMM(j) || R_INV(j) ? 0xffffffffull : 0)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define R_SO(j)   ((uint64_t)R_WC(j) << 32)
#define R_FL(j)   ((uint64_t)R_FLAGS(j) << 32)
#define R_TL(j)   ((uint64_t)R_OP(j) << 32)
#else
#define R_SO(j)   ((uint64_t)R_WC(j))
#define R_FL(j)   ((uint64_t)R_FLAGS(j))
#define R_TL(j)   ((uint64_t)R_OP(j) << 24)
#endif
#define R8(F, j)  F(j), F(j + 1), F(j + 2), F(j + 3), F(j + 4), F(j + 5), F(j + 6), F(j + 7)
#define R64(F)    { R8(F, 0), R8(F, 8), R8(F, 16), R8(F, 24), R8(F, 32), R8(F, 40), R8(F, 48), R8(F, 56) }
static const struct resp_table resp = { R64(R_SO), R64(R_FL), R64(R_TL), R64(R_MASK) };
#define RESP_OP_OWN_BASE (MLXD_CQE_RESP_WR_IMM << MLXD_CQE_OPCODE_SHIFT)   /* 0x10 */

/* The receive flags that come from the CQE's flags_rqpn (bytes 24..27): MLXD_WC_GRH when its
 * 'g' bits 29:28 are not 0, the source QPN in bits 31:8 (mlxd_mlx5.h).  One load, no branch. */
static inline uint32_t rqpn_flags(const uint8_t *c)
{
    uint32_t fr = mlxd_load_be32(c + MLXD_CQE_OFF_FLAGS_RQPN);
    return (uint32_t)(((fr >> 28) & 3) != 0) * MLXD_WC_GRH | (fr & MLXD_QPN_MASK) << MLXD_WC_SRC_QP_SHIFT;
}

/* The words of a responder completion (success) but wr_id, timestamp and qp, from the CQE and
 * the table entries j = op_own - 0x10.  src: the source QPN and GRH flag are read (a UD QP's
 * receive, or a CQE of no known QP); for other QPs they mean nothing (ibv_poll_cq(3): src_qp
 * and IBV_WC_GRH are valid for UD QPs only) and stay 0, so RC/UC receives skip the load (issue 18).
 * hw: the hw_drops byte (byte 56 of the CQE, the top byte of sop_drop_qpn), as the caller read
 * it. */
static inline __attribute__((always_inline)) void put_resp(struct mlxd_completion *w, const uint8_t *c,
                                                           uint32_t qpn, uint64_t wc, uint32_t j, bool src,
                                                           uint32_t hw)
{
    uint64_t v;
    memcpy((char *)w + offsetof(struct mlxd_completion, status), &resp.status_opcode[j], 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* byte_len and imm as two 4-byte stores: no shift and merge of the two (fewer instructions) */
    const uint32_t byte_len = mlxd_cqe_byte_cnt(c), imm = mlxd_cqe_imm(c) & (uint32_t)resp.imm_mask[j];
    memcpy((char *)w + offsetof(struct mlxd_completion, byte_len), &byte_len, 4);
    memcpy((char *)w + offsetof(struct mlxd_completion, imm), &imm, 4);
    v = qpn | resp.flags_hi[j];
    if (src) v |= (uint64_t)rqpn_flags(c) << 32;
    memcpy((char *)w + offsetof(struct mlxd_completion, qpn), &v, 8);
    /* hw_drops into byte 6 */
    v = wc | (uint64_t)hw << 48 | resp.tail[j];
    memcpy((char *)w + offsetof(struct mlxd_completion, wqe_counter), &v, 8);
#else
    v = (uint64_t)mlxd_cqe_byte_cnt(c) << 32 | (mlxd_cqe_imm(c) & resp.imm_mask[j]);
    memcpy((char *)w + offsetof(struct mlxd_completion, byte_len), &v, 8);
    v = (uint64_t)qpn << 32 | resp.flags_hi[j] | (src ? rqpn_flags(c) : 0);
    memcpy((char *)w + offsetof(struct mlxd_completion, qpn), &v, 8);
    put_tail(w, (uint32_t)wc, 0, 0, c[MLXD_CQE_OFF_OP_OWN] >> MLXD_CQE_OPCODE_SHIFT, 0, hw);
#endif
}

/* Whether the completions of qp carry the source QPN and GRH flag (put_resp): a UD QP's, or
 * those of no known QP (replay: any QP type).  Decided by the QP's type, per run of CQEs. */
static inline bool reads_src(const struct mlxd_qp *qp)
{
    return !qp || qp->type == MLXD_QP_UD;
}

/* ---- the batch ---------------------------------------------------------------------------- */

/* Decodes cnt owned CQEs from c (no ring end in between) into w; w0 is the batch's first
 * completion (w - w0 CQEs of the batch precede c).  The QP of the current run of CQEs (key =
 * its QPN; ~0: none yet), its receive wr_id table and what the run frees (*rel: carried in
 * from the hot path or across the ring's end, and out) are kept in registers. */
static inline __attribute__((always_inline)) void decode_run(const struct mlxd_cq *cq, const uint8_t *c,
                                                             struct mlxd_completion *w, uint32_t cnt,
                                                             const struct mlxd_completion *w0,
                                                             struct release *rel, const bool account)
{
    struct mlxd_qp *qp = rel->qp;
    uint32_t key = qp ? qp->qpn : ~0u, rq_mask = qp ? qp->rq_wqe_cnt - 1 : 0, rq_done = rel->rq_done;
    const uint64_t *rq_wrid = qp ? qp->rq_wrid : NULL, *sq_next = rel->sq_next;
    bool src = reads_src(qp);
    for (const uint8_t *const c_end = c + ((size_t)cnt << 6); c != c_end; c += 64, w++) {
        /* host-order words of the CQE's last 32 bytes: sop_drop_qpn|wqe_counter|signature|op_own
         * (8 bytes at 56) first, then timestamp (48), imm (36), byte_cnt (44), srqn_uidx (32,
         * when the QP changes), each loaded where it is used (short live ranges: no spills) */
        uint64_t tail = mlxd_load_be64(c + MLXD_CQE_OFF_SOP_DROP_QPN);
        uint32_t op_own = (uint8_t)tail;
        uint32_t qpn = (uint32_t)(tail >> 32) & MLXD_QPN_MASK, wc = (uint16_t)(tail >> 16);
        if (mlxd_unlikely(qpn != key)) {
            if (rq_done | (sq_next != NULL))
                release_mid_batch(cq, (uint32_t)(w - w0), (struct release){ qp, rq_done, sq_next });
            /* cqe_version 1: the user index the QP was created with indexes nic->qp_table
             * (cq->qp_table); the QPN confirms it.  With cqe_version 0 the field is an SRQN
             * (0 without SRQ): the QPN check fails, and the QP is found by its QPN. */
            uint32_t uidx = mlxd_cqe_srqn_uidx(c);
            struct mlxd_qp *const *table = cq->qp_table;
            qp = NULL;
            if (mlxd_likely(table && uidx < MLXD_MAX_QPS)) qp = __atomic_load_n(&table[uidx], __ATOMIC_ACQUIRE);
            if (mlxd_unlikely(!qp || qp->qpn != qpn)) qp = qp_by_qpn(cq, qpn);
            key = qpn;
            rq_wrid = qp ? qp->rq_wrid : NULL;
            rq_mask = qp ? qp->rq_wqe_cnt - 1 : 0;
            src = reads_src(qp);
            rq_done = 0;
            sq_next = NULL;
        }
        uint64_t ts = mlxd_load_be64(c + MLXD_CQE_OFF_TIMESTAMP);
        memcpy((char *)w + offsetof(struct mlxd_completion, timestamp), &ts, sizeof ts);
        memcpy((char *)w + offsetof(struct mlxd_completion, qp), &qp, sizeof qp);
        uint64_t wr_id = wc;
        uint32_t ri = op_own - RESP_OP_OWN_BASE;
        if (mlxd_likely(ri < 64)) {                                      /* responder, success */
            put_resp(w, c, qpn, wc, ri, src, (uint32_t)(tail >> 56));
            if (mlxd_likely(rq_wrid != NULL)) {
                wr_id = rq_wrid[wc & rq_mask];
                rq_done++;
            } else if (account && qp && qp->srq) {
                wr_id = mlxd__srq_complete(qp->srq, wc);     /* the general path: SRQ receives */
                rq_done++;                                    /* counted free at the release */
            }
        } else {
            enum side side = SIDE_SEND;
            uint32_t opcode = op_own >> MLXD_CQE_OPCODE_SHIFT;
            if (opcode == MLXD_CQE_REQ) {
                uint32_t top = (uint32_t)(tail >> 56), wop = req_wc_opcode[top];
                if (mlxd_unlikely(top == MLXD_WQE_UMR)) wop = umr_wc_opcode(qp, (uint16_t)(tail >> 16));
                put_2x32(w, offsetof(struct mlxd_completion, status), MLXD_WC_SUCCESS, wop);
                /* READ: the bytes read; atomics: 8 (libmlx5 handle_good_req); else 0 */
                put_2x32(w, offsetof(struct mlxd_completion, byte_len),
                         wop == MLXD_WC_RDMA_READ ? mlxd_cqe_byte_cnt(c)
                         : wop - MLXD_WC_COMP_SWAP <= 1u ? MLXD_ATOMIC_SIZE : 0, 0);
                put_2x32(w, offsetof(struct mlxd_completion, qpn), qpn, op_own & MLXD_WC_SOLICITED);
                put_tail(w, wc, 0, 0, opcode, top, 0);
            } else {
                side = decode_rare(w, c, tail, qpn);
            }
            if (side == SIDE_SEND) {
                wr_id = send_done(qp, wc, &sq_next);
            } else if (side == SIDE_RECV && rq_wrid) {
                wr_id = rq_wrid[wc & rq_mask];
                rq_done++;
            } else if (account && side == SIDE_RECV && qp && qp->srq) {
                wr_id = mlxd__srq_complete(qp->srq, wc);
                rq_done++;
            }
        }
        w->wr_id = wr_id;
    }
    *rel = (struct release){ qp, rq_done, sq_next };
}

/* Step 4 of a batch: hand the n slots back (the consumer index, then its doorbell record,
 * once), then free the ring slots of the last run (struct release).
 * The CQE reads must be done before the NIC may overwrite the slots.  Every value read went
 * into a store to the caller's completions (or decided a branch) before this point; the write
 * barrier orders those stores before the record's (dmb oshst on aarch64; x86-64 keeps stores in
 * order), and a store is never made visible before a load it depends on has been done. */
static inline int hand_back(struct mlxd_cq *cq, uint32_t n, const struct release *rel)
{
    const uint32_t nci = cq->ci + n;
    cq->ci = nci;
    mlxd_wmb();                               /* CQE reads before the slots are handed back */
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32(nci & MLXD_CQ_CI_MASK));
    release_rings(rel);
    return (int)n;
}

/* The hot QP of the next batch: the last run's QP when its receives complete here.  (Not a QP
 * whose receive CQ is another: a CQE of a destroyed QP found in a NIC-wide table under a
 * reused number must not make this CQ remember a QP that mlxd_qp_destroy will not clear.)
 * Not a UD QP: the hot path skips the source QPN (reads_src), so UD receives, rare on a
 * sensor stream, take the general path, which reads it. */
static inline struct mlxd_qp *hot_candidate(const struct mlxd_cq *cq, struct mlxd_qp *qp)
{
    /* a recorded CQ keeps none: every batch takes the general path, where it is recorded; nor
     * does a compressed one: without a hot QP its batches reach the hook to mlx5/cqe_mini.c */
    return qp && qp->rq_wrid && qp->recv_cq == cq && !cq->recorder && !cq->cqe_comp && qp->type != MLXD_QP_UD
           ? qp : NULL;
}

/* The general path of a batch, from its k-th CQE on (the hot path decoded k, all receive
 * completions of `hot`): any QP, opcode and error.  The last run's QP becomes the hot QP of the
 * next batch when it has a receive ring. */
static __attribute__((noinline)) int poll_general(struct mlxd_cq *cq, struct mlxd_completion *out, uint32_t n,
                                                  uint32_t k, struct mlxd_qp *hot)
{
    const uint8_t *c = (const uint8_t *)(uintptr_t)cq->buf + ((size_t)(cq->ci & (cq->ncqe - 1)) << 6);
    if (mlxd_unlikely(cq->recorder != NULL)) mlxd__record_cqes(cq->recorder, c, n);   /* before hand-back */
    /* k CQEs of hot decoded (receives it completed); of a no-QP ring (hot NULL): none */
    struct release rel = { k ? hot : NULL, hot ? k : 0, NULL };
    decode_run(cq, c + ((size_t)k << 6), out + k, n - k, out, &rel, true);
    cq->hot_qp = hot_candidate(cq, rel.qp);
    return hand_back(cq, n, &rel);
}

/* A batch that straddles the end of the ring (rare): n1 CQEs up to the end, n2 from the start. */
static __attribute__((noinline)) int poll_straddle(struct mlxd_cq *cq, struct mlxd_completion *out, uint32_t n1,
                                                   uint32_t n2)
{
    const uint8_t *buf = (const uint8_t *)(uintptr_t)cq->buf;
    mlxd_rmb();                               /* see poll_batch */
    if (mlxd_unlikely(cq->recorder != NULL)) {
        mlxd__record_cqes(cq->recorder, buf + ((size_t)(cq->ci & (cq->ncqe - 1)) << 6), n1);
        mlxd__record_cqes(cq->recorder, buf, n2);
    }
    struct release rel = { NULL, 0, NULL };
    decode_run(cq, buf + ((size_t)(cq->ci & (cq->ncqe - 1)) << 6), out, n1, out, &rel, true);
    decode_run(cq, buf, out + n1, n2, out, &rel, true);
    cq->hot_qp = hot_candidate(cq, rel.qp);
    return hand_back(cq, n1 + n2, &rel);
}

/* ---- for mlx5/cqe_mini.c ----------------------------------------------------------------- */

void mlxd__decode_one(const struct mlxd_cq *cq, const uint8_t *c, struct mlxd_completion *w,
                      struct mlxd__run *run, bool account)
{
    if (account) decode_run(cq, c, w, 1, w, run, true);
    else decode_run(cq, c, w, 1, w, run, false);
}

int mlxd__poll_full(struct mlxd_cq *cq, struct mlxd_completion *out, uint32_t n)
{
    return poll_general(cq, out, n, 0, NULL);
}

void mlxd__release_run(const struct mlxd__run *run) { release_rings(run); }

/* How many 64-byte CQEs lie from c up to e. */
static inline uint32_t cqes_between(const uint8_t *c, const uint8_t *e)
{
    return (uint32_t)((size_t)(e - c) >> 6);
}

/* The hot path: receive completions (success) of the CQ's hot QP, the one of the last run of
 * the previous batch (a receiver's only QP): no QP lookup, no per-opcode branch but the one,
 * and the receives completed are the CQEs decoded.  Decodes the CQEs from c to c_end into w and
 * returns where it stopped: c_end, or the first other one (another QP, a requester, error or
 * rare CQE). */
static inline __attribute__((always_inline)) const uint8_t *decode_hot_as(struct mlxd_qp *qp, const uint8_t *c,
                                                                    const uint8_t *const c_end,
                                                                    struct mlxd_completion **wp, const bool no_qp)
{
    struct mlxd_completion *w = *wp;
    const uint32_t key = no_qp ? 0 : qp->qpn, rq_mask = no_qp ? 0 : qp->rq_wqe_cnt - 1;
    const uint64_t *const rq_wrid = no_qp ? NULL : qp->rq_wrid;
    /* sop_drop_qpn as the CQE holds it (big-endian): compared whole, without a byte swap, with
     * the QP's number and a hw_drops byte (56) of 0, so the completion's hw_drops is 0 without
     * a load; a CQE that reports drops (rare) goes to the general path, which reads it.  op_own
     * and wqe_counter loaded by themselves (no shifts out of one word) */
    const uint32_t key_be = htobe32(key);      /* a QPN has 24 bits: no mask (else: no match) */
    for (; c != c_end; c += 64, w++) {
        uint32_t ri = (uint32_t)c[MLXD_CQE_OFF_OP_OWN] - RESP_OP_OWN_BASE;
        uint32_t sop_be;
        memcpy(&sop_be, c + MLXD_CQE_OFF_SOP_DROP_QPN, 4);
        if (mlxd_unlikely((!no_qp && sop_be != key_be) || ri >= 64)) break;
        const uint64_t wc = mlxd_load_be16(c + MLXD_CQE_OFF_WQE_COUNTER);
        const uint32_t qpn = no_qp ? be32toh(sop_be) & MLXD_QPN_MASK : key;
        uint64_t ts = mlxd_load_be64(c + MLXD_CQE_OFF_TIMESTAMP);
        memcpy((char *)w + offsetof(struct mlxd_completion, timestamp), &ts, sizeof ts);
        memcpy((char *)w + offsetof(struct mlxd_completion, qp), &qp, sizeof qp);
        /* a hot QP is never UD (hot_candidate); its hw_drops is 0 (compared above) */
        put_resp(w, c, qpn, wc, ri, no_qp, no_qp ? c[MLXD_CQE_OFF_SOP_DROP_QPN] : 0);
        w->wr_id = no_qp ? wc : rq_wrid[wc & rq_mask];   /* no QP: the wqe_counter, as decode_run */
    }
    *wp = w;
    return c;
}
#define decode_hot(qp, c, c_end, w) decode_hot_as(qp, c, c_end, w, false)

/* A ring whose CQEs can have no QP: a CQ with no QP table (a detached ring: replay,
 * mlxd_cq_create_detached) finds none for any QPN (qp_by_qpn), so its responder CQEs take the
 * hot path's decoding with qp NULL and wr_id the wqe_counter, no QPN compare and no receive
 * accounting: exactly what decode_run gives them.  Not while recorded: the recorder copies in
 * the general path. */
static inline bool no_qp_ring(const struct mlxd_cq *cq)
{
    return !cq->qp_table && !cq->recorder;
}
#define decode_no_qp(c, c_end, w) decode_hot_as(NULL, c, c_end, w, true)

/* Hands n slots back after a batch that completed no ring entry of any QP (a no-QP ring's). */
static inline int hand_back_no_qp(struct mlxd_cq *cq, uint32_t n)
{
    const uint32_t nci = cq->ci + n;
    cq->ci = nci;
    mlxd_wmb();                               /* CQE reads before the slots are handed back */
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32(nci & MLXD_CQ_CI_MASK));
    return (int)n;
}

/* The hot path (or the no-QP one) of a batch stopped at e, before p, the batch's end, having
 * written the completions up to w: the general path decodes the rest.  The batch's start, its
 * size and out are found again from the CQ and these pointers, so that the hot loop keeps no
 * value live for this rare case (no spill per batch: issue 18). */
static __attribute__((noinline)) int poll_hot_stopped(struct mlxd_cq *cq, struct mlxd_completion *w,
                                                      const uint8_t *e, const uint8_t *p, struct mlxd_qp *hot)
{
    const uint8_t *c = (const uint8_t *)(uintptr_t)cq->buf + ((size_t)(cq->ci & (cq->ncqe - 1)) << 6);
    const uint32_t k = cqes_between(c, e);
    return poll_general(cq, w - k, cqes_between(c, p), k, hot);
}

/* A batch of up to max (> 1) CQEs; the caller saw the one at ci. */
static __attribute__((noinline)) int poll_batch(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    /* The hook of CQE compression (mlx5/cqe_mini.c), before counting: a session's array slots
     * are no CQEs.  One predictable branch per batch on a flag in the CQ's hot cache line. */
    if (mlxd_unlikely(cq->comp)) return mlxd__cq_poll_mini(cq, out, max);
    const uint8_t *buf = (const uint8_t *)(uintptr_t)cq->buf;
    const uint32_t ncqe = cq->ncqe, ci = cq->ci, idx = ci & (ncqe - 1);
    const uint8_t *c = buf + ((size_t)idx << 6);
    /* 1. How many consecutive CQEs are ours: n up to the end of the ring (with the owner
     *    parity of ci's pass), then n2 from its start (a batch that straddles the end: the
     *    parity flips).  The caller saw the one at ci.  A full pass (n + n2 == ncqe) stops by
     *    itself: slot idx then still holds this pass's parity, not the next one's. */
    const uint32_t par = (ci & ncqe) != 0, room = ncqe - idx;
    const uint32_t lim = (uint32_t)max < room ? (uint32_t)max : room;
    const uint8_t *p = c + 64, *const p_end = c + ((size_t)lim << 6);
    while (p != p_end && mlxd__cqe_sw_owned(p, par)) p += 64;
    const uint32_t n = (uint32_t)((size_t)(p - c) >> 6);
    if (mlxd_unlikely(n == room) && n < (uint32_t)max && mlxd__cqe_sw_owned(buf, par ^ 1)) {
        uint32_t n2 = 1;
        while (n + n2 < (uint32_t)max && mlxd__cqe_sw_owned(buf + ((size_t)n2 << 6), par ^ 1)) n2++;
        return poll_straddle(cq, out, n, n2);
    }
    /* 2. One read barrier for the whole batch.  Every owner byte counted above was loaded
     *    before this barrier in program order, and every other field of those CQEs is loaded
     *    after it, so no field load of any of the CQEs can be satisfied before the load that
     *    saw its owner bit (x86-64: lfence; aarch64: dmb oshld orders all earlier loads before
     *    all later ones, unlike an address dependency, which a CPU may speculate past).  This
     *    is the contract of rdma-core's udma_from_device_barrier (util/udma_barrier.h, its
     *    header comment on DMA from the device), applied once to a run of ownership loads as
     *    DPDK's vectorised mlx5 receive does with rte_io_rmb after four owner loads
     *    (drivers/net/mlx5/mlx5_rxtx_vec_sse.h, rxq_cq_process_v).  The owner byte of the CQE
     *    at ci was loaded by the inline
     *    caller, before this call, so before the barrier too. */
    mlxd_rmb();
    /* 3. Decode: the hot path while it can, the general one for the rest.  4. Hand the slots
     *    back, then free the receive slots (struct release: in this order). */
    struct mlxd_qp *hot = cq->hot_qp;
    struct mlxd_completion *w = out;
    if (mlxd_unlikely(!hot)) {
        if (!no_qp_ring(cq)) return poll_general(cq, out, n, 0, NULL);
        const uint8_t *e = decode_no_qp(c, p, &w);
        return mlxd_likely(e == p) ? hand_back_no_qp(cq, n) : poll_hot_stopped(cq, w, e, p, NULL);
    }
    /* where the hot path stopped, compared as a pointer (no count in the common case) */
    const uint8_t *e = decode_hot(hot, c, p, &w);
    if (mlxd_unlikely(e != p)) return poll_hot_stopped(cq, w, e, p, hot);
    const uint32_t nci = cq->ci + n;          /* reloaded: fewer values live across the loop */
    cq->ci = nci;
    mlxd_wmb();                               /* CQE reads before the slots are handed back */
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32(nci & MLXD_CQ_CI_MASK));
    atomic_store_explicit(&hot->rq_ci, atomic_load_explicit(&hot->rq_ci, memory_order_relaxed) + n,
                          memory_order_release);
    return (int)n;
}

/* Called by the inline mlxd_cq_poll when the CQE at ci is the software's.  A batch of one
 * (max 1) has its own straight path: the same steps with no scan and no loop. */
int mlxd__cq_poll_ready(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    if (max > 1) return poll_batch(cq, out, max);
    const uint32_t ci = cq->ci;
    const uint8_t *c = (const uint8_t *)(uintptr_t)cq->buf + ((size_t)(ci & (cq->ncqe - 1)) << 6);
    mlxd_rmb();                               /* see poll_batch */
    struct mlxd_qp *hot = cq->hot_qp;
    if (mlxd_unlikely(!hot)) {
        /* CQE compression: such a CQ never has a hot QP (hot_candidate), so the batch of one
         * pays nothing for the hook */
        if (mlxd_unlikely(cq->comp)) return mlxd__cq_poll_mini(cq, out, 1);
        if (no_qp_ring(cq) && decode_no_qp(c, c + 64, &out) == c + 64) return hand_back_no_qp(cq, 1);
        return poll_general(cq, out, 1, 0, NULL);
    }
    if (mlxd_unlikely(decode_hot(hot, c, c + 64, &out) != c + 64)) return poll_general(cq, out, 1, 0, NULL);
    cq->ci = ci + 1;
    mlxd_wmb();                               /* CQE reads before the slot is handed back */
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32((ci + 1) & MLXD_CQ_CI_MASK));
    atomic_store_explicit(&hot->rq_ci, atomic_load_explicit(&hot->rq_ci, memory_order_relaxed) + 1,
                          memory_order_release);
    return 1;
}

int mlxd__cq_poll_checked(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    if (mlxd_unlikely(!cq || cq->state != OBJ_LIVE || (max > 0 && !out) || max < 0))
        return mlxd_err(EINVAL, "mlxd_cq_poll: invalid or destroyed CQ, out NULL, or max %d below 0", max);
    if (max == 0) return 0;
    return mlxd__cq_poll_inline(cq, out, max);
}

/* The symbol, for function pointers, FFI and binaries built against older headers. */
int (mlxd_cq_poll)(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    return mlxd__cq_poll_inline(cq, out, max);
}

int mlxd_cq_arm(struct mlxd_cq *cq, bool solicited_only)
{
    if (mlxd_unlikely(!cq || cq->state != OBJ_LIVE || !cq->events))
        return mlxd_err(EINVAL, "mlxd_cq_arm: invalid or destroyed CQ, or a CQ created without events");
    uint32_t sn = atomic_load_explicit(&cq->arm_sn, memory_order_relaxed) & MLXD_CQ_ARM_SN_MASK;
    uint32_t word = sn << MLXD_CQ_ARM_SN_SHIFT |
                    (solicited_only ? MLXD_CQ_DB_REQ_NOT_SOL : MLXD_CQ_DB_REQ_NOT) |
                    (cq->ci & MLXD_CQ_CI_MASK);
    mlxd_shared_store(cq->arm_rec, htobe32(word));
    mlxd_wc_start();
    mlxd_shared_store(cq->arm_db, htobe64((uint64_t)word << 32 | cq->cqn));
    mlxd_wc_flush();
    return 0;
}
