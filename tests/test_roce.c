/* The RoCE v2 codec (abi/mlxd_roce.h) against real captures and against hand-built packets.
 *
 * Captures: fixtures/roce-pcaps (copies, see its PROVENANCE.md and SHA256SUMS; NVIDIA sensor-bridge
 * emulator, every iCRC valid per
 * their README).  Every packet is parsed with its iCRC verified and rebuilt from the parsed
 * fields to the identical bytes.  Hand-built packets check the layouts of IB spec 9.2/9.3. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <stdint.h>
#include "mlxd_error.h"
#include "mlxd_roce.h"
#include "util.h"

static const char *pcap_dir(void)
{
    const char *d = getenv("MLXD_ROCE_PCAPS");
    return d && *d ? d : mlxd_test_path("fixtures/roce-pcaps");
}

struct cap_stats { unsigned pkts, reth, imm; };

/* qp and rkey from the "registers (summary)" line of the capture's companion .txt */
static void capture_regs(const char *pcap_path, unsigned *qp, unsigned *rkey)
{
    char txt[4096], line[1024];
    snprintf(txt, sizeof txt, "%.*s.txt", (int)(strlen(pcap_path) - 5), pcap_path);
    FILE *f = fopen(txt, "r");
    ck_assert_msg(f, "%s missing", txt);
    *qp = *rkey = 0xffffffff;
    while (fgets(line, sizeof line, f)) {
        const char *r = strstr(line, "registers (summary): ");
        if (r && sscanf(r, "registers (summary): qp=%x rkey=%x", qp, rkey) == 2) break;
    }
    fclose(f);
    ck_assert_uint_ne(*qp, 0xffffffff);
}

static void check_capture(const char *path, struct cap_stats *st)
{
    char err[PCAP_ERRBUF_SIZE];
    unsigned want_qp, want_rkey;
    capture_regs(path, &want_qp, &want_rkey);
    pcap_t *pc = pcap_open_offline(path, err);
    ck_assert_msg(pc, "%s: %s", path, err);
    ck_assert_int_eq(pcap_datalink(pc), DLT_EN10MB);
    struct pcap_pkthdr *ph;
    const u_char *data;
    int rc;
    static uint8_t rebuilt[70000];
    while ((rc = pcap_next_ex(pc, &ph, &data)) == 1) {
        ck_assert_uint_ge(ph->caplen, 14);
        ck_assert_uint_eq(data[12] << 8 | data[13], 0x0800);
        const uint8_t *ip = data + 14;
        size_t len = ph->caplen - 14;
        struct mlxd_roce_pkt p;
        int r = mlxd_roce_parse(ip, len, MLXD_ROCE_UDP_PORT, true, &p);
        ck_assert_msg(r == 0, "%s packet %u: parse %d", path, st->pkts, r);
        ck_assert(mlxd_roce_icrc_ok(ip, p.pkt_len));
        /* Facts from the README: UC WRITE Only (0x2a) / Only with Immediate (0x2b), P_Key
         * 0xffff, reserved byte 0xff, QP and rkey of the .txt, ImmDt = page | psn << 12. */
        ck_assert_msg(p.opcode == 0x2a || p.opcode == 0x2b, "opcode 0x%x", p.opcode);
        ck_assert_uint_eq(p.pkey, 0xffff);
        ck_assert_uint_eq(p.dest_qp, want_qp);
        ck_assert(p.hdrs & MLXD_ROCE_HAS_RETH);
        ck_assert_uint_eq(p.reth_rkey, want_rkey);
        ck_assert_uint_eq(p.reth_len, p.payload_len);
        st->reth++;
        if (p.opcode == 0x2b) {
            uint32_t imm_host = ntohl(p.imm);
            ck_assert_uint_eq(imm_host >> 12, p.psn & 0xfffff);
            st->imm++;
        }
        /* independent iCRC: zlib over the masked bytes, built here by hand */
        {
            static uint8_t m[70000];
            memset(m, 0xff, 8);
            memcpy(m + 8, ip, p.pkt_len - 4);
            m[8 + 1] = 0xff; m[8 + 8] = 0xff; m[8 + 10] = m[8 + 11] = 0xff;
            m[8 + 26] = m[8 + 27] = 0xff; m[8 + 28 + 4] = 0xff;
            uint32_t c = (uint32_t)crc32(0, m, p.pkt_len - 4 + 8);
            const uint8_t *t = ip + p.pkt_len - 4;
            ck_assert_uint_eq(c, (uint32_t)(t[0] | t[1] << 8 | t[2] << 16 | (uint32_t)t[3] << 24));
        }
        ssize_t n = mlxd_roce_build(rebuilt, sizeof rebuilt, &p, p.payload, p.payload_len);
        ck_assert_int_eq(n, p.pkt_len);
        ck_assert_msg(memcmp(rebuilt, ip, (size_t)n) == 0, "%s packet %u: rebuilt bytes differ",
                      path, st->pkts);
        /* corrupting any single byte of the transport part must fail the iCRC (those masked
         * out excluded) */
        uint8_t save = ip[MLXD_ROCE_BTH_OFF + 7];
        memcpy(rebuilt, ip, (size_t)n);
        rebuilt[MLXD_ROCE_BTH_OFF + 7] = (uint8_t)(save ^ 1);
        ck_assert_int_eq(mlxd_roce_parse(rebuilt, (size_t)n, 0, true, &p), -EBADMSG);
        rebuilt[MLXD_ROCE_BTH_OFF + 7] = save;
        rebuilt[8] ^= 0x5a;            /* TTL is masked: still valid */
        rebuilt[10] ^= 0x11;           /* and the checksum */
        ck_assert_int_eq(mlxd_roce_parse(rebuilt, (size_t)n, 0, true, &p), 0);
        st->pkts++;
    }
    ck_assert_int_eq(rc, PCAP_ERROR_BREAK);
    pcap_close(pc);
}

START_TEST(captures_parse_verify_rebuild)
{
    DIR *d = opendir(pcap_dir());
    ck_assert_msg(d != NULL, "roce: %s absent (the repo's fixtures/roce-pcaps)", pcap_dir());
    struct dirent *e;
    unsigned files = 0;
    struct cap_stats st = {0};
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".pcap")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", pcap_dir(), e->d_name);
        check_capture(path, &st);
        files++;
    }
    closedir(d);
    ck_assert_uint_eq(files, 5);
    /* README: 24 + 12 + 16 + 940 + 12 packets */
    ck_assert_uint_eq(st.pkts, 24 + 12 + 16 + 940 + 12);
    ck_assert_uint_gt(st.imm, 0);
}
END_TEST

/* The first packet of hsb_small_4k_3pages, checked field by field against the tshark
 * dissection (opcode 42, QP 0x123, PSN 0, VA 0x7f0000002000, rkey 0xabcdef, len 1408, iCRC
 * bytes 4e 5f 2b a9 as tshark prints them, i.e. the little-endian value 0xa92b5f4e). */
START_TEST(capture_first_packet_fields)
{
    char path[4096], err[PCAP_ERRBUF_SIZE];
    snprintf(path, sizeof path, "%s/hsb_small_4k_3pages.pcap", pcap_dir());
    pcap_t *pc = pcap_open_offline(path, err);
    ck_assert_msg(pc != NULL, "roce: %s: %s", path, err);
    struct pcap_pkthdr *ph;
    const u_char *data;
    ck_assert_int_eq(pcap_next_ex(pc, &ph, &data), 1);
    struct mlxd_roce_pkt p;
    ck_assert_int_eq(mlxd_roce_parse(data + 14, ph->caplen - 14, 4791, true, &p), 0);
    ck_assert_uint_eq(p.opcode, 42);
    ck_assert_str_eq(mlxd_roce_opcode_name(p.opcode), "UC RDMA WRITE Only");
    ck_assert_uint_eq(p.src_ip, 0x7f000001);
    ck_assert_uint_eq(p.src_port, 12288);
    ck_assert_uint_eq(p.dst_port, 4791);
    ck_assert_uint_eq(p.pkt_len, 1468);
    ck_assert_uint_eq(p.bth_resv, 0xff);
    ck_assert_uint_eq(p.psn, 0);
    ck_assert_uint_eq(p.reth_va, 0x00007f0000002000ull);
    ck_assert_uint_eq(p.reth_len, 1408);
    ck_assert_uint_eq(p.payload_len, 1408);
    ck_assert_uint_eq(p.icrc, 0xa92b5f4e);
    /* payload word 1 of frame 0 is (0 << 24) | 1, big-endian */
    ck_assert_uint_eq(p.payload[7], 1);
    pcap_close(pc);
}
END_TEST

/* A packet built by hand from the layouts of IB spec 9.2 (BTH), 9.3.2 (RETH), 9.3.4 (ImmDt). */
START_TEST(build_layout_write_only_imm)
{
    uint8_t buf[256], pl[5] = {1, 2, 3, 4, 5};
    struct mlxd_roce_pkt p = {
        .src_ip = 0x7f000002, .dst_ip = 0x7f000003, .src_port = 49152, .opcode = 0x0b,
        .se = true, .ackreq = true, .dest_qp = 0xabcdef, .psn = 0x123456,
        .reth_va = 0x1122334455667788ull, .reth_rkey = 0xcafe0001, .reth_len = 5,
    };
    uint8_t immb[4] = {0xde, 0xad, 0xbe, 0xef};
    memcpy(&p.imm, immb, 4);
    ssize_t n = mlxd_roce_build(buf, sizeof buf, &p, pl, sizeof pl);
    /* 20 IP + 8 UDP + 12 BTH + 16 RETH + 4 ImmDt + 5 payload + 3 pad + 4 iCRC */
    ck_assert_int_eq(n, 72);
    const uint8_t bth[12] = {0x0b, 0x80 | 3 << 4, 0xff, 0xff, 0, 0xab, 0xcd, 0xef,
                             0x80, 0x12, 0x34, 0x56};
    ck_assert_mem_eq(buf + 28, bth, 12);
    const uint8_t reth[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                              0xca, 0xfe, 0x00, 0x01, 0, 0, 0, 5};
    ck_assert_mem_eq(buf + 40, reth, 16);
    ck_assert_mem_eq(buf + 56, immb, 4);
    ck_assert_mem_eq(buf + 60, pl, 5);
    const uint8_t zero[3] = {0};
    ck_assert_mem_eq(buf + 65, zero, 3);
    ck_assert_uint_eq(buf[0], 0x45);
    ck_assert_uint_eq(buf[2] << 8 | buf[3], 72);
    ck_assert_uint_eq(buf[20 + 2] << 8 | buf[20 + 3], 4791);
    ck_assert_uint_eq(buf[20 + 4] << 8 | buf[20 + 5], 52);
    ck_assert_uint_eq(mlxd_roce_ipv4_csum(buf), 0);   /* a valid header sums to 0xffff */
    /* raw accessors agree with the layout */
    const uint8_t *b = mlxd_roce_bth(buf);
    ck_assert_uint_eq(mlxd_roce_bth_opcode(b), 0x0b);
    ck_assert(mlxd_roce_bth_se(b) && mlxd_roce_bth_ackreq(b));
    ck_assert_uint_eq(mlxd_roce_bth_pad(b), 3);
    ck_assert_uint_eq(mlxd_roce_bth_pkey(b), 0xffff);
    ck_assert_uint_eq(mlxd_roce_bth_dest_qp(b), 0xabcdef);
    ck_assert_uint_eq(mlxd_roce_bth_psn(b), 0x123456);
    ck_assert_uint_eq(mlxd_roce_reth_va(b + 12), 0x1122334455667788ull);
    ck_assert_uint_eq(mlxd_roce_reth_rkey(b + 12), 0xcafe0001);
    ck_assert_uint_eq(mlxd_roce_reth_len(b + 12), 5);
    ck_assert_uint_eq(mlxd_roce_icrc_stored(buf, (size_t)n), mlxd_roce_icrc(buf, (size_t)n));
    struct mlxd_roce_pkt q;
    ck_assert_int_eq(mlxd_roce_parse(buf, (size_t)n, 4791, true, &q), 0);
    ck_assert_uint_eq(q.payload_len, 5);
    ck_assert_uint_eq(q.pad, 3);
    ck_assert(q.se && q.ackreq);
    ck_assert_uint_eq(q.imm, p.imm);
    ck_assert_uint_eq(q.reth_va, p.reth_va);
    /* ACK: BTH + AETH, no payload allowed */
    struct mlxd_roce_pkt a = {.opcode = 0x11, .dest_qp = 7, .psn = 9,
                              .aeth_syndrome = MLXD_ROCE_AETH_RNR_NAK | 12, .aeth_msn = 0x10203};
    n = mlxd_roce_build(buf, sizeof buf, &a, NULL, 0);
    ck_assert_int_eq(n, 20 + 8 + 12 + 4 + 4);
    ck_assert_uint_eq(buf[40], 0x20 | 12);
    ck_assert_uint_eq(mlxd_roce_aeth_syndrome(buf + 40), 0x20 | 12);
    ck_assert_uint_eq(mlxd_roce_aeth_msn(buf + 40), 0x10203);
    ck_assert_int_eq(mlxd_roce_parse(buf, (size_t)n, 0, true, &q), 0);
    ck_assert_uint_eq(q.aeth_msn, 0x10203);
    ck_assert_int_eq(mlxd_roce_build(buf, sizeof buf, &a, pl, 1), -EINVAL);
    ck_assert_int_eq(mlxd_roce_build(buf, 40, &p, pl, 5), -ENOSPC);
    p.opcode = 0x2c;   /* UC has no READ */
    ck_assert_int_eq(mlxd_roce_build(buf, sizeof buf, &p, NULL, 0), -EINVAL);
}
END_TEST

/* Every truncation of a valid packet is refused as EMSGSIZE before any field past len is read
 * (run under ASan by `make sanitize` to prove the bounds). */
START_TEST(truncated_and_malformed)
{
    uint8_t pl[64], buf[256];
    for (unsigned i = 0; i < sizeof pl; i++) pl[i] = (uint8_t)i;
    struct mlxd_roce_pkt p = {.opcode = 0x0a, .dest_qp = 1, .reth_len = 64};
    ssize_t n = mlxd_roce_build(buf, sizeof buf, &p, pl, sizeof pl);
    ck_assert_int_gt(n, 0);
    struct mlxd_roce_pkt q;
    for (ssize_t l = 0; l < n; l++) {
        uint8_t *cut = malloc((size_t)l + 1);
        memcpy(cut, buf, (size_t)l);
        int r = mlxd_roce_parse(cut, (size_t)l, 0, true, &q);
        ck_assert_msg(r == -EMSGSIZE, "len %zd: %d", l, r);
        free(cut);
    }
    /* IP length shortened consistently (UDP too): the RETH no longer fits */
    uint8_t b2[256];
    memcpy(b2, buf, (size_t)n);
    b2[2] = 0; b2[3] = 20 + 8 + 12 + 8;
    b2[24] = 0; b2[25] = 8 + 12 + 8;
    ck_assert_int_eq(mlxd_roce_parse(b2, (size_t)n, 0, false, &q), -EMSGSIZE);
    memcpy(b2, buf, (size_t)n);
    b2[28 + 1] = 1;    /* TVer 1 */
    ck_assert_int_eq(mlxd_roce_parse(b2, (size_t)n, 0, false, &q), -EPROTO);
    memcpy(b2, buf, (size_t)n);
    b2[28] = 0xff;     /* reserved opcode */
    ck_assert_int_eq(mlxd_roce_parse(b2, (size_t)n, 0, false, &q), -EPROTO);
    memcpy(b2, buf, (size_t)n);
    b2[9] = 6;         /* TCP */
    ck_assert_int_eq(mlxd_roce_parse(b2, (size_t)n, 0, false, &q), -EPROTO);
    memcpy(b2, buf, (size_t)n);
    b2[22] = 0x12; b2[23] = 0x34;
    ck_assert_int_eq(mlxd_roce_parse(b2, (size_t)n, 4791, false, &q), -EPROTO);
    memcpy(b2, buf, (size_t)n);
    b2[100 - 50] ^= 0x80;   /* payload bit flip */
    ck_assert_int_eq(mlxd_roce_parse(b2, (size_t)n, 0, true, &q), -EBADMSG);
    ck_assert_int_eq(mlxd_roce_parse(b2, (size_t)n, 0, false, &q), 0);
    /* wrap_udp reproduces the header mlxd_roce_build made for the same datagram */
    memcpy(b2, buf, (size_t)n);
    ck_assert_int_eq(mlxd_roce_wrap_udp(b2, 0, 0, 0, 4791, (size_t)n - 28), 0);
    ck_assert_mem_eq(b2, buf, 28);
    ck_assert_int_eq(mlxd_roce_psn_diff(0, 0xffffff), 1);
    ck_assert_int_eq(mlxd_roce_psn_diff(0xffffff, 0), -1);
}
END_TEST

/* Lengths near SIZE_MAX must not wrap the length sum into a small "fits" (the IPv4 total
 * length is 16 bits: every packet is at most 65535 bytes, RFC 791); nothing is written, and
 * each function's message names that function. */
START_TEST(build_refuses_huge_lengths_without_overflow)
{
    static uint8_t buf[2048], canary[2048];
    memset(buf, 0xa5, sizeof buf);
    memcpy(canary, buf, sizeof buf);
    uint8_t src[8] = {0};
    struct mlxd_roce_pkt p = {.opcode = MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_SEND_ONLY};
    size_t huge[] = { SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 2, SIZE_MAX - 3, SIZE_MAX - 47,
                      SIZE_MAX - 65535, 65536 };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        mlxd_err_clear();
        ck_assert_int_eq(mlxd_roce_build(buf, sizeof buf, &p, src, huge[i]), -EINVAL);
        ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_roce_build: ", 17), "%s", mlxd_errmsg());
        ck_assert_mem_eq(buf, canary, sizeof buf);
        mlxd_err_clear();
        ck_assert_int_eq(mlxd_roce_build_hdrs(buf, sizeof buf, &p, huge[i]), -EINVAL);
        ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_roce_build_hdrs: ", 22), "%s", mlxd_errmsg());
        ck_assert_mem_eq(buf, canary, sizeof buf);
    }
    /* The boundary: SEND Only has 20 + 8 + 12 header bytes and a 4-byte iCRC, the payload is
     * padded to 4: 65488 bytes make 65532; 65489..65491 would make 65536. */
    uint8_t *big = calloc(1, 65536), *pl = calloc(1, 65536);
    ck_assert(big && pl);
    ck_assert_int_eq(mlxd_roce_build(big, 65536, &p, pl, 65488), 65532);
    ck_assert_uint_eq(big[2] << 8 | big[3], 65532);
    ck_assert_int_eq(mlxd_roce_build(big, 65536, &p, pl, 65489), -EINVAL);
    ck_assert_int_eq(mlxd_roce_build_hdrs(big, 65536, &p, 65488), 40);
    ck_assert_int_eq(mlxd_roce_build_hdrs(big, 65536, &p, 65491), -EINVAL);
    free(big);
    free(pl);
}
END_TEST

/* mlxd_roce_build_hdrs names itself, not mlxd_roce_build (exact text). */
START_TEST(build_hdrs_messages_name_build_hdrs)
{
    uint8_t buf[64];
    struct mlxd_roce_pkt p = {.opcode = MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_SEND_ONLY};
    /* 20 IP + 8 UDP + 12 BTH + 8 payload + 0 pad + 4 iCRC = 52 */
    ck_assert_int_eq(mlxd_roce_build_hdrs(buf, 10, &p, 8), -ENOSPC);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_roce_build_hdrs: 10-byte buffer, packet needs 52");
    ck_assert_int_eq(mlxd_roce_build_hdrs(buf, sizeof buf, NULL, 0), -EINVAL);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_roce_build_hdrs: NULL packet");
    ck_assert_int_eq(mlxd_roce_build_hdrs(NULL, sizeof buf, &p, 0), -EINVAL);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_roce_build_hdrs: NULL buffer");
    p.opcode = 0xff;
    ck_assert_int_eq(mlxd_roce_build_hdrs(buf, sizeof buf, &p, 0), -EINVAL);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_roce_build_hdrs: opcode 0xff is not RC/UC");
    /* and mlxd_roce_build keeps its own name */
    p.opcode = MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_SEND_ONLY;
    ck_assert_int_eq(mlxd_roce_build(buf, 10, &p, buf, 8), -ENOSPC);
    ck_assert_str_eq(mlxd_errmsg(), "mlxd_roce_build: 10-byte buffer, packet needs 52");
}
END_TEST

/* Below 44 bytes (IPv4 20 + UDP 8 + BTH 12 + iCRC 4, IB spec annex A17) there is no packet:
 * icrc_fill writes nothing (before or inside the buffer), icrc returns 0, icrc_ok is false.  At
 * 44 bytes the iCRC is CRC-32 over 8 x 0xff and the masked IPv4/UDP/BTH (A17.8), stored
 * little-endian in the last 4 bytes. */
START_TEST(icrc_below_minimum_length_does_nothing)
{
    uint8_t mem[4 + 64], ref[4 + 64];
    for (unsigned i = 0; i < sizeof mem; i++) mem[i] = (uint8_t)(0x30 + i);
    memcpy(ref, mem, sizeof mem);
    uint8_t *pkt = mem + 4;
    ck_assert_uint_eq(MLXD_ROCE_MIN_PKT_LEN, 44);
    for (size_t l = 0; l < 44; l++) {
        mlxd_roce_icrc_fill(pkt, l);
        ck_assert_msg(!memcmp(mem, ref, sizeof mem), "icrc_fill(%zu) wrote", l);
        ck_assert_uint_eq(mlxd_roce_icrc(pkt, l), 0);
        ck_assert(!mlxd_roce_icrc_ok(pkt, l));
    }
    /* 44 bytes: SEND Middle, BTH only, no payload */
    struct mlxd_roce_pkt p = {.opcode = MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_SEND_MIDDLE,
                              .dest_qp = 0x12, .psn = 0x345, .tos = 0x10, .ttl = 9};
    ck_assert_int_eq(mlxd_roce_build(pkt, 64, &p, NULL, 0), 44);
    uint8_t m[8 + 40];
    memset(m, 0xff, 8);
    memcpy(m + 8, pkt, 40);
    m[8 + 1] = 0xff; m[8 + 8] = 0xff; m[8 + 10] = m[8 + 11] = 0xff;   /* TOS, TTL, csum */
    m[8 + 26] = m[8 + 27] = 0xff;                                       /* UDP csum */
    m[8 + 28 + 4] = 0xff;                                               /* BTH byte 4 */
    uint32_t want = (uint32_t)crc32(0, m, sizeof m);
    memset(pkt + 40, 0, 4);
    mlxd_roce_icrc_fill(pkt, 44);
    const uint8_t le[4] = {(uint8_t)want, (uint8_t)(want >> 8), (uint8_t)(want >> 16),
                           (uint8_t)(want >> 24)};
    ck_assert_mem_eq(pkt + 40, le, 4);
    ck_assert_uint_eq(mlxd_roce_icrc(pkt, 44), want);
    ck_assert(mlxd_roce_icrc_ok(pkt, 44));
    ck_assert_mem_eq(mem, ref, 4);   /* nothing before the packet */
}
END_TEST

/* The iCRC as annex A17.8 defines it, byte by byte with zlib: CRC-32 of 8 x 0xff, the IPv4, UDP
 * and BTH headers with TOS, TTL, the IP checksum, the UDP checksum and BTH byte 4 set to ones,
 * then everything after the BTH up to the iCRC. */
static uint32_t spec_icrc(const uint8_t *pkt, size_t pkt_len)
{
    static uint8_t m[8 + 70000];
    memset(m, 0xff, 8);
    memcpy(m + 8, pkt, pkt_len - 4);
    m[8 + 1] = 0xff; m[8 + 8] = 0xff; m[8 + 10] = m[8 + 11] = 0xff;
    m[8 + 26] = m[8 + 27] = 0xff;
    m[8 + 28 + 4] = 0xff;
    return (uint32_t)crc32(0, m, (uInt)(8 + pkt_len - 4));
}

/* The folded CRC (every head alignment, every payload tail, every header set the generator and
 * the emulator send) against the byte-wise definition above; and mlxd_roce_icrc_parts, which
 * takes the headers and the payload from two places, against both. */
START_TEST(icrc_folded_equals_definition)
{
    static uint8_t buf[70000], pl[9000];
    for (size_t i = 0; i < sizeof pl; i++) pl[i] = (uint8_t)(i * 7 + (i >> 8));
    const uint8_t ops[] = {
        MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_ONLY, MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_ONLY_IMM,
        MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_SEND_MIDDLE, MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_SEND_ONLY_IMM,
        MLXD_ROCE_TRANSPORT_RC | MLXD_ROCE_OP_READ_RESPONSE_FIRST,
    };
    const size_t lens[] = {0, 1, 2, 3, 4, 5, 15, 16, 17, 24, 31, 32, 33, 47, 48, 63, 64, 65, 127, 128, 129,
                           1408, 4095, 4096, 4097, 8191, 8192};
    unsigned checked = 0;
    for (size_t o = 0; o < sizeof ops; o++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            struct mlxd_roce_pkt p = {.src_ip = 0x7f000002, .dst_ip = 0x7f000001, .src_port = 50000 + (uint16_t)l,
                                      .opcode = ops[o], .dest_qp = 0x1234, .psn = (uint32_t)(l * 31),
                                      .reth_va = 0x7f0012345678ull, .reth_rkey = 0xabcd, .reth_len = (uint32_t)lens[l],
                                      .aeth_syndrome = 0x1f, .aeth_msn = 7, .tos = 0x28, .ttl = 3};
            p.imm = 0x11223344;
            ssize_t n = mlxd_roce_build(buf, sizeof buf, &p, pl, lens[l]);
            ck_assert_int_gt(n, 0);
            uint32_t want = spec_icrc(buf, (size_t)n);
            ck_assert_msg(mlxd_roce_icrc(buf, (size_t)n) == want, "op 0x%x len %zu", ops[o], lens[l]);
            ck_assert_uint_eq(mlxd_roce_icrc_stored(buf, (size_t)n), want);
            /* the same packet from two places: headers here, payload there */
            uint8_t hdrs[MLXD_ROCE_MAX_HDR_LEN];
            ssize_t hl = mlxd_roce_build_hdrs(buf, sizeof buf, &p, lens[l]);
            ck_assert_int_gt(hl, 0);
            memcpy(hdrs, buf, (size_t)hl);
            ck_assert_msg(mlxd_roce_icrc_parts(hdrs, (size_t)hl, pl, lens[l]) == want, "parts: op 0x%x len %zu",
                          ops[o], lens[l]);
            checked++;
        }
    ck_assert_uint_eq(checked, sizeof ops * (sizeof lens / sizeof lens[0]));
    /* below IPv4 + UDP + BTH there are no headers: 0, nothing read */
    ck_assert_uint_eq(mlxd_roce_icrc_parts(buf, 39, pl, 4), 0);
}
END_TEST

Suite *roce_suite(void)
{
    Suite *s = suite_create("roce");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, captures_parse_verify_rebuild);
    tcase_add_test(tc, capture_first_packet_fields);
    tcase_add_test(tc, build_layout_write_only_imm);
    tcase_add_test(tc, truncated_and_malformed);
    tcase_add_test(tc, build_refuses_huge_lengths_without_overflow);
    tcase_add_test(tc, build_hdrs_messages_name_build_hdrs);
    tcase_add_test(tc, icrc_below_minimum_length_does_nothing);
    tcase_add_test(tc, icrc_folded_equals_definition);
    suite_add_tcase(s, tc);
    return s;
}
