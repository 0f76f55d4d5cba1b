/* rx_replay.h: a receiver started on a CQE fixture instead of a NIC (receiver/rx_replay.c).
 * Internal to receiver/: the API is mlxd_receiver_opts.replay_fixture and
 * mlxd_receiver_replay_step() in mlxd_receiver.h. */
#ifndef MLXD_RX_REPLAY_H
#define MLXD_RX_REPLAY_H

#include <stdint.h>
#include "mlxd_receiver.h"

struct mlxd_cq;
struct mlxd__rx_replay;

/* Loads the fixture, creates a detached CQ for it (*cq, the receiver's to destroy after stop)
 * and starts the feeder: for each record it writes the record's metadata block ('md' line) into
 * the page its immediate names (host buffer, o->metadata_offset), then the CQE into the ring,
 * paced by o->replay_pace.  Errors: the fixture reader's (message "mlxd_receiver_start: ..."),
 * -EINVAL (CUDA memory), -ENOMEM, pthread_create's. */
int mlxd__rx_replay_start(const struct mlxd_receiver_opts *o, uint8_t *host, struct mlxd_cq **cq,
                          struct mlxd__rx_replay **out);

/* Stepped pacing: lets the feeder write n more records.  -EINVAL when not stepped. */
int mlxd__rx_replay_step(struct mlxd__rx_replay *rp, unsigned n);

/* Records written so far, and the fixture's record count. */
void mlxd__rx_replay_progress(const struct mlxd__rx_replay *rp, uint64_t *written, uint64_t *total);

/* Stops the feeder, joins it and frees rp (NULL: no-op). */
void mlxd__rx_replay_stop(struct mlxd__rx_replay *rp);

#endif
