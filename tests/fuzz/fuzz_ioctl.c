/* libFuzzer target: the emulator's RDMA_VERBS_IOCTL decoder (emu/kernel/uverbs_ioctl.c emu_ioctl and every
 * method handler behind it, emu/kernel/write.c through INVOKE_WRITE), as a hostile program drives it:
 * it controls every byte of the header and the attribute array and every pointer in them.
 *
 * Each input is: [ctl u8] then up to 4 calls, each [len u16 LE][len bytes].  A call's bytes are
 * copied to the start of a 16 KiB page-aligned buffer B and passed to ioctl() as they are (the
 * header's length, num_attrs, object and method ids, driver id and reserved fields unchanged).
 * Any 8-byte word (at any byte offset) that points into this process's mapped memory outside B
 * is redirected into a
 * PROT_NONE area (see defuse()).  Attribute data whose top 16 bits are 0xFFFF is rewritten to B + (low 14
 * bits), so that valid in/out buffers are reachable; every other pointer stays raw, as hostile
 * (unmapped, kernel-half, misaligned, wrapping) as the fuzzer makes it.
 * ctl bit 0: do GET_CONTEXT first (most methods need a ucontext); bit 1: keep B's tail from the
 * previous call (handles written back by one call feed the next); bit 2: make the header
 * consistent (length = header + num_attrs attributes that fit the call's bytes, reserved fields 0,
 * driver id mlx5, object id mod 32 and method id mod 16: the kernel's objects and methods are
 * small numbers), so that an empty corpus gets past the header checks at once.
 *
 * Every input runs on a fresh fd of /dev/infiniband/uverbs0; afterwards the fd and any fd a call
 * made (async/completion event fds: fds that were not open before the input) are closed.  A second NIC opened by the real driver keeps the
 * device's engine running.
 * Oracle (besides ASan/UBSan): a call returns 0 or -1 with errno in 1..4095, never crashes; after
 * the close the emulator's live counts (objects, fds, mappings) are exactly what they were before
 * the input: a hostile program cannot make the emulated kernel leak. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/mlx5-abi.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_uverbs.h"
#include "seeds.h"

#define BSZ 16384u

static uint8_t *B;
/* G: 64 KiB mapped PROT_NONE: what a stray pointer is redirected to (the emulator gets EFAULT). */
static uint8_t *G;
#define GSZ 65536u
static struct mlxd_nic *anchor;
static struct mlxd_emu_counts base;

/* ---- seeds (MLXD_FUZZ_MKSEEDS=<dir>): a few well-formed calls the fuzzer mutates */
static uint8_t sbuf[1024];
static size_t slen;

static void s_call(uint16_t obj, uint16_t meth, const struct ib_uverbs_attr *a, unsigned n)
{
    struct ib_uverbs_ioctl_hdr h = { .length = (uint16_t)(sizeof h + n * sizeof *a),
                                     .object_id = obj, .method_id = meth, .num_attrs = (uint16_t)n,
                                     .driver_id = RDMA_DRIVER_MLX5 };
    uint16_t l = h.length;
    memcpy(sbuf + slen, &l, 2);
    memcpy(sbuf + slen + 2, &h, sizeof h);
    if (n) memcpy(sbuf + slen + 2 + sizeof h, a, n * sizeof *a);
    slen += 2 + l;
}

static void mkseeds(void)
{
    const char *dir = getenv("MLXD_FUZZ_MKSEEDS");
    if (!dir) return;
    const uint64_t P = 0xffff000000000400ull;   /* B + 0x400 */
    unsigned n = 0;
    struct ib_uverbs_attr qp[2] = {
        { .attr_id = UVERBS_ATTR_QUERY_PORT_PORT_NUM, .len = 1, .flags = UVERBS_ATTR_F_MANDATORY, .data = 1 },
        { .attr_id = UVERBS_ATTR_QUERY_PORT_RESP, .len = sizeof(struct ib_uverbs_query_port_resp_ex),
          .flags = UVERBS_ATTR_F_MANDATORY, .data = P } };
    struct ib_uverbs_attr pd[3] = {
        { .attr_id = UVERBS_ATTR_WRITE_CMD, .len = 4, .flags = UVERBS_ATTR_F_MANDATORY, .data = 3 },
        { .attr_id = UVERBS_ATTR_CORE_IN, .len = 8, .data = 0 },
        { .attr_id = UVERBS_ATTR_CORE_OUT, .len = 4, .data = P } };
    struct ib_uverbs_attr dpd[1] = {
        { .attr_id = UVERBS_ATTR_DESTROY_PD_HANDLE, .flags = UVERBS_ATTR_F_MANDATORY, .data = 0 } };
    struct ib_uverbs_attr as[1] = {
        { .attr_id = UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, .flags = UVERBS_ATTR_F_MANDATORY } };
    struct ib_uverbs_attr gt[4] = {
        { .attr_id = UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, .len = 8, .data = sizeof(struct ib_uverbs_gid_entry) },
        { .attr_id = UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, .len = 8, .data = 0 },
        { .attr_id = UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, .len = 4 * sizeof(struct ib_uverbs_gid_entry), .data = P },
        { .attr_id = UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, .len = 8, .data = P + 0x800 } };
    slen = 1; sbuf[0] = 1; s_call(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, qp, 2);
    seed_write(dir, n++, sbuf, slen);
    slen = 1; sbuf[0] = 3; s_call(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, pd, 3);
    s_call(UVERBS_OBJECT_PD, UVERBS_METHOD_PD_DESTROY, dpd, 1);
    seed_write(dir, n++, sbuf, slen);
    slen = 1; sbuf[0] = 1; s_call(UVERBS_OBJECT_ASYNC_EVENT, UVERBS_METHOD_ASYNC_EVENT_ALLOC, as, 1);
    seed_write(dir, n++, sbuf, slen);
    slen = 1; sbuf[0] = 1; s_call(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_GID_TABLE, gt, 4);
    seed_write(dir, n++, sbuf, slen);
    slen = 1; sbuf[0] = 0; s_call(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT, NULL, 0);
    s_call(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, pd, 3);
    seed_write(dir, n++, sbuf, slen);
    fprintf(stderr, "%u seeds written to %s\n", n, dir);
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    mkseeds();
    setenv("MLXD_EMU_SPIN_US", "0", 1);
    unsigned v = (unsigned)getpid();
    char spec[64];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1", 1 + v % 250, (v / 250) % 250);
    if (mlxd_emu_configure(spec) || mlxd_open("mlx5_0", NULL, &anchor)) {
        fprintf(stderr, "fuzz_ioctl: %s\n", mlxd_errmsg());
        abort();
    }
    /* B sits between two PROT_NONE guard pages: an output the emulator writes at B's end with a
     * hostile length gets EFAULT instead of landing in whatever mapping follows B (the emulator
     * shares this address space, so that could be its own heap) */
    uint8_t *area = mmap(NULL, BSZ + 2 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    G = mmap(NULL, GSZ, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED || G == MAP_FAILED) abort();
    B = area + 4096;
    if (mprotect(B, BSZ, PROT_READ | PROT_WRITE)) abort();
    base.sz = sizeof base;
    mlxd_emu_get_counts(&base);
    return 0;
}


static bool mapped(uint64_t a)
{
    uint8_t b;
    struct iovec l = { &b, 1 }, r = { (void *)(uintptr_t)a, 1 };
    return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1;
}

/* A hostile program may pass pointers into its own memory; here "its own memory" is also the
 * fuzzer's, and the emulator would write CQEs, handles and responses there (as the kernel
 * would).  So every 8-byte word of the call that points into mapped memory outside B (attribute
 * data, and the rings/doorbell addresses inside driver data) is redirected into G.  Unmapped,
 * kernel-half and non-canonical values stay as they are. */
static void defuse(size_t len)
{
    /* every byte offset: driver data sits at any offset of B, so its pointers can be unaligned */
    for (size_t o = 0; o + 8 <= len; o++) {
        uint64_t w;
        memcpy(&w, B + o, 8);
        if (w < 0x10000 || w >= 0x800000000000ull) continue;
        if (w >= (uintptr_t)B && w < (uintptr_t)B + BSZ) continue;
        if (w >= (uintptr_t)G && w < (uintptr_t)G + GSZ) continue;
        if (!mapped(w)) continue;
        w = (uint64_t)(uintptr_t)G + (w & (GSZ - 1));
        memcpy(B + o, &w, 8);
    }
}

static void call(int fd, const uint8_t *d, size_t len, bool keep, bool fix_header)
{
    if (len > BSZ) len = BSZ;
    if (!keep) memset(B, 0, BSZ);
    memcpy(B, d, len);
    defuse(keep ? BSZ : len);
    if (fix_header && len < sizeof(struct ib_uverbs_ioctl_hdr))
        len = sizeof(struct ib_uverbs_ioctl_hdr);
    if (len >= sizeof(struct ib_uverbs_ioctl_hdr)) {
        struct ib_uverbs_ioctl_hdr *h = (void *)B;
        size_t n = h->num_attrs;
        if (n > (len - sizeof *h) / sizeof(struct ib_uverbs_attr))
            n = (len - sizeof *h) / sizeof(struct ib_uverbs_attr);
        if (fix_header) {
            h->num_attrs = (uint16_t)n;
            h->length = (uint16_t)(sizeof *h + n * sizeof(struct ib_uverbs_attr));
            h->reserved1 = 0;
            h->reserved2 = 0;
            h->driver_id = RDMA_DRIVER_MLX5;
            h->object_id %= 32;
            h->method_id %= 16;
        }
        for (size_t i = 0; i < n; i++) {
            struct ib_uverbs_attr *a = &h->attrs[i];
            if ((a->data >> 48) == 0xffff)
                a->data = (uint64_t)(uintptr_t)(B + (a->data & (BSZ - 1)));
        }
    }
    errno = 0;
    int r = ioctl(fd, RDMA_VERBS_IOCTL, B);
    if (r != 0 && (r != -1 || errno < 1 || errno > 4095)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    /* fds open before the input (libFuzzer's, the anchor NIC's): only the others are closed */
    int lowfd = dup(0);
    if (lowfd < 0) abort();
    close(lowfd);
    static bool was_open[64];
    for (int f = 0; f < 64; f++) was_open[f] = fcntl(lowfd + f, F_GETFD) >= 0;
    int fd = open("/dev/infiniband/uverbs0", O_RDWR | O_CLOEXEC);
    if (fd < 0) abort();
    uint8_t ctl = data[0];
    if (ctl & 1) {
        /* GET_CONTEXT as libmlx5 sends it: a v2 request with dynamic UARs, cqe_version 1 */
        static struct mlx5_ib_alloc_ucontext_req_v2 req = { .total_num_bfregs = 2,
            .lib_caps = MLX5_LIB_CAP_4K_UAR | MLX5_LIB_CAP_DYN_UAR, .max_cqe_version = 1 };
        static struct mlx5_ib_alloc_ucontext_resp resp;
        struct { struct ib_uverbs_ioctl_hdr h; struct ib_uverbs_attr a[2]; } g = {
            .h = { .length = sizeof g, .object_id = UVERBS_OBJECT_DEVICE,
                   .method_id = UVERBS_METHOD_GET_CONTEXT, .num_attrs = 2,
                   .driver_id = RDMA_DRIVER_MLX5 },
            .a = { { .attr_id = UVERBS_ATTR_UHW_IN, .len = sizeof req,
                     .data = (uint64_t)(uintptr_t)&req },
                   { .attr_id = UVERBS_ATTR_UHW_OUT, .len = sizeof resp,
                     .data = (uint64_t)(uintptr_t)&resp } } };
        if (ioctl(fd, RDMA_VERBS_IOCTL, &g)) {
            fprintf(stderr, "fuzz_ioctl: GET_CONTEXT: %d\n", errno);
            abort();
        }
    }
    size_t off = 1;
    for (int k = 0; k < 4 && off + 2 <= size; k++) {
        size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
        off += 2;
        if (len > size - off) len = size - off;
        call(fd, data + off, len, (ctl & 2) && k, ctl & 4);
        off += len;
    }
    for (int f = 0; f < 64; f++)
        if (!was_open[f]) close(lowfd + f);
    struct mlxd_emu_counts c = { .sz = sizeof c };
    mlxd_emu_get_counts(&c);
    if (c.files != base.files || c.contexts != base.contexts || c.event_fds != base.event_fds ||
        c.mappings != base.mappings || c.pd != base.pd || c.mr != base.mr || c.cq != base.cq ||
        c.qp != base.qp || c.uar != base.uar || c.comp_channel != base.comp_channel ||
        c.async_event != base.async_event) {
        fprintf(stderr, "fuzz_ioctl: leak: files %u/%u ctx %u/%u evfd %u/%u maps %u/%u pd %u/%u "
                "mr %u/%u cq %u/%u qp %u/%u uar %u/%u comp %u/%u async %u/%u\n",
                c.files, base.files, c.contexts, base.contexts, c.event_fds, base.event_fds,
                c.mappings, base.mappings, c.pd, base.pd, c.mr, base.mr, c.cq, base.cq, c.qp,
                base.qp, c.uar, base.uar, c.comp_channel, base.comp_channel, c.async_event,
                base.async_event);
        abort();
    }
    return 0;
}
