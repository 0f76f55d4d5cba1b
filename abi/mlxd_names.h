/* mlxd_names.h: names and explanations for mlx5 CQE opcodes, WQE opcodes and error syndromes,
 * and the mapping from a syndrome to the ibv_wc_status number users see in verbs logs.
 *
 * Every function returns a pointer to a static string (never freed, valid for the life of the
 * process) or NULL for a value the table does not know; they are thread-safe and never fail
 * otherwise.
 *
 * Sources: values from rdma-core <infiniband/mlx5dv.h> (MLX5_CQE_*, MLX5_OPCODE_*,
 * MLX5_CQE_SYNDROME_*) and <infiniband/verbs.h> (enum ibv_wc_status); the syndrome to status
 * mapping from rdma-core providers/mlx5/cq.c mlx5_handle_error_cqe (what libmlx5 does);
 * the explanations are the meanings of the completion statuses in the InfiniBand Architecture
 * Specification vol. 1 (verbs chapter, completion return status), in the project's own words,
 * plus causes stated in the public reports under fixtures/cqe-dumps/.
 */
#ifndef MLXD_NAMES_H
#define MLXD_NAMES_H

#ifdef __cplusplus
extern "C" {
#endif

/* ibv_wc_status numbers (<infiniband/verbs.h> enum ibv_wc_status; proven equal in
 * abi/abi_assert.c).  Defined here so that users need no verbs header. */
enum mlxd_wc_status {
    MLXD_WC_SUCCESS = 0,
    MLXD_WC_LOC_LEN_ERR = 1,
    MLXD_WC_LOC_QP_OP_ERR = 2,
    MLXD_WC_LOC_EEC_OP_ERR = 3,
    MLXD_WC_LOC_PROT_ERR = 4,
    MLXD_WC_WR_FLUSH_ERR = 5,
    MLXD_WC_MW_BIND_ERR = 6,
    MLXD_WC_BAD_RESP_ERR = 7,
    MLXD_WC_LOC_ACCESS_ERR = 8,
    MLXD_WC_REM_INV_REQ_ERR = 9,
    MLXD_WC_REM_ACCESS_ERR = 10,
    MLXD_WC_REM_OP_ERR = 11,
    MLXD_WC_RETRY_EXC_ERR = 12,
    MLXD_WC_RNR_RETRY_EXC_ERR = 13,
    MLXD_WC_LOC_RDD_VIOL_ERR = 14,
    MLXD_WC_REM_INV_RD_REQ_ERR = 15,
    MLXD_WC_REM_ABORT_ERR = 16,
    MLXD_WC_INV_EECN_ERR = 17,
    MLXD_WC_INV_EEC_STATE_ERR = 18,
    MLXD_WC_FATAL_ERR = 19,
    MLXD_WC_RESP_TIMEOUT_ERR = 20,
    MLXD_WC_GENERAL_ERR = 21,
    MLXD_WC_TM_ERR = 22,
    MLXD_WC_TM_RNDV_INCOMPLETE = 23,
};

/* CQE opcode (0..15, op_own >> 4): symbol without prefix ("REQ_ERR") and words
 * ("requester error").  NULL if unknown. */
const char *mlxd_cqe_opcode_name(unsigned opcode);
const char *mlxd_cqe_opcode_text(unsigned opcode);

/* WQE opcode (ctrl segment low byte, or byte 56 of a requester CQE): symbol ("RDMA_WRITE") and
 * words ("RDMA WRITE").  NULL if unknown. */
const char *mlxd_wqe_opcode_name(unsigned opcode);
const char *mlxd_wqe_opcode_text(unsigned opcode);

/* Error syndrome (byte 55): symbol ("LOCAL_PROT_ERR"), the ibv_wc_status_str()-style words
 * ("local protection error"), and one line that explains it with its usual causes.
 * NULL if unknown. */
const char *mlxd_syndrome_name(unsigned syndrome);
const char *mlxd_syndrome_text(unsigned syndrome);
const char *mlxd_syndrome_explain(unsigned syndrome);

/* The ibv_wc_status number libmlx5 reports for a syndrome: the switch in rdma-core
 * providers/mlx5/cq.c mlx5_handle_error_cqe; every syndrome not listed there maps to
 * MLXD_WC_GENERAL_ERR (21), like libmlx5. */
int mlxd_syndrome_to_wc_status(unsigned syndrome);

/* ibv_wc_status number: enumerator name ("IBV_WC_LOC_PROT_ERR") and words ("local protection
 * error").  NULL if outside 0..23. */
const char *mlxd_wc_status_name(int status);
const char *mlxd_wc_status_text(int status);

/* The syndrome libmlx5 maps to status (the inverse of mlxd_syndrome_to_wc_status), so that a
 * log line giving only the status gets the same explanation as a CQE; -1 for
 * MLXD_WC_GENERAL_ERR (many syndromes give it) and for statuses no syndrome gives. */
int mlxd_wc_status_to_syndrome(int status);

/* The status whose ibv_wc_status_str() words or IBV_WC_ name s starts with (the longest such);
 * -1 when none, or s is NULL. */
int mlxd_wc_status_from_text(const char *s);

#ifdef __cplusplus
}
#endif
#endif
