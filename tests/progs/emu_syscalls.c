/* emu_syscalls: a verbs client made of system calls and the kernel's uapi headers only (no
 * project code, no libibverbs).  It finds a device through the sysfs tree the way libibverbs
 * does (SYSFS_PATH or /sys), checks the char device, gets a context, and creates a PD, an MR, a
 * CQ and an RC QP, moves the QP to RTS (connected to itself), then tears everything down.
 * Run it on real hardware or with LD_PRELOAD=libmlx5direct-emu.so.
 *
 *   emu_syscalls [ibdev]      (default: the first device)
 * Prints "emu_syscalls: ok device <name> ..." and exits 0, or names the failing step and exits 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <rdma/rdma_user_ioctl.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/mlx5_user_ioctl_cmds.h>
#include <rdma/mlx5_user_ioctl_verbs.h>

#define DRIVER_MLX5 1

static void die(const char *step, int err)
{
    printf("emu_syscalls: %s: %s\n", step, strerror(err));
    exit(1);
}

static int read_text(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0) return -e;
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
    return 0;
}

struct ioc { struct ib_uverbs_ioctl_hdr h; struct ib_uverbs_attr a[20]; };

static void ioc_init(struct ioc *c, uint16_t obj, uint16_t meth)
{
    memset(c, 0, sizeof *c);
    c->h.object_id = obj;
    c->h.method_id = meth;
    c->h.driver_id = DRIVER_MLX5;
}

static struct ib_uverbs_attr *attr(struct ioc *c, uint16_t id, uint16_t len, uint64_t data)
{
    struct ib_uverbs_attr *a = &c->a[c->h.num_attrs++];
    a->attr_id = id;
    a->len = len;
    a->flags = UVERBS_ATTR_F_MANDATORY;
    a->data = data;
    return a;
}

static struct ib_uverbs_attr *in(struct ioc *c, uint16_t id, const void *p, uint16_t len)
{
    uint64_t d = 0;
    if (len <= 8) memcpy(&d, p, len); else d = (uintptr_t)p;
    return attr(c, id, len, d);
}

static void run(int fd, struct ioc *c, const char *step)
{
    c->h.length = (uint16_t)(sizeof c->h + c->h.num_attrs * sizeof c->a[0]);
    if (ioctl(fd, RDMA_VERBS_IOCTL, c)) die(step, errno);
}

static void invoke(int fd, uint32_t cmd, const void *req, uint16_t reqlen, void *resp, uint16_t resplen,
                   void *uhw_out, uint16_t uhw_outlen, const char *step)
{
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE);
    attr(&c, UVERBS_ATTR_WRITE_CMD, 8, cmd);
    in(&c, UVERBS_ATTR_CORE_IN, req, reqlen);
    if (resp) attr(&c, UVERBS_ATTR_CORE_OUT, resplen, (uintptr_t)resp);
    if (uhw_out) attr(&c, UVERBS_ATTR_UHW_OUT, uhw_outlen, (uintptr_t)uhw_out);
    run(fd, &c, step);
}

static void destroy(int fd, uint16_t obj, uint16_t meth, uint32_t h, void *resp, uint16_t rlen, const char *step)
{
    struct ioc c;
    ioc_init(&c, obj, meth);
    attr(&c, obj == MLX5_IB_OBJECT_UAR ? MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE : 0, 0, h);
    if (resp) attr(&c, 1, rlen, (uintptr_t)resp);
    run(fd, &c, step);
}

static void modify(int fd, uint32_t qp, uint32_t mask, struct ib_uverbs_modify_qp *m, const char *step)
{
    m->qp_handle = qp;
    m->attr_mask = mask;
    invoke(fd, IB_USER_VERBS_CMD_MODIFY_QP, m, sizeof *m, NULL, 0, NULL, 0, step);
}

int main(int argc, char **argv)
{
    const char *want = argc > 1 ? argv[1] : NULL;
    const char *root = getenv("SYSFS_PATH");
    if (!root || !*root) root = "/sys";
    char path[1024], txt[256], name[64] = "";
    /* 1. discovery, as libibverbs' sysfs scan (rc: libibverbs/init.c) */
    snprintf(path, sizeof path, "%s/class/infiniband_verbs/abi_version", root);
    int r = read_text(path, txt, sizeof txt);
    if (r) die("abi_version", -r);
    if (atoi(txt) != 6) die("abi_version is not 6", EPROTO);
    int idx = -1;
    unsigned maj = 0, min = 0;
    for (int n = 0; n < 64 && idx < 0; n++) {
        snprintf(path, sizeof path, "%s/class/infiniband_verbs/uverbs%d/ibdev", root, n);
        if (read_text(path, name, sizeof name)) continue;
        if (want && strcmp(name, want)) continue;
        snprintf(path, sizeof path, "%s/class/infiniband_verbs/uverbs%d/abi_version", root, n);
        if (read_text(path, txt, sizeof txt) || atoi(txt) != 1) continue;   /* mlx5 ABI 1 */
        snprintf(path, sizeof path, "%s/class/infiniband/%s/node_type", root, name);
        if (read_text(path, txt, sizeof txt) || atoi(txt) != 1) continue;   /* "1: CA" */
        snprintf(path, sizeof path, "%s/class/infiniband/%s/device/modalias", root, name);
        if (read_text(path, txt, sizeof txt) || strncmp(txt, "pci:v000015B3", 13)) continue;
        snprintf(path, sizeof path, "%s/class/infiniband_verbs/uverbs%d/dev", root, n);
        if (read_text(path, txt, sizeof txt) || sscanf(txt, "%u:%u", &maj, &min) != 2) continue;
        idx = n;
    }
    if (idx < 0) die("no mlx5 device in sysfs", ENODEV);
    snprintf(path, sizeof path, "/dev/infiniband/uverbs%d", idx);
    struct stat st;
    if (stat(path, &st)) die("stat char device", errno);
    if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != maj || minor(st.st_rdev) != min)
        die("char device does not match sysfs dev", ENODEV);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) die("open", errno);
    if (fstat(fd, &st) || st.st_rdev != makedev(maj, min)) die("fstat", errno ? errno : ENODEV);

    /* 2. GET_CONTEXT with dynamic UARs */
    struct mlx5_ib_alloc_ucontext_req_v2 creq = { .max_cqe_version = 1,
        .lib_caps = MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR };
    struct mlx5_ib_alloc_ucontext_resp cresp;
    memset(&cresp, 0, sizeof cresp);
    struct ioc c;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT);
    in(&c, UVERBS_ATTR_UHW_IN, &creq, sizeof creq);
    attr(&c, UVERBS_ATTR_UHW_OUT, sizeof cresp, (uintptr_t)&cresp);
    run(fd, &c, "GET_CONTEXT");
    ioc_init(&c, UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC);
    attr(&c, UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, 0, 0);
    run(fd, &c, "ASYNC_EVENT_ALLOC");
    int async_fd = (int)c.a[0].data;

    /* 3. port and GID */
    struct ib_uverbs_query_port_resp_ex pr;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    attr(&c, UVERBS_ATTR_QUERY_PORT_PORT_NUM, 8, 1);
    attr(&c, UVERBS_ATTR_QUERY_PORT_RESP, sizeof pr, (uintptr_t)&pr);
    run(fd, &c, "QUERY_PORT");
    struct ib_uverbs_gid_entry gid;
    ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY);
    attr(&c, UVERBS_ATTR_QUERY_GID_ENTRY_PORT, 8, 1);
    attr(&c, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, 8, 3);
    attr(&c, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 8, 0);
    attr(&c, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, sizeof gid, (uintptr_t)&gid);
    run(fd, &c, "QUERY_GID_ENTRY");

    /* 4. a non-cached UAR for doorbells */
    uint64_t uar_off = 0;
    uint32_t uar_len = 0, uar_page = 0;
    ioc_init(&c, MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_ALLOC);
    attr(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, 0, 0);
    attr(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, 8, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC);
    attr(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, 8, (uintptr_t)&uar_off);
    attr(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, 4, (uintptr_t)&uar_len);
    attr(&c, MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, 4, (uintptr_t)&uar_page);
    run(fd, &c, "UAR_OBJ_ALLOC");
    uint32_t uar_h = (uint32_t)c.a[0].data;
    void *uar = mmap(NULL, uar_len, PROT_WRITE, MAP_SHARED, fd, (off_t)uar_off);
    if (uar == MAP_FAILED) die("mmap UAR", errno);

    /* 5. PD and MR (legacy commands through INVOKE_WRITE) */
    struct ib_uverbs_alloc_pd pdreq = { 0 };
    struct ib_uverbs_alloc_pd_resp pdresp;
    struct mlx5_ib_alloc_pd_resp pdn;
    invoke(fd, IB_USER_VERBS_CMD_ALLOC_PD, &pdreq, sizeof pdreq, &pdresp, sizeof pdresp, &pdn, sizeof pdn, "ALLOC_PD");
    size_t mrlen = 1 << 16;
    void *region = mmap(NULL, mrlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct ib_uverbs_reg_mr mrreq = { .start = (uintptr_t)region, .length = mrlen,
        .hca_va = (uintptr_t)region, .pd_handle = pdresp.pd_handle,
        .access_flags = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE };
    struct ib_uverbs_reg_mr_resp mrresp;
    invoke(fd, IB_USER_VERBS_CMD_REG_MR, &mrreq, sizeof mrreq, &mrresp, sizeof mrresp, NULL, 0, "REG_MR");

    /* 6. CQ: 64 CQEs of 64 bytes, op_own = 0xF0, doorbell record after the ring */
    uint8_t *ring = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int i = 0; i < 64; i++) ring[i * 64 + 63] = 0xf0;
    struct mlx5_ib_create_cq ucq = { .buf_addr = (uintptr_t)ring, .db_addr = (uintptr_t)(ring + 4096),
        .cqe_size = 64, .flags = MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX, .uar_page_index = (uint16_t)uar_page };
    uint32_t cqe = 63, resp_cqe = 0, comp_vector = 0;
    uint64_t cq_uh = 0xc0ffee;
    struct mlx5_ib_create_cq_resp cqr;
    ioc_init(&c, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_CREATE);
    attr(&c, UVERBS_ATTR_CREATE_CQ_HANDLE, 0, 0);
    in(&c, UVERBS_ATTR_CREATE_CQ_CQE, &cqe, 4);
    in(&c, UVERBS_ATTR_CREATE_CQ_USER_HANDLE, &cq_uh, 8);
    in(&c, UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, &comp_vector, 4);
    attr(&c, UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4, (uintptr_t)&resp_cqe);
    attr(&c, UVERBS_ATTR_CREATE_CQ_EVENT_FD, 0, (uint64_t)async_fd);
    in(&c, UVERBS_ATTR_UHW_IN, &ucq, sizeof ucq);
    attr(&c, UVERBS_ATTR_UHW_OUT, sizeof cqr, (uintptr_t)&cqr);
    run(fd, &c, "CQ_CREATE");
    uint32_t cq_h = (uint32_t)c.a[0].data;

    /* 7. RC QP: RQ 16 x 16 B, SQ 16 WQEBBs */
    uint8_t *qbuf = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct mlx5_ib_create_qp uqp = { .buf_addr = (uintptr_t)qbuf, .db_addr = (uintptr_t)(qbuf + 4096),
        .sq_wqe_count = 16, .rq_wqe_count = 16, .rq_wqe_shift = 4,
        .flags = MLX5_QP_FLAG_UAR_PAGE_INDEX, .uidx = cresp.cqe_version ? 1 : 0xffffff,
        .bfreg_index = uar_page };
    struct ib_uverbs_qp_cap cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 };
    uint64_t qp_uh = 0xbeef;
    uint32_t qpn = 0;
    struct mlx5_ib_create_qp_resp qpr;
    ioc_init(&c, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
    attr(&c, UVERBS_ATTR_CREATE_QP_HANDLE, 0, 0);
    attr(&c, UVERBS_ATTR_CREATE_QP_PD_HANDLE, 0, pdresp.pd_handle);
    attr(&c, UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, 0, cq_h);
    attr(&c, UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, 0, cq_h);
    in(&c, UVERBS_ATTR_CREATE_QP_USER_HANDLE, &qp_uh, 8);
    in(&c, UVERBS_ATTR_CREATE_QP_CAP, &cap, sizeof cap);
    attr(&c, UVERBS_ATTR_CREATE_QP_TYPE, 8, IB_UVERBS_QPT_RC);
    attr(&c, UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4, (uintptr_t)&qpn);
    in(&c, UVERBS_ATTR_UHW_IN, &uqp, sizeof uqp);
    attr(&c, UVERBS_ATTR_UHW_OUT, sizeof qpr, (uintptr_t)&qpr);
    run(fd, &c, "QP_CREATE");
    uint32_t qp_h = (uint32_t)c.a[0].data;

    /* 8. RESET -> INIT -> RTR -> RTS, connected to itself over the RoCE v2 GID */
    struct ib_uverbs_modify_qp m;
    memset(&m, 0, sizeof m);
    m.qp_state = 1; m.pkey_index = 0; m.port_num = 1;
    m.qp_access_flags = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;
    modify(fd, qp_h, 0x1 | 0x10 | 0x20 | 0x8, &m, "MODIFY_QP INIT");
    memset(&m, 0, sizeof m);
    m.qp_state = 2;
    m.path_mtu = pr.legacy_resp.active_mtu;
    m.dest_qp_num = qpn;
    m.rq_psn = 0;
    m.max_dest_rd_atomic = 1;
    m.min_rnr_timer = 12;
    memcpy(m.dest.dgid, gid.gid, 16);
    m.dest.is_global = 1;
    m.dest.sgid_index = 3;
    m.dest.hop_limit = 64;
    m.dest.port_num = 1;
    modify(fd, qp_h, 0x1 | 0x80 | 0x100 | 0x100000 | 0x1000 | 0x20000 | 0x8000, &m, "MODIFY_QP RTR");
    memset(&m, 0, sizeof m);
    m.qp_state = 3; m.sq_psn = 0; m.timeout = 14; m.retry_cnt = 7; m.rnr_retry = 7; m.max_rd_atomic = 1;
    modify(fd, qp_h, 0x1 | 0x10000 | 0x200 | 0x400 | 0x800 | 0x2000, &m, "MODIFY_QP RTS");

    printf("emu_syscalls: ok device %s uverbs%d (%u:%u) cqe_version %u pdn %u lkey 0x%x cqn %u qp %u uar page %u\n",
           name, idx, maj, min, cresp.cqe_version, pdn.pdn, mrresp.lkey, cqr.cqn, qpn, uar_page);

    /* 9. teardown in the kernel's order */
    struct ib_uverbs_destroy_qp_resp dqr;
    destroy(fd, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_DESTROY, qp_h, &dqr, sizeof dqr, "QP_DESTROY");
    struct ib_uverbs_destroy_cq_resp dcr;
    destroy(fd, UVERBS_OBJECT_CQ, UVERBS_METHOD_CQ_DESTROY, cq_h, &dcr, sizeof dcr, "CQ_DESTROY");
    destroy(fd, UVERBS_OBJECT_MR, UVERBS_METHOD_MR_DESTROY, mrresp.mr_handle, NULL, 0, "MR_DESTROY");
    destroy(fd, UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY, pdresp.pd_handle, NULL, 0, "PD_DESTROY");
    munmap(uar, uar_len);
    destroy(fd, MLX5_IB_OBJECT_UAR, MLX5_IB_METHOD_UAR_OBJ_DESTROY, uar_h, NULL, 0, "UAR_OBJ_DESTROY");
    close(async_fd);
    if (close(fd)) die("close", errno);
    return 0;
}
