/* frameq.h (private): the frame queue between the monitor thread (one producer) and the
 * consumers of mlxd_receiver_get_next_frame (any number of threads).
 *
 * Semantics (Holoscan Sensor Bridge src/hololink/operators/roce_receiver/roce_receiver.cpp,
 * RoceReceiver 2.6+):
 *   - capacity `cap` entries (queue_size);
 *   - before the first consumer call (frameq_consumer_ready) only the newest entry is kept: a new
 *     push replaces what is queued, and that replacement is not a drop;
 *   - when the queue is full a push drops the oldest entry and counts it in `dropped`.
 *
 * Design: a ring of R slots (R = cap rounded up to a power of two, so an index is a mask, never a
 * division), two 64-bit counters head (next to take) and tail (next to write).  The producer owns
 * tail; head is advanced by compare-and-swap both by consumers (take) and by the producer (drop
 * the oldest).  A consumer copies the slot at head, then CASes head -> head+1; the copy counts
 * only if the CAS wins.  The producer writes slot tail only after head > tail - cap, i.e. after
 * every consumer that could still be copying that slot's previous entry has lost its CAS, so a
 * consumer never keeps a torn copy.  Slot words are C11 atomics (relaxed), so there is no data
 * race even for the copies that are thrown away.
 *
 * Per push: no lock, no system call, no allocation, no division.  A consumer that must wait
 * spins first, then sleeps on a futex; the producer calls FUTEX_WAKE only when a consumer went to
 * sleep (the sleepers bit of the futex word, below) and once per sleep, not once per push while
 * the sleeper wakes, so a consumer that keeps up costs the producer nothing (issue 18).  The
 * spin adapts (spin_ns, as glibc's adaptive mutexes learn their spin count): after a wait that
 * had to sleep for a gap of g <= 2 ms, later waits spin for at least 2g (at least 50 us, at most
 * 2 ms), so at a steady 10,000 frames/s the consumer spins through the 100 us gaps and stops
 * sleeping; each gap over 2 ms (a stream below ~500 frames/s, an idle one) halves the spin, so
 * a slow stream is back at 50 us within a few frames and costs one sleep and one FUTEX_WAKE per
 * frame and little CPU.
 *
 * The futex word (word): bit 0 (FRAMEQ_SLEEPERS) says a consumer may sleep on it, the bits
 * above count pushes and closes.  A consumer that must sleep sets the bit (compare-and-swap)
 * unless it is set, then looks at the queue, then sleeps on the word's value with the bit.  A
 * push adds FRAMEQ_WORD_STEP (keeping the bit); when the bit was set it clears it and calls
 * FUTEX_WAKE for everyone.  So every change of the word away from a value with the bit is
 * followed by a wake, and a consumer sleeping on such a value is woken by the first push after
 * its look at the queue, whatever other consumers do meanwhile.  (A separate sleepers flag,
 * cleared by a push, lost wake-ups with two consumers: a consumer could set the flag, read the
 * count the push had just bumped, have a push clear its flag and another consumer take the
 * entry, then sleep with the flag clear while later pushes woke nobody.)
 */
#ifndef MLXD_FRAMEQ_H
#define MLXD_FRAMEQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Library-internal: the linked symbols carry the library's internal prefix mlxd__ so that
 * libmlx5direct.{a,so} exports nothing outside mlxd_* (the source keeps the short names). */
#define frameq_init           mlxd__frameq_init
#define frameq_fini           mlxd__frameq_fini
#define frameq_reset          mlxd__frameq_reset
#define frameq_push           mlxd__frameq_push
#define frameq_pop            mlxd__frameq_pop
#define frameq_wait_pop       mlxd__frameq_wait_pop
#define frameq_consumer_ready mlxd__frameq_consumer_ready
#define frameq_nonempty       mlxd__frameq_nonempty
#define frameq_close          mlxd__frameq_close

#define FRAMEQ_WORDS 16
#define FRAMEQ_SLEEPERS 1u       /* in frameq.word */
#define FRAMEQ_WORD_STEP 2u      /* a push's (or close's) step of frameq.word */

struct frameq_slot {
    _Alignas(64) _Atomic uint64_t w[FRAMEQ_WORDS];
};

struct frameq {
    _Alignas(64) _Atomic uint64_t head;   /* written by consumers (and by drops) */
    _Atomic uint32_t spin_ns;      /* consumers' spin before sleeping (adaptive, see above) */
    _Alignas(64) _Atomic uint64_t tail;
    _Atomic uint32_t word;         /* the futex word: FRAMEQ_SLEEPERS | a count (see above) */
    _Atomic bool consumer_ready;
    _Atomic bool closed;
    _Atomic uint64_t dropped;      /* full-queue drops of the oldest entry */
    _Atomic uint64_t replaced;     /* entries replaced before the first consumer call */
    _Atomic uint64_t wakeups;      /* FUTEX_WAKE calls made by frameq_push */
    uint64_t cap, mask;
    struct frameq_slot *slots;
};

/* cap >= 1.  Returns 0 or -ENOMEM / -EINVAL. */
int frameq_init(struct frameq *q, unsigned cap);
void frameq_fini(struct frameq *q);
/* Empties the queue and clears the counters and flags (no consumer may be inside). */
void frameq_reset(struct frameq *q);

/* Producer only. */
void frameq_push(struct frameq *q, const uint64_t w[FRAMEQ_WORDS]);

/* Any thread.  Non-blocking take: true and w filled, or false if empty. */
bool frameq_pop(struct frameq *q, uint64_t w[FRAMEQ_WORDS]);
/* Marks the consumer as present (from then on entries queue up to cap). */
void frameq_consumer_ready(struct frameq *q);
/* Takes the oldest entry, waiting up to timeout_ms (0: do not wait).  Returns true with w filled,
 * false on timeout or once frameq_close has run (queued entries are then not handed out). */
bool frameq_wait_pop(struct frameq *q, uint64_t w[FRAMEQ_WORDS], unsigned timeout_ms);
/* False when empty or closed. */
bool frameq_nonempty(struct frameq *q);
/* Wakes every waiting consumer for good and refuses entries from then on (until frameq_reset). */
void frameq_close(struct frameq *q);

#endif
