/* receiver.c: the HSB-style frame receiver on the direct driver (see mlxd_receiver.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "cuda_shim.h"

#include "frameq.h"
#include "md_snapshot.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_receiver.h"
#include "mlxd_uverbs.h"
#include "mlxd_abi.h"
#include "rx_replay.h"
#include "opts.h"
#include "rx_events.h"
#include "fork_gen.h"

#define DEFAULT_RECV_DEPTH 256u    /* the original posts 256 receives (roce_receiver.cpp start) */
#define DEFAULT_REPOST_BATCH 16u
#define POLL_BATCH 32
#define DRAIN_MS 500
#define EV_BOX 8                   /* events one look at the async fd hands to the monitor */
#define FN_RESTART 32768u          /* a frame-number jump this large is a restart, not a loss */
#define RTR_TRIES 5                /* connect_rtr: as Holoscan Sensor Bridge's receiver */
#define RTR_RETRY_MS 200

/* Accounting and event counters (struct mlxd_receiver.acct): written by the monitor, read by
 * stats; reset at start. */
enum {
    A_LOST, A_LOST_LINK_DOWN, A_MISSING_MD, A_SHORT, A_LONG, A_LAST_BYTES, A_EVENTS, A_PORT_DOWN,
    A_PORT_UP, A_LINK_DOWN_NS, A_QP_ERR, A_CQ_ERR, A_DEV_FATAL, A_DOWN_SINCE, A_AT_CLOSE, A_COUNT
};
/* the port's hw_counters that account for packets (ports/1/hw_counters/<name>) */
static const char *const hw_counter_names[2] = { "out_of_buffer", "out_of_sequence" };

/* Slot layout in the frame queue (FRAMEQ_WORDS 64-bit words). */
enum {
    W_PAGE_FLAGS = 0,   /* page | flags << 32 */
    W_IMM = 1,          /* imm | imm_psn << 32 */
    W_RX_S = 2,
    W_RX_NS = 3,
    W_RX_COUNT = 4,
    W_FRAME_NUMBER = 5,
    W_MD = 6,           /* 6 words: the first 48 bytes of the metadata block */
    W_NIC_NS = 12,      /* the NIC's arrival time (ns), 0 when unknown */
};

struct mlxd_receiver {
    unsigned fork_gen;             /* mlxd__fork_gen at new: a child of fork may not use it */
    pthread_mutex_t lock;          /* start / close / monitor entry and exit; never per frame */
    pthread_cond_t cond;           /* monitor_running changes */
    bool monitor_running, teardown_by_monitor;
    _Atomic bool started;          /* written under lock; read without it by the queries */
    pthread_t monitor_thread;
    _Atomic bool stop;
    int stop_fd;                   /* eventfd waking the event-mode monitor, or the busy mode's
                                      events thread; -1 when not started */

    /* configuration of the current run */
    struct mlxd_receiver_opts o;
    char device[64];
    uint32_t peer_ip;              /* network order */
    uint8_t *host;                 /* buffer as a host pointer (NULL for CUDA memory) */
    bool cuda_mem;
    void *cu_ctx;                  /* CUDA memory: the context made current on the monitor thread */
    char cuda_err[512];            /* monitor only: the first failed device-memory read stops it */

    /* device objects */
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_recorder *rec;     /* opts.record_cqes: the CQ's recorder (mlx5/record.c) */
    struct mlxd__rx_replay *replay;/* opts.replay_fixture: the feeder of the detached CQ */
    struct mlxd_region *mr;
    struct mlxd_qp *qp;
    bool nic_real_time;            /* the CQ stamps in real time (else the clock-info page) */
    bool nic_clock_info;           /* the clock-info page converts free-running stamps */
    uint32_t qpn, rkey;
    uint64_t iova;
    uint32_t local_ip;             /* host order */
    int gid_index;
    unsigned posted;               /* receives outstanding on the QP */
    unsigned pending;              /* receives to re-post */
    struct mlxd_recv *recvs;       /* repost_batch zero-scatter receives */
    char rxw_path[512];

    /* queue and per-page bookkeeping */
    struct frameq q;
    _Atomic bool q_ready;          /* written under lock; read without it by the consumers */
    _Atomic uint64_t *page_gen;    /* received_frame_number of the newest frame of each page */
    _Atomic uint32_t last_page;    /* page of the newest frame */
    struct mlxd_hsb_counter16 fn;  /* monitor only */
    uint8_t (*page_md)[48];        /* monitor only: each page's metadata as last delivered (at
                                      start: as the buffer held it), to tell a completion that
                                      wrote nothing (stale_frame) */

    /* statistics (written by the monitor, read anywhere); `consumed`, written by the consumers,
     * has a cache line of its own so that taking a frame does not pull the monitor's counters
     * away from it (and the monitor's `frames` stays off the consumers' line) */
    _Alignas(64) _Atomic uint64_t frames;
    _Atomic uint64_t overwritten, overwritten_after_read, bad_page, errors, flushed, hw_drops, last_fn;
    _Alignas(64) _Atomic uint64_t consumed;
    _Alignas(64) _Atomic uint64_t by_syndrome[256];

    /* frame-ready callback: kept across starts */
    _Atomic(mlxd_receiver_frame_ready_fn) cb;
    _Atomic(void *) cb_ctx;

    /* async events (rx_events.h) and frame accounting */
    struct rx_evq evq;
    _Atomic(mlxd_receiver_event_fn) ev_cb;   /* kept across starts */
    _Atomic(void *) ev_ctx;
    _Atomic uint64_t acct[A_COUNT];
    bool resume_pending;           /* monitor: the port came back, no frame since */
    uint64_t outage_ns;            /* monitor: length of the last outage */
    uint64_t lost_at_down;         /* monitor: acct[A_LOST] when the port went down */
    bool good_seen;                /* monitor: a frame with its own metadata was seen */
    uint64_t good_fn;              /* monitor: its extended frame number */
    uint64_t since_good;           /* monitor: frames accounted otherwise since then */
    uint64_t hw_base[2];           /* hw_counters at start */
    bool hw_base_ok[2];

    /* busy mode: the events thread (events_thread) blocks on the async fd and hands what it
     * reads to the monitor through this one-slot mailbox, so that the monitor looks at events
     * with one load per loop and no system call.  The events thread fills ev_box/ev_n/ev_err
     * and release-stores ev_full; the monitor acquire-loads it, handles the events, and clears
     * it under ev_lock (a wake per batch of events, never per frame).  A full mailbox blocks
     * the events thread: the kernel keeps later events queued on the fd, none is dropped. */
    pthread_t ev_thread;
    bool ev_thread_on;             /* under lock */
    _Atomic bool ev_stop;          /* teardown: the events thread returns */
    pthread_mutex_t ev_lock;       /* the events thread's wait for an empty mailbox */
    pthread_cond_t ev_cond;
    _Alignas(64) _Atomic bool ev_full;
    int ev_n;                      /* events in ev_box */
    int ev_err;                    /* mlxd_wait failed: its negative errno, ev_msg its message */
    struct mlxd_event ev_box[EV_BOX];
    char ev_msg[256];
};

struct mlxd_receiver *mlxd_receiver_new(void)
{
    /* whole pages of its own: a registered frame buffer's pages are MADV_DONTFORK, and a
     * receiver sharing its last page would be unmapped in a child of fork, whose calls must
     * still read fork_gen to be refused */
    long pg = sysconf(_SC_PAGESIZE);
    size_t size = (sizeof(struct mlxd_receiver) + (size_t)pg - 1) & ~((size_t)pg - 1);
    struct mlxd_receiver *r = NULL;
    if (posix_memalign((void **)&r, (size_t)pg, size))
        r = NULL;
    if (r)
        memset(r, 0, size);
    if (!r) {
        mlxd_err(ENOMEM, "mlxd_receiver_new: out of memory");
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    pthread_mutex_init(&r->ev_lock, NULL);
    pthread_cond_init(&r->ev_cond, NULL);
    r->stop_fd = -1;
    r->gid_index = -1;
    r->fork_gen = mlxd__fork_gen;
    rx_evq_init(&r->evq);
    return r;
}

/* A child of fork() holds a copy of the parent's receiver: its rings, doorbell records and
 * registered buffer are not mapped there (MADV_DONTFORK), its file descriptors and stop eventfd
 * are the parent's.  Every call is refused and changes nothing, so that neither the child's
 * close (an atexit handler, a C++ static destructor) nor anything else disturbs the parent. */
static inline bool forked(const struct mlxd_receiver *r)
{
    return r->fork_gen != mlxd__fork_gen;
}

static int forked_err(const char *fn)
{
    return mlxd_err(EINVAL, "%s: called in a child of fork(): the receiver belongs to the parent process "
                    "(its rings, doorbell records and frame buffer are not mapped in the child, and its "
                    "descriptors are the parent's); nothing was done: a child makes its own receiver", fn);
}

/* ---------------------------------------------------------------------------------------- */
/* argument checks                                                                            */

static int check_opts(const struct mlxd_receiver_opts *o, uint32_t *peer)
{
#define BAD(...) return mlxd_err(EINVAL, "mlxd_receiver_start: " __VA_ARGS__)
    if (o->sz < offsetof(struct mlxd_receiver_opts, mode))
        BAD("opts->sz %zu is below the %zu bytes of the original's arguments", o->sz,
            offsetof(struct mlxd_receiver_opts, mode));
    int trc = mlxd__opts_tail_check("mlxd_receiver_start", "opts", o, o->sz, sizeof *o);
    if (trc) return trc;
    if (!o->device || !o->device[0])
        BAD("device is %s", o->device ? "empty" : "NULL");
    if (strlen(o->device) >= 64)
        BAD("device name '%.16s...' is longer than 63 bytes", o->device);
    if (o->port > 1)
        BAD("port %u: a ConnectX function has port 1 only (0 means 1)", o->port);
    if (!o->buffer)
        BAD("buffer is 0");
    if (o->frame_size == 0)
        BAD("frame_size is 0 (must be >= 1)");
    if (o->frame_size > ((size_t)1 << 40))
        BAD("frame_size %zu exceeds 2^40", o->frame_size);
    uint64_t minpage = mlxd_hsb_min_page_size(o->frame_size);
    if (o->page_size < minpage)
        BAD("page_size %zu is below round_up(frame_size %zu, 128) + 128 = %llu", o->page_size,
            o->frame_size, (unsigned long long)minpage);
    if (o->page_size % MLXD_HSB_ALIGN)
        BAD("page_size %zu is not a multiple of 128 (the device's DP_PAGE_INC is in 128-byte units)",
            o->page_size);
    if (o->metadata_offset > o->page_size || o->page_size - o->metadata_offset < MLXD_HSB_METADATA_SIZE)
        BAD("metadata_offset %zu + 128 exceeds page_size %zu", o->metadata_offset, o->page_size);
    uint32_t layout = o->sz > offsetof(struct mlxd_receiver_opts, imm_layout) ? o->imm_layout : 0;
    unsigned maxpages = layout == MLXD_HSB_IMM_LEGACY_8_24 ? 256 : MLXD_HSB_MAX_PAGES;
    if (o->pages < 1 || o->pages > maxpages)
        BAD("pages %u is not in 1..%u", o->pages, maxpages);
    if ((unsigned __int128)o->pages * o->page_size > o->buffer_size)
        BAD("pages %u x page_size %zu = %llu exceeds buffer_size %zu", o->pages, o->page_size,
            (unsigned long long)o->pages * o->page_size, o->buffer_size);
    if (o->queue_size < 1 || o->queue_size > o->pages)
        BAD("queue_size %u is not in 1..pages (%u)", o->queue_size, o->pages);
    struct in_addr a;
    if (!o->peer_ip || inet_pton(AF_INET, o->peer_ip, &a) != 1)
        BAD("peer_ip '%s' is not an IPv4 address", o->peer_ip ? o->peer_ip : "(null)");
    *peer = a.s_addr;
    if (o->sz >= offsetof(struct mlxd_receiver_opts, mode) + sizeof(uint32_t) &&
        o->mode > MLXD_RECEIVER_EVENT)
        BAD("mode %u is not MLXD_RECEIVER_BUSY_POLL (0) or MLXD_RECEIVER_EVENT (1)", o->mode);
    if (layout > MLXD_HSB_IMM_LEGACY_8_24)
        BAD("imm_layout %u is not 0 (12/20) or 1 (legacy 8/24)", layout);
    if (o->sz >= offsetof(struct mlxd_receiver_opts, replay_pace) + sizeof o->replay_pace &&
        o->replay_pace > MLXD_REPLAY_PACE_STEPPED)
        BAD("replay_pace %u is not FAST (0), RECORDED (1) or STEPPED (2)", o->replay_pace);
    if (o->sz >= offsetof(struct mlxd_receiver_opts, repost_batch) + sizeof o->repost_batch) {
        if (o->memory > MLXD_RECEIVER_MEM_CUDA)
            BAD("memory %u is not AUTO (0), HOST (1) or CUDA (2)", o->memory);
        if (o->recv_depth > 32768)
            BAD("recv_depth %u exceeds 32768", o->recv_depth);
        unsigned depth = o->recv_depth ? o->recv_depth : DEFAULT_RECV_DEPTH;
        if (depth < 2)
            BAD("recv_depth %u is below 2", o->recv_depth);
        if (o->repost_batch > depth / 2)
            BAD("repost_batch %u exceeds recv_depth/2 = %u", o->repost_batch, depth / 2);
    }
#undef BAD
    return 0;
}

static int device_exists(const char *name)
{
    char **names = NULL;
    size_t n = 0;
    int rc = mlxd_names(&names, &n);
    if (rc < 0)
        return mlxd_err(-rc, "mlxd_receiver_start: cannot list RDMA devices: %s", mlxd_errmsg());
    bool found = false;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            found = true;
    mlxd_names_free(names, n);
    if (!found)
        return mlxd_err(ENODEV, "mlxd_receiver_start: device '%s' does not exist (%zu mlx5 device%s "
                        "in %s/class/infiniband)", name, n, n == 1 ? "" : "s", mlxd_sysfs_root());
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* teardown                                                                                   */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void count_completion_error(struct mlxd_receiver *r, const struct mlxd_completion *c)
{
    if (c->status == 5 /* IBV_WC_WR_FLUSH_ERR */) {
        atomic_fetch_add_explicit(&r->flushed, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&r->errors, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->by_syndrome[c->syndrome], 1, memory_order_relaxed);
}

/* ---- the busy mode's events thread ---------------------------------------------------- */

/* Hands the mailbox to the monitor and waits until it is empty again (or teardown). */
static void post_events(struct mlxd_receiver *r)
{
    atomic_store_explicit(&r->ev_full, true, memory_order_release);
    pthread_mutex_lock(&r->ev_lock);
    while (atomic_load_explicit(&r->ev_full, memory_order_acquire) && !atomic_load(&r->ev_stop))
        pthread_cond_wait(&r->ev_cond, &r->ev_lock);
    pthread_mutex_unlock(&r->ev_lock);
}

/* Blocks in poll(2) on the NIC's async fd and the stop eventfd; reads what arrives (mlxd_wait
 * with no wait) into the mailbox.  An error reading is handed over too (the monitor returns
 * it) and ends the thread. */
static void *events_thread(void *arg)
{
    struct mlxd_receiver *r = arg;
    int async_fd = -1, comp_fd = -1;
    int rc = mlxd_event_fds(r->nic, &async_fd, &comp_fd);
    while (rc == 0 && !atomic_load(&r->ev_stop)) {
        struct pollfd p[2] = { { .fd = async_fd, .events = POLLIN }, { .fd = r->stop_fd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = mlxd_err(errno, "mlxd_receiver: the events thread's poll: %s", strerror(errno));
            break;
        }
        if (p[1].revents) {   /* close (ev_stop tells), or a child of fork's write: drained */
            uint64_t v;
            ssize_t rd = read(r->stop_fd, &v, sizeof v);
            (void)rd;
        }
        if (atomic_load(&r->ev_stop) || !p[0].revents)
            continue;
        int n = mlxd_wait(r->nic, 0, r->ev_box, EV_BOX);
        if (n < 0) {
            rc = n;
            break;
        }
        if (n == 0) {
            if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))   /* no busy loop on a dead fd */
                poll(&p[1], 1, 10);
            continue;
        }
        r->ev_n = n;
        r->ev_err = 0;
        post_events(r);
    }
    if (rc < 0 && !atomic_load(&r->ev_stop)) {
        r->ev_n = 0;
        r->ev_err = rc;
        snprintf(r->ev_msg, sizeof r->ev_msg, "%s", mlxd_errmsg());
        post_events(r);
    }
    return NULL;
}

/* Busy mode with a NIC: starts the events thread (its signals blocked: they go to the
 * application's threads). */
static int start_events_thread(struct mlxd_receiver *r)
{
    if (r->o.mode == MLXD_RECEIVER_EVENT || !r->nic)
        return 0;
    atomic_store(&r->ev_stop, false);
    atomic_store(&r->ev_full, false);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&r->ev_thread, NULL, events_thread, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        return mlxd_err(rc, "mlxd_receiver_start: pthread_create (the events thread): %s", strerror(rc));
    r->ev_thread_on = true;
    return 0;
}

static void stop_events_thread(struct mlxd_receiver *r)
{
    if (!r->ev_thread_on)
        return;
    atomic_store(&r->ev_stop, true);
    pthread_mutex_lock(&r->ev_lock);
    pthread_cond_broadcast(&r->ev_cond);
    pthread_mutex_unlock(&r->ev_lock);
    uint64_t one = 1;
    ssize_t wr = write(r->stop_fd, &one, sizeof one);
    (void)wr;
    pthread_join(r->ev_thread, NULL);
    r->ev_thread_on = false;
    atomic_store(&r->ev_full, false);
}

/* Completions close takes from the CQ after the monitor's last poll: the frames among them are
 * received but not delivered (the queue is closed), counted as at_close; the packets their CQEs
 * say were dropped before them for want of a receive count in hw_drops, error completions as
 * errors, flushes as flushed: every frame still gets its cause (docs/receiver.md). */
static void count_at_close(struct mlxd_receiver *r, const struct mlxd_completion *c, int n)
{
    for (int i = 0; i < n; i++) {
        if (c[i].hw_drops)
            atomic_fetch_add_explicit(&r->hw_drops, c[i].hw_drops, memory_order_relaxed);
        if (c[i].status == MLXD_WC_SUCCESS)
            atomic_fetch_add_explicit(&r->acct[A_AT_CLOSE], 1, memory_order_relaxed);
        else
            count_completion_error(r, &c[i]);
    }
}

/* Close's drain of a receive queue: after the QP went to the error state every outstanding
 * receive comes back, as a frame that arrived after the monitor's last poll or as a flush. */
static void drain_qp(struct mlxd_receiver *r)
{
    struct mlxd_completion c[POLL_BATCH];
    uint64_t deadline = mono_ms() + DRAIN_MS;
    while (r->posted > 0 && mono_ms() < deadline) {
        int n = mlxd_cq_poll(r->cq, c, POLL_BATCH);
        if (n < 0)
            break;
        count_at_close(r, c, n);
        r->posted = (unsigned)n < r->posted ? r->posted - (unsigned)n : 0;
        if (n == 0)
            sched_yield();
    }
}

/* A replay's CQ once its feeder has stopped: the records it wrote after the monitor's last poll. */
static void drain_replay(struct mlxd_receiver *r)
{
    struct mlxd_completion c[POLL_BATCH];
    int n;
    while ((n = mlxd_cq_poll(r->cq, c, POLL_BATCH)) > 0)
        count_at_close(r, c, n);
}

/* Releases everything; returns 0 or the first error, whose message it leaves set (a later
 * failure's message does not replace it). */
static int teardown(struct mlxd_receiver *r)
{
    int first = 0;
    char first_msg[512] = "";
#define KEEP(x) do { int _rc = (x); if (_rc < 0 && !first) { first = _rc; \
        snprintf(first_msg, sizeof first_msg, "%s", mlxd_errmsg()); } } while (0)
    stop_events_thread(r);         /* it reads the NIC's async fd: joined before the NIC goes */
    if (r->qp) {
        KEEP(mlxd_qp_to_error(r->qp));
        drain_qp(r);
        KEEP(mlxd_qp_destroy(r->qp));
        r->qp = NULL;
    }
    if (r->mr) {
        KEEP(mlxd_region_deregister(r->mr));
        r->mr = NULL;
    }
    if (r->replay) {               /* the feeder writes into the CQ: stopped before it goes */
        mlxd__rx_replay_stop(r->replay);
        r->replay = NULL;
        if (r->cq)
            drain_replay(r);
    }
    if (r->rec) {                  /* after the drain above: its flush CQEs are recorded too */
        KEEP(mlxd_cq_record_stop(r->rec, NULL));
        r->rec = NULL;
    }
    if (r->cq) {
        KEEP(mlxd_cq_destroy(r->cq));
        r->cq = NULL;
    }
    if (r->nic) {
        KEEP(mlxd_close(r->nic));
        r->nic = NULL;
    }
    if (r->stop_fd >= 0) {
        close(r->stop_fd);
        r->stop_fd = -1;
    }
    free(r->recvs);
    r->recvs = NULL;
    r->posted = r->pending = 0;
#undef KEEP
    if (first)
        mlxd_err(-first, "%s", first_msg);
    return first;
}

/* ---------------------------------------------------------------------------------------- */
/* accounting and hw_counters                                                                 */

static void reset_accounting(struct mlxd_receiver *r)
{
    for (int i = 0; i < A_COUNT; i++)
        atomic_store(&r->acct[i], 0);
    rx_evq_reset(&r->evq);
    r->resume_pending = false;
    r->outage_ns = 0;
    r->good_seen = false;
    r->good_fn = 0;
    r->since_good = 0;
    r->hw_base_ok[0] = r->hw_base_ok[1] = false;
}

/* Reads an unsigned decimal file (sysfs "%llu\n"); false when it cannot. */
static bool read_u64_file(const char *path, uint64_t *v)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    char *end;
    unsigned long long x = strtoull(buf, &end, 10);
    if (end == buf)
        return false;
    *v = x;
    return true;
}

/* <sysfs>/class/infiniband/<dev>/ports/1/hw_counters/<name> (kernel
 * drivers/infiniband/hw/mlx5/counters.c). */
static bool read_hw_counter(const struct mlxd_receiver *r, const char *name, uint64_t *v)
{
    char path[600];
    snprintf(path, sizeof path, "%s/class/infiniband/%s/ports/1/hw_counters/%s", mlxd_sysfs_root(),
             r->device, name);
    return read_u64_file(path, v);
}

/* ---------------------------------------------------------------------------------------- */
/* start                                                                                      */

/* The QP to RTR towards peer (network order).  ETIMEDOUT there means the kernel could not
 * resolve the peer's MAC address within its 1 s (drivers/infiniband/core/addr.c); Holoscan
 * Sensor Bridge's receiver (roce_receiver.cpp) tries 5 times, 200 ms apart, and so does this. */
static int connect_rtr(struct mlxd_receiver *r, uint32_t peer)
{
    struct mlxd_endpoint peer_ep = { .qpn = 0, .psn = 0 };
    peer_ep.gid[10] = 0xff;
    peer_ep.gid[11] = 0xff;
    memcpy(peer_ep.gid + 12, &peer, 4);
    struct mlxd_connect_opts cn = { .sz = sizeof cn, .peer_access = MLXD_ACCESS_REMOTE_WRITE,
                                    .receive_only = true, .hop_limit = 0xff,
                                    .path_mtu = 5 /* 4096, as the original */ };
    uint64_t t0 = mono_ms();
    int rc = 0;
    for (int tries = 1; tries <= RTR_TRIES; tries++) {
        rc = mlxd_qp_connect(r->qp, &peer_ep, &cn);
        if (rc != -ETIMEDOUT)
            return rc;
        if (tries < RTR_TRIES) {
            struct timespec ts = { 0, RTR_RETRY_MS * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
    char ip[INET_ADDRSTRLEN] = "?", me[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &peer, ip, sizeof ip);
    uint32_t local = htonl(r->local_ip);
    inet_ntop(AF_INET, &local, me, sizeof me);
    return mlxd_err(ETIMEDOUT, "mlxd_receiver_start: the QP could not reach RTR: %d tries over %.1f s each "
                    "timed out (ETIMEDOUT) because the kernel could not resolve the MAC address of the peer "
                    "%s (address resolution, drivers/infiniband/core/addr.c); check that the sensor bridge "
                    "is up and on the same subnet as %s (%s); last: %s", RTR_TRIES,
                    (mono_ms() - t0) / 1000.0, ip, me, r->device, mlxd_errmsg());
}

/* The recorder's metadata hook: the block of the page a RESP_WR_IMM CQE names, as the monitor
 * is about to find it (host memory only). */
static bool record_md(void *ctx, const uint8_t cqe[64], uint8_t md[128])
{
    const struct mlxd_receiver *r = ctx;
    if (!r->host || r->o.no_metadata || (cqe[MLXD_CQE_OFF_OP_OWN] >> 4) != MLXD_CQE_RESP_WR_IMM)
        return false;
    uint32_t imm;
    memcpy(&imm, cqe + MLXD_CQE_OFF_IMM_INVAL_PKEY, 4);
    uint32_t page = mlxd_hsb_imm_page(be32toh(imm), r->o.imm_layout);
    if (page >= r->o.pages)
        return false;
    memcpy(md, r->host + (uint64_t)page * r->o.page_size + r->o.metadata_offset, 128);
    return true;
}

/* opts.record_cqes: records the receive CQ, each frame's metadata block with its CQE. */
static int start_recording(struct mlxd_receiver *r)
{
    if (!r->o.record_cqes)
        return 0;
    struct mlxd_record_opts ropts = { .sz = sizeof ropts, .source = "mlxd_receiver_start: record_cqes",
                                      .metadata = record_md, .metadata_ctx = r };
    int rc = mlxd_cq_record_start(r->cq, r->o.record_cqes, &ropts, &r->rec);
    r->o.record_cqes = NULL;   /* the caller's string: used only here */
    return rc;
}

/* page_md as the host buffer holds it at start (device memory: zeros). */
static void page_md_init(struct mlxd_receiver *r)
{
    for (unsigned i = 0; i < r->o.pages && r->host; i++)
        memcpy(r->page_md[i], r->host + (size_t)i * r->o.page_size + r->o.metadata_offset, 48);
}

/* opts.replay_fixture: a detached CQ fed from the fixture instead of a NIC: no device, QP or
 * memory region; the monitor busy-polls it. */
static int start_replay(struct mlxd_receiver *r)
{
    r->rxw_path[0] = 0;            /* no port counters: nothing came over a wire */
    r->qpn = r->rkey = 0;
    int rc = mlxd__rx_replay_start(&r->o, r->host, &r->cq, &r->replay);
    r->o.replay_fixture = NULL;   /* the caller's string: used only here */
    if (rc < 0)
        return rc;
    return start_recording(r);
}

int mlxd_receiver_replay_step(struct mlxd_receiver *r, unsigned n)
{
    if (!r)
        return mlxd_err(EINVAL, "mlxd_receiver_replay_step: the receiver was not started on a fixture");
    pthread_mutex_lock(&r->lock);     /* a close on another thread frees the replay */
    int rc = atomic_load(&r->started) && r->replay ? mlxd__rx_replay_step(r->replay, n)
             : mlxd_err(EINVAL, "mlxd_receiver_replay_step: the receiver was not started on a fixture");
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int mlxd_receiver_replay_progress(const struct mlxd_receiver *r, uint64_t *written, uint64_t *total)
{
    if (!r || !written || !total)
        return mlxd_err(EINVAL, "mlxd_receiver_replay_progress: the receiver was not started on a fixture");
    struct mlxd_receiver *w = (struct mlxd_receiver *)r;    /* the lock only */
    pthread_mutex_lock(&w->lock);     /* a close on another thread frees the replay */
    bool ok = atomic_load(&r->started) && r->replay;
    if (ok) mlxd__rx_replay_progress(r->replay, written, total);
    pthread_mutex_unlock(&w->lock);
    return ok ? 0 : mlxd_err(EINVAL, "mlxd_receiver_replay_progress: the receiver was not started on a fixture");
}

/* Takes the checked options o (a copy of the caller's) as the run's configuration, with the
 * defaults filled in, and finds out what the buffer is (host or CUDA memory).  Nothing to undo. */
static int configure(struct mlxd_receiver *r, const struct mlxd_receiver_opts *o, uint32_t peer)
{
    int rc = o->replay_fixture ? 0 : device_exists(o->device);
    if (rc < 0)
        return rc;
    r->o = *o;
    if (!r->o.recv_depth)
        r->o.recv_depth = DEFAULT_RECV_DEPTH;
    if (!r->o.repost_batch)
        r->o.repost_batch = DEFAULT_REPOST_BATCH < r->o.recv_depth / 2 ? DEFAULT_REPOST_BATCH
                                                                      : r->o.recv_depth / 2;
    if (r->o.replay_fixture)
        r->o.mode = MLXD_RECEIVER_BUSY_POLL;   /* a detached CQ has no completion events */
    snprintf(r->device, sizeof r->device, "%s", o->device);
    r->o.device = r->device;
    r->o.peer_ip = NULL;
    r->peer_ip = peer;
    r->cuda_mem = false;
    r->host = NULL;
    rc = mlxd__cuda_classify(o->buffer, o->buffer_size, o->memory, &r->cuda_mem, &r->cu_ctx);
    if (rc < 0)
        return rc;
    if (!r->cuda_mem)
        r->host = (uint8_t *)(uintptr_t)o->buffer;
    return 0;
}

/* The frame queue, kept allocated until destroy or a new size, emptied otherwise.  Nothing to
 * undo on failure (the queue is then not ready). */
static int prepare_queue(struct mlxd_receiver *r)
{
    if (r->q_ready && r->q.cap != r->o.queue_size) {
        frameq_fini(&r->q);
        r->q_ready = false;
    }
    if (r->q_ready) {
        frameq_reset(&r->q);
        return 0;
    }
    if (frameq_init(&r->q, r->o.queue_size) < 0)
        return mlxd_err(ENOMEM, "mlxd_receiver_start: no memory for a queue of %u", r->o.queue_size);
    r->q_ready = true;
    return 0;
}

/* The per-page generations and metadata, and the receive work requests; teardown frees the
 * receives on failure (the per-page arrays stay until the next start or destroy). */
static int alloc_run_state(struct mlxd_receiver *r)
{
    free(r->page_gen);
    r->page_gen = calloc(r->o.pages, sizeof *r->page_gen);
    free(r->page_md);
    r->page_md = calloc(r->o.pages, sizeof *r->page_md);
    r->recvs = calloc(r->o.recv_depth, sizeof *r->recvs);
    if (!r->page_gen || !r->page_md || !r->recvs)
        return mlxd_err(ENOMEM, "mlxd_receiver_start: out of memory");
    for (unsigned i = 0; i < r->o.recv_depth; i++)
        r->recvs[i].wr_id = 0x1000 + i;
    return 0;
}

/* Every statistic and the monitor's state as a new run starts them. */
static void reset_counters(struct mlxd_receiver *r)
{
    atomic_store(&r->last_page, r->o.pages - 1);   /* the device's next page is 0 */
    memset(&r->fn, 0, sizeof r->fn);
    atomic_store(&r->frames, 0);
    atomic_store(&r->consumed, 0);
    atomic_store(&r->overwritten, 0);
    atomic_store(&r->overwritten_after_read, 0);
    atomic_store(&r->bad_page, 0);
    atomic_store(&r->errors, 0);
    atomic_store(&r->flushed, 0);
    atomic_store(&r->hw_drops, 0);
    atomic_store(&r->last_fn, 0);
    for (int i = 0; i < 256; i++)
        atomic_store(&r->by_syndrome[i], 0);
    reset_accounting(r);
    atomic_store(&r->stop, false);
    r->cuda_err[0] = 0;
    r->teardown_by_monitor = false;
}

/* The eventfd that wakes the event-mode monitor, or the busy mode's events thread, at close
 * (teardown closes it). */
static int open_stop_fd(struct mlxd_receiver *r)
{
    r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->stop_fd < 0)
        return mlxd_err(errno, "mlxd_receiver_start: eventfd: %s", strerror(errno));
    return 0;
}

/* The local GID: the RoCE v2 GID carrying the address the kernel routes from towards peer
 * (network order; peer_str as the caller wrote it, for the message). */
static int find_local_gid(struct mlxd_receiver *r, uint32_t peer, const char *peer_str)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(4791),
                               .sin_addr.s_addr = peer };
    struct mlxd_gid gid;
    int rc = mlxd_gid_for_peer(r->nic, (const struct sockaddr *)&sin, sizeof sin, &gid);
    if (rc == -EADDRNOTAVAIL && (ntohl(peer) >> 24) == 127) {
        /* Loopback peer (the emulator): any local address reaches it; take the NIC's default
         * (lowest IPv4-mapped RoCE v2 GID, the original's choice). */
        int idx = mlxd_default_gid_index(r->nic);
        struct mlxd_gid all[64];
        int n = idx >= 0 ? mlxd_gids(r->nic, all, 64) : idx;
        rc = -EADDRNOTAVAIL;
        for (int i = 0; i < n && i < 64; i++)
            if ((int)all[i].index == idx) {
                gid = all[i];
                rc = idx;
            }
    }
    if (rc < 0)
        return mlxd_err(-rc, "mlxd_receiver_start: no local RoCE v2 GID of %s routes to peer %s: %s",
                        r->device, peer_str, mlxd_errmsg());
    r->gid_index = (int)gid.index;
    memcpy(&r->local_ip, gid.raw + 12, 4);
    r->local_ip = ntohl(r->local_ip);
    return 0;
}

/* The receive CQ (with its recorder when asked), stamping NIC arrival times: real-time CQE
 * stamps where the device has them, else the free-running timer through the kernel's
 * clock-info page (mlxd_uverbs.h, CQE timestamps). */
static int create_cq(struct mlxd_receiver *r)
{
    struct mlxd_port_info pi;
    mlxd_port_info(r->nic, &pi);
    r->nic_real_time = pi.real_time_ts;
    r->nic_clock_info = pi.clock_info;
    struct mlxd_cq_opts co = { .sz = sizeof co, .events = r->o.mode == MLXD_RECEIVER_EVENT,
                               .user_data = (uintptr_t)r, .real_time_ts = r->nic_real_time };
    int rc = mlxd_cq_create(r->nic, r->o.recv_depth, &co, &r->cq);
    if (rc < 0)
        return rc;
    return start_recording(r);
}

/* The frame buffer as a memory region the sensor writes by rkey. */
static int register_buffer(struct mlxd_receiver *r)
{
    /* In order, never relaxed: the metadata snapshot relies on the device's writes landing in
     * ascending address order (md_snapshot.h). */
    struct mlxd_region_opts ro = { .sz = sizeof ro,
                                   .access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE,
                                   .order = MLXD_ORDER_IN_ORDER };
    int rc;
    if (r->cuda_mem) {
        rc = mlxd__cuda_register(r->nic, r->o.buffer, r->o.buffer_size, &ro, &r->mr);
    } else {
        rc = mlxd_region_register(r->nic, r->host, r->o.buffer_size, &ro, &r->mr);
        if (rc == -EFAULT)
            rc = mlxd__cuda_explain_efault(r->o.buffer, r->o.memory, "mlxd_receiver_start");
    }
    if (rc < 0)
        return rc;
    page_md_init(r);   /* after the kernel took the buffer: a GPU pointer taken for host memory
                          is refused there (EFAULT, explained), not read here */
    struct mlxd_remote rem = mlxd_region_remote(r->mr);
    r->rkey = rem.rkey;
    r->iova = rem.addr;
    return 0;
}

/* The UC QP on the CQ, every receive posted. */
static int create_qp(struct mlxd_receiver *r)
{
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UC, .send_depth = 0,
                               .recv_depth = r->o.recv_depth, .max_recv_sge = 1,
                               .has_gid_index = true, .gid_index = (uint32_t)r->gid_index,
                               .user_data = (uintptr_t)r };
    int rc = mlxd_qp_create(r->cq, &qo, &r->qp);
    if (rc < 0)
        return rc;
    struct mlxd_endpoint me;
    rc = mlxd_qp_endpoint(r->qp, &me);
    if (rc < 0)
        return rc;
    r->qpn = me.qpn;

    /* Zero-scatter receives: a WRITE with immediate lands by rkey and only consumes one. */
    rc = mlxd_qp_receive(r->qp, r->recvs, r->o.recv_depth);
    if (rc < 0)
        return rc;
    r->posted = r->o.recv_depth;
    r->pending = 0;
    return 0;
}

/* The port counters this run's statistics are taken against. */
static void read_hw_base(struct mlxd_receiver *r)
{
    snprintf(r->rxw_path, sizeof r->rxw_path, "%s/class/infiniband/%s/ports/1/hw_counters/rx_write_requests",
             mlxd_sysfs_root(), r->device);
    for (int i = 0; i < 2; i++)
        r->hw_base_ok[i] = read_hw_counter(r, hw_counter_names[i], &r->hw_base[i]);
}

/* A run on the device: opens it, creates the CQ, memory region and QP and connects the QP
 * towards peer.  On failure what was created stays in r for teardown to release (in reverse
 * order). */
static int start_device(struct mlxd_receiver *r, uint32_t peer, const char *peer_str)
{
    struct mlxd_open_opts oo = { .sz = sizeof oo, .port = 1 };
    int rc = mlxd_open(r->device, &oo, &r->nic);
    if (rc < 0)
        return rc;
    rc = find_local_gid(r, peer, peer_str);
    if (rc < 0)
        return rc;
    rc = create_cq(r);
    if (rc < 0)
        return rc;
    rc = register_buffer(r);
    if (rc < 0)
        return rc;
    rc = create_qp(r);
    if (rc < 0)
        return rc;
    rc = connect_rtr(r, peer);
    if (rc < 0)
        return rc;
    read_hw_base(r);
    return 0;
}

int mlxd_receiver_start(struct mlxd_receiver *r, const struct mlxd_receiver_opts *opts)
{
    if (!r || !opts)
        return mlxd_err(EINVAL, "mlxd_receiver_start: NULL %s", r ? "opts" : "receiver");
    if (forked(r))
        return forked_err("mlxd_receiver_start");
    uint32_t peer = 0;
    int rc = check_opts(opts, &peer);
    if (rc < 0)
        return rc;
    struct mlxd_receiver_opts o = { 0 };
    memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
    o.sz = sizeof o;

    pthread_mutex_lock(&r->lock);
    if (r->started) {
        pthread_mutex_unlock(&r->lock);
        return mlxd_err(EINVAL, "mlxd_receiver_start: already started (close first)");
    }
    if (r->monitor_running) {
        pthread_mutex_unlock(&r->lock);
        return mlxd_err(EINVAL, "mlxd_receiver_start: the previous run's monitor has not returned");
    }
    rc = configure(r, &o, peer);
    if (rc < 0)
        goto out_unlock;
    rc = prepare_queue(r);
    if (rc < 0)
        goto out_unlock;
    rc = alloc_run_state(r);
    if (rc < 0)
        goto fail;
    reset_counters(r);
    rc = open_stop_fd(r);
    if (rc < 0)
        goto fail;

    r->nic_real_time = r->nic_clock_info = false;   /* a replay has no NIC clock (a start before may have had one) */
    if (r->o.replay_fixture) {
        page_md_init(r);
        rc = start_replay(r);
    } else {
        rc = start_device(r, peer, opts->peer_ip);
        if (rc == 0)
            rc = start_events_thread(r);
    }
    if (rc < 0)
        goto fail;
    r->started = true;
    pthread_mutex_unlock(&r->lock);
    return 0;

fail: {
        /* the failing step's message (mlxd_open, mlxd_cq_create, ...: the header's "device
         * errors", which tests/test_faults.c expects to lead the message) survives a teardown
         * error */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mlxd_errmsg());
        teardown(r);
        rc = mlxd_err(-rc, "%s", msg);
    }
    r->qpn = r->rkey = 0;
    r->iova = 0;
    r->gid_index = -1;
    r->local_ip = 0;
out_unlock:
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* the monitor                                                                                */

/* A device-memory read failed (the message is set): the monitor stops and returns it. */
static void cuda_failed(struct mlxd_receiver *r)
{
    if (!r->cuda_err[0])
        snprintf(r->cuda_err, sizeof r->cuda_err, "%s", mlxd_errmsg());
    atomic_store(&r->stop, true);
}

/* Copies the first 48 bytes of the page's metadata block into md; false when the device was
 * rewriting the block meanwhile (md_snapshot.h: then md may mix two frames). */
static inline bool snapshot_metadata(struct mlxd_receiver *r, uint64_t page_off, uint8_t md[48])
{
    if (r->host)
        return md_snapshot_host(r->host + page_off + r->o.metadata_offset, md);
    /* Device memory: the same rule with two copies (the second after the first has completed:
     * cuMemcpyDtoH is synchronous).  A copy that fails stops the monitor with its message. */
    uint64_t a = r->o.buffer + page_off + r->o.metadata_offset;
    uint8_t again[4];
    if (mlxd__cuda_read(md, a, 48, NULL, "metadata") < 0 ||
        mlxd__cuda_read(again, a + MLXD_HSB_MD_PSN, 4, NULL, "metadata") < 0) {
        cuda_failed(r);
        memset(md, 0, 48);
        return false;
    }
    return !memcmp(again, md + MLXD_HSB_MD_PSN, 4);
}

/* ---- events --------------------------------------------------------------------------- */

/* Queues an event and calls the event handler (monitor thread). */
static void emit(struct mlxd_receiver *r, uint32_t kind, uint32_t ktype, uint64_t down_ns,
                 uint64_t lost)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct mlxd_receiver_event ev = { .kind = kind, .kernel_type = ktype, .time_s = ts.tv_sec,
                                      .time_ns = (uint32_t)ts.tv_nsec,
                                      .frames = atomic_load_explicit(&r->frames, memory_order_relaxed),
                                      .down_ns = down_ns, .frames_lost = lost };
    rx_evq_push(&r->evq, &ev);
    mlxd_receiver_event_fn cb = atomic_load_explicit(&r->ev_cb, memory_order_acquire);
    if (cb)
        cb(atomic_load_explicit(&r->ev_ctx, memory_order_relaxed), &ev);
}

static inline void acct_add(struct mlxd_receiver *r, int i, uint64_t v)
{
    atomic_fetch_add_explicit(&r->acct[i], v, memory_order_relaxed);
}

/* One async event: counted, queued, handed to the handler.  Returns a negative errno (message
 * set) for the events after which nothing more can arrive. */
static int on_async(struct mlxd_receiver *r, const struct mlxd_event *e)
{
    acct_add(r, A_EVENTS, 1);
    uint32_t kind;
    int err = 0;
    uint64_t down_ns = 0;
    switch (e->kind) {
    case MLXD_EVENT_PORT_ERROR:
        kind = MLXD_RX_EVENT_PORT_DOWN;
        acct_add(r, A_PORT_DOWN, 1);
        if (!atomic_load(&r->acct[A_DOWN_SINCE])) {
            atomic_store(&r->acct[A_DOWN_SINCE], mono_ns());
            r->lost_at_down = atomic_load(&r->acct[A_LOST]);
        }
        break;
    case MLXD_EVENT_PORT_ACTIVE: {
        kind = MLXD_RX_EVENT_PORT_UP;
        acct_add(r, A_PORT_UP, 1);
        uint64_t since = atomic_exchange(&r->acct[A_DOWN_SINCE], 0);
        if (since) {
            uint64_t now = mono_ns();
            down_ns = now > since ? now - since : 0;
            acct_add(r, A_LINK_DOWN_NS, down_ns);
            r->outage_ns = down_ns;
            r->resume_pending = true;
        }
        break;
    }
    case MLXD_EVENT_QP_FATAL: kind = MLXD_RX_EVENT_QP_FATAL; err = EIO; break;
    case MLXD_EVENT_QP_REQ_ERROR: kind = MLXD_RX_EVENT_QP_REQ_ERROR; err = EIO; break;
    case MLXD_EVENT_QP_ACCESS_ERROR: kind = MLXD_RX_EVENT_QP_ACCESS_ERROR; err = EIO; break;
    case MLXD_EVENT_CQ_ERROR: kind = MLXD_RX_EVENT_CQ_ERROR; err = EIO; break;
    case MLXD_EVENT_DEVICE_FATAL: kind = MLXD_RX_EVENT_DEVICE_FATAL; err = ENODEV; break;
    default: kind = MLXD_RX_EVENT_OTHER; break;
    }
    if (kind == MLXD_RX_EVENT_CQ_ERROR)
        acct_add(r, A_CQ_ERR, 1);
    else if (kind == MLXD_RX_EVENT_DEVICE_FATAL)
        acct_add(r, A_DEV_FATAL, 1);
    else if (err)
        acct_add(r, A_QP_ERR, 1);
    emit(r, kind, e->kernel_type, down_ns, 0);
    if (!err)
        return 0;
    if (kind == MLXD_RX_EVENT_DEVICE_FATAL)
        return mlxd_err(err, "%s on %s: the device failed or was reset and receives nothing more; "
                        "close, then start again once the device is back", mlxd_receiver_event_name(kind),
                        r->device);
    if (kind == MLXD_RX_EVENT_CQ_ERROR)
        return mlxd_err(err, "%s on the receiver's CQ: completions are lost from here on; close and "
                        "start again", mlxd_receiver_event_name(kind));
    return mlxd_err(err, "%s on the receiver's QP 0x%06x: the QP is in the error state and receives "
                    "nothing more; close and start again", mlxd_receiver_event_name(kind), r->qpn);
}

/* Reads the NIC's pending events (one poll(2), no wait).  *completion: a completion event was
 * among them (event mode re-arms).  Returns 0, or the first fatal event's negative errno. */
static __attribute__((noinline)) int read_events(struct mlxd_receiver *r, bool *completion)
{
    struct mlxd_event ev[8];
    int n = mlxd_wait(r->nic, 0, ev, 8);
    if (n < 0)
        return n;
    int rc = 0;
    char msg[512] = "";
    for (int i = 0; i < n; i++) {
        if (ev[i].kind == MLXD_EVENT_COMPLETION) {
            if (completion)
                *completion = true;
            continue;
        }
        int e = on_async(r, &ev[i]);
        if (e < 0 && !rc) {
            rc = e;
            snprintf(msg, sizeof msg, "%s", mlxd_errmsg());
        }
    }
    if (rc < 0)
        mlxd_err(-rc, "%s", msg);
    return rc;
}

/* Busy mode: handles what the events thread left in the mailbox, then empties it.  Returns 0,
 * or the first fatal event's (or the events thread's read error's) negative errno. */
static __attribute__((noinline)) int take_events(struct mlxd_receiver *r)
{
    int rc = r->ev_err < 0 ? mlxd_err(-r->ev_err, "%s", r->ev_msg) : 0;
    char msg[512] = "";
    if (rc < 0)
        snprintf(msg, sizeof msg, "%s", r->ev_msg);
    for (int i = 0; i < r->ev_n; i++) {
        if (r->ev_box[i].kind == MLXD_EVENT_COMPLETION)
            continue;
        int e = on_async(r, &r->ev_box[i]);
        if (e < 0 && !rc) {
            rc = e;
            snprintf(msg, sizeof msg, "%s", mlxd_errmsg());
        }
    }
    pthread_mutex_lock(&r->ev_lock);
    atomic_store_explicit(&r->ev_full, false, memory_order_release);
    pthread_cond_signal(&r->ev_cond);
    pthread_mutex_unlock(&r->ev_lock);
    if (rc < 0)
        mlxd_err(-rc, "%s", msg);
    return rc;
}

/* One load per monitor loop; no system call unless events came. */
static inline int maybe_take_events(struct mlxd_receiver *r)
{
    if (__builtin_expect(!atomic_load_explicit(&r->ev_full, memory_order_acquire), 1))
        return 0;
    return take_events(r);
}

/* ---- frame accounting ------------------------------------------------------------------ */

static inline bool md_all_zero(const uint64_t *w)
{
    return !(w[0] | w[1] | w[2] | w[3] | w[4] | w[5]);
}

/* A frame with its own metadata numbered fnum came after a gap, or after frames accounted
 * otherwise, or after the link came back: the frame numbers in between that no completion
 * accounts for were lost before the port. */
static __attribute__((noinline)) void account_gap(struct mlxd_receiver *r, uint64_t fnum)
{
    uint64_t lost = 0;
    if (r->good_seen && fnum > r->good_fn && fnum - r->good_fn - 1 < FN_RESTART) {
        uint64_t gap = fnum - r->good_fn - 1;
        lost = gap > r->since_good ? gap - r->since_good : 0;
    }
    if (lost)
        acct_add(r, A_LOST, lost);
    if (r->resume_pending) {
        /* the frames lost since the port went down: the gap may have been counted already, when
         * the first frame after the outage came before the monitor read PORT_UP */
        r->resume_pending = false;
        uint64_t outage_lost = atomic_load(&r->acct[A_LOST]) - r->lost_at_down;
        if (outage_lost)
            acct_add(r, A_LOST_LINK_DOWN, outage_lost);
        emit(r, MLXD_RX_EVENT_RESUMED, 0, r->outage_ns, outage_lost);
    }
}

static __attribute__((noinline)) uint32_t size_mismatch(struct mlxd_receiver *r, uint64_t bytes)
{
    acct_add(r, bytes < r->o.frame_size ? A_SHORT : A_LONG, 1);
    atomic_store_explicit(&r->acct[A_LAST_BYTES], bytes, memory_order_relaxed);
    return MLXD_FRAME_SIZE_MISMATCH;
}

/* A frame whose metadata is its own (PSN matches): checks its size and its number. */
static inline uint32_t account_frame(struct mlxd_receiver *r, uint64_t fnum, const uint8_t *md)
{
    uint32_t flags = 0;
    uint64_t bytes;
    memcpy(&bytes, md + MLXD_HSB_MD_BYTES_WRITTEN, 8);
    bytes = __builtin_bswap64(bytes);
    if (__builtin_expect(bytes != r->o.frame_size, 0))
        flags = size_mismatch(r, bytes);
    if (__builtin_expect((r->good_seen && fnum != r->good_fn + 1) || r->since_good || r->resume_pending, 0))
        account_gap(r, fnum);
    r->good_seen = true;
    r->good_fn = fnum;
    r->since_good = 0;
    return flags;
}

/* A completion that wrote nothing into its page: a WRITE with immediate of no bytes (the IB
 * specification lets it through without an rkey, o9-21: emu/nic/nic_resp.c as a ConnectX), or
 * whose page still holds the very metadata block delivered with that page's previous frame (or
 * the one it held at start).  A sensor bridge's frame always writes its metadata block (PSN and
 * timestamps differ from frame to frame), so such a frame is not a new one: its metadata is
 * stale.  Monitor only. */
static inline bool stale_frame(struct mlxd_receiver *r, const struct mlxd_completion *c, uint32_t page,
                               const uint8_t *md)
{
    if (c->byte_len == 0)
        return true;
    if (!md)
        return false;
    if (!memcmp(r->page_md[page], md, 48))
        return true;
    memcpy(r->page_md[page], md, 48);
    return false;
}

static inline void handle_frame(struct mlxd_receiver *r, const struct mlxd_completion *c,
                                const struct timespec *now, uint64_t nic_ns)
{
    uint32_t imm = c->imm;
    uint32_t layout = r->o.imm_layout;
    uint32_t page = mlxd_hsb_imm_page(imm, layout);
    if (page >= r->o.pages) {
        atomic_fetch_add_explicit(&r->bad_page, 1, memory_order_relaxed);
        r->since_good++;
        return;
    }
    uint32_t ipsn = mlxd_hsb_imm_psn(imm, layout);
    uint64_t page_off = (uint64_t)page * r->o.page_size;
    uint64_t w[FRAMEQ_WORDS] = { 0 };
    uint32_t flags = 0;
    uint64_t fnum = 0;
    if (r->o.no_metadata) {
        flags |= MLXD_FRAME_NO_METADATA;
        if (stale_frame(r, c, page, NULL)) {
            flags |= MLXD_FRAME_STALE;
            atomic_fetch_add_explicit(&r->overwritten, 1, memory_order_relaxed);
        }
    } else {
        uint8_t md[48];
        bool whole = snapshot_metadata(r, page_off, md);
        if (r->cuda_err[0])
            return;        /* device memory unreadable: the monitor stops with the reason */
        memcpy(&w[W_MD], md, 48);
        uint32_t mpsn = (uint32_t)md[4] << 24 | (uint32_t)md[5] << 16 | (uint32_t)md[6] << 8 | md[7];
        uint16_t fn16 = (uint16_t)(md[MLXD_HSB_MD_FRAME_NUMBER] << 8 | md[MLXD_HSB_MD_FRAME_NUMBER + 1]);
        if (__builtin_expect(md_all_zero(&w[W_MD]), 0)) {
            /* nothing was written where the metadata should be: not a rewrite (a device that
             * rewrote the page wrote a block) but a device programmed otherwise */
            flags |= MLXD_FRAME_MISSING_METADATA;
            acct_add(r, A_MISSING_MD, 1);
            r->since_good++;
            fnum = 0;
        } else if (!whole || !mlxd_hsb_psn_match(mpsn, ipsn, layout)) {
            /* The device rewrote the page (the block is another frame's), or was rewriting it
             * while it was copied (the copy may mix two frames: its PSN says nothing).  Report
             * the number the copy carries as an extension of the current state, without
             * advancing the state with it. */
            flags |= MLXD_FRAME_PSN_MISMATCH;
            atomic_fetch_add_explicit(&r->overwritten, 1, memory_order_relaxed);
            r->since_good++;
            fnum = mlxd_hsb_counter16_peek(&r->fn, fn16);
        } else if (stale_frame(r, c, page, md)) {
            /* not this completion's block: reported as the old frame's number, without
             * advancing the state with it */
            flags |= MLXD_FRAME_PSN_MISMATCH | MLXD_FRAME_STALE;
            atomic_fetch_add_explicit(&r->overwritten, 1, memory_order_relaxed);
            r->since_good++;
            fnum = mlxd_hsb_counter16_peek(&r->fn, fn16);
        } else {
            fnum = mlxd_hsb_counter16_update(&r->fn, fn16);
            atomic_store_explicit(&r->last_fn, fnum, memory_order_relaxed);
            flags |= account_frame(r, fnum, md);
        }
    }
    uint64_t count = atomic_load_explicit(&r->frames, memory_order_relaxed) + 1;
    w[W_PAGE_FLAGS] = page | (uint64_t)flags << 32;
    w[W_IMM] = imm | (uint64_t)ipsn << 32;
    w[W_RX_S] = (uint64_t)now->tv_sec;
    w[W_RX_NS] = (uint64_t)now->tv_nsec;
    w[W_RX_COUNT] = count;
    w[W_FRAME_NUMBER] = fnum;
    w[W_NIC_NS] = nic_ns;
    atomic_store_explicit(&r->page_gen[page], count, memory_order_release);
    atomic_store_explicit(&r->last_page, page, memory_order_release);
    atomic_store_explicit(&r->frames, count, memory_order_release);
    frameq_push(&r->q, w);
    mlxd_receiver_frame_ready_fn cb = atomic_load_explicit(&r->cb, memory_order_acquire);
    if (cb)
        cb(atomic_load_explicit(&r->cb_ctx, memory_order_relaxed));
}

/* Handles n completions; returns the batch's timestamp (CLOCK_REALTIME, ns). */
static inline uint64_t handle_batch(struct mlxd_receiver *r, const struct mlxd_completion *c, int n)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);   /* one timestamp per batch, as the original */
    struct mlxd_clock_info ci;             /* free-running stamps: one clock-info read per batch */
    bool conv = !r->nic_real_time && r->nic_clock_info && mlxd_clock_info(r->nic, &ci) == 0;
    for (int i = 0; i < n; i++) {
        if (r->posted)
            r->posted--;
        r->pending++;
        if (c[i].hw_drops) {
            /* each packet dropped for want of a receive was a frame's WRITE with immediate */
            atomic_fetch_add_explicit(&r->hw_drops, c[i].hw_drops, memory_order_relaxed);
            r->since_good += c[i].hw_drops;
        }
        if (c[i].status != MLXD_WC_SUCCESS) {
            if (c[i].status != 5 /* IBV_WC_WR_FLUSH_ERR: no frame */)
                r->since_good++;
            count_completion_error(r, &c[i]);
            continue;
        }
        uint64_t ts = c[i].timestamp;
        handle_frame(r, &c[i], &now, r->nic_real_time ? mlxd_real_time_ts_to_ns(ts) : conv ? mlxd_ts_to_ns(&ci, ts) : 0);
        if (__builtin_expect(r->cuda_err[0] != 0, 0)) {
            /* device memory unreadable: the monitor stops with the reason; this frame and the
             * batch's others are not delivered: counted as errors, not lost silently */
            r->errors += n - i;
            break;
        }
    }
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static inline int repost(struct mlxd_receiver *r, bool all)
{
    if (!r->qp) {                  /* a replay: no receive queue to re-post to */
        r->pending = 0;
        return 0;
    }
    while (r->pending >= r->o.repost_batch || (all && r->pending)) {
        unsigned n = r->pending < r->o.repost_batch ? r->pending : r->o.repost_batch;
        int rc = mlxd_qp_receive(r->qp, r->recvs, n);
        if (rc == -EAGAIN)
            return 0;      /* ring full (cannot happen: we re-post what completed) */
        if (rc < 0)
            return rc;
        r->pending -= n;
        r->posted += n;
    }
    return 0;
}

static int loop_busy(struct mlxd_receiver *r)
{
    struct mlxd_completion c[POLL_BATCH];
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        int n = mlxd_cq_poll(r->cq, c, POLL_BATCH);
        if (n < 0)
            return n;
        if (n == 0) {
            if (r->pending) {
                int rc = repost(r, true);
                if (rc < 0)
                    return rc;
            }
            int rc = maybe_take_events(r);
            if (rc < 0)
                return rc;
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#elif defined(__aarch64__)
            __asm__ __volatile__("yield");
#endif
            continue;
        }
        handle_batch(r, c, n);
        int rc = repost(r, false);
        if (rc < 0)
            return rc;
        rc = maybe_take_events(r);
        if (rc < 0)
            return rc;
    }
    return maybe_take_events(r);   /* what came before close still reaches the application */
}

static int drain(struct mlxd_receiver *r)
{
    struct mlxd_completion c[POLL_BATCH];
    for (;;) {
        int n = mlxd_cq_poll(r->cq, c, POLL_BATCH);
        if (n < 0)
            return n;
        if (n == 0)
            return repost(r, true);
        handle_batch(r, c, n);
        int rc = repost(r, false);
        if (rc < 0)
            return rc;
    }
}

static int loop_event(struct mlxd_receiver *r)
{
    int async_fd = -1, comp_fd = -1;
    int rc = mlxd_event_fds(r->nic, &async_fd, &comp_fd);
    if (rc < 0)
        return rc;
    if (comp_fd < 0)
        return mlxd_err(EINVAL, "mlxd_receiver_blocking_monitor: the CQ has no completion channel");
    rc = mlxd_cq_arm(r->cq, false);
    if (rc < 0)
        return rc;
    for (;;) {
        rc = drain(r);               /* after arming: nothing that completed before is missed */
        if (rc < 0)
            return rc;
        if (atomic_load(&r->stop))
            return 0;
        struct pollfd p[3] = { { .fd = comp_fd, .events = POLLIN }, { .fd = r->stop_fd, .events = POLLIN },
                               { .fd = async_fd, .events = POLLIN } };
        int pr = poll(p, 3, -1);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return mlxd_err(errno, "mlxd_receiver_blocking_monitor: poll: %s", strerror(errno));
        }
        if (atomic_load(&r->stop))
            return 0;
        if (p[1].revents) {
            /* only this process's close stops the monitor (stop is set first); a write by
             * anyone else (a child of fork shares the eventfd) is drained and ignored */
            uint64_t v;
            ssize_t rd = read(r->stop_fd, &v, sizeof v);
            (void)rd;
        }
        if (p[0].revents) {
            /* one read of the one event an armed CQ raises: with the poll above, the two system
             * calls per wake-up that the kernel's interface needs (issue 18) */
            struct mlxd_event ev;
            rc = mlxd_read_completion_event(r->nic, &ev);
            if (rc < 0)
                return rc;
            rc = mlxd_cq_arm(r->cq, false);
            if (rc < 0)
                return rc;
        }
        if (p[2].revents) {
            bool completion = false;
            rc = read_events(r, &completion);   /* async events (and a completion event, if one came) */
            if (rc < 0)
                return rc;
            if (completion) {
                rc = mlxd_cq_arm(r->cq, false);
                if (rc < 0)
                    return rc;
            }
        }
    }
}

int mlxd_receiver_blocking_monitor(struct mlxd_receiver *r)
{
    if (!r)
        return mlxd_err(EINVAL, "mlxd_receiver_blocking_monitor: NULL receiver");
    if (forked(r))
        return forked_err("mlxd_receiver_blocking_monitor");
    pthread_mutex_lock(&r->lock);
    if (!r->started) {
        pthread_mutex_unlock(&r->lock);
        return mlxd_err(EINVAL, "mlxd_receiver_blocking_monitor: start() has not been called");
    }
    if (r->monitor_running) {
        pthread_mutex_unlock(&r->lock);
        return mlxd_err(EINVAL, "mlxd_receiver_blocking_monitor: a monitor already runs");
    }
    r->monitor_running = true;
    r->monitor_thread = pthread_self();
    pthread_mutex_unlock(&r->lock);

    int rc = r->cu_ctx ? mlxd__cuda_set_current(r->cu_ctx) : 0;
    if (rc == 0)
        rc = r->o.mode == MLXD_RECEIVER_EVENT ? loop_event(r) : loop_busy(r);
    char msg[512];
    if (rc == 0 && r->cuda_err[0])
        rc = -EIO;
    if (rc < 0)
        snprintf(msg, sizeof msg, "%s", r->cuda_err[0] ? r->cuda_err : mlxd_errmsg());

    pthread_mutex_lock(&r->lock);
    r->monitor_running = false;
    if (r->teardown_by_monitor) {
        teardown(r);
        r->started = false;
        r->teardown_by_monitor = false;
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    if (rc < 0)
        return mlxd_err(-rc, "mlxd_receiver_blocking_monitor: %s", msg);
    return 0;
}

int mlxd_receiver_close(struct mlxd_receiver *r)
{
    if (!r)
        return mlxd_err(EINVAL, "mlxd_receiver_close: NULL receiver");
    if (forked(r))
        return forked_err("mlxd_receiver_close");
    pthread_mutex_lock(&r->lock);
    if (!r->started) {
        pthread_mutex_unlock(&r->lock);
        return 0;
    }
    atomic_store(&r->stop, true);
    if (r->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t wr = write(r->stop_fd, &one, sizeof one);
        (void)wr;
    }
    frameq_close(&r->q);
    if (r->monitor_running) {
        if (pthread_equal(pthread_self(), r->monitor_thread)) {
            r->teardown_by_monitor = true;   /* the monitor tears down as it returns */
            pthread_mutex_unlock(&r->lock);
            return 0;
        }
        while (r->monitor_running)
            pthread_cond_wait(&r->cond, &r->lock);
        if (!r->started) {                   /* torn down by the monitor (close from callback) */
            pthread_mutex_unlock(&r->lock);
            return 0;
        }
    }
    int rc = teardown(r);
    if (rc < 0)
        rc = mlxd_err(-rc, "mlxd_receiver_close: %s", mlxd_errmsg());
    r->started = false;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void mlxd_receiver_destroy(struct mlxd_receiver *r)
{
    if (!r)
        return;
    if (forked(r)) {
        /* its lock may have been held by a parent thread at the fork, and its monitor runs in
         * the parent only: the child's copy is left as it is (the child exits or execs) */
        forked_err("mlxd_receiver_destroy");
        return;
    }
    mlxd_receiver_close(r);
    pthread_mutex_lock(&r->lock);
    while (r->monitor_running)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
    if (r->q_ready)
        frameq_fini(&r->q);
    free(r->page_gen);
    free(r->page_md);
    free(r->recvs);
    rx_evq_fini(&r->evq);
    pthread_cond_destroy(&r->ev_cond);
    pthread_mutex_destroy(&r->ev_lock);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* ---------------------------------------------------------------------------------------- */
/* consumer side                                                                              */

bool mlxd_receiver_get_next_frame(struct mlxd_receiver *r, unsigned timeout_ms,
                                  struct mlxd_receiver_frame *info)
{
    if (!r || !info) {
        mlxd_err(EINVAL, "mlxd_receiver_get_next_frame: NULL %s", r ? "info" : "receiver");
        return false;
    }
    if (!r->q_ready) {
        mlxd_err(EINVAL, "mlxd_receiver_get_next_frame: start() has not been called");
        return false;
    }
    if (forked(r)) {
        forked_err("mlxd_receiver_get_next_frame");
        return false;
    }
    uint64_t w[FRAMEQ_WORDS];
    if (!frameq_wait_pop(&r->q, w, timeout_ms))
        return false;
    memset(info, 0, sizeof *info);
    info->page = (uint32_t)w[W_PAGE_FLAGS];
    info->flags = (uint32_t)(w[W_PAGE_FLAGS] >> 32);
    info->imm_data = (uint32_t)w[W_IMM];
    info->imm_psn = (uint32_t)(w[W_IMM] >> 32);
    info->received_s = (int64_t)w[W_RX_S];
    info->received_ns = (uint32_t)w[W_RX_NS];
    info->received_frame_number = w[W_RX_COUNT];
    info->frame_number = w[W_FRAME_NUMBER];
    info->frame_memory = r->o.buffer + (uint64_t)info->page * r->o.page_size;
    info->metadata_memory = info->frame_memory + r->o.metadata_offset;
    if (!(info->flags & MLXD_FRAME_NO_METADATA))
        mlxd_hsb_metadata_decode(&w[W_MD], 48, &info->metadata);
    info->dropped = atomic_load_explicit(&r->q.dropped, memory_order_relaxed);
    info->nic_ns = w[W_NIC_NS];
    atomic_fetch_add_explicit(&r->consumed, 1, memory_order_relaxed);
    return true;
}

bool mlxd_receiver_frames_ready(struct mlxd_receiver *r)
{
    return r && r->q_ready && !forked(r) && frameq_nonempty(&r->q);
}

void mlxd_receiver_set_event_handler(struct mlxd_receiver *r, mlxd_receiver_event_fn cb, void *ctx)
{
    if (!r)
        return;
    atomic_store_explicit(&r->ev_ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&r->ev_cb, cb, memory_order_release);
}

bool mlxd_receiver_next_event(struct mlxd_receiver *r, struct mlxd_receiver_event *ev)
{
    if (!r || !ev) {
        mlxd_err(EINVAL, "mlxd_receiver_next_event: NULL %s", r ? "ev" : "receiver");
        return false;
    }
    if (forked(r)) {
        forked_err("mlxd_receiver_next_event");
        return false;
    }
    return rx_evq_pop(&r->evq, ev);
}

void mlxd_receiver_set_frame_ready(struct mlxd_receiver *r, mlxd_receiver_frame_ready_fn cb, void *ctx)
{
    if (!r)
        return;
    atomic_store_explicit(&r->cb_ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&r->cb, cb, memory_order_release);
}

int mlxd_receiver_frame_check(struct mlxd_receiver *r, const struct mlxd_receiver_frame *info)
{
    if (!r || !info)
        return mlxd_err(EINVAL, "mlxd_receiver_frame_check: NULL %s", r ? "info" : "receiver");
    if (forked(r))
        return forked_err("mlxd_receiver_frame_check");
    /* started, not page_gen: close keeps page_gen, and after close the buffer may be gone */
    if (!r->started || !r->page_gen || !r->o.pages)
        return mlxd_err(EINVAL, "mlxd_receiver_frame_check: not started (start() not called, or "
                        "close() has run)");
    if (info->page >= r->o.pages)
        return mlxd_err(EINVAL, "mlxd_receiver_frame_check: page %u >= pages %u", info->page, r->o.pages);
    int verdict = MLXD_FRAME_INTACT;
    if (atomic_load_explicit(&r->page_gen[info->page], memory_order_acquire) != info->received_frame_number)
        verdict = MLXD_FRAME_OVERWRITTEN;
    if (verdict == MLXD_FRAME_INTACT && !(info->flags & MLXD_FRAME_NO_METADATA)) {
        uint8_t p[4] = { 0 };
        uint64_t off = (uint64_t)info->page * r->o.page_size + r->o.metadata_offset + MLXD_HSB_MD_PSN;
        if (r->host) {
            /* the caller's reads of the page before this read (md_snapshot.h's argument) */
            md_load_fence();
            const volatile uint8_t *v = r->host + off;
            for (int i = 0; i < 4; i++)
                p[i] = v[i];
        }
        else if (mlxd__cuda_read(p, r->o.buffer + off, 4, "mlxd_receiver_frame_check", "metadata PSN") < 0) {
            return -EIO;
        }
        uint32_t psn = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (psn != info->metadata.psn)
            verdict = MLXD_FRAME_OVERWRITTEN;
    }
    if (verdict == MLXD_FRAME_OVERWRITTEN) {
        atomic_fetch_add_explicit(&r->overwritten_after_read, 1, memory_order_relaxed);
        return verdict;
    }
    uint32_t last = atomic_load_explicit(&r->last_page, memory_order_acquire);
    uint32_t next = last + 1 == r->o.pages ? 0 : last + 1;
    return next == info->page ? MLXD_FRAME_AT_RISK : MLXD_FRAME_INTACT;
}

static void stats_accounting(struct mlxd_receiver *r, struct mlxd_receiver_stats *out)
{
    out->lost = atomic_load(&r->acct[A_LOST]);
    out->lost_link_down = atomic_load(&r->acct[A_LOST_LINK_DOWN]);
    out->missing_metadata = atomic_load(&r->acct[A_MISSING_MD]);
    out->short_frames = atomic_load(&r->acct[A_SHORT]);
    out->long_frames = atomic_load(&r->acct[A_LONG]);
    out->last_bytes_written = atomic_load(&r->acct[A_LAST_BYTES]);
    out->events = atomic_load(&r->acct[A_EVENTS]);
    out->events_dropped = rx_evq_dropped(&r->evq);
    out->port_down = atomic_load(&r->acct[A_PORT_DOWN]);
    out->port_up = atomic_load(&r->acct[A_PORT_UP]);
    out->link_down_ns = atomic_load(&r->acct[A_LINK_DOWN_NS]);
    uint64_t since = atomic_load(&r->acct[A_DOWN_SINCE]);
    if (since) {
        uint64_t now = mono_ns();
        out->link_down_ns += now > since ? now - since : 0;
    }
    out->at_close = atomic_load(&r->acct[A_AT_CLOSE]);
    out->qp_errors = atomic_load(&r->acct[A_QP_ERR]);
    out->cq_errors = atomic_load(&r->acct[A_CQ_ERR]);
    out->device_fatal = atomic_load(&r->acct[A_DEV_FATAL]);
    if (r->device[0] && r->hw_base_ok[0] && r->hw_base_ok[1]) {
        uint64_t v[2];
        if (read_hw_counter(r, hw_counter_names[0], &v[0]) &&
            read_hw_counter(r, hw_counter_names[1], &v[1])) {
            out->out_of_buffer = v[0] - r->hw_base[0];
            out->out_of_sequence = v[1] - r->hw_base[1];
            out->hw_counters_valid = true;
        }
    }
}

int mlxd_receiver_stats(struct mlxd_receiver *r, struct mlxd_receiver_stats *out)
{
    if (!r || !out)
        return mlxd_err(EINVAL, "mlxd_receiver_stats: NULL %s", r ? "out" : "receiver");
    if (forked(r))
        return forked_err("mlxd_receiver_stats");
    memset(out, 0, sizeof *out);
    out->frames = atomic_load(&r->frames);
    out->consumed = atomic_load(&r->consumed);
    out->dropped = r->q_ready ? atomic_load(&r->q.dropped) : 0;
    out->replaced = r->q_ready ? atomic_load(&r->q.replaced) : 0;
    out->consumer_wakeups = r->q_ready ? atomic_load(&r->q.wakeups) : 0;
    out->overwritten = atomic_load(&r->overwritten);
    out->overwritten_after_read = atomic_load(&r->overwritten_after_read);
    out->bad_page = atomic_load(&r->bad_page);
    out->errors = atomic_load(&r->errors);
    for (int i = 0; i < 256; i++)
        out->errors_by_syndrome[i] = atomic_load(&r->by_syndrome[i]);
    out->flushed = atomic_load(&r->flushed);
    out->hw_drops = atomic_load(&r->hw_drops);
    out->last_frame_number = atomic_load(&r->last_fn);
    if (r->rxw_path[0])
        out->rx_write_requests_valid = read_u64_file(r->rxw_path, &out->rx_write_requests);
    stats_accounting(r, out);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* queries                                                                                    */

bool mlxd_receiver_started(const struct mlxd_receiver *r)
{
    return r && r->started;
}

static bool need_started(const struct mlxd_receiver *r, const char *fn)
{
    if (r && forked(r)) {
        forked_err(fn);
        return false;
    }
    if (r && r->started)
        return true;
    mlxd_err(EINVAL, "%s: start() has not been called", fn);
    return false;
}

uint32_t mlxd_receiver_qp_number(const struct mlxd_receiver *r)
{
    return need_started(r, "mlxd_receiver_qp_number") ? r->qpn : 0;
}

uint32_t mlxd_receiver_rkey(const struct mlxd_receiver *r)
{
    return need_started(r, "mlxd_receiver_rkey") ? r->rkey : 0;
}

uint64_t mlxd_receiver_external_frame_memory(const struct mlxd_receiver *r)
{
    return need_started(r, "mlxd_receiver_external_frame_memory") ? r->iova : 0;
}

size_t mlxd_receiver_frame_size(const struct mlxd_receiver *r) { return r ? r->o.frame_size : 0; }
size_t mlxd_receiver_page_size(const struct mlxd_receiver *r) { return r ? r->o.page_size : 0; }
unsigned mlxd_receiver_pages(const struct mlxd_receiver *r) { return r ? r->o.pages : 0; }
size_t mlxd_receiver_metadata_offset(const struct mlxd_receiver *r) { return r ? r->o.metadata_offset : 0; }
uint32_t mlxd_receiver_local_ipv4(const struct mlxd_receiver *r) { return r && r->started ? r->local_ip : 0; }

int mlxd_receiver_gid_index(const struct mlxd_receiver *r)
{
    if (!need_started(r, "mlxd_receiver_gid_index"))
        return -EINVAL;
    return r->gid_index;
}
