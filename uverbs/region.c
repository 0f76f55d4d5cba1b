/* region.c: registering host and dma-buf memory (kernel drivers/infiniband/core/uverbs_cmd.c
 * REG_MR, uverbs_std_types_mr.c REG_DMABUF_MR; rdma-core libibverbs/cmd.c ibv_cmd_reg_mr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "driver.h"
#include "opts.h"
#include "ioctl.h"
#include "mlxd_error.h"

#define ACCESS_ALL (MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_READ | MLXD_ACCESS_MW_BIND | \
                    MLXD_ACCESS_REMOTE_ATOMIC)
#define ACCESS_RELAXED_ORDERING 0x100000u   /* IB_UVERBS_ACCESS_RELAXED_ORDERING */

/* The IOVA of the first byte: opts->iova when given (non-zero, or MLXD_REGION_IOVA_EXACT), else
 * `dflt` (the VA of host memory, the offset of dma-buf memory).  opts passed check_opts. */
static uint64_t pick_iova(const struct mlxd_region_opts *o, uint64_t dflt)
{
    if (!o) return dflt;
    bool exact = o->sz >= offsetof(struct mlxd_region_opts, flags) + sizeof o->flags &&
                 (o->flags & MLXD_REGION_IOVA_EXACT);
    return o->iova || exact ? o->iova : dflt;
}

static int check_opts(const char *fn, const struct mlxd_region_opts *o, uint32_t *access)
{
    *access = 0;
    if (!o) return 0;
    if (o->sz < offsetof(struct mlxd_region_opts, iova) + sizeof o->iova)
        return mlxd_err(EINVAL, "%s: opts->sz %zu is too small", fn, o->sz);
    int trc = mlxd__opts_tail_check(fn, "opts", o, o->sz, sizeof *o);
    if (trc) return trc;
    if (o->access & ~ACCESS_ALL)
        return mlxd_err(EINVAL, "%s: unknown access bits 0x%x", fn, o->access & ~ACCESS_ALL);
    if ((o->access & (MLXD_ACCESS_REMOTE_WRITE | MLXD_ACCESS_REMOTE_ATOMIC)) &&
        !(o->access & MLXD_ACCESS_LOCAL_WRITE))
        return mlxd_err(EINVAL, "%s: remote write or atomic access needs MLXD_ACCESS_LOCAL_WRITE "
                        "(kernel rule ib_check_mr_access)", fn);
    if (o->order > MLXD_ORDER_RELAXED) return mlxd_err(EINVAL, "%s: order %u unknown", fn, o->order);
    if (o->sz >= offsetof(struct mlxd_region_opts, flags) + sizeof o->flags &&
        (o->flags & ~(uint32_t)MLXD_REGION_IOVA_EXACT))
        return mlxd_err(EINVAL, "%s: unknown flags 0x%x", fn, o->flags & ~(uint32_t)MLXD_REGION_IOVA_EXACT);
    *access = o->access | (o->order == MLXD_ORDER_RELAXED ? ACCESS_RELAXED_ORDERING : 0);
    return 0;
}

/* A kernel refusal; says what was pinned when the locked-memory limit explains it (memlock.c).
 * pages: what the registration would have pinned (0 for dma-buf). */
static int reg_error(struct mlxd_nic *nic, const char *fn, const char *call, int rc, size_t length,
                     uint64_t pages)
{
    char what[64];
    snprintf(what, sizeof what, "%s of %zu bytes", call, length);
    int m = pages ? mlxd__memlock_error(fn, nic->name, what, rc, pages) : 0;
    if (m) return m;
    return mlxd_err(-rc, "%s %s: the kernel refused %s: %s", fn, nic->name, what, strerror(-rc));
}

static void link_region(struct mlxd_nic *nic, struct mlxd_region *r)
{
    pthread_mutex_lock(&nic->lock);
    r->next = nic->regions;
    nic->regions = r;
    pthread_mutex_unlock(&nic->lock);
    mlxd__pinned_add(MLXD_PIN_REGION, (int64_t)r->pinned_pages);
}

static void dontfork(void *addr, size_t length, int advice)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)addr & ~(pg - 1), e = ((uintptr_t)addr + length + pg - 1) & ~(pg - 1);
    madvise((void *)a, e - a, advice);
}

int mlxd_region_register(struct mlxd_nic *nic, void *addr, size_t length,
                         const struct mlxd_region_opts *opts, struct mlxd_region **out)
{
    static const char fn[] = "mlxd_region_register";
    if (!nic_ok(nic) || !addr || !length || !out)
        return mlxd_err(EINVAL, "%s: invalid or closed nic (or its parent's, in a child of fork), NULL addr/out or length 0", fn);
    uint32_t access;
    int rc = check_opts(fn, opts, &access);
    if (rc) return rc;
    uint64_t iova = pick_iova(opts, (uintptr_t)addr);
    long pg = sysconf(_SC_PAGESIZE);
    if ((iova & (uint64_t)(pg - 1)) != ((uintptr_t)addr & (uint64_t)(pg - 1)))
        return mlxd_err(EINVAL, "%s: iova 0x%llx and addr %p have different offsets in their page", fn,
                        (unsigned long long)iova, addr);
    struct mlxd_region *r = calloc(1, sizeof *r);
    if (!r) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    struct ib_uverbs_reg_mr req;
    struct ib_uverbs_reg_mr_resp resp;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    req.start = (uintptr_t)addr;
    req.length = length;
    req.hca_va = iova;
    req.pd_handle = nic->pd_handle;
    req.access_flags = access;
    rc = mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_REG_MR, &req, sizeof req, &resp, sizeof resp,
                            NULL, 0, NULL, 0);
    if (rc) { free(r); return reg_error(nic, fn, "REG_MR", rc, length, mlxd__pin_pages((uintptr_t)addr, length)); }
    r->pinned_pages = mlxd__pin_pages((uintptr_t)addr, length);
    r->handle = resp.mr_handle;
    r->lkey = resp.lkey;
    r->rkey = resp.rkey;
    r->iova = iova;
    r->length = length;
    r->nic = nic;
    r->state = OBJ_LIVE;
    r->host_addr = addr;
    /* the registered pages stay out of a child of fork (rdma-core's ibv_fork_init:
     * ibv_dontfork_range): the NIC writes them, a child must neither share nor copy them */
    dontfork(addr, length, MADV_DONTFORK);
    link_region(nic, r);
    *out = r;
    return 0;
}

int mlxd_region_register_dmabuf(struct mlxd_nic *nic, int fd, uint64_t offset, size_t length,
                                const struct mlxd_region_opts *opts, struct mlxd_region **out)
{
    static const char fn[] = "mlxd_region_register_dmabuf";
    if (!nic_ok(nic) || fd < 0 || !length || !out)
        return mlxd_err(EINVAL, "%s: invalid or closed nic (or its parent's, in a child of fork), fd < 0, NULL out or length 0", fn);
    uint32_t access;
    int rc = check_opts(fn, opts, &access);
    if (rc) return rc;
    uint64_t iova = pick_iova(opts, offset);
    long pg = sysconf(_SC_PAGESIZE);
    if ((iova & (uint64_t)(pg - 1)) != (offset & (uint64_t)(pg - 1)))
        return mlxd_err(EINVAL, "%s: iova 0x%llx and offset 0x%llx have different offsets in their page",
                        fn, (unsigned long long)iova, (unsigned long long)offset);
    struct mlxd_region *r = calloc(1, sizeof *r);
    if (!r) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    uint32_t lkey = 0, rkey = 0;
    int32_t fd32 = fd;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR);
    int h = ioc_obj(&c, UVERBS_ATTR_REG_DMABUF_MR_HANDLE, 0);
    ioc_obj(&c, UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, nic->pd_handle);
    ioc_in_u64(&c, UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset);
    ioc_in_u64(&c, UVERBS_ATTR_REG_DMABUF_MR_LENGTH, length);
    ioc_in_u64(&c, UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova);
    ioc_in(&c, UVERBS_ATTR_REG_DMABUF_MR_FD, &fd32, sizeof fd32);
    ioc_in_u32(&c, UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, access);
    ioc_out(&c, UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, &lkey, sizeof lkey);
    ioc_out(&c, UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, &rkey, sizeof rkey);
    rc = mlxd__ioctl(nic->fd, &c);
    if (rc) { free(r); return reg_error(nic, fn, "REG_DMABUF_MR", rc, length, 0); }
    r->handle = (uint32_t)ioc_value(&c, h);
    r->lkey = lkey;
    r->rkey = rkey;
    r->iova = iova;
    r->length = length;
    r->nic = nic;
    r->state = OBJ_LIVE;
    link_region(nic, r);
    *out = r;
    return 0;
}

struct mlxd_local mlxd_region_local(const struct mlxd_region *r)
{
    struct mlxd_local l = {0, 0, 0};
    if (r && r->state == OBJ_LIVE) {
        l.addr = r->iova;
        l.length = r->length > 0xffffffffu ? 0xffffffffu : (uint32_t)r->length;
        l.lkey = r->lkey;
    }
    return l;
}

struct mlxd_remote mlxd_region_remote(const struct mlxd_region *r)
{
    struct mlxd_remote m = {0, 0, 0, 0};
    if (r && r->state == OBJ_LIVE) {
        m.addr = r->iova;
        m.length = r->length;
        m.rkey = r->rkey;
    }
    return m;
}

int mlxd_region_slice(const struct mlxd_region *r, uint64_t off, uint32_t len, struct mlxd_local *out)
{
    if (!r || r->state != OBJ_LIVE || !out || off > r->length || len > r->length - off)
        return mlxd_err(EINVAL, "mlxd_region_slice: invalid region or [%llu, +%u) out of range",
                        (unsigned long long)off, len);
    out->addr = r->iova + off;
    out->length = len;
    out->lkey = r->lkey;
    return 0;
}

int mlxd_region_deregister(struct mlxd_region *r)
{
    if (!r || !r->nic) return mlxd_err(EINVAL, "mlxd_region_deregister: region is NULL");
    if (r->state == OBJ_DEAD) {
        if (r->nic->state != OBJ_LIVE) return mlxd_err(EINVAL, "mlxd_region_deregister: its NIC is closed");
        return r->deregister_result ? mlxd_err(-r->deregister_result, "mlxd_region_deregister: the "
                                               "first call failed: %s", strerror(-r->deregister_result)) : 0;
    }
    struct mlxd_nic *nic = r->nic;
    if (NIC_FORKED(nic)) return mlxd__forked_child("mlxd_region_deregister", nic);
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY);
    ioc_obj(&c, UVERBS_ATTR_DESTROY_MR_HANDLE, r->handle);
    int rc = mlxd__ioctl(nic->fd, &c);
    pthread_mutex_lock(&nic->lock);
    r->state = OBJ_DEAD;
    r->deregister_result = rc;
    uint64_t unpinned = rc ? 0 : r->pinned_pages;    /* a refused destroy keeps the pages pinned */
    if (!rc) r->pinned_pages = 0;
    /* back to ordinary fork semantics unless another live host region shares a page */
    bool shared = false;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)r->host_addr & ~(pg - 1);
    uintptr_t hi = ((uintptr_t)r->host_addr + r->length + pg - 1) & ~(pg - 1);
    for (struct mlxd_region *o = nic->regions; o && r->host_addr && !rc; o = o->next)
        if (o != r && o->state == OBJ_LIVE && o->host_addr && ((uintptr_t)o->host_addr & ~(pg - 1)) < hi &&
            (((uintptr_t)o->host_addr + o->length + pg - 1) & ~(pg - 1)) > lo)
            shared = true;
    pthread_mutex_unlock(&nic->lock);
    mlxd__pinned_add(MLXD_PIN_REGION, -(int64_t)unpinned);
    if (!rc && r->host_addr && !shared) dontfork(r->host_addr, r->length, MADV_DOFORK);
    if (rc) return mlxd_err(-rc, "mlxd_region_deregister %s: the kernel refused MR_DESTROY: %s", nic->name,
                            strerror(-rc));
    return 0;
}
