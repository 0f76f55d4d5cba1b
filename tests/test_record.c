/* record suite: the CQE recorder (mlxd_cq_record_start, mlx5/record.c).  A fixture is replayed
 * into a detached ring while the poll loop consumes it with recording on: the recorded file holds
 * the same CQEs in the same order (the owner bit is the ring's pass, as on a NIC).  A ring too
 * small for a batch counts the CQEs it could not hold, and the file's header says how many.
 * The live emulator path (a receiver's option, mlxd-capture --record-cqes) is in the
 * receiver_fixture suite. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlxd_error.h"
#include "mlxd_fixture.h"
#include "mlxd_mlx5.h"
#include "util.h"

static void tmp_path(char *p, size_t n)
{
    snprintf(p, n, "%s/mlxd-record-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(p);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

/* hand-written-3-frames.fix played 100 times through a 16-entry ring, polled in batches of 1, 3
 * and 16: 300 records, record i = source record i % 3 but for the owner bit */
START_TEST(recorded_stream_equals_the_replayed_one)
{
    const char *src = mlxd_test_path("fixtures/cqe-streams/hand-written-3-frames.fix");
    struct mlxd_fixture *want = NULL;
    ck_assert_int_eq(mlxd_fixture_load(src, &want), 0);
    char out[256];
    tmp_path(out, sizeof out);
    struct mlxd_cq *cq = NULL;
    ck_assert_int_eq(mlxd_cq_create_detached(16, &cq), 0);
    struct mlxd_recorder *rec = NULL;
    struct mlxd_record_opts ro = { .sz = sizeof ro, .ring_entries = 1024, .source = "test_record" };
    ck_assert_msg(mlxd_cq_record_start(cq, out, &ro, &rec) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_cq_record_start(cq, out, &ro, &rec), -EBUSY);
    ck_assert_int_eq(mlxd_cq_destroy(cq), -EBUSY);
    struct mlxd_replay_opts po = { .sz = sizeof po, .loops = 100 };
    struct mlxd_replay *rp = NULL;
    ck_assert_int_eq(mlxd_replay_start(cq, src, &po, &rp), 0);
    struct mlxd_completion c[16];
    static const int batch[] = { 1, 3, 16 };
    unsigned got = 0;
    for (unsigned k = 0; got < 300; k++) {
        int n = mlxd_cq_poll(cq, c, batch[k % 3]);
        ck_assert_int_ge(n, 0);
        for (int i = 0; i < n; i++, got++)
            ck_assert_uint_eq(c[i].imm, got % 3 + 1);
    }
    ck_assert_int_eq(mlxd_replay_finish(rp, false), 300);
    struct mlxd_record_stats st;
    ck_assert_int_eq(mlxd_cq_record_stop(rec, &st), 0);
    ck_assert_uint_eq(st.recorded, 300);
    ck_assert_uint_eq(st.written, 300);
    ck_assert_uint_eq(st.overflow, 0);
    struct mlxd_fixture *f = NULL;
    ck_assert_msg(mlxd_fixture_load(out, &f) == 0, "%s", mlxd_errmsg());
    ck_assert_uint_eq(f->header.version, 2);
    ck_assert_uint_eq(f->header.ring_size, 16);
    ck_assert_uint_eq(f->header.overflow, 0);
    ck_assert_str_eq(f->header.source, "test_record");
    ck_assert_uint_eq(f->count, 300);
    for (unsigned i = 0; i < 300; i++) {
        const uint8_t *a = f->records[i].cqe, *b = want->records[i % 3].cqe;
        ck_assert_int_eq(memcmp(a, b, 63), 0);
        ck_assert_uint_eq(a[63] & ~1u, b[63] & ~1u);
        ck_assert_uint_eq(a[63] & 1u, (i / 16) & 1u);          /* the owner bit of ring pass i / 16 */
        ck_assert(f->records[i].has_delay == (i != 0));
    }
    mlxd_fixture_free(f);
    mlxd_fixture_free(want);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(out);
}
END_TEST

/* 16 CQEs written into the ring by hand and consumed by one mlxd_cq_poll of 16 with a recorder
 * ring of 4: at most 4 fit, the other 12 or more are counted, and the header says so. */
START_TEST(overflow_is_counted_and_written_in_the_header)
{
    char out[256];
    tmp_path(out, sizeof out);
    struct mlxd_cq *cq = NULL;
    ck_assert_int_eq(mlxd_cq_create_detached(16, &cq), 0);
    volatile void *ring;
    uint32_t ncqe;
    volatile uint32_t *dbrec;
    ck_assert_int_eq(mlxd_cq_ring(cq, &ring, &ncqe, &dbrec), 0);
    ck_assert_uint_eq(ncqe, 16);
    for (unsigned i = 0; i < 16; i++) {
        volatile uint8_t *c = (volatile uint8_t *)ring + 64 * i;
        c[61] = (uint8_t)i;                                    /* wqe_counter */
        c[63] = 0x10;                                          /* RESP_WR_IMM, owner 0 (pass 0) */
    }
    struct mlxd_recorder *rec = NULL;
    struct mlxd_record_opts ro = { .sz = sizeof ro, .ring_entries = 4 };
    ck_assert_int_eq(mlxd_cq_record_start(cq, out, &ro, &rec), 0);
    struct mlxd_completion c[16];
    ck_assert_int_eq(mlxd_cq_poll(cq, c, 16), 16);
    struct mlxd_record_stats st;
    ck_assert_int_eq(mlxd_cq_record_stop(rec, &st), 0);
    ck_assert_uint_eq(st.recorded + st.overflow, 16);
    ck_assert_uint_ge(st.overflow, 12);
    struct mlxd_fixture *f = NULL;
    ck_assert_int_eq(mlxd_fixture_load(out, &f), 0);
    ck_assert_uint_eq(f->header.overflow, st.overflow);
    ck_assert_uint_eq(f->count, st.recorded);
    for (unsigned i = 0; i < f->count; i++) ck_assert_uint_eq(f->records[i].cqe[61], i);
    mlxd_fixture_free(f);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(out);
}
END_TEST

START_TEST(misuse_is_refused)
{
    struct mlxd_cq *cq = NULL;
    ck_assert_int_eq(mlxd_cq_create_detached(16, &cq), 0);
    struct mlxd_recorder *rec = NULL;
    ck_assert_int_eq(mlxd_cq_record_start(NULL, "/tmp/x", NULL, &rec), -EINVAL);
    ck_assert_int_eq(mlxd_cq_record_start(cq, NULL, NULL, &rec), -EINVAL);
    struct mlxd_record_opts ro = { .sz = sizeof ro, .ring_entries = 3 };
    ck_assert_int_eq(mlxd_cq_record_start(cq, "/tmp/x", &ro, &rec), -EINVAL);
    ck_assert_int_eq(mlxd_cq_record_start(cq, "/nonexistent-dir/x.fix", NULL, &rec), -ENOENT);
    ck_assert_msg(strstr(mlxd_errmsg(), "/nonexistent-dir/x.fix") != NULL, "%s", mlxd_errmsg());
    ck_assert_ptr_null(rec);
    ck_assert_int_eq(mlxd_cq_record_stop(NULL, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
}
END_TEST

Suite *record_suite(void)
{
    Suite *s = suite_create("record");
    TCase *tc = tcase_create("record");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, recorded_stream_equals_the_replayed_one);
    tcase_add_test(tc, overflow_is_counted_and_written_in_the_header);
    tcase_add_test(tc, misuse_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
