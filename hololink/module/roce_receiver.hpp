/* hololink/module/roce_receiver.hpp: hololink::module::RoceReceiverInterfaceV1, Holoscan Sensor
 * Bridge's RoCE receiver interface (the seed's), on mlx5direct (docs/hololink.md).
 *
 * The controller that receives a sensor bridge's frames over RoCE v2: start() brings up a UC QP
 * on the named RDMA device whose receives the device's RDMA WRITE with Immediate consumes, one
 * per frame; blocking_monitor() (on a thread of its own) turns completions into frames;
 * get_next_frame() hands them out.  The device is programmed with get_qp_number(), get_rkey(),
 * external_frame_memory(), page_size(), pages() and frame_size().
 *
 * Obtain one with RoceReceiverInterfaceV1::get_service(metadata): the default Module
 * (service_module.hpp) makes an Mlx5DirectRoceReceiverV1 (mlx5direct_roce_receiver.hpp), which
 * also offers busy-poll mode, the overwrite check after a read, and the statistics.
 *
 * Errors: std::runtime_error carrying the message of the mlx5direct C call that failed
 * (receiver/mlxd_receiver.h lists them).  Thread rules: close() from any thread, including while
 * blocking_monitor() and get_next_frame() run; get_next_frame, frames_ready and the queries from
 * any thread; start, set_frame_ready and destruction while no other call runs.
 * Sources of the facts: the seed (hololink::module::RoceReceiverInterfaceV1), Holoscan Sensor
 * Bridge's hololink_module/host/include/hololink/module/roce_receiver.hpp (the frame info),
 * src/hololink/core/hololink.hpp (Hololink::FrameMetadata) and
 * src/hololink/operators/roce_receiver/roce_receiver_op.cpp (the per-frame metadata keys). */
#ifndef MLX5DIRECT_HOLOLINK_ROCE_RECEIVER_HPP
#define MLX5DIRECT_HOLOLINK_ROCE_RECEIVER_HPP

#include "mlx5direct_guard.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "enumeration_metadata.hpp"
#include "module.hpp"
#include "service.hpp"
#include "status.h"

namespace hololink::module {
inline namespace mlx5direct {

/* One frame, filled by get_next_frame.  The first nine fields are those of Holoscan Sensor
 * Bridge's RoceReceiverFrameInfoV1 (same names and types); the rest are the decoded metadata
 * block (Hololink::FrameMetadata, the keys RoceReceiverOp emits) and this library's additions. */
class RoceReceiverFrameInfoV1 {
public:
    uint64_t frame_memory = 0;          /* cu_buffer + page_number * cu_page_size: the frame's
                                           bytes, in cu_buffer's address space */
    uint64_t metadata_memory = 0;       /* frame_memory + metadata_offset: the 128-byte block
                                           the device wrote (48 bytes used) */
    uint64_t received_frame_number = 0; /* frames completed since start, this one included */
    uint32_t frame_number = 0;          /* the device's 16-bit frame counter extended across
                                           wraps (low 32 bits) */
    uint32_t imm_data = 0;              /* the RDMA immediate, host order: page | psn << 12 */
    uint64_t received_s = 0;            /* CLOCK_REALTIME when the completion was seen */
    uint64_t received_ns = 0;
    uint64_t rx_write_requests = 0;     /* always 0 here: read it with
                                           Mlx5DirectRoceReceiverV1::stats() (a sysfs read, kept
                                           off the per-frame path) */
    uint32_t dropped = 0;               /* frames dropped from the full queue so far (low 32) */

    /* the decoded metadata block, big-endian on the wire, snapshot at completion */
    uint32_t flags = 0;                 /* bit 0: early end of frame; bit 1: bytes-per-window */
    uint32_t psn = 0;                   /* PSN of the metadata packet */
    uint32_t crc = 0;                   /* frame CRC-32 from the device */
    uint64_t timestamp_s = 0;           /* PTP time at start of frame */
    uint32_t timestamp_ns = 0;
    uint64_t bytes_written = 0;         /* valid bytes of this frame */
    uint64_t metadata_s = 0;            /* PTP time the metadata packet was formed */
    uint32_t metadata_ns = 0;

    /* this library's */
    uint32_t page_number = 0;           /* page index from the immediate */
    uint32_t receiver_flags = 0;        /* MLXD_FRAME_PSN_MISMATCH (the device had rewritten
                                           the page at completion), MLXD_FRAME_NO_METADATA */
    uint64_t frame_number64 = 0;        /* frame_number extended to 64 bits */
    uint64_t nic_ns = 0;                /* when the NIC completed the frame, ns since the epoch
                                           on the NIC's clock; 0 when the device has no clock
                                           (receiver/mlxd_receiver.h, mlxd_receiver_frame) */
};

class RoceReceiverInterfaceV1 : public ConfigurableService<RoceReceiverInterfaceV1> {
public:
    static constexpr const char *type_id = "roce_receiver.v1";

    /* The instance metadata designates: "serial=<serial_number>;data_channel=<data_channel>"
     * (Holoscan Sensor Bridge's form); a missing key counts as "" / 0. */
    static std::string locator_id(const EnumerationMetadata &metadata)
    {
        return "serial=" + metadata.get<std::string>("serial_number", "") +
               ";data_channel=" + std::to_string(metadata.get<int64_t>("data_channel", 0));
    }

    virtual ~RoceReceiverInterfaceV1() = default;

    /* Configure the receiver and the NIC for RDMA.  cu_buffer holds `pages` pages cu_page_size
     * bytes apart (each: cu_frame_size bytes of frame, then the metadata at metadata_offset).
     * An empty ibv_name or peer_ip takes the value configured from the enumeration metadata.
     * Returns HOLOLINK_MODULE_OK.  Throws std::runtime_error when the receiver cannot be brought
     * up, with the C library's message: the device is not found, peer_ip is not an IPv4
     * address, an argument is out of its bounds, it is already started, or a driver step failed
     * (everything made is undone). */
    virtual hololink_module_status_t start(const std::string &ibv_name, unsigned ibv_port,
                                           uint64_t cu_buffer, size_t cu_buffer_size,
                                           size_t cu_frame_size, size_t cu_page_size,
                                           unsigned pages, size_t metadata_offset,
                                           const std::string &peer_ip, unsigned queue_size) = 0;

    /* Ends the run: blocking_monitor() returns, waiting get_next_frame() calls return false, the
     * NIC objects are released.  Any thread; nothing if never started; never throws. */
    virtual void close() = 0;

    /* Runs the receiver until close() (run it on a thread of its own).  In a CUDA build the
     * thread is given the CUDA context current at start().  Returns at once when close() came
     * first.  Throws std::runtime_error if start() was never called, if another monitor runs,
     * or if a driver error makes receiving impossible. */
    virtual void blocking_monitor() = 0;

    /* Takes the oldest queued frame into info, waiting up to timeout_ms.  True: a frame was
     * taken; false: timeout, or close() has begun.  Throws std::runtime_error if start() was
     * never called. */
    virtual bool get_next_frame(unsigned timeout_ms, RoceReceiverFrameInfoV1 &info) = 0;

    /* False when get_next_frame() would wait for a new frame (and before start, after close). */
    virtual bool frames_ready() = 0;

    /* callback runs on the blocking_monitor() thread after each frame is queued.  Register it
     * before that starts; an empty function stops the calls; it stays across start() calls. */
    virtual void set_frame_ready(std::function<void()> callback) = 0;

    /* What the device is programmed with.  The first three throw std::runtime_error unless the
     * receiver is started (start has run and close has not). */
    virtual uint32_t get_qp_number() = 0;          /* DP_QP */
    virtual uint32_t get_rkey() = 0;               /* DP_RKEY */
    virtual uint64_t external_frame_memory() = 0;  /* DP_PAGE_LSB/MSB: the device's address of
                                                      page 0 (not a CUDA address); page n is at
                                                      this + n * page_size() */
    virtual size_t frame_size() = 0;               /* the cu_frame_size start was given (0 before) */
    virtual size_t page_size() = 0;                /* the cu_page_size start was given */
    virtual unsigned pages() = 0;                  /* the pages start was given */
};

} // namespace mlx5direct
} // namespace hololink::module

#endif
