/* srq_objects.c: shared receive queues, the kernel half.
 *
 * Rules from k: core/uverbs_std_types_srq.c (SRQ_CREATE / SRQ_DESTROY), core/uverbs_cmd.c
 * (ib_uverbs_modify_srq, ib_uverbs_query_srq), core/verbs.c ib_destroy_srq_user (an SRQ that QPs
 * still use: EBUSY) and hw/mlx5/srq.c:
 *   create: type BASIC only here (XRC and TM need objects the emulator lacks: EOPNOTSUPP);
 *     max_wr >= 1 << log_max_srq_sz or max_sge > max_wqe_sz_rq / 16 -> EINVAL; the WQE stride is
 *     16 + 16 * max_sge rounded up to a power of two (at least 32), nwqe = roundup_pow2(max_wr
 *     + 1); driver data struct mlx5_ib_create_srq (at least up to flags; reserved0/reserved1
 *     nonzero -> EINVAL); the buffer (nwqe * stride bytes) and the doorbell record must be
 *     mapped (EFAULT) and are pinned; response max_wr = nwqe - 1, max_sge, driver response
 *     struct mlx5_ib_create_srq_resp { srqn }.
 *   modify: IB_SRQ_MAX_WR -> EINVAL (mlx5 cannot resize); IB_SRQ_LIMIT with limit >= nwqe ->
 *     EINVAL; else arms the limit (the NIC raises IB_EVENT_SRQ_LIMIT_REACHED once, nic_srq.c).
 *   query: max_wr, max_sge and the armed limit (0 when not armed). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>
#include "kernel.h"

enum { SRQ_MAX_WR = 1, SRQ_LIMIT = 2 };       /* k: include/rdma/ib_verbs.h enum ib_srq_attr_mask */
#define LOCK(f)   pthread_mutex_lock(&(f)->ctx.dev->lock)
#define UNLOCK(f) pthread_mutex_unlock(&(f)->ctx.dev->lock)

static uint32_t pow2_at_least(uint32_t v) { uint32_t r = 1; while (r < v) r <<= 1; return r; }

/* The srq geometry mlx5_ib_create_srq derives; 0 or -EINVAL. */
static int srq_geometry(const struct emu_srq_args *a, uint32_t *nwqe, uint32_t *shift)
{
    if (a->max_wr >= (1u << EMU_LOG_MAX_SRQ_SZ) || a->max_sge > EMU_MAX_RQ_DESC / 16 - 1) return -EINVAL;   /* the next segment takes 16 B (max_srq_sge) */
    uint32_t desc = pow2_at_least(16 + 16 * a->max_sge);
    if (desc < 32) desc = 32;
    *shift = (uint32_t)__builtin_ctz(desc);
    *nwqe = pow2_at_least(a->max_wr + 1);
    return 0;
}

int emu_k_create_srq(struct emu_file *f, struct k_pd *pd, const struct emu_srq_args *a,
                     uint32_t *handle, uint32_t *max_wr, uint32_t *max_sge, uint32_t *srqn)
{
    if (a->type == IB_UVERBS_SRQT_XRC || a->type == IB_UVERBS_SRQT_TM) return -EOPNOTSUPP;
    if (a->type != IB_UVERBS_SRQT_BASIC) return -EINVAL;
    if (!pd) return -EINVAL;
    uint32_t nwqe, shift;
    int r = srq_geometry(a, &nwqe, &shift);
    if (r) return r;
    /* ib_copy_validate_udata_in(udata, ucmd, flags) */
    struct mlx5_ib_create_srq ucmd;
    if (a->uhw_inlen < offsetof(struct mlx5_ib_create_srq, flags) + sizeof ucmd.flags) return -EINVAL;
    memset(&ucmd, 0, sizeof ucmd);
    memcpy(&ucmd, a->uhw_in, a->uhw_inlen < sizeof ucmd ? a->uhw_inlen : sizeof ucmd);
    if (ucmd.reserved0 || ucmd.reserved1) return -EINVAL;
    uint64_t buflen = (uint64_t)nwqe << shift;
    r = emu_check_range(ucmd.buf_addr, buflen, PROT_READ | PROT_WRITE);
    if (!r && (ucmd.db_addr & 3)) r = -EINVAL;
    if (!r) r = emu_check_range(ucmd.db_addr, 4, PROT_READ | PROT_WRITE);
    if (r) return r;
    struct k_srq *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    r = emu_pins_take(f, &s->pins, ucmd.buf_addr, buflen, ucmd.db_addr);
    if (r) { free(s); return r; }
    r = emu_uobj_alloc(f, UO_SRQ, s, handle);
    if (r) { emu_pins_release(f, &s->pins); free(s); return r; }
    struct emu_devstate *ds = emu_ds(f);
    struct k_evq *async = emu_evq_by_fd(a->event_fd >= 0 ? a->event_fd : f->ctx.default_async_fd);
    struct emu_srq *p = &s->pub;
    LOCK(f);
    p->handle = *handle;
    p->srqn = ds->next_srqn++ & 0xffffff;
    p->user_handle = a->user_handle;
    p->pd = &pd->pub;
    p->buf = (volatile uint8_t *)(uintptr_t)ucmd.buf_addr;
    p->nwqe = nwqe;
    p->wqe_shift = shift;
    p->max_gs = a->max_sge;
    p->dbrec = (volatile uint32_t *)(uintptr_t)ucmd.db_addr;
    p->async_fd = async ? async->chan.fd : -1;
    p->ctx = &f->ctx;
    ds->nsrq++;
    UNLOCK(f);
    s->async_q = async;
    if (async) { pthread_mutex_lock(&emu_g.ev_lock); async->refs++; pthread_mutex_unlock(&emu_g.ev_lock); }
    pd->usecnt++;
    pthread_mutex_lock(&emu_g.ev_lock);
    emu_g.live[EMU_OBJ_SRQ]++;
    pthread_mutex_unlock(&emu_g.ev_lock);
    *max_wr = nwqe - 1;
    *max_sge = a->max_sge;
    *srqn = p->srqn;
    return 0;
}

int emu_k_destroy_srq(struct emu_file *f, struct k_srq *s, uint32_t *events_reported)
{
    if (s->usecnt) return -EBUSY;
    emu_uobj_free(f, s->pub.handle);
    LOCK(f);
    emu_ds(f)->nsrq--;
    UNLOCK(f);
    emu_evq_purge_owner(s->async_q, s);
    pthread_mutex_lock(&emu_g.ev_lock);
    if (events_reported) *events_reported = s->pub.events_reported;
    emu_g.live[EMU_OBJ_SRQ]--;
    pthread_mutex_unlock(&emu_g.ev_lock);
    emu_evq_put(s->async_q);
    ((struct k_pd *)s->pub.pd)->usecnt--;
    emu_pins_release(f, &s->pins);
    free(s);
    return 0;
}

int emu_k_modify_srq(struct emu_file *f, struct k_srq *s, uint32_t mask, uint32_t max_wr, uint32_t limit)
{
    (void)max_wr;
    if (mask & SRQ_MAX_WR) return -EINVAL;
    if (mask & SRQ_LIMIT) {
        if (limit >= s->pub.nwqe) return -EINVAL;
        LOCK(f);
        s->pub.limit = limit;
        UNLOCK(f);
    }
    return 0;
}

void emu_k_query_srq(struct emu_file *f, struct k_srq *s, uint32_t *max_wr, uint32_t *max_sge,
                     uint32_t *limit)
{
    LOCK(f);
    *max_wr = s->pub.nwqe - 1;
    *max_sge = s->pub.max_gs;
    *limit = s->pub.limit;
    UNLOCK(f);
}
