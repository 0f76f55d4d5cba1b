/* nic_atomic.c: the responder's 8-byte atomics, compare-and-swap and fetch-and-add (RC only).
 *
 * What a ConnectX does, and so this engine (IB spec vol. 1 9.4.5, 9.7.5.1.3; mlx5_ib advertises
 * IB_ATOMIC_HCA only when the device runs 8-byte atomics in host endianness, kernel
 * drivers/infiniband/hw/mlx5/main.c):
 *   - the request carries an AtomicETH (VA, R_Key, swap/add data, compare data) and no payload;
 *   - the VA must be 8-byte aligned: otherwise NAK invalid request (QP to ERR, the requester
 *     completes with a remote invalid request error, syndrome 0x12);
 *   - the R_Key must name a region with REMOTE_ATOMIC access covering the 8 bytes, and the QP
 *     must allow remote atomics: otherwise NAK remote access (syndrome 0x13 at the requester);
 *   - the operation is atomic with respect to every other atomic of this NIC and to the CPU
 *     (one locked instruction on the process's memory, in host byte order);
 *   - the original value goes back in an ATOMIC ACKNOWLEDGE (AETH + AtomicAckETH);
 *   - a duplicate request (its PSN already executed) is not executed again: its saved result
 *     is sent again.
 * Called from nic_resp_packet with the QP's state and source address already checked. */
#include <string.h>
#include "nic.h"

static void send_atomic_ack(struct nic_qp *q, uint32_t psn, uint64_t orig)
{
    struct nic_txslot *s = wire_tx_slot(q->nd);
    if (!s) { wire_tx_flush(q->nd); s = wire_tx_slot(q->nd); }
    struct mlxd_roce_pkt r = {.opcode = MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_ATOMIC_ACKNOWLEDGE,
                              .psn = psn & MLXD_ROCE_PSN_MASK,
                              .aeth_syndrome = MLXD_ROCE_AETH_ACK | 0x1f,
                              .aeth_msn = q->msn & 0xffffff, .atomic_orig = orig};
    uint32_t hl = nic_pkt_hdrs(q, s->buf, &r, 0);
    nic_pkt_send(q, s, hl, 0);
}

static void replay_duplicate(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    q->nd->st.rx_dup++;
    for (unsigned i = 0; i < NIC_ATOMIC_SAVED; i++)
        if (q->atomic_saved[i].valid && q->atomic_saved[i].psn == p->psn) {
            if (q->ack_pending) nic_resp_flush_acks(q);
            send_atomic_ack(q, p->psn, q->atomic_saved[i].orig);
            return;
        }
    /* older than the saved results: the requester has moved past it (nothing to answer) */
}

static uint64_t execute(uint64_t *ptr, bool cmp_swap, uint64_t swap_add, uint64_t compare)
{
    if (!cmp_swap) return __atomic_fetch_add(ptr, swap_add, __ATOMIC_SEQ_CST);
    uint64_t expected = compare;
    __atomic_compare_exchange_n(ptr, &expected, swap_add, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return expected;          /* the value found: compare when it matched, else the current one */
}

void nic_resp_atomic(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    struct nic_dev *nd = q->nd;
    if (q->qp->type != 2) { nd->st.rx_malformed++; return; }      /* RC only (table 38) */
    int32_t d = mlxd_roce_psn_diff(p->psn, q->epsn);
    if (d < 0) { replay_duplicate(q, p); return; }
    if (d > 0) {
        nd->st.rx_out_of_seq++;
        if (!q->nak_sent) {
            q->nak_sent = true;
            if (q->ack_pending) nic_resp_flush_acks(q);
            nd->st.naks_sent++;
            nic_resp_send_aeth(q, q->epsn, MLXD_ROCE_AETH_NAK | MLXD_ROCE_NAK_PSN_SEQ);
        }
        return;
    }
    q->nak_sent = false;
    /* a new request in the middle of a multi-packet message, a payload, or a misaligned VA */
    if (q->in_msg || p->payload_len || (p->atomic_va & 7)) {
        nd->st.rx_malformed++;
        nic_resp_fatal(q, p->psn, MLXD_ROCE_NAK_INV_REQ, NIC_EV_QP_REQ_ERR);
        return;
    }
    struct emu_mr *mr = nic_resp_rkey_check(q, p->atomic_rkey, p->atomic_va, 8,
                                            NIC_ACC_REMOTE_ATOMIC);
    if (!mr) {
        nic_resp_fatal(q, p->psn, MLXD_ROCE_NAK_REM_ACCESS, NIC_EV_QP_ACCESS_ERR);
        return;
    }
    uint64_t *ptr = (uint64_t *)(uintptr_t)(mr->addr + (p->atomic_va - mr->iova));
    bool cs = (p->opcode & 0x1f) == MLXD_ROCE_OP_COMPARE_SWAP;
    uint64_t orig = execute(ptr, cs, p->atomic_swap_add, p->atomic_compare);
    nd->st.rx_atomics++;
    q->atomic_saved[q->atomic_next].psn = p->psn;
    q->atomic_saved[q->atomic_next].orig = orig;
    q->atomic_saved[q->atomic_next].valid = true;
    q->atomic_next = (q->atomic_next + 1) % NIC_ATOMIC_SAVED;
    q->msn++;
    q->epsn = (p->psn + 1) & MLXD_ROCE_PSN_MASK;
    if (q->ack_pending) nic_resp_flush_acks(q);       /* earlier ACKs go first, in order */
    send_atomic_ack(q, p->psn, orig);
}
