/* rx_events.h: the receiver's queue of async events (mlxd_receiver_next_event).  Events are rare
 * (a port flap, a fatal error), so a mutex guards a small ring: never on the per-frame path. */
#ifndef MLXD_RX_EVENTS_H
#define MLXD_RX_EVENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mlxd_receiver.h"

#define RX_EVQ_CAP 64u

struct rx_evq {
    pthread_mutex_t lock;
    struct mlxd_receiver_event ev[RX_EVQ_CAP];
    unsigned head, count;
    uint64_t dropped;          /* oldest events pushed out by a full queue */
};

void rx_evq_init(struct rx_evq *q);
void rx_evq_fini(struct rx_evq *q);
/* Empties the queue and its dropped count (start). */
void rx_evq_reset(struct rx_evq *q);
/* Appends ev; when full, drops the oldest and counts it. */
void rx_evq_push(struct rx_evq *q, const struct mlxd_receiver_event *ev);
/* Takes the oldest event; false when empty. */
bool rx_evq_pop(struct rx_evq *q, struct mlxd_receiver_event *ev);
uint64_t rx_evq_dropped(struct rx_evq *q);

#endif
