/* mlxd-pingpong as a new user runs it: server and client as two processes on the emulator
 * (--emulate), RC and UC, WRITE_IMM and SEND; both must exit 0 (every byte verified) and the
 * client must print its latency line. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <limits.h>
#include <unistd.h>
#include "util.h"

static void run(const char *transport, const char *op, int iters)
{
    char rel[512], exe[PATH_MAX], cmd[3 * PATH_MAX + 1024], out[256];
    snprintf(rel, sizeof rel, "%s/bin/mlxd-pingpong", mlxd_test_build_dir());
    ck_assert_msg(realpath(rel, exe), "%s is not built", rel);
    ck_assert_msg(access(exe, X_OK) == 0, "%s is not built", exe);
    unsigned v = (unsigned)getpid() * 2654435761u;
    unsigned port = 20000 + v % 30000;
    char devs[96];
    snprintf(devs, sizeof devs, "mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2", 1 + (v >> 8) % 250, (v >> 16) & 0xff,
             1 + (v >> 8) % 250, (v >> 16) & 0xff);
    snprintf(out, sizeof out, "%s/mlxd-pp-%d.txt", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    /* a clean environment: only the device list (not the runner's emulator tree) */
    snprintf(cmd, sizeof cmd,
             "env -u SYSFS_PATH -u LD_PRELOAD MLXD_EMU_DEVICES=%s timeout 60 %s --emulate -p %u -n %d -c %s -o %s >/dev/null 2>&1 & "
             "srv=$!; sleep 0.3; env -u SYSFS_PATH -u LD_PRELOAD MLXD_EMU_DEVICES=%s timeout 60 %s --emulate -p %u -n %d -c %s -o %s 127.0.0.1 >%s 2>&1; "
             "c=$?; wait $srv; s=$?; exit $((c * 16 + s))",
             devs, exe, port, iters, transport, op, devs, exe, port, iters, transport, op, out);
    int st = system(cmd);
    char text[4096] = "";
    FILE *f = fopen(out, "r");
    if (f) { size_t n = fread(text, 1, sizeof text - 1, f); text[n] = 0; fclose(f); }
    unlink(out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %s: exit 0x%x, client said: %s", transport, op, st, text);
    ck_assert_msg(strstr(text, "data verified") && strstr(text, "median") && strstr(text, "p99"),
                  "client output: %s", text);
}

START_TEST(rc_write_imm) { run("rc", "write_imm", 2000); }
END_TEST
START_TEST(uc_write_imm) { run("uc", "write_imm", 2000); }
END_TEST
START_TEST(rc_send) { run("rc", "send", 1000); }
END_TEST
START_TEST(uc_send) { run("uc", "send", 1000); }
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
    suite_add_tcase(s, tc);
    return s;
}
