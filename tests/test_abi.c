/* abi suite: the mlx5 ABI layer (abi/mlxd_abi.h, mlxd_cqe.h, mlxd_names.h).
 *
 * Layout: compile-time.  Including <infiniband/mlx5dv.h> before mlxd_abi.h turns on the header's
 * own _Static_asserts, and the asserts below repeat the ones a poll loop depends on most; if
 * any offset differed from mlx5dv.h this file (and abi/abi_assert.c) would not compile.
 * Runtime: the accessors decode a CQE built by hand, byte by byte, from the struct mlx5_cqe64 /
 * mlx5_err_cqe offsets; the names follow mlx5dv.h, verbs.h and rdma-core providers/mlx5/cq.c
 * mlx5_handle_error_cqe. */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include "mlxd_abi.h"
#include "mlxd_cqe.h"
#include "mlxd_error.h"
#include "mlxd_names.h"

_Static_assert(sizeof(struct mlx5_cqe64) == 64, "cqe64 size");
_Static_assert(offsetof(struct mlx5_cqe64, op_own) == MLXD_CQE_OFF_OP_OWN, "op_own");
_Static_assert(offsetof(struct mlx5_cqe64, wqe_counter) == MLXD_CQE_OFF_WQE_COUNTER, "wqe_counter");
_Static_assert(offsetof(struct mlx5_err_cqe, syndrome) == 55, "syndrome is byte 55");
_Static_assert(offsetof(struct mlx5_err_cqe, vendor_err_synd) == 54, "vendor is byte 54");
_Static_assert(offsetof(struct mlx5_err_cqe, s_wqe_opcode_qpn) == 56, "s_wqe_opcode_qpn is byte 56");
_Static_assert(sizeof(struct mlx5_wqe_ctrl_seg) == 16 && sizeof(struct mlx5_wqe_raddr_seg) == 16 &&
               sizeof(struct mlx5_wqe_data_seg) == 16, "segments are 16 bytes");
_Static_assert(MLX5_RCV_DBR == MLXD_RCV_DBR && MLX5_SND_DBR == MLXD_SND_DBR, "dbr indices");

/* A successful responder CQE (RESP_WR_IMM), every field set to a distinct value at the offsets
 * of struct mlx5_cqe64. */
static void build_resp(uint8_t c[64])
{
    memset(c, 0, 64);
    c[24] = 0x0a; c[25] = 0x12; c[26] = 0x34; c[27] = 0x56;           /* flags_rqpn: src QPN 0x123456 */
    c[32] = 0xff; c[33] = 0x00; c[34] = 0x00; c[35] = 0x2a;           /* srqn_uidx: 0x00002a (top byte masked) */
    c[36] = 0xde; c[37] = 0xad; c[38] = 0xbe; c[39] = 0xef;           /* imm_inval_pkey */
    c[44] = 0x00; c[45] = 0x00; c[46] = 0x10; c[47] = 0x00;           /* byte_cnt 4096 */
    for (int i = 0; i < 8; i++) c[48 + i] = (uint8_t)(0x01 + i);      /* timestamp 0x0102030405060708 */
    c[56] = 0x07; c[57] = 0x00; c[58] = 0x04; c[59] = 0x12;           /* drop 7, QPN 0x000412 */
    c[60] = 0xab; c[61] = 0xcd;                                       /* wqe_counter 0xabcd */
    c[62] = 0x5a;                                                     /* signature */
    c[63] = (uint8_t)(MLXD_CQE_RESP_WR_IMM << 4) | 0x08 | 0x02 | 0x01; /* opcode 1, format 2, SE, owner */
}

START_TEST(accessors_decode_hand_built_cqe)
{
    uint8_t buf[65];
    uint8_t *c = buf + 1;     /* deliberately misaligned */
    build_resp(c);
    ck_assert_uint_eq(mlxd_cqe_opcode(c), MLXD_CQE_RESP_WR_IMM);
    ck_assert_uint_eq(mlxd_cqe_owner(c), 1);
    ck_assert_uint_eq(mlxd_cqe_solicited(c), 1);
    ck_assert_uint_eq(mlxd_cqe_format(c), MLXD_CQE_FORMAT_SCATTER_64);
    ck_assert(!mlxd_cqe_is_error(c));
    ck_assert_uint_eq(mlxd_cqe_byte_cnt(c), 4096);
    ck_assert_uint_eq(mlxd_cqe_imm(c), 0xdeadbeefu);
    uint32_t raw = mlxd_cqe_imm_raw(c);
    ck_assert_int_eq(memcmp(&raw, c + 36, 4), 0);      /* network order = the bytes as stored */
    ck_assert_uint_eq(mlxd_cqe_srqn_uidx(c), 0x2a);
    ck_assert_uint_eq(mlxd_cqe_timestamp(c), 0x0102030405060708ull);
    ck_assert_uint_eq(mlxd_cqe_drop_counter(c), 7);
    ck_assert_uint_eq(mlxd_cqe_qpn(c), 0x000412);
    ck_assert_uint_eq(mlxd_cqe_wqe_counter(c), 0xabcd);
    ck_assert_uint_eq(mlxd_cqe_signature(c), 0x5a);
    ck_assert_uint_eq(mlxd_cqe_src_qpn(c), 0x123456);
    /* mlx5dv.h's own inline helpers read the same bits */
    struct mlx5_cqe64 m;
    memcpy(&m, c, 64);
    ck_assert_uint_eq(mlx5dv_get_cqe_owner(&m), mlxd_cqe_owner(c));
    ck_assert_uint_eq(mlx5dv_get_cqe_se(&m), mlxd_cqe_solicited(c));
    ck_assert_uint_eq(mlx5dv_get_cqe_format(&m), mlxd_cqe_format(c));
    ck_assert_uint_eq(mlx5dv_get_cqe_opcode(&m), mlxd_cqe_opcode(c));
    ck_assert_uint_eq(be32toh(m.byte_cnt), mlxd_cqe_byte_cnt(c));
    ck_assert_uint_eq(be32toh(m.sop_drop_qpn) & 0xffffff, mlxd_cqe_qpn(c));
    ck_assert_uint_eq(be16toh(m.wqe_counter), mlxd_cqe_wqe_counter(c));
    ck_assert_uint_eq(be64toh(m.timestamp), mlxd_cqe_timestamp(c));
}
END_TEST

START_TEST(error_accessors_decode_hand_built_err_cqe)
{
    uint8_t c[64] = {0};
    c[32] = 0x00; c[33] = 0x00; c[34] = 0x00; c[35] = 0x09;  /* srqn 9 */
    c[52] = 0x9d;                                            /* hw_err_synd */
    c[53] = 0x10;                                            /* hw_synd_type */
    c[54] = 0x53;                                            /* vendor_err_synd */
    c[55] = MLXD_SYND_REMOTE_ACCESS_ERR;                     /* syndrome */
    c[56] = MLXD_WQE_RDMA_WRITE; c[57] = 0x01; c[58] = 0x02; c[59] = 0x03;
    c[60] = 0x00; c[61] = 0x08;
    c[63] = (uint8_t)(MLXD_CQE_REQ_ERR << 4);
    ck_assert(mlxd_cqe_is_error(c));
    ck_assert_uint_eq(mlxd_cqe_syndrome(c), 0x13);
    ck_assert_uint_eq(mlxd_cqe_vendor_syndrome(c), 0x53);
    ck_assert_uint_eq(mlxd_cqe_hw_err_synd(c), 0x9d);
    ck_assert_uint_eq(mlxd_cqe_hw_synd_type(c), 0x10);
    ck_assert_uint_eq(mlxd_cqe_err_wqe_opcode(c), 0x08);
    ck_assert_uint_eq(mlxd_cqe_err_qpn(c), 0x010203);
    ck_assert_uint_eq(mlxd_cqe_err_srqn(c), 9);
    ck_assert_uint_eq(mlxd_cqe_wqe_counter(c), 8);
    struct mlx5_err_cqe e;
    memcpy(&e, c, 64);
    ck_assert_uint_eq(e.syndrome, mlxd_cqe_syndrome(c));
    ck_assert_uint_eq(e.vendor_err_synd, mlxd_cqe_vendor_syndrome(c));
    ck_assert_uint_eq(be32toh(e.s_wqe_opcode_qpn) >> 24, mlxd_cqe_err_wqe_opcode(c));

    struct mlxd_cqe_decoded d;
    ck_assert_int_eq(mlxd_cqe_decode(c, 64, &d), 0);
    ck_assert(d.is_error && d.is_requester);
    ck_assert_uint_eq(d.syndrome, 0x13);
    ck_assert_int_eq(d.wc_status, IBV_WC_REM_ACCESS_ERR);
    ck_assert_uint_eq(d.qpn, 0x010203);
    ck_assert_uint_eq(d.wqe_opcode, 0x08);
}
END_TEST

START_TEST(decode_128_reads_second_half_and_rejects_misuse)
{
    uint8_t slot[128];
    memset(slot, 0xee, 64);          /* first half: inline-scattered data */
    build_resp(slot + 64);
    struct mlxd_cqe_decoded d, before;
    ck_assert_int_eq(mlxd_cqe_decode(slot, 128, &d), 0);
    ck_assert_uint_eq(d.qpn, 0x000412);
    ck_assert_uint_eq(d.byte_cnt, 4096);
    ck_assert_uint_eq(d.opcode, MLXD_CQE_RESP_WR_IMM);
    ck_assert(!d.is_error && !d.is_requester);
    memset(&before, 0x77, sizeof before);
    d = before;
    ck_assert_int_eq(mlxd_cqe_decode(slot, 100, &d), -EINVAL);
    ck_assert_int_eq(memcmp(&d, &before, sizeof d), 0);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "100"));
    ck_assert_int_eq(mlxd_cqe_decode(NULL, 64, &d), -EINVAL);
    ck_assert_int_eq(mlxd_cqe_decode(slot, 64, NULL), -EINVAL);
}
END_TEST

START_TEST(sw_owned_follows_pass_parity)
{
    uint8_t c[64] = {0};
    c[63] = MLXD_CQE_OP_OWN_INIT;                 /* INVALID: never software's */
    ck_assert(!mlxd_cqe_sw_owned(c, 0, 8));
    c[63] = (uint8_t)(MLXD_CQE_REQ << 4) | 0;     /* owner 0: software's on even passes */
    ck_assert(mlxd_cqe_sw_owned(c, 3, 8));        /* ci 3, pass 0 */
    ck_assert(!mlxd_cqe_sw_owned(c, 11, 8));      /* ci 11 = 8 + 3, pass 1 */
    c[63] |= 1;
    ck_assert(mlxd_cqe_sw_owned(c, 11, 8));
    ck_assert(!mlxd_cqe_sw_owned(c, 19, 8));      /* pass 2 */
}
END_TEST

START_TEST(syndrome_to_wc_status_matches_reference_6_4)
{
    /* rdma-core providers/mlx5/cq.c: libmlx5 mlx5_handle_error_cqe */
    static const struct { unsigned s; int wc; } map[] = {
        { 0x01, IBV_WC_LOC_LEN_ERR }, { 0x02, IBV_WC_LOC_QP_OP_ERR },
        { 0x04, IBV_WC_LOC_PROT_ERR }, { 0x05, IBV_WC_WR_FLUSH_ERR },
        { 0x06, IBV_WC_MW_BIND_ERR }, { 0x10, IBV_WC_BAD_RESP_ERR },
        { 0x11, IBV_WC_LOC_ACCESS_ERR }, { 0x12, IBV_WC_REM_INV_REQ_ERR },
        { 0x13, IBV_WC_REM_ACCESS_ERR }, { 0x14, IBV_WC_REM_OP_ERR },
        { 0x15, IBV_WC_RETRY_EXC_ERR }, { 0x16, IBV_WC_RNR_RETRY_EXC_ERR },
        { 0x22, IBV_WC_REM_ABORT_ERR },
        { 0x00, IBV_WC_GENERAL_ERR }, { 0x03, IBV_WC_GENERAL_ERR }, { 0xff, IBV_WC_GENERAL_ERR },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        ck_assert_int_eq(mlxd_syndrome_to_wc_status(map[i].s), map[i].wc);
        if (map[i].wc != IBV_WC_GENERAL_ERR) {
            ck_assert_ptr_nonnull(mlxd_syndrome_name(map[i].s));
            ck_assert_ptr_nonnull(mlxd_syndrome_explain(map[i].s));
        } else {
            ck_assert_ptr_null(mlxd_syndrome_name(map[i].s));
        }
    }
    ck_assert_str_eq(mlxd_syndrome_name(0x04), "LOCAL_PROT_ERR");
    ck_assert_str_eq(mlxd_syndrome_text(0x13), "remote access error");
    ck_assert_str_eq(mlxd_wc_status_name(IBV_WC_LOC_PROT_ERR), "IBV_WC_LOC_PROT_ERR");
    ck_assert_str_eq(mlxd_wc_status_text(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
    ck_assert_ptr_null(mlxd_wc_status_name(-1));
    ck_assert_ptr_null(mlxd_wc_status_name(IBV_WC_TM_RNDV_INCOMPLETE + 1));
}
END_TEST

START_TEST(opcode_names)
{
    ck_assert_str_eq(mlxd_cqe_opcode_name(MLX5_CQE_REQ_ERR), "REQ_ERR");
    ck_assert_str_eq(mlxd_cqe_opcode_text(MLX5_CQE_RESP_ERR), "responder error");
    ck_assert_str_eq(mlxd_cqe_opcode_name(MLX5_CQE_RESP_WR_IMM), "RESP_WR_IMM");
    ck_assert_ptr_null(mlxd_cqe_opcode_name(7));
    ck_assert_str_eq(mlxd_wqe_opcode_name(MLX5_OPCODE_RDMA_WRITE), "RDMA_WRITE");
    ck_assert_str_eq(mlxd_wqe_opcode_text(MLX5_OPCODE_RDMA_WRITE), "RDMA WRITE");
    ck_assert_str_eq(mlxd_wqe_opcode_name(MLX5_OPCODE_RDMA_READ), "RDMA_READ");
    ck_assert_str_eq(mlxd_wqe_opcode_name(MLX5_OPCODE_SEND), "SEND");
    ck_assert_ptr_null(mlxd_wqe_opcode_name(0x02));
    /* every mlx5dv.h CQE opcode has a name */
    static const unsigned ops[] = { 0, 1, 2, 3, 4, 5, 6, 12, 13, 14, 15 };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ck_assert_ptr_nonnull(mlxd_cqe_opcode_name(ops[i]));
        ck_assert_ptr_nonnull(mlxd_cqe_opcode_text(ops[i]));
    }
}
END_TEST

/* mlxd_err may be given its own message as an argument (wrapping an inner failure): the result
 * is the outer text around the inner one, not a copy that overlaps itself. */
START_TEST(error_message_wraps_itself)
{
    ck_assert_int_eq(mlxd_err(5, "inner %d", 7), -5);
    ck_assert_int_eq(mlxd_err(EINVAL, "outer: %s: %s", mlxd_errmsg(), "tail"), -EINVAL);
    ck_assert_str_eq(mlxd_errmsg(), "outer: inner 7: tail");
    mlxd_err_clear();
    ck_assert_str_eq(mlxd_errmsg(), "");
}
END_TEST

/* mlxd_err(0, ...) is a failure path without an errno: it must not return 0 (success). */
START_TEST(error_zero_errno_returns_eio)
{
    mlxd_err_clear();
    ck_assert_int_eq(mlxd_err(0, "lost errno %d", 3), -EIO);
    ck_assert_str_eq(mlxd_errmsg(), "lost errno 3");
    ck_assert_int_eq(mlxd_err(ENOENT, "x"), -ENOENT);
    ck_assert_int_eq(mlxd_err(-ENOSPC, "y"), -ENOSPC);
}
END_TEST

Suite *abi_suite(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("cqe");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, accessors_decode_hand_built_cqe);
    tcase_add_test(tc, error_accessors_decode_hand_built_err_cqe);
    tcase_add_test(tc, decode_128_reads_second_half_and_rejects_misuse);
    tcase_add_test(tc, sw_owned_follows_pass_parity);
    suite_add_tcase(s, tc);
    tc = tcase_create("names");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, syndrome_to_wc_status_matches_reference_6_4);
    tcase_add_test(tc, opcode_names);
    tcase_add_test(tc, error_message_wraps_itself);
    tcase_add_test(tc, error_zero_errno_returns_eio);
    suite_add_tcase(s, tc);
    return s;
}
