#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
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

void mlxd_test_private_devices(void)
{
    unsigned a = 20 + (unsigned)getpid() % 200, b = 1 + ((unsigned)getpid() / 200) % 250;
    char devs[256];
    snprintf(devs, sizeof devs, "mlx5_0:127.%u.%u.1:mtu=4096,mlx5_1:127.%u.%u.2:mtu=4096", a, b, a, b);
    int rc = mlxd_emu_configure(devs);
    ck_assert_msg(rc == 0, "mlxd_emu_configure(%s): %d", devs, rc);
    const char *root = mlxd_emu_sysfs_path();
    ck_assert_msg(root && *root, "the emulator is not active (MLXD_EMU=0?)");
    setenv("SYSFS_PATH", root, 1);
}

void mlxd_test_wait_one(struct mlxd_cq *cq, int secs, struct mlxd_completion *out)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int n = mlxd_cq_poll(cq, out, 1);
        ck_assert_int_ge(n, 0);
        if (n == 1) return;
        clock_gettime(CLOCK_MONOTONIC, &t);
        ck_assert_msg(t.tv_sec - t0.tv_sec < secs, "no completion within %d s", secs);
        usleep(50);
    }
}

void mlxd_test_open_region(const char *dev, size_t bytes, struct mlxd_nic **nic, unsigned char **buf,
                           struct mlxd_region **reg)
{
    ck_assert_msg(mlxd_open(dev, NULL, nic) == 0, "open %s: %s", dev, mlxd_errmsg());
    *buf = aligned_alloc(4096, bytes);
    ck_assert_ptr_nonnull(*buf);
    memset(*buf, 0, bytes);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE |
                                   MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ };
    ck_assert_msg(mlxd_region_register(*nic, *buf, bytes, &ro, reg) == 0, "%s", mlxd_errmsg());
}

void mlxd_test_emu_two_devices(void)
{
    unsigned v = (unsigned)getpid() * 2654435761u;
    char spec[128];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2", 1 + (v >> 8) % 250,
             (v >> 16) & 0xff, 1 + (v >> 8) % 250, (v >> 16) & 0xff);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
}
