/* record.c: the CQE recorder (mlxd_cq_record_start / mlxd_cq_record_stop in mlxd_mlx5.h).
 *
 * The poll loop (mlx5/poll.c, its general path: a recorded CQ has no hot QP) hands every batch
 * of CQEs it consumes to mlxd__record_cqes before it hands their slots back to the NIC; that
 * copies them into a preallocated single-producer single-consumer ring with a timestamp.  A
 * writer thread empties the ring into a fixture file (abi/mlxd_fixture.h, version 2).  When the
 * ring is full the poll loop does not wait: the CQEs are counted (overflow) and the count is
 * written into the file's header at stop. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "driver.h"
#include "mlxd_error.h"
#include "mlxd_fixture.h"
#include "mlxd_mlx5.h"
#include "opts.h"
#include "record.h"

#define DEFAULT_ENTRIES 4096u   /* 208 bytes each */
#define MAX_ENTRIES     (1u << 22)

struct slot {
    uint64_t t_ns;             /* CLOCK_MONOTONIC when the poll loop consumed the CQE */
    uint8_t  cqe[64];
    bool     has_md;
    uint8_t  md[128];          /* opts.metadata's copy of the frame's metadata block */
};

struct mlxd_recorder {
    struct mlxd_cq *cq;
    struct slot *ring;
    uint32_t mask;
    _Atomic uint64_t head;     /* slots filled (the poll loop's) */
    _Atomic uint64_t tail;     /* slots written to the file (the writer's) */
    _Atomic uint64_t overflow; /* CQEs not recorded: ring full (written by the poll loop only) */
    atomic_bool stop;
    pthread_t thread;
    struct mlxd_fixture_writer *w;
    bool   (*md_fn)(void *ctx, const uint8_t cqe[64], uint8_t md[128]);
    void    *md_ctx;
    uint64_t prev_t;
    bool     any;              /* a record was written: later ones carry a delay */
    int      werr;             /* first write error (negative errno), its message in wmsg */
    char     wmsg[256];
};

void mlxd__record_cqes(struct mlxd_recorder *r, const uint8_t *c, uint32_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    const uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t room = (uint64_t)r->mask + 1 - (h - t);
    uint32_t k = n < room ? n : (uint32_t)room;
    for (uint32_t i = 0; i < k; i++, h++) {
        struct slot *s = &r->ring[h & r->mask];
        s->t_ns = now;
        memcpy(s->cqe, c + ((size_t)i << 6), 64);
        s->has_md = r->md_fn && r->md_fn(r->md_ctx, s->cqe, s->md);
    }
    atomic_store_explicit(&r->head, h, memory_order_release);
    if (k < n)
        atomic_store_explicit(&r->overflow, atomic_load_explicit(&r->overflow, memory_order_relaxed) + (n - k),
                              memory_order_relaxed);
}

/* Writes the filled slots; returns how many. */
static uint64_t drain(struct mlxd_recorder *r)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    const uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    const uint64_t n = h - t;
    for (; t != h; t++) {
        const struct slot *s = &r->ring[t & r->mask];
        if (!r->werr) {
            int rc = s->has_md ? mlxd_fixture_write_md(r->w, s->md) : 0;
            if (rc == 0) rc = mlxd_fixture_write(r->w, s->cqe, r->any, r->any ? s->t_ns - r->prev_t : 0);
            if (rc < 0) {
                r->werr = rc;
                snprintf(r->wmsg, sizeof r->wmsg, "%s", mlxd_errmsg());
            }
        }
        r->prev_t = s->t_ns;
        r->any = true;
    }
    atomic_store_explicit(&r->tail, t, memory_order_release);
    return n;
}

static void *writer(void *arg)
{
    struct mlxd_recorder *r = arg;
    for (;;) {
        bool stop = atomic_load_explicit(&r->stop, memory_order_acquire);
        if (!drain(r)) {
            if (stop) break;
            struct timespec d = { 0, 1000000 };   /* 1 ms: the ring holds far more than that */
            nanosleep(&d, NULL);
        }
    }
    return NULL;
}

static void recorder_free(struct mlxd_recorder *r)
{
    if (!r) return;
    free(r->ring);
    free(r);
}

int mlxd_cq_record_start(struct mlxd_cq *cq, const char *path, const struct mlxd_record_opts *opts,
                         struct mlxd_recorder **out)
{
    if (!cq || cq->state != OBJ_LIVE || !path || !out)
        return mlxd_err(EINVAL, "mlxd_cq_record_start: needs a live CQ, a path and out");
    if (cq->cqe_comp)
        return mlxd_err(EINVAL, "mlxd_cq_record_start: CQ 0x%06x was created with CQE compression: a fixture "
                        "holds full CQEs only", cq->cqn);
    if (cq->recorder) return mlxd_err(EBUSY, "mlxd_cq_record_start: CQ 0x%06x is already recorded", cq->cqn);
    if (opts && opts->sz < offsetof(struct mlxd_record_opts, source) + sizeof opts->source)
        return mlxd_err(EINVAL, "mlxd_cq_record_start: opts->sz %zu is too small", opts->sz);
    int rc = opts ? mlxd__opts_tail_check("mlxd_cq_record_start", "opts", opts, opts->sz, sizeof *opts) : 0;
    if (rc) return rc;
    uint32_t entries = opts && opts->ring_entries ? opts->ring_entries : DEFAULT_ENTRIES;
    if (entries & (entries - 1) || entries > MAX_ENTRIES)
        return mlxd_err(EINVAL, "mlxd_cq_record_start: ring_entries %u is not a power of two up to %u",
                        entries, MAX_ENTRIES);
    struct mlxd_fixture_header h = { .version = 2, .cqe_size = 64, .ring_size = cq->ncqe,
                                     .cqn = cq->cqn & 0xffffff };
    const char *src = opts && opts->source ? opts->source : NULL;
    if (src) {
        if (strlen(src) >= sizeof h.source)
            return mlxd_err(EINVAL, "mlxd_cq_record_start: source is longer than %zu bytes", sizeof h.source - 1);
        strcpy(h.source, src);
    } else {
        snprintf(h.source, sizeof h.source, "mlxd_cq_record_start: CQ 0x%06x, %s", h.cqn,
                 cq->detached ? "detached ring" : "live NIC");
    }
    struct mlxd_recorder *r = calloc(1, sizeof *r);
    if (!r) return mlxd_err(ENOMEM, "mlxd_cq_record_start: out of memory");
    r->ring = calloc(entries, sizeof *r->ring);   /* preallocated: the poll loop only copies */
    if (!r->ring) { recorder_free(r); return mlxd_err(ENOMEM, "mlxd_cq_record_start: out of memory"); }
    r->mask = entries - 1;
    r->cq = cq;
    if (opts && opts->sz >= offsetof(struct mlxd_record_opts, metadata_ctx) + sizeof opts->metadata_ctx) {
        r->md_fn = opts->metadata;
        r->md_ctx = opts->metadata_ctx;
    }
    if ((rc = mlxd_fixture_writer_open(path, &h, &r->w)) < 0) {
        recorder_free(r);
        return mlxd_err(-rc, "mlxd_cq_record_start: %s", mlxd_errmsg());
    }
    rc = pthread_create(&r->thread, NULL, writer, r);
    if (rc) {
        mlxd_fixture_writer_close(r->w);
        recorder_free(r);
        return mlxd_err(rc, "mlxd_cq_record_start: pthread_create: %s", strerror(rc));
    }
    /* the poll loop records in its general path: a recorded CQ keeps no hot QP */
    cq->hot_qp = NULL;
    cq->recorder = r;
    *out = r;
    return 0;
}

void mlxd_recorder_stats(const struct mlxd_recorder *r, struct mlxd_record_stats *st)
{
    if (!r || !st) return;
    st->recorded = atomic_load_explicit(&r->head, memory_order_acquire);
    st->overflow = atomic_load_explicit(&r->overflow, memory_order_relaxed);
    st->written = atomic_load_explicit(&r->tail, memory_order_acquire);
}

int mlxd_cq_record_stop(struct mlxd_recorder *r, struct mlxd_record_stats *st)
{
    if (!r) return mlxd_err(EINVAL, "mlxd_cq_record_stop: recorder is NULL");
    r->cq->recorder = NULL;
    atomic_store_explicit(&r->stop, true, memory_order_release);
    pthread_join(r->thread, NULL);
    mlxd_recorder_stats(r, st);
    uint64_t ov = atomic_load_explicit(&r->overflow, memory_order_relaxed);
    int rc = r->werr;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", r->wmsg);
    if (!rc && ov) rc = mlxd_fixture_writer_set_overflow(r->w, ov);
    int crc = mlxd_fixture_writer_close(r->w);
    if (!rc && crc) { rc = crc; snprintf(msg, sizeof msg, "%s", mlxd_errmsg()); }
    recorder_free(r);
    if (rc) return mlxd_err(-rc, "mlxd_cq_record_stop: %s", msg);
    return 0;
}
