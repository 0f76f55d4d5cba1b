/* nic_engine.c: the emulated ConnectX data engine, one thread per opened device.
 *
 * The thread loops: take dev->lock (trylock: the kernel half's hooks may hold it while they
 * join us), look at every QP's doorbell records (SQ: dbrec[1], RQ: dbrec[0]) and every CQ's arm
 * words (dbrec[1] and UAR + 0x20), execute what they announce, receive a batch of packets from
 * the UDP socket, run the RC timers, send what was built, drop the lock.  When passes find no
 * work it keeps polling (yielding the CPU) for MLXD_EMU_SPIN_US (default 2000 us), then sleeps
 * in ppoll() on the socket: 50 us at a time for 100 ms, then MLXD_EMU_POLL_US (default 1000
 * us).  So a doorbell is noticed within a few microseconds while traffic flows, within ~50 us
 * after a pause, and within ~1 ms after a long idle period; a packet wakes the engine at once.
 *
 * Memory ordering with the process (mlx5 ABI: rdma-core providers/mlx5/cq.c and qp.c,
 * util/udma_barrier.h):
 * doorbell records are read with acquire semantics before the WQEs they announce; a CQE's
 * fields are stored before its op_own byte, which is stored with release semantics. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "nic.h"

#define API __attribute__((visibility("default")))

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* mlxd_emu_bench_park (bench_inject.c): every engine idles without looking at anything */
atomic_bool nic_engines_parked;
static struct nic_dev *registry[EMU_MAX_DEVICES];
/* faults set through the API before a device is opened (or kept across reopen) */
static struct mlxd_emu_fault pending_fault[EMU_MAX_DEVICES];
static bool pending_fault_set[EMU_MAX_DEVICES];

uint64_t nic_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


/* The engine passes of this process's device whose port is `port`, in *passes; false: none. */
bool nic_local_passes(const struct sockaddr_in *port, uint64_t *passes)
{
    bool found = false;
    pthread_mutex_lock(&reg_lock);
    for (unsigned i = 0; i < EMU_MAX_DEVICES && !found; i++) {
        const struct nic_dev *d = registry[i];
        if (d && d->self.sin_addr.s_addr == port->sin_addr.s_addr && d->self.sin_port == port->sin_port) {
            *passes = atomic_load_explicit(&d->passes, memory_order_relaxed);
            found = true;
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

struct nic_dev *nic_dev_get(unsigned index)
{
    return index < EMU_MAX_DEVICES ? registry[index] : NULL;
}

/* ---- services of the kernel half: weak stand-ins so the NIC half links (and its unit test
 * runs) before the kernel half provides them. */
#ifndef NIC_NO_WEAK_SERVICES
__attribute__((weak)) void emu_async_event(int async_fd, uint64_t element, uint32_t event_type)
{
    (void)async_fd; (void)element; (void)event_type;
}
__attribute__((weak)) void emu_comp_event(struct emu_cq *cq) { (void)cq; }
#endif

/* ---- QP error handling ------------------------------------------------------------------- */
void nic_qp_to_err(struct nic_qp *q, int event)
{
    struct emu_qp *qp = q->qp;
    if (qp->state == NIC_QPS_ERR) return;
    qp->state = NIC_QPS_ERR;
    if (event >= 0) {
        q->nd->st.async_events++;
        emu_async_event(qp->async_fd, qp->user_handle, (uint32_t)event);
    }
    nic_req_flush(q);
    nic_resp_flush_rq(q);
    /* a QP attached to an SRQ: the SRQ's WQEs are not flushed (only the one bound to an
     * unfinished message, by nic_resp_flush_rq); once its last WQE has completed, the QP raises
     * IB_EVENT_QP_LAST_WQE_REACHED (IB spec 10.2.9.5, 11.6.3.1; kernel hw/mlx5/qp.c maps
     * MLX5_EVENT_TYPE_SRQ_LAST_WQE to it), whatever moved it to ERR */
    if (qp->srq) {
        q->nd->st.async_events++;
        emu_async_event(qp->async_fd, qp->user_handle, NIC_EV_QP_LAST_WQE_REACHED);
    }
}

void nic_count_out_of_seq(struct nic_dev *nd)
{
    nd->st.rx_out_of_seq++;
    atomic_fetch_add_explicit(&nd->dev->out_of_sequence, 1, memory_order_relaxed);
}

static uint32_t mtu_bytes(struct nic_qp *q)
{
    uint32_t m = q->qp->attr.path_mtu >= 1 && q->qp->attr.path_mtu <= 5
                     ? 128u << q->qp->attr.path_mtu : 1024;
    uint32_t port = q->nd->dev->cfg.mtu ? q->nd->dev->cfg.mtu : 4096;
    if (nic_qp_is_ud(q)) return port;        /* a datagram QP has no path: the port's MTU */
    return m < port ? m : port;
}

static void qp_set_peer(struct nic_qp *q)
{
    const uint8_t *g = q->qp->attr.dgid;
    memset(&q->peer, 0, sizeof q->peer);
    q->peer.sin_family = AF_INET;
    memcpy(&q->peer.sin_addr, g + 12, 4);       /* ::ffff:a.b.c.d (IPv4-mapped GID) */
    uint16_t port = q->nd->dev->cfg.dst_udp_port ? q->nd->dev->cfg.dst_udp_port : 4791;
    q->peer.sin_port = htons(port);
}

/* ---- hooks ---------------------------------------------------------------------------------- */
int emu_nic_qp_create(struct emu_qp *qp)
{
    struct nic_dev *nd = qp->ctx && qp->ctx->dev ? qp->ctx->dev->nic : NULL;
    if (!nd) return -ENODEV;
    if (qp->type < 2 || qp->type > 4) return 0;   /* RC, UC and UD only: others are inert */
    struct nic_qp *q = calloc(1, sizeof *q);
    if (!q) return -ENOMEM;
    q->cap = qp->sq_wqe_cnt ? qp->sq_wqe_cnt : 1;
    q->msgs = calloc(q->cap, sizeof *q->msgs);
    if (!q->msgs) { free(q); return -ENOMEM; }
    q->qp = qp;
    q->nd = nd;
    q->bfregs = nic_doorbell_bfregs(qp);
    qp->nic = q;
    q->next = nd->qps;
    nd->qps = q;
    return 0;
}

void emu_nic_qp_destroy(struct emu_qp *qp)
{
    struct nic_qp *q = qp->nic;
    if (!q) return;
    for (struct nic_qp **pp = &q->nd->qps; *pp; pp = &(*pp)->next)
        if (*pp == q) { *pp = q->next; break; }
    /* CQEs a compressing CQ still holds reach the ring before QP_DESTROY returns, as a
     * ConnectX's do: after it, the driver cleans the QP's CQEs from the CQ (nic_cqe_comp.c) */
    struct emu_cq *cqs[2] = { qp->send_cq, qp->recv_cq };
    for (int i = 0; i < 2; i++)
        if (cqs[i] && cqs[i]->nic && ((struct nic_cq *)cqs[i]->nic)->zip)
            nic_cqe_comp_flush(q->nd, cqs[i]->nic);
    qp->nic = NULL;
    free(q->msgs);
    free(q);
}

void emu_nic_qp_modified(struct emu_qp *qp, uint32_t old_state)
{
    struct nic_qp *q = qp->nic;
    if (!q) return;
    q->mtu = mtu_bytes(q);
    qp_set_peer(q);
    switch (qp->state) {
    case NIC_QPS_RESET:
        nic_req_reset(q);
        nic_resp_reset(q);
        break;
    case NIC_QPS_RTR:
        if (old_state != NIC_QPS_RTR) {
            q->epsn = qp->attr.rq_psn & MLXD_ROCE_PSN_MASK;
            q->in_msg = q->uc_drop = q->nak_sent = q->ack_pending = false;
        }
        break;
    case NIC_QPS_RTS:
        if (old_state == NIC_QPS_RTR || old_state == NIC_QPS_INIT) {
            q->next_psn = q->psn_hi = qp->attr.sq_psn & MLXD_ROCE_PSN_MASK;
            q->retries_left = qp->attr.retry_cnt;
            q->rnr_left = qp->attr.rnr_retry;
        }
        break;
    case NIC_QPS_ERR:
        qp->state = NIC_QPS_RTS;       /* let nic_qp_to_err do the transition and the flush */
        nic_qp_to_err(q, -1);
        break;
    default:
        break;
    }
}

int emu_nic_cq_create(struct emu_cq *cq)
{
    struct nic_dev *nd = cq->ctx && cq->ctx->dev ? cq->ctx->dev->nic : NULL;
    if (!nd) return -ENODEV;
    struct nic_cq *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->cq = cq;
    c->last_dbrec_arm = cq->dbrec ? be32_load(&cq->dbrec[1]) : 0;
    c->last_uar_arm = 0;
    cq->nic = c;
    cq->pi = 0;
    cq->armed = cq->armed_solicited = false;
    c->next = nd->cqs;
    nd->cqs = c;
    return 0;
}

void emu_nic_cq_destroy(struct emu_cq *cq)
{
    struct nic_cq *c = cq->nic;
    if (!c) return;
    struct nic_dev *nd = cq->ctx->dev->nic;
    if (nd)
        for (struct nic_cq **pp = &nd->cqs; *pp; pp = &(*pp)->next)
            if (*pp == c) { *pp = c->next; break; }
    cq->nic = NULL;
    free(c->zip);
    free(c);
}

__attribute__((weak)) void emu_sysfs_publish_counters(struct emu_device *dev) { (void)dev; }

/* hw_counters in sysfs for other processes: at most every 10 ms while the value changes. */
static void publish_counters(struct nic_dev *nd, uint64_t now, bool force)
{
    /* any change of the counters changes their sum */
    uint64_t v = atomic_load_explicit(&nd->dev->rx_write_requests, memory_order_relaxed) +
                 atomic_load_explicit(&nd->dev->out_of_buffer, memory_order_relaxed) +
                 atomic_load_explicit(&nd->dev->out_of_sequence, memory_order_relaxed);
    if (v == nd->cnt_published || (!force && now - nd->cnt_pub_ns < 10000000)) return;
    emu_sysfs_publish_counters(nd->dev);
    nd->cnt_published = v;
    nd->cnt_pub_ns = now;
}

/* Stand-in for builds without the kernel half (nic_unit): the contexts the engine knows from
 * their CQs and QPs.  The kernel half's version lists every context of the device. */
__attribute__((weak)) unsigned emu_device_async_fds(struct emu_device *dev, int *fds, unsigned max)
{
    struct nic_dev *nd = dev->nic;
    unsigned n = 0;
    for (struct nic_cq *c = nd ? nd->cqs : NULL; c; c = c->next) {
        int fd = c->cq->ctx ? c->cq->ctx->default_async_fd : -1;
        bool seen = fd < 0;
        for (unsigned i = 0; i < n && !seen; i++) seen = fds[i] == fd;
        if (!seen && n < max) fds[n++] = fd;
    }
    for (struct nic_qp *q = nd ? nd->qps : NULL; q; q = q->next) {
        int fd = q->qp->ctx ? q->qp->ctx->default_async_fd : -1;
        bool seen = fd < 0;
        for (unsigned i = 0; i < n && !seen; i++) seen = fds[i] == fd;
        if (!seen && n < max) fds[n++] = fd;
    }
    return n;
}

/* Async port event (element = port 1) to the async fd of every open context of the device,
 * whether or not it owns objects (emu_device_async_fds). */
static void port_event(struct nic_dev *nd, uint32_t type)
{
    int fds[256];
    unsigned n = emu_device_async_fds(nd->dev, fds, 256);
    for (unsigned i = 0; i < n; i++) {
        nd->st.async_events++;
        emu_async_event(fds[i], 1, type);
    }
}

void emu_nic_port_event(struct emu_device *dev, bool up)
{
    struct nic_dev *nd = dev->nic;
    dev->cfg.link_up = up;
    if (nd) port_event(nd, up ? NIC_EV_PORT_ACTIVE : NIC_EV_PORT_ERR);
}

/* ---- the engine loop --------------------------------------------------------------------- */
static int poll_rq_flush(struct nic_qp *q)
{
    /* in ERR, receives posted later are flushed as they appear */
    if (q->qp->state != NIC_QPS_ERR || !q->qp->rq_wqe_cnt || !q->qp->dbrec) return 0;
    uint16_t pi = (uint16_t)__builtin_bswap32(__atomic_load_n(&q->qp->dbrec[0], __ATOMIC_ACQUIRE));
    if (pi == q->rq_ci) return 0;
    nic_resp_flush_rq(q);
    return 1;
}

static int engine_pass(struct nic_dev *nd)
{
    int work = 0;
    nd->now_ns = nic_now_ns();
    for (struct nic_qp *q = nd->qps; q; q = q->next) {
        work += nic_req_progress(q);
        nic_req_timers(q);
        work += poll_rq_flush(q);
    }
    work += wire_rx(nd);
    for (struct nic_qp *q = nd->qps; q; q = q->next) {
        if (q->ack_pending) nic_resp_flush_acks(q);
        work += nic_req_progress(q);    /* ACKs may have opened the window */
    }
    /* the pass's burst of CQEs ends: a compressing CQ writes what it held (nic_cqe_comp.c) */
    for (struct nic_cq *c = nd->cqs; c; c = c->next) if (c->zip) nic_cqe_comp_flush(nd, c);
    for (struct nic_cq *c = nd->cqs; c; c = c->next) work += nic_cq_poll_arm(nd, c);
    wire_tx_flush(nd);
    return work;
}

/* Idle policy: for spin_us after the last work the engine only yields the CPU between passes
 * (a doorbell is seen within microseconds: request/response traffic stays fast; if a yield
 * returns late, 1 us sleeps replace the yields for a while, see below); then it sleeps
 * in ppoll() on its socket (a packet wakes it at once), 50 us at a time for the next 100 ms, then
 * up to poll_max_us (default 1 ms): an engine idle for long costs ~1000 wakeups per second. */
static void *engine_main(void *arg)
{
    struct nic_dev *nd = arg;
    uint64_t last_work = nic_now_ns();
    unsigned yield_slow = 0;    /* idle passes left that sleep instead of yielding */
    while (!atomic_load_explicit(&nd->stop, memory_order_acquire)) {
        if (atomic_load_explicit(&nic_engines_parked, memory_order_relaxed)) {
            /* parked (a benchmark that writes CQEs itself): no pass, no packet; packets wait in
             * the socket's buffer.  Sleeping, not polling the socket: a packet must not wake
             * the engine either.  Unparked, it goes on within 10 ms. */
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            last_work = nic_now_ns();
            continue;
        }
        int work = 0;
        if (pthread_mutex_trylock(&nd->dev->lock) == 0) {
            work = engine_pass(nd);
            atomic_fetch_add_explicit(&nd->passes, 1, memory_order_relaxed);
            if (!work) pcap_writer_flush(nd);
            pthread_mutex_unlock(&nd->dev->lock);
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
            continue;
        }
        uint64_t now = nd->now_ns;
        publish_counters(nd, now, false);
        if (work) { last_work = now; continue; }
        uint64_t idle_us = (now - last_work) / 1000;
        if (idle_us < nd->spin_us) {
            /* A yield can hand the core to a thread that busy-polls its CQ without system
             * calls (rdma-core's programs do) for a whole scheduler slice: milliseconds per
             * doorbell on a busy machine.  Once a yield came back late, sleep instead (~50 us
             * with the default timer slack; the sleeper preempts the poller on waking) for
             * the next 1000 idle passes, then try yielding again. */
            if (yield_slow) {
                yield_slow--;
                struct timespec ts = {0, 1000};
                nanosleep(&ts, NULL);
            } else {
                sched_yield();
                if (nic_now_ns() - now > 200000) yield_slow = 1000;
            }
            continue;
        }
        unsigned us = idle_us < 100000 ? 50 : nd->poll_max_us;
        if (us > nd->poll_max_us) us = nd->poll_max_us;
        struct pollfd pfd[2] = {{.fd = nd->sock, .events = POLLIN},
                                {.fd = nd->share ? nd->share->inbox : -1, .events = POLLIN}};
        struct timespec ts = {0, (long)us * 1000};
        ppoll(pfd, 2, &ts, NULL);
    }
    return NULL;
}

int emu_nic_device_open(struct emu_device *dev)
{
    if (dev->nic) return 0;
    unsigned idx = dev->cfg.index;
    if (idx >= EMU_MAX_DEVICES) return -EINVAL;
    struct nic_dev *nd = calloc(1, sizeof *nd);
    if (!nd) return -ENOMEM;
    nd->dev = dev;
    nd->sock = -1;
    nd->st.sz = sizeof nd->st;
    nd->cnt_published = ~0ull;       /* the first pass writes the file (it may hold a stale value) */
    nd->tx = calloc(NIC_TX_BATCH, sizeof *nd->tx);
    nd->rx = calloc(NIC_RX_BATCH, sizeof *nd->rx);
    int rc = -ENOMEM;
    if (!nd->tx || !nd->rx) goto fail;
    const char *e = getenv("MLXD_EMU_POLL_US");
    nd->poll_max_us = e && atoi(e) > 0 ? (unsigned)atoi(e) : 1000;
    if (nd->poll_max_us < 20) nd->poll_max_us = 20;
    e = getenv("MLXD_EMU_SPIN_US");
    nd->spin_us = e && *e ? (unsigned)atoi(e) : 2000;
    rc = wire_open(nd);
    if (rc) goto fail;
    pthread_mutex_lock(&reg_lock);
    if (pending_fault_set[idx]) {
        nd->fault.f = pending_fault[idx];
        nd->fault.active = true;
        nd->fault.rng = nd->fault.f.seed ? nd->fault.f.seed : 0x9e3779b97f4a7c15ull;
    }
    pthread_mutex_unlock(&reg_lock);
    if (!nd->fault.active) wire_fault_parse_env(nd);
    char path[512] = "";
    if (dev->cfg.pcap_path[0]) {
        snprintf(path, sizeof path, "%s", dev->cfg.pcap_path);
    } else {
        char name[32];
        snprintf(name, sizeof name, "MLXD_EMU_PCAP_%u", idx);
        const char *p = getenv(name);
        if (!p || !*p) p = getenv("MLXD_EMU_PCAP");
        if (p && *p) {
            const char *d = strstr(p, "%d");
            if (d) snprintf(path, sizeof path, "%.*s%u%s", (int)(d - p), p, idx, d + 2);
            else snprintf(path, sizeof path, "%s", p);
        }
    }
    if (path[0] && (rc = pcap_writer_open(nd, path))) goto fail_wire;
    dev->nic = nd;
    atomic_store(&nd->stop, false);
    if (pthread_create(&nd->thread, NULL, engine_main, nd)) { rc = -EAGAIN; goto fail_pcap; }
    /* named now, not when it first runs: a peer looks for it by name (nic_peer.c), also before
     * the scheduler has given it a CPU */
    pthread_setname_np(nd->thread, NIC_THREAD_NAME);
    pthread_mutex_lock(&reg_lock);
    registry[idx] = nd;
    pthread_mutex_unlock(&reg_lock);
    return 0;
fail_pcap:
    dev->nic = NULL;
    pcap_writer_close(nd);
fail_wire:
    wire_close(nd);
fail:
    free(nd->tx);
    free(nd->rx);
    free(nd);
    return rc;
}

void emu_nic_device_close(struct emu_device *dev)
{
    struct nic_dev *nd = dev->nic;
    if (!nd) return;
    pthread_mutex_lock(&reg_lock);
    if (registry[dev->cfg.index] == nd) registry[dev->cfg.index] = NULL;
    pthread_mutex_unlock(&reg_lock);
    /* The caller holds dev->lock; the engine only ever trylocks it, so it cannot be blocked on
     * it and the join completes. */
    atomic_store_explicit(&nd->stop, true, memory_order_release);
    pthread_join(nd->thread, NULL);
    publish_counters(nd, nic_now_ns(), true);
    wire_tx_flush(nd);
    pcap_writer_close(nd);
    wire_close(nd);
    /* objects still registered (the kernel half destroys them first, normally) */
    while (nd->qps) emu_nic_qp_destroy(nd->qps->qp);
    while (nd->cqs) emu_nic_cq_destroy(nd->cqs->cq);
    dev->nic = NULL;
    free(nd->tx);
    free(nd->rx);
    free(nd);
}

/* ---- public API (nic_api.h) ---------------------------------------------------------------- */
static int fault_check(const struct mlxd_emu_fault *f)
{
    if (f->sz != sizeof *f) return -EINVAL;
    const double r[4] = {f->drop_rate, f->dup_rate, f->reorder_rate, f->corrupt_rate};
    for (int i = 0; i < 4; i++)
        if (!(r[i] >= 0 && r[i] <= 1)) return -EINVAL;
    if (f->n_drop_idx > MLXD_EMU_FAULT_MAX_IDX || f->n_dup_idx > MLXD_EMU_FAULT_MAX_IDX ||
        f->n_reorder_idx > MLXD_EMU_FAULT_MAX_IDX || f->n_corrupt_idx > MLXD_EMU_FAULT_MAX_IDX)
        return -EINVAL;
    return 0;
}

/* Returns the open device `index` with its dev->lock held, or NULL.  reg_lock is only tried
 * under dev->lock's absence: the kernel half calls emu_nic_device_close() with dev->lock held
 * and that takes reg_lock, so we never wait for dev->lock while holding reg_lock. */
static struct nic_dev *lock_dev(unsigned index)
{
    for (;;) {
        pthread_mutex_lock(&reg_lock);
        struct nic_dev *nd = registry[index];
        if (!nd) { pthread_mutex_unlock(&reg_lock); return NULL; }
        if (pthread_mutex_trylock(&nd->dev->lock) == 0) {
            pthread_mutex_unlock(&reg_lock);
            return nd;
        }
        pthread_mutex_unlock(&reg_lock);
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

API int mlxd_emu_fault_set(unsigned index, const struct mlxd_emu_fault *f)
{
    if (index >= EMU_MAX_DEVICES) return -EINVAL;
    if (f && fault_check(f)) return -EINVAL;
    pthread_mutex_lock(&reg_lock);
    pending_fault_set[index] = f != NULL;
    if (f) pending_fault[index] = *f;
    pthread_mutex_unlock(&reg_lock);
    struct nic_dev *nd = lock_dev(index);
    if (nd) {
        memset(&nd->fault, 0, sizeof nd->fault);
        if (f) {
            nd->fault.f = *f;
            nd->fault.active = true;
            nd->fault.rng = f->seed ? f->seed : 0x9e3779b97f4a7c15ull;
        }
        pthread_mutex_unlock(&nd->dev->lock);
    }
    return 0;
}

/* The kernel half's mlxd_emu_set_link also updates sysfs and QUERY_PORT; use it when linked. */
extern int mlxd_emu_set_link(unsigned dev, bool up) __attribute__((weak));

API int mlxd_emu_port_set(unsigned index, bool up)
{
    if (index >= EMU_MAX_DEVICES) return -EINVAL;
    if (mlxd_emu_set_link) {
        if (!nic_dev_get(index)) return -ENODEV;
        return mlxd_emu_set_link(index, up);
    }
    struct nic_dev *nd = lock_dev(index);
    if (!nd) return -ENODEV;
    if (nd->dev->cfg.link_up != up) emu_nic_port_event(nd->dev, up);
    pthread_mutex_unlock(&nd->dev->lock);
    return 0;
}

/* Device fatal (the kernel's mlx5_ib_handle_internal_error on MLX5_DEV_EVENT_SYS_ERROR: every
 * QP flushed to the error state, IB_EVENT_DEVICE_FATAL to every context); a QP's catastrophic
 * error (QP to ERR, IB_EVENT_QP_FATAL / _REQ_ERR / _ACCESS_ERR); a CQ error (the CQ stops
 * taking CQEs, IB_EVENT_CQ_ERR). */
API int mlxd_emu_inject_event(unsigned index, uint32_t type, uint32_t num)
{
    if (index >= EMU_MAX_DEVICES) return -EINVAL;
    if (type != NIC_EV_CQ_ERR && type != NIC_EV_QP_FATAL && type != NIC_EV_QP_REQ_ERR &&
        type != NIC_EV_QP_ACCESS_ERR && type != NIC_EV_DEVICE_FATAL)
        return -EINVAL;
    struct nic_dev *nd = lock_dev(index);
    if (!nd) return -ENODEV;
    int rc = -ENOENT;
    if (type == NIC_EV_DEVICE_FATAL) {
        for (struct nic_qp *q = nd->qps; q; q = q->next) nic_qp_to_err(q, -1);
        port_event(nd, NIC_EV_DEVICE_FATAL);
        rc = 0;
    } else if (type == NIC_EV_CQ_ERR) {
        for (struct nic_cq *c = nd->cqs; c; c = c->next)
            if (c->cq->cqn == num || num == UINT32_MAX) {
                c->overrun = true;
                c->failed = true;
                nd->st.async_events++;
                emu_async_event(c->cq->async_fd, c->cq->user_handle, NIC_EV_CQ_ERR);
                rc = 0;
            }
    } else {
        for (struct nic_qp *q = nd->qps; q; q = q->next)
            if (q->qp->qpn == num || num == UINT32_MAX) {
                nic_qp_to_err(q, (int)type);
                rc = 0;
            }
    }
    wire_tx_flush(nd);
    pthread_mutex_unlock(&nd->dev->lock);
    return rc;
}

API int mlxd_emu_pcap(unsigned index, const char *path)
{
    if (index >= EMU_MAX_DEVICES) return -EINVAL;
    struct nic_dev *nd = lock_dev(index);
    if (!nd) return -ENODEV;
    wire_tx_flush(nd);
    pcap_writer_close(nd);
    int rc = path ? pcap_writer_open(nd, path) : 0;
    pthread_mutex_unlock(&nd->dev->lock);
    return rc;
}

API int mlxd_emu_nic_stats(unsigned index, struct mlxd_emu_nic_stats *st)
{
    if (index >= EMU_MAX_DEVICES || !st || st->sz != sizeof *st) return -EINVAL;
    struct nic_dev *nd = lock_dev(index);
    if (!nd) return -ENODEV;
    *st = nd->st;
    st->rx_dropped_socket = wire_rx_socket_drops(nd);
    pthread_mutex_unlock(&nd->dev->lock);
    return 0;
}
