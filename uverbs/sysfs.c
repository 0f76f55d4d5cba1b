/* sysfs.c: finding mlx5 RDMA devices and their verbs files (rdma-core libibverbs/init.c,
 * sysfs.c).
 *
 * Root: $SYSFS_PATH (only when uid == euid, trailing '/' stripped) else /sys, as libibverbs'
 * ibv_get_sysfs_path does.  A device is mlx5_core's when <root>/class/infiniband/<dev>/device/driver
 * is a symlink whose last component is "mlx5_core" (a PCI function) or "mlx5_core.sf" (a
 * sub-function on the auxiliary bus); when that link does not exist, when device/modalias names
 * a Mellanox (PCI vendor 0x15B3) function of the mlx5 generation (device id 0x1011..0x10ff or
 * 0xa2xx; ConnectX-3 and older, 0x1003..0x1010, are mlx4's) or is "auxiliary:mlx5_core.sf". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mlxd_error.h"
#include "sysfs.h"

static __thread char root_buf[PATH_MAX];

const char *mlxd_sysfs_root(void)
{
    const char *env = getenv("SYSFS_PATH");
    if (!env || !*env || getuid() != geteuid() || strlen(env) >= sizeof root_buf) return "/sys";
    strcpy(root_buf, env);
    size_t n = strlen(root_buf);
    while (n > 1 && root_buf[n - 1] == '/') root_buf[--n] = 0;
    return root_buf;
}

int mlxd__read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int err = errno;
    close(fd);
    if (n < 0) return -err;
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
    return (int)n;
}

int mlxd__is_mlx5(const char *root, const char *name)
{
    char path[PATH_MAX + 512], link[PATH_MAX];
    snprintf(path, sizeof path, "%s/class/infiniband/%s/device/driver", root, name);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n >= 0) {
        link[n] = 0;
        const char *base = strrchr(link, '/');
        base = base ? base + 1 : link;
        /* mlx5_core for PCI functions, mlx5_core.sf for sub-functions (auxiliary devices on
         * BlueField and ConnectX with SFs); libibverbs matches both by the kernel's driver id,
         * RDMA_DRIVER_MLX5, which the uverbs ioctls then carry */
        return strcmp(base, "mlx5_core") == 0 || strcmp(base, "mlx5_core.sf") == 0;
    }
    snprintf(path, sizeof path, "%s/class/infiniband/%s/device/modalias", root, name);
    char alias[256];
    if (mlxd__read_file(path, alias, sizeof alias) < 0) return 0;
    if (!strcmp(alias, "auxiliary:mlx5_core.sf")) return 1;
    unsigned vendor, device;
    if (sscanf(alias, "pci:v%8xd%8x", &vendor, &device) != 2) return 0;
    if (vendor != 0x15b3) return 0;
    return (device >= 0x1011 && device <= 0x10ff) || (device & 0xff00) == 0xa200;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void mlxd_names_free(char **names, size_t count)
{
    if (!names) return;
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

int mlxd_names(char ***out, size_t *count)
{
    if (!out || !count) return mlxd_err(EINVAL, "mlxd_names: out and count must not be NULL");
    const char *root = mlxd_sysfs_root();
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/infiniband", root);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) { *out = NULL; *count = 0; return 0; }
        return mlxd_err(errno, "mlxd_names: cannot read %s: %s", dir, strerror(errno));
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno) rc = mlxd_err(errno, "mlxd_names: cannot read %s: %s", dir, strerror(errno));
            break;
        }
        if (e->d_name[0] == '.') continue;
        if (!mlxd__is_mlx5(root, e->d_name)) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            char **nv = realloc(v, nc * sizeof *nv);
            if (!nv) { rc = mlxd_err(ENOMEM, "mlxd_names: out of memory"); break; }
            v = nv; cap = nc;
        }
        if (!(v[n] = strdup(e->d_name))) { rc = mlxd_err(ENOMEM, "mlxd_names: out of memory"); break; }
        n++;
    }
    closedir(d);
    if (rc) { mlxd_names_free(v, n); return rc; }
    if (n) qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *count = n;
    return 0;
}

int mlxd__find_uverbs(const char *root, const char *name, int *index)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/infiniband_verbs", root);
    DIR *d = opendir(dir);
    if (!d) return -errno;
    int found = -ENOENT;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned idx;
        char tail;
        if (sscanf(e->d_name, "uverbs%u%c", &idx, &tail) != 1) continue;
        char path[PATH_MAX + 512], ibdev[128];
        snprintf(path, sizeof path, "%s/%s/ibdev", dir, e->d_name);
        if (mlxd__read_file(path, ibdev, sizeof ibdev) < 0) continue;
        if (strcmp(ibdev, name) == 0) { *index = (int)idx; found = 0; break; }
    }
    closedir(d);
    return found;
}
