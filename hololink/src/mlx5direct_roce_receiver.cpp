/* Mlx5DirectRoceReceiverV1: RoceReceiverInterfaceV1 on the C receiver (receiver/mlxd_receiver.h).
 * Every failure of a C call becomes std::runtime_error carrying that call's message
 * (mlxd_errmsg(), per thread, read right after the call). */
#include "hololink/module/mlx5direct_roce_receiver.hpp"

#include <cerrno>
#include <climits>
#include <new>
#include <stdexcept>

#include <mlxd_error.h>
#include <mlxd_uverbs.h>

#include <fstream>

namespace hololink::module {
inline namespace mlx5direct {

void Mlx5DirectRoceReceiverV1::throw_c_error(const char *what)
{
    const char *m = mlxd_errmsg();
    throw std::runtime_error(m && *m ? std::string(m) : std::string(what));
}

std::shared_ptr<Mlx5DirectRoceReceiverV1>
Mlx5DirectRoceReceiverV1::get_service(const EnumerationMetadata &metadata, bool allow_null)
{
    auto any = RoceReceiverInterfaceV1::get_service(metadata, allow_null);
    if (!any)
        return {};
    auto mine = std::dynamic_pointer_cast<Mlx5DirectRoceReceiverV1>(any);
    if (!mine)
        throw std::runtime_error("Mlx5DirectRoceReceiverV1::get_service: the default module's "
                                 "roce_receiver.v1 for " + locator_id(metadata) +
                                 " is another implementation");
    return mine;
}

Mlx5DirectRoceReceiverV1::Mlx5DirectRoceReceiverV1() : r_(mlxd_receiver_new())
{
    if (!r_)
        throw std::bad_alloc();
    /* one trampoline for the receiver's life; set_frame_ready swaps what it calls */
    mlxd_receiver_set_frame_ready(r_, frame_ready_trampoline, this);
}

Mlx5DirectRoceReceiverV1::~Mlx5DirectRoceReceiverV1()
{
    mlxd_receiver_destroy(r_);          /* closes: the monitor has returned before this */
}

void Mlx5DirectRoceReceiverV1::frame_ready_trampoline(void *self)
{
    auto *me = static_cast<Mlx5DirectRoceReceiverV1 *>(self);
    std::function<void()> *cb = me->frame_ready_.current.load();
    if (cb)
        (*cb)();
}

void Mlx5DirectRoceReceiverV1::configure(const EnumerationMetadata &md)
{
    std::lock_guard<std::mutex> g(lock_);
    auto text = [&](const char *key, std::string &out) {
        if (md.contains(key))
            out = md.get<std::string>(key);     /* wrong type: throws naming the key */
    };
    std::string name = ibv_name_, peer = peer_ip_, ifname = interface_, mode;
    text("ibv_name", name);
    text("peer_ip", peer);
    text("interface", ifname);
    text("receiver_mode", mode);
    unsigned port = ibv_port_;
    if (md.contains("ibv_port")) {
        int64_t p = md.get<int64_t>("ibv_port");
        if (p < 0 || p > 1)
            throw std::runtime_error("Mlx5DirectRoceReceiverV1::configure: ibv_port " +
                                     std::to_string(p) + " is not 0 or 1");
        port = static_cast<unsigned>(p);
    }
    Options o = options_;
    if (mode == "event")
        o.mode = Mode::event;
    else if (mode == "busy_poll")
        o.mode = Mode::busy_poll;
    else if (!mode.empty())
        throw std::runtime_error("Mlx5DirectRoceReceiverV1::configure: receiver_mode '" + mode +
                                 "' is not \"event\" or \"busy_poll\"");
    if (md.contains("hsb_ip_version")) {
        int64_t v = md.get<int64_t>("hsb_ip_version");
        if (v < 0 || v > 0xFFFF)
            throw std::runtime_error("Mlx5DirectRoceReceiverV1::configure: hsb_ip_version " +
                                     std::to_string(v) + " is outside 0..0xFFFF");
        /* HSB selects the 2510 receiver (8-bit page, 24-bit PSN) below IP version 0x2603 */
        o.imm_layout = v < 0x2603 ? MLXD_HSB_IMM_LEGACY_8_24 : MLXD_HSB_IMM_12_20;
    }
    ibv_name_ = name;
    peer_ip_ = peer;
    interface_ = ifname;
    ibv_port_ = port;
    options_ = o;
}

/* The RDMA device whose port 1 has a GID on network interface ifname: the files
 * <sysfs>/class/infiniband/<dev>/ports/1/gid_attrs/ndevs/<index> name each GID's interface
 * (kernel drivers/infiniband/core/sysfs.c).  Exactly one device must match. */
static std::string device_of_interface(const std::string &ifname)
{
    char **names = nullptr;
    size_t n = 0;
    if (mlxd_names(&names, &n) < 0)
        throw std::runtime_error(mlxd_errmsg());
    std::string root = mlxd_sysfs_root(), found, all;
    for (size_t d = 0; d < n; d++) {
        bool match = false;
        for (unsigned i = 0; i < 256 && !match; i++) {
            std::ifstream f(root + "/class/infiniband/" + names[d] + "/ports/1/gid_attrs/ndevs/" +
                            std::to_string(i));
            std::string line;
            match = f && std::getline(f, line) && line == ifname;
        }
        if (match) {
            all += (all.empty() ? "" : ", ") + std::string(names[d]);
            if (found.empty())
                found = names[d];
        }
    }
    mlxd_names_free(names, n);
    if (found.empty())
        throw std::runtime_error("start: no RDMA device has a GID on interface '" + ifname + "' (" +
                                 root + "/class/infiniband/*/ports/1/gid_attrs/ndevs); pass ibv_name");
    if (found != all)
        throw std::runtime_error("start: several RDMA devices have a GID on interface '" + ifname +
                                 "' (" + all + "); pass ibv_name");
    return found;
}

hololink_module_status_t Mlx5DirectRoceReceiverV1::start(
    const std::string &ibv_name, unsigned ibv_port, uint64_t cu_buffer, size_t cu_buffer_size,
    size_t cu_frame_size, size_t cu_page_size, unsigned pages, size_t metadata_offset,
    const std::string &peer_ip, unsigned queue_size)
{
    std::lock_guard<std::mutex> g(lock_);
    std::string dev = !ibv_name.empty() ? ibv_name
                      : !ibv_name_.empty() || interface_.empty() ? ibv_name_
                      : device_of_interface(interface_);
    const std::string &peer = peer_ip.empty() ? peer_ip_ : peer_ip;
    mlxd_receiver_opts o{};
    o.sz = sizeof o;
    o.device = dev.c_str();
    o.port = ibv_port ? ibv_port : ibv_port_;
    o.buffer = cu_buffer;
    o.buffer_size = cu_buffer_size;
    o.frame_size = cu_frame_size;
    o.page_size = cu_page_size;
    o.pages = pages;
    o.metadata_offset = metadata_offset;
    o.peer_ip = peer.c_str();
    o.queue_size = queue_size;
    o.mode = options_.mode == Mode::busy_poll ? MLXD_RECEIVER_BUSY_POLL : MLXD_RECEIVER_EVENT;
    o.imm_layout = options_.imm_layout;
    o.memory = options_.memory;
    o.no_metadata = options_.no_metadata;
    o.recv_depth = options_.recv_depth;
    o.repost_batch = options_.repost_batch;
    /* callbacks replaced during an earlier run: no monitor can be calling them now */
    if (monitors_.load() == 0)
        frame_ready_.retired.clear();
    if (mlxd_receiver_start(r_, &o) < 0)
        throw_c_error("mlxd_receiver_start failed");
    ever_started_ = true;
    close_error_.clear();
    return HOLOLINK_MODULE_OK;
}

void Mlx5DirectRoceReceiverV1::close()
{
    /* not under lock_: close must not wait for a start elsewhere to finish its device work, and
     * the C receiver serialises start and close itself */
    if (mlxd_receiver_close(r_) < 0) {
        std::lock_guard<std::mutex> g(lock_);
        close_error_ = mlxd_errmsg();
    }
}

void Mlx5DirectRoceReceiverV1::blocking_monitor()
{
    monitors_.fetch_add(1);
    int rc = mlxd_receiver_blocking_monitor(r_);
    monitors_.fetch_sub(1);
    if (rc == 0)
        return;
    /* close() came before the monitor began: the run is over, as if it had run (a monitor
     * thread started after start() must not throw because close() was quick) */
    if (rc == -EINVAL && ever_started_ && !mlxd_receiver_started(r_))
        return;
    throw_c_error("mlxd_receiver_blocking_monitor failed");
}

static void fill_info(const mlxd_receiver_frame &f, RoceReceiverFrameInfoV1 &info)
{
    info.frame_memory = f.frame_memory;
    info.metadata_memory = f.metadata_memory;
    info.received_frame_number = f.received_frame_number;
    info.frame_number = static_cast<uint32_t>(f.frame_number);
    info.imm_data = f.imm_data;
    info.received_s = static_cast<uint64_t>(f.received_s);
    info.received_ns = f.received_ns;
    info.rx_write_requests = 0;
    info.dropped = static_cast<uint32_t>(f.dropped);
    info.flags = f.metadata.flags;
    info.psn = f.metadata.psn;
    info.crc = f.metadata.crc;
    info.timestamp_s = f.metadata.timestamp_s;
    info.timestamp_ns = f.metadata.timestamp_ns;
    info.bytes_written = f.metadata.bytes_written;
    info.metadata_s = f.metadata.metadata_s;
    info.metadata_ns = f.metadata.metadata_ns;
    info.page_number = f.page;
    info.receiver_flags = f.flags;
    info.frame_number64 = f.frame_number;
    info.nic_ns = f.nic_ns;
}

bool Mlx5DirectRoceReceiverV1::get_next_frame(unsigned timeout_ms, RoceReceiverFrameInfoV1 &info)
{
    mlxd_receiver_frame f;
    if (!mlxd_receiver_get_next_frame(r_, timeout_ms, &f)) {
        if (!ever_started_)
            throw_c_error("mlxd_receiver_get_next_frame: start() has not been called");
        return false;
    }
    fill_info(f, info);
    return true;
}

bool Mlx5DirectRoceReceiverV1::frames_ready()
{
    return mlxd_receiver_frames_ready(r_);
}

template <typename F>
void Mlx5DirectRoceReceiverV1::replace(CallbackSlot<F> &slot, F &&f)
{
    F *next = f ? new F(std::move(f)) : nullptr;
    F *prev = slot.current.exchange(next);
    if (!prev)
        return;
    std::lock_guard<std::mutex> g(lock_);
    if (monitors_.load() == 0)
        delete prev;
    else
        slot.retired.emplace_back(prev);    /* a running monitor may be calling it */
}

void Mlx5DirectRoceReceiverV1::set_frame_ready(std::function<void()> callback)
{
    replace(frame_ready_, std::move(callback));
}

/* A query that is meaningful only while started: the C call's message when not. */
template <typename T>
static T started_query(mlxd_receiver *r, T (*query)(const mlxd_receiver *))
{
    T v = query(r);
    if (!mlxd_receiver_started(r)) {
        (void)query(r);                 /* not started (or closed meanwhile): sets the message */
        throw std::runtime_error(mlxd_errmsg());
    }
    return v;
}

uint32_t Mlx5DirectRoceReceiverV1::get_qp_number() { return started_query(r_, mlxd_receiver_qp_number); }
uint32_t Mlx5DirectRoceReceiverV1::get_rkey() { return started_query(r_, mlxd_receiver_rkey); }
uint64_t Mlx5DirectRoceReceiverV1::external_frame_memory()
{
    return started_query(r_, mlxd_receiver_external_frame_memory);
}
size_t Mlx5DirectRoceReceiverV1::frame_size() { return mlxd_receiver_frame_size(r_); }
size_t Mlx5DirectRoceReceiverV1::page_size() { return mlxd_receiver_page_size(r_); }
unsigned Mlx5DirectRoceReceiverV1::pages() { return mlxd_receiver_pages(r_); }
size_t Mlx5DirectRoceReceiverV1::metadata_offset() { return mlxd_receiver_metadata_offset(r_); }
uint32_t Mlx5DirectRoceReceiverV1::local_ipv4() { return mlxd_receiver_local_ipv4(r_); }

void Mlx5DirectRoceReceiverV1::set_options(const Options &options)
{
    std::lock_guard<std::mutex> g(lock_);
    if (mlxd_receiver_started(r_))
        throw std::runtime_error("set_options: the receiver is started; options apply from the "
                                 "next start(), set them after close()");
    options_ = options;
}

Mlx5DirectRoceReceiverV1::Options Mlx5DirectRoceReceiverV1::options() const
{
    std::lock_guard<std::mutex> g(lock_);
    return options_;
}

Mlx5DirectRoceReceiverV1::Stats Mlx5DirectRoceReceiverV1::stats()
{
    Stats s;
    if (mlxd_receiver_stats(r_, &s) < 0)
        throw_c_error("mlxd_receiver_stats failed");
    return s;
}

Mlx5DirectRoceReceiverV1::FrameState Mlx5DirectRoceReceiverV1::check_frame(const RoceReceiverFrameInfoV1 &info)
{
    mlxd_receiver_frame f{};
    f.page = info.page_number;
    f.flags = info.receiver_flags;
    f.received_frame_number = info.received_frame_number;
    f.metadata.psn = info.psn;
    int v = mlxd_receiver_frame_check(r_, &f);
    if (v < 0)
        throw_c_error("mlxd_receiver_frame_check failed");
    return static_cast<FrameState>(v);
}

std::string Mlx5DirectRoceReceiverV1::configured_ibv_name() const
{
    std::lock_guard<std::mutex> g(lock_);
    return ibv_name_;
}

unsigned Mlx5DirectRoceReceiverV1::configured_ibv_port() const
{
    std::lock_guard<std::mutex> g(lock_);
    return ibv_port_;
}

std::string Mlx5DirectRoceReceiverV1::configured_peer_ip() const
{
    std::lock_guard<std::mutex> g(lock_);
    return peer_ip_;
}

std::string Mlx5DirectRoceReceiverV1::configured_interface() const
{
    std::lock_guard<std::mutex> g(lock_);
    return interface_;
}

std::string Mlx5DirectRoceReceiverV1::close_error() const
{
    std::lock_guard<std::mutex> g(lock_);
    return close_error_;
}

} // namespace mlx5direct
} // namespace hololink::module
