/* cqe_dump suite: the dump parser (abi/mlxd_cqe_dump.h) on the 20 real pastes in
 * fixtures/cqe-dumps/ and on damaged pastes.
 *
 * Every expected value below was read BY HAND from the bytes of the paste, using the layout of
 * struct mlx5_err_cqe in <infiniband/mlx5dv.h>: byte 52 hw_err_synd, 53 hw_synd_type (reserved
 * upstream), 54 vendor_err_synd, 55 syndrome, 56 s_wqe_opcode, 57-59 QPN, 60-61 wqe_counter (BE),
 * 63 op_own (opcode = high nibble).  For the rdma-core word format, the 4th line's words are
 * bytes 48-51, 52-55, 56-59 and 60-63 in memory order; for rows, the row 00000030 holds bytes
 * 48-63.  Nothing here was copied from the decoder's output. */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_abi.h"
#include "mlxd_cqe.h"
#include "mlxd_cqe_dump.h"
#include "mlxd_error.h"
#include "mlxd_names.h"
#include "dump_util.h"
#include "util.h"

struct expect {
    const char *file;
    enum mlxd_dump_format fmt;
    unsigned opcode, syndrome, vendor, hw_err_synd, hw_synd_type, wqe_opcode, qpn, wqe_counter;
    unsigned warnings;     /* warnings the paste must produce (damage) */
};

/* Columns: CQE opcode (byte 63 >> 4), syndrome (55), vendor (54), hw_err_synd (52),
 * hw_synd_type (53), WQE opcode (56), QPN (57-59), wqe_counter (60-61). */
static const struct expect dumps[] = {
    /* "00000000 00008813 10012abe 0dd0c1d3": 52=00 53=00 54=88 55=13 | 56=10 57..59=012abe | 60..61=0dd0 63=d3 */
    { "libfabric-4283.txt", MLXD_DUMP_WORDS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x10, 0x012abe, 0x0dd0, 0 },
    /* row 30 "00 00 00 00 00 00 88 13 08 03 61 b3 1e a1 42 d3": 52=00 53=00 54=88 55=13 56=08 qpn 0361b3 wc 1ea1 63=d3 */
    { "lkml-dustli-remacc.txt", MLXD_DUMP_HEXROWS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x08, 0x0361b3, 0x1ea1, 0 },
    /* row 30 "... 00 00 88 13 08 00 01 13 07 47 67 d2": 54=88 55=13 56=08 qpn 000113 wc 0747 63=d2 */
    { "lkml-nfsordma-1.txt", MLXD_DUMP_HEXROWS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x08, 0x000113, 0x0747, 0 },
    /* row 30 "... 00 00 88 13 08 00 01 46 f2 93 0b d3": qpn 000146 wc f293 63=d3 */
    { "lkml-nfsordma-2.txt", MLXD_DUMP_HEXROWS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x08, 0x000146, 0xf293, 0 },
    /* row 30 "00 00 00 00 a9 00 56 04 00 00 01 e9 00 54 e8 e2": 52=a9 53=00 54=56 55=04 56=00 qpn 0001e9 wc 0054 63=e2 (RESP_ERR) */
    { "lkml-nvmeof-iommu-1.txt", MLXD_DUMP_HEXROWS, 0xe, 0x04, 0x56, 0xa9, 0x00, 0x00, 0x0001e9, 0x0054, 0 },
    /* row 30 "00 00 00 00 a9 00 56 04 00 00 00 ed 0d da ff e2": qpn 0000ed wc 0dda 63=e2 */
    { "lkml-nvmeof-iommu-2.txt", MLXD_DUMP_HEXROWS, 0xe, 0x04, 0x56, 0xa9, 0x00, 0x00, 0x0000ed, 0x0dda, 0 },
    /* row 30 "00 00 00 9a 93 00 32 04 00 00 00 00 00 00 da e1": 52=93 53=00 54=32 55=04 56=00 qpn 000000 wc 0000 63=e1 */
    { "netdev-shampo-resv.txt", MLXD_DUMP_MLX5E, 0xe, 0x04, 0x32, 0x93, 0x00, 0x00, 0x000000, 0x0000, 0 },
    /* row 30 "00 00 00 00 01 00 68 02 01 00 08 f4 de 14 59 d2": 52=01 53=00 54=68 55=02 56=01 qpn 0008f4 wc de14 63=d2 */
    { "netdev-xsk-icosq-a.txt", MLXD_DUMP_MLX5E, 0xd, 0x02, 0x68, 0x01, 0x00, 0x01, 0x0008f4, 0xde14, 0 },
    /* row 30 "00 00 00 00 60 10 68 01 0a 00 1d bb 00 0f 9f d2": 52=60 53=10 54=68 55=01 56=0a qpn 001dbb wc 000f 63=d2;
     * rows 00-20 of the CQE and rows 10, 30 of the WQE have 17 zero bytes: 5 warnings */
    { "netdev-xsk-nolinear.txt", MLXD_DUMP_MLX5E, 0xd, 0x01, 0x68, 0x60, 0x10, 0x0a, 0x001dbb, 0x000f, 5 },
    /* "00000000 00008813 08028f15 25322bd3": 54=88 55=13 56=08 qpn 028f15 wc 2532 63=d3 */
    { "spdk-1387.txt", MLXD_DUMP_WORDS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x08, 0x028f15, 0x2532, 0 },
    /* "00000000 00008813 10000146 0045b9d3": 56=10 qpn 000146 wc 0045 */
    { "spdk-264a.txt", MLXD_DUMP_WORDS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x10, 0x000146, 0x0045, 0 },
    /* "00000000 00008813 10002c02 00112cd2": 56=10 qpn 002c02 wc 0011 63=d2 */
    { "spdk-264b.txt", MLXD_DUMP_WORDS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x10, 0x002c02, 0x0011, 0 },
    /* "00000000 9d005304 0800011b 0008d0d2": 52=9d 53=00 54=53 55=04 56=08 qpn 00011b wc 0008 63=d2 */
    { "spdk-500.txt", MLXD_DUMP_WORDS, 0xd, 0x04, 0x53, 0x9d, 0x00, 0x08, 0x00011b, 0x0008, 0 },
    /* "00000000 9d005304 080003f7 40cfb9d2": qpn 0003f7 wc 40cf */
    { "spdk-507.txt", MLXD_DUMP_WORDS, 0xd, 0x04, 0x53, 0x9d, 0x00, 0x08, 0x0003f7, 0x40cf, 0 },
    /* "00000000 93005204 0a0019a1 c0921cd2": 52=93 53=00 54=52 55=04 56=0a qpn 0019a1 wc c092 */
    { "spdk-961.txt", MLXD_DUMP_WORDS, 0xd, 0x04, 0x52, 0x93, 0x00, 0x0a, 0x0019a1, 0xc092, 0 },
    /* "00000000 00008813 08006214 0000f6d2": 56=08 qpn 006214 wc 0000 */
    { "ucx-1569.txt", MLXD_DUMP_WORDS, 0xd, 0x13, 0x88, 0x00, 0x00, 0x08, 0x006214, 0x0000, 0 },
    /* "00000000 00008a12 100023e8 00016cd2": 54=8a 55=12 56=10 qpn 0023e8 wc 0001 */
    { "ucx-1770.txt", MLXD_DUMP_WORDS, 0xd, 0x12, 0x8a, 0x00, 0x00, 0x10, 0x0023e8, 0x0001, 0 },
    /* "00000000 0000da01 10031386 00097bd2": 54=da 55=01 56=10 qpn 031386 wc 0009 */
    { "ucx-2706.txt", MLXD_DUMP_WORDS, 0xd, 0x01, 0xda, 0x00, 0x00, 0x10, 0x031386, 0x0009, 0 },
    /* "00000000 01006102 0800012e 1f3a2cd2": 52=01 53=00 54=61 55=02 56=08 qpn 00012e wc 1f3a */
    { "ucx-857.txt", MLXD_DUMP_WORDS, 0xd, 0x02, 0x61, 0x01, 0x00, 0x08, 0x00012e, 0x1f3a, 0 },
    /* row 30 "00 00 00 00 9D 00 53 04 0A 00 15 42 00 19 B0 D2": 52=9d 53=00 54=53 55=04 56=0a qpn 001542 wc 0019 63=d2 */
    { "warp17-81a.txt", MLXD_DUMP_DPDK, 0xd, 0x04, 0x53, 0x9d, 0x00, 0x0a, 0x001542, 0x0019, 0 },
};


START_TEST(shared_dump_decodes_to_hand_derived_values)
{
    const struct expect *e = &dumps[_i];
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/cqe-dumps/%s", e->file);
    size_t len;
    char *text = mlxd_test_slurp(mlxd_test_path(rel), &len);
    struct mlxd_dump_result *r = NULL;
    ck_assert_int_eq(mlxd_cqe_dump_parse(text, len, &r), 0);
    ck_assert_msg(r->ncqes == 1, "%s: %zu CQEs", e->file, r->ncqes);
    ck_assert_msg(r->nerrors == 0, "%s: %zu errors, first: %s", e->file, r->nerrors,
                  r->ndiags ? r->diags[0].msg : "");
    ck_assert_msg(r->nwarnings == e->warnings, "%s: %zu warnings, expected %u", e->file,
                  r->nwarnings, e->warnings);
    const struct mlxd_dump_cqe *c = &r->cqes[0];
    ck_assert_uint_eq(c->size, 64);
    ck_assert_msg(c->format == e->fmt, "%s: format %d", e->file, c->format);
    const uint8_t *b = c->bytes;
    ck_assert_uint_eq(mlxd_cqe_opcode(b), e->opcode);
    ck_assert_uint_eq(mlxd_cqe_syndrome(b), e->syndrome);
    ck_assert_uint_eq(mlxd_cqe_vendor_syndrome(b), e->vendor);
    ck_assert_uint_eq(mlxd_cqe_hw_err_synd(b), e->hw_err_synd);
    ck_assert_uint_eq(mlxd_cqe_hw_synd_type(b), e->hw_synd_type);
    ck_assert_uint_eq(mlxd_cqe_err_wqe_opcode(b), e->wqe_opcode);
    ck_assert_uint_eq(mlxd_cqe_err_qpn(b), e->qpn);
    ck_assert_uint_eq(mlxd_cqe_wqe_counter(b), e->wqe_counter);
    struct mlxd_cqe_decoded d;
    ck_assert_int_eq(mlxd_cqe_decode(b, 64, &d), 0);
    ck_assert(d.is_error);
    ck_assert_uint_eq(d.qpn, e->qpn);
    mlxd_cqe_dump_free(r);
    free(text);
}
END_TEST

START_TEST(mlx5e_header_and_wqe_dump)
{
    size_t len;
    char *text = mlxd_test_slurp(mlxd_test_path("fixtures/cqe-dumps/netdev-xsk-nolinear.txt"), &len);
    struct mlxd_dump_result *r = NULL;
    ck_assert_int_eq(mlxd_cqe_dump_parse(text, len, &r), 0);
    ck_assert_uint_eq(r->ncqes, 1);
    const struct mlxd_dump_cqe *c = &r->cqes[0];
    /* header "Error cqe on cqn 0x817, ci 0x8," / "qn 0x1dbb, opcode 0xd, syndrome 0x1, vendor syndrome 0x68" */
    ck_assert(c->has_mlx5e_hdr);
    ck_assert_uint_eq(c->hdr_cqn, 0x817);
    ck_assert_uint_eq(c->hdr_ci, 0x8);
    ck_assert_uint_eq(c->hdr_qn, 0x1dbb);
    ck_assert_uint_eq(c->hdr_opcode, 0xd);
    ck_assert_uint_eq(c->hdr_syndrome, 0x1);
    ck_assert_uint_eq(c->hdr_vendor_syndrome, 0x68);
    /* "WQE DUMP: WQ size 1024 WQ cur size 0, WQE index 0xf, len: 64"; ctrl row
     * "00 00 0f 0a 00 1d bb 03 00 00 00 08 ...": opmod 00, index 000f, opcode 0a (SEND),
     * qpn 001dbb, ds 3, fm_ce_se 08 (CQ_UPDATE) */
    ck_assert(c->has_wqe);
    ck_assert_uint_eq(c->wq_size, 1024);
    ck_assert_uint_eq(c->wqe_index, 0xf);
    ck_assert_uint_eq(c->wqe_len, 64);
    ck_assert_uint_eq(c->wqe[3], MLXD_WQE_SEND);
    ck_assert_uint_eq(mlxd_load_be32(c->wqe) >> 8 & 0xffff, 0x000f);
    ck_assert_uint_eq(mlxd_load_be32(c->wqe + 4) >> 8, 0x001dbb);
    ck_assert_uint_eq(c->wqe[7] & MLXD_WQE_DS_MASK, 3);
    ck_assert_uint_eq(c->wqe[11], MLXD_WQE_CTRL_CQ_UPDATE);
    /* row 20 of the WQE "00 00 00 2b 00 08 00 00 00 00 00 05 9e e3 08 00" */
    ck_assert_uint_eq(c->wqe[0x23], 0x2b);
    ck_assert_uint_eq(c->wqe[0x2e], 0x08);
    /* the 17-byte rows are named: lines 9, 10, 11 (CQE) and 15, 17 (WQE) */
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 9, "17 bytes"));
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 17, "17 bytes"));
    mlxd_cqe_dump_free(r);
    free(text);

    /* icosq: the WQE's ctrl QPN (bytes 4-6: d9 ed 80) differs from the CQE's 0x0008f4: noted */
    text = mlxd_test_slurp(mlxd_test_path("fixtures/cqe-dumps/netdev-xsk-icosq-a.txt"), &len);
    ck_assert_int_eq(mlxd_cqe_dump_parse(text, len, &r), 0);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert(r->cqes[0].has_wqe);
    ck_assert_uint_eq(r->cqes[0].hdr_qn, 0x8f4);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_NOTE, 13, "disagrees"));
    mlxd_cqe_dump_free(r);
    free(text);
}
END_TEST

/* A valid print_hex_dump CQE used to build damaged variants: bytes 48-63 of lkml-nfsordma-1. */
#define ROW0 "00000000: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
#define ROW1 "00000010: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
#define ROW2 "00000020: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
#define ROW3 "00000030: 00 00 00 00 00 00 88 13 08 00 01 13 07 47 67 d2\n"

START_TEST(row_of_17_differing_bytes_is_refused_naming_the_line)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "dump error cqe\n" ROW0
        "00000010: 00 00 00 00 00 00 00 00 11 00 00 00 00 00 00 00 00\n" ROW2 ROW3);
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 3, "17 bytes"));
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(row_of_17_identical_bytes_is_repaired_with_warning)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        ROW0 "00000010: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n" ROW2 ROW3);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->nwarnings, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 2, "kept 16"));
    ck_assert_int_eq(r->diags[0].cqe, 0);
    ck_assert_uint_eq(mlxd_cqe_syndrome(r->cqes[0].bytes), 0x13);
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(short_row_is_refused)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        ROW0 ROW1 ROW2 "00000030: 00 00 00 00 00 00 88 13 08 00 01 13 07 47 67\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 4, "15 bytes"));
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(log_line_glued_after_row_is_split_with_warning)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        ROW0 ROW1 ROW2
        "00000030: 00 00 00 00 00 00 88 13 08 00 01 13 07 47 67 d2mlx5_core 0000:3b:00.1: ERR CQE\n");
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 4, "glued"));
    ck_assert_uint_eq(r->cqes[0].bytes[63], 0xd2);
    ck_assert_uint_eq(mlxd_cqe_opcode(r->cqes[0].bytes), MLXD_CQE_REQ_ERR);
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(log_line_glued_before_row_is_split_with_warning)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "[  408.380181] infiniband mlx5_0: dump_cqe:272:(pid 0): dump error cqe[  408.380187] " ROW0
        ROW1 ROW2 ROW3);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 1, "glued"));
    ck_assert_uint_eq(r->cqes[0].first_line, 1);
    ck_assert_uint_eq(mlxd_cqe_err_qpn(r->cqes[0].bytes), 0x000113);
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(log_line_glued_to_fourth_word_is_split_with_warning)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "mlx5: host: got completion with error:\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000\n"
        "00000001 00000000 00000000 00000000\n"
        "00000000 9d005304 0800011b 0008d0d2rdma.c:2698: CQ error\n");
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 5, "glued"));
    ck_assert_uint_eq(mlxd_cqe_syndrome(r->cqes[0].bytes), 0x04);
    ck_assert_uint_eq(r->cqes[0].bytes[63], 0xd2);
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(missing_word_line_is_refused)
{
    /* 3 word lines: the words cannot be assigned to bytes */
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "got completion with error:\n"
        "00000000 00000000 00000000 00000000\n"
        "00000001 00000000 00000000 00000000\n"
        "00000000 9d005304 0800011b 0008d0d2\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert_uint_ge(r->nerrors, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 4, "multiple of 4"));
    mlxd_cqe_dump_free(r);
    /* a line with 3 words in an otherwise complete run */
    r = mlxd_test_parse_dump("00000000 00000000 00000000 00000000\n"
                  "00000000 00000000 00000000\n"
                  "00000001 00000000 00000000 00000000\n"
                  "00000000 9d005304 0800011b 0008d0d2\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 2, "exactly 4 words"));
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(missing_last_row_is_refused_missing_other_row_warned)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump("dump error cqe\n" ROW0 ROW1 ROW2);
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 4, "no row 00000030"));
    mlxd_cqe_dump_free(r);
    r = mlxd_test_parse_dump("dump error cqe\n" ROW0 ROW2 ROW3);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 4, "00000010 is missing"));
    ck_assert_uint_eq(r->cqes[0].nwarnings, 1);
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(several_cqes_in_one_paste)
{
    /* two word dumps, two hexrow dumps without headers, a DPDK dump and a plain one */
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "mlx5: h: got completion with error:\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 00008813 08006214 0000f6d2\n"
        "some log line in between\n"
        "mlx5: h: got completion with error:\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 00008a12 100023e8 00016cd2\n"
        "[  +0.000001] " ROW0 "[  +0.000001] " ROW1 "[  +0.000001] " ROW2 "[  +0.000001] " ROW3
        ROW0 ROW1 ROW2
        "00000030: 00 00 00 00 a9 00 56 04 00 00 01 e9 00 54 e8 e2\n"
        "MLX5 Error CQE: at [0x7f6a7d20c000], len=64\n"
        "00000000: 00 73 65 65 6E 00 00 00 00 00 00 00 00 00 00 00 | .seen...........\n"
        "00000010: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 | ................\n"
        "00000020: 00 00 00 13 00 00 00 00 00 00 00 00 00 00 00 00 | ................\n"
        "00000030: 00 00 00 00 9D 00 53 04 0A 00 15 42 00 19 B0 D2 | ......S....B....\n"
        "0000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000009d0053040800011b0008d0d2\n");
    ck_assert_uint_eq(r->ncqes, 6);
    ck_assert_uint_eq(r->nerrors, 0);
    /* expected QPNs: bytes 57-59 of each */
    static const unsigned qpn[] = { 0x006214, 0x0023e8, 0x000113, 0x0001e9, 0x001542, 0x00011b };
    static const enum mlxd_dump_format fmt[] = { MLXD_DUMP_WORDS, MLXD_DUMP_WORDS, MLXD_DUMP_HEXROWS,
                                                 MLXD_DUMP_HEXROWS, MLXD_DUMP_DPDK, MLXD_DUMP_PLAIN };
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(mlxd_cqe_err_qpn(r->cqes[i].bytes), qpn[i]);
        ck_assert_int_eq(r->cqes[i].format, fmt[i]);
    }
    ck_assert_uint_eq(r->cqes[0].first_line, 1);
    ck_assert_uint_eq(r->cqes[0].last_line, 5);
    ck_assert_uint_eq(r->cqes[1].first_line, 7);
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(eight_word_lines_without_header_are_two_cqes)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "00000000 00000000 00000000 00000000\n00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000\n00000000 00008813 08006214 0000f6d2\n"
        "00000000 00000000 00000000 00000000\n00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000\n00000000 00008a12 100023e8 00016cd2\n");
    ck_assert_uint_eq(r->ncqes, 2);
    ck_assert_uint_eq(mlxd_cqe_syndrome(r->cqes[0].bytes), 0x13);
    ck_assert_uint_eq(mlxd_cqe_syndrome(r->cqes[1].bytes), 0x12);
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(header_contradicting_bytes_is_warned)
{
    /* mlx5e says syndrome 0x4 but byte 55 (row 30, column 7) is 0x13 */
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "eth2: Error cqe on cqn 0x510, ci 0x0, qn 0x113, opcode 0xd, syndrome 0x4, vendor syndrome 0x88\n"
        ROW0 ROW1 ROW2 ROW3);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 1, "syndrome 0x4"));
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(nothing_decodable)
{
    struct mlxd_dump_result *r = mlxd_test_parse_dump("hello\nworld 12345678\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert_uint_eq(r->ndiags, 0);
    mlxd_cqe_dump_free(r);
    r = mlxd_test_parse_dump("got completion with error:\nnothing follows\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 1, "not followed"));
    mlxd_cqe_dump_free(r);
    /* 16 bytes without an offset: not a known format, but not silently ignored */
    r = mlxd_test_parse_dump("00 00 00 00 00 00 88 13 08 00 01 13 07 47 67 d2\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 1, "no known"));
    mlxd_cqe_dump_free(r);
    /* a kernel oops's instruction bytes in a dmesg: not a CQE, and not reported */
    r = mlxd_test_parse_dump("[ 4711.000001] Code: 48 8b 45 08 48 89 c7 e8 2e 6f 3c 00 <0f> 0b 48 8b 45 f8 48 8b 40 10 "
                  "48 85 c0 74 0c 48 8b 50 08\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert_uint_eq(r->ndiags, 0);
    mlxd_cqe_dump_free(r);
    ck_assert_int_eq(mlxd_cqe_dump_parse("", 0, &r), 0);
    ck_assert_uint_eq(r->ncqes, 0);
    mlxd_cqe_dump_free(r);
    ck_assert_int_lt(mlxd_cqe_dump_parse(NULL, 5, &r), 0);
    ck_assert_int_lt(mlxd_cqe_dump_parse("x", 1, NULL), 0);
}
END_TEST

START_TEST(cqe_128_and_plain_hex)
{
    /* a 128-byte DPDK dump: the CQE64 fields are in bytes 64..127 (rdma-core
     * providers/mlx5/cq.c get_sw_cqe), so row 00000070 holds bytes 112..127 = struct
     * mlx5_err_cqe bytes 48..63 */
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "MLX5 Error CQE: at [0x7f00], len=128\n"
        "00000000: 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11\n"
        "00000010: 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11\n"
        "00000020: 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11\n"
        "00000030: 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11 11\n"
        "00000040: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
        "00000050: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
        "00000060: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n"
        "00000070: 00 00 00 00 00 00 88 13 08 00 01 13 07 47 67 d2\n");
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->nerrors, 0);
    ck_assert_uint_eq(r->cqes[0].size, 128);
    struct mlxd_cqe_decoded d;
    ck_assert_int_eq(mlxd_cqe_decode(r->cqes[0].bytes, 128, &d), 0);
    ck_assert_uint_eq(d.syndrome, 0x13);
    ck_assert_uint_eq(d.vendor_syndrome, 0x88);
    ck_assert_uint_eq(d.qpn, 0x000113);
    ck_assert_uint_eq(d.wqe_counter, 0x0747);
    mlxd_cqe_dump_free(r);
    /* 128 digits with 0x and a log prefix; 127 digits are not taken */
    r = mlxd_test_parse_dump("cqe: 0x" "00000000000000000000000000000000" "00000000000000000000000000000000"
                  "00000000000000000000000000000000" "0000000000008a12100023e800016cd2\n");
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_int_eq(r->cqes[0].format, MLXD_DUMP_PLAIN);
    ck_assert_uint_eq(mlxd_cqe_syndrome(r->cqes[0].bytes), 0x12);
    ck_assert_uint_eq(mlxd_cqe_err_qpn(r->cqes[0].bytes), 0x0023e8);
    mlxd_cqe_dump_free(r);
    r = mlxd_test_parse_dump("00000000000000000000000000000000" "00000000000000000000000000000000"
                  "00000000000000000000000000000000" "000000000008a12100023e800016cd2\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_ERROR, 1, "127 hex digits"));
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(wc_error_line_is_cross_checked)
{
    /* "WC error: 4" (local protection) before a dump whose syndrome (byte 55) is 0x13 -> 10 */
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "infiniband mlx5_0: mlx5_handle_error_cqe:333:(pid 0): WC error: 4, message: local protection error\n"
        "infiniband mlx5_0: dump_cqe:272:(pid 0): dump error cqe\n" ROW0 ROW1 ROW2 ROW3);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert(mlxd_test_has_diag(r, MLXD_DUMP_WARNING, 1, "WC error 4"));
    mlxd_cqe_dump_free(r);
    r = mlxd_test_parse_dump("WC error: 10, message: remote access error\ndump error cqe\n" ROW0 ROW1 ROW2 ROW3);
    ck_assert_uint_eq(r->ncqes, 1);
    ck_assert_uint_eq(r->nwarnings, 0);
    mlxd_cqe_dump_free(r);
}
END_TEST

/* ---- large inputs: the guards against quadratic time ----------------------------------------
 * Work per CQE must not grow with the number of CQEs or diagnostics before it.  No timing is
 * asserted: the tcase's 60 s timeout is the check, and the input sizes are chosen so that the
 * quadratic code overran it; the exact counts make the tests meaningful. */

/* Returns text made of n copies of line (which ends in '\n'); free() it. */
static char *repeat_line(const char *line, size_t n, size_t *len)
{
    size_t l = strlen(line);
    char *t = malloc(l * n + 1);
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < n; i++) memcpy(t + i * l, line, l);
    t[l * n] = 0;
    *len = l * n;
    return t;
}

START_TEST(twenty_thousand_lone_last_rows_are_as_many_cqes_with_three_warnings_each)
{
    /* Each row 00000030 (bytes 48-63) follows a row of the same offset, so each starts a new CQE
     * (an offset that goes back ends the CQE); rows 00000000-00000020 are missing from each:
     * decoded with one warning per missing row (docs/cqe-tool.md, "another row missing").
     * Bytes 48-63 "00 00 00 00 9d 00 53 04 08 00 01 1b 00 08 d0 d2": syndrome (55) 0x04,
     * QPN (57-59) 0x00011b.  The parser was already linear here (the quadratic printing of
     * such input is guarded in test_cqe_tool.c); this checks each diag lands on its own CQE. */
    enum { N = 20000 };
    size_t len;
    char *t = repeat_line("00000030: 00 00 00 00 9d 00 53 04 08 00 01 1b 00 08 d0 d2\n", N, &len);
    struct mlxd_dump_result *r = NULL;
    ck_assert_int_eq(mlxd_cqe_dump_parse(t, len, &r), 0);
    free(t);
    ck_assert_uint_eq(r->ncqes, N);
    ck_assert_uint_eq(r->ndiags, 3 * N);
    ck_assert_uint_eq(r->nwarnings, 3 * N);
    ck_assert_uint_eq(r->nerrors, 0);
    for (size_t i = 0; i < N; i++) {
        const struct mlxd_dump_cqe *c = &r->cqes[i];
        ck_assert_uint_eq(c->first_line, i + 1);
        ck_assert_uint_eq(c->last_line, i + 1);
        ck_assert_uint_eq(c->nwarnings, 3);
        ck_assert_uint_eq(mlxd_cqe_syndrome(c->bytes), 0x04);
        ck_assert_uint_eq(mlxd_cqe_err_qpn(c->bytes), 0x00011b);
        for (unsigned k = 0; k < 3; k++) {
            const struct mlxd_dump_diag *d = &r->diags[3 * i + k];
            char want[32];
            snprintf(want, sizeof want, "row %08x is missing", k * 16);
            ck_assert_int_eq(d->cqe, (int)i);
            ck_assert_uint_eq(d->line, i + 1);
            ck_assert_int_eq(d->severity, MLXD_DUMP_WARNING);
            ck_assert_msg(strstr(d->msg, want), "diag %zu: '%s' lacks '%s'", 3 * i + k, d->msg, want);
        }
    }
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(long_run_of_word_lines_with_warnings_is_grouped_in_linear_time)
{
    /* 400,000 word lines without a header: 100,000 CQEs of 4 lines.  Each line has text after
     * its 4 words (a warning per line), and byte 63 = 0xff gives opcode 0xf, INVALID, never
     * written by hardware (a warning per CQE, on its 4th line).  The old code scanned the whole
     * run's diagnostics for each CQE and then sorted diags emitted out of order: 64,000 such
     * lines took 3.5 s, 4x per doubling, so 400,000 took minutes (measured in the commit): this
     * size is the guard against that coming back. */
    enum { NLINES = 400000, NCQES = NLINES / 4 };
    size_t len;
    char *t = repeat_line("00000000 9d005304 0800011b 0008d0ff trailing\n", NLINES, &len);
    struct mlxd_dump_result *r = NULL;
    ck_assert_int_eq(mlxd_cqe_dump_parse(t, len, &r), 0);
    free(t);
    ck_assert_uint_eq(r->ncqes, NCQES);
    ck_assert_uint_eq(r->ndiags, 5 * NCQES);
    ck_assert_uint_eq(r->nwarnings, 5 * NCQES);
    ck_assert_uint_eq(r->nerrors, 0);
    for (size_t i = 0; i < NCQES; i++) {
        const struct mlxd_dump_cqe *c = &r->cqes[i];
        ck_assert_int_eq(c->format, MLXD_DUMP_WORDS);
        ck_assert_uint_eq(c->first_line, 4 * i + 1);
        ck_assert_uint_eq(c->last_line, 4 * i + 4);
        ck_assert_uint_eq(c->nwarnings, 5);
        ck_assert_uint_eq(c->bytes[63], 0xff);
        /* in line order: the 4 lines' warnings, then the opcode's on the 4th line */
        for (unsigned k = 0; k < 5; k++) {
            const struct mlxd_dump_diag *d = &r->diags[5 * i + k];
            ck_assert_int_eq(d->cqe, (int)i);
            ck_assert_uint_eq(d->line, 4 * i + (k < 4 ? k : 3) + 1);
            ck_assert_ptr_nonnull(strstr(d->msg, k < 4 ? "ignored text after the 4 words ('trailing')"
                                                       : "opcode 0xf (INVALID)"));
        }
    }
    mlxd_cqe_dump_free(r);
}
END_TEST

START_TEST(refused_run_keeps_its_line_warnings)
{
    /* 5 word lines (not a multiple of 4): refused as a whole; the warning about the text after
     * line 2's words is still reported, on line 2, for no CQE (-1), before the error on line 5. */
    struct mlxd_dump_result *r = mlxd_test_parse_dump(
        "00000000 00000000 00000000 00000000\n"
        "00000000 00000000 00000000 00000000 extra\n"
        "00000000 00000000 00000000 00000000\n"
        "00000000 9d005304 0800011b 0008d0d2\n"
        "00000000 9d005304 0800011b 0008d0d2\n");
    ck_assert_uint_eq(r->ncqes, 0);
    ck_assert_uint_eq(r->ndiags, 2);
    ck_assert_uint_eq(r->diags[0].line, 2);
    ck_assert_int_eq(r->diags[0].cqe, -1);
    ck_assert_int_eq(r->diags[0].severity, MLXD_DUMP_WARNING);
    ck_assert_ptr_nonnull(strstr(r->diags[0].msg, "('extra')"));
    ck_assert_uint_eq(r->diags[1].line, 5);
    ck_assert_int_eq(r->diags[1].cqe, -1);
    ck_assert_ptr_nonnull(strstr(r->diags[1].msg, "not a multiple of 4"));
    mlxd_cqe_dump_free(r);
}
END_TEST

/* A length whose + 1 wraps (the line buffer is len + 1 bytes) is refused before any allocation
 * or read: -EINVAL, *out untouched, and the message names the call. */
START_TEST(huge_length_is_refused)
{
    static const char text[] = "00000000 00000000 00000000 00000000";
    struct mlxd_dump_result *r = (struct mlxd_dump_result *)(uintptr_t)0x1;
    size_t lens[] = { SIZE_MAX, SIZE_MAX - 1, (size_t)PTRDIFF_MAX };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        mlxd_err_clear();
        ck_assert_int_eq(mlxd_cqe_dump_parse(text, lens[i], &r), -EINVAL);
        ck_assert_ptr_eq(r, (struct mlxd_dump_result *)(uintptr_t)0x1);
        ck_assert_msg(!strncmp(mlxd_errmsg(), "mlxd_cqe_dump_parse: length ", 28), "%s",
                      mlxd_errmsg());
    }
    /* the real length still parses */
    r = NULL;
    ck_assert_int_eq(mlxd_cqe_dump_parse(text, sizeof text - 1, &r), 0);
    ck_assert_ptr_nonnull(r);
    mlxd_cqe_dump_free(r);
}
END_TEST

Suite *cqe_dump_suite(void)
{
    Suite *s = suite_create("cqe_dump");
    TCase *tc = tcase_create("shared_dumps");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, shared_dump_decodes_to_hand_derived_values, 0,
                        (int)(sizeof dumps / sizeof dumps[0]));
    tcase_add_test(tc, mlx5e_header_and_wqe_dump);
    suite_add_tcase(s, tc);
    tc = tcase_create("damaged");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, row_of_17_differing_bytes_is_refused_naming_the_line);
    tcase_add_test(tc, row_of_17_identical_bytes_is_repaired_with_warning);
    tcase_add_test(tc, short_row_is_refused);
    tcase_add_test(tc, log_line_glued_after_row_is_split_with_warning);
    tcase_add_test(tc, log_line_glued_before_row_is_split_with_warning);
    tcase_add_test(tc, log_line_glued_to_fourth_word_is_split_with_warning);
    tcase_add_test(tc, missing_word_line_is_refused);
    tcase_add_test(tc, missing_last_row_is_refused_missing_other_row_warned);
    tcase_add_test(tc, header_contradicting_bytes_is_warned);
    tcase_add_test(tc, nothing_decodable);
    tcase_add_test(tc, huge_length_is_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("several");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, several_cqes_in_one_paste);
    tcase_add_test(tc, eight_word_lines_without_header_are_two_cqes);
    tcase_add_test(tc, cqe_128_and_plain_hex);
    tcase_add_test(tc, wc_error_line_is_cross_checked);
    tcase_add_test(tc, refused_run_keeps_its_line_warnings);
    suite_add_tcase(s, tc);
    /* 60 s is also the guard against quadratic time (see "large inputs" above) */
    tc = tcase_create("large");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, twenty_thousand_lone_last_rows_are_as_many_cqes_with_three_warnings_each);
    tcase_add_test(tc, long_run_of_word_lines_with_warnings_is_grouped_in_linear_time);
    suite_add_tcase(s, tc);
    return s;
}
