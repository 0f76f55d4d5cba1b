/* Helpers of the suites that parse CQE dumps (cqe_dump, cqe_paste). */
#ifndef MLXD_TEST_DUMP_UTIL_H
#define MLXD_TEST_DUMP_UTIL_H
#include <stdbool.h>
#include <stddef.h>
#include "mlxd_cqe_dump.h"

/* The file's bytes (at most 64 KiB - 1), NUL-terminated, in *len; fails the test if unreadable. */
char *mlxd_test_slurp(const char *path, size_t *len);
/* mlxd_cqe_dump_parse of the string; fails the test unless it returns 0. */
struct mlxd_dump_result *mlxd_test_parse_dump(const char *s);
/* true if some diagnostic of severity sev on line names text (NULL: any text) */
bool mlxd_test_has_diag(const struct mlxd_dump_result *r, enum mlxd_dump_severity sev, unsigned line,
                        const char *text);
#endif
