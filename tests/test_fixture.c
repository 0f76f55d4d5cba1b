/* fixture suite: the CQE fixture reader and writer (abi/mlxd_fixture.h, docs/fixture-format.md):
 * round trips, delays and their units, and malformed files whose errors must name the line. */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlxd_error.h"
#include "mlxd_cqe.h"
#include "mlxd_fixture.h"
#include "mlxd_mlx5.h"
#include "util.h"

#define Z32 "00000000000000000000000000000000"
#define HEX64 Z32 Z32 Z32 "00000000000000000000000000000ae1"   /* byte 62 = 0x0a, op_own 0xe1 */
#define HDR "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\ncqn 0x412\nsource unit test\n"

static void fill(uint8_t *c, unsigned size, unsigned seed)
{
    for (unsigned i = 0; i < size; i++) c[i] = (uint8_t)(seed * 31 + i * 7);
    /* op_own: a CQE a NIC writes (REQ_ERR, format 0, owner and SE varying): the reader refuses
     * opcode 0xF and cqe_format 2 in 64 bytes */
    c[size - 1] = (uint8_t)(0xd0 | (seed & 3));
}

static void round_trip(unsigned cqe_size)
{
    char path[] = "/tmp/mlxd-fixture-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    struct mlxd_fixture_header h = { .version = 1, .cqe_size = cqe_size, .ring_size = 1024,
                                     .cqn = 0xabcdef };
    strcpy(h.source, "round trip test # with a hash in the source");
    struct mlxd_fixture_writer *w = NULL;
    ck_assert_int_eq(mlxd_fixture_writer_open(path, &h, &w), 0);
    uint8_t cqe[128];
    static const uint64_t delays[] = { 0, 1, 999, 1000000000ull * 3600, UINT64_MAX };
    for (unsigned i = 0; i < 5; i++) {
        fill(cqe, cqe_size, i);
        if (i == 2) ck_assert_int_eq(mlxd_fixture_comment(w, "between records"), 0);
        ck_assert_int_eq(mlxd_fixture_write(w, cqe, i != 0, delays[i]), 0);
    }
    ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);

    struct mlxd_fixture *f = NULL;
    ck_assert_msg(mlxd_fixture_load(path, &f) == 0, "%s", mlxd_errmsg());
    ck_assert_uint_eq(f->header.version, 1);
    ck_assert_uint_eq(f->header.cqe_size, cqe_size);
    ck_assert_uint_eq(f->header.ring_size, 1024);
    ck_assert_uint_eq(f->header.cqn, 0xabcdef);
    ck_assert_str_eq(f->header.source, h.source);
    ck_assert_uint_eq(f->count, 5);
    for (unsigned i = 0; i < 5; i++) {
        fill(cqe, cqe_size, i);
        ck_assert_int_eq(memcmp(f->records[i].cqe, cqe, cqe_size), 0);
        ck_assert_uint_eq(f->records[i].cqe_size, cqe_size);
        ck_assert(f->records[i].has_delay == (i != 0));
        ck_assert_uint_eq(f->records[i].delay_ns, i ? delays[i] : 0);
    }
    /* line numbers: magic, comment, 4 header keys = 6 lines, records from line 7, comment before the 3rd */
    ck_assert_uint_eq(f->records[0].line, 7);
    ck_assert_uint_eq(f->records[2].line, 10);
    mlxd_fixture_free(f);

    /* streaming gives the same */
    struct mlxd_fixture_reader *r = NULL;
    ck_assert_int_eq(mlxd_fixture_open(path, &r), 0);
    ck_assert_uint_eq(mlxd_fixture_header(r)->cqn, 0xabcdef);
    struct mlxd_fixture_record rec;
    int n = 0, rc;
    while ((rc = mlxd_fixture_next(r, &rec)) == 1) n++;
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(mlxd_fixture_next(r, &rec), 0);
    mlxd_fixture_close(r);
    unlink(path);
}

START_TEST(round_trip_64) { round_trip(64); }
END_TEST
START_TEST(round_trip_128) { round_trip(128); }
END_TEST

START_TEST(reads_spec_example_with_units_comments_and_spaces)
{
    const char *t =
        "# a recorded stream\n\n"
        "mlxd-cqe-fixture 1   # version\n"
        "source emulator: 1080p frames, 2 frames\n"
        "cqn 1042\n"
        "ring_size 0x100\n"
        "cqe_size 64\n"
        HEX64 "\n"
        "+1500ns " HEX64 "  # after 1.5 us\n"
        "+2us " HEX64 "\n"
        "+3ms " HEX64 "\n"
        "+1s " Z32 " " Z32 " " Z32 " 00000000000000000000000000000AE1\n";
    struct mlxd_fixture_reader *r = NULL;
    ck_assert_msg(mlxd_fixture_open_mem(t, strlen(t), "spec", &r) == 0, "%s", mlxd_errmsg());
    const struct mlxd_fixture_header *h = mlxd_fixture_header(r);
    ck_assert_uint_eq(h->cqn, 1042);
    ck_assert_uint_eq(h->ring_size, 256);
    ck_assert_str_eq(h->source, "emulator: 1080p frames, 2 frames");
    static const uint64_t want[] = { 0, 1500, 2000, 3000000, 1000000000 };
    struct mlxd_fixture_record rec;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(mlxd_fixture_next(r, &rec), 1);
        ck_assert(rec.has_delay == (i != 0));
        ck_assert_uint_eq(rec.delay_ns, want[i]);
        ck_assert_uint_eq(rec.cqe[63], 0xe1);
        ck_assert_uint_eq(rec.cqe[62], 0x0a);
        ck_assert_uint_eq(rec.cqe[61], 0x00);
        ck_assert_uint_eq(rec.line, 8 + (unsigned)i);
    }
    ck_assert_int_eq(mlxd_fixture_next(r, &rec), 0);
    mlxd_fixture_close(r);
}
END_TEST

/* Each malformed text, the line its error must name, and a word the message must contain. */
static const struct { const char *text; unsigned line; const char *what; bool at_open; } bad[] = {
    { "", 0, "empty", true },
    { "hello 1\n", 1, "first line", true },
    { "mlxd-cqe-fixture 3\n", 1, "version 3", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\ncqn 1\noverflow 3\n", 5, "unknown header key", true },
    { "mlxd-cqe-fixture 1\ncqe_size 96\n", 2, "neither 64 nor 128", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 100\n", 3, "power of two", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\ncqn 0x1000000\n", 4, "24 bits", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\ncqn 1\nsource\n", 5, "empty", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\ncqe_size 64\n", 3, "duplicate", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\ncolour blue\n", 3, "unknown header key", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\n" HEX64 "\n", 4, "missing cqn, source", true },
    { "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\ncqn 1\n", 4, "missing source", true },
    { HDR HEX64 "\n" HEX64 "0\n", 7, "129 hex digits", false },
    { HDR HEX64 "\n\n# c\n" Z32 Z32 Z32 Z32 "\n" Z32 "\n", 10, "32 hex digits", false },
    { HDR "+15 " HEX64 "\n", 6, "unit", false },
    { HDR "+15xs " HEX64 "\n", 6, "unit", false },
    { HDR "+99999999999999999999ns " HEX64 "\n", 6, "64 bits", false },
    /* records no ConnectX writes, which the poll loop could never consume (issue 16) */
    { HDR HEX64 "\n" Z32 Z32 Z32 "000000000000000000000000000000f0\n", 7, "opcode 0xf", false },
    { HDR HEX64 "\n+1us " Z32 Z32 Z32 "000000000000000000000000000000f1  # invalid, owner 1\n", 7,
      "never written", false },
    { HDR Z32 Z32 Z32 "00000000000000000000000000000008\n", 6, "cqe_format 2", false },
    { HDR "+20000000000s " HEX64 "\n", 6, "64 bits", false },
    { HDR Z32 Z32 Z32 "0000000000000000000000000000zae1\n", 6, "not a hex digit", false },
    { HDR HEX64 "\ncqn 5\n", 7, "not a record", false },
};

START_TEST(malformed_file_error_names_line)
{
    const char *t = bad[_i].text;
    struct mlxd_fixture_reader *r = NULL;
    char name[32];
    snprintf(name, sizeof name, "bad%d.fix", _i);
    int rc = mlxd_fixture_open_mem(t, strlen(t), name, &r);
    if (!bad[_i].at_open) {
        ck_assert_msg(rc == 0, "case %d: open failed: %s", _i, mlxd_errmsg());
        struct mlxd_fixture_record rec;
        do rc = mlxd_fixture_next(r, &rec); while (rc == 1);
        ck_assert_int_eq(rc, -EINVAL);
        /* sticky */
        ck_assert_int_eq(mlxd_fixture_next(r, &rec), -EINVAL);
        mlxd_fixture_close(r);
    } else {
        ck_assert_int_eq(rc, -EINVAL);
        ck_assert_ptr_null(r);
    }
    /* "<called function>: <file>:<line>: " */
    char want[96];
    snprintf(want, sizeof want, "%s: %s:%u: ",
             bad[_i].at_open ? "mlxd_fixture_open_mem" : "mlxd_fixture_next", name, bad[_i].line);
    const char *m = mlxd_errmsg();
    ck_assert_msg(!strncmp(m, want, strlen(want)), "case %d: message '%s' does not start with '%s'",
                  _i, m, want);
    ck_assert_msg(strstr(m, bad[_i].what) != NULL, "case %d: message '%s' lacks '%s'", _i, m,
                  bad[_i].what);
}
END_TEST

START_TEST(writer_refuses_bad_headers_and_reader_missing_file)
{
    struct mlxd_fixture_header h = { .version = 1, .cqe_size = 64, .ring_size = 8, .cqn = 1 };
    strcpy(h.source, "x");
    struct mlxd_fixture_writer *w = NULL;
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    h.cqe_size = 32;
    ck_assert_int_eq(mlxd_fixture_writer_stream(f, &h, &w), -EINVAL);
    h.cqe_size = 64; h.ring_size = 12;
    ck_assert_int_eq(mlxd_fixture_writer_stream(f, &h, &w), -EINVAL);
    h.ring_size = 8; strcpy(h.source, "two\nlines");
    ck_assert_int_eq(mlxd_fixture_writer_stream(f, &h, &w), -EINVAL);
    strcpy(h.source, "   ");
    ck_assert_int_eq(mlxd_fixture_writer_stream(f, &h, &w), -EINVAL);
    ck_assert_ptr_null(w);
    strcpy(h.source, "ok");
    ck_assert_int_eq(mlxd_fixture_writer_stream(f, &h, &w), 0);
    ck_assert_int_eq(mlxd_fixture_comment(w, "a\nb"), -EINVAL);
    ck_assert_int_eq(mlxd_fixture_write(w, NULL, false, 0), -EINVAL);
    ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);
    fclose(f);
    struct mlxd_fixture_reader *r = NULL;
    ck_assert_int_eq(mlxd_fixture_open("/nonexistent/x.fix", &r), -ENOENT);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_fixture_open: /nonexistent/x.fix: No such file or directory");
    struct mlxd_fixture *fx = NULL;
    ck_assert_int_eq(mlxd_fixture_load("/nonexistent/x.fix", &fx), -ENOENT);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_fixture_load: /nonexistent/x.fix: No such file or directory");
    ck_assert_int_eq(mlxd_fixture_writer_open("/nonexistent/x.fix", &h, &w), -ENOENT);
    ck_assert_str_eq(mlxd_errmsg(),
                     "mlxd_fixture_writer_open: /nonexistent/x.fix: No such file or directory");
    ck_assert_int_eq(mlxd_fixture_open(NULL, &r), -EINVAL);
}
END_TEST

/* mlxd_fixture_load reports a malformed line under its own name, with file:line kept. */
START_TEST(load_error_names_load_and_line)
{
    char path[] = "/tmp/mlxd-fixture-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    static const char text[] = HDR HEX64 "\n+15 " HEX64 "\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    struct mlxd_fixture *f = NULL;
    ck_assert_int_eq(mlxd_fixture_load(path, &f), -EINVAL);
    ck_assert_ptr_null(f);
    char want[160];
    snprintf(want, sizeof want, "mlxd_fixture_load: %s:7: delay needs a unit (ns, us, ms or s) "
             "right after the number", path);
    ck_assert_str_eq(mlxd_errmsg(), want);
    unlink(path);
}
END_TEST

/* A length whose + 1 wraps (the private copy is len + 1 bytes) is refused before any
 * allocation or read. */
START_TEST(open_mem_refuses_huge_length)
{
    struct mlxd_fixture_reader *r = NULL;
    size_t lens[] = { SIZE_MAX, SIZE_MAX - 1, (size_t)PTRDIFF_MAX };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        mlxd_err_clear();
        ck_assert_int_eq(mlxd_fixture_open_mem(HDR, lens[i], "big.fix", &r), -EINVAL);
        ck_assert_ptr_null(r);
        ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_fixture_open_mem: length ", 30), "%s",
                      mlxd_errmsg());
    }
}
END_TEST

/* The example in docs/fixture-format.md is a valid fixture and decodes as the text says. */
START_TEST(docs_example_reads_as_documented)
{
    FILE *f = fopen(mlxd_test_path("docs/fixture-format.md"), "r");
    ck_assert_ptr_nonnull(f);
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    char *a = strstr(doc, "```\nmlxd-cqe-fixture 1\n");
    ck_assert_ptr_nonnull(a);
    a += 4;
    char *e = strstr(a, "```");
    ck_assert_ptr_nonnull(e);
    struct mlxd_fixture_reader *r = NULL;
    ck_assert_msg(mlxd_fixture_open_mem(a, (size_t)(e - a), "fixture-format.md", &r) == 0, "%s",
                  mlxd_errmsg());
    ck_assert_uint_eq(mlxd_fixture_header(r)->cqn, 0x412);
    ck_assert_uint_eq(mlxd_fixture_header(r)->ring_size, 256);
    struct mlxd_fixture_record rec;
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_int_eq(mlxd_fixture_next(r, &rec), 1);
        ck_assert_uint_eq(mlxd_cqe_opcode(rec.cqe), 1);      /* RESP_WR_IMM */
        ck_assert_uint_eq(mlxd_cqe_owner(rec.cqe), 0);
        ck_assert_uint_eq(mlxd_cqe_imm(rec.cqe), i + 1);
        ck_assert_uint_eq(mlxd_cqe_byte_cnt(rec.cqe), 0x1000);
        ck_assert_uint_eq(mlxd_cqe_qpn(rec.cqe), 0x123);
        ck_assert_uint_eq(mlxd_cqe_wqe_counter(rec.cqe), i);
        ck_assert_uint_eq(rec.delay_ns, i ? 16666667u : 0u);
    }
    ck_assert_int_eq(mlxd_fixture_next(r, &rec), 0);
    mlxd_fixture_close(r);
}
END_TEST

/* Version 2: the overflow count the recorder knows only at the end is written into the header
 * at close, and read back; a version 1 header has no room for it. */
START_TEST(version_2_overflow_written_at_close)
{
    char path[] = "/tmp/mlxd-fixture-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    struct mlxd_fixture_header h = { .version = 2, .cqe_size = 64, .ring_size = 64, .cqn = 7 };
    strcpy(h.source, "v2 test");
    struct mlxd_fixture_writer *w = NULL;
    ck_assert_int_eq(mlxd_fixture_writer_open(path, &h, &w), 0);
    uint8_t cqe[64] = { 0 };
    cqe[63] = 0x10;
    for (int i = 0; i < 3; i++) ck_assert_int_eq(mlxd_fixture_write(w, cqe, true, 1000), 0);
    ck_assert_int_eq(mlxd_fixture_writer_set_overflow(w, 12345678901ull), 0);
    ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);
    struct mlxd_fixture *f = NULL;
    ck_assert_msg(mlxd_fixture_load(path, &f) == 0, "%s", mlxd_errmsg());
    ck_assert_uint_eq(f->header.version, 2);
    ck_assert_uint_eq(f->header.overflow, 12345678901ull);
    ck_assert_uint_eq(f->count, 3);
    mlxd_fixture_free(f);
    h.version = 1;
    ck_assert_int_eq(mlxd_fixture_writer_open(path, &h, &w), 0);
    ck_assert_int_eq(mlxd_fixture_writer_set_overflow(w, 1), -EINVAL);
    ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);
    h.overflow = 1;
    ck_assert_int_eq(mlxd_fixture_writer_open(path, &h, &w), -EINVAL);
    unlink(path);
}
END_TEST

/* The same through a caller's stream (open_memstream, as the fuzz_fixture round trip uses): the
 * overflow rewritten at close must not cut the records after the header.  glibc's memstream takes
 * the write position for the end after a write behind it (found by fuzz_fixture). */
START_TEST(version_2_overflow_in_a_memstream_keeps_the_records)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ck_assert_ptr_nonnull(f);
    struct mlxd_fixture_header h = { .version = 2, .cqe_size = 64, .ring_size = 64, .cqn = 7, .overflow = 5 };
    strcpy(h.source, "memstream");
    struct mlxd_fixture_writer *w = NULL;
    ck_assert_int_eq(mlxd_fixture_writer_stream(f, &h, &w), 0);
    uint8_t cqe[64] = { 0 };
    cqe[63] = 0x10;
    for (int i = 0; i < 3; i++) ck_assert_int_eq(mlxd_fixture_write(w, cqe, false, 0), 0);
    ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);
    fclose(f);
    struct mlxd_fixture_reader *r = NULL;
    ck_assert_msg(mlxd_fixture_open_mem(out, len, "memstream", &r) == 0, "%s", mlxd_errmsg());
    ck_assert_uint_eq(mlxd_fixture_header(r)->overflow, 5);
    struct mlxd_fixture_record rec;
    for (int i = 0; i < 3; i++) ck_assert_int_eq(mlxd_fixture_next(r, &rec), 1);
    ck_assert_int_eq(mlxd_fixture_next(r, &rec), 0);
    mlxd_fixture_close(r);
    free(out);
}
END_TEST

/* A fixture whose record the poll loop could never consume is refused before anything is
 * started: the replay of a CQE with opcode 0xF used to load and then stall the poll loop. */
START_TEST(replay_refuses_invalid_opcode_naming_the_line)
{
    char path[] = "/tmp/mlxd-fixture-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    static const char t[] = HDR HEX64 "\n" HEX64 "\n" Z32 Z32 Z32 "000000000000000000000000000000f0\n";
    ck_assert_int_eq(write(fd, t, sizeof t - 1), (ssize_t)(sizeof t - 1));
    close(fd);
    struct mlxd_cq *cq = NULL;
    ck_assert_int_eq(mlxd_cq_create_detached(16, &cq), 0);
    struct mlxd_replay *rp = NULL;
    ck_assert_int_eq(mlxd_replay_start(cq, path, NULL, &rp), -EINVAL);
    ck_assert_ptr_null(rp);
    char want[128];
    snprintf(want, sizeof want, "%s:8: opcode 0xf", path);
    ck_assert_msg(strstr(mlxd_errmsg(), want) != NULL, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(path);
}
END_TEST

Suite *fixture_suite(void)
{
    Suite *s = suite_create("fixture");
    TCase *tc = tcase_create("format");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, round_trip_64);
    tcase_add_test(tc, version_2_overflow_in_a_memstream_keeps_the_records);
    tcase_add_test(tc, round_trip_128);
    tcase_add_test(tc, reads_spec_example_with_units_comments_and_spaces);
    tcase_add_loop_test(tc, malformed_file_error_names_line, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, writer_refuses_bad_headers_and_reader_missing_file);
    tcase_add_test(tc, docs_example_reads_as_documented);
    tcase_add_test(tc, load_error_names_load_and_line);
    tcase_add_test(tc, open_mem_refuses_huge_length);
    tcase_add_test(tc, replay_refuses_invalid_opcode_naming_the_line);
    tcase_add_test(tc, version_2_overflow_written_at_close);
    suite_add_tcase(s, tc);
    return s;
}
