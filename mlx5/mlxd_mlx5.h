/* mlxd_mlx5.h: the data path the process owns: posting work entries, ringing the doorbell,
 * posting receives, polling completions, arming CQs; and the replay feeder that plays recorded
 * CQEs into a ring so that poll loops can be tested without a NIC.
 *
 * Objects come from ../uverbs/mlxd_uverbs.h (or mlxd_cq_create_detached below).
 *
 * Hot path: mlxd_qp_post, mlxd_qp_ring, mlxd_qp_receive, mlxd_cq_poll and mlxd_cq_arm make no
 * system call, take no lock, allocate nothing and divide nothing (ring sizes are powers of two).
 * On a full ring or on misuse they return a negative errno; -EAGAIN (ring full) does not update
 * the per-thread message, as it is flow control, not failure; other errors set it.
 *
 * Formats and barriers (rdma-core providers/mlx5/cq.c, qp.c, util/udma_barrier.h, mlx5dv.h):
 *   - ownership: a CQE belongs to software when (op_own >> 4) != MLX5_CQE_INVALID and
 *     (op_own & 1) == !!(ci & ncqe); then a read barrier (lfence on x86-64, dmb oshld on
 *     aarch64) before any other CQE field is read: one barrier per mlxd_cq_poll batch, after
 *     the owner bytes of all its CQEs were read (mlx5/poll.c says why that is enough);
 *   - the CQ doorbell record [0] = htobe32(ci & 0xffffff), once per mlxd_cq_poll call that
 *     consumed at least one CQE (and where a batch changes QP after a run that freed ring
 *     slots), after a write barrier; only then are the freed send/receive slots published;
 *   - sends: WQE stores, write barrier (compiler barrier on x86-64, dmb oshst on aarch64), QP
 *     doorbell record [1] = htobe32(sq_pi & 0xffff), sfence / dsb st, one 64-bit store of the
 *     last WQE's first 8 bytes to the UAR (or a BlueFlame copy of a lone WQE of <= 256 bytes
 *     when the UAR is write-combining), sfence / dsb st, toggle the BlueFlame half;
 *   - receives: data segments, write barrier, QP doorbell record [0] = htobe32(rq_head & 0xffff),
 *     once per mlxd_qp_receive call; no MMIO.
 */
#ifndef MLXD_MLX5_H
#define MLXD_MLX5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mlxd_names.h"
#include "mlxd_uverbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------- */
/* Sends                                                                                      */

enum mlxd_op {
    MLXD_OP_NOP = 0,           /* MLX5_OPCODE_NOP 0x00: no data; completes in order */
    MLXD_OP_WRITE,             /* MLX5_OPCODE_RDMA_WRITE 0x08: local -> remote */
    MLXD_OP_WRITE_IMM,         /* MLX5_OPCODE_RDMA_WRITE_IMM 0x09: + imm; consumes a receive */
    MLXD_OP_SEND,              /* MLX5_OPCODE_SEND 0x0a: local -> the peer's next receive */
    MLXD_OP_SEND_IMM,          /* MLX5_OPCODE_SEND_IMM 0x0b */
    MLXD_OP_READ,              /* MLX5_OPCODE_RDMA_READ 0x10: remote -> local (RC only) */
    MLXD_OP_CMP_SWAP,          /* MLX5_OPCODE_ATOMIC_CS 0x11 (RC only): if the 8 bytes at remote
                                  equal `compare`, write `swap_add`; the original value goes
                                  into local (8 bytes) */
    MLXD_OP_FETCH_ADD,         /* MLX5_OPCODE_ATOMIC_FA 0x12 (RC only): add `swap_add` to the 8
                                  bytes at remote; the original value goes into local */
    MLXD_OP_SEND_INV,          /* MLX5_OPCODE_SEND_INVAL 0x01 (RC only): a SEND whose peer, once
                                  it lands, invalidates the type 2 memory window invalidate_rkey
                                  bound to its QP (IB spec 9.4.1.1.3); the receive completes with
                                  MLXD_WC_WITH_INV and that rkey in imm */
    MLXD_OP_BIND_MW,           /* MLX5_OPCODE_UMR 0x25 (RC/UC): bind (or, length 0, unbind a
                                  type 1) the memory window bind->mw; no packet; completes as
                                  MLXD_WC_BIND_MW.  See mlxd_mw_alloc (uverbs/mlxd_uverbs.h) */
    MLXD_OP_LOCAL_INV,         /* MLX5_OPCODE_UMR 0x25 (RC/UC): unbind the type 2 window
                                  invalidate_rkey bound to this QP; completes as
                                  MLXD_WC_LOCAL_INV */
};

enum mlxd_mw_bind_flags {
    MLXD_MW_ZERO_BASED = 1,    /* type 2 only: peers address the window's first byte as 0
                                  (IBV_ACCESS_ZERO_BASED) */
};

/* What MLXD_OP_BIND_MW binds (rdma-core's struct ibv_mw_bind_info). */
struct mlxd_mw_bind {
    struct mlxd_mw *mw;        /* the window (of the QP's NIC) */
    const struct mlxd_region *region;   /* bound into this region (MLXD_ACCESS_MW_BIND); unused
                                  for an unbind */
    uint64_t addr;             /* the region's IOVA of the window's first byte */
    uint64_t length;           /* bytes, at most 2^31 (one KLM, as libmlx5: else -EOPNOTSUPP);
                                  0 = unbind (type 1) */
    uint32_t access;           /* OR of MLXD_ACCESS_REMOTE_READ / _WRITE / _ATOMIC */
    uint32_t flags;            /* OR of enum mlxd_mw_bind_flags */
};

enum mlxd_entry_flags {
    MLXD_SIGNALED = 1,         /* produce a completion (MLX5_WQE_CTRL_CQ_UPDATE 0x08) */
    MLXD_SOLICITED = 2,        /* set SE in the packet (MLX5_WQE_CTRL_SOLICITED 0x02) */
    MLXD_FENCE = 4,            /* wait for earlier READs (MLX5_WQE_CTRL_FENCE 0x80) */
    MLXD_INLINE = 8,           /* copy local's bytes into the WQE (length <= max_inline);
                                  WRITE/WRITE_IMM/SEND/SEND_IMM only; lkey is not used */
};

/* One work entry.  Unused fields are ignored. */
struct mlxd_entry {
    uint64_t wr_id;            /* returned in the completion */
    uint32_t op;               /* enum mlxd_op */
    uint32_t flags;            /* OR of enum mlxd_entry_flags */
    uint32_t imm;              /* WRITE_IMM/SEND_IMM: host order (sent big-endian) */
    uint32_t num_local;        /* data entries: 0 .. the QP's max_send_sge (one with MLXD_INLINE
                                  and atomics); zero-length entries carry no data segment */
    struct mlxd_local local;   /* the data when num_local <= 1 and sgl is NULL: source
                                  (WRITE/SEND) or destination (READ) bytes; for MLXD_INLINE
                                  local.addr is a process pointer */
    struct mlxd_remote remote; /* WRITE/WRITE_IMM/READ/atomics: peer bytes (addr, rkey); length
                                  unused */
    uint64_t compare;          /* CMP_SWAP: the value expected at remote.addr */
    uint64_t swap_add;         /* CMP_SWAP: the value written; FETCH_ADD: the addend */
    const struct mlxd_local *sgl; /* NULL, or num_local entries gathered in order (sends) or
                                  scattered in order (READ); read only during mlxd_qp_post */
    /* UD QPs only (MLXD_QP_UD; read for no other type, so callers built before these fields
     * existed are unaffected): the destination of a SEND / SEND_IMM */
    const struct mlxd_ah *ah;  /* address handle (mlxd_ah_create) of the destination port */
    uint32_t remote_qpn;       /* destination QP (24 bits) */
    uint32_t remote_qkey;      /* Q_Key sent in the DETH; with the high bit set the QP's own
                                  Q_Key (mlxd_qp_ud_ready) is sent instead (IB spec 10.2.5) */
    /* memory windows (read for MLXD_OP_BIND_MW, MLXD_OP_LOCAL_INV and MLXD_OP_SEND_INV only) */
    const struct mlxd_mw_bind *bind;  /* BIND_MW: what to bind; read only during mlxd_qp_post */
    uint32_t invalidate_rkey;  /* LOCAL_INV / SEND_INV: the window's rkey */
};

/* Writes one WQE into qp's send ring (at the producer index, wrapping) without telling the NIC;
 * call mlxd_qp_ring after a batch.  Records wr_id for the completion.
 * At least one entry in every send_depth entries must be MLXD_SIGNALED, else the ring cannot be
 * reclaimed (IB rule: completions free the ring).
 * Errors: -EAGAIN the ring is full: its WQEBBs are used up, or send_depth entries are
 * outstanding (nothing written); -EINVAL misuse: qp invalid/destroyed, a
 * QP with no send ring, unknown op/flags, READ on UC, READ with MLXD_INLINE, inline longer than
 * max_inline, num_local above the QP's max_send_sge (or above 1 with sgl NULL or with
 * MLXD_INLINE), on a UD QP: an op other than NOP/SEND/SEND_IMM, ah NULL, destroyed or of
 * another NIC, or remote_qpn above 24 bits (a datagram longer than the port MTU is not refused
 * here: it completes with IBV_WC_LOC_LEN_ERR, syndrome 0x01, and the QP's send queue stops (SQE),
 * as on ConnectX); a length above 2^31 - 1 (a data segment's byte_count has 31
 * bits; a length above the port's max_msg_sz completes with IBV_WC_LOC_LEN_ERR, as on the
 * hardware), an atomic on UC, inline, or without exactly one 8-byte local buffer.
 * Atomics (IB spec vol. 1 9.4.5; rdma-core providers/mlx5/qp.c): the local region needs
 * LOCAL_WRITE, the peer's region REMOTE_ATOMIC and the QP connected with peer_access
 * REMOTE_ATOMIC; the 8 bytes are in host byte order on both sides (mlx5_ib offers atomics only
 * with the device in host-endianness mode).  What the NIC reports, not refused here: a remote
 * address not 8-byte aligned completes with IBV_WC_REM_INV_REQ_ERR (syndrome 0x12), a region
 * without REMOTE_ATOMIC with IBV_WC_REM_ACCESS_ERR (0x13).  Masked (extended) atomics are not
 * offered: the emulated device does not advertise them.
 * Memory windows (MLXD_OP_BIND_MW, MLXD_OP_LOCAL_INV; uverbs/mlxd_uverbs.h mlxd_mw_alloc): a bind
 * takes 3 WQEBBs, an unbind/invalidation 2, and the entry after either carries the initiator
 * small fence (libmlx5's next_fence).  Refused with -EINVAL: a UD QP, bind NULL, a freed window
 * or region or one of another NIC, access other than REMOTE_READ/WRITE/ATOMIC, a zero-based type 1
 * window, a zero-length bind of a type 2 window, flags other than SIGNALED/FENCE, SEND_INV on UC;
 * -EOPNOTSUPP: a window over 2 GiB.  What the NIC refuses completes with IBV_WC_MW_BIND_ERR
 * (syndrome 0x06).  The state (RTS) is not checked: the NIC ignores entries of a QP
 * that is not in RTS until it gets there, and flushes them in ERR.
 * Thread rules: one mlxd_qp_post/mlxd_qp_ring of qp at a time; may run while another thread
 * polls the CQ. */
int mlxd_qp_post(struct mlxd_qp *qp, const struct mlxd_entry *e);

/* A memory window bind the way ibv_bind_mw makes one (rdma-core providers/mlx5/qp.c
 * mlx5_bind_mw): one signaled MLXD_OP_BIND_MW entry with wr_id, posted and rung.  Any window
 * type (ibv_bind_mw takes type 1 only; type 2 is the same entry).  Errors as mlxd_qp_post.
 * Thread rules: as mlxd_qp_post. */
int mlxd_mw_bind(struct mlxd_qp *qp, const struct mlxd_mw_bind *b, uint64_t wr_id);

/* Tells the NIC about the WQEs posted since the last ring: doorbell record, then UAR doorbell
 * or BlueFlame (see the top of this file).  Nothing posted: does nothing, returns 0.
 * Errors: -EINVAL qp invalid.  Thread rules: as mlxd_qp_post. */
int mlxd_qp_ring(struct mlxd_qp *qp);

/* ---------------------------------------------------------------------------------------- */
/* Receives                                                                                   */

struct mlxd_recv {
    uint64_t wr_id;            /* returned in the completion */
    uint32_t num_local;        /* 0 (no scatter entry: for WRITE_IMM, which lands by rkey and
                                  only consumes the receive) .. the QP's max_recv_sge */
    uint32_t reserved;
    const struct mlxd_local *local; /* num_local scatter entries (lkey of a LOCAL_WRITE region) */
};

/* Posts n receives (in order) and writes the receive doorbell record once.  All-or-nothing:
 * when fewer than n slots are free (recv_depth receives outstanding at most) nothing is
 * posted and -EAGAIN is returned.
 * A zero-length scatter entry is left out of the WQE (to a ConnectX byte_count 0 means 2 GiB,
 * kernel hw/mlx5/odp.c; libmlx5 skips such entries too, rdma-core providers/mlx5/qp.c).
 * Returns n (>= 0).  Errors: -EAGAIN; -EINVAL qp invalid, no receive ring, n and r NULL,
 * num_local above max_recv_sge, n above recv_depth (it could never succeed), an entry's length
 * of 2^31 or more (a data segment's byte_count has 31 bits, as for sends).
 * Thread rules: one mlxd_qp_receive of qp at a time; may run while another thread polls. */
int mlxd_qp_receive(struct mlxd_qp *qp, const struct mlxd_recv *r, size_t n);

/* Free slots.  Send: the entries of one WQEBB (64 B) mlxd_qp_post would accept now, the
 * smaller of the free WQEBBs and send_depth minus the entries outstanding; receive: recv_depth
 * minus the receives outstanding.  -EINVAL when qp is invalid.
 * Thread rules: the thread that posts to qp (or any thread while none posts): a snapshot, a
 * concurrent poll may free more. */
int mlxd_qp_send_room(const struct mlxd_qp *qp);

/* Posts n receives to a shared receive queue (mlxd_srq_create), in order, and writes its
 * doorbell record once (the BE32 count of receives posted, after a write barrier; rdma-core
 * providers/mlx5/srq.c mlx5_post_srq_recv).  All-or-nothing: fewer than n free WQEs -> nothing
 * posted, -EAGAIN.  Scatter entries as mlxd_qp_receive (at most the SRQ's max_sge; zero-length
 * ones left out).  A completion of one of them names the QP it arrived on; its wr_id is the
 * one given here, and polling it frees the WQE for reuse.  Returns n, or -EINVAL (NULL or
 * destroyed SRQ, n over its depth, bad entries: nothing posted), -EAGAIN.
 * Hot path: no system call, lock, allocation or division.
 * Thread rules: one mlxd_srq_receive of srq at a time; may run while another thread polls the
 * CQs its QPs complete on.  Those CQs are polled by one thread at a time (with all of an SRQ's
 * QPs on one receive CQ, as usual, that is the CQ's own rule): polling links a completed WQE
 * back into the SRQ's free list without a lock. */
int mlxd_srq_receive(struct mlxd_srq *srq, const struct mlxd_recv *r, size_t n);
/* Receives that may be posted now (depth minus outstanding); -EINVAL for an invalid SRQ. */
int mlxd_srq_recv_room(const struct mlxd_srq *srq);
int mlxd_qp_recv_room(const struct mlxd_qp *qp);

/* ---------------------------------------------------------------------------------------- */
/* Completions                                                                                */

/* Completion opcodes: the values of enum ibv_wc_opcode (infiniband/verbs.h). */
enum mlxd_wc_opcode {
    MLXD_WC_SEND = 0,
    MLXD_WC_RDMA_WRITE = 1,
    MLXD_WC_RDMA_READ = 2,
    MLXD_WC_COMP_SWAP = 3,     /* byte_len 8 */
    MLXD_WC_FETCH_ADD = 4,     /* byte_len 8 */
    MLXD_WC_BIND_MW = 5,       /* MLXD_OP_BIND_MW */
    MLXD_WC_LOCAL_INV = 6,     /* MLXD_OP_LOCAL_INV */
    MLXD_WC_NOP = 0x7f,        /* (not in ibv_wc_opcode; IBV_WC_DRIVER* use other numbers) */
    MLXD_WC_RECV = 128,        /* a SEND / SEND_IMM landed in a receive */
    MLXD_WC_RECV_RDMA_WITH_IMM = 129, /* a WRITE_IMM consumed a receive */
};

/* Status: the values of enum ibv_wc_status (infiniband/verbs.h), named MLXD_WC_SUCCESS (0) ...
 * MLXD_WC_GENERAL_ERR (21) in abi/mlxd_names.h (enum mlxd_wc_status, with mlxd_wc_status_name());
 * mapped from the error CQE's syndrome as libmlx5 does (mlxd_syndrome_to_wc_status()). */

enum mlxd_wc_flags {
    MLXD_WC_WITH_IMM = 1,      /* imm is valid (RESP_WR_IMM / RESP_SEND_IMM) */
    MLXD_WC_SOLICITED = 2,     /* the SE bit was set (op_own bit 1) */
    MLXD_WC_GRH = 4,           /* receives: the first 40 bytes of the receive hold the GRH (UD;
                                  on RoCE v2 over IPv4 its bytes 20..39 are the IPv4 header):
                                  the CQE's flags_rqpn bits 29:28 are not 0, as libmlx5 decides
                                  IBV_WC_GRH (rdma-core providers/mlx5/cq.c handle_responder) */
    MLXD_WC_WITH_INV = 8,      /* a SEND with Invalidate landed (MLX5_CQE_RESP_SEND_INV): imm
                                  holds the rkey it invalidated (ibv_wc.invalidated_rkey) */
};
/* Receives of a UD QP: bits 31:8 of flags hold the CQE's source QPN (flags_rqpn bits 23:0,
 * struct mlx5_cqe64 in mlx5dv.h), the sender's QP of the datagram (ibv_wc.src_qp); read it with
 * mlxd_completion_src_qp().  Like ibv_wc's src_qp and IBV_WC_GRH (which ibv_poll_cq(3)
 * documents as valid for UD QPs only), they are read only for UD QPs (and for a CQE of no known QP, as in a
 * replay, whose QP type is unknown): an RC or UC QP's completions have 0 there and no
 * MLXD_WC_GRH, and its receives do not pay for the load (issue 18).  (Kept in flags so that
 * struct mlxd_completion keeps its 56 bytes and binaries built against earlier headers keep
 * working.) */
#define MLXD_WC_SRC_QP_SHIFT 8

struct mlxd_completion {
    uint64_t wr_id;            /* of the entry / receive (per-QP table indexed by wqe_counter);
                                  for a CQE of no known QP (replay), the wqe_counter */
    uint64_t timestamp;        /* raw HW clock (CQE timestamp, device ticks) */
    struct mlxd_qp *qp;        /* the local QP, NULL when unknown (replay, destroyed) */
    uint32_t status;           /* ibv_wc_status value, MLXD_WC_SUCCESS = 0 */
    uint32_t opcode;           /* enum mlxd_wc_opcode (meaningful when status is 0) */
    uint32_t byte_len;         /* responder: bytes received; READ: bytes read; else 0 */
    uint32_t imm;              /* host order, when flags & MLXD_WC_WITH_IMM */
    uint32_t qpn;              /* local QPN (24 bits) */
    uint32_t flags;            /* OR of enum mlxd_wc_flags; receives: source QPN in bits 31:8 */
    uint16_t wqe_counter;      /* the CQE's wqe_counter */
    uint8_t  syndrome;         /* error CQEs: MLX5_CQE_SYNDROME_* (e.g. 0x13 remote access) */
    uint8_t  vendor_syndrome;  /* error CQEs: vendor_err_synd */
    uint8_t  cqe_opcode;       /* raw MLX5_CQE_* opcode (op_own >> 4) */
    uint8_t  wqe_opcode;       /* requester CQEs: the WQE's MLX5_OPCODE_* (sop_drop_qpn >> 24) */
    uint8_t  hw_drops;         /* responder CQEs: the packets the NIC dropped before this one
                                  for lack of receives (sop_drop_qpn >> 24); else 0 */
    uint8_t  reserved;
};

/* The source QP of a receive completion: the sending QP of a UD datagram (24 bits; 0 for
 * requester and error completions and for completions of RC and UC QPs). */
static inline uint32_t mlxd_completion_src_qp(const struct mlxd_completion *c)
{
    return c->flags >> MLXD_WC_SRC_QP_SHIFT;
}

/* Consumes up to max ready CQEs of cq into out[0..n) and returns n (0 when none is ready).
 * Writes the consumer-index doorbell record once when n > 0 (once more where the batch changes
 * QP after a run that freed ring slots).  For requester completions it frees the send ring up to the completed
 * WQE; for responder ones, one receive slot each; ring slots are freed only after the CQE
 * slots of their completions are back with the NIC, and mlxd_qp_destroy removes a QP's
 * completions nobody polled, so a CQ of at least the send_depth + recv_depth of its QPs never
 * overruns (the sizing rule of ibv_create_cq(3)).
 * An error CQE is one completion among the others: the CQEs after it in the same batch are
 * returned too.
 * Errors: -EINVAL cq invalid/destroyed, out NULL with max > 0, max < 0 (max 0 returns 0).
 * Thread rules: one mlxd_cq_poll/mlxd_cq_arm of cq at a time.
 *
 * Cost: a call of mlxd_cq_poll(cq, out, max) compiles to the inline ownership test below
 * (mlxd__cq_poll_inline): an empty CQ costs about 20 instructions, no call and no barrier.
 * When the next CQE is the software's it calls mlxd__cq_poll_ready, which consumes the batch
 * with one read barrier (docs/performance.md).  The symbol mlxd_cq_poll exists too (for
 * function pointers, FFI and binaries built against older headers): same behaviour. */
int mlxd_cq_poll(struct mlxd_cq *cq, struct mlxd_completion *out, int max);

/* --- internals of the inline mlxd_cq_poll: not API, may change with the library's soname --- */

/* The first fields of the library's struct mlxd_cq (uverbs/driver.h; mlx5/poll.c proves the
 * offsets with static assertions).  may_alias: read through this type, not through the
 * private one, so type-based alias analysis must not reorder it with the library's stores. */
typedef struct __attribute__((may_alias)) mlxd__cq_head {
    const volatile uint8_t *buf;     /* ncqe CQEs of 64 bytes */
    uint32_t ci;                     /* consumer index (free-running) */
    uint32_t ncqe;                   /* power of two */
    const volatile uint32_t *dbrec;
    const void *qp_table;
    uint32_t state;                  /* MLXD__CQ_LIVE while usable */
} mlxd__cq_head;
#define MLXD__CQ_LIVE 0x4c495645u

/* Out of line: the CQE at ci is the software's, cq is live, out != NULL, max >= 1. */
int mlxd__cq_poll_ready(struct mlxd_cq *cq, struct mlxd_completion *out, int max);
/* Out of line: every other case (argument checks, max <= 0); full mlxd_cq_poll semantics. */
int mlxd__cq_poll_checked(struct mlxd_cq *cq, struct mlxd_completion *out, int max);

/* The owner byte is read as an atomic: relaxed (a plain byte load), acquire under TSan, as
 * the library's barrier.h does; nothing else of the CQE is read here, so no barrier. */
#if defined(__SANITIZE_THREAD__)
#define MLXD__OWNER_LOAD __ATOMIC_ACQUIRE
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MLXD__OWNER_LOAD __ATOMIC_ACQUIRE
#endif
#endif
#ifndef MLXD__OWNER_LOAD
#define MLXD__OWNER_LOAD __ATOMIC_RELAXED
#endif

static inline int mlxd__cq_poll_inline(struct mlxd_cq *cq, struct mlxd_completion *out, int max)
{
    const mlxd__cq_head *h = (const mlxd__cq_head *)(const void *)cq;
    if (__builtin_expect(h != NULL && h->state == MLXD__CQ_LIVE && out != NULL && max > 0, 1)) {
        uint32_t ci = h->ci, ncqe = h->ncqe;
        /* op_own = byte 63 of the CQE at ci & (ncqe - 1) (struct mlx5_cqe64, mlx5dv.h).  The
         * CQE is the software's when opcode (bits 7:4) != MLX5_CQE_INVALID (0xF) and the owner
         * bit (bit 0) == !!(ci & ncqe).  With x = op_own ^ !!(ci & ncqe) that is: bit 0 of x
         * clear and x < 0xF0; rotating x right by one puts bit 0 on top, so both tests are
         * one unsigned compare: ror8(x, 1) < 0x78. */
        uint8_t op = __atomic_load_n(h->buf + ((size_t)(ci & (ncqe - 1)) << 6) + 63, MLXD__OWNER_LOAD);
        uint8_t x = (uint8_t)(op ^ ((ci & ncqe) != 0));
        if ((uint8_t)(x >> 1 | x << 7) >= 0x78) return 0;
        return mlxd__cq_poll_ready(cq, out, max);
    }
    return mlxd__cq_poll_checked(cq, out, max);
}
#ifndef MLXD__NO_INLINE_POLL
#define mlxd_cq_poll(cq, out, max) mlxd__cq_poll_inline((cq), (out), (max))
#endif

/* Asks for one completion event for the next CQE (solicited_only: the next solicited or error
 * CQE): CQ doorbell record [1] = htobe32(sn << 28 | cmd | ci), sfence, 64-bit store of
 * htobe64(word << 32 | cqn) to UAR+0x20, sfence (rdma-core providers/mlx5/cq.c mlx5_arm_cq).
 * The event arrives through mlxd_wait.  After an event: arm again, then poll until empty (no
 * CQE is missed).
 * Errors: -EINVAL cq invalid or created without opts.events (or detached).
 * Thread rules: one mlxd_cq_poll/mlxd_cq_arm of cq at a time. */
int mlxd_cq_arm(struct mlxd_cq *cq, bool solicited_only);

/* ---------------------------------------------------------------------------------------- */
/* Detached CQs and replay                                                                    */

/* A CQ ring owned by this process with no NIC behind it (nothing writes it but the replay
 * feeder or a test): same layout, same poll loop (completions carry qp NULL and wr_id =
 * wqe_counter).  entries (1 .. 1<<22) is rounded up to a power of two (at least 2).
 * Destroy with mlxd_cq_destroy, which frees it at once: a detached CQ has no NIC to keep a
 * tombstone, so the pointer is invalid afterwards (unlike a NIC's CQ).  Not armable.
 * Errors: -EINVAL, -ENOMEM.  Any thread. */
int mlxd_cq_create_detached(uint32_t entries, struct mlxd_cq **out);

/* The same with options: cqe_comp makes the poll loop expand compressed sessions written into
 * the ring (enum mlxd_cqe_comp of mlxd_uverbs.h, the mini-CQE layout of mlxd_cq_opts.cqe_comp):
 * for tests and decoders of recorded rings.  opts NULL = none.  Errors: those above; -EINVAL
 * cqe_comp not 0 or one format bit, opts->sz too small or a larger one with non-zero unknown
 * bytes.  Any thread. */
struct mlxd_detached_cq_opts {
    size_t   sz;               /* sizeof(struct mlxd_detached_cq_opts) */
    uint32_t cqe_comp;         /* 0, MLXD_CQE_COMP_HASH, _CSUM or _CSUM_STRIDX */
};
int mlxd_cq_create_detached_opts(uint32_t entries, const struct mlxd_detached_cq_opts *opts,
                                 struct mlxd_cq **out);

/* The ring of cq for producers outside the library (tests, the replay feeder): ring = ncqe
 * CQEs of 64 bytes, dbrec = the 2-word doorbell record (dbrec[0] = BE consumer index), both
 * page aligned and owned by the library.  Returns 0 or -EINVAL.  Any thread; a producer must
 * follow the NIC's protocol (fields, write barrier, op_own last; never pass the consumer). */
int mlxd_cq_ring(struct mlxd_cq *cq, volatile void **ring, uint32_t *ncqe,
                 volatile uint32_t **dbrec);

struct mlxd_replay_opts {
    size_t   sz;               /* sizeof(struct mlxd_replay_opts); a larger sz from a newer
                                  header is accepted when the fields this library does not know
                                  are zero (else -EINVAL) */
    bool     paced;            /* true: keep the recorded time between CQEs; false: full speed */
    uint32_t loops;            /* times to play the fixture; 0 = 1 */
};

struct mlxd_replay;

/* Starts a feeder thread that writes the CQEs of the fixture file `path` (abi/mlxd_fixture.h
 * format) into cq's ring as the NIC would: at producer index pi it writes the CQE's 64 bytes
 * with byte 63's owner bit = !!(pi & ncqe) and op_own written last after a write barrier; it
 * never overtakes the consumer (waits while pi - ci == ncqe, ci read from the CQ doorbell
 * record only when the value read last leaves no room, not per CQE).  cq must be detached (a NIC's CQ is the NIC's).  opts may be NULL (defaults).
 * Errors (messages start "mlxd_replay_start: "): -EINVAL misuse (cq not a live detached CQ, path
 * or out NULL, opts->sz too small, or larger with non-zero unknown bytes); the fixture reader's
 * errors (mlxd_fixture_load's errno, e.g. -ENOENT; the message names the file); -ENOMEM;
 * -errno of pthread_create.  Nothing is started on error.  Any thread. */
int mlxd_replay_start(struct mlxd_cq *cq, const char *path, const struct mlxd_replay_opts *opts,
                      struct mlxd_replay **out);

/* Waits for the feeder to finish (or stops it when stop is true), frees it and returns the CQEs
 * it wrote (>= 0); -EINVAL when rp is NULL.  Call once, before destroying the CQ; the feeder
 * waits for room while nobody polls, so finish(rp, false) needs a consumer.  Any thread. */
long mlxd_replay_finish(struct mlxd_replay *rp, bool stop);

/* ---------------------------------------------------------------------------------------- */
/* Recording                                                                                  */

struct mlxd_record_opts {
    size_t   sz;               /* sizeof(struct mlxd_record_opts); larger from a newer header is
                                  accepted when the fields this library does not know are zero */
    uint32_t ring_entries;     /* CQEs the ring between the poll loop and the writer thread
                                  holds: a power of two up to 1 << 22; 0 = 4096 (208 bytes each) */
    const char *source;        /* the fixture's source line (1..255 bytes, one line); NULL: one
                                  naming the CQ */
    /* Optional: called by the poll loop for each CQE it records; returns true after copying the
     * 128-byte metadata block of the CQE's frame into md (written as an 'md' line before the
     * record: what a receiver replay needs).  Must not block. */
    bool   (*metadata)(void *ctx, const uint8_t cqe[64], uint8_t md[128]);
    void    *metadata_ctx;
};

struct mlxd_record_stats {
    uint64_t recorded;         /* CQEs copied into the ring by the poll loop */
    uint64_t written;          /* of those, written to the file */
    uint64_t overflow;         /* CQEs consumed but not recorded: the ring was full */
};

struct mlxd_recorder;

/* Records every CQE mlxd_cq_poll consumes from cq (any CQ: a NIC's or a detached one) into the
 * fixture file path (abi/mlxd_fixture.h, version 2: cqe_size 64, ring_size and cqn of cq; each
 * record is the 64 bytes as the poll loop read them, with the time since the previous record:
 * CLOCK_MONOTONIC, one timestamp per mlxd_cq_poll batch).  The poll loop only copies into a
 * preallocated ring (no lock, no system call: clock_gettime is the vDSO's); a writer thread
 * writes the file.  When the ring is full the poll loop does not wait: the CQEs are counted
 * (overflow) and the count is written into the file's header ('overflow N') at stop.
 * Recording costs the poll loop its general path (no hot QP while recording); with no recorder
 * the hot path is unchanged (docs/performance.md).
 * Errors: -EINVAL (cq not live, path/out NULL, bad opts), -EBUSY (cq already recorded), the
 * fixture writer's errno (the message names path), -ENOMEM, pthread_create's errno.
 * Thread rules: call start and stop while no mlxd_cq_poll of cq runs (on the polling thread,
 * or before polling starts and after it ends); mlxd_cq_destroy refuses a recorded CQ (-EBUSY). */
int mlxd_cq_record_start(struct mlxd_cq *cq, const char *path, const struct mlxd_record_opts *opts,
                         struct mlxd_recorder **out);

/* Counters so far (any thread; a snapshot). */
void mlxd_recorder_stats(const struct mlxd_recorder *r, struct mlxd_record_stats *st);

/* Stops recording: the writer writes what the ring holds, the overflow count goes into the
 * header, the file is closed and r freed; *st (may be NULL) gets the final counters.
 * Returns 0, -EINVAL (r NULL), or the errno of the first write/close that failed (the message
 * names the call; the file is then incomplete).  Thread rules: as mlxd_cq_record_start. */
int mlxd_cq_record_stop(struct mlxd_recorder *r, struct mlxd_record_stats *st);

#ifdef __cplusplus
}
#endif
#endif
