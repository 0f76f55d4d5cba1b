/* nic_req.c: the requester: send WQEs -> packets, RC acknowledgement, retransmission, RNR.
 *
 * WQE format: rdma-core providers/mlx5/qp.c _mlx5_post_send (mlx5dv.h mlx5_wqe_ctrl_seg,
 * mlx5_wqe_raddr_seg, mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg).  Transport rules: IB spec
 * vol. 1 chapter 9.7 (RC requester: PSNs, ACK/NAK handling, retry and RNR counters; UC: no
 * acknowledgement, completion once sent).
 *
 * Messages live in a ring (head: oldest not completed, send: being sent, tail: next free) that
 * holds the resolved gather list of each WQE, so that a retransmission re-reads the process's
 * memory from the same places (go-back-N from the oldest unacknowledged message). */
#include <string.h>
#include "nic.h"

#define M(q, i) (&(q)->msgs[(i) % (q)->cap])

static const uint32_t rnr_us[32] = {   /* IB spec vol. 1 table 45 (RNR NAK timer field) */
    655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680,
    491520,
};

static bool is_rc(const struct nic_qp *q) { return q->qp->type == 2; }

static uint64_t timeout_ns(const struct nic_qp *q)
{
    uint8_t t = q->qp->attr.timeout;     /* 4.096 us * 2^timeout; 0 = infinite (IB 11.2.4.2) */
    if (!t) return 0;
    if (t > 31) t = 31;
    return 4096ull << t;
}

/* RC send window in PSNs: NIC_RC_WINDOW, or fewer packets than would fill half of a receive
 * buffer as large as ours (the peer is assumed configured alike), at least 16. */
static uint32_t window(const struct nic_qp *q)
{
    uint32_t pkt = (q->mtu ? q->mtu : 1024) + 128, w = q->nd->rcvbuf / 2 / pkt;
    return w < 16 ? 16 : w > NIC_RC_WINDOW ? NIC_RC_WINDOW : w;
}

/* ---- packets ----------------------------------------------------------------------------- */
uint32_t nic_pkt_hdrs(struct nic_qp *q, uint8_t *buf, const struct mlxd_roce_pkt *p,
                      uint32_t payload_len)
{
    struct mlxd_roce_pkt h = *p;
    h.src_ip = ntohl(q->nd->self.sin_addr.s_addr);
    h.src_port = ntohs(q->nd->self.sin_port);
    h.dst_ip = ntohl(q->peer.sin_addr.s_addr);
    h.dst_port = ntohs(q->peer.sin_port);
    h.tos = q->qp->attr.traffic_class;
    h.ttl = q->qp->attr.hop_limit ? q->qp->attr.hop_limit : 64;
    h.dest_qp = q->qp->attr.dest_qp_num;
    ssize_t hl = mlxd_roce_build_hdrs(buf, NIC_PKT_MAX, &h, payload_len);
    return hl > 0 ? (uint32_t)hl : 0;
}

static void pkt_send_to(struct nic_qp *q, struct nic_txslot *s, uint32_t hl, uint32_t payload_len,
                        const struct sockaddr_in *to)
{
    uint32_t pad = (4 - (payload_len & 3)) & 3;
    memset(s->buf + hl + payload_len, 0, pad);
    uint32_t total = hl + payload_len + pad + MLXD_ROCE_ICRC_LEN;
    mlxd_roce_icrc_fill(s->buf, total);
    wire_tx_commit(q->nd, s, total, to);
}

void nic_pkt_send(struct nic_qp *q, struct nic_txslot *s, uint32_t hl, uint32_t payload_len)
{
    pkt_send_to(q, s, hl, payload_len, &q->peer);
}

static struct nic_txslot *slot(struct nic_qp *q)
{
    struct nic_txslot *s = wire_tx_slot(q->nd);
    if (!s) { wire_tx_flush(q->nd); s = wire_tx_slot(q->nd); }
    return s;
}

/* Copies len bytes at offset off of a gather list into dst. */
static void gather(const struct nic_msg *m, uint32_t off, uint8_t *dst, uint32_t len)
{
    for (unsigned i = 0; i < m->nsge && len; i++) {
        if (off >= m->sge[i].len) { off -= m->sge[i].len; continue; }
        uint32_t n = m->sge[i].len - off;
        if (n > len) n = len;
        memcpy(dst, m->sge[i].ptr + off, n);
        dst += n; len -= n; off = 0;
    }
}

/* ---- completions -------------------------------------------------------------------------- */
static void complete(struct nic_qp *q, struct nic_msg *m, uint8_t synd, uint8_t vendor)
{
    struct emu_qp *qp = q->qp;
    bool sig = synd || qp->sq_sig_all || (m->fm_ce_se & 0x08);
    if (!sig || !qp->send_cq) return;
    struct nic_cqe c = {
        .opcode = synd ? NIC_CQE_REQ_ERR : NIC_CQE_REQ, .syndrome = synd, .vendor = vendor,
        .wqe_opcode = m->opcode, .wqe_counter = m->wqe_idx, .byte_cnt = m->len,
        .qpn = qp->qpn, .uidx = qp->uidx == 0xffffff ? 0 : qp->uidx,
    };
    if (nic_cqe_write(q->nd, qp->send_cq, &c) && synd != NIC_SYND_WR_FLUSH)
        nic_qp_to_err(q, NIC_EV_QP_FATAL);
}

/* The message at head failed: error CQE, QP to ERR, everything else flushed. */
static void fail_head(struct nic_qp *q, uint8_t synd, uint8_t vendor)
{
    if (q->head == q->tail) return;
    struct nic_msg *m = M(q, q->head);
    q->head++;
    if (q->send < q->head) { q->send = q->head; q->send_pkt = 0; }
    if (q->sent_hi < q->head) q->sent_hi = q->head;
    complete(q, m, synd, vendor);
    q->deadline_ns = 0;
    if (nic_qp_is_ud(q) && q->qp->state != NIC_QPS_ERR) {
        /* UD: a send error stops the send queue only (SQE; IB spec 10.3.1, "Send Queue
         * Error"); the receive queue keeps working, SQE -> RTS resumes */
        q->qp->state = NIC_QPS_SQE;
        nic_req_flush(q);
        return;
    }
    nic_qp_to_err(q, -1);
}

static bool outstanding(const struct nic_qp *q) { return q->head != q->sent_hi; }

/* After packets went out: how far the QP has ever sent (sent_hi, psn_hi). */
static void note_sent(struct nic_qp *q)
{
    uint32_t hi = q->send + (q->send_pkt ? 1u : 0u);
    if ((int32_t)(hi - q->sent_hi) > 0) q->sent_hi = hi;
    if (mlxd_roce_psn_diff(q->next_psn, q->psn_hi) > 0) q->psn_hi = q->next_psn;
}

/* Completes the messages fully acknowledged by an ACK of `psn` (RC): any sent, also those a
 * retransmission (send rewound by go_back) has not reached again; it then goes on after them. */
static void ack_through(struct nic_qp *q, uint32_t psn)
{
    bool progress = false;
    while (q->head != q->sent_hi) {
        struct nic_msg *m = M(q, q->head);
        if (m->opcode != NIC_OP_NOP && m->opcode != NIC_OP_UMR) {
            if (nic_op_has_response(m->opcode)) {
                if (!m->read_done) break;
            } else if (mlxd_roce_psn_diff(psn, m->first_psn + m->npsn - 1) < 0) {
                break;
            }
        }
        q->head++;
        complete(q, m, 0, 0);
        progress = true;
        if (q->qp->state == NIC_QPS_ERR) return;
    }
    if (progress && (int32_t)(q->head - q->send) > 0) {
        q->send = q->head;
        q->send_pkt = 0;
        q->next_psn = q->head != q->sent_hi ? M(q, q->head)->first_psn : q->psn_hi;
    }
    if (progress) {
        q->retries_left = q->qp->attr.retry_cnt;
        q->rnr_left = q->qp->attr.rnr_retry;
        q->deadline_ns = outstanding(q) ? q->nd->now_ns + timeout_ns(q) : 0;
        if (!timeout_ns(q)) q->deadline_ns = 0;
    }
}

static void go_back(struct nic_qp *q)
{
    if (!outstanding(q)) return;
    q->send = q->head;
    q->send_pkt = 0;
    q->next_psn = M(q, q->head)->first_psn;
    q->retransmits++;
    q->nd->st.retransmits++;
}

/* ---- WQE fetch ---------------------------------------------------------------------------- */
static volatile uint8_t *sq_at(struct emu_qp *qp, uint32_t wqebb, uint32_t off)
{
    uint32_t bytes = qp->sq_wqe_cnt * 64;
    return qp->sq + (((size_t)wqebb * 64 + off) % bytes);
}

static int add_sge(struct nic_msg *m, uint8_t *ptr, uint32_t len)
{
    if (!len) return 0;
    if (m->nsge > NIC_MAX_SGE) return -1;
    memset(&m->sge[m->nsge], 0, sizeof m->sge[0]);
    m->sge[m->nsge].ptr = ptr;
    m->sge[m->nsge].len = len;
    m->nsge++;
    return 0;
}

/* Resolves one data segment to process memory: lkey, PD, bounds and (for READ targets) local
 * write access are checked; 0 or a syndrome. */
static uint8_t resolve(struct nic_qp *q, uint32_t lkey, uint64_t addr, uint32_t len,
                       bool write, uint8_t **out)
{
    struct emu_device *dev = nic_qp_dev(q);
    struct emu_mr *mr = dev->mr_by_key ? dev->mr_by_key(dev, lkey) : NULL;
    if (!mr || mr->lkey != lkey || (q->qp->pd && mr->pd != q->qp->pd)) return NIC_SYND_LOCAL_PROT;
    if (write && !(mr->access & NIC_ACC_LOCAL_WRITE)) return NIC_SYND_LOCAL_PROT;
    if (addr < mr->iova || len > mr->length || addr - mr->iova > mr->length - len)
        return NIC_SYND_LOCAL_PROT;
    *out = (uint8_t *)(uintptr_t)(mr->addr + (addr - mr->iova));
    return 0;
}

static void fetch(struct nic_qp *q, struct nic_msg *m)
{
    struct emu_qp *qp = q->qp;
    volatile uint8_t *c = sq_at(qp, q->sq_ci, 0);
    uint8_t ctrl[16];
    __builtin_memcpy(ctrl, (const void *)c, 16);
    uint32_t opmod = rd_be32(ctrl), qpn_ds = rd_be32(ctrl + 4);
    memset(m, 0, offsetof(struct nic_msg, sge));
    m->opcode = (uint8_t)opmod;
    m->wqe_idx = q->sq_ci;
    m->fm_ce_se = ctrl[11];
    memcpy(&m->imm, ctrl + 12, 4);
    uint32_t ds = qpn_ds & 0x3f;
    uint32_t wqebbs = ds ? (ds + 3) / 4 : 1;
    q->sq_ci = (uint16_t)(q->sq_ci + wqebbs);
    if (!ds) { m->err_synd = NIC_SYND_LOCAL_QP_OP; return; }
    /* fm (bits 7:5) is one fence mode: 0 none, 1 initiator small fence, 2 fence, 3 strong
     * ordering, 4 small fence and fence (kernel include/linux/mlx5/qp.h MLX5_FENCE_MODE_*; mlx5dv.h
     * names 1 and 4).  5 to 7 name none: a local QP operation error, as a malformed WQE gets. */
    if ((m->fm_ce_se >> 5) > 4) { m->err_synd = NIC_SYND_LOCAL_QP_OP; return; }
    uint32_t off = 16, end = ds * 16;
    bool atomic = nic_op_is_atomic(m->opcode), resp = nic_op_has_response(m->opcode);
    bool rdma = m->opcode == NIC_OP_RDMA_WRITE || m->opcode == NIC_OP_RDMA_WRITE_IMM ||
                m->opcode == NIC_OP_RDMA_READ || atomic;
    switch (m->opcode) {
    case NIC_OP_NOP: return;
    case NIC_OP_RDMA_WRITE: case NIC_OP_RDMA_WRITE_IMM: case NIC_OP_SEND: case NIC_OP_SEND_IMM:
        break;
    case NIC_OP_RDMA_READ: case NIC_OP_ATOMIC_CS: case NIC_OP_ATOMIC_FA: case NIC_OP_SEND_INV:
        if (is_rc(q)) break;
        /* UC has no READ, atomics or SEND with Invalidate (IB spec table 38) */
        m->err_synd = NIC_SYND_LOCAL_QP_OP;
        return;
    case NIC_OP_UMR: {          /* memory window bind / invalidation (nic_mw.c), run in order */
        uint8_t b[144] = { 0 };
        if (nic_qp_is_ud(q) || end < 128) { m->err_synd = NIC_SYND_LOCAL_QP_OP; return; }
        for (uint32_t i = 0; i + 16 < end && i < sizeof b; i++) b[i] = *sq_at(qp, m->wqe_idx, 16 + i);
        nic_mw_parse(m, b, end);
        return;
    }
    default:
        m->err_synd = NIC_SYND_LOCAL_QP_OP;
        return;
    }
    if (nic_qp_is_ud(q)) {     /* SEND only, the datagram segment after the control segment */
        if (rdma || end < 64) { m->err_synd = NIC_SYND_LOCAL_QP_OP; return; }
        uint8_t av[48];
        for (int i = 0; i < 48; i++) av[i] = *sq_at(qp, m->wqe_idx, 16 + (uint32_t)i);
        nic_ud_parse_av(m, av);
        off = 64;
    }
    if (rdma) {
        if (end < 32) { m->err_synd = NIC_SYND_LOCAL_QP_OP; return; }
        uint8_t r[16];
        for (int i = 0; i < 16; i++) r[i] = *sq_at(qp, m->wqe_idx, 16 + (uint32_t)i);
        m->raddr = rd_be64(r);
        m->rkey = rd_be32(r + 8);
        off = 32;
    }
    if (atomic) {       /* atomic segment (mlx5dv.h struct mlx5_wqe_atomic_seg): swap_add, compare */
        if (end < 48) { m->err_synd = NIC_SYND_LOCAL_QP_OP; return; }
        uint8_t a[16];
        for (int i = 0; i < 16; i++) a[i] = *sq_at(qp, m->wqe_idx, 32 + (uint32_t)i);
        m->swap_add = rd_be64(a);
        m->compare = rd_be64(a + 8);
        off = 48;
    }
    uint64_t total = 0;
    while (off + 16 <= end) {
        uint8_t s[16];
        for (int i = 0; i < 16; i++) s[i] = *sq_at(qp, m->wqe_idx, off + (uint32_t)i);
        uint32_t bc = rd_be32(s);
        if (bc & 0x80000000u) {                       /* inline: data follows byte_count */
            uint32_t len = bc & 0x7fffffffu;
            if (off + 4 + len > end || resp) {
                m->err_synd = NIC_SYND_LOCAL_QP_OP;
                return;
            }
            uint32_t bytes = qp->sq_wqe_cnt * 64;
            uint32_t start = (uint32_t)(((size_t)m->wqe_idx * 64 + off + 4) % bytes);
            uint32_t first = len < bytes - start ? len : bytes - start;
            if (add_sge(m, (uint8_t *)qp->sq + start, first) ||
                add_sge(m, (uint8_t *)qp->sq, len - first)) {
                m->err_synd = NIC_SYND_LOCAL_QP_OP;
                return;
            }
            total += len;
            off += (4 + len + 15) & ~15u;
            continue;
        }
        uint32_t lkey = rd_be32(s + 4);
        uint64_t addr = rd_be64(s + 8);
        uint32_t len = bc ? bc : 0x80000000u;         /* 0 means 2 GiB to the hardware */
        uint8_t *ptr;
        uint8_t e = resolve(q, lkey, addr, len, resp, &ptr);
        if (e) { m->err_synd = e; return; }
        if (add_sge(m, ptr, len)) { m->err_synd = NIC_SYND_LOCAL_QP_OP; return; }
        m->sge[m->nsge - 1].lkey = lkey;
        m->sge[m->nsge - 1].lkey_valid = true;
        m->sge[m->nsge - 1].addr = addr;
        total += len;
        off += 16;
    }
    if (total > 0x80000000ull) { m->err_synd = NIC_SYND_LOCAL_LENGTH; return; }
    /* a datagram is one packet: longer than the MTU is a local length error (nic_ud.c) */
    if (nic_qp_is_ud(q) && total > q->mtu) { m->err_synd = NIC_SYND_LOCAL_LENGTH; return; }
    /* an atomic returns 8 bytes into exactly one 8-byte local buffer (libmlx5 writes the data
     * segment with byte_count MLX5_ATOMIC_SIZE whatever the SGE says, providers/mlx5/qp.c) */
    if (atomic && (m->nsge != 1 || total != 8)) { m->err_synd = NIC_SYND_LOCAL_LENGTH; return; }
    m->len = (uint32_t)total;
}

/* Resolves the message's data segments again (the process may have deregistered a region since
 * the WQE was fetched); 0 or LOCAL_PROT. */
static uint8_t revalidate(struct nic_qp *q, struct nic_msg *m)
{
    for (unsigned i = 0; i < m->nsge; i++) {
        struct nic_sge *s = &m->sge[i];
        if (!s->lkey_valid) continue;
        uint8_t e = resolve(q, s->lkey, s->addr, s->len, nic_op_has_response(m->opcode), &s->ptr);
        if (e) return e;
    }
    return 0;
}

/* ---- sending ------------------------------------------------------------------------------ */
static uint8_t pkt_opcode(const struct nic_msg *m, uint32_t i, uint32_t n, bool rc)
{
    uint8_t t = rc ? MLXD_ROCE_TRANSPORT_RC : MLXD_ROCE_TRANSPORT_UC;
    bool first = i == 0, last = i == n - 1, imm;
    switch (m->opcode) {
    case NIC_OP_SEND: case NIC_OP_SEND_IMM: case NIC_OP_SEND_INV:
        imm = m->opcode == NIC_OP_SEND_IMM;
        if (last && m->opcode == NIC_OP_SEND_INV)   /* the IETH rides on the last packet */
            return t | (first ? MLXD_ROCE_OP_SEND_ONLY_INV : MLXD_ROCE_OP_SEND_LAST_INV);
        if (first && last) return t | (imm ? MLXD_ROCE_OP_SEND_ONLY_IMM : MLXD_ROCE_OP_SEND_ONLY);
        if (first) return t | MLXD_ROCE_OP_SEND_FIRST;
        if (last) return t | (imm ? MLXD_ROCE_OP_SEND_LAST_IMM : MLXD_ROCE_OP_SEND_LAST);
        return t | MLXD_ROCE_OP_SEND_MIDDLE;
    case NIC_OP_RDMA_WRITE: case NIC_OP_RDMA_WRITE_IMM:
        imm = m->opcode == NIC_OP_RDMA_WRITE_IMM;
        if (first && last) return t | (imm ? MLXD_ROCE_OP_WRITE_ONLY_IMM : MLXD_ROCE_OP_WRITE_ONLY);
        if (first) return t | MLXD_ROCE_OP_WRITE_FIRST;
        if (last) return t | (imm ? MLXD_ROCE_OP_WRITE_LAST_IMM : MLXD_ROCE_OP_WRITE_LAST);
        return t | MLXD_ROCE_OP_WRITE_MIDDLE;
    default:
        return t | MLXD_ROCE_OP_READ_REQUEST;
    }
}

/* Sends packets of msgs[send] from send_pkt; returns packets sent (<= budget). */
static unsigned send_msg(struct nic_qp *q, struct nic_msg *m, unsigned budget)
{
    bool rc = is_rc(q);
    uint32_t mtu = q->mtu ? q->mtu : 1024;
    uint32_t n = m->len ? (m->len + mtu - 1) / mtu : 1;
    if (q->send_pkt == 0) {
        m->first_psn = q->next_psn;
        m->npsn = n;
        m->read_rcvd = 0;
        m->read_done = false;
    }
    unsigned sent = 0;
    if (nic_qp_is_ud(q)) {                  /* one packet to the WQE's address (nic_ud.c) */
        struct nic_txslot *s = slot(q);
        struct mlxd_roce_pkt p;
        struct sockaddr_in to;
        nic_ud_hdr(q, m, &p, &to);
        ssize_t hl = mlxd_roce_build_hdrs(s->buf, NIC_PKT_MAX, &p, m->len);
        if (hl <= 0) hl = 0;
        gather(m, 0, s->buf + hl, m->len);
        pkt_send_to(q, s, (uint32_t)hl, m->len, &to);
        m->npsn = 1;
        q->next_psn = (m->first_psn + 1) & MLXD_ROCE_PSN_MASK;
        q->send_pkt = 1;
        return 1;
    }
    if (nic_op_is_atomic(m->opcode)) {      /* one request packet, AtomicETH, no payload */
        struct nic_txslot *s = slot(q);
        uint8_t op = m->opcode == NIC_OP_ATOMIC_CS ? MLXD_ROCE_OP_COMPARE_SWAP : MLXD_ROCE_OP_FETCH_ADD;
        struct mlxd_roce_pkt p = {.opcode = MLXD_ROCE_TRANSPORT_RC | op, .psn = m->first_psn,
                                  .ackreq = true, .atomic_va = m->raddr, .atomic_rkey = m->rkey,
                                  .atomic_swap_add = m->swap_add,
                                  .atomic_compare = m->opcode == NIC_OP_ATOMIC_CS ? m->compare : 0};
        m->npsn = 1;
        uint32_t hl = nic_pkt_hdrs(q, s->buf, &p, 0);
        nic_pkt_send(q, s, hl, 0);
        q->next_psn = (m->first_psn + 1) & MLXD_ROCE_PSN_MASK;
        q->send_pkt = 1;
        return 1;
    }
    if (m->opcode == NIC_OP_RDMA_READ) {
        struct nic_txslot *s = slot(q);
        struct mlxd_roce_pkt p = {.opcode = pkt_opcode(m, 0, 1, rc), .psn = m->first_psn,
                                  .ackreq = true, .reth_va = m->raddr, .reth_rkey = m->rkey,
                                  .reth_len = m->len};
        uint32_t hl = nic_pkt_hdrs(q, s->buf, &p, 0);
        nic_pkt_send(q, s, hl, 0);
        q->next_psn = (m->first_psn + n) & MLXD_ROCE_PSN_MASK;
        q->send_pkt = n;
        return 1;
    }
    while (q->send_pkt < n && sent < budget) {
        uint32_t i = q->send_pkt, off = i * mtu;
        uint32_t plen = m->len - off < mtu ? m->len - off : mtu;
        struct nic_txslot *s = slot(q);
        struct mlxd_roce_pkt p = {.opcode = pkt_opcode(m, i, n, rc), .psn = q->next_psn};
        bool last = i == n - 1;
        p.se = last && (m->fm_ce_se & 0x02);
        p.ackreq = rc && last;
        p.reth_va = m->raddr;
        p.reth_rkey = m->rkey;
        p.reth_len = m->len;
        p.imm = m->imm;
        p.ieth_rkey = __builtin_bswap32(m->imm);   /* SEND with Invalidate: the ctrl's imm */
        uint32_t hl = nic_pkt_hdrs(q, s->buf, &p, plen);
        gather(m, off, s->buf + hl, plen);
        nic_pkt_send(q, s, hl, plen);
        q->next_psn = (q->next_psn + 1) & MLXD_ROCE_PSN_MASK;
        q->send_pkt++;
        sent++;
    }
    return sent;
}

static void flush_unfetched(struct nic_qp *q)
{
    struct emu_qp *qp = q->qp;
    if (!qp->sq_wqe_cnt || !qp->dbrec) return;
    uint16_t pi = q->sq_rung;      /* what was rung: the NIC knows of no other WQE */
    while ((int16_t)(pi - q->sq_ci) > 0) {
        struct nic_msg m;
        volatile uint8_t *c = sq_at(qp, q->sq_ci, 0);
        uint8_t ctrl[8];
        __builtin_memcpy(ctrl, (const void *)c, 8);
        uint32_t ds = rd_be32(ctrl + 4) & 0x3f;
        memset(&m, 0, offsetof(struct nic_msg, sge));
        m.opcode = ctrl[3];
        m.wqe_idx = q->sq_ci;
        q->sq_ci = (uint16_t)(q->sq_ci + (ds ? (ds + 3) / 4 : 1));
        complete(q, &m, NIC_SYND_WR_FLUSH, 0xf9);
    }
}

void nic_req_flush(struct nic_qp *q)
{
    while (q->head != q->tail) {
        struct nic_msg *m = M(q, q->head);
        q->head++;
        complete(q, m, NIC_SYND_WR_FLUSH, 0xf9);
    }
    q->send = q->tail = q->sent_hi = q->head;
    q->send_pkt = 0;
    q->deadline_ns = 0;
    flush_unfetched(q);
}

void nic_req_reset(struct nic_qp *q)
{
    q->sq_ci = q->sq_rung = 0;
    q->head = q->send = q->tail = q->send_pkt = q->sent_hi = 0;
    q->deadline_ns = q->rnr_until_ns = 0;
}

/* READs and atomics sent and not yet answered (RC). */
static unsigned rd_outstanding(const struct nic_qp *q)
{
    unsigned n = 0;
    for (uint32_t i = q->head; i != q->send; i++) {
        const struct nic_msg *x = M(q, i);
        n += nic_op_has_response(x->opcode) && !x->read_done;
    }
    return n;
}

int nic_req_progress(struct nic_qp *q)
{
    struct emu_qp *qp = q->qp;
    if (!qp->sq_wqe_cnt || !qp->dbrec) return 0;
    int work = nic_doorbell_scan(q);
    if (qp->state == NIC_QPS_ERR || qp->state == NIC_QPS_SQE) {
        if ((int16_t)(q->sq_rung - q->sq_ci) <= 0) return work;
        flush_unfetched(q);
        return 1;
    }
    if (qp->state != NIC_QPS_RTS && qp->state != NIC_QPS_SQD) return work;
    if (qp->state == NIC_QPS_RTS) {
        /* only what the UAR doorbell announced (nic_doorbell.c), never the record alone */
        uint16_t pi = q->sq_rung;
        while ((int16_t)(pi - q->sq_ci) > 0 && q->tail - q->head < q->cap) {
            fetch(q, M(q, q->tail));
            q->tail++;
            work++;
        }
    }
    if (q->rnr_until_ns) {
        if (q->nd->now_ns < q->rnr_until_ns) return work;
        q->rnr_until_ns = 0;
    }
    unsigned budget = 64;
    bool rc = is_rc(q);
    while (q->send != q->tail && budget) {
        struct nic_msg *m = M(q, q->send);
        if (m->err_synd) {
            if (q->send != q->head) break;       /* errors complete in order */
            fail_head(q, m->err_synd, m->err_synd == NIC_SYND_LOCAL_PROT ? 0x52 : 0x68);
            return 1;
        }
        if ((m->fm_ce_se & 0x80) && q->send_pkt == 0 && q->send != q->head) break;   /* fence */
        if (rc && q->head != q->send &&
            (uint32_t)mlxd_roce_psn_diff(q->next_psn, M(q, q->head)->first_psn) >= window(q))
            break;
        /* at most max_rd_atomic READs/atomics outstanding (IB spec vol. 1 9.4.4 and the QP's
         * attribute; the responder keeps the results of only so many atomics for duplicates):
         * a new one waits for the earlier responses */
        if (rc && q->send_pkt == 0 && nic_op_has_response(m->opcode) &&
            rd_outstanding(q) >= (q->qp->attr.max_rd_atomic ? q->qp->attr.max_rd_atomic : 1u))
            break;
        if (m->opcode == NIC_OP_UMR && !m->umr.done) {   /* runs once, in its turn: no packet */
            uint8_t e = nic_mw_umr(q, m);
            if (e && q->send != q->head) { m->err_synd = e; break; }
            if (e) { fail_head(q, e, 0x68); return 1; }
            m->umr.done = true;                  /* a go-back (retransmission) passes over it */
        }
        if (m->opcode == NIC_OP_NOP || m->opcode == NIC_OP_UMR) {
            m->first_psn = q->next_psn;
            m->npsn = 0;
            q->send++;
            note_sent(q);
            work++;
            continue;
        }
        if (revalidate(q, m)) {
            if (q->send != q->head) { m->err_synd = NIC_SYND_LOCAL_PROT; break; }
            fail_head(q, NIC_SYND_LOCAL_PROT, 0x52);
            return 1;
        }
        unsigned n = send_msg(q, m, budget);
        budget -= n;
        work += (int)n;
        if (rc && n && !q->deadline_ns) q->deadline_ns = q->nd->now_ns + timeout_ns(q);
        if (q->send_pkt >= m->npsn) { q->send++; q->send_pkt = 0; }
        note_sent(q);
    }
    if (!rc) {
        while (q->head != q->send) {
            struct nic_msg *m = M(q, q->head);
            q->head++;
            complete(q, m, 0, 0);
        }
    } else if (q->head != q->send && (M(q, q->head)->opcode == NIC_OP_NOP || M(q, q->head)->opcode == NIC_OP_UMR)) {
        ack_through(q, (M(q, q->head)->first_psn - 1) & MLXD_ROCE_PSN_MASK);
    }
    if (rc && !timeout_ns(q)) q->deadline_ns = 0;
    return work;
}

void nic_req_timers(struct nic_qp *q)
{
    if (!is_rc(q) || q->qp->state != NIC_QPS_RTS || !q->deadline_ns || q->rnr_until_ns) return;
    if (q->nd->now_ns < q->deadline_ns) return;
    if (!outstanding(q)) { q->deadline_ns = 0; return; }
    if (nic_peer_frozen(q)) {     /* not lost: the peer's NIC did not run (nic_peer.c) */
        q->nd->st.timeouts_peer_frozen++;
        q->deadline_ns = q->nd->now_ns + timeout_ns(q);
        return;
    }
    q->nd->st.timeouts++;
    if (--q->retries_left < 0) {
        fail_head(q, NIC_SYND_RETRY_EXC, 0x81);
        return;
    }
    go_back(q);
    q->deadline_ns = q->nd->now_ns + timeout_ns(q);
}

/* ---- acknowledgements ---------------------------------------------------------------------- */
void nic_req_on_ack(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    if (!is_rc(q) || (q->qp->state != NIC_QPS_RTS && q->qp->state != NIC_QPS_SQD)) return;
    if (!outstanding(q)) return;
    uint32_t base = M(q, q->head)->first_psn;
    /* only PSNs of packets sent and not yet acknowledged (or the one just before) count: also
     * those sent before a retransmission rewound next_psn (a late ACK of the first sending) */
    if (mlxd_roce_psn_diff(p->psn, base) < -1 || mlxd_roce_psn_diff(p->psn, q->psn_hi) >= 0) {
        q->nd->st.rx_dup++;
        return;
    }
    uint8_t syn = p->aeth_syndrome;
    uint32_t prev = (p->psn - 1) & MLXD_ROCE_PSN_MASK;
    switch (syn >> 5) {
    case 0:                                   /* ACK */
        ack_through(q, p->psn);
        break;
    case 1:                                   /* RNR NAK */
        ack_through(q, prev);
        if (q->qp->state == NIC_QPS_ERR || !outstanding(q)) break;
        if (q->qp->attr.rnr_retry != 7 && --q->rnr_left < 0) {
            fail_head(q, NIC_SYND_RNR_RETRY_EXC, 0x82);
            break;
        }
        go_back(q);
        q->rnr_until_ns = q->nd->now_ns + rnr_us[syn & 0x1f] * 1000ull;
        q->deadline_ns = 0;
        break;
    case 3:                                   /* NAK */
        ack_through(q, prev);
        if (q->qp->state == NIC_QPS_ERR || !outstanding(q)) break;
        switch (syn & 0x1f) {
        case MLXD_ROCE_NAK_PSN_SEQ:
            go_back(q);
            q->deadline_ns = q->nd->now_ns + timeout_ns(q);
            if (!timeout_ns(q)) q->deadline_ns = 0;
            break;
        case MLXD_ROCE_NAK_INV_REQ: fail_head(q, NIC_SYND_REMOTE_INVAL_REQ, 0x8a); break;
        case MLXD_ROCE_NAK_REM_ACCESS: fail_head(q, NIC_SYND_REMOTE_ACCESS, 0x88); break;
        default: fail_head(q, NIC_SYND_REMOTE_OP, 0x89); break;
        }
        break;
    default:
        break;
    }
}

void nic_req_on_read_resp(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    if (!is_rc(q) || (q->qp->state != NIC_QPS_RTS && q->qp->state != NIC_QPS_SQD)) return;
    struct nic_msg *m = NULL;
    uint32_t i;
    for (i = q->head; i != q->sent_hi; i++) {
        struct nic_msg *x = M(q, i);
        if (x->opcode != NIC_OP_RDMA_READ) continue;
        int32_t d = mlxd_roce_psn_diff(p->psn, x->first_psn);
        if (d >= 0 && (uint32_t)d < x->npsn) { m = x; break; }
    }
    if (!m || m->read_done) { q->nd->st.rx_dup++; return; }
    uint32_t mtu = q->mtu ? q->mtu : 1024;
    uint32_t k = (uint32_t)mlxd_roce_psn_diff(p->psn, m->first_psn);
    if (k * mtu != m->read_rcvd) { q->nd->st.rx_out_of_seq++; return; }   /* timer recovers */
    uint8_t op = p->opcode & 0x1f;
    bool first = k == 0, last = k == m->npsn - 1;
    uint8_t want = first && last ? MLXD_ROCE_OP_READ_RESPONSE_ONLY
                 : first ? MLXD_ROCE_OP_READ_RESPONSE_FIRST
                 : last ? MLXD_ROCE_OP_READ_RESPONSE_LAST : MLXD_ROCE_OP_READ_RESPONSE_MIDDLE;
    uint32_t expect = last ? m->len - k * mtu : mtu;
    if (op != want || p->payload_len != expect) {
        ack_through(q, (m->first_psn - 1) & MLXD_ROCE_PSN_MASK);
        if (q->qp->state != NIC_QPS_ERR && M(q, q->head) == m)
            fail_head(q, NIC_SYND_BAD_RESP, 0x91);
        return;
    }
    if ((p->hdrs & MLXD_ROCE_HAS_AETH) && (p->aeth_syndrome >> 5) != 0) return;
    ack_through(q, (m->first_psn - 1) & MLXD_ROCE_PSN_MASK);    /* implicit ACK of earlier */
    if (q->qp->state == NIC_QPS_ERR) return;
    if (revalidate(q, m)) { fail_head(q, NIC_SYND_LOCAL_PROT, 0x52); return; }
    /* scatter into the local gather list at read_rcvd */
    uint32_t off = m->read_rcvd, len = p->payload_len;
    const uint8_t *src = p->payload;
    for (unsigned s = 0; s < m->nsge && len; s++) {
        if (off >= m->sge[s].len) { off -= m->sge[s].len; continue; }
        uint32_t n = m->sge[s].len - off;
        if (n > len) n = len;
        memcpy(m->sge[s].ptr + off, src, n);
        src += n; len -= n; off = 0;
    }
    m->read_rcvd += p->payload_len;
    q->deadline_ns = q->nd->now_ns + timeout_ns(q);
    if (!timeout_ns(q)) q->deadline_ns = 0;
    if (last) {
        m->read_done = true;
        ack_through(q, p->psn);
    }
}

/* The response to an atomic: the original value goes into the request's 8-byte local buffer,
 * in host byte order (the device's 8-byte atomic endianness mode, see nic_atomic.c). */
void nic_req_on_atomic_ack(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    if (!is_rc(q) || (q->qp->state != NIC_QPS_RTS && q->qp->state != NIC_QPS_SQD)) return;
    struct nic_msg *m = NULL;
    for (uint32_t i = q->head; i != q->send; i++) {
        struct nic_msg *x = M(q, i);
        if (nic_op_is_atomic(x->opcode) && x->first_psn == p->psn) { m = x; break; }
    }
    if (!m || m->read_done || (p->aeth_syndrome >> 5) != 0) { q->nd->st.rx_dup++; return; }
    ack_through(q, (m->first_psn - 1) & MLXD_ROCE_PSN_MASK);    /* implicit ACK of earlier */
    if (q->qp->state == NIC_QPS_ERR) return;
    if (revalidate(q, m)) { fail_head(q, NIC_SYND_LOCAL_PROT, 0x52); return; }
    memcpy(m->sge[0].ptr, &p->atomic_orig, 8);
    m->read_done = true;
    ack_through(q, p->psn);
}
