/* mlxd-capture: run an HSB-style frame receiver (receiver/mlxd_receiver.h) on an mlx5 device or
 * on the emulated one, optionally fed from a pcap capture (--replay) or from the generator
 * (--generate), and report every frame.  See `mlxd-capture --help` and docs/receiver.md.
 *
 * Exit status: 0 when every expected frame came (and every checked payload verified, and every
 * frame --save was given was written), 1 otherwise, 2 for usage errors (an option's value out
 * of its range, an option given in a mode it does not apply to, a --save that is not a
 * writable directory, arguments start refuses). */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "gpu_buffer.h"
#include "mlxd_capture.h"
#include "mlxd_capture_classify.h"
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_receiver.h"
#include "mlxd_names.h"
#include "mlxd_uverbs.h"
#include "stats.h"

#define EMU_REEXEC_ENV "MLXD_CAPTURE_EMULATED"
/* Bounds of the size options: mlxd_receiver_start takes frame_size up to 2^40; pages (<= 4096
 * = 2^12) x page_size must fit a size_t, and 2^12 x 2^41 = 2^53 does (the buffer size is
 * computed before any allocation could refuse it). */
#define MAX_FRAME_SIZE (1ull << 40)
#define MAX_PAGE_SIZE (1ull << 41)
#define EMU_DEFAULT_DEVICES "mlx5_0:127.0.0.1:mtu=4096,mlx5_1:127.0.0.2:mtu=4096"

static void usage(FILE *f)
{
    fprintf(f,
"usage: mlxd-capture [options]                      receive from a sensor bridge\n"
"       mlxd-capture --generate [options]           feed generated frames\n"
"       mlxd-capture --replay FILE.pcap [options]   feed a recorded capture\n"
"Receive sensor-bridge frames over RoCE v2 (Holoscan Sensor Bridge RoceReceiver semantics).\n"
"\n"
"modes: receive (neither --generate nor --replay): frames a sensor bridge sends on its own, on\n"
"a real NIC or (--emulate) the emulated one; --generate and --replay feed the frames themselves\n"
"into the emulated NIC.  An option marked [replay], [generate] or [replay, generate] applies to\n"
"those modes only: given in another mode it is a usage error.  Unmarked options apply to all.\n"
"\n"
"receiver (as the original's options):\n"
"  -d, --device NAME        RDMA device (default: the first mlx5 device; mlx5_0 emulated)\n"
"  -P, --port N             port (1)\n"
"      --frame-size BYTES   frame bytes the device sends (required to receive; generate: 4096;\n"
"                           replay: from the capture)\n"
"      --page-size BYTES    bytes from page to page (default round_up(frame,128)+128)\n"
"      --pages N            pages the device cycles through (default 2; replay: capture's)\n"
"      --metadata-offset B  metadata offset in a page (default round_up(frame,128))\n"
"      --peer-ip ADDR       the sensor bridge's IPv4 address (emulated: 127.0.0.1)\n"
"      --queue-size N       frames queued for the consumer (1)\n"
"  -n, --frames N           stop after N frames (replay/generate: the expected count)\n"
"      --duration SECONDS   stop after this long\n"
"      --busy | --event     monitor mode: busy-poll or completion events (default event)\n"
"      --legacy-imm         immediate = {psn[23:0], page[7:0]} (HSB-Lite 2510)\n"
"      --no-metadata        the device sends no metadata block (md_disable)\n"
"      --gpu                receive into CUDA device memory (cuMemAlloc on GPU 0, registered\n"
"                           through its dma-buf); frames are read back (cuMemcpyDtoH) to be\n"
"                           checked and saved.  Without a GPU: LD_LIBRARY_PATH=build/tests/fakecuda\n"
"                           (the tests' emulated NVIDIA driver; make fakecuda)\n"
"\n"
"sources:\n"
"      --emulate            use the emulated NIC (default when no mlx5 device exists;\n"
"                           implied by --replay and --generate)\n"
"      --replay FILE.pcap   feed a recorded capture into the emulated port\n"
"      --pace MODE          [replay] lockstep (default: next frame once the previous one\n"
"                           was received), fast, recorded\n"
"      --loops N            [replay] replay the capture N times\n"
"      --generate           feed generated frames into the emulated port\n"
"      --fps F              [generate] frame rate (0 = as fast as possible; default 60)\n"
"      --gen-metadata M     [generate] separate (default) | embedded | none\n"
"      --payload-size B     [generate] bytes per packet, 128..4096 in steps of 128\n"
"                           (default 1408 = MTU 1500)\n"
"      --target ADDR[:PORT] [replay, generate] where the frames are sent (default: the\n"
"                           receiver's address:4791)\n"
"\n"
"output:\n"
"      --save DIR           write each frame's bytes_written bytes to DIR/frame-NNNNNN.bin\n"
"                           (NNNNNN: the arrival index, from 0: received_frame_number - 1);\n"
"                           DIR must be a writable directory (made when missing); a frame that\n"
"                           cannot be written fails the run\n"
"      --record-cqes FILE   record every CQE of the receive CQ into FILE, a CQE fixture\n"
"                           (docs/fixture-format.md): replay it through a receiver in tests\n"
"                           (docs/testing-with-fixtures.md) or decode it with mlxd-cqe\n"
"      --json               one JSON object per frame and a final summary object\n"
"  -v, --print-frames       one text line per frame (decoded metadata, payload check)\n"
"      --no-verify          [replay, generate] do not check the payload pattern (word i of\n"
"                           frame f = (f<<24)|i)\n"
"      --consumer-delay-ms M  sleep M ms after each frame (a deliberately slow consumer)\n"
"      --timeout-ms M       [replay, generate] give up when no frame came for M ms after the\n"
"                           source ended (2000)\n"
"      --link-down F:MS     [replay, generate] pull the emulated port's link after F frames\n"
"                           were sent, for MS ms (the emulator's link control): the receiver\n"
"                           reports the events and the frames lost\n"
"  -q, --quiet              no live status line\n"
"  -h, --help\n"
"\n"
"numbers: decimal or 0x hexadecimal; a value outside the option's range is a usage error\n"
"(--pages/--queue-size 1..4096, --payload-size 128..4096 in 128s, --loops 1..2^32-1, ...)\n"
"\n"
"exit status: 0 all expected frames came, verified and (--save) were saved; 1 otherwise,\n"
"             also when the port's MTU is below the replayed or generated packets; 2 usage error\n"
"             (also an option given in a mode it does not apply to)\n");
}

struct cfg {
    const char *device;
    unsigned port;
    uint64_t frame_size, page_size, metadata_offset;
    unsigned pages, queue_size;
    bool frame_size_set, page_size_set, pages_set, md_off_set, queue_size_set;
    const char *peer_ip;
    uint64_t frames;
    double duration;
    uint32_t mode;
    bool legacy, no_metadata, gpu;
    bool emulate, generate;
    const char *replay;
    const char *pace;
    unsigned loops;
    double fps;
    uint32_t gen_md;
    uint32_t payload_size;
    const char *target;
    uint16_t target_port;       /* the :PORT of --target, 0 when it has none */
    const char *save;
    const char *record_cqes;
    bool json, print_frames, verify, quiet;
    unsigned consumer_delay_ms, timeout_ms;
    uint64_t link_down_at;      /* --link-down FRAME:MS: after FRAME frames were sent, */
    unsigned link_down_ms;      /* the emulated port goes down for MS ms (0: never) */
};

static volatile int g_stop;      /* mlxd_send_opts.stop: __atomic_load_n/__atomic_store_n */
static _Atomic uint64_t g_ready;     /* frames the monitor has queued (frame-ready callback) */

static volatile sig_atomic_t g_interrupted;   /* SIGINT/SIGTERM came */
static void on_signal(int sig) { (void)sig; g_interrupted = 1; __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE); }
static void on_frame_ready(void *ctx) { (void)ctx; atomic_fetch_add(&g_ready, 1); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mlxd-capture: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(try mlxd-capture --help)\n");
    va_end(ap);
    return 2;
}

/* The modes of a run: receive (neither --generate nor --replay: a sensor bridge sends on its
 * own), --generate, --replay. */
enum { MODE_RECEIVE = 1, MODE_GENERATE = 2, MODE_REPLAY = 4 };

/* The options that act in some modes only, and those modes; every other option acts in all
 * three.  Where each one acts: --pace and --loops feed mlxd_capture_replay's send options only
 * (mlxd_gen_run ignores loops, mlxd_capture.h); --fps, --gen-metadata and --payload-size feed
 * mlxd_gen_opts only; --target is where the replayed or generated packets go; --no-verify turns
 * off the payload check, which is made only on frames whose pattern is known (a capture's or the
 * generator's); --timeout-ms ends the run once the source has ended and no frame came, and in
 * receive mode there is no source.  In another mode the option would be ignored: a usage error
 * instead, since whoever gave it expected an effect. */
struct mode_option {
    int ch;                     /* getopt_long's value for it */
    const char *name;
    unsigned modes;             /* MODE_* where it acts */
};

static const char *modes_name(unsigned modes)
{
    switch (modes) {
    case MODE_REPLAY: return "--replay";
    case MODE_GENERATE: return "--generate";
    case MODE_REPLAY | MODE_GENERATE: return "--replay and --generate";
    default: return "receive mode";
    }
}

/* The one parser of the integer options: decimal, or hexadecimal after 0x (no octal: "010" is
 * ten, as a user reading it means).  The whole argument must be the number (strtoull alone
 * would skip blanks, take a sign and wrap "-1" to 2^64-1).  A valid number outside lo..hi,
 * negative ones included, is "out of range" rather than "not a number", so the message says
 * what to change.  Returns 0, or the usage exit status 2 after the message. */
static int parse_uint(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    const char *d = s[0] == '-' ? s + 1 : s;
    int base = 10;
    if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
        base = 16;
        d += 2;
    }
    bool digits = *d != 0;
    for (const char *q = d; *q; q++)
        if (!(base == 16 ? isxdigit((unsigned char)*q) : isdigit((unsigned char)*q)))
            digits = false;
    if (!digits)
        return usage_error("%s %s: not a number", opt, s);
    errno = 0;
    unsigned long long v = strtoull(d, NULL, base);
    bool zero = errno == 0 && v == 0;     /* "-0" is 0, which may be in range */
    if (errno == ERANGE || (s[0] == '-' && !zero) || v < lo || v > hi)
        return usage_error("%s %s: out of range %" PRIu64 "..%" PRIu64, opt, s, lo, hi);
    *out = v;
    return 0;
}

/* The one parser of the real-valued options (seconds, frames per second): a finite number at
 * least lo (above lo when !lo_ok), the whole argument.  what_ok completes the message of a
 * number below the bound ("must be > 0 seconds"). */
static int parse_real(const char *opt, const char *s, double lo, bool lo_ok, const char *what_ok,
                      double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || isspace((unsigned char)s[0]))
        return usage_error("%s %s: not a number", opt, s);
    if (!isfinite(v))
        return usage_error("%s %s: not a finite number", opt, s);
    if (errno == ERANGE)
        return usage_error("%s %s: out of range", opt, s);
    if (v < lo || (v == lo && !lo_ok))
        return usage_error("%s %s: must be %s", opt, s, what_ok);
    *out = v;
    return 0;
}

static bool udp_port_free(unsigned n, unsigned host)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4791),
                             .sin_addr.s_addr = htonl(0x7f000000u | n << 8 | host) };
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Sets MLXD_EMU_DEVICES to the first 127.0.<n>.1/.2 pair, n >= from, whose UDP port 4791 is free
 * (n = 0: 127.0.0.1/.2), and MLXD_CAPTURE_AUTO_ADDR=n (this program chose it).  The probe only
 * tells the pair was free a moment ago: the emulator binds when the device is opened, so two
 * runs started together can pick the same pair; the loser retries (retry_next_addresses()). */
static void pick_emu_addresses(unsigned from)
{
    char devs[160], num[16];
    unsigned n = from;
    for (; n < 250; n++)
        if (udp_port_free(n, 1) && udp_port_free(n, 2))
            break;
    if (n >= 250) n = from < 250 ? from : 0;
    if (n)
        snprintf(devs, sizeof devs, "mlx5_0:127.0.%u.1:mtu=4096,mlx5_1:127.0.%u.2:mtu=4096", n, n);
    else
        snprintf(devs, sizeof devs, "%s", EMU_DEFAULT_DEVICES);
    snprintf(num, sizeof num, "%u", n);
    setenv("MLXD_EMU_DEVICES", devs, 1);
    setenv("MLXD_CAPTURE_AUTO_ADDR", num, 1);
}

static char **g_argv;

/* The emulated device could not bind its address (another run took the pair after our probe):
 * re-executes with the next free pair when this program chose the addresses.  Returns only
 * when it does not retry. */
static void retry_next_addresses(void)
{
    const char *cur = getenv("MLXD_CAPTURE_AUTO_ADDR");
    if (!cur || !*cur || !g_argv) return;
    unsigned n = (unsigned)atoi(cur);
    if (n + 1 >= 250) return;
    pick_emu_addresses(n + 1);
    /* the emulator of the new image builds its own sysfs tree for the new addresses (this one
     * is swept once this process is gone, emu/kernel/sysfs_tree.c) */
    unsetenv("SYSFS_PATH");
    /* by its path, not /proc/self/exe: the kernel names the process after the file executed,
     * and ps or pgrep must still see mlxd-capture (the emulator of the new image removes this
     * image's tree: same pid, emu/kernel/sysfs_tree.c) */
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        execv(exe, g_argv);
    }
    execv("/proc/self/exe", g_argv);
}

/* Re-executes this program under the emulator (LD_PRELOAD of <exe dir>/../lib/libmlx5direct-emu.so). */
static int reexec_emulated(char **argv)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "mlxd-capture: cannot find my executable: %s\n", strerror(errno));
        return 1;
    }
    exe[n] = 0;
    char lib[PATH_MAX + 64];
    char *slash = strrchr(exe, '/');
    *slash = 0;
    snprintf(lib, sizeof lib, "%s/../lib/libmlx5direct-emu.so", exe);
    *slash = '/';
    if (access(lib, R_OK)) {
        fprintf(stderr, "mlxd-capture: the emulator %s is missing (run make)\n", lib);
        return 1;
    }
    const char *old = getenv("LD_PRELOAD");
    /* A sanitizer build's runtime must come first in the preload list. */
    const char *san = "";
    static const char *const inits[] = { "__asan_init", "__tsan_init" };
    for (unsigned i = 0; i < 2 && !*san; i++) {
        void *sym = dlsym(RTLD_DEFAULT, inits[i]);
        Dl_info di;
        if (sym && dladdr(sym, &di) && di.dli_fname && strstr(di.dli_fname, ".so") &&
            (!old || !strstr(old, di.dli_fname)))
            san = di.dli_fname;
    }
    size_t prelen = strlen(san) + strlen(lib) + (old ? strlen(old) : 0) + 3;
    char *pre = malloc(prelen);
    if (!pre) {
        fprintf(stderr, "mlxd-capture: out of memory\n");
        return 1;
    }
    snprintf(pre, prelen, "%s%s%s%s%s", san, *san ? ":" : "", lib, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", pre, 1);
    setenv(EMU_REEXEC_ENV, "1", 1);
    /* sensor bridges send 1408-byte payloads at Ethernet MTU 1500 and the original connects with
     * path MTU 4096: give the emulated ports a 4096-byte MTU unless the user configured them */
    if (!getenv("MLXD_EMU_DEVICES") && !getenv("MLXD_EMU_CONFIG")) {
        /* 127.0.0.1/.2 unless another emulated port already holds UDP 4791 there: then the
         * first free 127.0.<n>.1/.2 (all of 127/8 is this host's loopback) */
        pick_emu_addresses(0);
    }
    execv(exe, argv);
    fprintf(stderr, "mlxd-capture: exec %s: %s\n", exe, strerror(errno));
    return 1;
}

static bool emulated_now(void)
{
    const char *e = getenv(EMU_REEXEC_ENV);
    const char *p = getenv("LD_PRELOAD");
    return (e && !strcmp(e, "1")) || (p && strstr(p, "libmlx5direct-emu"));
}

/* ---------------------------------------------------------------------------------------- */

struct run {
    struct cfg *c;
    struct mlxd_receiver *rx;
    struct mlxd_capture *cap;
    struct mlxd_replay_map map;
    struct mlxd_send_opts so;
    struct mlxd_send_stats sst;
    int feed_rc;
    char feed_err[512];
    _Atomic bool feed_done;
    int monitor_rc;
    char monitor_err[512];
    char target_ip[64];
    uint16_t target_port;
    uint64_t expected;          /* frames expected (0 = unknown) */
    int link_state;             /* --link-down: 0 not yet, 1 down, 2 back up */
    double link_down_t;
    uint64_t gen_window;        /* --generate --fps 0: frames in flight (0: not paced) */
    uint64_t gen_lost;          /* frames the window gave up waiting for: taken as lost */
    uint8_t *buf;               /* the frame buffer (--gpu: the host copy to check frames in) */
    uint64_t dbuf;              /* --gpu: the device memory receiving the frames */
    size_t bufsize;
};

static _Atomic uint64_t g_taken;     /* frames the consumer has finished with */

/* Lock-step replay: frame k+1 goes out once frame k was received and (unless the consumer is
 * deliberately slow) handled by the consumer, so a replay loses nothing to pacing. */
static bool lockstep_wait(void *ctx, uint64_t frame)
{
    struct run *r = ctx;
    double deadline = now_s() + 1.0;
    _Atomic uint64_t *count = r->c->consumer_delay_ms ? &g_ready : &g_taken;
    while (atomic_load(count) < frame + 1 && now_s() < deadline && !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    (void)r;
    return !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE);
}

static void *monitor_main(void *arg)
{
    struct run *r = arg;
    pthread_setname_np(pthread_self(), "mlxd-monitor");
    r->monitor_rc = mlxd_receiver_blocking_monitor(r->rx);
    if (r->monitor_rc < 0)
        snprintf(r->monitor_err, sizeof r->monitor_err, "%s", mlxd_errmsg());
    return NULL;
}

/* The emulator's device number of --device (mlx5_N is the emulator's device N); -1 when the
 * name has none. */
static int emu_device_index(const struct cfg *c)
{
    const char *us = strrchr(c->device, '_');
    return us && us[1] >= '0' && us[1] <= '9' ? atoi(us + 1) : -1;
}

/* --link-down: the emulator's link control (mlxd_emu_port_set, found with dlsym), as pulling
 * the cable would: the port drops every packet while down and raises PORT_ERR / PORT_ACTIVE. */
static void set_emulated_link(const struct cfg *c, bool up)
{
    int (*port_set)(unsigned, bool) = (int (*)(unsigned, bool))dlsym(RTLD_DEFAULT, "mlxd_emu_port_set");
    int dev = emu_device_index(c);
    if (port_set && dev >= 0)
        port_set((unsigned)dev, up);
}

static void link_control(struct run *r, uint64_t sent)
{
    const struct cfg *c = r->c;
    if (!c->link_down_ms) return;
    if (r->link_state == 0 && sent >= c->link_down_at) {
        set_emulated_link(c, false);
        r->link_down_t = now_s();
        r->link_state = 1;
    } else if (r->link_state == 1 && now_s() - r->link_down_t >= c->link_down_ms / 1000.0) {
        set_emulated_link(c, true);
        r->link_state = 2;
    }
}

/* --generate --fps 0 ("as fast as possible") sends as fast as the port completes the frames:
 * frame k + 1 goes out once the monitor has completed frame k + 1 - gen_window, as a lossless
 * RoCE network's pause frames (PFC) hold a sender while the receiving port's buffer is full.
 * Unpaced, the generator (a UDP GSO send per frame) outran the emulated port on a loaded host:
 * its UDP socket overflowed, or the port ran out of receives while the monitor waited for a
 * CPU, and frames were lost (issue 18).  The window is on completions, not on the consumer:
 * a slow consumer is still lapped.  A frame that never completes (lost on the wire: a fault,
 * the link down) would shrink the window for good: after GEN_WINDOW_WAIT_S without a
 * completion the frames missing are taken as lost (gen_lost), and taken back as they come. */
#define GEN_WINDOW_WAIT_S 0.02
static void gen_window_wait(struct run *r, uint64_t frame)
{
    double deadline = 0;
    uint64_t seen = atomic_load(&g_ready), last = seen;
    if (r->gen_lost > frame + 1 - seen)      /* some taken as lost came after all */
        r->gen_lost = seen > frame + 1 ? 0 : frame + 1 - seen;
    while (seen + r->gen_lost + r->gen_window < frame + 2 && !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        if (seen != last) { last = seen; deadline = 0; }
        if (!deadline) deadline = now_s() + GEN_WINDOW_WAIT_S;
        else if (now_s() > deadline) { r->gen_lost = frame + 2 - r->gen_window - seen; break; }
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
        seen = atomic_load(&g_ready);
    }
}

/* After each frame sent: the link control, then lock-step pacing or the generator's window. */
static bool sent_frame(void *ctx, uint64_t frame)
{
    struct run *r = ctx;
    link_control(r, frame + 1);
    if (r->c->replay && !strcmp(r->c->pace, "lockstep") && r->link_state != 1)
        return lockstep_wait(ctx, frame);
    if (r->gen_window && r->link_state != 1)
        gen_window_wait(r, frame);
    return !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE);
}

static void *feed_main(void *arg)
{
    struct run *r = arg;
    struct cfg *c = r->c;
    pthread_setname_np(pthread_self(), "mlxd-feed");
    if (c->replay) {
        r->feed_rc = mlxd_capture_replay(r->cap, &r->map, &r->so, &r->sst);
    } else {
        struct mlxd_gen_opts g = { .sz = sizeof g, .frame_size = c->frame_size,
                                   .payload_size = c->payload_size, .metadata = c->gen_md,
                                   .fps = c->fps, .frames = c->frames, .first_page = 1,
                                   .imm_layout = c->legacy ? MLXD_HSB_IMM_LEGACY_8_24 : MLXD_HSB_IMM_12_20 };
        r->feed_rc = mlxd_gen_run(&r->map, &g, &r->so, &r->sst);
    }
    if (r->feed_rc < 0)
        snprintf(r->feed_err, sizeof r->feed_err, "%s", mlxd_errmsg());
    if (r->link_state == 1) {    /* the source ended while the link was down: bring it back */
        double left = c->link_down_ms / 1000.0 - (now_s() - r->link_down_t);
        if (left > 0) usleep((useconds_t)(left * 1e6));
        set_emulated_link(c, true);
        r->link_state = 2;
    }
    atomic_store(&r->feed_done, true);
    return NULL;
}


/* 0 when buf holds what the capture's packets write (mapped by m), 1 when not, -1 if it cannot
 * tell (a write outside the buffer).  *nbytes: the bytes the capture writes (each counted once,
 * the last write wins); *ndiff: how many of them differ in buf.  Both are counted over the whole
 * image, not up to the first difference, so the summary gives the real extent. */
static int check_image(const struct mlxd_capture *cap, const struct mlxd_replay_map *m,
                       const uint8_t *buf, size_t size, uint64_t *nbytes, uint64_t *ndiff)
{
    uint8_t *img = calloc(1, size), *mask = calloc(1, size);
    *nbytes = *ndiff = 0;
    if (!img || !mask) { free(img); free(mask); return -1; }
    for (size_t i = 0; i < cap->npackets; i++) {
        const struct mlxd_roce_pkt *h = &cap->pkts[i].hdr;
        if (!(h->hdrs & MLXD_ROCE_HAS_RETH) || h->reth_va < cap->geo.base_va) continue;
        uint64_t rel = h->reth_va - cap->geo.base_va;
        unsigned __int128 off128 = (unsigned __int128)(rel / cap->geo.page_size) * m->page_size +
                                   rel % cap->geo.page_size;
        if (off128 > size || h->payload_len > size - (size_t)off128) { free(img); free(mask); return -1; }
        size_t off = (size_t)off128;
        memcpy(img + off, h->payload, h->payload_len);
        memset(mask + off, 1, h->payload_len);
    }
    for (size_t k = 0; k < size; k++)
        if (mask[k]) {
            (*nbytes)++;
            if (img[k] != buf[k]) (*ndiff)++;
        }
    free(img);
    free(mask);
    return *ndiff ? 1 : 0;
}

/* A generated frame's payload failed mlxd_hsb_payload_check(): true when every differing word
 * is still the pattern's word i (low 24 bits i & 0xFFFFFF) but tagged with another frame a
 * sender could have sent (top 8 bits: that frame's number & 0xFF; never a block of zeros), i.e.
 * the device rewrote (part
 * of) the page with a later frame before or while it was read: with no flow control the sender
 * may lap the consumer, and mlxd_receiver_frame_check() cannot see a write whose completion the
 * CPU has not polled yet.  sent: frames the generator numbers 0..sent-1 (0 = unknown).  False
 * when any word has wrong low bits (a real payload failure). */
static bool rewritten_by_device(const uint8_t *p, size_t len, uint32_t frame, uint64_t sent)
{
    uint32_t own = frame & 0xFFu;
    size_t words = len / 4;
    bool other = false;
    for (size_t i = 0; i <= words; i++) {
        size_t nb = i < words ? 4 : len % 4;
        if (!nb) break;
        const uint8_t *w = p + 4 * i;
        bool low_ok = true;     /* bytes 1..3 of the big-endian word: i's low 24 bits */
        for (size_t k = 1; k < nb; k++)
            if (w[k] != (uint8_t)((uint32_t)i >> (24 - 8 * k)))
                low_ok = false;
        uint32_t tag = w[0];
        if (tag == own && low_ok) continue;
        if (!low_ok || tag == own) return false;
        /* a plausible other frame: one the generator numbers below sent (mod 256 only when it
         * sends fewer than 256 frames can an implausible tag be told) */
        if (sent && sent < 256 && tag >= sent) return false;
        other = true;
    }
    return other;
}

/* The largest payload (bytes) one packet of this run's source carries: a replayed capture's
 * biggest packet; for the generator an upper bound, min(payload size, the frame's bytes up to
 * and with its metadata block) (mlxd_gen_run cuts a frame into payload-size packets and sends
 * the metadata either alone, 128 bytes, or with the frame's last bytes when that fits in one
 * packet). */
static uint32_t source_largest_payload(const struct cfg *c, const struct mlxd_capture *cap)
{
    if (cap) {
        uint32_t m = 0;
        for (size_t i = 0; i < cap->npackets; i++)
            if (cap->pkts[i].hdr.payload_len > m) m = cap->pkts[i].hdr.payload_len;
        return m;
    }
    uint64_t psize = c->payload_size ? c->payload_size : 1408;   /* mlxd_gen_opts default */
    uint64_t frame = mlxd_hsb_metadata_offset(c->frame_size) + MLXD_HSB_METADATA_SIZE;
    return (uint32_t)(frame < psize ? frame : psize);
}

/* A port takes no packet longer than its MTU (the emulator, like a NIC, drops it as malformed),
 * and a sensor bridge cannot cut its packets smaller: its payload size is fixed in the FPGA
 * (DP_PACKET_SIZE) or in the capture.  So a port MTU below the source's packets loses every
 * frame; say so before sending rather than after a run of "payload BAD".  This happens when the
 * user preloads the emulator without mtu=4096 (its ports default to 1024).  Returns 0 when the
 * packets fit (or the MTU cannot be read: the run then shows what happens), 1 after the message. */
static int check_port_mtu(const struct cfg *c, const struct mlxd_capture *cap)
{
    uint32_t need = source_largest_payload(c, cap);
    struct mlxd_nic *nic = NULL;
    struct mlxd_port_info pi;
    struct mlxd_open_opts oo = { .sz = sizeof oo, .port = c->port };
    if (mlxd_open(c->device, &oo, &nic) < 0) {
        fprintf(stderr, "mlxd-capture: warning: cannot check the port MTU (%s): a port MTU below "
                "the %u-byte packets would lose every frame\n", mlxd_errmsg(), need);
        return 0;
    }
    int rc = mlxd_port_info(nic, &pi);
    mlxd_close(nic);
    if (rc < 0 || pi.active_mtu_bytes >= need)
        return 0;
    const char *what = cap ? "replayed capture" : "generator";
    fprintf(stderr, "mlxd-capture: port MTU %u of %s is below the %u-byte packets the %s sends",
            pi.active_mtu_bytes, c->device, need, what);
    if (emulated_now()) {
        const char *devs = getenv("MLXD_EMU_DEVICES");
        if (getenv("MLXD_EMU_CONFIG"))
            fprintf(stderr, "; give the devices of MLXD_EMU_CONFIG mtu=4096");
        else if (devs && *devs)
            fprintf(stderr, "; add :mtu=4096 to each device of MLXD_EMU_DEVICES=%s", devs);
        else
            fprintf(stderr, "; set MLXD_EMU_DEVICES=%s", EMU_DEFAULT_DEVICES);
        const char *own = getenv(EMU_REEXEC_ENV);
        if (!own || strcmp(own, "1"))
            fprintf(stderr, " (or run without LD_PRELOAD: mlxd-capture starts the emulator itself, "
                    "with MTU 4096)");
    } else if (!cap && need > 1024) {
        fprintf(stderr, "; raise the port's MTU or lower --payload-size");
    }
    fprintf(stderr, "\n");
    return 1;
}

/* A capture's numbers are input like the options: its geometry in the options' ranges, and a
 * receive buffer bounded by the capture's size (mlxd_capture_buffer_bound) unless --pages and
 * --page-size both say otherwise.  Returns 0, or 1 after the message (the capture is wrong,
 * not an option: not a usage error). */
static int check_capture(const struct cfg *c, const struct mlxd_capture *cap)
{
    if (mlxd_capture_geometry_check(cap) < 0) {
        fprintf(stderr, "mlxd-capture: %s: %s\n", c->replay, mlxd_errmsg() + strlen("mlxd_capture_geometry_check: "));
        return 1;
    }
    if (!strcmp(c->pace, "recorded") && mlxd_capture_pace_check(cap, 1.0) < 0) {
        fprintf(stderr, "mlxd-capture: %s: %s (use --pace lockstep or fast)\n", c->replay,
                mlxd_errmsg() + strlen("mlxd_capture_pace_check: "));
        return 1;
    }
    uint64_t bound = mlxd_capture_buffer_bound(cap);
    unsigned __int128 want = (unsigned __int128)(c->pages_set ? c->pages : cap->geo.pages) *
                             (c->page_size_set ? c->page_size : cap->geo.page_size);
    if (!(c->pages_set && c->page_size_set) && want > bound) {
        fprintf(stderr, "mlxd-capture: %s: its geometry asks for %u pages x %" PRIu64 " bytes, more than "
                "the %" PRIu64 " bytes a capture of this size may (max(256 MiB, 4 x its RoCE bytes)); "
                "give --pages and --page-size to allocate that much\n", c->replay,
                c->pages_set ? c->pages : cap->geo.pages,
                c->page_size_set ? c->page_size : cap->geo.page_size, bound);
        return 1;
    }
    return 0;
}

static const char *state_name(int s)
{
    return s == MLXD_FRAME_INTACT ? "intact" : s == MLXD_FRAME_AT_RISK ? "at_risk"
         : s == MLXD_FRAME_OVERWRITTEN ? "overwritten" : "unknown";
}

/* What the consumer saw (run's frame loop). */
struct tally {
    uint64_t got, bad_payload, bad_overwritten, checked, bytes, last_fn, overwritten_read;
    uint64_t save_failed;       /* consumed frames --save could not write */
};

/* What the run ended with. */
struct outcome {
    struct mlxd_receiver_stats st;
    struct mlxd_emu_nic_stats es;   /* the emulated port's counters, when have_es */
    bool have_es;
    int image;                      /* check_image's verdict; -1 not made */
    uint64_t image_bytes, image_diff;
    double elapsed;
    char delay_json[256];           /* the summary's "nic_to_host_delay_us" member (delay_report) */
};

/* Close's drain counts what completed after the monitor's last poll (at_close, with those CQEs'
 * hw_drops and errors): the frame counters as close left them, the port's counters as read
 * while the device was open (*st on entry). */
static void after_close_stats(struct mlxd_receiver *rx, struct mlxd_receiver_stats *st)
{
    struct mlxd_receiver_stats fin;
    if (mlxd_receiver_stats(rx, &fin) < 0) return;
    fin.rx_write_requests = st->rx_write_requests;
    fin.rx_write_requests_valid = st->rx_write_requests_valid;
    fin.out_of_buffer = st->out_of_buffer;
    fin.out_of_sequence = st->out_of_sequence;
    fin.hw_counters_valid = st->hw_counters_valid;
    fin.link_down_ns = st->link_down_ns;
    *st = fin;
}

/* Where every frame the source sent went (docs/receiver.md "Where every frame went"): the
 * receiver's causes up to its newest frame, and the frames sent after that which never came
 * (out_of_buffer beyond the CQEs' hw_drops: no receive posted; the rest lost before the port). */
struct account {
    uint64_t sent;                  /* frames the generator or replay sent (0: unknown) */
    uint64_t tail_no_recv, tail_lost;
};

static struct account account_of(const struct run *R, const struct mlxd_receiver_stats *st)
{
    struct account a = { .sent = R->c->replay || R->c->generate ? R->sst.frames : 0 };
    uint64_t seen = st->frames + st->errors + st->bad_page + st->hw_drops + st->lost + st->at_close;
    uint64_t tail = a.sent > seen ? a.sent - seen : 0;
    uint64_t oob = st->hw_counters_valid && st->out_of_buffer > st->hw_drops
                   ? st->out_of_buffer - st->hw_drops : 0;
    a.tail_no_recv = oob < tail ? oob : tail;
    a.tail_lost = tail - a.tail_no_recv;
    return a;
}

/* The frames that did not arrive intact for a reason the receiver names: any of them fails the
 * run. */
static bool frames_wrong(const struct mlxd_receiver_stats *st, const struct account *a)
{
    /* interrupted: the frames sent after the last one received may still have been in flight */
    bool tail = !g_interrupted && (a->tail_no_recv || a->tail_lost);
    /* not out_of_sequence alone: the port's counter covers every QP of the port, other
     * processes' included (a shared device); it is named when the run fails */
    return st->lost || st->hw_drops || tail || st->missing_metadata ||
           st->short_frames || st->long_frames || st->qp_errors || st->cq_errors || st->device_fatal;
}

static void print_accounting(const struct run *R, const struct mlxd_receiver_stats *st,
                             const struct account *a)
{
    if (a->sent) {
        printf("accounting: %" PRIu64 " frames sent = %" PRIu64 " received + %" PRIu64 " lost before "
               "the port (%" PRIu64 " while the link was down) + %" PRIu64 " dropped for want of a "
               "posted receive + %" PRIu64 " error completions + %" PRIu64 " bad pages + %" PRIu64
               " lost and %" PRIu64 " dropped for want of a receive after the last frame received%s",
               a->sent, st->frames, st->lost, st->lost_link_down, st->hw_drops, st->errors, st->bad_page,
               a->tail_lost, a->tail_no_recv, st->at_close ? "" : "\n");
        if (st->at_close)           /* received while the receiver closed: not delivered */
            printf(" + %" PRIu64 " arrived while the receiver closed\n", st->at_close);
    } else {
        printf("accounting: %" PRIu64 " received, %" PRIu64 " lost before the port (%" PRIu64
               " while the link was down), %" PRIu64 " dropped for want of a posted receive, %" PRIu64
               " error completions, %" PRIu64 " bad pages%s", st->frames, st->lost, st->lost_link_down,
               st->hw_drops, st->errors, st->bad_page, st->at_close ? "" : "\n");
        if (st->at_close)
            printf(", %" PRIu64 " arrived while the receiver closed\n", st->at_close);
    }
    printf("of the %" PRIu64 " received: %" PRIu64 " without metadata (all-zero block), %" PRIu64
           " shorter and %" PRIu64 " longer than --frame-size %" PRIu64 "", st->frames,
           st->missing_metadata, st->short_frames, st->long_frames, R->c->frame_size);
    if (st->hw_counters_valid)
        printf("; port hw_counters: out_of_buffer %" PRIu64 ", out_of_sequence %" PRIu64,
               st->out_of_buffer, st->out_of_sequence);
    if (st->events)
        printf("; events: %" PRIu64 " (port down %" PRIu64 ", up %" PRIu64 ", %.1f ms down)", st->events,
               st->port_down, st->port_up, st->link_down_ns / 1e6);
    printf("\n");
}

/* The FAILED line's causes that name a frame count and what to change. */
static void print_frame_causes(const struct run *R, const struct mlxd_receiver_stats *st,
                               const struct account *a)
{
    const struct cfg *c = R->c;
    if (st->lost)
        printf(" %" PRIu64 " frames lost before the port (gaps in the frame numbers%s);", st->lost,
               st->lost_link_down ? ", some while the link was down" : "");
    if (a->tail_lost)
        printf(" %" PRIu64 " frames sent after the last one received never arrived;", a->tail_lost);
    if (st->out_of_sequence)
        printf(" %" PRIu64 " packets arrived after a PSN gap (port hw_counters out_of_sequence: packets lost "
               "before the port, so frames may be incomplete);", st->out_of_sequence);
    if (st->hw_drops || a->tail_no_recv)
        printf(" %" PRIu64 " frames dropped by the port for want of a posted receive;",
               st->hw_drops + a->tail_no_recv);
    if (st->missing_metadata) {
        printf(" %" PRIu64 " frames had no metadata at offset %" PRIu64 " (an all-zero block): the device's "
               "frames are not %" PRIu64 " bytes", st->missing_metadata, c->metadata_offset, c->frame_size);
        if (R->cap && R->cap->geo.frame_size && R->cap->geo.frame_size != c->frame_size)
            printf("; the capture's frames are %" PRIu64 " bytes: use --frame-size %" PRIu64
                   " (or leave --frame-size, --page-size and --metadata-offset out)",
                   R->cap->geo.frame_size, R->cap->geo.frame_size);
        printf(";");
    }
    if (st->short_frames || st->long_frames)
        printf(" %" PRIu64 " frames carried bytes_written %" PRIu64 ", not --frame-size %" PRIu64
               ": the device sends %" PRIu64 "-byte frames, use --frame-size %" PRIu64 ";",
               st->short_frames + st->long_frames, st->last_bytes_written, c->frame_size,
               st->last_bytes_written, st->last_bytes_written);
}

static void print_json_summary(const struct run *R, const struct tally *T, const struct outcome *o,
                               const struct account *a, bool ok)
{
    const struct mlxd_receiver_stats *st = &o->st;
    printf("{\"summary\":true,\"frames_received\":%" PRIu64 ",\"frames_consumed\":%" PRIu64
           ",\"expected\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"replaced\":%" PRIu64
           ",\"overwritten\":%" PRIu64 ",\"overwritten_after_read\":%" PRIu64 ",\"errors\":%" PRIu64
           ",\"bad_page\":%" PRIu64 ",\"payload_checked\":%" PRIu64 ",\"payload_failures\":%" PRIu64 ",\"payload_overwritten\":%" PRIu64
           ",\"packets_sent\":%" PRIu64 ",\"send_errors\":%" PRIu64 ",\"consumer_wakeups\":%" PRIu64 ",\"last_frame_number\":%" PRIu64
           ",\"rx_write_requests\":%s%" PRIu64 "%s,\"save_failures\":%" PRIu64,
           st->frames, T->got, R->expected, st->dropped, st->replaced, st->overwritten, st->overwritten_after_read,
           st->errors + st->bad_page, st->bad_page, T->checked, T->bad_payload, T->bad_overwritten, R->sst.packets,
           R->sst.send_errors, st->consumer_wakeups, st->last_frame_number,
           st->rx_write_requests_valid ? "" : "null", st->rx_write_requests_valid ? st->rx_write_requests : 0,
           st->rx_write_requests_valid ? "" : "", T->save_failed);
    printf(",\"frames_sent\":%" PRIu64 ",\"lost\":%" PRIu64 ",\"lost_link_down\":%" PRIu64 ",\"hw_drops\":%" PRIu64
           ",\"lost_after_last\":%" PRIu64 ",\"no_receive_after_last\":%" PRIu64 ",\"missing_metadata\":%" PRIu64
           ",\"short_frames\":%" PRIu64 ",\"long_frames\":%" PRIu64 ",\"out_of_sequence\":%" PRIu64 ",\"events\":%" PRIu64 ",\"port_down\":%" PRIu64
           ",\"port_up\":%" PRIu64 ",\"link_down_ms\":%.3f,\"at_close\":%" PRIu64, a->sent, st->lost, st->lost_link_down, st->hw_drops,
           a->tail_lost, a->tail_no_recv, st->missing_metadata, st->short_frames, st->long_frames,
           st->out_of_sequence, st->events,
           st->port_down, st->port_up, st->link_down_ns / 1e6, st->at_close);
    printf("%s,\"seconds\":%.3f,\"ok\":%s}\n", o->delay_json, o->elapsed, ok ? "true" : "false");
}

static void print_text_summary(const struct run *R, const struct tally *T, const struct outcome *o,
                               const struct account *a, bool ok)
{
    const struct cfg *c = R->c;
    const struct mlxd_receiver_stats *st = &o->st;
    printf("summary: %" PRIu64 " frames received (%" PRIu64 " expected), %" PRIu64 " consumed, %" PRIu64
           " dropped, %" PRIu64 " replaced before the first read, %" PRIu64 " overwritten (PSN), %" PRIu64
           " overwritten after read, %" PRIu64 " error completions, %" PRIu64 " bad pages; payload %" PRIu64
           " checked, %" PRIu64 " bad, %" PRIu64 " rewritten by the device before or while read; %.1f fps over %.2f s",
           st->frames, R->expected, T->got, st->dropped, st->replaced, st->overwritten, st->overwritten_after_read,
           st->errors, st->bad_page, T->checked, T->bad_payload, T->bad_overwritten,
           o->elapsed > 0 ? T->got / o->elapsed : 0.0, o->elapsed);
    if (st->rx_write_requests_valid) printf("; rx_write_requests %" PRIu64, st->rx_write_requests);
    if (c->save) printf("; %" PRIu64 " saved to %s, %" PRIu64 " could not be saved", T->got - T->save_failed, c->save, T->save_failed);
    printf("\n");
    print_accounting(R, st, a);
    const struct mlxd_emu_nic_stats *es = &o->es;
    if (o->have_es && (!ok || c->print_frames))
        printf("emulated port: %" PRIu64 " packets in, %" PRIu64 " bad iCRC, %" PRIu64 " malformed, %" PRIu64
               " unknown QP, %" PRIu64 " bad QP state, %" PRIu64 " out of sequence, %" PRIu64 " dropped (UC), %" PRIu64
               " dropped by the host before the port (UDP socket buffer full: the machine is loaded)\n",
               es->rx_pkts, es->rx_bad_icrc, es->rx_malformed, es->rx_unknown_qp, es->rx_bad_state,
               es->rx_out_of_seq, es->rx_dropped_uc, es->rx_dropped_socket);
    if (o->image == 0)
        printf("buffer image: the %" PRIu64 " bytes the capture writes are in place, byte for byte\n",
               o->image_bytes);
    else if (o->image > 0)
        printf("buffer image: the %" PRIu64 " bytes the capture writes are NOT all in place (%" PRIu64
               " differ)\n", o->image_bytes, o->image_diff);
    if (g_interrupted) {
        printf("interrupted: %" PRIu64 " frames received%s\n", st->frames,
               R->expected && st->frames < R->expected ? ", fewer than expected" : "");
        return;
    }
    if (ok) {
        printf("OK: all expected frames received and verified\n");
        return;
    }
    printf("FAILED:");
    if (R->monitor_rc < 0) printf(" the monitor failed (%s);", R->monitor_err);
    if (R->feed_rc < 0) printf(" the %s failed;", c->replay ? "replay" : "generator");
    if (st->frames < R->expected)
        printf(" %" PRIu64 " of %" PRIu64 " expected frames received;", st->frames, R->expected);
    if (!R->expected && !c->replay && T->got == 0) printf(" no frame received;");
    print_frame_causes(R, st, a);
    if (T->bad_payload) printf(" %" PRIu64 " frames failed the payload check;", T->bad_payload);
    if (st->errors) printf(" %" PRIu64 " error completions;", st->errors);
    if (o->image > 0) printf(" the buffer image differs from the capture;");
    if (T->save_failed)
        printf(" %" PRIu64 " of %" PRIu64 " frames could not be saved to %s;", T->save_failed, T->got, c->save);
    printf("\n");
}

/* Prints the summary; returns the exit status. */
static int report(const struct run *R, const struct tally *T, const struct outcome *o)
{
    const struct cfg *c = R->c;
    const struct mlxd_receiver_stats *st = &o->st;
    struct account a = account_of(R, st);
    bool wrong = frames_wrong(st, &a);
    bool ok = R->monitor_rc >= 0 && R->feed_rc >= 0 && T->bad_payload == 0 && st->errors == 0 &&
              st->frames >= R->expected && (R->expected || c->replay || T->got > 0) && o->image <= 0 &&
              T->save_failed == 0 && !wrong;
    if (c->json)
        print_json_summary(R, T, o, &a, ok);
    else
        print_text_summary(R, T, o, &a, ok);
    fflush(stdout);
    if (g_interrupted) {
        /* stopped by the user: a failure only when frames were expected and did not all come
         * (or something else failed) */
        bool iok = R->monitor_rc >= 0 && R->feed_rc >= 0 && T->bad_payload == 0 && st->errors == 0 &&
                   st->frames >= R->expected && o->image <= 0 && T->save_failed == 0 && !wrong;
        return iok ? 0 : 1;
    }
    return ok ? 0 : 1;
}

/* The receiver's async events, printed as they happen (on the monitor thread). */
static void on_event(void *ctx, const struct mlxd_receiver_event *ev)
{
    const struct cfg *c = ctx;
    if (c->json) {
        printf("{\"event\":\"%s\",\"kind\":%u,\"kernel_type\":%u,\"time_s\":%" PRId64 ",\"time_ns\":%u,"
               "\"frames\":%" PRIu64 ",\"down_ms\":%.3f,\"frames_lost\":%" PRIu64 "}\n",
               mlxd_receiver_event_name(ev->kind), ev->kind, ev->kernel_type, ev->time_s, ev->time_ns,
               ev->frames, ev->down_ns / 1e6, ev->frames_lost);
        fflush(stdout);
        return;
    }
    fprintf(stderr, "%smlxd-capture: event: ", !c->quiet && isatty(2) ? "\r\033[K" : "");
    if (ev->kind == MLXD_RX_EVENT_RESUMED)
        fprintf(stderr, "frames resumed after %" PRIu64 " frames: %" PRIu64 " frames lost while the link "
                "was down (%.1f ms)", ev->frames, ev->frames_lost, ev->down_ns / 1e6);
    else
        fprintf(stderr, "%s after %" PRIu64 " frames", mlxd_receiver_event_name(ev->kind), ev->frames);
    if (ev->kind == MLXD_RX_EVENT_PORT_UP)
        fprintf(stderr, "; the link was down %.1f ms", ev->down_ns / 1e6);
    if (ev->kind == MLXD_RX_EVENT_OTHER)
        fprintf(stderr, " (ib_event_type %u)", ev->kernel_type);
    fprintf(stderr, "\n");
}

/* Writes a consumed frame to dir/frame-NNNNNN.bin; false when it cannot (the first failure says
 * why; the others, as a full disk fails every frame after it, are counted in the summary). */
static bool save_frame(const char *dir, uint64_t index, const uint8_t *data, uint64_t nbytes)
{
    static bool told;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/frame-%06" PRIu64 ".bin", dir, index);
    errno = 0;
    FILE *fp = fopen(path, "wb");
    int err = fp ? 0 : errno;
    if (fp && fwrite(data, 1, nbytes, fp) != nbytes) err = errno ? errno : EIO;
    /* a full disk shows only when the buffered bytes are flushed */
    if (fp && fclose(fp) && !err) err = errno ? errno : EIO;
    if (!err) return true;
    if (!told) fprintf(stderr, "mlxd-capture: cannot write %s: %s\n", path, strerror(err));
    told = true;
    if (fp) unlink(path);       /* no truncated frame file */
    return false;
}

/* The frame buffer: host memory, or (--gpu) device memory with a host copy to check frames in. */
static int frame_memory(const struct cfg *c, size_t size, uint8_t **buf, uint64_t *dbuf)
{
    if (size == 0 || posix_memalign((void **)buf, 4096, size)) {
        *buf = NULL;
        fprintf(stderr, "mlxd-capture: cannot allocate %zu bytes for %u pages\n", size, c->pages);
        return -1;
    }
    memset(*buf, 0, size);
    if (c->gpu && gpu_buffer_alloc(size, dbuf) < 0) {
        fprintf(stderr, "mlxd-capture: %s\n", mlxd_errmsg());
        return -1;
    }
    return 0;
}

/* --gpu: copies n device bytes at offset off into the host copy; false (said) when it fails. */
static bool from_gpu(const struct cfg *c, uint8_t *buf, uint64_t dbuf, uint64_t off, uint64_t n)
{
    if (!c->gpu || gpu_buffer_read(buf + off, dbuf + off, n) == 0)
        return true;
    fprintf(stderr, "mlxd-capture: %s\n", mlxd_errmsg());
    return false;
}

/* The NIC-to-host delay of each frame: received (CLOCK_REALTIME when the monitor saw the
 * completion) - nic_ns (the NIC's clock when it completed the frame; mlxd_receiver.h).  The
 * distribution covers the first DELAYS_MAX frames (8 MiB), the count says how many had one. */
#define DELAYS_MAX (1u << 20)
struct delays { double *us; size_t n, seen; };

/* The frame's delay in us (NAN when the NIC gave no time), kept for the summary. */
static double delay_add(struct delays *d, const struct mlxd_receiver_frame *f)
{
    if (!f->nic_ns) return NAN;
    int64_t host = f->received_s * 1000000000ll + f->received_ns;
    double us = (double)(host - (int64_t)f->nic_ns) / 1e3;
    d->seen++;
    if (!d->us && !(d->us = malloc(DELAYS_MAX * sizeof *d->us))) return us;
    if (d->n < DELAYS_MAX) d->us[d->n++] = us;
    return us;
}

/* Text: one line.  JSON: the summary's "nic_to_host_delay_us" member, written into j. */
static void delay_report(struct delays *d, bool json, char *j, size_t jlen)
{
    struct bench_stats s = bench_stats_of(d->us, d->n);
    if (json)
        snprintf(j, jlen, ",\"nic_to_host_delay_us\":{\"frames\":%zu,\"min\":%.3f,\"median\":%.3f,\"avg\":%.3f,"
                 "\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f}", d->n, s.min, s.typical, s.avg, s.p99, s.p999, s.max);
    else if (d->n)
        printf("NIC-to-host delay over %zu frames (us): min %.3f  median %.3f  avg %.3f  p99 %.3f  p99.9 %.3f  "
               "max %.3f\n", d->n, s.min, s.typical, s.avg, s.p99, s.p999, s.max);
    else
        printf("NIC-to-host delay: the NIC gave no arrival times\n");
    free(d->us);
    d->us = NULL;
}

/* --consumer-delay-ms: sleeps ms in 10 ms slices, so that a Ctrl-C ends even a long delay at once. */
static void consumer_delay(unsigned ms)
{
    for (unsigned done = 0; done < ms && !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE);) {
        unsigned step = ms - done < 10 ? ms - done : 10;
        struct timespec ts = { 0, (long)step * 1000000L };
        nanosleep(&ts, NULL);
        done += step;
    }
}

/* The exit status when mlxd_receiver_start refuses: a usage error (2) when an option is at
 * fault; a geometry that came from the capture alone is the capture's fault (1). */
static int start_failure_status(const struct cfg *c, int rc)
{
    bool from_capture = c->replay && !c->frame_size_set && !c->page_size_set && !c->pages_set &&
                        !c->md_off_set && !c->queue_size_set;
    return rc == -EINVAL && !from_capture ? 2 : 1;
}

/* A capture that is not sensor frame traffic: an RC or UC SEND stream is replayed into a QP set
 * up to receive it, and what arrived is reported; anything else (READs, WRITEs of another
 * conversation, atomics ...) is refused with one line naming what it holds and why
 * (receiver/mlxd_capture_classify.h).  Returns -1 for sensor traffic (replay it as frames), else
 * the exit status; frees the capture then. */
static int foreign_capture(const struct cfg *c, struct mlxd_capture *cap)
{
    struct mlxd_capture_kind kind;
    if (mlxd_capture_classify(cap, &kind) < 0 || kind.hsb) return -1;
    char what[2048];
    mlxd_capture_describe(&kind, what, sizeof what);
    struct mlxd_conversation_report r;
    int rc = mlxd_capture_replay_conversation(cap, &kind, c->device, 4791, &r);
    mlxd_capture_free(cap);
    if (rc == -EADDRINUSE && emulated_now()) retry_next_addresses();
    if (rc == -EPROTONOSUPPORT || rc == -EFBIG) {
        const char *why = strstr(mlxd_errmsg(), ": ");
        fprintf(stderr, "mlxd-capture: %s: not replayed: not Holoscan Sensor Bridge traffic (UC RDMA WRITE frames "
                "into a receiver's pages) but %s; and not a SEND stream a QP can receive either%s\n",
                c->replay, what, why ? why : "");
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "mlxd-capture: %s: %s\n", c->replay, mlxd_errmsg());
        return 1;
    }
    bool all = r.arrived == r.messages && !r.errors;
    printf("mlxd-capture: %s: %s\nreplayed as a SEND conversation into %s QP 0x%06x on %s (captured QP 0x%06x, "
           "%" PRIu64 " request packets): %" PRIu64 " of %u messages arrived, %" PRIu64 " bytes, %" PRIu64
           " with immediate, %" PRIu64 " error completions%s%s\n", c->replay, what,
           r.transport == MLXD_QP_RC ? "an RC" : "a UC", r.local_qpn, c->device, r.captured_qpn, r.packets,
           r.arrived, r.messages, r.bytes, r.with_imm, r.errors, r.errors ? ", the first: " : "",
           r.errors ? mlxd_wc_status_name(r.first_error) : "");
    printf("%s\n", all ? "OK: every message of the capture arrived" : "FAILED: messages missing or in error");
    return all ? 0 : 1;
}

/* --replay: loads the capture, takes the geometry it implies where no option set it, and says
 * what it holds.  Returns -1 to go on (frame traffic), else the exit status: 1 when it cannot be
 * replayed (the message printed), or that of a conversation replay (foreign_capture). */
static int load_replay(struct cfg *c, struct run *R)
{
    int rc = mlxd_capture_load(c->replay, &R->cap);
    if (rc < 0) {
        fprintf(stderr, "mlxd-capture: %s\n", mlxd_errmsg());
        return 1;
    }
    if (R->cap->cut_short)
        fprintf(stderr, "mlxd-capture: warning: %s is cut short in record %zu (%s): replaying the %zu "
                "whole records before it (%zu frames)\n", c->replay, R->cap->records + 1, R->cap->cut_why,
                R->cap->records, R->cap->nframes);
    int fc = foreign_capture(c, R->cap);
    if (fc >= 0) { R->cap = NULL; return fc; }
    if (check_capture(c, R->cap)) {
        mlxd_capture_free(R->cap);
        R->cap = NULL;
        return 1;
    }
    const struct mlxd_capture_geometry *g = &R->cap->geo;
    if (!c->frame_size_set) c->frame_size = g->frame_size;
    if (!c->page_size_set) c->page_size = g->page_size;
    if (!c->pages_set) c->pages = g->pages;
    if (!c->md_off_set) c->metadata_offset = g->metadata_offset;
    if (!g->has_metadata && !c->no_metadata && R->cap->nframes)
        c->no_metadata = true;
    unsigned loops = c->loops ? c->loops : 1;
    R->expected = (uint64_t)R->cap->nframes * loops;
    if (c->frames && c->frames < R->expected)
        R->expected = c->frames;
    if (!c->quiet || c->json)
        fprintf(stderr, "mlxd-capture: %s: %zu packets, %zu frames; frame %" PRIu64 " B, page %" PRIu64
                " B x %u pages, metadata %s at +%" PRIu64 ", first page %u\n", c->replay,
                R->cap->npackets, R->cap->nframes, g->frame_size, g->page_size, g->pages,
                g->has_metadata ? (g->separate_metadata ? "separate" : "embedded") : "none",
                g->metadata_offset, g->first_page);
    if (c->frame_size_set && c->frame_size < g->frame_size)
        fprintf(stderr, "mlxd-capture: warning: the capture's frames are %" PRIu64 " bytes, more than "
                "--frame-size %" PRIu64 ": the device writes past the frame the receiver expects "
                "(only the first %" PRIu64 " bytes of each frame are checked)\n",
                g->frame_size, c->frame_size, c->frame_size);
    if (c->pages_set && c->pages < g->pages)
        fprintf(stderr, "mlxd-capture: warning: the capture writes %u pages (0..%u) but --pages %u: "
                "writes to pages %u and up fall outside the receiver's memory region, so the "
                "port rejects them and their frames do not arrive\n",
                g->pages, g->pages - 1, c->pages, c->pages);
    if (R->cap->nframes == 0)
        fprintf(stderr, "mlxd-capture: this capture has no RDMA WRITE with immediate (metadata "
                "disabled in the sender): the receiver gets no completion, so no frame; the %zu "
                "packets' bytes still land in the buffer\n", R->cap->npackets);
    return -1;
}

/* The frame geometry and the frames expected, from the capture (--replay) or the options.
 * Returns -1 to go on, else the exit status (the message printed). */
static int set_geometry(struct cfg *c, struct run *R)
{
    if (c->replay) {
        int lr = load_replay(c, R);
        if (lr >= 0) return lr;
    } else {
        if (!c->frame_size_set) {
            if (c->generate) c->frame_size = 4096;
            else return usage_error("--frame-size is required (or --replay/--generate)");
        }
        if (!c->page_size_set) c->page_size = mlxd_hsb_min_page_size(c->frame_size);
        if (!c->md_off_set) c->metadata_offset = mlxd_hsb_metadata_offset(c->frame_size);
        if (c->generate) {
            if (!c->frames && c->duration <= 0) c->frames = 100;
            R->expected = c->frames;
            if (c->gen_md == MLXD_GEN_MD_NONE) c->no_metadata = true;
        } else {
            R->expected = c->frames;
        }
    }
    if (!c->pages) c->pages = 2;
    if (!c->queue_size) c->queue_size = 1;
    if (!c->peer_ip) c->peer_ip = "127.0.0.1";
    return -1;
}

/* Starts the receiver (R->rx, made by the caller) on the frame buffer.  Returns 0, else the exit
 * status (the message printed). */
static int start_receiver(struct run *R)
{
    const struct cfg *c = R->c;
    mlxd_receiver_set_frame_ready(R->rx, on_frame_ready, NULL);
    mlxd_receiver_set_event_handler(R->rx, on_event, R->c);
    struct mlxd_receiver_opts o = {
        .sz = sizeof o, .device = c->device, .port = c->port,
        .buffer = c->gpu ? R->dbuf : (uintptr_t)R->buf,
        .buffer_size = R->bufsize, .frame_size = c->frame_size, .page_size = c->page_size,
        .pages = c->pages, .metadata_offset = c->metadata_offset, .peer_ip = c->peer_ip,
        .queue_size = c->queue_size, .mode = c->mode,
        .imm_layout = c->legacy ? MLXD_HSB_IMM_LEGACY_8_24 : MLXD_HSB_IMM_12_20,
        .memory = c->gpu ? MLXD_RECEIVER_MEM_CUDA : MLXD_RECEIVER_MEM_HOST, .no_metadata = c->no_metadata,
        .record_cqes = c->record_cqes,
    };
    int rc = mlxd_receiver_start(R->rx, &o);
    if (rc == -EADDRINUSE && emulated_now())
        retry_next_addresses();
    if (rc < 0) {
        fprintf(stderr, "mlxd-capture: %s\n", mlxd_errmsg());
        return start_failure_status(c, rc);
    }
    return 0;
}

/* Where the source sends to (the receiver's address, or --target) and the receiver's QP, rkey
 * and pages as the source maps the capture onto them; says what to program into the sensor
 * bridge.  Returns 0, else 1 (a source the port's MTU cannot carry, said). */
static int describe_target(struct run *R)
{
    const struct cfg *c = R->c;
    uint32_t lip = mlxd_receiver_local_ipv4(R->rx);
    snprintf(R->target_ip, sizeof R->target_ip, "%u.%u.%u.%u", lip >> 24, (lip >> 16) & 255,
             (lip >> 8) & 255, lip & 255);
    R->target_port = 4791;
    if (c->target) {
        snprintf(R->target_ip, sizeof R->target_ip, "%s", c->target);
        char *colon = strchr(R->target_ip, ':');
        if (colon) {
            *colon = 0;
            R->target_port = c->target_port;     /* parsed in main */
        }
    }
    R->map = (struct mlxd_replay_map){ .qpn = mlxd_receiver_qp_number(R->rx), .rkey = mlxd_receiver_rkey(R->rx),
                                       .base_va = mlxd_receiver_external_frame_memory(R->rx),
                                       .page_size = c->page_size, .pages = c->pages };
    if ((c->replay || c->generate) && check_port_mtu(c, R->cap))
        return 1;

    if (!c->quiet || c->json)
        fprintf(stderr, "mlxd-capture: receiving on %s port 1 (GID %d, %s): program the sensor "
                "bridge with DP_QP=0x%06x DP_RKEY=0x%08x DP_PAGE=0x%016" PRIx64 " DP_PAGE_INC=%" PRIu64
                " DP_MAX_BUFF=%u DP_BUFFER_LENGTH=%" PRIu64 " DP_HOST_IP=%s\n",
                c->device, mlxd_receiver_gid_index(R->rx), c->mode == MLXD_RECEIVER_EVENT ? "event" : "busy-poll",
                R->map.qpn, R->map.rkey, R->map.base_va, c->page_size / 128, c->pages - 1, c->frame_size,
                R->target_ip);
    return 0;
}

/* --replay / --generate: the feeder thread (*started set when it runs); otherwise no source, so
 * the feed is done at once.  Returns 0, else -1 (said). */
static int start_feeder(struct run *R, pthread_t *feed, bool *started)
{
    const struct cfg *c = R->c;
    if (!c->replay && !c->generate) {
        atomic_store(&R->feed_done, true);
        return 0;
    }
    /* the emulated sensor bridge sends from its own address: the peer the QP is connected
     * to (a connected QP takes packets only from there) */
    R->so = (struct mlxd_send_opts){ .sz = sizeof R->so, .dst_ip = R->target_ip, .dst_port = R->target_port,
                                     .src_ip = c->peer_ip,
                                     .loops = c->loops, .max_frames = c->replay ? c->frames : 0,
                                     .stop = &g_stop };
    R->so.sent_frame = sent_frame;
    R->so.ctx = R;
    if (c->replay && !strcmp(c->pace, "recorded"))
        R->so.pacing = MLXD_PACE_RECORDED;
    if (c->generate && c->fps == 0) {
        /* gen_window_wait: 4 MiB in flight (3 ms at 10 Gb/s; the port's socket holds more), at
         * most 64 frames (a quarter of the 256 receives the receiver posts) */
        uint64_t w = (4u << 20) / c->page_size;
        R->gen_window = w < 1 ? 1 : w > 64 ? 64 : w;
    }
    if (pthread_create(feed, NULL, feed_main, R)) {
        fprintf(stderr, "mlxd-capture: cannot start the feeder thread\n");
        return -1;
    }
    *started = true;
    return 0;
}

/* The consumer's loop ends: stopped, enough frames or time, the monitor failed, or the source is
 * done and nothing more is coming. */
static bool consumer_done(const struct run *R, const struct tally *T, double t0, double last_frame_t)
{
    const struct cfg *c = R->c;
    if (__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) return true;
    if (c->frames && T->got >= c->frames) return true;
    if (c->duration > 0 && now_s() - t0 >= c->duration) return true;
    if (R->monitor_rc < 0) return true;
    if ((c->replay || c->generate) && atomic_load(&R->feed_done)) {
        struct mlxd_receiver_stats st;
        mlxd_receiver_stats(R->rx, &st);
        if (R->expected && st.frames >= R->expected && !mlxd_receiver_frames_ready(R->rx)) return true;
        if (now_s() - last_frame_t > c->timeout_ms / 1000.0 && !mlxd_receiver_frames_ready(R->rx)) return true;
    }
    return false;
}

/* --replay: whether the frame's decoded metadata, page or immediate differ from the capture's
 * frame of that number. */
static bool differs_from_capture(const struct run *R, const struct mlxd_receiver_frame *f)
{
    const struct mlxd_capture *cap = R->cap;
    uint32_t fi = f->metadata.frame_number32;
    const struct mlxd_capture_frame *cf = NULL;
    for (size_t k = 0; k < cap->nframes; k++)
        if (cap->frames[k].has_metadata && cap->frames[k].md.frame_number32 == fi) cf = &cap->frames[k];
    /* loops after the first run on with shifted PSNs (mlxd_capture_replay) */
    uint32_t span = (cap->pkts[cap->npackets - 1].hdr.psn - cap->pkts[0].hdr.psn + 1) & 0xFFFFF;
    uint32_t shift = (uint32_t)(((f->received_frame_number - 1) / cap->nframes) * span) & 0xFFFFF;
    return !cf || ((cf->md.psn + shift) & 0xFFFFF) != (f->metadata.psn & 0xFFFFF) ||
           cf->md.timestamp_s != f->metadata.timestamp_s ||
           cf->md.timestamp_ns != f->metadata.timestamp_ns || cf->md.bytes_written != f->metadata.bytes_written ||
           cf->md.crc != f->metadata.crc || cf->page != f->page ||
           mlxd_hsb_imm_make(cf->page, cf->imm_psn + shift, MLXD_HSB_IMM_12_20) != f->imm_data;
}

/* A frame whose payload or metadata did not verify: a failure only when it stayed intact while
 * it was read; a page the device came back to (no flow control) legitimately holds other bytes. */
static void judge_bad_frame(const struct run *R, struct tally *T, const struct mlxd_receiver_frame *f,
                            const uint8_t *data, uint64_t nbytes, bool md_bad, int state)
{
    const struct cfg *c = R->c;
    if (c->generate && !md_bad &&
        rewritten_by_device(data, nbytes, c->no_metadata ? (uint32_t)(f->received_frame_number - 1)
                                                         : f->metadata.frame_number32,
                            c->frames)) {
        T->bad_overwritten++;
    } else if (state == MLXD_FRAME_INTACT && !(f->flags & MLXD_FRAME_PSN_MISMATCH)) {
        T->bad_payload++;
        fprintf(stderr, "mlxd-capture: frame %" PRIu64 ": %s\n", T->last_fn,
                md_bad ? "metadata, page or immediate differ from the capture"
                       : "payload differs from the pattern");
    } else {
        T->bad_overwritten++;
    }
}

/* --json / --print-frames: one line for the frame.  pay: -1 not checked, 0 bad (at byte bad_at),
 * 1 verified. */
static void print_frame(const struct cfg *c, const struct tally *T, const struct mlxd_receiver_frame *f,
                        uint64_t nbytes, double delay_us, int pay, long bad_at, int state, bool live)
{
    if (c->json) {
        printf("{\"frame_number\":%" PRIu64 ",\"frame_number16\":%u,\"page\":%u,\"psn\":%u,"
               "\"imm\":%u,\"bytes_written\":%" PRIu64 ",\"crc\":%u,\"flags\":%u,"
               "\"timestamp_s\":%" PRIu64 ",\"timestamp_ns\":%u,\"metadata_s\":%" PRIu64 ","
               "\"metadata_ns\":%u,\"received_s\":%" PRId64 ",\"received_ns\":%u,"
               "\"received_frame_number\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"nic_ns\":%" PRIu64 ","
               "\"nic_to_host_us\":%.3f,\"psn_mismatch\":%s,\"payload_ok\":%s,\"state\":\"%s\"}\n",
               T->last_fn, f->metadata.frame_number, f->page, f->metadata.psn, f->imm_data,
               nbytes, f->metadata.crc, f->metadata.flags, f->metadata.timestamp_s,
               f->metadata.timestamp_ns, f->metadata.metadata_s, f->metadata.metadata_ns,
               f->received_s, f->received_ns, f->received_frame_number, f->dropped, f->nic_ns,
               isnan(delay_us) ? 0.0 : delay_us, (f->flags & MLXD_FRAME_PSN_MISMATCH) ? "true" : "false",
               pay < 0 ? "null" : pay ? "true" : "false", state_name(state));
        fflush(stdout);
    } else if (c->print_frames) {
        if (live) fprintf(stderr, "\r\033[K");
        printf("frame %4" PRIu64 ": page %u psn %u imm 0x%08x bytes_written %" PRIu64 " crc 0x%08x "
               "flags 0x%x timestamp %" PRIu64 ".%09u metadata %" PRIu64 ".%09u",
               T->last_fn, f->page, f->metadata.psn, f->imm_data, nbytes, f->metadata.crc, f->metadata.flags,
               f->metadata.timestamp_s, f->metadata.timestamp_ns, f->metadata.metadata_s,
               f->metadata.metadata_ns);
        if (!isnan(delay_us)) printf(" nic->host %.3f us", delay_us);
        if (f->flags & MLXD_FRAME_PSN_MISMATCH) printf(" PSN-MISMATCH(imm %u)", f->imm_psn);
        if (pay > 0) printf("  payload verified");
        else if (pay == 0) printf("  payload BAD (byte %ld)", bad_at);
        if (state != MLXD_FRAME_INTACT) printf("  [%s]", state_name(state));
        printf("\n");
        fflush(stdout);
    }
}

/* One frame taken from the receiver: verified, saved, handed back and printed.  False when the
 * run must stop (its bytes could not be read from the GPU). */
static bool consume_frame(struct run *R, struct tally *T, struct delays *delays,
                          const struct mlxd_receiver_frame *f, bool live)
{
    const struct cfg *c = R->c;
    uint64_t nbytes = c->no_metadata ? c->frame_size : f->metadata.bytes_written;
    if (nbytes > c->frame_size) nbytes = c->frame_size;
    T->bytes += nbytes;
    T->last_fn = c->no_metadata ? f->received_frame_number - 1 : f->frame_number;
    const uint8_t *data = R->buf + (size_t)f->page * c->page_size;
    if (!from_gpu(c, R->buf, R->dbuf, (size_t)f->page * c->page_size, nbytes)) {
        T->bad_payload++;
        return false;
    }
    int pay = -1;   /* -1 not checked, 0 bad, 1 ok */
    long bad_at = -1;
    /* a frame without metadata has no number to check against: it fails the run as
     * such (stats.missing_metadata), once, in the summary */
    bool unnumbered = f->flags & MLXD_FRAME_MISSING_METADATA;
    if (c->verify && (c->replay || c->generate) && !unnumbered) {
        /* the sender's frame index: metadata frame_number (the emulator's counter), else
         * the order of arrival */
        uint32_t fi = c->no_metadata ? (uint32_t)(f->received_frame_number - 1) : f->metadata.frame_number32;
        bad_at = mlxd_hsb_payload_check(data, nbytes, fi);
        pay = bad_at < 0;
        T->checked++;
    }
    bool md_bad = false;
    if (c->replay && R->cap && R->cap->nframes && !c->no_metadata && !unnumbered &&
        differs_from_capture(R, f)) {
        md_bad = true;
        if (pay < 0) T->checked++;
        pay = 0;
    }
    if (c->save && !save_frame(c->save, f->received_frame_number - 1, data, nbytes))
        T->save_failed++;
    double delay_us = delay_add(delays, f);
    consumer_delay(c->consumer_delay_ms);
    int state = mlxd_receiver_frame_check(R->rx, f);
    atomic_fetch_add(&g_taken, 1);
    if (pay == 0)
        judge_bad_frame(R, T, f, data, nbytes, md_bad, state);
    if (state == MLXD_FRAME_OVERWRITTEN) T->overwritten_read++;
    print_frame(c, T, f, nbytes, delay_us, pay, bad_at, state, live);
    return true;
}

/* The consumer: takes frames until consumer_done, with a status line twice a second on a
 * terminal. */
static void consume(struct run *R, struct tally *T, struct delays *delays, double t0)
{
    const struct cfg *c = R->c;
    bool live = !c->quiet && !c->json && isatty(2);
    double last_status = t0, last_frame_t = t0;
    while (!consumer_done(R, T, t0, last_frame_t)) {
        struct mlxd_receiver_frame f;
        /* 20 ms: a Ctrl-C ends the run within 100 ms */
        if (mlxd_receiver_get_next_frame(R->rx, 20, &f)) {
            T->got++;
            last_frame_t = now_s();
            if (!consume_frame(R, T, delays, &f, live))
                break;
        }
        if (live && now_s() - last_status >= 0.5) {
            double dt = now_s() - t0;
            struct mlxd_receiver_stats st;
            mlxd_receiver_stats(R->rx, &st);
            fprintf(stderr, "\r\033[Kframes %" PRIu64 "  %.1f fps  %.1f MB/s  dropped %" PRIu64
                    "  overwritten %" PRIu64 "  last frame %" PRIu64, st.frames, st.frames / dt,
                    T->bytes / dt / 1e6, st.dropped, st.overwritten + T->overwritten_read, T->last_fn);
            last_status = now_s();
        }
    }
    if (live) fprintf(stderr, "\r\033[K");
}

/* Ends the run: stops and joins the feeder (feed; NULL when none), takes the statistics, closes the
 * receiver and joins the monitor, checks the buffer image and prints the summary.  Returns the
 * exit status. */
static int finish(struct run *R, const pthread_t *feed, pthread_t mon, const struct tally *T,
                  struct delays *delays, double t0)
{
    const struct cfg *c = R->c;
    struct outcome o2 = { .es = { .sz = sizeof o2.es }, .image = -1, .elapsed = now_s() - t0 };
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    if (feed) pthread_join(*feed, NULL);
    mlxd_receiver_stats(R->rx, &o2.st);
    /* the emulated port's own counters (emu/mlxd_emu.h, found with dlsym), while it is open */
    if (emulated_now()) {
        int (*nic_stats)(unsigned, struct mlxd_emu_nic_stats *) =
            (int (*)(unsigned, struct mlxd_emu_nic_stats *))dlsym(RTLD_DEFAULT, "mlxd_emu_nic_stats");
        int dev = emu_device_index(c);
        if (nic_stats && dev >= 0)
            o2.have_es = nic_stats((unsigned)dev, &o2.es) == 0;
    }
    int crc = mlxd_receiver_close(R->rx);
    if (crc < 0) fprintf(stderr, "mlxd-capture: close: %s\n", mlxd_errmsg());
    pthread_join(mon, NULL);
    after_close_stats(R->rx, &o2.st);
    if (R->monitor_rc < 0) fprintf(stderr, "mlxd-capture: monitor: %s\n", R->monitor_err);
    if (R->feed_rc < 0) fprintf(stderr, "mlxd-capture: feeder: %s\n", R->feed_err);

    /* Replay: every byte the capture writes must now be in the buffer (the last write of each
     * byte wins).  For a capture without completions this is all there is to check. */
    if (c->replay && R->cap && R->feed_rc >= 0 && !c->frames && c->loops <= 1 && atomic_load(&R->feed_done) &&
        from_gpu(c, R->buf, R->dbuf, 0, R->bufsize))
        o2.image = check_image(R->cap, &R->map, R->buf, R->bufsize, &o2.image_bytes, &o2.image_diff);
    delay_report(delays, c->json, o2.delay_json, sizeof o2.delay_json);
    return report(R, T, &o2);
}

static int run(struct cfg *c)
{
    struct run R;
    memset(&R, 0, sizeof R);
    R.c = c;
    int status = set_geometry(c, &R);
    if (status >= 0)
        return status;
    status = 1;
    pthread_t mon, feed;
    bool feed_started = false;

    R.bufsize = ((size_t)c->pages * c->page_size + 4095) & ~(size_t)4095;
    if (frame_memory(c, R.bufsize, &R.buf, &R.dbuf) < 0)
        goto out_memory;
    R.rx = mlxd_receiver_new();
    int src = start_receiver(&R);
    if (src) {
        status = src;
        goto out_receiver;
    }
    if (describe_target(&R))
        goto out_receiver;
    if (pthread_create(&mon, NULL, monitor_main, &R)) {
        fprintf(stderr, "mlxd-capture: cannot start the monitor thread\n");
        goto out_receiver;
    }
    if (start_feeder(&R, &feed, &feed_started) < 0)
        goto out_monitor;

    double t0 = now_s();
    struct tally T = { 0 };
    struct delays delays = { 0 };
    consume(&R, &T, &delays, t0);
    status = finish(&R, feed_started ? &feed : NULL, mon, &T, &delays, t0);   /* joins both threads */
    goto out_receiver;

out_monitor:
    mlxd_receiver_close(R.rx);
    pthread_join(mon, NULL);
out_receiver:
    mlxd_receiver_destroy(R.rx);
out_memory:
    mlxd_capture_free(R.cap);
    gpu_buffer_free(R.dbuf);
    free(R.buf);
    return status;
}

/* getopt_long's values of the long options without a short one. */
enum { O_FRAME = 256, O_PAGE, O_PAGES, O_MDOFF, O_PEER, O_QUEUE, O_DURATION, O_BUSY, O_EVENT,
       O_LEGACY, O_NOMD, O_EMULATE, O_REPLAY, O_PACE, O_LOOPS, O_GENERATE, O_FPS, O_GENMD,
       O_PAYLOAD, O_TARGET, O_SAVE, O_JSON, O_NOVERIFY, O_DELAY, O_TIMEOUT, O_LINKDOWN, O_RECORD, O_GPU };
static const struct mode_option mode_opts[] = {
    { O_PACE, "--pace", MODE_REPLAY }, { O_LOOPS, "--loops", MODE_REPLAY },
    { O_FPS, "--fps", MODE_GENERATE }, { O_GENMD, "--gen-metadata", MODE_GENERATE },
    { O_PAYLOAD, "--payload-size", MODE_GENERATE },
    { O_TARGET, "--target", MODE_REPLAY | MODE_GENERATE },
    { O_NOVERIFY, "--no-verify", MODE_REPLAY | MODE_GENERATE },
    { O_TIMEOUT, "--timeout-ms", MODE_REPLAY | MODE_GENERATE },
    { O_LINKDOWN, "--link-down", MODE_REPLAY | MODE_GENERATE } };
enum { N_MODE_OPTS = sizeof mode_opts / sizeof mode_opts[0] };

/* --link-down FRAME:MS, both through the one number parser.  Returns -1 to go on, else the exit
 * status (the usage error printed). */
static int parse_link_down(struct cfg *c, const char *arg)
{
    char what[64], num[32];
    uint64_t v;
    const char *colon = strchr(arg, ':');
    if (!colon || (size_t)(colon - arg) >= sizeof num)
        return usage_error("--link-down %s: FRAME:MS (after FRAME frames, MS milliseconds down)", arg);
    snprintf(num, sizeof num, "%.*s", (int)(colon - arg), arg);
    snprintf(what, sizeof what, "--link-down frame");
    int prc = parse_uint(what, num, 0, UINT64_MAX, &v);
    if (prc) return prc;
    c->link_down_at = v;
    snprintf(what, sizeof what, "--link-down milliseconds");
    prc = parse_uint(what, colon + 1, 1, 600000, &v);
    if (prc) return prc;
    c->link_down_ms = (unsigned)v;
    return -1;
}

/* One option (getopt_long's ch, its argument in optarg) into c.  Returns -1 to go on, else the
 * exit status (--help: 0; a usage error, printed: 2). */
static int parse_option(struct cfg *c, int ch, char **argv)
{
    uint64_t v;
    /* Every integer option goes through parse_uint with its range; the bounds are the ones the
     * library enforces (mlxd_receiver.h, mlxd_capture.h) or the field's type, so that no value
     * is silently truncated into another one. */
#define NUM(name, lo, hi) do { int prc_ = parse_uint(name, optarg, lo, hi, &v); if (prc_) return prc_; } while (0)
#define REAL(name, lo, lo_ok, what, dst) do { int prc_ = parse_real(name, optarg, lo, lo_ok, what, dst); if (prc_) return prc_; } while (0)
    switch (ch) {
    case 'd': c->device = optarg; break;
    /* a ConnectX function has one port (mlxd_receiver_opts.port) */
    case 'P': NUM("--port", 1, 1); c->port = (unsigned)v; break;
    /* frame_size >= 1 and <= 2^40 (mlxd_receiver_start) */
    case O_FRAME: NUM("--frame-size", 1, MAX_FRAME_SIZE); c->frame_size = v; c->frame_size_set = true; break;
    /* pages x page_size must not wrap size_t: 4096 x 2^41 < 2^64 */
    case O_PAGE: NUM("--page-size", MLXD_HSB_ALIGN, MAX_PAGE_SIZE); c->page_size = v; c->page_size_set = true; break;
    case O_PAGES: NUM("--pages", 1, MLXD_HSB_MAX_PAGES); c->pages = (unsigned)v; c->pages_set = true; break;
    case O_MDOFF: NUM("--metadata-offset", 0, MAX_PAGE_SIZE - MLXD_HSB_METADATA_SIZE);
        c->metadata_offset = v; c->md_off_set = true; break;
    case O_PEER: c->peer_ip = optarg; break;
    /* 1..pages (mlxd_receiver_start checks against the pages in use) */
    case O_QUEUE: NUM("--queue-size", 1, MLXD_HSB_MAX_PAGES); c->queue_size = (unsigned)v; c->queue_size_set = true; break;
    /* 0 would mean "no count", which the option is not asked for */
    case 'n': NUM("--frames", 1, UINT64_MAX); c->frames = v; break;
    case O_DURATION: REAL("--duration", 0, false, "> 0 seconds", &c->duration); break;
    case O_BUSY: c->mode = MLXD_RECEIVER_BUSY_POLL; break;
    case O_EVENT: c->mode = MLXD_RECEIVER_EVENT; break;
    case O_LEGACY: c->legacy = true; break;
    case O_NOMD: c->no_metadata = true; break;
    case O_GPU: c->gpu = true; break;
    case O_EMULATE: c->emulate = true; break;
    case O_REPLAY: c->replay = optarg; c->emulate = true; break;
    case O_PACE:
        if (strcmp(optarg, "lockstep") && strcmp(optarg, "fast") && strcmp(optarg, "recorded"))
            return usage_error("--pace %s: lockstep, fast or recorded", optarg);
        c->pace = optarg; break;
    /* mlxd_send_opts.loops is an unsigned */
    case O_LOOPS: NUM("--loops", 1, UINT_MAX); c->loops = (unsigned)v; break;
    case O_GENERATE: c->generate = true; c->emulate = true; break;
    case O_FPS: REAL("--fps", 0, true, ">= 0 (0 = as fast as possible)", &c->fps); break;
    case O_GENMD:
        if (!strcmp(optarg, "separate")) c->gen_md = MLXD_GEN_MD_SEPARATE;
        else if (!strcmp(optarg, "embedded")) c->gen_md = MLXD_GEN_MD_EMBEDDED;
        else if (!strcmp(optarg, "none")) c->gen_md = MLXD_GEN_MD_NONE;
        else return usage_error("--gen-metadata %s: separate, embedded or none", optarg);
        break;
    /* a packet's payload is a multiple of 128 (the device's DP_PACKET_SIZE unit) and no
     * RoCE port takes more than its MTU, 4096 at most (IB MTU enum 5) */
    case O_PAYLOAD: NUM("--payload-size", MLXD_HSB_ALIGN, 4096);
        if (v % MLXD_HSB_ALIGN)
            return usage_error("--payload-size %s: must be a multiple of %u", optarg, MLXD_HSB_ALIGN);
        c->payload_size = (uint32_t)v; break;
    case O_TARGET: c->target = optarg; break;
    case O_SAVE: c->save = optarg; break;
    case O_JSON: c->json = true; break;
    case 'v': c->print_frames = true; break;
    case O_NOVERIFY: c->verify = false; break;
    case O_DELAY: NUM("--consumer-delay-ms", 0, UINT_MAX); c->consumer_delay_ms = (unsigned)v; break;
    case O_TIMEOUT: NUM("--timeout-ms", 0, UINT_MAX); c->timeout_ms = (unsigned)v; break;
    case O_LINKDOWN: return parse_link_down(c, optarg);
    case O_RECORD: c->record_cqes = optarg; break;
    case 'q': c->quiet = true; break;
    case 'h': usage(stdout); return 0;
    default:
        return usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
    }
#undef NUM
#undef REAL
    return -1;
}

/* Reads the command line into c.  Returns -1 to go on, else the exit status. */
static int parse_options(struct cfg *c, int argc, char **argv)
{
    static const struct option lo[] = {
        { "device", 1, 0, 'd' }, { "port", 1, 0, 'P' }, { "frame-size", 1, 0, O_FRAME },
        { "page-size", 1, 0, O_PAGE }, { "pages", 1, 0, O_PAGES }, { "metadata-offset", 1, 0, O_MDOFF },
        { "peer-ip", 1, 0, O_PEER }, { "queue-size", 1, 0, O_QUEUE }, { "frames", 1, 0, 'n' },
        { "duration", 1, 0, O_DURATION }, { "busy", 0, 0, O_BUSY }, { "event", 0, 0, O_EVENT },
        { "legacy-imm", 0, 0, O_LEGACY }, { "no-metadata", 0, 0, O_NOMD }, { "emulate", 0, 0, O_EMULATE },
        { "replay", 1, 0, O_REPLAY }, { "pace", 1, 0, O_PACE }, { "loops", 1, 0, O_LOOPS },
        { "generate", 0, 0, O_GENERATE }, { "fps", 1, 0, O_FPS }, { "gen-metadata", 1, 0, O_GENMD },
        { "payload-size", 1, 0, O_PAYLOAD }, { "target", 1, 0, O_TARGET }, { "save", 1, 0, O_SAVE },
        { "json", 0, 0, O_JSON }, { "print-frames", 0, 0, 'v' }, { "no-verify", 0, 0, O_NOVERIFY },
        { "consumer-delay-ms", 1, 0, O_DELAY }, { "timeout-ms", 1, 0, O_TIMEOUT }, { "quiet", 0, 0, 'q' },
        { "link-down", 1, 0, O_LINKDOWN },
        { "record-cqes", 1, 0, O_RECORD }, { "gpu", 0, 0, O_GPU },
        { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
    /* the mode options given, in the order of the command line (each once): the mode is known
     * only once every option is read, and the first misplaced one is the one reported */
    unsigned given[N_MODE_OPTS], ngiven = 0;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "d:P:n:vqh", lo, NULL)) != -1) {
        for (unsigned i = 0; i < N_MODE_OPTS; i++) {
            if (mode_opts[i].ch != ch) continue;
            bool again = false;
            for (unsigned k = 0; k < ngiven; k++) again |= given[k] == i;
            if (!again) given[ngiven++] = i;
        }
        int prc = parse_option(c, ch, argv);
        if (prc >= 0) return prc;
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (c->replay && c->generate) return usage_error("--replay and --generate exclude each other");
    unsigned mode = c->replay ? MODE_REPLAY : c->generate ? MODE_GENERATE : MODE_RECEIVE;
    for (unsigned k = 0; k < ngiven; k++)
        if (!(mode_opts[given[k]].modes & mode))
            return usage_error("%s applies to %s only", mode_opts[given[k]].name,
                               modes_name(mode_opts[given[k]].modes));
    return -1;
}

/* What the options say only together: --frame-size within --generate's range, --target's port,
 * --save a directory to write in.  Returns -1 to go on, else the exit status. */
static int check_options(struct cfg *c)
{
    /* mlxd_gen_run takes frames of 1..2^32 bytes: say so now rather than as a failed run */
    if (c->generate && c->frame_size_set && c->frame_size > (1ull << 32))
        return usage_error("--frame-size %" PRIu64 ": out of range 1..%llu with --generate", c->frame_size,
                           1ull << 32);
    if (c->target) {
        /* ADDR[:PORT]: the port through the same parser as every other number */
        const char *colon = strchr(c->target, ':');
        if (colon) {
            uint64_t port;
            char what[300];
            if (!colon[1])
                return usage_error("--target %s: no port after ':'", c->target);
            snprintf(what, sizeof what, "--target %s: port", c->target);
            int prc = parse_uint(what, colon + 1, 1, 65535, &port);
            if (prc) return prc;
            c->target_port = (uint16_t)port;
        }
    }
    if (c->save) {
        /* Found out now, not frame by frame: a --save that is not a directory this user can
         * create files in would lose every frame of the run. */
        struct stat sb;
        if (stat(c->save, &sb) && mkdir(c->save, 0777))
            return usage_error("--save %s: %s", c->save, strerror(errno));
        if (stat(c->save, &sb))
            return usage_error("--save %s: %s", c->save, strerror(errno));
        if (!S_ISDIR(sb.st_mode))
            return usage_error("--save %s: not a directory", c->save);
        if (access(c->save, W_OK | X_OK))
            return usage_error("--save %s: cannot create files there: %s", c->save, strerror(errno));
    }
    return -1;
}

/* The device: the emulator's when asked for or when this machine has no mlx5 device (this
 * program runs again on it: returns that exit status), else --device or the first one.
 * Returns -1 to go on. */
static int choose_device(struct cfg *c, char **argv)
{
    if (!emulated_now()) {
        char **names = NULL;
        size_t n = 0;
        bool none = mlxd_names(&names, &n) < 0 || n == 0;
        if (!c->device && n > 0) c->device = strdup(names[0]);
        mlxd_names_free(names, n);
        if (c->emulate || none)
            return reexec_emulated(argv);
    }
    if (!c->device) c->device = "mlx5_0";
    if (emulated_now()) {
        /* The emulator reads MLXD_EMU_DEVICES and exports SYSFS_PATH from its constructor; in
         * sanitizer builds that runs too early to see or change the environment, so apply the
         * configuration again now and re-export the tree (emu/mlxd_emu.h, found with dlsym). */
        int (*emu_configure)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "mlxd_emu_configure");
        const char *spec = getenv("MLXD_EMU_DEVICES");
        if (emu_configure && spec && *spec && !getenv("MLXD_EMU_CONFIG")) {
            int erc = emu_configure(spec);
            if (erc < 0)
                fprintf(stderr, "mlxd-capture: MLXD_EMU_DEVICES=%s: %s\n", spec, strerror(-erc));
        }
        const char *(*emu_sysfs)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mlxd_emu_sysfs_path");
        const char *root = emu_sysfs ? emu_sysfs() : NULL;
        if (root && *root)
            setenv("SYSFS_PATH", root, 1);
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct cfg c = { .port = 1, .mode = MLXD_RECEIVER_EVENT, .pace = "lockstep", .fps = 60,
                     .verify = true, .timeout_ms = 2000, .gen_md = MLXD_GEN_MD_SEPARATE };
    int status = parse_options(&c, argc, argv);
    if (status < 0) status = check_options(&c);
    if (status < 0) status = choose_device(&c, argv);
    if (status >= 0) return status;

    g_argv = argv;
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return run(&c);
}
