/* replay.c: the replay feeder: plays a CQE fixture (abi/mlxd_fixture.h) into a detached CQ's
 * ring the way the NIC writes CQEs: 63 bytes, a write barrier, then op_own with the owner bit
 * of the producer's pass (!!(pi & ncqe)); it never overtakes the consumer, whose index it reads
 * from the CQ doorbell record (24 bits, big-endian) as the NIC does (rdma-core
 * providers/mlx5/cq.c update_cons_index), when the index it read last leaves no room. */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "barrier.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"
#include "mlxd_fixture.h"
#include "opts.h"
#include "produce.h"

struct mlxd_replay {
    pthread_t thread;
    struct mlxd_cq *cq;
    struct mlxd_fixture *fx;
    bool paced;
    uint32_t loops;
    atomic_bool stop;
    pthread_mutex_t lock;          /* with wake: a paced wait ends at once when stop is set */
    pthread_cond_t wake;           /* CLOCK_MONOTONIC */
    long result;
};

/* Waits until t (CLOCK_MONOTONIC) or until finish(rp, true) sets stop, whichever comes first:
 * a recorded delay may be long (up to 2^64 ns), and stop must not wait it out. */
static void sleep_until(struct mlxd_replay *rp, const struct timespec *t)
{
    pthread_mutex_lock(&rp->lock);
    while (!atomic_load_explicit(&rp->stop, memory_order_relaxed)) {
        int e = pthread_cond_timedwait(&rp->wake, &rp->lock, t);
        if (e == ETIMEDOUT || e == EINVAL)   /* 0: signalled or spurious, check stop again */
            break;
    }
    pthread_mutex_unlock(&rp->lock);
}

bool mlxd__produce_cqe(struct mlxd__cqe_producer *p, const uint8_t cqe[64], atomic_bool *stop)
{
    struct mlxd_cq *cq = p->cq;
    const uint32_t ncqe = cq->ncqe;
    /* wait for room: outstanding = pi - ci (24-bit arithmetic) must stay < ncqe.  The consumer
     * index is read from the doorbell record only when the one read last leaves no room: that
     * cache line is the consumer's, and reading it per CQE made every CQE a cache miss (4-15 M
     * CQE/s) */
    while (((p->pi - p->ci) & MLXD_CQ_CI_MASK) >= ncqe) {
        if (atomic_load_explicit(stop, memory_order_relaxed)) return false;
        p->ci = be32toh(__atomic_load_n(&cq->dbrec[MLXD_CQ_SET_CI], __ATOMIC_ACQUIRE)) & MLXD_CQ_CI_MASK;
        if (((p->pi - p->ci) & MLXD_CQ_CI_MASK) < ncqe) break;
        sched_yield();
    }
    uint8_t *dst = (uint8_t *)(uintptr_t)cq->buf + ((size_t)(p->pi & (ncqe - 1)) << 6);
    memcpy(dst, cqe, 63);
    mlxd_wmb();
    uint8_t op_own = (uint8_t)((cqe[63] & ~MLXD_CQE_OWNER_MASK) | ((p->pi & ncqe) ? 1 : 0));
    __atomic_store_n(dst + 63, op_own, __ATOMIC_RELEASE);   /* the NIC's order: fields, then op_own */
    p->pi++;
    return true;
}

static void *feeder(void *arg)
{
    struct mlxd_replay *rp = arg;
    struct mlxd_cq *cq = rp->cq;
    struct mlxd__cqe_producer prod = { cq, 0, 0 };
    long written = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (uint32_t loop = 0; loop < rp->loops; loop++) {
        for (size_t i = 0; i < rp->fx->count; i++) {
            const struct mlxd_fixture_record *rec = &rp->fx->records[i];
            if (rp->paced && rec->has_delay && rec->delay_ns) {
                uint64_t ns = (uint64_t)next.tv_nsec + rec->delay_ns;
                next.tv_sec += (time_t)(ns / 1000000000u);
                next.tv_nsec = (long)(ns % 1000000000u);
                sleep_until(rp, &next);
            }
            if (atomic_load_explicit(&rp->stop, memory_order_relaxed) ||
                !mlxd__produce_cqe(&prod, rec->cqe + (rec->cqe_size == 128 ? 64 : 0), &rp->stop)) {
                rp->result = written;
                return NULL;
            }
            written++;
        }
    }
    rp->result = written;
    return NULL;
}

int mlxd_replay_start(struct mlxd_cq *cq, const char *path, const struct mlxd_replay_opts *opts,
                      struct mlxd_replay **out)
{
    if (!cq || cq->state != OBJ_LIVE || !cq->detached || !path || !out)
        return mlxd_err(EINVAL, "mlxd_replay_start: needs a live detached CQ, a path and out");
    if (opts && opts->sz < offsetof(struct mlxd_replay_opts, loops) + sizeof opts->loops)
        return mlxd_err(EINVAL, "mlxd_replay_start: opts->sz %zu is too small", opts->sz);
    int trc = opts ? mlxd__opts_tail_check("mlxd_replay_start", "opts", opts, opts->sz, sizeof *opts) : 0;
    if (trc) return trc;
    struct mlxd_replay *rp = calloc(1, sizeof *rp);
    if (!rp) return mlxd_err(ENOMEM, "mlxd_replay_start: out of memory");
    int rc = mlxd_fixture_load(path, &rp->fx);
    if (rc) {
        free(rp);
        /* the reader's message without its own name: "mlxd_replay_start: <path>: <reason>" */
        const char *m = mlxd_errmsg();
        if (!strncmp(m, "mlxd_", 5)) {
            size_t k = strspn(m, "abcdefghijklmnopqrstuvwxyz0123456789_");
            if (m[k] == ':' && m[k + 1] == ' ')
                m += k + 2;
        }
        return mlxd_err(-rc, "mlxd_replay_start: %s", m);
    }
    rp->cq = cq;
    rp->paced = opts && opts->paced;
    rp->loops = opts && opts->loops ? opts->loops : 1;
    atomic_init(&rp->stop, false);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&rp->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc) {
        mlxd_fixture_free(rp->fx);
        free(rp);
        return mlxd_err(rc, "mlxd_replay_start: pthread_cond_init: %s", strerror(rc));
    }
    pthread_mutex_init(&rp->lock, NULL);
    rc = pthread_create(&rp->thread, NULL, feeder, rp);
    if (rc) {
        pthread_mutex_destroy(&rp->lock);
        pthread_cond_destroy(&rp->wake);
        mlxd_fixture_free(rp->fx);
        free(rp);
        return mlxd_err(rc, "mlxd_replay_start: pthread_create: %s", strerror(rc));
    }
    *out = rp;
    return 0;
}

long mlxd_replay_finish(struct mlxd_replay *rp, bool stop)
{
    if (!rp) return mlxd_err(EINVAL, "mlxd_replay_finish: rp is NULL");
    if (stop) {
        pthread_mutex_lock(&rp->lock);   /* not between the feeder's check and its wait */
        atomic_store(&rp->stop, true);
        pthread_cond_signal(&rp->wake);
        pthread_mutex_unlock(&rp->lock);
    }
    pthread_join(rp->thread, NULL);
    long r = rp->result;
    pthread_mutex_destroy(&rp->lock);
    pthread_cond_destroy(&rp->wake);
    mlxd_fixture_free(rp->fx);
    free(rp);
    return r;
}
