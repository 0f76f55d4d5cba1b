/* emu_gaps: emulator behaviours a real kernel + ConnectX has and the emulator lacked.
 *
 *   port_event_context_without_objects
 *                               PORT_ERR (10) / PORT_ACTIVE (9) reach the async fd of a context
 *                               that owns no CQ or QP (k: ib_dispatch_event -> the event handler
 *                               every uverbs file with an async event file registers)
 *   asan_preloaded_into_timeout coreutils' timeout with the ASan runtime and the emulator
 *                               preloaded starts and exits (it hung: libpcap's dependencies,
 *                               then a re-entrant initialisation) */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"
#include "test_emu_kernel.h"

#define PAGE 4096u

static void expect_event(int afd, uint32_t type)
{
    struct pollfd p = { .fd = afd, .events = POLLIN };
    ck_assert_int_eq(poll(&p, 1, 2000), 1);
    struct ib_uverbs_async_event_desc d;
    ck_assert_int_eq(read(afd, &d, sizeof d), (ssize_t)sizeof d);
    ck_assert_uint_eq(d.event_type, type);
    ck_assert_uint_eq(d.element, 1);                        /* the port number */
    ck_assert_int_eq(poll(&p, 1, 0), 0);
}

START_TEST(port_event_context_without_objects)
{
    tk_unique_devices();
    /* context A: GET_CONTEXT + an async fd, nothing else */
    int fa = tk_open(0);
    ck_assert_int_ge(fa, 0);
    struct mlx5_ib_alloc_ucontext_resp r;
    ck_assert_int_eq(tk_get_context(fa, &r), 0);
    int afa;
    ck_assert_int_eq(tk_async_alloc(fa, &afa), 0);
    /* context B on the same device with a CQ (what was delivered before) */
    struct tk_env e;
    tk_env_open(&e, 0);
    int afb;
    ck_assert_int_eq(tk_async_alloc(e.fd, &afb), 0);
    /* context C on the other device: gets nothing */
    int fc = tk_open(1);
    ck_assert_int_eq(tk_get_context(fc, &r), 0);
    int afc;
    ck_assert_int_eq(tk_async_alloc(fc, &afc), 0);
    ck_assert_int_eq(mlxd_emu_set_link(0, false), 0);
    expect_event(afa, 10);                                  /* IB_EVENT_PORT_ERR */
    expect_event(afb, 10);
    ck_assert_int_eq(mlxd_emu_set_link(0, true), 0);
    expect_event(afa, 9);                                   /* IB_EVENT_PORT_ACTIVE */
    expect_event(afb, 9);
    struct pollfd p = { .fd = afc, .events = POLLIN };
    ck_assert_int_eq(poll(&p, 1, 100), 0);
    close(afa); close(afb); close(afc);
    close(fa); close(e.fd); close(fc);
    ck_assert_uint_eq(mlxd_emu_live_total(), 0);
}
END_TEST

/* Runs argv with a time limit; returns the exit status, or -1 when it had to be killed. */
static int run_limited(char *const argv[], char *const envp[], int seconds)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) { dup2(dn, 1); dup2(dn, 2); }
        execve(argv[0], argv, envp);
        _exit(127);
    }
    int st;
    for (int i = 0; i < seconds * 100; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

START_TEST(asan_preloaded_into_timeout)
{
    char asan[512] = "";
    FILE *p = popen("gcc -print-file-name=libasan.so 2>/dev/null", "r");
    if (p) { if (!fgets(asan, sizeof asan, p)) asan[0] = 0; pclose(p); }
    asan[strcspn(asan, "\n")] = 0;
    if (!asan[0] || asan[0] != '/' || access(asan, R_OK) || access("/usr/bin/timeout", X_OK)) {
        fprintf(stderr, "emu_gaps: no libasan.so or /usr/bin/timeout: asan_preloaded_into_timeout skipped\n");
        return;
    }
    const char *build = getenv("MLXD_BUILD") ? getenv("MLXD_BUILD") : "build";
    const char *src = getenv("MLXD_SRC") ? getenv("MLXD_SRC") : ".";
    char emu[1024], pre[1600];
    snprintf(emu, sizeof emu, "%s/%s/lib/libmlx5direct-emu.so", src, build);
    ck_assert_msg(access(emu, R_OK) == 0, "%s missing", emu);
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s:%s", asan, emu);
    char *argv[] = { "/usr/bin/timeout", "5", "/bin/true", NULL };
    for (int on = 0; on < 2; on++) {
        char *envp[] = { pre, "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0",
                         on ? "MLXD_EMU=1" : "MLXD_EMU=0", "PATH=/usr/bin:/bin", NULL };
        int rc = run_limited(argv, envp, 20);
        ck_assert_msg(rc == 0, "timeout with libasan + the emulator preloaded (MLXD_EMU=%d): %s %d",
                      on, rc < 0 ? "hung, killed after 20 s" : "exit", rc);
    }
}
END_TEST

Suite *emu_gaps_suite(void)
{
    Suite *s = suite_create("emu_gaps");
    TCase *tc = tcase_create("gaps");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, port_event_context_without_objects);
    tcase_add_test(tc, asan_preloaded_into_timeout);
    suite_add_tcase(s, tc);
    return s;
}
