/* events.c: completion channels and async-event files (k: core/uverbs_main.c
 * ib_uverbs_event_read, ib_uverbs_comp_handler, ib_uverbs_async_handler).
 *
 * Each event file is a real eventfd (O_CLOEXEC, like the kernel's anon inode) whose counter is
 * nonzero exactly while events are queued, so poll/ppoll/select/epoll on it work natively and
 * need no interposition.  read() is interposed and returns one descriptor per call:
 * struct ib_uverbs_comp_event_desc (8 B) or struct ib_uverbs_async_event_desc (16 B); a buffer
 * smaller than one descriptor gives EINVAL; nothing queued gives EAGAIN with O_NONBLOCK, else
 * blocks.  Reading an event increments the owning object's *_events_reported counter, which the
 * destroy responses return; destroying an object drops its unread events. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include "kernel.h"

static void q_signal(struct k_evq *q)    /* ev_lock held; queue went empty -> nonempty */
{
    uint64_t one = 1;
    if (q->chan.fd >= 0) (void)!emu_real.write(q->chan.fd, &one, sizeof one);
}

static void q_drain_signal(struct k_evq *q)   /* ev_lock held; queue became empty */
{
    uint64_t v;
    if (q->chan.fd < 0) return;
    int fl = fcntl(q->chan.fd, F_GETFL);
    if (!(fl & O_NONBLOCK)) fcntl(q->chan.fd, F_SETFL, fl | O_NONBLOCK);
    (void)!emu_real.read(q->chan.fd, &v, sizeof v);
    if (!(fl & O_NONBLOCK)) fcntl(q->chan.fd, F_SETFL, fl);
}

struct k_evq *emu_evq_new(struct emu_file *f, bool is_async)
{
    struct k_evq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    int fd = eventfd(0, EFD_CLOEXEC);
    if (fd < 0) { free(q); return NULL; }
    if (fd >= EMU_MAX_FD) { emu_real.close(fd); free(q); errno = EMFILE; return NULL; }
    q->chan.fd = fd;
    q->chan.ctx = &f->ctx;
    q->is_async = is_async;
    q->fd_open = true;
    pthread_mutex_lock(&emu_g.ev_lock);
    q->next = emu_g.evqs;
    emu_g.evqs = q;
    pthread_mutex_unlock(&emu_g.ev_lock);
    emu_fdtab[fd].p = q;
    __atomic_store_n(&emu_fdtab[fd].kind, FD_EVQ, __ATOMIC_RELEASE);
    emu_g.live[is_async ? EMU_OBJ_ASYNC_EVENT : EMU_OBJ_COMP_CHANNEL]++;
    return q;
}

struct k_evq *emu_evq_by_fd(int fd)
{
    if (fd < 0 || fd >= EMU_MAX_FD || emu_fdtab[fd].kind != FD_EVQ) return NULL;
    return emu_fdtab[fd].p;
}

static void q_free_events(struct k_evq *q)
{
    for (struct k_event *e = q->head, *n; e; e = n) { n = e->next; free(e); }
    q->head = q->tail = NULL;
    q->nqueued = 0;
}

static void q_unlink_free(struct k_evq *q)   /* ev_lock held */
{
    for (struct k_evq **pp = &emu_g.evqs; *pp; pp = &(*pp)->next)
        if (*pp == q) { *pp = q->next; break; }
    q_free_events(q);
    free(q);
}

/* The process closed the fd (emu_g.lock held, table entry already cleared). */
void emu_evq_user_close(struct k_evq *q)
{
    /* the file's handle for it goes with the fd (the kernel's uobject dies with its file) */
    struct emu_context *ctx = q->chan.ctx;
    struct emu_file *f = ctx ? ctx->objs : NULL;
    for (uint32_t h = 0; f && h < f->nobjs; h++)
        if (f->objs[h].obj == q) { emu_uobj_free(f, h); break; }
    pthread_mutex_lock(&emu_g.ev_lock);
    int fd = q->chan.fd;
    q->fd_open = false;
    q->chan.fd = -1;
    q_free_events(q);
    emu_g.live[q->is_async ? EMU_OBJ_ASYNC_EVENT : EMU_OBJ_COMP_CHANNEL]--;
    if (q->chan.ctx && q->is_async) {
        struct emu_context *ctx = q->chan.ctx;
        if (ctx->default_async_fd == fd) ctx->default_async_fd = -1;
    }
    bool gone = !q->refs;
    if (gone) q_unlink_free(q);
    pthread_mutex_unlock(&emu_g.ev_lock);
    if (fd >= 0) emu_real.close(fd);
}

void emu_evq_put(struct k_evq *q)
{
    if (!q) return;
    pthread_mutex_lock(&emu_g.ev_lock);
    if (q->refs) q->refs--;
    if (!q->refs && !q->fd_open) q_unlink_free(q);
    pthread_mutex_unlock(&emu_g.ev_lock);
}

void emu_evq_purge_owner(struct k_evq *q, void *owner)
{
    if (!q) return;
    pthread_mutex_lock(&emu_g.ev_lock);
    struct k_event **pp = &q->head, *last = NULL;
    while (*pp) {
        struct k_event *e = *pp;
        if (e->owner == owner) { *pp = e->next; free(e); q->nqueued--; continue; }
        last = e;
        pp = &e->next;
    }
    q->tail = last;
    if (!q->nqueued) q_drain_signal(q);
    pthread_mutex_unlock(&emu_g.ev_lock);
}

void emu_evq_detach_ctx(struct emu_context *ctx)
{
    pthread_mutex_lock(&emu_g.ev_lock);
    for (struct k_evq *q = emu_g.evqs; q; q = q->next)
        if (q->chan.ctx == ctx) q->chan.ctx = NULL;
    pthread_mutex_unlock(&emu_g.ev_lock);
}

int emu_evq_push(struct k_evq *q, uint64_t a, uint32_t type, uint32_t *counter, void *owner)
{
    if (!q || !q->fd_open) return 0;       /* nobody can read it: dropped, as in the kernel */
    struct k_event *e = malloc(sizeof *e);
    if (!e) return -ENOMEM;                 /* the kernel drops on GFP_ATOMIC failure too */
    e->next = NULL;
    e->a = a;
    e->type = type;
    e->counter = counter;
    e->owner = owner;
    if (q->tail) q->tail->next = e; else q->head = e;
    q->tail = e;
    if (q->nqueued++ == 0) q_signal(q);
    return 0;
}

ssize_t emu_evq_read(struct k_evq *q, void *buf, size_t count)
{
    size_t need = q->is_async ? sizeof(struct ib_uverbs_async_event_desc)
                              : sizeof(struct ib_uverbs_comp_event_desc);
    for (;;) {
        pthread_mutex_lock(&emu_g.ev_lock);
        if (!q->fd_open) { pthread_mutex_unlock(&emu_g.ev_lock); return -EBADF; }
        int fd = q->chan.fd;
        if (q->head) {
            /* k: ib_uverbs_event_read: too-small buffer -> EINVAL, event stays queued */
            if (count < need) { pthread_mutex_unlock(&emu_g.ev_lock); return -EINVAL; }
            struct k_event *e = q->head;
            uint8_t out[16];
            memset(out, 0, sizeof out);
            if (q->is_async) {
                struct ib_uverbs_async_event_desc d = { .element = e->a, .event_type = e->type };
                memcpy(out, &d, sizeof d);
            } else {
                struct ib_uverbs_comp_event_desc d = { .cq_handle = e->a };
                memcpy(out, &d, sizeof d);
            }
            if (emu_copy_to_user((uintptr_t)buf, out, need)) {
                pthread_mutex_unlock(&emu_g.ev_lock);
                return -EFAULT;
            }
            q->head = e->next;
            if (!q->head) q->tail = NULL;
            if (e->counter) ++*e->counter;
            free(e);
            if (--q->nqueued == 0) q_drain_signal(q);
            pthread_mutex_unlock(&emu_g.ev_lock);
            return (ssize_t)need;
        }
        int fl = fcntl(fd, F_GETFL);
        pthread_mutex_unlock(&emu_g.ev_lock);
        if (fl >= 0 && (fl & O_NONBLOCK)) return -EAGAIN;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, -1) < 0 && errno == EINTR) return -EINTR;
    }
}

/* ---- services for the NIC half (emu.h) ---- */
EMU_API void emu_async_event(int async_fd, uint64_t element, uint32_t event_type)
{
    pthread_mutex_lock(&emu_g.ev_lock);
    struct k_evq *q = NULL;
    for (struct k_evq *it = emu_g.evqs; it; it = it->next)
        if (it->is_async && it->fd_open && it->chan.fd == async_fd) { q = it; break; }
    if (q) {
        /* attribute the event to the CQ/QP whose user_handle it names, for events_reported */
        uint32_t *counter = NULL;
        void *owner = NULL;
        struct emu_context *ctx = q->chan.ctx;
        if (ctx && event_type != EMU_EV_PORT_ACTIVE && event_type != EMU_EV_PORT_ERR &&
            event_type != EMU_EV_DEVICE_FATAL && event_type != EMU_EV_GID_CHANGE &&
            event_type != EMU_EV_LID_CHANGE && event_type != EMU_EV_PKEY_CHANGE &&
            event_type != EMU_EV_SM_CHANGE && event_type != EMU_EV_CLIENT_REREGISTER) {
            struct emu_file *f = ctx->objs;
            for (uint32_t h = 0; f && h < f->nobjs && !owner; h++) {
                struct k_uobj *u = &f->objs[h];
                if (u->kind == UO_QP && ((struct k_qp *)u->obj)->pub.user_handle == element &&
                    event_type != EMU_EV_CQ_ERR && event_type != EMU_EV_SRQ_LIMIT_REACHED &&
                    event_type != EMU_EV_SRQ_ERR) {
                    owner = u->obj;
                    counter = &((struct k_qp *)u->obj)->pub.events_reported;
                } else if (u->kind == UO_SRQ && (event_type == EMU_EV_SRQ_LIMIT_REACHED ||
                                                 event_type == EMU_EV_SRQ_ERR) &&
                           ((struct k_srq *)u->obj)->pub.user_handle == element) {
                    owner = u->obj;
                    counter = &((struct k_srq *)u->obj)->pub.events_reported;
                } else if (u->kind == UO_CQ && event_type == EMU_EV_CQ_ERR &&
                           ((struct k_cq *)u->obj)->pub.user_handle == element) {
                    owner = u->obj;
                    counter = &((struct k_cq *)u->obj)->pub.async_events_reported;
                }
            }
        }
        emu_evq_push(q, element, event_type, counter, owner);
    }
    pthread_mutex_unlock(&emu_g.ev_lock);
}

/* Every open file of the device with a context and an async-event file (emu.h). */
unsigned emu_device_async_fds(struct emu_device *dev, int *fds, unsigned max)
{
    unsigned n = 0;
    for (struct emu_file *f = emu_g.files; f && n < max; f = f->next) {
        if (f->ctx.dev != dev || !f->ctx.has_ucontext || f->closing) continue;
        int fd = f->ctx.default_async_fd;
        if (fd < 0) continue;
        bool seen = false;
        for (unsigned i = 0; i < n && !seen; i++) seen = fds[i] == fd;
        if (!seen) fds[n++] = fd;
    }
    return n;
}

EMU_API void emu_comp_event(struct emu_cq *cq)
{
    if (!cq) return;
    struct k_cq *k = (struct k_cq *)cq;
    pthread_mutex_lock(&emu_g.ev_lock);
    if (k->chan_q) emu_evq_push(k->chan_q, cq->user_handle, 0, &cq->comp_events_reported, k);
    pthread_mutex_unlock(&emu_g.ev_lock);
}
