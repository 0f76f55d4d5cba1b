/* opts.h (private): the rule for options structs that carry their size (libbpf's OPTS_VALID):
 * sz below the first version of the struct is refused; sz above what this library knows is
 * accepted when every byte past the known fields is zero (a program built against a newer
 * header that does not use the new fields), refused otherwise (it asks for something this
 * library cannot do), and refused when implausibly large (a caller's garbage, not a struct). */
#ifndef MLXD_OPTS_H
#define MLXD_OPTS_H
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include "mlxd_error.h"

#define MLXD_OPTS_MAX_TAIL 4096u   /* bytes a newer struct may add, at most */

/* True when [known, sz) of opts is all zero and sz - known is plausible. */
static inline bool mlxd__opts_tail_ok(const void *opts, size_t sz, size_t known)
{
    if (sz <= known) return true;
    if (sz - known > MLXD_OPTS_MAX_TAIL) return false;
    const unsigned char *p = opts;
    for (size_t i = known; i < sz; i++)
        if (p[i]) return false;
    return true;
}
/* The same rule as an error: 0, or -EINVAL with the message "<fn>: <what>->sz N exceeds the K
 * bytes this library knows and the bytes past them are not all zero" (what: "opts", ...). */
static inline int mlxd__opts_tail_check(const char *fn, const char *what, const void *opts, size_t sz,
                                        size_t known)
{
    if (mlxd__opts_tail_ok(opts, sz, known)) return 0;
    return mlxd_err(EINVAL, "%s: %s->sz %zu exceeds the %zu bytes this library knows and the bytes past "
                    "them are not all zero (or are over %u)", fn, what, sz, known, MLXD_OPTS_MAX_TAIL);
}
#endif
