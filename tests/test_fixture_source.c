/* fixture_source: one rule for the header's 'source' in the fixture reader and writer
 * (docs/fixture-format.md, section 2: one line of text, 1..255 bytes, no control character but
 * tab, leading and trailing blanks not part of it).  The fuzz finding security_fuzz:
 * fixture_source_with_cr was a reader that kept a CR inside the line while the writer refused
 * it; here every case is checked from both sides: the reader refuses, naming the line, exactly
 * what the writer refuses, and what either accepts round-trips unchanged. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_error.h"
#include "mlxd_fixture.h"

/* Reads a fixture whose source line is "source " + src + "\n" (line 5).  Returns the reader's
 * result; on success *out holds the source read. */
static int read_source(const char *src, char out[MLXD_FIXTURE_SOURCE_MAX])
{
    char text[512];
    int n = snprintf(text, sizeof text, "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\n"
                     "cqn 0x000412\nsource %s\n", src);
    ck_assert(n > 0 && (size_t)n < sizeof text);
    struct mlxd_fixture_reader *r = NULL;
    int rc = mlxd_fixture_open_mem(text, (size_t)n, "src.fix", &r);
    if (rc == 0) {
        snprintf(out, MLXD_FIXTURE_SOURCE_MAX, "%s", mlxd_fixture_header(r)->source);
        mlxd_fixture_close(r);
    }
    return rc;
}

/* Writes a header with this source to memory; returns the writer's result and, on success, the
 * source that reads back. */
static int write_source(const char *src, char back[MLXD_FIXTURE_SOURCE_MAX])
{
    struct mlxd_fixture_header h = { .version = 1, .cqe_size = 64, .ring_size = 256, .cqn = 0x412 };
    snprintf(h.source, sizeof h.source, "%s", src);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    struct mlxd_fixture_writer *w = NULL;
    int rc = mlxd_fixture_writer_stream(f, &h, &w);
    if (rc == 0) ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);
    fclose(f);
    if (rc == 0) {
        struct mlxd_fixture_reader *r = NULL;
        ck_assert_int_eq(mlxd_fixture_open_mem(buf, len, "back.fix", &r), 0);
        snprintf(back, MLXD_FIXTURE_SOURCE_MAX, "%s", mlxd_fixture_header(r)->source);
        mlxd_fixture_close(r);
    }
    free(buf);
    return rc;
}

/* Control characters other than tab: refused by both, the reader naming line 5 and the byte. */
START_TEST(control_characters_refused_by_both)
{
    static const struct { const char *src; const char *what; } bad[] = {
        { "a\rb", "control character 0x0d at byte 2" },        /* the fuzz finding */
        { "\rb", "control character 0x0d at byte 1" },
        { "a\x1b[2Jb", "control character 0x1b at byte 2" },   /* a terminal escape */
        { "a\vb", "control character 0x0b at byte 2" },
        { "a\fb", "control character 0x0c at byte 2" },
        { "ab\x7f", "control character 0x7f at byte 3" },
        { "a\x01", "control character 0x01 at byte 2" },
    };
    char got[MLXD_FIXTURE_SOURCE_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(read_source(bad[i].src, got), -EINVAL);
        const char *m = mlxd_errmsg();
        static const char want[] = "mlxd_fixture_open_mem: src.fix:5: 'source' ";
        ck_assert_msg(!strncmp(m, want, sizeof want - 1), "case %zu: '%s'", i, m);
        ck_assert_msg(strstr(m, bad[i].what) != NULL, "case %zu: '%s' lacks '%s'", i, m, bad[i].what);
        ck_assert_int_eq(write_source(bad[i].src, got), -EINVAL);
        ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), bad[i].what));
    }
    /* a newline cannot be inside a read line; the writer refuses it by the same rule */
    ck_assert_int_eq(write_source("two\nlines", got), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "control character 0x0a at byte 4"));
}
END_TEST

/* Text the rule allows reads as written and writes back unchanged: tab, '#', UTF-8, 255 bytes,
 * and a CRLF line end (the CR before the LF ends the line: not part of the source). */
START_TEST(allowed_text_round_trips)
{
    char long_src[MLXD_FIXTURE_SOURCE_MAX];
    memset(long_src, 'x', MLXD_FIXTURE_SOURCE_MAX - 1);
    long_src[MLXD_FIXTURE_SOURCE_MAX - 1] = 0;
    const char *good[] = { "a\tb", "capture # 3, see issue #12", "caméra 2 – 60 Hz", long_src, "x" };
    char got[MLXD_FIXTURE_SOURCE_MAX], back[MLXD_FIXTURE_SOURCE_MAX];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ck_assert_int_eq(read_source(good[i], got), 0);
        ck_assert_str_eq(got, good[i]);
        ck_assert_int_eq(write_source(got, back), 0);
        ck_assert_str_eq(back, good[i]);
    }
    ck_assert_int_eq(read_source("crlf\r", got), 0);
    ck_assert_str_eq(got, "crlf");
}
END_TEST

/* Leading and trailing blanks are not part of the source: the reader drops them (so they never
 * reach a header it returns), and the writer refuses a source with them rather than write a
 * file that reads back different. */
START_TEST(blanks_at_the_ends)
{
    char got[MLXD_FIXTURE_SOURCE_MAX];
    ck_assert_int_eq(read_source("  \tpadded\t ", got), 0);
    ck_assert_str_eq(got, "padded");
    const char *ends[] = { " padded", "padded ", "\tpadded", "padded\t" };
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        ck_assert_int_eq(write_source(ends[i], got), -EINVAL);
        ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "leading or trailing blank"));
    }
    ck_assert_int_eq(read_source(" \t ", got), -EINVAL);   /* empty once trimmed */
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "src.fix:5: 'source' is empty"));
}
END_TEST

Suite *fixture_source_suite(void)
{
    Suite *s = suite_create("fixture_source");
    TCase *tc = tcase_create("rule");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, control_characters_refused_by_both);
    tcase_add_test(tc, allowed_text_round_trips);
    tcase_add_test(tc, blanks_at_the_ends);
    suite_add_tcase(s, tc);
    return s;
}
