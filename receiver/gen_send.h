/* gen_send.h: the generator's sender (mlxd_gen_run, capture.c): a frame's RoCE v2 packets
 * handed to the kernel a frame at a time, each packet still its own UDP datagram with its own
 * BTH and iCRC.
 *
 * Why: one send(2) per 4 KiB packet cost the generator more than building the packets (issue
 * 18, docs/performance.md).  Packets are queued with gen_send_add and sent by gen_send_flush
 * with one sendmmsg(2): consecutive packets of one UDP payload size (the last of a run may be
 * shorter) go as one message with UDP generic segmentation offload (UDP_SEGMENT, Linux 4.18:
 * the kernel cuts the message into datagrams of that size, on the wire exactly the datagrams
 * that one send each would have made).  Each packet is gathered from three pieces (an iovec
 * each): its headers (BTH and extension headers, built here), its payload where the caller
 * keeps it (not copied), and the pad + iCRC (mlxd_roce_icrc_parts).  Where the kernel refuses
 * segmentation offload (EINVAL, EIO, ENOPROTOOPT: an old kernel, a route with a smaller MTU or
 * without checksum offload) the packets go one sendmsg each from then on.
 *
 * Payload pointers given to gen_send_add must stay valid and unchanged until the next
 * gen_send_flush returns.  One thread. */
#ifndef MLXD_GEN_SEND_H
#define MLXD_GEN_SEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlxd_capture.h"
#include "mlxd_roce.h"

#define GEN_SEND_MAX 64     /* packets queued before gen_send_add flushes by itself */

struct gen_send_pkt {
    uint8_t hdr[MLXD_ROCE_MAX_HDR_LEN];  /* IPv4 + UDP (for the iCRC only) + BTH + extensions */
    uint8_t tail[8];                     /* pad (0..3 zero bytes) + iCRC (little-endian) */
    uint32_t hl, tl;                     /* bytes of hdr (IPv4 included) and of tail */
    uint32_t len;                        /* payload bytes */
    const uint8_t *payload;
};

struct gen_send {
    int fd;                  /* a connected UDP socket */
    uint8_t *scratch;        /* room for the largest packet (the headers are built there) */
    size_t scratch_cap;
    bool no_gso;             /* the kernel refused UDP_SEGMENT: one datagram per sendmsg */
    unsigned n;
    struct gen_send_pkt p[GEN_SEND_MAX];
};

/* Builds the packet p with len bytes of payload at payload (see above) and queues it; flushes
 * first when the queue is full.  Returns 0 or the negative errno of mlxd_roce_build_hdrs (its
 * message set). */
int gen_send_add(struct gen_send *s, const struct mlxd_roce_pkt *p, const uint8_t *payload,
                 size_t len, struct mlxd_send_stats *st);

/* Sends the queued packets in order.  Each one sent counts in st->packets and st->bytes (UDP
 * payload bytes); each one the kernel would not take (after retries of ENOBUFS / EAGAIN for
 * about 5 ms, or ECONNREFUSED: nobody listens) counts in st->send_errors: lost, as on a wire. */
void gen_send_flush(struct gen_send *s, struct mlxd_send_stats *st);

#endif
