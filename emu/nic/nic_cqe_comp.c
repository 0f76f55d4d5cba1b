/* nic_cqe_comp.c: CQE compression, as a ConnectX does it for a CQ created with cqe_comp_en
 * (the kernel's create_cq_user sets cqc.cqe_comp_en and cqc.mini_cqe_res_format).
 *
 * What the NIC writes (the basic layout; mlx5/cqe_mini.c, the consumer, cites the readers):
 * a session of N >= 2 CQEs takes the N slots from the producer index on: the title, a full
 * CQE with the fields the N share, byte_cnt = N and CQE format 3 (MLX5_COMPRESSED), in the
 * first slot, written last (op_own with the pass's owner bit); mini-CQE arrays (8 struct
 * mlx5_mini_cqe8 of 8 bytes, include/linux/mlx5/device.h) in slot 1 (array 0) and slot 8k
 * (array k) of the session; the other slots are left as they were.
 *
 * Which CQEs a session takes.  The kernel's commit "IB/mlx5: Add support for CQE compressing"
 * (1cbe6fc86ccf) says only that responder and requester CQEs of 64 bytes can be compressed,
 * with limitations it does not name, and the net/mlx5e series that introduced it that nearly
 * identical CQEs are merged; no public source lists the limitations.  So the rule here is this emulator's choice, kept to what the formats
 * can represent (docs/emulator.md):
 *   - a burst: CQEs of one CQ written during one engine pass (the NIC has them at once); the
 *     held CQEs are written at the end of the pass, when a CQE cannot join, or when the session
 *     has cqe_comp_caps.max_num (emu_nic_cqe_comp_max) mini-CQEs;
 *   - successful requester (MLX5_CQE_REQ) or responder (opcodes 1..4) CQEs of 64 bytes, not
 *     scattered-to-CQE, with the same opcode, SE bit, QPN, user index, flags_rqpn, immediate
 *     and dropped-packet count as the session's first (so WRITE-with-immediate CQEs with
 *     different immediates are not compressed); a responder CQE's wqe_counter must be the
 *     first's + its place (the consumer derives it so, as Linux's mlx5e_decompress_cqe);
 *     a requester's wqe_counter, WQE opcode and byte_cnt go into its mini-CQE (s_wqe_info);
 *   - a responder mini-CQE holds byte_cnt and, by the CQ's format, the RSS hash (0: this NIC
 *     computes none), the checksum (0) or checksum and stride index (0: no striding RQ);
 *   - the session's CQEs share the title's timestamp, taken when it is written (a mini-CQE has
 *     none).
 * Slots: a session takes exactly the slots its CQEs would have taken, so each held CQE's slot
 * is checked for overrun when it is held (nic_cq_room), as when it would have been written. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/mlx5-abi.h>
#include "nic.h"

#define API __attribute__((visibility("default")))
#define ZIP_CAP 256u                 /* mini-CQEs a session may hold at most (the cap's bound) */

struct nic_zip {
    struct nic_cqe title;            /* the first CQE of the session */
    uint32_t n;                      /* CQEs held (0: none) */
    uint8_t  mini[ZIP_CAP][8];       /* each one's struct mlx5_mini_cqe8 */
};

static _Atomic uint32_t cap_max = 64;      /* cqe_compression_max_num: the emulator's choice */
static _Atomic bool cap_stridx = true;     /* mini_cqe_resp_stride_index */

uint32_t emu_nic_cqe_comp_max(void) { return atomic_load_explicit(&cap_max, memory_order_relaxed); }
bool emu_nic_cqe_comp_stridx(void) { return atomic_load_explicit(&cap_stridx, memory_order_relaxed); }

API int mlxd_emu_cqe_comp_set(unsigned max_num, bool stride_index)
{
    if (max_num == 1 || max_num > ZIP_CAP) return -EINVAL;
    atomic_store_explicit(&cap_max, max_num, memory_order_relaxed);
    atomic_store_explicit(&cap_stridx, stride_index, memory_order_relaxed);
    return 0;
}

static bool compressible(const struct nic_cqe *c)
{
    return !c->inl && (c->opcode == NIC_CQE_REQ || (c->opcode >= 1 && c->opcode <= 4));
}

static bool joins(const struct nic_zip *z, const struct nic_cqe *c)
{
    const struct nic_cqe *t = &z->title;
    return compressible(c) && c->opcode == t->opcode && c->se == t->se && c->qpn == t->qpn &&
           c->uidx == t->uidx && c->flags_rqpn == t->flags_rqpn && c->imm == t->imm &&
           c->hw_drops == t->hw_drops &&
           (c->opcode == NIC_CQE_REQ || c->wqe_counter == (uint16_t)(t->wqe_counter + z->n));
}

/* c's mini-CQE: bytes 0..3 s_wqe_info (requester) or hash / checksum / stride index (0 here),
 * bytes 4..7 byte_cnt, big-endian (struct mlx5_mini_cqe8). */
static void mini_of(uint8_t m[8], const struct nic_cqe *c)
{
    memset(m, 0, 8);
    if (c->opcode == NIC_CQE_REQ) {
        m[0] = (uint8_t)(c->wqe_counter >> 8);
        m[1] = (uint8_t)c->wqe_counter;
        m[2] = c->wqe_opcode;
    }
    uint32_t b = __builtin_bswap32(c->byte_cnt);
    memcpy(m + 4, &b, 4);
}

static void write_session(struct nic_dev *nd, struct emu_cq *cq, struct nic_zip *z)
{
    const uint32_t n = z->n, pi = cq->pi;
    for (uint32_t k = 0; k * 8 < n; k++) {
        uint8_t arr[64];
        memset(arr, 0, sizeof arr);
        for (uint32_t j = 0; j < 8 && k * 8 + j < n; j++) memcpy(arr + j * 8, z->mini[k * 8 + j], 8);
        uint32_t slot = (pi + (k ? 8 * k : 1)) & (cq->ncqe - 1);
        memcpy((void *)(cq->buf + (size_t)slot * cq->cqe_size), arr, sizeof arr);
    }
    /* the title last, its op_own with a release store: the arrays are visible before it */
    nic_cqe_put(nd, cq, &z->title, n, 3, n);
}

void nic_cqe_comp_flush(struct nic_dev *nd, struct nic_cq *c)
{
    struct nic_zip *z = c->zip;
    if (!z || !z->n) return;
    if (c->failed) { z->n = 0; return; }      /* a CQ error since they were held: no more CQEs */
    if (z->n == 1) nic_cqe_put(nd, c->cq, &z->title, z->title.byte_cnt, 0, 1);
    else write_session(nd, c->cq, z);
    z->n = 0;
}

int nic_cqe_comp_write(struct nic_dev *nd, struct emu_cq *cq, const struct nic_cqe *c)
{
    struct nic_cq *nc = cq->nic;
    if (!nc->zip && !(nc->zip = calloc(1, sizeof *nc->zip))) {
        /* no memory for a session: write it as a full CQE (always correct) */
        if (nic_cq_room(nd, cq, cq->pi)) return -1;
        nic_cqe_put(nd, cq, c, c->byte_cnt, 0, 1);
        return 0;
    }
    struct nic_zip *z = nc->zip;
    if (nic_cq_room(nd, cq, cq->pi + z->n)) return -1;
    uint32_t max = emu_nic_cqe_comp_max();
    if (z->n && z->n < max && z->n < ZIP_CAP && joins(z, c)) {
        mini_of(z->mini[z->n++], c);
        if (z->n == max) nic_cqe_comp_flush(nd, nc);
        return 0;
    }
    nic_cqe_comp_flush(nd, nc);
    if (!compressible(c) || max < 2) {
        nic_cqe_put(nd, cq, c, c->byte_cnt, 0, 1);
        return 0;
    }
    z->title = *c;
    z->title.inl = NULL;
    mini_of(z->mini[0], c);
    z->n = 1;
    return 0;
}
