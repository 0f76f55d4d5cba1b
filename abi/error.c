/* Per-thread error messages (see mlxd_error.h). */
#include <stdarg.h>
#include <stdio.h>
#include "mlxd_error.h"

/* 512 bytes holds a call name, a path of reasonable length and a kernel errno text. */
static __thread char errbuf[512];

const char *mlxd_errmsg(void) { return errbuf; }

int mlxd_err(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return err > 0 ? -err : err;
}

void mlxd_err_clear(void) { errbuf[0] = 0; }
