/* mw.c: memory windows, the kernel calls: ALLOC_MW (legacy write command through INVOKE_WRITE;
 * the kernel has no ioctl method that creates one: core/uverbs_cmd.c ib_uverbs_alloc_mw) and
 * MW_DESTROY (ioctl, core/uverbs_std_types_mw.c; what rdma-core 44's ibv_cmd_dealloc_mw sends).
 * libmlx5's mlx5_alloc_mw sends no driver data (struct mlx5_ib_alloc_mw is left out: the kernel
 * accepts its absence, hw/mlx5/mr.c mlx5_ib_alloc_mw), and so do we.  Binds and invalidations go
 * through the send queue (mlx5/post_mw.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "driver.h"
#include "ioctl.h"
#include "mlxd_error.h"

int mlxd_mw_alloc(struct mlxd_nic *nic, uint32_t type, struct mlxd_mw **out)
{
    static const char fn[] = "mlxd_mw_alloc";
    if (!nic_ok(nic) || !out) return mlxd_err(EINVAL, "%s: invalid or closed nic, or out NULL", fn);
    if (type != MLXD_MW_TYPE_1 && type != MLXD_MW_TYPE_2)
        return mlxd_err(EINVAL, "%s: type %u is not MLXD_MW_TYPE_1 (1) or MLXD_MW_TYPE_2 (2)", fn, type);
    struct mlxd_mw *mw = calloc(1, sizeof *mw);
    if (!mw) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    struct ib_uverbs_alloc_mw req;
    memset(&req, 0, sizeof req);
    req.pd_handle = nic->pd_handle;
    req.mw_type = (uint8_t)type;
    struct ib_uverbs_alloc_mw_resp resp = {0};
    int rc = mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_ALLOC_MW, &req, sizeof req, &resp, sizeof resp,
                                NULL, 0, NULL, 0);
    if (rc) {
        free(mw);
        return mlxd_err(-rc, "%s %s: the kernel refused ALLOC_MW (type %u): %s", fn, nic->name, type, strerror(-rc));
    }
    mw->type = type;
    mw->rkey = resp.rkey;
    mw->handle = resp.mw_handle;
    mw->nic = nic;
    mw->state = OBJ_LIVE;
    pthread_mutex_lock(&nic->lock);
    mw->next = nic->mws;
    nic->mws = mw;
    pthread_mutex_unlock(&nic->lock);
    *out = mw;
    return 0;
}

int mlxd_mw_free(struct mlxd_mw *mw)
{
    static const char fn[] = "mlxd_mw_free";
    if (!mw || !nic_ok(mw->nic)) return mlxd_err(EINVAL, "%s: mw is NULL or its NIC is closed", fn);
    if (mw->state == OBJ_DEAD)
        return mw->destroy_result ? mlxd_err(-mw->destroy_result, "%s: the first call failed: %s", fn,
                                             strerror(-mw->destroy_result)) : 0;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_MW, UVERBS_METHOD_MW_DESTROY);
    ioc_obj(&c, UVERBS_ATTR_DESTROY_MW_HANDLE, mw->handle);
    int rc = mlxd__ioctl(mw->nic->fd, &c);
    mw->state = OBJ_DEAD;
    mw->destroy_result = rc;
    if (rc)
        return mlxd_err(-rc, "%s %s: the kernel refused MW_DESTROY of rkey 0x%x: %s", fn, mw->nic->name, mw->rkey,
                        strerror(-rc));
    return 0;
}

uint32_t mlxd_mw_rkey(const struct mlxd_mw *mw) { return mw ? mw->rkey : 0; }
uint32_t mlxd_mw_type(const struct mlxd_mw *mw) { return mw ? mw->type : 0; }

int mlxd__mw_free_all(struct mlxd_nic *nic)
{
    int result = 0;
    for (struct mlxd_mw *mw = nic->mws; mw; mw = mw->next)
        if (mw->state == OBJ_LIVE && mlxd_mw_free(mw) < 0 && !result) result = mw->destroy_result;
    return result;
}
