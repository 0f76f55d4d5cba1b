/* rx_replay.c: the receiver's replay source (rx_replay.h).  The feeder thread plays a CQE
 * fixture the way the sensor bridge and the NIC would have produced it: first the frame's
 * metadata block lands in its page (the RDMA WRITE), then the CQE of the WRITE with immediate
 * appears in the ring (mlxd__produce_cqe: the NIC's write order).  The receiver's monitor, queue,
 * callbacks and loss accounting then run unchanged on the detached CQ. */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mlxd_abi.h"
#include "mlxd_error.h"
#include "mlxd_fixture.h"
#include "mlxd_hsb.h"
#include "mlxd_mlx5.h"
#include "produce.h"
#include "rx_replay.h"

struct mlxd__rx_replay {
    pthread_t thread;
    struct mlxd_fixture *fx;
    struct mlxd__cqe_producer prod;
    uint8_t *host;
    uint32_t pace, pages, layout;
    uint64_t page_size, md_off;
    atomic_bool stop;
    _Atomic uint64_t written;
    pthread_mutex_t lock;         /* credits and the paced wait */
    pthread_cond_t wake;          /* CLOCK_MONOTONIC */
    uint64_t credits;             /* stepped: records the feeder may still write */
};

/* Waits for a credit (stepped) or until t (recorded); false when stopped. */
static bool wait_turn(struct mlxd__rx_replay *rp, const struct timespec *t)
{
    pthread_mutex_lock(&rp->lock);
    bool ok = true;
    for (;;) {
        if (atomic_load_explicit(&rp->stop, memory_order_relaxed)) { ok = false; break; }
        if (rp->pace == MLXD_REPLAY_PACE_STEPPED) {
            if (rp->credits) { rp->credits--; break; }
            pthread_cond_wait(&rp->wake, &rp->lock);
        } else {
            if (!t) break;
            int e = pthread_cond_timedwait(&rp->wake, &rp->lock, t);
            if (e == ETIMEDOUT || e == EINVAL) break;
        }
    }
    pthread_mutex_unlock(&rp->lock);
    return ok;
}

/* The metadata block of a record lands in the page its immediate names, before the CQE. */
static void put_metadata(struct mlxd__rx_replay *rp, const struct mlxd_fixture_record *rec, const uint8_t *c)
{
    if (!rec->has_md || !rp->host || (c[MLXD_CQE_OFF_OP_OWN] >> 4) != MLXD_CQE_RESP_WR_IMM) return;
    uint32_t imm;
    memcpy(&imm, c + MLXD_CQE_OFF_IMM_INVAL_PKEY, 4);
    uint32_t page = mlxd_hsb_imm_page(be32toh(imm), (enum mlxd_hsb_imm_layout)rp->layout);
    if (page >= rp->pages) return;   /* the receiver counts it in bad_page, as from a NIC */
    uint8_t *dst = rp->host + page * rp->page_size + rp->md_off;
    /* before the CQE, as PCIe orders them: mlxd__produce_cqe's write barrier and release store
     * of op_own come after this copy */
    memcpy(dst, rec->md, sizeof rec->md);
}

static void *feeder(void *arg)
{
    struct mlxd__rx_replay *rp = arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (size_t i = 0; i < rp->fx->count; i++) {
        const struct mlxd_fixture_record *rec = &rp->fx->records[i];
        const struct timespec *t = NULL;
        if (rp->pace == MLXD_REPLAY_PACE_RECORDED && rec->has_delay && rec->delay_ns) {
            uint64_t ns = (uint64_t)next.tv_nsec + rec->delay_ns;
            next.tv_sec += (time_t)(ns / 1000000000u);
            next.tv_nsec = (long)(ns % 1000000000u);
            t = &next;
        }
        if ((t || rp->pace == MLXD_REPLAY_PACE_STEPPED) && !wait_turn(rp, t)) break;
        const uint8_t *c = rec->cqe + (rec->cqe_size == 128 ? 64 : 0);
        put_metadata(rp, rec, c);
        if (!mlxd__produce_cqe(&rp->prod, c, &rp->stop)) break;
        atomic_store_explicit(&rp->written, i + 1, memory_order_release);
    }
    return NULL;
}

static void rx_replay_free(struct mlxd__rx_replay *rp)
{
    mlxd_fixture_free(rp->fx);
    pthread_mutex_destroy(&rp->lock);
    pthread_cond_destroy(&rp->wake);
    free(rp);
}

int mlxd__rx_replay_start(const struct mlxd_receiver_opts *o, uint8_t *host, struct mlxd_cq **cq,
                          struct mlxd__rx_replay **out)
{
    if (!host)
        return mlxd_err(EINVAL, "mlxd_receiver_start: replay_fixture needs a host buffer (not CUDA memory)");
    struct mlxd__rx_replay *rp = calloc(1, sizeof *rp);
    if (!rp) return mlxd_err(ENOMEM, "mlxd_receiver_start: out of memory");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rp->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&rp->lock, NULL);
    int rc = mlxd_fixture_load(o->replay_fixture, &rp->fx);
    if (rc < 0) {
        rc = mlxd_err(-rc, "mlxd_receiver_start: %s", mlxd_errmsg());
        rx_replay_free(rp);
        return rc;
    }
    /* the ring of the recording (at least the receiver's depth: the feeder never overtakes) */
    uint32_t n = rp->fx->header.ring_size > o->recv_depth ? rp->fx->header.ring_size : o->recv_depth;
    rc = mlxd_cq_create_detached(n < 2 ? 2 : n, cq);
    if (rc < 0) {
        rc = mlxd_err(-rc, "mlxd_receiver_start: %s", mlxd_errmsg());
        rx_replay_free(rp);
        return rc;
    }
    rp->prod.cq = *cq;
    rp->host = host;
    rp->pace = o->replay_pace;
    rp->pages = o->pages;
    rp->layout = o->imm_layout;
    rp->page_size = o->page_size;
    rp->md_off = o->metadata_offset;
    rc = pthread_create(&rp->thread, NULL, feeder, rp);
    if (rc) {
        mlxd_cq_destroy(*cq);
        *cq = NULL;
        rx_replay_free(rp);
        return mlxd_err(rc, "mlxd_receiver_start: pthread_create: %s", strerror(rc));
    }
    *out = rp;
    return 0;
}

int mlxd__rx_replay_step(struct mlxd__rx_replay *rp, unsigned n)
{
    if (rp->pace != MLXD_REPLAY_PACE_STEPPED)
        return mlxd_err(EINVAL, "mlxd_receiver_replay_step: the replay is not stepped (replay_pace %u)", rp->pace);
    pthread_mutex_lock(&rp->lock);
    rp->credits += n;
    pthread_cond_signal(&rp->wake);
    pthread_mutex_unlock(&rp->lock);
    return 0;
}

void mlxd__rx_replay_progress(const struct mlxd__rx_replay *rp, uint64_t *written, uint64_t *total)
{
    *written = atomic_load_explicit(&rp->written, memory_order_acquire);
    *total = rp->fx->count;
}

void mlxd__rx_replay_stop(struct mlxd__rx_replay *rp)
{
    if (!rp) return;
    pthread_mutex_lock(&rp->lock);
    atomic_store(&rp->stop, true);
    pthread_cond_signal(&rp->wake);
    pthread_mutex_unlock(&rp->lock);
    pthread_join(rp->thread, NULL);
    rx_replay_free(rp);
}
