/* mlxd_abi.h: the mlx5 hardware ABI that mlx5direct depends on, in one place.
 *
 * Everything here is a fact about ConnectX (mlx5) hardware as user space sees it: byte offsets
 * inside a 64-byte completion queue entry (CQE), opcodes, error syndromes, the layout of the
 * send WQE segments and the doorbell records.  All multi-byte fields in CQEs, WQEs and doorbell
 * records are big-endian in memory (the HCA reads and writes them that way).
 *
 * Sources: rdma-core's <infiniband/mlx5dv.h> (struct mlx5_cqe64, struct mlx5_err_cqe,
 * struct mlx5_wqe_ctrl_seg / raddr / data / inl_data segments, MLX5_CQE_*, MLX5_OPCODE_*,
 * MLX5_CQE_SYNDROME_*, MLX5_RCV_DBR / MLX5_SND_DBR, MLX5_CQ_DOORBELL), and rdma-core's
 * providers/mlx5/cq.c, qp.c and verbs.c (how libmlx5 fills and reads them).
 *
 * This header does not include <infiniband/mlx5dv.h>: users need no rdma-core headers.  Every
 * value below is proven equal to its mlx5dv.h counterpart at compile time by abi/abi_assert.c
 * (built into the library, so the library does not build if one differs), and again here if the
 * includer has already included <infiniband/mlx5dv.h>.
 */
#ifndef MLXD_ABI_H
#define MLXD_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Completion queue entries (mlx5dv.h struct mlx5_cqe64, 64 bytes) ----------------------
 * A CQ created with 128-byte CQEs holds the same 64-byte structure in the SECOND half of each
 * 128-byte slot (bytes 64..127); the first half then carries inline-scattered data (format 2).
 * (rdma-core providers/mlx5/cq.c get_sw_cqe and mlx5_alloc_cq_buf use the second 64 B half). */
#define MLXD_CQE_SIZE            64u
#define MLXD_CQE128_SIZE         128u

/* Byte offsets inside the 64-byte CQE (struct mlx5_cqe64). */
#define MLXD_CQE_OFF_WQE_ID          2u   /* BE16, striding RQ only */
#define MLXD_CQE_OFF_ML_PATH         17u  /* u8 */
#define MLXD_CQE_OFF_SLID            22u  /* BE16, InfiniBand only */
#define MLXD_CQE_OFF_FLAGS_RQPN      24u  /* BE32: bits 23:0 remote (source) QPN for UD */
#define MLXD_CQE_OFF_HDS_IP_EXT      28u  /* u8 */
#define MLXD_CQE_OFF_L4_HDR_TYPE     29u  /* u8 */
#define MLXD_CQE_OFF_VLAN_INFO       30u  /* BE16 */
#define MLXD_CQE_OFF_SRQN_UIDX       32u  /* BE32: bits 23:0 user index (cqe_version 1) or SRQN */
#define MLXD_CQE_OFF_IMM_INVAL_PKEY  36u  /* BE32: immediate data (network order) / inval. rkey */
#define MLXD_CQE_OFF_APP             40u  /* u8 */
#define MLXD_CQE_OFF_APP_OP          41u  /* u8 */
#define MLXD_CQE_OFF_APP_INFO        42u  /* BE16 */
#define MLXD_CQE_OFF_BYTE_CNT        44u  /* BE32: bytes received / RDMA READ & atomic length */
#define MLXD_CQE_OFF_TIMESTAMP       48u  /* BE64: HCA clock ticks */
#define MLXD_CQE_OFF_SOP_DROP_QPN    56u  /* BE32: 31:24 WQE opcode (req) / drop counter (resp),
                                             23:0 local QPN */
#define MLXD_CQE_OFF_WQE_COUNTER     60u  /* BE16: index of the WQE (its first WQEBB) */
#define MLXD_CQE_OFF_SIGNATURE       62u  /* u8 */
#define MLXD_CQE_OFF_OP_OWN          63u  /* u8: 7:4 opcode, 3:2 format, 1 solicited, 0 owner */

/* Byte offsets inside an error CQE (struct mlx5_err_cqe, opcodes REQ_ERR and RESP_ERR).
 * Bytes 52 and 53 are named hw_err_synd and hw_synd_type by MLNX_OFED, UCX, SPDK and DOCA; upstream
 * rdma-core and the kernel count them in the reserved array rsvd1[18] (bytes 36..53). */
#define MLXD_ERR_CQE_OFF_SRQN            32u  /* BE32, bits 23:0 */
#define MLXD_ERR_CQE_OFF_HW_ERR_SYND     52u  /* u8, "reserved" upstream */
#define MLXD_ERR_CQE_OFF_HW_SYND_TYPE    53u  /* u8, "reserved" upstream */
#define MLXD_ERR_CQE_OFF_VENDOR_SYND     54u  /* u8 vendor_err_synd */
#define MLXD_ERR_CQE_OFF_SYNDROME        55u  /* u8 syndrome (enum mlxd_syndrome) */
#define MLXD_ERR_CQE_OFF_S_WQE_OPCODE_QPN 56u /* BE32: 31:24 WQE opcode, 23:0 QPN */
#define MLXD_ERR_CQE_OFF_WQE_COUNTER     60u  /* BE16 */
#define MLXD_ERR_CQE_OFF_SIGNATURE       62u  /* u8 */
#define MLXD_ERR_CQE_OFF_OP_OWN          63u  /* u8 */

/* op_own bits (mlx5dv.h mlx5dv_get_cqe_owner / _se / _format / _opcode). */
#define MLXD_CQE_OWNER_MASK      0x01u
#define MLXD_CQE_SE_SHIFT        1
#define MLXD_CQE_FORMAT_SHIFT    2
#define MLXD_CQE_FORMAT_MASK     0x3u
#define MLXD_CQE_OPCODE_SHIFT    4
/* The value software writes into every op_own when it initialises a CQ ring: opcode INVALID,
 * owner 0 (rdma-core providers/mlx5/cq.c mlx5_alloc_cq_buf). */
#define MLXD_CQE_OP_OWN_INIT     0xF0u
#define MLXD_QPN_MASK            0xFFFFFFu   /* QPNs, CQNs, SRQNs and user indexes are 24 bits */

/* CQE formats (op_own bits 3:2; mlx5dv.h MLX5_INLINE_SCATTER_32/64). */
enum mlxd_cqe_format {
    MLXD_CQE_FORMAT_NORMAL      = 0,
    MLXD_CQE_FORMAT_SCATTER_32  = 1,  /* payload in this 64-byte CQE (MLX5_INLINE_SCATTER_32) */
    MLXD_CQE_FORMAT_SCATTER_64  = 2,  /* payload in the first half of a 128-byte CQE */
    MLXD_CQE_FORMAT_COMPRESSED  = 3,  /* title of a compressed (mini CQE) session */
};

/* CQE opcodes (op_own >> 4; mlx5dv.h MLX5_CQE_*). */
enum mlxd_cqe_opcode {
    MLXD_CQE_REQ            = 0,   /* requester completion (send, write, read, atomic) */
    MLXD_CQE_RESP_WR_IMM    = 1,   /* responder: RDMA WRITE with immediate (consumes a RQ WQE) */
    MLXD_CQE_RESP_SEND      = 2,
    MLXD_CQE_RESP_SEND_IMM  = 3,
    MLXD_CQE_RESP_SEND_INV  = 4,
    MLXD_CQE_RESIZE_CQ      = 5,
    MLXD_CQE_NO_PACKET      = 6,
    MLXD_CQE_SIG_ERR        = 12,
    MLXD_CQE_REQ_ERR        = 13,  /* requester error: layout struct mlx5_err_cqe */
    MLXD_CQE_RESP_ERR       = 14,  /* responder error: layout struct mlx5_err_cqe */
    MLXD_CQE_INVALID        = 15,  /* never written by hardware; software's initial value */
};

/* Error syndromes (byte 55 of an error CQE; mlx5dv.h MLX5_CQE_SYNDROME_*). */
enum mlxd_syndrome {
    MLXD_SYND_LOCAL_LENGTH_ERR        = 0x01,
    MLXD_SYND_LOCAL_QP_OP_ERR         = 0x02,
    MLXD_SYND_LOCAL_PROT_ERR          = 0x04,
    MLXD_SYND_WR_FLUSH_ERR            = 0x05,
    MLXD_SYND_MW_BIND_ERR             = 0x06,
    MLXD_SYND_BAD_RESP_ERR            = 0x10,
    MLXD_SYND_LOCAL_ACCESS_ERR        = 0x11,
    MLXD_SYND_REMOTE_INVAL_REQ_ERR    = 0x12,
    MLXD_SYND_REMOTE_ACCESS_ERR       = 0x13,
    MLXD_SYND_REMOTE_OP_ERR           = 0x14,
    MLXD_SYND_TRANSPORT_RETRY_EXC_ERR = 0x15,
    MLXD_SYND_RNR_RETRY_EXC_ERR       = 0x16,
    MLXD_SYND_REMOTE_ABORTED_ERR      = 0x22,
};
/* Vendor syndrome (byte 54) that, with syndrome REMOTE_ABORTED_ERR, marks an on-demand-paging
 * page fault abort (mlx5dv.h MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT). */
#define MLXD_VENDOR_SYND_ODP_PFAULT 0x93u

/* ---- Send WQEs (mlx5dv.h; rdma-core providers/mlx5/qp.c) ------------------------------------
 * A send WQE is made of 16-byte segments ("ds" units) inside 64-byte basic blocks (WQEBBs). */
#define MLXD_SEND_WQE_BB         64u
#define MLXD_SEND_WQE_SHIFT      6
#define MLXD_WQE_DS_SIZE         16u    /* qpn_ds counts 16-byte units; 6 bits, at most 63 */
#define MLXD_WQE_DS_MASK         0x3Fu

/* WQE opcodes (low byte of ctrl opmod_idx_opcode; mlx5dv.h MLX5_OPCODE_*).  A requester CQE
 * repeats the opcode of the completed WQE in byte 56 (sop_drop_qpn bits 31:24). */
enum mlxd_wqe_opcode {
    MLXD_WQE_NOP             = 0x00,
    MLXD_WQE_SEND_INVAL      = 0x01,
    MLXD_WQE_RDMA_WRITE      = 0x08,
    MLXD_WQE_RDMA_WRITE_IMM  = 0x09,
    MLXD_WQE_SEND            = 0x0a,
    MLXD_WQE_SEND_IMM        = 0x0b,
    MLXD_WQE_TSO             = 0x0e,
    MLXD_WQE_RDMA_READ       = 0x10,
    MLXD_WQE_ATOMIC_CS       = 0x11,
    MLXD_WQE_ATOMIC_FA       = 0x12,
    MLXD_WQE_ATOMIC_MASKED_CS = 0x14,
    MLXD_WQE_ATOMIC_MASKED_FA = 0x15,
    MLXD_WQE_FMR             = 0x19,
    MLXD_WQE_LOCAL_INVAL     = 0x1b,
    MLXD_WQE_CONFIG_CMD      = 0x1f,
    MLXD_WQE_SET_PSV         = 0x20,
    MLXD_WQE_UMR             = 0x25,
    MLXD_WQE_TAG_MATCHING    = 0x28,
    MLXD_WQE_FLOW_TBL_ACCESS = 0x2c,
    MLXD_WQE_MMO             = 0x2f,
};

/* Control segment (struct mlx5_wqe_ctrl_seg, 16 bytes, packed). */
#define MLXD_WQE_CTRL_SIZE              16u
#define MLXD_WQE_CTRL_OFF_OPMOD_IDX_OPCODE 0u  /* BE32: opmod<<24 | (wqe index & 0xffff)<<8 | opcode */
#define MLXD_WQE_CTRL_OFF_QPN_DS        4u     /* BE32: qpn<<8 | ds */
#define MLXD_WQE_CTRL_OFF_SIGNATURE     8u     /* u8 */
#define MLXD_WQE_CTRL_OFF_DCI_STREAM    9u     /* BE16 dci_stream_channel_id */
#define MLXD_WQE_CTRL_OFF_FM_CE_SE      11u    /* u8: fence / completion / solicited flags */
#define MLXD_WQE_CTRL_OFF_IMM           12u    /* BE32: immediate (network order) or inval. rkey */
/* fm_ce_se flags (mlx5dv.h MLX5_WQE_CTRL_*). */
#define MLXD_WQE_CTRL_CQ_UPDATE         0x08u  /* signalled: produce a CQE */
#define MLXD_WQE_CTRL_SOLICITED         0x02u
#define MLXD_WQE_CTRL_FENCE             0x80u
#define MLXD_WQE_CTRL_INITIATOR_SMALL_FENCE 0x20u
#define MLXD_WQE_CTRL_FM_MASK           0xe0u   /* fm: bits 7:5 of fm_ce_se, one mode */

/* Remote address segment (struct mlx5_wqe_raddr_seg, 16 bytes). */
#define MLXD_WQE_RADDR_SIZE         16u
#define MLXD_WQE_RADDR_OFF_RADDR    0u     /* BE64 */
#define MLXD_WQE_RADDR_OFF_RKEY     8u     /* BE32 */
/* Atomic segment (struct mlx5_wqe_atomic_seg, 16 bytes): after the remote address segment of a
 * compare-and-swap / fetch-and-add WQE.  The local data segment that follows always says 8 bytes
 * (MLX5_ATOMIC_SIZE). */
#define MLXD_WQE_ATOMIC_SIZE        16u
#define MLXD_WQE_ATOMIC_OFF_SWAP_ADD 0u    /* BE64: swap value (CS) or addend (FA) */
#define MLXD_WQE_ATOMIC_OFF_COMPARE 8u     /* BE64: compare value (CS); 0 for FA */
#define MLXD_ATOMIC_SIZE            8u
/* Datagram segment of a UD send WQE (struct mlx5_wqe_datagram_seg = struct mlx5_wqe_av, 48
 * bytes), right after the control segment (rdma-core providers/mlx5/qp.c set_datagram_seg). */
#define MLXD_WQE_AV_SIZE            48u
#define MLXD_WQE_AV_OFF_QKEY        0u     /* BE32 key.qkey.qkey */
#define MLXD_WQE_AV_OFF_DQP_DCT     8u     /* BE32: remote QPN | MLXD_EXTENDED_UD_AV */
#define MLXD_WQE_AV_OFF_STAT_RATE_SL 12u   /* u8: SL << 4 (RoCE: the priority) */
#define MLXD_WQE_AV_OFF_FL_MLID     13u    /* u8: bit 7 'force loopback', bits 6:0 LID path bits */
#define MLXD_WQE_AV_OFF_RMAC        20u    /* 6 bytes: destination MAC (RoCE) */
#define MLXD_WQE_AV_OFF_TCLASS      26u    /* u8 */
#define MLXD_WQE_AV_OFF_HOP_LIMIT   27u    /* u8 */
#define MLXD_WQE_AV_OFF_GRH_GID_FL  28u    /* BE32: bit 30 GRH present, 27:20 sgid index, 19:0 flow label */
#define MLXD_WQE_AV_OFF_RGID        32u    /* 16 bytes: destination GID */
#define MLXD_EXTENDED_UD_AV         0x80000000u   /* MLX5_EXTENDED_UD_AV: the AV has a GRH part */
/* Data (scatter/gather) segment (struct mlx5_wqe_data_seg, 16 bytes).  byte_count 0 means 2 GiB
 * to the hardware (rdma-core providers/mlx5/qp.c: 2 GB is written as 0, and zero-length SGEs
 * are skipped). */
#define MLXD_WQE_DATA_SIZE          16u
#define MLXD_WQE_DATA_OFF_BYTE_COUNT 0u    /* BE32 */
#define MLXD_WQE_DATA_OFF_LKEY      4u     /* BE32 */
#define MLXD_WQE_DATA_OFF_ADDR      8u     /* BE64 */
/* Inline data segment (struct mlx5_wqe_inl_data_seg): a BE32 byte_count with this bit set, then
 * the data, padded to 16 bytes. */
#define MLXD_WQE_INL_HDR_SIZE       4u
#define MLXD_INLINE_SEG             0x80000000u
/* lkey of the terminating data segment of a receive WQE with fewer SGEs than its stride. */
#define MLXD_INVALID_LKEY           0x100u

/* ---- Doorbell records and the UAR (mlx5dv.h; rdma-core providers/mlx5/cq.c, qp.c) -----------
 * A QP doorbell record is two BE32: [MLXD_RCV_DBR] = RQ head & 0xffff, [MLXD_SND_DBR] = SQ
 * cur_post & 0xffff.  A CQ doorbell record is two BE32: [MLXD_CQ_SET_CI] = consumer index &
 * 0xffffff, [MLXD_CQ_ARM_DB] = sn<<28 | cmd | ci. */
#define MLXD_RCV_DBR                0
#define MLXD_SND_DBR                1
#define MLXD_CQ_SET_CI              0
#define MLXD_CQ_ARM_DB              1
#define MLXD_CQ_ARM_DB_OFFSET       4u         /* byte offset of the ARM word in the CQ record */
#define MLXD_CQ_CI_MASK             0xFFFFFFu
#define MLXD_CQ_DB_REQ_NOT          (0u << 24) /* arm: next completion */
#define MLXD_CQ_DB_REQ_NOT_SOL      (1u << 24) /* arm: solicited completions only */
#define MLXD_CQ_ARM_SN_SHIFT        28
#define MLXD_CQ_ARM_SN_MASK         3u
/* Byte offsets inside one 4 KiB UAR page. */
#define MLXD_UAR_CQ_DOORBELL        0x20u      /* 64-bit arm write: BE64(word<<32 | cqn) */
#define MLXD_UAR_BF_OFFSET          0x800u     /* first BlueFlame / send doorbell register */
#define MLXD_ADAPTER_PAGE_SIZE      4096u

/* ---- Compile-time proof against mlx5dv.h, when the includer has it --------------------------*/
#ifdef _MLX5DV_H_
#include <stddef.h>
#define MLXD_ABI_ASSERT_EQ(a, b) _Static_assert((long long)(a) == (long long)(b), #a " != " #b)
MLXD_ABI_ASSERT_EQ(sizeof(struct mlx5_cqe64), MLXD_CQE_SIZE);
MLXD_ABI_ASSERT_EQ(sizeof(struct mlx5_err_cqe), MLXD_CQE_SIZE);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_cqe64, srqn_uidx), MLXD_CQE_OFF_SRQN_UIDX);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_cqe64, byte_cnt), MLXD_CQE_OFF_BYTE_CNT);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_cqe64, sop_drop_qpn), MLXD_CQE_OFF_SOP_DROP_QPN);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_cqe64, op_own), MLXD_CQE_OFF_OP_OWN);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_err_cqe, syndrome), MLXD_ERR_CQE_OFF_SYNDROME);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_err_cqe, vendor_err_synd), MLXD_ERR_CQE_OFF_VENDOR_SYND);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_err_cqe, s_wqe_opcode_qpn), MLXD_ERR_CQE_OFF_S_WQE_OPCODE_QPN);
MLXD_ABI_ASSERT_EQ(sizeof(struct mlx5_wqe_ctrl_seg), MLXD_WQE_CTRL_SIZE);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se), MLXD_WQE_CTRL_OFF_FM_CE_SE);
MLXD_ABI_ASSERT_EQ(sizeof(struct mlx5_wqe_data_seg), MLXD_WQE_DATA_SIZE);
MLXD_ABI_ASSERT_EQ(sizeof(struct mlx5_wqe_raddr_seg), MLXD_WQE_RADDR_SIZE);
MLXD_ABI_ASSERT_EQ(sizeof(struct mlx5_wqe_atomic_seg), MLXD_WQE_ATOMIC_SIZE);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_atomic_seg, compare), MLXD_WQE_ATOMIC_OFF_COMPARE);
MLXD_ABI_ASSERT_EQ(MLX5_OPCODE_ATOMIC_CS, MLXD_WQE_ATOMIC_CS);
MLXD_ABI_ASSERT_EQ(MLX5_OPCODE_ATOMIC_FA, MLXD_WQE_ATOMIC_FA);
MLXD_ABI_ASSERT_EQ(sizeof(struct mlx5_wqe_av), MLXD_WQE_AV_SIZE);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_av, dqp_dct), MLXD_WQE_AV_OFF_DQP_DCT);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_av, stat_rate_sl), MLXD_WQE_AV_OFF_STAT_RATE_SL);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_av, rmac), MLXD_WQE_AV_OFF_RMAC);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_av, tclass), MLXD_WQE_AV_OFF_TCLASS);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_av, hop_limit), MLXD_WQE_AV_OFF_HOP_LIMIT);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_av, grh_gid_fl), MLXD_WQE_AV_OFF_GRH_GID_FL);
MLXD_ABI_ASSERT_EQ(offsetof(struct mlx5_wqe_av, rgid), MLXD_WQE_AV_OFF_RGID);
MLXD_ABI_ASSERT_EQ(MLX5_EXTENDED_UD_AV, MLXD_EXTENDED_UD_AV);
MLXD_ABI_ASSERT_EQ(MLX5_RCV_DBR, MLXD_RCV_DBR);
MLXD_ABI_ASSERT_EQ(MLX5_SND_DBR, MLXD_SND_DBR);
MLXD_ABI_ASSERT_EQ(MLX5_CQ_DOORBELL, MLXD_UAR_CQ_DOORBELL);
MLXD_ABI_ASSERT_EQ(MLX5_CQE_REQ_ERR, MLXD_CQE_REQ_ERR);
MLXD_ABI_ASSERT_EQ(MLX5_OPCODE_RDMA_WRITE_IMM, MLXD_WQE_RDMA_WRITE_IMM);
#undef MLXD_ABI_ASSERT_EQ
#endif

#ifdef __cplusplus
}
#endif
#endif
