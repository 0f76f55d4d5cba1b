/* cqe_dump.c: parser for CQE dumps pasted from logs (mlxd_cqe_dump.h).
 * STUB: the real implementation follows. */
#include <errno.h>
#include <stdlib.h>
#include "mlxd_cqe_dump.h"
#include "mlxd_error.h"

int mlxd_cqe_dump_parse(const char *text, size_t len, struct mlxd_dump_result **out)
{ (void)text; (void)len; (void)out; return mlxd_err(ENOSYS, "mlxd_cqe_dump_parse: not implemented yet"); }
void mlxd_cqe_dump_free(struct mlxd_dump_result *r) { (void)r; }
const char *mlxd_dump_format_name(enum mlxd_dump_format f) { (void)f; return NULL; }
