/* The receiver without traffic: argument checks of start (every rule of the issue, each naming
 * the argument and the bound, checked before the device is looked at), and the calls that must
 * behave when the receiver never started.  Rules: Holoscan Sensor Bridge
 * src/hololink/core/data_channel.cpp (configure_roce: page_size >= round_up(frame,128)+128,
 * 1 <= pages <= 4096) and src/hololink/operators/roce_receiver/roce_receiver_op.cpp (queue_size
 * 1..pages), and the seed's start() contract. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mlxd_error.h"
#include "mlxd_receiver.h"

static uint8_t buf[3 * 8192];

static struct mlxd_receiver_opts good(void)
{
    struct mlxd_receiver_opts o = {
        .sz = sizeof o, .device = "mlx5_does_not_exist", .port = 1, .buffer = (uintptr_t)buf,
        .buffer_size = sizeof buf, .frame_size = 4096, .page_size = 8192, .pages = 3,
        .metadata_offset = 4096, .peer_ip = "127.0.0.1", .queue_size = 2,
    };
    return o;
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    while (d && readdir(d)) n++;
    if (d) closedir(d);
    return n;
}

/* Each case: one field made wrong; start must give -EINVAL naming `word` (and `bound` when set)
 * even though the device does not exist (so the arguments are checked first). */
struct bad { const char *what, *word, *bound; void (*edit)(struct mlxd_receiver_opts *); };

static void e_page_small(struct mlxd_receiver_opts *o) { o->page_size = 4096 + 128 - 128; }  /* 4096 < 4224 */
static void e_page_small2(struct mlxd_receiver_opts *o) { o->frame_size = 3000; o->page_size = 3072; }
static void e_md_off(struct mlxd_receiver_opts *o) { o->metadata_offset = 8192 - 127; }
static void e_buffer(struct mlxd_receiver_opts *o) { o->buffer_size = 3 * 8192 - 1; }
static void e_pages0(struct mlxd_receiver_opts *o) { o->pages = 0; }
static void e_pages_big(struct mlxd_receiver_opts *o) { o->pages = 4097; o->buffer_size = (size_t)1 << 40; }
static void e_queue0(struct mlxd_receiver_opts *o) { o->queue_size = 0; }
static void e_queue_big(struct mlxd_receiver_opts *o) { o->queue_size = 4; }
static void e_peer(struct mlxd_receiver_opts *o) { o->peer_ip = "192.168.1.300"; }
static void e_peer6(struct mlxd_receiver_opts *o) { o->peer_ip = "::1"; }
static void e_peer_null(struct mlxd_receiver_opts *o) { o->peer_ip = NULL; }
static void e_device(struct mlxd_receiver_opts *o) { o->device = ""; }
static void e_device_null(struct mlxd_receiver_opts *o) { o->device = NULL; }
static void e_port(struct mlxd_receiver_opts *o) { o->port = 2; }
static void e_frame0(struct mlxd_receiver_opts *o) { o->frame_size = 0; }
static void e_buffer0(struct mlxd_receiver_opts *o) { o->buffer = 0; }
static void e_mode(struct mlxd_receiver_opts *o) { o->mode = 7; }
static void e_layout(struct mlxd_receiver_opts *o) { o->imm_layout = 2; }
static void e_legacy_pages(struct mlxd_receiver_opts *o) { o->imm_layout = MLXD_HSB_IMM_LEGACY_8_24; o->pages = 257; o->buffer_size = (size_t)1 << 40; }
static void e_sz(struct mlxd_receiver_opts *o) { o->sz = 8; }
static void e_batch(struct mlxd_receiver_opts *o) { o->recv_depth = 8; o->repost_batch = 5; }
static void e_align(struct mlxd_receiver_opts *o) { o->page_size = 8192 + 64; o->buffer_size = (size_t)1 << 20; }
static void e_frame_big(struct mlxd_receiver_opts *o) { o->frame_size = ((size_t)1 << 40) + 1; }
static const char long_name[] = "mlx5_01234567890123456789012345678901234567890123456789012345678"; /* 64 */
static void e_device_long(struct mlxd_receiver_opts *o) { o->device = long_name; }
static void e_depth_big(struct mlxd_receiver_opts *o) { o->recv_depth = 32769; }

static const struct bad BAD[] = {
    { "page_size below frame+128", "page_size", "4224", e_page_small },
    { "page_size below round_up(3000)+128", "page_size", "3200", e_page_small2 },
    { "metadata_offset+128 > page_size", "metadata_offset", "8192", e_md_off },
    { "pages*page_size > buffer_size", "buffer_size", "24575", e_buffer },
    { "pages 0", "pages", "4096", e_pages0 },
    { "pages 4097", "pages", "4096", e_pages_big },
    { "queue_size 0", "queue_size", "1..pages", e_queue0 },
    { "queue_size > pages", "queue_size", "(3)", e_queue_big },
    { "peer not IPv4", "peer_ip", "192.168.1.300", e_peer },
    { "peer IPv6", "peer_ip", "::1", e_peer6 },
    { "peer NULL", "peer_ip", NULL, e_peer_null },
    { "device empty", "device", NULL, e_device },
    { "device NULL", "device", NULL, e_device_null },
    { "port 2", "port", NULL, e_port },
    { "frame_size 0", "frame_size", NULL, e_frame0 },
    { "buffer 0", "buffer", NULL, e_buffer0 },
    { "mode", "mode", NULL, e_mode },
    { "imm_layout", "imm_layout", NULL, e_layout },
    { "legacy layout pages 257", "pages", "256", e_legacy_pages },
    { "opts->sz", "sz", NULL, e_sz },
    { "repost_batch", "repost_batch", "4", e_batch },
    { "page_size not 128-aligned", "page_size", "128", e_align },
    { "frame_size above 2^40", "frame_size", "2^40", e_frame_big },
    { "device name 64 bytes", "device", "63", e_device_long },
    { "recv_depth 32769", "recv_depth", "32768", e_depth_big },
};

START_TEST(start_rejects_each_bad_argument)
{
    const struct bad *b = &BAD[_i];
    struct mlxd_receiver *r = mlxd_receiver_new();
    ck_assert_ptr_nonnull(r);
    struct mlxd_receiver_opts o = good();
    b->edit(&o);
    int fds = count_fds();
    int rc = mlxd_receiver_start(r, &o);
    ck_assert_msg(rc == -EINVAL, "%s: rc %d (%s)", b->what, rc, mlxd_errmsg());
    const char *m = mlxd_errmsg();
    ck_assert_msg(strstr(m, "mlxd_receiver_start") != NULL, "%s: message '%s'", b->what, m);
    ck_assert_msg(strstr(m, b->word) != NULL, "%s: message '%s' lacks '%s'", b->what, m, b->word);
    if (b->bound)
        ck_assert_msg(strstr(m, b->bound) != NULL, "%s: message '%s' lacks bound '%s'", b->what, m, b->bound);
    ck_assert_int_eq(count_fds(), fds);
    ck_assert(!mlxd_receiver_started(r));
    mlxd_receiver_destroy(r);
}
END_TEST

/* All arguments right, the device absent: -ENODEV naming it (sysfs listing, nothing opened). */
START_TEST(start_missing_device)
{
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = good();
    int fds = count_fds();
    int rc = mlxd_receiver_start(r, &o);
    ck_assert_msg(rc == -ENODEV, "rc %d (%s)", rc, mlxd_errmsg());
    ck_assert(strstr(mlxd_errmsg(), "mlx5_does_not_exist") != NULL);
    ck_assert_int_eq(count_fds(), fds);
    ck_assert(!mlxd_receiver_started(r));
    mlxd_receiver_destroy(r);
}
END_TEST

/* The boundary values themselves are accepted by the checks (they fail later on the device). */
START_TEST(start_accepts_bounds)
{
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = good();
    o.frame_size = 3000; o.page_size = 3200; o.metadata_offset = 3072; o.pages = 3;
    o.buffer_size = 3 * 3200; o.queue_size = 3;
    ck_assert_int_eq(mlxd_receiver_start(r, &o), -ENODEV);
    o.metadata_offset = 3200 - 128;
    ck_assert_int_eq(mlxd_receiver_start(r, &o), -ENODEV);
    o.queue_size = 1; o.pages = 1;
    ck_assert_int_eq(mlxd_receiver_start(r, &o), -ENODEV);
    o.pages = 4096; o.buffer_size = 4096 * 3200; o.queue_size = 4096;
    ck_assert_int_eq(mlxd_receiver_start(r, &o), -ENODEV);
    mlxd_receiver_destroy(r);
}
END_TEST

START_TEST(never_started)
{
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_frame f;
    ck_assert_int_eq(mlxd_receiver_close(r), 0);               /* does nothing */
    ck_assert_int_eq(mlxd_receiver_blocking_monitor(r), -EINVAL);
    ck_assert(strstr(mlxd_errmsg(), "start") != NULL);
    ck_assert(!mlxd_receiver_get_next_frame(r, 10, &f));
    ck_assert(strstr(mlxd_errmsg(), "start") != NULL);
    ck_assert(!mlxd_receiver_frames_ready(r));
    ck_assert_uint_eq(mlxd_receiver_qp_number(r), 0);
    ck_assert_uint_eq(mlxd_receiver_rkey(r), 0);
    ck_assert_uint_eq(mlxd_receiver_external_frame_memory(r), 0);
    ck_assert_int_eq(mlxd_receiver_gid_index(r), -EINVAL);
    ck_assert_int_eq(mlxd_receiver_frame_check(r, &f), -EINVAL);
    struct mlxd_receiver_stats st;
    ck_assert_int_eq(mlxd_receiver_stats(r, &st), 0);
    ck_assert_uint_eq(st.frames, 0);
    ck_assert_int_eq(mlxd_receiver_start(NULL, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_receiver_start(r, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_receiver_blocking_monitor(NULL), -EINVAL);
    ck_assert_int_eq(mlxd_receiver_close(NULL), -EINVAL);
    mlxd_receiver_destroy(r);
    mlxd_receiver_destroy(NULL);
}
END_TEST

/* An options struct from a newer header: sz = sizeof + 8.  Zero tail: accepted (start goes on to
 * the device: -ENODEV); non-zero tail: -EINVAL naming sz, nothing started. */
START_TEST(start_opts_tail)
{
    _Static_assert(sizeof(long_name) == 65, "64-byte name");
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct { struct mlxd_receiver_opts o; uint64_t extra; } v;
    memset(&v, 0, sizeof v);
    v.o = good();
    v.o.sz = sizeof v.o + 8;
    ck_assert_int_eq(mlxd_receiver_start(r, &v.o), -ENODEV);
    v.extra = 0x1234;
    ck_assert_int_eq(mlxd_receiver_start(r, &v.o), -EINVAL);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_receiver_start: opts->sz ", 30), "%s", mlxd_errmsg());
    ck_assert(!mlxd_receiver_started(r));
    /* the bounds themselves are accepted */
    struct mlxd_receiver_opts o = good();
    o.recv_depth = 32768;
    ck_assert_int_eq(mlxd_receiver_start(r, &o), -ENODEV);
    o = good();
    o.device = long_name + 1;                                   /* 63 bytes */
    ck_assert_int_eq(mlxd_receiver_start(r, &o), -ENODEV);
    mlxd_receiver_destroy(r);
}
END_TEST

Suite *receiver_suite(void)
{
    Suite *s = suite_create("receiver");
    TCase *tc = tcase_create("arguments");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, start_rejects_each_bad_argument, 0, (int)(sizeof BAD / sizeof BAD[0]));
    tcase_add_test(tc, start_missing_device);
    tcase_add_test(tc, start_accepts_bounds);
    tcase_add_test(tc, never_started);
    tcase_add_test(tc, start_opts_tail);
    suite_add_tcase(s, tc);
    return s;
}
