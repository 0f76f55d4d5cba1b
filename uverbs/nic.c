/* nic.c: opening and closing a NIC, its queries and its events.
 * Recipe: the order rdma-core follows (libibverbs/device.c ibv_open_device, verbs_init_context;
 * providers/mlx5/mlx5.c mlx5_alloc_context, mlx5_set_context); layouts: the kernel's
 * include/uapi/rdma/mlx5-abi.h, ib_user_verbs.h, ib_user_ioctl_cmds.h, mlx5_user_ioctl_cmds.h;
 * rules: drivers/infiniband/core/uverbs_std_types_device.c, uverbs_std_types_async_fd.c,
 * drivers/infiniband/hw/mlx5/main.c (mlx5_ib_alloc_ucontext, UAR objects). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "driver.h"
#include "opts.h"
#include "mlxd_abi.h"
#include "ioctl.h"
#include "mlxd_error.h"
#include "sysfs.h"

/* Closed NICs stay here (reachable) so that calls on them give -EINVAL (see mlxd_uverbs.h). */
static pthread_mutex_t closed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mlxd_nic *closed_nics;

static long page_size(void) { long p = sysconf(_SC_PAGESIZE); return p > 0 ? p : 4096; }

int mlxd__uar_alloc(struct mlxd_nic *nic, uint32_t type, uint32_t *handle, uint32_t *page_id,
                    void **map)
{
    struct ioc c;
    uint64_t off = 0;
    uint32_t len = 0, pid = 0;
    ioc_init(&c, MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_ALLOC);
    int h = ioc_obj(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, 0);
    ioc_in_u64(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, type);
    ioc_out(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &off, sizeof off);
    ioc_out(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &len, sizeof len);
    ioc_out(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, &pid, sizeof pid);
    int rc = mlxd__ioctl(nic->fd, &c);
    if (rc) return rc;
    *handle = (uint32_t)ioc_value(&c, h);
    if (len < page_size()) {
        mlxd__uar_free(nic, *handle, NULL);
        return MLXD__UAR_TOO_SMALL;
    }
    void *m = mmap(NULL, (size_t)page_size(), PROT_WRITE, MAP_SHARED, nic->fd, (off_t)off);
    if (m == MAP_FAILED) {
        rc = -errno;
        mlxd__uar_free(nic, *handle, NULL);
        return rc;
    }
    *page_id = pid;
    *map = m;
    return 0;
}

int mlxd__uar_free(struct mlxd_nic *nic, uint32_t handle, void *map)
{
    if (map) munmap(map, (size_t)page_size());
    struct ioc c;
    ioc_init(&c, MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_DESTROY);
    ioc_obj(&c, MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle);
    return mlxd__ioctl(nic->fd, &c);
}

static int pd_destroy(struct mlxd_nic *nic)
{
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY);
    ioc_obj(&c, UVERBS_ATTR_DESTROY_PD_HANDLE, nic->pd_handle);
    return mlxd__ioctl(nic->fd, &c);
}

#define KERR(nic, rc, call) \
    mlxd_err(-(rc), "mlxd_open %s: the kernel refused %s: %s", (nic)->name, call, strerror(-(rc)))

static int get_context(struct mlxd_nic *nic)
{
    struct mlx5_ib_alloc_ucontext_req_v2 req;
    struct mlx5_ib_alloc_ucontext_resp resp;
    uint32_t ncv = 0;
    uint64_t core_support = 0;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    req.total_num_bfregs = 16;          /* ignored with DYN_UAR (mlx5_ib_alloc_ucontext) */
    req.num_low_latency_bfregs = 4;
    req.max_cqe_version = 1;
    req.lib_caps = MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT);
    ioc_out(&c, UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, &ncv, sizeof ncv);
    ioc_out(&c, UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &core_support, sizeof core_support);
    ioc_in(&c, UVERBS_ATTR_UHW_IN, &req, sizeof req);
    ioc_out(&c, UVERBS_ATTR_UHW_OUT, &resp, sizeof resp);
    int rc = mlxd__ioctl(nic->fd, &c);
    if (rc == -EADDRINUSE)   /* no kernel says this: the emulated device's UDP address is taken */
        return mlxd_err(EADDRINUSE, "mlxd_open %s: the kernel refused GET_CONTEXT: %s (the emulated device's "
                        "UDP address is held by another program: give this one free addresses with "
                        "MLXD_EMU_DEVICES, e.g. MLXD_EMU_DEVICES=mlx5_0:127.0.9.1,mlx5_1:127.0.9.2; the emulator "
                        "names the address on stderr; docs/emulator.md)", nic->name, strerror(EADDRINUSE));
    if (rc) return KERR(nic, rc, "GET_CONTEXT");
    nic->bf_reg_size = resp.bf_reg_size;
    nic->cache_line_size = resp.cache_line_size ? resp.cache_line_size : 64;
    nic->max_sq_desc_sz = resp.max_sq_desc_sz;
    nic->max_rq_desc_sz = resp.max_rq_desc_sz;
    nic->max_send_wqebb = resp.max_send_wqebb;
    nic->max_recv_wr = resp.max_recv_wr;
    nic->num_uars_per_page = resp.num_uars_per_page;
    nic->cqe_version = resp.cqe_version;
    nic->num_comp_vectors = ncv;
    nic->real_time_ts = (resp.comp_mask & MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS) != 0;
    nic->clock_info_versions = resp.clock_info_versions;
    return 0;
}

static int async_alloc(struct mlxd_nic *nic)
{
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC);
    int i = ioc_obj(&c, UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, 0);
    int rc = mlxd__ioctl(nic->fd, &c);
    if (rc) return KERR(nic, rc, "ASYNC_EVENT_ALLOC");
    nic->async_fd = (int)(int64_t)ioc_value(&c, i);
    return 0;
}

static int query_port(struct mlxd_nic *nic)
{
    struct ib_uverbs_query_port_resp_ex resp;
    memset(&resp, 0, sizeof resp);
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    ioc_in_u64(&c, UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1);
    ioc_out(&c, UVERBS_ATTR_QUERY_PORT_RESP, &resp, sizeof resp);
    int rc = mlxd__ioctl(nic->fd, &c);
    if (rc) return KERR(nic, rc, "QUERY_PORT");
    struct ib_uverbs_query_port_resp *p = &resp.legacy_resp;
    nic->port.link_layer = p->link_layer ? p->link_layer : MLXD_LINK_INFINIBAND;
    nic->port.state = p->state;
    nic->port.max_msg_sz = p->max_msg_sz;
    nic->port.active_mtu = p->active_mtu;
    nic->port.active_mtu_bytes = (p->active_mtu >= 1 && p->active_mtu <= 5) ? 256u << (p->active_mtu - 1) : 0;
    nic->port.gid_tbl_len = p->gid_tbl_len;
    return 0;
}

static int query_gids(struct mlxd_nic *nic)
{
    struct ib_uverbs_gid_entry *e = calloc(MLXD_MAX_GIDS, sizeof *e);
    if (!e) return mlxd_err(ENOMEM, "mlxd_open %s: out of memory", nic->name);
    uint64_t n = 0;
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE);
    ioc_in_u64(&c, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, sizeof *e);
    ioc_out(&c, UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, e, (uint16_t)(MLXD_MAX_GIDS * sizeof *e));
    ioc_out(&c, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &n, sizeof n);
    int rc = mlxd__ioctl(nic->fd, &c);
    if (rc) { free(e); return KERR(nic, rc, "QUERY_GID_TABLE"); }
    if (n > MLXD_MAX_GIDS) n = MLXD_MAX_GIDS;
    nic->ngids = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (e[i].port_num != 1) continue;
        struct mlxd_gid *g = &nic->gids[nic->ngids++];
        memcpy(g->raw, e[i].gid, 16);
        g->index = e[i].gid_index;
        g->type = e[i].gid_type;
        g->ifindex = e[i].netdev_ifindex;
    }
    free(e);
    /* ascending index */
    for (unsigned i = 1; i < nic->ngids; i++)
        for (unsigned j = i; j > 0 && nic->gids[j - 1].index > nic->gids[j].index; j--) {
            struct mlxd_gid t = nic->gids[j]; nic->gids[j] = nic->gids[j - 1]; nic->gids[j - 1] = t;
        }
    static const uint8_t v4pfx[12] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff};
    nic->default_gid = -1;
    if (nic->port.link_layer == MLXD_LINK_ETHERNET) {
        for (unsigned i = 0; i < nic->ngids && nic->default_gid < 0; i++)
            if (nic->gids[i].type == MLXD_GID_TYPE_ROCE_V2 && !memcmp(nic->gids[i].raw, v4pfx, 12))
                nic->default_gid = (int)nic->gids[i].index;
        for (unsigned i = 0; i < nic->ngids && nic->default_gid < 0; i++)
            if (nic->gids[i].type == MLXD_GID_TYPE_ROCE_V2) nic->default_gid = (int)nic->gids[i].index;
    } else if (nic->ngids) {
        nic->default_gid = (int)nic->gids[0].index;
    }
    return 0;
}

/* QUERY_DEVICE (legacy command 1 through INVOKE_WRITE; kernel
 * drivers/infiniband/core/uverbs_cmd.c ib_uverbs_query_device).  Optional: a kernel that does
 * not answer it leaves the bounds GET_CONTEXT implies. */
static void query_device(struct mlxd_nic *nic)
{
    uint64_t req = 0;
    struct ib_uverbs_query_device_resp r;
    memset(&r, 0, sizeof r);
    nic->max_cqe = 1u << 22;
    nic->max_qp_wr = nic->max_recv_wr ? nic->max_recv_wr : 1u << 15;
    nic->max_sge = 30;
    nic->max_qp_rd_atom = 16;
    if (mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_QUERY_DEVICE, &req, sizeof req, &r, sizeof r,
                           NULL, 0, NULL, 0) == 0 && r.max_cqe) {
        /* the kernel reports 2^k - 1 (one CQE is the ring's slack): the ring may hold 2^k */
        uint32_t m = r.max_cqe + 1;
        if (m & (m - 1)) { m = r.max_cqe; while (m & (m - 1)) m &= m - 1; }
        nic->max_cqe = m;
        if (r.max_qp_wr) nic->max_qp_wr = r.max_qp_wr;
        if (r.max_sge) nic->max_sge = r.max_sge;
        if (r.max_qp_rd_atom) nic->max_qp_rd_atom = r.max_qp_rd_atom;
        nic->max_srq_wr = r.max_srq_wr;      /* 0: the device has no SRQs */
        nic->max_srq_sge = r.max_srq_sge;
    }
}

/* mlxd_open's arguments. */
static int check_open_args(const char *name, const struct mlxd_open_opts *opts)
{
    if (!name || !*name || strlen(name) >= 64 || strchr(name, '/'))
        return mlxd_err(EINVAL, "mlxd_open: invalid device name");
    if (opts) {
        if (opts->sz < offsetof(struct mlxd_open_opts, port) + sizeof opts->port)
            return mlxd_err(EINVAL, "mlxd_open: opts->sz %zu is too small", opts->sz);
        int trc = mlxd__opts_tail_check("mlxd_open", "opts", opts, opts->sz, sizeof *opts);
        if (trc) return trc;
        if (opts->port > 1)
            return mlxd_err(EINVAL, "mlxd_open: port %u: only port 1 can be opened", opts->port);
    }
    return 0;
}

/* The RDMA device name in sysfs, held by mlx5, and *idx the N of its /dev/infiniband/uverbsN. */
static int find_device(const char *name, int *idx)
{
    const char *root = mlxd_sysfs_root();
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/class/infiniband/%s", root, name);
    if (stat(path, &st) < 0)
        return mlxd_err(ENODEV, "mlxd_open: no RDMA device %s (%s: %s)", name, path, strerror(errno));
    if (!mlxd__is_mlx5(root, name))
        return mlxd_err(ENODEV, "mlxd_open: %s is not held by mlx5_core or mlx5_core.sf (%s/device/driver)",
                        name, path);
    int rc = mlxd__find_uverbs(root, name, idx);
    if (rc)
        return mlxd_err(ENOENT, "mlxd_open: %s has no verbs file: no uverbsN in %s/class/infiniband_verbs names it%s%s",
                        name, root, rc == -ENOENT ? "" : ": ", rc == -ENOENT ? "" : strerror(-rc));
    return 0;
}

/* Port 1: active, Ethernet, with a RoCE v2 GID (its attributes and GID table read). */
static int check_port(struct mlxd_nic *nic)
{
    int rc = query_port(nic);
    if (rc) return rc;
    if (nic->port.state != 4)
        return mlxd_err(ENETDOWN, "mlxd_open %s: port 1 is not active (state %u, 4 = ACTIVE)", nic->name,
                        nic->port.state);
    if (nic->port.link_layer != MLXD_LINK_ETHERNET) {
        /* mlx5direct addresses peers by GID over RoCE v2 (UDP/IP) only: an InfiniBand port needs
         * LIDs in the address vector (kernel hw/mlx5/qp.c mlx5_set_path), which mlxd_qp_connect
         * does not set, so a connection there could never reach its peer */
        return mlxd_err(EPROTONOSUPPORT, "mlxd_open %s: port 1 is InfiniBand (link layer %u); mlx5direct "
                        "supports RoCE v2 on Ethernet ports only (no LID addressing)", nic->name,
                        nic->port.link_layer);
    }
    if ((rc = query_gids(nic))) return rc;
    if (nic->port.link_layer == MLXD_LINK_ETHERNET && nic->default_gid < 0)
        return mlxd_err(EADDRNOTAVAIL, "mlxd_open %s: Ethernet port 1 has no RoCE v2 GID", nic->name);
    return 0;
}

/* The device's limits into nic->port (query_device), the largest inline send it allows. */
static void port_limits(struct mlxd_nic *nic)
{
    query_device(nic);
    nic->port.max_cqe = nic->max_cqe;
    nic->port.max_qp_wr = nic->max_qp_wr;
    nic->port.bf_reg_size = nic->bf_reg_size;
    nic->port.cqe_version = nic->cqe_version;
}

/* The inline room of a send WQE: its descriptor limit less ctrl + raddr + inline header. */
static void inline_limit(struct mlxd_nic *nic)
{
    uint32_t wqe_max = nic->max_sq_desc_sz ? nic->max_sq_desc_sz : 1008;
    if (wqe_max > 63 * 16) wqe_max = 63 * 16;
    nic->port.max_inline = wqe_max - 16 - 16 - 4;  /* ctrl + raddr + inline header */
}

/* The NIC's own doorbell page (a non-cached UAR, mapped), once a system page holds whole UARs. */
static int alloc_uar(struct mlxd_nic *nic)
{
    long need = page_size() / MLXD_ADAPTER_PAGE_SIZE;
    if (need < 1) need = 1;
    if (nic->num_uars_per_page < (uint32_t)need)
        return mlxd_err(ENOSPC, "mlxd_open %s: the kernel gives %u doorbell registers (4 KiB UARs) per page, "
                        "fewer than one %ld-byte system page holds (%ld)", nic->name, nic->num_uars_per_page,
                        page_size(), need);
    int rc = mlxd__uar_alloc(nic, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC, &nic->uar_handle, &nic->uar_page_id,
                             &nic->uar_map);
    if (rc == MLXD__UAR_TOO_SMALL)
        return mlxd_err(ENOSPC, "mlxd_open %s: UAR_OBJ_ALLOC gave a doorbell register mapping smaller "
                        "than a system page (%ld bytes)", nic->name, page_size());
    if (rc)
        return mlxd_err(-rc, "mlxd_open %s: the kernel refused UAR_OBJ_ALLOC (NC) + MMAP: %s", nic->name,
                        strerror(-rc));
    return 0;
}

/* The protection domain every object of the NIC is made in. */
static int alloc_pd(struct mlxd_nic *nic)
{
    uint64_t req = 0;
    uint32_t resp = 0, pdn = 0;
    int rc = mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_ALLOC_PD, &req, sizeof req, &resp,
                                sizeof resp, NULL, 0, &pdn, sizeof pdn);
    if (rc) return KERR(nic, rc, "ALLOC_PD");
    nic->pd_handle = resp;
    nic->pdn = pdn;
    return 0;
}

int mlxd_open(const char *name, const struct mlxd_open_opts *opts, struct mlxd_nic **out)
{
    if (!out) return mlxd_err(EINVAL, "mlxd_open: out must not be NULL");
    int idx;
    int rc = check_open_args(name, opts);
    if (rc) return rc;
    if ((rc = find_device(name, &idx))) return rc;

    struct mlxd_nic *nic = calloc(1, sizeof *nic);
    if (!nic) return mlxd_err(ENOMEM, "mlxd_open: out of memory");
    strcpy(nic->name, name);
    snprintf(nic->dev_path, sizeof nic->dev_path, "/dev/infiniband/uverbs%d", idx);
    nic->fd = nic->async_fd = nic->comp_fd = -1;
    pthread_mutex_init(&nic->lock, NULL);

    nic->fd = open(nic->dev_path, O_RDWR | O_CLOEXEC);
    if (nic->fd < 0) {
        int e = errno;
        rc = e == ENOENT
            ? mlxd_err(ENOENT, "mlxd_open %s: no verbs file %s: %s", name, nic->dev_path, strerror(e))
            : mlxd_err(e, "mlxd_open %s: cannot open the verbs file %s: %s", name, nic->dev_path, strerror(e));
        goto fail_free;
    }
    if ((rc = get_context(nic))) goto fail_close;
    if ((rc = async_alloc(nic))) goto fail_close;
    if ((rc = check_port(nic))) goto fail_async;
    port_limits(nic);
    mlxd__clock_open(nic);
    inline_limit(nic);
    if ((rc = alloc_uar(nic))) goto fail_async;
    if ((rc = alloc_pd(nic))) goto fail_uar;
    nic->state = OBJ_LIVE;
    nic->fork_gen = mlxd__fork_gen;
    *out = nic;
    return 0;

fail_uar:
    mlxd__uar_free(nic, nic->uar_handle, nic->uar_map);
fail_async:
    mlxd__clock_close(nic);
    close(nic->async_fd);
fail_close:
    close(nic->fd);
fail_free:
    pthread_mutex_destroy(&nic->lock);
    free(nic);
    return rc;
}

static int first_err(int cur, int rc) { return cur ? cur : rc; }

int mlxd__forked_child(const char *fn, const struct mlxd_nic *n)
{
    return mlxd_err(EINVAL, "%s %s: called in a child of fork(): the NIC and its objects belong to the "
                    "parent process (the child shares its uverbs file, so the call would act on the "
                    "parent's objects); nothing was done (open the device again in the child)", fn, n->name);
}

int mlxd_close(struct mlxd_nic *nic)
{
    if (!nic) return mlxd_err(EINVAL, "mlxd_close: nic is NULL");
    if (NIC_FORKED(nic)) return mlxd__forked_child("mlxd_close", nic);
    if (nic->state != OBJ_LIVE) return 0;
    int result = 0;
    for (struct mlxd_qp *qp = nic->qps; qp; qp = qp->next)
        if (qp->state == OBJ_LIVE) result = first_err(result, mlxd_qp_destroy(qp) < 0 ? qp->destroy_result : 0);
    for (struct mlxd_srq *s = nic->srqs; s; s = s->next)
        if (s->state == OBJ_LIVE && s->qps == 0)
            result = first_err(result, mlxd_srq_destroy(s) < 0 ? s->destroy_result : 0);
    result = first_err(result, mlxd__ah_destroy_all(nic));
    result = first_err(result, mlxd__mw_free_all(nic));
    for (struct mlxd_cq *cq = nic->cqs; cq; cq = cq->next)
        if (cq->state == OBJ_LIVE) result = first_err(result, mlxd_cq_destroy(cq) < 0 ? cq->destroy_result : 0);
    for (struct mlxd_region *r = nic->regions; r; r = r->next)
        if (r->state == OBJ_LIVE) result = first_err(result, mlxd_region_deregister(r) < 0 ? r->deregister_result : 0);
    /* Objects the kernel refused to destroy still hold the PD and the UAR: then only closing the
     * verbs file (below) releases them, and PD/UAR destroys would just be refused (EBUSY). */
    bool leftovers = false;
    for (struct mlxd_qp *qp = nic->qps; qp; qp = qp->next) leftovers |= qp->destroy_result != 0;
    for (struct mlxd_srq *s = nic->srqs; s; s = s->next) leftovers |= s->destroy_result != 0 || s->state == OBJ_LIVE;
    for (struct mlxd_cq *cq = nic->cqs; cq; cq = cq->next) leftovers |= cq->destroy_result != 0;
    for (struct mlxd_region *r = nic->regions; r; r = r->next) leftovers |= r->deregister_result != 0;
    for (struct mlxd_ah *ah = nic->ahs; ah; ah = ah->next) leftovers |= ah->destroy_result != 0;
    for (struct mlxd_mw *mw = nic->mws; mw; mw = mw->next) leftovers |= mw->destroy_result != 0;
    if (!leftovers) {
        int rc = pd_destroy(nic);
        if (rc) result = first_err(result, mlxd_err(-rc, "mlxd_close %s: the kernel refused PD_DESTROY: %s", nic->name, strerror(-rc)));
        rc = mlxd__uar_free(nic, nic->uar_handle, nic->uar_map);
        if (rc) result = first_err(result, mlxd_err(-rc, "mlxd_close %s: the kernel refused UAR_OBJ_DESTROY: %s", nic->name, strerror(-rc)));
    } else {
        munmap(nic->uar_map, (size_t)page_size());
    }
    nic->uar_map = NULL;
    mlxd__clock_close(nic);
    if (nic->comp_fd >= 0) close(nic->comp_fd);
    close(nic->async_fd);
    close(nic->fd);
    nic->comp_fd = nic->async_fd = nic->fd = -1;
    /* closing the verbs file destroyed what the kernel refused to destroy before: the memory
     * kept for those objects (the NIC might still have written it) can go now */
    for (struct mlxd_qp *qp = nic->qps; qp; qp = qp->next) {
        if (qp->uar_map) { munmap(qp->uar_map, (size_t)page_size()); qp->uar_map = NULL; qp->bf_reg = NULL; }
        mlxd__qp_release(qp);
    }
    for (struct mlxd_cq *cq = nic->cqs; cq; cq = cq->next) mlxd__cq_release(cq);
    for (struct mlxd_srq *s = nic->srqs; s; s = s->next) { mlxd__srq_release(s); s->state = OBJ_DEAD; }
    nic->state = OBJ_DEAD;
    pthread_mutex_lock(&closed_lock);
    nic->next_closed = closed_nics;
    closed_nics = nic;
    pthread_mutex_unlock(&closed_lock);
    return result;
}

/* ---- queries ---- */

int mlxd_port_info(const struct mlxd_nic *nic, struct mlxd_port_info *out)
{
    if (!nic_ok(nic) || !out) return mlxd_err(EINVAL, "mlxd_port_info: invalid or closed nic (or its parent's, in a child of fork), or out NULL");
    *out = nic->port;
    return 0;
}

int mlxd_link_layer(const struct mlxd_nic *nic)
{
    if (!nic_ok(nic)) return mlxd_err(EINVAL, "mlxd_link_layer: invalid or closed nic (or its parent's, in a child of fork)");
    return (int)nic->port.link_layer;
}

uint32_t mlxd_max_message(const struct mlxd_nic *nic)
{
    return nic_ok(nic) ? nic->port.max_msg_sz : 0;
}

const char *mlxd_nic_name(const struct mlxd_nic *nic) { return nic ? nic->name : ""; }

int mlxd_gids(const struct mlxd_nic *nic, struct mlxd_gid *out, size_t cap)
{
    if (!nic_ok(nic) || (cap && !out)) return mlxd_err(EINVAL, "mlxd_gids: invalid arguments");
    for (size_t i = 0; i < cap && i < nic->ngids; i++) out[i] = nic->gids[i];
    return (int)nic->ngids;
}

int mlxd_default_gid_index(const struct mlxd_nic *nic)
{
    if (!nic_ok(nic)) return mlxd_err(EINVAL, "mlxd_default_gid_index: invalid or closed nic (or its parent's, in a child of fork)");
    if (nic->default_gid < 0) return mlxd_err(EADDRNOTAVAIL, "mlxd_default_gid_index %s: no GID", nic->name);
    return nic->default_gid;
}

int mlxd_gid_for_peer(const struct mlxd_nic *nic, const struct sockaddr *peer, socklen_t len,
                      struct mlxd_gid *gid)
{
    if (!nic_ok(nic) || !peer || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6) ||
        len < (peer->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) ||
        len > sizeof(struct sockaddr_storage))
        return mlxd_err(EINVAL, "mlxd_gid_for_peer: invalid arguments (nic, peer NULL, family %d or length %u)",
                        peer ? peer->sa_family : -1, (unsigned)len);
    int s = socket(peer->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return mlxd_err(errno, "mlxd_gid_for_peer: socket: %s", strerror(errno));
    struct sockaddr_storage dst;
    memcpy(&dst, peer, len);
    if (dst.ss_family == AF_INET && ((struct sockaddr_in *)&dst)->sin_port == 0)
        ((struct sockaddr_in *)&dst)->sin_port = htons(4791);
    if (dst.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&dst)->sin6_port == 0)
        ((struct sockaddr_in6 *)&dst)->sin6_port = htons(4791);
    struct sockaddr_storage src;
    socklen_t sl = sizeof src;
    if (connect(s, (struct sockaddr *)&dst, len) < 0 || getsockname(s, (struct sockaddr *)&src, &sl) < 0) {
        int e = errno;
        close(s);
        return mlxd_err(e, "mlxd_gid_for_peer: no route to the peer: %s", strerror(e));
    }
    close(s);
    uint8_t want[16] = {0};
    char txt[INET6_ADDRSTRLEN] = "";
    if (src.ss_family == AF_INET) {
        want[10] = want[11] = 0xff;
        memcpy(want + 12, &((struct sockaddr_in *)&src)->sin_addr, 4);
        inet_ntop(AF_INET, &((struct sockaddr_in *)&src)->sin_addr, txt, sizeof txt);
    } else {
        memcpy(want, &((struct sockaddr_in6 *)&src)->sin6_addr, 16);
        inet_ntop(AF_INET6, want, txt, sizeof txt);
    }
    for (unsigned i = 0; i < nic->ngids; i++)
        if (nic->gids[i].type == MLXD_GID_TYPE_ROCE_V2 && !memcmp(nic->gids[i].raw, want, 16)) {
            if (gid) *gid = nic->gids[i];
            return (int)nic->gids[i].index;
        }
    return mlxd_err(EADDRNOTAVAIL, "mlxd_gid_for_peer %s: no RoCE v2 GID of port 1 carries the source address %s",
                    nic->name, txt);
}

/* ---- events ---- */

int mlxd__comp_channel(struct mlxd_nic *nic)
{
    if (nic->comp_fd >= 0) return 0;
    uint64_t req = 0;
    struct ib_uverbs_create_comp_channel_resp resp = {0};
    int rc = mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, &req, sizeof req,
                                &resp, sizeof resp, NULL, 0, NULL, 0);
    if (rc) return rc;
    nic->comp_fd = (int)resp.fd;
    return 0;
}

int mlxd_event_fds(const struct mlxd_nic *nic, int *async_fd, int *comp_fd)
{
    if (!nic_ok(nic)) return mlxd_err(EINVAL, "mlxd_event_fds: invalid or closed nic (or its parent's, in a child of fork)");
    if (async_fd) *async_fd = nic->async_fd;
    if (comp_fd) *comp_fd = nic->comp_fd;
    return 0;
}

static struct mlxd_cq *find_cq(struct mlxd_nic *nic, uint64_t h)
{
    for (struct mlxd_cq *cq = nic->cqs; cq; cq = cq->next)
        if ((uintptr_t)cq == h && cq->state == OBJ_LIVE) return cq;
    return NULL;
}

static struct mlxd_srq *find_srq(struct mlxd_nic *nic, uint64_t h)
{
    for (struct mlxd_srq *s = nic->srqs; s; s = s->next)
        if ((uintptr_t)s == h && s->state == OBJ_LIVE) return s;
    return NULL;
}

static struct mlxd_qp *find_qp(struct mlxd_nic *nic, uint64_t h)
{
    for (struct mlxd_qp *qp = nic->qps; qp; qp = qp->next)
        if ((uintptr_t)qp == h && qp->state == OBJ_LIVE) return qp;
    return NULL;
}

/* Reads one descriptor from fd into ev; returns 1 (an event kept), 0 (dropped), -errno. */
static int read_event(struct mlxd_nic *nic, int fd, bool comp, struct mlxd_event *ev)
{
    memset(ev, 0, sizeof *ev);
    if (comp) {
        /* zeroed: memcheck cannot see a kernel (or the emulator's process_vm_writev) fill it */
        struct ib_uverbs_comp_event_desc d = { 0 };
        ssize_t n = read(fd, &d, sizeof d);
        if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n != sizeof d) return 0;
        pthread_mutex_lock(&nic->lock);
        struct mlxd_cq *cq = find_cq(nic, d.cq_handle);
        if (cq) {
            atomic_fetch_add_explicit(&cq->arm_sn, 1, memory_order_relaxed);
            ev->kind = MLXD_EVENT_COMPLETION;
            ev->cq = cq;
            ev->user_data = cq->user_data;
        }
        pthread_mutex_unlock(&nic->lock);
        return cq != NULL;
    }
    struct ib_uverbs_async_event_desc d = { 0 };
    ssize_t n = read(fd, &d, sizeof d);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -errno;
    if (n != sizeof d) return 0;
    ev->kernel_type = d.event_type;
    int keep = 1;
    pthread_mutex_lock(&nic->lock);
    switch (d.event_type) {
    case 0:  /* IB_EVENT_CQ_ERR */
        ev->kind = MLXD_EVENT_CQ_ERROR;
        if (!(ev->cq = find_cq(nic, d.element))) keep = 0; else ev->user_data = ev->cq->user_data;
        break;
    case 1: case 2: case 3: case 4: case 5: case 16:  /* QP events */
        ev->kind = d.event_type == 1 ? MLXD_EVENT_QP_FATAL : d.event_type == 2 ? MLXD_EVENT_QP_REQ_ERROR
                 : d.event_type == 3 ? MLXD_EVENT_QP_ACCESS_ERROR
                 : d.event_type == 16 ? MLXD_EVENT_QP_LAST_WQE : MLXD_EVENT_OTHER;
        if (!(ev->qp = find_qp(nic, d.element))) keep = 0; else ev->user_data = ev->qp->user_data;
        break;
    case 15: ev->kind = MLXD_EVENT_SRQ_LIMIT;      /* IB_EVENT_SRQ_LIMIT_REACHED */
        if (!(ev->srq = find_srq(nic, d.element))) keep = 0; else ev->user_data = ev->srq->user_data;
        break;
    case 8:  ev->kind = MLXD_EVENT_DEVICE_FATAL; ev->user_data = d.element; break;
    case 9:  ev->kind = MLXD_EVENT_PORT_ACTIVE; ev->user_data = d.element; break;
    case 10: ev->kind = MLXD_EVENT_PORT_ERROR; ev->user_data = d.element; break;
    default: ev->kind = MLXD_EVENT_OTHER; ev->user_data = d.element; break;
    }
    pthread_mutex_unlock(&nic->lock);
    return keep;
}

int mlxd_read_completion_event(struct mlxd_nic *nic, struct mlxd_event *ev)
{
    if (!nic_ok(nic) || !ev)
        return mlxd_err(EINVAL, "mlxd_read_completion_event: %s", ev ? "invalid or closed nic" : "ev is NULL");
    if (nic->comp_fd < 0)
        return mlxd_err(EINVAL, "mlxd_read_completion_event %s: no completion channel (no CQ with events)",
                        nic->name);
    int k = read_event(nic, nic->comp_fd, true, ev);
    if (k < 0)
        return mlxd_err(-k, "mlxd_read_completion_event %s: read: %s", nic->name, strerror(-k));
    return k;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mlxd_wait(struct mlxd_nic *nic, int ms, struct mlxd_event *out, size_t cap)
{
    if (!nic_ok(nic)) return mlxd_err(EINVAL, "mlxd_wait: invalid or closed nic (or its parent's, in a child of fork)");
    if (ms < 0) return mlxd_err(EINVAL, "mlxd_wait: ms %d is negative", ms);
    if (!out || !cap) return mlxd_err(EINVAL, "mlxd_wait: no room for events (out NULL or cap 0)");
    size_t n = 0;
    int64_t deadline = now_ms() + ms;
    for (;;) {
        struct pollfd p[2] = {{ .fd = nic->async_fd, .events = POLLIN },
                              { .fd = nic->comp_fd, .events = POLLIN }};
        int left = n ? 0 : (int)(deadline - now_ms());
        if (left < 0) left = 0;
        int r = poll(p, nic->comp_fd >= 0 ? 2 : 1, left);
        if (r < 0) {
            if (errno == EINTR) continue;
            return mlxd_err(errno, "mlxd_wait %s: poll: %s", nic->name, strerror(errno));
        }
        if (r == 0) {
            if (n || left == 0) return (int)n;
            continue;
        }
        for (int i = 0; i < 2 && n < cap; i++) {
            if (!(p[i].revents & POLLIN)) continue;
            int k = read_event(nic, p[i].fd, i == 1, &out[n]);
            if (k < 0) return n ? (int)n : mlxd_err(-k, "mlxd_wait %s: read: %s", nic->name, strerror(-k));
            n += (size_t)k;
        }
        if (n == cap) return (int)n;
    }
}
