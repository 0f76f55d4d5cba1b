/* cqe_owner.h (private): the ownership test of one CQE slot, shared by the poll loop
 * (mlx5/poll.c) and the CQ cleaning of a destroyed QP (mlx5/cq_clean.c).  The slot at index i
 * is the software's when its opcode is not MLX5_CQE_INVALID and its owner bit equals the pass
 * parity !!(i & ncqe) (struct mlx5_cqe64 op_own, mlx5dv.h).  With x = op_own ^ parity, both
 * tests are one compare: ror8(x, 1) < 0x78 (the inline test in mlxd_mlx5.h does the same). */
#ifndef MLXD_CQE_OWNER_H
#define MLXD_CQE_OWNER_H
#include <stdbool.h>
#include <stdint.h>
#include "barrier.h"
#include "mlxd_abi.h"

static inline bool mlxd__cqe_sw_owned(const uint8_t *cqe, uint32_t parity)
{
    uint8_t x = (uint8_t)(mlxd_shared_load(cqe + MLXD_CQE_OFF_OP_OWN) ^ parity);
    return (uint8_t)(x >> 1 | x << 7) < 0x78;
}
#endif
