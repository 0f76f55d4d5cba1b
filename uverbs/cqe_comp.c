/* cqe_comp.c: whether the device can compress CQEs in a given mini-CQE format, asked as
 * libmlx5 asks (rdma-core providers/mlx5/verbs.c create_cq: cqe_comp_caps.max_num != 0 and the
 * format among cqe_comp_caps.supported_format, else EINVAL there): EX_QUERY_DEVICE with the mlx5
 * driver response (struct mlx5_ib_query_device_resp, include/uapi/rdma/mlx5-abi.h), which the
 * kernel fills from the HCA caps cqe_compression, cqe_compression_max_num and
 * mini_cqe_resp_stride_index (drivers/infiniband/hw/mlx5/main.c mlx5_ib_query_device).  Once
 * per mlxd_cq_create that asks for compression: not a hot path. */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include "driver.h"
#include "ioctl.h"
#include "mlxd_error.h"

int mlxd__cqe_comp_check(struct mlxd_nic *nic, uint32_t format)
{
    static const char fn[] = "mlxd_cq_create";
    if (format & (format - 1) || format > MLXD_CQE_COMP_CSUM_STRIDX)
        return mlxd_err(EINVAL, "%s: cqe_comp 0x%x is not one mini-CQE format (MLXD_CQE_COMP_HASH, "
                        "_CSUM or _CSUM_STRIDX)", fn, format);
    struct ib_uverbs_ex_query_device req = { 0 };
    struct ib_uverbs_ex_query_device_resp resp;
    struct mlx5_ib_query_device_resp mresp;
    memset(&resp, 0, sizeof resp);
    memset(&mresp, 0, sizeof mresp);
    int rc = mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
                                &req, sizeof req, &resp, sizeof resp, NULL, 0, &mresp, sizeof mresp);
    if (rc)
        return mlxd_err(-rc, "%s %s: cqe_comp: the kernel refused EX_QUERY_DEVICE: %s", fn, nic->name, strerror(-rc));
    const size_t end = offsetof(struct mlx5_ib_query_device_resp, cqe_comp_caps) + sizeof mresp.cqe_comp_caps;
    if (mresp.response_length < end || !mresp.cqe_comp_caps.max_num)
        return mlxd_err(EOPNOTSUPP, "%s %s: cqe_comp: the device reports no CQE compression "
                        "(cqe_comp_caps.max_num 0)", fn, nic->name);
    if (!(mresp.cqe_comp_caps.supported_format & format))
        return mlxd_err(EOPNOTSUPP, "%s %s: cqe_comp: mini-CQE format 0x%x is not among the device's "
                        "(cqe_comp_caps.supported_format 0x%x)", fn, nic->name, format,
                        mresp.cqe_comp_caps.supported_format);
    return 0;
}
