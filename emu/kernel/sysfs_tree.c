/* sysfs.c: a real directory tree in the layout of /sys that libibverbs' sysfs scan reads
 * (rc: libibverbs/init.c find_sysfs_devs, setup_sysfs_dev; file formats from k: core/sysfs.c and
 * core/uverbs_main.c).  It lives under $TMPDIR (default /tmp) as mlxd-emu.XXXXXX and SYSFS_PATH
 * names it.  A process whose SYSFS_PATH already names an emulator tree for the same configuration
 * (marker file .mlxd-emu) reuses it: a preloaded child of the test runner does that.  The tree is
 * removed at exit by the process that made it; trees left by dead processes are removed by the next
 * process that builds one (sweep_stale). */
#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kernel.h"

#include <stdarg.h>
static int put(const char *root, const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int mkpath(const char *path)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
    return 0;
}

static int put(const char *root, const char *rel, const char *fmt, ...)
{
    char path[1024], dir[1024], text[4300];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) { *slash = 0; int r = mkpath(dir); if (r) return r; }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof text) return -EOVERFLOW;
    /* Written to a temporary file in the same directory and renamed over the old one: the files
     * are 0444 (as sysfs), so reopening one for writing fails with EACCES for a non-root user,
     * while rename() needs only write permission on the directory; readers see either the old
     * or the new text, never a truncated file. */
    static atomic_uint seq;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed));
    int fd = emu_real.open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd < 0) return -errno;
    ssize_t w = emu_real.write(fd, text, (size_t)n);
    int err = w == n ? 0 : (w < 0 ? -errno : -EIO);
    emu_real.close(fd);
    if (!err && rename(tmp, path) < 0) err = -errno;
    if (err) unlink(tmp);
    return err;
}

static void gid_text(const uint8_t *g, char *out)
{
    sprintf(out, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
            g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],
            g[13], g[14], g[15]);
}

/* 0 or the first negative errno */
static int write_port_state(const char *root, const struct emu_device_cfg *c)
{
    char rel[256];
    snprintf(rel, sizeof rel, "class/infiniband/%s/ports/1/state", c->name);
    int r = put(root, rel, c->link_up ? "4: ACTIVE\n" : "1: DOWN\n");
    snprintf(rel, sizeof rel, "class/infiniband/%s/ports/1/phys_state", c->name);
    int r2 = put(root, rel, c->link_up ? "5: LinkUp\n" : "3: Disabled\n");
    return r ? r : r2;
}

/* <base>/device/driver -> the driver's directory under bus/<bus>/drivers/<drv> (a symlink, as in
 * sysfs; discovery reads the link's last component) */
static int driver_link(const char *root, const char *base, const char *bus, const char *drv)
{
    char dir[1024], link[1024], target[256];
    snprintf(dir, sizeof dir, "%s/bus/%s/drivers/%s", root, bus, drv);
    int r = mkpath(dir);
    if (r) return r;
    snprintf(link, sizeof link, "%s/%s/device/driver", root, base);
    snprintf(target, sizeof target, "../../../../bus/%s/drivers/%s", bus, drv);
    if (symlink(target, link) < 0 && errno != EEXIST) return -errno;
    return 0;
}

static int build_device(const char *root, const struct emu_device_cfg *c)
{
    char rel[256], base[128];
    int r = 0;
    unsigned n = c->index;
    snprintf(rel, sizeof rel, "class/infiniband_verbs/uverbs%u/ibdev", n);
    r |= put(root, rel, "%s\n", c->name);
    snprintf(rel, sizeof rel, "class/infiniband_verbs/uverbs%u/dev", n);
    r |= put(root, rel, "%d:%u\n", EMU_UVERBS_MAJOR, EMU_UVERBS_BASE_MINOR + n);
    snprintf(rel, sizeof rel, "class/infiniband_verbs/uverbs%u/abi_version", n);
    r |= put(root, rel, "1\n");                         /* MLX5_UVERBS_MIN/MAX_ABI_VERSION */

    snprintf(base, sizeof base, "class/infiniband/%s", c->name);
#define P(sub, ...) do { snprintf(rel, sizeof rel, "%s/%s", base, sub); r |= put(root, rel, __VA_ARGS__); } while (0)
    uint64_t g = c->node_guid;
    P("node_type", "1: CA\n");
    P("node_guid", "%04x:%04x:%04x:%04x\n", (unsigned)(g >> 48) & 0xffff,
      (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
    P("sys_image_guid", "%04x:%04x:%04x:%04x\n", (unsigned)(g >> 48) & 0xffff,
      (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
    P("fw_ver", "20.99.0001\n");
    P("hca_type", "MT4123\n");
    P("hw_rev", "0x0\n");
    P("board_id", "MLXD_EMU_0001\n");
    if (c->sf) {
        /* a sub-function is an auxiliary device of mlx5_core, bound to mlx5_core.sf (kernel
         * drivers/net/ethernet/mellanox/mlx5/core/sf/dev/driver.c); it has no PCI ids */
        P("device/modalias", "auxiliary:mlx5_core.sf\n");
    } else {
        /* ConnectX-6 (0x101B): in libmlx5's PCI table (rc: providers/mlx5/mlx5.c hca_table). */
        P("device/modalias", "pci:v000015B3d0000101Bsv000015B3sd00000001bc02sc00i00\n");
        P("device/vendor", "0x15b3\n");
        P("device/device", "0x101b\n");
    }
    r |= driver_link(root, base, c->sf ? "auxiliary" : "pci", c->sf ? "mlx5_core.sf" : "mlx5_core");
    snprintf(rel, sizeof rel, "%s/device/infiniband_verbs/uverbs%u/ibdev", base, n);
    r |= put(root, rel, "%s\n", c->name);
    snprintf(rel, sizeof rel, "%s/device/infiniband_verbs/uverbs%u/dev", base, n);
    r |= put(root, rel, "%d:%u\n", EMU_UVERBS_MAJOR, EMU_UVERBS_BASE_MINOR + n);
    snprintf(rel, sizeof rel, "%s/device/infiniband_verbs/uverbs%u/abi_version", base, n);
    r |= put(root, rel, "1\n");
    char ndev[32];
    snprintf(ndev, sizeof ndev, "emu%u", n);
    snprintf(rel, sizeof rel, "%s/device/net/%s/ifname", base, ndev);
    r |= put(root, rel, "%s\n", ndev);
    r |= write_port_state(root, c);
    P("ports/1/link_layer", c->ethernet ? "Ethernet\n" : "InfiniBand\n");
    P("ports/1/rate", "100 Gb/sec (2X HDR)\n");
    P("ports/1/lid", "0x%x\n", c->ethernet ? 0u : 1u + c->index);
    P("ports/1/sm_lid", "0x%x\n", c->ethernet ? 0u : 1u);
    P("ports/1/lid_mask_count", "0\n");
    P("ports/1/sm_sl", "0\n");
    P("ports/1/cap_mask", "0x00010000\n");
    P("ports/1/pkeys/0", "0xffff\n");
    P("ports/1/hw_counters/rx_write_requests", "0\n");
    P("ports/1/hw_counters/rx_read_requests", "0\n");
    P("ports/1/hw_counters/out_of_buffer", "0\n");
    P("ports/1/hw_counters/out_of_sequence", "0\n");
    P("ports/1/counters/port_xmit_data", "0\n");
    P("ports/1/counters/port_rcv_data", "0\n");
    for (unsigned i = 0; i < EMU_GID_TBL_LEN; i++) {
        char sub[64], txt[64];
        const struct emu_gid *e = &c->gids[i];
        uint8_t zero[16] = { 0 };
        gid_text(i < c->ngids && e->valid ? e->raw : zero, txt);
        snprintf(sub, sizeof sub, "ports/1/gids/%u", i);
        P(sub, "%s\n", txt);
        /* unused entries: kernel read() fails with EINVAL; here the file is simply absent */
        if (i < c->ngids && e->valid) {
            snprintf(sub, sizeof sub, "ports/1/gid_attrs/types/%u", i);
            P(sub, e->type == 2 ? "RoCE v2\n" : "IB/RoCE v1\n");
            if (c->ethernet) {       /* an IB port's GIDs have no netdev */
                snprintf(sub, sizeof sub, "ports/1/gid_attrs/ndevs/%u", i);
                P(sub, "%s\n", ndev);
            }
        }
    }
#undef P
    return r;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

void emu_sysfs_remove(void)
{
    if (emu_g.sysfs_root[0] && emu_g.sysfs_owner == getpid())
        nftw(emu_g.sysfs_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    emu_g.sysfs_owner = 0;
}

static bool marker_matches(const char *root)
{
    char path[1024], buf[sizeof emu_g.cfg_string + 8];
    snprintf(path, sizeof path, "%s/.mlxd-emu", root);
    int fd = emu_real.open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = emu_real.read(fd, buf, sizeof buf - 1);
    emu_real.close(fd);
    if (n < 0) return false;
    buf[n] = 0;
    if (n && buf[n - 1] == '\n') buf[n - 1] = 0;
    return !strcmp(buf, emu_g.cfg_string);
}

const char *const emu_hw_counter_names[EMU_HW_COUNTERS] = {
    "rx_write_requests", "out_of_buffer", "out_of_sequence" };

uint64_t emu_hw_counter_value(struct emu_device *dev, unsigned which)
{
    _Atomic uint64_t *v = which == 0 ? &dev->rx_write_requests
                        : which == 1 ? &dev->out_of_buffer : &dev->out_of_sequence;
    return atomic_load_explicit(v, memory_order_relaxed);
}

static void counter_path(const char *root, const struct emu_device_cfg *c, unsigned which,
                         char *out, size_t len)
{
    snprintf(out, len, "%s/class/infiniband/%s/ports/1/hw_counters/%s", root, c->name,
             emu_hw_counter_names[which]);
}

/* Remembers which files are each device's hw_counters, by (st_dev, st_ino): open() of one, by
 * any path, is then served live (boundary.c). */
static void note_counter_files(void)
{
    for (unsigned i = 0; i < emu_g.ndev; i++)
        for (unsigned k = 0; k < EMU_HW_COUNTERS; k++) {
            char path[1024];
            struct stat st;
            counter_path(emu_g.sysfs_root, &emu_g.devs[i].dev.cfg, k, path, sizeof path);
            bool ok = emu_real.stat && emu_real.stat(path, &st) == 0;
            emu_g.devs[i].cnt_dev[k] = ok ? st.st_dev : 0;
            emu_g.devs[i].cnt_ino[k] = ok ? st.st_ino : 0;
        }
}

/* The hw_counters files as the kernel prints them (core/sysfs.c hw_stat_device_show:
 * "%llu\n"), rewritten in place: the same inode, so a reader holding one open (lseek + read, as
 * the sensor bridge's receiver does) sees the new value. */
void emu_sysfs_publish_counters(struct emu_device *dev)
{
    if (!emu_g.sysfs_root[0]) return;
    for (unsigned k = 0; k < EMU_HW_COUNTERS; k++) {
        char path[1024], text[32];
        counter_path(emu_g.sysfs_root, &dev->cfg, k, path, sizeof path);
        int n = snprintf(text, sizeof text, "%llu\n",
                         (unsigned long long)emu_hw_counter_value(dev, k));
        int fd = emu_real.open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == EACCES && chmod(path, 0644) == 0)  /* made 0444, as sysfs; not root */
            fd = emu_real.open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) continue;
        /* the system call itself: the fd is the emulator's own (emu_real.open), unseen by a
         * TSan build's interceptors, which would otherwise take the reuse of its number by
         * another thread's open for a race */
        if (syscall(SYS_pwrite64, fd, text, (size_t)n, (off_t)0) == n) (void)!ftruncate(fd, n);
        emu_real.close(fd);
    }
}

/* ---- stale trees --------------------------------------------------------------------------
 * Each tree carries .mlxd-owner: "<pid> <start time>\n", the creating process's pid and its
 * start time in clock ticks since boot (field 22 of /proc/<pid>/stat, proc(5)), written right
 * after mkdtemp.  A process killed by a signal (or ending in _exit) never runs emu_fini, so its
 * tree stays behind; the next tree builder removes such trees: those in the same directory
 * named mlxd-emu.*, real directories (lstat, never a symlink) owned by our uid, whose
 * .mlxd-owner names a process that no longer exists (or a pid reused by a process with another
 * start time), or this very pid on a tree other than the current one (made before an execve of
 * this process, such as mlxd-capture's re-execution with other addresses).  Trees without
 * .mlxd-owner are never touched. */
/* start time of pid (0: unknown); *zombie: it has exited but is not yet reaped */
static unsigned long long proc_start_time(pid_t pid, bool *zombie)
{
    if (zombie) *zombie = false;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = emu_real.open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = emu_real.read(fd, buf, sizeof buf - 1);
    emu_real.close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');               /* comm may hold spaces and ')' */
    if (!p) return 0;
    p++;
    if (zombie && (p[0] == ' ') && (p[1] == 'Z' || p[1] == 'X')) *zombie = true;
    for (int field = 3; field < 22 && p; field++) p = strchr(p + 1, ' ');   /* to field 22 */
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static bool owner_alive(pid_t pid, unsigned long long start)
{
    if (kill(pid, 0) < 0 && errno == ESRCH) return false;
    bool zombie;
    unsigned long long now = proc_start_time(pid, &zombie);
    if (zombie) return false;
    return !(now && start && now != start);    /* unknown start time: assume alive */
}

static void sweep_stale(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (!d) return;
    uid_t uid = getuid();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "mlxd-emu.", 9)) continue;
        char root[1024], path[1100], buf[64];
        struct stat st;
        snprintf(root, sizeof root, "%s/%s", tmp, e->d_name);
        if (!emu_real.lstat || emu_real.lstat(root, &st) < 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != uid)
            continue;
        snprintf(path, sizeof path, "%s/.mlxd-owner", root);
        int fd = emu_real.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        ssize_t n = emu_real.read(fd, buf, sizeof buf - 1);
        emu_real.close(fd);
        if (n <= 0) continue;
        buf[n] = 0;
        long pid;
        unsigned long long start;
        if (sscanf(buf, "%ld %llu", &pid, &start) != 2 || pid <= 0)
            continue;
        /* Our own pid on a tree other than the one just made: an image of this process before
         * an execve (which keeps the pid and start time) made it, and that image is gone: one
         * image has one tree at a time (emu_sysfs_build removes the previous one first). */
        bool mine = pid == (long)getpid();
        if (mine && !strcmp(root, emu_g.sysfs_root))
            continue;
        if (mine || !owner_alive((pid_t)pid, start))
            nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

int emu_sysfs_build(void)
{
    emu_sysfs_remove();
    const char *cur = getenv("SYSFS_PATH");
    if (cur && *cur && strlen(cur) < sizeof emu_g.sysfs_root && marker_matches(cur)) {
        snprintf(emu_g.sysfs_root, sizeof emu_g.sysfs_root, "%s", cur);
        emu_g.sysfs_owner = 0;                   /* borrowed: its maker removes it */
        note_counter_files();
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char root[512];
    snprintf(root, sizeof root, "%s/mlxd-emu.XXXXXX", tmp);
    if (!mkdtemp(root)) {
        emu_g.sysfs_root[0] = 0;
        return -errno;
    }
    chmod(root, 0755);
    snprintf(emu_g.sysfs_root, sizeof emu_g.sysfs_root, "%s", root);
    emu_g.sysfs_owner = getpid();
    int r = put(root, ".mlxd-owner", "%ld %llu\n", (long)getpid(), proc_start_time(getpid(), NULL));
    sweep_stale(tmp);
    r |= put(root, "class/infiniband_verbs/abi_version", "6\n");   /* IB_USER_VERBS_ABI_VERSION */
    for (unsigned i = 0; i < emu_g.ndev; i++) r |= build_device(root, &emu_g.devs[i].dev.cfg);
    r |= put(root, ".mlxd-emu", "%s\n", emu_g.cfg_string);
    note_counter_files();
    /* libibverbs honours SYSFS_PATH only when getuid() == geteuid() (rc: libibverbs/sysfs.c). */
    setenv("SYSFS_PATH", root, 1);
    return r ? -EIO : 0;
}

int emu_sysfs_update_port(unsigned devidx)
{
    if (!emu_g.sysfs_root[0] || devidx >= emu_g.ndev) return 0;
    return write_port_state(emu_g.sysfs_root, &emu_g.devs[devidx].dev.cfg);
}
