/* capture_classify.c: what a capture holds (mlxd_capture_classify.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "mlxd_capture_classify.h"
#include "mlxd_error.h"
#include "mlxd_roce.h"

static bool uc_write(uint8_t opcode)
{
    uint8_t op = opcode & 0x1f;
    return (opcode & 0xe0) == MLXD_ROCE_TRANSPORT_UC && op >= MLXD_ROCE_OP_WRITE_FIRST &&
           op <= MLXD_ROCE_OP_WRITE_ONLY_IMM;
}

static struct mlxd_capture_flow *flow_of(struct mlxd_capture_kind *k, const struct mlxd_roce_pkt *h)
{
    for (unsigned i = 0; i < k->nflows; i++)
        if (k->flows[i].dest_qp == h->dest_qp && k->flows[i].src_ip == h->src_ip && k->flows[i].dst_ip == h->dst_ip)
            return &k->flows[i];
    if (k->nflows == MLXD_CAPTURE_MAX_FLOWS) return NULL;
    struct mlxd_capture_flow *f = &k->flows[k->nflows++];
    f->dest_qp = h->dest_qp;
    f->src_ip = h->src_ip;
    f->dst_ip = h->dst_ip;
    f->first_psn = h->psn;
    return f;
}

int mlxd_capture_classify(const struct mlxd_capture *c, struct mlxd_capture_kind *k)
{
    if (!c || !k) return mlxd_err(EINVAL, "mlxd_capture_classify: c and k must not be NULL");
    memset(k, 0, sizeof *k);
    k->hsb = c->npackets > 0;
    for (size_t i = 0; i < c->npackets; i++) {
        const struct mlxd_roce_pkt *h = &c->pkts[i].hdr;
        k->hsb &= uc_write(h->opcode);
        uint32_t t = 1u << (h->opcode >> 5);
        k->transports |= t;
        struct mlxd_capture_flow *f = flow_of(k, h);
        if (!f) { k->other_flows++; continue; }
        f->transports |= t;
        f->last_psn = h->psn;
        f->packets++;
        f->opcodes[h->opcode]++;
    }
    return 0;
}

static const char *transport_names(uint32_t t, char *buf, size_t len)
{
    static const char *names[8] = { "RC", "UC", "RD", "UD", "CNP", "0xa0", "0xc0", "0xe0" };
    size_t o = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < 8; i++)
        if (t & (1u << i)) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? "+" : "", names[i]);
    return buf;
}

#define PUT(...) do { int n_ = snprintf(buf ? buf + (o < len ? o : len) : NULL, o < len ? len - o : 0, __VA_ARGS__); \
                      if (n_ > 0) o += (size_t)n_; } while (0)

size_t mlxd_capture_describe(const struct mlxd_capture_kind *k, char *buf, size_t len)
{
    size_t o = 0;
    if (!k) { if (buf && len) buf[0] = 0; return 0; }
    if (!buf) len = 0;
    char t[32];
    PUT("RoCE v2 %s:", transport_names(k->transports, t, sizeof t));
    for (unsigned i = 0; i < k->nflows; i++) {
        const struct mlxd_capture_flow *f = &k->flows[i];
        PUT("%s QP 0x%06x (%u.%u.%u.%u -> %u.%u.%u.%u)", i ? ";" : "", f->dest_qp, f->src_ip >> 24,
            (f->src_ip >> 16) & 255, (f->src_ip >> 8) & 255, f->src_ip & 255, f->dst_ip >> 24,
            (f->dst_ip >> 16) & 255, (f->dst_ip >> 8) & 255, f->dst_ip & 255);
        bool first = true;
        for (unsigned op = 0; op < 256; op++) {
            if (!f->opcodes[op]) continue;
            PUT("%s %s x%u", first ? "" : ",", mlxd_roce_opcode_name((uint8_t)op), f->opcodes[op]);
            first = false;
        }
        PUT(", PSN 0x%06x..0x%06x", f->first_psn, f->last_psn);
    }
    if (k->other_flows) PUT("; %llu packets of further flows", (unsigned long long)k->other_flows);
    return o;
}
