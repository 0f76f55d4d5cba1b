/* driver_open_errors: mlxd_open's errors that need a kernel unlike the default emulated one
 * (uverbs/mlxd_uverbs.h, seed 003: "an Ethernet port without a RoCE v2 GID", "the kernel gives
 * fewer doorbell registers than one system page holds").  The emulator's device options make
 * the kernel report them (docs/emulator.md):
 *   gids=v1            port 1's GID table holds RoCE v1 entries only (a port whose device
 *                      supports RoCE v1 only: k: core/roce_gid_mgmt.c adds one entry per
 *                      supported RoCE version) -> EADDRNOTAVAIL
 *   uars_per_page=0    GET_CONTEXT num_uars_per_page 0 (k: mlx5_ib_alloc_ucontext passes the
 *                      firmware's num_of_uars_per_page through) -> ENOSPC
 * Each fails with the errno, a message naming the cause, and nothing left in the kernel. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_uverbs.h"

static void devices(const char *opts)
{
    unsigned v = (unsigned)getpid() * 2654435761u;
    char spec[128];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1%s", 1 + (v >> 8) % 250, (v >> 16) & 0xff, opts);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
}

START_TEST(control_opens)
{
    devices("");
    struct mlxd_nic *nic = NULL;
    ck_assert_msg(mlxd_open("mlx5_0", NULL, &nic) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_close(nic), 0);
    devices(":gids=v2:uars_per_page=1");              /* RoCE v2 only: still fine */
    ck_assert_msg(mlxd_open("mlx5_0", NULL, &nic) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_close(nic), 0);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

START_TEST(no_roce_v2_gid)
{
    devices(":gids=v1");
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), -EADDRNOTAVAIL);
    ck_assert_ptr_null(nic);
    ck_assert_msg(strstr(mlxd_errmsg(), "no RoCE v2 GID"), "message: %s", mlxd_errmsg());
    ck_assert_msg(strstr(mlxd_errmsg(), "mlx5_0"), "message: %s", mlxd_errmsg());
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

START_TEST(too_few_doorbell_registers)
{
    devices(":uars_per_page=0");
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), -ENOSPC);
    ck_assert_ptr_null(nic);
    ck_assert_msg(strstr(mlxd_errmsg(), "doorbell registers"), "message: %s", mlxd_errmsg());
    ck_assert_msg(strstr(mlxd_errmsg(), "gives 0 "), "message: %s", mlxd_errmsg());
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

START_TEST(bad_options_refused)
{
    ck_assert_int_eq(mlxd_emu_configure("mlx5_0:127.0.0.9:gids=v3"), -EINVAL);
    ck_assert_int_eq(mlxd_emu_configure("mlx5_0:127.0.0.9:uars_per_page=x"), -EINVAL);
    ck_assert_int_eq(mlxd_emu_configure("mlx5_0:127.0.0.9:uars_per_page=257"), -EINVAL);
}
END_TEST

Suite *driver_open_errors_suite(void)
{
    Suite *s = suite_create("driver_open_errors");
    TCase *tc = tcase_create("open");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, control_opens);
    tcase_add_test(tc, no_roce_v2_gid);
    tcase_add_test(tc, too_few_doorbell_registers);
    tcase_add_test(tc, bad_options_refused);
    suite_add_tcase(s, tc);
    return s;
}
