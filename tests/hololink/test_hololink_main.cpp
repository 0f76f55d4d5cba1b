/* mlxd-hololink-tests: the Check suites of the C++ part (hololink/, docs/hololink.md), and
 * the helpers of tests/hololink/hl_util.hpp.  CK_RUN_SUITE / CK_RUN_CASE select as usual. */
#include "hl_util.hpp"

#include <cstdlib>
#include <cstring>
#include <ctime>

Suite *hololink_service_suite(void);
Suite *hololink_receiver_suite(void);
Suite *hololink_replay_suite(void);

double hl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

void hl_sleep_us(unsigned us)
{
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    nanosleep(&ts, nullptr);
}

HlRig::~HlRig()
{
    if (mon.joinable()) {
        rx->close();
        mon.join();
    }
    rx.reset();
    std::free(buf);
}

void HlRig::start(size_t frame, unsigned npages, unsigned queue, hl::Mlx5DirectRoceReceiverV1::Mode mode)
{
    frame_size = frame;
    pages = npages;
    md_offset = mlxd_hsb_metadata_offset(frame);
    page_size = mlxd_hsb_min_page_size(frame);
    if (!buf) {
        size = (page_size * pages + 4095) & ~(size_t)4095;
        ck_assert_int_eq(posix_memalign((void **)&buf, 4096, size), 0);
    }
    std::memset(buf, 0xEE, size);
    if (!rx)
        rx = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    hl::Mlx5DirectRoceReceiverV1::Options o;
    o.mode = mode;
    rx->set_options(o);
    ck_assert_uint_eq(rx->start("mlx5_0", 1, (uintptr_t)buf, size, frame_size, page_size, pages,
                                md_offset, "127.0.0.1", queue),
                      HOLOLINK_MODULE_OK);
    psn = 0;
    sent = 0;
}

void HlRig::monitor()
{
    mon_returned = false;
    mon_error.clear();
    mon = std::thread([this] {
        try {
            rx->blocking_monitor();
        } catch (const std::exception &e) {
            mon_error = e.what();
        }
        mon_returned = true;
    });
}

void HlRig::stop()
{
    rx->close();
    if (mon.joinable())
        mon.join();
    ck_assert_msg(mon_error.empty(), "blocking_monitor threw: %s", mon_error.c_str());
}

bool HlRig::wait_frames(uint64_t n, double secs)
{
    double end = hl_now() + secs;
    do {
        if (rx->stats().frames >= n)
            return true;
        hl_sleep_us(200);
    } while (hl_now() < end);
    return false;
}

HlSend::HlSend(uint32_t ip)
{
    std::snprintf(dst, sizeof dst, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    so.sz = sizeof so;
    so.dst_ip = dst;
    so.src_ip = "127.0.0.1";
}

static bool lockstep(void *ctx, uint64_t k)
{
    auto *g = static_cast<HlRig *>(ctx);
    return g->wait_frames(g->completed_base + k + 1, 10);
}

uint64_t HlRig::gen(uint64_t n, bool step)
{
    mlxd_replay_map m{};
    m.qpn = rx->get_qp_number();
    m.rkey = rx->get_rkey();
    m.base_va = rx->external_frame_memory();
    m.page_size = page_size;
    m.pages = pages;
    mlxd_gen_opts go{};
    go.sz = sizeof go;
    go.frame_size = frame_size;
    go.frames = n;
    go.first_page = (uint32_t)(sent % pages);
    go.first_psn = psn;
    go.first_frame = sent;
    HlSend send(rx->local_ipv4());
    mlxd_send_opts &so = send.so;
    if (step) {
        so.sent_frame = lockstep;
        so.ctx = this;
    } else {
        so.frame_gap_us = 1000;
    }
    completed_base = rx->stats().frames;
    mlxd_send_stats st{};
    int rc = mlxd_gen_run(&m, &go, &so, &st);
    ck_assert_msg(rc == 0, "mlxd_gen_run: %s", mlxd_errmsg());
    ck_assert_uint_eq(st.frames, n);
    psn = (psn + (uint32_t)st.packets) & 0xFFFFF;
    sent += n;
    return st.packets;
}

int main(void)
{
    SRunner *sr = srunner_create(hololink_service_suite());
    srunner_add_suite(sr, hololink_receiver_suite());
    srunner_add_suite(sr, hololink_replay_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
