/* nic_resp.c: the responder: incoming packets -> memory writes, receive completions, ACK/NAK.
 *
 * Rules (IB spec vol. 1 chapter 9.7): RC responder PSN checking (a duplicate is re-acknowledged,
 * a duplicate RDMA READ re-executed; a PSN ahead of the expected one gets one NAK-PSN-sequence
 * and is dropped until the sequence is repaired), opcode sequence checking (FIRST/MIDDLE/LAST),
 * R_Key and access checking before any byte is written, RNR NAK when no receive WQE is posted,
 * coalesced ACKs (an ACK of PSN n acknowledges every PSN up to n).  UC: no ACK/NAK; a broken
 * PSN sequence or any error drops the message silently and a new FIRST/ONLY resynchronises.
 * Receive WQEs: rdma-core providers/mlx5/qp.c mlx5_post_recv (data segments, the 0x100
 * lkey terminator, MLX5_INVALID_LKEY in mlx5dv.h). */
#include <string.h>
#include "nic.h"

enum { K_SEND = 1, K_WRITE = 2, K_READ = 3 };

static bool resp_is_rc(const struct nic_qp *q) { return q->qp->type == 2; }

static uint16_t rq_pi(const struct nic_qp *q)
{
    if (!q->qp->rq_wqe_cnt || !q->qp->dbrec) return q->rq_ci;
    return (uint16_t)__builtin_bswap32(__atomic_load_n(&q->qp->dbrec[0], __ATOMIC_ACQUIRE));
}

/* inl: scatter-to-CQE, the whole message (byte_cnt bytes) goes into the CQE (nic_cqe_write) */
static void resp_cqe_inl(struct nic_qp *q, uint8_t opcode, uint8_t synd, uint8_t vendor,
                         uint32_t byte_cnt, uint32_t imm, bool se, const uint8_t *inl)
{
    struct emu_qp *qp = q->qp;
    if (!qp->recv_cq) return;
    bool ok = opcode != NIC_CQE_RESP_ERR;
    struct nic_cqe c = {
        .opcode = opcode, .syndrome = synd, .vendor = vendor, .se = se,
        .hw_drops = (uint8_t)(!ok ? 0 : q->hw_drops > 255 ? 255 : q->hw_drops),
        .wqe_counter = qp->srq ? q->srq_wqe : q->rq_ci, .byte_cnt = byte_cnt, .imm = imm,
        .qpn = qp->qpn, .uidx = qp->uidx != 0xffffff ? qp->uidx : qp->srq ? qp->srq->srqn : 0,
        .inl = inl, .inl_len = (uint8_t)(inl ? byte_cnt : 0), .srq = qp->srq != NULL,
    };
    if (qp->srq) q->srq_bound = false;
    else q->rq_ci++;
    if (ok) q->hw_drops = 0;
    if (nic_cqe_write(q->nd, qp->recv_cq, &c) && synd != NIC_SYND_WR_FLUSH)
        nic_qp_to_err(q, NIC_EV_QP_FATAL);
}

static void resp_cqe(struct nic_qp *q, uint8_t opcode, uint8_t synd, uint8_t vendor,
                     uint32_t byte_cnt, uint32_t imm, bool se)
{
    resp_cqe_inl(q, opcode, synd, vendor, byte_cnt, imm, se, NULL);
}

/* Bytes of a received SEND that go into the CQE: 0 without MLX5_QP_FLAG_SCATTER_CQE; else the
 * kernel's cs_res for the receive CQ (mlx5_ib configure_responder_scat_cqe): 32 for 64-byte
 * CQEs, 64 for 128-byte ones. */
static uint32_t qp_scatter_cqe_max(const struct nic_qp *q)
{
    const struct emu_qp *qp = q->qp;
    if (!qp->scatter_to_cqe || !qp->recv_cq) return 0;
    return qp->recv_cq->cqe_size == 128 ? 64 : 32;
}

void nic_resp_flush_rq(struct nic_qp *q)
{
    uint16_t pi = rq_pi(q);
    q->in_msg = false;
    /* an SRQ WQE taken by a message that never finished completes here, on this QP */
    if (q->qp->srq && q->srq_bound)
        resp_cqe(q, NIC_CQE_RESP_ERR, NIC_SYND_WR_FLUSH, 0xf9, 0, 0, false);
    while (q->rq_ci != pi) resp_cqe(q, NIC_CQE_RESP_ERR, NIC_SYND_WR_FLUSH, 0xf9, 0, 0, false);
}

void nic_resp_reset(struct nic_qp *q)
{
    q->rq_ci = 0;
    q->epsn = q->msn = 0;
    q->in_msg = q->uc_drop = q->nak_sent = q->ack_pending = false;
    memset(q->atomic_saved, 0, sizeof q->atomic_saved);
    q->atomic_next = 0;
}

/* ---- ACK / NAK ------------------------------------------------------------------------------ */
static void send_aeth(struct nic_qp *q, uint32_t psn, uint8_t syndrome)
{
    struct nic_txslot *s = wire_tx_slot(q->nd);
    if (!s) { wire_tx_flush(q->nd); s = wire_tx_slot(q->nd); }
    struct mlxd_roce_pkt p = {.opcode = MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_ACKNOWLEDGE,
                              .psn = psn & MLXD_ROCE_PSN_MASK, .aeth_syndrome = syndrome,
                              .aeth_msn = q->msn & 0xffffff};
    uint32_t hl = nic_pkt_hdrs(q, s->buf, &p, 0);
    nic_pkt_send(q, s, hl, 0);
}

void nic_resp_flush_acks(struct nic_qp *q)
{
    q->ack_pending = false;
    q->nd->st.acks_sent++;
    send_aeth(q, q->ack_psn, MLXD_ROCE_AETH_ACK | 0x1f);   /* credit field 0x1f: invalid */
}

static void nak(struct nic_qp *q, uint32_t psn, uint8_t code)
{
    if (q->ack_pending) nic_resp_flush_acks(q);
    q->nd->st.naks_sent++;
    send_aeth(q, psn, (uint8_t)(MLXD_ROCE_AETH_NAK | code));
}

/* Responder-detected error on RC: NAK, QP to ERR with an async event (IB spec 10.3.1 /
 * 11.6.3: invalid request -> QP_REQ_ERR, access violation -> QP_ACCESS_ERR). */
static void resp_fatal(struct nic_qp *q, uint32_t psn, uint8_t nak_code, int event)
{
    nak(q, psn, nak_code);
    nic_qp_to_err(q, event);
}

/* ---- memory -------------------------------------------------------------------------------- */
/* R_Key check for a remote access of len bytes at va (IB spec 10.6.3.2): the MR must exist
 * under that rkey, belong to the QP's PD, grant `acc`, and contain [va, va + len); a memory
 * window's rules are nic_mw.c's.  The result is valid until the engine drops the device lock. */
static struct emu_mr *rkey_check(struct nic_qp *q, uint32_t rkey, uint64_t va, uint32_t len,
                                 uint32_t acc)
{
    struct emu_device *dev = nic_qp_dev(q);
    struct emu_mr *mr = dev->mr_by_key ? dev->mr_by_key(dev, rkey) : NULL;
    if (!mr || mr->rkey != rkey || (q->qp->pd && mr->pd != q->qp->pd)) return NULL;
    if (mr->mw_type) return nic_mw_translate(q, mr, va, len, acc);    /* a memory window */
    if (!(mr->access & acc) || !(q->qp->attr.access_flags & acc)) return NULL;
    if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len) return NULL;
    return mr;
}

/* Scatters len bytes at message offset off into the receive WQE at rq_ci.  Returns 0, or the
 * syndrome: local length (the WQE is too small), local protection (bad lkey/bounds/access). */
static uint8_t scatter(struct nic_qp *q, uint32_t off, const uint8_t *src, uint32_t len,
                       bool dry)
{
    struct emu_qp *qp = q->qp;
    struct emu_device *dev = nic_qp_dev(q);
    uint32_t nseg;
    volatile uint8_t *w;
    if (qp->srq) w = nic_srq_wqe_data(q, &nseg);
    else {
        w = qp->rq + ((size_t)(q->rq_ci & (qp->rq_wqe_cnt - 1)) << qp->rq_wqe_shift);
        nseg = (1u << qp->rq_wqe_shift) / 16;
    }
    for (uint32_t i = 0; i < nseg && len; i++) {
        uint8_t s[16];
        __builtin_memcpy(s, (const void *)(w + i * 16), 16);
        uint32_t bc = rd_be32(s), lkey = rd_be32(s + 4);
        uint64_t addr = rd_be64(s + 8);
        if (lkey == 0x100) break;                      /* MLX5_INVALID_LKEY terminator */
        /* byte_count 0 designates 2 GiB (kernel hw/mlx5/odp.c, pagefault_data_segments) */
        uint64_t size = bc ? bc : 0x80000000u;
        if (off >= size) { off -= (uint32_t)size; continue; }
        uint32_t n = size - off < len ? (uint32_t)(size - off) : len;
        /* the memory key covers the bytes written (the NIC checks each access, not the
         * whole entry: a 2 GiB entry in a small region takes what fits) */
        uint64_t at = addr + off;
        struct emu_mr *mr = dev->mr_by_key ? dev->mr_by_key(dev, lkey) : NULL;
        if (!mr || mr->lkey != lkey || (qp->pd && mr->pd != qp->pd) ||
            !(mr->access & NIC_ACC_LOCAL_WRITE) || at < addr || at < mr->iova || n > mr->length ||
            at - mr->iova > mr->length - n)
            return NIC_SYND_LOCAL_PROT;
        if (!dry) memcpy((uint8_t *)(uintptr_t)(mr->addr + (at - mr->iova)), src, n);
        src += n; len -= n; off = 0;
    }
    return len ? NIC_SYND_LOCAL_LENGTH : 0;
}

/* ---- RDMA READ responses ---------------------------------------------------------------------- */
static void serve_read(struct nic_qp *q, const struct mlxd_roce_pkt *p, struct emu_mr *mr)
{
    uint32_t mtu = q->mtu ? q->mtu : 1024;
    uint32_t len = p->reth_len, n = len ? (len + mtu - 1) / mtu : 1;
    const uint8_t *src = mr ? (const uint8_t *)(uintptr_t)(mr->addr + (p->reth_va - mr->iova)) : NULL;
    for (uint32_t k = 0; k < n; k++) {
        struct nic_txslot *s = wire_tx_slot(q->nd);
        if (!s) { wire_tx_flush(q->nd); s = wire_tx_slot(q->nd); }
        uint32_t off = k * mtu, plen = len - off < mtu ? len - off : mtu;
        uint8_t op = n == 1 ? MLXD_ROCE_OP_READ_RESPONSE_ONLY
                   : k == 0 ? MLXD_ROCE_OP_READ_RESPONSE_FIRST
                   : k == n - 1 ? MLXD_ROCE_OP_READ_RESPONSE_LAST
                   : MLXD_ROCE_OP_READ_RESPONSE_MIDDLE;
        struct mlxd_roce_pkt r = {.opcode = MLXD_ROCE_TRANSPORT_RC | op,
                                  .psn = (p->psn + k) & MLXD_ROCE_PSN_MASK,
                                  .aeth_syndrome = MLXD_ROCE_AETH_ACK | 0x1f,
                                  .aeth_msn = q->msn & 0xffffff};
        uint32_t hl = nic_pkt_hdrs(q, s->buf, &r, plen);
        if (plen) memcpy(s->buf + hl, src + off, plen);
        nic_pkt_send(q, s, hl, plen);
    }
}

/* ---- the responder ------------------------------------------------------------------------- */
static void drop_uc(struct nic_qp *q)
{
    q->uc_drop = true;
    q->in_msg = false;
    q->nd->st.rx_dropped_uc++;
}

/* The message kind and position of a request opcode; false for one the responder does not take
 * on this transport (IB spec vol. 1 9.2, table 38): UC has SEND and WRITE only, no READ and no
 * invalidate (0x36/0x37 name nothing).  mlxd_roce_parse drops those already; this keeps the
 * responder right on its own. */
static bool classify(uint8_t opcode, int *kind, bool *first, bool *last)
{
    uint8_t op = opcode & 0x1f;
    if ((opcode & 0xe0) == MLXD_ROCE_TRANSPORT_UC && op > MLXD_ROCE_OP_WRITE_ONLY_IMM) return false;
    static const struct { uint8_t kind, first, last; } t[32] = {
        [MLXD_ROCE_OP_SEND_FIRST] = { K_SEND, 1, 0 },      [MLXD_ROCE_OP_SEND_MIDDLE] = { K_SEND, 0, 0 },
        [MLXD_ROCE_OP_SEND_LAST] = { K_SEND, 0, 1 },       [MLXD_ROCE_OP_SEND_LAST_IMM] = { K_SEND, 0, 1 },
        [MLXD_ROCE_OP_SEND_ONLY] = { K_SEND, 1, 1 },       [MLXD_ROCE_OP_SEND_ONLY_IMM] = { K_SEND, 1, 1 },
        [MLXD_ROCE_OP_SEND_LAST_INV] = { K_SEND, 0, 1 },   [MLXD_ROCE_OP_SEND_ONLY_INV] = { K_SEND, 1, 1 },
        [MLXD_ROCE_OP_WRITE_FIRST] = { K_WRITE, 1, 0 },    [MLXD_ROCE_OP_WRITE_MIDDLE] = { K_WRITE, 0, 0 },
        [MLXD_ROCE_OP_WRITE_LAST] = { K_WRITE, 0, 1 },     [MLXD_ROCE_OP_WRITE_LAST_IMM] = { K_WRITE, 0, 1 },
        [MLXD_ROCE_OP_WRITE_ONLY] = { K_WRITE, 1, 1 },     [MLXD_ROCE_OP_WRITE_ONLY_IMM] = { K_WRITE, 1, 1 },
        [MLXD_ROCE_OP_READ_REQUEST] = { K_READ, 1, 1 },
    };
    if (op >= 32 || !t[op].kind) return false;
    *kind = t[op].kind;
    *first = t[op].first;
    *last = t[op].last;
    return true;
}

/* A request the responder refuses: RC NAKs it (invalid request or remote access error) and
 * goes to ERR; UC drops the message silently. */
static void refuse(struct nic_qp *q, const struct mlxd_roce_pkt *p, bool access)
{
    if (resp_is_rc(q))
        resp_fatal(q, p->psn, access ? MLXD_ROCE_NAK_REM_ACCESS : MLXD_ROCE_NAK_INV_REQ,
                   access ? NIC_EV_QP_ACCESS_ERR : NIC_EV_QP_REQ_ERR);
    else { q->epsn = (p->psn + 1) & MLXD_ROCE_PSN_MASK; drop_uc(q); }
}

/* RC PSN check: a duplicate is re-acknowledged (a READ served again), a PSN ahead gets one
 * NAK-PSN-sequence; true only for the expected PSN. */
static bool rc_psn_ok(struct nic_qp *q, const struct mlxd_roce_pkt *p, int kind)
{
    int32_t d = mlxd_roce_psn_diff(p->psn, q->epsn);
    if (d < 0) {
        q->nd->st.rx_dup++;
        if (kind == K_READ) {
            struct emu_mr *mr = p->reth_len ? rkey_check(q, p->reth_rkey, p->reth_va, p->reth_len,
                                                         NIC_ACC_REMOTE_READ)
                                            : NULL;
            if (mr || !p->reth_len) serve_read(q, p, mr);
        } else {
            q->ack_pending = true;
            q->ack_psn = (q->epsn - 1) & MLXD_ROCE_PSN_MASK;
        }
        return false;
    }
    if (d > 0) {
        nic_count_out_of_seq(q->nd);
        if (!q->nak_sent) { q->nak_sent = true; nak(q, q->epsn, MLXD_ROCE_NAK_PSN_SEQ); }
        return false;
    }
    q->nak_sent = false;
    return true;
}

/* UC PSN check: a packet up to 64 PSNs behind the expected one is a duplicate (dropped, never
 * delivered twice); one further behind or ahead means packets were lost or the sender
 * restarted: a FIRST/ONLY starts a new message there (resynchronisation, as soft-RoCE does),
 * anything else is dropped.  True to go on with the packet. */
static bool uc_psn_ok(struct nic_qp *q, const struct mlxd_roce_pkt *p, bool first)
{
    int32_t d = mlxd_roce_psn_diff(p->psn, q->epsn);
    if (d < 0 && d >= -64) {
        q->nd->st.rx_dup++;
        return false;
    }
    if (p->psn != q->epsn || q->uc_drop) {
        if (p->psn != q->epsn) nic_count_out_of_seq(q->nd);
        if (!first) {
            q->epsn = (p->psn + 1) & MLXD_ROCE_PSN_MASK;
            drop_uc(q);
            return false;
        }
        q->uc_drop = false;
        q->in_msg = false;
    }
    if (q->in_msg && first) q->in_msg = false;     /* the previous message lost its end */
    return true;
}

static void resp_read(struct nic_qp *q, const struct mlxd_roce_pkt *p, uint32_t mtu)
{
    struct emu_mr *mr = NULL;
    if (p->reth_len &&
        !(mr = rkey_check(q, p->reth_rkey, p->reth_va, p->reth_len, NIC_ACC_REMOTE_READ))) {
        resp_fatal(q, p->psn, MLXD_ROCE_NAK_REM_ACCESS, NIC_EV_QP_ACCESS_ERR);
        return;
    }
    uint32_t n = p->reth_len ? (p->reth_len + mtu - 1) / mtu : 1;
    q->msn++;
    serve_read(q, p, mr);
    q->epsn = (p->psn + n) & MLXD_ROCE_PSN_MASK;
}

/* No receive WQE for a message that needs one: RNR NAK (RC, IB spec 9.7.5.2.8); UC drops and
 * counts it, as a ConnectX does (the Q counter out_of_buffer and the hw_drops byte of the QP's
 * next responder CQE). */
static void no_receive(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    struct nic_dev *nd = q->nd;
    if (resp_is_rc(q)) {
        if (q->ack_pending) nic_resp_flush_acks(q);
        nd->st.rnr_naks_sent++;
        send_aeth(q, p->psn, (uint8_t)(MLXD_ROCE_AETH_RNR_NAK | (q->qp->attr.min_rnr_timer & 0x1f)));
        return;
    }
    q->epsn = (p->psn + 1) & MLXD_ROCE_PSN_MASK;
    q->hw_drops++;
    atomic_fetch_add_explicit(&nd->dev->out_of_buffer, 1, memory_order_relaxed);
    drop_uc(q);
}

/* One packet of a WRITE; false when it was refused. */
static bool resp_write(struct nic_qp *q, const struct mlxd_roce_pkt *p, bool first, bool last, bool imm)
{
    if (first) {
        if (p->payload_len > p->reth_len || (last && p->payload_len != p->reth_len)) {
            refuse(q, p, false);
            return false;
        }
        if (p->reth_len && !rkey_check(q, p->reth_rkey, p->reth_va, p->reth_len, NIC_ACC_REMOTE_WRITE)) {
            refuse(q, p, true);
            return false;
        }
        q->w_va = p->reth_va;
        q->w_left = p->reth_len;
        q->w_rkey = p->reth_rkey;
        q->r_bytes = 0;
    } else if (p->payload_len > q->w_left || (last && p->payload_len != q->w_left)) {
        refuse(q, p, false);
        return false;
    }
    if (p->payload_len) {
        /* looked up again for every packet: the region may have gone since the FIRST */
        struct emu_mr *mr = rkey_check(q, q->w_rkey, q->w_va, p->payload_len, NIC_ACC_REMOTE_WRITE);
        if (!mr) {
            refuse(q, p, true);
            return false;
        }
        memcpy((uint8_t *)(uintptr_t)(mr->addr + (q->w_va - mr->iova)), p->payload, p->payload_len);
    }
    q->w_va += p->payload_len;
    q->w_left -= p->payload_len;
    q->r_bytes += p->payload_len;
    /* hw_counters/rx_write_requests: one per accepted WRITE request packet, counted before the
     * CQE (if any) is released, so a reader that saw the CQE sees the count.  Only the engine's
     * pass (under dev->lock) writes it: a load and a store, not a locked add (which, a full
     * barrier on x86, waited for the memcpy's 4 KiB of stores to drain: 4 % of the e2e
     * benchmark's samples, issue 18) */
    atomic_store_explicit(&q->nd->dev->rx_write_requests,
                          atomic_load_explicit(&q->nd->dev->rx_write_requests, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    q->in_msg = !last;
    q->msg_kind = K_WRITE;
    if (last) {
        q->msn++;
        if (imm) resp_cqe(q, NIC_CQE_RESP_WR_IMM, 0, 0, q->r_bytes, p->imm, p->se);
    }
    return true;
}

/* The last packet of a SEND with Invalidate: the R_Key of its IETH must name a type 2 memory
 * window bound to this QP, which is invalidated before the completion (IB spec 9.4.1.1.3,
 * 10.6.7.2.5; nic_mw.c); the CQE is MLX5_CQE_RESP_SEND_INV with the R_Key where an immediate
 * goes (rdma-core providers/mlx5/cq.c: IBV_WC_WITH_INV, invalidated_rkey).  An R_Key that does
 * not qualify is the responder's class J error: the receive WQE the message took completes with
 * its cause, MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR (0x12, IBV_WC_REM_INV_REQ_ERR; Linux rxe
 * rxe_resp.c RESPST_ERR_INVALIDATE_RKEY gives the same status), the requester gets NAK Invalid
 * Request, the QP goes to ERR.  The data already placed stays. */
static bool remote_invalidate(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    if (nic_mw_remote_inv(q, p->ieth_rkey)) return true;
    q->in_msg = false;
    resp_cqe(q, NIC_CQE_RESP_ERR, NIC_SYND_REMOTE_INVAL_REQ, 0x52, 0, 0, false);
    refuse(q, p, false);
    return false;
}

/* One packet of a SEND; false when it was refused. */
static bool resp_send(struct nic_qp *q, const struct mlxd_roce_pkt *p, bool first, bool last, bool imm)
{
    bool inv = p->hdrs & MLXD_ROCE_HAS_IETH;
    uint8_t op = imm ? NIC_CQE_RESP_SEND_IMM : inv ? NIC_CQE_RESP_SEND_INV : NIC_CQE_RESP_SEND;
    uint32_t cimm = imm ? p->imm : inv ? __builtin_bswap32(p->ieth_rkey) : 0;
    if (first) q->r_bytes = 0;
    /* scatter-to-CQE (kernel cs_res = 32 B / 64 B by the receive CQ's CQE size): a whole
     * message that fits goes into the CQE, the receive buffers are not touched */
    uint32_t inl_max = qp_scatter_cqe_max(q);
    if (first && last && p->payload_len && p->payload_len <= inl_max) {
        if (inv && !remote_invalidate(q, p)) return false;
        q->msn++;
        q->msg_kind = K_SEND;
        q->in_msg = false;
        resp_cqe_inl(q, op, 0, 0, p->payload_len, cimm, p->se, p->payload);
        return true;
    }
    uint8_t e = scatter(q, q->r_bytes, p->payload, p->payload_len, true);
    if (e) {
        if (!resp_is_rc(q)) { q->epsn = (p->psn + 1) & MLXD_ROCE_PSN_MASK; drop_uc(q); return false; }
        /* RC: error CQE on the receive WQE, NAK to the requester, QP to ERR */
        resp_cqe(q, NIC_CQE_RESP_ERR, e, e == NIC_SYND_LOCAL_LENGTH ? 0x69 : 0x52, 0, 0, false);
        q->in_msg = false;
        resp_fatal(q, p->psn, e == NIC_SYND_LOCAL_LENGTH ? MLXD_ROCE_NAK_INV_REQ : MLXD_ROCE_NAK_REM_OP, -1);
        return false;
    }
    if (inv && !remote_invalidate(q, p)) return false;
    scatter(q, q->r_bytes, p->payload, p->payload_len, false);
    q->r_bytes += p->payload_len;
    q->in_msg = !last;
    q->msg_kind = K_SEND;
    if (last) {
        q->msn++;
        resp_cqe(q, op, 0, 0, q->r_bytes, cimm, p->se);
    }
    return true;
}

static void responder(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    struct emu_qp *qp = q->qp;
    bool rc = resp_is_rc(q);
    int kind;
    bool first, last;
    if (!classify(p->opcode, &kind, &first, &last)) {
        q->nd->st.rx_malformed++;
        return;
    }
    bool imm = p->hdrs & MLXD_ROCE_HAS_IMMDT;
    if (rc ? !rc_psn_ok(q, p, kind) : !uc_psn_ok(q, p, first)) return;
    /* opcode sequence and packet lengths (IB spec 9.8.3.1) */
    bool seq_ok = q->in_msg ? (!first && kind == q->msg_kind) : first;
    uint32_t mtu = q->mtu ? q->mtu : 1024;
    bool len_ok = (first && last) ? p->payload_len <= mtu
                : last ? (p->payload_len >= 1 && p->payload_len <= mtu)
                : p->payload_len == mtu;
    if (!seq_ok || !len_ok) {
        q->nd->st.rx_malformed++;
        refuse(q, p, false);
        return;
    }
    if (kind == K_READ) { resp_read(q, p, mtu); return; }
    bool need_wqe = (kind == K_SEND && first) || (kind == K_WRITE && last && imm);
    if (need_wqe && (qp->srq ? !nic_srq_take(q) : rq_pi(q) == q->rq_ci)) {
        no_receive(q, p);
        return;
    }
    if (!(kind == K_WRITE ? resp_write(q, p, first, last, imm) : resp_send(q, p, first, last, imm))) return;
    q->epsn = (p->psn + 1) & MLXD_ROCE_PSN_MASK;
    if (rc && p->ackreq) {
        q->ack_pending = true;
        q->ack_psn = p->psn;
    }
}

/* Dispatches one verified packet to its QP. */
void nic_resp_packet(struct nic_dev *nd, const struct mlxd_roce_pkt *p)
{
    struct emu_device *dev = nd->dev;
    struct emu_qp *qp = dev->qp_by_qpn ? dev->qp_by_qpn(dev, p->dest_qp) : NULL;
    struct nic_qp *q = qp ? qp->nic : NULL;
    if (!q) { nd->st.rx_unknown_qp++; return; }
    /* transport of the opcode must be the QP's; default partition only (P_Key 0x7fff/0xffff) */
    uint8_t tr = p->opcode & 0xe0;
    if ((qp->type == 2 && tr != MLXD_ROCE_TRANSPORT_RC) ||
        (qp->type == 3 && tr != MLXD_ROCE_TRANSPORT_UC) ||
        (qp->type == 4 && tr != MLXD_ROCE_TRANSPORT_UD) || (p->pkey & 0x7fff) != 0x7fff) {
        nd->st.rx_malformed++;
        return;
    }
    /* SQE (a UD send error) stops only the send queue: the QP still receives */
    if (qp->state != NIC_QPS_RTR && qp->state != NIC_QPS_RTS && qp->state != NIC_QPS_SQD &&
        qp->state != NIC_QPS_SQE) {
        nd->st.rx_bad_state++;
        return;
    }
    if (nic_qp_is_ud(q)) { nic_ud_recv(q, p); return; }   /* datagrams: from anyone */
    /* a connected (RC/UC) QP takes packets only from the address it was connected to (IB spec
     * annex A17: the IP addresses stand for the GIDs of the QP's path; compare Linux rxe) */
    if (p->src_ip != ntohl(q->peer.sin_addr.s_addr)) {
        nd->st.rx_wrong_source++;
        return;
    }
    uint8_t op = p->opcode & 0x1f;
    switch (op) {
    case MLXD_ROCE_OP_ACKNOWLEDGE:
        nic_req_on_ack(q, p);
        return;
    case MLXD_ROCE_OP_READ_RESPONSE_FIRST: case MLXD_ROCE_OP_READ_RESPONSE_MIDDLE:
    case MLXD_ROCE_OP_READ_RESPONSE_LAST: case MLXD_ROCE_OP_READ_RESPONSE_ONLY:
        nic_req_on_read_resp(q, p);
        return;
    case MLXD_ROCE_OP_ATOMIC_ACKNOWLEDGE:
        nic_req_on_atomic_ack(q, p);
        return;
    case MLXD_ROCE_OP_COMPARE_SWAP: case MLXD_ROCE_OP_FETCH_ADD:
        nic_resp_atomic(q, p);
        return;
    default:
        responder(q, p);
    }
}

/* ---- for the atomics (nic_atomic.c) ----------------------------------------------------------- */
void nic_resp_send_aeth(struct nic_qp *q, uint32_t psn, uint8_t syndrome) { send_aeth(q, psn, syndrome); }
void nic_resp_fatal(struct nic_qp *q, uint32_t psn, uint8_t nak_code, int event)
{
    resp_fatal(q, psn, nak_code, event);
}
uint16_t nic_resp_rq_pi(const struct nic_qp *q) { return rq_pi(q); }
uint8_t nic_resp_scatter(struct nic_qp *q, uint32_t off, const uint8_t *src, uint32_t len, bool dry)
{
    return scatter(q, off, src, len, dry);
}
struct emu_mr *nic_resp_rkey_check(struct nic_qp *q, uint32_t rkey, uint64_t va, uint32_t len,
                                   uint32_t acc)
{
    return rkey_check(q, rkey, va, len, acc);
}
