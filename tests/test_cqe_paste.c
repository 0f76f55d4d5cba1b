/* cqe_paste suite: pastes as they are published (issue 16) and the status-only lines of
 * perftest, UCX, NCCL, RDMA_RC_example, libfabric and DAPL.
 *
 * Expected values come from the specification, not from the decoder: the CQE fields from the
 * layout of struct mlx5_err_cqe (<infiniband/mlx5dv.h>: byte 52 hw_err_synd, 53 hw_synd_type,
 * 54 vendor_err_synd, 55 syndrome, 57-59 QPN, 60-61 wqe_counter, 63 op_own); statuses from
 * enum ibv_wc_status (<infiniband/verbs.h>: 10 IBV_WC_REM_ACCESS_ERR, 12 IBV_WC_RETRY_EXC_ERR);
 * syndromes from MLX5_CQE_SYNDROME_* (0x13 REMOTE_ACCESS_ERR, 0x15 TRANSPORT_RETRY_EXC_ERR) and
 * the mapping of rdma-core providers/mlx5/cq.c mlx5_handle_error_cqe (0x13 -> 10, 0x15 -> 12).
 * Each status line's format is quoted with the source file that prints it. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_cqe.h"
#include "mlxd_cqe_dump.h"
#include "mlxd_names.h"
#include "dump_util.h"
#include "util.h"


/* The CQE of fixtures/cqe-dumps/libfabric-4283.txt: last words "00000000 00008813 10012abe
 * 0dd0c1d3": 54 = 0x88, 55 = 0x13, 56 = 0x10 (RDMA READ), QPN 0x012abe, wqe_counter 0x0dd0,
 * op_own 0xd3 (REQ_ERR). */
static void assert_libfabric_4283(const struct mlxd_dump_cqe *c)
{
    const uint8_t *b = c->bytes;
    ck_assert_uint_eq(mlxd_cqe_opcode(b), 0xd);
    ck_assert_uint_eq(mlxd_cqe_syndrome(b), 0x13);
    ck_assert_uint_eq(mlxd_cqe_vendor_syndrome(b), 0x88);
    ck_assert_uint_eq(mlxd_cqe_err_qpn(b), 0x012abe);
    ck_assert_uint_eq(mlxd_cqe_wqe_counter(b), 0x0dd0);
    ck_assert_int_eq(mlxd_syndrome_to_wc_status(mlxd_cqe_syndrome(b)), 10);
}

#define W0 "00000000 00000000 00000000 00000000\n"
#define W3 "00000000 00008813 10012abe 0dd0c1d3\n"

/* Paste 1: rows separated by blank lines (as forums render a paste), which used to give
 * "1 lines of words is not a multiple of 4". */
START_TEST(rows_separated_by_blank_lines)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump("mlx5: host: got completion with error:\n" W0 "\n" W0 "\n" W0 "\n" W3);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->nerrors, 0);
    ck_assert_uint_eq(r->nwarnings, 0);
    assert_libfabric_4283(&r->cqes[0]);
    ck_assert_uint_eq(r->cqes[0].last_line, 8);
    mlxd_cqe_dump_free(r);
    /* a blank line still separates two whole CQEs: a damaged third run does not take them along */
    r = mlxd_test_parse_dump(W0 W0 W0 W3 "\n" W0 W0 W0 W3 "\n" W0 W3);
    ck_assert_uint_eq(r->ncqes, 2);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 12, "not a multiple of 4"));
    mlxd_cqe_dump_free(r);
}
END_TEST

/* Paste 2: quoted ("> ") and wrapped by e-mail at 13 bytes, the rest on an indented line
 * (lkml-nfsordma-1's CQE: row 30 "00 00 00 00 00 00 88 13 08 00 01 13 07 47 67 d2"). */
START_TEST(quoted_and_wrapped_by_mail)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "> [  408.380181] infiniband mlx5_0: dump_cqe:272:(pid 0): dump error cqe\n"
        "> [  408.380187] 00000000: 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
        ">    00 00 00\n"
        "> [  408.380188] 00000010: 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
        ">    00 00 00\n"
        "> [  408.380189] 00000020: 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
        ">    00 00 00\n"
        "> [  408.380190] 00000030: 00 00 00 00 00 00 88 13 08 00 01 13 07\n"
        ">    47 67 d2\n");
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->nerrors, 0);
    const uint8_t *b = r->cqes[0].bytes;
    ck_assert_uint_eq(r->cqes[0].size, 64);
    ck_assert_uint_eq(b[63], 0xd2);
    ck_assert_uint_eq(mlxd_cqe_syndrome(b), 0x13);
    ck_assert_uint_eq(mlxd_cqe_vendor_syndrome(b), 0x88);
    ck_assert_uint_eq(mlxd_cqe_err_qpn(b), 0x000113);
    ck_assert_uint_eq(mlxd_cqe_wqe_counter(b), 0x0747);
    /* one warning per joined row, naming both lines */
    ck_assert_uint_eq(r->nwarnings, 4);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 8, "lines 8-9"));
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 2, "wrapped"));
    mlxd_cqe_dump_free(r);
    /* rdma-core word lines wrapped after the 2nd word */
    r = mlxd_test_parse_dump("> mlx5: host: got completion with error:\n> " W0 "> " W0 "> " W0
              "> 00000000 00008813\n>     10012abe 0dd0c1d3\n");
    ck_assert_uint_eq(r->ncqes, 1);
    assert_libfabric_4283(&r->cqes[0]);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 5, "lines 5-6"));
    mlxd_cqe_dump_free(r);
}
END_TEST

/* Paste 3: the project's own fixture lines (docs/fixture-format.md), which gave 0 results and
 * 0 diagnostics: the example there, "+DELAY HEX # comment" and a whole file with its header. */
START_TEST(fixture_lines_and_files)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "+16666667ns 00000000000000000000000000000000000000000000000000000000000000000000000000000003"
        "000000000000100000000000000000000000012300020010   # third frame\n");
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->ndiags, 0);
    const uint8_t *b = r->cqes[0].bytes;
    ck_assert_int_eq(r->cqes[0].format, MLXD_DUMP_FIXTURE);
    ck_assert_uint_eq(mlxd_cqe_opcode(b), 1);              /* RESP_WR_IMM */
    ck_assert_uint_eq(mlxd_cqe_imm(b), 3);
    ck_assert_uint_eq(mlxd_cqe_byte_cnt(b), 0x1000);
    ck_assert_uint_eq(mlxd_cqe_qpn(b), 0x000123);
    ck_assert_uint_eq(mlxd_cqe_wqe_counter(b), 2);
    mlxd_cqe_dump_free(r);

    size_t len;
    char *text = mlxd_test_slurp(mlxd_test_path("fixtures/cqe-streams/hand-written-3-frames.fix"), &len);
    ck_assert_int_eq(mlxd_cqe_dump_parse(text, len, &r), 0);
    ck_assert_uint_eq(r->ncqes, 3);
    ck_assert_uint_eq(r->nerrors, 0);
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_uint_eq(mlxd_cqe_imm(r->cqes[i].bytes), i + 1);
        ck_assert_uint_eq(mlxd_cqe_wqe_counter(r->cqes[i].bytes), i);
    }
    mlxd_cqe_dump_free(r);
    free(text);

    /* a 128-byte record (256 digits): the CQE is the second half */
    char line[300];
    memset(line, '0', 256);
    memcpy(line + 254, "d2", 2);
    line[256] = 0;
    strcat(line, " # 128-byte CQE\n");
    r = mlxd_test_parse_dump(line);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->cqes[0].size, 128);
    ck_assert_uint_eq(r->cqes[0].bytes[127], 0xd2);
    mlxd_cqe_dump_free(r);
    /* a record of the wrong length is an error naming the line, not passed over */
    r = mlxd_test_parse_dump("\n+5us 0011223344 # truncated\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 2, "10 hex digits"));
    mlxd_cqe_dump_free(r);
}
END_TEST

/* Paste 4: ordinary log lines that start with 8 hex digits and a colon are not rows. */
START_TEST(log_lines_with_hex_and_colon_are_not_rows)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "worker 7f3a2b1c: 12 errors since start\n"
        "deadbeef: 3 retries\n"
        "thread 00000010: 1 queued\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert_uint_eq(r->ndiags, 0);
    mlxd_cqe_dump_free(r);
    /* inside a dump, a short row at a row offset is still a damaged row, refused */
    r = mlxd_test_parse_dump("dump error cqe\n"
              "00000000: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
              "00000010: 00 00 00\n"
              "00000020: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
              "00000030: 00 00 00 00 00 00 88 13 08 00 01 13 07 47 67 d2\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 3, "3 bytes"));
    mlxd_cqe_dump_free(r);
}
END_TEST

/* One status line: its format, where it comes from, and what it must give. */
static const struct status_case {
    const char *line, *source;
    enum mlxd_status_source src;
    int status, syndrome, vendor, hw_err_synd, hw_synd_type_hi;
    bool syndrome_printed;
} lines[] = {
    /* perftest src/perftest_resources.c: " Failed status %d: wr_id %d syndrom 0x%x" (wc.status,
     * wr_id, wc.vendor_err) */
    { " Failed status 12: wr_id 0 syndrom 0x81", "perftest", MLXD_STATUS_PERFTEST, 12, 0x15, 0x81, -1, -1, false },
    /* UCX src/uct/ib/mlx5/ib_mlx5.c uct_ib_mlx5_completion_with_err: "%s on %s:%d/%s (synd 0x%x
     * vend 0x%x hw_synd %d/%d)" (syndrome, vendor_err_synd, hw_synd_type >> 4, hw_err_synd) */
    { "[1605012345.123456] [node1:4321 :0]     ib_mlx5_log.c:143  UCX  ERROR Transport retry count "
      "exceeded on mlx5_0:1/RoCE (synd 0x15 vend 0x81 hw_synd 0/0)", "UCX", MLXD_STATUS_UCX, 12,
      0x15, 0x81, 0, 0, true },
    /* UCX src/uct/ib/rc/verbs/rc_verbs_iface.c: "send completion with error: %s qpn 0x%x wrid
     * 0x%lx vendor_err 0x%x" (ibv_wc_status_str) */
    { "UCX  ERROR send completion with error: remote access error qpn 0x1a4 wrid 0x3 vendor_err 0x88",
      "UCX verbs", MLXD_STATUS_UCX, 10, 0x13, 0x88, -1, -1, false },
    /* NCCL src/transport/net_ib.cc (2.12+): "NET/IB : Got completion from peer %s with status=%d
     * opcode=%d len=%d vendor err %d (%s)..." */
    { "node1:2345:2400 [0] transport/net_ib.cc:1234 NCCL WARN NET/IB : Got completion from peer "
      "10.0.0.2<56789> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 "
      "remoteGids::ffff:10.0.0.2", "NCCL", MLXD_STATUS_NCCL, 12, 0x15, 0x81, -1, -1, false },
    /* NCCL before 2.12: "NET/IB : Got completion with error %d, opcode %d, len %d, vendor err %d" */
    { "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129", "NCCL old",
      MLXD_STATUS_NCCL, 12, 0x15, 0x81, -1, -1, false },
    /* RDMA_RC_example.c (Mellanox RDMA Aware Networks Programming User Manual), copied by many
     * rdma-core users: "got bad completion with status: 0x%x, vendor syndrome: 0x%x" */
    { "got bad completion with status: 0xc, vendor syndrome: 0x81", "RC example",
      MLXD_STATUS_RC_EXAMPLE, 12, 0x15, 0x81, -1, -1, false },
    /* libfabric fabtests include/shared.h FT_CQ_ERR: "cq_readerr (Provider errno: %d) : %s";
     * verbs provider: prov_errno = wc.status (prov/verbs/src/verbs_cq.c), text ibv_wc_status_str */
    { "error: cq_readerr (Provider errno: 12) : transport retry counter exceeded", "fabtests",
      MLXD_STATUS_LIBFABRIC, 12, 0x15, -1, -1, -1, false },
    /* older fabtests: "cq_readerr %d (%s), provider errno: %d (%s)" */
    { "cq_readerr 5 (Input/output error), provider errno: 10 (remote access error)", "fabtests old",
      MLXD_STATUS_LIBFABRIC, 10, 0x13, -1, -1, -1, false },
    /* DAPL dapl/common/dapl_evd_util.c: "DTO completion ERR: status %d, op %s, vendor_err 0x%x - %s" */
    { "j03r2n01:UCM:d600:37cc880: 1890740163 us(1890740163 us!!!): DTO completion ERR: status 10, op "
      "Invalid DTO OP?, vendor_err 0x88 - 0.0.0.0", "DAPL", MLXD_STATUS_DAPL, 10, 0x13, 0x88, -1, -1, false },
};

START_TEST(status_line_decodes)
{
    const struct status_case *c = &lines[_i];
    struct mlxd_dump_result *r = mlxd_test_parse_dump(c->line);
    ck_assert_msg(r->nstatuses == 1, "%s: %zu status lines", c->source, r->nstatuses);
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert_uint_eq(r->nerrors, 0);
    const struct mlxd_dump_status *s = &r->statuses[0];
    ck_assert_int_eq(s->source, c->src);
    ck_assert_msg(s->status == c->status, "%s: status %d", c->source, s->status);
    ck_assert_int_eq(s->syndrome, c->syndrome);
    ck_assert(s->syndrome_printed == c->syndrome_printed);
    ck_assert_int_eq(s->vendor_syndrome, c->vendor);
    ck_assert_int_eq(s->hw_err_synd, c->hw_err_synd);
    ck_assert_int_eq(s->hw_synd_type_hi, c->hw_synd_type_hi);
    ck_assert_int_eq(s->cqe, -1);
    ck_assert_uint_eq(s->line, 1);
    /* the causes are those of the syndrome, as for a full CQE */
    ck_assert_ptr_nonnull(mlxd_syndrome_explain((unsigned)s->syndrome));
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(not_status_lines)
{
    /* another libfabric provider's errno (not an ibv_wc_status: the text says so) */
    struct mlxd_dump_result *r = mlxd_test_parse_dump("cq_readerr (Provider errno: 12) : GNI_RC_TRANSACTION_ERROR\n"
                                       "Failed status: see log\n"
                                       "status=12 of nothing\n"
                                       /* a syndrome wider than its byte (found by fuzz_cqe_dump) */
                                       "Transport retry count exceeded on mlx5_0:1/RoCE (synd 0x15d vend 0x81 hw_synd 0/0)\n"
                                       "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 300\n");
    ck_assert_uint_eq(r->nstatuses, 0);
    ck_assert_uint_eq(r->ndiags, 0);
    mlxd_cqe_dump_free(r);
}
END_TEST

/* The DAPL line of a public Intel MPI report sits under libmlx5's dump of the same completion
 * (syndrome 0x13 -> status 10, vendor 0x88): cross-checked, they agree.  A vendor syndrome that
 * differs is a warning naming both values. */
START_TEST(status_line_next_to_cqe_is_cross_checked)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "mlx5: j03r2n01: got completion with error:\n" W0 W0
        "000000b9 00000000 00000000 00000000\n"
        "00000000 00008813 100076ab 008ae4d3\n"
        "j03r2n01:UCM:d600:37cc880: 1890740163 us(1890740163 us!!!): DTO completion ERR: status 10, "
        "op Invalid DTO OP?, vendor_err 0x88 - 0.0.0.0\n");
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->nstatuses, 1);
    ck_assert_int_eq(r->statuses[0].cqe, 0);
    ck_assert_uint_eq(r->statuses[0].mismatches, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_NOTE, 6, "agrees with CQE 1"));
    mlxd_cqe_dump_free(r);

    r = mlxd_test_parse_dump("Failed status 12: wr_id 0 syndrom 0x81\n"
              "mlx5: host: got completion with error:\n" W0 W0 W0 W3);
    ck_assert_uint_eq(r->nstatuses, 1);
    ck_assert_int_eq(r->statuses[0].cqe, 0);
    ck_assert_uint_eq(r->statuses[0].mismatches, 2);    /* status 12 vs 10, vendor 0x81 vs 0x88 */
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 1, "vendor syndrome 0x81 vs byte 54 0x88"));
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 1, "status 12 vs 10"));
    mlxd_cqe_dump_free(r);

    /* UCX gives the syndrome and hw syndromes: each is compared with its byte */
    r = mlxd_test_parse_dump("Transport retry count exceeded on mlx5_0:1/RoCE (synd 0x15 vend 0x81 hw_synd 0/0)\n"
              "00000000 00000000 00000000 00000000\n" W0 W0
              "00000000 00008115 10012abe 0dd0c1d3\n");
    ck_assert_int_eq(r->statuses[0].cqe, 0);
    ck_assert_uint_eq(r->statuses[0].mismatches, 0);
    mlxd_cqe_dump_free(r);
    /* a status line far from any dump is not checked */
    char far[2048] = "Failed status 12: wr_id 0 syndrom 0x81\n";
    for (int i = 0; i < 25; i++) strcat(far, "other log line\n");
    strcat(far, W0 W0 W0 W3);
    r = mlxd_test_parse_dump(far);
    ck_assert_int_eq(r->statuses[0].cqe, -1);
    mlxd_cqe_dump_free(r);
}
END_TEST

Suite *cqe_paste_suite(void)
{
    Suite *s = suite_create("cqe_paste");
    TCase *tc = tcase_create("pastes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rows_separated_by_blank_lines);
    tcase_add_test(tc, quoted_and_wrapped_by_mail);
    tcase_add_test(tc, fixture_lines_and_files);
    tcase_add_test(tc, log_lines_with_hex_and_colon_are_not_rows);
    suite_add_tcase(s, tc);
    tc = tcase_create("status_lines");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, status_line_decodes, 0, (int)(sizeof lines / sizeof lines[0]));
    tcase_add_test(tc, not_status_lines);
    tcase_add_test(tc, status_line_next_to_cqe_is_cross_checked);
    suite_add_tcase(s, tc);
    return s;
}
