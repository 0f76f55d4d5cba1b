/* srq.c: shared receive queues, the kernel calls: SRQ_CREATE / SRQ_DESTROY ioctls (kernel
 * drivers/infiniband/core/uverbs_std_types_srq.c) with the mlx5 driver data struct
 * mlx5_ib_create_srq { buf_addr, db_addr, flags, uidx } and response { srqn } (rdma/mlx5-abi.h;
 * hw/mlx5/srq.c), MODIFY_SRQ (write command through INVOKE_WRITE; core/uverbs_cmd.c).
 * Geometry as hw/mlx5/srq.c mlx5_ib_create_srq derives it: WQE stride 16 + 16 * max_sge rounded
 * up to a power of two (at least 32), nwqe = roundup_pow2(depth + 1); the list links WQE i to
 * i + 1 and the NIC starts at WQE 0 (create_srq_kernel does the same for kernel SRQs). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "driver.h"
#include "ioctl.h"
#include "mlxd_error.h"
#include "opts.h"

enum { SRQ_ATTR_LIMIT = 2 };    /* kernel include/rdma/ib_verbs.h enum ib_srq_attr_mask IB_SRQ_LIMIT */

static bool nic_live(const struct mlxd_nic *nic) { return nic && nic->state == OBJ_LIVE; }

void mlxd__srq_release(struct mlxd_srq *srq)
{
    mlxd__pinned_add(MLXD_PIN_RING, -(int64_t)srq->pinned_ring);
    mlxd__pinned_add(MLXD_PIN_DBREC, -(int64_t)srq->pinned_db);
    srq->pinned_ring = srq->pinned_db = 0;
    if (srq->mem) munmap(srq->mem, srq->mem_len);
    free(srq->wrid);
    while (srq->rcqs) {             /* none once its QPs are gone; a closing NIC's may remain */
        struct mlxd_srq_cq *u = srq->rcqs;
        srq->rcqs = u->next;
        free(u);
    }
    srq->mem = NULL;
    srq->wrid = NULL;
    srq->buf = NULL;
    srq->dbrec = NULL;
}

static int kernel_create_srq(struct mlxd_srq *srq)
{
    static const char fn[] = "mlxd_srq_create";
    struct mlxd_nic *nic = srq->nic;
    struct mlx5_ib_create_srq req;
    struct mlx5_ib_create_srq_resp resp;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    req.buf_addr = (uintptr_t)srq->buf;
    req.db_addr = (uintptr_t)srq->dbrec;
    req.uidx = 0xffffff;                     /* BASIC SRQs carry no user index */
    uint32_t max_wr = 0, max_sge = 0;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_CREATE);
    int h = ioc_obj(&c, UVERBS_ATTR_CREATE_SRQ_HANDLE, 0);
    ioc_obj(&c, UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, nic->pd_handle);
    ioc_in_u64(&c, UVERBS_ATTR_CREATE_SRQ_TYPE, IB_UVERBS_SRQT_BASIC);
    ioc_in_u64(&c, UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, (uintptr_t)srq);
    ioc_in_u32(&c, UVERBS_ATTR_CREATE_SRQ_MAX_WR, srq->nwqe - 1);
    ioc_in_u32(&c, UVERBS_ATTR_CREATE_SRQ_MAX_SGE, srq->max_sge);
    ioc_in_u32(&c, UVERBS_ATTR_CREATE_SRQ_LIMIT, 0);
    ioc_obj(&c, UVERBS_ATTR_CREATE_SRQ_EVENT_FD, (uint64_t)nic->async_fd);
    ioc_out(&c, UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, &max_wr, sizeof max_wr);
    ioc_out(&c, UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, &max_sge, sizeof max_sge);
    ioc_in(&c, UVERBS_ATTR_UHW_IN, &req, sizeof req);
    ioc_out(&c, UVERBS_ATTR_UHW_OUT, &resp, sizeof resp);
    int rc = mlxd__ioctl(nic->fd, &c);
    uint64_t ring_pages = mlxd__pin_pages(req.buf_addr, (uint64_t)srq->nwqe << srq->wqe_shift);
    if (rc) {
        int m = mlxd__memlock_error(fn, nic->name, "SRQ_CREATE", rc, ring_pages + 1);
        return m ? m : mlxd_err(-rc, "%s %s: the kernel refused SRQ_CREATE: %s", fn, nic->name, strerror(-rc));
    }
    srq->handle = (uint32_t)ioc_value(&c, h);
    srq->srqn = resp.srqn & 0xffffff;
    srq->pinned_ring = ring_pages;
    srq->pinned_db = 1;
    mlxd__pinned_add(MLXD_PIN_RING, (int64_t)ring_pages);
    mlxd__pinned_add(MLXD_PIN_DBREC, 1);
    return 0;
}

/* The buffer (page aligned) with the doorbell record in the page after it; the WQE list. */
static int srq_memory(struct mlxd_srq *srq)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t bufl = (((size_t)srq->nwqe << srq->wqe_shift) + pg - 1) & ~(pg - 1);
    void *m = mmap(NULL, bufl + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -ENOMEM;
    madvise(m, bufl + pg, MADV_DONTFORK);
    srq->mem = m;
    srq->mem_len = bufl + pg;
    srq->wrid = calloc(srq->nwqe, sizeof *srq->wrid);
    if (!srq->wrid) return -ENOMEM;
    srq->buf = m;
    srq->dbrec = (volatile uint32_t *)((uint8_t *)m + bufl);
    for (uint32_t i = 0; i < srq->nwqe; i++) {      /* next_wqe_index, BE16 at byte 2 */
        uint8_t *w = (uint8_t *)m + ((size_t)i << srq->wqe_shift);
        uint32_t next = (i + 1) & (srq->nwqe - 1);
        w[2] = (uint8_t)(next >> 8);
        w[3] = (uint8_t)next;
    }
    srq->head = 0;
    srq->tail = srq->nwqe - 1;
    atomic_store_explicit(&srq->free_wqes, srq->nwqe - 1, memory_order_relaxed);
    return 0;
}

int mlxd_srq_create(struct mlxd_nic *nic, const struct mlxd_srq_opts *opts, struct mlxd_srq **out)
{
    static const char fn[] = "mlxd_srq_create";
    if (!nic_live(nic) || !opts || !out) return mlxd_err(EINVAL, "%s: closed/NULL NIC, or NULL opts/out", fn);
    if (opts->sz < offsetof(struct mlxd_srq_opts, user_data) + sizeof opts->user_data)
        return mlxd_err(EINVAL, "%s: opts->sz %zu is too small", fn, opts->sz);
    int trc = mlxd__opts_tail_check(fn, "opts", opts, opts->sz, sizeof *opts);
    if (trc) return trc;
    uint32_t max_sge = opts->max_sge ? opts->max_sge : 1;
    if (!opts->depth) return mlxd_err(EINVAL, "%s: depth is 0", fn);
    if (nic->max_srq_wr && opts->depth > nic->max_srq_wr)
        return mlxd_err(EINVAL, "%s: depth %u exceeds the device's maximum %u", fn, opts->depth, nic->max_srq_wr);
    if (max_sge > nic->max_srq_sge)
        return mlxd_err(EINVAL, "%s: max_sge %u exceeds the device's maximum %u", fn, max_sge, nic->max_srq_sge);
    struct mlxd_srq *srq = calloc(1, sizeof *srq);
    if (!srq) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    srq->nic = nic;
    srq->max_sge = max_sge;
    srq->depth = opts->depth;
    srq->user_data = opts->user_data;
    uint32_t stride = mlxd__roundup_pow2(16 + 16 * max_sge);
    srq->wqe_shift = (uint32_t)__builtin_ctz(stride < 32 ? 32 : stride);
    srq->nwqe = mlxd__roundup_pow2(opts->depth + 1);
    int rc = srq_memory(srq);
    if (rc) { rc = mlxd_err(ENOMEM, "%s: cannot allocate the SRQ's buffer", fn); goto fail; }
    rc = kernel_create_srq(srq);
    if (rc) goto fail;
    srq->state = OBJ_LIVE;
    pthread_mutex_lock(&nic->lock);
    srq->next = nic->srqs;
    nic->srqs = srq;
    pthread_mutex_unlock(&nic->lock);
    *out = srq;
    return 0;
fail:
    mlxd__srq_release(srq);
    free(srq);
    return rc;
}

int mlxd_srq_arm_limit(struct mlxd_srq *srq, uint32_t limit)
{
    static const char fn[] = "mlxd_srq_arm_limit";
    if (!srq || srq->state != OBJ_LIVE || !nic_live(srq->nic)) return mlxd_err(EINVAL, "%s: invalid or destroyed SRQ", fn);
    if (limit > srq->depth) return mlxd_err(EINVAL, "%s: limit %u exceeds the SRQ's depth %u", fn, limit, srq->depth);
    struct ib_uverbs_modify_srq m = { .srq_handle = srq->handle, .attr_mask = SRQ_ATTR_LIMIT, .srq_limit = limit };
    int rc = mlxd__invoke_write(srq->nic->fd, IB_USER_VERBS_CMD_MODIFY_SRQ, &m, sizeof m, NULL, 0, NULL, 0, NULL, 0);
    if (rc) return mlxd_err(-rc, "%s %s: the kernel refused MODIFY_SRQ of SRQ 0x%x: %s", fn, srq->nic->name, srq->srqn, strerror(-rc));
    return 0;
}

int mlxd_srq_destroy(struct mlxd_srq *srq)
{
    static const char fn[] = "mlxd_srq_destroy";
    if (!srq || !srq->nic) return mlxd_err(EINVAL, "%s: srq is NULL", fn);
    struct mlxd_nic *nic = srq->nic;
    if (!nic_live(nic)) return mlxd_err(EINVAL, "%s: its NIC is closed", fn);
    if (srq->state == OBJ_DEAD)
        return srq->destroy_result ? mlxd_err(-srq->destroy_result, "%s: the first call failed: %s", fn,
                                              strerror(-srq->destroy_result)) : 0;
    pthread_mutex_lock(&nic->lock);
    unsigned qps = srq->qps;
    pthread_mutex_unlock(&nic->lock);
    if (qps) return mlxd_err(EBUSY, "%s: SRQ 0x%x is used by %u live QP(s): destroy them first", fn, srq->srqn, qps);
    uint32_t events = 0;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_SRQ, UVERBS_METHOD_SRQ_DESTROY);
    ioc_obj(&c, UVERBS_ATTR_DESTROY_SRQ_HANDLE, srq->handle);
    ioc_out(&c, UVERBS_ATTR_DESTROY_SRQ_RESP, &events, sizeof events);
    int rc = mlxd__ioctl(nic->fd, &c);
    srq->state = OBJ_DEAD;
    srq->destroy_result = rc;
    if (rc) return mlxd_err(-rc, "%s %s: the kernel refused SRQ_DESTROY of SRQ 0x%x: %s", fn, nic->name, srq->srqn, strerror(-rc));
    mlxd__srq_release(srq);
    return 0;
}
