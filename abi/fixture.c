/* fixture.c: CQE fixture reader and writer (mlxd_fixture.h, docs/fixture-format.md).
 * STUB: the real implementation follows; every call fails with -ENOSYS for now. */
#include <errno.h>
#include "mlxd_error.h"
#include "mlxd_fixture.h"

#define STUB(fn) mlxd_err(ENOSYS, fn ": not implemented yet")
int mlxd_fixture_open(const char *path, struct mlxd_fixture_reader **out)
{ (void)path; (void)out; return STUB("mlxd_fixture_open"); }
int mlxd_fixture_open_mem(const char *text, size_t len, const char *name,
                          struct mlxd_fixture_reader **out)
{ (void)text; (void)len; (void)name; (void)out; return STUB("mlxd_fixture_open_mem"); }
const struct mlxd_fixture_header *mlxd_fixture_header(const struct mlxd_fixture_reader *r)
{ (void)r; return NULL; }
int mlxd_fixture_next(struct mlxd_fixture_reader *r, struct mlxd_fixture_record *rec)
{ (void)r; (void)rec; return STUB("mlxd_fixture_next"); }
void mlxd_fixture_close(struct mlxd_fixture_reader *r) { (void)r; }
int mlxd_fixture_load(const char *path, struct mlxd_fixture **out)
{ (void)path; (void)out; return STUB("mlxd_fixture_load"); }
void mlxd_fixture_free(struct mlxd_fixture *f) { (void)f; }
int mlxd_fixture_writer_open(const char *path, const struct mlxd_fixture_header *h,
                             struct mlxd_fixture_writer **out)
{ (void)path; (void)h; (void)out; return STUB("mlxd_fixture_writer_open"); }
int mlxd_fixture_writer_stream(FILE *f, const struct mlxd_fixture_header *h,
                               struct mlxd_fixture_writer **out)
{ (void)f; (void)h; (void)out; return STUB("mlxd_fixture_writer_stream"); }
int mlxd_fixture_write(struct mlxd_fixture_writer *w, const void *cqe, bool has_delay,
                       uint64_t delay_ns)
{ (void)w; (void)cqe; (void)has_delay; (void)delay_ns; return STUB("mlxd_fixture_write"); }
int mlxd_fixture_comment(struct mlxd_fixture_writer *w, const char *text)
{ (void)w; (void)text; return STUB("mlxd_fixture_comment"); }
int mlxd_fixture_writer_close(struct mlxd_fixture_writer *w) { (void)w; return 0; }
