/* races: mlxd_receiver_close from another thread at random points of start, blocking_monitor and
 * get_next_frame (mlxd_receiver.h thread rules: "close may run on any thread ... and while
 * get_next_frame waits"; start, close and destroy are serialised internally).
 *
 * Each iteration: thread S starts the receiver and runs the monitor on it; thread C waits in
 * get_next_frame; the main thread, after a random delay, calls close.  The delays follow the
 * start: they are drawn from 0..1.5 x the mean time start took so far (measured, so the window
 * is as wide under TSan, where start is some ten times slower, as without it: a fixed 0..3 ms
 * window sent 0 frames in 1,000 iterations there), so a close lands before, during or after
 * start.  In one iteration of three the main thread waits for start to return, sends a frame,
 * and closes after a random delay of 0..1.5 x the mean time a frame took to complete: the close
 * races with the monitor and the consumer handling traffic.  The test fails when no frame
 * completed in those iterations (the race with traffic did not happen).
 * Checked per iteration: start returns 0 (a close that wins the race is a no-op on a stopped
 * receiver, so start still succeeds and the main thread closes again); close returns 0; the
 * monitor returns 0, or -EINVAL when close came between start and the monitor; get_next_frame
 * returns (false once closed: get_next_frame_after_close checks that alone, deterministically);
 * afterwards the receiver is stopped and the emulator holds no object, fd or mapping.  At the end
 * the process has the fds it had before.
 * MLXD_RACES_ITERATIONS (default 1000) sets the count; `make tsan` runs this suite under TSan. */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_hsb.h"
#include "mlxd_receiver.h"
#include "mlxd_roce.h"

#define FRAME 1024u
#define PAGES 4u

static struct mlxd_receiver *rx;
static struct mlxd_receiver_opts opts;
static _Atomic bool s_done, s_started, c_stop;
static _Atomic uint64_t start_ns;     /* how long the last start took */
static _Atomic int start_rc, mon_rc;
static _Atomic unsigned frames_got;
static unsigned na, nb;

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    while (d && readdir(d)) n++;
    if (d) closedir(d);
    return n;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *starter(void *arg)
{
    (void)arg;
    uint64_t t0 = mono_ns();
    int rc = mlxd_receiver_start(rx, &opts);
    atomic_store(&start_ns, mono_ns() - t0);
    atomic_store(&start_rc, rc);
    atomic_store(&s_started, true);
    atomic_store(&mon_rc, rc == 0 ? mlxd_receiver_blocking_monitor(rx) : 1);
    atomic_store(&s_done, true);
    return NULL;
}

static void *monitor_only(void *arg)
{
    (void)arg;
    atomic_store(&mon_rc, mlxd_receiver_blocking_monitor(rx));
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    struct mlxd_receiver_frame f;
    while (!atomic_load(&c_stop))
        if (mlxd_receiver_get_next_frame(rx, 1, &f)) atomic_fetch_add(&frames_got, 1);
    return NULL;
}

/* One frame (data + metadata WRITEs) into page 1 of the running receiver, from the peer. */
static void send_frame(int fd, uint32_t psn)
{
    uint32_t qpn = mlxd_receiver_qp_number(rx), rkey = mlxd_receiver_rkey(rx);
    uint64_t base = mlxd_receiver_external_frame_memory(rx);
    uint32_t dst = mlxd_receiver_local_ipv4(rx);
    if (!qpn || !dst) return;   /* closed meanwhile */
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    static uint8_t pkt[2048], md[MLXD_HSB_METADATA_SIZE], data[FRAME];
    size_t page = opts.page_size;
    struct mlxd_roce_pkt p = { .opcode = MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_ONLY,
                               .src_ip = ntohl(me.sin_addr.s_addr), .dst_ip = dst,
                               .src_port = ntohs(me.sin_port), .dest_qp = qpn, .psn = psn,
                               .reth_va = base + page, .reth_rkey = rkey, .reth_len = FRAME };
    struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(4791), .sin_addr.s_addr = htonl(dst) };
    ssize_t n = mlxd_roce_build(pkt, sizeof pkt, &p, data, FRAME);
    ck_assert_int_gt(n, 0);
    sendto(fd, pkt + MLXD_ROCE_BTH_OFF, (size_t)n - MLXD_ROCE_BTH_OFF, 0, (struct sockaddr *)&d, sizeof d);
    struct mlxd_hsb_metadata m = { .psn = psn + 1, .bytes_written = FRAME };
    mlxd_hsb_metadata_encode(&m, md, sizeof md);
    p.opcode = MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_ONLY_IMM;
    p.psn = psn + 1;
    p.reth_va = base + page + mlxd_hsb_metadata_offset(FRAME);
    p.reth_len = sizeof md;
    p.imm = htonl(mlxd_hsb_imm_make(1, psn + 1, MLXD_HSB_IMM_12_20));
    n = mlxd_roce_build(pkt, sizeof pkt, &p, md, sizeof md);
    sendto(fd, pkt + MLXD_ROCE_BTH_OFF, (size_t)n - MLXD_ROCE_BTH_OFF, 0, (struct sockaddr *)&d, sizeof d);
}

static void sleep_us(unsigned us)
{
    struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

static void private_device(char *peer, size_t cap)
{
    unsigned v = (unsigned)getpid();
    na = 1 + v % 250;
    nb = (v / 250) % 250;
    char spec[96];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1:mtu=4096", na, nb);
    snprintf(peer, cap, "127.%u.%u.2", na, nb);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
    setenv("SYSFS_PATH", mlxd_emu_sysfs_path(), 1);
}

static int peer_socket(void)
{
    int sfd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(127u << 24 | na << 16 | nb << 8 | 2) };
    ck_assert_int_eq(bind(sfd, (struct sockaddr *)&src, sizeof src), 0);
    return sfd;
}

static uint8_t buf[PAGES * 2048] __attribute__((aligned(4096)));

static void set_opts(const char *peer, uint32_t mode)
{
    size_t page = mlxd_hsb_min_page_size(FRAME);
    ck_assert_uint_le(PAGES * page, sizeof buf);
    opts = (struct mlxd_receiver_opts){ .sz = sizeof opts, .device = "mlx5_0", .buffer = (uintptr_t)buf,
        .buffer_size = sizeof buf, .frame_size = FRAME, .page_size = page, .pages = PAGES,
        .metadata_offset = mlxd_hsb_metadata_offset(FRAME), .peer_ip = peer, .queue_size = 2,
        .mode = mode, .recv_depth = 16, .repost_batch = 4 };
}

/* mlxd_receiver.h: get_next_frame "returns ... false on timeout, after close"; a frame queued
 * before close must not be handed out after it (its page may already be unmapped by then). */
START_TEST(get_next_frame_after_close)
{
    char peer[32];
    private_device(peer, sizeof peer);
    set_opts(peer, MLXD_RECEIVER_EVENT);
    rx = mlxd_receiver_new();
    ck_assert_int_eq(mlxd_receiver_start(rx, &opts), 0);
    pthread_t ts;
    atomic_store(&s_done, false);
    ck_assert_int_eq(pthread_create(&ts, NULL, monitor_only, NULL), 0);
    int sfd = peer_socket();
    send_frame(sfd, 0);
    struct mlxd_receiver_stats st;
    for (int k = 0; k < 5000; k++) {
        ck_assert_int_eq(mlxd_receiver_stats(rx, &st), 0);
        if (st.frames) break;
        sleep_us(1000);
    }
    ck_assert_uint_eq(st.frames, 1);
    ck_assert(mlxd_receiver_frames_ready(rx));
    ck_assert_int_eq(mlxd_receiver_close(rx), 0);
    pthread_join(ts, NULL);
    struct mlxd_receiver_frame f;
    ck_assert_msg(!mlxd_receiver_get_next_frame(rx, 0, &f),
                  "get_next_frame after close handed out the frame of page %u", f.page);
    close(sfd);
    mlxd_receiver_destroy(rx);
}
END_TEST

START_TEST(close_at_random_points)
{
    char peer[32];
    private_device(peer, sizeof peer);
    unsigned v = (unsigned)getpid();
    const char *it = getenv("MLXD_RACES_ITERATIONS");
    unsigned iterations = it && *it ? (unsigned)atoi(it) : 1000;
    int fds0 = count_fds();
    rx = mlxd_receiver_new();
    ck_assert_ptr_nonnull(rx);
    int sfd = peer_socket();
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ v;
    unsigned mon_einval = 0, closes_before_start = 0, with_frame = 0;
    uint64_t frames_completed = 0;
    /* running means of how long start and a frame's completion take (us), from a first guess */
    double start_us = 1000, frame_us = 200;
    for (unsigned i = 0; i < iterations; i++) {
        set_opts(peer, (i & 1) ? MLXD_RECEIVER_EVENT : MLXD_RECEIVER_BUSY_POLL);
        rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
        uint64_t r = rng * 0x2545f4914f6cdd1dull;
        double u = (double)(r & 0xFFFF) / 65536.0;     /* uniform in [0, 1) */
        atomic_store(&s_done, false);
        atomic_store(&s_started, false);
        atomic_store(&c_stop, false);
        pthread_t ts, tc;
        ck_assert_int_eq(pthread_create(&tc, NULL, consumer, NULL), 0);
        ck_assert_int_eq(pthread_create(&ts, NULL, starter, NULL), 0);
        if ((r >> 32) % 3 == 0) {
            /* traffic: once start returned, a frame, then close while it is handled */
            while (!atomic_load(&s_started)) sleep_us(20);
            if (mlxd_receiver_started(rx)) {
                uint64_t t0 = mono_ns();
                send_frame(sfd, (uint32_t)(i * 2) & 0xFFFFF);
                with_frame++;
                sleep_us((unsigned)(u * 1.5 * frame_us));
                struct mlxd_receiver_stats st;
                mlxd_receiver_stats(rx, &st);
                if (st.frames)      /* it completed within the delay: learn how long that takes */
                    frame_us = 0.9 * frame_us + 0.1 * (double)(mono_ns() - t0) / 1e3;
                else
                    frame_us *= 1.05;
            }
        } else {
            sleep_us((unsigned)(u * 1.5 * start_us));
        }
        ck_assert_int_eq(mlxd_receiver_close(rx), 0);
        /* a close that came before start took the receiver's lock: start ran after it */
        bool again = false;
        for (int k = 0; !atomic_load(&s_done); k++) {
            if (mlxd_receiver_started(rx) && atomic_load(&start_rc) == 0) {
                ck_assert_int_eq(mlxd_receiver_close(rx), 0);
                again = true;
            }
            sleep_us(100);
            ck_assert_msg(k < 100000, "iteration %u: the monitor does not return", i);
        }
        closes_before_start += again;
        pthread_join(ts, NULL);
        start_us = 0.9 * start_us + 0.1 * (double)atomic_load(&start_ns) / 1e3;
        struct mlxd_receiver_stats st;
        mlxd_receiver_stats(rx, &st);       /* kept through close */
        frames_completed += st.frames;
        atomic_store(&c_stop, true);
        pthread_join(tc, NULL);
        ck_assert_msg(atomic_load(&start_rc) == 0, "iteration %u: start %d: %s", i, atomic_load(&start_rc),
                      mlxd_errmsg());
        int m = atomic_load(&mon_rc);
        ck_assert_msg(m == 0 || m == -EINVAL, "iteration %u: monitor returned %d", i, m);
        mon_einval += m == -EINVAL;
        ck_assert(!mlxd_receiver_started(rx));
        ck_assert_msg(mlxd_emu_live_total() == 0, "iteration %u: %u emulated objects/fds/maps left", i,
                      mlxd_emu_live_total());
    }
    close(sfd);
    mlxd_receiver_destroy(rx);
    ck_assert_int_eq(count_fds(), fds0);
    fprintf(stderr, "races: %u iterations, %u with a frame sent, %llu frames completed, %u frames taken, "
            "%u closes before start finished, %u monitors that found the receiver closed; mean start "
            "%.0f us, frame %.0f us\n", iterations, with_frame, (unsigned long long)frames_completed,
            atomic_load(&frames_got), closes_before_start, mon_einval, start_us, frame_us);
    /* the close raced with traffic: frames were sent into running receivers and completed */
    ck_assert_msg(with_frame == 0 || frames_completed > 0, "%u frames sent, none completed", with_frame);
    ck_assert_uint_gt(with_frame, iterations / 10);
}
END_TEST

Suite *races_suite(void)
{
    Suite *s = suite_create("races");
    TCase *tc = tcase_create("close");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, close_at_random_points);
    tcase_add_test(tc, get_next_frame_after_close);
    suite_add_tcase(s, tc);
    return s;
}
