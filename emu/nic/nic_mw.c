/* nic_mw.c: memory windows on the NIC: the UMR WQE that binds, unbinds or invalidates one, the
 * translation of a remote access through a window, and the remote invalidation of a SEND with
 * Invalidate.
 *
 * The UMR WQE, as rdma-core providers/mlx5/qp.c set_bind_wr writes it (mlx5dv.h layouts):
 *   control segment, opcode MLX5_OPCODE_UMR (0x25), imm = the window's rkey (its mkey index in
 *     bits 31:8 names the window);
 *   struct mlx5_wqe_umr_ctrl_seg at 16 (48 B): flags (INLINE, TRNSLATION_OFFSET, CHECK_FREE for a
 *     type 2 bind, CHECK_QPN for a type 2 invalidation), klm_octowords, mkey_mask;
 *   struct mlx5_wqe_mkey_context_seg at 64 (64 B): free (bit 6: unbind / invalidate), access
 *     flags (bit 3 local write, 4 remote read, 5 remote write, 6 atomic), qpn_mkey (the new key
 *     byte in 7:0, the QPN of a type 2 bind in 31:8, else 0xffffff), start_addr (0 for a
 *     zero-based window), len;
 *   for a bind, struct mlx5_wqe_umr_klm_seg at 128 (one KLM in a 64-B block): byte_count, the
 *     region's lkey, the region address the window starts at.
 * A bind WQE is 12 16-byte units (3 WQEBBs), an unbind or invalidation 8.
 *
 * Rules (IB spec vol. 1 10.6.7 and 9.4.1.1.3; the checks a ConnectX makes, which libmlx5 makes
 * itself only when built with MW_DEBUG): the window and the QP belong to one PD, and so does the
 * region; the region was registered with MW_BIND (IB_UVERBS_ACCESS_MW_BIND) and holds the whole
 * window; remote write or atomic rights need the region's local write; a type 1 window is bound
 * through any QP of its PD, bound or not (a rebind moves it), and unbound by a zero-length bind;
 * a type 2 window must be free to be bound, is bound to the one QP named in the WQE (this one),
 * and is freed by a local invalidation from that QP or a remote one arriving on it; a UMR on UD
 * is a local QP operation error.  Any failed check completes the WQE with
 * MLX5_CQE_SYNDROME_MW_BIND_ERR (0x06, IBV_WC_MW_BIND_ERR) and moves the QP to ERR (the
 * emulator uses that syndrome for a refused invalidation too).  Through a bound window a peer
 * reaches [iova, iova + length) with the window's rights; the region is looked up again at every
 * access, so a region deregistered meanwhile gives a remote access error, never a stale write,
 * and so does a later region holding the same key (the bind records the region's mkey_serial;
 * its PD must still be the window's). */
#include <string.h>
#include "nic.h"

enum {
    UMR_FLAG_CHECK_FREE = 1 << 5, UMR_FLAG_CHECK_QPN = 1 << 3,   /* MLX5_WQE_UMR_CTRL_FLAG_* */
    MKEY_FREE = 1 << 6,                                          /* MLX5_WQE_MKEY_CONTEXT_FREE */
    NIC_ACC_MW_BIND = 16,                                        /* IB_UVERBS_ACCESS_MW_BIND */
};

/* Takes the UMR WQE's segments after the control segment: b holds its bytes 16 .. end. */
void nic_mw_parse(struct nic_msg *m, const uint8_t b[144], uint32_t end)
{
    m->umr.flags = b[0];
    m->umr.free = b[48] & MKEY_FREE;
    m->umr.access = b[48 + 2];
    m->umr.qpn_mkey = rd_be32(b + 48 + 4);
    m->umr.start = rd_be64(b + 48 + 16);
    m->umr.len = rd_be64(b + 48 + 24);
    m->umr.has_klm = end >= 16 + 144;
    m->umr.klm_len = rd_be32(b + 112);
    m->umr.klm_key = rd_be32(b + 112 + 4);
    m->umr.klm_addr = rd_be64(b + 112 + 8);
}

static uint32_t acc_from_mkey(uint8_t a)
{
    return (a & (1 << 3) ? NIC_ACC_LOCAL_WRITE : 0) | (a & (1 << 4) ? NIC_ACC_REMOTE_READ : 0) |
           (a & (1 << 5) ? NIC_ACC_REMOTE_WRITE : 0) | (a & (1 << 6) ? NIC_ACC_REMOTE_ATOMIC : 0);
}

/* The region a bind names, checked; NULL when the bind must fail. */
static struct emu_mr *bind_region(struct nic_qp *q, const struct nic_msg *m, uint32_t acc)
{
    struct emu_device *dev = nic_qp_dev(q);
    struct emu_mr *mr = dev->mr_by_key(dev, m->umr.klm_key);
    uint64_t a = m->umr.klm_addr, len = m->umr.len;
    if (!mr || mr->mw_type || mr->lkey != m->umr.klm_key || mr->pd != q->qp->pd) return NULL;
    if (!(mr->access & NIC_ACC_MW_BIND)) return NULL;
    if ((acc & (NIC_ACC_REMOTE_WRITE | NIC_ACC_REMOTE_ATOMIC)) && !(mr->access & NIC_ACC_LOCAL_WRITE))
        return NULL;
    if (m->umr.klm_len != len || a < mr->iova || len > mr->length || a - mr->iova > mr->length - len)
        return NULL;
    return mr;
}

static uint8_t mw_bind(struct nic_qp *q, struct emu_mr *w, const struct nic_msg *m)
{
    uint32_t acc = acc_from_mkey(m->umr.access), qpn = m->umr.qpn_mkey >> 8;
    struct emu_mr *mr = m->umr.has_klm ? bind_region(q, m, acc) : NULL;
    if (!mr) return NIC_SYND_MW_BIND;
    if (w->mw_type == 2) {
        if (!(m->umr.flags & UMR_FLAG_CHECK_FREE) || !w->mw_free || qpn != q->qp->qpn)
            return NIC_SYND_MW_BIND;
    } else if (qpn != 0xffffff) {
        return NIC_SYND_MW_BIND;          /* a type 1 window is bound to no QP */
    }
    w->rkey = (w->rkey & ~0xffu) | (m->umr.qpn_mkey & 0xff);
    w->iova = m->umr.start;
    w->length = m->umr.len;
    w->access = acc;
    w->mw_base = m->umr.klm_addr;
    w->mw_mr_key = m->umr.klm_key;
    w->mw_mr_serial = mr->mkey_serial;
    w->mw_qpn = w->mw_type == 2 ? qpn : 0xffffff;
    w->mw_free = false;
    return 0;
}

static void mw_unbind(struct emu_mr *w, uint8_t key)
{
    w->rkey = (w->rkey & ~0xffu) | key;
    w->mw_free = true;
    w->length = 0;
    w->access = 0;
}

uint8_t nic_mw_umr(struct nic_qp *q, const struct nic_msg *m)
{
    struct emu_device *dev = nic_qp_dev(q);
    if (nic_qp_is_ud(q)) return NIC_SYND_LOCAL_QP_OP;
    uint32_t key = __builtin_bswap32(m->imm);
    struct emu_mr *w = dev->mkey_by_index ? dev->mkey_by_index(dev, key) : NULL;
    if (!w || !w->mw_type || w->pd != q->qp->pd) return NIC_SYND_MW_BIND;
    if (!m->umr.free) return mw_bind(q, w, m);
    if (m->umr.flags & UMR_FLAG_CHECK_QPN) {        /* local invalidation of a type 2 window */
        if (w->mw_type != 2 || w->mw_free || w->mw_qpn != q->qp->qpn || w->rkey != key)
            return NIC_SYND_MW_BIND;
    } else if (w->mw_type != 1) {
        return NIC_SYND_MW_BIND;          /* a type 2 window is not unbound by a bind */
    }
    mw_unbind(w, (uint8_t)m->umr.qpn_mkey);
    return 0;
}

struct emu_mr *nic_mw_translate(struct nic_qp *q, const struct emu_mr *w, uint64_t va, uint32_t len,
                                uint32_t acc)
{
    struct emu_device *dev = nic_qp_dev(q);
    if (w->mw_free || w->pd != q->qp->pd || (w->mw_type == 2 && w->mw_qpn != q->qp->qpn)) return NULL;
    if (!(w->access & acc) || !(q->qp->attr.access_flags & acc)) return NULL;
    if (va < w->iova || len > w->length || va - w->iova > w->length - len) return NULL;
    /* the region bound, not whatever holds its key now: a freed slot is taken again and the
     * key's 8-bit tag repeats, so the key alone may name a later region (of any PD) */
    struct emu_mr *mr = dev->mr_by_key(dev, w->mw_mr_key);
    if (!mr || mr->mw_type || mr->lkey != w->mw_mr_key || mr->mkey_serial != w->mw_mr_serial ||
        mr->pd != w->pd || w->mw_base < mr->iova ||
        w->length > mr->length || w->mw_base - mr->iova > mr->length - w->length)
        return NULL;
    q->mw_view = *w;
    q->mw_view.addr = mr->addr + (w->mw_base - mr->iova);
    return &q->mw_view;
}

bool nic_mw_remote_inv(struct nic_qp *q, uint32_t rkey)
{
    struct emu_device *dev = nic_qp_dev(q);
    struct emu_mr *w = dev->mr_by_key ? dev->mr_by_key(dev, rkey) : NULL;
    if (!w || w->mw_type != 2 || w->rkey != rkey || w->mw_free || w->mw_qpn != q->qp->qpn ||
        w->pd != q->qp->pd)
        return false;
    mw_unbind(w, (uint8_t)rkey);
    return true;
}
