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

/* ASan reserves terabytes of address space at start-up, so a tool built with it cannot run under
 * "ulimit -v" at all: the out-of-memory test runs in plain builds only (the suite and the tool
 * are built with the same flags). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CAN_LIMIT_MEMORY 0
#else
#define CAN_LIMIT_MEMORY 1
#endif

static char out[1 << 16];

/* Opens "cd SRC && PRE 'mlxd-cqe' ARGS 2>&1" for reading (PRE: shell commands before it). */
static FILE *open_tool(const char *pre, const char *args)
{
    char tool[2048], cwd[1024], cmd[4096];
    /* a relative build dir is relative to where the suite runs; the command runs in the source
     * tree (for fixtures/) */
    const char *b = mlxd_test_build_dir();
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(tool, sizeof tool, "%s%s%s/bin/mlxd-cqe", b[0] == '/' ? "" : cwd,
             b[0] == '/' ? "" : "/", b);
    ck_assert_msg(access(tool, X_OK) == 0, "%s is not built", tool);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s' %s 2>&1", mlxd_test_src_dir(), pre, tool, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Runs PRE "mlxd-cqe ARGS" through the shell; returns the exit status, stdout+stderr in out. */
static int run_tool_after(const char *pre, const char *args)
{
    FILE *p = open_tool(pre, args);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int run_tool(const char *args) { return run_tool_after("", args); }

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

/* Makes path (a "/tmp/...XXXXXX" buffer) a file of size bytes, all zero (sparse: cheap). */
static void tmp_zeros(char *path, off_t size)
{
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, size), 0);
    close(fd);
}

START_TEST(input_over_64_mib_is_refused_naming_it)
{
    /* docs/cqe-tool.md: each input is read up to 64 MiB = 67108864 bytes; a larger one is
     * refused with one line, and counts as nothing decoded (exit 1).  Before, /dev/zero and
     * "yes |" grew the buffer until the OOM killer ended the tool. */
    static const char limit_msg[] = "more than 64 MiB (the limit per input); nothing decoded from it\n";
    char exact[] = "/tmp/mlxd-cqe-64m-XXXXXX", over[] = "/tmp/mlxd-cqe-64m1-XXXXXX", cmd[512];
    ck_assert_int_eq(run_tool("/dev/zero"), 1);
    ck_assert_str_eq(out, "mlxd-cqe: /dev/zero: more than 64 MiB (the limit per input); nothing "
                          "decoded from it\n");
    ck_assert_int_eq(run_tool("< /dev/zero"), 1);
    ck_assert_str_eq(out, "mlxd-cqe: <stdin>: more than 64 MiB (the limit per input); nothing "
                          "decoded from it\n");
    ck_assert_int_eq(run_tool_after("yes |", ""), 1);   /* endless stdin of short lines */
    ck_assert_ptr_nonnull(strstr(out, "mlxd-cqe: <stdin>: more than 64 MiB"));
    /* the boundary: exactly the limit is read (one line of NUL bytes = empty lines: nothing) */
    tmp_zeros(exact, (off_t)64 << 20);
    tmp_zeros(over, ((off_t)64 << 20) + 1);
    ck_assert_int_eq(run_tool(exact), 1);
    ck_assert_ptr_null(strstr(out, limit_msg));
    ck_assert_ptr_nonnull(strstr(out, "no decodable CQE or status line found"));
    /* an input over the limit does not stop the next one from being decoded */
    snprintf(cmd, sizeof cmd, "%s fixtures/cqe-dumps/spdk-500.txt", over);
    ck_assert_int_eq(run_tool(cmd), 0);
    ck_assert_ptr_nonnull(strstr(out, limit_msg));
    ck_assert_ptr_nonnull(strstr(out, "QPN 0x00011b"));
    unlink(exact);
    unlink(over);
}
END_TEST

START_TEST(out_of_memory_names_stdin_as_elsewhere)
{
    /* 40 MB of address space cannot hold a 64 MiB buffer: the read fails with ENOMEM, and the
     * message names standard input "<stdin>" as every other message does (it said "-"). */
    ck_assert_int_eq(run_tool_after("ulimit -v 40000;", "< /dev/zero"), 1);
    ck_assert_str_eq(out, "mlxd-cqe: <stdin>: Cannot allocate memory\n");
}
END_TEST

START_TEST(text_output_of_300000_cqes_with_warnings_is_linear)
{
    /* 300,000 rows 00000030: each a CQE with rows 00000000-00000020 missing, so 3 warnings each
     * (docs/cqe-tool.md); each CQE's warnings must be printed under it and name its line.
     * The guard: printing looked through all diagnostics for each CQE, quadratic (64,000 rows
     * took 16 s, 4-5x per doubling; 300,000 rows over 10 minutes), far past this tcase's 60 s
     * timeout; linear printing takes a few seconds.  No timing is asserted. */
    enum { N = 300000 };
    /* the rows are made in the pipeline: no temporary file to leave behind if the test dies */
    FILE *p = open_tool("yes '00000030: 00 00 00 00 9d 00 53 04 08 00 01 1b 00 08 d0 d2' | "
                        "head -n 300000 |", "");
    static const char head[] = "<stdin>: CQE ";
    char *line = NULL;
    size_t cap = 0, ncqes = 0, nwarn = 0, misplaced = 0, other = 0;
    unsigned cur = 0;
    while (getline(&line, &cap, p) > 0) {
        unsigned k, of, l1, l2, wl;
        if (!strncmp(line, head, strlen(head))) {
            ck_assert_int_eq(sscanf(line + strlen(head), "%u of %u, lines %u-%u", &k, &of, &l1, &l2), 4);
            ck_assert_uint_eq(k, ncqes + 1);
            ck_assert_uint_eq(of, N);
            ck_assert_uint_eq(l1, k);
            ck_assert_uint_eq(l2, k);
            cur = k;
            ncqes++;
        } else if (sscanf(line, "  warning: line %u:", &wl) == 1) {
            nwarn++;
            if (wl != cur || !strstr(line, "is missing; assumed bytes")) misplaced++;
        } else if (line[0] != ' ' && line[0] != '\n') {
            other++;   /* stderr lines: none expected */
        }
    }
    free(line);
    int st = pclose(p);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    ck_assert_uint_eq(ncqes, N);
    ck_assert_uint_eq(nwarn, 3 * N);
    ck_assert_uint_eq(misplaced, 0);
    ck_assert_uint_eq(other, 0);
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
    tcase_add_test(tc, input_over_64_mib_is_refused_naming_it);
    if (CAN_LIMIT_MEMORY) tcase_add_test(tc, out_of_memory_names_stdin_as_elsewhere);
    suite_add_tcase(s, tc);
    /* 60 s is also the guard against quadratic printing (see the test) */
    tc = tcase_create("large");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, text_output_of_300000_cqes_with_warnings_is_linear);
    suite_add_tcase(s, tc);
    return s;
}
