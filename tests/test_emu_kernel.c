/* The emulated kernel (emu/): ioctl decoding, legacy write, object lifecycles, mmap, events,
 * fault injection, sysfs and the boundary.  Each expected errno is the kernel's, with its source:
 *   k:ioctl = drivers/infiniband/core/uverbs_ioctl.c (ib_uverbs_ioctl, ib_uverbs_cmd_verbs,
 *             ib_uverbs_run_method, uverbs_set_attr, uverbs_process_attr)
 *   k:main  = drivers/infiniband/core/uverbs_main.c (ib_uverbs_write, verify_hdr)
 *   k:rdma_core = drivers/infiniband/core/rdma_core.c (lookup_get_idr_uobject, ...)
 *   k:mlx5  = drivers/infiniband/hw/mlx5/{main,cq,qp}.c
 * Check runs each test in a fresh child, so each may configure the emulator. */
#include <check.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/netlink.h>
#include "test_emu_kernel.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------------
 * ioctl decoding */
static void query_port_ioc(struct tk_ioc *c, struct ib_uverbs_query_port_resp_ex *resp)
{
    tk_ioc_init(c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    tk_const(c, UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1);
    tk_out(c, UVERBS_ATTR_QUERY_PORT_RESP, resp, sizeof *resp);
}

START_TEST(decode_good_query_port)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    struct ib_uverbs_query_port_resp_ex r;
    memset(&r, 0xaa, sizeof r);
    struct tk_ioc c;
    query_port_ioc(&c, &r);
    ck_assert_int_eq(tk_run(e.fd, &c), 0);
    /* the kernel marks written outputs (uverbs_set_output) */
    ck_assert(c.attrs[1].flags & UVERBS_ATTR_F_VALID_OUTPUT);
    ck_assert_uint_eq(r.legacy_resp.state, 4);          /* IB_PORT_ACTIVE */
    ck_assert_uint_eq(r.legacy_resp.link_layer, 2);     /* IB_LINK_LAYER_ETHERNET */
    ck_assert_uint_eq(r.legacy_resp.active_mtu, 3);     /* 1024 (default) */
    close(e.fd);
}
END_TEST

START_TEST(decode_bad_header)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    struct ib_uverbs_query_port_resp_ex r;
    struct tk_ioc c;
    /* k:ioctl ib_uverbs_ioctl: length != struct_size(hdr, attrs, num_attrs) -> EINVAL */
    query_port_ioc(&c, &r);
    c.hdr.length = sizeof c.hdr + 2 * 16 + 16;
    ck_assert_int_eq(ioctl(e.fd, RDMA_VERBS_IOCTL, &c), -1);
    ck_assert_int_eq(errno, EINVAL);
    c.hdr.length = sizeof c.hdr + 16;                  /* shorter than num_attrs says */
    ck_assert_int_eq(ioctl(e.fd, RDMA_VERBS_IOCTL, &c), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* length > PAGE_SIZE -> EINVAL, even when consistent with num_attrs */
    static struct { struct ib_uverbs_ioctl_hdr h; struct ib_uverbs_attr a[300]; } big;
    big.h.num_attrs = 300;
    big.h.length = (uint16_t)(sizeof big.h + 300 * 16);
    big.h.driver_id = TK_DRIVER_MLX5;
    ck_assert_int_eq(ioctl(e.fd, RDMA_VERBS_IOCTL, &big), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* reserved1 / reserved2 != 0 -> EPROTONOSUPPORT */
    query_port_ioc(&c, &r);
    c.hdr.reserved1 = 1;
    ck_assert_int_eq(tk_run(e.fd, &c), -EPROTONOSUPPORT);
    query_port_ioc(&c, &r);
    c.hdr.reserved2 = 1;
    ck_assert_int_eq(tk_run(e.fd, &c), -EPROTONOSUPPORT);
    /* k:ioctl ib_uverbs_cmd_verbs: driver_id must be the device's (RDMA_DRIVER_MLX5) -> EINVAL */
    query_port_ioc(&c, &r);
    c.hdr.driver_id = 0;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    query_port_ioc(&c, &r);
    c.hdr.driver_id = 2;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    /* unknown object or method -> EPROTONOSUPPORT (DEVX object 0x1000 is absent without DEVX) */
    query_port_ioc(&c, &r);
    c.hdr.method_id = 77;
    ck_assert_int_eq(tk_run(e.fd, &c), -EPROTONOSUPPORT);
    query_port_ioc(&c, &r);
    c.hdr.object_id = 0x1000;
    c.hdr.method_id = 0x1000;
    ck_assert_int_eq(tk_run(e.fd, &c), -EPROTONOSUPPORT);
    /* a header the kernel cannot read -> EFAULT; another ioctl number -> ENOTTY */
    ck_assert_int_eq(ioctl(e.fd, RDMA_VERBS_IOCTL, (void *)16), -1);
    ck_assert_int_eq(errno, EFAULT);
    ck_assert_int_eq(ioctl(e.fd, RDMA_VERBS_IOCTL + 1, &c), -1);
    ck_assert_int_eq(errno, ENOTTY);
    close(e.fd);
}
END_TEST

START_TEST(decode_attrs)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    struct ib_uverbs_query_port_resp_ex r;
    struct tk_ioc c;
    /* k:ioctl uverbs_set_attr: unknown attribute with MANDATORY -> EPROTONOSUPPORT ... */
    query_port_ioc(&c, &r);
    tk_const(&c, 0x77, 0);
    ck_assert_int_eq(tk_run(e.fd, &c), -EPROTONOSUPPORT);
    /* ... and silently ignored without it */
    query_port_ioc(&c, &r);
    tk_const(&c, 0x77, 0)->flags = 0;
    ck_assert_int_eq(tk_run(e.fd, &c), 0);
    /* duplicate attribute -> EINVAL */
    query_port_ioc(&c, &r);
    tk_const(&c, UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1);
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    /* k:ioctl ib_uverbs_run_method: a missing mandatory attribute -> EINVAL */
    tk_ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT);
    tk_const(&c, UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1);
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    /* k:ioctl uverbs_process_attr: CONST_IN is UVERBS_ATTR_TYPE(u64): len 4 -> EINVAL */
    query_port_ioc(&c, &r);
    c.attrs[0].len = 4;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    query_port_ioc(&c, &r);
    c.attrs[0].len = 16;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    /* PTR_OUT shorter than the struct's minimum -> EINVAL */
    query_port_ioc(&c, &r);
    c.attrs[1].len = 40;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    /* attr_data.reserved != 0 on a PTR attr -> EINVAL */
    query_port_ioc(&c, &r);
    c.attrs[1].attr_data.reserved = 1;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    /* bad output pointer -> EFAULT (uverbs_copy_to) */
    query_port_ioc(&c, &r);
    c.attrs[1].data = 8;
    ck_assert_int_eq(tk_run(e.fd, &c), -EFAULT);
    /* bad input pointer (PTR_IN > 8 bytes) -> EFAULT */
    struct tk_ioc q;
    struct ib_uverbs_qp_cap cap = { 1, 1, 1, 1, 0 };
    tk_ioc_init(&q, UVERBS_OBJECT_QP, UVERBS_METHOD_QP_CREATE);
    tk_idr(&q, UVERBS_ATTR_CREATE_QP_HANDLE, 0);
    tk_in(&q, UVERBS_ATTR_CREATE_QP_CAP, &cap, sizeof cap)->data = 4096 * 3;
    ck_assert_int_eq(tk_run(e.fd, &q), -EFAULT);
    /* the attribute array itself unreadable -> EFAULT (copy_from_user of uattrs): the header
     * says 2 attrs but the page after it is unmapped */
    uint8_t *pg = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(pg != MAP_FAILED);
    munmap(pg + 4096, 4096);
    struct ib_uverbs_ioctl_hdr *h = (void *)(pg + 4096 - sizeof *h);
    memset(h, 0, sizeof *h);
    h->length = sizeof *h + 32;
    h->num_attrs = 2;
    h->object_id = UVERBS_OBJECT_DEVICE;
    h->method_id = UVERBS_METHOD_QUERY_PORT;
    h->driver_id = TK_DRIVER_MLX5;
    ck_assert_int_eq(ioctl(e.fd, RDMA_VERBS_IOCTL, h), -1);
    ck_assert_int_eq(errno, EFAULT);
    /* IDR attributes: len != 0 -> EINVAL; unknown handle -> ENOENT; another type -> EINVAL
     * (k:rdma_core lookup_get_idr_uobject / rdma_lookup_get_uobject) */
    tk_ioc_init(&c, UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY);
    tk_idr(&c, 0, e.pd)->len = 4;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    ck_assert_int_eq(tk_dealloc_pd(e.fd, 999), -ENOENT);
    ck_assert_int_eq(tk_dealloc_pd(e.fd, e.cq), -EINVAL);
    /* FD attribute that is not an event file of this uverbs file -> EBADF */
    struct tk_mem m;
    tk_mem_alloc(&m, 4096);
    uint32_t h2;
    struct tk_cq_opts o = { .ncqe = 8, .uar_page = e.uar_page, .comp_fd = 0, .event_fd = -1 };
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h2, NULL), -EBADF);
    close(e.fd);
}
END_TEST

START_TEST(decode_handles_written_back)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    /* handles are per file, lowest free first: UAR 0, PD 1, CQ 2 in tk_env_open */
    ck_assert_uint_eq(e.uar_h, 0);
    ck_assert_uint_eq(e.pd, 1);
    ck_assert_uint_eq(e.cq, 2);
    uint32_t pd2;
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd2, NULL), 0);
    ck_assert_uint_eq(pd2, 3);
    ck_assert_int_eq(tk_dealloc_pd(e.fd, e.pd), 0);
    uint32_t pd3;
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd3, NULL), 0);
    ck_assert_uint_eq(pd3, 1);
    int afd = -1;
    ck_assert_int_eq(tk_async_alloc(e.fd, &afd), 0);
    ck_assert_int_ge(afd, 0);
    ck_assert_int_ge(fcntl(afd, F_GETFD) & FD_CLOEXEC, 1);   /* the kernel's event fds are CLOEXEC */
    /* the async fd's uobject took handle 4; closing the fd frees it for the next object */
    close(afd);
    uint32_t pd4;
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd4, NULL), 0);
    ck_assert_uint_eq(pd4, 4);
    close(e.fd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * GET_CONTEXT and the legacy write ABI */
START_TEST(context_rules)
{
    int fd = tk_open(0);
    ck_assert_int_ge(fd, 0);
    uint32_t h = 0;
    /* objects need a ucontext (ib_uverbs_get_ucontext -> EINVAL) */
    ck_assert_int_eq(tk_alloc_pd(fd, &h, NULL), -EINVAL);
    int afd = -1;
    ck_assert_int_eq(tk_async_alloc(fd, &afd), -EINVAL);
    /* k:mlx5 mlx5_ib_alloc_ucontext: UHW_IN of 12 bytes is neither v0 (8) nor >= 16 -> EINVAL */
    struct mlx5_ib_alloc_ucontext_req_v2 req;
    memset(&req, 0, sizeof req);
    struct mlx5_ib_alloc_ucontext_resp resp;
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT);
    tk_in(&c, UVERBS_ATTR_UHW_IN, &req, 12);
    tk_out(&c, UVERBS_ATTR_UHW_OUT, &resp, sizeof resp);
    ck_assert_int_eq(tk_run(fd, &c), -EINVAL);
    /* comp_mask / reserved nonzero -> EOPNOTSUPP; unknown flags -> EOPNOTSUPP */
    req.comp_mask = 1;
    tk_ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT);
    tk_in(&c, UVERBS_ATTR_UHW_IN, &req, sizeof req);
    tk_out(&c, UVERBS_ATTR_UHW_OUT, &resp, sizeof resp);
    ck_assert_int_eq(tk_run(fd, &c), -EOPNOTSUPP);
    req.comp_mask = 0;
    req.flags = 2;
    ck_assert_int_eq(tk_run(fd, &c), -EOPNOTSUPP);
    req.flags = 0;
    /* num_low_latency_bfregs > ALIGN(total, 2) - 1 -> EINVAL */
    req.total_num_bfregs = 4;
    req.num_low_latency_bfregs = 4;
    ck_assert_int_eq(tk_run(fd, &c), -EINVAL);
    req.num_low_latency_bfregs = 0;
    req.max_cqe_version = 1;
    req.lib_caps = MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR;
    memset(&resp, 0, sizeof resp);
    ck_assert_int_eq(tk_run(fd, &c), 0);
    ck_assert(c.attrs[1].flags & UVERBS_ATTR_F_VALID_OUTPUT);
    ck_assert_uint_eq(resp.cqe_version, 1);
    ck_assert_uint_eq(resp.tot_bfregs, 0);                   /* DYN_UAR: no static bfregs */
    ck_assert_uint_eq(resp.num_ports, 1);
    ck_assert_uint_eq(resp.log_uar_size, 12);
    ck_assert_uint_eq(resp.response_length, sizeof resp);
    ck_assert(resp.comp_mask & MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET);
    ck_assert(resp.comp_mask & MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS);   /* both clock modes */
    ck_assert_uint_eq(resp.clock_info_versions, 1u << MLX5_IB_CLOCK_INFO_V1);
    /* one context per file -> EINVAL */
    ck_assert_int_eq(tk_run(fd, &c), -EINVAL);
    close(fd);
}
END_TEST

static ssize_t wr(int fd, const void *b, size_t n) { ssize_t r = write(fd, b, n); return r < 0 ? -errno : r; }

START_TEST(write_abi)
{
    int fd = tk_open(0);
    ck_assert_int_ge(fd, 0);
    /* legacy GET_CONTEXT by write(): hdr + {response} + mlx5 req; resp {async_fd, ncv} + mlx5 */
    struct {
        struct ib_uverbs_cmd_hdr h;
        struct ib_uverbs_get_context c;
        struct mlx5_ib_alloc_ucontext_req_v2 r;
    } __attribute__((packed)) gc;
    struct {
        struct ib_uverbs_get_context_resp c;
        struct mlx5_ib_alloc_ucontext_resp r;
    } __attribute__((packed)) gr;
    memset(&gc, 0, sizeof gc);
    memset(&gr, 0xff, sizeof gr);
    gc.h.command = IB_USER_VERBS_CMD_GET_CONTEXT;
    gc.h.in_words = sizeof gc / 4;
    gc.h.out_words = sizeof gr / 4;
    gc.c.response = (uintptr_t)&gr;
    gc.r.total_num_bfregs = 16;       /* static UARs this time */
    gc.r.num_low_latency_bfregs = 4;
    gc.r.max_cqe_version = 1;
    gc.r.lib_caps = MLX5_LIB_CAP_4K_UAR;
    /* k:main ib_uverbs_write: count < 8 -> EINVAL; in_words * 4 != count -> EINVAL */
    ck_assert_int_eq(wr(fd, &gc, 4), -EINVAL);
    ck_assert_int_eq(wr(fd, &gc, sizeof gc - 4), -EINVAL);
    /* unreadable buffer -> EFAULT */
    void *volatile bad = (void *)8;
    ck_assert_int_eq(wr(fd, bad, sizeof gc), -EFAULT);
    /* bits outside FLAG_EXTENDED | COMMAND_MASK -> EINVAL; unknown command -> EOPNOTSUPP */
    gc.h.command = 0x100;
    ck_assert_int_eq(wr(fd, &gc, sizeof gc), -EINVAL);
    gc.h.command = 99;
    ck_assert_int_eq(wr(fd, &gc, sizeof gc), -EOPNOTSUPP);
    gc.h.command = IB_USER_VERBS_CMD_GET_CONTEXT;
    /* verify_hdr: response smaller than the command's -> ENOSPC */
    gc.h.out_words = 1;
    ck_assert_int_eq(wr(fd, &gc, sizeof gc), -ENOSPC);
    gc.h.out_words = sizeof gr / 4;
    ck_assert_int_eq(wr(fd, &gc, sizeof gc), (ssize_t)sizeof gc);
    ck_assert_uint_eq(gr.c.num_comp_vectors, 4);
    int afd = (int)gr.c.async_fd;
    ck_assert_int_ge(afd, 0);
    ck_assert_uint_eq(gr.r.tot_bfregs, 16);
    ck_assert_uint_eq(gr.r.bf_reg_size, 512);
    ck_assert_uint_eq(gr.r.cache_line_size, 64);
    /* ALLOC_PD by write(): resp {pd_handle} + mlx5 {pdn} */
    struct { struct ib_uverbs_cmd_hdr h; struct ib_uverbs_alloc_pd c; } ap;
    struct { struct ib_uverbs_alloc_pd_resp c; struct mlx5_ib_alloc_pd_resp r; } apr;
    memset(&ap, 0, sizeof ap);
    ap.h.command = IB_USER_VERBS_CMD_ALLOC_PD;
    ap.h.in_words = sizeof ap / 4;
    ap.h.out_words = sizeof apr / 4;
    ap.c.response = (uintptr_t)&apr;
    ck_assert_int_eq(wr(fd, &ap, sizeof ap), (ssize_t)sizeof ap);
    ck_assert_uint_eq(apr.c.pd_handle, 1);          /* handle 0 is the async fd's uobject */
    /* response pointer unwritable -> EFAULT, and the PD is not left behind */
    unsigned before = tk_counts().pd;
    ap.c.response = 8;
    ck_assert_int_eq(wr(fd, &ap, sizeof ap), -EFAULT);
    ck_assert_uint_eq(tk_counts().pd, before);
    /* DEALLOC_PD by write() */
    struct { struct ib_uverbs_cmd_hdr h; struct ib_uverbs_dealloc_pd c; } dp;
    memset(&dp, 0, sizeof dp);
    dp.h.command = IB_USER_VERBS_CMD_DEALLOC_PD;
    dp.h.in_words = sizeof dp / 4;
    dp.c.pd_handle = apr.c.pd_handle;
    ck_assert_int_eq(wr(fd, &dp, sizeof dp), (ssize_t)sizeof dp);
    ck_assert_int_eq(wr(fd, &dp, sizeof dp), -ENOENT);
    /* the uverbs fd has no read() */
    char b[8];
    ck_assert_int_eq(read(fd, b, sizeof b), -1);
    ck_assert_int_eq(errno, EINVAL);
    close(afd);
    close(fd);
}
END_TEST

START_TEST(invoke_write_rules)
{
    int fd = tk_open(0);
    ck_assert_int_ge(fd, 0);
    /* libibverbs' probe (rc: device.c has_ioctl_write): only WRITE_CMD = QUERY_DEVICE, no
     * core buffers -> ENOSPC (k: uverbs_std_types_device.c INVOKE_WRITE, kernel >= 5.0) */
    ck_assert_int_eq(tk_invoke(fd, IB_USER_VERBS_CMD_QUERY_DEVICE, NULL, 0, NULL, 0, NULL, 0, NULL, 0), -ENOSPC);
    /* unknown command -> EOPNOTSUPP */
    ck_assert_int_eq(tk_invoke(fd, 99, NULL, 0, NULL, 0, NULL, 0, NULL, 0), -EOPNOTSUPP);
    struct mlx5_ib_alloc_ucontext_resp ctx;
    ck_assert_int_eq(tk_get_context(fd, &ctx), 0);
    /* QUERY_DEVICE through INVOKE_WRITE */
    uint64_t resp_ptr = 0;
    struct ib_uverbs_query_device_resp qd;
    memset(&qd, 0, sizeof qd);
    ck_assert_int_eq(tk_invoke(fd, IB_USER_VERBS_CMD_QUERY_DEVICE, &resp_ptr, 8, &qd, sizeof qd, NULL, 0, NULL, 0), 0);
    ck_assert_uint_eq(qd.vendor_id, 0x02c9);
    ck_assert_uint_eq(qd.vendor_part_id, 4123);       /* PCI device id 0x101B (ConnectX-6) */
    ck_assert_uint_eq(qd.phys_port_cnt, 1);
    ck_assert_uint_ge(qd.max_cqe, 65535);
    /* core response shorter than the command's -> ENOSPC */
    ck_assert_int_eq(tk_invoke(fd, IB_USER_VERBS_CMD_QUERY_DEVICE, &resp_ptr, 8, &qd, 100, NULL, 0, NULL, 0), -ENOSPC);
    /* EX_QUERY_DEVICE with the mlx5 response, comp_mask must be 0 */
    struct ib_uverbs_ex_query_device exq = { 0 };
    struct ib_uverbs_ex_query_device_resp exr;
    struct mlx5_ib_query_device_resp mr;
    ck_assert_int_eq(tk_invoke(fd, IB_USER_VERBS_EX_CMD_QUERY_DEVICE | IB_USER_VERBS_CMD_FLAG_EXTENDED,
                               &exq, sizeof exq, &exr, sizeof exr, NULL, 0, &mr, sizeof mr), 0);
    ck_assert_uint_eq(exr.hca_core_clock, 156250);            /* emu/nic/nic_clock.c default */
    ck_assert_uint_eq(exr.timestamp_mask, ~0ull);             /* a 64-bit timer */
    exq.comp_mask = 1;
    ck_assert_int_eq(tk_invoke(fd, IB_USER_VERBS_EX_CMD_QUERY_DEVICE | IB_USER_VERBS_CMD_FLAG_EXTENDED,
                               &exq, sizeof exq, &exr, sizeof exr, NULL, 0, &mr, sizeof mr), -EINVAL);
    close(fd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * object lifecycles */
START_TEST(lifecycle_pd_mr)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    struct mlxd_emu_counts c0 = tk_counts();
    ck_assert_uint_eq(c0.pd, 1);
    void *buf = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint32_t mr, lkey;
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, buf, 65536, IB_UVERBS_ACCESS_LOCAL_WRITE |
                               IB_UVERBS_ACCESS_REMOTE_WRITE, &mr, &lkey), 0);
    ck_assert_uint_ne(lkey, 0x100);                         /* MLX5_INVALID_LKEY */
    ck_assert_uint_eq(tk_counts().mr, 1);
    /* PD in use -> EBUSY (ib_destroy_usecnt) */
    ck_assert_int_eq(tk_dealloc_pd(e.fd, e.pd), -EBUSY);
    ck_assert_int_eq(tk_dereg_mr(e.fd, mr), 0);
    ck_assert_int_eq(tk_dereg_mr(e.fd, mr), -ENOENT);
    /* k: core/verbs.c ib_check_mr_access: remote write without local write -> EINVAL */
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, buf, 4096, IB_UVERBS_ACCESS_REMOTE_WRITE, &mr, NULL), -EINVAL);
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, buf, 4096, 1u << 15, &mr, NULL), -EINVAL);
    /* ODP without the capability -> EOPNOTSUPP */
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, buf, 4096, IB_UVERBS_ACCESS_ON_DEMAND, &mr, NULL), -EOPNOTSUPP);
    /* bad PD (write path lookup) -> EINVAL */
    ck_assert_int_eq(tk_reg_mr(e.fd, 555, buf, 4096, 0, &mr, NULL), -EINVAL);
    /* start and hca_va with different in-page offsets -> EINVAL */
    struct ib_uverbs_reg_mr req = { .start = (uintptr_t)buf, .length = 4096,
                                    .hca_va = (uintptr_t)buf + 8, .pd_handle = e.pd };
    struct ib_uverbs_reg_mr_resp rr;
    ck_assert_int_eq(tk_invoke(e.fd, IB_USER_VERBS_CMD_REG_MR, &req, sizeof req, &rr, sizeof rr, NULL, 0, NULL, 0), -EINVAL);
    /* unmapped memory -> EFAULT (ib_umem_get); read-only memory with write access -> EFAULT */
    munmap((uint8_t *)buf + 32768, 4096);
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, buf, 65536, 0, &mr, NULL), -EFAULT);
    mprotect(buf, 4096, PROT_READ);
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, buf, 4096, IB_UVERBS_ACCESS_LOCAL_WRITE, &mr, NULL), -EFAULT);
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, buf, 4096, IB_UVERBS_ACCESS_REMOTE_READ, &mr, NULL), 0);
    ck_assert_int_eq(tk_dereg_mr(e.fd, mr), 0);
    ck_assert_uint_eq(tk_counts().mr, 0);
    close(e.fd);
}
END_TEST

START_TEST(lifecycle_dmabuf_mr)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    int mfd = (int)syscall(SYS_memfd_create, "dmabuf", 0);
    ck_assert_int_ge(mfd, 0);
    ck_assert_int_eq(ftruncate(mfd, 65536), 0);
    uint32_t lkey = 0, rkey = 0;
    uint64_t off = 4096, len = 8192, iova = 0x10000 + 4096;
    int32_t fdv = mfd;
    uint32_t access = IB_UVERBS_ACCESS_LOCAL_WRITE;
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_MR, UVERBS_METHOD_REG_DMABUF_MR);
    tk_idr(&c, UVERBS_ATTR_REG_DMABUF_MR_HANDLE, 0);
    tk_idr(&c, UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, e.pd);
    tk_in(&c, UVERBS_ATTR_REG_DMABUF_MR_OFFSET, &off, 8);
    tk_in(&c, UVERBS_ATTR_REG_DMABUF_MR_LENGTH, &len, 8);
    tk_in(&c, UVERBS_ATTR_REG_DMABUF_MR_IOVA, &iova, 8);
    tk_in(&c, UVERBS_ATTR_REG_DMABUF_MR_FD, &fdv, 4);
    tk_in(&c, UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, &access, 4);
    tk_out(&c, UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, &lkey, 4);
    tk_out(&c, UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, &rkey, 4);
    ck_assert_int_eq(tk_run(e.fd, &c), 0);
    ck_assert_uint_eq(lkey, rkey);
    ck_assert_uint_eq(tk_counts().mr, 1);
    ck_assert_int_eq(tk_dereg_mr(e.fd, (uint32_t)c.attrs[0].data), 0);
    /* (offset ^ iova) & ~PAGE_MASK != 0 -> EINVAL (uverbs_std_types_mr.c) */
    iova += 8;
    c.attrs[4].data = iova;
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    ck_assert_uint_eq(tk_counts().mr, 0);
    close(mfd);
    close(e.fd);
}
END_TEST

START_TEST(lifecycle_cq)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    ck_assert_uint_eq(tk_counts().cq, 1);
    ck_assert_int_eq(tk_destroy_cq(e.fd, e.cq), 0);
    ck_assert_int_eq(tk_destroy_cq(e.fd, e.cq), -ENOENT);
    ck_assert_uint_eq(tk_counts().cq, 0);
    struct tk_mem m;
    tk_mem_alloc(&m, 256 * 64);
    uint32_t h = 0;
    struct tk_cq_opts o = { .ncqe = 256, .uar_page = e.uar_page, .comp_fd = -1, .event_fd = -1 };
    /* k:mlx5 create_cq_user: cqe_size other than 64/128 -> EINVAL */
    o.cqe_size = 32;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EINVAL);
    o.cqe_size = 64;
    /* driver data shorter than offsetof(flags) -> EINVAL */
    o.uhw_len = 20;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EINVAL);
    o.uhw_len = 0;
    /* unknown mlx5 flags -> EINVAL */
    o.flags = 0x80;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EINVAL);
    o.flags = 0;
    /* DYN_UAR context without a UAR page index -> EINVAL */
    o.no_flags = true;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EINVAL);
    o.no_flags = false;
    /* a UAR page this context does not own -> EINVAL */
    o.uar_page = e.uar_page + 1000;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EINVAL);
    o.uar_page = e.uar_page;
    /* more entries than 1 << log_max_cq_sz -> EINVAL (max_cqe from QUERY_DEVICE) */
    uint64_t rp = 0;
    struct ib_uverbs_query_device_resp qd;
    ck_assert_int_eq(tk_invoke(e.fd, IB_USER_VERBS_CMD_QUERY_DEVICE, &rp, 8, &qd, sizeof qd, NULL, 0, NULL, 0), 0);
    o.ncqe = qd.max_cqe + 3;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EINVAL);
    o.ncqe = 256;
    /* comp_vector >= num_comp_vectors -> EINVAL */
    o.comp_vector = 4;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EINVAL);
    o.comp_vector = 0;
    /* the ring must be mapped for entries * cqe_size bytes (ib_umem_get) -> EFAULT */
    o.ncqe = 512;                          /* 32 KiB, but only 16 KiB + the db page are mapped */
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EFAULT);
    o.ncqe = 256;
    o.db = 64;                             /* doorbell record unmapped -> EFAULT */
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EFAULT);
    o.db = 0;
    uint32_t cqn;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, &cqn), 0);
    ck_assert_uint_ne(cqn, e.cqn);
    /* a CQ used by a QP cannot be destroyed (EBUSY) */
    struct tk_qp_opts q;
    tk_qp_defaults(&q, IB_UVERBS_QPT_RC, e.pd, h, e.uar_page);
    struct tk_mem qm;
    tk_mem_alloc(&qm, 16 * 16 + 16 * 64);
    uint32_t qh;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &qm, &qh, NULL), 0);
    ck_assert_int_eq(tk_destroy_cq(e.fd, h), -EBUSY);
    ck_assert_int_eq(tk_destroy_qp(e.fd, qh), 0);
    ck_assert_int_eq(tk_destroy_cq(e.fd, h), 0);
    ck_assert_uint_eq(tk_counts().cq, 0);
    close(e.fd);
}
END_TEST

START_TEST(lifecycle_qp)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    struct tk_mem m;
    tk_mem_alloc(&m, 16 * 16 + 16 * 64);
    struct tk_qp_opts q;
    uint32_t h, qpn;
    for (int type = IB_UVERBS_QPT_RC; type <= IB_UVERBS_QPT_UD; type++) {   /* RC 2, UC 3, UD 4 */
        tk_qp_defaults(&q, (uint32_t)type, e.pd, e.cq, e.uar_page);
        ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, &qpn), 0);
        ck_assert_uint_gt(qpn, 1);                 /* QP0/QP1 are never handed out */
        ck_assert_uint_le(qpn, 0xffffff);
        ck_assert_int_eq(tk_query_qp_state(e.fd, h), 0);   /* RESET */
        ck_assert_uint_eq(tk_counts().qp, 1);
        ck_assert_int_eq(tk_dealloc_pd(e.fd, e.pd), -EBUSY);
        ck_assert_int_eq(tk_destroy_qp(e.fd, h), 0);
        ck_assert_int_eq(tk_destroy_qp(e.fd, h), -ENOENT);
        ck_assert_uint_eq(tk_counts().qp, 0);
    }
    tk_qp_defaults(&q, IB_UVERBS_QPT_RC, e.pd, e.cq, e.uar_page);
    /* type XRC_INI is a known type the emulator does not implement: EOPNOTSUPP; 77: EINVAL */
    q.type = IB_UVERBS_QPT_XRC_INI;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EOPNOTSUPP);
    q.type = 77;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.type = IB_UVERBS_QPT_RC;
    /* k:mlx5 process_udata_size: driver data shorter than offsetof(ece_options) -> EINVAL */
    q.uhw_len = 40;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.uhw_len = 0;
    /* cqe_version 1: uidx must fit 24 bits (get_qp_user_index) -> EINVAL */
    q.uidx = 0x1000000;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.uidx = 7;
    /* sq_wqe_count not a power of two -> EINVAL (set_user_buf_size) */
    q.sq_wqe_count = 24;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.sq_wqe_count = 16;
    /* no RQ (max_recv_wr 0) but RQ geometry given -> EINVAL ("invalid rq params") */
    q.cap.max_recv_wr = 0;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.cap.max_recv_wr = 16;
    /* limits: max_send_wr / max_sge / max_inline beyond the device's -> EINVAL */
    uint64_t rp = 0;
    struct ib_uverbs_query_device_resp qd;
    ck_assert_int_eq(tk_invoke(e.fd, IB_USER_VERBS_CMD_QUERY_DEVICE, &rp, 8, &qd, sizeof qd, NULL, 0, NULL, 0), 0);
    q.cap.max_send_wr = qd.max_qp_wr + 1;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.cap.max_send_wr = 16;
    q.cap.max_send_sge = qd.max_sge + 1;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.cap.max_send_sge = 1;
    q.cap.max_inline_data = 4096;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.cap.max_inline_data = 0;
    /* unknown vendor flag -> EOPNOTSUPP (process_vendor_flags) */
    q.flags = MLX5_QP_FLAG_TYPE_DCT;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EOPNOTSUPP);
    q.flags = 0;
    /* DYN_UAR context and no UAR named -> EINVAL (alloc_bfreg) */
    q.no_flags = true;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EINVAL);
    q.no_flags = false;
    /* buffer smaller than (rq << shift) + sq * 64 -> EFAULT */
    q.sq_wqe_count = 256;
    q.cap.max_send_wr = 256;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EFAULT);
    q.cap.max_send_wr = 16;
    q.sq_wqe_count = 16;
    q.db = 8;
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &m, &h, NULL), -EFAULT);
    q.db = 0;
    /* missing PD -> ENOENT (uverbs_attr_get_obj) */
    ck_assert_uint_eq(tk_counts().qp, 0);
    close(e.fd);
}
END_TEST

START_TEST(lifecycle_uar_static)
{
    /* a context without DYN_UAR gets static UARs, mmapped by the legacy offsets (cmd 0/2/3) */
    int fd = tk_open(0);
    struct mlx5_ib_alloc_ucontext_resp r;
    ck_assert_int_eq(tk_get_context_caps(fd, MLX5_LIB_CAP_4K_UAR, 16, &r), 0);
    ck_assert_uint_eq(r.tot_bfregs, 16);
    /* 16 bfregs / 2 per 4K UAR = 8 static pages: idx 0..7 */
    void *p = mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, (off_t)((2 << 8) | 7) * 4096);
    ck_assert(p != MAP_FAILED);
    ck_assert_uint_eq(tk_counts().mappings, 1);
    ck_assert(mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, (off_t)((3 << 8) | 8) * 4096) == MAP_FAILED);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(munmap(p, 4096), 0);
    ck_assert_uint_eq(tk_counts().mappings, 0);
    /* CQ without UAR_PAGE_INDEX uses static page 0; QP without it gets a static bfreg */
    uint32_t pd, cq, qp;
    ck_assert_int_eq(tk_alloc_pd(fd, &pd, NULL), 0);
    struct tk_mem cm, qm;
    tk_mem_alloc(&cm, 64 * 64);
    tk_mem_alloc(&qm, 16 * 16 + 16 * 64);
    struct tk_cq_opts o = { .ncqe = 64, .comp_fd = -1, .event_fd = -1, .no_flags = true };
    ck_assert_int_eq(tk_create_cq(fd, &o, &cm, &cq, NULL), 0);
    struct tk_qp_opts q;
    tk_qp_defaults(&q, IB_UVERBS_QPT_RC, pd, cq, 0);
    q.no_flags = true;
    ck_assert_int_eq(tk_create_qp(fd, &q, &qm, &qp, NULL), 0);
    close(fd);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * mmap */
START_TEST(mmap_uar_and_clock)
{
    int fd = tk_open(0);
    /* before GET_CONTEXT -> ENODEV (ib_uverbs_mmap) */
    ck_assert(mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, 9 << 20) == MAP_FAILED);
    ck_assert_int_eq(errno, ENODEV);
    struct mlx5_ib_alloc_ucontext_resp r;
    ck_assert_int_eq(tk_get_context(fd, &r), 0);
    uint32_t h, page, h2, page2;
    uint64_t off, off2;
    ck_assert_int_eq(tk_uar_alloc(fd, MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF, &h, &off, &page), 0);
    ck_assert_int_eq(tk_uar_alloc(fd, MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC, &h2, &off2, &page2), 0);
    ck_assert_uint_ne(page, page2);
    ck_assert_uint_ne(off, off2);
    /* a type other than BF/NC -> EOPNOTSUPP */
    uint32_t hx, px;
    uint64_t ox;
    ck_assert_int_eq(tk_uar_alloc(fd, 5, &hx, &ox, &px), -EOPNOTSUPP);
    /* length != PAGE_SIZE -> EINVAL; MAP_PRIVATE -> EINVAL (rdma_user_mmap_io) */
    ck_assert(mmap(NULL, 8192, PROT_WRITE, MAP_SHARED, fd, (off_t)off) == MAP_FAILED);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert(mmap(NULL, 4096, PROT_WRITE, MAP_PRIVATE, fd, (off_t)off) == MAP_FAILED);
    ck_assert_int_eq(errno, EINVAL);
    /* an offset nobody handed out -> EINVAL; legacy static page with DYN_UAR -> EINVAL */
    ck_assert(mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, (off_t)off + 64 * 4096) == MAP_FAILED);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert(mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
    ck_assert_int_eq(errno, EINVAL);
    /* two mappings of one UAR are the same page (the engine watches that memory) */
    volatile uint64_t *a = mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, (off_t)off);
    volatile uint64_t *b = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
    ck_assert(a != MAP_FAILED && b != MAP_FAILED);
    a[0x800 / 8] = 0x1122334455667788ull;
    ck_assert_uint_eq(b[0x800 / 8], 0x1122334455667788ull);
    ck_assert_uint_eq(tk_counts().mappings, 2);
    /* a UAR can be destroyed after munmap */
    munmap((void *)a, 4096);
    munmap((void *)b, 4096);
    ck_assert_uint_eq(tk_counts().mappings, 0);
    ck_assert_int_eq(tk_uar_destroy(fd, h), 0);
    ck_assert_uint_eq(tk_counts().uar, 1);
    /* CORE_CLOCK (cmd 5): writable -> EPERM; read-only: a running BE hi/lo counter at
     * hca_core_clock_offset */
    ck_assert(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 5 << 20) == MAP_FAILED);
    ck_assert_int_eq(errno, EPERM);
    const volatile uint8_t *clk = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 5 << 20);
    ck_assert(clk != MAP_FAILED);
    const volatile uint32_t *w = (const volatile uint32_t *)(clk + r.hca_core_clock_offset);
    uint64_t t0 = ((uint64_t)be32toh(w[0]) << 32) | be32toh(w[1]);
    uint64_t t1 = t0;
    /* the ticker is a thread: on a loaded machine it may wait longer than 20 ms for a CPU */
    for (int i = 0; i < 100 && t1 - t0 <= 5000000; i++) {
        usleep(20000);
        t1 = ((uint64_t)be32toh(w[0]) << 32) | be32toh(w[1]);
    }
    ck_assert_uint_gt(t1, t0);
    ck_assert_uint_gt(t1 - t0, 781250);       /* >= 5 ms of 156.25 MHz cycles */
    /* CLOCK_INFO (cmd 7, index MLX5_IB_CLOCK_INFO_V1 = 0): writable -> EPERM, another index ->
     * EINVAL; the page: struct mlx5_ib_clock_info with the kernel's 41-bit mask and
     * clocksource_khz2mult's rounding: mult = (10^6 << shift + khz / 2) / khz, the largest
     * shift with mult < 2^31: 28 at 156250 kHz (6.4 ns per cycle) */
    ck_assert(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 7 << 20) == MAP_FAILED);
    ck_assert_int_eq(errno, EPERM);
    ck_assert(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, (7 << 20) + (1 << 12)) == MAP_FAILED);
    ck_assert_int_eq(errno, EINVAL);
    const volatile struct mlx5_ib_clock_info *ci = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 7 << 20);
    ck_assert(ci != MAP_FAILED);
    ck_assert_uint_eq(ci->shift, 28);
    ck_assert_uint_eq(ci->mult, 1717986918u);
    ck_assert_uint_eq(ci->mask, (1ull << 41) - 1);
    ck_assert_uint_eq(ci->sign & MLX5_IB_CLOCK_INFO_KERNEL_UPDATING, 0);
    munmap((void *)ci, 4096);
    close(fd);
    ck_assert_uint_eq(tk_counts().mappings, 0);
    ck_assert_uint_eq(tk_counts().uar, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * close() releases everything */
START_TEST(close_releases_everything)
{
    struct tk_env e;
    tk_env_open(&e, 1);
    int afd, cfd;
    ck_assert_int_eq(tk_async_alloc(e.fd, &afd), 0);
    struct ib_uverbs_create_comp_channel ccreq = { 0 };
    struct ib_uverbs_create_comp_channel_resp ccr;
    ck_assert_int_eq(tk_invoke(e.fd, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, &ccreq, sizeof ccreq, &ccr, sizeof ccr, NULL, 0, NULL, 0), 0);
    cfd = (int)ccr.fd;
    struct tk_mem cm, qm;
    tk_mem_alloc(&cm, 64 * 64);
    tk_mem_alloc(&qm, 16 * 16 + 16 * 64);
    uint32_t cq2 = 0, qp = 0, mr = 0;
    struct tk_cq_opts o = { .ncqe = 64, .uar_page = e.uar_page, .comp_fd = cfd, .event_fd = afd };
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &cm, &cq2, NULL), 0);
    struct tk_qp_opts q;
    tk_qp_defaults(&q, IB_UVERBS_QPT_UC, e.pd, cq2, e.uar_page);
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &qm, &qp, NULL), 0);
    static uint8_t region[8192] __attribute__((aligned(4096)));
    ck_assert_int_eq(tk_reg_mr(e.fd, e.pd, region, sizeof region, IB_UVERBS_ACCESS_LOCAL_WRITE, &mr, NULL), 0);
    void *map = mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, e.fd, (off_t)e.uar_off);
    ck_assert(map != MAP_FAILED);
    struct mlxd_emu_counts c = tk_counts();
    ck_assert_uint_eq(c.files, 1);
    ck_assert_uint_eq(c.contexts, 1);
    ck_assert_uint_eq(c.pd, 1);
    ck_assert_uint_eq(c.mr, 1);
    ck_assert_uint_eq(c.cq, 2);
    ck_assert_uint_eq(c.qp, 1);
    ck_assert_uint_eq(c.uar, 1);
    ck_assert_uint_eq(c.comp_channel, 1);
    ck_assert_uint_eq(c.async_event, 1);
    ck_assert_uint_eq(c.mappings, 1);
    ck_assert_int_eq(close(e.fd), 0);
    c = tk_counts();
    ck_assert_uint_eq(c.files + c.contexts + c.pd + c.mr + c.cq + c.qp + c.uar + c.mappings, 0);
    /* the event files live on while the process holds their fds, as in the kernel */
    ck_assert_uint_eq(c.event_fds, 2);
    close(afd);
    close(cfd);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* Process exit with objects alive: the exit handler destroys every file (the engine stops,
 * its UDP port is free again) and removes the sysfs tree the process made. */
START_TEST(exit_releases_everything)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        tk_unique_devices();                 /* the child makes (and owns) its own tree */
        struct tk_env e;
        tk_env_open(&e, 0);
        struct tk_mem qm;
        tk_mem_alloc(&qm, 16 * 16 + 16 * 64);
        struct tk_qp_opts q;
        uint32_t qp;
        tk_qp_defaults(&q, IB_UVERBS_QPT_RC, e.pd, e.cq, e.uar_page);
        ck_assert_int_eq(tk_create_qp(e.fd, &q, &qm, &qp, NULL), 0);
        char msg[600];
        snprintf(msg, sizeof msg, "%s|%s", mlxd_emu_sysfs_path(), getenv("MLXD_EMU_DEVICES"));
        ck_assert_int_eq(write(pfd[1], msg, strlen(msg) + 1), (ssize_t)strlen(msg) + 1);
        exit(0);                              /* uverbs fd, QP, CQ, PD, UAR all still open */
    }
    close(pfd[1]);
    char msg[600] = "";
    ck_assert_int_gt(read(pfd[0], msg, sizeof msg), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *bar = strchr(msg, '|');
    ck_assert_ptr_nonnull(bar);
    *bar = 0;
    struct stat sb;
    ck_assert_msg(stat(msg, &sb) == -1 && errno == ENOENT, "%s still exists", msg);
    /* the same device addresses can be opened again */
    ck_assert_int_eq(mlxd_emu_configure(bar + 1), 0);
    struct tk_env e;
    tk_env_open(&e, 0);
    close(e.fd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * events */
START_TEST(events_async_port)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    int afd = -1;
    ck_assert_int_eq(tk_async_alloc(e.fd, &afd), 0);
    /* nothing queued: O_NONBLOCK read -> EAGAIN; poll says not readable */
    fcntl(afd, F_SETFL, O_NONBLOCK);
    struct ib_uverbs_async_event_desc d;
    ck_assert_int_eq(read(afd, &d, sizeof d), -1);
    ck_assert_int_eq(errno, EAGAIN);
    struct pollfd p = { .fd = afd, .events = POLLIN };
    ck_assert_int_eq(poll(&p, 1, 0), 0);
    /* a CQ so the engine knows the context; then the port goes down: IB_EVENT_PORT_ERR (10) */
    struct tk_mem qm;
    tk_mem_alloc(&qm, 16 * 16 + 16 * 64);
    struct tk_qp_opts q;
    uint32_t qp;
    tk_qp_defaults(&q, IB_UVERBS_QPT_RC, e.pd, e.cq, e.uar_page);
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &qm, &qp, NULL), 0);
    ck_assert_int_eq(mlxd_emu_set_link(0, false), 0);
    ck_assert_int_eq(poll(&p, 1, 2000), 1);
    /* a buffer smaller than one descriptor -> EINVAL, the event stays queued */
    ck_assert_int_eq(read(afd, &d, 8), -1);
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_int_eq(read(afd, &d, sizeof d), (ssize_t)sizeof d);
    ck_assert_uint_eq(d.event_type, 10);
    ck_assert_uint_eq(d.element, 1);
    ck_assert_int_eq(poll(&p, 1, 0), 0);
    /* QUERY_PORT and sysfs follow */
    struct ib_uverbs_query_port_resp_ex r;
    struct tk_ioc c;
    query_port_ioc(&c, &r);
    ck_assert_int_eq(tk_run(e.fd, &c), 0);
    ck_assert_uint_eq(r.legacy_resp.state, 1);            /* IB_PORT_DOWN */
    char path[600], txt[32] = "";
    snprintf(path, sizeof path, "%s/class/infiniband/mlx5_0/ports/1/state", mlxd_emu_sysfs_path());
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(txt, sizeof txt, f));
    fclose(f);
    ck_assert_str_eq(txt, "1: DOWN\n");
    ck_assert_int_eq(mlxd_emu_set_link(0, true), 0);
    ck_assert_int_eq(poll(&p, 1, 2000), 1);
    ck_assert_int_eq(read(afd, &d, sizeof d), (ssize_t)sizeof d);
    ck_assert_uint_eq(d.event_type, 9);                    /* IB_EVENT_PORT_ACTIVE */
    ck_assert_int_eq(mlxd_emu_set_link(9, true), -EINVAL);
    close(afd);
    close(e.fd);
}
END_TEST

START_TEST(events_comp_channel_fd)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    struct ib_uverbs_create_comp_channel ccreq = { 0 };
    struct ib_uverbs_create_comp_channel_resp ccr;
    ck_assert_int_eq(tk_invoke(e.fd, IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, &ccreq, sizeof ccreq, &ccr, sizeof ccr, NULL, 0, NULL, 0), 0);
    int cfd = (int)ccr.fd;
    fcntl(cfd, F_SETFL, O_NONBLOCK);
    struct ib_uverbs_comp_event_desc d;
    ck_assert_int_eq(read(cfd, &d, sizeof d), -1);
    ck_assert_int_eq(errno, EAGAIN);
    /* the comp channel is not an async fd: EVENT_FD naming it -> EBADF */
    struct tk_mem m;
    tk_mem_alloc(&m, 64 * 64);
    uint32_t h = 0;
    struct tk_cq_opts o = { .ncqe = 64, .uar_page = e.uar_page, .comp_fd = -1, .event_fd = cfd };
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), -EBADF);
    o.event_fd = -1;
    o.comp_fd = cfd;
    ck_assert_int_eq(tk_create_cq(e.fd, &o, &m, &h, NULL), 0);
    /* the event fds have no write() */
    ck_assert_int_eq(write(cfd, &d, sizeof d), -1);
    ck_assert_int_eq(errno, EINVAL);
    /* closing the channel while a CQ names it is allowed; the CQ still destroys cleanly */
    close(cfd);
    ck_assert_uint_eq(tk_counts().comp_channel, 0);
    ck_assert_int_eq(tk_destroy_cq(e.fd, h), 0);
    close(e.fd);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * fault injection */
START_TEST(faults)
{
    struct tk_env e;
    tk_env_open(&e, 0);
    uint32_t pd = 0;
    ck_assert_int_eq(mlxd_emu_fail_nth_call(2, EIO), 0);
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd, NULL), 0);
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd, NULL), -EIO);
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd, NULL), 0);
    ck_assert_int_eq(mlxd_emu_fail_method("ALLOC_PD", 2, ENOMEM), 0);
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd, NULL), 0);
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd, NULL), -ENOMEM);
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd, NULL), 0);
    ck_assert_int_eq(mlxd_emu_fail_method("QP_CREATE", 1, EAGAIN), 0);
    struct tk_mem qm;
    tk_mem_alloc(&qm, 16 * 16 + 16 * 64);
    struct tk_qp_opts q;
    uint32_t qp;
    tk_qp_defaults(&q, IB_UVERBS_QPT_RC, e.pd, e.cq, e.uar_page);
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &qm, &qp, NULL), -EAGAIN);
    ck_assert_uint_eq(tk_counts().qp, 0);
    ck_assert_int_eq(tk_create_qp(e.fd, &q, &qm, &qp, NULL), 0);
    ck_assert_int_eq(mlxd_emu_fail_method("MMAP", 1, ENOMEM), 0);
    ck_assert(mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, e.fd, (off_t)e.uar_off) == MAP_FAILED);
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_int_eq(mlxd_emu_fail_nth_call(0, EIO), -EINVAL);
    ck_assert_int_eq(mlxd_emu_fail_nth_call(1, 0), -EINVAL);
    ck_assert_int_eq(mlxd_emu_fail_method("ALLOC_PD", 1, EIO), 0);
    mlxd_emu_fail_clear();
    ck_assert_int_eq(tk_alloc_pd(e.fd, &pd, NULL), 0);
    ck_assert_uint_gt(tk_counts().kernel_calls, 10);
    close(e.fd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * sysfs, stat, netlink, configuration */
static void read_file(const char *rel, char *out, size_t len)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", mlxd_emu_sysfs_path(), rel);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    out[0] = 0;
    size_t n = fread(out, 1, len - 1, f);
    out[n] = 0;
    fclose(f);
}

START_TEST(sysfs_tree)
{
    ck_assert(mlxd_emu_active());
    ck_assert_int_eq(mlxd_emu_num_devices(), 2);
    ck_assert_str_eq(getenv("SYSFS_PATH"), mlxd_emu_sysfs_path());
    char b[256];
    /* formats: libibverbs init.c / kernel core/sysfs.c, uverbs_main.c */
    read_file("class/infiniband_verbs/abi_version", b, sizeof b);
    ck_assert_str_eq(b, "6\n");
    read_file("class/infiniband_verbs/uverbs1/ibdev", b, sizeof b);
    ck_assert_str_eq(b, "mlx5_1\n");
    read_file("class/infiniband_verbs/uverbs1/dev", b, sizeof b);
    ck_assert_str_eq(b, "231:193\n");
    read_file("class/infiniband_verbs/uverbs1/abi_version", b, sizeof b);
    ck_assert_str_eq(b, "1\n");
    read_file("class/infiniband/mlx5_0/node_type", b, sizeof b);
    ck_assert_str_eq(b, "1: CA\n");
    read_file("class/infiniband/mlx5_0/device/modalias", b, sizeof b);
    ck_assert(!strncmp(b, "pci:v000015B3d0000101Bsv", 24));
    read_file("class/infiniband/mlx5_0/ports/1/gids/3", b, sizeof b);
    ck_assert_str_eq(b, "0000:0000:0000:0000:0000:ffff:7f00:0001\n");
    read_file("class/infiniband/mlx5_1/ports/1/gids/3", b, sizeof b);
    ck_assert_str_eq(b, "0000:0000:0000:0000:0000:ffff:7f00:0002\n");
    read_file("class/infiniband/mlx5_0/ports/1/gid_attrs/types/3", b, sizeof b);
    ck_assert_str_eq(b, "RoCE v2\n");
    read_file("class/infiniband/mlx5_0/ports/1/gid_attrs/types/2", b, sizeof b);
    ck_assert_str_eq(b, "IB/RoCE v1\n");
    read_file("class/infiniband/mlx5_0/ports/1/link_layer", b, sizeof b);
    ck_assert_str_eq(b, "Ethernet\n");
    read_file("class/infiniband/mlx5_0/ports/1/pkeys/0", b, sizeof b);
    ck_assert_str_eq(b, "0xffff\n");
    read_file("class/infiniband/mlx5_0/ports/1/hw_counters/rx_write_requests", b, sizeof b);
    ck_assert_str_eq(b, "0\n");
    /* stat of the char device: S_IFCHR, st_rdev = sysfs dev (rc: util/open_cdev.c) */
    struct stat st;
    ck_assert_int_eq(stat("/dev/infiniband/uverbs1", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
    ck_assert_uint_eq(major(st.st_rdev), 231);
    ck_assert_uint_eq(minor(st.st_rdev), 193);
    ck_assert_int_eq(stat("/dev/infiniband/uverbs7", &st), -1);
    ck_assert_int_eq(errno, ENOENT);
    int fd = tk_open(1);
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_uint_eq(minor(st.st_rdev), 193);
    close(fd);
    ck_assert_int_eq(tk_open(5), -1);
    ck_assert_int_eq(errno, ENOENT);
    /* NETLINK_RDMA refused so libibverbs falls back to sysfs */
    ck_assert_int_eq(socket(AF_NETLINK, SOCK_RAW, 20), -1);
    ck_assert_int_eq(errno, EPROTONOSUPPORT);
}
END_TEST

START_TEST(configure_devices)
{
    /* bad specs -> EINVAL */
    ck_assert_int_eq(mlxd_emu_configure("mlx5_0"), -EINVAL);
    ck_assert_int_eq(mlxd_emu_configure("mlx5_0:1.2.3"), -EINVAL);
    ck_assert_int_eq(mlxd_emu_configure("mlx5_0:127.0.0.1:mtu=1000"), -EINVAL);
    ck_assert_int_eq(mlxd_emu_configure("a:127.0.0.1,a:127.0.0.2"), -EINVAL);
    ck_assert_int_eq(mlxd_emu_configure("mlx5_7:127.0.0.9:mtu=4096:link=down,x:127.0.0.10"), 0);
    ck_assert_int_eq(mlxd_emu_num_devices(), 2);
    char b[256];
    read_file("class/infiniband_verbs/uverbs0/ibdev", b, sizeof b);
    ck_assert_str_eq(b, "mlx5_7\n");
    read_file("class/infiniband/mlx5_7/ports/1/state", b, sizeof b);
    ck_assert_str_eq(b, "1: DOWN\n");
    int fd = tk_open(0);
    struct mlx5_ib_alloc_ucontext_resp r;
    ck_assert_int_eq(tk_get_context(fd, &r), 0);
    struct ib_uverbs_query_port_resp_ex pr;
    struct tk_ioc c;
    query_port_ioc(&c, &pr);
    ck_assert_int_eq(tk_run(fd, &c), 0);
    ck_assert_uint_eq(pr.legacy_resp.active_mtu, 5);       /* 4096 */
    ck_assert_uint_eq(pr.legacy_resp.state, 1);
    /* reconfiguring with a file open -> EBUSY */
    ck_assert_int_eq(mlxd_emu_configure(NULL), -EBUSY);
    close(fd);
    ck_assert_int_eq(mlxd_emu_configure(NULL), 0);
    read_file("class/infiniband_verbs/uverbs0/ibdev", b, sizeof b);
    ck_assert_str_eq(b, "mlx5_0\n");
}
END_TEST

START_TEST(gid_queries)
{
    tk_unique_devices();
    struct tk_env e;
    tk_env_open(&e, 0);
    struct ib_uverbs_gid_entry ent[8];
    uint64_t n = 0;
    struct tk_ioc c;
    tk_ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE);
    tk_const(&c, UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, sizeof ent[0]);
    tk_out(&c, UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, ent, sizeof ent);
    tk_out(&c, UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &n, 8);
    ck_assert_int_eq(tk_run(e.fd, &c), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(ent[3].gid_type, IB_UVERBS_GID_TYPE_ROCE_V2);
    ck_assert_uint_eq(ent[3].gid_index, 3);
    const uint8_t v4[16] = { 0,0,0,0,0,0,0,0,0,0,0xff,0xff,127,tk_net_hi,tk_net_lo,1 };
    ck_assert_mem_eq(ent[3].gid, v4, 16);
    struct ib_uverbs_gid_entry one;
    tk_ioc_init(&c, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_ENTRY);
    tk_const(&c, UVERBS_ATTR_QUERY_GID_ENTRY_PORT, 1);
    tk_const(&c, UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, 2);
    tk_const(&c, UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0);
    tk_out(&c, UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, &one, sizeof one);
    ck_assert_int_eq(tk_run(e.fd, &c), 0);
    ck_assert_uint_eq(one.gid_type, IB_UVERBS_GID_TYPE_ROCE_V1);
    c.attrs[1].data = 9;                     /* unpopulated -> ENODATA (rdma_get_gid_attr) */
    ck_assert_int_eq(tk_run(e.fd, &c), -ENODATA);
    c.attrs[1].data = 2;
    c.attrs[0].data = 2;                     /* bad port -> EINVAL */
    ck_assert_int_eq(tk_run(e.fd, &c), -EINVAL);
    close(e.fd);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * a program that uses only system calls and uapi headers, preloaded */
static int run_prog(const char *prog, const char *extra_env, char *out, size_t outlen)
{
    char cmd[2048];
    /* verify_asan_link_order=0: under `make sanitize` the preloaded library carries the ASan
     * runtime, which then does not come first; harmless otherwise */
    snprintf(cmd, sizeof cmd, "env %s ASAN_OPTIONS=verify_asan_link_order=0 LD_PRELOAD=%s/lib/libmlx5direct-emu.so %s/tests/progs/%s 2>&1",
             extra_env ? extra_env : "", mlxd_test_build_dir(), mlxd_test_build_dir(), prog);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(syscalls_only_program)
{
    char out[8192];
    char prog[600];
    snprintf(prog, sizeof prog, "%s/tests/progs/emu_syscalls", mlxd_test_build_dir());
    ck_assert_msg(access(prog, X_OK) == 0, "%s not built (make %s)", prog, prog);
    tk_unique_devices();
    int rc = run_prog("emu_syscalls", "SYSFS_PATH=", out, sizeof out);
    ck_assert_msg(rc == 0, "emu_syscalls exited %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "emu_syscalls: ok device mlx5_0"), "%s", out);
    ck_assert_msg(strstr(out, "qp "), "%s", out);
    /* device 1 by name; and a fault injected from the environment makes it fail cleanly */
    rc = run_prog("emu_syscalls mlx5_1", NULL, out, sizeof out);
    ck_assert_msg(rc == 0 && strstr(out, "ok device mlx5_1"), "%d %s", rc, out);
    rc = run_prog("emu_syscalls", "MLXD_EMU_FAIL=QP_CREATE:1:ENOMEM", out, sizeof out);
    ck_assert_msg(rc != 0 && strstr(out, "QP_CREATE"), "%d %s", rc, out);
    ck_assert_msg(strstr(out, strerror(ENOMEM)), "%s", out);
}
END_TEST

/* MLXD_EMU_CONFIG: the same entries from a file, comments allowed */
START_TEST(config_file)
{
    tk_unique_devices();
    char path[] = "/tmp/mlxd-emu-cfg-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    char text[256];
    int n = snprintf(text, sizeof text, "# test devices\nfilebased_0:127.%u.%u.5:mtu=2048\n", tk_net_hi, tk_net_lo);
    ck_assert_int_eq(write(fd, text, (size_t)n), n);
    close(fd);
    char env[400], out[4096];
    snprintf(env, sizeof env, "-u MLXD_EMU_DEVICES -u SYSFS_PATH MLXD_EMU_CONFIG=%s", path);
    int rc = run_prog("emu_syscalls filebased_0", env, out, sizeof out);
    unlink(path);
    ck_assert_msg(rc == 0 && strstr(out, "ok device filebased_0 uverbs0"), "%d %s", rc, out);
}
END_TEST

/* A hostile program controls every byte: random headers and attributes (pointers either
 * invalid or into a scratch buffer) must give an errno, never a crash, and leave nothing
 * behind once the file is closed. */
static unsigned rnd(unsigned *s) { *s = *s * 1103515245u + 12345u; return *s >> 8; }

START_TEST(fuzz_ioctl_and_write)
{
    tk_unique_devices();
    struct tk_env e;
    tk_env_open(&e, 0);
    static uint8_t scratch[8192] __attribute__((aligned(64)));
    static const uint16_t objs[][2] = {
        { 0, 0 }, { 0, 2 }, { 0, 3 }, { 0, 4 }, { 0, 5 }, { 0, 6 }, { 1, 0 }, { 3, 0 }, { 3, 1 },
        { 4, 0 }, { 4, 1 }, { 7, 1 }, { 7, 4 }, { 16, 0 }, { 0x1008, 0x1000 }, { 0x1008, 0x1001 },
    };
    unsigned seed = 12345;
#define RND() rnd(&seed)
    for (int it = 0; it < 3000; it++) {
        struct tk_ioc c;
        unsigned k = RND() % (sizeof objs / sizeof objs[0]);
        tk_ioc_init(&c, objs[k][0], objs[k][1]);
        unsigned na = RND() % 12;
        for (unsigned a = 0; a < na; a++) {
            uint16_t id = (uint16_t)(RND() % 4 == 0 ? 0x1000 + RND() % 6 : RND() % 16);
            uint16_t len = (uint16_t)(RND() % 3 == 0 ? RND() % 80 : (RND() % 2 ? 8 : 0));
            uint64_t data;
            switch (RND() % 4) {
            case 0: data = RND() % 4096; break;                               /* invalid */
            case 1: data = (uintptr_t)scratch + (RND() % 4096); break;        /* valid */
            case 2: data = RND() % 8; break;                                  /* small value */
            default: { uint64_t hi = RND(); data = (hi << 32) | RND(); break; }   /* garbage */
            }
            if (len > 8 && (data < 4096 || data > (uintptr_t)scratch + sizeof scratch)) data = RND() % 4096;
            struct ib_uverbs_attr *at = tk_attr(&c, id, len, data);
            at->flags = (uint16_t)(RND() % 4);
            at->attr_data.reserved = (uint16_t)(RND() % 8 == 0);
        }
        int r = tk_run(e.fd, &c);
        ck_assert_int_le(r, 0);
        (void)r;
        /* the legacy path with random commands and lengths */
        uint32_t hdr[8];
        for (int w = 0; w < 8; w++) hdr[w] = RND();
        hdr[0] = (RND() % 2 ? 0x80000000u : 0) | (RND() % 30);
        ((uint16_t *)hdr)[2] = (uint16_t)(RND() % 16);
        uint64_t resp = RND() % 2 ? (uintptr_t)scratch : RND() % 4096;
        memcpy(&hdr[2], &resp, 8);
        memcpy(scratch + 4096, hdr, sizeof hdr);
        ssize_t wr2 = write(e.fd, scratch + 4096, (RND() % 2) ? ((uint16_t *)hdr)[2] * 4u : RND() % 64);
        ck_assert(wr2 < 0 || wr2 >= 8);
    }
#undef RND
    close(e.fd);
    struct mlxd_emu_counts cnt = tk_counts();
    ck_assert_uint_eq(cnt.files + cnt.pd + cnt.mr + cnt.cq + cnt.qp + cnt.uar + cnt.mappings, 0);
}
END_TEST

Suite *emu_kernel_suite(void)
{
    Suite *s = suite_create("emu_kernel");
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, tk_unique_devices, NULL);
    tcase_add_test(tc, decode_good_query_port);
    tcase_add_test(tc, decode_bad_header);
    tcase_add_test(tc, decode_attrs);
    tcase_add_test(tc, decode_handles_written_back);
    tcase_add_test(tc, context_rules);
    tcase_add_test(tc, write_abi);
    tcase_add_test(tc, invoke_write_rules);
    suite_add_tcase(s, tc);
    tc = tcase_create("objects");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, tk_unique_devices, NULL);
    tcase_add_test(tc, lifecycle_pd_mr);
    tcase_add_test(tc, lifecycle_dmabuf_mr);
    tcase_add_test(tc, lifecycle_cq);
    tcase_add_test(tc, lifecycle_qp);
    tcase_add_test(tc, lifecycle_uar_static);
    tcase_add_test(tc, mmap_uar_and_clock);
    tcase_add_test(tc, close_releases_everything);
    tcase_add_test(tc, exit_releases_everything);
    suite_add_tcase(s, tc);
    tc = tcase_create("events_faults");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, tk_unique_devices, NULL);
    tcase_add_test(tc, events_async_port);
    tcase_add_test(tc, events_comp_channel_fd);
    tcase_add_test(tc, faults);
    suite_add_tcase(s, tc);
    tc = tcase_create("boundary");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sysfs_tree);
    tcase_add_test(tc, configure_devices);
    tcase_add_test(tc, gid_queries);
    tcase_add_test(tc, syscalls_only_program);
    tcase_add_test(tc, config_file);
    tcase_add_test(tc, fuzz_ioctl_and_write);
    suite_add_tcase(s, tc);
    return s;
}
