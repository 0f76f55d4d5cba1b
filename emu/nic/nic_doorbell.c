/* nic_doorbell.c: the send doorbell, as a ConnectX receives it.
 *
 * A ConnectX starts a send queue only when a write reaches its UAR doorbell register: the first
 * 8 bytes of the last posted WQE's control segment (opmod_idx_opcode, qpn_ds), alone or as the
 * head of a BlueFlame copy of that WQE (rdma-core providers/mlx5/qp.c post_send_db,
 * mlx5_bf_copy).  The doorbell record's send counter is for recovery, not a trigger.  So the
 * engine runs a send queue only up to the last index rung for it.
 *
 * Where a ring may land: any blue-flame register (bfreg) of the QP's UAR page.  A 4 KiB UAR has
 * four 512-byte bfregs at 0x800 + 0x200 * k, each two 256-byte halves a driver alternates
 * between (bf->offset ^= bf->buf_size); the ring names its QP (qpn_ds), and the device takes it
 * for that QP when the QP's context names this UAR (uar_page), whichever bfreg carried it.  The
 * kernel knows a QP's bfreg only for its static bfregs (hw/mlx5/qp.c alloc_bfreg /
 * bfregn_to_uar_index, emu_qp.bf_off); with MLX5_QP_FLAG_UAR_PAGE_INDEX it is told the UAR page
 * alone and the library picks the bfreg in it (rdma-core providers/mlx5/verbs.c
 * mlx5_insert_dyn_uuars: two BlueFlame bfregs at 0x800 and 0xa00 per BF page, four 256-byte
 * doorbells from 0x800 on an NC page).  So the engine watches the first 8 bytes of all eight
 * 256-byte halves of the bfreg area; a ring naming a QP of another UAR page, or none, is dropped
 * (a process cannot ring another's QP).
 *
 * A register write is an event; the engine sees memory.  It takes each ring out of its half with
 * an atomic exchange (0 is never a ring: qpn_ds always has a non-zero size), so two equal rings
 * are two rings.  A later ring of the same QP covers an earlier one it overwrote (the index only
 * grows).  A ring of another QP on a shared bfreg may overwrite one before the engine reads it
 * (the hardware sees both writes): then each other QP of that bfreg is run up to its doorbell
 * record, the recovery the record exists for (docs/emulator.md, known differences).  A QP's
 * bfreg is the kernel's when it gave one; otherwise the one its rings came in (a library keeps a
 * QP on one bfreg), any of the page until its first ring is seen. */
#include <string.h>
#include "nic.h"

#define BF_AREA   0x800u     /* MLX5_BF_OFFSET: the first bfreg of a UAR */
#define BF_HALVES 8u         /* 4 bfregs x 2 halves of 256 bytes, to the end of the 4 KiB UAR */

static volatile uint64_t *bf_half(const struct emu_qp *qp, unsigned half)
{
    return (volatile uint64_t *)(qp->uar->page + BF_AREA + half * 0x100);
}

/* The bfregs (bit k: UAR + 0x800 + 0x200 * k) a QP's rings may come in before any is seen. */
uint8_t nic_doorbell_bfregs(const struct emu_qp *qp)
{
    return qp->bf_off >= BF_AREA ? (uint8_t)(1u << ((qp->bf_off - BF_AREA) / 0x200 & 3)) : 0xf;
}

static void rung_to(struct nic_qp *q, uint16_t pi)
{
    if ((int16_t)(pi - q->sq_rung) > 0) q->sq_rung = pi;
}

/* One ring taken from bfreg k of q's UAR page: the QP it names (of this UAR) advances to the end
 * of the WQE it names (idx + the WQE's WQEBBs from ds); the other QPs of that bfreg to their
 * doorbell records. */
static void take_ring(struct nic_qp *q, unsigned k, uint64_t v)
{
    uint8_t b[8];
    memcpy(b, &v, 8);
    uint32_t opmod = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    uint32_t qpn_ds = (uint32_t)b[4] << 24 | (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
    uint32_t ds = qpn_ds & 0x3f;
    uint16_t end = (uint16_t)((uint16_t)(opmod >> 8) + (ds ? (ds + 3) / 4 : 1));
    for (struct nic_qp *o = q->nd->qps; o; o = o->next) {
        struct emu_qp *p = o->qp;
        if (p->uar != q->qp->uar || p->state == NIC_QPS_RESET) continue;
        if (p->qpn == qpn_ds >> 8) {
            /* The driver wrote its record before the ring (post_send_db).  The engine sees the
             * UAR page through a mapping of its own, a different address from the process's, so
             * this acquire of the record (the address the driver released) is what orders the
             * WQE reads after the driver's writes for a memory model checker (ThreadSanitizer);
             * the value is not used: the ring alone says how far to run. */
            if (p->dbrec) (void)__atomic_load_n(&p->dbrec[1], __ATOMIC_ACQUIRE);
            o->bfregs = (uint8_t)(1u << k);
            rung_to(o, end);
        } else if (p->dbrec && (o->bfregs & 1u << k))
            rung_to(o, (uint16_t)__builtin_bswap32(__atomic_load_n(&p->dbrec[1], __ATOMIC_ACQUIRE)));
    }
}

int nic_doorbell_scan(struct nic_qp *q)
{
    struct emu_qp *qp = q->qp;
    if (!qp->uar || !qp->uar->page || !qp->sq_wqe_cnt) return 0;
    int rings = 0;
    for (unsigned h = 0; h < BF_HALVES; h++) {
        volatile uint64_t *r = bf_half(qp, h);
        /* load first: no store into the driver's cache line unless it rang */
        if (!__atomic_load_n(r, __ATOMIC_RELAXED)) continue;
        /* acquire: the WQEs and the record were written before the ring (mmio_wc_start) */
        uint64_t v = __atomic_exchange_n(r, 0, __ATOMIC_ACQUIRE);
        if (!v) continue;
        take_ring(q, h / 2, v);
        rings++;
    }
    return rings;
}
