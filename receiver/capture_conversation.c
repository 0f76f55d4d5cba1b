/* capture_conversation.c: replaying a captured RC or UC SEND conversation into a QP set up to
 * receive it (mlxd_capture_classify.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_capture_classify.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_roce.h"
#include "mlxd_uverbs.h"

#define FN "mlxd_capture_replay_conversation"
#define MAX_MESSAGES 4096u
#define MAX_BUFFER (64u << 20)

static bool is_send(uint8_t op)
{
    return op <= MLXD_ROCE_OP_SEND_ONLY_IMM;
}
static bool ends_message(uint8_t op)
{
    return op == MLXD_ROCE_OP_SEND_LAST || op == MLXD_ROCE_OP_SEND_LAST_IMM ||
           op == MLXD_ROCE_OP_SEND_ONLY || op == MLXD_ROCE_OP_SEND_ONLY_IMM;
}
static bool is_response(uint8_t op)
{
    return op == MLXD_ROCE_OP_ACKNOWLEDGE;
}

/* The one flow that carries requests: SENDs of one transport (RC or UC), the other flows only
 * acknowledgements.  Returns its index, or a negative errno with the reason in the message. */
static int request_flow(const struct mlxd_capture_kind *k)
{
    int req = -1;
    if (k->other_flows)
        return mlxd_err(EPROTONOSUPPORT, FN ": more than %u flows", MLXD_CAPTURE_MAX_FLOWS);
    for (unsigned i = 0; i < k->nflows; i++) {
        const struct mlxd_capture_flow *f = &k->flows[i];
        bool sends = false, others = false;
        for (unsigned op = 0; op < 256; op++) {
            if (!f->opcodes[op]) continue;
            uint8_t t = (uint8_t)(op & 0xe0), o = (uint8_t)(op & 0x1f);
            if ((t == MLXD_ROCE_TRANSPORT_RC || t == MLXD_ROCE_TRANSPORT_UC) && is_send(o)) sends = true;
            else if (!(t == MLXD_ROCE_TRANSPORT_RC && is_response(o))) {
                return mlxd_err(EPROTONOSUPPORT, FN ": QP 0x%06x carries %s, which a replay into a receiving "
                                "QP cannot take (only RC/UC SENDs and their acknowledgements)", f->dest_qp,
                                mlxd_roce_opcode_name((uint8_t)op));
            }
            others |= !is_send(o);
        }
        if (!sends) continue;
        if (others || req >= 0)
            return mlxd_err(EPROTONOSUPPORT, FN ": SENDs in more than one direction or mixed with responses "
                            "on QP 0x%06x", f->dest_qp);
        if (f->transports != 1 && f->transports != 2)
            return mlxd_err(EPROTONOSUPPORT, FN ": QP 0x%06x mixes RC and UC", f->dest_qp);
        req = (int)i;
    }
    if (req < 0) return mlxd_err(EPROTONOSUPPORT, FN ": no SEND in the capture");
    return req;
}

/* Messages of the flow and the largest one (bytes), from the packets in capture order. */
static int measure(const struct mlxd_capture *c, const struct mlxd_capture_flow *f, uint32_t *msgs, uint32_t *max)
{
    uint64_t cur = 0;
    *msgs = *max = 0;
    for (size_t i = 0; i < c->npackets; i++) {
        const struct mlxd_roce_pkt *h = &c->pkts[i].hdr;
        if (h->dest_qp != f->dest_qp || h->src_ip != f->src_ip || h->dst_ip != f->dst_ip) continue;
        cur += h->payload_len;
        if (!ends_message(h->opcode & 0x1f)) continue;
        if (cur > *max) *max = (uint32_t)(cur > UINT32_MAX ? UINT32_MAX : cur);
        (*msgs)++;
        cur = 0;
    }
    if (!*msgs) return mlxd_err(EPROTONOSUPPORT, FN ": QP 0x%06x: no complete SEND message", f->dest_qp);
    if (*msgs > MAX_MESSAGES || (uint64_t)*msgs * (*max ? *max : 1) > MAX_BUFFER)
        return mlxd_err(EFBIG, FN ": %u messages of up to %u bytes: more than the replay holds (%u messages, "
                        "%u bytes)", *msgs, *max, MAX_MESSAGES, MAX_BUFFER);
    return 0;
}

struct conv {
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_region *reg;
    uint8_t *buf;
    int sock;
    uint16_t sport;             /* the socket's UDP source port (the iCRC covers it) */
};

static void conv_close(struct conv *v)
{
    if (v->sock >= 0) close(v->sock);
    if (v->nic) mlxd_close(v->nic);
    free(v->buf);
}

/* The device's IPv4 address (its default RoCE v2 GID ::ffff:a.b.c.d), host order, or 0. */
static uint32_t local_ipv4(const struct mlxd_nic *nic)
{
    struct mlxd_gid g[64];
    int n = mlxd_gids(nic, g, 64), d = mlxd_default_gid_index(nic);
    for (int i = 0; i < n; i++)
        if ((int)g[i].index == d) {
            uint32_t be;
            memcpy(&be, g[i].raw + 12, 4);
            return ntohl(be);
        }
    return 0;
}

/* The receiving side: a QP of the capture's transport with one receive per message, connected
 * to the sender (the device's address + 1 in its last byte, the peer of an emulated pair: GID
 * ::ffff:src_ip) with rq_psn = the flow's first PSN; a UDP socket bound to the sender address. */
static int conv_open(struct conv *v, const char *dev, const struct mlxd_capture_flow *f, uint32_t msgs,
                     uint32_t max, uint32_t *src_ip, uint32_t *dst_ip)
{
    int rc = mlxd_open(dev, NULL, &v->nic);
    if (rc) return rc;
    *dst_ip = local_ipv4(v->nic);
    if (!*dst_ip) return mlxd_err(EADDRNOTAVAIL, FN ": %s has no IPv4 RoCE v2 GID", dev);
    *src_ip = (*dst_ip & ~0xffu) | (((*dst_ip & 0xff) % 253) + 1);
    uint32_t slot = max ? (max + 63) & ~63u : 64;
    size_t len = ((size_t)slot * msgs + 4095) & ~(size_t)4095;
    v->buf = aligned_alloc(4096, len);
    if (!v->buf) return mlxd_err(ENOMEM, FN ": out of memory");
    memset(v->buf, 0, len);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE };
    if ((rc = mlxd_region_register(v->nic, v->buf, len, &ro, &v->reg))) return rc;
    struct mlxd_cq_opts co = { .sz = sizeof co };
    if ((rc = mlxd_cq_create(v->nic, msgs + 1, &co, &v->cq))) return rc;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = f->transports == 1 ? MLXD_QP_RC : MLXD_QP_UC,
                               .recv_depth = msgs };
    if ((rc = mlxd_qp_create(v->cq, &qo, &v->qp))) return rc;
    struct mlxd_endpoint peer = { .qpn = 1, .psn = f->first_psn };
    peer.gid[10] = peer.gid[11] = 0xff;
    uint32_t be = htonl(*src_ip);
    memcpy(peer.gid + 12, &be, 4);
    if ((rc = mlxd_qp_connect(v->qp, &peer, NULL))) return rc;
    struct mlxd_local l = mlxd_region_local(v->reg);
    for (uint32_t m = 0; m < msgs; m++) {
        struct mlxd_local e = { l.addr + (uint64_t)m * slot, slot, l.lkey };
        struct mlxd_recv r = { .wr_id = m, .num_local = 1, .local = &e };
        if ((rc = mlxd_qp_receive(v->qp, &r, 1)) < 0) return rc;
    }
    v->sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (v->sock < 0) return mlxd_err(errno, FN ": socket: %s", strerror(errno));
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(*src_ip) };
    socklen_t sl = sizeof sa;
    if (bind(v->sock, (struct sockaddr *)&sa, sizeof sa) < 0 || getsockname(v->sock, (struct sockaddr *)&sa, &sl) < 0)
        return mlxd_err(errno, FN ": bind to the sender address: %s", strerror(errno));
    v->sport = ntohs(sa.sin_port);
    return 0;
}

/* Sends packet p of the flow with its addresses and QPN rewritten (iCRC recomputed). */
static int send_rewritten(struct conv *v, const struct mlxd_capture_packet *p, uint32_t qpn, uint32_t src_ip,
                          uint32_t dst_ip, uint16_t dst_port)
{
    uint8_t pkt[65536];
    if (p->len > sizeof pkt || p->len < MLXD_ROCE_MIN_PKT_LEN) return mlxd_err(EMSGSIZE, FN ": packet of %u bytes", p->len);
    memcpy(pkt, p->ip, p->len);
    mlxd_roce_wrap_udp(pkt, src_ip, v->sport, dst_ip, dst_port, p->len - 28);
    pkt[28 + 5] = (uint8_t)(qpn >> 16); pkt[28 + 6] = (uint8_t)(qpn >> 8); pkt[28 + 7] = (uint8_t)qpn;
    mlxd_roce_icrc_fill(pkt, p->len);
    struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(dst_port), .sin_addr.s_addr = htonl(dst_ip) };
    if (sendto(v->sock, pkt + 28, p->len - 28, 0, (struct sockaddr *)&to, sizeof to) < 0)
        return mlxd_err(errno, FN ": sendto: %s", strerror(errno));
    return 0;
}

/* Waits up to 2 s for the completion of message m; counts it into r. */
static int wait_message(struct conv *v, struct mlxd_conversation_report *r)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct mlxd_completion wc;
        int n = mlxd_cq_poll(v->cq, &wc, 1);
        if (n < 0) return n;
        if (n == 1) {
            if (wc.status) { r->errors++; if (!r->first_error) r->first_error = wc.status; return 0; }
            r->arrived++;
            r->bytes += wc.byte_len;
            r->with_imm += !!(wc.flags & MLXD_WC_WITH_IMM);
            return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= 2) return 0;      /* lost: counted as missing */
        usleep(20);
    }
}

int mlxd_capture_replay_conversation(const struct mlxd_capture *c, const struct mlxd_capture_kind *k,
                                     const char *dev, uint16_t dst_port, struct mlxd_conversation_report *r)
{
    if (!c || !k || !dev || !r) return mlxd_err(EINVAL, FN ": c, k, dev and r must not be NULL");
    memset(r, 0, sizeof *r);
    int fi = request_flow(k);
    if (fi < 0) return fi;
    const struct mlxd_capture_flow *f = &k->flows[fi];
    uint32_t msgs, max;
    int rc = measure(c, f, &msgs, &max);
    if (rc) return rc;
    r->transport = f->transports == 1 ? MLXD_QP_RC : MLXD_QP_UC;
    r->captured_qpn = f->dest_qp;
    r->messages = msgs;
    struct conv v = { .sock = -1 };
    uint32_t src_ip = 0, dst_ip = 0;
    if ((rc = conv_open(&v, dev, f, msgs, max, &src_ip, &dst_ip))) { conv_close(&v); return rc; }
    struct mlxd_endpoint me;
    mlxd_qp_endpoint(v.qp, &me);
    r->local_qpn = me.qpn;
    for (size_t i = 0; i < c->npackets && !rc; i++) {
        const struct mlxd_capture_packet *p = &c->pkts[i];
        if (p->hdr.dest_qp != f->dest_qp || p->hdr.src_ip != f->src_ip || p->hdr.dst_ip != f->dst_ip) continue;
        rc = send_rewritten(&v, p, me.qpn, src_ip, dst_ip, dst_port);
        r->packets += !rc;
        if (!rc && ends_message(p->hdr.opcode & 0x1f)) rc = wait_message(&v, r);
    }
    conv_close(&v);
    return rc;
}
