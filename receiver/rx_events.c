/* rx_events.c: the receiver's event queue and event names (rx_events.h, mlxd_receiver.h). */
#include "rx_events.h"

void rx_evq_init(struct rx_evq *q)
{
    pthread_mutex_init(&q->lock, NULL);
    q->head = q->count = 0;
    q->dropped = 0;
}

void rx_evq_fini(struct rx_evq *q)
{
    pthread_mutex_destroy(&q->lock);
}

void rx_evq_reset(struct rx_evq *q)
{
    pthread_mutex_lock(&q->lock);
    q->head = q->count = 0;
    q->dropped = 0;
    pthread_mutex_unlock(&q->lock);
}

void rx_evq_push(struct rx_evq *q, const struct mlxd_receiver_event *ev)
{
    pthread_mutex_lock(&q->lock);
    if (q->count == RX_EVQ_CAP) {
        q->head = (q->head + 1) % RX_EVQ_CAP;
        q->count--;
        q->dropped++;
    }
    q->ev[(q->head + q->count) % RX_EVQ_CAP] = *ev;
    q->count++;
    pthread_mutex_unlock(&q->lock);
}

bool rx_evq_pop(struct rx_evq *q, struct mlxd_receiver_event *ev)
{
    pthread_mutex_lock(&q->lock);
    bool any = q->count > 0;
    if (any) {
        *ev = q->ev[q->head];
        q->head = (q->head + 1) % RX_EVQ_CAP;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return any;
}

uint64_t rx_evq_dropped(struct rx_evq *q)
{
    pthread_mutex_lock(&q->lock);
    uint64_t d = q->dropped;
    pthread_mutex_unlock(&q->lock);
    return d;
}

const char *mlxd_receiver_event_name(uint32_t kind)
{
    switch (kind) {
    case MLXD_RX_EVENT_PORT_DOWN: return "port down (IB_EVENT_PORT_ERR)";
    case MLXD_RX_EVENT_PORT_UP: return "port up (IB_EVENT_PORT_ACTIVE)";
    case MLXD_RX_EVENT_RESUMED: return "frames resumed after the link came back";
    case MLXD_RX_EVENT_QP_FATAL: return "QP fatal error (IB_EVENT_QP_FATAL)";
    case MLXD_RX_EVENT_QP_REQ_ERROR: return "QP invalid request error (IB_EVENT_QP_REQ_ERR)";
    case MLXD_RX_EVENT_QP_ACCESS_ERROR: return "QP access error (IB_EVENT_QP_ACCESS_ERR)";
    case MLXD_RX_EVENT_CQ_ERROR: return "CQ error (IB_EVENT_CQ_ERR)";
    case MLXD_RX_EVENT_DEVICE_FATAL: return "device fatal error (IB_EVENT_DEVICE_FATAL)";
    case MLXD_RX_EVENT_OTHER: return "other async event";
    default: return "unknown event";
    }
}
