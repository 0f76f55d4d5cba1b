/* The frame queue between the monitor and the consumer (receiver/frameq.h).
 * Semantics from Holoscan Sensor Bridge src/hololink/operators/roce_receiver/roce_receiver.cpp
 * (RoceReceiver 2.6+, blocking_monitor and get_next_frame): queue_size slots; before the
 * consumer's first get only the newest frame is kept (not a drop); when full the oldest is
 * dropped and counted; frames come out in arrival order. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "frameq.h"

static void entry(uint64_t w[FRAMEQ_WORDS], uint64_t n)
{
    for (unsigned k = 0; k < FRAMEQ_WORDS; k++) w[k] = n * 1000003u + k;
}

static uint64_t check_entry(const uint64_t w[FRAMEQ_WORDS])
{
    uint64_t n = w[0] / 1000003u;
    for (unsigned k = 0; k < FRAMEQ_WORDS; k++)
        ck_assert_msg(w[k] == n * 1000003u + k, "torn entry: word %u of %llu", k, (unsigned long long)n);
    return n;
}

START_TEST(newest_only_before_consumer)
{
    struct frameq q;
    ck_assert_int_eq(frameq_init(&q, 4), 0);
    uint64_t w[FRAMEQ_WORDS];
    for (uint64_t n = 0; n < 5; n++) { entry(w, n); frameq_push(&q, w); }
    ck_assert(frameq_nonempty(&q));
    ck_assert(frameq_wait_pop(&q, w, 0));
    ck_assert_uint_eq(check_entry(w), 4);          /* only the newest survived */
    ck_assert_uint_eq(atomic_load(&q.dropped), 0);
    ck_assert_uint_eq(atomic_load(&q.replaced), 4);
    ck_assert(!frameq_wait_pop(&q, w, 0));
    ck_assert(!frameq_nonempty(&q));
    frameq_fini(&q);
}
END_TEST

START_TEST(full_drops_oldest)
{
    struct frameq q;
    ck_assert_int_eq(frameq_init(&q, 3), 0);       /* not a power of two: ring of 4 */
    uint64_t w[FRAMEQ_WORDS];
    frameq_consumer_ready(&q);
    for (uint64_t n = 0; n < 10; n++) { entry(w, n); frameq_push(&q, w); }
    ck_assert_uint_eq(atomic_load(&q.dropped), 7);
    for (uint64_t n = 7; n < 10; n++) {
        ck_assert(frameq_pop(&q, w));
        ck_assert_uint_eq(check_entry(w), n);
    }
    ck_assert(!frameq_pop(&q, w));
    /* queue_size 1: each new frame replaces the unread one and counts a drop */
    struct frameq q1;
    ck_assert_int_eq(frameq_init(&q1, 1), 0);
    frameq_consumer_ready(&q1);
    for (uint64_t n = 0; n < 3; n++) { entry(w, n); frameq_push(&q1, w); }
    ck_assert_uint_eq(atomic_load(&q1.dropped), 2);
    ck_assert(frameq_pop(&q1, w));
    ck_assert_uint_eq(check_entry(w), 2);
    frameq_fini(&q);
    frameq_fini(&q1);
}
END_TEST

START_TEST(timeout_and_close)
{
    struct frameq q;
    ck_assert_int_eq(frameq_init(&q, 2), 0);
    uint64_t w[FRAMEQ_WORDS];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ck_assert(!frameq_wait_pop(&q, w, 50));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    ck_assert_msg(ms >= 49 && ms < 2000, "waited %.1f ms for a 50 ms timeout", ms);
    entry(w, 7);
    frameq_push(&q, w);
    frameq_close(&q);
    ck_assert(!frameq_nonempty(&q));                /* a closed queue hands nothing out */
    clock_gettime(CLOCK_MONOTONIC, &a);
    ck_assert(!frameq_wait_pop(&q, w, 10000));
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    ck_assert_msg(ms < 1000, "closed queue still waited %.1f ms", ms);
    frameq_reset(&q);
    entry(w, 1);
    frameq_push(&q, w);
    ck_assert(frameq_wait_pop(&q, w, 10));
    frameq_fini(&q);
}
END_TEST

struct stress { struct frameq *q; uint64_t n; _Atomic int started; };

static void *producer(void *arg)
{
    struct stress *s = arg;
    uint64_t w[FRAMEQ_WORDS];
    while (!atomic_load(&s->started)) ;
    for (uint64_t n = 0; n < s->n; n++) {
        entry(w, n);
        frameq_push(s->q, w);
        if ((n & 1023) == 0) sched_yield();
    }
    return NULL;
}

/* One producer against one consumer: every entry is whole, in order, and
 * taken + dropped + left over = pushed. */
START_TEST(threaded_no_torn_entries)
{
    struct frameq q;
    ck_assert_int_eq(frameq_init(&q, 3), 0);
    frameq_consumer_ready(&q);
    struct stress s = { .q = &q, .n = 300000 };
    pthread_t th;
    pthread_create(&th, NULL, producer, &s);
    atomic_store(&s.started, 1);
    uint64_t w[FRAMEQ_WORDS], taken = 0, last = 0;
    bool first = true;
    for (;;) {
        if (frameq_wait_pop(&q, w, 200)) {
            uint64_t n = check_entry(w);
            ck_assert(first || n > last);
            first = false;
            last = n;
            taken++;
            if (n == s.n - 1) break;
        } else if (!frameq_nonempty(&q)) {
            break;   /* producer done and the last entry was dropped */
        }
    }
    pthread_join(th, NULL);
    while (frameq_pop(&q, w)) { check_entry(w); taken++; }
    ck_assert_uint_eq(taken + atomic_load(&q.dropped), s.n);
    frameq_fini(&q);
}
END_TEST


/* ---- wake-ups with several consumers ---------------------------------------------------- */

struct many { struct frameq *q; _Atomic long tid; _Atomic bool stop; _Atomic uint64_t taken; bool sleeps; };

static void *many_consumer(void *arg)
{
    struct many *m = arg;
    atomic_store(&m->tid, (long)syscall(SYS_gettid));
    uint64_t w[FRAMEQ_WORDS];
    while (!atomic_load(&m->stop))
        if (m->sleeps ? frameq_wait_pop(m->q, w, 60000) : frameq_pop(m->q, w)) {
            check_entry(w);
            atomic_fetch_add(&m->taken, 1);
        }
    return NULL;
}

static bool read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
    return n > 0;
}

/* 1 when thread tid sleeps (state S) in FUTEX_WAIT on a word inside *q whose value is no longer
 * the one it went to sleep on: the word changed after it fell asleep and nobody woke it, a lost
 * wake-up (the producer, the caller, has returned from every push, so any FUTEX_WAKE owed has
 * been made, and a woken thread is runnable, state R, at once).  0 otherwise; the two reads of
 * /proc/<tid>/syscall around the state must agree. */
static int lost_wakeup(long tid, const struct frameq *q)
{
    char p[96], a[256], b[256], st[512];
    snprintf(p, sizeof p, "/proc/self/task/%ld/syscall", tid);
    if (!read_line(p, a, sizeof a)) return 0;
    snprintf(p, sizeof p, "/proc/self/task/%ld/stat", tid);
    if (!read_line(p, st, sizeof st)) return 0;
    snprintf(p, sizeof p, "/proc/self/task/%ld/syscall", tid);
    if (!read_line(p, b, sizeof b) || strcmp(a, b)) return 0;
    const char *e = strrchr(st, ')');
    if (!e || e[1] != ' ' || e[2] != 'S') return 0;
    long nr;
    unsigned long addr, op, val;
    if (sscanf(a, "%ld %lx %lx %lx", &nr, &addr, &op, &val) != 4) return 0;
    if (nr != SYS_futex || (op & 0x7f) != 0 /* FUTEX_WAIT */) return 0;
    if (addr < (uintptr_t)q || addr >= (uintptr_t)(q + 1)) return 0;
    uint32_t now = __atomic_load_n((const uint32_t *)(uintptr_t)addr, __ATOMIC_SEQ_CST);
    return now != (uint32_t)val;
}

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Two consumers of one queue (mlxd_receiver_get_next_frame from two threads): one polls (a
 * consumer that keeps up: timeout 0, it never sleeps), one waits with a timeout and sleeps.  The
 * poller takes nearly every entry, so the sleeper is woken by a push, finds the queue empty and
 * goes back to sleep, again and again, while the next pushes come at random gaps: every
 * interleaving of its way back to sleep with a push is tried.  A push must wake it every time:
 * the test looks at it between pushes, and a sleeper asleep on a futex value that pushes have
 * since changed lost its wake-up (it would sleep to its 60 s timeout; nobody else sets the
 * sleepers mark).  The protocol before the futex word held that mark, a sleepers flag beside a
 * push count, lost it: the sleeper set the flag, read the count a push had just bumped, the push
 * cleared the flag, the poller took the entry, and the sleeper slept on the new count with the
 * flag clear, so later pushes woke nobody. */
START_TEST(two_consumers_no_lost_wakeup)
{
    struct frameq q;
    ck_assert_int_eq(frameq_init(&q, 64), 0);
    frameq_consumer_ready(&q);
    struct many m[2] = { { .q = &q, .sleeps = true }, { .q = &q, .sleeps = false } };
    pthread_t th[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, many_consumer, &m[i]), 0);
    for (int i = 0; i < 2; i++)
        while (!atomic_load(&m[i].tid)) usleep(100);
    uint64_t w[FRAMEQ_WORDS], pushed = 0, lost = 0, seed = 12345, t0 = mono_ns();
    while (!lost && mono_ns() - t0 < 8000000000ull) {
        for (int k = 0; k < 256; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t until = mono_ns() + (seed >> 33) % 20000;     /* 0..20 us */
            while (mono_ns() < until) ;
            entry(w, pushed++);
            frameq_push(&q, w);
        }
        usleep(1000);                     /* woken threads run: a sleeper left asleep is stale */
        lost += (uint64_t)lost_wakeup(atomic_load(&m[0].tid), &q);
    }
    ck_assert_msg(lost == 0, "the sleeping consumer slept through a push (lost wake-up) after %llu pushes",
                  (unsigned long long)pushed);
    for (int i = 0; i < 2; i++) atomic_store(&m[i].stop, true);
    frameq_close(&q);
    uint64_t left = 0;
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    while (frameq_pop(&q, w)) left++;
    ck_assert_uint_eq(atomic_load(&m[0].taken) + atomic_load(&m[1].taken) + atomic_load(&q.dropped) + left, pushed);
    frameq_fini(&q);
}
END_TEST

Suite *frameq_suite(void)
{
    Suite *s = suite_create("frameq");
    TCase *tc = tcase_create("frameq");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, newest_only_before_consumer);
    tcase_add_test(tc, full_drops_oldest);
    tcase_add_test(tc, timeout_and_close);
    tcase_add_test(tc, threaded_no_torn_entries);
    tcase_add_test(tc, two_consumers_no_lost_wakeup);
    suite_add_tcase(s, tc);
    return s;
}
