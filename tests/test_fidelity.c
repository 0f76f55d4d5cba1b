/* Fidelity to a real kernel and ConnectX (issue 15): the driver on the emulator, where the two
 * could share a misunderstanding.  Each test asserts what the hardware or the kernel does, from
 * the source named with it (kernel drivers/infiniband, rdma-core providers/mlx5, the IB spec).
 * The emulator is linked into the runner and answers at the system-call boundary. */
#include <arpa/inet.h>
#include <check.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "barrier.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_capture.h"
#include "mlxd_capture_classify.h"
#include "mlxd_roce.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
#include "util.h"

#define BUF 65536

struct side {
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_region *reg;
    uint8_t *buf;
};

static void side_open(struct side *s, const char *dev, uint32_t recv_sge)
{
    memset(s, 0, sizeof *s);
    ck_assert_msg(mlxd_open(dev, NULL, &s->nic) == 0, "open %s: %s", dev, mlxd_errmsg());
    s->buf = aligned_alloc(4096, BUF);
    memset(s->buf, 0, BUF);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE };
    ck_assert_msg(mlxd_region_register(s->nic, s->buf, BUF, &ro, &s->reg) == 0, "%s", mlxd_errmsg());
    struct mlxd_cq_opts co = { .sz = sizeof co };
    ck_assert_msg(mlxd_cq_create(s->nic, 64, &co, &s->cq) == 0, "%s", mlxd_errmsg());
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 16, .recv_depth = 16,
                               .max_recv_sge = recv_sge };
    ck_assert_msg(mlxd_qp_create(s->cq, &qo, &s->qp) == 0, "%s", mlxd_errmsg());
}

/* Two sides, mlx5_0 and mlx5_1 of the current configuration, RC, connected. */
static void pair_on(struct side *a, struct side *b, uint32_t recv_sge)
{
    side_open(a, "mlx5_0", recv_sge);
    side_open(b, "mlx5_1", recv_sge);
    struct mlxd_endpoint ea, eb;
    ck_assert_int_eq(mlxd_qp_endpoint(a->qp, &ea), 0);
    ck_assert_int_eq(mlxd_qp_endpoint(b->qp, &eb), 0);
    struct mlxd_connect_opts co = { .sz = sizeof co, .peer_access = MLXD_ACCESS_REMOTE_WRITE };
    ck_assert_msg(mlxd_qp_connect(a->qp, &eb, &co) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_qp_connect(b->qp, &ea, &co) == 0, "%s", mlxd_errmsg());
}

static void pair(struct side *a, struct side *b, uint32_t recv_sge)
{
    mlxd_test_private_devices();
    pair_on(a, b, recv_sge);
}

static void side_close(struct side *s)
{
    ck_assert_int_eq(mlxd_close(s->nic), 0);
    free(s->buf);
}

/* Polls cq for up to ms milliseconds; returns the number of completions (0 or 1). */
static int poll_for(struct mlxd_cq *cq, struct mlxd_completion *wc, int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int n = mlxd_cq_poll(cq, wc, 1);
        ck_assert_int_ge(n, 0);
        if (n) return n;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms) return 0;
        usleep(100);
    }
}

/* ---- 1. zero-length receive scatter entries ------------------------------------------------ */

/* To a ConnectX a data segment of byte_count 0 means 2 GiB (kernel hw/mlx5/odp.c); libmlx5
 * leaves zero-length entries out (rdma-core providers/mlx5/qp.c mlx5_post_recv).  A receive of
 * {0 bytes at buf, 4096 bytes at buf + 4096} then takes a SEND into buf + 4096 (the emulator's NIC
 * reads byte_count 0 as 2 GiB: a driver writing the entry would put it at buf[0]). */
START_TEST(zero_length_receive_entry_skipped)
{
    struct side a, b;
    pair(&a, &b, 2);
    struct mlxd_local lb = mlxd_region_local(b.reg);
    struct mlxd_local sg[2] = { { lb.addr, 0, lb.lkey }, { lb.addr + 4096, 4096, lb.lkey } };
    struct mlxd_recv r = { .wr_id = 7, .num_local = 2, .local = sg };
    ck_assert_int_eq(mlxd_qp_receive(b.qp, &r, 1), 1);
    /* the WQE holds the 4096-byte entry first, then the terminator (MLX5_INVALID_LKEY) */
    const uint8_t *w = (const uint8_t *)(uintptr_t)b.qp->rq;
    uint32_t bc, lkey;
    memcpy(&bc, w, 4);
    memcpy(&lkey, w + 4 + 16, 4);
    ck_assert_uint_eq(be32toh(bc), 4096);
    ck_assert_uint_eq(be32toh(lkey), MLXD_INVALID_LKEY);
    for (int i = 0; i < 300; i++) a.buf[i] = (uint8_t)(i + 1);
    struct mlxd_local la = mlxd_region_local(a.reg);
    la.length = 300;
    struct mlxd_entry e = { .wr_id = 1, .op = MLXD_OP_SEND, .flags = MLXD_SIGNALED, .num_local = 1, .local = la };
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(a.qp), 0);
    struct mlxd_completion wc;
    ck_assert_int_eq(poll_for(b.cq, &wc, 5000), 1);
    ck_assert_uint_eq(wc.status, 0);
    ck_assert_uint_eq(wc.byte_len, 300);
    ck_assert_uint_eq(wc.wr_id, 7);
    ck_assert_mem_eq(b.buf + 4096, a.buf, 300);
    ck_assert_uint_eq(b.buf[0], 0);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* A receive entry of 2^31 bytes or more cannot be written (byte_count has 31 bits; bit 31 marks
 * inline data in send WQEs): refused as a send entry is, nothing posted. */
START_TEST(receive_length_2g_refused)
{
    struct side a, b;
    pair(&a, &b, 1);
    struct mlxd_local lb = mlxd_region_local(b.reg);
    lb.length = 0x80000000u;
    struct mlxd_recv r = { .wr_id = 7, .num_local = 1, .local = &lb };
    ck_assert_int_eq(mlxd_qp_receive(b.qp, &r, 1), -EINVAL);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "2^31"));
    ck_assert_int_eq(mlxd_qp_recv_room(b.qp), 16);
    lb.length = 0x7fffffffu;
    ck_assert_int_eq(mlxd_qp_receive(b.qp, &r, 1), 1);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* ---- 2. a send runs only when the UAR doorbell is rung ------------------------------------- */

/* A driver variant that stops at the doorbell record: mlxd_qp_ring (mlx5/post.c) without the UAR
 * doorbell / BlueFlame write.  Built here, from the driver's own objects (driver.h). */
static void ring_record_only(struct mlxd_qp *qp)
{
    mlxd_wmb();
    mlxd_shared_store(&qp->dbrec[MLXD_SND_DBR], htobe32(qp->sq_pi & 0xffff));
}

/* A ConnectX starts a send queue when its UAR doorbell register is written; the record alone
 * starts nothing.  With the record-only variant no WRITE lands and no completion comes; the
 * driver's own mlxd_qp_ring then rings the UAR and the WRITE runs. */
START_TEST(record_only_sends_nothing)
{
    struct side a, b;
    pair(&a, &b, 1);
    memset(a.buf, 0x6b, 200);
    struct mlxd_local la = mlxd_region_local(a.reg);
    la.length = 200;
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    struct mlxd_entry e = { .wr_id = 9, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = 1,
                            .local = la, .remote = { rb.addr + 100, 0, rb.rkey, 0 } };
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), 0);
    ring_record_only(a.qp);
    struct mlxd_completion wc;
    ck_assert_int_eq(poll_for(a.cq, &wc, 500), 0);
    struct mlxd_emu_nic_stats st = { .sz = sizeof st };
    ck_assert_int_eq(mlxd_emu_nic_stats(0, &st), 0);
    ck_assert_uint_eq(st.tx_pkts, 0);
    ck_assert_uint_eq(b.buf[100], 0);
    ck_assert_int_eq(mlxd_qp_ring(a.qp), 0);
    ck_assert_int_eq(poll_for(a.cq, &wc, 5000), 1);
    ck_assert_uint_eq(wc.status, 0);
    ck_assert_uint_eq(wc.wr_id, 9);
    ck_assert_uint_eq(b.buf[299], 0x6b);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* ---- 3. BlueFlame on aarch64: one 64-byte store per block --------------------------------- */

/* A ConnectX takes a BlueFlame write only as a whole 64-byte write-combined burst (kernel
 * hw/mlx5/mem.c tests write-combining that way); libmlx5 writes each block with one 64-byte NEON
 * store (rdma-core util/mmio.h mmio_memcpy_x64).  mlx5/post.c cross-compiled for aarch64 must do
 * the same: one ST1 of four 128-bit registers, where eight 8-byte STRs were written before. */
START_TEST(blueflame_aarch64_one_store)
{
    char obj[] = "/tmp/mlxd-post-aarch64-XXXXXX";
    int fd = mkstemp(obj);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && aarch64-linux-gnu-gcc -D_GNU_SOURCE -Iabi -Iuverbs -Imlx5 -std=gnu11 -O2 "
             "-c -o %s mlx5/post.c 2>&1 && aarch64-linux-gnu-objdump -d --disassemble=mlxd_qp_ring %s 2>&1",
             mlxd_test_src_dir(), obj, obj);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    static char out[1 << 18];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    int st = pclose(f);
    unlink(obj);
    ck_assert_msg(st == 0, "aarch64-linux-gnu-gcc/objdump failed (install gcc-aarch64-linux-gnu and "
                  "binutils-aarch64-linux-gnu, as make cross-aarch64 needs):\n%.800s", out);
    ck_assert_msg(strstr(out, "<mlxd_qp_ring>:"), "no mlxd_qp_ring in the aarch64 object:\n%.800s", out);
    /* ST1 (multiple structures, four registers, 64 bytes) */
    ck_assert_msg(strstr(out, "st1\t{v16.2d-v19.2d}, ["), "mlxd_qp_ring has no 64-byte ST1:\n%.4000s", out);
}
END_TEST

/* ---- 4. sub-function devices; 5. InfiniBand ports and the RoCE service level ---------------- */

/* Private addresses (as mlxd_test_private_devices) with device options of this test. */
static void configure(const char *opts0)
{
    unsigned a = 20 + (unsigned)getpid() % 200, b = 1 + ((unsigned)getpid() / 200) % 250;
    char spec[256];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1%s,mlx5_1:127.%u.%u.2", a, b, opts0, a, b);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
    setenv("SYSFS_PATH", mlxd_emu_sysfs_path(), 1);
}

/* An SF is an auxiliary device bound to mlx5_core.sf (kernel mlx5/core/sf/dev/driver.c), not to
 * mlx5_core: discovery accepts it, and it works as any mlx5 port. */
START_TEST(sub_function_opens)
{
    configure(":sf=1");
    char path[1024], link[1024];
    snprintf(path, sizeof path, "%s/class/infiniband/mlx5_0/device/driver", mlxd_emu_sysfs_path());
    ssize_t n = readlink(path, link, sizeof link - 1);
    ck_assert_int_gt(n, 0);
    link[n] = 0;
    ck_assert_str_eq(strrchr(link, '/') + 1, "mlx5_core.sf");
    struct side a, b;
    pair_on(&a, &b, 1);
    memset(a.buf, 0x33, 64);
    struct mlxd_local la = mlxd_region_local(a.reg);
    la.length = 64;
    struct mlxd_remote rb = mlxd_region_remote(b.reg);
    struct mlxd_entry e = { .wr_id = 3, .op = MLXD_OP_WRITE, .flags = MLXD_SIGNALED, .num_local = 1,
                            .local = la, .remote = { rb.addr, 0, rb.rkey, 0 } };
    ck_assert_int_eq(mlxd_qp_post(a.qp, &e), 0);
    ck_assert_int_eq(mlxd_qp_ring(a.qp), 0);
    struct mlxd_completion wc;
    ck_assert_int_eq(poll_for(a.cq, &wc, 5000), 1);
    ck_assert_uint_eq(wc.status, 0);
    ck_assert_uint_eq(b.buf[63], 0x33);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* An InfiniBand port (the emulator's link_layer=ib: QUERY_PORT link layer 1, a LID, GID 0 of type
 * IB) is refused at open with the reason: peers are reached by GID over RoCE v2 only. */
START_TEST(infiniband_port_refused)
{
    configure(":link_layer=ib");
    struct mlxd_nic *nic = (struct mlxd_nic *)1;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), -EPROTONOSUPPORT);
    ck_assert_ptr_eq(nic, (struct mlxd_nic *)1);
    ck_assert_msg(strstr(mlxd_errmsg(), "mlx5_0: port 1 is InfiniBand"), "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_emu_live_total(), 0);               /* everything undone */
    ck_assert_int_eq(mlxd_open("mlx5_1", NULL, &nic), 0);      /* the Ethernet port next to it */
    ck_assert_int_eq(mlxd_close(nic), 0);
}
END_TEST

/* On RoCE the SL is the 3-bit 802.1p priority (kernel hw/mlx5/qp.c mlx5_set_path keeps sl & 7):
 * sl 8 is refused before anything changes; sl 7 connects. */
START_TEST(roce_sl_above_7_refused)
{
    mlxd_test_private_devices();
    struct side a, b;
    side_open(&a, "mlx5_0", 1);
    side_open(&b, "mlx5_1", 1);
    struct mlxd_endpoint eb;
    ck_assert_int_eq(mlxd_qp_endpoint(b.qp, &eb), 0);
    struct mlxd_connect_opts co = { .sz = sizeof co, .sl = 8 };
    ck_assert_int_eq(mlxd_qp_connect(a.qp, &eb, &co), -EINVAL);
    ck_assert_msg(strstr(mlxd_errmsg(), "sl 8"), "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_qp_state(a.qp), 0);
    co.sl = 7;
    ck_assert_int_eq(mlxd_qp_connect(a.qp, &eb, &co), 0);
    ck_assert_int_eq(mlxd_qp_state(a.qp), 3);
    side_close(&a);
    side_close(&b);
}
END_TEST

/* ---- 6. locked memory ----------------------------------------------------------------------- */

/* CAP_IPC_LOCK in the effective set on or off (capget/capset; fork mode keeps it to this test).
 * Returns whether it is in the permitted set (only then can it be turned on). */
static bool ipc_lock_effective(bool on)
{
    struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct d[2];
    ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
    uint32_t bit = 1u << (CAP_IPC_LOCK % 32);
    bool permitted = d[CAP_IPC_LOCK / 32].permitted & bit;
    if (on && !permitted) return false;
    if (on) d[CAP_IPC_LOCK / 32].effective |= bit; else d[CAP_IPC_LOCK / 32].effective &= ~bit;
    ck_assert_int_eq(syscall(SYS_capset, &h, d), 0);
    return permitted;
}

/* The kernel counts every page a verbs buffer pins in the process's pinned_vm, over all devices,
 * against RLIMIT_MEMLOCK, and refuses with ENOMEM past it unless the process has CAP_IPC_LOCK
 * (core/umem.c ib_umem_get).  Under a 64 KiB limit (16 pages of 4 KiB):
 *   a 4 MiB registration fails with ENOMEM, and the message says what was counted;
 *   CQ ring 1 page + its doorbell page, QP buffer 1 page + its doorbell page: 4 pages;
 *   a region of 8 pages on mlx5_1 and then one of 5 pages on mlx5_0 (4 + 8 + 5 > 16) fails;
 *   with CAP_IPC_LOCK the 4 MiB registration succeeds. */
START_TEST(memlock_limit_enforced)
{
    ck_assert_int_eq(sysconf(_SC_PAGESIZE), 4096);
    mlxd_test_private_devices();
    struct rlimit rl = { 65536, 65536 };
    ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
    bool can_lock = ipc_lock_effective(false);
    struct mlxd_nic *n0, *n1;
    ck_assert_msg(mlxd_open("mlx5_0", NULL, &n0) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_open("mlx5_1", NULL, &n1) == 0, "%s", mlxd_errmsg());
    size_t big = 4u << 20;
    uint8_t *buf = aligned_alloc(4096, big);
    memset(buf, 0, big);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE };
    struct mlxd_region *r = NULL;
    ck_assert_int_eq(mlxd_region_register(n0, buf, big, &ro, &r), -ENOMEM);
    ck_assert_msg(strstr(mlxd_errmsg(), "REG_MR of 4194304 bytes (Cannot allocate memory): it would pin 1024 more "
                         "pages of 4096 bytes, and RLIMIT_MEMLOCK allows 16 pages (65536 bytes) per process; "
                         "mlx5direct has 0 pinned already (0 in regions, 0 in CQ and QP rings, 0 doorbell-record pages)"),
                  "%s", mlxd_errmsg());
    struct mlxd_cq *cq;
    struct mlxd_cq_opts co = { .sz = sizeof co };
    ck_assert_msg(mlxd_cq_create(n0, 64, &co, &cq) == 0, "%s", mlxd_errmsg());        /* 64 x 64 B */
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 8, .recv_depth = 8 };
    struct mlxd_qp *qp;
    ck_assert_msg(mlxd_qp_create(cq, &qo, &qp) == 0, "%s", mlxd_errmsg());            /* < 4 KiB */
    struct mlxd_region *r1;
    ck_assert_msg(mlxd_region_register(n1, buf, 8 * 4096, &ro, &r1) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_region_register(n0, buf + 8 * 4096, 5 * 4096, &ro, &r), -ENOMEM);
    ck_assert_msg(strstr(mlxd_errmsg(), "it would pin 5 more pages of 4096 bytes, and RLIMIT_MEMLOCK allows 16 "
                         "pages (65536 bytes) per process; mlx5direct has 12 pinned already (8 in regions, 2 in CQ "
                         "and QP rings, 2 doorbell-record pages)"), "%s", mlxd_errmsg());
    /* 4 pages fit exactly: 16 */
    ck_assert_msg(mlxd_region_register(n0, buf + 8 * 4096, 4 * 4096, &ro, &r) == 0, "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_region_deregister(r1), 0);
    ck_assert_msg(mlxd_region_register(n0, buf + 16 * 4096, 8 * 4096, &ro, &r1) == 0, "%s", mlxd_errmsg());
    if (can_lock) {            /* CAP_IPC_LOCK: exempt (capable() in ib_umem_get) */
        ipc_lock_effective(true);
        ck_assert_msg(mlxd_region_register(n1, buf, big, &ro, &r) == 0, "%s", mlxd_errmsg());
        /* a refusal for another reason says nothing of the limit */
        mlxd_emu_fail_method("REG_MR", 1, ENOMEM);
        ck_assert_int_eq(mlxd_region_register(n1, buf, big, &ro, &r), -ENOMEM);
        ck_assert_msg(!strstr(mlxd_errmsg(), "RLIMIT_MEMLOCK"), "%s", mlxd_errmsg());
    } else {
        fprintf(stderr, "memlock_limit_enforced: no CAP_IPC_LOCK in the permitted set, exemption not tested\n");
    }
    ck_assert_int_eq(mlxd_close(n0), 0);
    ck_assert_int_eq(mlxd_close(n1), 0);
    free(buf);
}
END_TEST

/* ---- 9. replaying a capture that is not sensor traffic -------------------------------------- */

/* Writes a classic pcap (LINKTYPE_RAW: each record an IPv4 packet) of a stream from QP 0x11 on
 * 127.0.0.2 to QP 0x22 on 127.0.0.1, PSN 100..109, built with the project's RoCE v2 codec:
 * transport RC or UC; SEND Only / SEND Only with immediate (64 bytes each) alternating, or RDMA
 * WRITE Only (writes); on RC each request acknowledged (AETH, MSN) by the responder. */
static void write_stream_capture(const char *path, uint8_t transport, bool writes)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint32_t gh[6] = { 0xa1b2c3d4u, 2u | 4u << 16, 0, 0, 65535, 101 };   /* v2.4, snaplen, DLT_RAW */
    ck_assert_uint_eq(fwrite(gh, 4, 6, f), 6);
    uint8_t payload[64], pkt[256];
    for (int i = 0; i < 64; i++) payload[i] = (uint8_t)i;
    for (uint32_t k = 0; k < 10; k++) {
        for (int dir = 0; dir < (transport == MLXD_ROCE_TRANSPORT_RC ? 2 : 1); dir++) {
            struct mlxd_roce_pkt p = { .src_ip = dir ? 0x7f000001 : 0x7f000002, .dst_ip = dir ? 0x7f000002 : 0x7f000001,
                                       .src_port = 49152, .dest_qp = dir ? 0x22 : 0x11, .psn = 100 + k };
            ssize_t n;
            if (!dir) {
                p.opcode = transport | (writes ? MLXD_ROCE_OP_WRITE_ONLY
                                       : k % 2 ? MLXD_ROCE_OP_SEND_ONLY_IMM : MLXD_ROCE_OP_SEND_ONLY);
                p.ackreq = transport == MLXD_ROCE_TRANSPORT_RC;
                p.imm = htonl(0x01020300 + k);
                p.reth_va = 0x10000 + 64 * k;
                p.reth_rkey = 0x1234;
                p.reth_len = sizeof payload;
                n = mlxd_roce_build(pkt, sizeof pkt, &p, payload, sizeof payload);
            } else {
                p.opcode = MLXD_ROCE_OP_ACKNOWLEDGE;
                p.aeth_syndrome = 0x1f;
                p.aeth_msn = k + 1;
                n = mlxd_roce_build(pkt, sizeof pkt, &p, NULL, 0);
            }
            ck_assert_msg(n > 0, "%s", mlxd_errmsg());
            uint32_t rh[4] = { 1000 + k, 0, (uint32_t)n, (uint32_t)n };
            ck_assert_uint_eq(fwrite(rh, 4, 4, f), 4);
            ck_assert_uint_eq(fwrite(pkt, 1, (size_t)n, f), (size_t)n);
        }
    }
    ck_assert_int_eq(fclose(f), 0);
}
static void write_rc_send_capture(const char *path) { write_stream_capture(path, MLXD_ROCE_TRANSPORT_RC, false); }

/* Runs mlxd-capture --replay path (then removes path; MLXD_KEEP=1 keeps it); returns the exit
 * status and the output (stdout and stderr) in out. */
static int run_replay(const char *path, char *out, size_t cap)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s/bin/mlxd-capture --replay %s 2>&1", mlxd_test_build_dir(), path);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    if (!getenv("MLXD_KEEP")) unlink(path); else fprintf(stderr, "kept %s\n", path);
    ck_assert_msg(WIFEXITED(st), "status %d:\n%s", st, out);
    return WEXITSTATUS(st);
}

/* run_replay of a capture made by write_stream_capture. */
static int replay_tool(uint8_t transport, bool writes, char *out, size_t cap)
{
    char path[] = "/tmp/mlxd-stream-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_stream_capture(path, transport, writes);
    return run_replay(path, out, cap);
}

/* What the capture holds, recognised: transport RC, two flows, opcodes with counts, PSN ranges;
 * the Holoscan Sensor Bridge fixture is recognised as frame traffic. */
START_TEST(capture_classified)
{
    char path[] = "/tmp/mlxd-rc-send-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_rc_send_capture(path);
    struct mlxd_capture *c;
    ck_assert_msg(mlxd_capture_load(path, &c) == 0, "%s", mlxd_errmsg());
    unlink(path);
    struct mlxd_capture_kind k;
    ck_assert_int_eq(mlxd_capture_classify(c, &k), 0);
    ck_assert(!k.hsb);
    ck_assert_uint_eq(k.transports, 1);               /* RC */
    ck_assert_uint_eq(k.nflows, 2);
    ck_assert_uint_eq(k.flows[0].dest_qp, 0x11);
    ck_assert_uint_eq(k.flows[0].opcodes[MLXD_ROCE_OP_SEND_ONLY], 5);
    ck_assert_uint_eq(k.flows[0].opcodes[MLXD_ROCE_OP_SEND_ONLY_IMM], 5);
    ck_assert_uint_eq(k.flows[0].first_psn, 100);
    ck_assert_uint_eq(k.flows[0].last_psn, 109);
    ck_assert_uint_eq(k.flows[1].dest_qp, 0x22);
    ck_assert_uint_eq(k.flows[1].opcodes[MLXD_ROCE_OP_ACKNOWLEDGE], 10);
    char line[1024];
    mlxd_capture_describe(&k, line, sizeof line);
    ck_assert_str_eq(line, "RoCE v2 RC: QP 0x000011 (127.0.0.2 -> 127.0.0.1) RC SEND Only x5, RC SEND Only with "
                     "Immediate x5, PSN 0x000064..0x00006d; QP 0x000022 (127.0.0.1 -> 127.0.0.2) RC Acknowledge "
                     "x10, PSN 0x000064..0x00006d");
    mlxd_capture_free(c);
    ck_assert_msg(mlxd_capture_load(mlxd_test_path("fixtures/roce-pcaps/hsb_small_3000_embedded.pcap"), &c) == 0,
                  "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_capture_classify(c, &k), 0);
    ck_assert(k.hsb);
    ck_assert_uint_eq(k.transports, 2);               /* UC */
    mlxd_capture_free(c);
}
END_TEST

/* mlxd-capture --replay of an RC SEND / SEND with immediate stream with its ACKs: replayed into
 * an RC QP set up for it (rq_psn from the capture, one receive per message); every message
 * arrives: 10 messages of 64 bytes, 5 with immediate. */
START_TEST(replay_rc_send_conversation)
{
    char out[8192];
    int rc = replay_tool(MLXD_ROCE_TRANSPORT_RC, false, out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "replayed as a SEND conversation into an RC QP 0x"), "%s", out);
    ck_assert_msg(strstr(out, "(captured QP 0x000011, 10 request packets): 10 of 10 messages arrived, 640 bytes, "
                         "5 with immediate, 0 error completions\nOK: every message of the capture arrived"), "%s", out);
}
END_TEST

/* The same as UC, without ACKs. */
START_TEST(replay_uc_send_conversation)
{
    char out[8192];
    int rc = replay_tool(MLXD_ROCE_TRANSPORT_UC, false, out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "RoCE v2 UC: QP 0x000011 (127.0.0.2 -> 127.0.0.1) UC SEND Only x5, UC SEND Only with "
                         "Immediate x5, PSN 0x000064..0x00006d\nreplayed as a SEND conversation into a UC QP 0x"),
                  "%s", out);
    ck_assert_msg(strstr(out, "10 of 10 messages arrived, 640 bytes, 5 with immediate"), "%s", out);
}
END_TEST

/* An RC RDMA WRITE stream of another conversation (its rkeys and addresses are the capture's
 * peer's): neither sensor frames nor SENDs a QP can receive: refused with one line naming what
 * it holds and why, exit 1. */
START_TEST(replay_refuses_rc_write_capture)
{
    char out[8192];
    int rc = replay_tool(MLXD_ROCE_TRANSPORT_RC, true, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "not one line:\n%s", out);
    ck_assert_msg(strstr(out, ": not replayed: not Holoscan Sensor Bridge traffic (UC RDMA WRITE frames into a "
                         "receiver's pages) but RoCE v2 RC: QP 0x000011 (127.0.0.2 -> 127.0.0.1) RC RDMA WRITE Only x10"),
                  "%s", out);
    ck_assert_msg(strstr(out, "RC Acknowledge x10"), "%s", out);
    ck_assert_msg(strstr(out, "QP 0x000011 carries RC RDMA WRITE Only, which a replay into a receiving QP cannot take"),
                  "%s", out);
}
END_TEST

/* A capture that is not Ethernet or IP, native InfiniBand in ERF records (link type 197), is
 * refused by mlxd-capture --replay with its link type named, exit 1. */
START_TEST(replay_refuses_erf_link_type)
{
    char path[] = "/tmp/mlxd-erf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    uint32_t gh[6] = { 0xa1b2c3d4u, 2u | 4u << 16, 0, 0, 65535, 197 };      /* LINKTYPE_ERF */
    uint8_t rec[16 + 32] = { 0 };
    uint32_t rh[4] = { 1, 0, 32, 32 };
    memcpy(rec, rh, 16);
    ck_assert_int_eq(write(fd, gh, sizeof gh), (ssize_t)sizeof gh);
    ck_assert_int_eq(write(fd, rec, sizeof rec), (ssize_t)sizeof rec);
    close(fd);
    char out[4096];
    int rc = run_replay(path, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, ": link type 197 (ERF) is not Ethernet, raw IPv4, loopback or Linux cooked"), "%s", out);
}
END_TEST

Suite *fidelity_suite(void)
{
    Suite *s = suite_create("fidelity");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, zero_length_receive_entry_skipped);
    tcase_add_test(tc, receive_length_2g_refused);
    tcase_add_test(tc, record_only_sends_nothing);
    tcase_add_test(tc, blueflame_aarch64_one_store);
    tcase_add_test(tc, sub_function_opens);
    tcase_add_test(tc, infiniband_port_refused);
    tcase_add_test(tc, roce_sl_above_7_refused);
    tcase_add_test(tc, memlock_limit_enforced);
    tcase_add_test(tc, capture_classified);
    tcase_add_test(tc, replay_rc_send_conversation);
    tcase_add_test(tc, replay_uc_send_conversation);
    tcase_add_test(tc, replay_refuses_rc_write_capture);
    tcase_add_test(tc, replay_refuses_erf_link_type);
    suite_add_tcase(s, tc);
    return s;
}
