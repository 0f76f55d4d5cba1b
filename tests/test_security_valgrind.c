/* security_valgrind: the tools are clean under valgrind memcheck on their demo inputs
 * (docs/reliability.md): no invalid read or write, no use of uninitialised memory, no definite
 * leak.  Each tool runs as `valgrind --error-exitcode=99 --leak-check=full
 * --errors-for-leak-kinds=definite --trace-children=yes` (the tools re-execute themselves under
 * the emulator); exit status 99 means valgrind found an error, and the test prints its report.
 *
 * Skipped (with a message, the test passes) when valgrind is not installed (deps.sh all installs
 * it) and in sanitizer builds (valgrind cannot run ASan/TSan binaries). */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "util.h"

static char out[1 << 16];

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static bool have_valgrind(void)
{
    if (SANITIZED) {
        fprintf(stderr, "security_valgrind: skipped in a sanitizer build\n");
        return false;
    }
    if (system("command -v valgrind >/dev/null 2>&1") != 0) {
        fprintf(stderr, "security_valgrind: skipped: valgrind is not installed (sh scripts/deps.sh all)\n");
        return false;
    }
    return true;
}

/* The absolute path of tool in the build directory. */
static void tool_path(char *buf, size_t cap, const char *tool)
{
    char cwd[1024];
    const char *b = mlxd_test_build_dir();
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(buf, cap, "%s%s%s/bin/%s", b[0] == '/' ? "" : cwd, b[0] == '/' ? "" : "/", b, tool);
    ck_assert_msg(access(buf, X_OK) == 0, "%s is not built", buf);
}

/* Runs a shell command in the source tree; returns its exit status, output in out. */
static int run(const char *cmd)
{
    char full[8192];
    snprintf(full, sizeof full, "cd '%s' && %s 2>&1", mlxd_test_src_dir(), cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

#define VG "valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite " \
           "--trace-children=yes "

START_TEST(cqe_tool_on_dumps)
{
    if (!have_valgrind()) return;
    char t[2048], cmd[4096];
    tool_path(t, sizeof t, "mlxd-cqe");
    static const char *const dumps[] = { "spdk-500.txt", "lkml-nvmeof-iommu-1.txt", "ucx-1770.txt",
                                         "netdev-xsk-icosq-a.txt" };
    for (size_t i = 0; i < sizeof dumps / sizeof dumps[0]; i++) {
        snprintf(cmd, sizeof cmd, VG "'%s' fixtures/cqe-dumps/%s", t, dumps[i]);
        int rc = run(cmd);
        ck_assert_msg(rc != 99, "valgrind: mlxd-cqe %s:\n%s", dumps[i], out);
    }
}
END_TEST

START_TEST(capture_replay_demo)
{
    if (!have_valgrind()) return;
    char t[2048], cmd[4096];
    tool_path(t, sizeof t, "mlxd-capture");
    unsigned v = (unsigned)getpid();
    snprintf(cmd, sizeof cmd, "MLXD_EMU_DEVICES=mlx5_0:127.%u.%u.1:mtu=4096,mlx5_1:127.%u.%u.2:mtu=4096 "
             VG "'%s' --replay fixtures/roce-pcaps/hsb_small_4k_3pages.pcap --print-frames --quiet",
             1 + v % 250, (v / 250) % 250, 1 + v % 250, (v / 250) % 250, t);
    int rc = run(cmd);
    ck_assert_msg(rc == 0, "mlxd-capture under valgrind: exit %d\n%s", rc, out);
}
END_TEST

START_TEST(pingpong_pair)
{
    if (!have_valgrind()) return;
    char t[2048], srv[4096], cli[4096];
    tool_path(t, sizeof t, "mlxd-pingpong");
    unsigned v = (unsigned)getpid();
    unsigned a = 1 + v % 250, b = (v / 250) % 250, port = 20000 + v % 20000;
    char env[160];
    snprintf(env, sizeof env, "MLXD_EMU_DEVICES=mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2", a, b, a, b);
    char log[64];
    snprintf(log, sizeof log, "/tmp/mlxd-vg-server-%u.log", v);
    snprintf(srv, sizeof srv, "cd '%s' && %s " VG "'%s' --emulate -d mlx5_1 -p %u -n 20 > %s 2>&1",
             mlxd_test_src_dir(), env, t, port, log);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", srv, (char *)NULL);
        _exit(127);
    }
    sleep(5);   /* valgrind + the emulator: let the server listen */
    snprintf(cli, sizeof cli, "%s " VG "'%s' --emulate -d mlx5_0 -p %u -n 20 127.0.0.1", env, t, port);
    int rc = 0;
    for (int tries = 0; tries < 10; tries++) {
        rc = run(cli);
        if (rc != 1 || !strstr(out, "onnect")) break;   /* server not listening yet */
        sleep(2);
    }
    int st;
    waitpid(pid, &st, 0);
    FILE *f = fopen(log, "r");
    char slog[8192] = "";
    if (f) { slog[fread(slog, 1, sizeof slog - 1, f)] = 0; fclose(f); }
    unlink(log);
    ck_assert_msg(rc == 0, "client under valgrind: exit %d\n%s", rc, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server under valgrind: exit %d\n%s",
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, slog);
}
END_TEST

Suite *security_valgrind_suite(void)
{
    Suite *s = suite_create("security_valgrind");
    TCase *tc = tcase_create("tools");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cqe_tool_on_dumps);
    tcase_add_test(tc, capture_replay_demo);
    tcase_add_test(tc, pingpong_pair);
    suite_add_tcase(s, tc);
    return s;
}
