/* security_fuzz: the findings of the fuzz targets (tests/fuzz/, docs/reliability.md), each kept
 * as a regression test with the smallest input that showed it.
 *
 *   fixture_source_with_cr   fuzz_fixture: mlxd_fixture_open_mem accepts a header whose 'source'
 *                            has a CR inside the line ("a\rb"), but mlxd_fixture_writer_stream
 *                            refuses that same header ("source contains a newline"): a fixture
 *                            that reads cannot be written back.  docs/fixture-format.md: the
 *                            source is one line of text; the writer checks the header "like the
 *                            reader checks it" (mlxd_fixture.h).  Either both accept or both
 *                            refuse.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_fixture.h"

START_TEST(fixture_source_with_cr)
{
    static const char text[] = "mlxd-cqe-fixture 1\ncqe_size 64\nring_size 256\ncqn 0x000412\n"
                               "source a\rb\n";
    struct mlxd_fixture_reader *r = NULL;
    int rc = mlxd_fixture_open_mem(text, sizeof text - 1, "cr.fix", &r);
    if (rc == -EINVAL) return;       /* refused by the reader: consistent with the writer */
    ck_assert_int_eq(rc, 0);
    const struct mlxd_fixture_header *h = mlxd_fixture_header(r);
    ck_assert_str_eq(h->source, "a\rb");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ck_assert_ptr_nonnull(f);
    struct mlxd_fixture_writer *w = NULL;
    int wrc = mlxd_fixture_writer_stream(f, h, &w);
    ck_assert_msg(wrc == 0, "the reader accepted source \"a\\rb\" but the writer refuses it: %d", wrc);
    ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);
    fclose(f);
    free(out);
    mlxd_fixture_close(r);
}
END_TEST

Suite *security_fuzz_suite(void)
{
    Suite *s = suite_create("security_fuzz");
    TCase *tc = tcase_create("findings");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fixture_source_with_cr);
    suite_add_tcase(s, tc);
    return s;
}
