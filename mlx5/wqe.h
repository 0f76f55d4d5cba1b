/* wqe.h (private): building send WQEs into a send ring (rdma-core providers/mlx5/qp.c
 * _mlx5_post_send, post_send_db; layouts of struct mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg,
 * mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg in <infiniband/mlx5dv.h>, offsets in
 * abi/mlxd_abi.h). */
#ifndef MLXD_WQE_H
#define MLXD_WQE_H
#include <stdint.h>
#include "mlxd_mlx5.h"

/* The MLX5_OPCODE_* of each enum mlxd_op. */
extern const uint8_t mlxd__wqe_opcode[MLXD_OP_LOCAL_INV + 1];

/* Bytes of the WQE e needs (a multiple of 16, at most 63*16), or 0 when e is malformed for a QP
 * of that type/max_inline/max_send_sge (the caller then reports -EINVAL).  No division. */
uint32_t mlxd__wqe_bytes(const struct mlxd_entry *e, uint32_t max_inline, uint32_t max_sge, bool uc);

/* Writes the WQE for e at WQEBB index pi (free-running; wraps at sq_wqebbs, a power of two) of
 * the ring sq, for QP qpn, with bytes = mlxd__wqe_bytes(e, ...) (+ MLXD_WQE_AV_SIZE with av).
 * av: NULL, or (UD QPs) the address vector to write as the datagram segment after the control
 * segment, with e's remote_qkey and remote_qpn put in (mlx5/post_ud.c).  Returns the WQEBBs
 * used. */
uint32_t mlxd__wqe_build(volatile uint8_t *sq, uint32_t sq_wqebbs, uint32_t pi, uint32_t qpn,
                         const struct mlxd_entry *e, uint32_t bytes, const uint8_t *av);

/* mlx5/post_ud.c: a UD entry's extra WQE bytes (the datagram segment; 0 for NOP), or -1 when e
 * is malformed for a UD QP of NIC nic (the message is set). */
int mlxd__ud_entry_check(const struct mlxd_qp *qp, const struct mlxd_entry *e);
/* Writes the datagram segment at ring offset pos (16-byte aligned; may wrap at ring_mask + 1). */
void mlxd__ud_put_av(uint8_t *sq, uint32_t ring_mask, uint32_t pos, const struct mlxd_entry *e,
                     const uint8_t *av);
/* mlx5/post_mw.c: memory window UMR WQEs.  Bytes of e's WQE (128 or 192) or a negative errno
 * (message set) when e is malformed for qp; the build at WQEBB pi; the window's new rkey once
 * posted. */
int  mlxd__umr_bytes(const struct mlxd_qp *qp, const struct mlxd_entry *e);
void mlxd__umr_build(struct mlxd_qp *qp, uint32_t pi, const struct mlxd_entry *e, uint32_t bytes);
void mlxd__umr_posted(const struct mlxd_entry *e);
#endif
