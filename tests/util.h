/* Shared helpers for the Check suites. */
#ifndef MLXD_TEST_UTIL_H
#define MLXD_TEST_UTIL_H
#include <stddef.h>

/* The build directory of the running suite ($MLXD_BUILD, default "build"). */
const char *mlxd_test_build_dir(void);
/* The source tree ($MLXD_SRC, default "."), for fixtures/. */
const char *mlxd_test_src_dir(void);
/* path = <src>/<rel>; returns a static buffer (one per thread is not needed: tests are serial). */
const char *mlxd_test_path(const char *rel);

#endif
