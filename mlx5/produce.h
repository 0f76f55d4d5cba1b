/* produce.h: writing CQEs into a detached ring as the NIC does (mlx5/replay.c), for the replay
 * feeders (mlx5/replay.c, receiver/rx_replay.c).  Internal. */
#ifndef MLXD_PRODUCE_H
#define MLXD_PRODUCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct mlxd_cq;

struct mlxd__cqe_producer {
    struct mlxd_cq *cq;        /* a detached CQ */
    uint32_t pi;               /* CQEs written (free-running) */
    uint32_t ci;               /* the consumer index last read from the doorbell record */
};

/* Writes the 64-byte CQE at pi: 63 bytes, a write barrier, then op_own with the owner bit of
 * the producer's pass (!!(pi & ncqe)), never overtaking the consumer (the consumer index is read
 * from the CQ doorbell record only when the one read last leaves no room).  Returns false, with
 * nothing written, when *stop became true while it waited. */
bool mlxd__produce_cqe(struct mlxd__cqe_producer *p, const uint8_t cqe[64], atomic_bool *stop);

#endif
