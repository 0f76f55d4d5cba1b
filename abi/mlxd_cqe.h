/* mlxd_cqe.h: decoding one mlx5 completion queue entry (CQE).
 *
 * The accessors take the 64-byte CQE as `const void *` (any alignment; a CQE read from a ring,
 * a dump or a fixture) and return host-order values; the fields are big-endian in memory.
 * For a CQ with 128-byte CQEs pass a pointer to the SECOND half of the slot (slot + 64).
 * They are static inline, read only the bytes they name, make no system calls and never fail:
 * they are safe on the poll loop's hot path and from any thread.
 *
 * Layout: struct mlx5_cqe64 and struct mlx5_err_cqe in rdma-core's <infiniband/mlx5dv.h>
 * (offsets in mlxd_abi.h, proven by abi/abi_assert.c); field meanings from
 * rdma-core providers/mlx5/cq.c (get_sw_cqe, mlx5_parse_cqe, handle_good_req, handle_responder,
 * mlx5_handle_error_cqe).
 *
 * The poll loop must read op_own (mlxd_cqe_sw_owned) first and issue a read barrier before
 * any other accessor (rdma-core providers/mlx5/cq.c mlx5_get_next_cqe,
 * udma_from_device_barrier); these accessors contain no barrier.
 */
#ifndef MLXD_CQE_H
#define MLXD_CQE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "mlxd_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Big-endian loads from any alignment (memcpy + byte swap; one load each at -O2). */
static inline uint16_t mlxd_load_be16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap16(v);
#endif
    return v;
}
static inline uint32_t mlxd_load_be32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}
static inline uint64_t mlxd_load_be64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}
static inline uint8_t mlxd_cqe_u8(const void *cqe, unsigned off)
{
    return ((const uint8_t *)cqe)[off];
}

/* ---- op_own (byte 63) -------------------------------------------------------------------- */
/* The CQE opcode, op_own bits 7:4 (enum mlxd_cqe_opcode). */
static inline uint8_t mlxd_cqe_opcode(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_CQE_OFF_OP_OWN) >> MLXD_CQE_OPCODE_SHIFT;
}
/* The owner bit, op_own bit 0: toggles on every pass of the hardware over the ring. */
static inline uint8_t mlxd_cqe_owner(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_CQE_OFF_OP_OWN) & MLXD_CQE_OWNER_MASK;
}
/* The solicited-event bit, op_own bit 1. */
static inline uint8_t mlxd_cqe_solicited(const void *cqe)
{
    return (mlxd_cqe_u8(cqe, MLXD_CQE_OFF_OP_OWN) >> MLXD_CQE_SE_SHIFT) & 1u;
}
/* The format, op_own bits 3:2 (enum mlxd_cqe_format): where inline-scattered data is. */
static inline uint8_t mlxd_cqe_format(const void *cqe)
{
    return (mlxd_cqe_u8(cqe, MLXD_CQE_OFF_OP_OWN) >> MLXD_CQE_FORMAT_SHIFT) & MLXD_CQE_FORMAT_MASK;
}
/* True for REQ_ERR (13) and RESP_ERR (14): the CQE then has the struct mlx5_err_cqe layout and
 * the error accessors below apply. */
static inline bool mlxd_cqe_is_error(const void *cqe)
{
    uint8_t op = mlxd_cqe_opcode(cqe);
    return op == MLXD_CQE_REQ_ERR || op == MLXD_CQE_RESP_ERR;
}
/* True when the CQE at consumer index ci belongs to software: its opcode is not INVALID and its
 * owner bit equals the pass parity of ci, (ci & ncqe) != 0.  ncqe is the ring size in CQEs, a
 * power of two.  Source: rdma-core providers/mlx5/cq.c get_sw_cqe. */
static inline bool mlxd_cqe_sw_owned(const void *cqe, uint32_t ci, uint32_t ncqe)
{
    uint8_t op_own = mlxd_cqe_u8(cqe, MLXD_CQE_OFF_OP_OWN);
    return (op_own >> MLXD_CQE_OPCODE_SHIFT) != MLXD_CQE_INVALID &&
           (op_own & MLXD_CQE_OWNER_MASK) == ((ci & ncqe) ? 1u : 0u);
}

/* ---- fields of a successful CQE (struct mlx5_cqe64) ------------------------------------------ */
/* Bytes 44..47: bytes received (responder), or the RDMA READ / atomic length (requester). */
static inline uint32_t mlxd_cqe_byte_cnt(const void *cqe)
{
    return mlxd_load_be32((const uint8_t *)cqe + MLXD_CQE_OFF_BYTE_CNT);
}
/* Bytes 36..39 as stored: the immediate data of a SEND_IMM / WRITE_IMM in network byte order,
 * exactly as verbs hands it to applications (ibv_wc.imm_data is __be32).  Memory-copied, not
 * swapped: on a little-endian host the numeric value is byte-swapped. */
static inline uint32_t mlxd_cqe_imm_raw(const void *cqe)
{
    uint32_t v;
    memcpy(&v, (const uint8_t *)cqe + MLXD_CQE_OFF_IMM_INVAL_PKEY, sizeof v);
    return v;
}
/* Bytes 36..39 in host order: the immediate as the sender's number (the sender wrote it
 * big-endian), or the invalidated rkey of a SEND_INV (RESP_SEND_INV). */
static inline uint32_t mlxd_cqe_imm(const void *cqe)
{
    return mlxd_load_be32((const uint8_t *)cqe + MLXD_CQE_OFF_IMM_INVAL_PKEY);
}
/* Bytes 32..35 bits 23:0: the QP's user index (cqe_version 1) or the SRQ number (version 0). */
static inline uint32_t mlxd_cqe_srqn_uidx(const void *cqe)
{
    return mlxd_load_be32((const uint8_t *)cqe + MLXD_CQE_OFF_SRQN_UIDX) & MLXD_QPN_MASK;
}
/* Bytes 48..55: the completion timestamp in HCA clock ticks (free-running device clock; the
 * tick rate is the device's core clock, not nanoseconds). */
static inline uint64_t mlxd_cqe_timestamp(const void *cqe)
{
    return mlxd_load_be64((const uint8_t *)cqe + MLXD_CQE_OFF_TIMESTAMP);
}
/* Byte 56 (sop_drop_qpn bits 31:24, the "drop" of the field's name) of a responder CQE: the
 * hardware drop counter.  Its exact counting rule is not in the public headers; report it, do not
 * rely on it.  In a requester CQE the same byte is the WQE opcode: use mlxd_cqe_wqe_opcode(). */
static inline uint8_t mlxd_cqe_drop_counter(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_CQE_OFF_SOP_DROP_QPN);
}
/* Byte 56 of a requester CQE (REQ, REQ_ERR): the opcode of the completed WQE
 * (enum mlxd_wqe_opcode). */
static inline uint8_t mlxd_cqe_wqe_opcode(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_CQE_OFF_SOP_DROP_QPN);
}
/* Bytes 57..59 (sop_drop_qpn bits 23:0): the local QP number the completion belongs to. */
static inline uint32_t mlxd_cqe_qpn(const void *cqe)
{
    return mlxd_load_be32((const uint8_t *)cqe + MLXD_CQE_OFF_SOP_DROP_QPN) & MLXD_QPN_MASK;
}
/* Bytes 60..61: the 16-bit index of the completed WQE (requester: SQ index of the WQE's first
 * WQEBB; responder: RQ index).  Mask with the ring size minus one to index the ring. */
static inline uint16_t mlxd_cqe_wqe_counter(const void *cqe)
{
    return mlxd_load_be16((const uint8_t *)cqe + MLXD_CQE_OFF_WQE_COUNTER);
}
/* Byte 62: the CQE signature (0 unless CQE signatures are enabled). */
static inline uint8_t mlxd_cqe_signature(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_CQE_OFF_SIGNATURE);
}
/* Bytes 24..27 bits 23:0: the remote (source) QPN; meaningful for UD receives only. */
static inline uint32_t mlxd_cqe_src_qpn(const void *cqe)
{
    return mlxd_load_be32((const uint8_t *)cqe + MLXD_CQE_OFF_FLAGS_RQPN) & MLXD_QPN_MASK;
}

/* ---- fields of an error CQE (struct mlx5_err_cqe; opcodes REQ_ERR / RESP_ERR) -------------- */
/* Byte 55: the syndrome (enum mlxd_syndrome); mlxd_syndrome_to_wc_status() in mlxd_names.h gives
 * the ibv_wc_status number that verbs would report. */
static inline uint8_t mlxd_cqe_syndrome(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_ERR_CQE_OFF_SYNDROME);
}
/* Byte 54: the vendor syndrome (vendor_err_synd; verbs reports it as ibv_wc.vendor_err).  Its
 * values are not publicly documented except MLXD_VENDOR_SYND_ODP_PFAULT. */
static inline uint8_t mlxd_cqe_vendor_syndrome(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_ERR_CQE_OFF_VENDOR_SYND);
}
/* Byte 52: the hardware error syndrome.  MLNX_OFED, UCX, SPDK and DOCA name it hw_err_synd;
 * upstream rdma-core and the Linux kernel call it reserved (part of rsvd1 in mlx5_err_cqe).
 * Meaning not publicly documented: report it, do not interpret it. */
static inline uint8_t mlxd_cqe_hw_err_synd(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_ERR_CQE_OFF_HW_ERR_SYND);
}
/* Byte 53: the hardware syndrome type.  MLNX_OFED, UCX, SPDK and DOCA name it hw_synd_type;
 * upstream rdma-core and the Linux kernel call it reserved.  Not publicly documented. */
static inline uint8_t mlxd_cqe_hw_synd_type(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_ERR_CQE_OFF_HW_SYND_TYPE);
}
/* Byte 56 (s_wqe_opcode_qpn bits 31:24): the opcode of the WQE that failed (requester errors;
 * responder errors usually carry 0). */
static inline uint8_t mlxd_cqe_err_wqe_opcode(const void *cqe)
{
    return mlxd_cqe_u8(cqe, MLXD_ERR_CQE_OFF_S_WQE_OPCODE_QPN);
}
/* Bytes 57..59 (s_wqe_opcode_qpn bits 23:0): the QPN of the failing queue. */
static inline uint32_t mlxd_cqe_err_qpn(const void *cqe)
{
    return mlxd_load_be32((const uint8_t *)cqe + MLXD_ERR_CQE_OFF_S_WQE_OPCODE_QPN) & MLXD_QPN_MASK;
}
/* Bytes 32..35 bits 23:0 of an error CQE: the SRQ number (or user index). */
static inline uint32_t mlxd_cqe_err_srqn(const void *cqe)
{
    return mlxd_load_be32((const uint8_t *)cqe + MLXD_ERR_CQE_OFF_SRQN) & MLXD_QPN_MASK;
}

/* ---- everything at once, for tools and tests (not for the hot path) ------------------------- */
struct mlxd_cqe_decoded {
    uint8_t  opcode;          /* op_own >> 4 (enum mlxd_cqe_opcode) */
    uint8_t  owner;           /* op_own bit 0 */
    uint8_t  solicited;       /* op_own bit 1 */
    uint8_t  format;          /* op_own bits 3:2 (enum mlxd_cqe_format) */
    uint8_t  op_own;          /* byte 63, raw */
    bool     is_error;        /* opcode REQ_ERR or RESP_ERR: the err_* fields are valid */
    bool     is_requester;    /* opcode REQ or REQ_ERR: wqe_opcode is valid */
    /* struct mlx5_cqe64 view (for error CQEs these bytes are reserved and shown raw) */
    uint32_t byte_cnt;        /* bytes 44..47 */
    uint32_t imm_raw;         /* bytes 36..39 as stored (network order) */
    uint32_t imm;             /* bytes 36..39 host order */
    uint32_t srqn_uidx;       /* bytes 32..35, 24 bits */
    uint64_t timestamp;       /* bytes 48..55, HCA ticks */
    uint8_t  drop_counter;    /* byte 56 (responder CQEs) */
    uint8_t  wqe_opcode;      /* byte 56 (requester CQEs; also s_wqe_opcode of error CQEs) */
    uint32_t qpn;             /* bytes 57..59 */
    uint16_t wqe_counter;     /* bytes 60..61 */
    uint8_t  signature;       /* byte 62 */
    uint32_t src_qpn;         /* bytes 24..27, 24 bits (UD) */
    /* struct mlx5_err_cqe view (valid when is_error) */
    uint8_t  syndrome;        /* byte 55 */
    uint8_t  vendor_syndrome; /* byte 54 */
    uint8_t  hw_err_synd;     /* byte 52 (MLNX_OFED name; reserved upstream) */
    uint8_t  hw_synd_type;    /* byte 53 (MLNX_OFED name; reserved upstream) */
    int      wc_status;       /* ibv_wc_status number verbs would report (0 = success) */
};

/* Decodes every field of one CQE.  cqe points to cqe_size bytes: 64, or 128 for a whole 128-byte
 * slot (then the fields are read from its second half, bytes 64..127).  Fills *out.
 * Returns 0, or -EINVAL (out unchanged) if cqe or out is NULL or cqe_size is not 64 or 128.
 * Thread-safe; no allocation. */
int mlxd_cqe_decode(const void *cqe, size_t cqe_size, struct mlxd_cqe_decoded *out);

#ifdef __cplusplus
}
#endif
#endif
