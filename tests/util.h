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

/* Gives this test process emulated devices of its own (mlx5_0 on 127.<a>.<b>.1, mlx5_1 on
 * 127.<a>.<b>.2, MTU 4096, a and b from the pid), so that suites running at the same time on this
 * machine do not share UDP ports, and re-exports the emulator's sysfs tree as SYSFS_PATH
 * (emu/mlxd_emu.h).  Fails the test if the emulator is not active. */
void mlxd_test_private_devices(void);

struct mlxd_cq;
struct mlxd_completion;
struct mlxd_nic;
struct mlxd_region;
/* Opens dev and registers a zeroed, page-aligned buffer of bytes (a multiple of 4096) with
 * local-write, remote-write and remote-read access.  Fails the test on any error.  The buffer
 * is the caller's to free after mlxd_close. */
void mlxd_test_open_region(const char *dev, size_t bytes, struct mlxd_nic **nic, unsigned char **buf,
                           struct mlxd_region **reg);
/* Polls cq until one completion arrives and stores it in *out; fails the test after secs
 * seconds without one, or when the poll fails. */
void mlxd_test_wait_one(struct mlxd_cq *cq, int secs, struct mlxd_completion *out);
/* A Check fixture: configures the emulator with mlx5_0 and mlx5_1 on a pair of loopback
 * addresses derived from the pid (127.a.b.1 / .2), so that suites run by other processes at
 * the same time do not collide. */
void mlxd_test_emu_two_devices(void);

#endif
