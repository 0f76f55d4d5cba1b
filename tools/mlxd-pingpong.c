/* mlxd-pingpong: a ping-pong between two processes over RC or UC queue pairs, in the spirit of
 * rdma-core's ibv_rc_pingpong, on the direct driver (no libibverbs).
 *
 *   server:  mlxd-pingpong [-d mlx5_1] [options]
 *   client:  mlxd-pingpong [-d mlx5_0] [options] <server-host>
 *
 * The two exchange their endpoints (QPN, PSN, GID) and receive buffers (address, rkey) over TCP,
 * connect, and then bounce one message back and forth `iters` times: the client sends, the
 * server answers when the message has arrived; each side checks every byte it receives (the
 * pattern depends on the iteration and the direction).  The client prints the one-way latency
 * (half the round trip: min, median, p99, max) and the bandwidth.
 *
 * --emulate: when this machine has no RDMA device (and LD_PRELOAD does not already name the
 * emulator), re-executes itself with LD_PRELOAD=<exe dir>/../lib/libmlx5direct-emu.so, the
 * emulated ConnectX NICs (mlx5_0 on 127.0.0.1, mlx5_1 on 127.0.0.2 by default; see
 * docs/emulator.md).  The same can be done by hand: LD_PRELOAD=.../libmlx5direct-emu.so mlxd-pingpong ...
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_error.h"
#include "mlxd_names.h"    /* before mlxd_mlx5.h: its MLXD_WC_SUCCESS macro would break the enum here */
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"

struct cfg {
    const char *dev, *server;
    int port, gid_idx, emulate, verbose;
    uint32_t size, iters, type;
    bool use_send;
};

static void usage(const char *argv0)
{
    printf("Usage: %s [options] [server-host]   (no host: run as the server)\n"
           "  -d, --dev NAME        RDMA device (default: the first mlx5 device)\n"
           "  -p, --port N          TCP port for the endpoint exchange (default 18515)\n"
           "  -c, --transport rc|uc queue pair type (default rc)\n"
           "  -o, --op write_imm|send  the operation (default write_imm)\n"
           "  -s, --size BYTES      message size (default 4096)\n"
           "  -n, --iters N         round trips (default 1000)\n"
           "  -g, --gid-idx N       local GID index (default: the RoCE v2 GID routing to the peer,\n"
           "                        else the first IPv4 RoCE v2 GID)\n"
           "  -e, --emulate         use the emulated NICs when this machine has none\n"
           "  -h, --help\n", argv0);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A failing library call (rc: its negative errno): its per-thread message, else the errno text.
 * Only right after the call, so the message is the one that call set. */
static void die(const char *what, int rc)
{
    const char *m = mlxd_errmsg();
    fprintf(stderr, "mlxd-pingpong: %s: %s\n", what, rc < 0 && m && *m ? m : strerror(rc < 0 ? -rc : rc));
    exit(1);
}

/* A system error (TCP, exec, the peer's protocol): err is a negative or positive errno value;
 * never the library's message, which may be left over from an earlier, handled call. */
static void die_sys(const char *what, int err)
{
    fprintf(stderr, "mlxd-pingpong: %s: %s\n", what, strerror(err < 0 ? -err : err));
    exit(1);
}

/* Parses option -opt's value as an integer in [min, max]; anything else exits 2 naming both. */
static long num_arg(const char *argv0, int opt, const char *val, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 0);
    if (errno || end == val || *end || v < min || v > max) {
        fprintf(stderr, "mlxd-pingpong: -%c '%s': expected an integer in %ld..%ld\n", opt, val, min, max);
        usage(argv0);
        exit(2);
    }
    return v;
}

/* ---- --emulate: re-exec with the emulator preloaded ---- */
#define REEXEC_ENV "MLXD_PINGPONG_EMULATED"

/* True when nothing is bound to UDP 4791 on addr (an emulated port of another process). */
static bool udp_4791_free(const char *addr)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4791) };
    inet_pton(AF_INET, addr, &a.sin_addr);
    bool ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

static void maybe_emulate(char **argv)
{
    const char *pre = getenv("LD_PRELOAD");
    if ((pre && strstr(pre, "libmlx5direct-emu")) || getenv(REEXEC_ENV)) return;
    char **names; size_t n = 0;
    if (mlxd_names(&names, &n) == 0 && n > 0) {
        mlxd_names_free(names, n);
        if (access("/dev/infiniband", F_OK) == 0) return;     /* a real device: use it */
    }
    char exe[PATH_MAX], lib[PATH_MAX + 64];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k < 0) die_sys("--emulate: /proc/self/exe", errno);
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    *slash = 0;
    snprintf(lib, sizeof lib, "%s/../lib/libmlx5direct-emu.so", exe);
    *slash = '/';
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "mlxd-pingpong: --emulate: the emulator %s: %s (run make)\n", lib, strerror(errno));
        exit(1);
    }
    /* a sanitizer runtime must stay first in the preload list */
    const char *san = "";
    static const char *const rt[] = { "__asan_init", "__tsan_init" };
    for (unsigned i = 0; i < 2 && !*san; i++) {
        Dl_info di;
        void *sym = dlsym(RTLD_DEFAULT, rt[i]);
        if (sym && dladdr(sym, &di) && di.dli_fname && strstr(di.dli_fname, ".so") && !(pre && strstr(pre, di.dli_fname)))
            san = di.dli_fname;
    }
    size_t len = strlen(san) + strlen(lib) + (pre ? strlen(pre) : 0) + 3;
    char *val = malloc(len);
    snprintf(val, len, "%s%s%s%s%s", san, *san ? ":" : "", lib, pre && *pre ? ":" : "", pre ? pre : "");
    setenv("LD_PRELOAD", val, 1);
    setenv(REEXEC_ENV, "1", 1);
    unsetenv("SYSFS_PATH");
    /* default devices mlx5_0 on 127.0.0.1, mlx5_1 on 127.0.0.2 -- unless another emulated port
     * already holds UDP 4791 there: then the first free pair 127.0.<n>.1 / 127.0.<n>.2 */
    if (!getenv("MLXD_EMU_DEVICES") && !getenv("MLXD_EMU_CONFIG")) {
        for (unsigned m = 0; m < 250; m++) {
            char a1[32], a2[32], devs[96];
            snprintf(a1, sizeof a1, "127.0.%u.1", m);
            snprintf(a2, sizeof a2, "127.0.%u.2", m);
            if (!udp_4791_free(a1) || !udp_4791_free(a2)) continue;
            if (m) {
                snprintf(devs, sizeof devs, "mlx5_0:%s,mlx5_1:%s", a1, a2);
                setenv("MLXD_EMU_DEVICES", devs, 1);
            }
            break;
        }
    }
    execv(exe, argv);
    die_sys("--emulate: execv", errno);
}

/* After the re-exec: a sanitizer build runs the emulator's constructor before the environment
 * is visible, so apply MLXD_EMU_DEVICES again and re-export its sysfs tree (emu/mlxd_emu.h,
 * found with dlsym: this program does not link the emulator). */
static void emulated_setup(void)
{
    if (!getenv(REEXEC_ENV)) return;
    int (*configure)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "mlxd_emu_configure");
    const char *(*sysfs)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mlxd_emu_sysfs_path");
    const char *spec = getenv("MLXD_EMU_DEVICES");
    if (configure && spec && *spec && !getenv("MLXD_EMU_CONFIG")) {
        int rc = configure(spec);
        if (rc < 0) fprintf(stderr, "mlxd-pingpong: MLXD_EMU_DEVICES=%s: %s\n", spec, strerror(-rc));
    }
    const char *root = sysfs ? sysfs() : NULL;
    if (root && *root) setenv("SYSFS_PATH", root, 1);
}

/* ---- TCP exchange ---- */
struct wire {              /* sent as text: robust across hosts */
    uint32_t qpn, psn;
    uint8_t gid[16];
    uint64_t addr;
    uint32_t rkey;
};

static int tcp_connect(const char *host, int port)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res, *r;
    int e = getaddrinfo(host, ps, &hints, &res);
    if (e) { fprintf(stderr, "mlxd-pingpong: %s: %s\n", host, gai_strerror(e)); exit(1); }
    int s = -1;
    for (int attempt = 0; attempt < 100 && s < 0; attempt++) {
        for (r = res; r; r = r->ai_next) {
            s = socket(r->ai_family, r->ai_socktype | SOCK_CLOEXEC, 0);
            if (s >= 0 && connect(s, r->ai_addr, r->ai_addrlen) == 0) break;
            if (s >= 0) close(s);
            s = -1;
        }
        if (s < 0) usleep(100000);     /* the server may not be listening yet */
    }
    freeaddrinfo(res);
    if (s < 0) die_sys("connect to the server", errno);
    return s;
}

static int tcp_accept(int port)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0) die_sys("listen", errno);
    int s = accept(l, NULL, NULL);
    if (s < 0) die_sys("accept", errno);
    close(l);
    return s;
}

static void send_all(int s, const void *p, size_t n)
{
    while (n) { ssize_t k = write(s, p, n); if (k <= 0) die_sys("TCP write", k < 0 ? errno : EPIPE); p = (const char *)p + k; n -= (size_t)k; }
}
static void recv_all(int s, void *p, size_t n)
{
    while (n) { ssize_t k = read(s, p, n); if (k <= 0) die_sys("TCP read (peer gone?)", k < 0 ? errno : ECONNRESET); p = (char *)p + k; n -= (size_t)k; }
}

static void exchange(int s, const struct wire *mine, struct wire *peer)
{
    char line[160], in[160];
    int n = snprintf(line, sizeof line, "%06x %06x ", mine->qpn, mine->psn);
    for (int i = 0; i < 16; i++) n += snprintf(line + n, sizeof line - (size_t)n, "%02x", mine->gid[i]);
    n += snprintf(line + n, sizeof line - (size_t)n, " %016llx %08x\n", (unsigned long long)mine->addr, mine->rkey);
    memset(line + n, ' ', sizeof line - (size_t)n - 1);
    line[sizeof line - 1] = '\n';
    send_all(s, line, sizeof line);
    recv_all(s, in, sizeof in);
    in[sizeof in - 1] = '\0';   /* the peer's line is not ours to trust: terminate it */
    unsigned long long addr;
    char gid[33];
    if (sscanf(in, "%x %x %32s %llx %x", &peer->qpn, &peer->psn, gid, &addr, &peer->rkey) != 5 ||
        strlen(gid) != 32)
        die_sys("malformed endpoint from the peer", EPROTO);
    for (int i = 0; i < 16; i++) { unsigned b; sscanf(gid + 2 * i, "%2x", &b); peer->gid[i] = (uint8_t)b; }
    peer->addr = addr;
}

/* ---- data ---- */
static inline uint8_t pat(uint32_t iter, uint32_t j, int dir) { return (uint8_t)(iter * 131u + j * 7u + (unsigned)dir * 29u + 1u); }
static void fill(uint8_t *b, uint32_t n, uint32_t iter, int dir) { for (uint32_t j = 0; j < n; j++) b[j] = pat(iter, j, dir); }
static int verify(const uint8_t *b, uint32_t n, uint32_t iter, int dir)
{
    for (uint32_t j = 0; j < n; j++)
        if (b[j] != pat(iter, j, dir)) {
            fprintf(stderr, "mlxd-pingpong: iteration %u: byte %u is 0x%02x, expected 0x%02x\n", iter, j, b[j], pat(iter, j, dir));
            return -1;
        }
    return 0;
}

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

#define RECV_BATCH 32

/* On the emulator the "NIC" is a thread of this process competing for the same CPUs: an idle
 * poll gives it the CPU.  On a real NIC the loop spins. */
static bool emulated(void)
{
    const char *p = getenv("LD_PRELOAD");
    return getenv(REEXEC_ENV) || (p && strstr(p, "libmlx5direct-emu"));
}

int main(int argc, char **argv)
{
    struct cfg c = { .port = 18515, .gid_idx = -1, .size = 4096, .iters = 1000, .type = MLXD_QP_RC };
    static const struct option lo[] = {
        { "dev", 1, 0, 'd' }, { "port", 1, 0, 'p' }, { "transport", 1, 0, 'c' }, { "op", 1, 0, 'o' },
        { "size", 1, 0, 's' }, { "iters", 1, 0, 'n' }, { "gid-idx", 1, 0, 'g' }, { "emulate", 0, 0, 'e' },
        { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
    int o;
    while ((o = getopt_long(argc, argv, "d:p:c:o:s:n:g:eh", lo, NULL)) != -1) {
        switch (o) {
        case 'd': c.dev = optarg; break;
        case 'p': c.port = (int)num_arg(argv[0], o, optarg, 1, 65535); break;
        case 'c': if (!strcmp(optarg, "rc")) c.type = MLXD_QP_RC; else if (!strcmp(optarg, "uc")) c.type = MLXD_QP_UC;
                  else { fprintf(stderr, "mlxd-pingpong: -c '%s': expected rc or uc\n", optarg); usage(argv[0]); return 2; } break;
        case 'o': if (!strcmp(optarg, "send")) c.use_send = true; else if (!strcmp(optarg, "write_imm")) c.use_send = false;
                  else { fprintf(stderr, "mlxd-pingpong: -o '%s': expected write_imm or send\n", optarg); usage(argv[0]); return 2; } break;
        case 's': c.size = (uint32_t)num_arg(argv[0], o, optarg, 1, 0x7fffffffL); break;
        case 'n': c.iters = (uint32_t)num_arg(argv[0], o, optarg, 1, 100000000L); break;
        case 'g': c.gid_idx = (int)num_arg(argv[0], o, optarg, 0, 0xffff); break;
        case 'e': c.emulate = 1; break;
        case 'h': usage(argv[0]); return 0;
        default: usage(argv[0]); return 2;
        }
    }
    if (optind < argc) c.server = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "mlxd-pingpong: unexpected argument '%s' (one server host at most)\n", argv[optind]);
        usage(argv[0]);
        return 2;
    }
    if (!c.size || !c.iters || c.port <= 0 || c.port > 65535) { usage(argv[0]); return 2; }
    if (c.emulate) maybe_emulate(argv);
    emulated_setup();

    char **names = NULL; size_t nn = 0;
    int rc = mlxd_names(&names, &nn);
    if (rc) die("listing RDMA devices", rc);
    if (!c.dev) {
        if (!nn) { fprintf(stderr, "mlxd-pingpong: no mlx5 RDMA device (try --emulate)\n"); return 1; }
        static char devbuf[64];
        snprintf(devbuf, sizeof devbuf, "%s", names[c.server ? 0 : (nn > 1 ? 1 : 0)]);
        c.dev = devbuf;
    }
    mlxd_names_free(names, nn);

    /* the device first: a bad -d fails before any connection is made */
    struct mlxd_nic *nic;
    if ((rc = mlxd_open(c.dev, NULL, &nic))) die(c.dev, rc);
    if (c.size > mlxd_max_message(nic)) { fprintf(stderr, "mlxd-pingpong: size %u exceeds the port's maximum message %u\n", c.size, mlxd_max_message(nic)); return 1; }

    int s = c.server ? tcp_connect(c.server, c.port) : tcp_accept(c.port);
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in peer_addr;
    socklen_t pl = sizeof peer_addr;
    int gid_idx = c.gid_idx;
    if (gid_idx < 0 && getpeername(s, (struct sockaddr *)&peer_addr, &pl) == 0) {
        int g = mlxd_gid_for_peer(nic, (struct sockaddr *)&peer_addr, pl, NULL);
        if (g >= 0) gid_idx = g;
        else mlxd_err_clear();        /* handled: the default GID is used */
    }
    uint8_t *sbuf = aligned_alloc(4096, (c.size + 4095) & ~4095u);
    uint8_t *rbuf = aligned_alloc(4096, (c.size + 4095) & ~4095u);
    memset(rbuf, 0, c.size);
    struct mlxd_region *sreg, *rreg;
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE };
    if ((rc = mlxd_region_register(nic, sbuf, c.size, &ro, &sreg))) die("register the send buffer", rc);
    ro.access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE;
    if ((rc = mlxd_region_register(nic, rbuf, c.size, &ro, &rreg))) die("register the receive buffer", rc);
    struct mlxd_cq *cq;
    if ((rc = mlxd_cq_create(nic, 256, NULL, &cq))) die("create the CQ", rc);
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = c.type, .send_depth = 64, .recv_depth = 128,
                               .max_inline = 0, .has_gid_index = gid_idx >= 0, .gid_index = (uint32_t)(gid_idx < 0 ? 0 : gid_idx) };
    struct mlxd_qp *qp;
    if ((rc = mlxd_qp_create(cq, &qo, &qp))) die("create the QP", rc);
    struct mlxd_endpoint ep;
    mlxd_qp_endpoint(qp, &ep);
    struct mlxd_remote rr = mlxd_region_remote(rreg);
    struct wire mine = { .qpn = ep.qpn, .psn = ep.psn, .addr = rr.addr, .rkey = rr.rkey }, peer;
    memcpy(mine.gid, ep.gid, 16);
    exchange(s, &mine, &peer);
    struct mlxd_endpoint pep = { .qpn = peer.qpn, .psn = peer.psn };
    memcpy(pep.gid, peer.gid, 16);

    /* receives first, then connect, then tell the peer we are ready */
    struct mlxd_local rl = mlxd_region_local(rreg);
    struct mlxd_recv rv[RECV_BATCH];
    for (int i = 0; i < RECV_BATCH; i++) rv[i] = (struct mlxd_recv){ .wr_id = 0x1000u + (unsigned)i, .num_local = c.use_send ? 1 : 0, .local = &rl };
    for (int k = 0; k < 4; k++) if ((rc = mlxd_qp_receive(qp, rv, RECV_BATCH)) < 0) die("post receives", rc);
    int posted = 4 * RECV_BATCH;
    struct mlxd_connect_opts co = { .sz = sizeof co, .peer_access = MLXD_ACCESS_REMOTE_WRITE };
    if ((rc = mlxd_qp_connect(qp, &pep, &co))) die("connect", rc);
    char b = 'R';
    send_all(s, &b, 1);
    recv_all(s, &b, 1);

    if (!c.server) printf("mlxd-pingpong server: %s QP 0x%06x %s %s, %u bytes x %u\n", c.dev, ep.qpn,
                          c.type == MLXD_QP_RC ? "RC" : "UC", c.use_send ? "SEND" : "WRITE_IMM", c.size, c.iters);
    int dir_out = c.server ? 0 : 1, dir_in = 1 - dir_out;
    struct mlxd_local sl = mlxd_region_local(sreg);
    double *rtt = calloc(c.iters, sizeof *rtt);
    double t_start = now_us();
    struct mlxd_completion wc[16];
    uint32_t sends_outstanding = 0;
    int failed = 0;
    bool yield = emulated();
    for (uint32_t it = 0; it < c.iters && !failed; it++) {
        double t0 = now_us();
        for (int phase = 0; phase < 2; phase++) {
            bool sending = (phase == 0) == (c.server != NULL);   /* client sends first */
            if (sending) {
                fill(sbuf, c.size, it, dir_out);
                struct mlxd_entry e = { .wr_id = it, .op = c.use_send ? MLXD_OP_SEND : MLXD_OP_WRITE_IMM,
                                        .flags = MLXD_SIGNALED, .imm = it, .num_local = 1, .local = sl,
                                        .remote = { peer.addr, 0, peer.rkey, 0 } };
                while ((rc = mlxd_qp_post(qp, &e)) == -EAGAIN) (void)mlxd_cq_poll(cq, wc, 16);
                if (rc) die("post", rc);
                mlxd_qp_ring(qp);
                sends_outstanding++;
                continue;
            }
            /* wait for the peer's message (our send's completion may come first or later) */
            bool got = false;
            double deadline = now_us() + 10e6;
            while (!got) {
                int n = mlxd_cq_poll(cq, wc, 16);
                if (n < 0) die("poll", n);
                if (n == 0 && yield) sched_yield();
                for (int i = 0; i < n; i++) {
                    if (wc[i].status) {
                        fprintf(stderr, "mlxd-pingpong: iteration %u: completion error %s (%u), syndrome %s (0x%02x), vendor syndrome 0x%02x, CQE opcode %s\n",
                                it, mlxd_wc_status_name((int)wc[i].status), wc[i].status,
                                mlxd_syndrome_name(wc[i].syndrome), wc[i].syndrome, wc[i].vendor_syndrome,
                                mlxd_cqe_opcode_name(wc[i].cqe_opcode));
                        failed = 1;
                        got = true;
                        break;
                    }
                    if (wc[i].opcode == MLXD_WC_RECV || wc[i].opcode == MLXD_WC_RECV_RDMA_WITH_IMM) {
                        posted--;
                        if (wc[i].byte_len != c.size || (!c.use_send && wc[i].imm != it)) {
                            fprintf(stderr, "mlxd-pingpong: iteration %u: got %u bytes imm %u\n", it, wc[i].byte_len, wc[i].imm);
                            failed = 1;
                        } else if (verify(rbuf, c.size, it, dir_in)) {
                            failed = 1;
                        }
                        got = true;
                    } else {
                        sends_outstanding--;
                    }
                }
                if (!got && now_us() > deadline) {
                    fprintf(stderr, "mlxd-pingpong: iteration %u: no message from the peer within 10 s\n", it);
                    failed = 1;
                    break;
                }
            }
            if (posted <= 2 * RECV_BATCH) {
                if ((rc = mlxd_qp_receive(qp, rv, RECV_BATCH)) < 0) die("post receives", rc);
                posted += RECV_BATCH;
            }
        }
        rtt[it] = now_us() - t0;
    }
    double total = now_us() - t_start;
    /* drain our last send completion so nothing is outstanding at teardown */
    double end = now_us() + 1e6;
    while (sends_outstanding && now_us() < end) {
        int n = mlxd_cq_poll(cq, wc, 16);
        for (int i = 0; i < n; i++) if (wc[i].opcode != MLXD_WC_RECV && wc[i].opcode != MLXD_WC_RECV_RDMA_WITH_IMM) sends_outstanding--;
    }
    b = failed ? 'F' : 'D';
    send_all(s, &b, 1);
    char pb;
    recv_all(s, &pb, 1);
    if (pb == 'F') failed = 1;
    if (!failed && c.server) {
        qsort(rtt, c.iters, sizeof *rtt, cmp_d);
        uint32_t n = c.iters;
        double med = rtt[n / 2] / 2, p99 = rtt[(size_t)((n - 1) * 0.99)] / 2;
        printf("%u iterations of %u bytes, %s %s, %s -> peer QP 0x%06x, data verified\n", n, c.size,
               c.type == MLXD_QP_RC ? "RC" : "UC", c.use_send ? "SEND" : "WRITE_IMM", c.dev, peer.qpn);
        printf("one-way latency (round trip / 2), usec: min %.2f  median %.2f  p99 %.2f  max %.2f\n",
               rtt[0] / 2, med, p99, rtt[n - 1] / 2);
        printf("bandwidth: %.2f MB/s (%.0f messages/s, both directions)\n",
               2.0 * c.size * n / total, 2.0 * n / (total / 1e6));
    }
    if (!failed && !c.server) printf("%u iterations of %u bytes received and verified\n", c.iters, c.size);
    mlxd_qp_destroy(qp);
    mlxd_cq_destroy(cq);
    mlxd_region_deregister(sreg);
    mlxd_region_deregister(rreg);
    rc = mlxd_close(nic);
    close(s);
    free(rtt); free(sbuf); free(rbuf);
    return failed || rc ? 1 : 0;
}
