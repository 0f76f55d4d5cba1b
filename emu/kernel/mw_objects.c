/* mw_objects.c: memory windows, the kernel's side: ALLOC_MW and DEALLOC_MW (legacy write commands 14
 * and 16; rdma-core 44 sends ALLOC_MW by write() and DEALLOC_MW through the ioctl method
 * MW_DESTROY when the kernel has it, which it has since 5.x).
 *
 * k: core/uverbs_cmd.c ib_uverbs_alloc_mw: the PD handle must name a PD (else EINVAL), the type
 * must be IB_MW_TYPE_1 (1) or IB_MW_TYPE_2 (2) (else EINVAL), the PD's use count grows;
 * hw/mlx5/mr.c mlx5_ib_alloc_mw: the driver data (struct mlx5_ib_alloc_mw: comp_mask, num_klms,
 * reserved1, reserved2) may be absent (libmlx5 sends none); reserved fields not zero, or bytes
 * past it not zero, are EOPNOTSUPP; the mkey is created 'free' (not bound: no access works
 * through it), KLM mode, remote invalidation enabled for type 2 only; its key is the rkey
 * returned.  core/uverbs_std_types_mw.c / uobj_perform_destroy: a handle of no MW is ENOENT or
 * EINVAL.  Dealloc of a window still bound is allowed (the mkey is destroyed, so is the binding).
 * The NIC binds and invalidates through the send queue (emu/nic/nic_mw.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/mlx5-abi.h>
#include "kernel.h"

#define LOCK(f)   pthread_mutex_lock(&(f)->ctx.dev->lock)
#define UNLOCK(f) pthread_mutex_unlock(&(f)->ctx.dev->lock)

int emu_k_alloc_mw(struct emu_file *f, struct k_pd *pd, uint8_t type, const void *udata, size_t ulen,
                   uint32_t *handle, uint32_t *rkey)
{
    if (!pd) return -EINVAL;
    if (type != 1 && type != 2) return -EINVAL;
    struct mlx5_ib_alloc_mw req;
    memset(&req, 0, sizeof req);
    if (ulen) memcpy(&req, udata, ulen < sizeof req ? ulen : sizeof req);
    if (req.comp_mask || req.reserved1 || req.reserved2) return -EOPNOTSUPP;
    for (size_t i = sizeof req; i < ulen; i++)
        if (((const uint8_t *)udata)[i]) return -EOPNOTSUPP;
    struct emu_devstate *ds = emu_ds(f);
    struct k_mr *mw = calloc(1, sizeof *mw);
    if (!mw) return -ENOMEM;
    int r = ds->nmr >= EMU_MAX_MR ? -ENOMEM : emu_uobj_alloc(f, UO_MW, mw, handle);
    if (r) { free(mw); return r; }
    LOCK(f);
    uint32_t key = emu_mkey_take(ds, mw);
    if (!key) {
        UNLOCK(f);
        emu_uobj_free(f, *handle);
        free(mw);
        return -ENOMEM;
    }
    mw->pub.handle = *handle;
    mw->pub.rkey = key;
    mw->pub.lkey = 0;                 /* a window is never a local key */
    mw->pub.dmabuf_fd = -1;
    mw->pub.pd = &pd->pub;
    mw->pub.mw_type = type;
    mw->pub.mw_free = true;
    ds->nmr++;
    pd->usecnt++;
    UNLOCK(f);
    emu_g.live_mw++;
    *rkey = key;
    return 0;
}

int emu_k_dealloc_mw(struct emu_file *f, struct k_mr *mw)
{
    struct emu_devstate *ds = emu_ds(f);
    emu_uobj_free(f, mw->pub.handle);
    LOCK(f);
    ds->mr_tab[mw->slot] = NULL;
    ds->nmr--;
    ((struct k_pd *)mw->pub.pd)->usecnt--;
    UNLOCK(f);
    emu_g.live_mw--;
    free(mw);
    return 0;
}
