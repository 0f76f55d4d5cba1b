/* wire_udp.c: the emulated wire: RoCE v2 packets as UDP datagrams on loopback, with egress
 * fault injection and the pcap tap.
 *
 * Each device binds one UDP socket to its address and port (emu_device_cfg.ipv4:udp_port).  A
 * packet is built with its IPv4 + UDP headers in front (the iCRC covers them, IB spec A17.8) and
 * the UDP payload (BTH .. iCRC) is what is sent; the kernel adds the same headers (IP ID 0 and DF
 * on an unconnected socket with IP_PMTUDISC_DO).  On receipt the headers are rebuilt from the
 * source address and our own (mlxd_roce_wrap_udp) and the packet is parsed and its iCRC
 * checked before anything else looks at it. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sock_diag.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "nic.h"
#include "udp_gso.h"

int wire_open(struct nic_dev *nd)
{
    const struct emu_device_cfg *cfg = &nd->dev->cfg;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    int one = 1, pmtu = IP_PMTUDISC_DO, sz = 8 << 20;
    /* large buffers (SO_*BUFFORCE needs CAP_NET_ADMIN; else capped at net.core.[rw]mem_max) */
    if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz))
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz))
        setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    int got = 0;
    socklen_t gl = sizeof got;
    nd->rcvbuf = getsockopt(s, SOL_SOCKET, SO_RCVBUF, &got, &gl) == 0 && got > 0 ? (unsigned)got : 212992;
    setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    if (!getenv("MLXD_EMU_NO_GRO")) setsockopt(s, SOL_UDP, UDP_GRO, &one, sizeof one);
    else nd->no_gso = true;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = cfg->ipv4,
                            .sin_port = htons(cfg->udp_port ? cfg->udp_port : 4791)};
    if (!a.sin_addr.s_addr) a.sin_addr.s_addr = htonl(0x7f000001 + cfg->index);
    /* the port is shared with other processes of this user when port_share.c can set it up */
    if (share_open(nd, &a) == 0 && nd->share)
        setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(s);
        share_close(nd);
        if (e == EADDRINUSE) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
            fprintf(stderr, "mlx5direct-emu: %s: UDP %s:%u is already in use (held by a program that does "
                    "not share it); give this program free addresses, e.g. "
                    "MLXD_EMU_DEVICES=mlx5_0:127.0.9.1,mlx5_1:127.0.9.2\n", cfg->name, ip, ntohs(a.sin_port));
        }
        return -e;
    }
    nd->sock = s;
    nd->self = a;
    return 0;
}

/* Leaving a shared port: the packets already queued on this socket would die with it, other
 * processes' among them (the kernel hashed them here).  Connecting the socket first takes it out
 * of the group's choice (reuseport_select_sock_by_hash skips connected sockets), so nothing new
 * arrives; what is queued is then handed to its owners.  Our own QPs are gone: theirs drop. */
static void share_leave(struct nic_dev *nd)
{
    struct sockaddr_in nowhere = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001),
                                  .sin_port = htons(9)};    /* discard: nothing sends from it */
    if (connect(nd->sock, (struct sockaddr *)&nowhere, sizeof nowhere) < 0) return;
    for (;;) {
        struct sockaddr_in from;
        union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
        struct iovec iov = {nd->rx[0], NIC_RX_BUF};
        struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov,
                           .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(nd->sock, &m, MSG_DONTWAIT);
        if (n < 0) break;
        if (m.msg_flags & MSG_TRUNC) { nd->st.rx_malformed++; continue; }
        uint32_t len = (uint32_t)n, gso = len;      /* UDP_GRO: several datagrams of gso bytes */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                int g;
                memcpy(&g, CMSG_DATA(c), sizeof g);
                if (g > 0 && (uint32_t)g < len) gso = (uint32_t)g;
            }
        for (uint32_t off = 0; off < len; off += gso)     /* not forwarded: counted, not lost silently */
            if (!share_forward(nd, nd->rx[0] + off, len - off < gso ? len - off : gso, &from))
                nd->st.rx_unknown_qp++;
    }
}

void wire_close(struct nic_dev *nd)
{
    if (nd->sock >= 0 && nd->share) share_leave(nd);
    if (nd->sock >= 0) close(nd->sock);
    nd->sock = -1;
    share_close(nd);
}

struct nic_txslot *wire_tx_slot(struct nic_dev *nd)
{
    return nd->ntx < NIC_TX_BATCH - 2 ? &nd->tx[nd->ntx] : NULL;  /* 2 spare: dup / reorder */
}

static uint64_t rng_next(struct nic_fault_state *f)
{
    uint64_t x = f->rng;          /* xorshift64* */
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    f->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

static bool chance(struct nic_fault_state *f, double rate)
{
    if (rate <= 0) return false;
    return (double)(rng_next(f) >> 11) * (1.0 / 9007199254740992.0) < rate;
}

static bool in_list(const uint64_t *l, unsigned n, uint64_t idx)
{
    for (unsigned i = 0; i < n; i++)
        if (l[i] == idx) return true;
    return false;
}

/* Appends the slot (already at nd->tx[nd->ntx]) to the batch, applying egress faults. */
void wire_tx_commit(struct nic_dev *nd, struct nic_txslot *s, uint32_t len,
                    const struct sockaddr_in *to)
{
    s->len = len;
    s->to = *to;
    if (!nd->dev->cfg.link_up) { nd->st.tx_dropped_link_down++; return; }
    struct nic_fault_state *f = &nd->fault;
    if (f->active) {
        uint64_t idx = f->idx++;
        const struct mlxd_emu_fault *c = &f->f;
        if (in_list(c->drop_idx, c->n_drop_idx, idx) || chance(f, c->drop_rate)) {
            nd->st.tx_dropped_fault++;
            return;
        }
        if (in_list(c->corrupt_idx, c->n_corrupt_idx, idx) || chance(f, c->corrupt_rate)) {
            /* flip one bit after the BTH (or in it): the iCRC no longer matches */
            uint32_t at = MLXD_ROCE_BTH_OFF + 5 + (uint32_t)(rng_next(f) % (len - MLXD_ROCE_BTH_OFF - 5 - 4));
            s->buf[at] ^= (uint8_t)(1u << (rng_next(f) & 7));
            nd->st.tx_corrupted_fault++;
        }
        bool dup = in_list(c->dup_idx, c->n_dup_idx, idx) || chance(f, c->dup_rate);
        bool reorder = in_list(c->reorder_idx, c->n_reorder_idx, idx) || chance(f, c->reorder_rate);
        if (reorder && !f->holding) {
            memcpy(f->held.buf, s->buf, len);
            f->held.len = len;
            f->held.to = *to;
            f->holding = true;
            nd->st.tx_reordered_fault++;
            return;
        }
        nd->ntx++;
        pcap_writer_packet(nd, s->buf, len);
        if (dup) {
            struct nic_txslot *d = &nd->tx[nd->ntx++];
            memcpy(d->buf, s->buf, len);
            d->len = len;
            d->to = *to;
            pcap_writer_packet(nd, d->buf, len);
            nd->st.tx_dup_fault++;
        }
        if (f->holding && !reorder) {
            struct nic_txslot *h = &nd->tx[nd->ntx++];
            memcpy(h->buf, f->held.buf, f->held.len);
            h->len = f->held.len;
            h->to = f->held.to;
            f->holding = false;
            pcap_writer_packet(nd, h->buf, h->len);
        }
        if (nd->ntx >= NIC_TX_BATCH - 2) wire_tx_flush(nd);
        return;
    }
    nd->ntx++;
    pcap_writer_packet(nd, s->buf, len);
    if (nd->ntx >= NIC_TX_BATCH - 2) wire_tx_flush(nd);
}

static bool same_dest(const struct nic_txslot *a, const struct nic_txslot *b)
{
    return a->to.sin_addr.s_addr == b->to.sin_addr.s_addr && a->to.sin_port == b->to.sin_port;
}

/* Sends the batch.  Consecutive packets to the same destination with the same length (the last
 * may be shorter) go out as one UDP GSO send (UDP_SEGMENT): the kernel keeps them as separate
 * datagrams on the wire but crosses its stack once; a receiver with UDP_GRO gets them in one
 * read.  Falls back to one datagram per packet if the kernel refuses GSO. */
void wire_tx_flush(struct nic_dev *nd)
{
    if (!nd->ntx) return;
    struct mmsghdr mm[NIC_TX_BATCH];
    struct iovec iov[NIC_TX_BATCH];
    union mlxd__udp_gso_ctl ctl[NIC_TX_BATCH];
    unsigned n = nd->ntx, nm = 0;
    for (unsigned i = 0; i < n; i++) {
        iov[i].iov_base = nd->tx[i].buf + MLXD_ROCE_BTH_OFF;
        iov[i].iov_len = nd->tx[i].len - MLXD_ROCE_BTH_OFF;
        nd->st.tx_pkts++;
        nd->st.tx_bytes += nd->tx[i].len;
    }
    for (unsigned i = 0; i < n;) {
        unsigned j = i + 1;
        size_t seg = iov[i].iov_len, total = seg;
        if (!nd->no_gso) {
            while (j < n && j - i < 64 && same_dest(&nd->tx[j], &nd->tx[i]) &&
                   iov[j].iov_len <= seg && total + iov[j].iov_len <= 65000) {
                total += iov[j].iov_len;
                j++;
                if (iov[j - 1].iov_len < seg) break;
            }
        }
        struct msghdr *h = &mm[nm].msg_hdr;
        memset(&mm[nm], 0, sizeof mm[nm]);
        h->msg_name = &nd->tx[i].to;
        h->msg_namelen = sizeof nd->tx[i].to;
        h->msg_iov = &iov[i];
        h->msg_iovlen = j - i;
        if (j - i > 1) mlxd__udp_gso_attach(h, &ctl[nm], (uint16_t)seg);
        nm++;
        i = j;
    }
    unsigned done = 0;
    int spins = 0;
    while (done < nm) {
        int r = sendmmsg(nd->sock, mm + done, nm - done, 0);
        if (r > 0) { done += (unsigned)r; continue; }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && spins++ < 1000) {
            struct timespec ts = {0, 10000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (r < 0 && mm[done].msg_hdr.msg_controllen && (errno == EINVAL || errno == EIO ||
                                                         errno == ENOPROTOOPT)) {
            /* no GSO here: send this group's datagrams one by one, and stop using GSO */
            nd->no_gso = true;
            struct msghdr one = mm[done].msg_hdr;
            one.msg_control = NULL;
            one.msg_controllen = 0;
            for (size_t k = 0; k < mm[done].msg_hdr.msg_iovlen; k++) {
                one.msg_iov = &mm[done].msg_hdr.msg_iov[k];
                one.msg_iovlen = 1;
                (void)sendmsg(nd->sock, &one, 0);
            }
            done++;
            continue;
        }
        /* unreachable peer (ECONNREFUSED from an earlier ICMP) or a full queue: the packets are
         * lost on the wire, as they would be on a real network */
        done++;
    }
    nd->ntx = 0;
}

/* b: buffer with the UDP payload at b + MLXD_ROCE_BTH_OFF.  forwarded: it came through our inbox
 * (port_share.c), so it is ours and is never forwarded again. */
static void rx_one(struct nic_dev *nd, uint8_t *b, uint32_t ulen, const struct sockaddr_in *from,
                   bool forwarded)
{
    if (!forwarded && share_forward(nd, b + MLXD_ROCE_BTH_OFF, ulen, from)) return;
    nd->st.rx_pkts++;
    nd->st.rx_bytes += ulen + MLXD_ROCE_BTH_OFF;
    mlxd_roce_wrap_udp(b, ntohl(from->sin_addr.s_addr), ntohs(from->sin_port),
                       ntohl(nd->self.sin_addr.s_addr), ntohs(nd->self.sin_port), ulen);
    pcap_writer_packet(nd, b, ulen + MLXD_ROCE_BTH_OFF);
    if (!nd->dev->cfg.link_up) { nd->st.rx_dropped_link_down++; return; }
    struct mlxd_roce_pkt p;
    int r = mlxd_roce_parse(b, ulen + MLXD_ROCE_BTH_OFF, 0, true, &p);
    if (r == -EBADMSG) { nd->st.rx_bad_icrc++; return; }
    if (r) { nd->st.rx_malformed++; return; }
    nic_resp_packet(nd, &p);
}

/* Receives up to a few batches from sock and dispatches every packet.  With UDP_GRO a read may hold
 * several datagrams of gso_size bytes each (the last shorter); they are taken apart in order
 * (the 28 bytes of rebuilt headers in front of datagram k overwrite the tail of datagram k-1,
 * which has been processed by then). */
static int rx_socket(struct nic_dev *nd, int sock, bool inbox)
{
    struct mmsghdr mm[NIC_RX_BATCH];
    struct iovec iov[NIC_RX_BATCH];
    struct sockaddr_in from[NIC_RX_BATCH];
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl[NIC_RX_BATCH];
    int total = 0;
    for (int rounds = 0; rounds < 4; rounds++) {
        for (unsigned i = 0; i < NIC_RX_BATCH; i++) {
            iov[i].iov_base = nd->rx[i] + MLXD_ROCE_BTH_OFF;
            iov[i].iov_len = NIC_RX_BUF - MLXD_ROCE_BTH_OFF;
            memset(&mm[i], 0, sizeof mm[i]);
            mm[i].msg_hdr.msg_name = &from[i];
            mm[i].msg_hdr.msg_namelen = sizeof from[i];
            mm[i].msg_hdr.msg_iov = &iov[i];
            mm[i].msg_hdr.msg_iovlen = 1;
            mm[i].msg_hdr.msg_control = ctl[i].buf;
            mm[i].msg_hdr.msg_controllen = sizeof ctl[i].buf;
        }
        int n = recvmmsg(sock, mm, NIC_RX_BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) break;
        for (int i = 0; i < n; i++) {
            uint32_t len = mm[i].msg_len, gso = 0;
            if (mm[i].msg_hdr.msg_flags & MSG_TRUNC) { nd->st.rx_malformed++; continue; }
            if (inbox) {
                /* a packet another process received for one of our QPs: the header in front
                 * names its real source; the packet moves up over it (to BTH_OFF) */
                uint8_t *p = nd->rx[i] + MLXD_ROCE_BTH_OFF;
                int hl = share_unwrap(nd, p, len, &from[i]);
                if (hl < 0) { nd->st.rx_malformed++; continue; }
                memmove(p, p + hl, len - (uint32_t)hl);
                nd->st.rx_via_peer++;
                rx_one(nd, nd->rx[i], len - (uint32_t)hl, &from[i], true);
                total++;
                continue;
            }
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&mm[i].msg_hdr); c;
                 c = CMSG_NXTHDR(&mm[i].msg_hdr, c))
                if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                    int g;
                    memcpy(&g, CMSG_DATA(c), sizeof g);
                    if (g > 0) gso = (uint32_t)g;
                }
            if (!gso || gso >= len) { rx_one(nd, nd->rx[i], len, &from[i], false); total++; continue; }
            for (uint32_t off = 0; off < len; off += gso) {
                uint32_t l = len - off < gso ? len - off : gso;
                rx_one(nd, nd->rx[i] + off, l, &from[i], false);
                total++;
            }
        }
        if (n < NIC_RX_BATCH) break;
    }
    return total;
}

/* Datagrams the host kernel dropped before the emulated port could see them, nearly always
 * because the socket's receive buffer was full while the engine was not scheduled (a loaded
 * machine): the socket's drop counter (SO_MEMINFO's SK_MEMINFO_DROPS, the "drops" column of
 * /proc/net/udp), for this device's socket and its inbox.  To the emulated port these are packets
 * lost on the wire. */
uint64_t wire_rx_socket_drops(const struct nic_dev *nd)
{
    uint64_t n = 0;
    int socks[2] = { nd->sock, nd->share ? nd->share->inbox : -1 };
    for (int i = 0; i < 2; i++) {
        uint32_t mi[SK_MEMINFO_VARS];
        socklen_t l = sizeof mi;
        if (socks[i] >= 0 && getsockopt(socks[i], SOL_SOCKET, SO_MEMINFO, mi, &l) == 0 &&
            l > SK_MEMINFO_DROPS * sizeof mi[0])
            n += mi[SK_MEMINFO_DROPS];
    }
    return n;
}

int wire_rx(struct nic_dev *nd)
{
    int n = rx_socket(nd, nd->sock, false);
    if (nd->share) n += rx_socket(nd, nd->share->inbox, true);
    return n;
}

/* "drop=0.1,dup_idx=3:7,seed=5" -> fault config.  Unknown keys are ignored. */
static void parse_idx(const char *v, uint64_t *l, unsigned *n)
{
    *n = 0;
    while (*v && *n < MLXD_EMU_FAULT_MAX_IDX) {
        char *end;
        unsigned long long x = strtoull(v, &end, 0);
        if (end == v) break;
        l[(*n)++] = x;
        v = *end == ':' ? end + 1 : end;
        if (*end != ':') break;
    }
}

void wire_fault_parse_env(struct nic_dev *nd)
{
    char name[32];
    snprintf(name, sizeof name, "MLXD_EMU_FAULT_%u", nd->dev->cfg.index);
    const char *e = getenv(name);
    if (!e || !*e) e = getenv("MLXD_EMU_FAULT");
    if (!e || !*e) return;
    struct mlxd_emu_fault f;
    memset(&f, 0, sizeof f);
    f.sz = sizeof f;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", e);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) continue;
        *eq = 0;
        const char *k = t, *v = eq + 1;
        if (!strcmp(k, "drop")) f.drop_rate = atof(v);
        else if (!strcmp(k, "dup")) f.dup_rate = atof(v);
        else if (!strcmp(k, "reorder")) f.reorder_rate = atof(v);
        else if (!strcmp(k, "corrupt")) f.corrupt_rate = atof(v);
        else if (!strcmp(k, "drop_idx")) parse_idx(v, f.drop_idx, &f.n_drop_idx);
        else if (!strcmp(k, "dup_idx")) parse_idx(v, f.dup_idx, &f.n_dup_idx);
        else if (!strcmp(k, "reorder_idx")) parse_idx(v, f.reorder_idx, &f.n_reorder_idx);
        else if (!strcmp(k, "corrupt_idx")) parse_idx(v, f.corrupt_idx, &f.n_corrupt_idx);
        else if (!strcmp(k, "seed")) f.seed = strtoull(v, NULL, 0);
    }
    nd->fault.f = f;
    nd->fault.active = true;
    nd->fault.rng = f.seed ? f.seed : 0x9e3779b97f4a7c15ull;
}
