/* cqe_tool suite: the mlxd-cqe program as a user runs it (issue 2's "done when" check, exit
 * statuses, stdin, --json, the WQE DUMP decode).  Expected values are from the bytes of
 * fixtures/cqe-dumps/spdk-500.txt read by hand: last word line "00000000 9d005304 0800011b
 * 0008d0d2" = bytes 48-63: syndrome (55) 0x04 local protection error, vendor (54) 0x53, byte 56
 * 0x08 RDMA WRITE, QPN (57-59) 0x00011b, wqe_counter (60-61) 8, op_own (63) 0xd2: REQ_ERR. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "util.h"

static char out[1 << 16];

/* Runs "mlxd-cqe ARGS" through the shell; returns the exit status, stdout+stderr in out. */
static int run_tool(const char *args)
{
    char tool[2048], cwd[1024], cmd[4096];
    /* a relative build dir is relative to where the suite runs; the command runs in the source
     * tree (for fixtures/) */
    const char *b = mlxd_test_build_dir();
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(tool, sizeof tool, "%s%s%s/bin/mlxd-cqe", b[0] == '/' ? "" : cwd,
             b[0] == '/' ? "" : "/", b);
    ck_assert_msg(access(tool, X_OK) == 0, "%s is not built", tool);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", mlxd_test_src_dir(), tool, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Writes text to a new temporary file; path must be a "/tmp/...XXXXXX" buffer. */
static void tmp_with(char *path, const char *text)
{
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
}

START_TEST(spdk_500_done_when)
{
    ck_assert_int_eq(run_tool("fixtures/cqe-dumps/spdk-500.txt"), 0);
    static const char *const want[] = {
        "requester error", "local protection error", "vendor syndrome 0x53", "RDMA WRITE",
        "QPN 0x00011b", "wqe_counter 8", "IBV_WC_LOC_PROT_ERR",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(out, want[i]) != NULL, "output lacks '%s':\n%s", want[i], out);
}
END_TEST

START_TEST(stdin_and_json)
{
    ck_assert_int_eq(run_tool("--json < fixtures/cqe-dumps/spdk-500.txt"), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"name\": \"<stdin>\""));
    ck_assert_ptr_nonnull(strstr(out, "\"syndrome\": 4,"));
    ck_assert_ptr_nonnull(strstr(out, "\"vendor_syndrome\": 83,"));   /* 0x53 */
    ck_assert_ptr_nonnull(strstr(out, "\"qpn\": 283,"));              /* 0x11b */
    ck_assert_ptr_nonnull(strstr(out, "\"wqe_counter\": 8,"));
    ck_assert_ptr_nonnull(strstr(out, "\"wqe_opcode_name\": \"RDMA_WRITE\""));
}
END_TEST

START_TEST(exit_statuses)
{
    char plain[] = "/tmp/mlxd-cqe-plain-XXXXXX", bad[] = "/tmp/mlxd-cqe-bad-XXXXXX", cmd[512];
    tmp_with(plain, "an ordinary log line\nanother one, 0x1234\n");
    tmp_with(bad, "got completion with error:\n00000000 00000000\n");
    ck_assert_int_eq(run_tool(plain), 1);                        /* nothing decodable */
    ck_assert_int_eq(run_tool("/nonexistent-file"), 1);
    ck_assert_int_eq(run_tool("--no-such-option"), 2);
    ck_assert_int_eq(run_tool("--help"), 0);
    ck_assert_int_eq(run_tool("< /dev/null"), 1);
    /* a refused paste: error naming the line, exit 1 */
    snprintf(cmd, sizeof cmd, "< %s", bad);
    ck_assert_int_eq(run_tool(cmd), 1);
    ck_assert_ptr_nonnull(strstr(out, "<stdin>:2: error"));
    /* several files: status 0 when one decodes */
    snprintf(cmd, sizeof cmd, "%s fixtures/cqe-dumps/ucx-857.txt", plain);
    ck_assert_int_eq(run_tool(cmd), 0);
    ck_assert_ptr_nonnull(strstr(out, "local QP operation error"));
    unlink(plain);
    unlink(bad);
}
END_TEST

START_TEST(wqe_dump_ctrl_segment_decoded)
{
    /* WQE row 0 "00 00 0f 0a 00 1d bb 03 00 00 00 08 ...": opcode 0x0a SEND, index 0x000f,
     * qpn 0x001dbb, ds 3, fm_ce_se 0x08 CQ_UPDATE; and the 17-byte rows are warned about. */
    ck_assert_int_eq(run_tool("fixtures/cqe-dumps/netdev-xsk-nolinear.txt"), 0);
    ck_assert_ptr_nonnull(strstr(out, "WQE DUMP"));
    ck_assert_ptr_nonnull(strstr(out, "0x0a  SEND (SEND)"));
    ck_assert_ptr_nonnull(strstr(out, "wqe index       0x000f"));
    ck_assert_ptr_nonnull(strstr(out, "qpn             0x001dbb"));
    ck_assert_ptr_nonnull(strstr(out, "ds              3"));
    ck_assert_ptr_nonnull(strstr(out, "CQ_UPDATE"));
    ck_assert_ptr_nonnull(strstr(out, "warning: line 9: row has 17 bytes"));
}
END_TEST

Suite *cqe_tool_suite(void)
{
    Suite *s = suite_create("cqe_tool");
    TCase *tc = tcase_create("mlxd_cqe");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, spdk_500_done_when);
    tcase_add_test(tc, stdin_and_json);
    tcase_add_test(tc, exit_statuses);
    tcase_add_test(tc, wqe_dump_ctrl_segment_decoded);
    suite_add_tcase(s, tc);
    return s;
}
