/* libFuzzer target: the RoCE v2 packet parser (abi/mlxd_roce.h, mlxd_roce_parse).
 * The input is a packet from its IPv4 header, as a hostile network sends it, when its first byte
 * is 0x45 (IPv4 without options: the seeds); otherwise the bytes describe one (structured.h:
 * consistent IPv4/UDP/BTH headers around the fields the bytes choose, then a bad iCRC or a
 * changed header byte when they say so), so that an empty corpus gets past the length checks.
 * Oracle: no crash or sanitizer report (the parser reads nothing past len); an accepted packet's
 * lengths are consistent (headers + payload + pad + iCRC = IP total length <= len, the payload
 * pointer inside the input); the iCRC verdict agrees with mlxd_roce_icrc_ok(); and rebuilding the
 * packet from the parsed fields with mlxd_roce_build() and parsing that gives the same fields
 * (build's documented defaults: TTL 0 -> 64, P_Key 0 -> 0xffff, UDP port 0 -> 4791). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_roce.h"
#include "seeds.h"
#include "structured.h"

/* seeds: every packet of fixtures/roce-pcaps, from its IPv4 header */
static void emit(const struct mlxd_capture *c, const char *dir, unsigned *n)
{
    for (size_t i = 0; i < c->npackets && i < 64; i++)
        seed_write(dir, (*n)++, c->pkts[i].ip, c->pkts[i].len);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    seeds_from_pcaps(emit);
    return 0;
}

static void same(const struct mlxd_roce_pkt *a, const struct mlxd_roce_pkt *b)
{
    if (a->src_ip != b->src_ip || a->dst_ip != b->dst_ip || a->src_port != b->src_port ||
        (a->dst_port ? a->dst_port : MLXD_ROCE_UDP_PORT) != b->dst_port || a->opcode != b->opcode || a->se != b->se ||
        a->migreq != b->migreq || a->ackreq != b->ackreq || (a->pkey ? a->pkey : 0xffff) != b->pkey ||
        a->dest_qp != b->dest_qp || a->psn != b->psn || a->hdrs != b->hdrs ||
        a->payload_len != b->payload_len || a->tos != b->tos || (a->ttl ? a->ttl : 64) != b->ttl)
        abort();
    if ((a->hdrs & MLXD_ROCE_HAS_RETH) &&
        (a->reth_va != b->reth_va || a->reth_rkey != b->reth_rkey || a->reth_len != b->reth_len))
        abort();
    if ((a->hdrs & MLXD_ROCE_HAS_AETH) &&
        (a->aeth_syndrome != b->aeth_syndrome || a->aeth_msn != b->aeth_msn))
        abort();
    if ((a->hdrs & MLXD_ROCE_HAS_IMMDT) && a->imm != b->imm) abort();
    if ((a->hdrs & MLXD_ROCE_HAS_IETH) && a->ieth_rkey != b->ieth_rkey) abort();
    if (a->payload_len && memcmp(a->payload, b->payload, a->payload_len)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t built[8192];
    if (!size || data[0] != 0x45) {
        struct fz z = { data, size };
        size = fz_packet(&z, built, sizeof built);
        data = built;
    }
    /* a private copy of exactly size bytes, so that ASan sees any read past the end */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    struct mlxd_roce_pkt p;
    for (int verify = 0; verify < 2; verify++) {
        int rc = mlxd_roce_parse(buf, size, verify ? MLXD_ROCE_UDP_PORT : 0, verify, &p);
        if (rc && rc != -EMSGSIZE && rc != -EPROTO && rc != -EBADMSG) abort();
        if (rc && rc != -EBADMSG) { if (!verify) break; continue; }
        if (p.pkt_len > size || p.pkt_len < MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + 4) abort();
        if (p.payload < buf || p.payload + p.payload_len > buf + p.pkt_len) abort();
        uint32_t hl = MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + mlxd_roce_ext_len(p.opcode);
        if (hl + p.payload_len + p.pad + MLXD_ROCE_ICRC_LEN != p.pkt_len) abort();
        if (p.hdrs != mlxd_roce_opcode_hdrs(p.opcode)) abort();
        if (verify && (rc == 0) != mlxd_roce_icrc_ok(buf, p.pkt_len)) abort();
        if (!verify && rc == 0) {
            static uint8_t out[70000];
            ssize_t n = mlxd_roce_build(out, sizeof out, &p, p.payload, p.payload_len);
            if (n < 0) {
                /* payload on an opcode without one is the only refusal left */
                if (n != -EINVAL || (p.hdrs & MLXD_ROCE_HAS_PAYLOAD) || !p.payload_len) abort();
                continue;
            }
            struct mlxd_roce_pkt q;
            if (mlxd_roce_parse(out, (size_t)n, 0, true, &q)) abort();
            same(&p, &q);
        }
    }
    free(buf);
    return 0;
}
