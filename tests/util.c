#include <stdio.h>
#include <stdlib.h>
#include <check.h>
#include <unistd.h>
#include "mlxd_emu.h"
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
