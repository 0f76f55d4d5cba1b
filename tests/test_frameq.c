/* The frame queue between the monitor and the consumer (receiver/frameq.h).
 * Semantics from Holoscan Sensor Bridge src/hololink/operators/roce_receiver/roce_receiver.cpp
 * (RoceReceiver 2.6+, blocking_monitor and get_next_frame): queue_size slots; before the
 * consumer's first get only the newest frame is kept (not a drop); when full the oldest is
 * dropped and counted; frames come out in arrival order. */
#include <check.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

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

Suite *frameq_suite(void)
{
    Suite *s = suite_create("frameq");
    TCase *tc = tcase_create("frameq");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, newest_only_before_consumer);
    tcase_add_test(tc, full_drops_oldest);
    tcase_add_test(tc, timeout_and_close);
    tcase_add_test(tc, threaded_no_torn_entries);
    suite_add_tcase(s, tc);
    return s;
}
