/* dump_util.c: see dump_util.h. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dump_util.h"

char *mlxd_test_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char *b = malloc(1 << 16);
    ck_assert_ptr_nonnull(b);
    *len = fread(b, 1, (1 << 16) - 1, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

struct mlxd_dump_result *mlxd_test_parse_dump(const char *s)
{
    struct mlxd_dump_result *r = NULL;
    ck_assert_int_eq(mlxd_cqe_dump_parse(s, strlen(s), &r), 0);
    ck_assert_ptr_nonnull(r);
    return r;
}

bool mlxd_test_has_diag(const struct mlxd_dump_result *r, enum mlxd_dump_severity sev, unsigned line,
                        const char *text)
{
    for (size_t i = 0; i < r->ndiags; i++)
        if (r->diags[i].severity == sev && r->diags[i].line == line &&
            (!text || strstr(r->diags[i].msg, text)))
            return true;
    return false;
}
