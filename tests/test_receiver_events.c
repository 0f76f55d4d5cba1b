/* receiver_events: the receiver reports what departs from its configuration (issue 13), on the
 * emulated NIC fed by the generator:
 *   port_flap            the link goes down while 50 of 250 frames are sent (both monitor modes):
 *                        PORT_DOWN, PORT_UP (down_ns >= 50 ms) and RESUMED (frames_lost = 50 =
 *                        stats.lost_link_down, less any frame still in the host's socket when
 *                        the link came back) reach the handler and the queue, and the receiver
 *                        goes on: 200 frames + 50 lost.
 *   fatal_events         QP fatal, CQ error and device fatal (mlxd_emu_inject_event, the kernel's
 *                        async events) end blocking_monitor with -EIO / -ENODEV and a message
 *                        naming the event, in both modes; counted in the stats; queued.
 *   event_burst          24 link events while the monitor is held in a callback (both modes):
 *                        all reach the handler and the queue in order, counted, none dropped
 *                        (busy mode: the events thread's mailbox fills and waits).
 *   lost_gap             frame numbers 0..9 then 15..24: exactly 5 frames lost, 20 received.
 *   no_receive_and_gap   two causes at once: receives run out (the callback stalls the monitor
 *                        with 2 receives posted) and 5 frame numbers never sent: the CQEs'
 *                        hw_drops and the port's out_of_buffer name the dropped frames, the gap
 *                        names the 5, and everything adds up to the 25 numbers.
 *   short_frame          the device sends 4000-byte frames to a receiver of 4096: each is
 *                        flagged MLXD_FRAME_SIZE_MISMATCH, counted in short_frames, and
 *                        last_bytes_written says 4000.
 *   missing_metadata     the receiver expects 4352-byte frames (metadata at 4352), the device
 *                        sends 4096 (metadata at 4096): every frame is MLXD_FRAME_MISSING_METADATA
 *                        and none is counted as overwritten.
 *   gen_run_refuses      mlxd_gen_run refuses an unset src_ip (-EINVAL), a src_ip that is not this
 *                        host's (-EADDRNOTAVAIL) and packets above the port's MTU (-EMSGSIZE, naming
 *                        both sizes); a run that succeeds leaves no message behind.
 *   qp_create_cq_overrun mlxd_qp_create refuses a QP whose depths could overrun its CQ (naming the
 *                        numbers and the size needed), counts the QPs already on it, frees the
 *                        budget on destroy, and accepts opts.share_cq.
 *   rtr_timeout_retries  a peer nothing answers for (mlxd_emu_neigh_set 0): each RTR waits the
 *                        kernel's 1 s and fails with ETIMEDOUT; start tries 5 times (200 ms
 *                        apart, as Holoscan Sensor Bridge's receiver) and explains; a peer that
 *                        answers late (during the second try) lets start succeed.
 *   address_in_use       an emulated device whose UDP address another program holds: mlxd_open fails
 *                        with -EADDRINUSE and a message naming MLXD_EMU_DEVICES and the fix.
 *   fork_mid_capture     (both modes) the process forks while frames flow; the child's close,
 *                        stats, get_next_frame and destroy are refused (-EINVAL, "fork" in the
 *                        message) without hanging, the child cannot read the frame buffer
 *                        (MADV_DONTFORK), and the parent receives every frame (none
 *                        overwritten: the sender is paced by the monitor), its monitor running
 *                        until its own close.
 * Expected values: the generator's contract (receiver/mlxd_capture.h), Holoscan Sensor Bridge's
 * metadata layout (mlxd_hsb.h), the kernel's ib_event_type numbers (include/rdma/ib_verbs.h). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/wait.h>

#include "mlxd_capture.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_receiver.h"
#include "mlxd_uverbs.h"
#include "util.h"

struct ev_rx {
    struct mlxd_receiver *r;
    uint8_t *buf;
    size_t frame, page;
    unsigned pages;
    pthread_t mon;
    int mon_rc;
    char mon_msg[512];
    _Atomic bool mon_done;
    char dst[32];
    /* the event handler's record */
    pthread_mutex_t lock;
    struct mlxd_receiver_event seen[64];
    unsigned nseen;
    _Atomic unsigned stall_ms;     /* the frame-ready callback sleeps this long once */
    _Atomic bool stalling;         /* it is sleeping now */
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_event(void *ctx, const struct mlxd_receiver_event *ev)
{
    struct ev_rx *x = ctx;
    pthread_mutex_lock(&x->lock);
    if (x->nseen < 64) x->seen[x->nseen++] = *ev;
    pthread_mutex_unlock(&x->lock);
}

static void on_ready(void *ctx)
{
    struct ev_rx *x = ctx;
    unsigned ms = atomic_exchange(&x->stall_ms, 0);
    if (!ms) return;
    atomic_store(&x->stalling, true);
    usleep(ms * 1000);
    atomic_store(&x->stalling, false);
}

static void *mon_main(void *arg)
{
    struct ev_rx *x = arg;
    x->mon_rc = mlxd_receiver_blocking_monitor(x->r);
    if (x->mon_rc < 0) snprintf(x->mon_msg, sizeof x->mon_msg, "%s", mlxd_errmsg());
    atomic_store(&x->mon_done, true);
    return NULL;
}

/* A receiver of frame_size frames (metadata where a device of that size puts it). */
static void ev_start(struct ev_rx *x, size_t frame, unsigned pages, uint32_t mode, unsigned recv_depth)
{
    memset(x, 0, sizeof *x);
    mlxd_test_private_devices();
    pthread_mutex_init(&x->lock, NULL);
    x->frame = frame;
    x->page = mlxd_hsb_min_page_size(frame);
    x->pages = pages;
    /* whole pages, as registered memory must be to keep a child of fork safe: its pages are
     * MADV_DONTFORK, and heap data sharing its last page would vanish in the child */
    size_t size = (x->page * pages + 4095) & ~(size_t)4095;
    ck_assert_int_eq(posix_memalign((void **)&x->buf, 4096, size), 0);
    memset(x->buf, 0, size);
    x->r = mlxd_receiver_new();
    mlxd_receiver_set_event_handler(x->r, on_event, x);
    mlxd_receiver_set_frame_ready(x->r, on_ready, x);
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .port = 1, .buffer = (uintptr_t)x->buf,
        .buffer_size = size, .frame_size = frame, .page_size = x->page, .pages = pages,
        .metadata_offset = mlxd_hsb_metadata_offset(frame), .peer_ip = "127.0.0.1",
        .queue_size = pages, .mode = mode, .recv_depth = recv_depth };
    int rc = mlxd_receiver_start(x->r, &o);
    ck_assert_msg(rc == 0, "start: %s", mlxd_errmsg());
    uint32_t ip = mlxd_receiver_local_ipv4(x->r);
    snprintf(x->dst, sizeof x->dst, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    ck_assert_int_eq(pthread_create(&x->mon, NULL, mon_main, x), 0);
    usleep(20000);   /* the monitor runs (and, in event mode, has armed the CQ) */
}

static void ev_stop(struct ev_rx *x)
{
    ck_assert_int_eq(mlxd_receiver_close(x->r), 0);
    pthread_join(x->mon, NULL);
    mlxd_receiver_destroy(x->r);
    pthread_mutex_destroy(&x->lock);
    free(x->buf);
}

/* Sends frames numbered first..first+n-1 of gen_frame bytes at fps (0: as fast as possible). */
static uint64_t ev_gen(struct ev_rx *x, uint64_t first, uint64_t n, size_t gen_frame, double fps, uint32_t *psn)
{
    struct mlxd_replay_map m = { .qpn = mlxd_receiver_qp_number(x->r), .rkey = mlxd_receiver_rkey(x->r),
        .base_va = mlxd_receiver_external_frame_memory(x->r), .page_size = x->page, .pages = x->pages };
    struct mlxd_gen_opts g = { .sz = sizeof g, .frame_size = gen_frame, .fps = fps, .frames = n,
        .first_page = (uint32_t)(first % x->pages), .first_frame = first, .first_psn = *psn };
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = x->dst, .src_ip = "127.0.0.1" };
    struct mlxd_send_stats st;
    int rc = mlxd_gen_run(&m, &g, &so, &st);
    ck_assert_msg(rc == 0, "gen: %s", mlxd_errmsg());
    *psn = (uint32_t)((*psn + st.packets) & 0xFFFFF);
    return st.frames;
}

/* Waits until the receiver has accounted for `n` frames (received or named), or 10 s. */
static void ev_wait_accounted(struct ev_rx *x, uint64_t n, struct mlxd_receiver_stats *st)
{
    double end = mono_s() + 10;
    do {
        mlxd_receiver_stats(x->r, st);
        if (st->frames + st->errors + st->bad_page + st->hw_drops + st->lost >= n) return;
        usleep(2000);
    } while (mono_s() < end);
}

static unsigned count_kind(struct ev_rx *x, uint32_t kind, struct mlxd_receiver_event *last)
{
    unsigned n = 0;
    pthread_mutex_lock(&x->lock);
    for (unsigned i = 0; i < x->nseen; i++)
        if (x->seen[i].kind == kind) { n++; if (last) *last = x->seen[i]; }
    pthread_mutex_unlock(&x->lock);
    return n;
}

/* ---------------------------------------------------------------------------------------- */

START_TEST(port_flap)
{
    struct ev_rx x;
    ev_start(&x, 4096, 8, _i ? MLXD_RECEIVER_EVENT : MLXD_RECEIVER_BUSY_POLL, 0);
    uint32_t psn = 0;
    struct mlxd_receiver_stats st;
    /* frames 0..99 arrive; 100..149 are sent while the link is down (50 ms at 1000 fps); 150..249
     * arrive after it came back */
    ck_assert_uint_eq(ev_gen(&x, 0, 100, 4096, 1000, &psn), 100);
    ev_wait_accounted(&x, 100, &st);
    ck_assert_int_eq(mlxd_emu_port_set(0, false), 0);
    ck_assert_uint_eq(ev_gen(&x, 100, 50, 4096, 1000, &psn), 50);
    ck_assert_int_eq(mlxd_emu_port_set(0, true), 0);
    ck_assert_uint_eq(ev_gen(&x, 150, 100, 4096, 1000, &psn), 100);
    ev_wait_accounted(&x, 250, &st);

    struct mlxd_receiver_event up, res, down;
    ck_assert_uint_eq(count_kind(&x, MLXD_RX_EVENT_PORT_DOWN, &down), 1);
    ck_assert_uint_eq(count_kind(&x, MLXD_RX_EVENT_PORT_UP, &up), 1);
    ck_assert_uint_eq(count_kind(&x, MLXD_RX_EVENT_RESUMED, &res), 1);
    ck_assert_uint_eq(down.kernel_type, 10);   /* IB_EVENT_PORT_ERR */
    ck_assert_uint_eq(up.kernel_type, 9);      /* IB_EVENT_PORT_ACTIVE */
    ck_assert_uint_ge(up.down_ns, 49000000);
    ck_assert_uint_eq(res.down_ns, up.down_ns);
    /* the frames sent while the port dropped everything: 50, less the last few whose packets
     * still sat in the host's socket when the link came back (more of them on a loaded host) */
    ck_assert_uint_ge(res.frames_lost, 25);
    ck_assert_uint_le(res.frames_lost, 50);
    ck_assert_uint_eq(st.lost_link_down, res.frames_lost);
    ck_assert_uint_eq(st.lost, res.frames_lost);
    ck_assert_uint_eq(st.frames + st.lost, 250);
    ck_assert_uint_eq(st.port_down, 1);
    ck_assert_uint_eq(st.port_up, 1);
    ck_assert_uint_eq(st.events, 2);
    ck_assert_uint_ge(st.link_down_ns, 49000000);
    /* the receiver went on */
    ck_assert_uint_ge(res.frames, 100);   /* RESUMED comes with the first frame after the outage */
    ck_assert_uint_lt(res.frames, st.frames);
    /* the queue holds the same events, in order */
    struct mlxd_receiver_event q;
    uint32_t want[] = { MLXD_RX_EVENT_PORT_DOWN, MLXD_RX_EVENT_PORT_UP, MLXD_RX_EVENT_RESUMED };
    for (int i = 0; i < 3; i++) {
        ck_assert(mlxd_receiver_next_event(x.r, &q));
        ck_assert_uint_eq(q.kind, want[i]);
    }
    ck_assert(!mlxd_receiver_next_event(x.r, &q));
    ck_assert(!atomic_load(&x.mon_done));
    ev_stop(&x);
}
END_TEST

/* _i: mode (bit 0) x event (_i / 2: QP fatal, CQ error, device fatal) */
START_TEST(fatal_events)
{
    static const struct { uint32_t type, kind; int err; const char *name; } E[] = {
        { 1, MLXD_RX_EVENT_QP_FATAL, EIO, "IB_EVENT_QP_FATAL" },
        { 0, MLXD_RX_EVENT_CQ_ERROR, EIO, "IB_EVENT_CQ_ERR" },
        { 8, MLXD_RX_EVENT_DEVICE_FATAL, ENODEV, "IB_EVENT_DEVICE_FATAL" },
    };
    int e = _i / 2;
    struct ev_rx x;
    ev_start(&x, 4096, 4, (_i & 1) ? MLXD_RECEIVER_EVENT : MLXD_RECEIVER_BUSY_POLL, 0);
    uint32_t psn = 0;
    ev_gen(&x, 0, 3, 4096, 1000, &psn);
    struct mlxd_receiver_stats st;
    ev_wait_accounted(&x, 3, &st);
    ck_assert_uint_eq(st.frames, 3);
    ck_assert_int_eq(mlxd_emu_inject_event(0, E[e].type, UINT32_MAX), 0);
    double end = mono_s() + 10;
    while (!atomic_load(&x.mon_done) && mono_s() < end) usleep(1000);
    ck_assert_msg(atomic_load(&x.mon_done), "the monitor did not end on %s", E[e].name);
    pthread_join(x.mon, NULL);
    ck_assert_int_eq(x.mon_rc, -E[e].err);
    ck_assert_msg(strstr(x.mon_msg, "mlxd_receiver_blocking_monitor: ") == x.mon_msg && strstr(x.mon_msg, E[e].name),
                  "message: %s", x.mon_msg);
    mlxd_receiver_stats(x.r, &st);
    ck_assert_uint_eq(st.qp_errors, E[e].kind == MLXD_RX_EVENT_QP_FATAL);
    ck_assert_uint_eq(st.cq_errors, E[e].kind == MLXD_RX_EVENT_CQ_ERROR);
    ck_assert_uint_eq(st.device_fatal, E[e].kind == MLXD_RX_EVENT_DEVICE_FATAL);
    struct mlxd_receiver_event q;
    ck_assert(mlxd_receiver_next_event(x.r, &q));
    ck_assert_uint_eq(q.kind, E[e].kind);
    ck_assert_uint_eq(q.kernel_type, E[e].type);
    ck_assert_uint_eq(q.frames, 3);
    ck_assert_uint_eq(count_kind(&x, E[e].kind, NULL), 1);
    /* the receiver stays started until close */
    ck_assert(mlxd_receiver_started(x.r));
    ck_assert_int_eq(mlxd_receiver_close(x.r), 0);
    mlxd_receiver_destroy(x.r);
    free(x.buf);
}
END_TEST

/* A burst of 24 link events (12 down/up flaps) while the monitor is held in the frame-ready
 * callback: in busy-poll mode the events thread fills its 8-event mailbox and must wait for the
 * monitor, the rest wait on the fd.  All 24 reach the handler and the queue, in order, and the
 * stats count them (none dropped by the hand-over).  _i: mode. */
START_TEST(event_burst)
{
    struct ev_rx x;
    ev_start(&x, 4096, 8, _i ? MLXD_RECEIVER_EVENT : MLXD_RECEIVER_BUSY_POLL, 0);
    uint32_t psn = 0;
    atomic_store(&x.stall_ms, 400);
    ev_gen(&x, 0, 1, 4096, 1000, &psn);
    double end = mono_s() + 10;
    while (!atomic_load(&x.stalling) && mono_s() < end) usleep(500);
    ck_assert_msg(atomic_load(&x.stalling), "the monitor never called the frame-ready callback");
    for (int i = 0; i < 12; i++) {
        ck_assert_int_eq(mlxd_emu_port_set(0, false), 0);
        ck_assert_int_eq(mlxd_emu_port_set(0, true), 0);
    }
    struct mlxd_receiver_stats st;
    end = mono_s() + 10;
    do {
        mlxd_receiver_stats(x.r, &st);
        if (st.events >= 24) break;
        usleep(2000);
    } while (mono_s() < end);
    ck_assert_uint_eq(st.events, 24);
    ck_assert_uint_eq(st.port_down, 12);
    ck_assert_uint_eq(st.port_up, 12);
    ck_assert_uint_eq(st.events_dropped, 0);
    ck_assert_uint_eq(count_kind(&x, MLXD_RX_EVENT_PORT_DOWN, NULL), 12);
    ck_assert_uint_eq(count_kind(&x, MLXD_RX_EVENT_PORT_UP, NULL), 12);
    struct mlxd_receiver_event q;
    for (int i = 0; i < 24; i++) {
        ck_assert(mlxd_receiver_next_event(x.r, &q));
        ck_assert_uint_eq(q.kind, i % 2 ? MLXD_RX_EVENT_PORT_UP : MLXD_RX_EVENT_PORT_DOWN);
        ck_assert_uint_eq(q.kernel_type, i % 2 ? 9 : 10);
    }
    ck_assert(!mlxd_receiver_next_event(x.r, &q));
    ck_assert(!atomic_load(&x.mon_done));
    ev_stop(&x);
}
END_TEST

START_TEST(lost_gap)
{
    struct ev_rx x;
    ev_start(&x, 4096, 32, MLXD_RECEIVER_BUSY_POLL, 0);   /* no page is rewritten */
    uint32_t psn = 0;
    ev_gen(&x, 0, 10, 4096, 500, &psn);
    ev_gen(&x, 15, 10, 4096, 500, &psn);
    struct mlxd_receiver_stats st;
    ev_wait_accounted(&x, 25, &st);
    ck_assert_uint_eq(st.frames, 20);
    ck_assert_uint_eq(st.lost, 5);
    ck_assert_uint_eq(st.lost_link_down, 0);
    ck_assert_uint_eq(st.hw_drops, 0);
    ck_assert_uint_eq(st.last_frame_number, 24);
    ev_stop(&x);
}
END_TEST

START_TEST(no_receive_and_gap)
{
    struct ev_rx x;
    ev_start(&x, 4096, 8, MLXD_RECEIVER_BUSY_POLL, 2);
    uint32_t psn = 0;
    /* the first frame's callback holds the monitor 300 ms: the second frame takes the last
     * posted receive and frames 2..9 find none (dropped by the port, counted in out_of_buffer
     * and in the hw_drops byte of the QP's next CQE); frames 10..14 are never sent; frames
     * 15..24 come after the stall */
    atomic_store(&x.stall_ms, 300);
    ev_gen(&x, 0, 10, 4096, 200, &psn);
    struct mlxd_receiver_stats st;
    double end = mono_s() + 10;
    do { usleep(10000); mlxd_receiver_stats(x.r, &st); } while (atomic_load(&x.stall_ms) && mono_s() < end);
    usleep(400000);
    ev_gen(&x, 15, 10, 4096, 200, &psn);
    ev_wait_accounted(&x, 25, &st);
    usleep(50000);   /* the emulator's counters reach sysfs within 10 ms */
    mlxd_receiver_stats(x.r, &st);
    ck_assert(st.hw_counters_valid);
    /* unloaded: 12 frames, 8 hw_drops, 5 lost; a loaded host may let the monitor fall behind
     * further (more drops for want of a receive), but the causes always add up */
    uint64_t tail = st.out_of_buffer - st.hw_drops;   /* drops whose CQE never came */
    ck_assert_uint_ge(st.out_of_buffer, st.hw_drops);
    ck_assert_uint_ge(st.hw_drops, 8);
    ck_assert_uint_ge(st.lost, 5);
    ck_assert_uint_eq(st.frames + st.lost + st.hw_drops + tail, 25);
    ev_stop(&x);
}
END_TEST

/* A receiver of rx_frame-byte frames fed 6 frames of gen_frame bytes: its stats and first frame. */
static void mismatch_run(size_t rx_frame, uint32_t mode, size_t gen_frame, struct mlxd_receiver_stats *st,
                         struct mlxd_receiver_frame *f)
{
    struct ev_rx x;
    ev_start(&x, rx_frame, 8, mode, 0);   /* 8 pages for 6 frames: no page is rewritten */
    uint32_t psn = 0;
    ev_gen(&x, 0, 6, gen_frame, 500, &psn);
    ev_wait_accounted(&x, 6, st);
    ck_assert(mlxd_receiver_get_next_frame(x.r, 1000, f));
    ev_stop(&x);
}

START_TEST(short_frame)
{
    struct mlxd_receiver_stats st;
    struct mlxd_receiver_frame f;
    /* round_up(4000, 128) = 4096: the device puts its metadata where the receiver reads it */
    mismatch_run(4096, MLXD_RECEIVER_BUSY_POLL, 4000, &st, &f);
    ck_assert_uint_eq(st.frames, 6);
    ck_assert_uint_eq(st.short_frames, 6);
    ck_assert_uint_eq(st.long_frames, 0);
    ck_assert_uint_eq(st.last_bytes_written, 4000);
    ck_assert_uint_eq(st.lost, 0);
    ck_assert_uint_eq(f.flags, MLXD_FRAME_SIZE_MISMATCH);
    ck_assert_uint_eq(f.metadata.bytes_written, 4000);
}
END_TEST

START_TEST(missing_metadata)
{
    struct mlxd_receiver_stats st;
    struct mlxd_receiver_frame f;
    mismatch_run(4352, MLXD_RECEIVER_EVENT, 4096, &st, &f);
    ck_assert_uint_eq(st.frames, 6);
    ck_assert_uint_eq(st.missing_metadata, 6);
    ck_assert_uint_eq(st.overwritten, 0);
    ck_assert_uint_eq(st.lost, 0);
    ck_assert_uint_eq(f.flags, MLXD_FRAME_MISSING_METADATA);
}
END_TEST

struct fork_feed { struct ev_rx *x; uint32_t psn; uint64_t sent; };

/* Paced by the monitor, as tests/test_soak.c: each burst of FORK_BURST frames (fewer than the 8
 * pages) goes out only once the monitor has accounted for every frame before it, so the device
 * never rewrites a page whose last frame the monitor has not handled.  Unpaced, a monitor held up
 * by the fork (TSan copies its shadow memory; a loaded host) fell up to 139 frames behind: pages
 * were rewritten while it copied their metadata (flagged MLXD_FRAME_PSN_MISMATCH and counted in
 * stats.overwritten, as without flow control on the wire), a device/CPU race that TSan reports. */
enum { FORK_FRAMES = 200, FORK_BURST = 4 };

static void *fork_sender(void *arg)
{
    struct fork_feed *f = arg;
    struct mlxd_receiver_stats st;
    for (uint64_t first = 0; first < FORK_FRAMES; first += FORK_BURST) {
        for (double end = mono_s() + 60; mono_s() < end; usleep(1000)) {
            mlxd_receiver_stats(f->x->r, &st);
            if (st.frames + st.errors + st.bad_page + st.hw_drops + st.lost >= f->sent) break;
        }
        f->sent += ev_gen(f->x, first, FORK_BURST, 4096, 500, &f->psn);
    }
    return NULL;
}

START_TEST(fork_mid_capture)
{
    struct ev_rx x;
    ev_start(&x, 4096, 8, _i ? MLXD_RECEIVER_EVENT : MLXD_RECEIVER_BUSY_POLL, 0);
    struct fork_feed f = { .x = &x };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fork_sender, &f), 0);
    struct mlxd_receiver_stats st;
    do { usleep(2000); mlxd_receiver_stats(x.r, &st); } while (st.frames < 50);
    pid_t pid = fork();
    if (pid == 0) {
        /* the child: every call refused, nothing touched, no hang (an alarm ends a hang) */
        alarm(20);
        int code = 0;
        if (mlxd_receiver_close(x.r) != -EINVAL || !strstr(mlxd_errmsg(), "child of fork()")) code |= 1;
        if (mlxd_receiver_stats(x.r, &st) != -EINVAL) code |= 2;
        struct mlxd_receiver_frame fr;
        if (mlxd_receiver_get_next_frame(x.r, 0, &fr)) code |= 4;
        mlxd_receiver_destroy(x.r);
        /* the registered frame buffer is not mapped in the child (MADV_DONTFORK) */
        unsigned char vec;
        if (mincore((void *)((uintptr_t)x.buf & ~(uintptr_t)4095), 4096, &vec) != -1 || errno != ENOMEM) code |= 8;
        _exit(code);
    }
    ck_assert_int_gt(pid, 0);
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child status 0x%x", ws);
    pthread_join(t, NULL);
    ck_assert_uint_eq(f.sent, FORK_FRAMES);
    ev_wait_accounted(&x, FORK_FRAMES, &st);
    ck_assert_uint_eq(st.frames, FORK_FRAMES);
    ck_assert_uint_eq(st.lost, 0);
    ck_assert_uint_eq(st.overwritten, 0);   /* the pacing held: no page rewritten before its turn */
    ck_assert(!atomic_load(&x.mon_done));   /* the parent's monitor stops only on its own close */
    ev_stop(&x);
    ck_assert_int_eq(x.mon_rc, 0);
}
END_TEST

START_TEST(gen_run_refuses)
{
    mlxd_test_private_devices();
    const char *spec = getenv("MLXD_EMU_DEVICES");
    (void)spec;
    unsigned a = 20 + (unsigned)getpid() % 200, b = 1 + ((unsigned)getpid() / 200) % 250;
    char devs[128], dst[32];
    snprintf(devs, sizeof devs, "mlx5_0:127.%u.%u.1:mtu=1024", a, b);
    snprintf(dst, sizeof dst, "127.%u.%u.1", a, b);
    ck_assert_int_eq(mlxd_emu_configure(devs), 0);
    struct mlxd_replay_map m = { .qpn = 2, .rkey = 1, .base_va = 0, .page_size = 8192, .pages = 2 };
    struct mlxd_gen_opts g = { .sz = sizeof g, .frame_size = 4096, .payload_size = 1024, .frames = 1 };
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = dst };
    ck_assert_int_eq(mlxd_gen_run(&m, &g, &so, NULL), -EINVAL);
    ck_assert_msg(strstr(mlxd_errmsg(), "mlxd_gen_run: src_ip is not set") && strstr(mlxd_errmsg(), "peer_ip"),
                  "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_gen_run(&m, &g, NULL, NULL), -EINVAL);
    so.src_ip = "10.255.255.1";
    ck_assert_int_eq(mlxd_gen_run(&m, &g, &so, NULL), -EADDRNOTAVAIL);
    ck_assert_msg(strstr(mlxd_errmsg(), "src_ip 10.255.255.1 is not an address of this host"), "%s", mlxd_errmsg());
    so.src_ip = "127.0.0.1";
    g.payload_size = 2048;   /* 2048-byte packets into a 1024-byte MTU port */
    ck_assert_int_eq(mlxd_gen_run(&m, &g, &so, NULL), -EMSGSIZE);
    ck_assert_msg(strstr(mlxd_errmsg(), "packets of up to 2048 bytes of payload exceed the MTU 1024"), "%s",
                  mlxd_errmsg());
    g.payload_size = 1024;
    struct mlxd_send_stats st;
    ck_assert_int_eq(mlxd_gen_run(&m, &g, &so, &st), 0);
    ck_assert_uint_eq(st.frames, 1);
    ck_assert_str_eq(mlxd_errmsg(), "");
}
END_TEST

START_TEST(qp_create_cq_overrun)
{
    mlxd_test_private_devices();
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create(nic, 16, NULL, &cq), 0);
    uint32_t n = mlxd_cq_size(cq);
    ck_assert_uint_ge(n, 16);
    struct mlxd_qp_opts o = { .sz = sizeof o, .type = MLXD_QP_RC, .send_depth = n, .recv_depth = n };
    struct mlxd_qp *qp, *qp2;
    ck_assert_int_eq(mlxd_qp_create(cq, &o, &qp), -EINVAL);
    char want[160];
    snprintf(want, sizeof want, "= %u completions could be outstanding, more than the CQ's %u entries", 2 * n, n);
    ck_assert_msg(strstr(mlxd_errmsg(), want) && strstr(mlxd_errmsg(), "share_cq"), "%s", mlxd_errmsg());
    o.send_depth = n / 2;
    o.recv_depth = n / 2;
    ck_assert_int_eq(mlxd_qp_create(cq, &o, &qp), 0);
    struct mlxd_qp_opts o2 = { .sz = sizeof o2, .type = MLXD_QP_RC, .send_depth = 1 };
    ck_assert_int_eq(mlxd_qp_create(cq, &o2, &qp2), -EINVAL);
    snprintf(want, sizeof want, "send_depth 1 + recv_depth 0 + %u of 1 QP already on the CQ", n);
    ck_assert_msg(strstr(mlxd_errmsg(), want), "%s", mlxd_errmsg());
    o2.share_cq = true;
    ck_assert_int_eq(mlxd_qp_create(cq, &o2, &qp2), 0);
    ck_assert_str_eq(mlxd_errmsg(), "");
    ck_assert_int_eq(mlxd_qp_destroy(qp2), 0);
    ck_assert_int_eq(mlxd_qp_destroy(qp), 0);
    o.send_depth = n;            /* the budget came back with the destroys */
    o.recv_depth = 0;
    ck_assert_int_eq(mlxd_qp_create(cq, &o, &qp), 0);
    ck_assert_int_eq(mlxd_qp_destroy(qp), 0);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    ck_assert_int_eq(mlxd_close(nic), 0);
}
END_TEST

static struct mlxd_receiver *rtr_start(uint8_t *buf, size_t size, int *rc)
{
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .port = 1, .buffer = (uintptr_t)buf,
        .buffer_size = size, .frame_size = 4096, .page_size = 8192, .pages = 2, .metadata_offset = 4096,
        .peer_ip = "127.0.0.9", .queue_size = 1 };
    *rc = mlxd_receiver_start(r, &o);
    return r;
}

static void *answer_late(void *arg)
{
    (void)arg;
    usleep(1500000);   /* during the second try */
    mlxd_emu_neigh_set("127.0.0.9", 1);
    return NULL;
}

START_TEST(rtr_timeout_retries)
{
    mlxd_test_private_devices();
    uint8_t *buf;
    ck_assert_int_eq(posix_memalign((void **)&buf, 4096, 16384), 0);
    ck_assert_int_eq(mlxd_emu_neigh_set("127.0.0.9", 0), 0);
    double t0 = mono_s();
    int rc;
    struct mlxd_receiver *r = rtr_start(buf, 16384, &rc);
    double took = mono_s() - t0;
    ck_assert_int_eq(rc, -ETIMEDOUT);
    ck_assert_msg(took >= 5 * 1.0 + 4 * 0.2 - 0.05, "gave up after %.2f s", took);
    ck_assert_msg(strstr(mlxd_errmsg(), "mlxd_receiver_start: the QP could not reach RTR: 5 tries") &&
                  strstr(mlxd_errmsg(), "could not resolve the MAC address of the peer 127.0.0.9") &&
                  strstr(mlxd_errmsg(), "check that the sensor bridge is up and on the same subnet"),
                  "%s", mlxd_errmsg());
    ck_assert(!mlxd_receiver_started(r));
    mlxd_receiver_destroy(r);

    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, answer_late, NULL), 0);
    t0 = mono_s();
    r = rtr_start(buf, 16384, &rc);
    took = mono_s() - t0;
    pthread_join(t, NULL);
    ck_assert_msg(rc == 0, "start: %s", mlxd_errmsg());
    ck_assert_msg(took >= 1.4 && took < 4.0, "started after %.2f s", took);
    ck_assert_int_eq(mlxd_receiver_close(r), 0);
    mlxd_receiver_destroy(r);
    ck_assert_int_eq(mlxd_emu_neigh_set("127.0.0.9", -1), 0);
    free(buf);
}
END_TEST

START_TEST(address_in_use)
{
    unsigned a = 20 + (unsigned)getpid() % 200, b = 1 + ((unsigned)getpid() / 200) % 250;
    char devs[128], ip[32];
    snprintf(devs, sizeof devs, "mlx5_0:127.%u.%u.1:mtu=4096", a, b);
    snprintf(ip, sizeof ip, "127.%u.%u.1", a, b);
    ck_assert_int_eq(mlxd_emu_configure(devs), 0);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(4791) };
    inet_pton(AF_INET, ip, &sa.sin_addr);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), -EADDRINUSE);
    ck_assert_msg(strstr(mlxd_errmsg(), "GET_CONTEXT") && strstr(mlxd_errmsg(), "MLXD_EMU_DEVICES="),
                  "%s", mlxd_errmsg());
    close(s);
}
END_TEST

Suite *receiver_events_suite(void)
{
    Suite *s = suite_create("receiver_events");
#define CASE(fn) do { TCase *tc = tcase_create(#fn); tcase_set_timeout(tc, 120); \
                      tcase_add_test(tc, fn); suite_add_tcase(s, tc); } while (0)
#define LOOP(fn, n) do { TCase *tc = tcase_create(#fn); tcase_set_timeout(tc, 120); \
                         tcase_add_loop_test(tc, fn, 0, n); suite_add_tcase(s, tc); } while (0)
    LOOP(port_flap, 2);
    LOOP(fatal_events, 6);
    LOOP(event_burst, 2);
    CASE(lost_gap);
    CASE(no_receive_and_gap);
    CASE(short_frame);
    CASE(missing_metadata);
    LOOP(fork_mid_capture, 2);
    CASE(gen_run_refuses);
    CASE(qp_create_cq_overrun);
    CASE(rtr_timeout_retries);
    CASE(address_in_use);
#undef CASE
#undef LOOP
    return s;
}
