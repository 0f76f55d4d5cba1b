/* mlxd-capture as a user runs it: `--replay` of every shared capture gives the recorded frames
 * (JSON lines checked against the capture), `--generate` runs, exit statuses 0/1/2.
 * The tool is started as a separate process (it re-executes itself under the emulator);
 * MLXD_EMU_DEVICES gives it private addresses so parallel runs do not collide. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mlxd_capture.h"
#include "mlxd_error.h"
#include "util.h"

static bool auto_addresses;

/* Runs the tool with args (NULL-terminated) and captures stdout; returns the exit status. */
static int run_tool(char *out, size_t cap, const char *const *args)
{
    static char tool[4096];
    const char *bd = mlxd_test_build_dir();
    if (bd[0] == '/') {
        snprintf(tool, sizeof tool, "%s/bin/mlxd-capture", bd);
    } else {
        char cwd[1024];
        ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
        snprintf(tool, sizeof tool, "%s/%.1024s/bin/mlxd-capture", cwd, bd);
    }
    ck_assert_msg(access(tool, X_OK) == 0, "%s is not built", tool);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        unsigned a = 20 + (unsigned)getpid() % 200, b = 1 + ((unsigned)getpid() / 200) % 250;
        char devs[256];
        snprintf(devs, sizeof devs, "mlx5_0:127.%u.%u.1:mtu=4096,mlx5_1:127.%u.%u.2:mtu=4096", a, b, a, b);
        if (auto_addresses) {       /* the tool picks its own addresses */
            unsetenv("MLXD_EMU_DEVICES");
            unsetenv("MLXD_EMU_CONFIG");
            unsetenv("MLXD_CAPTURE_AUTO_ADDR");
        } else {
            setenv("MLXD_EMU_DEVICES", devs, 1);
        }
        unsetenv("MLXD_CAPTURE_EMULATED");
        char *argv[32];
        int n = 0;
        argv[n++] = tool;
        for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
        argv[n] = NULL;
        execv(tool, argv);
        _exit(127);
    }
    close(p[1]);
    size_t used = 0;
    ssize_t r;
    while ((r = read(p[0], out + used, cap - 1 - used)) > 0) used += (size_t)r;
    out[used] = 0;
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static long json_num(const char *line, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(line, k);
    ck_assert_msg(p != NULL, "no %s in %s", key, line);
    return strtol(p + strlen(k), NULL, 10);
}

static const char *CAPS[] = { "hsb_small_4k_3pages", "hsb_small_3000_embedded", "hsb_sepmeta_3000",
                              "hsb_medium_64k_4pages", "hsb_nometa_4k_3pages" };

START_TEST(replay_each_capture_json)
{
    static char out[1 << 20];
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/roce-pcaps/%s.pcap", CAPS[_i]);
    char path[1024];
    snprintf(path, sizeof path, "%s", mlxd_test_path(rel));
    struct mlxd_capture *c = NULL;
    ck_assert_int_eq(mlxd_capture_load(path, &c), 0);
    const char *args[] = { "--replay", path, "--json", "-q", NULL };
    int rc = run_tool(out, sizeof out, args);
    ck_assert_msg(rc == 0, "%s: exit %d\n%s", CAPS[_i], rc, out);
    size_t frames = 0;
    char *save = NULL;
    const char *summary = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strstr(line, "\"summary\":true")) { summary = line; continue; }
        ck_assert_uint_lt(frames, c->nframes);
        const struct mlxd_capture_frame *cf = &c->frames[frames];
        ck_assert_int_eq(json_num(line, "frame_number"), (long)frames);
        ck_assert_int_eq(json_num(line, "page"), (long)cf->page);
        ck_assert_int_eq(json_num(line, "psn"), (long)cf->md.psn);
        ck_assert_int_eq(json_num(line, "bytes_written"), (long)cf->md.bytes_written);
        ck_assert_int_eq(json_num(line, "crc"), (long)cf->md.crc);
        ck_assert_int_eq(json_num(line, "timestamp_s"), (long)cf->md.timestamp_s);
        ck_assert_int_eq(json_num(line, "timestamp_ns"), (long)cf->md.timestamp_ns);
        ck_assert(strstr(line, "\"payload_ok\":true") != NULL);
        frames++;
    }
    ck_assert_ptr_nonnull(summary);
    ck_assert_uint_eq(frames, c->nframes);
    ck_assert_int_eq(json_num(summary, "frames_received"), (long)c->nframes);
    ck_assert_int_eq(json_num(summary, "dropped"), 0);
    ck_assert_int_eq(json_num(summary, "overwritten"), 0);
    ck_assert_int_eq(json_num(summary, "errors"), 0);
    ck_assert(strstr(summary, "\"ok\":true") != NULL);
    mlxd_capture_free(c);
}
END_TEST

/* Three passes over a capture: PSNs run on (UC drops old PSNs), 18 frames come. */
START_TEST(replay_loops)
{
    static char out[1 << 16];
    char path[1024];
    snprintf(path, sizeof path, "%s", mlxd_test_path("fixtures/roce-pcaps/hsb_small_3000_embedded.pcap"));
    const char *args[] = { "--replay", path, "--loops", "3", "--json", "-q", NULL };
    int rc = run_tool(out, sizeof out, args);
    ck_assert_msg(rc == 0, "exit %d\n%s", rc, out);
    const char *sum = strstr(out, "\"summary\":true");
    ck_assert_ptr_nonnull(sum);
    ck_assert_int_eq(json_num(sum, "frames_received"), 12);
    ck_assert_int_eq(json_num(sum, "payload_failures"), 0);
    ck_assert_int_eq(json_num(sum, "overwritten"), 0);
}
END_TEST

/* A deliberately slow consumer (50 ms a frame, queue 1) over 20 frames that come every few ms:
 * all 20 are received, most are dropped from the queue, and that is not a failure. */
START_TEST(slow_consumer_json)
{
    static char out[1 << 16];
    char path[1024];
    snprintf(path, sizeof path, "%s", mlxd_test_path("fixtures/roce-pcaps/hsb_medium_64k_4pages.pcap"));
    const char *args[] = { "--replay", path, "--consumer-delay-ms", "50", "--queue-size", "1",
                           "--json", "-q", NULL };
    int rc = run_tool(out, sizeof out, args);
    ck_assert_msg(rc == 0, "exit %d\n%s", rc, out);
    const char *sum = strstr(out, "\"summary\":true");
    ck_assert_ptr_nonnull(sum);
    ck_assert_int_eq(json_num(sum, "frames_received"), 20);
    long consumed = json_num(sum, "frames_consumed"), dropped = json_num(sum, "dropped");
    /* before the consumer's first get_next_frame only the newest frame is kept: on a loaded
     * machine the first frames can be replaced before that first call, and are counted so */
    long replaced = json_num(sum, "replaced");
    ck_assert_int_ge(dropped, 1);
    ck_assert_int_eq(consumed + dropped + replaced, 20);
    ck_assert_int_eq(json_num(sum, "payload_failures"), 0);
}
END_TEST

START_TEST(generate_and_save)
{
    static char out[1 << 16];
    char dir[] = "/tmp/mlxd-capture-save-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *args[] = { "--generate", "-n", "5", "--frame-size", "3000", "--pages", "3",
                           "--fps", "100", "--save", dir, "--json", "--busy", NULL };
    int rc = run_tool(out, sizeof out, args);
    ck_assert_msg(rc == 0, "exit %d\n%s", rc, out);
    const char *sum = strstr(out, "\"summary\":true");
    ck_assert_ptr_nonnull(sum);
    ck_assert(strstr(sum, "\"ok\":true") != NULL);
    ck_assert_int_eq(json_num(sum, "frames_received"), 5);
    long consumed = json_num(sum, "frames_consumed"), files = 0;
    ck_assert_int_ge(consumed, 1);
    /* one file per consumed frame, named by arrival index; an intact frame's file holds that
     * frame's pattern (the frame number of its JSON line) */
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strstr(line, "\"summary\":true")) continue;
        long rfn = json_num(line, "received_frame_number"), fn = json_num(line, "frame_number");
        char p[512];
        snprintf(p, sizeof p, "%s/frame-%06ld.bin", dir, rfn - 1);
        FILE *f = fopen(p, "rb");
        ck_assert_msg(f != NULL, "%s missing", p);
        uint8_t b[4096];
        size_t n = fread(b, 1, sizeof b, f);
        fclose(f);
        ck_assert_uint_eq(n, 3000);                  /* bytes_written bytes */
        if (strstr(line, "\"state\":\"intact\"") && strstr(line, "\"psn_mismatch\":false"))
            ck_assert_int_eq(mlxd_hsb_payload_check(b, n, (uint32_t)fn), -1);
        unlink(p);
        files++;
    }
    ck_assert_int_eq(files, consumed);
    ck_assert_int_eq(rmdir(dir), 0);                 /* nothing else was written */
}
END_TEST

/* The stress case of docs/receiver.md: no flow control and 4 pages, so the device laps the
 * consumer and rewrites pages before their completion is polled.  Those frames hold other
 * frames' pattern words (right index, another frame's tag): rewritten, not failures. */
START_TEST(generate_fps0_lapped)
{
    static char out[1 << 20];
    const char *args[] = { "--generate", "-n", "1000", "--frame-size", "65536", "--pages", "4",
                           "--fps", "0", "--busy", "--json", "-q", NULL };
    int rc = run_tool(out, sizeof out, args);
    const char *sum = strstr(out, "\"summary\":true");
    ck_assert_msg(sum != NULL, "exit %d, no summary", rc);
    ck_assert_msg(rc == 0, "exit %d\n%s", rc, sum);
    ck_assert_int_eq(json_num(sum, "frames_received"), 1000);
    ck_assert_int_eq(json_num(sum, "payload_failures"), 0);
    ck_assert_int_eq(json_num(sum, "payload_checked"), json_num(sum, "frames_consumed"));
}
END_TEST

/* Two runs started at the same time without MLXD_EMU_DEVICES: each must end up with its own
 * emulated address pair (the one that loses the race for a pair moves on to the next), so both
 * receive all their frames. */
START_TEST(concurrent_runs)
{
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            static char out[1 << 16];
            auto_addresses = true;
            const char *args[] = { "--generate", "-n", "20", "--fps", "200", "--json", "-q", NULL };
            int rc = run_tool(out, sizeof out, args);
            const char *sum = strstr(out, "\"summary\":true");
            _exit(rc == 0 && sum && json_num(sum, "frames_received") == 20 ? 0 : 10 + rc);
        }
    }
    for (int i = 0; i < 2; i++) {
        int st;
        ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "run %d: status 0x%x", i, st);
    }
}
END_TEST

START_TEST(usage_errors_exit_2)
{
    static char out[1 << 14];
    const char *a1[] = { "--no-such-option", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, a1), 2);
    const char *a2[] = { "--pages", "many", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, a2), 2);
    const char *a3[] = { "--generate", "--queue-size", "9", "--pages", "2", "-q", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, a3), 2);       /* queue_size > pages */
    /* pages and queue_size are in 1..4096 (mlxd_receiver.h: pages 1..4096, queue 1..pages) */
    const char *a5[] = { "--generate", "--pages", "0", "-q", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, a5), 2);
    const char *a6[] = { "--generate", "--queue-size", "0", "-q", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, a6), 2);
    const char *a4[] = { "--help", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, a4), 0);
    ck_assert(strstr(out, "--replay") != NULL);
}
END_TEST

/* Frames expected but none arrive (a wrong target port): exit 1. */
START_TEST(missing_frames_exit_1)
{
    static char out[1 << 14];
    const char *args[] = { "--generate", "-n", "3", "--target", "127.0.0.1:9", "--timeout-ms", "300",
                           "-q", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, args), 1);
    ck_assert(strstr(out, "FAILED") != NULL);
}
END_TEST

/* A 3-page capture into 1 page: the writes to pages 1 and 2 fall outside the region, so
 * those frames never come; the FAILED line says how many of the expected came. */
START_TEST(too_few_pages_explained)
{
    static char out[1 << 16];
    char path[1024];
    snprintf(path, sizeof path, "%s", mlxd_test_path("fixtures/roce-pcaps/hsb_small_4k_3pages.pcap"));
    const char *args[] = { "--replay", path, "--pages", "1", "--timeout-ms", "300", "-q", NULL };
    ck_assert_int_eq(run_tool(out, sizeof out, args), 1);
    ck_assert_msg(strstr(out, "FAILED:") && strstr(out, "expected frames received"), "%s", out);
}
END_TEST

/* Ctrl-C: the summary, then "interrupted" (not FAILED); exit 1 when frames were expected (-n)
 * and not all came, 0 when no count was expected (--duration only). */
static void interrupt_case(const char *const *args, int want_rc)
{
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        static char out[1 << 16];
        setpgid(0, 0);
        signal(SIGINT, SIG_IGN);        /* the tool installs its own handler */
        int rc = run_tool(out, sizeof out, args);
        bool said = strstr(out, "summary:") && strstr(out, "interrupted") && !strstr(out, "FAILED");
        _exit(said ? rc : 100 + rc);
    }
    setpgid(child, child);
    usleep(1500 * 1000);
    ck_assert_int_eq(killpg(child, SIGINT), 0);
    int st;
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == want_rc, "status 0x%x, want exit %d", st, want_rc);
}

START_TEST(interrupted)
{
    const char *a1[] = { "--generate", "-n", "1000", "--fps", "20", "-q", NULL };
    interrupt_case(a1, 1);
    const char *a2[] = { "--generate", "--duration", "100", "--fps", "20", "-q", NULL };
    interrupt_case(a2, 0);
}
END_TEST

Suite *receiver_tool_suite(void)
{
    Suite *s = suite_create("receiver_tool");
    TCase *tc = tcase_create("mlxd_capture");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, replay_each_capture_json, 0, 5);
    tcase_add_test(tc, replay_loops);
    tcase_add_test(tc, slow_consumer_json);
    tcase_add_test(tc, generate_and_save);
    tcase_add_test(tc, generate_fps0_lapped);
    tcase_add_loop_test(tc, concurrent_runs, 0, 3);
    tcase_add_test(tc, usage_errors_exit_2);
    tcase_add_test(tc, too_few_pages_explained);
    tcase_add_test(tc, interrupted);
    tcase_add_test(tc, missing_frames_exit_1);
    suite_add_tcase(s, tc);
    return s;
}
