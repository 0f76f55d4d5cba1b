/* mlxd-pingpong: a ping-pong between two processes over RC, UC or UD queue pairs, in the spirit
 * of rdma-core's ibv_rc_pingpong / ibv_ud_pingpong, on the direct driver (no libibverbs).
 * UD (-c ud): SENDs through an address handle to the peer's QPN with the Q_Key PP_QKEY; every
 * receive has the 40 bytes of GRH in front of the message; -s is at most the port MTU.
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
 * The TCP conversation (all of it text or single bytes, so it does not depend on either host's
 * byte order or struct layout):
 *   1. each side sends a hello of HELLO_LEN bytes: "mlxd-pingpong/<version> role=<server|client>
 *      size=<-s> transport=<rc|uc|ud> op=<write_imm|send|fetch_add> iters=<-n>", space-padded, '\n' last.
 *      Everything both sides must agree on is in it: the message sizes (a WRITE_IMM beyond the
 *      peer's region is a remote access error, a SEND beyond its receive buffer a length error),
 *      the QP type (RC packets are dropped by a UC QP and the other way round: both sides would
 *      just time out), the operation (the receive buffers differ) and the round trips (the side
 *      with more would wait for a message that never comes).  A mismatch ends both sides at once
 *      with one line naming the option and both values.  The magic and the version come first
 *      so that a peer that is not this program (some other TCP service on the port) or another
 *      version of it is named as such.
 *   2. 'E' + the endpoint (QPN, PSN, GID, receive buffer address and rkey), ENDPOINT_LEN bytes;
 *   3. 'R' once the QP is connected and its receives posted;
 *   4. after the round trips, 'D' (done, every byte verified) or 'F' (failed).  With -o fetch_add
 *      the server first waits for the client's verdict, then checks its counter, then answers.
 * 'F' may also come at any point after the hello: a side that fails tells the peer before it
 * exits, and the peer stops at once saying "the peer reported a failure" instead of waiting for
 * a message that will not come.
 *
 * --emulate: when this machine has no RDMA device (and LD_PRELOAD does not already name the
 * emulator), re-executes itself with LD_PRELOAD=<exe dir>/../lib/libmlx5direct-emu.so, the
 * emulated ConnectX NICs (mlx5_0 on 127.0.0.1, mlx5_1 on 127.0.0.2 by default; see
 * docs/emulator.md).  The same can be done by hand: LD_PRELOAD=.../libmlx5direct-emu.so mlxd-pingpong ...
 */
#include <arpa/inet.h>
#include <ctype.h>
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
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
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
    bool use_send, fetch_add, op_given;
};

static void usage(const char *argv0)
{
    printf("Usage: %s [options] [server-host]   (no host: run as the server)\n"
           "  -d, --dev NAME        RDMA device (default: the first mlx5 device)\n"
           "  -p, --port N          TCP port for the endpoint exchange (default 18515)\n"
           "  -c, --transport rc|uc|ud  queue pair type (default rc; ud: -o send only)\n"
           "  -o, --op write_imm|send|fetch_add  the operation (default write_imm); fetch_add (RC only):\n"
           "                        the client adds 1 to the server's 8-byte counter -n times, checking\n"
           "                        every value returned, the server checks the counter at the end\n"
           "  -s, --size BYTES      message size (default 4096; fetch_add: 8, the only size)\n"
           "  -n, --iters N         round trips (default 1000)\n"
           "  -g, --gid-idx N       local GID index (default: the RoCE v2 GID routing to the peer,\n"
           "                        else the first IPv4 RoCE v2 GID)\n"
           "  -e, --emulate         use the emulated NICs when this machine has none\n"
           "  -h, --help\n"
           "Both sides must use the same -c, -o, -s and -n (checked when they connect).\n"
           "Exit status: 0 every byte verified on both sides; 1 a failure on this side or on the peer\n"
           "(one line on stderr says which); 2 a usage error.\n", argv0);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The TCP connection to the peer once it is up, else -1.  A failure after that point tells the
 * peer ('F') so that it stops at once and says why, instead of waiting 10 s for a message. */
static int g_peer = -1;

/* Reads what the peer has sent and this side has not, so that the close at exit is a FIN: a
 * close with unread input is a RST, which can cost the peer its error line.  Bounded: a foreign
 * peer may send without end. */
static void drain_input(void)
{
    char junk[4096];
    for (int i = 0; i < 64 && recv(g_peer, junk, sizeof junk, MSG_DONTWAIT) > 0; i++) {}
}

_Noreturn static void exit_failed(void)
{
    if (g_peer >= 0) {
        (void)send(g_peer, "F", 1, MSG_NOSIGNAL);
        shutdown(g_peer, SHUT_WR);      /* the FIN right behind the notice */
        drain_input();
    }
    exit(1);
}

/* One line "mlxd-pingpong: <what went wrong>", the peer told, exit 1. */
_Noreturn static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mlxd-pingpong: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit_failed();
}

/* A failing library call (rc: its negative errno): its per-thread message, else the errno text.
 * Only right after the call, so the message is the one that call set. */
_Noreturn static void die(const char *what, int rc)
{
    const char *m = mlxd_errmsg();
    fail("%s: %s", what, rc < 0 && m && *m ? m : strerror(rc < 0 ? -rc : rc));
}

/* A system error (TCP, exec): err is a negative or positive errno value; never the library's
 * message, which may be left over from an earlier, handled call. */
_Noreturn static void die_sys(const char *what, int err)
{
    fail("%s: %s", what, strerror(err < 0 ? -err : err));
}

/* The peer said 'F': it has printed why; this side only says that it stopped because of it.
 * Nothing is sent back: the peer is already on its way out. */
_Noreturn static void peer_failed(void)
{
    fprintf(stderr, "mlxd-pingpong: the peer reported a failure (see its output)\n");
    drain_input();                      /* the 'F' may only have been peeked */
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

static char g_peer_name[64] = "?";     /* "address:port", for the messages about the peer */

static void send_all(int s, const void *p, size_t n)
{
    while (n) {
        ssize_t k = send(s, p, n, MSG_NOSIGNAL);    /* a peer gone is an error line, not SIGPIPE */
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) die_sys("TCP write to the peer", k < 0 ? errno : EPIPE);
        p = (const char *)p + k;
        n -= (size_t)k;
    }
}

/* Reads up to n bytes; stops early at end of stream or at the deadline (now_us() scale; 0: none).
 * Returns the count read. */
static size_t recv_upto(int s, void *p, size_t n, double deadline)
{
    size_t got = 0;
    while (got < n) {
        if (deadline > 0) {
            double left = deadline - now_us();
            if (left <= 0) break;
            struct pollfd pf = { .fd = s, .events = POLLIN };
            int r = poll(&pf, 1, (int)(left / 1000) + 1);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) die_sys("poll on the TCP connection", errno);
            if (r == 0) break;
        }
        ssize_t k = recv(s, (char *)p + got, n - got, 0);
        if (k < 0 && errno == EINTR) continue;
        /* a peer that closes with our bytes unread resets the connection: for the user that is
         * the same as an orderly close, and the callers say "closed the connection" */
        if (k == 0 || (k < 0 && errno == ECONNRESET)) break;
        if (k < 0) die_sys("TCP read from the peer", errno);
        got += (size_t)k;
    }
    return got;
}

/* The peer's bytes as the inside of a C string literal (64 at most, then "..."), so that an
 * error line quoting a foreign peer stays one printable line. */
#define ESC_SIZE (4 * 64 + 4)
static const char *escaped(char out[ESC_SIZE], const char *p, size_t n)
{
    size_t o = 0, shown = n < 64 ? n : 64;
    for (size_t i = 0; i < shown; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\\' || ch == '"') o += (size_t)snprintf(out + o, ESC_SIZE - o, "\\%c", ch);
        else if (ch == '\n') o += (size_t)snprintf(out + o, ESC_SIZE - o, "\\n");
        else if (ch == '\r') o += (size_t)snprintf(out + o, ESC_SIZE - o, "\\r");
        else if (ch < 0x20 || ch >= 0x7f) o += (size_t)snprintf(out + o, ESC_SIZE - o, "\\x%02x", ch);
        else out[o++] = (char)ch;
    }
    if (n > shown) o += (size_t)snprintf(out + o, ESC_SIZE - o, "...");
    out[o] = '\0';
    return out;
}

/* ---- hello: versioned, fixed length (see the top of this file) ---- */
#define PROTO_VERSION 1
#define HELLO_MAGIC "mlxd-pingpong/"
#define HELLO_LEN 128          /* the same in every version: a peer reads this much before it can see the version */
#define HELLO_WAIT_US 10e6     /* the peer sends its hello as soon as it is connected */
#define ENDPOINT_LEN 160

struct settings { bool server, use_send, fetch_add; uint32_t size, iters, type; };

static const char *transport_name(uint32_t type) { return type == MLXD_QP_RC ? "rc" : type == MLXD_QP_UD ? "ud" : "uc"; }
static const char *transport_upper(uint32_t type) { return type == MLXD_QP_RC ? "RC" : type == MLXD_QP_UD ? "UD" : "UC"; }
static const char *op_name(bool use_send, bool fetch_add) { return fetch_add ? "fetch_add" : use_send ? "send" : "write_imm"; }
static const char *op_label(const struct cfg *c) { return c->fetch_add ? "FETCH_ADD" : c->use_send ? "SEND" : "WRITE_IMM"; }

static void hello_send(int s, const struct cfg *c)
{
    char h[HELLO_LEN];
    int n = snprintf(h, sizeof h, HELLO_MAGIC "%d role=%s size=%u transport=%s op=%s iters=%u", PROTO_VERSION,
                     c->server ? "client" : "server", c->size, transport_name(c->type), op_name(c->use_send, c->fetch_add), c->iters);
    memset(h + n, ' ', sizeof h - (size_t)n - 1);
    h[sizeof h - 1] = '\n';
    send_all(s, h, sizeof h);
}

/* "rc", "uc" or "ud" -> the QP type. */
static bool parse_transport(const char *v, uint32_t *type)
{
    if (!strcmp(v, "rc")) *type = MLXD_QP_RC;
    else if (!strcmp(v, "uc")) *type = MLXD_QP_UC;
    else if (!strcmp(v, "ud")) *type = MLXD_QP_UD;
    else return false;
    return true;
}

/* A decimal in [min, max] and nothing else (no sign, no blank, no hex: the peer is untrusted). */
static bool parse_u32(const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
    if (*v < '0' || *v > '9') return false;
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (errno || *end || x < min || x > max) return false;
    *out = (uint32_t)x;
    return true;
}

static void hello_recv(int s, struct settings *peer)
{
    char h[HELLO_LEN + 1], raw[HELLO_LEN], e1[ESC_SIZE], e2[ESC_SIZE];
    const size_t ml = sizeof HELLO_MAGIC - 1;
    double deadline = now_us() + HELLO_WAIT_US;
    size_t got = recv_upto(s, h, ml, deadline);
    if (memcmp(h, HELLO_MAGIC, got)) {
        ssize_t k = recv(s, h + got, HELLO_LEN - got, MSG_DONTWAIT);   /* what else it said, to show */
        if (k > 0) got += (size_t)k;
        fail("the peer %s is not mlxd-pingpong: it sent \"%s\"", g_peer_name, escaped(e1, h, got));
    }
    if (got == ml) got += recv_upto(s, h + ml, HELLO_LEN - ml, deadline);
    if (got < HELLO_LEN) {
        const char *why = now_us() >= deadline ? "sent no complete hello within 10 s" : "closed the connection before its hello was complete";
        if (!got) fail("the peer %s %s (is it mlxd-pingpong?): it sent nothing", g_peer_name, why);
        fail("the peer %s %s (is it mlxd-pingpong?): it sent \"%s\"", g_peer_name, why, escaped(e1, h, got));
    }
    memcpy(raw, h, HELLO_LEN);
    size_t shown = HELLO_LEN;          /* the padding and the newline are not worth showing */
    while (shown && (raw[shown - 1] == ' ' || raw[shown - 1] == '\n')) shown--;
    h[HELLO_LEN] = '\0';
    char *v = h + ml, *end;
    errno = 0;
    unsigned long ver = strtoul(v, &end, 10);
    if (*v < '0' || *v > '9' || errno || *end != ' ')
        fail("the peer %s sent a malformed hello (no protocol version): \"%s\"", g_peer_name, escaped(e2, raw, shown));
    if (ver != PROTO_VERSION)
        fail("the peer %s speaks mlxd-pingpong protocol %lu, this side %d: use the same mlxd-pingpong on both sides",
             g_peer_name, ver, PROTO_VERSION);
    if (h[HELLO_LEN - 1] != '\n')
        fail("the peer %s sent a malformed hello (byte %d is not a newline): \"%s\"", g_peer_name, HELLO_LEN, escaped(e2, raw, shown));
    h[HELLO_LEN - 1] = ' ';
    unsigned seen = 0;
    char *save = NULL;
    for (char *tok = strtok_r(end, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        unsigned bit = 0;
        bool ok = eq != NULL;
        if (ok) {
            *eq = '\0';
            const char *k = tok, *val = eq + 1;
            if (!strcmp(k, "role")) {
                bit = 1; ok = !strcmp(val, "server") || !strcmp(val, "client"); peer->server = !strcmp(val, "server");
            } else if (!strcmp(k, "size")) {
                bit = 2; ok = parse_u32(val, 1, 0x7fffffff, &peer->size);
            } else if (!strcmp(k, "transport")) {
                bit = 4; ok = parse_transport(val, &peer->type);
            } else if (!strcmp(k, "op")) {
                bit = 8; ok = !strcmp(val, "send") || !strcmp(val, "write_imm") || !strcmp(val, "fetch_add");
                peer->use_send = !strcmp(val, "send");
                peer->fetch_add = !strcmp(val, "fetch_add");
            } else if (!strcmp(k, "iters")) {
                bit = 16; ok = parse_u32(val, 1, 100000000, &peer->iters);
            } else {
                ok = false;
            }
        }
        if (eq) *eq = '=';
        if (!ok || (seen & bit))
            fail("the peer %s sent a malformed hello (at '%s'): \"%s\"", g_peer_name, escaped(e1, tok, strlen(tok)), escaped(e2, raw, shown));
        seen |= bit;
    }
    if (seen != 31)
        fail("the peer %s sent a malformed hello (a setting is missing): \"%s\"", g_peer_name, escaped(e2, raw, shown));
}

/* Everything both sides must agree on, both values of each difference in one line. */
static void check_settings(const struct cfg *c, const struct settings *p)
{
    if (p->server == !c->server)
        fail("the peer %s is a %s too: one side must be the server (no host argument), the other the client",
             g_peer_name, p->server ? "server" : "client");
    char theirs[160] = "", ours[160] = "";
    int t = 0, o = 0;
#define DIFF(cond, fmt, pv, cv)                                                                     \
    if (cond) {                                                                                     \
        t += snprintf(theirs + t, sizeof theirs - (size_t)t, "%s" fmt, t ? " " : "", pv);           \
        o += snprintf(ours + o, sizeof ours - (size_t)o, "%s" fmt, o ? " " : "", cv);               \
    }
    DIFF(p->size != c->size, "-s %u", p->size, c->size)
    DIFF(p->type != c->type, "-c %s", transport_name(p->type), transport_name(c->type))
    DIFF(p->use_send != c->use_send || p->fetch_add != c->fetch_add, "-o %s", op_name(p->use_send, p->fetch_add),
         op_name(c->use_send, c->fetch_add))
    DIFF(p->iters != c->iters, "-n %u", p->iters, c->iters)
#undef DIFF
    if (t) fail("the peer uses %s, this side %s", theirs, ours);
}

/* One byte of the conversation after the hello.  'F' and the end of the stream end this side too,
 * with one line saying so. */
static char peer_byte(int s, const char *what)
{
    char b;
    if (recv_upto(s, &b, 1, 0) == 0)
        fail("the peer %s closed the connection while this side waited for %s (see its output)", g_peer_name, what);
    if (b == 'F') peer_failed();
    return b;
}

static void expect_byte(int s, char want, const char *what)
{
    char b = peer_byte(s, what);
    if (b != want) fail("protocol error: the peer %s sent byte 0x%02x where %s ('%c') was due", g_peer_name, (unsigned char)b, what, want);
}

static void exchange(int s, const struct wire *mine, struct wire *peer)
{
    char line[ENDPOINT_LEN], in[ENDPOINT_LEN];
    int n = snprintf(line, sizeof line, "E%06x %06x ", mine->qpn, mine->psn);
    for (int i = 0; i < 16; i++) n += snprintf(line + n, sizeof line - (size_t)n, "%02x", mine->gid[i]);
    n += snprintf(line + n, sizeof line - (size_t)n, " %016llx %08x", (unsigned long long)mine->addr, mine->rkey);
    memset(line + n, ' ', sizeof line - (size_t)n - 1);
    line[sizeof line - 1] = '\n';
    send_all(s, line, sizeof line);
    expect_byte(s, 'E', "its endpoint");
    if (recv_upto(s, in, sizeof in - 1, 0) < sizeof in - 1)
        fail("the peer %s closed the connection in the middle of its endpoint (see its output)", g_peer_name);
    in[sizeof in - 1] = '\0';   /* the peer's line is not ours to trust: terminate it */
    unsigned long long addr;
    char gid[33];
    int end = 0;
    bool ok = sscanf(in, "%x %x %32s %llx %x %n", &peer->qpn, &peer->psn, gid, &addr, &peer->rkey, &end) == 5 &&
              !in[end] && strlen(gid) == 32;
    for (int i = 0; ok && i < 16; i++) {
        unsigned b = 0;
        ok = isxdigit((unsigned char)gid[2 * i]) && isxdigit((unsigned char)gid[2 * i + 1]) && sscanf(gid + 2 * i, "%2x", &b) == 1;
        peer->gid[i] = (uint8_t)b;
    }
    if (!ok) {
        char e1[ESC_SIZE];
        size_t shown = strlen(in);
        while (shown && (in[shown - 1] == ' ' || in[shown - 1] == '\n')) shown--;
        fail("the peer %s sent a malformed endpoint: \"E%s\"", g_peer_name, escaped(e1, in, shown));
    }
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
#define PEER_CHECK_US 20e3     /* while a message is late, how often the TCP connection is checked */

/* On the emulator the "NIC" is a thread of this process competing for the same CPUs: an idle
 * poll gives it the CPU.  On a real NIC the loop spins. */
static bool emulated(void)
{
    const char *p = getenv("LD_PRELOAD");
    return getenv(REEXEC_ENV) || (p && strstr(p, "libmlx5direct-emu"));
}

/* ---- -o fetch_add: the client's fetch-and-adds on the server's counter ---- */
/* The counter's first value: past 2^32, so a 32-bit add anywhere would show. */
#define COUNTER_START 0xfffffffeull

/* -o fetch_add fixes the size at 8 (an atomic moves 8 bytes) and needs RC (IB spec vol. 1
 * 9.4.5: atomics are an RC service); anything else is a usage error, exit 2. */
static int atomic_options(struct cfg *c, bool size_given, const char *argv0)
{
    if (!c->fetch_add) return 0;
    const char *why = c->type != MLXD_QP_RC ? "-o fetch_add needs -c rc (atomics are an RC operation)"
                    : size_given && c->size != 8 ? "-o fetch_add moves 8 bytes: leave -s out or give -s 8" : NULL;
    if (why) { fprintf(stderr, "mlxd-pingpong: %s\n", why); usage(argv0); return 2; }
    c->size = 8;
    return 0;
}

/* Waits for the one completion of a fetch-and-add; a late one checks the TCP connection for the
 * peer's failure notice, as the round trips do.  Returns 0, or -1 after printing why. */
static int atomic_wait(struct mlxd_cq *cq, int s, uint32_t it, bool yield, struct mlxd_completion *wc)
{
    double deadline = now_us() + 10e6, next_check = now_us() + 20e3;
    for (;;) {
        int n = mlxd_cq_poll(cq, wc, 1);
        if (n < 0) die("poll", n);
        if (n == 1) return 0;
        if (yield) sched_yield();
        double t = now_us();
        if (t > next_check) {
            next_check = t + 20e3;
            char pb;
            ssize_t k = recv(s, &pb, 1, MSG_PEEK | MSG_DONTWAIT);
            if (k == 0) fail("iteration %u: the peer %s closed the connection (see its output)", it, g_peer_name);
            if (k == 1 && pb == 'F') peer_failed();
        }
        if (t > deadline) {
            fprintf(stderr, "mlxd-pingpong: iteration %u: no fetch-and-add completion within 10 s\n", it);
            return -1;
        }
    }
}

/* The client: -n fetch-and-adds of 1 on the server's counter (peer->addr), one at a time, each
 * returned original value checked against COUNTER_START + its iteration.  rtt[it]: the round
 * trip of each.  Returns 0, or 1 after printing the first difference. */
static int atomic_client(const struct cfg *c, struct mlxd_qp *qp, struct mlxd_cq *cq, const struct mlxd_local *old,
                         const uint8_t *oldbuf, const struct wire *peer, int s, double *rtt)
{
    bool yield = emulated();
    for (uint32_t it = 0; it < c->iters; it++) {
        double t0 = now_us();
        struct mlxd_entry e = { .wr_id = it, .op = MLXD_OP_FETCH_ADD, .flags = MLXD_SIGNALED, .num_local = 1,
                                .local = *old, .remote = { peer->addr, 0, peer->rkey, 0 }, .swap_add = 1 };
        int rc = mlxd_qp_post(qp, &e);
        if (rc) die("post a fetch-and-add", rc);
        mlxd_qp_ring(qp);
        struct mlxd_completion wc;
        if (atomic_wait(cq, s, it, yield, &wc)) return 1;
        if (wc.status) {
            fprintf(stderr, "mlxd-pingpong: iteration %u: fetch-and-add completion error %s (%u), syndrome %s (0x%02x)\n",
                    it, mlxd_wc_status_name((int)wc.status), wc.status, mlxd_syndrome_name(wc.syndrome), wc.syndrome);
            return 1;
        }
        uint64_t got, want = COUNTER_START + it;
        memcpy(&got, oldbuf, 8);
        if (wc.opcode != MLXD_WC_FETCH_ADD || wc.byte_len != 8 || got != want) {
            fprintf(stderr, "mlxd-pingpong: iteration %u: fetch-and-add returned 0x%016llx (opcode %u, %u bytes), "
                    "expected 0x%016llx\n", it, (unsigned long long)got, wc.opcode, wc.byte_len, (unsigned long long)want);
            return 1;
        }
        rtt[it] = now_us() - t0;
    }
    return 0;
}

/* The server: the counter starts at COUNTER_START; it waits (without taking it) for the client's
 * verdict byte, failing when the counter stands still for 10 s, then checks the counter is
 * COUNTER_START + -n.  Returns 0, or 1 after printing why. */
static int atomic_server(const struct cfg *c, volatile uint64_t *counter, int s)
{
    uint64_t last = *counter;
    double still_since = now_us();
    for (;;) {
        struct pollfd pf = { .fd = s, .events = POLLIN };
        if (poll(&pf, 1, 20) > 0) {
            char pb;
            ssize_t k = recv(s, &pb, 1, MSG_PEEK | MSG_DONTWAIT);
            if (k == 0) fail("the peer %s closed the connection (see its output)", g_peer_name);
            if (k == 1 && pb == 'F') peer_failed();
            if (k == 1) break;               /* 'D': taken by the verdict exchange */
        }
        uint64_t v = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
        if (v != last) { last = v; still_since = now_us(); }
        else if (now_us() - still_since > 10e6) {
            fprintf(stderr, "mlxd-pingpong: no fetch-and-add from the peer within 10 s (counter 0x%016llx)\n",
                    (unsigned long long)v);
            return 1;
        }
    }
    uint64_t v = __atomic_load_n(counter, __ATOMIC_ACQUIRE), want = COUNTER_START + c->iters;
    if (v != want) {
        fprintf(stderr, "mlxd-pingpong: the counter is 0x%016llx after %u fetch-and-adds, expected 0x%016llx\n",
                (unsigned long long)v, c->iters, (unsigned long long)want);
        return 1;
    }
    printf("counter 0x%016llx after %u fetch-and-adds of 1 from 0x%016llx: verified\n", (unsigned long long)v,
           c->iters, (unsigned long long)COUNTER_START);
    return 0;
}

/* The client's report: latency from the sorted round trips, bandwidth over the whole run. */
static void print_summary(const struct cfg *c, double *rtt, double total, uint32_t peer_qpn)
{
    qsort(rtt, c->iters, sizeof *rtt, cmp_d);
    uint32_t n = c->iters;
    double med = rtt[n / 2] / 2, p99 = rtt[(size_t)((n - 1) * 0.99)] / 2;
    printf("%u iterations of %u bytes, %s %s, %s -> peer QP 0x%06x, data verified\n", n, c->size,
           transport_upper(c->type), op_label(c), c->dev, peer_qpn);
    printf("one-way latency (round trip / 2), usec: min %.2f  median %.2f  p99 %.2f  max %.2f\n",
           rtt[0] / 2, med, p99, rtt[n - 1] / 2);
    printf("bandwidth: %.2f MB/s (%.0f messages/s, both directions)\n",
           2.0 * c->size * n / total, 2.0 * n / (total / 1e6));
}

/* ---- UD (-c ud) ---- */
#define PP_QKEY 0x11111111u    /* the Q_Key both sides use (ibv_ud_pingpong's too) */

/* UD sends only (a datagram has no remote address, and atomics are RC's): -o send is the default
 * there, -o write_imm a usage error (exit 2). */
static int ud_options(struct cfg *c, const char *argv0)
{
    if (c->type != MLXD_QP_UD) return 0;
    if (c->op_given && !c->use_send) {
        fprintf(stderr, "mlxd-pingpong: -c ud -o write_imm: a UD QP sends only (use -o send)\n");
        usage(argv0);
        return 2;
    }
    c->use_send = true;
    return 0;
}

/* Bytes in front of each received message: the GRH space of a UD receive, else none. */
static uint32_t grh_room(const struct cfg *c) { return c->type == MLXD_QP_UD ? MLXD_UD_GRH_LEN : 0; }

/* The message size against the port: its maximum message, and for UD its MTU (a datagram is one
 * packet). */
static void check_size(struct mlxd_nic *nic, const struct cfg *c)
{
    if (c->size > mlxd_max_message(nic)) fail("-s %u exceeds the port's maximum message %u", c->size, mlxd_max_message(nic));
    struct mlxd_port_info pi;
    if (c->type == MLXD_QP_UD && mlxd_port_info(nic, &pi) == 0 && c->size > pi.active_mtu_bytes)
        fail("-c ud -s %u exceeds the port MTU %u (a datagram is one packet)", c->size, pi.active_mtu_bytes);
}

/* RC/UC: connect to the peer's endpoint.  UD: ready the QP with PP_QKEY and make the address
 * handle of the peer's GID that every send uses (*ah; NULL for RC/UC). */
static void connect_or_ready(struct mlxd_nic *nic, struct mlxd_qp *qp, const struct cfg *c,
                             const struct mlxd_endpoint *pep, struct mlxd_ah **ah)
{
    int rc;
    *ah = NULL;
    if (c->type != MLXD_QP_UD) {
        struct mlxd_connect_opts co = { .sz = sizeof co,
                                        .peer_access = c->fetch_add ? MLXD_ACCESS_REMOTE_ATOMIC : MLXD_ACCESS_REMOTE_WRITE };
        if ((rc = mlxd_qp_connect(qp, pep, &co))) die("connect", rc);
        return;
    }
    if ((rc = mlxd_qp_ud_ready(qp, PP_QKEY))) die("ready the UD QP", rc);
    if ((rc = mlxd_ah_create(nic, pep->gid, NULL, ah))) die("create the address handle", rc);
}

/* Reads the command line into c.  Returns -1 to go on, else the exit status (usage printed). */
static int parse_args(struct cfg *c, int argc, char **argv)
{
    static const struct option lo[] = {
        { "dev", 1, 0, 'd' }, { "port", 1, 0, 'p' }, { "transport", 1, 0, 'c' }, { "op", 1, 0, 'o' },
        { "size", 1, 0, 's' }, { "iters", 1, 0, 'n' }, { "gid-idx", 1, 0, 'g' }, { "emulate", 0, 0, 'e' },
        { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
    int o;
    bool size_given = false;
    while ((o = getopt_long(argc, argv, "d:p:c:o:s:n:g:eh", lo, NULL)) != -1) {
        switch (o) {
        case 'd': c->dev = optarg; break;
        case 'p': c->port = (int)num_arg(argv[0], o, optarg, 1, 65535); break;
        case 'c': if (!parse_transport(optarg, &c->type)) {
                      fprintf(stderr, "mlxd-pingpong: -c '%s': expected rc, uc or ud\n", optarg); usage(argv[0]); return 2; } break;
        case 'o': c->use_send = !strcmp(optarg, "send"); c->fetch_add = !strcmp(optarg, "fetch_add"); c->op_given = true;
                  if (!c->use_send && !c->fetch_add && strcmp(optarg, "write_imm"))
                  { fprintf(stderr, "mlxd-pingpong: -o '%s': expected write_imm, send or fetch_add\n", optarg); usage(argv[0]); return 2; } break;
        case 's': c->size = (uint32_t)num_arg(argv[0], o, optarg, 1, 0x7fffffffL); size_given = true; break;
        case 'n': c->iters = (uint32_t)num_arg(argv[0], o, optarg, 1, 100000000L); break;
        case 'g': c->gid_idx = (int)num_arg(argv[0], o, optarg, 0, 0xffff); break;
        case 'e': c->emulate = 1; break;
        case 'h': usage(argv[0]); return 0;
        default: usage(argv[0]); return 2;
        }
    }
    if (optind < argc) c->server = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "mlxd-pingpong: unexpected argument '%s' (one server host at most)\n", argv[optind]);
        usage(argv[0]);
        return 2;
    }
    if (!c->size || !c->iters || c->port <= 0 || c->port > 65535) { usage(argv[0]); return 2; }
    if (atomic_options(c, size_given, argv[0]) || ud_options(c, argv[0])) return 2;
    return -1;
}

/* -d, else the first mlx5 device (the server) or the second (the client, when there are two:
 * the emulator's two NICs).  Returns -1 to go on, else the exit status (said). */
static int pick_device(struct cfg *c)
{
    char **names = NULL; size_t nn = 0;
    int rc = mlxd_names(&names, &nn);
    if (rc) die("listing RDMA devices", rc);
    if (!c->dev) {
        if (!nn) { fprintf(stderr, "mlxd-pingpong: no mlx5 RDMA device (try --emulate)\n"); return 1; }
        static char devbuf[64];
        snprintf(devbuf, sizeof devbuf, "%s", names[c->server ? 0 : (nn > 1 ? 1 : 0)]);
        c->dev = devbuf;
    }
    mlxd_names_free(names, nn);
    return -1;
}

/* One side's run: the peer, the objects, the receive ring. */
struct pp {
    const struct cfg *c;
    int s;                         /* the TCP connection to the peer */
    struct mlxd_nic *nic;
    uint8_t *sbuf, *rbuf;
    uint32_t grh;                  /* bytes in front of each received message (grh_room) */
    struct mlxd_region *sreg, *rreg;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_ah *ah;
    struct mlxd_endpoint ep;       /* this side's */
    struct wire peer;
    struct mlxd_local rl, sl;
    struct mlxd_recv rv[RECV_BATCH];
    int posted;                    /* receives outstanding */
    uint32_t sends_outstanding;
    bool yield;                    /* on the emulator: yield while polling */
    struct mlxd_completion wc[16];
};

/* The TCP connection (client: to the server; server: from the client) and the settings both
 * sides must agree on.  Returns the GID index to use (-g, else the one routing to the peer, else
 * -1: the default). */
static int connect_peer(struct pp *P)
{
    const struct cfg *c = P->c;
    P->s = c->server ? tcp_connect(c->server, c->port) : tcp_accept(c->port);
    g_peer = P->s;
    int one = 1;
    setsockopt(P->s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in peer_addr;
    socklen_t pl = sizeof peer_addr;
    bool have_addr = getpeername(P->s, (struct sockaddr *)&peer_addr, &pl) == 0;
    if (have_addr) {
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &peer_addr.sin_addr, a, sizeof a);
        snprintf(g_peer_name, sizeof g_peer_name, "%s:%u", a, ntohs(peer_addr.sin_port));
    }
    /* the settings first: a mismatch is found before anything is registered or connected */
    struct settings ps;
    hello_send(P->s, c);
    hello_recv(P->s, &ps);
    check_settings(c, &ps);
    /* after the hello, so that the peer is told instead of waiting for a hello that never comes */
    check_size(P->nic, c);
    int gid_idx = c->gid_idx;
    if (gid_idx < 0 && have_addr) {
        int g = mlxd_gid_for_peer(P->nic, (struct sockaddr *)&peer_addr, pl, NULL);
        if (g >= 0) gid_idx = g;
        else mlxd_err_clear();        /* handled: the default GID is used */
    }
    return gid_idx;
}

/* The buffers, regions, CQ and QP; the endpoints exchanged; receives posted, the QP connected
 * (or readied), and both sides ready. */
static void make_objects(struct pp *P, int gid_idx)
{
    const struct cfg *c = P->c;
    int rc;
    P->sbuf = aligned_alloc(4096, (c->size + 4095) & ~4095u);
    P->grh = grh_room(c);
    P->rbuf = aligned_alloc(4096, (c->size + P->grh + 4095) & ~4095u);
    memset(P->rbuf, 0, c->size + P->grh);
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE };
    if ((rc = mlxd_region_register(P->nic, P->sbuf, c->size, &ro, &P->sreg))) die("register the send buffer", rc);
    ro.access = MLXD_ACCESS_LOCAL_WRITE | (c->fetch_add ? MLXD_ACCESS_REMOTE_ATOMIC : MLXD_ACCESS_REMOTE_WRITE);
    if (c->fetch_add) { uint64_t v0 = COUNTER_START; memcpy(P->rbuf, &v0, 8); }
    if ((rc = mlxd_region_register(P->nic, P->rbuf, c->size + P->grh, &ro, &P->rreg))) die("register the receive buffer", rc);
    if ((rc = mlxd_cq_create(P->nic, 256, NULL, &P->cq))) die("create the CQ", rc);
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = c->type, .send_depth = 64, .recv_depth = 128,
                               .max_inline = 0, .has_gid_index = gid_idx >= 0, .gid_index = (uint32_t)(gid_idx < 0 ? 0 : gid_idx) };
    if ((rc = mlxd_qp_create(P->cq, &qo, &P->qp))) die("create the QP", rc);
    mlxd_qp_endpoint(P->qp, &P->ep);
    struct mlxd_remote rr = mlxd_region_remote(P->rreg);
    struct wire mine = { .qpn = P->ep.qpn, .psn = P->ep.psn, .addr = rr.addr, .rkey = rr.rkey };
    memcpy(mine.gid, P->ep.gid, 16);
    exchange(P->s, &mine, &P->peer);
    struct mlxd_endpoint pep = { .qpn = P->peer.qpn, .psn = P->peer.psn };
    memcpy(pep.gid, P->peer.gid, 16);

    /* receives first, then connect, then tell the peer we are ready */
    P->rl = mlxd_region_local(P->rreg);
    for (int i = 0; i < RECV_BATCH; i++) P->rv[i] = (struct mlxd_recv){ .wr_id = 0x1000u + (unsigned)i, .num_local = c->use_send ? 1 : 0, .local = &P->rl };
    for (int k = 0; k < 4; k++) if ((rc = mlxd_qp_receive(P->qp, P->rv, RECV_BATCH)) < 0) die("post receives", rc);
    P->posted = 4 * RECV_BATCH;
    connect_or_ready(P->nic, P->qp, c, &pep, &P->ah);
    send_all(P->s, "R", 1);
    expect_byte(P->s, 'R', "its ready signal");
    P->sl = mlxd_region_local(P->sreg);
}

/* Iteration it's message to the peer (its pattern in the send buffer). */
static void send_message(struct pp *P, uint32_t it, int dir_out)
{
    const struct cfg *c = P->c;
    int rc;
    fill(P->sbuf, c->size, it, dir_out);
    struct mlxd_entry e = { .wr_id = it, .op = c->use_send ? MLXD_OP_SEND : MLXD_OP_WRITE_IMM,
                            .flags = MLXD_SIGNALED, .imm = it, .num_local = 1, .local = P->sl,
                            .remote = { P->peer.addr, 0, P->peer.rkey, 0 }, .ah = P->ah, .remote_qpn = P->peer.qpn,
                            .remote_qkey = PP_QKEY };
    while ((rc = mlxd_qp_post(P->qp, &e)) == -EAGAIN) (void)mlxd_cq_poll(P->cq, P->wc, 16);
    if (rc) die("post", rc);
    mlxd_qp_ring(P->qp);
    P->sends_outstanding++;
}

/* A message this late: has the peer given up?  Asked only then, so that no system call is part
 * of an ordinary round trip. */
static void check_peer(int s, uint32_t it)
{
    char pb;
    ssize_t k = recv(s, &pb, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0) fail("iteration %u: the peer %s closed the connection (see its output)", it, g_peer_name);
    if (k == 1 && pb == 'F') peer_failed();
    /* 'D': the peer has finished; its last message may still be on its way */
    if (k == 1 && pb != 'D')
        fail("protocol error: the peer %s sent byte 0x%02x during the round trips", g_peer_name, (unsigned char)pb);
}

/* One completion of the wait for the peer's message: a receive is checked (size, immediate,
 * every byte), a send is counted off.  *got: the message came (or an error did).  Returns 1 when
 * it failed (said), else 0. */
static int take_completion(struct pp *P, const struct mlxd_completion *wc, uint32_t it, int dir_in, bool *got)
{
    const struct cfg *c = P->c;
    if (wc->status) {
        fprintf(stderr, "mlxd-pingpong: iteration %u: completion error %s (%u), syndrome %s (0x%02x), vendor syndrome 0x%02x, CQE opcode %s\n",
                it, mlxd_wc_status_name((int)wc->status), wc->status,
                mlxd_syndrome_name(wc->syndrome), wc->syndrome, wc->vendor_syndrome,
                mlxd_cqe_opcode_name(wc->cqe_opcode));
        *got = true;
        return 1;
    }
    if (wc->opcode != MLXD_WC_RECV && wc->opcode != MLXD_WC_RECV_RDMA_WITH_IMM) {
        P->sends_outstanding--;
        return 0;
    }
    P->posted--;
    *got = true;
    if (wc->byte_len != c->size + P->grh || (!c->use_send && wc->imm != it)) {
        fprintf(stderr, "mlxd-pingpong: iteration %u: got %u bytes imm %u\n", it, wc->byte_len, wc->imm);
        return 1;
    }
    return verify(P->rbuf + P->grh, c->size, it, dir_in) ? 1 : 0;
}

/* Waits for the peer's message of iteration it (our send's completion may come first or
 * later), then tops up the receives.  Returns 1 when it failed (said), else 0. */
static int await_message(struct pp *P, uint32_t it, int dir_in)
{
    int failed = 0, rc;
    bool got = false;
    double deadline = now_us() + 10e6, next_check = now_us() + PEER_CHECK_US;
    while (!got) {
        int n = mlxd_cq_poll(P->cq, P->wc, 16);
        if (n < 0) die("poll", n);
        if (n == 0 && P->yield) sched_yield();
        for (int i = 0; i < n; i++) {
            failed |= take_completion(P, &P->wc[i], it, dir_in, &got);
            if (P->wc[i].status) break;
        }
        if (got) break;
        double t = now_us();
        if (t > next_check) {
            next_check = t + PEER_CHECK_US;
            check_peer(P->s, it);
        }
        if (t > deadline) {
            fprintf(stderr, "mlxd-pingpong: iteration %u: no message from the peer within 10 s\n", it);
            failed = 1;
            break;
        }
    }
    if (P->posted <= 2 * RECV_BATCH) {
        if ((rc = mlxd_qp_receive(P->qp, P->rv, RECV_BATCH)) < 0) die("post receives", rc);
        P->posted += RECV_BATCH;
    }
    return failed;
}

/* The round trips (the client sends first); rtt[it]: each one's time.  Returns 1 when one
 * failed (said), else 0. */
static int round_trips(struct pp *P, double *rtt)
{
    const struct cfg *c = P->c;
    int dir_out = c->server ? 0 : 1, dir_in = 1 - dir_out;
    int failed = 0;
    for (uint32_t it = 0; it < c->iters && !failed; it++) {
        double t0 = now_us();
        for (int phase = 0; phase < 2 && !failed; phase++) {
            bool sending = (phase == 0) == (c->server != NULL);   /* client sends first */
            if (sending)
                send_message(P, it, dir_out);
            else
                failed = await_message(P, it, dir_in);
        }
        rtt[it] = now_us() - t0;
    }
    return failed;
}

/* The verdicts exchanged ('D' or 'F'), our last send completion drained so that nothing is
 * outstanding at teardown. */
static void exchange_verdicts(struct pp *P, int failed)
{
    /* the verdict first: after a failure here the peer is waiting for a message that will not
     * come.  'F' is best effort: a peer already gone is no second error. */
    if (failed) (void)send(P->s, "F", 1, MSG_NOSIGNAL);
    else send_all(P->s, "D", 1);
    double end = now_us() + 1e6;
    while (P->sends_outstanding && now_us() < end) {
        int n = mlxd_cq_poll(P->cq, P->wc, 16);
        for (int i = 0; i < n; i++) if (P->wc[i].opcode != MLXD_WC_RECV && P->wc[i].opcode != MLXD_WC_RECV_RDMA_WITH_IMM) P->sends_outstanding--;
    }
    if (failed) {
        /* this side has said why; the peer's verdict adds nothing.  A short wait lets it read
         * ours before the close. */
        shutdown(P->s, SHUT_WR);
        struct pollfd pf = { .fd = P->s, .events = POLLIN };
        char pb;
        if (poll(&pf, 1, 2000) == 1) (void)recv(P->s, &pb, 1, MSG_DONTWAIT);   /* errors too add nothing */
    } else {
        expect_byte(P->s, 'D', "its result");
    }
}

int main(int argc, char **argv)
{
    struct cfg c = { .port = 18515, .gid_idx = -1, .size = 4096, .iters = 1000, .type = MLXD_QP_RC };
    int status = parse_args(&c, argc, argv);
    if (status >= 0) return status;
    if (c.emulate) maybe_emulate(argv);
    emulated_setup();
    if ((status = pick_device(&c)) >= 0) return status;

    /* the device first: a bad -d fails before any connection is made */
    struct pp P = { .c = &c };
    int rc;
    if ((rc = mlxd_open(c.dev, NULL, &P.nic))) die(c.dev, rc);
    int gid_idx = connect_peer(&P);
    make_objects(&P, gid_idx);

    if (!c.server) printf("mlxd-pingpong server: %s QP 0x%06x %s %s, %u bytes x %u\n", c.dev, P.ep.qpn,
                          transport_upper(c.type), op_label(&c), c.size, c.iters);
    double *rtt = calloc(c.iters, sizeof *rtt);
    double t_start = now_us();
    P.yield = emulated();
    int failed;
    if (c.fetch_add)
        failed = c.server ? atomic_client(&c, P.qp, P.cq, &P.sl, P.sbuf, &P.peer, P.s, rtt)
                          : atomic_server(&c, (volatile uint64_t *)P.rbuf, P.s);
    else
        failed = round_trips(&P, rtt);
    double total = now_us() - t_start;
    exchange_verdicts(&P, failed);
    if (!failed && c.server) print_summary(&c, rtt, total, P.peer.qpn);
    if (!failed && !c.server && !c.fetch_add) printf("%u iterations of %u bytes received and verified\n", c.iters, c.size);
    mlxd_qp_destroy(P.qp);
    mlxd_cq_destroy(P.cq);
    mlxd_region_deregister(P.sreg);
    mlxd_region_deregister(P.rreg);
    rc = mlxd_close(P.nic);
    close(P.s);
    free(rtt); free(P.sbuf); free(P.rbuf);
    return failed || rc ? 1 : 0;
}
