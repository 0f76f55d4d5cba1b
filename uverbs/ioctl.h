/* ioctl.h (private): building RDMA_VERBS_IOCTL requests (kernel
 * drivers/infiniband/core/uverbs_ioctl.c; include/uapi/rdma/rdma_user_ioctl_cmds.h).
 *
 * A request is the 24-byte struct ib_uverbs_ioctl_hdr followed by 16-byte attributes.  Every
 * attribute is sent MANDATORY (as libibverbs does), so a kernel that does not know one answers
 * EPROTONOSUPPORT instead of silently ignoring it. */
#ifndef MLXD_IOCTL_H
#define MLXD_IOCTL_H

#include <stdint.h>
#include <string.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <rdma/mlx5_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>

#define IOC_MAX_ATTRS 20

struct ioc {
    struct ib_uverbs_ioctl_hdr hdr;
    struct ib_uverbs_attr attrs[IOC_MAX_ATTRS];
};

static inline void ioc_init(struct ioc *c, uint16_t object, uint16_t method)
{
    memset(&c->hdr, 0, sizeof c->hdr);
    c->hdr.object_id = object;
    c->hdr.method_id = method;
    c->hdr.driver_id = RDMA_DRIVER_MLX5;
}

static inline struct ib_uverbs_attr *ioc_attr(struct ioc *c, uint16_t id)
{
    struct ib_uverbs_attr *a = &c->attrs[c->hdr.num_attrs++];
    memset(a, 0, sizeof *a);
    a->attr_id = id;
    a->flags = UVERBS_ATTR_F_MANDATORY;
    return a;
}

/* PTR_IN: inline when len <= 8 (low bytes of data), else a pointer. */
static inline int ioc_in(struct ioc *c, uint16_t id, const void *p, uint16_t len)
{
    struct ib_uverbs_attr *a = ioc_attr(c, id);
    a->len = len;
    if (len <= 8) memcpy(&a->data, p, len);
    else a->data = (uintptr_t)p;
    return c->hdr.num_attrs - 1;
}
static inline void ioc_in_u32(struct ioc *c, uint16_t id, uint32_t v) { ioc_in(c, id, &v, 4); }
/* CONST_IN and 8-byte PTR_IN / FLAGS_IN */
static inline void ioc_in_u64(struct ioc *c, uint16_t id, uint64_t v) { ioc_in(c, id, &v, 8); }

/* PTR_OUT: always a pointer. */
static inline void ioc_out(struct ioc *c, uint16_t id, void *p, uint16_t len)
{
    struct ib_uverbs_attr *a = ioc_attr(c, id);
    a->len = len;
    a->data = (uintptr_t)p;
}

/* IDR handle or FD; for a new object send 0 (fd: -1 is not needed) and read back
 * ioc_value(c, idx) after the call. */
static inline int ioc_obj(struct ioc *c, uint16_t id, uint64_t handle)
{
    struct ib_uverbs_attr *a = ioc_attr(c, id);
    a->data = handle;
    return c->hdr.num_attrs - 1;
}
static inline uint64_t ioc_value(const struct ioc *c, int idx) { return c->attrs[idx].data; }

/* Issues the request on fd; returns 0 or -errno (no message). */
int mlxd__ioctl(int fd, struct ioc *c);

/* INVOKE_WRITE of legacy command `cmd` (core request starting at its `response` field, which is
 * ignored; core response; optional mlx5 driver data).  Returns 0 or -errno. */
int mlxd__invoke_write(int fd, uint32_t cmd, const void *core_in, uint16_t in_len,
                       void *core_out, uint16_t out_len, const void *uhw_in, uint16_t uhw_in_len,
                       void *uhw_out, uint16_t uhw_out_len);

#endif
