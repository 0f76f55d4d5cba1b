/* structured.h: inputs built from the fuzzer's bytes that get past the header checks at once.
 * libpcap and the packet checks are not instrumented deeply enough for libFuzzer to find a pcap
 * magic number or consistent IPv4/UDP lengths on its own (from an empty corpus fuzz_pcap stayed
 * at coverage 8, fuzz_roce at 21: docs/reliability.md).  So the bytes choose the fields and these
 * helpers write valid headers around them; a few bytes then say what to break (the iCRC, a length,
 * the cut of the last record), so that the checks themselves are still exercised.
 *
 * struct fz is a cursor over the input: each take returns the next bytes, zeros once it is used up
 * (so every input, even an empty one, makes a packet). */
#ifndef MLXD_FUZZ_STRUCTURED_H
#define MLXD_FUZZ_STRUCTURED_H
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mlxd_capture.h"
#include "mlxd_hsb.h"
#include "mlxd_roce.h"

struct fz { const uint8_t *p; size_t n; };

static inline uint64_t fz_take(struct fz *z, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++) {
        v = v << 8 | (z->n ? *z->p : 0);
        if (z->n) { z->p++; z->n--; }
    }
    return v;
}

/* The RoCE opcodes a capture holds: UC and RC writes and sends (with and without immediate). */
static const uint8_t fz_opcodes[] = { 0x2a, 0x2b, 0x26, 0x27, 0x28, 0x29, 0x24, 0x25, 0x20, 0x0a, 0x0b,
                                      0x06, 0x08, 0x09, 0x04, 0x05 };

/* One RoCE v2 packet (from its IPv4 header) into out (cap bytes): opcode, PSN, QPN, rkey, a VA
 * (near a page grid or any 64-bit value), the immediate (page | psn << 12, or any), a payload
 * (the input's bytes, or an HSB metadata block whose numbers come from the input: bytes_written
 * near a frame size or any 64-bit value), valid iCRC unless the input says otherwise.  Returns
 * the length, or 0 when it does not fit. */
static inline size_t fz_packet(struct fz *z, uint8_t *out, size_t cap)
{
    struct mlxd_roce_pkt p;
    memset(&p, 0, sizeof p);
    unsigned ctl = (unsigned)fz_take(z, 2);
    p.opcode = fz_opcodes[ctl & 15];
    p.src_ip = 0x7f000001; p.dst_ip = 0x7f000002; p.src_port = 49152; p.dst_port = MLXD_ROCE_UDP_PORT;
    p.pkey = 0xffff;
    p.psn = (uint32_t)fz_take(z, 3) & 0xFFFFFF;
    p.dest_qp = (ctl & 0x10) ? (uint32_t)fz_take(z, 3) : 0x11;
    p.reth_rkey = (ctl & 0x20) ? (uint32_t)fz_take(z, 4) : 0x1234;
    uint32_t page = (uint32_t)fz_take(z, 2) & 0xFFF;
    if (ctl & 0x40)
        p.reth_va = fz_take(z, 8);                              /* any address */
    else                                                        /* a page grid of 128-byte steps */
        p.reth_va = 0x10000 + (uint64_t)page * (fz_take(z, 2) * 128) + fz_take(z, 1) * 128;
    uint32_t imm = (ctl & 0x80) ? (uint32_t)fz_take(z, 4) : mlxd_hsb_imm_make(page, p.psn, MLXD_HSB_IMM_12_20);
    p.imm = __builtin_bswap32(imm);
    uint8_t payload[4096];
    size_t plen;
    if (ctl & 0x100) {                                          /* a metadata block */
        struct mlxd_hsb_metadata md = { .psn = (ctl & 0x200) ? (uint32_t)fz_take(z, 4) : p.psn,
                                        .frame_number32 = (uint32_t)fz_take(z, 2) };
        md.bytes_written = (ctl & 0x400) ? fz_take(z, 8) : fz_take(z, 2) * 16;
        md.timestamp_s = fz_take(z, 1);
        mlxd_hsb_metadata_encode(&md, payload, MLXD_HSB_METADATA_SIZE);
        plen = MLXD_HSB_METADATA_SIZE;
    } else {
        plen = (size_t)fz_take(z, 2) % 1409;
        size_t have = z->n < plen ? z->n : plen;
        memcpy(payload, z->p, have);
        memset(payload + have, 0, plen - have);
        z->p += have; z->n -= have;
    }
    p.reth_len = (uint32_t)plen;
    if (!(mlxd_roce_opcode_hdrs(p.opcode) & MLXD_ROCE_HAS_PAYLOAD)) plen = 0;
    ssize_t n = mlxd_roce_build(out, cap, &p, payload, plen);
    if (n <= 0) return 0;
    if (ctl & 0x800) out[n - 1] ^= 1;                           /* a bad iCRC */
    if (ctl & 0x1000) {                                         /* one byte of the headers changed */
        unsigned at = (unsigned)fz_take(z, 1) % 60;
        if (at < (size_t)n) out[at] ^= (uint8_t)fz_take(z, 1);
    }
    return (size_t)n;
}

/* A pcap file (raw IPv4 link type, or one of the others the reader takes, with their headers) of
 * up to 16 packets into out (cap bytes): timestamps advance by input-chosen gaps (or jump
 * anywhere); the last record may be cut short.  Returns the file's length. */
static inline size_t fz_pcap(struct fz *z, uint8_t *out, size_t cap)
{
    static const uint32_t links[] = { 101, 1, 0, 113, 276, 228 };   /* raw, Ethernet, null, SLL, SLL2, IPv4 */
    unsigned ctl = (unsigned)fz_take(z, 1);
    uint32_t link = links[ctl % 6];
    size_t at = 0;
    if (cap < 24) return 0;
    uint32_t gh[6] = { 0xa1b2c3d4, 2u | 4u << 16, 0, 0, 65535, link };
    memcpy(out, gh, 24);
    at = 24;
    unsigned npk = 1 + (unsigned)fz_take(z, 1) % 16;
    uint64_t t_us = 0;
    for (unsigned k = 0; k < npk && at + 16 + 64 < cap; k++) {
        uint8_t pkt[4096 + 128];
        size_t ll = link == 1 ? 14 : link == 0 ? 4 : link == 113 ? 16 : link == 276 ? 20 : 0;
        memset(pkt, 0, ll);
        if (link == 1) { pkt[12] = 0x08; }
        else if (link == 0) { pkt[0] = 2; }
        else if (link == 113) { pkt[14] = 0x08; }
        else if (link == 276) { pkt[0] = 0x08; }
        size_t n = fz_packet(z, pkt + ll, sizeof pkt - ll);
        if (!n) continue;
        n += ll;
        unsigned g = (unsigned)fz_take(z, 1);
        t_us = (g & 0x80) ? fz_take(z, 4) * 1000000ull + fz_take(z, 3) : t_us + g * 1000u;
        size_t caplen = n;
        if (k + 1 == npk && (ctl & 0x80)) caplen += 1 + fz_take(z, 1) % 64;   /* cut short */
        if (at + 16 + n > cap) break;
        uint32_t rh[4] = { (uint32_t)(t_us / 1000000u), (uint32_t)(t_us % 1000000u), (uint32_t)caplen,
                           (uint32_t)caplen };
        memcpy(out + at, rh, 16);
        memcpy(out + at + 16, pkt, n);
        at += 16 + n;
    }
    return at;
}
/* True when the input is a pcap file already (libpcap's magic numbers, either byte order, micro-
 * and nanosecond; pcapng's section header): the seeds are used as they are. */
static inline bool fz_is_pcap(const uint8_t *d, size_t n)
{
    if (n < 4) return false;
    uint32_t m = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
    return m == 0xa1b2c3d4 || m == 0xd4c3b2a1 || m == 0xa1b23c4d || m == 0x4d3cb2a1 || m == 0x0a0d0d0a;
}

/* Writes the file into this process's memfd (made once) and returns a path libpcap can open. */
static inline const char *fz_memfd_file(const uint8_t *d, size_t n)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz.pcap", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || pwrite(fd, d, n, 0) != (ssize_t)n) abort();
    return path;
}
/* The capture of one input (fuzz_pcap, fuzz_capture): the input as a pcap file, or the file its
 * bytes describe (fz_pcap; when speed is not NULL the first byte picks a replay speed,
 * 2^-64..2^63, or 1.0), loaded with mlxd_capture_load.  Returns the capture, or NULL when the load
 * failed with one of its documented errors (any other error aborts: a finding). */
static inline struct mlxd_capture *fz_load(const uint8_t *data, size_t size, double *speed)
{
    static uint8_t built[1 << 17];
    if (speed) *speed = 1.0;
    if (!fz_is_pcap(data, size)) {
        struct fz z = { data, size };
        if (speed) {
            unsigned s = (unsigned)fz_take(&z, 1);
            *speed = s < 128 ? 1.0 : ldexp(1.0, (int)s - 192);
        }
        size = fz_pcap(&z, built, sizeof built);
        data = built;
    }
    struct mlxd_capture *c = NULL;
    int rc = mlxd_capture_load(fz_memfd_file(data, size), &c);
    if (rc && rc != -EIO && rc != -EPROTONOSUPPORT && rc != -ENODATA && rc != -ENOMEM) abort();
    return rc ? NULL : c;
}
#endif
