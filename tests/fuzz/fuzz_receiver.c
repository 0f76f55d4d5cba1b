/* libFuzzer target: the receiver's loss accounting (receiver/receiver.c, receiver/rx_events.c)
 * fed from a CQE fixture (mlxd_receiver_opts.replay_fixture, docs/testing-with-fixtures.md): no
 * emulator, no network.
 * Input: the bytes describe a version 2 fixture (docs/fixture-format.md): up to 24 records, each
 * a RESP_WR_IMM CQE whose immediate (page | PSN << 12, or any 32 bits), byte count and hw_drops
 * byte the bytes choose, mostly with an 'md' block (frame number, PSN, bytes_written near the
 * frame size, or all zeros), some CQEs raw bytes (any opcode, error CQEs).  A receiver runs on
 * it (fast pacing, or stepped: one record at a time) with blocking_monitor on a thread, recording its CQ (record_cqes) when a bit
 * says so; the consumer drains with get_next_frame.
 * Oracle besides ASan/UBSan/LSan: every record is consumed (replay progress reaches the total);
 * no frame is handed out twice (received_frame_number grows strictly), every page < pages;
 * frames + bad_page + errors + flushed = records (each CQE the loader accepts is one completion:
 * a success is a frame or a bad page, an error an error or a flush) and RESP_WR_IMM records <=
 * frames + bad_page, hw_drops <= the sum of
 * the fixture's hw_drops bytes; consumed + dropped + replaced <= frames; lost_link_down <= lost;
 * overwritten, missing_metadata, short_frames + long_frames <= frames. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_error.h"
#include "mlxd_fixture.h"
#include "mlxd_hsb.h"
#include "mlxd_receiver.h"
#include "structured.h"

#define PAGES 4
#define FRAME 256
#define PAGE_SZ (FRAME + 128)
#define MAXREC 24

static uint8_t buffer[PAGES * PAGE_SZ];
static uint8_t written_cqe[MAXREC][64];   /* the fixture's CQEs, for the recording's check */

static void *monitor(void *r) { mlxd_receiver_blocking_monitor(r); return NULL; }

static void be32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* Writes the fixture the bytes describe to path; returns the records and sums hw_drops. */
static unsigned build(struct fz *z, const char *path, uint64_t *hw_sum, unsigned *structured)
{
    struct mlxd_fixture_header h = { .version = 2, .cqe_size = 64, .ring_size = 256, .cqn = 0x400 };
    snprintf(h.source, sizeof h.source, "fuzz_receiver");
    struct mlxd_fixture_writer *w;
    if (mlxd_fixture_writer_open(path, &h, &w)) abort();
    unsigned n = (unsigned)fz_take(z, 1) % (MAXREC + 1);
    uint32_t psn = 0, fn = (uint32_t)fz_take(z, 2);
    *hw_sum = 0;
    *structured = 0;
    for (unsigned k = 0; k < n; k++) {
        unsigned ctl = (unsigned)fz_take(z, 2);
        uint8_t cqe[64] = { 0 };
        if (ctl & 1) {                                    /* raw CQE bytes */
            for (unsigned i = 0; i < 64; i++) cqe[i] = (uint8_t)fz_take(z, 1);
            cqe[63] &= 0xfe;                              /* owner of the first pass */
            *hw_sum += cqe[56];
        } else {
            psn += (ctl & 2) ? (uint32_t)fz_take(z, 1) : 3;
            fn += (ctl & 4) ? (uint32_t)fz_take(z, 2) : 1;
            uint32_t page = (ctl & 8) ? (uint32_t)fz_take(z, 1) % (PAGES + 2) : k % PAGES;
            uint32_t imm = (ctl & 16) ? (uint32_t)fz_take(z, 4) : mlxd_hsb_imm_make(page, psn, MLXD_HSB_IMM_12_20);
            be32(cqe + 36, imm);
            be32(cqe + 44, (ctl & 32) ? (uint32_t)fz_take(z, 2) : FRAME);
            uint8_t drops = (ctl & 64) ? (uint8_t)fz_take(z, 1) : 0;
            be32(cqe + 56, (uint32_t)drops << 24 | 2);     /* hw_drops, QPN 2 */
            *hw_sum += drops;
            cqe[63] = 0x10;                               /* RESP_WR_IMM, owner 0 */
            ++*structured;
            if (!(ctl & 128)) {                           /* an md block */
                uint8_t md[128] = { 0 };
                if (!(ctl & 256)) {                       /* else all zeros */
                    struct mlxd_hsb_metadata m = {
                        .psn = (ctl & 512) ? (uint32_t)fz_take(z, 3) : psn, .frame_number32 = fn,
                        .bytes_written = (ctl & 1024) ? fz_take(z, 2) : FRAME };
                    mlxd_hsb_metadata_encode(&m, md, MLXD_HSB_METADATA_SIZE);
                }
                if (mlxd_fixture_write_md(w, md)) abort();
            }
        }
        memcpy(written_cqe[k], cqe, 64);
        if (mlxd_fixture_write(w, cqe, false, 0)) abort();
    }
    if (mlxd_fixture_writer_close(w)) abort();
    return n;
}

/* Hands out the queued frames, checking each: none twice, page in range. */
static void drain(struct mlxd_receiver *r, uint64_t *last)
{
    struct mlxd_receiver_frame f;
    while (mlxd_receiver_get_next_frame(r, 0, &f)) {
        if (f.received_frame_number <= *last || f.page >= PAGES) abort();
        *last = f.received_frame_number;
    }
}

/* Drains until the monitor has taken want CQEs as frames, bad pages, errors or flushes (at most 5 s:
 * then it hangs); returns the stats. */
static struct mlxd_receiver_stats wait_taken(struct mlxd_receiver *r, uint64_t want, uint64_t *last)
{
    struct mlxd_receiver_stats st;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        drain(r, last);
        if (mlxd_receiver_stats(r, &st)) abort();
        if (st.frames + st.bad_page + st.errors + st.flushed >= want) return st;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 5) {
            uint64_t w = 0, tot = 0;
            mlxd_receiver_replay_progress(r, &w, &tot);
            fprintf(stderr, "fuzz_receiver: the monitor took %lu of %lu CQEs in 5 s (replay wrote %lu of %lu)\n",
                    (unsigned long)(st.frames + st.bad_page + st.errors + st.flushed), (unsigned long)want,
                    (unsigned long)w, (unsigned long)tot);
            abort();
        }
    }
}

/* The recording (record_cqes, mlx5/record.c) starts with the fixture's CQEs, byte for byte but
 * the owner bit (the ring's pass), unless the recorder says it overflowed. */
static void check_recording(const char *rec, unsigned n)
{
    struct mlxd_fixture_reader *rd;
    if (mlxd_fixture_open(rec, &rd)) { fprintf(stderr, "recording: %s\n", mlxd_errmsg()); abort(); }
    if (mlxd_fixture_header(rd)->cqe_size != 64) abort();
    bool overflowed = mlxd_fixture_header(rd)->overflow != 0;
    struct mlxd_fixture_record x;
    for (unsigned k = 0; k < n && !overflowed; k++) {
        int got = mlxd_fixture_next(rd, &x);
        if (getenv("MLXD_FUZZ_DEBUG") && got == 1)
            fprintf(stderr, "rec %u: op_own %02x imm %02x%02x%02x%02x / fixture %02x %02x%02x%02x%02x\n", k, x.cqe[63],
                    x.cqe[36], x.cqe[37], x.cqe[38], x.cqe[39], written_cqe[k][63], written_cqe[k][36],
                    written_cqe[k][37], written_cqe[k][38], written_cqe[k][39]);
        if (got != 1 && getenv("MLXD_FUZZ_DEBUG")) fprintf(stderr, "recording: %d at %u of %u\n", got, k, n);
        if (got != 1 || memcmp(x.cqe, written_cqe[k], 63) ||
            (x.cqe[63] & 0xfe) != (written_cqe[k][63] & 0xfe)) {
            fprintf(stderr, "recording: record %u differs from the fixture's\n", k);
            abort();
        }
    }
    int rc;
    while ((rc = mlxd_fixture_next(rd, &x)) == 1)        /* close's flushes may follow */
        ;
    if (rc) abort();
    mlxd_fixture_close(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fuzz_receiver_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    struct fz z = { data, size };
    uint64_t hw_sum;
    unsigned s;
    unsigned n = build(&z, path, &hw_sum, &s);
    unsigned opt = (unsigned)fz_take(&z, 1);
    unsigned qs = 1 + opt % 4;
    char rec[] = "/tmp/fuzz_receiver_rec_XXXXXX";
    bool record = opt & 4, stepped = opt & 8;
    if (record) {
        int rfd = mkstemp(rec);
        if (rfd < 0) abort();
        close(rfd);
    }
    struct mlxd_receiver *r = mlxd_receiver_new();
    struct mlxd_receiver_opts o = {
        .sz = sizeof o, .device = "replay", .buffer = (uintptr_t)buffer, .buffer_size = sizeof buffer,
        .frame_size = FRAME, .page_size = PAGE_SZ, .pages = PAGES, .metadata_offset = FRAME,
        .peer_ip = "127.0.0.1", .queue_size = qs, .replay_fixture = path,
        .replay_pace = stepped ? MLXD_REPLAY_PACE_STEPPED : MLXD_REPLAY_PACE_FAST, .record_cqes = record ? rec : NULL,
    };
    int rc = mlxd_receiver_start(r, &o);
    if (rc) {        /* a raw record the loader refuses (e.g. an INVALID opcode): a clear EINVAL */
        if (rc != -EINVAL || s == n || !strstr(mlxd_errmsg(), "mlxd_receiver_start: ")) {
            fprintf(stderr, "start: %d %s\n", rc, mlxd_errmsg());
            abort();
        }
        mlxd_receiver_destroy(r);
        unlink(path);
        if (record) unlink(rec);
        return 0;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, monitor, r)) abort();
    uint64_t last = 0, written = 0, total = 0;
    if (stepped) {      /* one record at a time, each structured one taken before the next: its
                           md block is not overwritten first, so the accounting is exact */
        for (unsigned k = 0; k < n; k++) {
            if (mlxd_receiver_replay_step(r, 1)) abort();
            wait_taken(r, k + 1, &last);
        }
    }
    for (unsigned spins = 0;; spins++) {
        drain(r, &last);
        if (mlxd_receiver_replay_progress(r, &written, &total)) abort();
        if (total != n) abort();
        if (written == total) break;
        if (spins > 20000000) abort();                    /* a hang */
    }
    /* every record is in the ring: wait until the monitor has taken them all */
    struct mlxd_receiver_stats st = wait_taken(r, n, &last);
    if (getenv("MLXD_FUZZ_DEBUG"))
        fprintf(stderr, "n %u s %u last %lu frames %lu consumed %lu bad_page %lu errors %lu hw_drops %lu lost %lu missing %lu short %lu long %lu overwritten %lu\n", n, s, (unsigned long)last,
                (unsigned long)st.frames, (unsigned long)st.consumed, (unsigned long)st.bad_page, (unsigned long)st.errors,
                (unsigned long)st.hw_drops, (unsigned long)st.lost, (unsigned long)st.missing_metadata,
                (unsigned long)st.short_frames, (unsigned long)st.long_frames, (unsigned long)st.overwritten);
    if (st.frames + st.bad_page + st.errors + st.flushed != n || st.frames + st.bad_page < s || st.hw_drops > hw_sum || last > st.frames ||
        st.consumed + st.dropped + st.replaced > st.frames || st.lost_link_down > st.lost ||
        st.overwritten > st.frames || st.missing_metadata > st.frames ||
        st.short_frames + st.long_frames > st.frames)
        abort();
    mlxd_receiver_close(r);
    pthread_join(t, NULL);
    mlxd_receiver_destroy(r);
    unlink(path);
    if (record) {
        check_recording(rec, n);
        unlink(rec);
    }
    return 0;
}
