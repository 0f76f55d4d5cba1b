/* The NIC's async events through Mlx5DirectRoceReceiverV1 (issue 17): set_event_handler and
 * next_event.  The link is pulled on the emulated port (mlxd_emu_port_set, the kernel's
 * IB_EVENT_PORT_ERR / IB_EVENT_PORT_ACTIVE) and a QP fatal error injected
 * (mlxd_emu_inject_event); the kinds are enum mlxd_receiver_event_kind, the kernel numbers
 * include/rdma/ib_verbs.h enum ib_event_type. */
#include "hl_util.hpp"

#include <mutex>
#include <vector>

extern "C" {
#include "mlxd_emu.h"
}

using Mode = hl::Mlx5DirectRoceReceiverV1::Mode;
using Event = hl::Mlx5DirectRoceReceiverV1::Event;

#define PRIVATE() mlxd_test_private_devices()

/* What the handler saw, and on which thread. */
struct Seen {
    std::mutex mu;
    std::vector<Event> events;
    std::vector<std::thread::id> threads;
    void add(const Event &e)
    {
        std::lock_guard<std::mutex> l(mu);
        events.push_back(e);
        threads.push_back(std::this_thread::get_id());
    }
    std::vector<uint32_t> kinds()
    {
        std::lock_guard<std::mutex> l(mu);
        std::vector<uint32_t> k;
        for (const Event &e : events)
            k.push_back(e.kind);
        return k;
    }
};

static void want_event(hl::Mlx5DirectRoceReceiverV1 &rx, uint32_t kind, uint32_t kernel_type, Event &e)
{
    ck_assert_msg(rx.next_event(10000, e), "no %s within 10 s", hl::Mlx5DirectRoceReceiverV1::event_name(kind));
    ck_assert_msg(e.kind == kind, "event %s, not %s", hl::Mlx5DirectRoceReceiverV1::event_name(e.kind),
                  hl::Mlx5DirectRoceReceiverV1::event_name(kind));
    ck_assert_uint_eq(e.kernel_type, kernel_type);
}

/* next_event before any start: the misuse is an exception, as get_next_frame's. */
START_TEST(next_event_before_start)
{
    hl::Mlx5DirectRoceReceiverV1 rx;
    Event e;
    HL_THROWS_EXACTLY(rx.next_event(0, e), "mlxd_receiver_next_event: start() has not been called");
    HL_THROWS_EXACTLY(rx.next_event(10, e), "mlxd_receiver_next_event: start() has not been called");
}
END_TEST

/* A port flap in the second run of a receiver whose handler was set before the first: the
 * handler (on the monitor thread) and next_event each see exactly PORT_DOWN, PORT_UP, RESUMED;
 * an empty handler then stops the calls while next_event still gets the events. */
START_TEST(port_flap)
{
    PRIVATE();
    HlRig g;
    Seen seen;
    g.rx = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    hl::Mlx5DirectRoceReceiverV1 &rx = *g.rx;
    rx.set_event_handler([&](const Event &e) { seen.add(e); });
    Mode mode = _i ? Mode::busy_poll : Mode::event;
    g.start(4096, 4, 4, mode);
    g.monitor();
    g.gen(2);
    g.stop();
    g.start(4096, 4, 4, mode);               /* the handler stays registered */
    g.monitor();
    std::thread::id mon_id = g.mon.get_id();
    g.gen(3);
    Event e;
    ck_assert(!rx.next_event(0, e));
    ck_assert(!rx.next_event(20, e));        /* waits, nothing comes */
    /* a consumer already waiting in next_event when the event comes is woken with it */
    bool got = false;
    double waited = 0;
    std::thread waiter([&] {
        double t0 = hl_now();
        got = rx.next_event(60000, e);
        waited = hl_now() - t0;
    });
    hl_sleep_us(100000);
    ck_assert_int_eq(mlxd_emu_port_set(0, false), 0);
    waiter.join();
    ck_assert(got);
    ck_assert_msg(waited < 30, "next_event slept %.1f s of its 60 s: not woken by the event", waited);
    ck_assert_uint_eq(e.kind, MLXD_RX_EVENT_PORT_DOWN);
    ck_assert_uint_eq(e.kernel_type, 10);    /* IB_EVENT_PORT_ERR */
    ck_assert_uint_eq(e.frames, 3);
    ck_assert_int_eq(mlxd_emu_port_set(0, true), 0);
    want_event(rx, MLXD_RX_EVENT_PORT_UP, 9, e);        /* IB_EVENT_PORT_ACTIVE */
    uint64_t outage = e.down_ns;
    ck_assert_uint_gt(outage, 0);
    g.gen(3);                                /* the first frame after the outage: RESUMED */
    want_event(rx, MLXD_RX_EVENT_RESUMED, 0, e);
    ck_assert_uint_eq(e.frames_lost, 0);     /* nothing was sent while the link was down */
    ck_assert_uint_eq(e.down_ns, outage);
    ck_assert(!rx.next_event(0, e));
    std::vector<uint32_t> want = { MLXD_RX_EVENT_PORT_DOWN, MLXD_RX_EVENT_PORT_UP, MLXD_RX_EVENT_RESUMED };
    ck_assert(seen.kinds() == want);
    for (std::thread::id t : seen.threads)
        ck_assert(t == mon_id);
    hl::Mlx5DirectRoceReceiverV1::Stats st = rx.stats();
    ck_assert_uint_eq(st.events, 2);         /* the two async events; RESUMED is the receiver's */
    ck_assert_uint_eq(st.port_down, 1);
    ck_assert_uint_eq(st.port_up, 1);
    ck_assert_uint_eq(st.events_dropped, 0);
    ck_assert_uint_eq(st.lost, 0);
    ck_assert_uint_eq(st.frames, 6);

    rx.set_event_handler({});                /* stops the calls; the queue still fills */
    ck_assert_int_eq(mlxd_emu_port_set(0, false), 0);
    want_event(rx, MLXD_RX_EVENT_PORT_DOWN, 10, e);
    ck_assert_int_eq(mlxd_emu_port_set(0, true), 0);
    want_event(rx, MLXD_RX_EVENT_PORT_UP, 9, e);
    ck_assert(seen.kinds() == want);
    g.stop();
    ck_assert(!rx.next_event(0, e));
}
END_TEST

/* A QP fatal error ends blocking_monitor with std::runtime_error carrying the C library's
 * message; the handler and next_event have the event. */
START_TEST(fatal_ends_monitor)
{
    PRIVATE();
    HlRig g;
    Seen seen;
    g.rx = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    g.rx->set_event_handler([&](const Event &e) { seen.add(e); });
    g.start(4096, 4, 4, _i ? Mode::busy_poll : Mode::event);
    g.monitor();
    g.gen(3);
    ck_assert_int_eq(mlxd_emu_inject_event(0, 1, UINT32_MAX), 0);   /* IB_EVENT_QP_FATAL */
    double end = hl_now() + 10;
    while (!g.mon_returned && hl_now() < end)
        hl_sleep_us(1000);
    ck_assert_msg(g.mon_returned, "blocking_monitor did not end on IB_EVENT_QP_FATAL");
    g.mon.join();
    ck_assert_msg(g.mon_error.rfind("mlxd_receiver_blocking_monitor: ", 0) == 0 &&
                  g.mon_error.find("IB_EVENT_QP_FATAL") != std::string::npos,
                  "blocking_monitor threw '%s'", g.mon_error.c_str());
    std::vector<uint32_t> want = { MLXD_RX_EVENT_QP_FATAL };
    ck_assert(seen.kinds() == want);
    Event e;
    want_event(*g.rx, MLXD_RX_EVENT_QP_FATAL, 1, e);
    ck_assert_uint_eq(e.frames, 3);
    ck_assert(!g.rx->next_event(0, e));
    ck_assert_uint_eq(g.rx->stats().qp_errors, 1);
    g.rx->close();
    g.mon_error.clear();
}
END_TEST

Suite *hololink_events_suite(void)
{
    Suite *s = suite_create("hololink_events");
    TCase *tc = tcase_create("next_event_before_start");
    tcase_add_test(tc, next_event_before_start);
    suite_add_tcase(s, tc);
    tc = tcase_create("port_flap");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, port_flap, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("fatal_ends_monitor");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, fatal_ends_monitor, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
