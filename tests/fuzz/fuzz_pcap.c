/* libFuzzer target: the pcap reader and replayer (receiver/mlxd_capture.h): mlxd_capture_load on
 * the fuzzer's bytes as a pcap file (through a memfd), then mlxd_capture_rewrite of every packet
 * for a receiver's map, which is what mlxd_capture_replay sends.
 * Input: a pcap file when it starts with a pcap magic number (the seeds); otherwise the bytes
 * describe one (structured.h: valid file and packet headers around the fields the bytes choose),
 * so that an empty corpus gets past libpcap's and the parser's header checks at once.
 * Oracle: no crash, hang or sanitizer report; load gives 0 or one of its documented errors; every
 * kept packet lies inside the storage and its frames index existing packets; every rewritten
 * packet parses, has a valid iCRC, and carries the map's QPN (and rkey where it has a RETH). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mlxd_capture.h"
#include "structured.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mlxd_capture *c = fz_load(data, size, NULL);
    if (!c) return 0;
    if (!c->npackets || c->nframes > c->npackets) abort();
    for (size_t i = 0; i < c->nframes; i++) {
        const struct mlxd_capture_frame *f = &c->frames[i];
        if (!f->count || f->first + f->count > c->npackets || f->first + f->count < f->first) abort();
    }
    struct mlxd_replay_map m = { .qpn = 0x123456, .rkey = 0xabcdef01, .base_va = 0x7f0000001000ull,
                                 .page_size = 0x20000, .pages = 4 };
    static uint8_t out[70000];
    for (size_t i = 0; i < c->npackets; i++) {
        const struct mlxd_capture_packet *k = &c->pkts[i];
        if (k->len < MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN) abort();
        ssize_t n = mlxd_capture_rewrite(c, i, &m, 0x7f000001, 1000, 0x7f000002, 4791, out, sizeof out);
        if (n < 0) {
            if (n != -ERANGE && n != -EINVAL) abort();
            continue;
        }
        struct mlxd_roce_pkt p;
        if (mlxd_roce_parse(out, (size_t)n, 4791, true, &p)) abort();
        if (p.dest_qp != m.qpn) abort();
        if ((p.hdrs & MLXD_ROCE_HAS_RETH) && p.reth_rkey != m.rkey) abort();
    }
    mlxd_capture_free(c);
    return 0;
}
