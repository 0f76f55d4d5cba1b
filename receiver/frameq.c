/* frameq.c: see frameq.h for the design and its argument. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "frameq.h"

/* Spin-then-sleep (frameq.h): a waiting consumer spins for spin_ns before it sleeps; spin_ns
 * adapts between these bounds to the waits it sees. */
#define FRAMEQ_SPIN_MIN_NS 50000u     /* 50 us */
#define FRAMEQ_SPIN_MAX_NS 2000000u   /* 2 ms: streams above 1,000 frames/s never sleep */

int frameq_init(struct frameq *q, unsigned cap)
{
    if (!q || cap == 0)
        return -EINVAL;
    uint64_t r = 1;
    while (r < cap)
        r <<= 1;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, r * sizeof(struct frameq_slot)))
        return -ENOMEM;
    q->slots = mem;
    q->cap = cap;
    q->mask = r - 1;
    for (uint64_t i = 0; i < r; i++)
        for (unsigned k = 0; k < FRAMEQ_WORDS; k++)
            atomic_init(&q->slots[i].w[k], 0);
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
    atomic_init(&q->word, 0);
    atomic_init(&q->consumer_ready, false);
    atomic_init(&q->closed, false);
    atomic_init(&q->dropped, 0);
    atomic_init(&q->replaced, 0);
    atomic_init(&q->wakeups, 0);
    atomic_init(&q->spin_ns, FRAMEQ_SPIN_MIN_NS);
    return 0;
}

void frameq_fini(struct frameq *q)
{
    if (!q)
        return;
    free(q->slots);
    q->slots = NULL;
}

void frameq_reset(struct frameq *q)
{
    uint64_t t = atomic_load(&q->tail);
    atomic_store(&q->head, t);
    atomic_store(&q->dropped, 0);
    atomic_store(&q->replaced, 0);
    atomic_store(&q->wakeups, 0);
    atomic_store(&q->spin_ns, FRAMEQ_SPIN_MIN_NS);
    atomic_store(&q->consumer_ready, false);
    atomic_store(&q->closed, false);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void frameq_push(struct frameq *q, const uint64_t w[FRAMEQ_WORDS])
{
    uint64_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    bool ready = atomic_load_explicit(&q->consumer_ready, memory_order_acquire);
    uint64_t keep = ready ? q->cap : 1;   /* entries that may remain before this one */
    uint64_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    while (t - h >= keep) {
        /* Drop the oldest.  Failure means a consumer took it (or another drop won): h reloads. */
        if (atomic_compare_exchange_weak_explicit(&q->head, &h, h + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            atomic_fetch_add_explicit(ready ? &q->dropped : &q->replaced, 1, memory_order_relaxed);
        /* (on success h is stale: reload) */
        h = atomic_load_explicit(&q->head, memory_order_acquire);
    }
    /* Now head > t - cap: no consumer can still win a CAS for the entry t - R that this slot held. */
    struct frameq_slot *s = &q->slots[t & q->mask];
    for (unsigned k = 0; k < FRAMEQ_WORDS; k++)
        atomic_store_explicit(&s->w[k], w[k], memory_order_relaxed);
    atomic_store_explicit(&q->tail, t + 1, memory_order_release);
    /* One FUTEX_WAKE per sleep, not per push (frameq.h, "the futex word").  The count step keeps
     * the sleepers bit; when the word had it, this push clears it and wakes every sleeper, so
     * the pushes made while they wake find it clear and make no system call. */
    uint32_t old = atomic_fetch_add_explicit(&q->word, FRAMEQ_WORD_STEP, memory_order_seq_cst);
    if (old & FRAMEQ_SLEEPERS) {
        atomic_fetch_and_explicit(&q->word, ~FRAMEQ_SLEEPERS, memory_order_seq_cst);
        /* counted before the call: a consumer it wakes may return and read the stats before
         * this thread runs again (seen on a loaded host: consumer_wakeups 0 after a wake-up) */
        atomic_fetch_add_explicit(&q->wakeups, 1, memory_order_release);
        futex_wake_all(&q->word);
    }
}

bool frameq_pop(struct frameq *q, uint64_t w[FRAMEQ_WORDS])
{
    uint64_t h = atomic_load_explicit(&q->head, memory_order_acquire);
    for (;;) {
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
        if (h >= t)
            return false;
        struct frameq_slot *s = &q->slots[h & q->mask];
        for (unsigned k = 0; k < FRAMEQ_WORDS; k++)
            w[k] = atomic_load_explicit(&s->w[k], memory_order_relaxed);
        /* Release: our reads of the slot happen before the producer's later rewrite of it. */
        if (atomic_compare_exchange_strong_explicit(&q->head, &h, h + 1, memory_order_acq_rel,
                                                    memory_order_acquire))
            return true;
        /* h now holds the current head: retry */
    }
}

void frameq_consumer_ready(struct frameq *q)
{
    if (!atomic_load_explicit(&q->consumer_ready, memory_order_relaxed))
        atomic_store_explicit(&q->consumer_ready, true, memory_order_release);
}

bool frameq_nonempty(struct frameq *q)
{
    return !atomic_load_explicit(&q->closed, memory_order_acquire) &&
           atomic_load_explicit(&q->head, memory_order_acquire) <
           atomic_load_explicit(&q->tail, memory_order_acquire);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After a wait of `waited` ns that had to sleep: the next waits spin through such a gap (twice
 * it, up to the maximum) so that a consumer keeping up with a steady stream stops sleeping; each
 * gap longer than the maximum (a slow stream, an idle one, or a hiccup of the scheduler) halves
 * the spin, so one hiccup does not send a fast stream's consumer back to sleeping per frame
 * while a slow stream is back at the short spin after a few frames. */
static void adapt_spin(struct frameq *q, uint64_t waited)
{
    uint32_t cur = atomic_load_explicit(&q->spin_ns, memory_order_relaxed);
    uint32_t spin = waited <= FRAMEQ_SPIN_MAX_NS / 2 ? (uint32_t)(2 * waited)
                  : waited <= FRAMEQ_SPIN_MAX_NS   ? FRAMEQ_SPIN_MAX_NS : cur / 2;
    if (spin < FRAMEQ_SPIN_MIN_NS)
        spin = FRAMEQ_SPIN_MIN_NS;
    if (waited <= FRAMEQ_SPIN_MAX_NS && spin < cur)
        spin = cur;      /* a short gap never shortens the spin: only long gaps (halving) do */
    atomic_store_explicit(&q->spin_ns, spin, memory_order_relaxed);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The spin phase: true with w filled, false when it ended (spin time over, or closed). */
static bool spin_pop(struct frameq *q, uint64_t w[FRAMEQ_WORDS], uint64_t spin_end)
{
    for (unsigned i = 0;; i++) {
        if (frameq_pop(q, w))
            return true;
        if (atomic_load_explicit(&q->closed, memory_order_relaxed))
            return false;
        if ((i & 63) == 63 && now_ns() >= spin_end)
            return false;
        cpu_relax();
    }
}

bool frameq_wait_pop(struct frameq *q, uint64_t w[FRAMEQ_WORDS], unsigned timeout_ms)
{
    if (atomic_load_explicit(&q->closed, memory_order_acquire))
        return false;
    frameq_consumer_ready(q);
    if (frameq_pop(q, w))
        return true;
    if (timeout_ms == 0)
        return false;
    uint64_t start = now_ns();
    uint64_t deadline = start + (uint64_t)timeout_ms * 1000000u;
    /* Spin first: a consumer that does not sleep costs the producer no FUTEX_WAKE. */
    uint64_t spin = atomic_load_explicit(&q->spin_ns, memory_order_relaxed);
    if (spin_pop(q, w, start + spin < deadline ? start + spin : deadline))
        return true;
    for (;;) {
        if (atomic_load(&q->closed))
            return false;
        /* The sleepers bit is set in the word this consumer will sleep on, and the queue is
         * looked at only after that (frameq.h): a push before it is seen by the pop below, a
         * push after it changes the word from one with the bit, and such a change is always
         * followed by a FUTEX_WAKE.  A bit left set costs at most one spare FUTEX_WAKE. */
        uint32_t v = atomic_load_explicit(&q->word, memory_order_seq_cst);
        while (!(v & FRAMEQ_SLEEPERS) &&
               !atomic_compare_exchange_weak_explicit(&q->word, &v, v | FRAMEQ_SLEEPERS,
                                                      memory_order_seq_cst, memory_order_seq_cst))
            ;
        v |= FRAMEQ_SLEEPERS;
        if (frameq_pop(q, w))
            return true;
        uint64_t now = now_ns();
        if (now >= deadline || atomic_load(&q->closed)) {
            adapt_spin(q, now - start);
            return false;
        }
        uint64_t left = deadline - now;
        struct timespec rel = { .tv_sec = (time_t)(left / 1000000000u),
                                .tv_nsec = (long)(left % 1000000000u) };
        syscall(SYS_futex, (uint32_t *)&q->word, FUTEX_WAIT_PRIVATE, v, &rel, NULL, 0);
        if (frameq_pop(q, w)) {
            adapt_spin(q, now_ns() - start);
            return true;
        }
    }
}

void frameq_close(struct frameq *q)
{
    atomic_store(&q->closed, true);
    atomic_fetch_add(&q->word, FRAMEQ_WORD_STEP);
    futex_wake_all(&q->word);
}
