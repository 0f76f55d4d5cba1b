/* mlxd_receiver.h: a frame receiver with the semantics of Holoscan Sensor Bridge's RoceReceiver
 * (hololink::module::RoceReceiverInterfaceV1: Holoscan Sensor Bridge
 * src/hololink/operators/roce_receiver/roce_receiver.hpp and .cpp), on the direct driver
 * (uverbs/mlxd_uverbs.h, mlx5/mlxd_mlx5.h) instead of libibverbs.
 *
 * How a sensor bridge delivers a frame (Holoscan Sensor Bridge RTL
 * fpga/nv_hsb_ip/dp_pkt/dp_pkt_top.sv, src/hololink/core/data_channel.cpp configure_roce): the
 * device cycles through `pages` slots ("pages") of page_size bytes that start at
 * external_frame_memory().  Each frame is a run of UC RDMA WRITE Only packets (opcode 0x2A) into
 * the page, then a UC RDMA WRITE Only with Immediate (0x2B) that writes the 128-byte big-endian
 * metadata block at page + round_up(frame_size, 128) and consumes one posted receive: that
 * completion is the frame.  The immediate carries the page index and the PSN of that packet
 * (mlxd_hsb.h).  The device is programmed with qp_number(), rkey(), external_frame_memory(),
 * page_size(), pages() and frame_size(); it has no flow control.
 *
 * Life cycle:
 *     r = mlxd_receiver_new();              (once)
 *     mlxd_receiver_set_frame_ready(r, cb, ctx);   (optional, stays across starts)
 *     mlxd_receiver_start(r, &opts);        (checks every argument, opens the NIC, QP to RTR)
 *     thread A: mlxd_receiver_blocking_monitor(r);   (until close)
 *     thread B: while (mlxd_receiver_get_next_frame(r, 1000, &f)) { ... }
 *     any thread: mlxd_receiver_close(r);   (QP to ERR, drain, destroy everything)
 *     (start again, or) mlxd_receiver_destroy(r);
 *
 * Memory: the receiver never allocates the frame buffer; the caller owns it and keeps it mapped
 * and valid from start until close returns.  Host memory is registered as it is; CUDA device
 * memory (a CUdeviceptr) through a dma-buf of the range (cuMemGetHandleForAddressRange,
 * CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD).  Every build can: the NVIDIA driver (libcuda.so.1) is
 * loaded at run time when present, no CUDA toolkit is needed (docs/receiver.md, "GPU memory").
 *
 * fork(): a child of fork cannot disturb its parent's receiver.  The rings, doorbell records and
 * the registered frame buffer are MADV_DONTFORK (as rdma-core's ibv_fork_init arranges): they
 * are not mapped in the child.  Registration covers whole pages, so allocate the frame buffer
 * in whole pages (mmap, or posix_memalign with the size rounded up to the page size): heap data
 * sharing its first or last page would be missing in the child too.  In the child every call on
 * the parent's receiver returns -EINVAL (false, 0), with a message saying so, and changes
 * nothing; destroy does nothing there.  So a child's atexit handler or C++ static destructor
 * that closes the receiver neither hangs nor stops the parent's monitor, which stops only when
 * the parent's own close asks it to.  A child that wants frames makes its own receiver.
 *
 * Errors (abi/mlxd_error.h): int-returning calls give 0 or a negative errno and a per-thread
 * message naming the call, the argument and the bound.  Misuse gives -EINVAL and changes nothing.
 *
 * Thread rules: start, close and destroy of one receiver are serialised internally (a mutex, not
 * on the per-frame path); close may run on any thread, including the monitor's own (from the
 * frame-ready callback) and while get_next_frame waits.  get_next_frame, frames_ready,
 * frame_check, stats and the queries may run on any thread at any time.  destroy runs after
 * every other call on the receiver has returned.
 * Threads of its own: in busy-poll mode with a device, start creates one events thread (all
 * signals blocked) that blocks on the NIC's async-event fd and hands events to the monitor
 * through a mailbox; close joins it before closing the device.  A fixture replay has its feeder
 * thread instead; event mode has none.  The receiver never calls the application's callbacks
 * from its own threads: the frame-ready and event handlers run on the monitor thread
 * (docs/receiver.md, "The threads of a receiver").
 */
#ifndef MLXD_RECEIVER_H
#define MLXD_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlxd_hsb.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mlxd_receiver;

enum mlxd_receiver_mode {
    MLXD_RECEIVER_BUSY_POLL = 0, /* the monitor spins on the CQ: no system call per frame */
    MLXD_RECEIVER_EVENT = 1,     /* arm the CQ and sleep on the completion channel (the original) */
};

enum mlxd_receiver_memory {
    MLXD_RECEIVER_MEM_AUTO = 0,  /* ask the NVIDIA driver what buffer is (host without one) */
    MLXD_RECEIVER_MEM_HOST = 1,  /* buffer is a pointer into this process */
    MLXD_RECEIVER_MEM_CUDA = 2,  /* buffer is a CUdeviceptr (-ENOTSUP without libcuda.so.1) */
};

/* The arguments of RoceReceiver::start, plus this library's choices.  Zero = default. */
struct mlxd_receiver_opts {
    size_t   sz;                 /* sizeof(struct mlxd_receiver_opts).  At least
                                    offsetof(struct mlxd_receiver_opts, mode) (the original's
                                    arguments; fields past sz are taken as 0); a larger sz from a
                                    newer header is accepted when the fields this library does
                                    not know are zero */
    const char *device;          /* RDMA device name, "mlx5_0" (ibv_name); 1..63 bytes */
    unsigned port;               /* 0 or 1 (a ConnectX function has one port) */
    uint64_t buffer;             /* address of the frame buffer (cu_buffer): host pointer or
                                    CUdeviceptr */
    size_t   buffer_size;        /* bytes (cu_buffer_size) */
    size_t   frame_size;         /* bytes of frame data the device sends per frame, 1..2^40 */
    size_t   page_size;          /* bytes from one page to the next: a multiple of 128 and
                                    >= round_up(frame_size, 128) + 128 */
    unsigned pages;              /* 1..4096 (1..256 with the legacy immediate) */
    size_t   metadata_offset;    /* where the metadata block is read in a page; +128 <= page_size.
                                    The device writes it at round_up(frame_size, 128); pass that
                                    (mlxd_hsb_metadata_offset()) unless the device differs. */
    const char *peer_ip;         /* the sensor bridge's IPv4 address, dotted quad */
    unsigned queue_size;         /* 1..pages frames queued for the consumer */
    /* beyond the original */
    uint32_t mode;               /* enum mlxd_receiver_mode */
    uint32_t imm_layout;         /* enum mlxd_hsb_imm_layout: 12/20 (default) or legacy 8/24 */
    uint32_t memory;             /* enum mlxd_receiver_memory */
    bool     no_metadata;        /* the device sends no metadata block (md_disable): frames carry
                                    no decoded metadata and no PSN check is made */
    unsigned recv_depth;         /* receives kept posted: 0 = 256 (as the original); else
                                    2..32768 */
    unsigned repost_batch;       /* receives re-posted at once: 0 = 16; 1..recv_depth/2 */
    const char *record_cqes;     /* NULL, or a file to record every CQE of the receive CQ into
                                    (mlxd_cq_record_start, mlx5/mlxd_mlx5.h: a CQE fixture,
                                    docs/fixture-format.md), from start until close (the flush
                                    CQEs of close included); read during start only */
    const char *replay_fixture;  /* NULL, or a CQE fixture (docs/fixture-format.md) to receive
                                    from instead of a NIC: no device is opened (device and
                                    peer_ip are not used, but peer_ip must still parse); the
                                    records play into a detached CQ, each 'md' block landing in
                                    its page before its CQE, and the monitor (busy-poll: mode
                                    is ignored), queue, callbacks and counters run as with a
                                    NIC.  Host memory only.  docs/testing-with-fixtures.md */
    uint32_t replay_pace;        /* enum mlxd_replay_pace */
};

/* How a receiver started on replay_fixture plays the records. */
enum mlxd_replay_pace {
    MLXD_REPLAY_PACE_FAST = 0,     /* as fast as the monitor consumes them */
    MLXD_REPLAY_PACE_RECORDED = 1, /* with the recorded delays between records */
    MLXD_REPLAY_PACE_STEPPED = 2,  /* only as many as mlxd_receiver_replay_step() allowed */
};

/* Stepped pacing: lets the replay write n more records (each a CQE, with its metadata block).
 * Returns 0; -EINVAL when the receiver was not started on a fixture with
 * MLXD_REPLAY_PACE_STEPPED.  Any thread. */
int mlxd_receiver_replay_step(struct mlxd_receiver *r, unsigned n);

/* Records the replay has written into the ring so far (*written) and the fixture holds (*total).
 * -EINVAL when the receiver was not started on a fixture.  Any thread. */
int mlxd_receiver_replay_progress(const struct mlxd_receiver *r, uint64_t *written, uint64_t *total);

/* Bits of mlxd_receiver_frame.flags. */
#define MLXD_FRAME_PSN_MISMATCH 0x1u /* at completion the device had rewritten the page, or was
                                        rewriting its metadata while the monitor copied it (the
                                        PSN read after the copy differed: receiver/md_snapshot.h);
                                        the metadata is then not this frame's.  Without the flag
                                        the metadata is this frame's own block, never a mix */
#define MLXD_FRAME_NO_METADATA  0x2u /* started with no_metadata: metadata fields are 0 */
#define MLXD_FRAME_STALE        0x4u /* the completion wrote nothing into its page: a WRITE with
                                        immediate of 0 bytes (which needs no rkey: IB spec
                                        o9-21), or the page's metadata block is still the one
                                        delivered with its previous frame (or held at start).
                                        Set with MLXD_FRAME_PSN_MISMATCH when there is metadata;
                                        counted in stats.overwritten.  The frame is not a new one */
#define MLXD_FRAME_MISSING_METADATA 0x8u /* the block at metadata_offset was all zeros: the device
                                        wrote no metadata there (usually frame_size or
                                        metadata_offset differs from what the device was
                                        programmed with).  Counted in stats.missing_metadata,
                                        never as overwritten */
#define MLXD_FRAME_SIZE_MISMATCH 0x10u /* the metadata's bytes_written differs from frame_size
                                        (stats.short_frames / long_frames) */

/* One frame (RoceReceiverFrameInfoV1 + the decoded metadata). */
struct mlxd_receiver_frame {
    uint32_t page;               /* page index from the immediate */
    uint32_t flags;              /* MLXD_FRAME_* */
    uint64_t frame_memory;       /* buffer + page * page_size (same address space as buffer) */
    uint64_t metadata_memory;    /* frame_memory + metadata_offset */
    struct mlxd_hsb_metadata metadata; /* snapshot taken when the completion was seen */
    uint64_t frame_number;       /* metadata.frame_number (16 bits) extended to 64 across wraps,
                                    over every completion in arrival order, dropped ones included
                                    (0 with MLXD_FRAME_MISSING_METADATA).
                                    With MLXD_FRAME_PSN_MISMATCH the metadata is the rewriting
                                    frame's (as far as its write had landed), or (with
                                    MLXD_FRAME_STALE) an older frame's, and it does not advance
                                    the extension; a number older than the newest (by less than
                                    32768) does not either (mlxd_hsb_counter16) */
    uint32_t imm_data;           /* the immediate, host order */
    uint32_t imm_psn;            /* PSN from the immediate */
    int64_t  received_s;         /* CLOCK_REALTIME when the monitor saw the completion */
    uint32_t received_ns;
    uint64_t received_frame_number; /* completions with a frame since start, this one included
                                       (1 for the first frame) */
    uint64_t dropped;            /* frames dropped from the queue so far (queue full) */
    uint64_t nic_ns;             /* when the NIC completed the frame's last packet, ns since the
                                    epoch on the NIC's clock: the real-time (PTP) CQE timestamp
                                    where the device has one, else the free-running timer converted
                                    through the kernel's clock-info page (mlxd_ts_to_ns), whose time
                                    base is the PHC's; 0 when the device gives neither.  With the
                                    NIC's clock synchronised to the host's, received - nic_ns is
                                    the NIC-to-host delay (mlxd-capture prints it).  Not in the
                                    original (issue 18) */
};

/* Statistics since start (the counters are kept through close until the next start). */
struct mlxd_receiver_stats {
    uint64_t frames;             /* successful completions that became frames */
    uint64_t consumed;           /* frames taken by get_next_frame */
    uint64_t dropped;            /* oldest frames dropped because the queue was full */
    uint64_t replaced;           /* frames replaced before the consumer's first get_next_frame */
    uint64_t overwritten;        /* frames flagged MLXD_FRAME_PSN_MISMATCH: metadata PSN not the
                                    immediate's, or the block rewritten while it was copied, or
                                    stale (MLXD_FRAME_STALE) */
    uint64_t overwritten_after_read; /* mlxd_receiver_frame_check() verdicts OVERWRITTEN */
    uint64_t bad_page;           /* completions whose page index was >= pages (no frame made) */
    uint64_t errors;             /* error completions (not counting flushes at close) */
    uint64_t errors_by_syndrome[256]; /* by the CQE's MLX5_CQE_SYNDROME_* value */
    uint64_t flushed;            /* flush completions at close (status 5, WR_FLUSH_ERR) */
    uint64_t hw_drops;           /* packets the NIC dropped for lack of posted receives (CQE) */
    uint64_t last_frame_number;  /* extended frame_number of the newest frame */
    uint64_t consumer_wakeups;   /* system calls (FUTEX_WAKE) the monitor made to wake a consumer
                                    asleep in get_next_frame: the only per-frame system call of
                                    the busy-poll monitor, and 0 while consumers keep up */
    uint64_t rx_write_requests;  /* <sysfs>/class/infiniband/<dev>/ports/1/hw_counters/
                                    rx_write_requests, read by mlxd_receiver_stats() */
    bool     rx_write_requests_valid; /* false when that file does not exist or cannot be read */
    /* Frame accounting (docs/receiver.md "Where every frame went").  The frames a device sent
     * up to the newest one seen add up: frames + errors + bad_page + hw_drops + lost; after
     * close, the frames that came while it closed are at_close.  Of the frames, those handed
     * out intact are what remains after dropped, replaced, overwritten, missing_metadata and the
     * size mismatches. */
    uint64_t lost;               /* frames lost before the port (on the wire, or while the link
                                    was down): gaps in the metadata's frame number not explained
                                    by hw_drops, error completions, bad pages, overwritten or
                                    missing metadata.  A backward step or a jump of 32768 or
                                    more is taken as a restart of the sensor, not a loss */
    uint64_t lost_link_down;     /* of lost, the frames of gaps that spanned a link outage */
    uint64_t missing_metadata;   /* completions whose metadata block was all zeros
                                    (MLXD_FRAME_MISSING_METADATA) */
    uint64_t short_frames;       /* bytes_written < frame_size (MLXD_FRAME_SIZE_MISMATCH) */
    uint64_t long_frames;        /* bytes_written > frame_size */
    uint64_t last_bytes_written; /* bytes_written of the newest mismatched frame (0: none): the
                                    frame_size the device was programmed with */
    uint64_t out_of_buffer;      /* <sysfs>/.../ports/1/hw_counters/out_of_buffer since start:
                                    packets the port dropped for lack of posted receives (kernel
                                    drivers/infiniband/hw/mlx5/counters.c, Q counter) */
    uint64_t out_of_sequence;    /* .../hw_counters/out_of_sequence since start: packets that
                                    arrived with a PSN gap before them (packets lost on the wire) */
    bool     hw_counters_valid;  /* out_of_buffer / out_of_sequence could be read */
    /* Async events (mlxd_receiver_next_event) */
    uint64_t events;             /* async events the monitor read, of every kind */
    uint64_t events_dropped;     /* events the queue could not hold (the oldest are dropped) */
    uint64_t port_down, port_up; /* MLXD_RX_EVENT_PORT_DOWN / _UP */
    uint64_t link_down_ns;       /* total time the port was down (an outage in progress counts
                                    up to now) */
    uint64_t qp_errors;          /* QP_FATAL, QP_REQ_ERROR, QP_ACCESS_ERROR */
    uint64_t cq_errors;          /* CQ_ERROR */
    uint64_t device_fatal;       /* DEVICE_FATAL */
    /* Frames that completed after the monitor's last poll, taken from the CQ by close's drain:
     * received, not delivered (the queue is closed).  The packets their CQEs say were dropped
     * for want of a receive are in hw_drops, their error completions in errors. */
    uint64_t at_close;
};

/* Async events of the NIC, as the receiver reports them (kernel include/rdma/ib_verbs.h enum
 * ib_event_type, delivered on the device's async fd: drivers/infiniband/core/uverbs_main.c). */
enum mlxd_receiver_event_kind {
    MLXD_RX_EVENT_PORT_DOWN = 1,  /* IB_EVENT_PORT_ERR: the link went down.  The receiver keeps
                                     running and goes on when the link comes back */
    MLXD_RX_EVENT_PORT_UP = 2,    /* IB_EVENT_PORT_ACTIVE: the link is back; down_ns = the outage */
    MLXD_RX_EVENT_RESUMED = 3,    /* the first frame after PORT_UP: frames_lost = the frames the
                                     device numbered during the outage that never arrived,
                                     down_ns = the outage */
    MLXD_RX_EVENT_QP_FATAL = 4,   /* IB_EVENT_QP_FATAL: the QP is in the error state */
    MLXD_RX_EVENT_QP_REQ_ERROR = 5,    /* IB_EVENT_QP_REQ_ERR */
    MLXD_RX_EVENT_QP_ACCESS_ERROR = 6, /* IB_EVENT_QP_ACCESS_ERR */
    MLXD_RX_EVENT_CQ_ERROR = 7,   /* IB_EVENT_CQ_ERR: the CQ overran or failed */
    MLXD_RX_EVENT_DEVICE_FATAL = 8, /* IB_EVENT_DEVICE_FATAL: the device is gone or reset */
    MLXD_RX_EVENT_OTHER = 9,      /* any other async event: kernel_type says which */
};

/* One event.  QP_*, CQ_ERROR and DEVICE_FATAL end blocking_monitor (it returns -EIO, -ENODEV for
 * DEVICE_FATAL, with a message naming the event): nothing more can arrive; close and start
 * again. */
struct mlxd_receiver_event {
    uint32_t kind;               /* enum mlxd_receiver_event_kind */
    uint32_t kernel_type;        /* ib_event_type number (IB_EVENT_*); 0 for RESUMED */
    int64_t  time_s;             /* CLOCK_REALTIME when the monitor read it */
    uint32_t time_ns;
    uint64_t frames;             /* stats.frames at that moment */
    uint64_t down_ns;            /* PORT_UP, RESUMED: how long the link was down */
    uint64_t frames_lost;        /* RESUMED: frames lost across the outage */
};

/* Called on the monitor thread for each event, as it is handled (NULL: stop calling).  Stays set
 * across start/close; register before the monitor starts.  It may call next_event and close,
 * not blocking_monitor.  Events are queued whether or not a callback is set. */
typedef void (*mlxd_receiver_event_fn)(void *ctx, const struct mlxd_receiver_event *ev);
void mlxd_receiver_set_event_handler(struct mlxd_receiver *r, mlxd_receiver_event_fn cb, void *ctx);

/* Takes the oldest queued event into *ev without waiting; false when none is queued (or r/ev
 * NULL).  The queue holds 64 events from start on; when full the oldest is dropped and counted
 * (stats.events_dropped).  Any thread; events stay readable after close until the next start.
 * Latency: event mode polls the async fd beside the completion channel; in busy-poll mode the
 * receiver's events thread blocks on it and the monitor takes what it read within one loop, so
 * an event is reported as soon as the monitor runs (no system call on the monitor for it). */
bool mlxd_receiver_next_event(struct mlxd_receiver *r, struct mlxd_receiver_event *ev);

/* "port down", "QP fatal error (IB_EVENT_QP_FATAL)", ...: a static string, "unknown event" for
 * a kind not listed. */
const char *mlxd_receiver_event_name(uint32_t kind);

/* A new, stopped receiver, or NULL (ENOMEM; message set). */
struct mlxd_receiver *mlxd_receiver_new(void);

/* Closes it if started, then frees it.  NULL: nothing. */
void mlxd_receiver_destroy(struct mlxd_receiver *r);

/* Checks every argument, then: opens the device, creates a CQ (and its completion channel in
 * event mode), registers [buffer, buffer+buffer_size) for local and remote write, creates a UC QP,
 * posts recv_depth zero-scatter receives, and moves the QP to RTR with dgid = ::ffff:peer_ip and
 * the local RoCE v2 GID whose address the kernel uses as the source towards peer_ip
 * (mlxd_gid_for_peer; the original takes the first IPv4-mapped GID).
 * Argument errors (-EINVAL, nothing touched; the message names the argument and the bound):
 *   r or opts NULL, opts->sz too small (below offsetof(mode)) or larger than this library's
 *   struct with non-zero bytes past it, already started, device NULL/empty or 64 bytes or
 *   longer, port not 0/1, buffer 0, frame_size 0 or above 2^40,
 *   page_size < round_up(frame_size,128)+128 or not a multiple of 128,
 *   metadata_offset + 128 > page_size, pages * page_size > buffer_size, pages not in 1..4096
 *   (1..256 legacy), queue_size not in 1..pages, peer_ip not an IPv4 address, mode/imm_layout/
 *   memory unknown, recv_depth not 0 or 2..32768, repost_batch above recv_depth/2;
 *   -ENODEV: no RDMA device of that name (sysfs listing; the device is not opened);
 *   -ENOTSUP: MLXD_RECEIVER_MEM_CUDA where libcuda.so.1 cannot be loaded; device memory where
 *   the driver or kernel cannot export/register it as a dma-buf (cuMemGetHandleForAddressRange
 *   CUDA_ERROR_NOT_SUPPORTED, or a driver before CUDA 11.7: the message says what is needed);
 *   -EINVAL (CUDA): MLXD_RECEIVER_MEM_CUDA with host memory, a buffer running past the end of
 *   its CUDA allocation, a context other than the buffer's current (cuPointerGetAttributes);
 *   -EFAULT (AUTO, no usable libcuda.so.1): memory the kernel cannot pin; the message says the
 *   library could not have recognized GPU memory.
 * Device errors: those of mlxd_open, mlxd_cq_create, mlxd_region_register(_dmabuf),
 * mlxd_qp_create, mlxd_qp_receive, mlxd_gid_for_peer (-EADDRNOTAVAIL: no GID routes to the peer),
 * mlxd_qp_connect, with that call's message; -ETIMEDOUT when the QP could not reach RTR because
 * the kernel could not resolve the peer's MAC address (drivers/infiniband/core/addr.c): tried 5
 * times, 200 ms apart, as Holoscan Sensor Bridge's receiver does (about 6 s in all), and the
 * message says to check that the peer is up and on the same subnet (it begins with the call's name, e.g. "mlxd_open
 * mlx5_0: ..."); CUDA failures give -EIO naming the CUDA call and its CUresult name (e.g.
 * "cuMemGetHandleForAddressRange(...): CUDA_ERROR_INVALID_VALUE").  Everything made is undone. */
int mlxd_receiver_start(struct mlxd_receiver *r, const struct mlxd_receiver_opts *opts);

/* Runs the receive loop on the calling thread until close.  Per completion: decode the immediate,
 * check the page (>= pages: counted in bad_page, no frame), snapshot and decode the metadata,
 * check its PSN against the immediate (mismatch: counted, frame flagged, still delivered), queue
 * the frame (queue semantics: see get_next_frame), call the frame-ready callback, re-post
 * receives in batches of repost_batch.  Error completions are counted by syndrome and their
 * receives re-posted.  None of these stops the loop.
 * Busy-poll mode makes no system call per frame (clock_gettime is the vDSO's) except a
 * FUTEX_WAKE for a consumer that really sleeps; the NIC's async events are read by the
 * receiver's events thread and handled here (one atomic load per loop); event mode polls the
 * async fd beside the completion channel.  Events and the frames that never came are counted in the
 * stats and reported through mlxd_receiver_next_event / the event handler (a port flap does not
 * stop the loop).
 * CUDA: the loop makes the CUDA context that was current at start (the buffer's, when none was)
 * current on this thread (-EIO naming cuCtxSetCurrent if it cannot), and reads each metadata
 * block with cuMemcpyDtoH; a failed copy stops the loop: -EIO naming cuMemcpyDtoH, its CUresult
 * name and what to do (the frame is not delivered).
 * Returns 0 after close; -EINVAL if not started or a monitor already runs; -EIO after a QP
 * fatal / request / access error or a CQ error event, -ENODEV after a device fatal event (the
 * message names the event, e.g. "mlxd_receiver_blocking_monitor: QP fatal error
 * (IB_EVENT_QP_FATAL) on the receiver's QP 0x000012: ..."); a driver error that makes receiving
 * impossible.  After any error the receiver stays started: call close. */
int mlxd_receiver_blocking_monitor(struct mlxd_receiver *r);

/* Ends the run: wakes the monitor and waits for it to return (unless called on the monitor's own
 * thread, e.g. from the callback: then the monitor tears down as it returns), wakes consumers
 * waiting in get_next_frame (they return false), joins the busy mode's events thread, moves
 * the QP to ERR, drains the CQ (the flush completions, stats.flushed, and the frames that
 * completed after the monitor's last poll, stats.at_close, with their CQEs' hw_drops and
 * errors; a replay's records likewise once its feeder stopped), destroys the QP, deregisters
 * the buffer, destroys the CQ and closes the device.
 * No file descriptor, mapping or thread is left.  Not started: does nothing, returns 0.
 * Returns 0 or the first teardown error, its message prefixed "mlxd_receiver_close: "
 * (everything is released anyway). */
int mlxd_receiver_close(struct mlxd_receiver *r);

/* Takes the oldest queued frame into *info, waiting up to timeout_ms (0: do not wait).
 * Queue semantics (the original's): queue_size slots; until the first call of this function only
 * the newest frame is kept; when full, the oldest frame is dropped and counted (info->dropped).
 * The frame's bytes stay in the buffer only until the device comes back to that page (`pages`
 * frames later; the device has no flow control): see mlxd_receiver_frame_check().
 * Returns true with *info filled; false on timeout, once close has begun (frames still queued
 * are not handed out: the run is over and the buffer may go away), or on misuse (r or info NULL,
 * never started: message set).  Lock-free; sleeps on a futex only while waiting. */
bool mlxd_receiver_get_next_frame(struct mlxd_receiver *r, unsigned timeout_ms,
                                  struct mlxd_receiver_frame *info);

/* False when get_next_frame would have to wait for a new frame, and after close. */
bool mlxd_receiver_frames_ready(struct mlxd_receiver *r);

/* Called on the monitor thread after each frame is queued (NULL cb: stop calling).  Stays set
 * across start/close.  Register before the monitor starts (a change while it runs takes effect
 * at some frame).  The callback must not call blocking_monitor; it may call close. */
typedef void (*mlxd_receiver_frame_ready_fn)(void *ctx);
void mlxd_receiver_set_frame_ready(struct mlxd_receiver *r, mlxd_receiver_frame_ready_fn cb,
                                   void *ctx);

/* Verdicts of mlxd_receiver_frame_check(). */
enum mlxd_frame_state {
    MLXD_FRAME_INTACT = 0,      /* no sign that the device has come back to this page */
    MLXD_FRAME_AT_RISK = 1,     /* this page is the one the device writes next: its bytes may be
                                   changing now */
    MLXD_FRAME_OVERWRITTEN = 2, /* a later frame completed into this page, or the page's metadata
                                   PSN changed: the bytes read may belong to another frame */
};

/* Beyond the original (which has no protection, HSB docs/user_guide/notes.mdx): call after
 * reading a frame's bytes to learn whether the device rewrote the page meanwhile.  Cost: a few
 * atomic loads and one 4-byte read of the page's metadata (host memory, after a load fence, so
 * the caller's earlier reads of the page come before it; a 4-byte copy from device memory in
 * CUDA mode; skipped with no_metadata).  OVERWRITTEN verdicts are counted in
 * stats.overwritten_after_read.  Returns the verdict; -EIO when the cuMemcpyDtoH of CUDA memory
 * fails (the message names it and its CUresult); or -EINVAL (NULL, page out of range, or
 * not started: before start and once close has returned, when it reads nothing, neither the
 * buffer nor the page's metadata, since the caller may have freed the buffer). */
int mlxd_receiver_frame_check(struct mlxd_receiver *r, const struct mlxd_receiver_frame *info);

/* Fills *out (reads rx_write_requests from sysfs: not for the per-frame path).  -EINVAL on NULL. */
int mlxd_receiver_stats(struct mlxd_receiver *r, struct mlxd_receiver_stats *out);

/* Queries.  Until start has run (or after close) the first three return 0 and set the message. */
bool     mlxd_receiver_started(const struct mlxd_receiver *r);
uint32_t mlxd_receiver_qp_number(const struct mlxd_receiver *r);   /* program into DP_QP */
uint32_t mlxd_receiver_rkey(const struct mlxd_receiver *r);        /* program into DP_RKEY */
/* The device's address of page 0 (DP_PAGE_LSB/MSB): the IOVA of the registered buffer.  Host
 * memory: the buffer's virtual address; CUDA memory: the offset within its dma-buf.  (The
 * original registers with IOVA 0 and returns 0.) */
uint64_t mlxd_receiver_external_frame_memory(const struct mlxd_receiver *r);
/* The values start was given (0 before the first start). */
size_t   mlxd_receiver_frame_size(const struct mlxd_receiver *r);
size_t   mlxd_receiver_page_size(const struct mlxd_receiver *r);
unsigned mlxd_receiver_pages(const struct mlxd_receiver *r);
size_t   mlxd_receiver_metadata_offset(const struct mlxd_receiver *r);
/* The IPv4 address (host order) of the local GID the QP uses: where the device must send
 * (DP_HOST_IP); 0 before start. */
uint32_t mlxd_receiver_local_ipv4(const struct mlxd_receiver *r);
/* The GID table index of that GID, or -EINVAL before start. */
int      mlxd_receiver_gid_index(const struct mlxd_receiver *r);

#ifdef __cplusplus
}
#endif
#endif
