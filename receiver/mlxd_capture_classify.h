/* mlxd_capture_classify.h: what a loaded RoCE v2 capture holds, so that a tool can tell sensor
 * frame traffic (what mlxd_capture_replay feeds a receiver) from any other RoCE v2 conversation.
 *
 * Holoscan Sensor Bridge traffic is UC RDMA WRITE only: WRITE Only packets into the receiver's
 * pages and a WRITE Only with Immediate per frame (fpga/nv_hsb_ip/dp_pkt/dp_pkt_top.sv; see
 * mlxd_capture.h).  Anything else -- SENDs, READs, RC traffic with its ACKs, atomics -- is another
 * conversation: its packets do not land in a frame receiver's memory.  One RC or UC SEND stream
 * can be replayed into a QP set up for it (mlxd_capture_replay_conversation); the rest cannot
 * (WRITEs and READs name the keys and addresses of the capture's peer).
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

/* What a conversation replay delivered. */
struct mlxd_conversation_report {
    uint32_t transport;         /* MLXD_QP_RC (2) or MLXD_QP_UC (3) */
    uint32_t captured_qpn;      /* the QPN the capture's requests were sent to */
    uint32_t local_qpn;         /* the QP they were replayed into */
    uint32_t messages;          /* SEND messages in the capture */
    uint64_t packets;           /* request packets sent */
    uint64_t arrived, bytes, with_imm;  /* receive completions: messages, bytes, with immediate */
    uint64_t errors;            /* error completions; first_error = the first one's status */
    uint32_t first_error;       /* ibv_wc_status value */
};

/* Replays a capture of one RC or UC SEND / SEND with immediate stream (with its ACKs, which are
 * not replayed) into a QP of device dev set up to receive it: the QP of the capture's transport
 * with one receive per message (as large as the largest message), rq_psn taken from the capture's
 * first PSN, connected to a sender address next to the device's (its address + 1 in the last
 * byte).  Each request packet is sent to the device's address and dst_port with its QPN
 * rewritten to the QP's and its IPv4/UDP addresses to the sender's and the device's (iCRC
 * recomputed), one message at a time: each message's completion is waited for (2 s at most,
 * then counted missing) before the next.  Fills *r with what arrived.  Returns 0, or:
 *   -EINVAL        an argument NULL;
 *   -EPROTONOSUPPORT the capture is not such a stream (the message says why: other opcodes,
 *                  SENDs in both directions, RC mixed with UC, no complete message, > 8 flows);
 *   -EFBIG         more than 4096 messages or more than 64 MiB of receive buffers;
 *   a driver error (mlxd_open ...), -errno of socket/bind/sendto.
 * The device is opened and closed by the call. */
int mlxd_capture_replay_conversation(const struct mlxd_capture *c, const struct mlxd_capture_kind *k,
                                     const char *dev, uint16_t dst_port, struct mlxd_conversation_report *r);

#ifdef __cplusplus
}
#endif
#endif
