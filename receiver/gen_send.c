/* gen_send.c: see gen_send.h. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "gen_send.h"
#include "udp_gso.h"
#define UDP_MAX_PAYLOAD 65507u   /* 65535 - IPv4 20 - UDP 8 */
#define GSO_MAX_SEGS 64u         /* the kernel's UDP_MAX_SEGMENTS before Linux 6.9 */

int gen_send_add(struct gen_send *s, const struct mlxd_roce_pkt *p, const uint8_t *payload,
                 size_t len, struct mlxd_send_stats *st)
{
    if (s->n == GEN_SEND_MAX)
        gen_send_flush(s, st);
    struct gen_send_pkt *k = &s->p[s->n];
    /* the headers are written where a whole packet would fit (mlxd_roce_build_hdrs checks that
     * the packet does), then kept: the payload is not copied */
    ssize_t hl = mlxd_roce_build_hdrs(s->scratch, s->scratch_cap, p, len);
    if (hl < 0)
        return (int)hl;
    memcpy(k->hdr, s->scratch, (size_t)hl);
    uint32_t c = mlxd_roce_icrc_parts(k->hdr, (size_t)hl, payload, len);
    uint32_t pad = (uint32_t)((4 - (len & 3)) & 3);
    memset(k->tail, 0, pad);
    k->tail[pad] = (uint8_t)c;
    k->tail[pad + 1] = (uint8_t)(c >> 8);
    k->tail[pad + 2] = (uint8_t)(c >> 16);
    k->tail[pad + 3] = (uint8_t)(c >> 24);
    k->hl = (uint32_t)hl;
    k->tl = pad + MLXD_ROCE_ICRC_LEN;
    k->len = (uint32_t)len;
    k->payload = payload;
    s->n++;
    return 0;
}

/* The UDP payload of packet k: BTH .. iCRC. */
static uint32_t udp_len(const struct gen_send_pkt *k)
{
    return k->hl - MLXD_ROCE_BTH_OFF + k->len + k->tl;
}

static unsigned pkt_iov(const struct gen_send_pkt *k, struct iovec *v)
{
    unsigned n = 0;
    v[n++] = (struct iovec){ (void *)(k->hdr + MLXD_ROCE_BTH_OFF), k->hl - MLXD_ROCE_BTH_OFF };
    if (k->len)
        v[n++] = (struct iovec){ (void *)k->payload, k->len };
    v[n++] = (struct iovec){ (void *)k->tail, k->tl };
    return n;
}

/* A full socket buffer (ENOBUFS, EAGAIN) is waited out for up to 100 x 50 us. */
static bool wait_retry(int e, unsigned *tries)
{
    if (e == EINTR)
        return true;
    if ((e == ENOBUFS || e == EAGAIN) && (*tries)++ < 100) {
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
        return true;
    }
    return false;
}

static void send_one(struct gen_send *s, const struct gen_send_pkt *k, struct mlxd_send_stats *st)
{
    struct iovec v[3];
    struct msghdr h = { .msg_iov = v, .msg_iovlen = pkt_iov(k, v) };
    size_t want = udp_len(k);
    unsigned tries = 0;
    for (;;) {
        ssize_t r = sendmsg(s->fd, &h, 0);
        if (r == (ssize_t)want) {
            st->packets++;
            st->bytes += want;
            return;
        }
        if (r < 0 && wait_retry(errno, &tries))
            continue;
        st->send_errors++;     /* ECONNREFUSED (nobody listens yet) and others: lost */
        return;
    }
}

void gen_send_flush(struct gen_send *s, struct mlxd_send_stats *st)
{
    struct mmsghdr mm[GEN_SEND_MAX];
    struct iovec iov[3 * GEN_SEND_MAX];
    union mlxd__udp_gso_ctl ctl[GEN_SEND_MAX];
    unsigned first[GEN_SEND_MAX + 1];      /* message m holds packets first[m] .. first[m+1]-1 */
    uint64_t bytes[GEN_SEND_MAX];
    unsigned nm = 0, nv = 0;
    for (unsigned i = 0; i < s->n;) {
        uint32_t seg = udp_len(&s->p[i]);
        uint64_t total = seg;
        unsigned j = i + 1;
        /* a run of one size; the last datagram of a message may be shorter (UDP_SEGMENT) */
        while (!s->no_gso && j < s->n && j - i < GSO_MAX_SEGS && udp_len(&s->p[j]) <= seg &&
               total + udp_len(&s->p[j]) <= UDP_MAX_PAYLOAD) {
            total += udp_len(&s->p[j]);
            if (udp_len(&s->p[j++]) < seg)
                break;
        }
        memset(&mm[nm], 0, sizeof mm[nm]);
        struct msghdr *h = &mm[nm].msg_hdr;
        h->msg_iov = &iov[nv];
        for (unsigned k = i; k < j; k++)
            nv += pkt_iov(&s->p[k], &iov[nv]);
        h->msg_iovlen = (size_t)(&iov[nv] - h->msg_iov);
        if (j - i > 1)
            mlxd__udp_gso_attach(h, &ctl[nm], (uint16_t)seg);
        first[nm] = i;
        bytes[nm] = total;
        nm++;
        i = j;
    }
    first[nm] = s->n;
    unsigned done = 0, tries = 0;
    while (done < nm) {
        int r = sendmmsg(s->fd, mm + done, nm - done, 0);
        if (r > 0) {
            for (unsigned m = done; m < done + (unsigned)r; m++) {
                st->packets += first[m + 1] - first[m];
                st->bytes += bytes[m];
            }
            done += (unsigned)r;
            tries = 0;
            continue;
        }
        int e = errno;
        if (r < 0 && wait_retry(e, &tries))
            continue;
        if (r < 0 && mm[done].msg_hdr.msg_controllen &&
            (e == EINVAL || e == EIO || e == ENOPROTOOPT)) {
            /* no segmentation offload on this path: this message's packets one by one, and
             * every later one too */
            s->no_gso = true;
            for (unsigned k = first[done]; k < first[done + 1]; k++)
                send_one(s, &s->p[k], st);
        } else {
            st->send_errors += first[done + 1] - first[done];   /* lost, as on a wire */
        }
        done++;
        tries = 0;
    }
    s->n = 0;
}
