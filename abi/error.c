/* Per-thread error messages (see mlxd_error.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "mlxd_error.h"

/* 512 bytes holds a call name, a path of reasonable length and a kernel errno text. */
static __thread char errbuf[512];

const char *mlxd_errmsg(void) { return errbuf; }

int mlxd_err(int err, const char *fmt, ...)
{
    /* Format into a scratch buffer first: callers wrap an inner failure as
     * mlxd_err(e, "outer: %s", mlxd_errmsg()), whose argument is errbuf itself. */
    char tmp[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(errbuf, tmp, sizeof errbuf);
    /* err 0 is a bug in the caller (a failure path with no errno): it must not read as
     * success, so it becomes -EIO. */
    if (err == 0) return -EIO;
    return err > 0 ? -err : err;
}

void mlxd_err_clear(void) { errbuf[0] = 0; }
