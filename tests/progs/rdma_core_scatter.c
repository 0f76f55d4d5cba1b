/* rdma_core_scatter: scatter-to-CQE as libmlx5 (rdma-core) sees it, on the emulator (run
 * preloaded; tests/test_rdma_core.c).  One process, two devices (mlx5_1 sends to mlx5_0), an RC or
 * UC QP pair made with libibverbs; SEND with immediate of 1..100 bytes, each into a receive
 * buffer pre-filled with 0xee.  Checks every work completion (status, opcode, byte_len, imm,
 * wr_id), the received bytes and the bytes around them, and, through mlx5dv, the CQE the NIC
 * wrote: with MLX5_QP_FLAG_SCATTER_CQE (libmlx5's default) a message of up to 32 bytes (64-byte
 * CQEs) or 64 bytes (128-byte CQEs) must be in the CQE with format 1 (bytes 0..31 of the 64-byte
 * CQE) or 2 (first half of the 128-byte slot), larger ones format 0; with MLX5_SCATTER_TO_CQE=0
 * always format 0 (mlx5_ib configure_responder_scat_cqe; mlx5dv.h MLX5_INLINE_SCATTER_32/64).
 *
 * usage: rdma_core_scatter rc|uc 64|128 [noscatter]      prints "OK ..." and exits 0 */
#include <arpa/inet.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

struct side {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *scq, *rcq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    unsigned char *buf;
    union ibv_gid gid;
};

static void setup(struct side *s, struct ibv_device *d, enum ibv_qp_type type)
{
    if (!(s->ctx = ibv_open_device(d))) FAIL("open %s", ibv_get_device_name(d));
    if (!(s->pd = ibv_alloc_pd(s->ctx))) FAIL("pd");
    s->scq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
    s->rcq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
    if (!s->scq || !s->rcq) FAIL("cq");
    s->buf = aligned_alloc(4096, 4096);
    memset(s->buf, 0xee, 4096);
    if (!(s->mr = ibv_reg_mr(s->pd, s->buf, 4096, IBV_ACCESS_LOCAL_WRITE))) FAIL("mr");
    struct ibv_qp_init_attr a = {
        .send_cq = s->scq, .recv_cq = s->rcq, .qp_type = type, .sq_sig_all = 1,
        .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
    };
    if (!(s->qp = ibv_create_qp(s->pd, &a))) FAIL("qp");
    if (ibv_query_gid(s->ctx, 1, 3, &s->gid)) FAIL("gid");
    struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1};
    if (ibv_modify_qp(s->qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        FAIL("INIT");
}

static void connect_to(struct side *s, const struct side *r, enum ibv_qp_type type)
{
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = r->qp->qp_num,
        .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
        .ah_attr = {.is_global = 1, .port_num = 1,
                    .grh = {.dgid = r->gid, .sgid_index = 3, .hop_limit = 1}},
    };
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    if (ibv_modify_qp(s->qp, &m, mask)) FAIL("RTR");
    m.qp_state = IBV_QPS_RTS;
    /* 4.096 us << 20 = 4.3 s: a responder engine starved of CPU on a loaded machine costs
     * time, never TRANSPORT_RETRY_EXC (seen once with 14, i.e. 8 x 67 ms) */
    m.timeout = 20; m.retry_cnt = 7; m.rnr_retry = 7; m.max_rd_atomic = 1;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (type == IBV_QPT_RC) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    if (ibv_modify_qp(s->qp, &m, mask)) FAIL("RTS");
}

static struct ibv_wc wait_one(struct ibv_cq *cq)
{
    struct ibv_wc wc;
    int n;
    for (long spins = 0; (n = ibv_poll_cq(cq, 1, &wc)) == 0; spins++)
        if (spins > 2000000000L) FAIL("no completion");
    if (n < 0) FAIL("poll %d", n);
    return wc;
}

int main(int argc, char **argv)
{
    if (argc < 3) FAIL("usage: rdma_core_scatter rc|uc 64|128 [noscatter]");
    enum ibv_qp_type type = !strcmp(argv[1], "uc") ? IBV_QPT_UC : IBV_QPT_RC;
    unsigned cqe_size = (unsigned)atoi(argv[2]);
    int scatter = !(argc > 3 && !strcmp(argv[3], "noscatter"));
    /* libmlx5 reads both at CQ/QP creation */
    setenv("MLX5_CQE_SIZE", argv[2], 1);
    setenv("MLX5_SCATTER_TO_CQE", scatter ? "1" : "0", 1);
    unsigned limit = !scatter ? 0 : cqe_size == 128 ? 64 : 32;

    int num = 0;
    struct ibv_device **l = ibv_get_device_list(&num);
    if (!l || num < 2) FAIL("need two devices, have %d", num);
    struct side a, b;   /* a = mlx5_0 receives, b = mlx5_1 sends */
    setup(&a, l[0], type);
    setup(&b, l[1], type);
    connect_to(&a, &b, type);
    connect_to(&b, &a, type);

    struct mlx5dv_cq dcq;
    struct mlx5dv_obj o = {.cq = {.in = a.rcq, .out = &dcq}};
    if (mlx5dv_init_obj(&o, MLX5DV_OBJ_CQ)) FAIL("mlx5dv_init_obj");
    if (dcq.cqe_size != cqe_size) FAIL("CQE size %u, asked %u", dcq.cqe_size, cqe_size);

    unsigned fmt_count[4] = {0};
    for (unsigned n = 1; n <= 100; n++) {
        memset(a.buf, 0xee, 4096);
        struct ibv_sge rs = {(uintptr_t)a.buf + 8, 200, a.mr->lkey};
        struct ibv_recv_wr rw = {.wr_id = 1000 + n, .sg_list = &rs, .num_sge = 1}, *bad_r;
        if (ibv_post_recv(a.qp, &rw, &bad_r)) FAIL("post_recv");
        for (unsigned i = 0; i < n; i++) b.buf[i] = (unsigned char)(i * 7 + n);
        struct ibv_sge ss = {(uintptr_t)b.buf, n, b.mr->lkey};
        struct ibv_send_wr sw = {.wr_id = n, .sg_list = &ss, .num_sge = 1,
                                 .opcode = IBV_WR_SEND_WITH_IMM, .imm_data = htonl(0xabc00000u | n)},
                           *bad_s;
        if (ibv_post_send(b.qp, &sw, &bad_s)) FAIL("post_send");
        struct ibv_wc ws = wait_one(b.scq), w = wait_one(a.rcq);
        if (ws.status || ws.wr_id != n || ws.opcode != IBV_WC_SEND)
            FAIL("n=%u: send wc status %d wr_id %llu opcode %d", n, ws.status,
                 (unsigned long long)ws.wr_id, ws.opcode);
        if (w.status || w.wr_id != 1000 + n || w.opcode != IBV_WC_RECV || w.byte_len != n ||
            !(w.wc_flags & IBV_WC_WITH_IMM) || ntohl(w.imm_data) != (0xabc00000u | n))
            FAIL("n=%u: recv wc status %d wr_id %llu opcode %d byte_len %u imm 0x%x", n, w.status,
                 (unsigned long long)w.wr_id, w.opcode, w.byte_len, ntohl(w.imm_data));
        for (unsigned i = 0; i < n; i++)
            if (a.buf[8 + i] != (unsigned char)(i * 7 + n)) FAIL("n=%u: byte %u wrong", n, i);
        if (a.buf[7] != 0xee || a.buf[8 + n] != 0xee) FAIL("n=%u: bytes around the message changed", n);
        /* the CQE of receive n: index n - 1 modulo the ring (libmlx5 makes 128 entries for 64) */
        unsigned idx = (n - 1) & (dcq.cqe_cnt - 1);
        const unsigned char *slot = (const unsigned char *)dcq.buf + (size_t)idx * dcq.cqe_size;
        const unsigned char *cqe = slot + (dcq.cqe_size == 128 ? 64 : 0);
        unsigned fmt = (cqe[63] >> 2) & 3;
        unsigned want = n <= limit ? (cqe_size == 128 ? 2 : 1) : 0;
        if (fmt != want) FAIL("n=%u: CQE format %u, want %u", n, fmt, want);
        if (fmt) {
            const unsigned char *data = fmt == 1 ? cqe : slot;
            for (unsigned i = 0; i < n; i++)
                if (data[i] != (unsigned char)(i * 7 + n)) FAIL("n=%u: CQE data byte %u wrong", n, i);
        }
        fmt_count[fmt]++;
    }
    printf("OK %s cqe %u scatter %s: 100 SENDs, CQE formats 0:%u 1:%u 2:%u\n", argv[1], cqe_size,
           scatter ? "on" : "off", fmt_count[0], fmt_count[1], fmt_count[2]);
    return 0;
}
