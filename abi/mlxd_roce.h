/* mlxd_roce.h: the RoCE v2 packet codec (IPv4 + UDP + IB transport headers + iCRC).
 *
 * One packet, as this codec sees it, starts at the IPv4 header (no Ethernet header) and ends
 * with the 4-byte invariant CRC:
 *
 *     IPv4 (20 B, no options) | UDP (8 B) | BTH (12 B) | [RETH 16 | AETH 4 | ImmDt 4 | IETH 4 |
 *     AtomicETH 28 | AtomicAckETH 8] | payload | pad (0..3 B) | iCRC (4 B)
 *
 * Which extension headers a packet carries is fixed by its BTH opcode (IB spec vol. 1,
 * section 9.2 "Base Transport Header" and table 38 / 9.3 "packet header layouts").  Multi-byte
 * header fields are big-endian on the wire; this codec presents them in host order.  ImmDt is
 * the exception: mlx5 CQEs and WQEs carry the immediate as the wire bytes, so `imm` is kept as
 * the raw big-endian 32-bit word (copy it as-is into a CQE's imm_inval_pkey).
 *
 * iCRC (IB spec annex A17 "RoCEv2", section A17.8; compare Linux drivers/infiniband/sw/rxe):
 * CRC-32 (the IEEE 802.3 polynomial, zlib's crc32) over 8 bytes of 0xFF (the masked LRH
 * stand-in) followed by the IPv4 header with TOS, TTL and header checksum replaced by ones,
 * the UDP header with its checksum replaced by ones, the BTH with its byte 4 (reserved /
 * FECN/BECN) replaced by ones, then everything after the BTH up to the iCRC.  The 32-bit
 * result is stored little-endian on the wire (as Linux soft-RoCE, drivers/infiniband/sw/rxe,
 * and the captures of Holoscan Sensor Bridge traffic in fixtures/roce-pcaps/ do).
 *
 * Packets received through a UDP socket have no IP header in hand: mlxd_roce_wrap_udp() writes
 * the IPv4 + UDP headers that the sender's kernel sent (IP ID 0, don't-fragment, as Linux sends
 * for an unconnected DF socket and as the captures show) in front of the UDP payload, so that
 * the iCRC can be verified over the same bytes.
 *
 * Thread rules: every function is reentrant; no state, no allocation, no system calls.
 * Errors: functions that can fail return a negative errno (and record a message with
 * mlxd_err(), abi/mlxd_error.h).  None prints.
 */
#ifndef MLXD_ROCE_H
#define MLXD_ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLXD_ROCE_UDP_PORT     4791u  /* IANA RoCE v2 port (IB spec A17.3) */
#define MLXD_ROCE_IPV4_LEN     20u
#define MLXD_ROCE_UDP_LEN      8u
#define MLXD_ROCE_BTH_LEN      12u
#define MLXD_ROCE_RETH_LEN     16u
#define MLXD_ROCE_AETH_LEN     4u
#define MLXD_ROCE_IMMDT_LEN    4u
#define MLXD_ROCE_IETH_LEN     4u
#define MLXD_ROCE_ATOMICETH_LEN 28u
#define MLXD_ROCE_ATOMICACKETH_LEN 8u
#define MLXD_ROCE_DETH_LEN     8u   /* Q_Key 4, reserved 1, source QP 3 (IB spec 9.3.3) */
#define MLXD_ROCE_ICRC_LEN     4u
/* Offset of the BTH from the start of a packet (IPv4 + UDP). */
#define MLXD_ROCE_BTH_OFF      (MLXD_ROCE_IPV4_LEN + MLXD_ROCE_UDP_LEN)
/* Largest header stack: IPv4 + UDP + BTH + RETH + ImmDt (write only with immediate). */
/* Smallest RoCE v2 packet: IPv4 20 + UDP 8 + BTH 12 + iCRC 4 = 44 bytes (IB spec annex A17). */
#define MLXD_ROCE_MIN_PKT_LEN  (MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + MLXD_ROCE_ICRC_LEN)
#define MLXD_ROCE_MAX_HDR_LEN  (MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + MLXD_ROCE_ATOMICETH_LEN)
#define MLXD_ROCE_PSN_MASK     0xffffffu
#define MLXD_ROCE_QPN_MASK     0xffffffu

/* Transport service of an opcode: bits 7:5 (IB spec 9.2.1, table 38). */
enum mlxd_roce_transport {
    MLXD_ROCE_TRANSPORT_RC = 0x00, MLXD_ROCE_TRANSPORT_UC = 0x20, MLXD_ROCE_TRANSPORT_RD = 0x40,
    MLXD_ROCE_TRANSPORT_UD = 0x60, MLXD_ROCE_TRANSPORT_CNP = 0x80,
};

/* Operation: bits 4:0 of the opcode (IB spec table 38).  opcode = transport | operation. */
enum mlxd_roce_op {
    MLXD_ROCE_OP_SEND_FIRST = 0x00, MLXD_ROCE_OP_SEND_MIDDLE = 0x01,
    MLXD_ROCE_OP_SEND_LAST = 0x02, MLXD_ROCE_OP_SEND_LAST_IMM = 0x03,
    MLXD_ROCE_OP_SEND_ONLY = 0x04, MLXD_ROCE_OP_SEND_ONLY_IMM = 0x05,
    MLXD_ROCE_OP_WRITE_FIRST = 0x06, MLXD_ROCE_OP_WRITE_MIDDLE = 0x07,
    MLXD_ROCE_OP_WRITE_LAST = 0x08, MLXD_ROCE_OP_WRITE_LAST_IMM = 0x09,
    MLXD_ROCE_OP_WRITE_ONLY = 0x0a, MLXD_ROCE_OP_WRITE_ONLY_IMM = 0x0b,
    MLXD_ROCE_OP_READ_REQUEST = 0x0c, MLXD_ROCE_OP_READ_RESPONSE_FIRST = 0x0d,
    MLXD_ROCE_OP_READ_RESPONSE_MIDDLE = 0x0e, MLXD_ROCE_OP_READ_RESPONSE_LAST = 0x0f,
    MLXD_ROCE_OP_READ_RESPONSE_ONLY = 0x10, MLXD_ROCE_OP_ACKNOWLEDGE = 0x11,
    MLXD_ROCE_OP_ATOMIC_ACKNOWLEDGE = 0x12, MLXD_ROCE_OP_COMPARE_SWAP = 0x13,
    MLXD_ROCE_OP_FETCH_ADD = 0x14, MLXD_ROCE_OP_SEND_LAST_INV = 0x16,
    MLXD_ROCE_OP_SEND_ONLY_INV = 0x17,
};

/* Extension-header presence bits (mlxd_roce_opcode_hdrs()). */
enum {
    MLXD_ROCE_HAS_RETH = 1u << 0, MLXD_ROCE_HAS_AETH = 1u << 1, MLXD_ROCE_HAS_IMMDT = 1u << 2,
    MLXD_ROCE_HAS_IETH = 1u << 3, MLXD_ROCE_HAS_ATOMICETH = 1u << 4,
    MLXD_ROCE_HAS_ATOMICACKETH = 1u << 5, MLXD_ROCE_HAS_DETH = 1u << 6,
    MLXD_ROCE_HAS_PAYLOAD = 1u << 8,   /* the opcode may carry payload */
};

/* AETH syndrome (IB spec 9.7.5.2.1, table 44): bits 7:5 = kind, 4:0 = value. */
#define MLXD_ROCE_AETH_ACK        0x00u  /* | credit count (0x1f = invalid/unlimited) */
#define MLXD_ROCE_AETH_RNR_NAK    0x20u  /* | RNR timer code (IB spec table 45) */
#define MLXD_ROCE_AETH_NAK        0x60u  /* | NAK code below */
#define MLXD_ROCE_NAK_PSN_SEQ     0x00u  /* PSN sequence error */
#define MLXD_ROCE_NAK_INV_REQ     0x01u  /* invalid request */
#define MLXD_ROCE_NAK_REM_ACCESS  0x02u  /* remote access error */
#define MLXD_ROCE_NAK_REM_OP      0x03u  /* remote operational error */
#define MLXD_ROCE_NAK_INV_RD_REQ  0x04u  /* invalid RD request */

/* One packet's fields, host order (except imm).  Filled by mlxd_roce_parse(); read by
 * mlxd_roce_build() (which ignores payload/payload_len/pkt_len/icrc and the `hdrs` bits: the
 * opcode decides the headers). */
struct mlxd_roce_pkt {
    /* IPv4 */
    uint32_t src_ip, dst_ip;     /* host order: 127.0.0.1 = 0x7f000001 */
    uint8_t  tos, ttl;           /* build: ttl 0 means 64 */
    uint16_t ip_id;              /* 0 (what Linux sends on an unconnected DF UDP socket) */
    /* UDP */
    uint16_t src_port, dst_port; /* build: dst_port 0 means 4791 */
    /* BTH */
    uint8_t  opcode;             /* transport | op */
    bool     se, migreq, ackreq;
    uint8_t  pad;                /* pad count (0..3): bytes of padding after the payload */
    uint8_t  tver;               /* transport header version: 0 */
    uint16_t pkey;               /* build: 0 means 0xffff (default P_Key) */
    uint8_t  bth_resv;           /* BTH byte 4 (reserved in RoCE; masked out of the iCRC) */
    uint32_t dest_qp;            /* 24 bits */
    uint32_t psn;                /* 24 bits */
    /* extension headers (valid per `hdrs`) */
    uint32_t hdrs;               /* MLXD_ROCE_HAS_* of the opcode */
    uint64_t reth_va;
    uint32_t reth_rkey, reth_len;/* DMA length in bytes */
    uint8_t  aeth_syndrome;
    uint32_t aeth_msn;           /* 24 bits */
    uint32_t imm;                /* ImmDt, raw wire word (big-endian bytes as a uint32_t) */
    uint32_t ieth_rkey;
    uint64_t atomic_va, atomic_swap_add, atomic_compare, atomic_orig;
    uint32_t atomic_rkey;
    uint32_t deth_qkey, deth_src_qp;   /* UD: DETH Q_Key and source QP (24 bits) */
    /* parse results */
    const uint8_t *payload;      /* into the parsed buffer */
    uint32_t payload_len;        /* bytes, excluding the pad */
    uint32_t pkt_len;            /* IPv4 total length = bytes from the IP header to the iCRC end */
    uint32_t icrc;               /* as read from the wire (little-endian decode) */
};

/* Headers (MLXD_ROCE_HAS_*) that an opcode carries, or 0 for an opcode this codec does not
 * know (reserved opcodes, RD, CNP). */
uint32_t mlxd_roce_opcode_hdrs(uint8_t opcode);
/* "RC RDMA WRITE Only" style name, or "reserved 0x.." for an unknown one (static storage for
 * the known ones; a per-thread buffer for the unknown ones). */
const char *mlxd_roce_opcode_name(uint8_t opcode);
/* Bytes of headers after the BTH for an opcode (sum of its extension headers). */
uint32_t mlxd_roce_ext_len(uint8_t opcode);

/* Builds a complete packet (IPv4 + UDP + BTH + the opcode's headers + payload + pad + iCRC) into
 * buf.  payload may be NULL only if len is 0.  The pad count is computed (len rounded to 4) and
 * p->pad is ignored; the IPv4 header checksum is filled; the UDP checksum is 0 (allowed by
 * A17.3 for IPv4).  Returns the packet length in bytes, or (nothing written to buf):
 *   -EINVAL  buf or p NULL, payload NULL with len > 0, an unknown opcode, a payload on an
 *            opcode that carries none, or len + headers + pad + iCRC > 65535 (any len up to
 *            SIZE_MAX is checked without overflow);
 *   -ENOSPC  cap too small for the packet.
 * Messages name mlxd_roce_build. */
ssize_t mlxd_roce_build(void *buf, size_t cap, const struct mlxd_roce_pkt *p,
                        const void *payload, size_t len);

/* Writes only the headers (IPv4 .. last extension header) for a packet whose payload is len
 * bytes; the caller puts the payload (and pad) after them and then calls
 * mlxd_roce_icrc_fill().  Returns the header length in bytes; errors as mlxd_roce_build()
 * (without the payload check), with messages that name mlxd_roce_build_hdrs. */
ssize_t mlxd_roce_build_hdrs(void *buf, size_t cap, const struct mlxd_roce_pkt *p, size_t len);

/* Parses one packet that starts at its IPv4 header; len = bytes available (the IP total length
 * may be shorter: trailing bytes, e.g. Ethernet padding, are ignored).  Every length is checked
 * against len before it is read.  With verify_icrc, the iCRC is checked too.  Returns 0, or:
 *   -EINVAL    NULL argument;
 *   -EMSGSIZE  truncated: a header, the payload or the iCRC extends past len or the IP/UDP
 *              lengths disagree;
 *   -EPROTO    not IPv4/UDP without IP options, not a fragment-free datagram, UDP destination not
 *              `udp_port` (0 = any), BTH TVer != 0, pad larger than the payload area, or an
 *              unknown opcode;
 *   -EBADMSG   iCRC mismatch (out is filled all the same). */
int mlxd_roce_parse(const void *buf, size_t len, uint16_t udp_port, bool verify_icrc,
                    struct mlxd_roce_pkt *out);

/* Writes IPv4 + UDP headers (28 bytes, IP ID 0, DF, TTL 64, UDP checksum 0) into buf, for a
 * UDP payload of udp_len bytes that the caller has placed (or will place) at buf + 28.
 * Addresses and ports in host order.  Returns 0 or -EINVAL (udp_len > 65507). */
int mlxd_roce_wrap_udp(void *buf, uint32_t src_ip, uint16_t src_port, uint32_t dst_ip,
                       uint16_t dst_port, size_t udp_len);

/* The iCRC of the packet at buf (pkt_len bytes, from the IPv4 header to the end of the iCRC
 * field; the iCRC field itself is not read).  Does not modify buf.  buf must not be NULL and
 * must hold pkt_len bytes.  pkt_len below MLXD_ROCE_MIN_PKT_LEN (44: IPv4 20 + UDP 8 + BTH 12 +
 * iCRC 4, IB spec annex A17) is not a packet: nothing is read and 0 is returned (0 is also a
 * possible iCRC, so check the length first if it matters; mlxd_roce_icrc_ok() does). */
uint32_t mlxd_roce_icrc(const void *buf, size_t pkt_len);
/* The iCRC of a packet held in two pieces, as a sender that gathers it (sendmsg with an iovec
 * per piece) has it: hdrs = the IPv4 header .. the last extension header, hdr_len bytes (what
 * mlxd_roce_build_hdrs() wrote and returned), then len bytes of payload at payload, then the pad
 * of (4 - len % 4) % 4 zero bytes the BTH announces.  The same value as mlxd_roce_icrc() of the
 * packet laid out in one buffer; store it little-endian after the pad.  hdrs must not be NULL;
 * payload may be NULL when len is 0.  hdr_len below 40 (IPv4 + UDP + BTH) is not a packet:
 * nothing is read and 0 is returned. */
uint32_t mlxd_roce_icrc_parts(const void *hdrs, size_t hdr_len, const void *payload, size_t len);
/* Computes the iCRC and stores it (little-endian) in the last 4 bytes of the packet.  buf must
 * not be NULL.  pkt_len below MLXD_ROCE_MIN_PKT_LEN (44): does nothing (buf is not touched). */
void mlxd_roce_icrc_fill(void *buf, size_t pkt_len);
/* true if the stored iCRC is right; false for pkt_len below MLXD_ROCE_MIN_PKT_LEN (44).  buf
 * must not be NULL. */
bool mlxd_roce_icrc_ok(const void *buf, size_t pkt_len);

/* Standard IPv4 header checksum of the 20-byte header at hdr (the checksum field included as
 * is: fill it with 0 first when computing).  hdr must not be NULL and must hold 20 bytes. */
uint16_t mlxd_roce_ipv4_csum(const void *hdr);

/* PSN arithmetic (24-bit, IB spec 9.7.1): a - b in [-2^23, 2^23). */
static inline int32_t mlxd_roce_psn_diff(uint32_t a, uint32_t b)
{
    return (int32_t)((a - b) << 8) >> 8;
}

/* ---- Field accessors on raw bytes, for hot paths that have already bounds-checked the packet
 * (e.g. with mlxd_roce_parse, or by its length: BTH at MLXD_ROCE_BTH_OFF, extension headers
 * right after it in the order RETH, AETH, ImmDt).  `bth` points at the 12-byte BTH; `reth` at
 * a 16-byte RETH; `aeth` at a 4-byte AETH.  Values in host order (ImmDt: the raw wire word). */
static inline const uint8_t *mlxd_roce_bth(const void *pkt)
{
    return (const uint8_t *)pkt + MLXD_ROCE_BTH_OFF;
}
static inline uint8_t mlxd_roce_bth_opcode(const uint8_t *bth) { return bth[0]; }
static inline bool mlxd_roce_bth_se(const uint8_t *bth) { return bth[1] & 0x80; }
static inline uint8_t mlxd_roce_bth_pad(const uint8_t *bth) { return (bth[1] >> 4) & 3; }
static inline uint16_t mlxd_roce_bth_pkey(const uint8_t *bth)
{
    return (uint16_t)(bth[2] << 8 | bth[3]);
}
static inline uint32_t mlxd_roce_bth_dest_qp(const uint8_t *bth)
{
    return (uint32_t)bth[5] << 16 | (uint32_t)bth[6] << 8 | bth[7];
}
static inline bool mlxd_roce_bth_ackreq(const uint8_t *bth) { return bth[8] & 0x80; }
static inline uint32_t mlxd_roce_bth_psn(const uint8_t *bth)
{
    return (uint32_t)bth[9] << 16 | (uint32_t)bth[10] << 8 | bth[11];
}
static inline uint64_t mlxd_roce_reth_va(const uint8_t *reth)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | reth[i];
    return v;
}
static inline uint32_t mlxd_roce_reth_rkey(const uint8_t *reth)
{
    return (uint32_t)reth[8] << 24 | (uint32_t)reth[9] << 16 | (uint32_t)reth[10] << 8 | reth[11];
}
static inline uint32_t mlxd_roce_reth_len(const uint8_t *reth)
{
    return (uint32_t)reth[12] << 24 | (uint32_t)reth[13] << 16 | (uint32_t)reth[14] << 8 | reth[15];
}
static inline uint8_t mlxd_roce_aeth_syndrome(const uint8_t *aeth) { return aeth[0]; }
static inline uint32_t mlxd_roce_aeth_msn(const uint8_t *aeth)
{
    return (uint32_t)aeth[1] << 16 | (uint32_t)aeth[2] << 8 | aeth[3];
}
/* The iCRC as stored in the last 4 bytes of a packet of pkt_len bytes (little-endian).  No
 * check: pkt must not be NULL and pkt_len must be at least MLXD_ROCE_MIN_PKT_LEN. */
static inline uint32_t mlxd_roce_icrc_stored(const void *pkt, size_t pkt_len)
{
    const uint8_t *t = (const uint8_t *)pkt + pkt_len - MLXD_ROCE_ICRC_LEN;
    return (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
}

#ifdef __cplusplus
}
#endif
#endif
