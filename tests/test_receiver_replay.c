/* Replaying the real captures of NVIDIA's sensor-bridge emulator (fixtures/roce-pcaps) into a
 * running receiver on the emulated NIC: the recorded frames come out (payload byte for byte,
 * metadata fields as recorded, the recorded page sequence starting at page 1), a slow consumer
 * gets the right dropped count, a late monitor the right overwritten count, and the capture
 * with metadata disabled gives no frame while its bytes land in the buffer.
 * Each test configures private emulated devices (MTU 4096: the captures carry 1408-byte
 * payloads, and the original receiver connects with path MTU 4096). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mlxd_capture.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_receiver.h"
#include "util.h"

#define SUITE "receiver_replay"

#define CHILD_ONLY(tc) mlxd_test_private_devices()

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *CAPS[] = { "hsb_small_4k_3pages", "hsb_small_3000_embedded", "hsb_sepmeta_3000",
                              "hsb_medium_64k_4pages" };

struct rig {
    struct mlxd_capture *cap;
    struct mlxd_receiver *r;
    uint8_t *buf;
    size_t size;
    pthread_t mon;
    bool mon_running;
    int mon_rc;
    struct mlxd_replay_map map;
    char dst[32];
    /* lock-step checking */
    uint64_t checked;
    bool read_each;
};

static void *mon_main(void *arg)
{
    struct rig *g = arg;
    g->mon_rc = mlxd_receiver_blocking_monitor(g->r);
    return NULL;
}

static void rig_start(struct rig *g, const char *name, unsigned queue, bool monitor)
{
    memset(g, 0, sizeof *g);
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/roce-pcaps/%s.pcap", name);
    int rc = mlxd_capture_load(mlxd_test_path(rel), &g->cap);
    ck_assert_msg(rc == 0, "%s: %s", rel, mlxd_errmsg());
    const struct mlxd_capture_geometry *geo = &g->cap->geo;
    g->size = (geo->pages * geo->page_size + 4095) & ~(size_t)4095;
    ck_assert_int_eq(posix_memalign((void **)&g->buf, 4096, g->size), 0);
    memset(g->buf, 0xEE, g->size);
    g->r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .buffer = (uintptr_t)g->buf,
        .buffer_size = g->size, .frame_size = geo->frame_size, .page_size = geo->page_size,
        .pages = geo->pages, .metadata_offset = geo->metadata_offset, .peer_ip = "127.0.0.1",
        .queue_size = queue ? queue : geo->pages, .mode = MLXD_RECEIVER_EVENT };
    rc = mlxd_receiver_start(g->r, &o);
    ck_assert_msg(rc == 0, "start: %s", mlxd_errmsg());
    g->map = (struct mlxd_replay_map){ .qpn = mlxd_receiver_qp_number(g->r), .rkey = mlxd_receiver_rkey(g->r),
        .base_va = mlxd_receiver_external_frame_memory(g->r), .page_size = geo->page_size, .pages = geo->pages };
    uint32_t ip = mlxd_receiver_local_ipv4(g->r);
    snprintf(g->dst, sizeof g->dst, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    if (monitor) {
        ck_assert_int_eq(pthread_create(&g->mon, NULL, mon_main, g), 0);
        g->mon_running = true;
    }
}

static void rig_monitor(struct rig *g)
{
    ck_assert_int_eq(pthread_create(&g->mon, NULL, mon_main, g), 0);
    g->mon_running = true;
}

static void rig_stop(struct rig *g)
{
    ck_assert_int_eq(mlxd_receiver_close(g->r), 0);
    if (g->mon_running) {
        pthread_join(g->mon, NULL);
        ck_assert_int_eq(g->mon_rc, 0);
    }
    mlxd_receiver_destroy(g->r);
    mlxd_capture_free(g->cap);
    free(g->buf);
}

static bool wait_frames(struct rig *g, uint64_t n, double secs)
{
    double end = now_s() + secs;
    struct mlxd_receiver_stats st;
    do {
        mlxd_receiver_stats(g->r, &st);
        if (st.frames >= n) return true;
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
    } while (now_s() < end);
    return false;
}

/* Frame k of the capture, as its packets put it in memory: frame_size data bytes. */
static uint8_t *recorded_frame(const struct mlxd_capture *c, size_t k)
{
    const struct mlxd_capture_frame *fr = &c->frames[k];
    uint64_t size = c->geo.frame_size;
    uint8_t *b = calloc(1, size);
    for (uint32_t i = 0; i < fr->count; i++) {
        const struct mlxd_roce_pkt *h = &c->pkts[fr->first + i].hdr;
        uint64_t off = h->reth_va - fr->va;
        for (uint32_t j = 0; j < h->payload_len && off + j < size; j++) b[off + j] = h->payload[j];
    }
    return b;
}

static void check_frame(struct rig *g, const struct mlxd_receiver_frame *f, size_t k)
{
    const struct mlxd_capture_frame *cf = &g->cap->frames[k];
    const struct mlxd_capture_geometry *geo = &g->cap->geo;
    ck_assert_uint_eq(f->page, cf->page);
    ck_assert_uint_eq(f->page, (k + 1) % geo->pages);          /* emulator: starts at page 1 */
    ck_assert_uint_eq(f->imm_data, cf->imm);
    ck_assert_uint_eq(f->flags, 0);
    ck_assert_uint_eq(f->metadata.flags, cf->md.flags);
    ck_assert_uint_eq(f->metadata.psn, cf->md.psn);
    ck_assert_uint_eq(f->metadata.crc, cf->md.crc);
    ck_assert_uint_eq(f->metadata.timestamp_s, cf->md.timestamp_s);
    ck_assert_uint_eq(f->metadata.timestamp_ns, cf->md.timestamp_ns);
    ck_assert_uint_eq(f->metadata.bytes_written, cf->md.bytes_written);
    ck_assert_uint_eq(f->metadata.frame_number, cf->md.frame_number);
    ck_assert_uint_eq(f->metadata.frame_number32, k);
    ck_assert_uint_eq(f->metadata.metadata_s, cf->md.metadata_s);
    ck_assert_uint_eq(f->metadata.metadata_ns, cf->md.metadata_ns);
    ck_assert_uint_eq(f->frame_number, k);
    const uint8_t *got = g->buf + (size_t)f->page * geo->page_size;
    uint8_t *want = recorded_frame(g->cap, k);
    ck_assert_msg(memcmp(got, want, geo->frame_size) == 0, "frame %zu: bytes differ from the capture", k);
    free(want);
    ck_assert_int_eq(mlxd_hsb_payload_check(got, geo->frame_size, (uint32_t)k), -1);
    /* the metadata block itself is in the page, byte for byte */
    const struct mlxd_roce_pkt *last = &g->cap->pkts[cf->first + cf->count - 1].hdr;
    ck_assert(memcmp(got + geo->metadata_offset, last->payload + last->payload_len - 128, 128) == 0);
}

static bool read_and_check(void *ctx, uint64_t k)
{
    struct rig *g = ctx;
    ck_assert_msg(wait_frames(g, k + 1, 5), "frame %llu never completed", (unsigned long long)k);
    struct mlxd_receiver_frame f;
    ck_assert(mlxd_receiver_get_next_frame(g->r, 1000, &f));
    ck_assert_uint_eq(f.received_frame_number, k + 1);
    check_frame(g, &f, k);
    ck_assert_int_ne(mlxd_receiver_frame_check(g->r, &f), MLXD_FRAME_OVERWRITTEN);
    g->checked++;
    return true;
}

START_TEST(replay_yields_recorded_frames)
{
    const char *name = CAPS[_i];
    char tc[64];
    snprintf(tc, sizeof tc, "replay_%d", _i);
    CHILD_ONLY(tc);
    struct rig g;
    rig_start(&g, name, 0, true);
    struct mlxd_receiver_frame f;
    ck_assert(!mlxd_receiver_get_next_frame(g.r, 0, &f));
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = g.dst, .src_ip = "127.0.0.1", .sent_frame = read_and_check, .ctx = &g };
    struct mlxd_send_stats st;
    ck_assert_int_eq(mlxd_capture_replay(g.cap, &g.map, &so, &st), 0);
    ck_assert_uint_eq(st.packets, g.cap->npackets);
    ck_assert_uint_eq(st.frames, g.cap->nframes);
    ck_assert_uint_eq(g.checked, g.cap->nframes);
    struct mlxd_receiver_stats rs;
    mlxd_receiver_stats(g.r, &rs);
    ck_assert_uint_eq(rs.frames, g.cap->nframes);
    ck_assert_uint_eq(rs.dropped, 0);
    ck_assert_uint_eq(rs.overwritten, 0);
    ck_assert_uint_eq(rs.errors, 0);
    ck_assert_uint_eq(rs.last_frame_number, g.cap->nframes - 1);
    ck_assert(rs.rx_write_requests_valid);      /* the port's hw_counters file is read */
    /* every packet of these captures is an RDMA WRITE request (UC WRITE Only 0x2A / with
     * immediate 0x2B; e.g. 24 for hsb_small_4k_3pages), each counted when the port accepts it
     * (docs/emulator.md, hw_counters) */
    ck_assert_uint_eq(rs.rx_write_requests, g.cap->npackets);
    rig_stop(&g);
}
END_TEST

static bool just_wait(void *ctx, uint64_t k)
{
    return wait_frames(ctx, k + 1, 5);
}

/* A consumer that reads nothing while 20 frames arrive (queue 2): 18 dropped, the 2 newest
 * kept and intact; the device is a page ahead of the reader only for the last one. */
START_TEST(slow_consumer_drops)
{
    CHILD_ONLY("slow_consumer_drops");
    struct rig g;
    rig_start(&g, "hsb_medium_64k_4pages", 2, true);
    struct mlxd_receiver_frame f;
    ck_assert(!mlxd_receiver_get_next_frame(g.r, 0, &f));
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = g.dst, .src_ip = "127.0.0.1", .sent_frame = just_wait, .ctx = &g };
    ck_assert_int_eq(mlxd_capture_replay(g.cap, &g.map, &so, NULL), 0);
    struct mlxd_receiver_stats rs;
    mlxd_receiver_stats(g.r, &rs);
    ck_assert_uint_eq(rs.frames, 20);
    ck_assert_uint_eq(rs.dropped, 18);
    ck_assert_uint_eq(rs.overwritten, 0);
    for (size_t k = 18; k < 20; k++) {
        ck_assert(mlxd_receiver_get_next_frame(g.r, 1000, &f));
        ck_assert_uint_eq(f.dropped, 18);
        check_frame(&g, &f, k);
        ck_assert_int_ne(mlxd_receiver_frame_check(g.r, &f), MLXD_FRAME_OVERWRITTEN);
    }
    ck_assert(!mlxd_receiver_get_next_frame(g.r, 50, &f));
    rig_stop(&g);
}
END_TEST

/* The whole capture lands before the monitor looks: 20 completions, pages rewritten up to 4
 * times: frames 0..15 see a later frame's metadata PSN (overwritten), 16..19 are intact. */
START_TEST(late_monitor_overwritten)
{
    CHILD_ONLY("late_monitor_overwritten");
    struct rig g;
    rig_start(&g, "hsb_medium_64k_4pages", 4, false);
    struct mlxd_receiver_frame f;
    ck_assert(!mlxd_receiver_get_next_frame(g.r, 0, &f));
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = g.dst, .src_ip = "127.0.0.1", .frame_gap_us = 3000 };
    ck_assert_int_eq(mlxd_capture_replay(g.cap, &g.map, &so, NULL), 0);
    struct timespec ts = { 0, 300 * 1000000 };
    nanosleep(&ts, NULL);
    rig_monitor(&g);
    ck_assert(wait_frames(&g, 20, 5));
    struct mlxd_receiver_stats rs;
    mlxd_receiver_stats(g.r, &rs);
    ck_assert_uint_eq(rs.frames, 20);
    ck_assert_uint_eq(rs.overwritten, 16);
    ck_assert_uint_eq(rs.dropped, 16);
    for (size_t k = 16; k < 20; k++) {
        ck_assert(mlxd_receiver_get_next_frame(g.r, 1000, &f));
        check_frame(&g, &f, k);
    }
    rig_stop(&g);
}
END_TEST

/* Metadata disabled in the sender: only WRITE Only packets, so no receive is consumed and no
 * completion happens: the user gets no frame (get_next_frame times out), while the 16384 bytes
 * (4 frames written one after the other, the page never advancing) land in the buffer. */
START_TEST(no_metadata_capture)
{
    CHILD_ONLY("no_metadata_capture");
    struct rig g;
    rig_start(&g, "hsb_nometa_4k_3pages", 1, true);
    struct mlxd_receiver_frame f;
    ck_assert(!mlxd_receiver_get_next_frame(g.r, 0, &f));
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = g.dst, .src_ip = "127.0.0.1", .frame_gap_us = 1000 };
    struct mlxd_send_stats st;
    ck_assert_int_eq(mlxd_capture_replay(g.cap, &g.map, &so, &st), 0);
    ck_assert_uint_eq(st.packets, 12);
    ck_assert_uint_eq(st.frames, 0);
    /* wait until the emulated port took all 12 in (its counters are read under the lock the
     * NIC engine holds while it writes memory: this also orders its writes before our reads) */
    struct mlxd_emu_nic_stats es = { .sz = sizeof es };
    double end = now_s() + 5;
    do {
        es.sz = sizeof es;
        ck_assert_int_eq(mlxd_emu_nic_stats(0, &es), 0);
    } while (es.rx_pkts < 12 && now_s() < end);
    ck_assert_uint_eq(es.rx_pkts, 12);
    ck_assert_uint_eq(es.rx_malformed + es.rx_bad_icrc + es.rx_unknown_qp + es.rx_dropped_uc, 0);
    ck_assert(!mlxd_receiver_get_next_frame(g.r, 300, &f));
    struct mlxd_receiver_stats rs;
    mlxd_receiver_stats(g.r, &rs);
    ck_assert_uint_eq(rs.frames, 0);
    ck_assert_uint_eq(rs.errors, 0);
    for (uint32_t k = 0; k < 4; k++)
        ck_assert_int_eq(mlxd_hsb_payload_check(g.buf + 4096 * k, 4096, k), -1);
    ck_assert(rs.rx_write_requests_valid);
    ck_assert_uint_eq(rs.rx_write_requests, 12);   /* 12 WRITE Only packets, all accepted */
    rig_stop(&g);
}
END_TEST

Suite *receiver_replay_suite(void)
{
    Suite *s = suite_create(SUITE);
    static const char *names[4] = { "replay_0", "replay_1", "replay_2", "replay_3" };
    for (int i = 0; i < 4; i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, replay_yields_recorded_frames, i, i + 1);
        suite_add_tcase(s, tc);
    }
#define CASE(fn) do { TCase *tc = tcase_create(#fn); tcase_set_timeout(tc, 120); \
                      tcase_add_test(tc, fn); suite_add_tcase(s, tc); } while (0)
    CASE(slow_consumer_drops);
    CASE(late_monitor_overwritten);
    CASE(no_metadata_capture);
#undef CASE
    return s;
}
