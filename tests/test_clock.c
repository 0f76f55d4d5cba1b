/* clock: CQE timestamps in nanoseconds (issue 18).
 *   ts_to_ns_exact    mlxd_ts_to_ns against values worked out by hand from mlx5dv_ts_to_ns's
 *                     definition (infiniband/mlx5dv.h) and the kernel's clocksource_khz2mult
 *                     rounding: a 156.25 MHz timer (6.4 ns per tick: mult 1717986918, shift 28)
 *                     across the 41-bit wrap, later and earlier than last_cycles, with and
 *                     without a carried fraction; a 1 GHz 32-bit timer across its wrap; the
 *                     real-time format (seconds << 32 | ns, the kernel's REAL_TIME_TO_NS).
 *   emulated_clocks   the emulated device (emu/nic/nic_clock.c): the caps mlxd_port_info reports,
 *                     free-running CQE stamps converted through the clock-info page while the
 *                     32-bit timer wraps (the raw stamps go down, the nanoseconds never do, and
 *                     each lies within the host's CLOCK_REALTIME bracket of its write give or
 *                     take 2 ms of the two clocks' drift), real-time stamps inside the bracket
 *                     exactly, and a device without real time refusing a real_time_ts CQ. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mlxd_emu.h"
#include "mlxd_emu_bench.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
#include "util.h"

START_TEST(ts_to_ns_exact)
{
    const uint64_t m41 = (1ull << 41) - 1, base = 1700000000000000000ull;
    struct mlxd_clock_info ci = { .nsec = base, .last_cycles = m41 - 10, .frac = 0, .mult = 1717986918u,
                                  .shift = 28, .mask = m41 };
    ck_assert_uint_eq(mlxd_ts_to_ns(&ci, m41 - 10), base);
    /* 16 ticks later, past the wrap: 16 * 6.4 = 102.4 ns -> 102 */
    ck_assert_uint_eq(mlxd_ts_to_ns(&ci, 5), base + 102);
    /* 16 ticks earlier */
    ck_assert_uint_eq(mlxd_ts_to_ns(&ci, m41 - 26), base - 102);
    /* 2 ticks: 12.8 -> 12; with a carried half nanosecond (frac 2^27 of 2^28): 13.3 -> 13 later,
     * (2 * mult - frac) >> shift = 12.3 -> 12 earlier */
    ck_assert_uint_eq(mlxd_ts_to_ns(&ci, m41 - 8), base + 12);
    ci.frac = 1u << 27;
    ck_assert_uint_eq(mlxd_ts_to_ns(&ci, m41 - 8), base + 13);
    ck_assert_uint_eq(mlxd_ts_to_ns(&ci, m41 - 12), base - 12);
    /* half the mask later is still later; one more tick is earlier (the wrap rule) */
    ci.frac = 0;
    ci.last_cycles = 0;
    ck_assert_uint_eq(mlxd_ts_to_ns(&ci, 1000000), base + 6399999);   /* mult rounds 6.4 * 2^28 down */
    /* 1 GHz (mult 2^30, shift 30: one ns per tick), a 32-bit timer: 0xfffffff0 -> 0x10 is 32 ns */
    const uint64_t t0 = 1000000000000ull;
    struct mlxd_clock_info g = { .nsec = t0, .last_cycles = 0xfffffff0u, .mult = 1u << 30, .shift = 30,
                                 .mask = 0xffffffffu };
    ck_assert_uint_eq(mlxd_ts_to_ns(&g, 0x10), t0 + 32);
    ck_assert_uint_eq(mlxd_ts_to_ns(&g, 0xffffff00u), t0 - 0xf0);
    ck_assert_uint_eq(mlxd_ts_to_ns(&g, 0x7fffffefu), t0 + 0x7fffffffull);   /* mask/2 ticks on: later */
    ck_assert_uint_eq(mlxd_ts_to_ns(&g, 0x7ffffff0u), t0 - 0x80000000ull);   /* one more: earlier */
    /* real time: seconds in the high word */
    ck_assert_uint_eq(mlxd_real_time_ts_to_ns((1700000000ull << 32) | 999999999u), 1700000000999999999ull);
    ck_assert_uint_eq(mlxd_real_time_ts_to_ns(0), 0);
}
END_TEST

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct rx {
    struct mlxd_nic *nic;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    uint32_t qpn;
};

static void rx_open(struct rx *r, bool real_time)
{
    ck_assert_msg(mlxd_open("mlx5_0", NULL, &r->nic) == 0, "%s", mlxd_errmsg());
    struct mlxd_cq_opts co = { .sz = sizeof co, .real_time_ts = real_time };
    ck_assert_msg(mlxd_cq_create(r->nic, 64, &co, &r->cq) == 0, "%s", mlxd_errmsg());
    ck_assert(mlxd_cq_real_time(r->cq) == real_time);
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UC, .recv_depth = 64 };
    ck_assert_int_eq(mlxd_qp_create(r->cq, &qo, &r->qp), 0);
    struct mlxd_endpoint me;
    ck_assert_int_eq(mlxd_qp_endpoint(r->qp, &me), 0);
    r->qpn = me.qpn;
    struct mlxd_connect_opts cn = { .sz = sizeof cn, .peer_access = MLXD_ACCESS_REMOTE_WRITE, .receive_only = true };
    ck_assert_int_eq(mlxd_qp_connect(r->qp, &me, &cn), 0);
}

/* One completion written now; its timestamp and the host's CLOCK_REALTIME before and after. */
static uint64_t stamp(struct rx *r, uint64_t *before, uint64_t *after)
{
    struct mlxd_recv rv = { .wr_id = 1 };
    ck_assert_int_eq(mlxd_qp_receive(r->qp, &rv, 1), 1);
    *before = realtime_ns();
    ck_assert_int_eq(mlxd_emu_bench_write_imm(0, r->qpn, 7, 0, NULL), 0);
    *after = realtime_ns();
    struct mlxd_completion wc;
    ck_assert_int_eq(mlxd_cq_poll(r->cq, &wc, 1), 1);
    return wc.timestamp;
}

START_TEST(emulated_clocks)
{
    /* a 156.25 MHz 32-bit timer (2^32 ticks = 27.5 s) */
    ck_assert_int_eq(mlxd_emu_clock_set(156250, 32, 0, true), 0);
    ck_assert_int_eq(mlxd_emu_clock_set(999, 32, 0, true), -EINVAL);
    ck_assert_int_eq(mlxd_emu_clock_set(156250, 31, 0, true), -EINVAL);
    ck_assert_int_eq(mlxd_emu_clock_set(156250, 32, 1ull << 32, true), -EINVAL);
    struct rx r;
    rx_open(&r, false);
    struct mlxd_port_info pi;
    ck_assert_int_eq(mlxd_port_info(r.nic, &pi), 0);
    ck_assert_uint_eq(pi.hca_core_clock, 156250);
    ck_assert_uint_eq(pi.timestamp_mask, 0xffffffffu);
    ck_assert(pi.real_time_ts);
    ck_assert(pi.clock_info);
    /* now 100 ms before the wrap; the clock-info page follows within a refresh (1 ms) */
    const uint64_t start = (1ull << 32) - 156250ull * 100;
    ck_assert_int_eq(mlxd_emu_clock_set(156250, 32, start, true), 0);
    struct mlxd_clock_info c0 = { 0 };
    for (int i = 0; i < 1000 && (mlxd_clock_info(r.nic, &c0) || c0.last_cycles < start); i++) usleep(1000);
    ck_assert_uint_ge(c0.last_cycles, start);
    uint64_t prev_raw = 0, prev_ns = 0;
    bool wrapped = false;
    for (int i = 0; i < 60 && !(wrapped && i > 10); i++) {     /* 5 ms apart: across the wrap */
        uint64_t b, a, raw = stamp(&r, &b, &a);
        ck_assert_uint_le(raw, 0xffffffffu);
        struct mlxd_clock_info ci;
        ck_assert_int_eq(mlxd_clock_info(r.nic, &ci), 0);
        ck_assert_uint_eq(ci.mask, 0xffffffffu);
        uint64_t ns = mlxd_ts_to_ns(&ci, raw);
        ck_assert_msg(ns + 2000000 >= b && ns <= a + 2000000, "stamp %d: %llu ns, host bracket [%llu, %llu]", i,
                      (unsigned long long)ns, (unsigned long long)b, (unsigned long long)a);
        if (i) {
            wrapped |= raw < prev_raw;
            ck_assert_uint_ge(ns, prev_ns);
        }
        prev_raw = raw;
        prev_ns = ns;
        usleep(5000);
    }
    ck_assert_msg(wrapped, "the timer did not wrap (last stamp 0x%llx)", (unsigned long long)prev_raw);
    ck_assert_int_eq(mlxd_close(r.nic), 0);

    /* real time: the stamp is CLOCK_REALTIME read inside the bracket */
    rx_open(&r, true);
    for (int i = 0; i < 10; i++) {
        uint64_t b, a, raw = stamp(&r, &b, &a);
        uint64_t ns = mlxd_real_time_ts_to_ns(raw);
        ck_assert_uint_lt((uint32_t)raw, 1000000000u);
        ck_assert_uint_ge(ns, b);
        ck_assert_uint_le(ns, a);
    }
    ck_assert_int_eq(mlxd_close(r.nic), 0);

    /* a device without the real-time format */
    ck_assert_int_eq(mlxd_emu_clock_set(156250, 64, 0, false), 0);
    struct mlxd_nic *nic;
    struct mlxd_cq *cq = NULL;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    ck_assert_int_eq(mlxd_port_info(nic, &pi), 0);
    ck_assert(!pi.real_time_ts);
    struct mlxd_cq_opts co = { .sz = sizeof co, .real_time_ts = true };
    ck_assert_int_eq(mlxd_cq_create(nic, 8, &co, &cq), -EOPNOTSUPP);
    ck_assert_ptr_null(cq);
    ck_assert_msg(strstr(mlxd_errmsg(), "no real-time CQE timestamps"), "%s", mlxd_errmsg());
    ck_assert_int_eq(mlxd_clock_info(NULL, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_close(nic), 0);
    ck_assert_int_eq(mlxd_emu_clock_set(156250, 64, 0, true), 0);
}
END_TEST

Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("conversion");
    tcase_add_test(tc, ts_to_ns_exact);
    suite_add_tcase(s, tc);
    tc = tcase_create("emulated");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, mlxd_test_private_devices, NULL);
    tcase_add_test(tc, emulated_clocks);
    suite_add_tcase(s, tc);
    return s;
}
