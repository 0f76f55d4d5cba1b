/* cq.c: completion queues: the ring and doorbell record this process owns, and the kernel's CQ
 * (CQ_CREATE / CQ_DESTROY ioctls, kernel drivers/infiniband/core/uverbs_std_types_cq.c,
 * drivers/infiniband/hw/mlx5/cq.c create_cq_user, doorbell.c mlx5_ib_db_map_user). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "driver.h"
#include "opts.h"
#include "ioctl.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"

#define MAX_DETACHED_CQE (1u << 22)

uint32_t mlxd__roundup_pow2(uint32_t v)
{
    if (v <= 1) return 1;
    if (v > (1u << 31)) return 0;
    return 1u << (32 - __builtin_clz(v - 1));
}

/* Allocates the ring (page aligned, every op_own 0xF0) and, in the page after it, the doorbell
 * record (page aligned, zeroed): one anonymous mapping, MADV_DONTFORK so that a child of fork
 * neither shares nor copies what the NIC writes (seed: fork rule). */
static int ring_alloc(struct mlxd_cq *cq, uint32_t ncqe)
{
    size_t ring = (size_t)ncqe * MLXD_CQE_SIZE;
    long pg = sysconf(_SC_PAGESIZE);
    ring = (ring + (size_t)pg - 1) & ~((size_t)pg - 1);
    size_t len = ring + (size_t)pg;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -ENOMEM;
    madvise(m, len, MADV_DONTFORK);
    void *db = (uint8_t *)m + ring;
    for (uint32_t i = 0; i < ncqe; i++) ((uint8_t *)m)[(size_t)i * MLXD_CQE_SIZE + MLXD_CQE_OFF_OP_OWN] = MLXD_CQE_OP_OWN_INIT;
    cq->mem = m;
    cq->mem_len = len;
    cq->db = db;
    cq->buf = m;
    cq->dbrec = db;
    cq->arm_rec = (volatile uint32_t *)db + MLXD_CQ_ARM_DB;
    cq->ncqe = ncqe;
    cq->ci = 0;
    return 0;
}

void mlxd__cq_release(struct mlxd_cq *cq)
{
    mlxd__pinned_add(MLXD_PIN_RING, -(int64_t)cq->pinned_ring);
    mlxd__pinned_add(MLXD_PIN_DBREC, -(int64_t)cq->pinned_db);
    cq->pinned_ring = cq->pinned_db = 0;
    if (cq->mem) munmap(cq->mem, cq->mem_len);   /* the doorbell record is in the mapping */
    cq->mem = cq->db = NULL;
    cq->buf = NULL;
    cq->dbrec = cq->arm_rec = NULL;
}

int mlxd__comp_channel(struct mlxd_nic *nic);

/* mlxd_cq_create's arguments; *ncqe: the ring's size (entries rounded up to a power of 2). */
static int check_cq_args(struct mlxd_nic *nic, uint32_t entries, const struct mlxd_cq_opts *opts,
                         struct mlxd_cq **out, uint32_t *ncqe)
{
    static const char fn[] = "mlxd_cq_create";
    if (!nic_ok(nic) || !out) return mlxd_err(EINVAL, "%s: invalid or closed nic (or its parent's, in a child of fork), or out NULL", fn);
    if (!entries) return mlxd_err(EINVAL, "%s: 0 entries", fn);
    if (opts && opts->sz < offsetof(struct mlxd_cq_opts, user_data) + sizeof opts->user_data)
        return mlxd_err(EINVAL, "%s: opts->sz %zu is too small", fn, opts->sz);
    int trc = opts ? mlxd__opts_tail_check(fn, "opts", opts, opts->sz, sizeof *opts) : 0;
    if (trc) return trc;
    if (opts && nic->num_comp_vectors && opts->comp_vector >= nic->num_comp_vectors)
        return mlxd_err(EINVAL, "%s: comp_vector %u, the device has %u", fn, opts->comp_vector,
                        nic->num_comp_vectors);
    *ncqe = mlxd__roundup_pow2(entries < 2 ? 2 : entries);
    if (!*ncqe || *ncqe > nic->max_cqe)
        return mlxd_err(EINVAL, "%s: %u entries exceeds the device's maximum %u", fn, entries, nic->max_cqe);
    return 0;
}

/* CQ_CREATE of the ring of ncqe CQEs (cq->buf, doorbell record cq->db): sets cq->handle and the
 * kernel's CQN; success counts the pages the kernel pinned.  A refusal explains RLIMIT_MEMLOCK
 * when that is the cause (memlock.c). */
static int kernel_create_cq(struct mlxd_cq *cq, uint32_t ncqe, const struct mlxd_cq_opts *opts)
{
    static const char fn[] = "mlxd_cq_create";
    struct mlxd_nic *nic = cq->nic;
    struct mlx5_ib_create_cq req;
    struct mlx5_ib_create_cq_resp resp;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    req.buf_addr = (uintptr_t)cq->buf;
    req.db_addr = (uintptr_t)cq->db;
    req.cqe_size = MLXD_CQE_SIZE;
    req.flags = MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX | (cq->real_time ? MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS : 0);
    req.uar_page_index = (uint16_t)nic->uar_page_id;
    req.cqe_comp_en = cq->cqe_comp != 0;
    req.cqe_comp_res_format = (uint8_t)cq->cqe_comp;
    uint32_t resp_cqe = 0;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    int h = ioc_obj(&c, UVERBS_ATTR_CREATE_CQ_HANDLE, 0);
    ioc_in_u32(&c, UVERBS_ATTR_CREATE_CQ_CQE, ncqe - 1);
    ioc_in_u64(&c, UVERBS_ATTR_CREATE_CQ_USER_HANDLE, (uintptr_t)cq);
    if (cq->events) ioc_obj(&c, UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, (uint64_t)nic->comp_fd);
    ioc_in_u32(&c, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, opts ? opts->comp_vector : 0);
    if (cq->ignore_overrun)   /* k: uverbs_std_types_cq.c CQ_CREATE flags; hw/mlx5/cq.c sets cqc.oi */
        ioc_in_u32(&c, UVERBS_ATTR_CREATE_CQ_FLAGS, IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN);
    ioc_out(&c, UVERBS_ATTR_CREATE_CQ_RESP_CQE, &resp_cqe, sizeof resp_cqe);
    ioc_in(&c, UVERBS_ATTR_UHW_IN, &req, sizeof req);
    ioc_out(&c, UVERBS_ATTR_UHW_OUT, &resp, sizeof resp);
    int rc = mlxd__ioctl(nic->fd, &c);
    uint64_t ring_pages = mlxd__pin_pages(req.buf_addr, (uint64_t)ncqe * MLXD_CQE_SIZE);
    if (rc) {
        char what[48];
        snprintf(what, sizeof what, "CQ_CREATE (%u CQEs)", ncqe);
        int m = mlxd__memlock_error(fn, nic->name, what, rc, ring_pages + 1);
        return m ? m : mlxd_err(-rc, "%s %s: the kernel refused %s: %s", fn, nic->name, what, strerror(-rc));
    }
    cq->pinned_ring = ring_pages;      /* and the doorbell record's page */
    cq->pinned_db = 1;
    mlxd__pinned_add(MLXD_PIN_RING, (int64_t)ring_pages);
    mlxd__pinned_add(MLXD_PIN_DBREC, 1);
    cq->handle = (uint32_t)ioc_value(&c, h);
    cq->cqn = resp.cqn;
    return 0;
}

int mlxd_cq_create(struct mlxd_nic *nic, uint32_t entries, const struct mlxd_cq_opts *opts,
                   struct mlxd_cq **out)
{
    static const char fn[] = "mlxd_cq_create";
    uint32_t ncqe = 0;
    int rc = check_cq_args(nic, entries, opts, out, &ncqe);
    if (rc) return rc;
    struct mlxd_cq *cq = calloc(1, sizeof *cq);
    if (!cq) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    rc = ring_alloc(cq, ncqe);
    if (rc) { free(cq); return mlxd_err(ENOMEM, "%s: cannot allocate a ring of %u CQEs", fn, ncqe); }
    cq->events = opts && opts->events;
    cq->user_data = opts ? opts->user_data : 0;
    cq->ignore_overrun = opts && opts->sz > offsetof(struct mlxd_cq_opts, ignore_overrun) && opts->ignore_overrun;
    cq->real_time = opts && opts->sz > offsetof(struct mlxd_cq_opts, real_time_ts) && opts->real_time_ts;
    if (cq->real_time && !nic->real_time_ts) {
        rc = mlxd_err(EOPNOTSUPP, "%s %s: real_time_ts: the device has no real-time CQE timestamps "
                      "(MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS not reported)", fn, nic->name);
        goto fail;
    }
    cq->cqe_comp = opts && opts->sz > offsetof(struct mlxd_cq_opts, cqe_comp) ? opts->cqe_comp : 0;
    if (cq->cqe_comp && (rc = mlxd__cqe_comp_check(nic, cq->cqe_comp)) != 0) goto fail;
    cq->comp = cq->cqe_comp != 0;
    cq->nic = nic;
    cq->cqe_version = nic->cqe_version;
    cq->qp_table = nic->qp_table;
    cq->arm_db = (volatile uint64_t *)((uint8_t *)nic->uar_map + MLXD_UAR_CQ_DOORBELL);
    if (cq->events) {
        pthread_mutex_lock(&nic->lock);
        rc = mlxd__comp_channel(nic);
        pthread_mutex_unlock(&nic->lock);
        if (rc) {
            rc = mlxd_err(-rc, "%s %s: the kernel refused CREATE_COMP_CHANNEL: %s", fn, nic->name, strerror(-rc));
            goto fail;
        }
    }
    if ((rc = kernel_create_cq(cq, ncqe, opts))) goto fail;
    if (cq->ignore_overrun)
        cq->dbrec = cq->ci_sink;      /* the device checks no consumer index: none is written */
    cq->state = OBJ_LIVE;
    pthread_mutex_lock(&nic->lock);
    cq->next = nic->cqs;
    nic->cqs = cq;
    pthread_mutex_unlock(&nic->lock);
    *out = cq;
    return 0;
fail:
    mlxd__cq_release(cq);
    free(cq);
    return rc;
}

int mlxd_cq_create_detached_opts(uint32_t entries, const struct mlxd_detached_cq_opts *opts, struct mlxd_cq **out)
{
    static const char fn[] = "mlxd_cq_create_detached";
    if (!out || !entries || entries > MAX_DETACHED_CQE)
        return mlxd_err(EINVAL, "%s: entries must be 1..%u and out not NULL", fn, MAX_DETACHED_CQE);
    if (opts && opts->sz < offsetof(struct mlxd_detached_cq_opts, cqe_comp) + sizeof opts->cqe_comp)
        return mlxd_err(EINVAL, "%s: opts->sz %zu is too small", fn, opts->sz);
    int rc = opts ? mlxd__opts_tail_check(fn, "opts", opts, opts->sz, sizeof *opts) : 0;
    if (rc) return rc;
    uint32_t comp = opts ? opts->cqe_comp : 0;
    if (comp & (comp - 1) || comp > MLXD_CQE_COMP_CSUM_STRIDX)
        return mlxd_err(EINVAL, "%s: cqe_comp 0x%x is not one mini-CQE format (1, 2 or 4)", fn, comp);
    struct mlxd_cq *cq = calloc(1, sizeof *cq);
    if (!cq) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    if (ring_alloc(cq, mlxd__roundup_pow2(entries < 2 ? 2 : entries))) {
        free(cq);
        return mlxd_err(ENOMEM, "%s: cannot allocate the ring", fn);
    }
    cq->detached = true;
    cq->cqe_version = 1;
    cq->cqe_comp = comp;
    cq->comp = comp != 0;
    cq->state = OBJ_LIVE;
    *out = cq;
    return 0;
}

int mlxd_cq_create_detached(uint32_t entries, struct mlxd_cq **out)
{
    return mlxd_cq_create_detached_opts(entries, NULL, out);
}

int mlxd_cq_destroy(struct mlxd_cq *cq)
{
    if (!cq) return mlxd_err(EINVAL, "mlxd_cq_destroy: cq is NULL");
    if (cq->recorder)
        return mlxd_err(EBUSY, "mlxd_cq_destroy: CQ 0x%06x is being recorded: mlxd_cq_record_stop first", cq->cqn);
    if (cq->detached) {
        /* detached CQs have no NIC to keep a tombstone: they are freed */
        if (cq->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_cq_destroy: destroyed CQ");
        cq->state = OBJ_DEAD;
        mlxd__cq_release(cq);
        free(cq);
        return 0;
    }
    struct mlxd_nic *nic = cq->nic;
    if (nic->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_cq_destroy: its NIC is closed");
    if (NIC_FORKED(nic)) return mlxd__forked_child("mlxd_cq_destroy", nic);
    if (cq->state == OBJ_DEAD)
        return cq->destroy_result ? mlxd_err(-cq->destroy_result, "mlxd_cq_destroy: the first call failed: %s",
                                             strerror(-cq->destroy_result)) : 0;
    pthread_mutex_lock(&nic->lock);
    unsigned users = cq->qps;
    pthread_mutex_unlock(&nic->lock);
    if (users) return mlxd_err(EBUSY, "mlxd_cq_destroy %s: %u queue pairs still use CQ 0x%x", nic->name, users, cq->cqn);
    struct ib_uverbs_destroy_cq_resp resp = {0, 0};
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY);
    ioc_obj(&c, UVERBS_ATTR_DESTROY_CQ_HANDLE, cq->handle);
    ioc_out(&c, UVERBS_ATTR_DESTROY_CQ_RESP, &resp, sizeof resp);
    int rc = mlxd__ioctl(nic->fd, &c);
    pthread_mutex_lock(&nic->lock);
    cq->state = OBJ_DEAD;
    cq->destroy_result = rc;
    pthread_mutex_unlock(&nic->lock);
    /* after a refusal the kernel may still write the ring: keep it until close; else free it */
    if (rc) return mlxd_err(-rc, "mlxd_cq_destroy %s: the kernel refused CQ_DESTROY: %s", nic->name, strerror(-rc));
    mlxd__cq_release(cq);
    return 0;
}

bool mlxd_cq_real_time(const struct mlxd_cq *cq)
{
    return cq && cq->state == OBJ_LIVE && cq->real_time;
}

uint32_t mlxd_cq_size(const struct mlxd_cq *cq)
{
    return cq && cq->state == OBJ_LIVE ? cq->ncqe : 0;
}

int mlxd_cq_ring(struct mlxd_cq *cq, volatile void **ring, uint32_t *ncqe, volatile uint32_t **dbrec)
{
    if (!cq || cq->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_cq_ring: invalid or destroyed CQ");
    if (ring) *ring = cq->buf;
    if (ncqe) *ncqe = cq->ncqe;
    if (dbrec) *dbrec = cq->db;
    return 0;
}
