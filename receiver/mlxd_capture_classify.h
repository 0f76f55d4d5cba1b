/* mlxd_capture_classify.h: what a loaded RoCE v2 capture holds, so that a tool can tell sensor
 * frame traffic (what mlxd_capture_replay feeds a receiver) from any other RoCE v2 conversation.
 *
 * Holoscan Sensor Bridge traffic is UC RDMA WRITE only: WRITE Only packets into the receiver's
 * pages and a WRITE Only with Immediate per frame (fpga/nv_hsb_ip/dp_pkt/dp_pkt_top.sv; see
 * mlxd_capture.h).  Anything else -- SENDs, READs, RC traffic with its ACKs, atomics -- is another
 * conversation: its packets do not land in a frame receiver's memory.
 *
 * Opcode names and transports: IB spec vol. 1 table 38 (BTH opcodes), mlxd_roce.h.
 * Errors: negative errno + mlxd_errmsg().  Thread rules: any thread; the capture is only read. */
#ifndef MLXD_CAPTURE_CLASSIFY_H
#define MLXD_CAPTURE_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlxd_capture.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLXD_CAPTURE_MAX_FLOWS 8

/* The packets to one destination QP from one address, in capture order. */
struct mlxd_capture_flow {
    uint32_t dest_qp;           /* BTH destination QPN (24 bits) */
    uint32_t src_ip, dst_ip;    /* host order */
    uint32_t transports;        /* bit (opcode >> 5): 1 RC, 2 UC, 4 RD, 8 UD, 16 CNP */
    uint32_t first_psn, last_psn;   /* PSN of the first and the last packet seen */
    uint64_t packets;
    uint32_t opcodes[256];      /* packets per full BTH opcode */
};

struct mlxd_capture_kind {
    bool     hsb;               /* every packet is a UC RDMA WRITE: mlxd_capture_replay applies */
    uint32_t transports;        /* union of the flows' */
    unsigned nflows;            /* flows[0..nflows) */
    uint64_t other_flows;       /* packets of flows past MLXD_CAPTURE_MAX_FLOWS */
    struct mlxd_capture_flow flows[MLXD_CAPTURE_MAX_FLOWS];
};

/* Fills *k from c.  Returns 0, or -EINVAL (c or k NULL). */
int mlxd_capture_classify(const struct mlxd_capture *c, struct mlxd_capture_kind *k);

/* One line (no newline) naming what k holds: transports, and per flow its QPN, addresses, opcodes
 * with counts and PSN range, e.g. "RoCE v2 RC: QP 0x000011 (127.0.0.2 -> 127.0.0.1) SEND Only x10,
 * PSN 0x000064..0x00006d; ...".  Truncated to len - 1 bytes.  Returns the length it needed, as
 * snprintf does (0 when buf is NULL or len 0 and k NULL). */
size_t mlxd_capture_describe(const struct mlxd_capture_kind *k, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
