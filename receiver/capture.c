/* capture.c: pcap captures of sensor-bridge traffic, replay and the traffic generator
 * (see mlxd_capture.h).  Packet encoding and decoding is abi/mlxd_roce.h's. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gen_send.h"
#include "mlxd_capture.h"
#include "mlxd_error.h"
#include "mlxd_uverbs.h"
#include "opts.h"

#ifndef DLT_LINUX_SLL2
#define DLT_LINUX_SLL2 276
#endif
#ifndef DLT_IPV4
#define DLT_IPV4 228
#endif

#define UC_WRITE_ONLY     (MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_ONLY)      /* 0x2A */
#define UC_WRITE_ONLY_IMM (MLXD_ROCE_TRANSPORT_UC | MLXD_ROCE_OP_WRITE_ONLY_IMM)  /* 0x2B */

/* Offset of the IPv4 header in a link-layer frame, or -1 if it is not IPv4. */
static long ip_offset(int dlt, const uint8_t *p, size_t len)
{
    size_t off;
    switch (dlt) {
    case DLT_EN10MB: {
        if (len < 14)
            return -1;
        off = 12;
        uint16_t et = (uint16_t)(p[off] << 8 | p[off + 1]);
        while ((et == 0x8100 || et == 0x88a8) && off + 6 <= len) {
            off += 4;
            et = (uint16_t)(p[off] << 8 | p[off + 1]);
        }
        if (et != 0x0800)
            return -1;
        off += 2;
        break;
    }
    case DLT_RAW:
    case DLT_IPV4:
#ifdef DLT_RAW_ALT
    case DLT_RAW_ALT:
#endif
        off = 0;
        break;
    case DLT_NULL:
    case DLT_LOOP: {
        if (len < 4)
            return -1;
        uint32_t fam_le = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t fam_be = p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
        if (fam_le != 2 && fam_be != 2)   /* AF_INET on every BSD and Linux */
            return -1;
        off = 4;
        break;
    }
    case DLT_LINUX_SLL:
        if (len < 16 || p[14] != 0x08 || p[15] != 0x00)
            return -1;
        off = 16;
        break;
    case DLT_LINUX_SLL2:
        if (len < 20 || p[0] != 0x08 || p[1] != 0x00)
            return -1;
        off = 20;
        break;
    default:
        return -1;
    }
    if (off >= len || (p[off] >> 4) != 4)
        return -1;
    return (long)off;
}

static bool dlt_supported(int dlt)
{
    return dlt == DLT_EN10MB || dlt == DLT_RAW || dlt == DLT_IPV4 || dlt == DLT_NULL ||
           dlt == DLT_LOOP || dlt == DLT_LINUX_SLL || dlt == DLT_LINUX_SLL2 || dlt == 14 /* OpenBSD raw */;
}

/* The payload size of the UC WRITE-only packets and the VA span [span_lo, span_hi) every RETH
 * of the capture writes (0, 0: none). */
static void infer_span(const struct mlxd_capture *c, struct mlxd_capture_geometry *g)
{
    g->span_lo = UINT64_MAX;
    for (size_t i = 0; i < c->npackets; i++) {
        const struct mlxd_roce_pkt *h = &c->pkts[i].hdr;
        if (!(h->hdrs & MLXD_ROCE_HAS_RETH))
            continue;
        if (h->opcode == UC_WRITE_ONLY && h->payload_len > g->payload_size)
            g->payload_size = h->payload_len;
        if (h->reth_va < g->span_lo)
            g->span_lo = h->reth_va;
        /* saturating: a crafted VA near 2^64 must not wrap the span to a small one */
        uint64_t end = h->reth_va + h->payload_len < h->reth_va ? UINT64_MAX : h->reth_va + h->payload_len;
        if (end > g->span_hi)
            g->span_hi = end;
    }
    if (g->span_lo == UINT64_MAX)
        g->span_lo = g->span_hi = 0;
}

/* The page size the frames' pages and VAs imply (the first pair that divides), 0: none. */
static uint64_t infer_page_size(const struct mlxd_capture *c)
{
    const struct mlxd_capture_frame *f0 = &c->frames[0];
    for (size_t i = 1; i < c->nframes; i++) {
        const struct mlxd_capture_frame *f = &c->frames[i];
        /* page size = VA difference / page difference, both taken in the same direction in
         * unsigned arithmetic: any two 64-bit VAs of a crafted capture divide without a trap
         * (INT64_MIN / -1 did, as signed numbers); pages and VAs moving apart in opposite
         * directions tell nothing */
        uint64_t dva, dp;
        if (f->page > f0->page && f->va > f0->va) {
            dva = f->va - f0->va;
            dp = f->page - f0->page;
        } else if (f->page < f0->page && f->va < f0->va) {
            dva = f0->va - f->va;
            dp = f0->page - f->page;
        } else {
            continue;
        }
        if (dva % dp == 0)
            return dva / dp;
    }
    return 0;
}

static void infer_geometry(struct mlxd_capture *c)
{
    struct mlxd_capture_geometry *g = &c->geo;
    memset(g, 0, sizeof *g);
    if (!c->npackets)
        return;
    g->qpn = c->pkts[0].hdr.dest_qp;
    g->rkey = c->pkts[0].hdr.reth_rkey;
    infer_span(c, g);
    g->frames = (unsigned)c->nframes;
    if (c->nframes == 0) {
        /* No completion at all (metadata disabled in NVIDIA's emulator): one "frame" spanning
         * everything that was written, in a single page starting at the lowest VA. */
        g->base_va = g->span_lo;
        g->frame_size = g->span_hi - g->span_lo;
        g->metadata_offset = mlxd_hsb_metadata_offset(g->frame_size);
        g->page_size = g->frame_size <= MLXD_CAPTURE_MAX_FRAME_SIZE ? mlxd_hsb_min_page_size(g->frame_size) : 0;
        g->pages = 1;
        return;
    }
    const struct mlxd_capture_frame *f0 = &c->frames[0];
    g->has_metadata = true;
    g->separate_metadata = true;
    for (size_t i = 0; i < c->nframes; i++) {
        const struct mlxd_capture_frame *f = &c->frames[i];
        const struct mlxd_roce_pkt *last = &c->pkts[f->first + f->count - 1].hdr;
        if (!f->has_metadata)
            g->has_metadata = false;
        if (!(f->has_metadata && last->payload_len == MLXD_HSB_METADATA_SIZE))
            g->separate_metadata = false;
        if (f->page + 1 > g->pages)
            g->pages = f->page + 1;
    }
    if (g->has_metadata) {
        g->frame_size = f0->md.bytes_written;
        g->metadata_offset = f0->md_va - f0->va;
    } else {
        uint64_t bytes = 0;
        for (uint32_t k = 0; k < f0->count; k++)
            bytes += c->pkts[f0->first + k].hdr.payload_len;
        g->frame_size = bytes;
        g->metadata_offset = mlxd_hsb_metadata_offset(bytes);
        g->separate_metadata = false;
    }
    g->page_size = infer_page_size(c);
    /* a frame size past the range of mlxd_capture_geometry_check would wrap the sum: leave
     * the page size 0 (the check names the frame size) */
    if (!g->page_size && g->frame_size <= MLXD_CAPTURE_MAX_FRAME_SIZE)
        g->page_size = mlxd_hsb_min_page_size(g->frame_size);
    g->base_va = f0->va - (uint64_t)f0->page * g->page_size;
    g->first_page = f0->page;
}

static void make_frames(struct mlxd_capture *c)
{
    size_t start = 0;
    for (size_t i = 0; i < c->npackets; i++) {
        const struct mlxd_roce_pkt *h = &c->pkts[i].hdr;
        uint8_t op = h->opcode & 0x1f;
        if (op != MLXD_ROCE_OP_WRITE_ONLY_IMM && op != MLXD_ROCE_OP_WRITE_LAST_IMM &&
            op != MLXD_ROCE_OP_SEND_ONLY_IMM && op != MLXD_ROCE_OP_SEND_LAST_IMM)
            continue;
        struct mlxd_capture_frame *f = &c->frames[c->nframes++];
        memset(f, 0, sizeof *f);
        f->first = (uint32_t)start;
        f->count = (uint32_t)(i + 1 - start);
        f->imm = ntohl(h->imm);
        f->page = mlxd_hsb_imm_page(f->imm, MLXD_HSB_IMM_12_20);
        f->imm_psn = mlxd_hsb_imm_psn(f->imm, MLXD_HSB_IMM_12_20);
        f->va = UINT64_MAX;
        for (size_t k = start; k <= i; k++)
            if ((c->pkts[k].hdr.hdrs & MLXD_ROCE_HAS_RETH) && c->pkts[k].hdr.reth_va < f->va)
                f->va = c->pkts[k].hdr.reth_va;
        if (f->va == UINT64_MAX)
            f->va = 0;
        if (h->payload_len >= MLXD_HSB_METADATA_SIZE && (h->hdrs & MLXD_ROCE_HAS_RETH)) {
            const uint8_t *md = h->payload + h->payload_len - MLXD_HSB_METADATA_SIZE;
            struct mlxd_hsb_metadata m;
            mlxd_hsb_metadata_decode(md, MLXD_HSB_METADATA_SIZE, &m);
            if (mlxd_hsb_psn_match(m.psn, h->psn, MLXD_HSB_IMM_12_20)) {
                f->has_metadata = true;
                f->md = m;
                f->md_va = h->reth_va + h->payload_len - MLXD_HSB_METADATA_SIZE;
            }
        }
        start = i + 1;
    }
    c->trailing = c->npackets - start;
}

/* Opens path as a pcap file of a link type the loader reads; *pc the handle.  The error names
 * the file and the reason once. */
static int open_capture(const char *path, pcap_t **pc)
{
    char ebuf[PCAP_ERRBUF_SIZE] = "";
    *pc = pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, ebuf);
    if (!*pc) {
        int e = access(path, R_OK) ? errno : EIO;
        /* libpcap's message may begin with the path itself: name it once */
        const char *why = ebuf;
        size_t pl = strlen(path);
        if (e != EIO)
            why = strerror(e);
        else if (!strncmp(ebuf, path, pl) && ebuf[pl] == ':' && ebuf[pl + 1] == ' ')
            why = ebuf + pl + 2;
        return mlxd_err(e, "mlxd_capture_load: %s: %s", path, why);
    }
    int dlt = pcap_datalink(*pc);
    if (!dlt_supported(dlt)) {
        pcap_close(*pc);
        *pc = NULL;
        return mlxd_err(EPROTONOSUPPORT, "mlxd_capture_load: %s: link type %d (%s) is not Ethernet, "
                        "raw IPv4, loopback or Linux cooked", path, dlt,
                        pcap_datalink_val_to_name(dlt) ? pcap_datalink_val_to_name(dlt) : "?");
    }
    return 0;
}

/* The loader's growing arrays: each packet's offset in c->storage, the capacities. */
struct load {
    size_t *offs;
    size_t cap_pk, used, cap_st;
};

/* Appends one RoCE v2 packet (len bytes of IP packet at ip; prc: mlxd_roce_parse's verdict,
 * 0 or -EBADMSG for a bad iCRC) to c, growing its arrays. */
static int add_packet(struct mlxd_capture *c, struct load *ld, const struct pcap_pkthdr *ph,
                      const u_char *ip, size_t len, int prc)
{
    if (c->npackets == ld->cap_pk) {
        size_t n = ld->cap_pk ? ld->cap_pk * 2 : 256;
        void *p1 = realloc(c->pkts, n * sizeof *c->pkts);
        if (p1)
            c->pkts = p1;
        void *p2 = p1 ? realloc(ld->offs, n * sizeof *ld->offs) : NULL;
        if (!p1 || !p2)
            return mlxd_err(ENOMEM, "mlxd_capture_load: out of memory");
        ld->offs = p2;
        ld->cap_pk = n;
    }
    if (ld->used + len > ld->cap_st) {
        size_t n = ld->cap_st ? ld->cap_st * 2 : 1 << 16;
        while (n < ld->used + len)
            n *= 2;
        void *p = realloc(c->storage, n);
        if (!p)
            return mlxd_err(ENOMEM, "mlxd_capture_load: out of memory");
        c->storage = p;
        ld->cap_st = n;
    }
    memcpy(c->storage + ld->used, ip, len);
    struct mlxd_capture_packet *k = &c->pkts[c->npackets];
    memset(k, 0, sizeof *k);
    k->len = (uint32_t)len;
    k->ts_ns = (uint64_t)ph->ts.tv_sec * 1000000000u + (uint64_t)ph->ts.tv_usec; /* ns precision */
    k->icrc_ok = prc == 0;
    if (prc)
        c->bad_icrc++;
    ld->offs[c->npackets++] = ld->used;
    ld->used += len;
    return 0;
}

/* Every record of pc: the RoCE v2 packets kept, the others counted as skipped.  A file that
 * ends inside a record keeps what came whole (cut_short); one without a RoCE v2 packet is
 * refused. */
static int read_packets(struct mlxd_capture *c, struct load *ld, pcap_t *pc, const char *path)
{
    struct pcap_pkthdr *ph;
    const u_char *data;
    int r;
    while ((r = pcap_next_ex(pc, &ph, &data)) == 1) {
        c->records++;
        long off = ip_offset(c->linktype, data, ph->caplen);
        if (off < 0) {
            c->skipped++;
            continue;
        }
        struct mlxd_roce_pkt h;
        int prc = mlxd_roce_parse(data + off, ph->caplen - (size_t)off, MLXD_ROCE_UDP_PORT, true, &h);
        if (prc < 0 && prc != -EBADMSG) {
            c->skipped++;
            continue;
        }
        int rc = add_packet(c, ld, ph, data + off, h.pkt_len, prc);
        if (rc < 0)
            return rc;
    }
    if (r == -1 && c->records == 0)
        return mlxd_err(EIO, "mlxd_capture_load: %s: %s", path, pcap_geterr(pc));
    if (r == -1) {
        /* the file ends inside a record (a recording cut off mid-write): keep what came whole */
        c->cut_short = true;
        snprintf(c->cut_why, sizeof c->cut_why, "%s", pcap_geterr(pc));
    }
    if (c->npackets == 0)
        return mlxd_err(ENODATA, "mlxd_capture_load: %s: no RoCE v2 packet (UDP port 4791) among %zu packet%s",
                        path, c->skipped, c->skipped == 1 ? "" : "s");
    return 0;
}

int mlxd_capture_load(const char *path, struct mlxd_capture **out)
{
    if (!path || !out)
        return mlxd_err(EINVAL, "mlxd_capture_load: NULL %s", path ? "out" : "path");
    pcap_t *pc;
    int rc = open_capture(path, &pc);
    if (rc < 0)
        return rc;
    struct mlxd_capture *c = calloc(1, sizeof *c);
    struct load ld = { 0 };
    if (!c) {
        rc = mlxd_err(ENOMEM, "mlxd_capture_load: out of memory");
        goto out_pcap;
    }
    c->linktype = pcap_datalink(pc);
    rc = read_packets(c, &ld, pc, path);
    if (rc < 0)
        goto fail;
    /* storage is final: point the packets into it and parse again for the payload pointers */
    for (size_t i = 0; i < c->npackets; i++) {
        struct mlxd_capture_packet *k = &c->pkts[i];
        k->ip = c->storage + ld.offs[i];
        mlxd_roce_parse(k->ip, k->len, MLXD_ROCE_UDP_PORT, false, &k->hdr);
    }
    c->frames = calloc(c->npackets, sizeof *c->frames);
    if (!c->frames) {
        rc = mlxd_err(ENOMEM, "mlxd_capture_load: out of memory");
        goto fail;
    }
    make_frames(c);
    infer_geometry(c);
    free(ld.offs);
    pcap_close(pc);
    *out = c;
    return 0;
fail:
    free(ld.offs);
    mlxd_capture_free(c);
out_pcap:
    pcap_close(pc);
    return rc;
}

void mlxd_capture_free(struct mlxd_capture *c)
{
    if (!c)
        return;
    free(c->pkts);
    free(c->frames);
    free(c->storage);
    free(c);
}

uint64_t mlxd_capture_buffer_bound(const struct mlxd_capture *c)
{
    if (!c)
        return 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < c->npackets; i++)
        bytes += c->pkts[i].len;
    uint64_t b = bytes > UINT64_MAX / MLXD_CAPTURE_BUFFER_FACTOR ? UINT64_MAX : bytes * MLXD_CAPTURE_BUFFER_FACTOR;
    return b > MLXD_CAPTURE_MIN_BUFFER_BOUND ? b : MLXD_CAPTURE_MIN_BUFFER_BOUND;
}

int mlxd_capture_geometry_check(const struct mlxd_capture *c)
{
#define BAD(...) return mlxd_err(ERANGE, "mlxd_capture_geometry_check: " __VA_ARGS__)
    if (!c)
        return mlxd_err(EINVAL, "mlxd_capture_geometry_check: NULL capture");
    const struct mlxd_capture_geometry *g = &c->geo;
    const char *from = g->has_metadata ? "frame 0's metadata bytes_written" : "the bytes of frame 0";
    if (!c->nframes)
        from = "the span of the written addresses";
    uint64_t payload = 0;
    for (size_t i = 0; i < c->npackets; i++)
        payload += c->pkts[i].hdr.payload_len;
    if (g->frame_size == 0 || g->frame_size > MLXD_CAPTURE_MAX_FRAME_SIZE)
        BAD("frame size %llu (%s) is out of range 1..2^40", (unsigned long long)g->frame_size, from);
    if (g->frame_size > payload)
        BAD("frame size %llu (%s) exceeds the %llu payload bytes of the whole capture",
            (unsigned long long)g->frame_size, from, (unsigned long long)payload);
    if (g->page_size < MLXD_HSB_ALIGN || g->page_size > MLXD_CAPTURE_MAX_PAGE_SIZE ||
        g->page_size % MLXD_HSB_ALIGN)
        BAD("page size %llu (VA difference of two frames / their page difference) is not a "
            "multiple of 128 in 128..2^41", (unsigned long long)g->page_size);
    uint64_t minpage = mlxd_hsb_min_page_size(g->frame_size);
    if (g->page_size < minpage)
        BAD("page size %llu is below round_up(frame size %llu, 128) + 128 = %llu",
            (unsigned long long)g->page_size, (unsigned long long)g->frame_size,
            (unsigned long long)minpage);
    if (g->metadata_offset > g->page_size - MLXD_HSB_METADATA_SIZE)
        BAD("metadata offset %llu + 128 exceeds the page size %llu",
            (unsigned long long)g->metadata_offset, (unsigned long long)g->page_size);
    if (g->pages > MLXD_HSB_MAX_PAGES)
        BAD("%u pages exceed %u", g->pages, MLXD_HSB_MAX_PAGES);
    if (c->nframes && (unsigned __int128)g->first_page * g->page_size > c->frames[0].va)
        BAD("frame 0 in page %u at 0x%llx puts page 0 below address 0 (page size %llu)",
            g->first_page, (unsigned long long)c->frames[0].va, (unsigned long long)g->page_size);
    /* every frame begins where its page does (the device writes a frame from its page's base):
     * a frame elsewhere would be replayed to an address the geometry cannot tell */
    for (size_t i = 0; i < c->nframes; i++) {
        const struct mlxd_capture_frame *f = &c->frames[i];
        uint64_t at = g->base_va + (uint64_t)f->page * g->page_size;
        if (f->va != at)
            BAD("frame %zu at 0x%llx is not where its page %u begins (0x%llx: page 0 at 0x%llx, "
                "page size %llu)", i, (unsigned long long)f->va, f->page, (unsigned long long)at,
                (unsigned long long)g->base_va, (unsigned long long)g->page_size);
    }
    return 0;
#undef BAD
}

/* ---------------------------------------------------------------------------------------- */
/* rewrite and send                                                                           */

/* Re-issues the failure of an inner call (its message on this thread) as fn's: the inner
 * "mlxd_name: " prefix is replaced by fn's, so that the message names the called function. */
static int rename_err(const char *fn, int rc)
{
    const char *m = mlxd_errmsg();
    if (!strncmp(m, "mlxd_", 5)) {
        size_t k = strspn(m, "abcdefghijklmnopqrstuvwxyz0123456789_");
        if (m[k] == ':' && m[k + 1] == ' ')
            m += k + 2;
    }
    return mlxd_err(-rc, "%s: %s", fn, m);
}

/* The size rule and the enum/number fields of mlxd_send_opts (NULL: defaults). */
static int check_send_opts(const struct mlxd_send_opts *o, const char *fn, const char *what)
{
    if (!o)
        return 0;
    if (o->sz < sizeof *o)
        return mlxd_err(EINVAL, "%s: %s->sz %zu is below %zu", fn, what, o->sz, sizeof *o);
    int trc = mlxd__opts_tail_check(fn, what, o, o->sz, sizeof *o);
    if (trc) return trc;
    if (o->pacing > MLXD_PACE_RECORDED)
        return mlxd_err(EINVAL, "%s: %s->pacing %u is not MLXD_PACE_FAST (0) or MLXD_PACE_RECORDED (1)",
                        fn, what, o->pacing);
    if (!isfinite(o->speed) || o->speed < 0)
        return mlxd_err(EINVAL, "%s: %s->speed %g is not 0 (= 1.0) or a finite number > 0", fn, what,
                        o->speed);
    return 0;
}

ssize_t mlxd_capture_rewrite(const struct mlxd_capture *c, size_t i, const struct mlxd_replay_map *m,
                             uint32_t src_ip, uint16_t src_port, uint32_t dst_ip, uint16_t dst_port,
                             void *out, size_t cap)
{
    if (!c || !m || !out || i >= c->npackets || !m->page_size)
        return mlxd_err(EINVAL, "mlxd_capture_rewrite: bad arguments (packet %zu of %zu)", i,
                        c ? c->npackets : 0);
    if (!c->geo.page_size)
        return mlxd_err(ERANGE, "mlxd_capture_rewrite: the capture's page size is 0 (its frame "
                        "size %llu is out of range: mlxd_capture_geometry_check)",
                        (unsigned long long)c->geo.frame_size);
    struct mlxd_roce_pkt p = c->pkts[i].hdr;
    p.dest_qp = m->qpn & MLXD_ROCE_QPN_MASK;
    if (p.hdrs & MLXD_ROCE_HAS_RETH) {
        const struct mlxd_capture_geometry *g = &c->geo;
        if (p.reth_va < g->base_va)
            return mlxd_err(ERANGE, "mlxd_capture_rewrite: packet %zu VA 0x%llx is below page 0 at 0x%llx",
                            i, (unsigned long long)p.reth_va, (unsigned long long)g->base_va);
        uint64_t rel = p.reth_va - g->base_va;
        uint64_t page = rel / g->page_size, off = rel % g->page_size;
        p.reth_va = m->base_va + page * m->page_size + off;
        p.reth_rkey = m->rkey;
    }
    p.src_ip = src_ip;
    p.dst_ip = dst_ip;
    p.src_port = src_port;
    p.dst_port = dst_port;
    const uint8_t *payload = p.payload;
    uint8_t patched[MLXD_HSB_METADATA_SIZE];
    bool patch_md = false;
    if (m->psn_offset) {
        uint32_t old_psn = p.psn;
        p.psn = (p.psn + m->psn_offset) & 0xFFFFF;
        if (p.hdrs & MLXD_ROCE_HAS_IMMDT) {
            uint32_t imm = ntohl(p.imm);
            uint32_t ipsn = mlxd_hsb_imm_psn(imm, MLXD_HSB_IMM_12_20);
            p.imm = htonl(mlxd_hsb_imm_make(mlxd_hsb_imm_page(imm, MLXD_HSB_IMM_12_20),
                                            ipsn + m->psn_offset, MLXD_HSB_IMM_12_20));
            if (p.payload_len >= MLXD_HSB_METADATA_SIZE) {
                const uint8_t *md = p.payload + p.payload_len - MLXD_HSB_METADATA_SIZE;
                uint32_t mpsn = (uint32_t)md[4] << 24 | (uint32_t)md[5] << 16 | (uint32_t)md[6] << 8 | md[7];
                if (mlxd_hsb_psn_match(mpsn, old_psn, MLXD_HSB_IMM_12_20)) {
                    memcpy(patched, md, sizeof patched);
                    uint32_t np = (mpsn & ~0xFFFFFu) | ((mpsn + m->psn_offset) & 0xFFFFFu);
                    patched[4] = (uint8_t)(np >> 24); patched[5] = (uint8_t)(np >> 16);
                    patched[6] = (uint8_t)(np >> 8); patched[7] = (uint8_t)np;
                    patch_md = true;
                }
            }
        }
    }
    ssize_t n = mlxd_roce_build(out, cap, &p, payload, p.payload_len);
    if (n < 0)
        return rename_err("mlxd_capture_rewrite", (int)n);
    if (n > 0 && patch_md) {
        /* the block is the payload's last 128 bytes: patch it in place, then redo the iCRC */
        size_t pad = (4 - p.payload_len % 4) % 4;   /* the build pads to 4 bytes */
        size_t at = (size_t)n - MLXD_ROCE_ICRC_LEN - pad - MLXD_HSB_METADATA_SIZE;
        memcpy((uint8_t *)out + at, patched, sizeof patched);
        mlxd_roce_icrc_fill(out, (size_t)n);
    }
    return n;
}

struct sender {
    int fd;
    uint32_t src_ip, dst_ip;
    uint16_t src_port, dst_port;
};

static int sender_open(struct sender *s, const struct mlxd_send_opts *o, const char *fn)
{
    const char *dst = o && o->dst_ip ? o->dst_ip : "127.0.0.1";
    uint16_t dport = o && o->dst_port ? o->dst_port : MLXD_ROCE_UDP_PORT;
    struct sockaddr_in d = { .sin_family = AF_INET, .sin_port = htons(dport) };
    if (inet_pton(AF_INET, dst, &d.sin_addr) != 1)
        return mlxd_err(EINVAL, "%s: dst_ip '%s' is not an IPv4 address", fn, dst);
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return mlxd_err(errno, "%s: socket: %s", fn, strerror(errno));
    int big = 8 << 20;
    setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (o && o->src_ip) {
        struct sockaddr_in b = { .sin_family = AF_INET };
        if (inet_pton(AF_INET, o->src_ip, &b.sin_addr) != 1) {
            close(s->fd);
            return mlxd_err(EINVAL, "%s: src_ip '%s' is not an IPv4 address", fn, o->src_ip);
        }
        if (bind(s->fd, (struct sockaddr *)&b, sizeof b) < 0) {
            int e = errno;
            close(s->fd);
            if (e == EADDRNOTAVAIL)
                return mlxd_err(e, "%s: src_ip %s is not an address of this host (bind: %s): packets can "
                                "only be sent from a local address; on the emulated port use the "
                                "receiver's peer_ip, any 127.x.y.z", fn, o->src_ip, strerror(e));
            return mlxd_err(e, "%s: bind %s: %s", fn, o->src_ip, strerror(e));
        }
    }
    if (connect(s->fd, (struct sockaddr *)&d, sizeof d) < 0) {
        int e = errno;
        close(s->fd);
        return mlxd_err(e, "%s: connect %s:%u: %s", fn, dst, dport, strerror(e));
    }
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(s->fd, (struct sockaddr *)&me, &ml);
    s->src_ip = ntohl(me.sin_addr.s_addr);
    s->src_port = ntohs(me.sin_port);
    s->dst_ip = ntohl(d.sin_addr.s_addr);
    s->dst_port = dport;
    return 0;
}

/* Sends the UDP payload of a built packet (everything after IPv4 + UDP). */
static void sender_send(struct sender *s, const uint8_t *pkt, size_t len, struct mlxd_send_stats *st)
{
    const size_t hl = MLXD_ROCE_IPV4_LEN + MLXD_ROCE_UDP_LEN;
    for (int tries = 0; tries < 100; tries++) {
        ssize_t n = send(s->fd, pkt + hl, len - hl, 0);
        if (n == (ssize_t)(len - hl)) {
            st->packets++;
            st->bytes += len - hl;
            return;
        }
        if (n < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EINTR)) {
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
            continue;
        }
        break;   /* ECONNREFUSED (nobody listens yet) and others: the packet is lost */
    }
    st->send_errors++;
}

static uint64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool stopped(volatile int *stop)
{
    return stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE);
}

/* Sleeps until CLOCK_MONOTONIC time t, in slices of at most STOP_SLICE_NS so that a stop set
 * meanwhile (a signal handler's) ends the wait within one slice: a signal that lands on another
 * thread does not interrupt this one's sleep.  Returns false when stopped. */
#define STOP_SLICE_NS 10000000u
static bool sleep_until(uint64_t t, volatile int *stop)
{
    for (;;) {
        if (stopped(stop))
            return false;
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        if (now >= t)
            return true;
        uint64_t until = t - now > STOP_SLICE_NS ? now + STOP_SLICE_NS : t;
        struct timespec ts = { .tv_sec = (time_t)(until / 1000000000u),
                               .tv_nsec = (long)(until % 1000000000u) };
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
}

static void sleep_us(unsigned us, volatile int *stop)
{
    if (us)
        sleep_until(now_ns(CLOCK_MONOTONIC) + (uint64_t)us * 1000u, stop);
}

/* The recorded wait before packet i (ns after the capture's first packet, divided by speed);
 * 0 when its timestamp is before the first packet's. */
static uint64_t recorded_offset(const struct mlxd_capture *c, size_t i, double speed)
{
    if (c->pkts[i].ts_ns < c->pkts[0].ts_ns)
        return 0;
    double d = (double)(c->pkts[i].ts_ns - c->pkts[0].ts_ns) / speed;
    return d >= 0x1p63 ? UINT64_MAX / 2 : (uint64_t)d;   /* no float-to-integer overflow */
}

/* MLXD_PACE_RECORDED: every wait between two packets within MLXD_CAPTURE_MAX_GAP_NS. */
static int check_gaps(const struct mlxd_capture *c, double speed, const char *fn)
{
    uint64_t prev = 0;
    for (size_t i = 1; i < c->npackets; i++) {
        uint64_t t = recorded_offset(c, i, speed);
        if (t > prev && t - prev > MLXD_CAPTURE_MAX_GAP_NS)
            return mlxd_err(ERANGE, "%s: packet %zu comes %.0f s after packet %zu at the recorded "
                            "pace (speed %g): over the %llu s a recorded pace waits",
                            fn, i + 1, (double)(t - prev) / 1e9, i, speed,
                            MLXD_CAPTURE_MAX_GAP_NS / 1000000000ull);
        if (t > prev)
            prev = t;
    }
    return 0;
}

int mlxd_capture_pace_check(const struct mlxd_capture *c, double speed)
{
    if (!c || !c->npackets)
        return mlxd_err(EINVAL, "mlxd_capture_pace_check: %s capture", c ? "empty" : "NULL");
    if (!isfinite(speed) || speed < 0)
        return mlxd_err(EINVAL, "mlxd_capture_pace_check: speed %g is not 0 (= 1.0) or a finite "
                        "number > 0", speed);
    return check_gaps(c, speed > 0 ? speed : 1.0, "mlxd_capture_pace_check");
}

int mlxd_capture_replay(const struct mlxd_capture *c, const struct mlxd_replay_map *m,
                        const struct mlxd_send_opts *o, struct mlxd_send_stats *st)
{
    struct mlxd_send_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    if (!c || !m)
        return mlxd_err(EINVAL, "mlxd_capture_replay: NULL %s", c ? "map" : "capture");
    int rc = check_send_opts(o, "mlxd_capture_replay", "opts");
    if (rc < 0)
        return rc;
    if (!m->page_size || !m->pages)
        return mlxd_err(EINVAL, "mlxd_capture_replay: map page_size/pages is 0");
    struct sender s;
    rc = sender_open(&s, o, "mlxd_capture_replay");
    if (rc < 0)
        return rc;
    unsigned loops = o && o->loops ? o->loops : 1;
    double speed = o && o->speed > 0 ? o->speed : 1.0;
    uint32_t pacing = o ? o->pacing : MLXD_PACE_FAST;
    if (pacing == MLXD_PACE_RECORDED && (rc = check_gaps(c, speed, "mlxd_capture_replay")) < 0) {
        close(s.fd);
        return rc;
    }
    uint8_t *buf = malloc(65536);
    if (!buf) {
        close(s.fd);
        return mlxd_err(ENOMEM, "mlxd_capture_replay: out of memory");
    }
    uint64_t frame = 0;
    bool done = false;
    uint32_t span = (c->pkts[c->npackets - 1].hdr.psn - c->pkts[0].hdr.psn + 1) & 0xFFFFF;
    struct mlxd_replay_map lm = *m;
    const uint32_t base = m->psn_offset;
    m = &lm;
    for (unsigned loop = 0; loop < loops && !done; loop++) {
        lm.psn_offset = (uint32_t)(base + (uint64_t)loop * span) & 0xFFFFF;
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        volatile int *stop = o ? o->stop : NULL;
        for (size_t i = 0; i < c->npackets && !done; i++) {
            if (stopped(stop)) {
                done = true;
                break;
            }
            if (pacing == MLXD_PACE_RECORDED && !sleep_until(t0 + recorded_offset(c, i, speed), stop)) {
                done = true;
                break;
            }
            ssize_t n = mlxd_capture_rewrite(c, i, m, s.src_ip, s.src_port, s.dst_ip, s.dst_port,
                                             buf, 65536);
            if (n < 0) {
                rc = rename_err("mlxd_capture_replay", (int)n);
                done = true;
                break;
            }
            sender_send(&s, buf, (size_t)n, st);
            uint8_t op = c->pkts[i].hdr.opcode & 0x1f;
            if (op == MLXD_ROCE_OP_WRITE_ONLY_IMM || op == MLXD_ROCE_OP_WRITE_LAST_IMM ||
                op == MLXD_ROCE_OP_SEND_ONLY_IMM || op == MLXD_ROCE_OP_SEND_LAST_IMM) {
                st->frames++;
                if (pacing == MLXD_PACE_FAST && o)
                    sleep_us(o->frame_gap_us, stop);
                if (o && o->sent_frame && !o->sent_frame(o->ctx, frame))
                    done = true;
                frame++;
                if (o && o->max_frames && frame >= o->max_frames)
                    done = true;
            }
        }
    }
    free(buf);
    close(s.fd);
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* generator                                                                                  */

/* The active MTU of the RDMA port that owns the IPv4 address dst (host order): the port with a
 * GID ::ffff:dst; 0 when no port of this host has it (a remote or plain UDP destination). */
static uint32_t port_mtu_of(uint32_t dst)
{
    char **names = NULL;
    size_t n = 0;
    uint32_t mtu = 0;
    if (mlxd_names(&names, &n) < 0)
        return 0;
    for (size_t i = 0; i < n && !mtu; i++) {
        struct mlxd_nic *nic = NULL;
        struct mlxd_open_opts oo = { .sz = sizeof oo, .port = 1 };
        if (mlxd_open(names[i], &oo, &nic) < 0)
            continue;
        struct mlxd_gid gids[64];
        int k = mlxd_gids(nic, gids, 64);
        struct mlxd_port_info pi;
        for (int j = 0; j < k && j < 64; j++) {
            const uint8_t *r = gids[j].raw;
            uint32_t a = (uint32_t)r[12] << 24 | (uint32_t)r[13] << 16 | (uint32_t)r[14] << 8 | r[15];
            if (r[10] == 0xff && r[11] == 0xff && a == dst && mlxd_port_info(nic, &pi) == 0)
                mtu = pi.active_mtu_bytes;
        }
        mlxd_close(nic);
    }
    mlxd_names_free(names, n);
    mlxd_err_clear();
    return mtu;
}

/* What only a tool checked before (issue 13): a generator feeding a receiver must send from the
 * address the receiver's QP is connected to, and packets no larger than the port takes. */
static int gen_check_path(const struct mlxd_gen_opts *g, const struct mlxd_send_opts *so, uint32_t psize)
{
    const char *dst = so && so->dst_ip ? so->dst_ip : "127.0.0.1";
    struct in_addr d;
    if (inet_pton(AF_INET, dst, &d) != 1)
        return 0;   /* sender_open names it */
    if (!so || !so->src_ip)
        return mlxd_err(EINVAL, "mlxd_gen_run: src_ip is not set: a receiver's QP takes packets only from the "
                        "peer it was connected to, so every frame would be dropped as from a wrong source; "
                        "set send opts src_ip to the receiver's peer_ip");
    /* the port's MTU binds RoCE traffic only (UDP 4791): another destination port is not an
     * RDMA port's */
    if (so->dst_port && so->dst_port != MLXD_ROCE_UDP_PORT)
        return 0;
    uint64_t whole = mlxd_hsb_metadata_offset(g->frame_size) + MLXD_HSB_METADATA_SIZE;
    uint32_t largest = whole < psize ? (uint32_t)whole : psize;
    uint32_t mtu = port_mtu_of(ntohl(d.s_addr));
    if (mtu && largest > mtu)
        return mlxd_err(EMSGSIZE, "mlxd_gen_run: packets of up to %u bytes of payload exceed the MTU %u of the "
                        "port at %s, which drops them (every frame would be lost): set payload_size to %u "
                        "or less, or raise the port's MTU (emulated: mtu=4096 in MLXD_EMU_DEVICES)",
                        largest, mtu, dst, mtu - mtu % MLXD_HSB_ALIGN);
    return 0;
}

/* mlxd_gen_run's arguments past the NULL checks; *psize: the payload per packet. */
static int gen_check_opts(const struct mlxd_replay_map *m, const struct mlxd_gen_opts *g,
                          const struct mlxd_send_opts *so, uint32_t *psize)
{
    if (g->sz < sizeof *g)
        return mlxd_err(EINVAL, "mlxd_gen_run: opts->sz %zu is below %zu", g->sz, sizeof *g);
    int trc = mlxd__opts_tail_check("mlxd_gen_run", "opts", g, g->sz, sizeof *g);
    if (trc) return trc;
    int rc0 = check_send_opts(so, "mlxd_gen_run", "send opts");
    if (rc0 < 0)
        return rc0;
    *psize = g->payload_size ? g->payload_size : 1408;
    if (*psize % MLXD_HSB_ALIGN || *psize > 8192)
        return mlxd_err(EINVAL, "mlxd_gen_run: payload_size %u is not a multiple of 128 up to 8192", *psize);
    if (g->frame_size == 0 || g->frame_size > (1ull << 32))
        return mlxd_err(EINVAL, "mlxd_gen_run: frame_size %llu is not in 1..2^32",
                        (unsigned long long)g->frame_size);
    if (g->metadata > MLXD_GEN_MD_NONE)
        return mlxd_err(EINVAL, "mlxd_gen_run: metadata %u unknown", g->metadata);
    if (!m->pages || m->page_size < mlxd_hsb_min_page_size(g->frame_size))
        return mlxd_err(EINVAL, "mlxd_gen_run: map page_size %llu is below round_up(frame_size, 128) + 128",
                        (unsigned long long)m->page_size);
    if (!isfinite(g->fps) || g->fps < 0)
        return mlxd_err(EINVAL, "mlxd_gen_run: fps %g is not 0 or a finite number > 0", g->fps);
    if (g->imm_layout > MLXD_HSB_IMM_LEGACY_8_24)
        return mlxd_err(EINVAL, "mlxd_gen_run: imm_layout %u unknown", g->imm_layout);
    return gen_check_path(g, so, *psize);
}

/* The generator between two frames: where it sends, the next PSN, its buffers. */
struct gen {
    const struct mlxd_gen_opts *g;
    const struct mlxd_replay_map *m;
    enum mlxd_hsb_imm_layout layout;
    uint32_t psn, psn_mask;     /* the legacy layout carries 24 PSN bits, the current one 20 */
    uint32_t psize;             /* payload per packet */
    uint64_t mdoff;             /* the metadata block's offset in the page */
    struct sender s;
    struct mlxd_roce_pkt p;     /* the headers every packet shares, then this packet's */
    uint8_t *frame;             /* the frame's bytes up to the end of the metadata block */
    uint8_t *buf;               /* room for one packet: its headers are built there */
    size_t buflen;
    struct gen_send *gs;        /* the frame's packets until they are sent (gen_send.h) */
};

/* Frame f's metadata block (psn: the PSN of its first packet), stamped now. */
static void gen_metadata(uint8_t out[MLXD_HSB_METADATA_SIZE], uint32_t psn, uint64_t frame_size, uint64_t f)
{
    struct mlxd_hsb_metadata md = { .psn = psn, .bytes_written = frame_size,
                                    .frame_number32 = (uint32_t)f };
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    md.timestamp_s = md.metadata_s = (uint64_t)ts.tv_sec;
    md.timestamp_ns = md.metadata_ns = (uint32_t)ts.tv_nsec;
    mlxd_hsb_metadata_encode(&md, out, MLXD_HSB_METADATA_SIZE);
}

/* Queues the packet in gn->p (its PSN the generator's next) with len bytes of payload, which
 * stay where they are until gen_send_frame sends the frame. */
static int gen_send(struct gen *gn, const uint8_t *payload, uint64_t len, struct mlxd_send_stats *st)
{
    gn->p.psn = gn->psn;
    gn->p.reth_len = (uint32_t)len;
    int k = gen_send_add(gn->gs, &gn->p, payload, len, st);
    if (k < 0)
        return rename_err("mlxd_gen_run", k);
    gn->psn = (gn->psn + 1) & gn->psn_mask;
    return 0;
}

/* Frame f into page: its payload in WRITEs of psize, the last with the immediate, and its
 * metadata block (in the last packet when embedded and it fits, else a WRITE of its own). */
static int gen_send_frame(struct gen *gn, uint32_t page, uint64_t f, struct mlxd_send_stats *st)
{
    const struct mlxd_gen_opts *g = gn->g;
    uint64_t page_va = gn->m->base_va + (uint64_t)page * gn->m->page_size;
    mlxd_hsb_payload_fill(gn->frame, g->frame_size, (uint32_t)f);
    memset(gn->frame + g->frame_size, 0, gn->mdoff - g->frame_size);
    uint64_t off = 0;
    bool md_sent = false;
    while (off < g->frame_size) {
        uint64_t n = g->frame_size - off < gn->psize ? g->frame_size - off : gn->psize;
        bool last = off + n == g->frame_size;
        uint64_t len = n;
        gn->p.opcode = UC_WRITE_ONLY;
        gn->p.reth_va = page_va + off;
        if (last && g->metadata == MLXD_GEN_MD_NONE) {
            gn->p.opcode = UC_WRITE_ONLY_IMM;
            gn->p.imm = htonl(mlxd_hsb_imm_make(page, gn->psn, gn->layout));
        } else if (last && g->metadata == MLXD_GEN_MD_EMBEDDED &&
                   (gn->mdoff - off) + MLXD_HSB_METADATA_SIZE < gn->psize) {
            /* data + zero pad up to the metadata offset + the block, in one 0x2B */
            len = gn->mdoff - off + MLXD_HSB_METADATA_SIZE;
            gen_metadata(gn->frame + gn->mdoff, gn->psn, g->frame_size, f);
            gn->p.opcode = UC_WRITE_ONLY_IMM;
            gn->p.imm = htonl(mlxd_hsb_imm_make(page, gn->psn, gn->layout));
            md_sent = true;
        }
        int rc = gen_send(gn, gn->frame + off, len, st);
        if (rc < 0)
            return rc;
        off += n;
    }
    if (g->metadata != MLXD_GEN_MD_NONE && !md_sent) {
        /* the block's own packet takes it from its place after the frame's data (which the data
         * packets do not send): it stays there until the frame is sent */
        gen_metadata(gn->frame + gn->mdoff, gn->psn, g->frame_size, f);
        gn->p.opcode = UC_WRITE_ONLY_IMM;
        gn->p.reth_va = page_va + gn->mdoff;
        gn->p.imm = htonl(mlxd_hsb_imm_make(page, gn->psn, gn->layout));
        int rc = gen_send(gn, gn->frame + gn->mdoff, MLXD_HSB_METADATA_SIZE, st);
        if (rc < 0)
            return rc;
    }
    gen_send_flush(gn->gs, st);     /* the whole frame is on its way before the callbacks */
    return 0;
}

int mlxd_gen_run(const struct mlxd_replay_map *m, const struct mlxd_gen_opts *g,
                 const struct mlxd_send_opts *so, struct mlxd_send_stats *st)
{
    struct mlxd_send_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    if (!m || !g)
        return mlxd_err(EINVAL, "mlxd_gen_run: NULL %s", m ? "opts" : "map");
    struct gen gn = { .g = g, .m = m, .layout = (enum mlxd_hsb_imm_layout)g->imm_layout };
    int rc = gen_check_opts(m, g, so, &gn.psize);
    if (rc < 0)
        return rc;
    gn.psn_mask = gn.layout == MLXD_HSB_IMM_LEGACY_8_24 ? 0xFFFFFFu : 0xFFFFFu;
    rc = sender_open(&gn.s, so, "mlxd_gen_run");
    if (rc < 0)
        return rc;
    gn.mdoff = mlxd_hsb_metadata_offset(g->frame_size);
    gn.buflen = gn.psize + MLXD_ROCE_MAX_HDR_LEN + 64;
    gn.frame = malloc(gn.mdoff + MLXD_HSB_METADATA_SIZE);
    gn.buf = malloc(gn.buflen);
    gn.gs = malloc(sizeof *gn.gs);
    if (!gn.frame || !gn.buf || !gn.gs) {
        rc = mlxd_err(ENOMEM, "mlxd_gen_run: out of memory");
        goto out;
    }
    *gn.gs = (struct gen_send){ .fd = gn.s.fd, .scratch = gn.buf, .scratch_cap = gn.buflen };
    gn.psn = g->first_psn & gn.psn_mask;
    uint32_t page = g->first_page % m->pages;
    /* a tiny fps (1e-300) must not overflow the conversion, nor k x interval the sum */
    double iv = g->fps > 0 ? 1e9 / g->fps : 0;
    uint64_t interval = iv >= 0x1p62 ? 1ull << 62 : (uint64_t)iv;
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    gn.p = (struct mlxd_roce_pkt){ .src_ip = gn.s.src_ip, .dst_ip = gn.s.dst_ip, .src_port = gn.s.src_port,
                                   .dst_port = gn.s.dst_port, .pkey = 0xffff,
                                   .bth_resv = 0xff,   /* what the emulator sends (fixtures/roce-pcaps/README.md) */
                                   .dest_qp = m->qpn & MLXD_ROCE_QPN_MASK, .reth_rkey = m->rkey };
    for (uint64_t k = 0; !g->frames || k < g->frames; k++) {
        volatile int *stop = so ? so->stop : NULL;
        if (stopped(stop))
            break;
        unsigned __int128 due = (unsigned __int128)k * interval + t0;
        if (interval && !sleep_until(due > UINT64_MAX ? UINT64_MAX : (uint64_t)due, stop))
            break;
        rc = gen_send_frame(&gn, page, g->first_frame + k, st);
        if (rc < 0)
            goto out;
        st->frames++;
        if (so && so->frame_gap_us)
            sleep_us(so->frame_gap_us, stop);
        if (so && so->sent_frame && !so->sent_frame(so->ctx, k))
            break;
        page = page + 1 == m->pages ? 0 : page + 1;
    }
out:
    free(gn.frame);
    free(gn.buf);
    free(gn.gs);
    close(gn.s.fd);
    if (rc == 0)
        mlxd_err_clear();   /* no stale message from an earlier refusal */
    return rc;
}
