/* mlxd_capture.h: recorded sensor-bridge traffic (pcap) and synthetic traffic, sent into a
 * (usually emulated) RoCE v2 port so that a running mlxd_receiver receives it.
 *
 *   - mlxd_capture_load reads a pcap file with libpcap (link types Ethernet (with 802.1Q tags),
 *     raw IPv4 (DLT_RAW / LINKTYPE_IPV4), BSD loopback (DLT_NULL, DLT_LOOP) and Linux cooked
 *     (SLL, SLL2)), keeps the RoCE v2 packets (IPv4/UDP to port 4791, parsed and iCRC-checked
 *     with abi/mlxd_roce.h), groups them into frames (a frame ends with an RDMA WRITE Only with
 *     Immediate, opcode 0x2B) and infers the geometry the device was programmed with.
 *   - mlxd_capture_replay sends the packets again over UDP, rewriting the QPN, rkey and virtual
 *     address of each to what the running receiver asks for, which is exactly what programming
 *     the sensor bridge's DP_QP, DP_RKEY, DP_PAGE_LSB/MSB and DP_PAGE_INC registers does, and
 *     recomputing the iCRC.
 *   - mlxd_gen_run makes the same packet format itself at a chosen frame size, rate and count.
 *
 * Wire format facts: Holoscan Sensor Bridge fpga/nv_hsb_ip/dp_pkt/dp_pkt_top.sv,
 * src/hololink/core/data_channel.cpp (configure_roce) and the emulator's
 * src/hololink/emulation/src/common/rocev2_transmitter.cpp, and
 * fixtures/roce-pcaps/README.md (the emulator's first frame lands in page 1; PSN counts up across
 * frames masked to 20 bits; ImmDt = page | psn << 12; payload word i of frame f = (f << 24) | i).
 *
 * Errors: negative errno + mlxd_errmsg() (abi/mlxd_error.h).  Thread rules: a loaded capture is
 * read-only and may be replayed from several threads at once; everything else is per call.
 * These functions make system calls and allocate: they are tools, not the receive path.
 */
#ifndef MLXD_CAPTURE_H
#define MLXD_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mlxd_hsb.h"
#include "mlxd_roce.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mlxd_capture_packet {
    const uint8_t *ip;          /* the packet from its IPv4 header (owned by the capture) */
    uint32_t len;               /* bytes from the IPv4 header to the end of the iCRC */
    uint64_t ts_ns;             /* capture time, ns since the epoch */
    bool     icrc_ok;
    struct mlxd_roce_pkt hdr;   /* parsed fields; hdr.payload points into ip */
};

struct mlxd_capture_frame {
    uint32_t first, count;      /* packets [first, first+count), the last one the 0x2B */
    uint32_t page;              /* from the immediate (12/20 layout) */
    uint32_t imm;               /* the immediate, host order */
    uint32_t imm_psn;
    uint64_t va;                /* capture VA of the frame's first byte (page base) */
    uint64_t md_va;             /* capture VA of the metadata block (0 if none) */
    bool     has_metadata;      /* the last 128 bytes of the 0x2B are a metadata block whose PSN
                                   is that packet's PSN */
    struct mlxd_hsb_metadata md;
};

/* What the capture's device was programmed with, as far as the packets tell. */
struct mlxd_capture_geometry {
    uint32_t qpn, rkey;         /* DP_QP, DP_RKEY of the first packet */
    uint64_t base_va;           /* DP_PAGE_MSB:LSB: VA of page 0 */
    uint64_t frame_size;        /* DP_BUFFER_LENGTH: metadata bytes_written, else data bytes */
    uint64_t page_size;         /* DP_PAGE_INC * 128: from two frames in different pages, else
                                   round_up(frame_size, 128) + 128 */
    uint64_t metadata_offset;   /* metadata VA - page VA (round_up(frame_size, 128) from HSB) */
    unsigned pages;             /* highest page seen + 1 */
    uint32_t first_page;        /* page of the first frame (1 for NVIDIA's emulator) */
    uint32_t payload_size;      /* largest 0x2A payload: DP_PACKET_SIZE * 128 */
    unsigned frames;            /* 0x2B packets */
    bool     has_metadata;      /* every frame has a metadata block */
    bool     separate_metadata; /* the metadata travels in its own 128-byte 0x2B */
    uint64_t span_lo, span_hi;  /* lowest VA written, one past the highest */
};

struct mlxd_capture {
    int      linktype;          /* pcap DLT_* */
    size_t   npackets;          /* RoCE v2 packets kept */
    struct mlxd_capture_packet *pkts;
    size_t   nframes;
    struct mlxd_capture_frame *frames;
    size_t   skipped;           /* packets that were not RoCE v2 (other traffic) */
    size_t   bad_icrc;          /* RoCE packets whose iCRC was wrong (kept, replayed recomputed) */
    size_t   trailing;          /* packets after the last 0x2B (a frame without completion) */
    struct mlxd_capture_geometry geo;
    uint8_t *storage;
    size_t   records;           /* pcap records read whole (RoCE or not) */
    bool     cut_short;         /* the file ends inside record records + 1 (its header or data is
                                   cut short, or libpcap refused it): the records before it are
                                   kept, cut_why says what libpcap found */
    char     cut_why[256];
};

/* Ranges of the numbers a capture gives (the same as mlxd-capture's options): a frame of 1..2^40
 * bytes (mlxd_receiver_start's bound), a page of 128..2^41 bytes in steps of 128. */
#define MLXD_CAPTURE_MAX_FRAME_SIZE (1ull << 40)
#define MLXD_CAPTURE_MAX_PAGE_SIZE  (1ull << 41)
/* The receive buffer a capture may ask for (pages x page size of its geometry):
 * max(MLXD_CAPTURE_MIN_BUFFER_BOUND, MLXD_CAPTURE_BUFFER_FACTOR x the bytes of its RoCE packets)
 * (mlxd_capture_buffer_bound). */
#define MLXD_CAPTURE_MIN_BUFFER_BOUND (256ull << 20)
#define MLXD_CAPTURE_BUFFER_FACTOR 4u
/* The longest wait between two packets a recorded pace makes (after dividing by speed): 2^32 - 1
 * ms, the range of mlxd-capture's millisecond options. */
#define MLXD_CAPTURE_MAX_GAP_NS (4294967295ull * 1000000ull)

/* Loads path into a new capture and stores it in *out.  The capture belongs to the caller:
 * free it with mlxd_capture_free() (which frees its packets, frames and storage: every pointer
 * into it, such as mlxd_capture_packet.ip, becomes invalid).  *out is written only on success.
 * A file that ends inside a record (cut short, or a record libpcap refuses) keeps the records
 * before it: cut_short and cut_why say so (the caller should warn).
 * Memory: about twice the bytes of the RoCE packets kept plus 2 x (sizeof(struct
 * mlxd_capture_packet) + 8) + sizeof(struct mlxd_capture_frame) per packet.
 * Errors: -EINVAL NULL; -ENOENT/-EIO etc. when libpcap cannot open it (the message
 * carries libpcap's text) or the first record is already cut short; -EPROTONOSUPPORT an
 * unsupported link type; -ENODATA no RoCE v2 packet in it; -ENOMEM. */
int mlxd_capture_load(const char *path, struct mlxd_capture **out);
/* Frees a capture made by mlxd_capture_load.  NULL: nothing. */
void mlxd_capture_free(struct mlxd_capture *c);

/* Checks the geometry mlxd_capture_load inferred from c's packets, which are input like any
 * option: frame size 1..MLXD_CAPTURE_MAX_FRAME_SIZE and at most the payload bytes of the whole
 * capture (every byte of a frame travels in it); page size a multiple of 128 in
 * 128..MLXD_CAPTURE_MAX_PAGE_SIZE and at least round_up(frame size, 128) + 128; metadata offset
 * + 128 within the page; at most MLXD_HSB_MAX_PAGES pages; page 0 not below address 0; every
 * frame starting where its page does (page 0's address + page x page size).
 * Returns 0, -EINVAL (c NULL) or -ERANGE with a message ("mlxd_capture_geometry_check: ")
 * naming the number, its value and where it came from.  mlxd_capture_load does not refuse such
 * a capture (its packets can still be inspected); replaying it needs a map of one's own. */
int mlxd_capture_geometry_check(const struct mlxd_capture *c);

/* The largest receive buffer (bytes) a replay of c should allocate on the capture's word:
 * max(MLXD_CAPTURE_MIN_BUFFER_BOUND, MLXD_CAPTURE_BUFFER_FACTOR x the bytes of c's RoCE
 * packets).  mlxd-capture refuses an inferred geometry whose pages x page size exceeds it
 * (the options --pages and --page-size override).  0 for NULL. */
uint64_t mlxd_capture_buffer_bound(const struct mlxd_capture *c);

/* Checks that a replay of c at MLXD_PACE_RECORDED and speed (0 = 1.0) waits no more than
 * MLXD_CAPTURE_MAX_GAP_NS between two packets, as mlxd_capture_replay does before it sends.
 * Returns 0, -EINVAL (c NULL or without packets, speed negative, NaN or infinite) or -ERANGE
 * naming the packet and its gap (messages start "mlxd_capture_pace_check: "). */
int mlxd_capture_pace_check(const struct mlxd_capture *c, double speed);

/* Where the receiver wants the traffic: the values a sensor bridge's registers are programmed
 * with (mlxd_receiver_qp_number, _rkey, _external_frame_memory, _page_size, _pages). */
struct mlxd_replay_map {
    uint32_t qpn, rkey;
    uint64_t base_va;
    uint64_t page_size;
    unsigned pages;
    uint32_t psn_offset;        /* added (mod 2^20) to every PSN: the BTH's, the immediate's and
                                   a metadata block's; replay sets it for loops after the first so
                                   that the PSNs run on as a device's do (0 = as recorded) */
};

/* Rewrites packet i of c for map m: QPN, rkey, and VA (capture page n, offset o -> m->base_va +
 * n * m->page_size + o), the IPv4/UDP addresses to src/dst (host order), the iCRC recomputed,
 * and PSNs shifted by m->psn_offset.  Everything else (opcode, immediate page, payload, pad) is
 * kept.  Writes the whole packet (from its IPv4 header) to out (cap bytes); returns its length,
 * or -EINVAL (c, m or out NULL, i >= c->npackets, m->page_size 0), -ENOSPC (cap is smaller than
 * the packet; the message gives both sizes), -ERANGE (a VA below the capture's page 0, or the
 * capture's page size is 0: its frame size is out of range, see mlxd_capture_geometry_check).
 * Messages start "mlxd_capture_rewrite: ". */
ssize_t mlxd_capture_rewrite(const struct mlxd_capture *c, size_t i, const struct mlxd_replay_map *m,
                             uint32_t src_ip, uint16_t src_port, uint32_t dst_ip, uint16_t dst_port,
                             void *out, size_t cap);

enum mlxd_pacing {
    MLXD_PACE_FAST = 0,         /* back to back, with frame_gap_us after each frame */
    MLXD_PACE_RECORDED = 1,     /* the capture's own timing, divided by speed */
};

/* Called after each frame's last packet was sent (frame = index in the capture or generator,
 * counting from 0 across loops).  Return false to stop.  Use it for lock-step replay: wait
 * until the receiver has seen the frame. */
typedef bool (*mlxd_sent_frame_fn)(void *ctx, uint64_t frame);

struct mlxd_send_opts {
    size_t   sz;                /* sizeof(struct mlxd_send_opts); a larger sz from a newer header is
                                   accepted when the fields this library does not know are zero */
    const char *dst_ip;         /* the emulated port's address; NULL = "127.0.0.1" */
    uint16_t dst_port;          /* 0 = 4791 */
    const char *src_ip;         /* bind to this address; NULL = the kernel's choice */
    uint32_t pacing;            /* enum mlxd_pacing: 0 or 1, else -EINVAL */
    double   speed;             /* MLXD_PACE_RECORDED: 2.0 = twice as fast; 0 = 1.0; must be 0 or
                                   finite and > 0 (negative, NaN, infinite: -EINVAL) */
    unsigned frame_gap_us;      /* pause after each frame (MLXD_PACE_FAST) */
    unsigned loops;             /* replay: times through the capture; 0 = 1 */
    uint64_t max_frames;        /* stop after this many frames; 0 = no limit */
    mlxd_sent_frame_fn sent_frame;
    void    *ctx;
    /* checked between packets; may be NULL.  Non-zero = stop.  A plain int (C and C++ both
     * accept it, unlike _Atomic bool): the sender reads it with __atomic_load_n(stop,
     * __ATOMIC_ACQUIRE); set it from another thread or a signal handler with
     * __atomic_store_n(stop, 1, __ATOMIC_RELEASE) (or a volatile store). */
    volatile int *stop;
};

struct mlxd_send_stats {
    uint64_t packets, bytes, frames;
    uint64_t send_errors;       /* sendto failures (ENOBUFS...): the packet was lost */
};

/* Replays c into the port (see mlxd_capture_rewrite).  Packets after the last frame are sent too
 * (they complete nothing).  Loop L (from 0) shifts the PSNs by m->psn_offset + L x the capture's
 * PSN span, so that a receiver sees one continuous stream (UC receivers drop old PSNs).  o may be
 * NULL (defaults); st may be NULL.  Returns 0, or (messages start "mlxd_capture_replay: "):
 *   -EINVAL: c or m NULL; o->sz below sizeof(struct mlxd_send_opts), or larger with non-zero
 *            unknown bytes; o->pacing not an enum mlxd_pacing; o->speed negative, NaN or
 *            infinite; m->page_size or m->pages 0; dst_ip/src_ip not an IPv4 address;
 *   -ERANGE: MLXD_PACE_RECORDED and a gap between two packets, divided by speed, exceeds
 *            MLXD_CAPTURE_MAX_GAP_NS (checked before the first packet is sent; timestamps that
 *            go backwards wait nothing);
 *   -ENOMEM; -errno of socket/bind/connect;
 *   a rewrite error (-ERANGE, -ENOSPC: see mlxd_capture_rewrite) ends the replay.
 * Every wait (recorded pace, frame_gap_us) wakes within 10 ms of o->stop being set. */
int mlxd_capture_replay(const struct mlxd_capture *c, const struct mlxd_replay_map *m,
                        const struct mlxd_send_opts *o, struct mlxd_send_stats *st);

enum mlxd_gen_metadata {
    MLXD_GEN_MD_SEPARATE = 0,   /* metadata in its own 128-byte 0x2B (the FPGA's way) */
    MLXD_GEN_MD_EMBEDDED = 1,   /* in the last data packet when last data + pad + 128 < payload_size
                                   (what NVIDIA's emulator does: see fixtures/roce-pcaps) */
    MLXD_GEN_MD_NONE = 2,       /* md_disable: the last data packet is the 0x2B, no block */
};

struct mlxd_gen_opts {
    size_t   sz;                /* sizeof(struct mlxd_gen_opts); a larger sz from a newer header is
                                   accepted when the fields this library does not know are zero */
    uint64_t frame_size;        /* bytes per frame, 1..2^32 */
    uint32_t payload_size;      /* bytes per packet, a multiple of 128 up to 8192; 0 = 1408
                                   (MTU 1500) */
    uint32_t metadata;          /* enum mlxd_gen_metadata */
    double   fps;               /* frames per second, finite and >= 0; 0 = as fast as possible */
    uint64_t frames;            /* frames to send; 0 = until stop */
    uint32_t first_page;        /* page of frame 0; the emulator's is 1 (mod pages) */
    uint32_t first_psn;         /* PSN of the first packet (20 bits) */
    uint64_t first_frame;       /* frame number (and payload tag) of the first frame */
    uint32_t imm_layout;        /* enum mlxd_hsb_imm_layout of the immediates (default 12/20) */
};

/* Sends generated frames to map m: the k-th frame (k from 0) is frame number f = first_frame + k,
 * goes to page (first_page + k) mod pages; payload word i = (f << 24) | i; metadata: psn of its
 * packet, bytes_written = frame_size, frame_number = f (32 bits at offset 32),
 * CLOCK_REALTIME timestamps).  so: destination, pacing (frame_gap_us), stop, callback; loops and
 * max_frames ignored (use g->frames); so may be NULL (defaults), st may be NULL.
 * A frame's packets reach the kernel together, in one sendmmsg, with UDP segmentation offload
 * (UDP_SEGMENT) where the kernel and route allow it: on the wire each packet is still its own UDP
 * datagram with its own iCRC; the callback runs once the whole frame is sent.  st->send_errors
 * counts the packets the kernel did not take (ENOBUFS / EAGAIN for about 5 ms, ECONNREFUSED).
 * A generator feeds a receiver whose QP takes packets only from the peer it was connected to, and
 * a port drops packets above its MTU: so->src_ip must be set (the receiver's peer_ip), and the
 * largest packet must fit the MTU of the RDMA port that owns dst_ip (when a port of this host
 * owns it).  A run that succeeds leaves no message in mlxd_errmsg().
 * Returns 0, or (messages start "mlxd_gen_run: "):
 *   -EINVAL: so or so->src_ip NULL (the message says to set the receiver's peer_ip);
 *   -EADDRNOTAVAIL: src_ip is not an address of this host;
 *   -EMSGSIZE: the packets exceed the MTU of the port at dst_ip (both sizes and the fix named);
 *   -EINVAL: m or g NULL; g->sz below sizeof(struct mlxd_gen_opts), or larger with non-zero
 *            unknown bytes; payload_size not a multiple of 128 or above 8192; frame_size 0 or
 *            above 2^32; metadata or imm_layout not an enum value; m->pages 0 or m->page_size
 *            below round_up(frame_size, 128) + 128; fps negative, NaN or infinite; so: the
 *            -EINVAL cases of mlxd_capture_replay's o (sz, pacing, speed, dst_ip, src_ip);
 *   -ENOMEM; -errno of socket/bind/connect. */
int mlxd_gen_run(const struct mlxd_replay_map *m, const struct mlxd_gen_opts *g,
                 const struct mlxd_send_opts *so, struct mlxd_send_stats *st);

#ifdef __cplusplus
}
#endif
#endif
