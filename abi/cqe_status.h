/* cqe_status.h: the status-only lines of perftest, UCX, NCCL, libfabric, DAPL and the
 * RDMA_RC_example program (internal to abi/; the result type is in mlxd_cqe_dump.h). */
#ifndef MLXD_CQE_STATUS_H
#define MLXD_CQE_STATUS_H

#include <stdbool.h>
#include "mlxd_cqe_dump.h"

/* Reads s (one log line, its dmesg prefix removed) as a status line: true, with *o filled but
 * for line and cqe, when it is one of the formats of docs/cqe-tool.md; false otherwise. */
bool mlxd__status_line(const char *s, struct mlxd_dump_status *o);

#endif
