/* nic_srq.c: the NIC's side of a shared receive queue.
 *
 * A message arriving on a QP attached to an SRQ takes the SRQ's next WQE when it starts (the
 * first packet of a SEND, the last of a WRITE with immediate) and keeps it until its CQE: the
 * CQE's wqe_counter is that WQE's index (rdma-core providers/mlx5/cq.c: the consumer takes the
 * wr_id from srq->wrid[wqe_counter] and frees the WQE).  The NIC follows the list the process
 * links (struct mlx5_wqe_srq_next_seg, next_wqe_index BE16 at byte 2) from its own head, which
 * starts at WQE 0 (k: hw/mlx5/srq.c create_srq_kernel / rdma-core srq.c set_srq_buf_ll); the
 * doorbell record holds the BE32 counter of posted WQEs, compared in its low 16 bits.
 * Limit (IB spec 10.2.9.3 / 11.2.3): when an armed SRQ's posted-but-not-taken WQEs fall below
 * the limit, IB_EVENT_SRQ_LIMIT_REACHED goes to its async fd once and the SRQ is disarmed. */
#include "nic.h"

static uint16_t srq_posted(const struct emu_srq *s)
{
    return (uint16_t)__builtin_bswap32(__atomic_load_n(&s->dbrec[0], __ATOMIC_ACQUIRE));
}

bool nic_srq_take(struct nic_qp *q)
{
    struct emu_srq *s = q->qp->srq;
    if (q->srq_bound) return true;           /* a message dropped before its end keeps its WQE */
    uint16_t avail = (uint16_t)(srq_posted(s) - s->taken);
    if (!avail) return false;
    uint16_t idx = s->head & (uint16_t)(s->nwqe - 1);
    volatile uint8_t *w = s->buf + ((size_t)idx << s->wqe_shift);
    s->head = (uint16_t)(w[2] << 8 | w[3]);
    s->taken++;
    q->srq_wqe = idx;
    q->srq_bound = true;
    if (s->limit && (uint32_t)(avail - 1) < s->limit) {
        s->limit = 0;
        emu_async_event(s->async_fd, s->user_handle, NIC_EV_SRQ_LIMIT_REACHED);
    }
    return true;
}

volatile uint8_t *nic_srq_wqe_data(const struct nic_qp *q, uint32_t *nseg)
{
    const struct emu_srq *s = q->qp->srq;
    *nseg = (1u << s->wqe_shift) / 16 - 1;
    return s->buf + ((size_t)q->srq_wqe << s->wqe_shift) + 16;
}
