/* bench_inject.c: mlxd_emu_bench_write_imm (mlxd_emu_bench.h): one responder CQE written now by
 * the calling thread, as the engine's responder writes it for the last packet of an RDMA WRITE
 * with immediate (nic_resp.c: one receive consumed, RESP_WR_IMM CQE, event when armed), with the
 * TSC read just before the op_own store so that a benchmark knows when the CQE became valid.
 * Layout: struct mlx5_cqe64 (mlx5dv.h), as nic_cq.c writes it; 128-byte CQEs: second half. */
#include <errno.h>
#include <string.h>
#include "mlxd_emu_bench.h"
#include "nic.h"
#include "tsc.h"

#define API __attribute__((visibility("default")))

API int mlxd_emu_bench_write_imm(unsigned dev, uint32_t qpn, uint32_t imm, uint32_t byte_len,
                                 uint64_t *tsc)
{
    if (dev >= EMU_MAX_DEVICES) return -ENODEV;
    struct nic_dev *nd = nic_dev_get(dev);
    if (!nd) return -ENODEV;
    struct emu_device *d = nd->dev;
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    struct emu_qp *qp = d->nic == nd && d->qp_by_qpn ? d->qp_by_qpn(d, qpn & 0xffffff) : NULL;
    struct nic_qp *q = qp ? qp->nic : NULL;
    if (!q) { rc = d->nic == nd ? -ENOENT : -ENODEV; goto out; }
    if ((qp->state != NIC_QPS_RTR && qp->state != NIC_QPS_RTS && qp->state != NIC_QPS_SQD) ||
        !qp->rq_wqe_cnt || !qp->dbrec || !qp->recv_cq) { rc = -EINVAL; goto out; }
    struct emu_cq *cq = qp->recv_cq;
    if (!cq->buf || !cq->ncqe) { rc = -EINVAL; goto out; }
    /* an arm doorbell rung before this call: the hardware has seen it */
    if (cq->nic) nic_cq_poll_arm(nd, cq->nic);
    uint16_t rq_pi = (uint16_t)__builtin_bswap32(__atomic_load_n(&qp->dbrec[0], __ATOMIC_ACQUIRE));
    if (rq_pi == q->rq_ci) { rc = -EAGAIN; goto out; }
    if (cq->dbrec && !cq->ignore_overrun) {   /* an overrun-ignoring CQ is never full */
        uint32_t ci = __builtin_bswap32(__atomic_load_n(&cq->dbrec[0], __ATOMIC_ACQUIRE)) & 0xffffff;
        if (((cq->pi - ci) & 0xffffff) >= cq->ncqe) { rc = -EAGAIN; goto out; }
    }
    uint32_t slot = cq->pi & (cq->ncqe - 1);
    volatile uint8_t *e = cq->buf + (size_t)slot * cq->cqe_size + (cq->cqe_size == 128 ? 64 : 0);
    uint8_t owner = (cq->pi & cq->ncqe) ? 1 : 0;
    uint8_t tmp[64];
    memset(tmp, 0, sizeof tmp);
    uint32_t v = __builtin_bswap32(qp->uidx == 0xffffff ? 0 : qp->uidx & 0xffffff);
    memcpy(tmp + 32, &v, 4);
    v = __builtin_bswap32(imm);
    memcpy(tmp + 36, &v, 4);
    v = __builtin_bswap32(byte_len);
    memcpy(tmp + 44, &v, 4);
    uint64_t ts = __builtin_bswap64(emu_nic_cqe_timestamp(cq));
    memcpy(tmp + 48, &ts, 8);
    v = __builtin_bswap32(qp->qpn & 0xffffff);
    memcpy(tmp + 56, &v, 4);
    uint16_t w = __builtin_bswap16(q->rq_ci);
    memcpy(tmp + 60, &w, 2);
    memcpy((void *)e, tmp, 63);
    uint8_t op_own = (uint8_t)(NIC_CQE_RESP_WR_IMM << 4 | owner);
    uint64_t t = mlxd__tsc();
    __atomic_store_n(&e[63], op_own, __ATOMIC_RELEASE);
    q->rq_ci++;
    cq->pi++;
    nd->st.cqes++;
    if (cq->armed && !cq->armed_solicited && cq->nic) {
        struct nic_cq *c = cq->nic;
        cq->armed = false;
        c->event_fired = true;
        c->fired_sn = (uint8_t)cq->last_arm_sn;
        nd->st.comp_events++;
        emu_comp_event(cq);
    }
    if (tsc) *tsc = t;
out:
    pthread_mutex_unlock(&d->lock);
    return rc;
}

API int mlxd_emu_bench_park(int park)
{
    atomic_store_explicit(&nic_engines_parked, park != 0, memory_order_relaxed);
    return 0;
}
