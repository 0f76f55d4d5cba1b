/* srq_ring.c: posting to a shared receive queue, and freeing its WQEs as their completions are
 * polled (rdma-core providers/mlx5/srq.c mlx5_post_srq_recv, mlx5_free_srq_wqe; kernel
 * drivers/infiniband/hw/mlx5/srq.c mlx5_ib_post_srq_recv, mlx5_ib_free_srq_wqe).
 * A WQE: struct mlx5_wqe_srq_next_seg (16 bytes; next_wqe_index BE16 at byte 2), then
 * max_sge data segments (struct mlx5_wqe_data_seg), a terminator (MLX5_INVALID_LKEY) after the
 * last used one when fewer are used.  The doorbell record [0] = BE32 receives posted, after a
 * write barrier, once per call. */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "barrier.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"

static inline void st32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static inline void st64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static inline uint32_t next_of(const uint8_t *w) { return (uint32_t)w[2] << 8 | w[3]; }

static int check_entries(const struct mlxd_srq *srq, const struct mlxd_recv *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (mlxd_unlikely(r[i].num_local > srq->max_sge || (r[i].num_local && !r[i].local)))
            return mlxd_err(EINVAL, "mlxd_srq_receive: SRQ 0x%x: receive %zu has %u scatter entries (max %u)",
                            srq->srqn, i, r[i].num_local, srq->max_sge);
        for (uint32_t k = 0; k < r[i].num_local; k++)
            if (mlxd_unlikely(r[i].local[k].length > 0x7fffffffu))
                return mlxd_err(EINVAL, "mlxd_srq_receive: SRQ 0x%x: receive %zu entry %u: length %u is 2^31 "
                                "or more (a data segment's byte_count has 31 bits)", srq->srqn, i, k,
                                r[i].local[k].length);
    }
    return 0;
}

int mlxd_srq_receive(struct mlxd_srq *srq, const struct mlxd_recv *r, size_t n)
{
    if (mlxd_unlikely(!srq || srq->state != OBJ_LIVE || (n && !r)))
        return mlxd_err(EINVAL, "mlxd_srq_receive: invalid/destroyed SRQ, or r NULL");
    if (mlxd_unlikely(n > srq->depth))
        return mlxd_err(EINVAL, "mlxd_srq_receive: SRQ 0x%x: %zu receives at once exceed its depth %u",
                        srq->srqn, n, srq->depth);
    int rc = check_entries(srq, r, n);
    if (mlxd_unlikely(rc)) return rc;
    /* acquire: the poller linked each freed WQE before it released the count */
    uint32_t avail = atomic_load_explicit(&srq->free_wqes, memory_order_acquire);
    uint32_t outstanding = srq->nwqe - 1 - avail;
    if (mlxd_unlikely(n > avail || n > (size_t)(srq->depth - outstanding))) return -EAGAIN;
    if (!n) return 0;
    uint8_t *buf = (uint8_t *)(uintptr_t)srq->buf;
    uint32_t shift = srq->wqe_shift, head = srq->head;
    for (size_t i = 0; i < n; i++) {
        uint8_t *w0 = buf + ((size_t)head << shift), *w = w0 + 16;
        uint32_t k = 0;
        for (uint32_t j = 0; j < r[i].num_local; j++) {
            if (!r[i].local[j].length) continue;     /* 0 would mean 2 GiB (hw/mlx5/odp.c) */
            st32(w + MLXD_WQE_DATA_OFF_BYTE_COUNT, r[i].local[j].length);
            st32(w + MLXD_WQE_DATA_OFF_LKEY, r[i].local[j].lkey);
            st64(w + MLXD_WQE_DATA_OFF_ADDR, r[i].local[j].addr);
            w += MLXD_WQE_DATA_SIZE;
            k++;
        }
        if (k < srq->max_sge) {
            st32(w + MLXD_WQE_DATA_OFF_BYTE_COUNT, 0);
            st32(w + MLXD_WQE_DATA_OFF_LKEY, MLXD_INVALID_LKEY);
            st64(w + MLXD_WQE_DATA_OFF_ADDR, 0);
        }
        srq->wrid[head] = r[i].wr_id;
        head = next_of(w0);
    }
    srq->head = head;
    atomic_fetch_sub_explicit(&srq->free_wqes, (uint32_t)n, memory_order_relaxed);
    srq->posted += (uint32_t)n;
    mlxd_wmb();
    mlxd_shared_store(&srq->dbrec[0], htobe32(srq->posted));
    return (int)n;
}

int mlxd_srq_recv_room(const struct mlxd_srq *srq)
{
    if (!srq || srq->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_srq_recv_room: invalid or destroyed SRQ");
    uint32_t avail = atomic_load_explicit(&((struct mlxd_srq *)srq)->free_wqes, memory_order_acquire);
    uint32_t outstanding = srq->nwqe - 1 - avail;
    return outstanding >= srq->depth ? 0 : (int)(srq->depth - outstanding);
}

uint64_t mlxd__srq_complete(struct mlxd_srq *srq, uint32_t wc)
{
    uint32_t idx = wc & (srq->nwqe - 1);
    uint64_t wr_id = srq->wrid[idx];
    uint8_t *t = (uint8_t *)(uintptr_t)srq->buf + ((size_t)srq->tail << srq->wqe_shift);
    t[2] = (uint8_t)(idx >> 8);
    t[3] = (uint8_t)idx;
    srq->tail = idx;
    return wr_id;
}

void mlxd__srq_free(struct mlxd_srq *srq, uint32_t n)
{
    atomic_fetch_add_explicit(&srq->free_wqes, n, memory_order_release);
}
