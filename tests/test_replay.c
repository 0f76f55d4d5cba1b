/* The replay feeder: a CQE fixture (abi/mlxd_fixture.h) played into a small detached ring while
 * the poll loop consumes it: many wraps, odd batch sizes, error CQEs mixed in; the feeder never
 * overtakes the consumer (a lost or reordered CQE would show as a gap in wqe_counter). */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/mlx5dv.h>
#include "mlxd_error.h"
#include "mlxd_fixture.h"
#include "mlxd_mlx5.h"

static char path[256];

/* n records; every 5th an error CQE (RESP_ERR, syndrome LOCAL_LENGTH 0x01); recorded owner bits
 * are those of a 256-entry ring (the feeder must recompute them for its own ring).  Records from
 * index first_delayed on carry delay_ns (when not 0). */
static void write_fixture_from(unsigned n, uint64_t delay_ns, unsigned first_delayed)
{
    snprintf(path, sizeof path, "%s/mlxd-replay-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    struct mlxd_fixture_header h = { .version = 1, .cqe_size = 64, .ring_size = 256, .cqn = 0x412 };
    strcpy(h.source, "test_replay synthetic stream");
    struct mlxd_fixture_writer *w;
    ck_assert_int_eq(mlxd_fixture_writer_open(path, &h, &w), 0);
    for (unsigned i = 0; i < n; i++) {
        uint8_t c[64];
        memset(c, 0, sizeof c);
        uint8_t owner = (i & 256) ? 1 : 0;
        if (i % 5 == 4) {
            struct mlx5_err_cqe *e = (void *)c;
            e->syndrome = 0x01;
            e->vendor_err_synd = 0x12;
            e->s_wqe_opcode_qpn = htobe32(0x77);
            e->wqe_counter = htobe16((uint16_t)i);
            e->op_own = (uint8_t)(MLX5_CQE_RESP_ERR << 4 | owner);
        } else {
            struct mlx5_cqe64 *q = (void *)c;
            q->byte_cnt = htobe32(1000 + i);
            q->imm_inval_pkey = htobe32(i);
            q->sop_drop_qpn = htobe32(0x77);
            q->wqe_counter = htobe16((uint16_t)i);
            q->timestamp = htobe64(5000 + i);
            q->op_own = (uint8_t)(MLX5_CQE_RESP_WR_IMM << 4 | owner);
        }
        bool delayed = delay_ns != 0 && i >= first_delayed;
        ck_assert_int_eq(mlxd_fixture_write(w, c, delayed, delayed ? delay_ns : 0), 0);
    }
    ck_assert_int_eq(mlxd_fixture_writer_close(w), 0);
}

static void write_fixture(unsigned n, uint64_t delay_ns) { write_fixture_from(n, delay_ns, 0); }

/* Waits until the feeder has written the first n CQEs of its first pass over cq's ring (op_own's
 * opcode no longer MLX5_CQE_INVALID, the ring's initial 0xF0), without consuming them: the test
 * waits for the feeder's progress, not for a time.  Fails after 30 s (a stuck feeder). */
static void wait_written(struct mlxd_cq *cq, unsigned n)
{
    volatile void *ring;
    volatile uint32_t *dbrec;
    uint32_t ncqe;
    ck_assert_int_eq(mlxd_cq_ring(cq, &ring, &ncqe, &dbrec), 0);
    ck_assert_uint_ge(ncqe, n);
    const volatile uint8_t *b = ring;
    time_t t0 = time(NULL);
    for (unsigned i = 0; i < n;) {
        uint8_t op_own = __atomic_load_n(b + (size_t)i * 64 + 63, __ATOMIC_ACQUIRE);
        if (op_own >> 4 != MLX5_CQE_INVALID) { i++; continue; }
        ck_assert_msg(time(NULL) - t0 < 30, "the feeder wrote %u of %u CQEs in 30 s", i, n);
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* Polls until `total` completions arrived, in batches of 1..13; checks each.  Fails when no
 * completion arrives for 30 s (a stuck feeder), however long the whole takes on a slow machine. */
static void consume(struct mlxd_cq *cq, unsigned total, unsigned n_per_loop)
{
    struct mlxd_completion wc[13];
    unsigned got = 0, batch = 1;
    time_t t0 = time(NULL);
    while (got < total) {
        int n = mlxd_cq_poll(cq, wc, (int)batch);
        ck_assert_int_ge(n, 0);
        if (n > 0) t0 = time(NULL);
        for (int i = 0; i < n; i++, got++) {
            unsigned k = got % n_per_loop;
            ck_assert_uint_eq(wc[i].wqe_counter, (uint16_t)k);
            ck_assert_uint_eq(wc[i].qpn, 0x77);
            if (k % 5 == 4) {
                ck_assert_uint_eq(wc[i].status, 1);       /* IBV_WC_LOC_LEN_ERR */
                ck_assert_uint_eq(wc[i].syndrome, 0x01);
                ck_assert_uint_eq(wc[i].vendor_syndrome, 0x12);
            } else {
                ck_assert_uint_eq(wc[i].status, 0);
                ck_assert_uint_eq(wc[i].opcode, 129);     /* IBV_WC_RECV_RDMA_WITH_IMM */
                ck_assert_uint_eq(wc[i].imm, k);
                ck_assert_uint_eq(wc[i].byte_len, 1000 + k);
                ck_assert_uint_eq(wc[i].timestamp, 5000 + k);
            }
        }
        batch = batch % 13 + 1;
        ck_assert_msg(time(NULL) - t0 < 30, "replay stalled at %u of %u", got, total);
    }
    ck_assert_int_eq(mlxd_cq_poll(cq, wc, 13), 0);
}

START_TEST(fast_many_wraps)
{
    write_fixture(1000, 0);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(16, &cq), 0);
    struct mlxd_replay *rp;
    struct mlxd_replay_opts o = { .sz = sizeof o, .paced = false, .loops = 3 };
    ck_assert_int_eq(mlxd_replay_start(cq, path, &o, &rp), 0);
    consume(cq, 3000, 1000);
    ck_assert_int_eq(mlxd_replay_finish(rp, false), 3000);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(path);
}
END_TEST

START_TEST(paced)
{
    write_fixture(20, 2000000);     /* 2 ms between CQEs */
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(8, &cq), 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    struct mlxd_replay *rp;
    struct mlxd_replay_opts o = { .sz = sizeof o, .paced = true };
    ck_assert_int_eq(mlxd_replay_start(cq, path, &o, &rp), 0);
    consume(cq, 20, 20);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    ck_assert_msg(ms >= 39.0, "20 CQEs 2 ms apart took %.1f ms", ms);
    ck_assert_int_eq(mlxd_replay_finish(rp, false), 20);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(path);
}
END_TEST

START_TEST(stop_and_errors)
{
    write_fixture(100, 0);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(4, &cq), 0);
    struct mlxd_replay *rp;
    ck_assert_int_eq(mlxd_replay_start(cq, path, NULL, &rp), 0);
    /* nobody consumes: the feeder fills the 4 slots and waits for room; stop ends it.  Wait for
     * the 4 CQEs themselves (a fixed sleep, 20 ms here before, is no bound on a loaded machine:
     * the feeder thread may not have run at all, and finish returned 0). */
    wait_written(cq, 4);
    ck_assert_int_eq(mlxd_replay_finish(rp, true), 4);
    ck_assert_int_eq(mlxd_replay_start(cq, "/nonexistent/x.fix", NULL, &rp), -ENOENT);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "/nonexistent/x.fix"));
    ck_assert_int_eq(mlxd_replay_start(NULL, path, NULL, &rp), -EINVAL);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(path);
}
END_TEST

/* Stop during a paced wait: the second record is due an hour after the first; finish(rp, true)
 * ends the wait at once (before, the feeder slept it out and finish with it).  If stop were not
 * honoured, the test would hang until Check's timeout: no time is measured. */
START_TEST(stop_during_paced_delay)
{
    write_fixture_from(3, 3600ull * 1000000000u, 1);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(4, &cq), 0);
    struct mlxd_replay *rp;
    struct mlxd_replay_opts o = { .sz = sizeof o, .paced = true };
    ck_assert_int_eq(mlxd_replay_start(cq, path, &o, &rp), 0);
    wait_written(cq, 1);
    ck_assert_int_eq(mlxd_replay_finish(rp, true), 1);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(path);
}
END_TEST

/* Messages start with the called function, also when the fixture reader fails; an options struct
 * from a newer header (sz = sizeof + 8) is accepted when its tail is zero, -EINVAL otherwise. */
START_TEST(errors_name_the_call_and_opts_size)
{
    write_fixture(3, 0);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create_detached(4, &cq), 0);
    struct mlxd_replay *rp = NULL;
    ck_assert_int_eq(mlxd_replay_start(cq, "/nonexistent.fix", NULL, &rp), -ENOENT);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_replay_start: ", 19), "%s", mlxd_errmsg());
    ck_assert_msg(!strcmp(mlxd_errmsg(), "mlxd_replay_start: /nonexistent.fix: No such file or directory"),
                  "%s", mlxd_errmsg());
    ck_assert_ptr_null(rp);
    struct { struct mlxd_replay_opts o; uint64_t extra; } v;
    memset(&v, 0, sizeof v);
    v.o.sz = sizeof v.o + 8;
    v.extra = 0x5a;
    ck_assert_int_eq(mlxd_replay_start(cq, path, &v.o, &rp), -EINVAL);
    ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_replay_start: opts->sz ", 28), "%s", mlxd_errmsg());
    ck_assert_ptr_null(rp);
    v.extra = 0;
    ck_assert_int_eq(mlxd_replay_start(cq, path, &v.o, &rp), 0);
    wait_written(cq, 3);
    ck_assert_int_eq(mlxd_replay_finish(rp, true), 3);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);
    unlink(path);
}
END_TEST

Suite *replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("feeder");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fast_many_wraps);
    tcase_add_test(tc, paced);
    tcase_add_test(tc, stop_and_errors);
    tcase_add_test(tc, stop_during_paced_delay);
    tcase_add_test(tc, errors_name_the_call_and_opts_size);
    suite_add_tcase(s, tc);
    return s;
}
