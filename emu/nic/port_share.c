/* port_share.c: one emulated port shared by several processes of one user, as a ConnectX port
 * is shared by every process on a host (one device, one GID table, one QPN space).
 *
 * Each process carries its own emulated NIC.  What they share:
 *
 *   The QPN space.  A file per port, <rundir>/<ipv4>-<udp port>.qpn, holds one 8-byte entry per
 *   QPN slot (qpn & 0xffff, EMU_QPN_SLOTS of them).  A process claims a slot with an open file
 *   description lock (fcntl F_OFD_SETLK, write lock on the entry's 8 bytes): the kernel grants
 *   it to one process only and drops it when that process's file is closed, which includes
 *   death by any signal, so the slots of a dead process are free again without any sweep.
 *   While it holds the lock the process keeps its pid and its inbox port in the entry (mapped
 *   MAP_SHARED); an entry whose lock is free is stale and is overwritten by the next claimant.
 *
 *   The UDP port.  Every process's device socket joins one SO_REUSEPORT group on the port's
 *   address and UDP port (the kernel admits only sockets of the same effective uid), so any
 *   living member receives; the kernel picks the member by a hash of the packet's addresses.
 *   A packet whose BTH destination QPN is in a slot another process holds is handed to that
 *   process: sent, with the original source address in front (struct fwd_hdr), to its inbox, a
 *   UDP socket of its own on the port's address.  One load of the table per packet decides; a
 *   packet is forwarded at most once (the inbox's packets are never forwarded again).
 *
 * Why not a classic BPF program on the group (SO_ATTACH_REUSEPORT_CBPF) choosing the socket by
 * QPN: it can only return an index into the group's socket array, and the kernel reorders that
 * array when a member leaves (the last socket takes the leaver's place), so a QPN -> index map
 * would have to be rebuilt and re-attached by every surviving process whenever one dies; an
 * eBPF socket array needs CAP_BPF.  Forwarding costs one more loopback hop for the packets the
 * hash sends to the wrong member, and nothing when a port has one process.
 *
 * rundir: $MLXD_EMU_RUNDIR, else /tmp, then mlxd-emu-<uid>/ (made 0700; refused unless it is a
 * real directory of ours that nobody else can write).  When sharing cannot be set up the port
 * works as before, unshared: a second process on it gets EADDRINUSE.
 *
 * File and memory calls go straight to the kernel (syscall()): the NIC half runs inside the
 * kernel half's system-call hooks, whose libc wrappers (open, close, mmap, munmap) this library
 * interposes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "nic.h"

#define TAB_BYTES ((size_t)EMU_QPN_SLOTS * sizeof(uint64_t))

static int sys_open(const char *path, int flags, mode_t mode)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static void sys_close(int fd)
{
    if (fd >= 0) syscall(SYS_close, fd);
}

/* <rundir>/mlxd-emu-<uid>, made if missing; 0 or a negative errno. */
static int run_dir(char *out, size_t len)
{
    const char *base = getenv("MLXD_EMU_RUNDIR");
    if (!base || !*base) base = "/tmp";
    int n = snprintf(out, len, "%s/mlxd-emu-%u", base, (unsigned)getuid());
    if (n < 0 || (size_t)n >= len) return -ENAMETOOLONG;
    if (syscall(SYS_mkdirat, AT_FDCWD, out, 0700) < 0 && errno != EEXIST) return -errno;
    int fd = sys_open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct stat st;
    int r = syscall(SYS_fstat, fd, &st) < 0 ? -errno : 0;
    sys_close(fd);
    if (!r && (st.st_uid != getuid() || (st.st_mode & 077))) r = -EPERM;
    return r;
}

static int inbox_open(struct nic_share *sh, struct in_addr ip)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    int sz = 8 << 20;
    if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz))
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = ip, .sin_port = 0};
    socklen_t al = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(s, (struct sockaddr *)&a, &al) < 0) {
        int e = errno;
        sys_close(s);
        return -e;
    }
    sh->inbox = s;
    sh->inbox_port = ntohs(a.sin_port);
    return 0;
}

/* Every process using the table holds a read lock on the byte after the slots (MEMBER_BYTE)
 * while it does; the last one to leave (its write lock then succeeds) removes the file, so
 * tables of addresses no longer in use do not pile up.  A joiner that opened the file just before
 * it was removed finds the path naming another file (or none) and opens it again. */
#define MEMBER_BYTE ((off_t)TAB_BYTES)

static int member_lock(int fd, short type, int cmd)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = MEMBER_BYTE;
    fl.l_len = 1;
    return fcntl(fd, cmd, &fl);
}

static int table_join(struct nic_share *sh)
{
    for (int tries = 0; tries < 100; tries++) {
        sh->tabfd = sys_open(sh->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (sh->tabfd < 0) return -errno;
        if (member_lock(sh->tabfd, F_RDLCK, F_OFD_SETLKW) < 0) return -errno;
        struct stat a, b;
        if (syscall(SYS_fstat, sh->tabfd, &a) < 0) return -errno;
        if (syscall(SYS_newfstatat, AT_FDCWD, sh->path, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
            a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return 0;
        sys_close(sh->tabfd);        /* removed by the last leaver meanwhile: again */
        sh->tabfd = -1;
    }
    return -EAGAIN;
}

int share_open(struct nic_dev *nd, const struct sockaddr_in *self)
{
    nd->share = NULL;
    const char *off = getenv("MLXD_EMU_SHARE");
    if (off && (!strcmp(off, "0") || !strcmp(off, "off"))) return 0;
    struct nic_share *sh = calloc(1, sizeof *sh);
    if (!sh) return -ENOMEM;
    sh->tabfd = -1;
    sh->inbox = -1;
    sh->tab = MAP_FAILED;
    sh->pid = (uint32_t)getpid();
    char dir[512], ip[INET_ADDRSTRLEN];
    int r = run_dir(dir, sizeof dir);
    if (r) goto fail;
    inet_ntop(AF_INET, &self->sin_addr, ip, sizeof ip);
    snprintf(sh->path, sizeof sh->path, "%s/%s-%u.qpn", dir, ip, (unsigned)ntohs(self->sin_port));
    r = table_join(sh);
    if (r) goto fail;
    struct stat st;
    if (syscall(SYS_fstat, sh->tabfd, &st) < 0) { r = -errno; goto fail; }
    if (!S_ISREG(st.st_mode) || st.st_uid != getuid()) { r = -EPERM; goto fail; }
    /* only ever grown, never shrunk: a process mapping it meanwhile keeps valid pages */
    if ((size_t)st.st_size < TAB_BYTES && ftruncate(sh->tabfd, (off_t)TAB_BYTES) < 0) {
        r = -errno;
        goto fail;
    }
    sh->tab = (void *)syscall(SYS_mmap, NULL, TAB_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
                              sh->tabfd, 0);
    if (sh->tab == MAP_FAILED || (uintptr_t)sh->tab > (uintptr_t)-4096) {
        sh->tab = MAP_FAILED;
        r = -ENOMEM;
        goto fail;
    }
    r = inbox_open(sh, self->sin_addr);
    if (r) goto fail;
    nd->share = sh;
    return 0;
fail:
    share_close_struct(sh);
    return r;
}

void share_close_struct(struct nic_share *sh)
{
    if (!sh) return;
    if (sh->tab != MAP_FAILED) syscall(SYS_munmap, sh->tab, TAB_BYTES);
    /* the last member removes the file (before its locks go: no one can join it meanwhile
     * without finding the path gone) */
    if (sh->tabfd >= 0 && member_lock(sh->tabfd, F_WRLCK, F_OFD_SETLK) == 0)
        syscall(SYS_unlinkat, AT_FDCWD, sh->path, 0);
    sys_close(sh->tabfd);            /* drops every slot lock this process holds */
    sys_close(sh->inbox);
    free(sh);
}

void share_close(struct nic_dev *nd)
{
    share_close_struct(nd->share);
    nd->share = NULL;
}

static struct flock slot_lock(uint32_t slot, short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);           /* l_pid must be 0 for OFD locks */
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)slot * (off_t)sizeof(uint64_t);
    fl.l_len = sizeof(uint64_t);
    return fl;
}

int emu_nic_qpn_claim(struct emu_device *dev, uint32_t slot)
{
    struct nic_dev *nd = dev->nic;
    if (slot >= EMU_QPN_SLOTS) return -EINVAL;
    if (!nd || !nd->share) return 0;
    struct nic_share *sh = nd->share;
    struct flock fl = slot_lock(slot, F_WRLCK);
    if (fcntl(sh->tabfd, F_OFD_SETLK, &fl) < 0)
        return errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
    atomic_store_explicit(&sh->tab[slot], (uint64_t)sh->pid | (uint64_t)sh->inbox_port << 32,
                          memory_order_release);
    return 0;
}

void emu_nic_qpn_release(struct emu_device *dev, uint32_t slot)
{
    struct nic_dev *nd = dev->nic;
    if (!nd || !nd->share || slot >= EMU_QPN_SLOTS) return;
    struct nic_share *sh = nd->share;
    atomic_store_explicit(&sh->tab[slot], 0, memory_order_release);
    struct flock fl = slot_lock(slot, F_UNLCK);
    (void)fcntl(sh->tabfd, F_OFD_SETLK, &fl);
}

/* The pid of the process holding the QPN slot of qpn on the port at `port` (its entry's lock is
 * held), or 0: none, or the port is not a shared emulated one.  For nic_peer.c. */
uint32_t share_qpn_holder(const struct sockaddr_in *port, uint32_t qpn)
{
    char dir[512], ip[INET_ADDRSTRLEN], path[600];
    if (run_dir(dir, sizeof dir)) return 0;
    inet_ntop(AF_INET, &port->sin_addr, ip, sizeof ip);
    snprintf(path, sizeof path, "%s/%s-%u.qpn", dir, ip, (unsigned)ntohs(port->sin_port));
    int fd = sys_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    uint32_t slot = qpn % EMU_QPN_SLOTS, pid = 0;
    struct flock fl = slot_lock(slot, F_WRLCK);
    uint64_t e = 0;
    /* a lock of another open file description conflicts: held means the entry is live */
    if (fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK &&
        syscall(SYS_pread64, fd, &e, sizeof e, (off_t)slot * (off_t)sizeof e) == (long)sizeof e)
        pid = (uint32_t)e;
    sys_close(fd);
    return pid;
}

/* In front of a forwarded packet: where it really came from (network order). */
struct fwd_hdr {
    uint32_t src_ip;
    uint16_t src_port;
    uint16_t magic;
};
#define FWD_MAGIC 0x4d46u        /* "MF" */

bool share_forward(struct nic_dev *nd, const uint8_t *bth, uint32_t len,
                   const struct sockaddr_in *from)
{
    struct nic_share *sh = nd->share;
    if (!sh || len < MLXD_ROCE_BTH_LEN) return false;
    uint32_t slot = (uint32_t)bth[6] << 8 | bth[7];      /* BTH destination QP, low 16 bits */
    uint64_t e = atomic_load_explicit(&sh->tab[slot], memory_order_acquire);
    if (!e || (uint32_t)e == sh->pid) return false;
    /* The entry of a process that died is stale (its lock went with it): its inbox port may
     * since belong to any socket.  Such a packet is for a QP nobody has; the entry is cleared
     * unless a new holder has written its own meanwhile. */
    struct flock fl = slot_lock(slot, F_WRLCK);
    if (fcntl(sh->tabfd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK) {
        atomic_compare_exchange_strong(&sh->tab[slot], &e, 0);
        nd->st.rx_unknown_qp++;
        return true;
    }
    struct fwd_hdr h = {.src_ip = from->sin_addr.s_addr, .src_port = from->sin_port,
                        .magic = FWD_MAGIC};
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr = nd->self.sin_addr,
                             .sin_port = htons((uint16_t)(e >> 32))};
    struct iovec iov[2] = {{&h, sizeof h}, {(void *)bth, len}};
    struct msghdr m = {.msg_name = &to, .msg_namelen = sizeof to, .msg_iov = iov, .msg_iovlen = 2};
    if (sendmsg(nd->sock, &m, MSG_DONTWAIT) == (ssize_t)(sizeof h + len)) nd->st.rx_forwarded++;
    else nd->st.rx_unknown_qp++;     /* the owner is gone (or its inbox is full): lost */
    return true;
}

int share_unwrap(const struct nic_dev *nd, uint8_t *buf, uint32_t len, struct sockaddr_in *from)
{
    struct fwd_hdr h;
    /* only a member of the port's group forwards: it sends from the port's own address and
     * UDP port (bound by processes of this user alone), so no other local process can pose
     * as a peer past the QPs' source check */
    if (len < sizeof h || from->sin_addr.s_addr != nd->self.sin_addr.s_addr ||
        from->sin_port != nd->self.sin_port)
        return -1;
    memcpy(&h, buf, sizeof h);
    if (h.magic != FWD_MAGIC) return -1;
    from->sin_addr.s_addr = h.src_ip;
    from->sin_port = h.src_port;
    return (int)sizeof h;
}
