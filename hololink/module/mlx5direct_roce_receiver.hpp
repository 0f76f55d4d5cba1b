/* hololink/module/mlx5direct_roce_receiver.hpp: Mlx5DirectRoceReceiverV1, the
 * RoceReceiverInterfaceV1 of this library (on receiver/mlxd_receiver.h), and what it offers
 * beyond the original: busy-poll mode and the other receiver options, the overwrite check after
 * a read, and the statistics with the loss accounting.
 *
 *   auto rx = hololink::module::RoceReceiverInterfaceV1::get_service(metadata);
 *   auto direct = hololink::module::Mlx5DirectRoceReceiverV1::get_service(metadata); // same object
 *   direct->set_options({hololink::module::Mlx5DirectRoceReceiverV1::Mode::busy_poll});
 *
 * Enumeration metadata read by configure() (once, on the first get_service(metadata)); keys
 * marked HSB are Holoscan Sensor Bridge's own (its enumeration, hololink_module/.../
 * enumeration_metadata.hpp; RoceReceiverOp's parameters ibv_name/ibv_port):
 *   "peer_ip"          string  HSB: the sensor bridge's IPv4 address (start's default)
 *   "ibv_name"         string  HSB parameter name: RDMA device (start's default), e.g. "mlx5_0"
 *   "interface"        string  HSB: the network interface that reaches the sensor bridge; with
 *                              no ibv_name, start uses the RDMA device whose port 1 has a GID
 *                              on it (<sysfs>/class/infiniband/<dev>/ports/1/gid_attrs/ndevs/<index>,
 *                              as HSB's ibv_device_for_peer matches them)
 *   "ibv_port"         int     HSB parameter name: its port, 0 or 1 (used when start gets 0)
 *   "hsb_ip_version"   int     HSB: below 0x2603 the immediate is the legacy 8/24 split
 *   "receiver_mode"    string  this library's: "event" (default) or "busy_poll"
 *   "serial_number", "data_channel"   HSB: the instance (locator_id)
 * A value of the wrong type or out of range makes configure (so get_service) throw
 * std::runtime_error naming the key.
 * Errors and thread rules: those of RoceReceiverInterfaceV1 (roce_receiver.hpp). */
#ifndef MLX5DIRECT_HOLOLINK_MLX5DIRECT_ROCE_RECEIVER_HPP
#define MLX5DIRECT_HOLOLINK_MLX5DIRECT_ROCE_RECEIVER_HPP

#include "mlx5direct_guard.hpp"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <mlxd_receiver.h>

#include "roce_receiver.hpp"

namespace hololink::module {
inline namespace mlx5direct {

class Mlx5DirectRoceReceiverV1 : public RoceReceiverInterfaceV1,
                                 public Service<Mlx5DirectRoceReceiverV1> {
public:
    static constexpr const char *type_id = "roce_receiver.mlx5direct.v1";
    using ServiceAlias = RoceReceiverInterfaceV1;
    using Service<Mlx5DirectRoceReceiverV1>::for_each_type_id;
    using Service<Mlx5DirectRoceReceiverV1>::get_service;

    /* The receiver of metadata's instance (RoceReceiverInterfaceV1::get_service), as this
     * class; std::runtime_error if the default module made another implementation. */
    static std::shared_ptr<Mlx5DirectRoceReceiverV1> get_service(const EnumerationMetadata &metadata,
                                                                 bool allow_null = false);

    enum class Mode {
        event,      /* arm the CQ and sleep on the completion channel (the original's; default) */
        busy_poll,  /* spin on the CQ: no system call per frame, one core kept busy */
    };
    /* The choices beyond the original's arguments; they apply from the next start(). */
    struct Options {
        Mode mode = Mode::event;
        mlxd_hsb_imm_layout imm_layout = MLXD_HSB_IMM_12_20;   /* legacy 8/24 for HSB-Lite 2510 */
        mlxd_receiver_memory memory = MLXD_RECEIVER_MEM_AUTO;  /* what cu_buffer is */
        bool no_metadata = false;     /* the device sends no metadata block (md_disable) */
        unsigned recv_depth = 0;      /* receives kept posted, 0 = 256 */
        unsigned repost_batch = 0;    /* receives re-posted at once, 0 = 16 */
    };
    /* The statistics and loss accounting: the C library's struct itself, so that fields it
     * gains appear here unchanged (receiver/mlxd_receiver.h documents each). */
    using Stats = struct ::mlxd_receiver_stats;
    enum class FrameState {
        intact = MLXD_FRAME_INTACT,           /* no sign the device came back to the page */
        at_risk = MLXD_FRAME_AT_RISK,         /* the page is the one the device writes next */
        overwritten = MLXD_FRAME_OVERWRITTEN, /* the bytes read may be another frame's */
    };

    Mlx5DirectRoceReceiverV1();                 /* throws std::bad_alloc */
    ~Mlx5DirectRoceReceiverV1() override;       /* closes */
    Mlx5DirectRoceReceiverV1(const Mlx5DirectRoceReceiverV1 &) = delete;
    Mlx5DirectRoceReceiverV1 &operator=(const Mlx5DirectRoceReceiverV1 &) = delete;

    void configure(const EnumerationMetadata &metadata) override;

    hololink_module_status_t start(const std::string &ibv_name, unsigned ibv_port,
                                   uint64_t cu_buffer, size_t cu_buffer_size, size_t cu_frame_size,
                                   size_t cu_page_size, unsigned pages, size_t metadata_offset,
                                   const std::string &peer_ip, unsigned queue_size) override;
    void close() override;
    void blocking_monitor() override;
    bool get_next_frame(unsigned timeout_ms, RoceReceiverFrameInfoV1 &info) override;
    bool frames_ready() override;
    void set_frame_ready(std::function<void()> callback) override;
    uint32_t get_qp_number() override;
    uint32_t get_rkey() override;
    uint64_t external_frame_memory() override;
    size_t frame_size() override;
    size_t page_size() override;
    unsigned pages() override;

    /* beyond the original */
    void set_options(const Options &options);   /* before start; std::runtime_error while started */
    Options options() const;
    Stats stats();                              /* reads rx_write_requests from sysfs */
    /* After reading a frame's bytes: did the device rewrite the page meanwhile?  Counted in
     * stats().overwritten_after_read.  std::runtime_error when not started or the frame's page
     * is out of range. */
    FrameState check_frame(const RoceReceiverFrameInfoV1 &info);
    uint32_t local_ipv4();          /* where the device must send (DP_HOST_IP), host order */
    size_t metadata_offset();       /* the metadata_offset start was given */
    std::string configured_ibv_name() const;
    unsigned configured_ibv_port() const;
    std::string configured_peer_ip() const;
    std::string configured_interface() const;
    /* The message of the last close() that met a teardown error ("" if none). */
    std::string close_error() const;
    /* The C receiver, for calls this class does not wrap (owned by this object). */
    mlxd_receiver *c_receiver() { return r_; }

private:
    static void frame_ready_trampoline(void *self);
    [[noreturn]] static void throw_c_error(const char *what);

    mlxd_receiver *r_ = nullptr;
    mutable std::mutex lock_;            /* start/close/options/configuration, not per frame */
    std::atomic<bool> ever_started_{false};  /* start() has succeeded at least once */
    Options options_;
    std::string ibv_name_, peer_ip_, interface_;
    unsigned ibv_port_ = 0;
    std::string close_error_;
    /* A callback the monitor calls: the current one (null: none), and those replaced while a
     * monitor might still be calling them, freed when no monitor runs. */
    template <typename F>
    struct CallbackSlot {
        std::atomic<F *> current{nullptr};
        std::vector<std::unique_ptr<F>> retired;
        ~CallbackSlot() { delete current.load(); }
    };
    template <typename F>
    void replace(CallbackSlot<F> &slot, F &&f);

    CallbackSlot<std::function<void()>> frame_ready_;
    std::atomic<int> monitors_{0};
};

} // namespace mlx5direct
} // namespace hololink::module

#endif
