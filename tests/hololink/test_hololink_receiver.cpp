/* Every method of RoceReceiverInterfaceV1 on mlx5direct (hololink/module/roce_receiver.hpp,
 * mlx5direct_roce_receiver.hpp) on the emulated NIC: each exception with the C library's
 * message, frames with their fields in both modes, close racing get_next_frame and
 * blocking_monitor, the frame-ready callback across starts, the loss accounting. */
#include "hl_util.hpp"

#include <mutex>
#include <random>
#include <vector>

using Mode = hl::Mlx5DirectRoceReceiverV1::Mode;

#define PRIVATE() mlxd_test_private_devices()

START_TEST(before_start)
{
    PRIVATE();
    auto rx = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    hl::RoceReceiverInterfaceV1 &i = *rx;
    HL_THROWS_EXACTLY(i.get_qp_number(), "mlxd_receiver_qp_number: start() has not been called");
    HL_THROWS_EXACTLY(i.get_rkey(), "mlxd_receiver_rkey: start() has not been called");
    HL_THROWS_EXACTLY(i.external_frame_memory(),
                      "mlxd_receiver_external_frame_memory: start() has not been called");
    HL_THROWS_EXACTLY(i.blocking_monitor(), "mlxd_receiver_blocking_monitor: start() has not been called");
    hl::RoceReceiverFrameInfoV1 info;
    HL_THROWS_EXACTLY(i.get_next_frame(0, info), "mlxd_receiver_get_next_frame: start() has not been called");
    HL_THROWS_EXACTLY(i.get_next_frame(10, info), "mlxd_receiver_get_next_frame: start() has not been called");
    HL_THROWS_EXACTLY(rx->check_frame(info),
                      "mlxd_receiver_frame_check: not started (start() not called, or close() has run)");
    ck_assert(!i.frames_ready());
    ck_assert_uint_eq(i.frame_size(), 0);
    ck_assert_uint_eq(i.page_size(), 0);
    ck_assert_uint_eq(i.pages(), 0);
    i.close();                                       /* does nothing */
    i.close();
    HL_STR_EQ(rx->close_error(), "");
    ck_assert_uint_eq(rx->stats().frames, 0);
    i.set_frame_ready([] {});
    i.set_frame_ready({});
}
END_TEST

START_TEST(start_errors_and_queries)
{
    PRIVATE();
    HlRig g;
    g.frame_size = 4096;
    g.page_size = mlxd_hsb_min_page_size(4096);      /* 4224 */
    g.size = 4 * 4224 + 4096;
    ck_assert_int_eq(posix_memalign((void **)&g.buf, 4096, g.size), 0);
    auto rx = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    hl::RoceReceiverInterfaceV1 &i = *rx;
    uint64_t b = (uintptr_t)g.buf;
    HL_THROWS_PREFIX(i.start("nosuch", 1, b, g.size, 4096, 4224, 4, 4096, "127.0.0.1", 2),
                     "mlxd_receiver_start: device 'nosuch' does not exist (2 mlx5 devices in ");
    HL_THROWS_EXACTLY(i.start("mlx5_0", 1, b, g.size, 4096, 4224, 4, 4096, "300.1.1.1", 2),
                      "mlxd_receiver_start: peer_ip '300.1.1.1' is not an IPv4 address");
    HL_THROWS_EXACTLY(i.start("mlx5_0", 1, b, g.size, 4096, 4224, 4, 4096, "", 2),
                      "mlxd_receiver_start: peer_ip '' is not an IPv4 address");
    HL_THROWS_EXACTLY(i.start("mlx5_0", 1, b, g.size, 4096, 4096, 4, 4096, "127.0.0.1", 2),
                      "mlxd_receiver_start: page_size 4096 is below round_up(frame_size 4096, 128) + 128 = 4224");
    HL_THROWS_EXACTLY(i.start("mlx5_0", 1, b, g.size, 4096, 4224, 4, 4096, "127.0.0.1", 5),
                      "mlxd_receiver_start: queue_size 5 is not in 1..pages (4)");
    HL_THROWS_EXACTLY(i.start("", 1, b, g.size, 4096, 4224, 4, 4096, "127.0.0.1", 2),
                      "mlxd_receiver_start: device is empty");
    ck_assert(!mlxd_receiver_started(rx->c_receiver()));
    HL_THROWS_EXACTLY(i.blocking_monitor(), "mlxd_receiver_blocking_monitor: start() has not been called");
    ck_assert_uint_eq(i.start("mlx5_0", 1, b, g.size, 4096, 4224, 4, 4096, "127.0.0.1", 2), HOLOLINK_MODULE_OK);
    HL_THROWS_EXACTLY(i.start("mlx5_0", 1, b, g.size, 4096, 4224, 4, 4096, "127.0.0.1", 2),
                      "mlxd_receiver_start: already started (close first)");
    HL_THROWS_EXACTLY(rx->set_options({}), "set_options: the receiver is started; options apply from "
                                          "the next start(), set them after close()");
    mlxd_receiver *c = rx->c_receiver();
    ck_assert_uint_ne(i.get_qp_number(), 0);
    ck_assert_uint_eq(i.get_qp_number(), mlxd_receiver_qp_number(c));
    ck_assert_uint_eq(i.get_rkey(), mlxd_receiver_rkey(c));
    ck_assert_uint_eq(i.external_frame_memory(), b);  /* host memory: its own address is the IOVA */
    ck_assert_uint_eq(i.frame_size(), 4096);
    ck_assert_uint_eq(i.page_size(), 4224);
    ck_assert_uint_eq(i.pages(), 4);
    ck_assert_uint_eq(rx->metadata_offset(), 4096);
    ck_assert(!i.frames_ready());
    hl::RoceReceiverFrameInfoV1 info;
    ck_assert(!i.get_next_frame(0, info));
    double t0 = hl_now();
    ck_assert(!i.get_next_frame(50, info));          /* a timeout is false, not an exception */
    ck_assert(hl_now() - t0 >= 0.045);
    i.close();
    HL_THROWS_EXACTLY(i.get_qp_number(), "mlxd_receiver_qp_number: start() has not been called");
    HL_THROWS_EXACTLY(i.get_rkey(), "mlxd_receiver_rkey: start() has not been called");
    HL_THROWS_EXACTLY(i.external_frame_memory(),
                      "mlxd_receiver_external_frame_memory: start() has not been called");
    ck_assert(!i.get_next_frame(10, info));          /* closed: false, no exception */
    i.blocking_monitor();                            /* closed: returns at once */
    ck_assert_uint_eq(i.frame_size(), 4096);         /* the values start was given */
    /* empty ibv_name / peer_ip take the configured ones */
    hl::EnumerationMetadata md;
    md["ibv_name"] = std::string("mlx5_0");
    md["peer_ip"] = std::string("127.0.0.1");
    rx->ensure_configured(md);
    ck_assert_uint_eq(i.start("", 0, b, g.size, 4096, 4224, 4, 4096, "", 2), HOLOLINK_MODULE_OK);
    ck_assert_uint_ne(i.get_qp_number(), 0);
    i.close();
    /* HSB's "interface" key: the device whose GIDs are on that interface (the emulator's mlx5_1
     * is on emu1); an interface no device has is refused by name */
    auto by_if = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    hl::EnumerationMetadata im;
    im["interface"] = std::string("emu1");
    im["peer_ip"] = std::string("127.0.0.1");
    by_if->ensure_configured(im);
    HL_STR_EQ(by_if->configured_interface(), "emu1");
    ck_assert_uint_eq(by_if->start("", 0, b, g.size, 4096, 4224, 4, 4096, "", 2), HOLOLINK_MODULE_OK);
    ck_assert_uint_eq(by_if->local_ipv4() & 0xFF, 2);     /* mlx5_1 is 127.a.b.2 (tests/util.c) */
    by_if->close();
    auto no_if = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    im["interface"] = std::string("eth9");
    no_if->ensure_configured(im);
    HL_THROWS_PREFIX(no_if->start("", 0, b, g.size, 4096, 4224, 4, 4096, "", 2),
                     "start: no RDMA device has a GID on interface 'eth9' (");
}
END_TEST

/* Frames in event and busy-poll mode: every field of the frame info. */
START_TEST(frames_both_modes)
{
    PRIVATE();
    Mode mode = _i ? Mode::busy_poll : Mode::event;
    HlRig g;
    g.start(4096, 4, 4, mode);
    std::atomic<int> ready{0};
    g.rx->set_frame_ready([&] { ready++; });
    g.monitor();
    hl::RoceReceiverFrameInfoV1 f;
    ck_assert(!g.rx->get_next_frame(0, f));          /* the consumer is ready: nothing dropped */
    const uint64_t n = 10;
    for (uint64_t k = 0; k < n; k++) {
        g.gen(1);
        /* the completion is counted just before the frame is queued: wait for the queue */
        double end = hl_now() + 5;
        while (!g.rx->frames_ready() && hl_now() < end)
            hl_sleep_us(100);
        ck_assert(g.rx->frames_ready());
        ck_assert(g.rx->get_next_frame(0, f));
        ck_assert(!g.rx->frames_ready());
        uint32_t page = (uint32_t)(k % 4);
        ck_assert_uint_eq(f.page_number, page);
        ck_assert_uint_eq(f.frame_memory, (uintptr_t)g.buf + page * g.page_size);
        ck_assert_uint_eq(f.metadata_memory, f.frame_memory + 4096);
        ck_assert_uint_eq(f.received_frame_number, k + 1);
        ck_assert_uint_eq(f.frame_number, k);
        ck_assert_uint_eq(f.frame_number64, k);
        ck_assert_uint_eq(f.imm_data & 0xFFF, page);
        ck_assert_uint_eq(f.imm_data >> 12, f.psn & 0xFFFFF);   /* the metadata packet's PSN */
        ck_assert_uint_eq(f.bytes_written, 4096);
        ck_assert_uint_eq(f.dropped, 0);
        ck_assert_uint_eq(f.rx_write_requests, 0);
        ck_assert_uint_eq(f.receiver_flags, 0);
        ck_assert_uint_eq(f.flags, 0);
        ck_assert(f.received_s > 0);
        ck_assert(f.received_ns < 1000000000u);
        ck_assert(f.metadata_s > 0);
        ck_assert_int_eq(mlxd_hsb_payload_check((const void *)(uintptr_t)f.frame_memory, 4096, (uint32_t)k), -1);
        ck_assert(g.rx->check_frame(f) != hl::Mlx5DirectRoceReceiverV1::FrameState::overwritten);
    }
    ck_assert(!g.rx->get_next_frame(20, f));
    auto st = g.rx->stats();
    ck_assert_uint_eq(st.frames, n);
    ck_assert_uint_eq(st.consumed, n);
    ck_assert_uint_eq(st.dropped + st.overwritten + st.bad_page + st.errors, 0);
    ck_assert_uint_eq(st.last_frame_number, n - 1);
    ck_assert_int_eq(ready, (int)n);
    g.stop();
}
END_TEST

/* The overwrite check after a read: a frame read after the device came back to its page. */
START_TEST(check_frame_sees_overwrite)
{
    PRIVATE();
    HlRig g;
    g.start(4096, 2, 2);
    g.monitor();
    hl::RoceReceiverFrameInfoV1 f0, f1;
    ck_assert(!g.rx->get_next_frame(0, f0));
    g.gen(1);
    ck_assert(g.rx->get_next_frame(1000, f0));
    /* page 0 completed; the device writes page 1 next */
    ck_assert(g.rx->check_frame(f0) == hl::Mlx5DirectRoceReceiverV1::FrameState::intact);
    g.gen(2);                                        /* frames 1 (page 1) and 2 (page 0 again) */
    ck_assert(g.rx->check_frame(f0) == hl::Mlx5DirectRoceReceiverV1::FrameState::overwritten);
    ck_assert(g.rx->get_next_frame(1000, f1));
    ck_assert_uint_eq(f1.page_number, 1);
    /* frame 2 was the last, into page 0: page 1 is the one the device writes next */
    ck_assert(g.rx->check_frame(f1) == hl::Mlx5DirectRoceReceiverV1::FrameState::at_risk);
    ck_assert_uint_eq(g.rx->stats().overwritten_after_read, 1);
    hl::RoceReceiverFrameInfoV1 bad = f1;
    bad.page_number = 7;
    HL_THROWS_EXACTLY(g.rx->check_frame(bad), "mlxd_receiver_frame_check: page 7 >= pages 2");
    g.stop();
}
END_TEST

/* Loss accounting: a consumer that stops reading; queue 1 keeps the newest, the rest are
 * dropped and counted, in the frame info and the stats. */
START_TEST(dropped_counted)
{
    PRIVATE();
    HlRig g;
    g.start(4096, 4, 1);
    g.monitor();
    hl::RoceReceiverFrameInfoV1 f;
    ck_assert(!g.rx->get_next_frame(0, f));
    g.gen(5);
    ck_assert(g.rx->get_next_frame(1000, f));
    ck_assert_uint_eq(f.frame_number, 4);
    ck_assert_uint_eq(f.dropped, 4);
    ck_assert_uint_eq(f.received_frame_number, 5);
    auto st = g.rx->stats();
    ck_assert_uint_eq(st.frames, 5);
    ck_assert_uint_eq(st.dropped, 4);
    ck_assert_uint_eq(st.consumed, 1);
    ck_assert(st.rx_write_requests_valid);
    ck_assert_uint_eq(st.rx_write_requests, 5 * 4);  /* 3 data packets + 1 metadata per frame */
    g.stop();
}
END_TEST

/* A second monitor while one runs: the C library's message. */
START_TEST(second_monitor_throws)
{
    PRIVATE();
    HlRig g;
    g.start(4096, 2, 2);
    g.monitor();
    hl::RoceReceiverFrameInfoV1 f;
    ck_assert(!g.rx->get_next_frame(0, f));
    g.gen(1);                                        /* completed: the monitor runs */
    HL_THROWS_EXACTLY(g.rx->blocking_monitor(), "mlxd_receiver_blocking_monitor: a monitor already runs");
    ck_assert(!g.mon_returned);
    g.stop();
}
END_TEST

/* close from another thread while get_next_frame waits: it returns false at once. */
START_TEST(close_races_get_next_frame)
{
    PRIVATE();
    HlRig g;
    std::mt19937 rnd(1234);
    int rounds = getenv("MLXD_TSAN") ? 8 : 20;
    for (int r = 0; r < rounds; r++) {
        g.start(4096, 2, 2);
        g.monitor();
        std::atomic<int> result{-1};
        std::atomic<bool> waiting{false};
        double returned_at = 0;
        std::thread consumer([&] {
            hl::RoceReceiverFrameInfoV1 f;
            waiting = true;
            result = g.rx->get_next_frame(30000, f) ? 1 : 0;
            returned_at = hl_now();
        });
        while (!waiting)
            hl_sleep_us(50);
        hl_sleep_us(rnd() % 3000);
        double closed_at = hl_now();
        g.rx->close();
        consumer.join();
        ck_assert_int_eq(result, 0);
        ck_assert_msg(returned_at - closed_at < 5, "get_next_frame returned %.1f s after close",
                      returned_at - closed_at);
        g.stop();
        ck_assert(g.mon_returned);
    }
}
END_TEST

/* close while blocking_monitor starts, runs or has not begun: the monitor returns without an
 * exception every time, close returns, and a new start works. */
START_TEST(close_races_blocking_monitor)
{
    PRIVATE();
    HlRig g;
    std::mt19937 rnd(99);
    int rounds = getenv("MLXD_TSAN") ? 10 : 40;
    for (int r = 0; r < rounds; r++) {
        g.start(4096, 2, 2, r % 2 ? Mode::busy_poll : Mode::event);
        switch (r % 4) {
        case 0:                                      /* close before the monitor begins */
            g.rx->close();
            g.monitor();
            break;
        case 1:                                      /* at once: the two race */
            g.monitor();
            g.rx->close();
            break;
        default:                                     /* a little later */
            g.monitor();
            hl_sleep_us(rnd() % 5000);
            g.rx->close();
            break;
        }
        g.mon.join();
        ck_assert_msg(g.mon_error.empty(), "round %d: blocking_monitor threw: %s", r, g.mon_error.c_str());
        ck_assert(g.mon_returned);
    }
    /* and the receiver still works */
    g.start(4096, 2, 2);
    g.monitor();
    hl::RoceReceiverFrameInfoV1 f;
    ck_assert(!g.rx->get_next_frame(0, f));
    g.gen(1);
    ck_assert(g.rx->get_next_frame(1000, f));
    g.stop();
}
END_TEST

/* The callback stays registered across start() calls; an empty function stops the calls. */
START_TEST(frame_ready_across_starts)
{
    PRIVATE();
    HlRig g;
    std::atomic<int> calls{0};
    std::mutex mu;
    std::vector<std::thread::id> ids;                /* threads the callback ran on */
    auto rx = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    g.rx = rx;
    rx->set_frame_ready([&] {
        calls++;
        std::lock_guard<std::mutex> l(mu);
        ids.push_back(std::this_thread::get_id());
    });
    bool on_monitor = true;
    for (int run = 0; run < 3; run++) {
        if (run == 2)
            rx->set_frame_ready({});                 /* stop being called */
        g.start(4096, 4, 4);
        g.monitor();
        std::thread::id mon_id = g.mon.get_id();
        hl::RoceReceiverFrameInfoV1 f;
        ck_assert(!rx->get_next_frame(0, f));
        g.gen(run == 0 ? 3 : 2);
        ck_assert(g.wait_frames(run == 0 ? 3 : 2, 5));
        g.stop();
        ck_assert_int_eq(calls, run == 0 ? 3 : 5);
        for (auto id : ids)
            on_monitor = on_monitor && id == mon_id;
        ids.clear();
    }
    ck_assert(on_monitor);                           /* always on the blocking_monitor thread */
}
END_TEST

/* close() from the frame-ready callback (on the monitor's own thread): the monitor returns
 * without an exception, and the run is over. */
START_TEST(close_from_frame_ready)
{
    PRIVATE();
    HlRig g;
    g.start(4096, 4, 4);
    std::atomic<int> calls{0};
    g.rx->set_frame_ready([&] {
        if (calls++ == 0)
            g.rx->close();
    });
    g.monitor();
    hl::RoceReceiverFrameInfoV1 f;
    ck_assert(!g.rx->get_next_frame(0, f));
    g.gen(1, false);
    double end = hl_now() + 10;
    while (!g.mon_returned && hl_now() < end)
        hl_sleep_us(500);
    ck_assert(g.mon_returned);
    g.mon.join();
    ck_assert_msg(g.mon_error.empty(), "blocking_monitor threw: %s", g.mon_error.c_str());
    ck_assert_int_eq(calls, 1);
    ck_assert(!mlxd_receiver_started(g.rx->c_receiver()));
    ck_assert(!g.rx->get_next_frame(10, f));
    HL_THROWS_EXACTLY(g.rx->get_qp_number(), "mlxd_receiver_qp_number: start() has not been called");
    g.rx->set_frame_ready({});
}
END_TEST

/* A receiver obtained the seed's way: get_service(metadata), configured from metadata,
 * busy-poll from "receiver_mode". */
START_TEST(through_get_service)
{
    PRIVATE();
    hl::set_default_module(nullptr);
    hl::EnumerationMetadata md;
    md["serial_number"] = std::string("emu");
    md["data_channel"] = int64_t(0);
    md["peer_ip"] = std::string("127.0.0.1");
    md["ibv_name"] = std::string("mlx5_0");
    md["receiver_mode"] = std::string("busy_poll");
    std::shared_ptr<hl::RoceReceiverInterfaceV1> rx = hl::RoceReceiverInterfaceV1::get_service(md);
    auto direct = hl::Mlx5DirectRoceReceiverV1::get_service(md);
    ck_assert_ptr_eq(rx.get(), static_cast<hl::RoceReceiverInterfaceV1 *>(direct.get()));
    HlRig g;
    g.rx = direct;
    g.frame_size = 3000;
    g.page_size = mlxd_hsb_min_page_size(3000);
    g.pages = 2;
    g.size = 8192;
    ck_assert_int_eq(posix_memalign((void **)&g.buf, 4096, g.size), 0);
    ck_assert_uint_eq(rx->start("", 0, (uintptr_t)g.buf, g.size, 3000, g.page_size, 2, 3072, "", 1),
                      HOLOLINK_MODULE_OK);
    ck_assert(direct->options().mode == Mode::busy_poll);
    g.monitor();
    hl::RoceReceiverFrameInfoV1 f;
    ck_assert(!rx->get_next_frame(0, f));
    for (int k = 0; k < 3; k++) {
        g.gen(1);
        ck_assert(rx->get_next_frame(1000, f));
        ck_assert_uint_eq(f.frame_number, k);
        ck_assert_uint_eq(f.bytes_written, 3000);
    }
    g.stop();
    g.rx.reset();
    hl::set_default_module(nullptr);
}
END_TEST

Suite *hololink_receiver_suite(void)
{
    Suite *s = suite_create("hololink_receiver");
#define CASE(fn) do { TCase *tc = tcase_create(#fn); tcase_set_timeout(tc, 120); \
                      tcase_add_test(tc, fn); suite_add_tcase(s, tc); } while (0)
    CASE(before_start);
    CASE(start_errors_and_queries);
    {
        TCase *tc = tcase_create("frames_both_modes");
        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, frames_both_modes, 0, 2);
        suite_add_tcase(s, tc);
    }
    CASE(check_frame_sees_overwrite);
    CASE(dropped_counted);
    CASE(second_monitor_throws);
    CASE(close_races_get_next_frame);
    CASE(close_races_blocking_monitor);
    CASE(frame_ready_across_starts);
    CASE(close_from_frame_ready);
    CASE(through_get_service);
#undef CASE
    return s;
}
