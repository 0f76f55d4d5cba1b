/* Discovery and open on fake sysfs trees (SYSFS_PATH convention, libibverbs sysfs.c), and
 * argument validation of the setup calls (misuse -> -EINVAL, nothing changed). */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mlxd_error.h"
#include "mlxd_uverbs.h"
#include "mlxd_mlx5.h"

static char root[PATH_MAX];

static void mk(const char *rel)
{
    char p[PATH_MAX * 2], *s;
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (s = p + strlen(root) + 1; *s; s++)
        if (*s == '/') { *s = 0; mkdir(p, 0755); *s = '/'; }
    mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void lnk(const char *target, const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    ck_assert_int_eq(symlink(target, p), 0);
}

/* A device whose PCI function's driver is `drv` (symlink) or, with drv NULL, only a modalias. */
static void device(const char *name, const char *drv, const char *modalias, int uverbs)
{
    char rel[256], t[256];
    snprintf(rel, sizeof rel, "class/infiniband/%s/device", name);
    mk(rel);
    if (drv) {
        snprintf(t, sizeof t, "../../../../bus/pci/drivers/%s", drv);
        snprintf(rel, sizeof rel, "class/infiniband/%s/device/driver", name);
        lnk(t, rel);
    }
    if (modalias) {
        snprintf(rel, sizeof rel, "class/infiniband/%s/device/modalias", name);
        put(rel, modalias);
    }
    if (uverbs >= 0) {
        snprintf(rel, sizeof rel, "class/infiniband_verbs/uverbs%d", uverbs);
        mk(rel);
        snprintf(rel, sizeof rel, "class/infiniband_verbs/uverbs%d/ibdev", uverbs);
        snprintf(t, sizeof t, "%s\n", name);
        put(rel, t);
    }
}

static void setup_tree(void)
{
    snprintf(root, sizeof root, "%s/mlxd-sysfs-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(root));
    setenv("SYSFS_PATH", root, 1);
}

static void rm_tree(void)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(names_sorted_and_filtered)
{
    setup_tree();
    device("mlx5_2", "mlx5_core", NULL, 2);
    device("mlx5_10", "mlx5_core", NULL, 10);
    device("mlx5_0", "mlx5_core", NULL, 0);
    device("mlx4_0", "mlx4_core", "pci:v000015B3d00001003sv000015B3sd00000006bc02sc00i00", 3);
    device("rxe0", NULL, NULL, 4);                                   /* no PCI driver at all */
    device("mlx5_7", NULL, "pci:v000015B3d0000101Dsv000015B3sd00000016bc02sc00i00", 7); /* modalias */
    device("irdma0", NULL, "pci:v00008086d00001592sv00008086sd00000002bc02sc00i00", 8);
    char **names; size_t n;
    ck_assert_int_eq(mlxd_names(&names, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(names[0], "mlx5_0");
    ck_assert_str_eq(names[1], "mlx5_10");          /* strcmp order: "mlx5_10" < "mlx5_2" */
    ck_assert_str_eq(names[2], "mlx5_2");
    ck_assert_str_eq(names[3], "mlx5_7");
    mlxd_names_free(names, n);
    rm_tree();
}
END_TEST

START_TEST(names_missing_and_unreadable)
{
    setup_tree();
    char **names = (char **)1; size_t n = 99;
    ck_assert_int_eq(mlxd_names(&names, &n), 0);      /* no class/infiniband: empty list */
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(names);
    mk("class");
    put("class/infiniband", "not a directory\n");
    ck_assert_int_eq(mlxd_names(&names, &n), -ENOTDIR);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), root));
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "class/infiniband"));
    ck_assert_int_eq(mlxd_names(NULL, &n), -EINVAL);
    rm_tree();
}
END_TEST

START_TEST(sysfs_root_convention)
{
    setenv("SYSFS_PATH", "/some/where///", 1);
    ck_assert_str_eq(mlxd_sysfs_root(), "/some/where");
    unsetenv("SYSFS_PATH");
    ck_assert_str_eq(mlxd_sysfs_root(), "/sys");
}
END_TEST

START_TEST(open_errors_name_the_cause)
{
    setup_tree();
    device("mlx4_0", "mlx4_core", NULL, 3);
    device("mlx5_5", "mlx5_core", NULL, -1);          /* no verbs file in sysfs */
    device("mlx5_6", "mlx5_core", NULL, 97);          /* uverbs97 in sysfs, no /dev node */
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_open("mlx5_9", NULL, &nic), -ENODEV);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "no RDMA device mlx5_9"));
    ck_assert_int_eq(mlxd_open("mlx4_0", NULL, &nic), -ENODEV);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "mlx5_core"));
    ck_assert_int_eq(mlxd_open("mlx5_5", NULL, &nic), -ENOENT);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "no verbs file"));
    ck_assert_int_eq(mlxd_open("mlx5_6", NULL, &nic), -ENOENT);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "/dev/infiniband/uverbs97"));
    ck_assert_ptr_null(nic);
    rm_tree();
}
END_TEST

START_TEST(open_misuse)
{
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_open(NULL, NULL, &nic), -EINVAL);
    ck_assert_int_eq(mlxd_open("", NULL, &nic), -EINVAL);
    ck_assert_int_eq(mlxd_open("../x", NULL, &nic), -EINVAL);
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, NULL), -EINVAL);
    struct mlxd_open_opts o = { .sz = 1 };
    ck_assert_int_eq(mlxd_open("mlx5_0", &o, &nic), -EINVAL);
    o.sz = sizeof o; o.port = 2;
    ck_assert_int_eq(mlxd_open("mlx5_0", &o, &nic), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "port 2"));
    ck_assert_ptr_null(nic);
    ck_assert_int_eq(mlxd_close(NULL), -EINVAL);
    struct mlxd_event ev;
    ck_assert_int_eq(mlxd_wait(NULL, 0, &ev, 1), -EINVAL);
    ck_assert_int_eq(mlxd_cq_create(NULL, 8, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_qp_create(NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_region_register(NULL, &ev, 8, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_region_deregister(NULL), -EINVAL);
    ck_assert_int_eq(mlxd_qp_connect(NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_qp_destroy(NULL), -EINVAL);
    ck_assert_int_eq(mlxd_cq_destroy(NULL), -EINVAL);
    ck_assert_int_eq(mlxd_link_layer(NULL), -EINVAL);
    ck_assert_uint_eq(mlxd_max_message(NULL), 0);
}
END_TEST

Suite *uverbs_suite(void)
{
    Suite *s = suite_create("uverbs");
    TCase *tc = tcase_create("sysfs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, names_sorted_and_filtered);
    tcase_add_test(tc, names_missing_and_unreadable);
    tcase_add_test(tc, sysfs_root_convention);
    tcase_add_test(tc, open_errors_name_the_cause);
    tcase_add_test(tc, open_misuse);
    suite_add_tcase(s, tc);
    return s;
}
