/* record.h: the poll loop's side of the CQE recorder (mlx5/record.c; API in mlxd_mlx5.h). */
#ifndef MLXD_RECORD_H
#define MLXD_RECORD_H

#include <stdint.h>

struct mlxd_recorder;

/* Copies n consecutive 64-byte CQEs from c (owned by software, read barrier done, not yet handed
 * back) into the recorder's ring with one CLOCK_MONOTONIC timestamp (vDSO); those that do not
 * fit are counted as overflow.  No lock, system call or allocation. */
void mlxd__record_cqes(struct mlxd_recorder *r, const uint8_t *c, uint32_t n);

#endif
