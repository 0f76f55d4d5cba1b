/* A capture is input: the crafted files of fixtures/crafted-pcaps (see its README.md) must load
 * or be refused with a message naming the number at fault, never trap, and every number the
 * geometry takes from them is range-checked like mlxd-capture's options. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mlxd_capture.h"
#include "mlxd_error.h"
#include "util.h"

static struct mlxd_capture *load(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/crafted-pcaps/%s", name);
    struct mlxd_capture *c = NULL;
    int rc = mlxd_capture_load(mlxd_test_path(rel), &c);
    ck_assert_msg(rc == 0, "%s: %s", name, mlxd_errmsg());
    return c;
}

/* Two frames whose VAs differ by 2^63 while their pages differ by -1: INT64_MIN % -1 trapped in
 * the page-size inference.  The frames are in opposite order to their pages, so nothing is
 * inferred (the minimum page, round_up(128, 128) + 128 = 256) and frame 1 is not at its page. */
START_TEST(int64_min_va_refused)
{
    struct mlxd_capture *c = load("int64_min_va.pcap");
    ck_assert_uint_eq(c->nframes, 2);
    ck_assert_uint_eq(c->geo.page_size, 256);
    ck_assert_int_eq(mlxd_capture_geometry_check(c), -ERANGE);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_capture_geometry_check: frame 1 at 0x8000000000001000 is not "
                     "where its page 0 begins (0xf00: page 0 at 0xf00, page size 256)");
    mlxd_capture_free(c);
}
END_TEST

/* bytes_written = 2^64 - 128: round_up(it, 128) + 128 wraps to 0, and the rewrite divided by it. */
START_TEST(bytes_written_wrap_refused)
{
    struct mlxd_capture *c = load("bytes_written_wrap.pcap");
    ck_assert_uint_eq(c->geo.frame_size, UINT64_MAX - 127);
    ck_assert_uint_eq(c->geo.page_size, 0);
    ck_assert_int_eq(mlxd_capture_geometry_check(c), -ERANGE);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_capture_geometry_check: frame size 18446744073709551488 "
                     "(frame 0's metadata bytes_written) is out of range 1..2^40");
    struct mlxd_replay_map m = { .qpn = 1, .rkey = 2, .base_va = 0x100000, .page_size = 8192, .pages = 2 };
    uint8_t out[2048];
    ck_assert_int_eq(mlxd_capture_rewrite(c, 0, &m, 1, 2, 3, 4791, out, sizeof out), -ERANGE);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "the capture's page size is 0"));
    mlxd_capture_free(c);
}
END_TEST

/* Two 128-byte frames 1 GiB apart: the inferred page (1 GiB, within the --page-size range) is
 * accepted, but 2 pages of it exceed what a 440-byte capture may ask for: max(256 MiB, 4 x its
 * 2 x 192 packet bytes) = 256 MiB. */
START_TEST(pages_1gib_apart_bounded)
{
    struct mlxd_capture *c = load("pages_1gib_apart.pcap");
    ck_assert_uint_eq(c->geo.page_size, 1ull << 30);
    ck_assert_uint_eq(c->geo.pages, 2);
    ck_assert_int_eq(mlxd_capture_geometry_check(c), 0);
    ck_assert_uint_eq(mlxd_capture_buffer_bound(c), 256ull << 20);
    ck_assert_uint_gt((uint64_t)c->geo.pages * c->geo.page_size, mlxd_capture_buffer_bound(c));
    mlxd_capture_free(c);
}
END_TEST

/* Ten years between two packets: over the 2^32 - 1 ms a recorded pace waits; an hour is not,
 * and neither is ten years at speed 10^6 (315 s). */
START_TEST(recorded_gaps_bounded)
{
    struct mlxd_capture *c = load("gap_10_years.pcap");
    ck_assert_int_eq(mlxd_capture_geometry_check(c), 0);
    ck_assert_int_eq(mlxd_capture_pace_check(c, 1.0), -ERANGE);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_capture_pace_check: packet 2 comes 315360000 s after packet 1 at "
                     "the recorded pace (speed 1): over the 4294967 s a recorded pace waits");
    ck_assert_int_eq(mlxd_capture_pace_check(c, 1e6), 0);
    ck_assert_int_eq(mlxd_capture_pace_check(c, -1), -EINVAL);
    struct mlxd_replay_map m = { .qpn = 1, .rkey = 2, .base_va = 0x100000, .page_size = 256, .pages = 3 };
    struct mlxd_send_opts o = { .sz = sizeof o, .pacing = MLXD_PACE_RECORDED, .dst_port = 9 };
    struct mlxd_send_stats st;
    ck_assert_int_eq(mlxd_capture_replay(c, &m, &o, &st), -ERANGE);
    ck_assert_uint_eq(st.packets, 0);           /* refused before sending */
    mlxd_capture_free(c);
    c = load("gap_1_hour.pcap");
    ck_assert_int_eq(mlxd_capture_pace_check(c, 0), 0);
    mlxd_capture_free(c);
}
END_TEST

/* The last record is 40 bytes short: the two whole frames before it are kept, and the cut is
 * named (record 3, libpcap's words). */
START_TEST(cut_last_record_keeps_whole_frames)
{
    struct mlxd_capture *c = load("cut_last_record.pcap");
    ck_assert_uint_eq(c->records, 2);
    ck_assert_uint_eq(c->npackets, 2);
    ck_assert_uint_eq(c->nframes, 2);
    ck_assert(c->cut_short);
    ck_assert_msg(strstr(c->cut_why, "truncated") != NULL, "%s", c->cut_why);
    ck_assert_int_eq(mlxd_capture_geometry_check(c), 0);
    mlxd_capture_free(c);
}
END_TEST

/* Every fixture of the project passes the check (the check refuses only what is wrong). */
START_TEST(recorded_fixtures_pass)
{
    static const char *const F[] = { "hsb_small_4k_3pages", "hsb_small_3000_embedded", "hsb_sepmeta_3000",
                                     "hsb_medium_64k_4pages", "hsb_nometa_4k_3pages" };
    for (unsigned i = 0; i < sizeof F / sizeof F[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "fixtures/roce-pcaps/%s.pcap", F[i]);
        struct mlxd_capture *c = NULL;
        ck_assert_int_eq(mlxd_capture_load(mlxd_test_path(rel), &c), 0);
        ck_assert_msg(mlxd_capture_geometry_check(c) == 0, "%s: %s", F[i], mlxd_errmsg());
        ck_assert(!c->cut_short);
        ck_assert_uint_le((uint64_t)c->geo.pages * c->geo.page_size, mlxd_capture_buffer_bound(c));
        mlxd_capture_free(c);
    }
}
END_TEST

Suite *capture_input_suite(void)
{
    Suite *s = suite_create("capture_input");
    TCase *tc = tcase_create("crafted");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, int64_min_va_refused);
    tcase_add_test(tc, bytes_written_wrap_refused);
    tcase_add_test(tc, pages_1gib_apart_bounded);
    tcase_add_test(tc, recorded_gaps_bounded);
    tcase_add_test(tc, cut_last_record_keeps_whole_frames);
    tcase_add_test(tc, recorded_fixtures_pass);
    suite_add_tcase(s, tc);
    return s;
}
