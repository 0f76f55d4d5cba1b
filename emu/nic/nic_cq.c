/* nic_cq.c: writing CQEs into the process's CQ ring, and CQ arming.
 *
 * Layout: struct mlx5_cqe64 / struct mlx5_err_cqe (mlx5dv.h; kernel include/linux/mlx5/device.h):
 *   @24 flags_rqpn BE32 (UD receives: GRH flag, L3 type, source QPN)
 *   @32 srqn_uidx BE32 (uidx, cqe_version 1)   @36 imm_inval_pkey (immediate, wire order)
 *   @44 byte_cnt BE32    @48 timestamp BE64    @54 vendor_err_synd  @55 syndrome (error CQEs)
 *   @56 sop_drop_qpn BE32 (WQE opcode << 24 | QPN)   @60 wqe_counter BE16   @62 signature
 *   @63 op_own: opcode << 4 | format << 2 | SE << 1 | owner
 * With 128-byte CQEs the 64-byte CQE is the second half of the slot.
 * Scatter-to-CQE (responder, QP created with MLX5_QP_FLAG_SCATTER_CQE: the kernel's cs_res is
 * 32 B for a 64-byte CQE, 64 B for a 128-byte one): a received SEND that fits lands in bytes
 * 0..31 of the CQE (format 1) or in the first half of the 128-byte slot (format 2), not in the
 * receive buffers; libmlx5 copies it from there. 
 * Ownership (rdma-core providers/mlx5/cq.c get_sw_cqe): owner bit = (pi / ncqe) & 1 for the pass
 * that writes the slot.
 * Arming (rdma-core providers/mlx5/cq.c mlx5_arm_cq): dbrec[1] = BE32(sn << 28 | cmd << 24 | ci)
 * and the 64-bit UAR write BE64(word << 32 | cqn) at UAR + 0x20; cmd 0 = next completion,
 * 1 = solicited only. */
#include <string.h>
#include "nic.h"

static inline void st_be32(volatile uint8_t *p, uint32_t v)
{
    v = __builtin_bswap32(v);
    __builtin_memcpy((void *)p, &v, 4);
}

static void fire(struct nic_dev *nd, struct nic_cq *c)
{
    struct emu_cq *cq = c->cq;
    cq->armed = false;
    c->event_fired = true;
    c->fired_sn = (uint8_t)cq->last_arm_sn;
    nd->st.comp_events++;
    emu_comp_event(cq);
}

/* Overrun: the consumer index (dbrec[0]) says slot index idx has not been consumed.  A CQ created
 * with IGNORE_OVERRUN (cqc.oi) is never checked: the slot is overwritten. */
int nic_cq_room(struct nic_dev *nd, struct emu_cq *cq, uint32_t idx)
{
    struct nic_cq *nc = cq->nic;
    if (!cq->buf || !cq->ncqe || (nc && nc->failed)) return -1;
    if (cq->dbrec && !cq->ignore_overrun) {
        uint32_t ci = __builtin_bswap32(__atomic_load_n(&cq->dbrec[0], __ATOMIC_ACQUIRE)) & 0xffffff;
        if (((idx - ci) & 0xffffff) >= cq->ncqe) {
            if (nc && !nc->overrun) {
                nc->overrun = true;
                nd->st.async_events++;
                emu_async_event(cq->async_fd, cq->user_handle, NIC_EV_CQ_ERR);
            }
            return -1;
        }
    }
    return 0;
}

/* Writes c at the producer index: the CQE with byte_cnt and CQE format as given (format 3, a
 * compressed session's title, has the session's mini-CQE count as byte_cnt and takes n slots),
 * op_own last; then the completion event if one is armed. */
void nic_cqe_put(struct nic_dev *nd, struct emu_cq *cq, const struct nic_cqe *c, uint32_t byte_cnt,
                 uint8_t format, uint32_t n)
{
    uint32_t slot = cq->pi & (cq->ncqe - 1);
    volatile uint8_t *e = cq->buf + (size_t)slot * cq->cqe_size + (cq->cqe_size == 128 ? 64 : 0);
    uint8_t owner = (cq->pi & cq->ncqe) ? 1 : 0;
    uint8_t tmp[64];
    memset(tmp, 0, sizeof tmp);
    bool err = c->opcode == NIC_CQE_REQ_ERR || c->opcode == NIC_CQE_RESP_ERR;
    uint32_t v;
    v = __builtin_bswap32(c->uidx & 0xffffff); memcpy(tmp + 32, &v, 4);
    if (!err) {
        memcpy(tmp + 36, &c->imm, 4);
        v = __builtin_bswap32(c->flags_rqpn); memcpy(tmp + 24, &v, 4);
        v = __builtin_bswap32(byte_cnt); memcpy(tmp + 44, &v, 4);
        uint64_t ts = __builtin_bswap64(emu_nic_cqe_timestamp(cq));
        memcpy(tmp + 48, &ts, 8);
    } else {
        tmp[54] = c->vendor;
        tmp[55] = c->syndrome;
    }
    /* byte 56: the WQE opcode of a requester CQE, the dropped-packet count of a responder one */
    v = __builtin_bswap32((uint32_t)(c->wqe_opcode | c->hw_drops) << 24 | (c->qpn & 0xffffff));
    memcpy(tmp + 56, &v, 4);
    uint16_t w = __builtin_bswap16(c->wqe_counter);
    memcpy(tmp + 60, &w, 2);
    if (c->inl) {    /* scatter-to-CQE: 64-byte CQE bytes 0..31, or the slot's first half */
        if (cq->cqe_size == 128) { memcpy((void *)(e - 64), c->inl, c->inl_len); format = 2; }
        else { memcpy(tmp, c->inl, c->inl_len); format = 1; }
    }
    memcpy((void *)e, tmp, 63);
    uint8_t op_own = (uint8_t)(c->opcode << 4 | format << 2 | (c->se ? 2 : 0) | owner);
    __atomic_store_n(&e[63], op_own, __ATOMIC_RELEASE);
    cq->pi += n;
    nd->st.cqes += n;
    /* completion event: armed for any completion, or solicited-only and this one is solicited
     * or an error (IB spec 11.4.2.2: errors also satisfy a solicited-only request) */
    if (cq->armed && (!cq->armed_solicited || c->se || err)) fire(nd, cq->nic);
}

int nic_cqe_write(struct nic_dev *nd, struct emu_cq *cq, const struct nic_cqe *c)
{
    if (cq->cqe_comp && cq->nic) return nic_cqe_comp_write(nd, cq, c);
    if (nic_cq_room(nd, cq, cq->pi)) return -1;
    nic_cqe_put(nd, cq, c, c->byte_cnt, 0, 1);
    return 0;
}

int nic_cq_poll_arm(struct nic_dev *nd, struct nic_cq *c)
{
    struct emu_cq *cq = c->cq;
    if (!cq->dbrec) return 0;
    uint32_t word = __builtin_bswap32(__atomic_load_n(&cq->dbrec[1], __ATOMIC_ACQUIRE));
    bool req = false;
    if (word != c->last_dbrec_arm) { c->last_dbrec_arm = word; req = true; }
    if (cq->uar && cq->uar->page) {
        uint64_t u = __atomic_load_n((volatile uint64_t *)(cq->uar->page + 0x20), __ATOMIC_ACQUIRE);
        if (u != c->last_uar_arm) {
            c->last_uar_arm = u;
            u = __builtin_bswap64(u);
            if ((u & 0xffffff) == cq->cqn) { word = (uint32_t)(u >> 32); req = true; }
        }
    }
    if (!req) return 0;
    uint8_t sn = (word >> 28) & 3;
    /* an arm that repeats the sequence number of the last event is stale: the process has not
     * consumed that event yet (libmlx5 increments arm_sn per event read) */
    if (c->event_fired && sn == c->fired_sn) return 1;
    cq->armed = true;
    cq->armed_solicited = (word >> 24) & 1;
    cq->last_arm_sn = sn;
    /* completions the process had not consumed when it armed fire at once (non-solicited) */
    uint32_t ci = word & 0xffffff;
    if (!cq->armed_solicited && ((cq->pi - ci) & 0xffffff) != 0) fire(nd, c);
    return 1;
}
