/* libFuzzer target: a capture as mlxd-capture replays it (receiver/mlxd_capture.h):
 * mlxd_capture_load, then the checks of its numbers (mlxd_capture_geometry_check,
 * mlxd_capture_buffer_bound, mlxd_capture_pace_check at an input-chosen speed), then
 * mlxd_capture_rewrite of every packet for a map made from the capture's own geometry (what the
 * tool does without options) and for one with the options' values (--page-size 8192
 * --frame-size 4096: the map of the SIGFPE that an outside harness found in 8,023 runs).
 * Input: a pcap file when it starts with a pcap magic number; otherwise the bytes describe one
 * (structured.h).
 * It also classifies the capture (mlxd_capture_classify, mlxd_capture_describe: what the tool
 * decides first).
 * Oracle: no crash, trap or sanitizer report; every call returns 0 or a documented error; the
 * description is one NUL-terminated line of the length it reports; a
 * geometry the check accepts is in the options' ranges (frame 1..2^40, page a multiple of 128 in
 * 128..2^41, at least round_up(frame, 128) + 128, metadata inside the page), and under it every
 * frame's first packet with a RETH is rewritten to exactly the map's page of that frame. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mlxd_capture.h"
#include "mlxd_capture_classify.h"
#include "structured.h"

static void rewrite_all(const struct mlxd_capture *c, const struct mlxd_replay_map *m, bool exact)
{
    static uint8_t out[70000];
    for (size_t i = 0; i < c->npackets; i++) {
        ssize_t n = mlxd_capture_rewrite(c, i, m, 0x7f000001, 1000, 0x7f000002, 4791, out, sizeof out);
        if (n < 0) {
            if (n != -ERANGE && n != -EINVAL && n != -ENOSPC) abort();
            continue;
        }
        struct mlxd_roce_pkt p;
        if (mlxd_roce_parse(out, (size_t)n, 4791, true, &p)) abort();
        if (p.dest_qp != m->qpn) abort();
    }
    if (!exact) return;
    for (size_t k = 0; k < c->nframes; k++) {
        const struct mlxd_capture_frame *f = &c->frames[k];
        for (uint32_t j = f->first; j < f->first + f->count; j++) {
            if (!(c->pkts[j].hdr.hdrs & MLXD_ROCE_HAS_RETH) || c->pkts[j].hdr.reth_va != f->va) continue;
            ssize_t n = mlxd_capture_rewrite(c, j, m, 0x7f000001, 1000, 0x7f000002, 4791, out, sizeof out);
            if (n < 0) abort();
            struct mlxd_roce_pkt p;
            if (mlxd_roce_parse(out, (size_t)n, 4791, true, &p)) abort();
            if (p.reth_va != m->base_va + (uint64_t)f->page * m->page_size) abort();
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    double speed;
    struct mlxd_capture *c = fz_load(data, size, &speed);
    if (!c) return 0;
    if (c->cut_short && !c->cut_why[0]) abort();
    /* what mlxd-capture decides first: frame traffic or a foreign conversation
     * (receiver/mlxd_capture_classify.h); the description is one NUL-terminated line */
    static struct mlxd_capture_kind kind;
    if (mlxd_capture_classify(c, &kind)) abort();
    static char what[2048];
    size_t need = mlxd_capture_describe(&kind, what, sizeof what);
    if (!memchr(what, 0, sizeof what) || strchr(what, '\n') || (need < sizeof what && strlen(what) != need)) abort();
    int prc = mlxd_capture_pace_check(c, speed);
    if (prc && prc != -ERANGE) abort();
    if (mlxd_capture_buffer_bound(c) < MLXD_CAPTURE_MIN_BUFFER_BOUND) abort();
    const struct mlxd_capture_geometry *g = &c->geo;
    int grc = mlxd_capture_geometry_check(c);
    if (grc == 0) {
        if (g->frame_size == 0 || g->frame_size > MLXD_CAPTURE_MAX_FRAME_SIZE) abort();
        if (g->page_size < 128 || g->page_size % 128 || g->page_size > MLXD_CAPTURE_MAX_PAGE_SIZE) abort();
        if (g->page_size < mlxd_hsb_min_page_size(g->frame_size)) abort();
        if (g->metadata_offset + MLXD_HSB_METADATA_SIZE > g->page_size) abort();
        struct mlxd_replay_map own = { .qpn = 0x123456, .rkey = 0xabcdef01, .base_va = 0x7f0000001000ull,
                                       .page_size = g->page_size, .pages = g->pages ? g->pages : 1 };
        rewrite_all(c, &own, true);
    } else if (grc != -ERANGE) {
        abort();
    }
    struct mlxd_replay_map opt = { .qpn = 0x654321, .rkey = 1, .base_va = 0x7f0000100000ull,
                                   .page_size = 8192, .pages = 2 };
    rewrite_all(c, &opt, false);
    mlxd_capture_free(c);
    return 0;
}
