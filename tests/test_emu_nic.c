/* The emulated NIC (emu/nic/), one Check test per case of
 * the stand-alone program tests/progs/nic_unit.c, which builds the kernel objects by hand and
 * writes/reads the rings as a driver does.  Expected values there come from the mlx5 layouts
 * (mlx5dv.h), the IB spec's transport rules and the error syndromes ConnectX reports. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "util.h"

/* The last 1500 characters of a program's output (Check limits its messages). */
static const char *tail(const char *out)
{
    size_t n = strlen(out);
    return n > 1500 ? out + n - 1500 : out;
}

static void run_case_env(const char *name, const char *env)
{
    char prog[1024], cmd[1400];
    snprintf(prog, sizeof prog, "%s/tests/progs/nic_unit", mlxd_test_build_dir());
    ck_assert_msg(access(prog, X_OK) == 0, "%s not built (make %s)", prog, prog);
    /* a UDP port of our own, so that parallel runs (asan, tsan, other engineers) do not meet */
    unsigned port = 20000 + (unsigned)(getpid() * 7 + (int)strlen(name) * 131) % 20000;
    snprintf(cmd, sizeof cmd, "%s %s %s %u 2>&1", env, prog, name, port);
    FILE *f = popen(cmd, "r");
    ck_assert(f);
    char out[8192] = "";
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    int st = pclose(f);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nic_unit %s failed:\n%s", name, tail(out));
    ck_assert_msg(strstr(out, "ok "), "nic_unit %s: no ok line:\n%s", name, out);
}

static void run_case(const char *name) { run_case_env(name, ""); }

#define CASE(n) START_TEST(n) { run_case(#n); } END_TEST
CASE(uc_write_imm)
CASE(rc_ops)
CASE(rc_faults)
CASE(err_remote_access)
CASE(err_local_length)
CASE(err_rnr)
CASE(err_retry)
CASE(uc_errors)
CASE(arm)
CASE(crafted)
CASE(port)
CASE(two_proc)
CASE(uar_doorbell)
CASE(err_local_prot)
CASE(cq_overrun)
CASE(fault_idx)
CASE(no_uar)
CASE(bfreg_any)
CASE(late_ack)
CASE(zero_len_recv)
CASE(uc_rc_only_ops)
START_TEST(fault_env) { run_case_env("fault_env", "MLXD_EMU_FAULT_0=drop_idx=0:4,corrupt_idx=6"); }
END_TEST

START_TEST(pcap)
{
    if (system("tshark -v >/dev/null 2>&1") != 0) {
        fprintf(stderr, "emu_nic: tshark absent, pcap dissection test skipped\n");
        return;
    }
    run_case("pcap");
}
END_TEST

/* (The emulator is preloaded into the test program only, through env: preloading a sanitizer-
 * built library into sh or timeout would run the sanitizer in them.  Under ThreadSanitizer
 * (make tsan sets MLXD_TSAN) a preloaded emulator cannot start at all, TSan's own start-up goes
 * through the interposed calls, so these two tests say so and stop; `make test` and `make
 * sanitize` run them.) */
static bool preload_unsupported(void)
{
    if (!getenv("MLXD_TSAN")) return false;
    fprintf(stderr, "emu_nic: preloaded-emulator test skipped under TSan\n");
    return true;
}

/* The done-when check: tests/progs/nic_write_imm uses only open/ioctl/mmap and the uapi +
 * mlx5dv.h layouts, under the preloaded emulator; its wire is captured and tshark must dissect
 * every frame as RoCE (InfiniBand over UDP) with nothing malformed. */
START_TEST(syscalls_write_imm)
{
    if (preload_unsupported()) return;
    const char *b = mlxd_test_build_dir();
    char prog[1024], lib[1024], pcap[256], cmd[4096];
    snprintf(prog, sizeof prog, "%s/tests/progs/nic_write_imm", b);
    snprintf(lib, sizeof lib, "%s/lib/libmlx5direct-emu.so", b);
    ck_assert_msg(access(prog, X_OK) == 0, "%s not built", prog);
    unsigned port = 20000 + (unsigned)(getpid() * 13) % 20000;
    snprintf(pcap, sizeof pcap, "/tmp/nic_write_imm_%d.pcap", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "timeout 60 env ASAN_OPTIONS=verify_asan_link_order=0 LD_PRELOAD=%s "
             "MLXD_EMU_DEVICES=mlx5_0:127.0.0.1:port=%u:dport=%u:pcap=%s,"
             "mlx5_1:127.0.0.2:port=%u:dport=%u %s 2>&1",
             lib, port, port, pcap, port, port, prog);
    FILE *f = popen(cmd, "r");
    ck_assert(f);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    int st = pclose(f);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nic_write_imm failed:\n%s", tail(out));
    ck_assert_msg(strstr(out, "nic_write_imm: ok"), "%s", out);
    ck_assert_msg(strstr(out, "receiver ok") && strstr(out, "sender ok"), "%s", out);
    if (system("tshark -v >/dev/null 2>&1") != 0) {
        fprintf(stderr, "emu_nic: tshark absent, dissection of %s skipped\n", pcap);
        unlink(pcap);
        return;
    }
    /* 4000 bytes at MTU 1024: UC RDMA WRITE First, Middle, Middle, Last with Immediate */
    snprintf(cmd, sizeof cmd, "tshark -d udp.port==%u,infiniband -r %s -T fields "
             "-e frame.protocols -e infiniband.bth.opcode -e _ws.col.Info 2>/dev/null", port, pcap);
    f = popen(cmd, "r");
    ck_assert(f);
    char line[1024];
    unsigned frames = 0;
    const char *want_op[4] = {"38", "39", "39", "41"};   /* 0x26, 0x27, 0x27, 0x29 */
    while (fgets(line, sizeof line, f)) {
        ck_assert_msg(strstr(line, "eth:ethertype:ip:udp:infiniband"), "not RoCE: %s", line);
        ck_assert_msg(!strstr(line, "alformed"), "%s", line);
        if (frames < 4) ck_assert_msg(strstr(line, want_op[frames]), "frame %u: %s", frames, line);
        frames++;
    }
    pclose(f);
    ck_assert_uint_eq(frames, 4);
    unlink(pcap);
}
END_TEST

/* The same program with --fork: the receiver in a child process (two processes, each with its
 * own emulator and device, talking only over the wire). */
START_TEST(syscalls_write_imm_two_processes)
{
    if (preload_unsupported()) return;
    const char *b = mlxd_test_build_dir();
    char cmd[4096];
    unsigned port = 20000 + (unsigned)(getpid() * 17 + 7) % 20000;
    snprintf(cmd, sizeof cmd,
             "timeout 60 env ASAN_OPTIONS=verify_asan_link_order=0 LD_PRELOAD=%s/lib/libmlx5direct-emu.so "
             "MLXD_EMU_DEVICES=mlx5_0:127.0.0.1:port=%u:dport=%u,"
             "mlx5_1:127.0.0.2:port=%u:dport=%u %s/tests/progs/nic_write_imm --fork 2>&1",
             b, port, port, port, port, b);
    FILE *f = popen(cmd, "r");
    ck_assert(f);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    int st = pclose(f);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nic_write_imm --fork failed:\n%s", tail(out));
    ck_assert_msg(strstr(out, "receiver ok") && strstr(out, "sender ok") &&
                  strstr(out, "ok (two processes)"), "%s", out);
}
END_TEST

Suite *emu_nic_suite(void)
{
    Suite *s = suite_create("emu_nic");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, uc_write_imm);
    tcase_add_test(tc, rc_ops);
    tcase_add_test(tc, rc_faults);
    tcase_add_test(tc, err_remote_access);
    tcase_add_test(tc, err_local_length);
    tcase_add_test(tc, err_rnr);
    tcase_add_test(tc, err_retry);
    tcase_add_test(tc, uc_errors);
    tcase_add_test(tc, arm);
    tcase_add_test(tc, crafted);
    tcase_add_test(tc, port);
    tcase_add_test(tc, two_proc);
    tcase_add_test(tc, uar_doorbell);
    tcase_add_test(tc, err_local_prot);
    tcase_add_test(tc, cq_overrun);
    tcase_add_test(tc, fault_idx);
    tcase_add_test(tc, no_uar);
    tcase_add_test(tc, bfreg_any);
    tcase_add_test(tc, late_ack);
    tcase_add_test(tc, zero_len_recv);
    tcase_add_test(tc, uc_rc_only_ops);
    tcase_add_test(tc, fault_env);
    tcase_add_test(tc, pcap);
    tcase_add_test(tc, syscalls_write_imm);
    tcase_add_test(tc, syscalls_write_imm_two_processes);
    suite_add_tcase(s, tc);
    return s;
}
