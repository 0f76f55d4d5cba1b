/* A Holoscan Sensor Bridge application written against the seed's interface alone
 * (hololink::module::RoceReceiverInterfaceV1, #include <hololink/module/roce_receiver.hpp>):
 * construct through get_service, start, a monitor thread, a get_next_frame loop, close.
 * tests/hololink/installed_test.sh builds it against an installed mlx5direct-hololink with
 * `pkg-config --cflags --libs mlx5direct-hololink` and replays a capture into it.
 *
 *   seed_app DEVICE PEER_IP FRAME_SIZE PAGE_SIZE PAGES FRAMES
 * Prints "program qp=<QPN> rkey=<RKEY> address=<ADDR>" (what an application programs into the
 * sensor bridge), then one line per frame, then "received N frames, M with a wrong payload".
 * Exit 0 when FRAMES frames came, each with the sensor-bridge emulator's payload pattern (word i
 * of frame f is (f << 24) | i, big-endian: fixtures/roce-pcaps/README.md). */
#include <hololink/module/roce_receiver.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

static bool pattern_ok(const unsigned char *p, size_t len, uint32_t frame)
{
    for (size_t i = 0; i + 4 <= len; i += 4) {
        uint32_t want = (frame << 24) | (uint32_t)(i / 4);
        uint32_t got = (uint32_t)p[i] << 24 | (uint32_t)p[i + 1] << 16 | (uint32_t)p[i + 2] << 8 | p[i + 3];
        if (got != want)
            return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        std::fprintf(stderr, "usage: seed_app DEVICE PEER_IP FRAME_SIZE PAGE_SIZE PAGES FRAMES\n");
        return 2;
    }
    const std::string device = argv[1], peer = argv[2];
    const size_t frame_size = std::strtoull(argv[3], nullptr, 0);
    const size_t page_size = std::strtoull(argv[4], nullptr, 0);
    const unsigned pages = (unsigned)std::strtoul(argv[5], nullptr, 0);
    const unsigned want = (unsigned)std::strtoul(argv[6], nullptr, 0);
    const size_t size = (page_size * pages + 4095) & ~(size_t)4095;
    auto *buffer = static_cast<unsigned char *>(std::aligned_alloc(4096, size));
    if (!buffer)
        return 1;
    try {
        hololink::module::EnumerationMetadata metadata;
        metadata["peer_ip"] = peer;
        metadata["serial_number"] = std::string("seed-app");
        metadata["data_channel"] = int64_t(0);
        auto receiver = hololink::module::RoceReceiverInterfaceV1::get_service(metadata);
        receiver->start(device, 1, (uint64_t)(uintptr_t)buffer, size, frame_size, page_size, pages,
                        (frame_size + 127) / 128 * 128, peer, pages);
        std::printf("program qp=%u rkey=%u address=%llu\n", receiver->get_qp_number(),
                    receiver->get_rkey(), (unsigned long long)receiver->external_frame_memory());
        std::fflush(stdout);
        std::thread monitor([&] { receiver->blocking_monitor(); });
        unsigned got = 0, bad = 0, idle = 0;
        while (got < want && idle < 10) {
            hololink::module::RoceReceiverFrameInfoV1 info;
            if (!receiver->get_next_frame(1000, info)) {
                idle++;
                continue;
            }
            idle = 0;
            bool ok = pattern_ok(reinterpret_cast<const unsigned char *>(info.frame_memory),
                                 frame_size, info.frame_number & 0xFF);
            bad += !ok;
            got++;
            std::printf("frame %u: frame_number %u received_frame_number %llu dropped %u %s\n", got - 1,
                        info.frame_number, (unsigned long long)info.received_frame_number,
                        info.dropped, ok ? "payload ok" : "PAYLOAD WRONG");
        }
        receiver->close();
        monitor.join();
        std::printf("received %u frames, %u with a wrong payload\n", got, bad);
        std::free(buffer);
        return got == want && bad == 0 ? 0 : 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "seed_app: %s\n", e.what());
        return 1;
    }
}
