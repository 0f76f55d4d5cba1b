#include <stdio.h>
#include <stdlib.h>
#include "util.h"

const char *mlxd_test_build_dir(void)
{
    const char *b = getenv("MLXD_BUILD");
    return b && *b ? b : "build";
}

const char *mlxd_test_src_dir(void)
{
    const char *s = getenv("MLXD_SRC");
    return s && *s ? s : ".";
}

const char *mlxd_test_path(const char *rel)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", mlxd_test_src_dir(), rel);
    return buf;
}
