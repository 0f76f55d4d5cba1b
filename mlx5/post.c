/* post.c: the send and receive hot paths: WQE builders, the doorbell and BlueFlame, receives in
 * batches.  No system call, lock, allocation or division (see mlxd_mlx5.h). */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "barrier.h"
#include "bf_copy.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"
#include "wqe.h"

const uint8_t mlxd__wqe_opcode[MLXD_OP_LOCAL_INV + 1] = {
    [MLXD_OP_NOP] = 0x00,        /* MLX5_OPCODE_NOP */
    [MLXD_OP_WRITE] = 0x08,      /* MLX5_OPCODE_RDMA_WRITE */
    [MLXD_OP_WRITE_IMM] = 0x09,  /* MLX5_OPCODE_RDMA_WRITE_IMM */
    [MLXD_OP_SEND] = 0x0a,       /* MLX5_OPCODE_SEND */
    [MLXD_OP_SEND_IMM] = 0x0b,   /* MLX5_OPCODE_SEND_IMM */
    [MLXD_OP_READ] = 0x10,       /* MLX5_OPCODE_RDMA_READ */
    [MLXD_OP_CMP_SWAP] = 0x11,   /* MLX5_OPCODE_ATOMIC_CS */
    [MLXD_OP_FETCH_ADD] = 0x12,  /* MLX5_OPCODE_ATOMIC_FA */
    [MLXD_OP_SEND_INV] = 0x01,   /* MLX5_OPCODE_SEND_INVAL */
    [MLXD_OP_BIND_MW] = 0x25,    /* MLX5_OPCODE_UMR (mlx5/post_mw.c) */
    [MLXD_OP_LOCAL_INV] = 0x25,  /* MLX5_OPCODE_UMR */
};

static inline bool op_is_atomic(uint32_t op) { return op == MLXD_OP_CMP_SWAP || op == MLXD_OP_FETCH_ADD; }
static inline bool op_has_raddr(uint32_t op)
{
    return op == MLXD_OP_WRITE || op == MLXD_OP_WRITE_IMM || op == MLXD_OP_READ || op_is_atomic(op);
}

#define KNOWN_FLAGS (MLXD_SIGNALED | MLXD_SOLICITED | MLXD_FENCE | MLXD_INLINE)

/* The data of an entry: num_local entries of sgl, or the one in local. */
static inline const struct mlxd_local *entry_sges(const struct mlxd_entry *e)
{
    return e->sgl ? e->sgl : &e->local;
}

uint32_t mlxd__wqe_bytes(const struct mlxd_entry *e, uint32_t max_inline, uint32_t max_sge, bool uc)
{
    uint32_t n = e->num_local;
    if (e->op > MLXD_OP_SEND_INV || (e->flags & ~KNOWN_FLAGS) || n > max_sge || (n > 1 && !e->sgl))
        return 0;
    if (e->op == MLXD_OP_SEND_INV && uc) return 0;      /* RC only (IB spec table 38) */
    const struct mlxd_local *l = entry_sges(e);
    if (op_is_atomic(e->op))            /* ctrl, raddr, atomic, one 8-byte data segment */
        return uc || (e->flags & MLXD_INLINE) || n != 1 || l[0].length != MLXD_ATOMIC_SIZE ? 0
               : MLXD_WQE_CTRL_SIZE + MLXD_WQE_RADDR_SIZE + MLXD_WQE_ATOMIC_SIZE + MLXD_WQE_DATA_SIZE;
    /* a data segment's byte_count has 31 bits: bit 31 marks an inline segment
     * (MLX5_INLINE_SEG, mlx5dv.h), so a larger length would be read as one; byte_count 0 means
     * 2 GiB to the NIC, so a zero-length entry carries no segment (libmlx5 skips them too) */
    uint32_t segs = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (l[i].length > 0x7fffffffu) return 0;
        segs += l[i].length != 0;
    }
    uint32_t bytes = MLXD_WQE_CTRL_SIZE;
    if (e->op == MLXD_OP_NOP) return bytes;
    if (e->op == MLXD_OP_READ && (uc || (e->flags & MLXD_INLINE) || segs == 0)) return 0;
    if (op_has_raddr(e->op)) bytes += MLXD_WQE_RADDR_SIZE;
    if (e->flags & MLXD_INLINE) {
        if (n > 1 || e->local.length > max_inline || (e->local.length && !e->local.addr)) return 0;
        if (n && e->local.length)
            bytes += (MLXD_WQE_INL_HDR_SIZE + e->local.length + 15) & ~15u;
    } else {
        bytes += segs * MLXD_WQE_DATA_SIZE;
    }
    return bytes;
}

static inline void st32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static inline void st64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }

uint32_t mlxd__wqe_build(volatile uint8_t *sqv, uint32_t sq_wqebbs, uint32_t pi, uint32_t qpn,
                         const struct mlxd_entry *e, uint32_t bytes, const uint8_t *av)
{
    uint8_t *sq = (uint8_t *)(uintptr_t)sqv;
    uint32_t ring_mask = sq_wqebbs * MLXD_SEND_WQE_BB - 1;     /* bytes - 1 */
    uint32_t base = (pi & (sq_wqebbs - 1)) << MLXD_SEND_WQE_SHIFT;
    uint8_t *ctrl = sq + base;
    uint32_t ds = bytes >> 4;
    uint32_t nbb = (bytes + MLXD_SEND_WQE_BB - 1) >> MLXD_SEND_WQE_SHIFT;
    /* ctrl: opmod_idx_opcode, qpn_ds, signature 0, dci 0, fm_ce_se, imm */
    st32(ctrl + MLXD_WQE_CTRL_OFF_OPMOD_IDX_OPCODE, ((pi & 0xffff) << 8) | mlxd__wqe_opcode[e->op]);
    st32(ctrl + MLXD_WQE_CTRL_OFF_QPN_DS, (qpn << 8) | ds);
    ctrl[8] = 0; ctrl[9] = 0; ctrl[10] = 0;
    ctrl[MLXD_WQE_CTRL_OFF_FM_CE_SE] = (uint8_t)(((e->flags & MLXD_SIGNALED) ? MLXD_WQE_CTRL_CQ_UPDATE : 0) |
                                                 ((e->flags & MLXD_SOLICITED) ? MLXD_WQE_CTRL_SOLICITED : 0) |
                                                 ((e->flags & MLXD_FENCE) ? MLXD_WQE_CTRL_FENCE : 0));
    st32(ctrl + MLXD_WQE_CTRL_OFF_IMM, (e->op == MLXD_OP_WRITE_IMM || e->op == MLXD_OP_SEND_IMM) ? e->imm
                                       : e->op == MLXD_OP_SEND_INV ? e->invalidate_rkey : 0);
    uint32_t off = MLXD_WQE_CTRL_SIZE;
    if (e->op == MLXD_OP_NOP) return nbb;
    if (av) {                                            /* UD: the datagram segment */
        mlxd__ud_put_av(sq, ring_mask, base + off, e, av);
        off += MLXD_WQE_AV_SIZE;
    }
    if (op_has_raddr(e->op)) {
        uint8_t *r = sq + ((base + off) & ring_mask);   /* 16-B segments never straddle the end */
        st64(r + MLXD_WQE_RADDR_OFF_RADDR, e->remote.addr);
        st32(r + MLXD_WQE_RADDR_OFF_RKEY, e->remote.rkey);
        st32(r + 12, 0);
        off += MLXD_WQE_RADDR_SIZE;
    }
    if (op_is_atomic(e->op)) {
        uint8_t *a = sq + ((base + off) & ring_mask);
        st64(a + MLXD_WQE_ATOMIC_OFF_SWAP_ADD, e->swap_add);
        st64(a + MLXD_WQE_ATOMIC_OFF_COMPARE, e->op == MLXD_OP_CMP_SWAP ? e->compare : 0);
        off += MLXD_WQE_ATOMIC_SIZE;
    }
    if (!(e->flags & MLXD_INLINE)) {
        const struct mlxd_local *l = entry_sges(e);
        for (uint32_t i = 0; i < e->num_local; i++) {
            if (!l[i].length) continue;
            uint8_t *d = sq + ((base + off) & ring_mask);
            st32(d + MLXD_WQE_DATA_OFF_BYTE_COUNT, l[i].length);
            st32(d + MLXD_WQE_DATA_OFF_LKEY, l[i].lkey);
            st64(d + MLXD_WQE_DATA_OFF_ADDR, l[i].addr);
            off += MLXD_WQE_DATA_SIZE;
        }
        return nbb;
    }
    if (!e->num_local || !e->local.length) return nbb;
    {
        uint32_t len = e->local.length;
        uint8_t *h = sq + ((base + off) & ring_mask);
        st32(h, len | MLXD_INLINE_SEG);
        off += MLXD_WQE_INL_HDR_SIZE;
        const uint8_t *src = (const uint8_t *)(uintptr_t)e->local.addr;
        uint32_t padded = ((MLXD_WQE_INL_HDR_SIZE + len + 15) & ~15u) - MLXD_WQE_INL_HDR_SIZE;
        /* data (and zero padding to 16 B) may wrap from the ring's end to its start */
        uint32_t pos = (base + off) & ring_mask;
        uint32_t first = ring_mask + 1 - pos;
        if (first >= padded) {
            memcpy(sq + pos, src, len);
            memset(sq + pos + len, 0, padded - len);
        } else {
            uint32_t a = first < len ? first : len;
            memcpy(sq + pos, src, a);
            if (a < first) memset(sq + pos + a, 0, first - a);
            uint32_t rest = len - a;
            memcpy(sq, src + a, rest);
            memset(sq + rest, 0, padded - first - rest);
        }
    }
    return nbb;
}

/* Full when the WQEBBs run out, or when send_depth entries are outstanding: the CQ was sized
 * for send_depth completions, and small WQEs would fit more into the ring. */
static inline bool ring_full(const struct mlxd_qp *qp, uint32_t nbb)
{
    uint64_t ci = atomic_load_explicit(&qp->sq_ci, memory_order_acquire);
    return qp->sq_pi + nbb - (uint32_t)ci > qp->sq_wqebbs || qp->sq_posted - (uint32_t)(ci >> 32) >= qp->sq_depth;
}

/* The bookkeeping of a WQE written at pi: its wr_id and where the ring is free up to after it;
 * the initiator small fence the WQE after a memory window bind carries (libmlx5 next_fence).
 * The fence mode is one 3-bit value (bits 7:5), not flags: an entry that asks for FENCE (4<<5)
 * keeps it, the pending small fence (1<<5) goes only into an entry with none; ORing them would
 * give 5, which no fence mode names (mlx5dv.h MLX5_WQE_CTRL_*; rdma-core providers/mlx5/qp.c
 * picks one the same way). */
static inline void posted(struct mlxd_qp *qp, const struct mlxd_entry *e, uint32_t pi, uint32_t nbb)
{
    uint32_t idx = pi & (qp->sq_wqebbs - 1);
    if (mlxd_unlikely(qp->next_fence)) {
        volatile uint8_t *fm = qp->sq + ((size_t)idx << MLXD_SEND_WQE_SHIFT) + MLXD_WQE_CTRL_OFF_FM_CE_SE;
        if (!(*fm & MLXD_WQE_CTRL_FM_MASK)) *fm |= qp->next_fence;
        qp->next_fence = 0;
    }
    qp->sq_wrid[idx] = e->wr_id;
    qp->sq_posted++;
    qp->sq_next[idx] = (uint64_t)qp->sq_posted << 32 | (uint32_t)(pi + nbb);
    qp->last_pi = pi;
    qp->last_nbb = nbb;
    qp->pending++;
    qp->sq_pi = pi + nbb;
}

static __attribute__((noinline)) int post_umr(struct mlxd_qp *qp, const struct mlxd_entry *e)
{
    int bytes = mlxd__umr_bytes(qp, e);
    if (bytes < 0) return bytes;
    uint32_t nbb = (uint32_t)bytes >> MLXD_SEND_WQE_SHIFT, pi = qp->sq_pi;
    if (ring_full(qp, nbb)) return -EAGAIN;
    mlxd__umr_build(qp, pi, e, (uint32_t)bytes);
    posted(qp, e, pi, nbb);
    mlxd__umr_posted(e);
    qp->next_fence = MLXD_WQE_CTRL_INITIATOR_SMALL_FENCE;
    return 0;
}

int mlxd_qp_post(struct mlxd_qp *qp, const struct mlxd_entry *e)
{
    if (mlxd_unlikely(!qp || qp->state != OBJ_LIVE || !qp->sq_wqebbs || !e))
        return mlxd_err(EINVAL, "mlxd_qp_post: invalid/destroyed QP, a QP without a send ring, or entry NULL");
    if (mlxd_unlikely(e->op == MLXD_OP_BIND_MW || e->op == MLXD_OP_LOCAL_INV)) return post_umr(qp, e);
    uint32_t bytes = mlxd__wqe_bytes(e, qp->max_inline, qp->max_send_sge, qp->type == MLXD_QP_UC);
    if (mlxd_unlikely(!bytes))
        return mlxd_err(EINVAL, "mlxd_qp_post: QP 0x%x: malformed entry (op %u, flags 0x%x, num_local %u "
                        "of max_send_sge %u%s, length %u, max_inline %u%s)", qp->qpn, e->op, e->flags,
                        e->num_local, qp->max_send_sge, e->num_local > 1 && !e->sgl ? " with sgl NULL" : "",
                        entry_sges(e)->length, qp->max_inline,
                        qp->type == MLXD_QP_UC ? ", UC has no READ, atomics or SEND_INV"
                        : e->op >= MLXD_OP_CMP_SWAP ? ", an atomic needs one 8-byte local buffer, not inline" : "");
    const uint8_t *av = NULL;
    if (qp->type == MLXD_QP_UD) {        /* + the datagram segment (mlx5/post_ud.c) */
        int extra = mlxd__ud_entry_check(qp, e);
        if (mlxd_unlikely(extra < 0)) return -EINVAL;
        bytes += (uint32_t)extra;
        av = extra ? e->ah->av : NULL;   /* a NOP carries no datagram segment (and may have no AH) */
    }
    uint32_t nbb = (bytes + MLXD_SEND_WQE_BB - 1) >> MLXD_SEND_WQE_SHIFT;
    if (mlxd_unlikely(ring_full(qp, nbb))) return -EAGAIN;
    uint32_t pi = qp->sq_pi;
    mlxd__wqe_build(qp->sq, qp->sq_wqebbs, pi, qp->qpn, e, bytes, av);
    posted(qp, e, pi, nbb);
    return 0;
}

int mlxd_qp_ring(struct mlxd_qp *qp)
{
    if (mlxd_unlikely(!qp || qp->state != OBJ_LIVE || !qp->sq_wqebbs))
        return mlxd_err(EINVAL, "mlxd_qp_ring: invalid/destroyed QP or a QP without a send ring");
    if (!qp->pending) return 0;
    mlxd_wmb();
    mlxd_shared_store(&qp->dbrec[MLXD_SND_DBR], htobe32(qp->sq_pi & 0xffff));
    mlxd_wc_start();
    volatile uint64_t *reg = (volatile uint64_t *)(qp->bf_reg + qp->bf_offset);
    uint32_t idx = qp->last_pi & (qp->sq_wqebbs - 1);
    const uint64_t *wqe = (const uint64_t *)(uintptr_t)(qp->sq + ((size_t)idx << MLXD_SEND_WQE_SHIFT));
    uint32_t bytes = qp->last_nbb << MLXD_SEND_WQE_SHIFT;
    if (qp->pending == 1 && bytes <= qp->bf_buf_size && idx + qp->last_nbb <= qp->sq_wqebbs) {
        /* BlueFlame: the whole WQE, one 64-byte block at a time (bf_copy.h) */
        for (uint32_t i = 0; i < bytes >> 3; i += 8) mlxd_bf_copy64(&reg[i], &wqe[i]);
    } else {
        mlxd_shared_store(&reg[0], wqe[0]);   /* doorbell: the last WQE's ctrl bytes 0..7, one 64-bit store */
    }
    mlxd_wc_flush();
    qp->bf_offset ^= qp->bf_buf_size;
    qp->pending = 0;
    return 0;
}

int mlxd_qp_receive(struct mlxd_qp *qp, const struct mlxd_recv *r, size_t n)
{
    if (mlxd_unlikely(!qp || qp->state != OBJ_LIVE || !qp->rq_wqe_cnt || (n && !r)))
        return mlxd_err(EINVAL, "mlxd_qp_receive: invalid/destroyed QP, a QP without a receive ring, or r NULL");
    if (mlxd_unlikely(n > qp->rq_depth))     /* before r[] is read: it may be shorter than n */
        return mlxd_err(EINVAL, "mlxd_qp_receive: QP 0x%x: %zu receives at once exceed its recv_depth %u",
                        qp->qpn, n, qp->rq_depth);
    for (size_t i = 0; i < n; i++) {
        if (mlxd_unlikely(r[i].num_local > qp->max_recv_sge || (r[i].num_local && !r[i].local)))
            return mlxd_err(EINVAL, "mlxd_qp_receive: QP 0x%x: receive %zu has %u scatter entries (max %u)",
                            qp->qpn, i, r[i].num_local, qp->max_recv_sge);
        for (uint32_t k = 0; k < r[i].num_local; k++)
            if (mlxd_unlikely(r[i].local[k].length > 0x7fffffffu))   /* 31-bit byte_count, as sends */
                return mlxd_err(EINVAL, "mlxd_qp_receive: QP 0x%x: receive %zu entry %u: length %u is 2^31 or "
                                "more (a data segment's byte_count has 31 bits)", qp->qpn, i, k,
                                r[i].local[k].length);
    }
    uint32_t ci = atomic_load_explicit(&qp->rq_ci, memory_order_acquire);
    if (mlxd_unlikely(n > (size_t)(qp->rq_depth - (qp->rq_head - ci)))) return -EAGAIN;
    if (!n) return 0;
    uint8_t *rq = (uint8_t *)(uintptr_t)qp->rq;
    uint32_t mask = qp->rq_wqe_cnt - 1, shift = qp->rq_wqe_shift;
    uint32_t max_gs = 1u << (shift - 4);
    uint32_t head = qp->rq_head;
    for (size_t i = 0; i < n; i++, head++) {
        uint32_t idx = head & mask;
        uint8_t *w = rq + ((size_t)idx << shift);
        uint32_t k = 0;
        for (uint32_t j = 0; j < r[i].num_local; j++) {
            /* byte_count 0 means 2 GiB to a ConnectX (kernel hw/mlx5/odp.c): a zero-length
             * entry is left out, as libmlx5 does (rdma-core providers/mlx5/qp.c mlx5_post_recv) */
            if (!r[i].local[j].length) continue;
            st32(w + MLXD_WQE_DATA_OFF_BYTE_COUNT, r[i].local[j].length);
            st32(w + MLXD_WQE_DATA_OFF_LKEY, r[i].local[j].lkey);
            st64(w + MLXD_WQE_DATA_OFF_ADDR, r[i].local[j].addr);
            w += MLXD_WQE_DATA_SIZE;
            k++;
        }
        if (k < max_gs) {        /* terminator: byte_count 0, MLX5_INVALID_LKEY, addr 0 */
            st32(w + MLXD_WQE_DATA_OFF_BYTE_COUNT, 0);
            st32(w + MLXD_WQE_DATA_OFF_LKEY, MLXD_INVALID_LKEY);
            st64(w + MLXD_WQE_DATA_OFF_ADDR, 0);
        }
        qp->rq_wrid[idx] = r[i].wr_id;
    }
    qp->rq_head = head;
    mlxd_wmb();
    mlxd_shared_store(&qp->dbrec[MLXD_RCV_DBR], htobe32(head & 0xffff));
    return (int)n;
}

int mlxd_qp_send_room(const struct mlxd_qp *qp)
{
    if (!qp || qp->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_qp_send_room: invalid or destroyed QP");
    uint64_t ci = atomic_load_explicit(&((struct mlxd_qp *)qp)->sq_ci, memory_order_acquire);
    /* signed: read while another thread posts (against the thread rule), the counts could
     * pass the snapshot of ci; never report less than none or more than the depth */
    int64_t wqebbs = (int64_t)qp->sq_wqebbs - (int32_t)(qp->sq_pi - (uint32_t)ci);
    int64_t entries = (int64_t)qp->sq_depth - (int32_t)(qp->sq_posted - (uint32_t)(ci >> 32));
    int64_t room = wqebbs < entries ? wqebbs : entries;
    return room < 0 ? 0 : room > qp->sq_depth ? (int)qp->sq_depth : (int)room;
}

int mlxd_qp_recv_room(const struct mlxd_qp *qp)
{
    if (!qp || qp->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_qp_recv_room: invalid or destroyed QP");
    int64_t room = (int64_t)qp->rq_depth -
                   (int32_t)(qp->rq_head - atomic_load_explicit(&((struct mlxd_qp *)qp)->rq_ci, memory_order_acquire));
    return room < 0 ? 0 : room > qp->rq_depth ? (int)qp->rq_depth : (int)room;
}
