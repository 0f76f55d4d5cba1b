/* wqe.h (private): building send WQEs into a send ring (rdma-core providers/mlx5/qp.c
 * _mlx5_post_send, post_send_db; layouts of struct mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg,
 * mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg in <infiniband/mlx5dv.h>, offsets in
 * abi/mlxd_abi.h). */
#ifndef MLXD_WQE_H
#define MLXD_WQE_H
#include <stdint.h>
#include "mlxd_mlx5.h"

/* The MLX5_OPCODE_* of each enum mlxd_op. */
extern const uint8_t mlxd__wqe_opcode[8];

/* Bytes of the WQE e needs (a multiple of 16, at most 63*16), or 0 when e is malformed for a QP
 * of that type/max_inline/max_send_sge (the caller then reports -EINVAL).  No division. */
uint32_t mlxd__wqe_bytes(const struct mlxd_entry *e, uint32_t max_inline, uint32_t max_sge, bool uc);

/* Writes the WQE for e at WQEBB index pi (free-running; wraps at sq_wqebbs, a power of two) of
 * the ring sq, for QP qpn, with bytes = mlxd__wqe_bytes(e, ...).  Returns the WQEBBs used. */
uint32_t mlxd__wqe_build(volatile uint8_t *sq, uint32_t sq_wqebbs, uint32_t pi, uint32_t qpn,
                         const struct mlxd_entry *e, uint32_t bytes);
#endif
