/* mlxd_hsb.h: the Holoscan Sensor Bridge (HSB) frame format, as a receiver sees it.
 *
 * Pure functions (no device, no allocation, no system call): decode the 128-byte frame metadata
 * block, split the RDMA immediate into page and PSN, extend the 16-bit frame counter, and check
 * the payload pattern of NVIDIA's sensor-bridge emulator.  Thread-safe (no shared state).
 *
 * Sources of the facts (Holoscan Sensor Bridge source files):
 *   - metadata layout: RTL fpga/nv_hsb_ip/dp_pkt/dp_pkt_top.sv concatenation,
 *     src/hololink/core/hololink.cpp deserialize_metadata, emulator
 *     src/hololink/emulation/base_transmitter.hpp; all fields big-endian;
 *   - immediate: dp_pkt_top.sv and src/hololink/operators/roce_receiver/roce_receiver.cpp
 *     page_from_imm (imm = {psn[19:0], page[11:0]} for HSB IP >= 0x2603), and
 *     hololink_module/module/core/hsb_lite_2510_roce_receiver.hpp ({psn[23:0], page[7:0]} for
 *     the legacy 2510 IP);
 *   - payload pattern: fixtures/roce-pcaps/README.md (word i of frame f is (f << 24) | i, BE).
 */
#ifndef MLXD_HSB_H
#define MLXD_HSB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the metadata block the device writes after each frame (hololink::METADATA_SIZE). */
#define MLXD_HSB_METADATA_SIZE 128u
/* Bytes of the block that carry fields; the remaining 80 are reserved. */
#define MLXD_HSB_METADATA_USED 48u
/* Frames and pages are laid out in 128-byte units (hololink core::PAGE_SIZE). */
#define MLXD_HSB_ALIGN 128u
/* Most pages a device cycles through (12-bit page field of the immediate). */
#define MLXD_HSB_MAX_PAGES 4096u

/* Byte offsets in the metadata block (big-endian fields). */
enum {
    MLXD_HSB_MD_FLAGS         = 0,   /* u32 */
    MLXD_HSB_MD_PSN           = 4,   /* u32: {8'h0, psn[23:0]} PSN of the metadata packet */
    MLXD_HSB_MD_CRC           = 8,   /* u32: frame CRC-32 (0 from the emulator) */
    MLXD_HSB_MD_TIMESTAMP_S   = 12,  /* u64: PTP seconds at start of frame (48 bits used) */
    MLXD_HSB_MD_TIMESTAMP_NS  = 20,  /* u32 */
    MLXD_HSB_MD_BYTES_WRITTEN = 24,  /* u64: valid bytes of this frame */
    MLXD_HSB_MD_FRAME_NUMBER32= 32,  /* u32: the emulator's 32-bit counter; the RTL puts 16 zero
                                        bits here followed by the 16-bit counter at 34 */
    MLXD_HSB_MD_FRAME_NUMBER  = 34,  /* u16: per-sensor frame counter */
    MLXD_HSB_MD_METADATA_S    = 36,  /* u64: PTP seconds when the metadata packet was formed */
    MLXD_HSB_MD_METADATA_NS   = 44,  /* u32 */
};

/* Flag bits (RTL md_flags = {30'h0, bpw_only_flag, unsync_flag}). */
#define MLXD_HSB_FLAG_UNSYNC   0x1u  /* early TLAST: the frame ended before frame_size bytes */
#define MLXD_HSB_FLAG_BPW_ONLY 0x2u  /* terminated by bytes-per-window only */

/* The decoded block, host byte order. */
struct mlxd_hsb_metadata {
    uint32_t flags;
    uint32_t psn;            /* 24 bits from the device; compare with mlxd_hsb_psn_match() */
    uint32_t crc;
    uint64_t timestamp_s;
    uint32_t timestamp_ns;
    uint64_t bytes_written;
    uint16_t frame_number;   /* the 16-bit counter at offset 34 (what the FPGA sends) */
    uint32_t frame_number32; /* the 32-bit word at offset 32 (the emulator's full counter; the
                                FPGA's upper half is 0, so it equals frame_number there) */
    uint64_t metadata_s;
    uint32_t metadata_ns;
};

/* Decodes the first 48 bytes of a metadata block (block may be unaligned).  Returns 0, or
 * -EINVAL if block or out is NULL or len < MLXD_HSB_METADATA_USED (nothing written). */
int mlxd_hsb_metadata_decode(const void *block, size_t len, struct mlxd_hsb_metadata *out);

/* Writes a metadata block (the inverse, 128 bytes, reserved bytes zero; frame_number32 is written
 * at offset 32, so frame_number is ignored).  For the traffic generator and tests.  Returns 0 or
 * -EINVAL (NULL argument or len < MLXD_HSB_METADATA_SIZE). */
int mlxd_hsb_metadata_encode(const struct mlxd_hsb_metadata *md, void *block, size_t len);

/* How the device splits the 32-bit immediate (host order, i.e. after ntohl). */
enum mlxd_hsb_imm_layout {
    MLXD_HSB_IMM_12_20 = 0,      /* page = imm & 0xFFF, psn = (imm >> 12) & 0xFFFFF (IP >= 0x2603) */
    MLXD_HSB_IMM_LEGACY_8_24 = 1 /* page = imm & 0xFF,  psn = (imm >> 8) & 0xFFFFFF (HSB-Lite 2510) */
};

static inline uint32_t mlxd_hsb_imm_page(uint32_t imm, enum mlxd_hsb_imm_layout l)
{
    return l == MLXD_HSB_IMM_LEGACY_8_24 ? (imm & 0xFFu) : (imm & 0xFFFu);
}

static inline uint32_t mlxd_hsb_imm_psn(uint32_t imm, enum mlxd_hsb_imm_layout l)
{
    return l == MLXD_HSB_IMM_LEGACY_8_24 ? ((imm >> 8) & 0xFFFFFFu) : ((imm >> 12) & 0xFFFFFu);
}

/* The immediate a device sends for (page, psn): the inverse of the two functions above. */
static inline uint32_t mlxd_hsb_imm_make(uint32_t page, uint32_t psn, enum mlxd_hsb_imm_layout l)
{
    return l == MLXD_HSB_IMM_LEGACY_8_24 ? ((page & 0xFFu) | ((psn & 0xFFFFFFu) << 8))
                                         : ((page & 0xFFFu) | ((psn & 0xFFFFFu) << 12));
}

/* True when the metadata's PSN is the immediate's PSN: with the 12/20 layout only the low 20
 * bits are compared (the immediate carries 20), with the legacy layout all 24 (HSB's
 * RoceReceiver::same_psn(), roce_receiver.cpp and hsb_lite_2510_roce_receiver.hpp).  False
 * means the page's metadata belongs to another packet: overwritten. */
static inline bool mlxd_hsb_psn_match(uint32_t md_psn, uint32_t imm_psn, enum mlxd_hsb_imm_layout l)
{
    uint32_t mask = l == MLXD_HSB_IMM_LEGACY_8_24 ? 0xFFFFFFu : 0xFFFFFu;
    return (md_psn & mask) == (imm_psn & mask);
}

/* Extends a 16-bit counter to 64 bits across wraps (hololink ExtendedCounter, widened), in
 * serial-number arithmetic (RFC 1982): a step of (uint16_t)(new - previous) below 32768 moves
 * forward (a wrap from 0xFFFF to 0 adds 1, lost frames add more); a larger one is a step back by
 * 65536 minus it: an older frame's number (a stale or replayed block), which is reported as that
 * older value and leaves the state where it was, so the frames after it extend as before.  (The
 * old rule read every step back d as a forward jump of 65536 - d, and the one stale block moved
 * every later number up by about 65536.) */
struct mlxd_hsb_counter16 {
    uint64_t value;   /* the extended value of the newest number */
    uint16_t last;
    bool     started;
};

/* The extended value of v against c, without changing c. */
static inline uint64_t mlxd_hsb_counter16_peek(const struct mlxd_hsb_counter16 *c, uint16_t v)
{
    if (!c->started)
        return v;
    uint16_t step = (uint16_t)(v - c->last);
    if (step < 0x8000u)
        return c->value + step;
    uint64_t back = 0x10000u - step;
    return back <= c->value ? c->value - back : 0;
}

/* The extended value of v; c moves forward with it (a step back leaves c as it was). */
static inline uint64_t mlxd_hsb_counter16_update(struct mlxd_hsb_counter16 *c, uint16_t v)
{
    uint64_t x = mlxd_hsb_counter16_peek(c, v);
    if (!c->started || (uint16_t)(v - c->last) < 0x8000u) {
        c->started = true;
        c->value = x;
        c->last = v;
    }
    return x;
}

/* round_up(frame_size, 128): where the device puts the metadata (HSB dp_pkt_top.sv
 * roce_imm_vaddr; roce_receiver_op.cpp start_receiver). */
static inline uint64_t mlxd_hsb_metadata_offset(uint64_t frame_size)
{
    return (frame_size + MLXD_HSB_ALIGN - 1) & ~(uint64_t)(MLXD_HSB_ALIGN - 1);
}

/* The smallest page: round_up(frame_size, 128) + 128 (RoceReceiverOp's received_frame_size). */
static inline uint64_t mlxd_hsb_min_page_size(uint64_t frame_size)
{
    return mlxd_hsb_metadata_offset(frame_size) + MLXD_HSB_METADATA_SIZE;
}

/* The sensor-bridge emulator's test payload: big-endian 32-bit words, word i of frame f is
 * (f << 24) | i (fixtures/roce-pcaps/README.md).  Checks len bytes at data (a trailing partial
 * word is compared byte by byte).  Returns the byte offset of the first mismatch, or -1 if all
 * match.  frame is taken modulo 256 (the pattern's tag is 8 bits).
 * data must not be NULL and must hold len readable bytes: this function cannot report an error
 * (its result is an offset or -1) and does not check them.  Sets no message. */
long mlxd_hsb_payload_check(const void *data, size_t len, uint32_t frame);

/* Fills len bytes at data with that pattern (the generator's payload).  data must not be NULL
 * and must hold len writable bytes: this function returns nothing and does not check them. */
void mlxd_hsb_payload_fill(void *data, size_t len, uint32_t frame);

#ifdef __cplusplus
}
#endif
#endif
