/* objects.c: the uverbs objects of one open file and the mlx5_ib rules for creating them.
 *
 * Sources of the validation rules (cited per check below):
 *   k: drivers/infiniband/core/uverbs_cmd.c, uverbs_std_types_{cq,qp,mr}.c, rdma_core.c, verbs.c
 *   k: drivers/infiniband/hw/mlx5/main.c (mlx5_ib_alloc_ucontext), cq.c (mlx5_ib_create_cq,
 *      create_cq_user), qp.c (process_udata_size, _create_user_qp, set_rq_size,
 *      set_user_buf_size, get_qp_user_index, mlx5_ib_modify_qp), doorbell.c, mr.c
 * Handles: one id space per file, lowest free id first, as the kernel's xarray (rdma_core.c
 * alloc_uobj -> xa_alloc).  Every function here runs with emu_g.lock held. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_verbs.h>
#include "kernel.h"

#define LOCK(f)   pthread_mutex_lock(&(f)->ctx.dev->lock)
#define UNLOCK(f) pthread_mutex_unlock(&(f)->ctx.dev->lock)

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
static uint32_t roundup_pow2(uint32_t v) { uint32_t r = 1; while (r < v) r <<= 1; return r; }

/* ---------------------------------------------------------------------------------------------
 * files and handles */
struct emu_file *emu_file_new(struct emu_devstate *ds, int fd)
{
    struct emu_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->ctx.dev = &ds->dev;
    f->ctx.fd = fd;
    f->ctx.default_async_fd = -1;
    f->ctx.objs = f;
    f->next = emu_g.files;
    emu_g.files = f;
    emu_g.nfiles++;
    return f;
}

int emu_uobj_alloc(struct emu_file *f, enum uobj_kind kind, void *obj, uint32_t *handle)
{
    uint32_t h;
    for (h = 0; h < f->nobjs && f->objs[h].kind != UO_NONE; h++) {}
    if (h == f->nobjs) {
        uint32_t n = f->nobjs ? f->nobjs * 2 : 16;
        LOCK(f);       /* the engine walks this table (emu_async_event) under dev->lock */
        struct k_uobj *t = realloc(f->objs, n * sizeof *t);
        if (t) { memset(t + f->nobjs, 0, (n - f->nobjs) * sizeof *t); f->objs = t; f->nobjs = n; }
        UNLOCK(f);
        if (!t) return -ENOMEM;
    }
    LOCK(f);
    f->objs[h].kind = (uint8_t)kind;
    f->objs[h].obj = obj;
    UNLOCK(f);
    f->nlive++;
    *handle = h;
    return 0;
}

void emu_uobj_free(struct emu_file *f, uint32_t handle)
{
    if (handle >= f->nobjs) return;
    LOCK(f);
    f->objs[handle].kind = UO_NONE;
    f->objs[handle].obj = NULL;
    UNLOCK(f);
    f->nlive--;
}

/* k: rdma_core.c lookup_get_idr_uobject: absent -> ENOENT; rdma_lookup_get_uobject: an object
 * of another type -> EINVAL. */
int emu_uobj_get(struct emu_file *f, uint32_t handle, enum uobj_kind kind, void **obj)
{
    if (handle >= f->nobjs || f->objs[handle].kind == UO_NONE) return -ENOENT;
    if (f->objs[handle].kind != kind) return -EINVAL;
    *obj = f->objs[handle].obj;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * UAR pages: a 4 KiB memfd per UAR, mapped once by the emulator (uar->page, what the engine
 * watches) and as often as the process likes through mmap() of the uverbs fd. */
static struct k_uar *uar_new(struct emu_file *f, uint32_t type, bool is_static)
{
    struct k_uar *u = calloc(1, sizeof *u);
    if (!u) return NULL;
    int mfd = (int)syscall(SYS_memfd_create, "mlxd-emu-uar", 1u /* MFD_CLOEXEC */);
    if (mfd < 0) { free(u); return NULL; }
    if (ftruncate(mfd, EMU_PAGE) < 0) { emu_real.close(mfd); free(u); return NULL; }
    void *p = emu_real.mmap(NULL, EMU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (p == MAP_FAILED) { emu_real.close(mfd); free(u); return NULL; }
    u->memfd = mfd;
    u->pub.page = p;
    u->pub.type = type;
    u->is_static = is_static;
    struct emu_devstate *ds = emu_ds(f);
    u->pub.page_id = ds->next_uar_page++;
    emu_g.live[EMU_OBJ_UAR] += is_static ? 0 : 1;
    return u;
}

static void uar_free(struct k_uar *u)
{
    if (!u) return;
    emu_real.munmap((void *)u->pub.page, EMU_PAGE);
    emu_real.close(u->memfd);
    if (!u->is_static) emu_g.live[EMU_OBJ_UAR]--;
    free(u);
}

struct k_uar *emu_k_find_uar_by_page(struct emu_file *f, uint32_t page_id)
{
    for (uint32_t h = 0; h < f->nobjs; h++)
        if (f->objs[h].kind == UO_UAR && ((struct k_uar *)f->objs[h].obj)->pub.page_id == page_id)
            return f->objs[h].obj;
    for (unsigned i = 0; i < f->nstatic; i++)
        if (f->static_uars[i]->pub.page_id == page_id) return f->static_uars[i];
    return NULL;
}

uint64_t emu_uar_mmap_offset(uint32_t index)
{
    /* k: hw/mlx5/main.c mlx5_entry_to_mmap_offset: entries start at MLX5_IB_MMAP_OFFSET_START (9)
     * in the command byte; index bits 0..7 and 16+ as the legacy encoding. */
    uint64_t start_pgoff = (9ull << 16) + index;
    uint64_t cmd = (start_pgoff >> 16) & 0xffff, idx = start_pgoff & 0xffff;
    return (((idx >> 8) << 16) | (cmd << 8) | (idx & 0xff)) * EMU_PAGE;
}

/* MLX5_IB_METHOD_UAR_OBJ_ALLOC (k: hw/mlx5/main.c UVERBS_HANDLER(MLX5_IB_METHOD_UAR_OBJ_ALLOC)) */
int emu_k_uar_alloc(struct emu_file *f, uint32_t type, uint32_t *handle, uint64_t *mmap_off,
                    uint32_t *page_id)
{
    if (type != MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF && type != MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC)
        return -EOPNOTSUPP;
    unsigned n = 0;
    for (uint32_t h = 0; h < f->nobjs; h++) n += f->objs[h].kind == UO_UAR;
    if (n >= EMU_MAX_UARS_PER_CTX) return -ENOMEM;
    struct k_uar *u = uar_new(f, type, false);
    if (!u) return -ENOMEM;
    int r = emu_uobj_alloc(f, UO_UAR, u, handle);
    if (r) { uar_free(u); return r; }
    u->pub.handle = *handle;
    u->pub.mmap_offset = emu_uar_mmap_offset(f->next_mmap_index++);
    *mmap_off = u->pub.mmap_offset;
    *page_id = u->pub.page_id;
    return 0;
}

int emu_k_uar_destroy(struct emu_file *f, struct k_uar *u)
{
    /* A UAR named by a CQ or QP stays: the kernel holds the mmap entry until they are gone; the
     * emulator keeps it simple and refuses, like ib_destroy_usecnt (EBUSY). */
    if (u->usecnt) return -EBUSY;
    emu_uobj_free(f, u->pub.handle);
    for (struct k_map *m = f->maps; m; m = m->next) if (m->uar == u) m->uar = NULL;
    uar_free(u);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * GET_CONTEXT (k: hw/mlx5/main.c mlx5_ib_alloc_ucontext) */
/* The driver's request (struct mlx5_ib_alloc_ucontext_req_v2, *req, zero past what it gave)
 * checked as mlx5_ib_alloc_ucontext checks it; *total: the static bfregs asked for, rounded up
 * to MLX5_NON_FP_BFREGS_PER_UAR (2). */
static int check_ucontext_req(struct emu_file *f, const void *uhw_in, size_t inlen,
                              struct mlx5_ib_alloc_ucontext_req_v2 *req, uint32_t *total)
{
    memset(req, 0, sizeof *req);
    /* k: uverbs: only one ucontext per file */
    if (f->ctx.has_ucontext) return -EINVAL;
    /* k: mlx5_ib_alloc_ucontext: 8 bytes = v0 request, >= offsetof(max_cqe_version) = v2 */
    if (inlen == sizeof(struct mlx5_ib_alloc_ucontext_req)) { /* v0 */ }
    else if (inlen >= offsetof(struct mlx5_ib_alloc_ucontext_req_v2, max_cqe_version)) { /* v2 */ }
    else return -EINVAL;
    memcpy(req, uhw_in, inlen < sizeof *req ? inlen : sizeof *req);
    if (req->flags & ~MLX5_IB_ALLOC_UCTX_DEVX) return -EOPNOTSUPP;
    if (req->comp_mask || req->reserved0 || req->reserved1 || req->reserved2) return -EOPNOTSUPP;
    /* total rounded up to MLX5_NON_FP_BFREGS_PER_UAR (2); u32 arithmetic as the kernel's */
    *total = (req->total_num_bfregs + 1u) & ~1u;
    if (req->num_low_latency_bfregs > *total - 1u) return -EINVAL;
    /* DEVX needs a device with log_max_uctx; the emulated one has none */
    if (req->flags & MLX5_IB_ALLOC_UCTX_DEVX) return -EINVAL;
    bool dyn = req->lib_caps & MLX5_LIB_CAP_DYN_UAR;
    if (!dyn && *total > EMU_MAX_STATIC_BFREGS) return -ENOMEM;
    return 0;
}

/* The legacy static UARs: total bfregs, 2 per UAR page, the last num_low_lat low-latency.
 * -ENOMEM leaves what was made for the caller to free. */
static int alloc_static_uars(struct emu_file *f, uint32_t total, uint32_t num_low_lat)
{
    f->nstatic = total / 2;
    f->static_uars = calloc(f->nstatic, sizeof *f->static_uars);
    f->bfreg_use = calloc(total, sizeof *f->bfreg_use);
    if (!f->static_uars || !f->bfreg_use) return -ENOMEM;
    for (unsigned i = 0; i < f->nstatic; i++) {
        f->static_uars[i] = uar_new(f, MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF, true);
        if (!f->static_uars[i]) return -ENOMEM;
        f->static_uars[i]->static_idx = i;
    }
    f->total_bfregs = total;
    f->num_low_lat = num_low_lat;
    return 0;
}

/* The answer of the device (struct mlx5_ib_alloc_ucontext_resp, k: set_ucontext_resp). */
static void ucontext_resp(struct emu_file *f, const struct mlx5_ib_alloc_ucontext_req_v2 *req,
                          bool dyn, uint32_t total, struct mlx5_ib_alloc_ucontext_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    resp->qp_tab_size = EMU_QP_SLOTS;
    resp->bf_reg_size = EMU_BF_REG_SIZE;
    resp->tot_bfregs = dyn ? 0 : total;
    resp->cache_line_size = 64;
    resp->max_sq_desc_sz = EMU_MAX_SQ_DESC;
    resp->max_rq_desc_sz = EMU_MAX_RQ_DESC;
    resp->max_send_wqebb = EMU_MAX_QP_WR;
    resp->max_recv_wr = EMU_MAX_QP_WR;
    resp->max_srq_recv_wr = EMU_MAX_QP_WR - 1;
    resp->num_ports = 1;
    resp->comp_mask = MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET;
    /* k: set_ucontext_resp: REAL_TIME_TS when the device's sq/rq/qp ts_format caps allow it */
    if (emu_nic_clock_real_time()) resp->comp_mask |= MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS;
    resp->cqe_version = req->max_cqe_version < 1 ? req->max_cqe_version : 1;
    resp->cmds_supp_uhw = MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE;
    /* k: main.c mlx5_ib_alloc_ucontext: on an Ethernet port CREATE_AH returns the dmac */
    if (emu_ds(f)->dev.cfg.ethernet) resp->cmds_supp_uhw |= MLX5_USER_CMDS_SUPP_UHW_CREATE_AH;
    resp->eth_min_inline = 1;           /* MLX5_INLINE_MODE_NONE + 1 */
    resp->clock_info_versions = 1u << MLX5_IB_CLOCK_INFO_V1;   /* the clock-info page (mmap.c) */
    resp->hca_core_clock_offset = EMU_CORE_CLOCK_OFF;
    resp->log_uar_size = 12;
    /* k: mlx5_ib_alloc_ucontext passes the firmware's num_of_uars_per_page through (devices
     * with the uar_4k capability); device option uars_per_page (docs/emulator.md). */
    resp->num_uars_per_page = f->ctx.dev->cfg.uars_per_page;
    resp->num_dyn_bfregs = 0;
}

/* The first context of the device opens it (its QP and MR tables, the NIC half). */
static int device_context_open(struct emu_file *f)
{
    struct emu_device *dev = f->ctx.dev;
    pthread_mutex_lock(&dev->lock);
    int r = 0;
    if (dev->open_contexts++ == 0) {
        struct emu_devstate *ds = emu_ds(f);
        if (!ds->qp_tab) ds->qp_tab = calloc(EMU_QP_SLOTS, sizeof *ds->qp_tab);
        if (!ds->mr_tab) ds->mr_tab = calloc(EMU_MR_SLOTS, sizeof *ds->mr_tab);
        r = (!ds->qp_tab || !ds->mr_tab) ? -ENOMEM : emu_nic_device_open(dev);
        if (r) dev->open_contexts--;
    }
    pthread_mutex_unlock(&dev->lock);
    return r;
}

int emu_k_get_context(struct emu_file *f, const void *uhw_in, size_t inlen, void *respv,
                      size_t *resp_len, size_t outlen)
{
    struct mlx5_ib_alloc_ucontext_req_v2 req;
    uint32_t total;
    int r = check_ucontext_req(f, uhw_in, inlen, &req, &total);
    if (r) return r;
    bool dyn = req.lib_caps & MLX5_LIB_CAP_DYN_UAR;
    if (!dyn && total && (r = alloc_static_uars(f, total, req.num_low_latency_bfregs))) goto fail;

    struct mlx5_ib_alloc_ucontext_resp resp;
    ucontext_resp(f, &req, dyn, total, &resp);
    size_t n = outlen < sizeof resp ? outlen : sizeof resp;
    resp.response_length = (uint32_t)n;
    memcpy(respv, &resp, sizeof resp);
    *resp_len = n;

    f->ctx.has_ucontext = true;
    f->ctx.dyn_uar = dyn;
    f->ctx.cqe_version = resp.cqe_version;
    emu_g.ncontexts++;
    r = device_context_open(f);
    if (r) {
        f->ctx.has_ucontext = false;
        emu_g.ncontexts--;
        goto fail;
    }
    return 0;
fail:
    for (unsigned i = 0; i < f->nstatic; i++) uar_free(f->static_uars ? f->static_uars[i] : NULL);
    free(f->static_uars);
    free(f->bfreg_use);
    f->static_uars = NULL;
    f->bfreg_use = NULL;
    f->nstatic = f->total_bfregs = 0;
    return r;
}

/* A new event file (the async one, or a completion channel) as a uobject of f; *fd its
 * descriptor.  Nothing is left behind on failure. */
static int evq_file_alloc(struct emu_file *f, bool is_async, int *fd)
{
    struct k_evq *q = emu_evq_new(f, is_async);
    if (!q) return -EMFILE;
    uint32_t h;
    int r = emu_uobj_alloc(f, is_async ? UO_ASYNC : UO_COMP_CHANNEL, q, &h);
    if (r) { emu_fdtab[q->chan.fd].kind = FD_NONE; emu_evq_user_close(q); return r; }
    *fd = q->chan.fd;
    return 0;
}

/* ASYNC_EVENT_ALLOC / legacy GET_CONTEXT: the first async fd becomes the default one. */
int emu_k_async_alloc(struct emu_file *f, int *fd)
{
    int r = evq_file_alloc(f, true, fd);
    if (r) return r;
    if (f->ctx.default_async_fd < 0) f->ctx.default_async_fd = *fd;
    return 0;
}

int emu_k_comp_channel(struct emu_file *f, int *fd)
{
    return evq_file_alloc(f, false, fd);
}

/* ---------------------------------------------------------------------------------------------
 * QUERY_DEVICE / QUERY_PORT */
void emu_k_fill_device_attr(struct emu_file *f, void *respv)
{
    struct ib_uverbs_query_device_resp *r = respv;
    const struct emu_device_cfg *c = &f->ctx.dev->cfg;
    memset(r, 0, sizeof *r);
    r->fw_ver = (20ull << 32) | (99ull << 16) | 1;          /* 20.99.0001, as sysfs fw_ver */
    r->node_guid = htobe64(c->node_guid);
    r->sys_image_guid = htobe64(c->node_guid);
    r->max_mr_size = EMU_MAX_MR_SIZE;
    r->page_size_cap = 0xfffff000u;
    r->vendor_id = 0x02c9;
    r->vendor_part_id = 4123;                                /* ConnectX-6, PCI id 0x101B */
    r->hw_ver = 0;
    r->max_qp = EMU_MAX_QP;
    r->max_qp_wr = EMU_MAX_QP_WR;
    r->device_cap_flags = (1u << 10) | (1u << 11) | (1u << 12); /* PORT_ACTIVE_EVENT, SYS_IMAGE_GUID, RC_RNR_NAK_GEN */
    /* memory windows: k: hw/mlx5/main.c mlx5_ib_query_device, with the imaicl capability:
     * IB_DEVICE_MEM_WINDOW | IB_DEVICE_MEM_WINDOW_TYPE_2B, max_mw = the mkey table (emu/kernel/mw_objects.c) */
    r->device_cap_flags |= IB_UVERBS_DEVICE_MEM_WINDOW | IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B;
    r->max_mw = EMU_MAX_MR;
    r->max_sge = EMU_MAX_SGE;
    r->max_sge_rd = EMU_MAX_SGE;
    r->max_cq = EMU_MAX_CQ;
    r->max_cqe = EMU_MAX_CQE;
    r->max_mr = EMU_MAX_MR;
    r->max_pd = EMU_MAX_PD;
    r->max_qp_rd_atom = EMU_MAX_RD_ATOM;
    r->max_res_rd_atom = EMU_MAX_RD_ATOM * EMU_MAX_QP;
    r->max_qp_init_rd_atom = EMU_MAX_RD_ATOM;
    /* IB_ATOMIC_HCA: 8-byte compare-and-swap and fetch-and-add, atomic with respect to other
     * atomics of this NIC (the NIC half executes them in its engine, emu/nic/nic_atomic.c).
     * mlx5_ib advertises HCA only when the device runs 8-byte atomics in host endianness
     * (kernel hw/mlx5/main.c, mlx5_ib_query_device; mlx5_core main.c handle_hca_cap_atomic),
     * which is what the emulated NIC does.  Masked (extended) atomics are not advertised. */
    r->atomic_cap = 1;
    r->max_ah = 0x7fffffff;
    /* k: mlx5_ib_query_device: max_srq_wr = (1 << log_max_srq_sz) - 1, max_srq_sge =
     * max_wqe_sz_rq / 16 - 1 (srq_objects.c) */
    r->max_srq = EMU_MAX_SRQ;
    r->max_srq_wr = (1u << EMU_LOG_MAX_SRQ_SZ) - 1;
    r->max_srq_sge = EMU_MAX_RQ_DESC / 16 - 1;
    r->max_pkeys = 1;
    r->local_ca_ack_delay = 16;
    r->phys_port_cnt = 1;
}

static uint8_t mtu_enum(unsigned mtu)
{
    switch (mtu) { case 256: return 1; case 512: return 2; case 1024: return 3; case 2048: return 4; default: return 5; }
}

void emu_k_fill_port(struct emu_file *f, void *respv)
{
    struct ib_uverbs_query_port_resp *r = respv;
    const struct emu_device_cfg *c = &f->ctx.dev->cfg;
    memset(r, 0, sizeof *r);
    /* CM_SUP, IP_BASED_GIDS (RoCE); an IB port: CM_SUP, and a LID from the subnet manager */
    r->port_cap_flags = c->ethernet ? (1u << 16) | (1u << 26) : 1u << 16;
    r->lid = c->ethernet ? 0 : (uint16_t)(1 + c->index);
    r->sm_lid = c->ethernet ? 0 : 1;
    r->max_msg_sz = EMU_MAX_MSG;
    r->gid_tbl_len = EMU_GID_TBL_LEN;
    r->pkey_tbl_len = 1;
    r->state = c->link_up ? 4 : 1;               /* IB_PORT_ACTIVE / IB_PORT_DOWN */
    r->max_mtu = 5;                              /* 4096 */
    r->active_mtu = mtu_enum(c->mtu);
    r->max_vl_num = 1;
    r->active_width = 2;                         /* 4X */
    r->active_speed = 64;                        /* HDR */
    r->phys_state = c->link_up ? 5 : 3;          /* LinkUp / Disabled */
    r->link_layer = c->ethernet ? 2 : 1;         /* IB_LINK_LAYER_ETHERNET */
}

/* ---------------------------------------------------------------------------------------------
 * PD */
int emu_k_alloc_pd(struct emu_file *f, uint32_t *handle, uint32_t *pdn)
{
    struct emu_devstate *ds = emu_ds(f);
    if (ds->npd >= EMU_MAX_PD) return -ENOMEM;
    struct k_pd *pd = calloc(1, sizeof *pd);
    if (!pd) return -ENOMEM;
    int r = emu_uobj_alloc(f, UO_PD, pd, handle);
    if (r) { free(pd); return r; }
    LOCK(f);
    pd->pub.handle = *handle;
    pd->pub.pdn = ds->next_pdn++ & 0xffffff;
    pd->pub.ctx = &f->ctx;
    ds->npd++;
    UNLOCK(f);
    emu_g.live[EMU_OBJ_PD]++;
    *pdn = pd->pub.pdn;
    return 0;
}

/* k: uverbs_std_types.c uverbs_free_pd -> ib_destroy_usecnt: still used -> EBUSY (unless the
 * file is being closed, when dependents were destroyed first). */
int emu_k_dealloc_pd(struct emu_file *f, struct k_pd *pd)
{
    if (pd->usecnt) return -EBUSY;
    emu_uobj_free(f, pd->pub.handle);
    LOCK(f);
    emu_ds(f)->npd--;
    UNLOCK(f);
    emu_g.live[EMU_OBJ_PD]--;
    free(pd);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * MR */
#define ACCESS_SUPPORTED (0xffu | IB_UVERBS_ACCESS_OPTIONAL_RANGE)

/* A dma-buf exported by a real driver (an NVIDIA GPU's, on a machine that has one): its
 * descriptor names the kernel's dma-buf file ("/dmabuf:..." or "anon_inode:dmabuf"). */
static bool is_kernel_dmabuf(int fd)
{
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return false;
    link[n] = 0;
    return !strncmp(link, "/dmabuf:", 8) || !strcmp(link, "anon_inode:dmabuf");
}

/* A free mkey slot for mr (with the device lock held): the key (slot << 8 | a tag byte that
 * changes with every allocation), or 0 when the table is full.  Regions and windows share it
 * (k: both are mlx5 mkeys, mlx5_ib_create_mkey). */
uint32_t emu_mkey_take(struct emu_devstate *ds, struct k_mr *mr)
{
    for (uint32_t i = 0; i < EMU_MR_SLOTS; i++) {
        uint32_t s = (ds->mr_cursor + i) & (EMU_MR_SLOTS - 1);
        /* slots 0 and 1 never: key 0x100 is MLX5_INVALID_LKEY, the receive-list terminator */
        if (s < 2 || ds->mr_tab[s]) continue;
        ds->mr_cursor = s + 1;
        mr->slot = s;
        mr->pub.mkey_serial = ++ds->mkey_serial;
        ds->mr_tab[s] = mr;
        return (s << 8) | (ds->mr_gen++ & 0xff);
    }
    return 0;
}

int emu_k_reg_mr(struct emu_file *f, struct k_pd *pd, uint64_t start, uint64_t length,
                 uint64_t iova, uint32_t access, int dmabuf_fd, uint64_t dmabuf_off,
                 uint32_t *handle, uint32_t *lkey, uint32_t *rkey)
{
    /* k: core/verbs.c ib_check_mr_access */
    if (access & ~ACCESS_SUPPORTED) return -EINVAL;
    if ((access & (IB_UVERBS_ACCESS_REMOTE_ATOMIC | IB_UVERBS_ACCESS_REMOTE_WRITE)) &&
        !(access & IB_UVERBS_ACCESS_LOCAL_WRITE))
        return -EINVAL;
    if (access & IB_UVERBS_ACCESS_ON_DEMAND) return -EOPNOTSUPP;   /* no ODP capability */
    if (!pd) return -EINVAL;                   /* write path: PD lookup failed */
    /* emulator rule (documented): a zero-length registration pins nothing and is refused */
    if (!length) return -EINVAL;
    bool writable = access & (IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE |
                              IB_UVERBS_ACCESS_REMOTE_ATOMIC | IB_UVERBS_ACCESS_MW_BIND);
    struct emu_devstate *ds = emu_ds(f);
    void *map = NULL;
    size_t maplen = 0;
    int dupfd = -1;
    if (dmabuf_fd >= 0) {
        /* k: uverbs_std_types_mr.c REG_DMABUF_MR: (offset ^ iova) & ~PAGE_MASK must be 0 */
        if ((dmabuf_off ^ iova) & (EMU_PAGE - 1)) return -EINVAL;
        struct stat st;
        if (emu_real.fstat(dmabuf_fd, &st) < 0) return -EBADF;          /* dma_buf_get */
        bool real_dmabuf = is_kernel_dmabuf(dmabuf_fd);
        if (emu_fdtab[dmabuf_fd < EMU_MAX_FD ? dmabuf_fd : 0].kind || (!S_ISREG(st.st_mode) && !real_dmabuf))
            return -EINVAL;                                             /* not a dma-buf */
        /* a dma-buf's size is its llseek(SEEK_END) (k: dma-buf.c dma_buf_llseek) */
        off_t size = real_dmabuf ? lseek(dmabuf_fd, 0, SEEK_END) : st.st_size;
        if (dmabuf_off + length < dmabuf_off || size < 0 || (uint64_t)size < dmabuf_off + length)
            return -EINVAL;                                             /* beyond the buffer */
        uint64_t base = dmabuf_off & ~(uint64_t)(EMU_PAGE - 1);
        maplen = (size_t)(dmabuf_off + length - base);
        map = emu_real.mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf_fd, (off_t)base);
        /* emulator limit (documented): the emulated NIC writes through a CPU mapping, which the
         * exporter of a discrete GPU's device memory refuses (a real NIC needs none) */
        if (map == MAP_FAILED) return real_dmabuf ? -ENXIO : -EINVAL;
        dupfd = fcntl(dmabuf_fd, F_DUPFD_CLOEXEC, 0);
        start = (uint64_t)(uintptr_t)map + (dmabuf_off - base);
    } else {
        /* k: uverbs_cmd.c ib_uverbs_reg_mr: start and hca_va must share the in-page offset */
        if ((start ^ iova) & (EMU_PAGE - 1)) return -EINVAL;
        /* k: core/umem.c ib_umem_get: pin_user_pages fails on unmapped memory -> EFAULT */
        int r = emu_check_range(start, length, PROT_READ | (writable ? PROT_WRITE : 0));
        if (r) return r;
    }
    int r = -ENOMEM;
    struct k_mr *mr = calloc(1, sizeof *mr);
    if (!mr || ds->nmr >= EMU_MAX_MR) goto fail;
    /* k: ib_umem_get counts the pages against RLIMIT_MEMLOCK (not for dma-buf, whose pages the
     * exporter holds) */
    if (dmabuf_fd < 0 && (r = emu_pins_take(f, &mr->pins, start, length, 0))) goto fail;
    r = emu_uobj_alloc(f, UO_MR, mr, handle);
    if (r) goto fail;
    LOCK(f);
    uint32_t key = emu_mkey_take(ds, mr);
    if (!key) { UNLOCK(f); emu_uobj_free(f, *handle); r = -ENOMEM; goto fail; }
    mr->pub.handle = *handle;
    mr->pub.lkey = mr->pub.rkey = key;
    mr->pub.addr = start;
    mr->pub.iova = iova;
    mr->pub.length = length;
    mr->pub.access = access;
    mr->pub.dmabuf_fd = dupfd;
    mr->pub.dmabuf_map = map;
    mr->pub.pd = &pd->pub;
    ds->nmr++;
    pd->usecnt++;
    UNLOCK(f);
    emu_g.live[EMU_OBJ_MR]++;
    *lkey = *rkey = key;
    return 0;
fail:
    if (mr) emu_pins_release(f, &mr->pins);
    free(mr);
    if (map) emu_real.munmap(map, maplen);
    if (dupfd >= 0) emu_real.close(dupfd);
    return r;
}

int emu_k_dereg_mr(struct emu_file *f, struct k_mr *mr)
{
    struct emu_devstate *ds = emu_ds(f);
    emu_uobj_free(f, mr->pub.handle);
    LOCK(f);
    ds->mr_tab[mr->slot] = NULL;
    ds->nmr--;
    ((struct k_pd *)mr->pub.pd)->usecnt--;
    UNLOCK(f);
    if (mr->pub.dmabuf_map) {
        uint64_t off = (uint64_t)(uintptr_t)mr->pub.dmabuf_map;
        emu_real.munmap(mr->pub.dmabuf_map, (size_t)(mr->pub.addr - off + mr->pub.length));
    }
    if (mr->pub.dmabuf_fd >= 0) emu_real.close(mr->pub.dmabuf_fd);
    emu_pins_release(f, &mr->pins);
    emu_g.live[EMU_OBJ_MR]--;
    free(mr);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * CQ (k: hw/mlx5/cq.c mlx5_ib_create_cq, create_cq_user) */
/* k: create_cq_user: cqe_comp_en == 1 (other values are ignored) needs the HCA's cqe_compression
 * cap for 64-byte CQEs (cqe_compression_128 for 128-byte ones, which this device lacks), else
 * EOPNOTSUPP; mini_cqe_res_format_to_hw: exactly one of HASH, CSUM, CSUM_STRIDX, else EINVAL;
 * CSUM_STRIDX needs mini_cqe_resp_stride_index, else EOPNOTSUPP. */
static int cq_comp_format(const struct mlx5_ib_create_cq *ucmd, uint8_t *fmt)
{
    if (ucmd->cqe_comp_en != 1) return 0;
    if (ucmd->cqe_size != 64 || !emu_nic_cqe_comp_max()) return -EOPNOTSUPP;
    switch (ucmd->cqe_comp_res_format) {
    case MLX5_IB_CQE_RES_FORMAT_HASH: case MLX5_IB_CQE_RES_FORMAT_CSUM: break;
    case MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX: if (!emu_nic_cqe_comp_stridx()) return -EOPNOTSUPP; break;
    default: return -EINVAL;
    }
    *fmt = ucmd->cqe_comp_res_format;
    return 0;
}

int emu_k_create_cq(struct emu_file *f, const struct emu_cq_args *a, uint32_t *handle,
                    uint32_t *resp_cqe, uint32_t *cqn)
{
    /* k: uverbs_std_types_cq.c: comp_vector < num_comp_vectors */
    if (a->comp_vector >= EMU_NUM_COMP_VECTORS) return -EINVAL;
    /* k: mlx5_ib_create_cq: entries within 1 << log_max_cq_sz before and after rounding */
    if ((int32_t)a->cqe < 0 || a->cqe > (1u << EMU_LOG_MAX_CQ_SZ)) return -EINVAL;
    uint32_t entries = roundup_pow2(a->cqe + 1);
    if (entries > (1u << EMU_LOG_MAX_CQ_SZ)) return -EINVAL;
    struct mlx5_ib_create_cq ucmd;
    memset(&ucmd, 0, sizeof ucmd);
    /* k: create_cq_user: at least offsetof(flags) bytes of driver data */
    if (a->uhw_inlen < offsetof(struct mlx5_ib_create_cq, flags)) return -EINVAL;
    memcpy(&ucmd, a->uhw_in, a->uhw_inlen < sizeof ucmd ? a->uhw_inlen : sizeof ucmd);
    if (ucmd.flags & ~(MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD | MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX |
                       MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS))
        return -EINVAL;
    if ((ucmd.cqe_size != 64 && ucmd.cqe_size != 128) || ucmd.reserved0 || ucmd.reserved1)
        return -EINVAL;
    /* k: ib_umem_get(buf_addr, entries * cqe_size, LOCAL_WRITE) */
    int r = emu_check_range(ucmd.buf_addr, (uint64_t)entries * ucmd.cqe_size, PROT_READ | PROT_WRITE);
    if (r) return r;
    /* k: doorbell.c mlx5_ib_db_map_user pins the page holding db_addr */
    if (ucmd.db_addr & 7) return -EINVAL;
    r = emu_check_range(ucmd.db_addr, 8, PROT_READ | PROT_WRITE);
    if (r) return r;
    if (ucmd.flags & MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD) return -EOPNOTSUPP;  /* no cqe_128_always */
    /* k: create_cq_user: REAL_TIME_TS needs the real-time timestamp format */
    if ((ucmd.flags & MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS) && !emu_nic_clock_real_time()) return -EOPNOTSUPP;
    struct k_uar *uar;
    if (a->uar_index_attr || (ucmd.flags & MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX)) {
        uint32_t idx = a->uar_index_attr ? a->uar_index : ucmd.uar_page_index;
        uar = emu_k_find_uar_by_page(f, idx);
        if (!uar) return -EINVAL;       /* FW: UAR not owned by this context's uid */
    } else if (f->ctx.dyn_uar || !f->nstatic) {
        return -EINVAL;                 /* k: create_cq_user: DYN_UAR context must name a UAR */
    } else {
        uar = f->static_uars[0];
    }
    /* (after the UAR index, as create_cq_user orders it) */
    uint8_t comp_fmt = 0;
    r = cq_comp_format(&ucmd, &comp_fmt);
    if (r) return r;
    struct k_evq *chan = NULL, *async = NULL;
    if (a->comp_channel_fd >= 0) chan = emu_evq_by_fd(a->comp_channel_fd);
    async = emu_evq_by_fd(a->event_fd >= 0 ? a->event_fd : f->ctx.default_async_fd);
    struct emu_devstate *ds = emu_ds(f);
    if (ds->ncq >= EMU_MAX_CQ) return -ENOMEM;
    struct k_cq *cq = calloc(1, sizeof *cq);
    if (!cq) return -ENOMEM;
    r = emu_pins_take(f, &cq->pins, ucmd.buf_addr, (uint64_t)entries * ucmd.cqe_size, ucmd.db_addr);
    if (r) { free(cq); return r; }
    r = emu_uobj_alloc(f, UO_CQ, cq, handle);
    if (r) { emu_pins_release(f, &cq->pins); free(cq); return r; }
    LOCK(f);
    cq->pub.handle = *handle;
    cq->pub.cqn = ds->next_cqn++ & 0xffffff;
    cq->pub.user_handle = a->user_handle;
    cq->pub.buf = (volatile uint8_t *)(uintptr_t)ucmd.buf_addr;
    cq->pub.ncqe = entries;
    cq->pub.cqe_size = ucmd.cqe_size;
    cq->pub.dbrec = (volatile uint32_t *)(uintptr_t)ucmd.db_addr;
    cq->pub.ignore_overrun = (a->flags & IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN) != 0;
    cq->pub.real_time_ts = (ucmd.flags & MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS) != 0;
    cq->pub.cqe_comp = comp_fmt;
    cq->pub.uar = &uar->pub;
    cq->pub.channel = chan ? &chan->chan : NULL;
    cq->pub.async_fd = async ? async->chan.fd : -1;
    cq->pub.ctx = &f->ctx;
    cq->chan_q = chan;
    cq->async_q = async;
    r = emu_nic_cq_create(&cq->pub);
    if (!r) ds->ncq++;
    UNLOCK(f);
    if (r) { emu_uobj_free(f, *handle); emu_pins_release(f, &cq->pins); free(cq); return r; }
    pthread_mutex_lock(&emu_g.ev_lock);
    if (chan) chan->refs++;
    if (async) async->refs++;
    pthread_mutex_unlock(&emu_g.ev_lock);
    uar->usecnt++;
    emu_g.live[EMU_OBJ_CQ]++;
    *resp_cqe = entries - 1;
    *cqn = cq->pub.cqn;
    return 0;
}

/* k: uverbs_std_types_cq.c uverbs_free_cq: ib_destroy_usecnt -> EBUSY while QPs use it. */
int emu_k_destroy_cq(struct emu_file *f, struct k_cq *cq, uint32_t *comp_rep, uint32_t *async_rep)
{
    if (cq->usecnt) return -EBUSY;
    emu_uobj_free(f, cq->pub.handle);
    LOCK(f);
    emu_nic_cq_destroy(&cq->pub);
    emu_ds(f)->ncq--;
    UNLOCK(f);
    /* unread events of this CQ are dropped (k: ib_uverbs_release_ucq) */
    emu_evq_purge_owner(cq->chan_q, cq);
    emu_evq_purge_owner(cq->async_q, cq);
    pthread_mutex_lock(&emu_g.ev_lock);
    if (comp_rep) *comp_rep = cq->pub.comp_events_reported;
    if (async_rep) *async_rep = cq->pub.async_events_reported;
    pthread_mutex_unlock(&emu_g.ev_lock);
    emu_evq_put(cq->chan_q);
    emu_evq_put(cq->async_q);
    ((struct k_uar *)cq->pub.uar)->usecnt--;
    emu_pins_release(f, &cq->pins);
    emu_g.live[EMU_OBJ_CQ]--;
    free(cq);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * QP (k: hw/mlx5/qp.c) */
#define MLX5_IB_INVALID_BFREG_EMU 0x80000000u   /* BIT(31) */
#define QP_VENDOR_FLAGS_OK (MLX5_QP_FLAG_SIGNATURE | MLX5_QP_FLAG_SCATTER_CQE | \
                            MLX5_QP_FLAG_BFREG_INDEX | MLX5_QP_FLAG_UAR_PAGE_INDEX)

/* Legacy static bfregs: kernel numbering has 2 per UAR page (MLX5_NON_FP_BFREGS_PER_UAR);
 * bfreg 0 is the shared doorbell-only one, the last num_low_lat are low-latency, the rest are
 * medium and shared, least used first (k: qp.c alloc_bfreg, alloc_med_class_bfreg). */
static int alloc_static_bfreg(struct emu_file *f)
{
    int best = -1;
    unsigned lim = f->total_bfregs - f->num_low_lat;
    for (unsigned i = 1; i < lim; i++)
        if (best < 0 || f->bfreg_use[i] < f->bfreg_use[best]) best = (int)i;
    if (best < 0) best = 0;
    f->bfreg_use[best]++;
    return best;
}

/* QP_CREATE's request checked as the kernel checks it; *ucmd: the driver's part (struct
 * mlx5_ib_create_qp), zero past what it gave. */
static int check_qp_request(struct emu_file *f, const struct emu_qp_args *a, const struct k_pd *pd,
                            const struct k_cq *scq, const struct k_cq *rcq, struct mlx5_ib_create_qp *ucmd)
{
    /* k: uverbs_std_types_qp.c QP_CREATE: RC, UC, UD, XRC_INI, DRIVER (and RAW with
     * CAP_NET_RAW, XRC_TGT) are known; the emulator implements RC, UC and UD. */
    switch (a->type) {
    case IB_UVERBS_QPT_RC: case IB_UVERBS_QPT_UC: case IB_UVERBS_QPT_UD: break;
    case IB_UVERBS_QPT_RAW_PACKET: case IB_UVERBS_QPT_XRC_INI:
    case IB_UVERBS_QPT_XRC_TGT: case IB_UVERBS_QPT_DRIVER: return -EOPNOTSUPP;
    default: return -EINVAL;
    }
    if (!pd || !scq || !rcq) return -EINVAL;
    /* limits (k: qp.c set_rq_size: max_recv_wr <= 1 << log_max_qp_sz, not checked for a QP
     * with an SRQ; device caps) */
    if (a->max_send_wr > EMU_MAX_QP_WR || (!a->srq && a->max_recv_wr > EMU_MAX_QP_WR) ||
        a->max_send_sge > EMU_MAX_SGE || (!a->srq && a->max_recv_sge > EMU_MAX_SGE) ||
        a->max_inline > EMU_MAX_INLINE)
        return -EINVAL;
    /* k: qp.c process_udata_size: inlen >= offsetof(ece_options), bytes past the known struct
     * zero, outlen >= offsetofend(bfreg_index) */
    if (a->uhw_inlen < offsetof(struct mlx5_ib_create_qp, ece_options)) return -EINVAL;
    memset(ucmd, 0, sizeof *ucmd);
    memcpy(ucmd, a->uhw_in, a->uhw_inlen < sizeof *ucmd ? a->uhw_inlen : sizeof *ucmd);
    if (a->uhw_inlen > sizeof *ucmd) {
        const uint8_t *t = (const uint8_t *)a->uhw_in + sizeof *ucmd;
        for (size_t i = 0; i < a->uhw_inlen - sizeof *ucmd; i++) if (t[i]) return -EINVAL;
    }
    if (a->uhw_outlen < sizeof(uint32_t)) return -EINVAL;
    /* k: qp.c process_vendor_flags: unknown or inapplicable vendor flags -> EOPNOTSUPP */
    if (ucmd->flags & ~QP_VENDOR_FLAGS_OK) return -EOPNOTSUPP;
    if (ucmd->ece_options) return -EOPNOTSUPP;
    /* k: qp.c get_qp_user_index */
    if (f->ctx.cqe_version == 0 ? ucmd->uidx != 0xffffff : ucmd->uidx > 0xffffff) return -EINVAL;
    /* k: qp.c set_rq_size (user): RQ geometry from the request; none -> must be 0/0 */
    bool has_rq = !a->srq && a->max_recv_wr > 0;     /* k: qp.c qp_has_rq */
    if (has_rq) {
        if (ucmd->rq_wqe_shift > 31 || (1u << ucmd->rq_wqe_shift) < 16) return -EINVAL;
        if (!is_pow2(ucmd->rq_wqe_count) || ucmd->rq_wqe_count > EMU_MAX_QP_WR) return -EINVAL;
        if (ucmd->rq_wqe_count < a->max_recv_wr) return -EINVAL;
        if ((1u << ucmd->rq_wqe_shift) / 16 < (a->max_recv_sge ? a->max_recv_sge : 1) +
                                             !!(ucmd->flags & MLX5_QP_FLAG_SIGNATURE))
            return -EINVAL;
    } else if (ucmd->rq_wqe_count || ucmd->rq_wqe_shift) {
        return -EINVAL;                                /* k: _create_user_qp "invalid rq params" */
    }
    /* k: qp.c set_user_buf_size */
    if (ucmd->sq_wqe_count && !is_pow2(ucmd->sq_wqe_count)) return -EINVAL;
    if (ucmd->sq_wqe_count > EMU_MAX_QP_WR) return -EINVAL;
    if (a->max_send_wr > ucmd->sq_wqe_count) return -EINVAL;    /* the SQ cannot hold them */
    return 0;
}

/* The QP's doorbell register (k: qp.c _create_user_qp): *uar its page, *bf_off its place in it;
 * a legacy static bfreg taken here (*bfregn, else -1: the caller gives it back on failure) is
 * told to the driver as *resp_bfreg. */
static int qp_bfreg(struct emu_file *f, const struct mlx5_ib_create_qp *ucmd, struct k_uar **uar,
                    uint32_t *bf_off, int *bfregn, uint32_t *resp_bfreg)
{
    *bfregn = -1;
    *resp_bfreg = MLX5_IB_INVALID_BFREG_EMU;
    /* the bfreg's place in its UAR page: MLX5_BF_OFFSET 0x800 + bf_reg_size (512) per bfreg
     * of the page (rdma-core providers/mlx5/mlx5.c mlx5_map_uar's bfs[].reg) */
    *bf_off = 0x800;
    if (ucmd->flags & MLX5_QP_FLAG_UAR_PAGE_INDEX) {
        *uar = emu_k_find_uar_by_page(f, ucmd->bfreg_index);
        if (!*uar) return -EINVAL;
        *bf_off = 0;   /* the page only: the library picks the bfreg in it (nic_doorbell.c) */
    } else if (ucmd->flags & MLX5_QP_FLAG_BFREG_INDEX) {
        /* bfregn_to_uar_index: static table only */
        if (f->ctx.dyn_uar || ucmd->bfreg_index >= f->total_bfregs) return -EINVAL;
        *uar = f->static_uars[ucmd->bfreg_index / 2];
        *bf_off += ucmd->bfreg_index % 2 * 0x200;
    } else {
        if (f->ctx.dyn_uar || !f->nstatic) return -EINVAL;   /* alloc_bfreg: lib_uar_dyn */
        int n = alloc_static_bfreg(f);
        *bfregn = n;
        *uar = f->static_uars[n / 2];
        *resp_bfreg = (uint32_t)(n / 2 * 4 + n % 2);    /* adjust_bfregn */
        *bf_off += (uint32_t)(n % 2) * 0x200;
    }
    return 0;
}

/* A free QP slot of the device (not 0 or 1), claimed; 0 when none (under the file's lock). */
static uint32_t claim_qp_slot(struct emu_devstate *ds)
{
    for (uint32_t i = 0; i < EMU_QP_SLOTS; i++) {
        uint32_t s = (ds->qp_cursor + i) & (EMU_QP_SLOTS - 1);
        /* free here, and not held by another process sharing the port (emu.h) */
        if (s >= 2 && !ds->qp_tab[s] && emu_nic_qpn_claim(&ds->dev, s) == 0) return s;
    }
    return 0;
}

/* The QP's attributes as the NIC half sees them (struct emu_qp, emu.h), from the request. */
static void qp_fill(struct emu_file *f, struct k_qp *qp, const struct emu_qp_args *a, struct k_pd *pd,
                    struct k_cq *scq, struct k_cq *rcq, const struct mlx5_ib_create_qp *ucmd, bool has_rq)
{
    struct emu_qp *p = &qp->pub;
    p->type = a->type;
    p->state = EMU_QPS_RESET;
    p->user_handle = a->user_handle;
    p->pd = &pd->pub;
    p->send_cq = &scq->pub;
    p->recv_cq = &rcq->pub;
    p->srq = a->srq ? &a->srq->pub : NULL;
    p->buf = (volatile uint8_t *)(uintptr_t)ucmd->buf_addr;
    p->rq_wqe_cnt = has_rq ? ucmd->rq_wqe_count : 0;
    p->rq_wqe_shift = has_rq ? ucmd->rq_wqe_shift : 0;
    p->rq = p->rq_wqe_cnt ? p->buf : NULL;
    p->sq_wqe_cnt = ucmd->sq_wqe_count;
    p->sq = p->sq_wqe_cnt ? p->buf + ((uint64_t)p->rq_wqe_cnt << p->rq_wqe_shift) : NULL;
    p->dbrec = (volatile uint32_t *)(uintptr_t)ucmd->db_addr;
    p->uidx = f->ctx.cqe_version ? ucmd->uidx : 0xffffff;
    p->sq_sig_all = a->sq_sig_all;
    p->scatter_to_cqe = ucmd->flags & MLX5_QP_FLAG_SCATTER_CQE;
    p->max_inline = a->max_inline;
    p->max_send_sge = a->max_send_sge;
    p->max_recv_sge = a->srq ? 0 : a->max_recv_sge;
    p->max_send_wr = a->max_send_wr;
    p->max_recv_wr = a->srq ? 0 : a->max_recv_wr;
    p->ctx = &f->ctx;
}

int emu_k_create_qp(struct emu_file *f, const struct emu_qp_args *a, struct k_pd *pd,
                    struct k_cq *scq, struct k_cq *rcq, uint32_t *handle, uint32_t *qpn,
                    void *uhw_resp)
{
    struct mlx5_ib_create_qp ucmd;
    int r = check_qp_request(f, a, pd, scq, rcq, &ucmd);
    if (r) return r;
    bool has_rq = !a->srq && a->max_recv_wr > 0;     /* k: qp.c qp_has_rq */
    struct k_uar *uar = NULL;
    int bfregn;
    uint32_t resp_bfreg, bf_off;
    if ((r = qp_bfreg(f, &ucmd, &uar, &bf_off, &bfregn, &resp_bfreg))) return r;
    /* buffers (k: ib_umem_get / mlx5_ib_db_map_user) */
    uint64_t buflen = ((uint64_t)(has_rq ? ucmd.rq_wqe_count : 0) << (has_rq ? ucmd.rq_wqe_shift : 0)) +
                      ((uint64_t)ucmd.sq_wqe_count << 6);
    r = emu_check_range(ucmd.buf_addr, buflen, PROT_READ | PROT_WRITE);
    if (!r && (ucmd.db_addr & 7)) r = -EINVAL;
    if (!r) r = emu_check_range(ucmd.db_addr, 8, PROT_READ | PROT_WRITE);
    struct emu_devstate *ds = emu_ds(f);
    if (!r && ds->nqp >= EMU_MAX_QP) r = -ENOMEM;
    struct k_qp *qp = NULL;
    if (!r) { qp = calloc(1, sizeof *qp); if (!qp) r = -ENOMEM; }
    /* k: _create_user_qp: ib_umem_get of the buffer (when it has one), then the record's page */
    if (!r) { r = emu_pins_take(f, &qp->pins, ucmd.buf_addr, buflen, ucmd.db_addr); if (r) { free(qp); qp = NULL; } }
    if (!r) { r = emu_uobj_alloc(f, UO_QP, qp, handle); if (r) { emu_pins_release(f, &qp->pins); free(qp); qp = NULL; } }
    if (r) goto out_bfreg;
    struct k_evq *async = emu_evq_by_fd(a->event_fd >= 0 ? a->event_fd : f->ctx.default_async_fd);
    LOCK(f);
    uint32_t slot = claim_qp_slot(ds);
    if (!slot) r = -ENOMEM;
    else {
        ds->qp_cursor = slot + 1;
        qp->slot = slot;
        qp->has_rq = has_rq;
        qp->async_q = async;
        qp_fill(f, qp, a, pd, scq, rcq, &ucmd, has_rq);
        qp->pub.handle = *handle;
        qp->pub.qpn = ((ds->qp_gen++ & 0xff) << 16) | slot;
        qp->pub.uar = &uar->pub;
        qp->pub.bf_off = bf_off;
        qp->pub.async_fd = async ? async->chan.fd : -1;
        ds->qp_tab[slot] = qp;
        r = emu_nic_qp_create(&qp->pub);
        if (r) { ds->qp_tab[slot] = NULL; emu_nic_qpn_release(&ds->dev, slot); }
        else ds->nqp++;
    }
    UNLOCK(f);
    if (r) goto out_qp;
    if (async) { pthread_mutex_lock(&emu_g.ev_lock); async->refs++; pthread_mutex_unlock(&emu_g.ev_lock); }
    pd->usecnt++;
    scq->usecnt++;
    rcq->usecnt++;
    if (a->srq) a->srq->usecnt++;
    uar->usecnt++;
    qp->bfregn = bfregn;
    emu_g.live[EMU_OBJ_QP]++;
    struct mlx5_ib_create_qp_resp *resp = uhw_resp;
    memset(resp, 0, sizeof *resp);
    resp->bfreg_index = resp_bfreg;
    *qpn = qp->pub.qpn;
    return 0;

out_qp:
    emu_uobj_free(f, *handle);
    emu_pins_release(f, &qp->pins);
    free(qp);
out_bfreg:
    if (bfregn >= 0) f->bfreg_use[bfregn]--;
    return r;
}

int emu_k_destroy_qp(struct emu_file *f, struct k_qp *qp, uint32_t *events_reported)
{
    struct emu_devstate *ds = emu_ds(f);
    emu_uobj_free(f, qp->pub.handle);
    LOCK(f);
    emu_nic_qp_destroy(&qp->pub);
    ds->qp_tab[qp->slot] = NULL;
    emu_nic_qpn_release(&ds->dev, qp->slot);
    ds->nqp--;
    UNLOCK(f);
    emu_evq_purge_owner(qp->async_q, qp);
    pthread_mutex_lock(&emu_g.ev_lock);
    if (events_reported) *events_reported = qp->pub.events_reported;
    pthread_mutex_unlock(&emu_g.ev_lock);
    emu_evq_put(qp->async_q);
    ((struct k_pd *)qp->pub.pd)->usecnt--;
    ((struct k_cq *)qp->pub.send_cq)->usecnt--;
    ((struct k_cq *)qp->pub.recv_cq)->usecnt--;
    if (qp->pub.srq) ((struct k_srq *)qp->pub.srq)->usecnt--;
    ((struct k_uar *)qp->pub.uar)->usecnt--;
    if (qp->bfregn >= 0 && f->bfreg_use) f->bfreg_use[qp->bfregn]--;
    emu_pins_release(f, &qp->pins);
    emu_g.live[EMU_OBJ_QP]--;
    free(qp);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * MODIFY_QP (k: uverbs_cmd.c modify_qp; core/verbs.c _ib_modify_qp, ib_modify_qp_is_ok;
 * hw/mlx5/qp.c mlx5_ib_modify_qp) */
/* MODIFY_QP's attribute mask and the addresses it carries, checked as uverbs and _ib_modify_qp
 * check them before the driver sees the transition. */
static int check_modify_attrs(struct emu_file *f, const struct ib_uverbs_modify_qp *c, const struct k_qp *qp,
                              bool ex)
{
    uint32_t mask = c->attr_mask;
    /* non-EX: bits above DEST_QPN -> EOPNOTSUPP; EX: RATE_LIMIT is the only extra bit and mlx5
     * supports it for raw-packet QPs only */
    if (!ex && (mask & ~((EMU_QP_DEST_QPN << 1) - 1))) return -EOPNOTSUPP;
    if (ex && (mask & ~(((EMU_QP_DEST_QPN << 1) - 1) | EMU_QP_RATE_LIMIT))) return -EOPNOTSUPP;
    if (ex && (mask & EMU_QP_RATE_LIMIT)) return -EOPNOTSUPP;
    /* k: modify_qp: port numbers must be valid; the AV port must be the QP's port */
    if ((mask & EMU_QP_PORT) && c->port_num != 1) return -EINVAL;
    if (mask & EMU_QP_AV) {
        if (c->dest.port_num != 1) return -EINVAL;
        uint8_t port = (mask & EMU_QP_PORT) ? c->port_num : qp->pub.attr.port_num;
        if (port && c->dest.port_num != port) return -EINVAL;
    }
    if ((mask & EMU_QP_ALT_PATH) && (c->alt_port_num != 1 || c->alt_dest.port_num != 1)) return -EINVAL;
    if (((mask & EMU_QP_CUR_STATE) && c->cur_qp_state > EMU_QPS_ERR) ||
        ((mask & EMU_QP_STATE) && c->qp_state > EMU_QPS_ERR))
        return -EINVAL;
    /* k: _ib_modify_qp: a RoCE address handle must carry a GRH (rdma_check_ah_attr) and name
     * a populated GID of the port (rdma_fill_sgid_attr / rdma_get_gid_attr) */
    const struct emu_device_cfg *cfg = &f->ctx.dev->cfg;
    if (mask & EMU_QP_AV) {
        if (cfg->ethernet && !c->dest.is_global) return -EINVAL;
        if (c->dest.is_global) {
            if (c->dest.sgid_index >= EMU_GID_TBL_LEN) return -EINVAL;
            if (c->dest.sgid_index >= cfg->ngids || !cfg->gids[c->dest.sgid_index].valid)
                return -ENODATA;
        }
    }
    return 0;
}

/* The values of the attributes set, as mlx5_ib_modify_qp bounds them. */
static int check_modify_values(const struct ib_uverbs_modify_qp *c)
{
    uint32_t mask = c->attr_mask;
    if ((mask & EMU_QP_PKEY_INDEX) && c->pkey_index >= 1) return -EINVAL;   /* pkey_tbl_len 1 */
    /* k: uverbs_cmd.c modify_qp: a controlled Q_Key (high bit set) needs CAP_NET_RAW; the
     * emulated kernel treats every process as unprivileged */
    if ((mask & EMU_QP_QKEY) && (c->qkey & 0x80000000u)) return -EPERM;
    if ((mask & EMU_QP_MAX_QP_RD_ATOMIC) && c->max_rd_atomic > EMU_MAX_RD_ATOM) return -EINVAL;
    if ((mask & EMU_QP_MAX_DEST_RD_ATOMIC) && c->max_dest_rd_atomic > EMU_MAX_RD_ATOM) return -EINVAL;
    if ((mask & EMU_QP_PATH_MTU) && (c->path_mtu < 1 || c->path_mtu > 5)) return -EINVAL;
    if ((mask & EMU_QP_DEST_QPN) && c->dest_qp_num > 0xffffff) return -EINVAL;
    if ((mask & EMU_QP_ACCESS_FLAGS) &&
        (c->qp_access_flags & ~(IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE |
                                IB_UVERBS_ACCESS_REMOTE_READ | IB_UVERBS_ACCESS_REMOTE_ATOMIC)))
        return -EINVAL;
    return 0;
}

/* The attributes the mask names into the QP (under the file's lock). */
static void apply_modify(struct k_qp *qp, const struct ib_uverbs_modify_qp *c)
{
    uint32_t mask = c->attr_mask;
    struct emu_qp_attr *at = &qp->pub.attr;
    if (mask & EMU_QP_PORT) at->port_num = c->port_num;
    if (mask & EMU_QP_PKEY_INDEX) at->pkey_index = c->pkey_index;
    if (mask & EMU_QP_ACCESS_FLAGS) at->access_flags = c->qp_access_flags;
    if (mask & EMU_QP_QKEY) at->qkey = c->qkey;
    if (mask & EMU_QP_AV) {
        memcpy(at->dgid, c->dest.dgid, 16);
        at->flow_label = c->dest.flow_label;
        at->sgid_index = c->dest.sgid_index;
        at->hop_limit = c->dest.hop_limit;
        at->traffic_class = c->dest.traffic_class;
        at->sl = c->dest.sl;
        if (!at->port_num) at->port_num = c->dest.port_num;
    }
    if (mask & EMU_QP_PATH_MTU) at->path_mtu = c->path_mtu;
    if (mask & EMU_QP_TIMEOUT) at->timeout = c->timeout;
    if (mask & EMU_QP_RETRY_CNT) at->retry_cnt = c->retry_cnt;
    if (mask & EMU_QP_RNR_RETRY) at->rnr_retry = c->rnr_retry;
    if (mask & EMU_QP_RQ_PSN) at->rq_psn = c->rq_psn & 0xffffff;
    if (mask & EMU_QP_MAX_QP_RD_ATOMIC) at->max_rd_atomic = c->max_rd_atomic;
    if (mask & EMU_QP_MIN_RNR_TIMER) at->min_rnr_timer = c->min_rnr_timer;
    if (mask & EMU_QP_SQ_PSN) at->sq_psn = c->sq_psn & 0xffffff;
    if (mask & EMU_QP_MAX_DEST_RD_ATOMIC) at->max_dest_rd_atomic = c->max_dest_rd_atomic;
    if (mask & EMU_QP_DEST_QPN) at->dest_qp_num = c->dest_qp_num & 0xffffff;
}

int emu_k_modify_qp(struct emu_file *f, const void *cmdv, bool ex)
{
    const struct ib_uverbs_modify_qp *c = cmdv;
    void *o;
    /* write path: uobj_get_obj_read() failing -> EINVAL */
    if (emu_uobj_get(f, c->qp_handle, UO_QP, &o)) return -EINVAL;
    struct k_qp *qp = o;
    uint32_t mask = c->attr_mask;
    int r = check_modify_attrs(f, c, qp, ex);
    if (r) return r;
    /* k: mlx5_ib_modify_qp */
    LOCK(f);                                   /* the engine may move the QP to ERR */
    uint32_t actual = qp->pub.state;
    UNLOCK(f);
    uint32_t cur = (mask & EMU_QP_CUR_STATE) ? c->cur_qp_state : actual;
    uint32_t next = (mask & EMU_QP_STATE) ? c->qp_state : cur;
    if ((mask & EMU_QP_CUR_STATE) && cur != actual) return -EINVAL;
    if (!emu_modify_qp_is_ok(cur, next, qp->pub.type, mask)) return -EINVAL;
    if ((r = check_modify_values(c))) return r;
    if (cur == EMU_QPS_RESET && next == EMU_QPS_RESET) return 0;   /* mlx5: nothing to do */
    /* k: _ib_modify_qp -> ib_resolve_eth_dmac: a RoCE address vector's MAC is resolved (up to
     * 1 s, then ETIMEDOUT: neigh.c) */
    if ((mask & EMU_QP_AV) && f->ctx.dev->cfg.ethernet) {
        int rrc = emu_resolve_dgid(c->dest.dgid);
        if (rrc) return rrc;
    }

    LOCK(f);
    apply_modify(qp, c);
    uint32_t old = qp->pub.state;
    qp->pub.state = next;
    emu_nic_qp_modified(&qp->pub, old);
    UNLOCK(f);
    return 0;
}

int emu_k_query_qp(struct emu_file *f, struct k_qp *qp, void *respv)
{
    struct ib_uverbs_query_qp_resp *r = respv;
    memset(r, 0, sizeof *r);
    LOCK(f);
    const struct emu_qp_attr *at = &qp->pub.attr;
    memcpy(r->dest.dgid, at->dgid, 16);
    r->dest.flow_label = at->flow_label;
    r->dest.sgid_index = at->sgid_index;
    r->dest.hop_limit = at->hop_limit;
    r->dest.traffic_class = at->traffic_class;
    r->dest.sl = at->sl;
    r->dest.is_global = 1;
    r->dest.port_num = at->port_num;
    r->max_send_wr = qp->pub.max_send_wr;
    r->max_recv_wr = qp->pub.max_recv_wr;
    r->max_send_sge = qp->pub.max_send_sge;
    r->max_recv_sge = qp->pub.max_recv_sge;
    r->max_inline_data = qp->pub.max_inline;
    r->qkey = at->qkey;
    r->rq_psn = at->rq_psn;
    r->sq_psn = at->sq_psn;
    r->dest_qp_num = at->dest_qp_num;
    r->qp_access_flags = at->access_flags;
    r->pkey_index = at->pkey_index;
    r->qp_state = (uint8_t)qp->pub.state;
    r->cur_qp_state = (uint8_t)qp->pub.state;
    r->path_mtu = at->path_mtu;
    r->max_rd_atomic = at->max_rd_atomic;
    r->max_dest_rd_atomic = at->max_dest_rd_atomic;
    r->min_rnr_timer = at->min_rnr_timer;
    r->port_num = at->port_num;
    r->timeout = at->timeout;
    r->retry_cnt = at->retry_cnt;
    r->rnr_retry = at->rnr_retry;
    r->sq_sig_all = qp->pub.sq_sig_all;
    UNLOCK(f);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * close(): everything the file holds, dependents first (k: rdma_core.c
 * uverbs_destroy_ufile_hw / __uverbs_cleanup_ufile with RDMA_REMOVE_CLOSE). */
void emu_file_destroy(struct emu_file *f)
{
    f->closing = true;
    static const uint8_t order[] = { UO_QP, UO_SRQ, UO_AH, UO_CQ, UO_MW, UO_MR, UO_PD, UO_UAR };
    for (unsigned k = 0; k < sizeof order; k++)
        for (uint32_t h = 0; h < f->nobjs; h++) {
            if (f->objs[h].kind != order[k]) continue;
            void *o = f->objs[h].obj;
            switch (order[k]) {
            case UO_QP: emu_k_destroy_qp(f, o, NULL); break;
            case UO_SRQ: emu_k_destroy_srq(f, o, NULL); break;
            case UO_CQ: emu_k_destroy_cq(f, o, NULL, NULL); break;
            case UO_MR: emu_k_dereg_mr(f, o); break;
            case UO_MW: emu_k_dealloc_mw(f, o); break;
            case UO_PD: emu_k_dealloc_pd(f, o); break;
            case UO_AH: emu_k_destroy_ah(f, o); break;
            case UO_UAR: emu_k_uar_destroy(f, o); break;
            }
        }
    /* event files outlive the uverbs file while the process holds their fds */
    emu_evq_detach_ctx(&f->ctx);
    emu_file_drop_maps(f);
    for (unsigned i = 0; i < f->nstatic; i++) uar_free(f->static_uars[i]);
    free(f->static_uars);
    free(f->bfreg_use);
    if (f->ctx.has_ucontext) {
        struct emu_device *dev = f->ctx.dev;
        pthread_mutex_lock(&dev->lock);
        if (--dev->open_contexts == 0) emu_nic_device_close(dev);
        pthread_mutex_unlock(&dev->lock);
        emu_g.ncontexts--;
    }
    LOCK(f);
    free(f->objs);
    f->objs = NULL;
    f->nobjs = 0;
    UNLOCK(f);
    for (struct emu_file **pp = &emu_g.files; *pp; pp = &(*pp)->next)
        if (*pp == f) { *pp = f->next; break; }
    emu_g.nfiles--;
    free(f);
}

