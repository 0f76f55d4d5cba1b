/* ioctl.c: issuing RDMA_VERBS_IOCTL requests and legacy commands through INVOKE_WRITE.
 * Sources: kernel drivers/infiniband/core/uverbs_ioctl.c, uverbs_std_types_device.c
 * (INVOKE_WRITE), uverbs_main.c; include/uapi/rdma/rdma_user_ioctl_cmds.h. */
#include <errno.h>
#include <sys/ioctl.h>
#include "ioctl.h"

int mlxd__ioctl(int fd, struct ioc *c)
{
    c->hdr.length = (uint16_t)(sizeof c->hdr + c->hdr.num_attrs * sizeof(struct ib_uverbs_attr));
    int rc;
    do rc = ioctl(fd, RDMA_VERBS_IOCTL, c);
    while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

int mlxd__invoke_write(int fd, uint32_t cmd, const void *core_in, uint16_t in_len,
                       void *core_out, uint16_t out_len, const void *uhw_in, uint16_t uhw_in_len,
                       void *uhw_out, uint16_t uhw_out_len)
{
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE);
    ioc_in(&c, UVERBS_ATTR_CORE_IN, core_in, in_len);
    if (out_len) ioc_out(&c, UVERBS_ATTR_CORE_OUT, core_out, out_len);
    ioc_in_u64(&c, UVERBS_ATTR_WRITE_CMD, cmd);
    if (uhw_in_len) ioc_in(&c, UVERBS_ATTR_UHW_IN, uhw_in, uhw_in_len);
    if (uhw_out_len) ioc_out(&c, UVERBS_ATTR_UHW_OUT, uhw_out, uhw_out_len);
    return mlxd__ioctl(fd, &c);
}
