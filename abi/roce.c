/* roce.c: the RoCE v2 packet codec (see mlxd_roce.h for the facts and their sources). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include "mlxd_error.h"
#include "mlxd_roce.h"

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t rd24(const uint8_t *p) { return (uint32_t)p[0] << 16 | p[1] << 8 | p[2]; }
static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) << 32 | rd32(p + 4); }
static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void wr24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v;
}
static inline void wr32(uint8_t *p, uint32_t v) { wr16(p, (uint16_t)(v >> 16)); wr16(p + 2, (uint16_t)v); }
static inline void wr64(uint8_t *p, uint64_t v) { wr32(p, (uint32_t)(v >> 32)); wr32(p + 4, (uint32_t)v); }

/* Header sets per operation (IB spec 9.3, table 38), for RC and UC (UC lacks READ, ACK and
 * atomics; UD only SEND_ONLY[_IMM], with a DETH after the BTH). */
static uint32_t op_hdrs(uint8_t op)
{
    const uint32_t P = MLXD_ROCE_HAS_PAYLOAD;
    switch (op) {
    case MLXD_ROCE_OP_SEND_FIRST: case MLXD_ROCE_OP_SEND_MIDDLE: case MLXD_ROCE_OP_SEND_LAST:
    case MLXD_ROCE_OP_SEND_ONLY: case MLXD_ROCE_OP_WRITE_MIDDLE: case MLXD_ROCE_OP_WRITE_LAST:
    case MLXD_ROCE_OP_READ_RESPONSE_MIDDLE:
        return P;
    case MLXD_ROCE_OP_SEND_LAST_IMM: case MLXD_ROCE_OP_SEND_ONLY_IMM:
    case MLXD_ROCE_OP_WRITE_LAST_IMM:
        return P | MLXD_ROCE_HAS_IMMDT;
    case MLXD_ROCE_OP_WRITE_FIRST: case MLXD_ROCE_OP_WRITE_ONLY:
        return P | MLXD_ROCE_HAS_RETH;
    case MLXD_ROCE_OP_WRITE_ONLY_IMM:
        return P | MLXD_ROCE_HAS_RETH | MLXD_ROCE_HAS_IMMDT;
    case MLXD_ROCE_OP_READ_REQUEST:
        return MLXD_ROCE_HAS_RETH;
    case MLXD_ROCE_OP_READ_RESPONSE_FIRST: case MLXD_ROCE_OP_READ_RESPONSE_LAST:
    case MLXD_ROCE_OP_READ_RESPONSE_ONLY:
        return P | MLXD_ROCE_HAS_AETH;
    case MLXD_ROCE_OP_ACKNOWLEDGE:
        return MLXD_ROCE_HAS_AETH;
    case MLXD_ROCE_OP_ATOMIC_ACKNOWLEDGE:
        return MLXD_ROCE_HAS_AETH | MLXD_ROCE_HAS_ATOMICACKETH;
    case MLXD_ROCE_OP_COMPARE_SWAP: case MLXD_ROCE_OP_FETCH_ADD:
        return MLXD_ROCE_HAS_ATOMICETH;
    case MLXD_ROCE_OP_SEND_LAST_INV: case MLXD_ROCE_OP_SEND_ONLY_INV:
        return P | MLXD_ROCE_HAS_IETH;
    default:
        return 0;
    }
}

uint32_t mlxd_roce_opcode_hdrs(uint8_t opcode)
{
    uint8_t tr = opcode & 0xe0, op = opcode & 0x1f;
    if (tr == MLXD_ROCE_TRANSPORT_RC) return op_hdrs(op);
    if (tr == MLXD_ROCE_TRANSPORT_UC) {
        switch (op) {
        case MLXD_ROCE_OP_SEND_FIRST: case MLXD_ROCE_OP_SEND_MIDDLE: case MLXD_ROCE_OP_SEND_LAST:
        case MLXD_ROCE_OP_SEND_LAST_IMM: case MLXD_ROCE_OP_SEND_ONLY:
        case MLXD_ROCE_OP_SEND_ONLY_IMM: case MLXD_ROCE_OP_WRITE_FIRST:
        case MLXD_ROCE_OP_WRITE_MIDDLE: case MLXD_ROCE_OP_WRITE_LAST:
        case MLXD_ROCE_OP_WRITE_LAST_IMM: case MLXD_ROCE_OP_WRITE_ONLY:
        case MLXD_ROCE_OP_WRITE_ONLY_IMM:
            return op_hdrs(op);
        default:
            return 0;
        }
    }
    if (tr == MLXD_ROCE_TRANSPORT_UD &&
        (op == MLXD_ROCE_OP_SEND_ONLY || op == MLXD_ROCE_OP_SEND_ONLY_IMM))
        return op_hdrs(op) | MLXD_ROCE_HAS_DETH;
    return 0;
}

uint32_t mlxd_roce_ext_len(uint8_t opcode)
{
    uint32_t h = mlxd_roce_opcode_hdrs(opcode), n = 0;
    if (h & MLXD_ROCE_HAS_RETH) n += MLXD_ROCE_RETH_LEN;
    if (h & MLXD_ROCE_HAS_AETH) n += MLXD_ROCE_AETH_LEN;
    if (h & MLXD_ROCE_HAS_ATOMICACKETH) n += MLXD_ROCE_ATOMICACKETH_LEN;
    if (h & MLXD_ROCE_HAS_ATOMICETH) n += MLXD_ROCE_ATOMICETH_LEN;
    if (h & MLXD_ROCE_HAS_IMMDT) n += MLXD_ROCE_IMMDT_LEN;
    if (h & MLXD_ROCE_HAS_IETH) n += MLXD_ROCE_IETH_LEN;
    if (h & MLXD_ROCE_HAS_DETH) n += MLXD_ROCE_DETH_LEN;
    return n;
}


const char *mlxd_roce_opcode_name(uint8_t opcode)
{
    static const char *const rc[] = {
#define N(x) "RC " x
        N("SEND First"), N("SEND Middle"), N("SEND Last"), N("SEND Last with Immediate"),
        N("SEND Only"), N("SEND Only with Immediate"), N("RDMA WRITE First"),
        N("RDMA WRITE Middle"), N("RDMA WRITE Last"), N("RDMA WRITE Last with Immediate"),
        N("RDMA WRITE Only"), N("RDMA WRITE Only with Immediate"), N("RDMA READ Request"),
        N("RDMA READ response First"), N("RDMA READ response Middle"),
        N("RDMA READ response Last"), N("RDMA READ response Only"), N("Acknowledge"),
        N("ATOMIC Acknowledge"), N("CmpSwap"), N("FetchAdd"), NULL,
        N("SEND Last with Invalidate"), N("SEND Only with Invalidate"),
#undef N
    };
    static const char *const uc[] = {
#define N(x) "UC " x
        N("SEND First"), N("SEND Middle"), N("SEND Last"), N("SEND Last with Immediate"),
        N("SEND Only"), N("SEND Only with Immediate"), N("RDMA WRITE First"),
        N("RDMA WRITE Middle"), N("RDMA WRITE Last"), N("RDMA WRITE Last with Immediate"),
        N("RDMA WRITE Only"), N("RDMA WRITE Only with Immediate"),
#undef N
    };
    static __thread char other[32];
    if (mlxd_roce_opcode_hdrs(opcode)) {
        if ((opcode & 0xe0) == MLXD_ROCE_TRANSPORT_RC) return rc[opcode & 0x1f];
        if ((opcode & 0xe0) == MLXD_ROCE_TRANSPORT_UD)
            return (opcode & 0x1f) == MLXD_ROCE_OP_SEND_ONLY ? "UD SEND Only"
                                                             : "UD SEND Only with Immediate";
        return uc[opcode & 0x1f];
    }
    snprintf(other, sizeof other, "reserved 0x%02x", opcode);
    return other;
}

uint16_t mlxd_roce_ipv4_csum(const void *hdr)
{
    const uint8_t *h = hdr;
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2) s += rd16(h + i);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* CRC-32 (IEEE 802.3, reflected, zlib conventions: crc32(crc, p, n)).  On x86-64 with PCLMULQDQ
 * the bulk is folded 64 bytes at a time with carry-less multiplication (Intel, "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ Instruction", 2009: fold constants
 * x^(512+32), x^(512-32), x^(128+32), x^(128-32), x^64 mod P and the Barrett constants of
 * P = 0x104C11DB7, bit-reflected); zlib does the rest.  Same result as zlib's crc32, ~3x faster. */
#if defined(__x86_64__)
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc_fold(uint32_t reg, const uint8_t *p, size_t len)   /* len >= 64, % 16 == 0 */
{
    const __m128i k12 = _mm_set_epi64x(0x1c6e41596ll, 0x154442bd4ll);
    const __m128i k34 = _mm_set_epi64x(0x0ccaa009ell, 0x1751997d0ll);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124ll);
    const __m128i pu = _mm_set_epi64x(0x1f7011641ll, 0x1db710641ll);
    const __m128i lo32 = _mm_setr_epi32(-1, 0, -1, 0);
    __m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(p + 32)), d = _mm_loadu_si128((const __m128i *)(p + 48));
    a = _mm_xor_si128(a, _mm_cvtsi32_si128((int)reg));
    p += 64; len -= 64;
#define FOLD(x, k, next) do { __m128i lo_ = _mm_clmulepi64_si128(x, k, 0x00); \
        x = _mm_clmulepi64_si128(x, k, 0x11); x = _mm_xor_si128(_mm_xor_si128(x, lo_), next); } while (0)
    while (len >= 64) {
        FOLD(a, k12, _mm_loadu_si128((const __m128i *)p));
        FOLD(b, k12, _mm_loadu_si128((const __m128i *)(p + 16)));
        FOLD(c, k12, _mm_loadu_si128((const __m128i *)(p + 32)));
        FOLD(d, k12, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64; len -= 64;
    }
    FOLD(a, k34, b);
    FOLD(a, k34, c);
    FOLD(a, k34, d);
    while (len >= 16) {
        FOLD(a, k34, _mm_loadu_si128((const __m128i *)p));
        p += 16; len -= 16;
    }
#undef FOLD
    /* 128 -> 64 bits */
    __m128i t = _mm_clmulepi64_si128(a, k34, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    /* 64 -> 32 bits */
    t = _mm_srli_si128(a, 4);
    a = _mm_clmulepi64_si128(_mm_and_si128(a, lo32), k5, 0x00);
    a = _mm_xor_si128(a, t);
    /* Barrett reduction */
    t = _mm_and_si128(a, lo32);
    t = _mm_clmulepi64_si128(t, pu, 0x10);
    t = _mm_and_si128(t, lo32);
    t = _mm_clmulepi64_si128(t, pu, 0x00);
    a = _mm_xor_si128(a, t);
    return (uint32_t)_mm_extract_epi32(a, 1);
}
#endif

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t len)
{
#if defined(__x86_64__)
    static int have = -1;
    if (have < 0) have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (have && len >= 64) {
        size_t bulk = len & ~(size_t)15;
        crc = ~crc_fold(~crc, p, bulk);
        p += bulk;
        len -= bulk;
    }
#endif
    return (uint32_t)crc32(crc, p, (uInt)len);
}

/* The iCRC is the CRC-32 of [8 x 0xff][IPv4 + UDP + BTH with the fields a router may change
 * masked to ones][the rest up to the iCRC] (IB spec annex A17.8.3).  Over the first four 0xff
 * bytes the register goes from its initial all-ones to 0, and from 0 zero bytes leave it at 0:
 * [z zero bytes][4 x 0xff][...] from register 0 (zlib's crc value 0xffffffff) gives the same CRC
 * for any z.  z and the bytes of the packet that go into the head block are chosen so that the
 * block and what follows it are whole multiples of 16 bytes: the folding takes them all and no
 * tail is left to zlib's byte-wise code (a 4 KiB write leaves none; zlib 1.2.13, Debian 12's,
 * has no folding).  h gets the block: z + 4 + hl bytes, hl >= 40 bytes of the packet at p. */
#define ICRC_HEAD_MAX (16 + 4 + 64)
static size_t icrc_head(uint8_t *h, size_t z, const uint8_t *p, size_t hl)
{
    memset(h, 0, z);
    memset(h + z, 0xff, 4);
    memcpy(h + z + 4, p, hl);
    uint8_t *ip = h + z + 4, *udp = ip + MLXD_ROCE_IPV4_LEN, *bth = udp + MLXD_ROCE_UDP_LEN;
    ip[1] = 0xff;                  /* TOS (DSCP + ECN) */
    ip[8] = 0xff;                  /* TTL */
    ip[10] = ip[11] = 0xff;        /* header checksum */
    udp[6] = udp[7] = 0xff;        /* UDP checksum */
    bth[4] = 0xff;                 /* BTH reserved byte (FECN/BECN/resv6) */
    return z + 4 + hl;
}

/* The first zero count z >= 0 and head length hl >= 40 (at most avail) with z + 4 + hl a
 * multiple of 16 and, where the packet is long enough, at least 64 (the folding's minimum). */
static size_t head_len(size_t z, size_t avail)
{
    const size_t min = MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN;
    size_t hl = min + (16 - (z + 4 + min) % 16) % 16;
    if (z + 4 + hl < 64 && hl + 16 <= avail) hl += 16;
    return hl <= avail ? hl : min;
}

uint32_t mlxd_roce_icrc(const void *buf, size_t pkt_len)
{
    const uint8_t *p = buf;
    if (pkt_len < MLXD_ROCE_MIN_PKT_LEN) return 0;
    size_t n = pkt_len - MLXD_ROCE_ICRC_LEN;      /* bytes of the packet covered */
    size_t z = (16 - (4 + n) % 16) % 16;          /* whole blocks of 16 in all */
    size_t hl = head_len(z, n);
    uint8_t h[ICRC_HEAD_MAX];
    uint32_t c = crc_update(0xffffffffu, h, icrc_head(h, z, p, hl));
    return crc_update(c, p + hl, n - hl);
}

uint32_t mlxd_roce_icrc_parts(const void *hdrs, size_t hdr_len, const void *payload, size_t len)
{
    static const uint8_t zero[4];
    const size_t bth_end = MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN;
    if (hdr_len < bth_end) return 0;
    const uint8_t *p = hdrs;
    /* the head block: the headers, up to 64 bytes of them, ending on a 16-byte boundary so
     * that the payload is folded whole */
    size_t hl = hdr_len < 64 ? hdr_len : 64;
    size_t z = (16 - (4 + hl) % 16) % 16;
    uint8_t h[ICRC_HEAD_MAX];
    uint32_t c = crc_update(0xffffffffu, h, icrc_head(h, z, p, hl));
    c = crc_update(c, p + hl, hdr_len - hl);
    if (len) c = crc_update(c, payload, len);
    return crc_update(c, zero, (4 - (len & 3)) & 3);
}

void mlxd_roce_icrc_fill(void *buf, size_t pkt_len)
{
    if (pkt_len < MLXD_ROCE_MIN_PKT_LEN) return;   /* not a packet: leave buf alone */
    uint32_t c = mlxd_roce_icrc(buf, pkt_len);
    uint8_t *t = (uint8_t *)buf + pkt_len - MLXD_ROCE_ICRC_LEN;
    t[0] = (uint8_t)c; t[1] = (uint8_t)(c >> 8); t[2] = (uint8_t)(c >> 16); t[3] = (uint8_t)(c >> 24);
}

static uint32_t icrc_stored(const uint8_t *p, size_t pkt_len)
{
    const uint8_t *t = p + pkt_len - MLXD_ROCE_ICRC_LEN;
    return (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
}

bool mlxd_roce_icrc_ok(const void *buf, size_t pkt_len)
{
    if (pkt_len < MLXD_ROCE_MIN_PKT_LEN) return false;
    return mlxd_roce_icrc(buf, pkt_len) == icrc_stored(buf, pkt_len);
}

static void write_ip_udp(uint8_t *b, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                         size_t udp_len, uint8_t tos, uint8_t ttl, uint16_t id)
{
    b[0] = 0x45; b[1] = tos;
    wr16(b + 2, (uint16_t)(udp_len + MLXD_ROCE_UDP_LEN + MLXD_ROCE_IPV4_LEN));
    wr16(b + 4, id);
    wr16(b + 6, 0x4000);               /* DF, fragment offset 0 */
    b[8] = ttl ? ttl : 64; b[9] = 17;  /* UDP */
    wr16(b + 10, 0);
    wr32(b + 12, src); wr32(b + 16, dst);
    wr16(b + 10, mlxd_roce_ipv4_csum(b));
    uint8_t *u = b + MLXD_ROCE_IPV4_LEN;
    wr16(u, sport); wr16(u + 2, dport);
    wr16(u + 4, (uint16_t)(udp_len + MLXD_ROCE_UDP_LEN));
    wr16(u + 6, 0);
}

int mlxd_roce_wrap_udp(void *buf, uint32_t src_ip, uint16_t src_port, uint32_t dst_ip,
                       uint16_t dst_port, size_t udp_len)
{
    if (!buf || udp_len > 65535 - MLXD_ROCE_IPV4_LEN - MLXD_ROCE_UDP_LEN)
        return mlxd_err(EINVAL, "mlxd_roce_wrap_udp: %zu-byte UDP payload does not fit IPv4",
                        udp_len);
    write_ip_udp(buf, src_ip, src_port, dst_ip, dst_port, udp_len, 0, 64, 0);
    return 0;
}

/* The checks and the header writing of mlxd_roce_build() and mlxd_roce_build_hdrs(); fn is the
 * public function the caller called, for the messages. */
static ssize_t build_hdrs(const char *fn, void *buf, size_t cap, const struct mlxd_roce_pkt *p,
                          size_t len)
{
    if (!buf || !p) return mlxd_err(EINVAL, "%s: NULL %s", fn, buf ? "packet" : "buffer");
    uint32_t h = mlxd_roce_opcode_hdrs(p->opcode);
    if (!h) return mlxd_err(EINVAL, "%s: opcode 0x%02x is not RC/UC", fn, p->opcode);
    if (len && !(h & MLXD_ROCE_HAS_PAYLOAD))
        return mlxd_err(EINVAL, "%s: %s carries no payload (%zu bytes given)", fn,
                        mlxd_roce_opcode_name(p->opcode), len);
    size_t hl = MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + mlxd_roce_ext_len(p->opcode);
    /* Bound len on its own before any sum with it, so that no sum can wrap (len near SIZE_MAX
     * would make hl + len + pad + 4 small). */
    if (len > 65535 - hl - MLXD_ROCE_ICRC_LEN)
        return mlxd_err(EINVAL, "%s: %zu-byte payload exceeds an IPv4 datagram", fn, len);
    size_t pad = (4 - (len & 3)) & 3;
    size_t total = hl + len + pad + MLXD_ROCE_ICRC_LEN;
    if (total > 65535)
        return mlxd_err(EINVAL, "%s: %zu-byte payload exceeds an IPv4 datagram", fn, len);
    if (cap < total)
        return mlxd_err(ENOSPC, "%s: %zu-byte buffer, packet needs %zu", fn, cap, total);
    uint8_t *b = buf;
    write_ip_udp(b, p->src_ip, p->src_port, p->dst_ip,
                 p->dst_port ? p->dst_port : MLXD_ROCE_UDP_PORT,
                 total - MLXD_ROCE_IPV4_LEN - MLXD_ROCE_UDP_LEN, p->tos, p->ttl, p->ip_id);
    uint8_t *t = b + MLXD_ROCE_BTH_OFF;
    t[0] = p->opcode;
    t[1] = (uint8_t)((p->se ? 0x80 : 0) | (p->migreq ? 0x40 : 0) | pad << 4 | (p->tver & 0xf));
    wr16(t + 2, p->pkey ? p->pkey : 0xffff);
    t[4] = p->bth_resv;
    wr24(t + 5, p->dest_qp & MLXD_ROCE_QPN_MASK);
    t[8] = p->ackreq ? 0x80 : 0;
    wr24(t + 9, p->psn & MLXD_ROCE_PSN_MASK);
    t += MLXD_ROCE_BTH_LEN;
    if (h & MLXD_ROCE_HAS_DETH) {          /* DETH first after the BTH (IB spec 9.2) */
        wr32(t, p->deth_qkey); t[4] = 0; wr24(t + 5, p->deth_src_qp & MLXD_ROCE_QPN_MASK);
        t += MLXD_ROCE_DETH_LEN;
    }
    /* Order of extension headers: RETH/AtomicETH, then (AETH,) ImmDt/IETH; for responses AETH
     * then AtomicAckETH (IB spec 9.3). */
    if (h & MLXD_ROCE_HAS_RETH) {
        wr64(t, p->reth_va); wr32(t + 8, p->reth_rkey); wr32(t + 12, p->reth_len);
        t += MLXD_ROCE_RETH_LEN;
    }
    if (h & MLXD_ROCE_HAS_ATOMICETH) {
        wr64(t, p->atomic_va); wr32(t + 8, p->atomic_rkey);
        wr64(t + 12, p->atomic_swap_add); wr64(t + 20, p->atomic_compare);
        t += MLXD_ROCE_ATOMICETH_LEN;
    }
    if (h & MLXD_ROCE_HAS_AETH) {
        t[0] = p->aeth_syndrome; wr24(t + 1, p->aeth_msn & 0xffffff);
        t += MLXD_ROCE_AETH_LEN;
    }
    if (h & MLXD_ROCE_HAS_ATOMICACKETH) { wr64(t, p->atomic_orig); t += MLXD_ROCE_ATOMICACKETH_LEN; }
    if (h & MLXD_ROCE_HAS_IMMDT) { memcpy(t, &p->imm, 4); t += 4; }
    if (h & MLXD_ROCE_HAS_IETH) { wr32(t, p->ieth_rkey); t += 4; }
    return (ssize_t)hl;
}

ssize_t mlxd_roce_build_hdrs(void *buf, size_t cap, const struct mlxd_roce_pkt *p, size_t len)
{
    return build_hdrs("mlxd_roce_build_hdrs", buf, cap, p, len);
}

ssize_t mlxd_roce_build(void *buf, size_t cap, const struct mlxd_roce_pkt *p,
                        const void *payload, size_t len)
{
    if (len && !payload) return mlxd_err(EINVAL, "mlxd_roce_build: NULL payload of %zu bytes", len);
    ssize_t hl = build_hdrs("mlxd_roce_build", buf, cap, p, len);
    if (hl < 0) return hl;
    uint8_t *b = buf;
    size_t pad = (4 - (len & 3)) & 3;
    if (len) memcpy(b + hl, payload, len);
    memset(b + hl + len, 0, pad);
    size_t total = (size_t)hl + len + pad + MLXD_ROCE_ICRC_LEN;
    mlxd_roce_icrc_fill(b, total);
    return (ssize_t)total;
}

/* The IPv4 and UDP headers of the len bytes at b (udp_port: the port required, 0: any) into
 * out (pkt_len: the IP total length).  Returns 0 or a negative errno with the message set. */
static int parse_ip_udp(const uint8_t *b, size_t len, uint16_t udp_port, struct mlxd_roce_pkt *out)
{
    if (len < MLXD_ROCE_BTH_OFF)
        return mlxd_err(EMSGSIZE, "mlxd_roce_parse: %zu bytes, shorter than IPv4+UDP", len);
    if (b[0] != 0x45)
        return mlxd_err(EPROTO, "mlxd_roce_parse: not IPv4 without options (0x%02x)", b[0]);
    if (b[9] != 17) return mlxd_err(EPROTO, "mlxd_roce_parse: IP protocol %u is not UDP", b[9]);
    if (rd16(b + 6) & 0x3fff)
        return mlxd_err(EPROTO, "mlxd_roce_parse: IP fragment (flags/offset 0x%04x)", rd16(b + 6));
    uint32_t tot = rd16(b + 2);
    if (tot > len)
        return mlxd_err(EMSGSIZE, "mlxd_roce_parse: IP total length %u > %zu bytes", tot, len);
    const uint8_t *u = b + MLXD_ROCE_IPV4_LEN;
    uint32_t ulen = rd16(u + 4);
    if (ulen + MLXD_ROCE_IPV4_LEN != tot)
        return mlxd_err(EMSGSIZE, "mlxd_roce_parse: UDP length %u disagrees with IP length %u",
                        ulen, tot);
    out->src_ip = rd32(b + 12); out->dst_ip = rd32(b + 16);
    out->tos = b[1]; out->ttl = b[8]; out->ip_id = rd16(b + 4);
    out->src_port = rd16(u); out->dst_port = rd16(u + 2);
    out->pkt_len = tot;
    if (udp_port && out->dst_port != udp_port)
        return mlxd_err(EPROTO, "mlxd_roce_parse: UDP port %u is not %u", out->dst_port, udp_port);
    return 0;
}

/* The extension headers after the BTH (t: their first byte; h: the opcode's MLXD_ROCE_HAS_*
 * set, whose headers the caller found room for) into out. */
static void parse_ext_hdrs(const uint8_t *t, uint32_t h, struct mlxd_roce_pkt *out)
{
    if (h & MLXD_ROCE_HAS_DETH) {
        out->deth_qkey = rd32(t); out->deth_src_qp = rd24(t + 5);
        t += MLXD_ROCE_DETH_LEN;
    }
    if (h & MLXD_ROCE_HAS_RETH) {
        out->reth_va = rd64(t); out->reth_rkey = rd32(t + 8); out->reth_len = rd32(t + 12);
        t += MLXD_ROCE_RETH_LEN;
    }
    if (h & MLXD_ROCE_HAS_ATOMICETH) {
        out->atomic_va = rd64(t); out->atomic_rkey = rd32(t + 8);
        out->atomic_swap_add = rd64(t + 12); out->atomic_compare = rd64(t + 20);
        t += MLXD_ROCE_ATOMICETH_LEN;
    }
    if (h & MLXD_ROCE_HAS_AETH) { out->aeth_syndrome = t[0]; out->aeth_msn = rd24(t + 1); t += 4; }
    if (h & MLXD_ROCE_HAS_ATOMICACKETH) { out->atomic_orig = rd64(t); t += 8; }
    if (h & MLXD_ROCE_HAS_IMMDT) { memcpy(&out->imm, t, 4); t += 4; }
    if (h & MLXD_ROCE_HAS_IETH) { out->ieth_rkey = rd32(t); t += 4; }
}

int mlxd_roce_parse(const void *buf, size_t len, uint16_t udp_port, bool verify_icrc,
                    struct mlxd_roce_pkt *out)
{
    if (!buf || !out) return mlxd_err(EINVAL, "mlxd_roce_parse: NULL %s", buf ? "out" : "buffer");
    const uint8_t *b = buf;
    memset(out, 0, sizeof *out);
    int rc = parse_ip_udp(b, len, udp_port, out);
    if (rc < 0) return rc;
    uint32_t tot = out->pkt_len;
    if (tot < MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + MLXD_ROCE_ICRC_LEN)
        return mlxd_err(EMSGSIZE, "mlxd_roce_parse: %u bytes, too short for BTH + iCRC", tot);
    const uint8_t *t = b + MLXD_ROCE_BTH_OFF;
    out->opcode = t[0];
    out->se = t[1] & 0x80; out->migreq = t[1] & 0x40;
    out->pad = (t[1] >> 4) & 3; out->tver = t[1] & 0xf;
    out->pkey = rd16(t + 2); out->bth_resv = t[4];
    out->dest_qp = rd24(t + 5);
    out->ackreq = t[8] & 0x80;
    out->psn = rd24(t + 9);
    out->icrc = icrc_stored(b, tot);
    if (out->tver != 0)
        return mlxd_err(EPROTO, "mlxd_roce_parse: BTH TVer %u is not 0", out->tver);
    uint32_t h = mlxd_roce_opcode_hdrs(out->opcode);
    if (!h) return mlxd_err(EPROTO, "mlxd_roce_parse: unknown opcode 0x%02x", out->opcode);
    out->hdrs = h;
    uint32_t hl = MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + mlxd_roce_ext_len(out->opcode);
    if (hl + MLXD_ROCE_ICRC_LEN > tot)
        return mlxd_err(EMSGSIZE, "mlxd_roce_parse: %s needs %u header bytes, packet has %u",
                        mlxd_roce_opcode_name(out->opcode), hl + MLXD_ROCE_ICRC_LEN, tot);
    t += MLXD_ROCE_BTH_LEN;
    parse_ext_hdrs(t, h, out);
    uint32_t area = tot - hl - MLXD_ROCE_ICRC_LEN;
    if (out->pad > area)
        return mlxd_err(EPROTO, "mlxd_roce_parse: pad %u exceeds the %u-byte payload area",
                        out->pad, area);
    if (area && !(h & MLXD_ROCE_HAS_PAYLOAD))
        return mlxd_err(EPROTO, "mlxd_roce_parse: %s with %u payload bytes",
                        mlxd_roce_opcode_name(out->opcode), area);
    out->payload = b + hl;
    out->payload_len = area - out->pad;
    if (verify_icrc) {
        uint32_t c = mlxd_roce_icrc(b, tot);
        if (c != out->icrc)
            return mlxd_err(EBADMSG, "mlxd_roce_parse: iCRC 0x%08x, computed 0x%08x",
                            out->icrc, c);
    }
    return 0;
}
