/* cqe_mini.c: expanding compressed CQE sessions (CQE compression, issue 18).
 *
 * The layout a ConnectX writes into a CQ created with cqe_comp_en (the "basic" compression
 * layout; sources a user can open):
 *   - struct mlx5_mini_cqe8, MLX5_COMPRESSED (CQE format 3) and MLX5_MINI_CQE_ARRAY_SIZE (8):
 *     the kernel's include/linux/mlx5/device.h (infiniband/mlx5dv.h has only the format enum
 *     MLX5DV_CQE_RES_FORMAT_*); a mini-CQE is 8 bytes: bytes 0..3 rx_hash_result (HASH) or
 *     checksum BE16 + stride_idx BE16 (CSUM, CSUM_STRIDX) or, for requester CQEs, s_wqe_info
 *     (wqe_counter BE16, s_wqe_opcode, reserved); bytes 4..7 byte_cnt BE32;
 *   - the session (DPDK drivers/net/mlx5/mlx5_rx.c mlx5_rx_poll_len and
 *     mlx5_rxtx_vec_sse.h rxq_cq_decompress_v; Linux drivers/net/ethernet/mellanox/mlx5/core/
 *     en_rx.c mlx5e_decompress_cqes_start): the CQE at the consumer index with format 3 is the
 *     title, a full CQE whose fields are those every CQE of the session shares, and whose
 *     byte_cnt is the number N of mini-CQEs; the session takes N ring slots from the title on;
 *     mini-CQE array k (mini-CQEs 8k .. 8k+7) is in slot title + 1 for k = 0 and title + 8k
 *     after; the other slots are holes the NIC leaves unwritten;
 *   - software invalidates the session's slots before handing them back (DPDK writes
 *     MLX5_CQE_INVALIDATE, the kernel the owner of the pass): an array slot's byte 63 is a
 *     byte_cnt byte and a hole keeps the CQE of an older pass, either of which could pass for a
 *     CQE of a later pass.  Here op_own = 0xF0 (MLX5_CQE_INVALID, as the ring starts).
 * Each mini-CQE becomes the completion its full CQE would have given: the title's fields with
 * byte_cnt and the wqe_counter from the mini-CQE (requester) or the title's wqe_counter + i
 * (responder: the receive ring's WQEs complete in order, as mlx5e_decompress_cqe counts them).
 * The hash, checksum and stride index have no field in struct mlxd_completion (a full CQE's are
 * not returned either).  Every completion of a session has the title's timestamp: a mini-CQE
 * has none (DPDK turns compression off when Rx timestamps are wanted for that reason).
 *
 * The consumer index stays at the title until the session's last mini-CQE is returned (as
 * DPDK's), so the doorbell record never hands back a slot still to be read; then the N slots
 * are invalidated, the index moves past them, the record is written and the QP's ring slots are
 * freed (the order of mlx5/poll.c's struct release).
 * A title that cannot start a session is reported, not decoded: fewer than 2 mini-CQEs (array
 * 0 lies in the slot after the title, inside the session), more than the ring holds, or an
 * opcode no session can have (only REQ and the responder opcodes 1..4) -> -EPROTO, nothing
 * consumed.  No system call, lock, allocation or division per CQE. */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "barrier.h"
#include "cqe_owner.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_cqe.h"
#include "mlxd_error.h"

#define MINI_SIZE 8                      /* sizeof(struct mlx5_mini_cqe8) */
#define MINI_PER_ARRAY 8                 /* MLX5_MINI_CQE_ARRAY_SIZE */
#define FORMAT_COMPRESSED 3u             /* MLX5_COMPRESSED */

static inline const uint8_t *slot_at(const struct mlxd_cq *cq, uint32_t i)
{
    return (const uint8_t *)(uintptr_t)cq->buf + ((size_t)(i & (cq->ncqe - 1)) << 6);
}

static inline bool compressed(uint8_t op_own)
{
    return ((op_own >> MLXD_CQE_FORMAT_SHIFT) & MLXD_CQE_FORMAT_MASK) == FORMAT_COMPRESSED;
}

/* Mini-CQE i of the session whose title is at ci: array i / 8 in slot ci + 1 (array 0) or
 * ci + 8 * (i / 8), entry i % 8. */
static inline const uint8_t *mini_at(const struct mlxd_cq *cq, uint32_t ci, uint32_t i)
{
    uint32_t a = i & ~(uint32_t)(MINI_PER_ARRAY - 1);
    return slot_at(cq, ci + (a ? a : 1)) + (size_t)(i & (MINI_PER_ARRAY - 1)) * MINI_SIZE;
}

/* Opens the session whose title is the (owned, read-barriered) CQE c at ci. */
static int open_session(struct mlxd_cq *cq, const uint8_t *c)
{
    const uint32_t n = mlxd_cqe_byte_cnt(c), opcode = c[MLXD_CQE_OFF_OP_OWN] >> MLXD_CQE_OPCODE_SHIFT;
    if (n < 2 || n > cq->ncqe)
        return mlxd_err(EPROTO, "mlxd_cq_poll: CQ 0x%06x: the compressed CQE at index %u announces %u "
                        "mini-CQEs; a session has 2 to %u (the ring's size)", cq->cqn, cq->ci, n, cq->ncqe);
    if (opcode != MLXD_CQE_REQ && (opcode < MLXD_CQE_RESP_WR_IMM || opcode > MLXD_CQE_RESP_SEND_INV))
        return mlxd_err(EPROTO, "mlxd_cq_poll: CQ 0x%06x: the compressed CQE at index %u has opcode %u, "
                        "not a requester or responder completion", cq->cqn, cq->ci, opcode);
    struct mlxd__zip *z = &cq->zip;
    memcpy(z->title, c, sizeof z->title);
    z->title[MLXD_CQE_OFF_OP_OWN] &= (uint8_t)~(MLXD_CQE_FORMAT_MASK << MLXD_CQE_FORMAT_SHIFT);
    z->n = n;
    z->i = 0;
    z->req = opcode == MLXD_CQE_REQ;
    z->wc = mlxd_cqe_wqe_counter(c);
    z->run = (struct mlxd__run){ NULL, 0, NULL };
    if (!z->req) {
        /* the title's own completion, without its SRQ accounting: the template of all */
        struct mlxd_completion t;
        mlxd__decode_one(cq, z->title, &t, &z->run, false);
        z->run.rq_done = 0;
        memcpy(z->tmpl, &t, sizeof z->tmpl);
    }
    return 0;
}

/* Responder mini-CQEs [i, i + k) into w: the template's words with byte_len, wqe_counter and
 * wr_id; array by array (a pointer step per mini-CQE); with_wrid: the QP's receive wr_id table
 * (else its SRQ's, or the wqe_counter with no QP). */
static inline __attribute__((always_inline)) void expand_resp_as(struct mlxd_cq *cq, uint32_t ci, uint32_t i,
                                                                 uint32_t k, struct mlxd_completion *w,
                                                                 const bool with_wrid)
{
    struct mlxd__zip *z = &cq->zip;
    struct mlxd_qp *qp = z->run.qp;
    const uint64_t *const rq_wrid = with_wrid ? qp->rq_wrid : NULL;
    const uint32_t rq_mask = with_wrid ? qp->rq_wqe_cnt - 1 : 0;
    struct mlxd_srq *const srq = !with_wrid && qp ? qp->srq : NULL;
    /* the template's words in registers: timestamp, qp, status/opcode, byte_len/imm, qpn/flags,
     * tail (w could alias cq as far as the compiler knows) */
    const uint64_t t_ts = z->tmpl[1], t_qp = z->tmpl[2], t_so = z->tmpl[3], t_qf = z->tmpl[5];
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t t_imm = z->tmpl[4] & ~0xffffffffull, t_tail = z->tmpl[6] & ~0xffffull;
#else
    const uint64_t t_imm = z->tmpl[4] & 0xffffffffull, t_tail = z->tmpl[6] & ~(0xffffull << 48);
#endif
    uint32_t wc = (uint32_t)z->wc + i;
    for (const uint32_t e = i + k; i != e;) {
        const uint32_t a = i & ~(uint32_t)(MINI_PER_ARRAY - 1), stop = a + MINI_PER_ARRAY < e ? a + MINI_PER_ARRAY : e;
        const uint8_t *m = mini_at(cq, ci, i);
        for (; i != stop; i++, wc++, w++, m += MINI_SIZE) {
            uint64_t v;
            memcpy((char *)w + offsetof(struct mlxd_completion, timestamp), &t_ts, 8);
            memcpy((char *)w + offsetof(struct mlxd_completion, qp), &t_qp, 8);
            memcpy((char *)w + offsetof(struct mlxd_completion, status), &t_so, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            v = t_imm | mlxd_load_be32(m + 4);
#else
            v = t_imm | (uint64_t)mlxd_load_be32(m + 4) << 32;
#endif
            memcpy((char *)w + offsetof(struct mlxd_completion, byte_len), &v, 8);
            memcpy((char *)w + offsetof(struct mlxd_completion, qpn), &t_qf, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            v = t_tail | (uint16_t)wc;
#else
            v = t_tail | (uint64_t)(uint16_t)wc << 48;
#endif
            memcpy((char *)w + offsetof(struct mlxd_completion, wqe_counter), &v, 8);
            if (with_wrid) w->wr_id = rq_wrid[wc & rq_mask];
            else w->wr_id = srq ? mlxd__srq_complete(srq, (uint16_t)wc) : (uint16_t)wc;
        }
    }
    if (with_wrid) z->run.rq_done += k;
}

static void expand_resp(struct mlxd_cq *cq, uint32_t ci, uint32_t i, uint32_t k, struct mlxd_completion *w)
{
    const struct mlxd_qp *qp = cq->zip.run.qp;
    if (mlxd_likely(qp && qp->rq_wrid)) expand_resp_as(cq, ci, i, k, w, true);
    else expand_resp_as(cq, ci, i, k, w, false);
}

/* Requester mini-CQEs (s_wqe_info): each one's bytes patched into the title, decoded as a full
 * requester CQE (opcode, byte_len rules and send ring accounting of the general path). */
static void expand_req(struct mlxd_cq *cq, uint32_t ci, uint32_t i, uint32_t k, struct mlxd_completion *w)
{
    struct mlxd__zip *z = &cq->zip;
    for (uint32_t e = i + k; i != e; i++, w++) {
        const uint8_t *m = mini_at(cq, ci, i);
        memcpy(z->title + MLXD_CQE_OFF_WQE_COUNTER, m, 2);          /* wqe_counter BE16 */
        z->title[MLXD_CQE_OFF_SOP_DROP_QPN] = m[2];                  /* the WQE's opcode */
        memcpy(z->title + MLXD_CQE_OFF_BYTE_CNT, m + 4, 4);          /* byte_cnt BE32 */
        mlxd__decode_one(cq, z->title, w, &z->run, true);
    }
}

/* The session's last mini-CQE was returned: invalidate its slots, move the consumer index past
 * them, hand them back, then free the QP's ring slots. */
static void close_session(struct mlxd_cq *cq)
{
    struct mlxd__zip *z = &cq->zip;
    const uint32_t ci = cq->ci, n = z->n;
    /* op_own of each slot, up to the ring's end and on from its start (a session may straddle) */
    const uint32_t idx = ci & (cq->ncqe - 1), n1 = n < cq->ncqe - idx ? n : cq->ncqe - idx;
    volatile uint8_t *p = cq->buf + ((size_t)idx << 6) + MLXD_CQE_OFF_OP_OWN;
    for (volatile uint8_t *const end = p + ((size_t)n1 << 6); p != end; p += 64)
        mlxd_shared_store(p, (uint8_t)MLXD_CQE_OP_OWN_INIT);
    p = cq->buf + MLXD_CQE_OFF_OP_OWN;
    for (volatile uint8_t *const end = p + ((size_t)(n - n1) << 6); p != end; p += 64)
        mlxd_shared_store(p, (uint8_t)MLXD_CQE_OP_OWN_INIT);
    cq->ci = ci + n;
    z->n = 0;
    mlxd_wmb();                               /* CQE reads and invalidations before the hand-back */
    mlxd_shared_store(&cq->dbrec[MLXD_CQ_SET_CI], htobe32(cq->ci & MLXD_CQ_CI_MASK));
    mlxd__release_run(&z->run);
}

/* Full CQEs from ci on, up to max and the ring's end, stopping at a compressed one. */
static uint32_t full_run(const struct mlxd_cq *cq, uint32_t max)
{
    const uint32_t ci = cq->ci, par = (ci & cq->ncqe) != 0, room = cq->ncqe - (ci & (cq->ncqe - 1));
    const uint32_t lim = max < room ? max : room;
    uint32_t k = 0;
    while (k < lim) {
        const uint8_t *c = slot_at(cq, ci + k);
        if (!mlxd__cqe_sw_owned(c, par) || compressed(mlxd_cqe_u8(c, MLXD_CQE_OFF_OP_OWN))) break;
        k++;
    }
    return k;
}

int mlxd__cq_poll_mini(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    uint32_t got = 0;
    while (got < (uint32_t)max) {
        struct mlxd__zip *z = &cq->zip;
        if (!z->n) {
            const uint32_t ci = cq->ci;
            const uint8_t *c = slot_at(cq, ci);
            if (!mlxd__cqe_sw_owned(c, (ci & cq->ncqe) != 0)) break;
            if (!compressed(mlxd_cqe_u8(c, MLXD_CQE_OFF_OP_OWN))) {
                uint32_t k = full_run(cq, (uint32_t)max - got);
                mlxd_rmb();                   /* owner bytes before the other fields (poll.c) */
                got += (uint32_t)mlxd__poll_full(cq, out + got, k);
                continue;
            }
            mlxd_rmb();                       /* the title's owner byte before its fields */
            int rc = open_session(cq, c);
            if (rc) return got ? (int)got : rc;   /* reported by the next call, if not now */
        }
        const uint32_t left = z->n - z->i, want = (uint32_t)max - got, k = left < want ? left : want;
        if (z->req) expand_req(cq, cq->ci, z->i, k, out + got);
        else expand_resp(cq, cq->ci, z->i, k, out + got);
        z->i += k;
        got += k;
        if (z->i == z->n) close_session(cq);
    }
    return (int)got;
}

void mlxd__cq_mini_forget_qp(struct mlxd_cq *cq, const struct mlxd_qp *qp)
{
    if (!cq || !cq->zip.n || cq->zip.run.qp != qp) return;
    /* the rest of the session completes for no QP (wr_id = wqe_counter), as a CQE of a
     * destroyed QP does in the general path; what it would free belongs to nobody now */
    struct mlxd_qp *none = NULL;
    cq->zip.run = (struct mlxd__run){ NULL, 0, NULL };
    memcpy(&cq->zip.tmpl[2], &none, sizeof none);
}
