/* boundary.c: the system-call boundary.  Interposes the libc entry points a verbs program uses on
 * /dev/infiniband/uverbsN and on the event fds the emulated kernel hands out; everything else
 * goes to the real libc function (dlsym(RTLD_NEXT)).  The emulator's own I/O goes through
 * emu_real.* only, so it never re-enters these wrappers.
 *
 * Works both as LD_PRELOAD and linked directly into a program (the test runner does that): the
 * dynamic linker searches this object before libc either way. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <linux/netlink.h>
#include <time.h>
#include <unistd.h>
#include "kernel.h"

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif

struct emu_global emu_g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .ev_lock = PTHREAD_MUTEX_INITIALIZER,
    .clock_memfd = -1,
    .clock_info_memfd = -1,
};
struct emu_fdent emu_fdtab[EMU_MAX_FD];
struct emu_real emu_real;

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Set on a thread while it resolves libc or installs the configuration.  Something called from
 * there can come back into an interposer: dlsym() may allocate, and a preloaded ASan runtime that
 * is not yet initialised initialises itself on its first intercepted call (inet_pton in the
 * configuration), which mmap()s.  Waiting on our own pthread_once would then deadlock; such
 * calls pass straight through instead (raw system calls while libc is not resolved yet). */
static __thread bool in_setup __attribute__((tls_model("initial-exec")));

static void resolve_real(void)
{
    bool was = in_setup;
    in_setup = true;
#define R(name) emu_real.name = (__typeof__(emu_real.name))dlsym(RTLD_NEXT, #name)
    R(open); R(openat); R(close); R(read); R(write); R(ioctl); R(mmap); R(munmap);
    R(socket); R(stat); R(lstat); R(fstat); R(fstatat); R(statx); R(dup2); R(dup3); R(pread);
#undef R
    in_setup = was;
}

static inline void need_real(void) { if (!in_setup) pthread_once(&real_once, resolve_real); }

static bool ctor_ran, init_early;

/* Reads the environment and installs the configuration.  Normally runs once, from the
 * constructor or the first interposed call.  Under a sanitizer runtime (or another preloaded
 * library) an interposed call can come before libc has set up the environment: then getenv()
 * sees nothing and setenv() is lost, so the constructor runs this again. */
static void apply_env(void)
{
    const char *on = getenv("MLXD_EMU");
    emu_g.active = !(on && (!strcmp(on, "0") || !strcmp(on, "off")));
    emu_g.inited = true;
    if (!emu_g.active) return;
    struct emu_device_cfg cfg[EMU_MAX_DEVICES];
    unsigned n = 0;
    char err[256] = "";
    const char *spec = getenv("MLXD_EMU_DEVICES");
    const char *file = getenv("MLXD_EMU_CONFIG");
    char fbuf[8192];
    if ((!spec || !*spec) && file && *file) {
        int fd = emu_real.open(file, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t r = emu_real.read(fd, fbuf, sizeof fbuf - 1);
            emu_real.close(fd);
            fbuf[r > 0 ? r : 0] = 0;
            spec = fbuf;
        } else {
            fprintf(stderr, "mlx5direct-emu: cannot read MLXD_EMU_CONFIG=%s: %s; using defaults\n",
                    file, strerror(errno));
        }
    }
    if (spec && *spec) {
        if (emu_config_parse(spec, cfg, &n, err, sizeof err) < 0) {
            fprintf(stderr, "mlx5direct-emu: bad device configuration (%s); using defaults\n", err);
            emu_config_defaults(cfg, &n);
        }
    } else {
        emu_config_defaults(cfg, &n);
    }
    pthread_mutex_lock(&emu_g.lock);
    int rc = emu_config_apply(cfg, n);
    pthread_mutex_unlock(&emu_g.lock);
    if (rc < 0) {
        /* nobody else can tell the user: without its sysfs tree no device is found, and the
         * program would only say that there is none */
        const char *tmp = getenv("TMPDIR");
        fprintf(stderr, "mlx5direct-emu: cannot create the emulated sysfs tree in TMPDIR=%s: %s; "
                "no emulated device is visible\n", tmp && *tmp ? tmp : "/tmp", strerror(-rc));
    }
    emu_fault_clear();
    emu_fault_from_env();
}

static void do_init(void)
{
    need_real();
    in_setup = true;
    init_early = !ctor_ran;
    apply_env();
    in_setup = false;
}

/* Too early to read the configuration: libc has not initialised itself yet (environ unset).
 * This happens under a sanitizer runtime: an instrumented executable's .preinit_array runs
 * __asan_init before any library's initialiser, and ASan's symbolizer set-up calls mmap()
 * (libbacktrace's allocator), which is ours.  getenv() then sees nothing and setenv() is
 * lost when libc installs the real environment.  Until the constructor has run, such calls
 * only resolve the real functions and pass through (emulation is off until then). */
extern char **environ;
static inline bool too_early(void)
{
    return !__atomic_load_n(&ctor_ran, __ATOMIC_ACQUIRE) && !environ;
}

void emu_init(void)
{
    if (__builtin_expect(too_early(), 0)) { need_real(); return; }
    if (__builtin_expect(in_setup, 0)) return;
    pthread_once(&init_once, do_init);
}

static void emu_fini(void)
{
    if (!emu_g.inited) return;
    pthread_mutex_lock(&emu_g.lock);
    for (int fd = 0; fd < EMU_MAX_FD; fd++) {
        if (emu_fdtab[fd].kind == FD_UVERBS) {
            struct emu_file *f = emu_fdtab[fd].p;
            emu_fdtab[fd].kind = FD_NONE;
            emu_fdtab[fd].p = NULL;
            emu_file_destroy(f);
        }
    }
    __atomic_store_n(&emu_g.clock_stop, true, __ATOMIC_RELEASE);   /* read by the clock thread */
    pthread_mutex_unlock(&emu_g.lock);
    if (emu_g.clock_thread_started) {
        pthread_join(emu_g.clock_thread, NULL);
        emu_g.clock_thread_started = false;
    }
    emu_sysfs_remove();
}

__attribute__((constructor)) static void emu_ctor(void)
{
    __atomic_store_n(&ctor_ran, true, __ATOMIC_RELEASE);
    emu_init();
    if (init_early && !emu_g.nfiles) apply_env();
    atexit(emu_fini);
}

/* ---------------------------------------------------------------------------------------------
 * fd table helpers */
static inline struct emu_fdent *fdent(int fd)
{
    if (fd < 0 || fd >= EMU_MAX_FD) return NULL;
    struct emu_fdent *e = &emu_fdtab[fd];
    return __atomic_load_n(&e->kind, __ATOMIC_ACQUIRE) ? e : NULL;
}

/* "/dev/infiniband/uverbsN" -> N, or -1. */
static int uverbs_index(const char *path)
{
    static const char pfx[] = "/dev/infiniband/uverbs";
    if (!path || strncmp(path, pfx, sizeof pfx - 1)) return -1;
    const char *p = path + sizeof pfx - 1;
    if (*p < '0' || *p > '9') return -1;
    char *end;
    long n = strtol(p, &end, 10);
    if (*end || n < 0 || n > 1000) return -1;
    return (int)n;
}

static int open_uverbs(int idx, int flags)
{
    if ((unsigned)idx >= emu_g.ndev) { errno = ENOENT; return -1; }
    int fd = emu_real.open("/dev/null", O_RDWR | (flags & O_CLOEXEC));
    if (fd < 0) return -1;
    if (fd >= EMU_MAX_FD) { emu_real.close(fd); errno = EMFILE; return -1; }
    pthread_mutex_lock(&emu_g.lock);
    struct emu_file *f = emu_file_new(&emu_g.devs[idx], fd);
    if (!f) {
        pthread_mutex_unlock(&emu_g.lock);
        emu_real.close(fd);
        errno = ENOMEM;
        return -1;
    }
    emu_fdtab[fd].p = f;
    __atomic_store_n(&emu_fdtab[fd].kind, FD_UVERBS, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&emu_g.lock);
    return fd;
}

static void fill_cdev_stat(int idx, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_dev = makedev(0, 5);                  /* devtmpfs */
    st->st_ino = 1000 + idx;
    st->st_mode = S_IFCHR | 0666;
    st->st_nlink = 1;
    st->st_rdev = makedev(EMU_UVERBS_MAJOR, EMU_UVERBS_BASE_MINOR + idx);
    st->st_blksize = 4096;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    st->st_atim = st->st_mtim = st->st_ctim = now;
}

static int idx_of_file(int fd)
{
    struct emu_fdent *e = fdent(fd);
    if (!e || e->kind != FD_UVERBS) return -1;
    struct emu_file *f = e->p;
    return (int)f->ctx.dev->cfg.index;
}

/* ---------------------------------------------------------------------------------------------
 * sysfs hw_counters: an fd of a device's hw_counters file (emu_hw_counter_names: recognised by st_dev/st_ino,
 * whatever path opened it) reads the live value.  Like sysfs (kernfs seq_file), a read at offset
 * 0 formats the value anew ("%llu\n"); reads further on continue that snapshot; lseek works on
 * the real file underneath.  Other processes read the file itself, which the engine rewrites. */
/* which counter a path names by its last component; -1: none */
static int counter_of_path(const char *path)
{
    size_t pl = strlen(path);
    for (unsigned k = 0; k < EMU_HW_COUNTERS; k++) {
        size_t nl = strlen(emu_hw_counter_names[k]);
        if (pl >= nl && !strcmp(path + pl - nl, emu_hw_counter_names[k]) &&
            (pl == nl || path[pl - nl - 1] == '/'))
            return (int)k;
    }
    return -1;
}

static int track_counter(int fd, const char *path)
{
    if (fd < 0 || fd >= EMU_MAX_FD || !emu_g.active || !path) return fd;
    int which = counter_of_path(path);
    if (which < 0) return fd;
    struct stat st;
    if (emu_real.fstat(fd, &st) < 0) return fd;
    pthread_mutex_lock(&emu_g.lock);
    for (unsigned i = 0; i < emu_g.ndev; i++) {
        struct emu_devstate *ds = &emu_g.devs[i];
        if (!ds->cnt_ino[which] || ds->cnt_ino[which] != st.st_ino || ds->cnt_dev[which] != st.st_dev)
            continue;
        struct emu_cntfd *c = calloc(1, sizeof *c);
        if (!c) break;                              /* then the file itself is read */
        c->devidx = i;
        c->which = (unsigned)which;
        c->gen = emu_g.cfg_gen;
        emu_fdtab[fd].p = c;
        __atomic_store_n(&emu_fdtab[fd].kind, FD_COUNTER, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&emu_g.lock);
    return fd;
}

/* off < 0: read() at the file position (advanced); else pread() at off.  -1 (not served): the
 * configuration changed since the open, read the file itself. */
static ssize_t counter_read(struct emu_cntfd *c, int fd, void *buf, size_t count, off_t off)
{
    pthread_mutex_lock(&emu_g.lock);
    if (c->gen != emu_g.cfg_gen || c->devidx >= emu_g.ndev) {
        pthread_mutex_unlock(&emu_g.lock);
        return -1;
    }
    off_t pos = off >= 0 ? off : lseek(fd, 0, SEEK_CUR);
    if (pos < 0) { int e = errno; pthread_mutex_unlock(&emu_g.lock); errno = e; return -2; }
    if (pos == 0) {
        uint64_t v = emu_hw_counter_value(&emu_g.devs[c->devidx].dev, c->which);
        c->len = (unsigned)snprintf(c->text, sizeof c->text, "%llu\n", (unsigned long long)v);
    }
    size_t n = (uint64_t)pos >= c->len ? 0 : c->len - (size_t)pos;
    if (n > count) n = count;
    /* a plain copy (not emu_copy_to_user's process_vm_writev, which memory checkers such as
     * valgrind do not see initialise the buffer); a bad buffer faults as a libc memcpy would */
    if (n) memcpy(buf, c->text + pos, n);
    if (off < 0) lseek(fd, pos + (off_t)n, SEEK_SET);
    pthread_mutex_unlock(&emu_g.lock);
    return (ssize_t)n;
}

/* ---------------------------------------------------------------------------------------------
 * open family */
#define OPEN_BODY(realcall)                                                      \
    emu_init();                                                                  \
    mode_t mode = 0;                                                             \
    if (flags & (O_CREAT | O_TMPFILE)) {                                         \
        va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap);  \
    }                                                                            \
    int idx = emu_g.active ? uverbs_index(path) : -1;                            \
    if (idx >= 0) return open_uverbs(idx, flags);                                \
    return track_counter(realcall, path);

EMU_API int open(const char *path, int flags, ...)
{ OPEN_BODY(emu_real.open(path, flags, mode)) }
EMU_API int open64(const char *path, int flags, ...)
{ OPEN_BODY(emu_real.open(path, flags | O_LARGEFILE, mode)) }
EMU_API int openat(int dirfd, const char *path, int flags, ...)
{ OPEN_BODY(emu_real.openat(dirfd, path, flags, mode)) }
EMU_API int openat64(int dirfd, const char *path, int flags, ...)
{ OPEN_BODY(emu_real.openat(dirfd, path, flags | O_LARGEFILE, mode)) }
/* _FORTIFY_SOURCE entry points (no mode argument). */
EMU_API int __open_2(const char *path, int flags)
{ emu_init(); int idx = emu_g.active ? uverbs_index(path) : -1;
  return idx >= 0 ? open_uverbs(idx, flags) : track_counter(emu_real.open(path, flags), path); }
EMU_API int __open64_2(const char *path, int flags)
{ return __open_2(path, flags | O_LARGEFILE); }
EMU_API int __openat_2(int dirfd, const char *path, int flags)
{ emu_init(); int idx = emu_g.active ? uverbs_index(path) : -1;
  return idx >= 0 ? open_uverbs(idx, flags) : track_counter(emu_real.openat(dirfd, path, flags), path); }
EMU_API int __openat64_2(int dirfd, const char *path, int flags)
{ return __openat_2(dirfd, path, flags | O_LARGEFILE); }

/* ---------------------------------------------------------------------------------------------
 * close / dup2 / dup3: forget an emulated fd before the number can be reused. */
static void forget_fd(int fd)
{
    struct emu_fdent *e = fdent(fd);
    if (!e) return;
    pthread_mutex_lock(&emu_g.lock);
    uint8_t kind = e->kind;
    void *p = e->p;
    __atomic_store_n(&e->kind, FD_NONE, __ATOMIC_RELEASE);
    e->p = NULL;
    if (kind == FD_UVERBS) emu_file_destroy(p);
    else if (kind == FD_EVQ) emu_evq_user_close(p);
    else if (kind == FD_COUNTER) free(p);
    pthread_mutex_unlock(&emu_g.lock);
}

EMU_API int close(int fd)
{
    emu_init();
    struct emu_fdent *e = fdent(fd);
    if (e && e->kind == FD_EVQ) {
        /* The eventfd itself is closed by the event-queue code (it may keep a private dup). */
        forget_fd(fd);
        return 0;
    }
    if (e) forget_fd(fd);
    return emu_real.close(fd);
}

EMU_API int dup2(int oldfd, int newfd)
{
    emu_init();
    if (oldfd != newfd && fdent(newfd) && fcntl(oldfd, F_GETFD) >= 0) close(newfd);
    return emu_real.dup2(oldfd, newfd);
}

EMU_API int dup3(int oldfd, int newfd, int flags)
{
    emu_init();
    if (oldfd != newfd && fdent(newfd) && fcntl(oldfd, F_GETFD) >= 0) close(newfd);
    return emu_real.dup3(oldfd, newfd, flags);
}

/* ---------------------------------------------------------------------------------------------
 * stat family: the char device has mode S_IFCHR|0666 and st_rdev 231:(192+N), as sysfs says. */
EMU_API int stat(const char *path, struct stat *st)
{
    emu_init();
    int idx = emu_g.active ? uverbs_index(path) : -1;
    if (idx >= 0) {
        if ((unsigned)idx >= emu_g.ndev) { errno = ENOENT; return -1; }
        fill_cdev_stat(idx, st);
        return 0;
    }
    return emu_real.stat(path, st);
}
EMU_API int stat64(const char *path, struct stat64 *st) { return stat(path, (struct stat *)st); }
EMU_API int lstat(const char *path, struct stat *st)
{
    emu_init();
    int idx = emu_g.active ? uverbs_index(path) : -1;
    if (idx >= 0) return stat(path, st);
    return emu_real.lstat(path, st);
}
EMU_API int lstat64(const char *path, struct stat64 *st) { return lstat(path, (struct stat *)st); }
EMU_API int fstat(int fd, struct stat *st)
{
    emu_init();
    int idx = idx_of_file(fd);
    if (idx >= 0) { fill_cdev_stat(idx, st); return 0; }
    return emu_real.fstat(fd, st);
}
EMU_API int fstat64(int fd, struct stat64 *st) { return fstat(fd, (struct stat *)st); }
EMU_API int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    emu_init();
    if ((flags & AT_EMPTY_PATH) && !*path) {
        int idx = idx_of_file(dirfd);
        if (idx >= 0) { fill_cdev_stat(idx, st); return 0; }
    }
    int idx = emu_g.active ? uverbs_index(path) : -1;
    if (idx >= 0) return stat(path, st);
    return emu_real.fstatat(dirfd, path, st, flags);
}
EMU_API int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{ return fstatat(dirfd, path, (struct stat *)st, flags); }

/* glibc < 2.33 binaries call these (x86_64: _STAT_VER 1, same struct layout). */
EMU_API int __xstat(int ver, const char *path, struct stat *st) { (void)ver; return stat(path, st); }
EMU_API int __xstat64(int ver, const char *path, struct stat64 *st) { (void)ver; return stat(path, (struct stat *)st); }
EMU_API int __lxstat(int ver, const char *path, struct stat *st) { (void)ver; return lstat(path, st); }
EMU_API int __lxstat64(int ver, const char *path, struct stat64 *st) { (void)ver; return lstat(path, (struct stat *)st); }
EMU_API int __fxstat(int ver, int fd, struct stat *st) { (void)ver; return fstat(fd, st); }
EMU_API int __fxstat64(int ver, int fd, struct stat64 *st) { (void)ver; return fstat(fd, (struct stat *)st); }
EMU_API int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{ (void)ver; return fstatat(dirfd, path, st, flags); }
EMU_API int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{ (void)ver; return fstatat(dirfd, path, (struct stat *)st, flags); }

static void fill_statx(int idx, struct statx *sx)
{
    struct stat st;
    fill_cdev_stat(idx, &st);
    memset(sx, 0, sizeof *sx);
    sx->stx_mask = STATX_BASIC_STATS;
    sx->stx_blksize = st.st_blksize;
    sx->stx_nlink = 1;
    sx->stx_mode = st.st_mode;
    sx->stx_ino = st.st_ino;
    sx->stx_rdev_major = major(st.st_rdev);
    sx->stx_rdev_minor = minor(st.st_rdev);
    sx->stx_dev_major = major(st.st_dev);
    sx->stx_dev_minor = minor(st.st_dev);
    sx->stx_atime.tv_sec = sx->stx_mtime.tv_sec = sx->stx_ctime.tv_sec = st.st_mtim.tv_sec;
}

EMU_API int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *sx)
{
    emu_init();
    int idx = -1;
    if ((flags & AT_EMPTY_PATH) && !*path) idx = idx_of_file(dirfd);
    if (idx < 0 && emu_g.active) {
        idx = uverbs_index(path);
        if (idx >= 0 && (unsigned)idx >= emu_g.ndev) { errno = ENOENT; return -1; }
    }
    if (idx >= 0) { fill_statx(idx, sx); return 0; }
    if (!emu_real.statx) { errno = ENOSYS; return -1; }
    return emu_real.statx(dirfd, path, flags, mask, sx);
}

/* ---------------------------------------------------------------------------------------------
 * ioctl / write / read */
EMU_API int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    emu_init();
    struct emu_fdent *e = fdent(fd);
    if (e && e->kind == FD_UVERBS) {
        pthread_mutex_lock(&emu_g.lock);
        int r = (e->kind == FD_UVERBS) ? emu_ioctl(e->p, req, arg) : -EBADF;
        pthread_mutex_unlock(&emu_g.lock);
        if (r < 0) { errno = -r; return -1; }
        return r;
    }
    if (e && e->kind == FD_EVQ) { errno = ENOTTY; return -1; }  /* event files have no ioctl */
    return emu_real.ioctl(fd, req, arg);
}

EMU_API ssize_t write(int fd, const void *buf, size_t count)
{
    struct emu_fdent *e = fdent(fd);
    if (e && e->kind == FD_UVERBS) {
        pthread_mutex_lock(&emu_g.lock);
        ssize_t r = (e->kind == FD_UVERBS) ? emu_write(e->p, buf, count) : -EBADF;
        pthread_mutex_unlock(&emu_g.lock);
        if (r < 0) { errno = (int)-r; return -1; }
        return r;
    }
    if (e && e->kind == FD_EVQ) { errno = EINVAL; return -1; }  /* event files: no write */
    if (!emu_real.write) need_real();
    return emu_real.write(fd, buf, count);
}

EMU_API ssize_t read(int fd, void *buf, size_t count)
{
    struct emu_fdent *e = fdent(fd);
    if (e && e->kind == FD_UVERBS) { errno = EINVAL; return -1; }  /* uverbs has no read */
    if (e && e->kind == FD_EVQ) {
        ssize_t r = emu_evq_read(e->p, buf, count);
        if (r < 0) { errno = (int)-r; return -1; }
        return r;
    }
    if (e && e->kind == FD_COUNTER) {
        ssize_t r = counter_read(e->p, fd, buf, count, -1);
        if (r >= 0) return r;
        if (r == -2) return -1;
    }
    if (!emu_real.read) need_real();
    return emu_real.read(fd, buf, count);
}

EMU_API ssize_t pread(int fd, void *buf, size_t count, off_t off)
{
    struct emu_fdent *e = fdent(fd);
    if (e && e->kind == FD_UVERBS) { errno = EINVAL; return -1; }
    if (e && e->kind == FD_EVQ) { errno = ESPIPE; return -1; }   /* anon inodes: no pread */
    if (e && e->kind == FD_COUNTER && off >= 0) {
        ssize_t r = counter_read(e->p, fd, buf, count, off);
        if (r >= 0) return r;
        if (r == -2) return -1;
    }
    if (!emu_real.pread) need_real();
    return emu_real.pread(fd, buf, count, off);
}
EMU_API ssize_t pread64(int fd, void *buf, size_t count, off_t off) { return pread(fd, buf, count, off); }

/* ---------------------------------------------------------------------------------------------
 * mmap / munmap */
EMU_API void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (flags & MAP_ANONYMOUS) {        /* never ours: no initialisation (allocators call this) */
        need_real();
        if (!emu_real.mmap) return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
        return emu_real.mmap(addr, len, prot, flags, fd, off);
    }
    emu_init();
    struct emu_fdent *e = (flags & MAP_ANONYMOUS) ? NULL : fdent(fd);
    if (e && e->kind == FD_UVERBS) {
        int err = 0;
        pthread_mutex_lock(&emu_g.lock);
        void *p = (e->kind == FD_UVERBS) ? emu_mmap(e->p, addr, len, prot, flags, off, &err)
                                         : (err = EBADF, MAP_FAILED);
        pthread_mutex_unlock(&emu_g.lock);
        if (p == MAP_FAILED) errno = err;
        return p;
    }
    if (e && e->kind == FD_EVQ) { errno = ENODEV; return MAP_FAILED; }
    return emu_real.mmap(addr, len, prot, flags, fd, off);
}
EMU_API void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{ return mmap(addr, len, prot, flags, fd, off); }

EMU_API int munmap(void *addr, size_t len)
{
    emu_init();
    if (!emu_real.munmap) return (int)syscall(SYS_munmap, addr, len);
    if (emu_g.nmaps) {
        pthread_mutex_lock(&emu_g.lock);
        emu_munmap_note(addr, len);
        pthread_mutex_unlock(&emu_g.lock);
    }
    return emu_real.munmap(addr, len);
}

/* ---------------------------------------------------------------------------------------------
 * socket: NETLINK_RDMA is refused as on a kernel without RDMA netlink, so libibverbs falls back
 * to the sysfs scan (rc: libibverbs/init.c: find_sysfs_devs_nl fails -> find_sysfs_devs). */
EMU_API int socket(int domain, int type, int protocol)
{
    emu_init();
    if (emu_g.active && domain == AF_NETLINK && protocol == NETLINK_RDMA) {
        errno = EPROTONOSUPPORT;
        return -1;
    }
    return emu_real.socket(domain, type, protocol);
}
