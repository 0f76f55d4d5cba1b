/* The real captures of NVIDIA's sensor-bridge emulator (fixtures/roce-pcaps) replayed through
 * the C++ interface give the same frames as through the C receiver: for each capture, one run
 * with mlxd_receiver_* and one with RoceReceiverInterfaceV1, lock-step, every frame taken as it
 * completes; page, immediate, metadata, counters, buffer offsets and bytes compared one by one,
 * and against the capture itself. */
#include "hl_util.hpp"

#include <cstring>
#include <vector>

namespace {

const char *CAPS[] = { "hsb_small_4k_3pages", "hsb_small_3000_embedded", "hsb_sepmeta_3000",
                       "hsb_medium_64k_4pages" };

struct Frame {             /* what both runs yield, in the C receiver's terms */
    uint32_t page, imm, flags;
    uint64_t frame_number, received_frame_number, dropped, offset, md_offset, nic_ns;
    mlxd_hsb_metadata md;
    std::vector<uint8_t> bytes;
};

struct Run {
    const mlxd_capture *cap;
    uint8_t *buf;
    std::function<bool(Frame &)> take;       /* the next frame, from C or C++ */
    std::function<uint64_t()> completed;
    std::vector<Frame> frames;
};

bool on_sent(void *ctx, uint64_t k)
{
    auto *r = static_cast<Run *>(ctx);
    double end = hl_now() + 10;
    while (r->completed() < k + 1 && hl_now() < end)
        hl_sleep_us(200);
    Frame f{};
    ck_assert_msg(r->take(f), "frame %llu: none", (unsigned long long)k);
    r->frames.push_back(f);
    return true;
}

void replay(Run &run, uint32_t qpn, uint32_t rkey, uint64_t va, uint32_t ip)
{
    const mlxd_capture_geometry &geo = run.cap->geo;
    mlxd_replay_map m{};
    m.qpn = qpn;
    m.rkey = rkey;
    m.base_va = va;
    m.page_size = geo.page_size;
    m.pages = geo.pages;
    HlSend send(ip);
    send.so.sent_frame = on_sent;
    send.so.ctx = &run;
    int rc = mlxd_capture_replay(run.cap, &m, &send.so, nullptr);
    ck_assert_msg(rc == 0, "replay: %s", mlxd_errmsg());
}

void copy_bytes(Frame &f, const uint8_t *buf, size_t n)
{
    f.bytes.assign(buf + f.offset, buf + f.offset + n);
}

std::vector<Frame> run_c(const mlxd_capture *cap, uint8_t *buf, size_t size)
{
    const mlxd_capture_geometry &geo = cap->geo;
    mlxd_receiver *r = mlxd_receiver_new();
    mlxd_receiver_opts o{};
    o.sz = sizeof o;
    o.device = "mlx5_0";
    o.buffer = (uintptr_t)buf;
    o.buffer_size = size;
    o.frame_size = geo.frame_size;
    o.page_size = geo.page_size;
    o.pages = geo.pages;
    o.metadata_offset = geo.metadata_offset;
    o.peer_ip = "127.0.0.1";
    o.queue_size = geo.pages;
    o.mode = MLXD_RECEIVER_EVENT;
    ck_assert_msg(mlxd_receiver_start(r, &o) == 0, "start: %s", mlxd_errmsg());
    std::thread mon([r] { ck_assert_int_eq(mlxd_receiver_blocking_monitor(r), 0); });
    Run run{ cap, buf, {}, {}, {} };
    run.take = [&](Frame &f) {
        mlxd_receiver_frame c;
        if (!mlxd_receiver_get_next_frame(r, 1000, &c))
            return false;
        f.page = c.page;
        f.imm = c.imm_data;
        f.flags = c.flags;
        f.frame_number = c.frame_number;
        f.received_frame_number = c.received_frame_number;
        f.dropped = c.dropped;
        f.nic_ns = c.nic_ns;
        f.offset = c.frame_memory - (uintptr_t)buf;
        f.md_offset = c.metadata_memory - c.frame_memory;
        f.md = c.metadata;
        copy_bytes(f, buf, geo.frame_size);
        return true;
    };
    run.completed = [&]() -> uint64_t {
        struct mlxd_receiver_stats st;
        mlxd_receiver_stats(r, &st);
        return st.frames;
    };
    mlxd_receiver_frame none;
    ck_assert(!mlxd_receiver_get_next_frame(r, 0, &none));
    replay(run, mlxd_receiver_qp_number(r), mlxd_receiver_rkey(r), mlxd_receiver_external_frame_memory(r),
           mlxd_receiver_local_ipv4(r));
    ck_assert_int_eq(mlxd_receiver_close(r), 0);
    mon.join();
    mlxd_receiver_destroy(r);
    return run.frames;
}

std::vector<Frame> run_cpp(const mlxd_capture *cap, uint8_t *buf, size_t size)
{
    const mlxd_capture_geometry &geo = cap->geo;
    auto direct = std::make_shared<hl::Mlx5DirectRoceReceiverV1>();
    std::shared_ptr<hl::RoceReceiverInterfaceV1> rx = direct;     /* only the seed's interface */
    ck_assert_uint_eq(rx->start("mlx5_0", 1, (uintptr_t)buf, size, geo.frame_size, geo.page_size,
                                geo.pages, geo.metadata_offset, "127.0.0.1", geo.pages),
                      HOLOLINK_MODULE_OK);
    std::thread mon([rx] { rx->blocking_monitor(); });
    Run run{ cap, buf, {}, {}, {} };
    run.take = [&](Frame &f) {
        hl::RoceReceiverFrameInfoV1 i;
        if (!rx->get_next_frame(1000, i))
            return false;
        f.page = i.page_number;
        f.imm = i.imm_data;
        f.flags = i.receiver_flags;
        f.frame_number = i.frame_number;
        f.received_frame_number = i.received_frame_number;
        f.dropped = i.dropped;
        f.nic_ns = i.nic_ns;
        f.offset = i.frame_memory - (uintptr_t)buf;
        f.md_offset = i.metadata_memory - i.frame_memory;
        f.md = mlxd_hsb_metadata{};
        f.md.flags = i.flags;
        f.md.psn = i.psn;
        f.md.crc = i.crc;
        f.md.timestamp_s = i.timestamp_s;
        f.md.timestamp_ns = i.timestamp_ns;
        f.md.bytes_written = i.bytes_written;
        f.md.metadata_s = i.metadata_s;
        f.md.metadata_ns = i.metadata_ns;
        copy_bytes(f, buf, geo.frame_size);
        return true;
    };
    run.completed = [&]() -> uint64_t { return direct->stats().frames; };
    hl::RoceReceiverFrameInfoV1 none;
    ck_assert(!rx->get_next_frame(0, none));
    replay(run, rx->get_qp_number(), rx->get_rkey(), rx->external_frame_memory(), direct->local_ipv4());
    rx->close();
    mon.join();
    return run.frames;
}

} // namespace

START_TEST(cpp_frames_equal_c_frames)
{
    mlxd_test_private_devices();
    char rel[128];
    std::snprintf(rel, sizeof rel, "fixtures/roce-pcaps/%s.pcap", CAPS[_i]);
    mlxd_capture *cap;
    ck_assert_msg(mlxd_capture_load(mlxd_test_path(rel), &cap) == 0, "%s: %s", rel, mlxd_errmsg());
    const mlxd_capture_geometry &geo = cap->geo;
    size_t size = (geo.pages * geo.page_size + 4095) & ~(size_t)4095;
    uint8_t *buf;
    ck_assert_int_eq(posix_memalign((void **)&buf, 4096, size), 0);
    std::memset(buf, 0xEE, size);
    std::vector<Frame> c = run_c(cap, buf, size);
    std::memset(buf, 0xEE, size);
    std::vector<Frame> cpp = run_cpp(cap, buf, size);
    ck_assert_uint_eq(c.size(), cap->nframes);
    ck_assert_uint_eq(cpp.size(), cap->nframes);
    for (size_t k = 0; k < c.size(); k++) {
        const Frame &a = c[k], &b = cpp[k];
        const mlxd_capture_frame &rec = cap->frames[k];
        ck_assert_uint_eq(a.page, rec.page);                 /* as recorded */
        ck_assert_uint_eq(a.imm, rec.imm);
        ck_assert_uint_eq(a.md.bytes_written, rec.md.bytes_written);
        ck_assert_uint_eq(a.frame_number, k);
        ck_assert_int_eq(mlxd_hsb_payload_check(a.bytes.data(), a.bytes.size(), (uint32_t)k), -1);
        ck_assert_uint_eq(b.page, a.page);                   /* C++ == C */
        ck_assert_uint_eq(b.imm, a.imm);
        ck_assert_uint_eq(b.flags, a.flags);
        ck_assert_uint_eq(b.frame_number, a.frame_number);
        ck_assert_uint_eq(b.received_frame_number, a.received_frame_number);
        ck_assert_uint_eq(b.dropped, a.dropped);
        ck_assert_uint_eq(b.nic_ns != 0, a.nic_ns != 0);    /* both runs stamped by the NIC, or neither */
        ck_assert_uint_eq(b.offset, a.offset);
        ck_assert_uint_eq(b.md_offset, a.md_offset);
        ck_assert_uint_eq(b.md.flags, a.md.flags);
        ck_assert_uint_eq(b.md.psn, a.md.psn);
        ck_assert_uint_eq(b.md.crc, a.md.crc);
        ck_assert_uint_eq(b.md.timestamp_s, a.md.timestamp_s);
        ck_assert_uint_eq(b.md.timestamp_ns, a.md.timestamp_ns);
        ck_assert_uint_eq(b.md.bytes_written, a.md.bytes_written);
        ck_assert_uint_eq(b.md.metadata_s, a.md.metadata_s);
        ck_assert_uint_eq(b.md.metadata_ns, a.md.metadata_ns);
        ck_assert_msg(b.bytes == a.bytes, "frame %zu: the bytes differ between C and C++", k);
    }
    std::free(buf);
    mlxd_capture_free(cap);
}
END_TEST

Suite *hololink_replay_suite(void)
{
    Suite *s = suite_create("hololink_replay");
    TCase *tc = tcase_create("cpp_frames_equal_c_frames");
    tcase_set_timeout(tc, 180);
    tcase_add_loop_test(tc, cpp_frames_equal_c_frames, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}
