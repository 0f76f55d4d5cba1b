/* nic_peer.c: a retransmission timeout against a peer whose NIC did not run.
 *
 * A ConnectX answers a request in NIC time: its responder runs whatever its host does, so an RC
 * requester's timeout (4.096 us x 2^timeout, retry_cnt of them, IB spec vol. 1 9.7.6.1) expires
 * only when packets or the peer are really lost.  The emulated responder is a thread of the
 * peer's process (its engine, named "mlxd-nic"): stopped (SIGSTOP, a debugger) or left waiting
 * for a CPU (valgrind, sanitizers on a loaded host) it answers nothing, and the requester would
 * end with TRANSPORT_RETRY_EXC where hardware would not.
 *
 * So when the timer expires the requester asks whether the peer's NIC ran at all since the
 * previous expiry: it finds the process holding the destination QP (the peer port's QPN table,
 * port_share.c: the entry's pid, valid while the entry's lock is held) and adds up the CPU time
 * of that process's engine threads (/proc/<pid>/task/<tid>/schedstat, first field: nanoseconds
 * on a CPU); a peer device of this process (its QP's holder, or a device of the port's address
 * when no process holds the QP in a table: an unshared port) by its engine's passes
 * (nic_dev.passes).  Unchanged: the peer's NIC is frozen, not lost; the expiry is not counted against
 * retry_cnt and nothing is retransmitted (what was sent is still in the peer's socket); the
 * timer is armed again (nd->st.timeouts_peer_frozen).  A peer that is gone (no process holds
 * its QP: exited or killed), that cannot be looked up (not an emulated port, MLXD_EMU_SHARE=0)
 * or that ran and did not answer is a timeout as before, so a dead peer still ends the QP with
 * TRANSPORT_RETRY_EXC after timeout x (retry_cnt + 1).  The first expiry of a stall has no
 * earlier sample to compare with and is counted.  A peer stopped for good is retried for good,
 * as a ConnectX whose host is stopped would keep answering.
 *
 * Only at an expiry (rare): a few system calls, straight to the kernel (the NIC half runs inside
 * the kernel half's interposed libc calls, port_share.c). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "nic.h"

static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    ssize_t n = (ssize_t)syscall(SYS_read, fd, buf, len - 1);
    syscall(SYS_close, fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return n;
}

/* Nanoseconds the engine threads of process pid, other than the calling one, have been on a
 * CPU, in *ns; false: no engine thread found. */
static bool engine_cpu_ns(uint32_t pid, uint64_t *ns)
{
    char path[64], buf[128], self[24];
    snprintf(self, sizeof self, "%ld", (long)syscall(SYS_gettid));
    snprintf(path, sizeof path, "/proc/%u/task", pid);
    int dfd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dfd < 0) return false;
    uint64_t sum = 0;
    bool any = false;
    union { struct dirent64 d; char b[4096]; } u;
    long n;
    while ((n = syscall(SYS_getdents64, dfd, u.b, sizeof u.b)) > 0) {
        for (long off = 0; off < n;) {
            struct dirent64 *d = (struct dirent64 *)(u.b + off);
            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9' || !strcmp(d->d_name, self)) continue;
            snprintf(path, sizeof path, "/proc/%u/task/%.16s/comm", pid, d->d_name);
            if (read_small(path, buf, sizeof buf) < 0 || strncmp(buf, NIC_THREAD_NAME, strlen(NIC_THREAD_NAME)))
                continue;
            snprintf(path, sizeof path, "/proc/%u/task/%.16s/schedstat", pid, d->d_name);
            if (read_small(path, buf, sizeof buf) > 0) { sum += strtoull(buf, NULL, 10); any = true; }
        }
    }
    syscall(SYS_close, dfd);
    *ns = sum;
    return any;
}

bool nic_peer_frozen(struct nic_qp *q)
{
    uint32_t pid = share_qpn_holder(&q->peer, q->qp->attr.dest_qp_num), me = (uint32_t)getpid();
    uint64_t ran = 0;
    bool known = pid && pid != me ? engine_cpu_ns(pid, &ran)
                                  : nic_local_passes(&q->peer, &ran);   /* a device of this process */
    if (!known) pid = 0;
    else if (!pid) pid = me;
    bool frozen = pid && pid == q->peer_pid && ran == q->peer_ran;
    q->peer_pid = pid;
    q->peer_ran = ran;
    return frozen;
}
