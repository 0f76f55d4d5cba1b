/* The emulated NIC (emu/nic_*.c, emu/wire_udp.c, emu/pcap_writer.c), one Check test per case of
 * the stand-alone program tests/progs/nic_unit.c, which builds the kernel objects by hand and
 * writes/reads the rings as a driver does.  Expected values there come from the mlx5 layouts
 * (mlx5dv.h), the IB spec's transport rules and the error syndromes ConnectX reports. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "util.h"

static void run_case(const char *name)
{
    char prog[1024], cmd[1400];
    snprintf(prog, sizeof prog, "%s/tests/progs/nic_unit", mlxd_test_build_dir());
    ck_assert_msg(access(prog, X_OK) == 0, "%s not built (make %s)", prog, prog);
    /* a UDP port of our own, so that parallel runs (asan, tsan, other engineers) do not meet */
    unsigned port = 20000 + (unsigned)(getpid() * 7 + (int)strlen(name) * 131) % 20000;
    snprintf(cmd, sizeof cmd, "%s %s %u 2>&1", prog, name, port);
    FILE *f = popen(cmd, "r");
    ck_assert(f);
    char out[8192] = "";
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    int st = pclose(f);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nic_unit %s failed:\n%s", name, out);
    ck_assert_msg(strstr(out, "ok "), "nic_unit %s: no ok line:\n%s", name, out);
}

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

START_TEST(pcap)
{
    if (system("tshark -v >/dev/null 2>&1") != 0) {
        fprintf(stderr, "emu_nic: tshark absent, pcap dissection test skipped\n");
        return;
    }
    run_case("pcap");
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
    tcase_add_test(tc, pcap);
    suite_add_tcase(s, tc);
    return s;
}
