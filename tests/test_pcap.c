/* Captures of NVIDIA's sensor-bridge emulator (fixtures/roce-pcaps): loading, frame grouping,
 * geometry inference, payload pattern, packet rewriting, and the generator's packet format.
 * Expected values: the `registers (summary)` and `independent check` sections of each .txt
 * sidecar, and fixtures/roce-pcaps/README.md. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mlxd_capture.h"
#include "mlxd_error.h"
#include "util.h"

struct expect {
    const char *file;
    uint32_t qpn, rkey;
    uint64_t va, page_size, frame_size, md_off;
    unsigned pages, frames, packets;
    bool separate;
    uint32_t psn0, psn_step;           /* PSN of frame f's 0x2B = psn0 + f * psn_step */
    unsigned check_frame;              /* a frame whose timestamps the sidecar lists */
    uint64_t ts_s; uint32_t ts_ns; uint64_t md_s; uint32_t md_ns;
};

static const struct expect E[] = {
    { "hsb_small_4k_3pages", 0x123, 0x00abcdef, 0x7f0000000000ull, 8192, 4096, 4096, 3, 6, 24, true,
      3, 4, 2, 1795933373, 813197487, 1795933373, 813464053 },
    { "hsb_small_3000_embedded", 0x456, 0x12345678, 0x7f1000000000ull, 4096, 3000, 3072, 2, 4, 12, false,
      2, 3, 0, 1795933381, 36113126, 1795933381, 36201928 },
    { "hsb_sepmeta_3000", 0x456, 0x12345678, 0x7f1000000000ull, 4096, 3000, 3072, 2, 4, 16, true,
      3, 4, 3, 1795933396, 6313704, 1795933396, 6414684 },
    { "hsb_medium_64k_4pages", 0x789, 0x0badf00d, 0x7f2000000000ull, 69632, 65536, 65536, 4, 20, 940, false,
      46, 47, 19, 1795933386, 667966312, 1795933386, 668393637 },
};

static struct mlxd_capture *load(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/roce-pcaps/%s.pcap", name);
    struct mlxd_capture *c = NULL;
    int rc = mlxd_capture_load(mlxd_test_path(rel), &c);
    ck_assert_msg(rc == 0, "%s: %d %s", rel, rc, mlxd_errmsg());
    return c;
}

/* Reassembles frame f of c (its packets' payloads at va - frame va) into a buffer. */
static uint8_t *reassemble(const struct mlxd_capture *c, size_t f, uint64_t size)
{
    uint8_t *b = calloc(1, size);
    const struct mlxd_capture_frame *fr = &c->frames[f];
    for (uint32_t k = 0; k < fr->count; k++) {
        const struct mlxd_roce_pkt *h = &c->pkts[fr->first + k].hdr;
        uint64_t off = h->reth_va - fr->va;
        for (uint32_t j = 0; j < h->payload_len && off + j < size; j++) b[off + j] = h->payload[j];
    }
    return b;
}

START_TEST(captures_geometry_and_frames)
{
    const struct expect *e = &E[_i];
    struct mlxd_capture *c = load(e->file);
    const struct mlxd_capture_geometry *g = &c->geo;
    ck_assert_int_eq(c->linktype, 1);                   /* Ethernet */
    ck_assert_uint_eq(c->npackets, e->packets);
    ck_assert_uint_eq(c->bad_icrc, 0);                  /* "iCRC valid n/n" */
    ck_assert_uint_eq(c->nframes, e->frames);
    ck_assert_uint_eq(c->trailing, 0);
    ck_assert_uint_eq(g->qpn, e->qpn);
    ck_assert_uint_eq(g->rkey, e->rkey);
    ck_assert_uint_eq(g->base_va, e->va);
    ck_assert_uint_eq(g->page_size, e->page_size);
    ck_assert_uint_eq(g->pages, e->pages);
    ck_assert_uint_eq(g->frame_size, e->frame_size);
    ck_assert_uint_eq(g->metadata_offset, e->md_off);
    ck_assert_uint_eq(g->first_page, 1);                /* the emulator starts at page 1 */
    ck_assert_uint_eq(g->payload_size, 1408);           /* MTU 1500: DP_PACKET_SIZE 11 * 128 */
    ck_assert(g->has_metadata);
    ck_assert_int_eq(g->separate_metadata, e->separate);
    for (size_t f = 0; f < c->nframes; f++) {
        const struct mlxd_capture_frame *fr = &c->frames[f];
        ck_assert_uint_eq(fr->page, (f + 1) % e->pages);
        ck_assert_uint_eq(fr->imm_psn, e->psn0 + f * e->psn_step);
        ck_assert_uint_eq(fr->imm, fr->page | fr->imm_psn << 12);
        ck_assert_uint_eq(fr->va, e->va + fr->page * e->page_size);
        ck_assert(fr->has_metadata);
        ck_assert_uint_eq(fr->md.psn, fr->imm_psn);
        ck_assert_uint_eq(fr->md.frame_number32, f);
        ck_assert_uint_eq(fr->md.frame_number, f);
        ck_assert_uint_eq(fr->md.bytes_written, e->frame_size);
        ck_assert_uint_eq(fr->md.flags, 0);
        ck_assert_uint_eq(fr->md.crc, 0);
        uint8_t *b = reassemble(c, f, e->frame_size);
        long bad = mlxd_hsb_payload_check(b, e->frame_size, (uint32_t)f);
        ck_assert_msg(bad == -1, "%s frame %zu: payload differs at byte %ld", e->file, f, bad);
        free(b);
    }
    const struct mlxd_capture_frame *fr = &c->frames[e->check_frame];
    ck_assert_uint_eq(fr->md.timestamp_s, e->ts_s);
    ck_assert_uint_eq(fr->md.timestamp_ns, e->ts_ns);
    ck_assert_uint_eq(fr->md.metadata_s, e->md_s);
    ck_assert_uint_eq(fr->md.metadata_ns, e->md_ns);
    mlxd_capture_free(c);
}
END_TEST

/* Metadata disabled: 12 WRITE Only packets, no 0x2B; 4 frames of 4096 bytes written one after
 * the other from page 1 (VA 0x7f3000002000 .. 0x7f3000006000, the sidecar's note). */
START_TEST(capture_without_metadata)
{
    struct mlxd_capture *c = load("hsb_nometa_4k_3pages");
    ck_assert_uint_eq(c->npackets, 12);
    ck_assert_uint_eq(c->nframes, 0);
    ck_assert_uint_eq(c->trailing, 12);
    const struct mlxd_capture_geometry *g = &c->geo;
    ck_assert(!g->has_metadata);
    ck_assert_uint_eq(g->span_lo, 0x7f3000002000ull);
    ck_assert_uint_eq(g->span_hi, 0x7f3000006000ull);
    ck_assert_uint_eq(g->qpn, 0xabc);
    ck_assert_uint_eq(g->rkey, 0xcafe0001);
    ck_assert_uint_eq(g->base_va, g->span_lo);
    ck_assert_uint_eq(g->pages, 1);
    ck_assert_uint_eq(g->frame_size, 16384);
    uint8_t *b = calloc(1, 16384);
    for (size_t i = 0; i < c->npackets; i++) {
        const struct mlxd_roce_pkt *h = &c->pkts[i].hdr;
        ck_assert_uint_eq(h->opcode, 0x2a);
        memcpy(b + (h->reth_va - g->span_lo), h->payload, h->payload_len);
    }
    for (uint32_t f = 0; f < 4; f++)
        ck_assert_int_eq(mlxd_hsb_payload_check(b + 4096 * f, 4096, f), -1);
    free(b);
    mlxd_capture_free(c);
}
END_TEST

START_TEST(load_errors)
{
    struct mlxd_capture *c = NULL;
    ck_assert_int_eq(mlxd_capture_load(NULL, &c), -EINVAL);
    ck_assert_int_eq(mlxd_capture_load("/nonexistent/x.pcap", &c), -ENOENT);
    const char *m = strstr(mlxd_errmsg(), "/nonexistent/x.pcap");
    ck_assert(m != NULL);
    ck_assert_msg(strstr(m + 1, "/nonexistent/x.pcap") == NULL, "path named twice: %s", mlxd_errmsg());
    /* a pcap with a non-RoCE packet only: link type raw IPv4 (101 = LINKTYPE_RAW), one UDP/53 */
    char path[] = "/tmp/mlxd-test-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    uint32_t gh[6] = { 0xa1b2c3d4, 0x00040002, 0, 0, 65535, 101 };
    uint8_t ip[28] = { 0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
                       0, 53, 0, 53, 0, 8, 0, 0 };
    uint32_t ph[4] = { 1, 0, 28, 28 };
    ck_assert_int_eq(write(fd, gh, sizeof gh), sizeof gh);
    ck_assert_int_eq(write(fd, ph, sizeof ph), sizeof ph);
    ck_assert_int_eq(write(fd, ip, sizeof ip), sizeof ip);
    close(fd);
    ck_assert_int_eq(mlxd_capture_load(path, &c), -ENODATA);
    ck_assert_msg(strstr(mlxd_errmsg(), "among 1 packet") != NULL, "%s", mlxd_errmsg());
    unlink(path);
}
END_TEST

/* Rewriting = programming other registers: QPN, rkey and VA change, nothing else; iCRC valid. */
START_TEST(rewrite_packet)
{
    struct mlxd_capture *c = load("hsb_medium_64k_4pages");
    struct mlxd_replay_map m = { .qpn = 0x000d2a, .rkey = 0x55aa1234, .base_va = 0x10000000,
                                 .page_size = 0x11000 + 0x1000, .pages = 4 };
    uint8_t out[2048];
    for (size_t i = 0; i < c->npackets; i += 13) {
        const struct mlxd_roce_pkt *in = &c->pkts[i].hdr;
        ssize_t n = mlxd_capture_rewrite(c, i, &m, 0x7f000001, 40000, 0x7f000002, 4791, out, sizeof out);
        ck_assert_int_eq(n, c->pkts[i].len);
        struct mlxd_roce_pkt p;
        ck_assert_int_eq(mlxd_roce_parse(out, (size_t)n, 4791, true, &p), 0);
        ck_assert_uint_eq(p.dest_qp, 0xd2a);
        ck_assert_uint_eq(p.reth_rkey, 0x55aa1234);
        uint64_t rel = in->reth_va - 0x7f2000000000ull;
        ck_assert_uint_eq(p.reth_va, 0x10000000 + (rel / 0x11000) * 0x12000 + rel % 0x11000);
        ck_assert_uint_eq(p.opcode, in->opcode);
        ck_assert_uint_eq(p.psn, in->psn);
        ck_assert_uint_eq(p.imm, in->imm);
        ck_assert_uint_eq(p.reth_len, in->reth_len);
        ck_assert_uint_eq(p.src_ip, 0x7f000001);
        ck_assert_uint_eq(p.dst_ip, 0x7f000002);
        ck_assert_uint_eq(p.src_port, 40000);
        ck_assert_uint_eq(p.payload_len, in->payload_len);
        ck_assert(memcmp(p.payload, in->payload, p.payload_len) == 0);
    }
    ck_assert_int_eq(mlxd_capture_rewrite(c, c->npackets, &m, 1, 1, 1, 1, out, sizeof out), -EINVAL);
    mlxd_capture_free(c);
}
END_TEST

/* A PSN shift (replay loops) moves the BTH PSN, the immediate's PSN and the metadata block's PSN
 * together (mod 2^20, as the device masks them), and nothing else. */
START_TEST(rewrite_psn_offset)
{
    struct mlxd_capture *c = load("hsb_small_3000_embedded");
    struct mlxd_replay_map m = { .qpn = 7, .rkey = 9, .base_va = c->geo.base_va,
                                 .page_size = c->geo.page_size, .pages = 2, .psn_offset = 0xFFFFE };
    uint8_t out[2048];
    const struct mlxd_capture_frame *f = &c->frames[1];            /* imm 0x00005000: page 0, psn 5 */
    size_t i = f->first + f->count - 1;
    ssize_t n = mlxd_capture_rewrite(c, i, &m, 1, 2, 3, 4791, out, sizeof out);
    ck_assert_int_gt(n, 0);
    struct mlxd_roce_pkt p;
    ck_assert_int_eq(mlxd_roce_parse(out, (size_t)n, 4791, true, &p), 0);
    ck_assert_uint_eq(p.psn, 3);                                   /* (5 + 0xFFFFE) mod 2^20 */
    ck_assert_uint_eq(ntohl(p.imm), 0x00003000);
    struct mlxd_hsb_metadata md;
    mlxd_hsb_metadata_decode(p.payload + p.payload_len - 128, 128, &md);
    ck_assert_uint_eq(md.psn, 3);
    ck_assert_uint_eq(md.frame_number32, 1);
    ck_assert_uint_eq(md.timestamp_ns, f->md.timestamp_ns);
    ck_assert(memcmp(p.payload, c->pkts[i].hdr.payload, p.payload_len - 128) == 0);
    mlxd_capture_free(c);
}
END_TEST

/* (hsb_medium_64k_4pages: its sidecar says "47 data pkts + 1 metadata pkt per frame", but the
 * packets are 46 WRITE Only + 1 WRITE Only with Immediate carrying the last 768 data bytes and the
 * metadata: 940 = 20 x 47, opcodes 0x2a x 920, 0x2b x 20.  The packets are the authority.) */

/* The generator's packets, caught on a UDP socket: same sizes, opcodes, PSNs and immediates as
 * the emulator's captures for the same geometry. */
static void gen_and_compare(uint32_t mdmode, const char *capture, unsigned frames)
{
    struct mlxd_capture *c = load(capture);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    int big = 4 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    socklen_t al = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &al);
    struct mlxd_replay_map m = { .qpn = c->geo.qpn, .rkey = c->geo.rkey, .base_va = c->geo.base_va,
                                 .page_size = c->geo.page_size, .pages = c->geo.pages };
    struct mlxd_gen_opts g = { .sz = sizeof g, .frame_size = c->geo.frame_size, .metadata = mdmode,
                               .frames = frames, .first_page = 1 };
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = "127.0.0.1", .dst_port = ntohs(a.sin_port),
                                 .src_ip = "127.0.0.1" };
    struct mlxd_send_stats st;
    ck_assert_int_eq(mlxd_gen_run(&m, &g, &so, &st), 0);
    ck_assert_uint_eq(st.frames, frames);
    size_t want = c->frames[frames - 1].first + c->frames[frames - 1].count;
    ck_assert_uint_eq(st.packets, want);
    uint8_t buf[70000];
    for (size_t i = 0; i < want; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s, buf + 28, sizeof buf - 28, 0, (struct sockaddr *)&from, &fl);
        ck_assert_int_gt(n, 0);
        mlxd_roce_wrap_udp(buf, ntohl(from.sin_addr.s_addr), ntohs(from.sin_port), 0x7f000001,
                           ntohs(a.sin_port), (size_t)n);
        struct mlxd_roce_pkt p;
        ck_assert_int_eq(mlxd_roce_parse(buf, (size_t)n + 28, 0, true, &p), 0);
        const struct mlxd_roce_pkt *in = &c->pkts[i].hdr;
        ck_assert_uint_eq(p.opcode, in->opcode);
        ck_assert_uint_eq(p.psn, in->psn);
        ck_assert_uint_eq(p.dest_qp, in->dest_qp);
        ck_assert_uint_eq(p.reth_va, in->reth_va);
        ck_assert_uint_eq(p.reth_rkey, in->reth_rkey);
        ck_assert_uint_eq(p.payload_len, in->payload_len);
        ck_assert_uint_eq(p.bth_resv, in->bth_resv);
        if (p.hdrs & MLXD_ROCE_HAS_IMMDT)
            ck_assert_uint_eq(p.imm, in->imm);
        if (p.opcode == 0x2a)   /* data bytes identical; the metadata differs by its timestamps */
            ck_assert(memcmp(p.payload, in->payload, p.payload_len) == 0);
    }
    close(s);
    mlxd_capture_free(c);
}

START_TEST(generator_matches_separate) { gen_and_compare(MLXD_GEN_MD_SEPARATE, "hsb_small_4k_3pages", 6); }
END_TEST
START_TEST(generator_matches_sepmeta) { gen_and_compare(MLXD_GEN_MD_SEPARATE, "hsb_sepmeta_3000", 4); }
END_TEST
START_TEST(generator_matches_embedded) { gen_and_compare(MLXD_GEN_MD_EMBEDDED, "hsb_small_3000_embedded", 4); }
END_TEST
START_TEST(generator_matches_medium) { gen_and_compare(MLXD_GEN_MD_EMBEDDED, "hsb_medium_64k_4pages", 3); }
END_TEST

START_TEST(generator_rejects_misuse)
{
    struct mlxd_replay_map m = { .qpn = 1, .rkey = 1, .base_va = 0, .page_size = 4096, .pages = 2 };
    struct mlxd_gen_opts g = { .sz = sizeof g, .frame_size = 4096, .frames = 1 };
    ck_assert_int_eq(mlxd_gen_run(&m, &g, NULL, NULL), -EINVAL);   /* page 4096 < 4096+128 */
    ck_assert(strstr(mlxd_errmsg(), "page_size") != NULL);
    g.frame_size = 100;
    g.payload_size = 1000;
    ck_assert_int_eq(mlxd_gen_run(&m, &g, NULL, NULL), -EINVAL);
    ck_assert(strstr(mlxd_errmsg(), "payload_size") != NULL);
}
END_TEST

/* Messages name the called function: a too-small buffer is the rewrite's failure, not the
 * packet builder's (mlxd_roce_build is an inner call).  The first packet of hsb_medium_64k_4pages
 * is a WRITE Only of 1408 payload bytes: 20 (IPv4) + 8 (UDP) + 12 (BTH) + 16 (RETH) + 1408 + 4
 * (iCRC) = 1468 bytes (IBA 9.2, 9.3.3.1; RoCE v2 annex A17). */
START_TEST(rewrite_small_buffer_message)
{
    struct mlxd_capture *c = load("hsb_medium_64k_4pages");
    struct mlxd_replay_map m = { .qpn = 1, .rkey = 1, .base_va = 0x10000000, .page_size = 0x11000,
                                 .pages = 4 };
    uint8_t out[16];
    ck_assert_uint_eq(c->pkts[0].len, 1468);
    ck_assert_int_eq(mlxd_capture_rewrite(c, 0, &m, 1, 1, 1, 4791, out, 10), -ENOSPC);
    const char *msg = mlxd_errmsg();
    ck_assert_msg(!strncmp(msg, "mlxd_capture_rewrite: ", 22), "%s", msg);
    ck_assert_msg(strstr(msg, "10-byte buffer") && strstr(msg, "1468"), "%s", msg);
    ck_assert_msg(!strstr(msg, "mlxd_roce_build"), "%s", msg);
    mlxd_capture_free(c);
}
END_TEST

/* A send-opts struct from a "newer header": sz = sizeof + 8.  A zero tail is accepted (the call
 * goes on to the next check: dst_ip "not-an-ip", so nothing is sent); a non-zero tail is -EINVAL
 * naming sz.  Also pacing outside enum mlxd_pacing and speeds that are not 0 or finite > 0. */
struct send_opts_v2 { struct mlxd_send_opts o; uint64_t extra; };

static int replay_with(const struct mlxd_capture *c, const struct mlxd_send_opts *o)
{
    struct mlxd_replay_map m = { .qpn = 1, .rkey = 1, .base_va = 0x10000000,
                                 .page_size = c->geo.page_size, .pages = c->geo.pages };
    struct mlxd_send_stats st = { .packets = 99 };
    int rc = mlxd_capture_replay(c, &m, o, &st);
    ck_assert_uint_eq(st.packets, 0);
    return rc;
}

START_TEST(replay_rejects_bad_opts)
{
    struct mlxd_capture *c = load("hsb_small_4k_3pages");
    struct send_opts_v2 v;
    memset(&v, 0, sizeof v);
    v.o.sz = sizeof v.o + 8;
    v.o.dst_ip = "not-an-ip";
    ck_assert_int_eq(replay_with(c, &v.o), -EINVAL);
    ck_assert_msg(strstr(mlxd_errmsg(), "dst_ip 'not-an-ip'"), "zero tail refused: %s", mlxd_errmsg());
    v.extra = 0xdeadbeef;
    ck_assert_int_eq(replay_with(c, &v.o), -EINVAL);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_capture_replay: opts->sz ", 30), "%s", mlxd_errmsg());
    ck_assert_msg(strstr(mlxd_errmsg(), "not all zero"), "%s", mlxd_errmsg());

    struct mlxd_send_opts o = { .sz = sizeof o, .dst_ip = "not-an-ip" };
    o.pacing = 7;
    ck_assert_int_eq(replay_with(c, &o), -EINVAL);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_capture_replay: opts->pacing 7 ", 36), "%s", mlxd_errmsg());
    o.pacing = MLXD_PACE_RECORDED;
    const double bad[] = { -3.0, NAN, INFINITY, -INFINITY };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        o.speed = bad[k];
        ck_assert_int_eq(replay_with(c, &o), -EINVAL);
        ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_capture_replay: opts->speed ", 33), "speed %g: %s",
                      bad[k], mlxd_errmsg());
    }
    /* valid values pass to the next check (dst_ip) */
    const double good[] = { 0.0, 0.5, 2.0 };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        o.speed = good[k];
        ck_assert_int_eq(replay_with(c, &o), -EINVAL);
        ck_assert_msg(strstr(mlxd_errmsg(), "dst_ip"), "speed %g: %s", good[k], mlxd_errmsg());
    }
    mlxd_capture_free(c);
}
END_TEST

START_TEST(generator_rejects_bad_opts)
{
    struct mlxd_replay_map m = { .qpn = 1, .rkey = 1, .base_va = 0, .page_size = 8192, .pages = 2 };
    struct { struct mlxd_gen_opts g; uint64_t extra; } gv;
    memset(&gv, 0, sizeof gv);
    gv.g.sz = sizeof gv.g + 8;
    gv.g.frame_size = 4096;
    gv.g.frames = 1;
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = "not-an-ip" };
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &so, NULL), -EINVAL);   /* zero tail: accepted */
    ck_assert_msg(strstr(mlxd_errmsg(), "dst_ip 'not-an-ip'"), "%s", mlxd_errmsg());
    gv.extra = 1;
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &so, NULL), -EINVAL);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_gen_run: opts->sz ", 23), "%s", mlxd_errmsg());
    gv.extra = 0;
    struct send_opts_v2 sv;
    memset(&sv, 0, sizeof sv);
    sv.o.sz = sizeof sv.o + 8;
    sv.o.dst_ip = "not-an-ip";
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &sv.o, NULL), -EINVAL);
    ck_assert_msg(strstr(mlxd_errmsg(), "dst_ip 'not-an-ip'"), "%s", mlxd_errmsg());
    sv.extra = 0xff;
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &sv.o, NULL), -EINVAL);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_gen_run: send opts->sz ", 28), "%s", mlxd_errmsg());
    /* the documented bounds: payload_size <= 8192, frame_size <= 2^32, fps finite */
    gv.g.sz = sizeof gv.g;
    gv.g.payload_size = 8192 + 128;
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &so, NULL), -EINVAL);
    ck_assert_msg(strstr(mlxd_errmsg(), "payload_size 8320"), "%s", mlxd_errmsg());
    gv.g.payload_size = 8192;
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &so, NULL), -EINVAL);
    ck_assert_msg(strstr(mlxd_errmsg(), "dst_ip"), "%s", mlxd_errmsg());
    gv.g.frame_size = (1ull << 32) + 1;
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &so, NULL), -EINVAL);
    ck_assert_msg(strstr(mlxd_errmsg(), "frame_size 4294967297"), "%s", mlxd_errmsg());
    gv.g.frame_size = 4096;
    gv.g.fps = NAN;
    ck_assert_int_eq(mlxd_gen_run(&m, &gv.g, &so, NULL), -EINVAL);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_gen_run: fps ", 18), "%s", mlxd_errmsg());
}
END_TEST

Suite *pcap_suite(void)
{
    Suite *s = suite_create("pcap");
    TCase *tc = tcase_create("captures");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, captures_geometry_and_frames, 0, (int)(sizeof E / sizeof E[0]));
    tcase_add_test(tc, capture_without_metadata);
    tcase_add_test(tc, load_errors);
    tcase_add_test(tc, rewrite_packet);
    tcase_add_test(tc, rewrite_psn_offset);
    tcase_add_test(tc, rewrite_small_buffer_message);
    tcase_add_test(tc, replay_rejects_bad_opts);
    suite_add_tcase(s, tc);
    TCase *tg = tcase_create("generator");
    tcase_set_timeout(tg, 60);
    tcase_add_test(tg, generator_matches_separate);
    tcase_add_test(tg, generator_matches_sepmeta);
    tcase_add_test(tg, generator_matches_embedded);
    tcase_add_test(tg, generator_matches_medium);
    tcase_add_test(tg, generator_rejects_misuse);
    tcase_add_test(tg, generator_rejects_bad_opts);
    suite_add_tcase(s, tg);
    return s;
}
