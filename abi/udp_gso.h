/* udp_gso.h (private): the control message of a UDP generic segmentation offload send, shared by
 * the generator's sender (receiver/gen_send.c) and the emulated wire (emu/nic/wire_udp.c).
 * With UDP_SEGMENT (Linux 4.18, include/uapi/linux/udp.h) one sendmsg of several datagrams'
 * worth of payload leaves as datagrams of seg bytes each (the last may be shorter). */
#ifndef MLXD_UDP_GSO_H
#define MLXD_UDP_GSO_H
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

union mlxd__udp_gso_ctl {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    struct cmsghdr align;
};

/* Attaches the UDP_SEGMENT message (seg bytes per datagram), held in *ctl, to h. */
static inline void mlxd__udp_gso_attach(struct msghdr *h, union mlxd__udp_gso_ctl *ctl, uint16_t seg)
{
    memset(ctl->buf, 0, sizeof ctl->buf);      /* no stale padding to the kernel */
    h->msg_control = ctl->buf;
    h->msg_controllen = sizeof ctl->buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(h);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    memcpy(CMSG_DATA(c), &seg, sizeof seg);
}
#endif
