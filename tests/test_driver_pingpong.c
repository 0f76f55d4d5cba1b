/* mlxd-pingpong as a new user runs it: server and client as two processes on the emulator
 * (--emulate), RC and UC, WRITE_IMM and SEND; both must exit 0 (every byte verified) and the
 * client must print its latency line.
 *
 * Then what goes wrong between the two: settings that differ (each side sends its -s -c -o -n in
 * its hello; both must stop at once, exit 1, with one line naming the option and both values),
 * a side that fails (the other must say "the peer reported a failure" at once, not time out or
 * exit silently), and a peer that is not mlxd-pingpong at all.  The expected lines and the wire
 * format come from the tool's specification in docs/driver.md (section mlxd-pingpong). */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "util.h"

/* Before these fixes a mismatch or a peer's failure cost a 10 s message timeout; a few seconds
 * on a loaded 2-core machine is the bound for "at once". */
#define PROMPT_S 8.0

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void tool_path(char exe[PATH_MAX])
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/bin/mlxd-pingpong", mlxd_test_build_dir());
    ck_assert_msg(realpath(rel, exe), "%s is not built", rel);
    ck_assert_msg(access(exe, X_OK) == 0, "%s is not built", exe);
}

/* This test's own emulated devices, mlx5_0 on 127.a.b.1 and mlx5_1 on 127.a.b.2, so that suites
 * running at the same time do not share UDP ports. */
static unsigned emu_a(void) { return 1 + (((unsigned)getpid() * 2654435761u) >> 8) % 250; }
static unsigned emu_b(void) { return (((unsigned)getpid() * 2654435761u) >> 16) & 0xff; }

static void read_file(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) { size_t k = fread(buf, 1, n - 1, f); buf[k] = '\0'; fclose(f); }
    unlink(path);
}

struct pair {
    int server_rc, client_rc;                  /* exit status (124: killed by timeout 60) */
    char server_out[4096], client_out[4096];   /* stdout + stderr of each */
    double secs;                               /* from the server's start to both exits */
};

/* Server and client as two processes; client_env: extra NAME=value words for the client only. */
static void pair_run(struct pair *r, const char *server_args, const char *client_args, const char *client_env)
{
    char exe[PATH_MAX], cmd[2 * PATH_MAX + 2048], sout[256], cout[256], stat[256], devs[96], st_text[64];
    tool_path(exe);
    unsigned port = 20000 + ((unsigned)getpid() * 2654435761u) % 30000;
    snprintf(devs, sizeof devs, "mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2", emu_a(), emu_b(), emu_a(), emu_b());
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(sout, sizeof sout, "%s/mlxd-pp-%d-server.txt", tmp, (int)getpid());
    snprintf(cout, sizeof cout, "%s/mlxd-pp-%d-client.txt", tmp, (int)getpid());
    snprintf(stat, sizeof stat, "%s/mlxd-pp-%d-status.txt", tmp, (int)getpid());
    /* a clean environment: only the device list (not the runner's emulator tree) */
    snprintf(cmd, sizeof cmd,
             "env -u SYSFS_PATH -u LD_PRELOAD MLXD_EMU_DEVICES=%s timeout 60 '%s' --emulate -p %u %s >%s 2>&1 & "
             "srv=$!; sleep 0.3; env -u SYSFS_PATH -u LD_PRELOAD MLXD_EMU_DEVICES=%s %s timeout 60 '%s' --emulate -p %u %s 127.0.0.1 >%s 2>&1; "
             "c=$?; wait $srv; s=$?; echo \"$s $c\" >%s",
             devs, exe, port, server_args, sout, devs, client_env ? client_env : "", exe, port, client_args, cout, stat);
    double t0 = now_s();
    int st = system(cmd);
    r->secs = now_s() - t0;
    read_file(sout, r->server_out, sizeof r->server_out);
    read_file(cout, r->client_out, sizeof r->client_out);
    read_file(stat, st_text, sizeof st_text);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the shell: status 0x%x", st);
    ck_assert_msg(sscanf(st_text, "%d %d", &r->server_rc, &r->client_rc) == 2, "no exit statuses: '%s'", st_text);
}

static void run(const char *transport, const char *op, int iters)
{
    char args[128];
    snprintf(args, sizeof args, "-n %d -c %s -o %s", iters, transport, op);
    struct pair r;
    pair_run(&r, args, args, NULL);
    ck_assert_msg(r.server_rc == 0 && r.client_rc == 0, "%s %s: server exit %d, client exit %d; client said: %s; server said: %s",
                  transport, op, r.server_rc, r.client_rc, r.client_out, r.server_out);
    ck_assert_msg(strstr(r.client_out, "data verified") && strstr(r.client_out, "median") && strstr(r.client_out, "p99"),
                  "client output: %s", r.client_out);
}

START_TEST(rc_write_imm) { run("rc", "write_imm", 2000); }
END_TEST
START_TEST(uc_write_imm) { run("uc", "write_imm", 2000); }
END_TEST
START_TEST(rc_send) { run("rc", "send", 1000); }
END_TEST
START_TEST(uc_send) { run("uc", "send", 1000); }
END_TEST

/* -c ud: datagrams of the port MTU (1024 on the emulated ports), SEND without -o */
START_TEST(ud_send)
{
    struct pair r;
    pair_run(&r, "-n 1000 -c ud -s 1024", "-n 1000 -c ud -s 1024", NULL);
    ck_assert_msg(r.server_rc == 0 && r.client_rc == 0, "ud: server exit %d, client exit %d; client said: %s; server said: %s",
                  r.server_rc, r.client_rc, r.client_out, r.server_out);
    ck_assert_msg(strstr(r.client_out, "1000 iterations of 1024 bytes, UD SEND,") && strstr(r.client_out, "data verified"),
                  "client output: %s", r.client_out);
    ck_assert_msg(strstr(r.server_out, "UD SEND, 1024 bytes x 1000") &&
                  strstr(r.server_out, "1000 iterations of 1024 bytes received and verified"), "server output: %s", r.server_out);
}
END_TEST


/* Both sides exit 1 promptly, each with exactly the one line given (and nothing else). */
static void mismatch(const char *server_args, const char *client_args, const char *server_line, const char *client_line)
{
    struct pair r;
    pair_run(&r, server_args, client_args, NULL);
    ck_assert_msg(r.server_rc == 1 && r.client_rc == 1, "[%s] vs [%s]: server exit %d, client exit %d; server said: %s; client said: %s",
                  server_args, client_args, r.server_rc, r.client_rc, r.server_out, r.client_out);
    ck_assert_str_eq(r.server_out, server_line);
    ck_assert_str_eq(r.client_out, client_line);
    ck_assert_msg(r.secs < PROMPT_S, "[%s] vs [%s]: %.1f s", server_args, client_args, r.secs);
}

/* a datagram is one packet: -s above the MTU is refused on both sides; UD has no WRITE_IMM */
START_TEST(ud_limits)
{
    mismatch("-c ud", "-c ud", "mlxd-pingpong: -c ud -s 4096 exceeds the port MTU 1024 (a datagram is one packet)\n",
             "mlxd-pingpong: -c ud -s 4096 exceeds the port MTU 1024 (a datagram is one packet)\n");
    struct pair r;
    pair_run(&r, "-c ud -o write_imm", "-c ud -o write_imm", NULL);
    ck_assert_int_eq(r.server_rc, 2);
    ck_assert_int_eq(r.client_rc, 2);
    static const char want[] = "mlxd-pingpong: -c ud -o write_imm: a UD QP sends only (use -o send)\n";
    ck_assert_msg(!strncmp(r.client_out, want, strlen(want)),
                  "client output: %s", r.client_out);
}
END_TEST

/* -o fetch_add: 500 fetch-and-adds of 1 on the server's counter, which starts at 0xfffffffe (past
 * 2^32 after two: a 32-bit add would show); the client checks each original value, the server
 * the final one: 0xfffffffe + 500 = 0x1000001f2 (IB spec vol. 1 9.4.5, modulo 2^64). */
START_TEST(rc_fetch_add)
{
    struct pair r;
    pair_run(&r, "-o fetch_add -n 500", "-o fetch_add -n 500", NULL);
    ck_assert_msg(r.server_rc == 0 && r.client_rc == 0, "server exit %d, client exit %d; client said: %s; server said: %s",
                  r.server_rc, r.client_rc, r.client_out, r.server_out);
    ck_assert_msg(strstr(r.server_out, "RC FETCH_ADD, 8 bytes x 500\n"), "server output: %s", r.server_out);
    ck_assert_msg(strstr(r.server_out, "counter 0x00000001000001f2 after 500 fetch-and-adds of 1 from 0x00000000fffffffe: verified\n"),
                  "server output: %s", r.server_out);
    ck_assert_msg(strstr(r.client_out, "500 iterations of 8 bytes, RC FETCH_ADD, ") && strstr(r.client_out, "data verified") &&
                  strstr(r.client_out, "median"), "client output: %s", r.client_out);
}
END_TEST

START_TEST(fetch_add_mismatch)
{
    mismatch("-o fetch_add -n 10", "-o send -s 8 -n 10",
             "mlxd-pingpong: the peer uses -o send, this side -o fetch_add\n",
             "mlxd-pingpong: the peer uses -o fetch_add, this side -o send\n");
}
END_TEST

/* Atomics are RC only and move 8 bytes: other settings are usage errors (exit 2, one line). */
START_TEST(fetch_add_usage)
{
    char exe[PATH_MAX], cmd[PATH_MAX + 128], out[4096];
    tool_path(exe);
    const char *args[] = { "-c uc -o fetch_add", "-o fetch_add -s 16" };
    const char *line[] = { "mlxd-pingpong: -o fetch_add needs -c rc (atomics are an RC operation)\n",
                           "mlxd-pingpong: -o fetch_add moves 8 bytes: leave -s out or give -s 8\n" };
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s 2>&1 >/dev/null", exe, args[i]);
        FILE *f = popen(cmd, "r");
        ck_assert(f);
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = 0;
        int st = pclose(f);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: status 0x%x", args[i], st);
        ck_assert_str_eq(out, line[i]);
    }
}
END_TEST

/* Was: the client's WRITE_IMM of 8192 bytes into a 4096-byte region, REM_ACCESS_ERR / WR_FLUSH_ERR. */
START_TEST(size_mismatch)
{
    mismatch("-s 4096 -n 10", "-s 8192 -n 10",
             "mlxd-pingpong: the peer uses -s 8192, this side -s 4096\n",
             "mlxd-pingpong: the peer uses -s 4096, this side -s 8192\n");
}
END_TEST

/* Was: each QP drops the other's packets, a 10 s timeout on both sides. */
START_TEST(transport_mismatch)
{
    mismatch("-c rc -n 10", "-c uc -n 10",
             "mlxd-pingpong: the peer uses -c uc, this side -c rc\n",
             "mlxd-pingpong: the peer uses -c rc, this side -c uc\n");
}
END_TEST

/* Several differences: all of them in the one line, in the order -s -c -o -n. */
START_TEST(op_and_iters_mismatch)
{
    mismatch("-o send -n 10", "-o write_imm -n 20",
             "mlxd-pingpong: the peer uses -o write_imm -n 20, this side -o send -n 10\n",
             "mlxd-pingpong: the peer uses -o send -n 10, this side -o write_imm -n 20\n");
}
END_TEST

/* The client's kernel refuses its second MODIFY_QP (INIT->RTR, emulator fault injection): the
 * client names that; the server, which was fine, must say why it stops instead of exiting
 * silently or waiting. */
START_TEST(peer_failure_reported)
{
    struct pair r;
    pair_run(&r, "-n 10", "-n 10", "MLXD_EMU_FAIL=MODIFY_QP:2:EIO");
    ck_assert_msg(r.server_rc == 1 && r.client_rc == 1, "server exit %d, client exit %d; server said: %s; client said: %s",
                  r.server_rc, r.client_rc, r.server_out, r.client_out);
    ck_assert_str_eq(r.server_out, "mlxd-pingpong: the peer reported a failure (see its output)\n");
    ck_assert_msg(!strncmp(r.client_out, "mlxd-pingpong: connect: ", 24) && strstr(r.client_out, "INIT->RTR") &&
                  strstr(r.client_out, strerror(EIO)) && !strchr(r.client_out, '\n')[1],
                  "client said: %s", r.client_out);
    ck_assert_msg(r.secs < PROMPT_S, "%.1f s", r.secs);
}
END_TEST

/* ---- the client against a scripted peer (this process) ---- */
struct fake {
    int rc;                    /* the client's exit status */
    char out[4096];            /* its stdout + stderr */
    unsigned char got[1024];   /* what it sent to the peer, up to its close */
    size_t ngot;
    unsigned port;
    double secs;
};

/* text as a hello is framed (docs/driver.md): spaces up to byte 127, '\n' as byte 128. */
static void frame(char out[128], const char *text)
{
    size_t n = strlen(text);
    memcpy(out, text, n);
    memset(out + n, ' ', 127 - n);
    out[127] = '\n';
}

/* The hello of a side with these settings. */
static void hello(char out[128], const char *role, unsigned size, const char *transport, const char *op, unsigned iters)
{
    char text[128];
    snprintf(text, sizeof text, "mlxd-pingpong/1 role=%s size=%u transport=%s op=%s iters=%u", role, size, transport, op, iters);
    frame(out, text);
}

/* Listens on a free port of 127.0.0.1, starts the client on it, sends it script (or closes at
 * once when script is NULL) and collects what it sends until it closes. */
static void fake_run(struct fake *f, const char *client_args, const void *script, size_t len)
{
    char exe[PATH_MAX], cmd[PATH_MAX + 1024], out[256];
    tool_path(exe);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(l, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(l, 1), 0);
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &al), 0);
    f->port = ntohs(a.sin_port);
    snprintf(out, sizeof out, "%s/mlxd-pp-%d-fake.txt", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "exec env -u SYSFS_PATH -u LD_PRELOAD MLXD_EMU_DEVICES=mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2 "
             "timeout 60 '%s' --emulate -p %u %s 127.0.0.1 >%s 2>&1",
             emu_a(), emu_b(), emu_a(), emu_b(), exe, f->port, client_args, out);
    double t0 = now_s();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct pollfd pf = { .fd = l, .events = POLLIN };
    int c = poll(&pf, 1, 30000) == 1 ? accept(l, NULL, NULL) : -1;
    close(l);
    f->ngot = 0;
    if (c >= 0) {
        if (!script) {
            close(c);
        } else {
            ck_assert_int_eq(send(c, script, len, MSG_NOSIGNAL), (ssize_t)len);
            for (;;) {
                struct pollfd cf = { .fd = c, .events = POLLIN };
                if (poll(&cf, 1, 20000) != 1) break;
                ssize_t k = recv(c, f->got + f->ngot, sizeof f->got - f->ngot, 0);
                if (k <= 0) break;
                f->ngot += (size_t)k;
                if (f->ngot == sizeof f->got) break;
            }
            close(c);
        }
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    f->secs = now_s() - t0;
    f->rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    read_file(out, f->out, sizeof f->out);
    ck_assert_msg(c >= 0, "the client never connected; it said: %s", f->out);
}

/* Some other service on the port, or another version of the tool: one line naming it, exit 1,
 * no wait for a hello that will not come. */
START_TEST(foreign_peer)
{
    static const struct { bool framed; const char *script, *line; } cases[] = {
        { false, "SSH-2.0-OpenSSH_9.6\r\n", "the peer 127.0.0.1:%u is not mlxd-pingpong: it sent \"SSH-2.0-OpenSSH_9.6\\r\\n\"" },
        { false, NULL, "the peer 127.0.0.1:%u closed the connection before its hello was complete (is it mlxd-pingpong?): it sent nothing" },
        { true, "mlxd-pingpong/2 role=server size=4096 transport=rc op=write_imm iters=1000",
          "the peer 127.0.0.1:%u speaks mlxd-pingpong protocol 2, this side 1: use the same mlxd-pingpong on both sides" },
        /* the line quotes at most 64 bytes of what the peer sent */
        { true, "mlxd-pingpong/1 role=server size=-1 transport=rc op=write_imm iters=1000",
          "the peer 127.0.0.1:%u sent a malformed hello (at 'size=-1'): \"mlxd-pingpong/1 role=server size=-1 transport=rc op=write_imm it...\"" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char script[128], want[512], fmt[512], mine[128];
        size_t len = 0;
        if (cases[i].framed) {
            frame(script, cases[i].script);
            len = 128;
        } else if (cases[i].script) {
            len = strlen(cases[i].script);
            memcpy(script, cases[i].script, len);
        }
        struct fake f;
        fake_run(&f, "-n 1000", cases[i].script ? script : NULL, len);
        snprintf(fmt, sizeof fmt, "mlxd-pingpong: %s\n", cases[i].line);
        snprintf(want, sizeof want, fmt, f.port);
        ck_assert_msg(f.rc == 1, "case %zu: exit %d: %s", i, f.rc, f.out);
        ck_assert_str_eq(f.out, want);
        ck_assert_msg(f.secs < PROMPT_S, "case %zu: %.1f s", i, f.secs);
        if (cases[i].script) {
            /* it sent its own hello, then 'F': this side failed */
            hello(mine, "client", 4096, "rc", "write_imm", 1000);
            ck_assert_msg(f.ngot == 129 && !memcmp(f.got, mine, 128) && f.got[128] == 'F',
                          "case %zu: the client sent %zu bytes: %.*s", i, f.ngot, (int)f.ngot, (const char *)f.got);
        }
    }
}
END_TEST

/* A peer's hello with these settings, its endpoint (a QP nobody has, on the unopened mlx5_1's
 * address: what the client sends goes nowhere), then the given status bytes. */
static size_t fake_script(char *s, const char *transport, const char *tail)
{
    hello(s, "server", 4096, transport, "write_imm", 1000);
    char *e = s + 128;
    int n = snprintf(e, 160, "E%06x %06x 00000000000000000000ffff7f%02x%02x02 %016llx %08x", 0xabcu, 0u, emu_a(), emu_b(),
                     0x10000ull, 0x1234u);
    memset(e + n, ' ', 159 - (size_t)n);
    e[159] = '\n';
    memcpy(s + 288, tail, strlen(tail));
    return 288 + strlen(tail);
}

/* The client's first bytes: its hello, 'E' + a 160-byte endpoint line, 'R'. */
static void check_client_start(const struct fake *f, const char *transport)
{
    char mine[128];
    hello(mine, "client", 4096, transport, "write_imm", 1000);
    ck_assert_msg(f->ngot >= 289, "the client sent %zu bytes", f->ngot);
    ck_assert_msg(!memcmp(f->got, mine, 128), "the client's hello: %.128s", (const char *)f->got);
    ck_assert_msg(f->got[128] == 'E' && f->got[287] == '\n' && f->got[288] == 'R', "endpoint/ready: %.161s", (const char *)f->got + 128);
}

/* The peer fails during the round trips ('F' right after its ready signal): the client, waiting
 * for a UC message that will never come, must stop at once with the one line -- not after its
 * 10 s message timeout -- and send nothing more. */
START_TEST(peer_fails_during_round_trips)
{
    char script[512];
    size_t len = fake_script(script, "uc", "RF");
    struct fake f;
    fake_run(&f, "-c uc -n 1000", script, len);
    ck_assert_msg(f.rc == 1, "exit %d: %s", f.rc, f.out);
    ck_assert_str_eq(f.out, "mlxd-pingpong: the peer reported a failure (see its output)\n");
    check_client_start(&f, "uc");
    ck_assert_uint_eq(f.ngot, 289);
    ck_assert_msg(f.secs < PROMPT_S, "%.1f s", f.secs);
}
END_TEST

/* This side fails during the round trips (an RC QP whose peer does not exist: the retries run
 * out): it names its error and tells the peer with 'F' at once, and does not claim that the peer
 * failed. */
START_TEST(own_failure_told_to_peer)
{
    char script[512];
    size_t len = fake_script(script, "rc", "R");
    struct fake f;
    fake_run(&f, "-c rc -n 1000", script, len);
    ck_assert_msg(f.rc == 1, "exit %d: %s", f.rc, f.out);
    ck_assert_msg(!strncmp(f.out, "mlxd-pingpong: iteration 0: completion error IBV_WC_RETRY_EXC_ERR (12)", 70) &&
                  !strchr(f.out, '\n')[1], "client said: %s", f.out);
    check_client_start(&f, "rc");
    ck_assert_msg(f.ngot == 290 && f.got[289] == 'F', "the client sent %zu bytes, the last 0x%02x", f.ngot, f.got[f.ngot - 1]);
    ck_assert_msg(f.secs < PROMPT_S, "%.1f s", f.secs);
}
END_TEST

Suite *driver_pingpong_suite(void)
{
    Suite *s = suite_create("driver_pingpong");
    TCase *tc = tcase_create("two_processes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rc_write_imm);
    tcase_add_test(tc, uc_write_imm);
    tcase_add_test(tc, rc_send);
    tcase_add_test(tc, uc_send);
    tcase_add_test(tc, ud_send);
    tcase_add_test(tc, rc_fetch_add);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("disagreements");
    tcase_set_timeout(bad, 120);
    tcase_add_test(bad, size_mismatch);
    tcase_add_test(bad, ud_limits);
    tcase_add_test(bad, transport_mismatch);
    tcase_add_test(bad, fetch_add_mismatch);
    tcase_add_test(bad, fetch_add_usage);
    tcase_add_test(bad, op_and_iters_mismatch);
    tcase_add_test(bad, peer_failure_reported);
    tcase_add_test(bad, foreign_peer);
    tcase_add_test(bad, peer_fails_during_round_trips);
    tcase_add_test(bad, own_failure_told_to_peer);
    suite_add_tcase(s, bad);
    return s;
}
