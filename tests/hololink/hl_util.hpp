/* Helpers of the C++ suites (tests/hololink/): a receiver with its buffer and monitor thread on
 * the emulated NIC, a frame generator aimed at it, and exception checks. */
#ifndef MLXD_HL_UTIL_HPP
#define MLXD_HL_UTIL_HPP

#include <check.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <hololink/module/mlx5direct_roce_receiver.hpp>
#include <hololink/module/service_module.hpp>

extern "C" {
#include "mlxd_capture.h"
#include "mlxd_error.h"
#include "util.h"
}

namespace hl = hololink::module;

/* expr throws std::runtime_error whose what() is exactly msg (or starts with it: _PREFIX). */
#define HL_THROWS(expr, msg, prefix_only)                                                        \
    do {                                                                                         \
        bool thrown_ = false;                                                                    \
        std::string what_;                                                                       \
        try {                                                                                    \
            (void)(expr);                                                                        \
        } catch (const std::runtime_error &e_) {                                                 \
            thrown_ = true;                                                                      \
            what_ = e_.what();                                                                   \
        }                                                                                        \
        ck_assert_msg(thrown_, "%s did not throw std::runtime_error", #expr);                    \
        std::string want_(msg);                                                                  \
        if (prefix_only)                                                                         \
            ck_assert_msg(what_.compare(0, want_.size(), want_) == 0, "%s threw '%s', not '%s...'", \
                          #expr, what_.c_str(), want_.c_str());                                  \
        else                                                                                     \
            ck_assert_msg(what_ == want_, "%s threw '%s', not '%s'", #expr, what_.c_str(),       \
                          want_.c_str());                                                        \
    } while (0)
#define HL_THROWS_EXACTLY(expr, msg) HL_THROWS(expr, msg, false)
#define HL_THROWS_PREFIX(expr, msg) HL_THROWS(expr, msg, true)

/* a == b for a std::string expression (kept alive for the comparison) and a C string */
#define HL_STR_EQ(a, b)                                                                          \
    do {                                                                                         \
        std::string got_ = (a);                                                                  \
        ck_assert_str_eq(got_.c_str(), b);                                                       \
    } while (0)

/* Send options aimed at the emulated port of address ip (host order), from 127.0.0.1 (the peer
 * the receivers connect to); dst holds the dotted address the options point to. */
struct HlSend {
    char dst[32];
    mlxd_send_opts so{};
    explicit HlSend(uint32_t ip);
    HlSend(const HlSend &) = delete;    /* so.dst_ip points into this object */
};

double hl_now(void);
void hl_sleep_us(unsigned us);

/* A started receiver (host buffer, 0xEE-filled) and, after monitor(), its monitor thread. */
struct HlRig {
    std::shared_ptr<hl::Mlx5DirectRoceReceiverV1> rx;
    uint8_t *buf = nullptr;
    size_t size = 0, frame_size = 0, page_size = 0, md_offset = 0;
    unsigned pages = 0;
    std::thread mon;
    std::string mon_error;          /* what() of an exception the monitor threw */
    std::atomic<bool> mon_returned{false};
    uint32_t psn = 0;               /* next PSN the generator uses */
    uint64_t sent = 0;              /* frames generated so far (frame numbers) */
    uint64_t completed_base = 0;    /* stats().frames at the start of the current gen() */

    HlRig() = default;
    HlRig(const HlRig &) = delete;
    ~HlRig();
    /* Allocates the buffer (once) and starts rx (made here when empty). */
    void start(size_t frame, unsigned npages, unsigned queue,
               hl::Mlx5DirectRoceReceiverV1::Mode mode = hl::Mlx5DirectRoceReceiverV1::Mode::event);
    void monitor();
    void stop();                    /* close, join the monitor; asserts it threw nothing */
    /* Sends n generated frames to the receiver; lockstep: each frame waits until the monitor
     * completed it.  Returns the packets sent. */
    uint64_t gen(uint64_t n, bool lockstep = true);
    bool wait_frames(uint64_t n, double secs);   /* stats().frames >= n */
};

#endif
