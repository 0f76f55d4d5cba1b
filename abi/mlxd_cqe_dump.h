/* mlxd_cqe_dump.h: finding and parsing the mlx5 CQEs in text pasted from logs.
 *
 * Accepted formats (several CQEs per input, mixed with any other log lines):
 *   - rdma-core libmlx5 "got completion with error:" followed by 4 lines of 4 32-bit words
 *     (memory order); the header line may be missing;
 *   - the Linux kernel mlx5_ib "dump error cqe" followed by the same word lines or by
 *     print_hex_dump rows "00000030: 00 00 ... e2";
 *   - print_hex_dump rows with or without dmesg prefixes ("[  408.380187] ", "[  +0.000001] ");
 *   - mlx5e "Error cqe on cqn 0x.., ci 0x.., qn 0x.., opcode 0x.., syndrome 0x.., vendor
 *     syndrome 0x.." (possibly wrapped over two lines), rows, and an optional "WQE DUMP: ..."
 *     followed by the rows of the failing WQE;
 *   - DPDK mlx5 "MLX5 Error CQE: at [0x..], len=64" with rte_hexdump rows and an ASCII column;
 *   - 128 plain hex digits (one 64-byte CQE) on one line, or 256 (a 128-byte CQE);
 *   - the project's own CQE fixture files and lines (docs/fixture-format.md: "+DELAY HEX # comment");
 *   - pastes as mail and forums publish them: "> " quoting, blank lines between rows, rows wrapped
 *     onto an indented continuation line (joined, with a warning naming both lines);
 *   - status-only lines (no CQE bytes) printed by perftest, UCX, NCCL, libfabric's fabtests,
 *     DAPL and the RDMA_RC_example program many rdma-core users copy: see struct
 *     mlxd_dump_status and docs/cqe-tool.md for the exact formats and their sources.
 *
 * Damaged pastes are never decoded silently: a repair is reported as a warning naming the line
 * and what was assumed (e.g. a row of 17 identical bytes taken as 16, a log line glued to a row
 * split off); anything that cannot be repaired unambiguously makes the CQE refused with an error
 * naming the line.  The rules are listed in docs/cqe-tool.md.
 *
 * Sources for the formats: the pastes in fixtures/cqe-dumps/ and their README.
 */
#ifndef MLXD_CQE_DUMP_H
#define MLXD_CQE_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mlxd_dump_format {
    MLXD_DUMP_WORDS = 1,   /* 4 lines of 4 words (rdma-core, old kernel dump_cqe) */
    MLXD_DUMP_HEXROWS,     /* print_hex_dump rows (kernel mlx5_ib dump_cqe) */
    MLXD_DUMP_MLX5E,       /* mlx5e "Error cqe on cqn" header + rows */
    MLXD_DUMP_DPDK,        /* DPDK "MLX5 Error CQE" + rte_hexdump rows */
    MLXD_DUMP_PLAIN,       /* 128 hex digits */
    MLXD_DUMP_FIXTURE,     /* a CQE fixture record line ([+DELAY] HEX [# comment]) */
};

/* One CQE found in the text. */
struct mlxd_dump_cqe {
    uint8_t  bytes[128];   /* the CQE as in memory; size bytes valid */
    uint32_t size;         /* 64, or 128 for a 128-byte dump (fields then in bytes 64..127) */
    enum mlxd_dump_format format;
    unsigned first_line, last_line;   /* 1-based lines of the input it came from */
    unsigned nwarnings;    /* warnings about this CQE (in mlxd_dump_result.diags) */
    /* the mlx5e "Error cqe on ..." header, when present (values as printed) */
    bool     has_mlx5e_hdr;
    uint32_t hdr_cqn, hdr_ci, hdr_qn, hdr_opcode, hdr_syndrome, hdr_vendor_syndrome;
    /* the "WQE DUMP" that followed, when present */
    bool     has_wqe;
    uint8_t  wqe[256];     /* wqe_len bytes valid (at most 256 kept) */
    uint32_t wqe_len;      /* bytes of WQE rows read */
    uint32_t wqe_index;    /* "WQE index 0x..": as printed */
    uint32_t wq_size;      /* "WQ size N": as printed */
};

enum mlxd_dump_severity {
    MLXD_DUMP_NOTE = 0,    /* information (e.g. a header value that differs for a known reason) */
    MLXD_DUMP_WARNING,     /* something was assumed: the CQE is decoded, check the assumption */
    MLXD_DUMP_ERROR,       /* a CQE was refused (or input ignored): nothing decoded from it */
};

struct mlxd_dump_diag {
    unsigned line;         /* 1-based line of the input */
    enum mlxd_dump_severity severity;
    int      cqe;          /* index into cqes[] it concerns, or -1 */
    char     msg[240];     /* one line, no trailing newline */
};

/* Which program printed a status-only line (the formats: docs/cqe-tool.md, "Status lines"). */
enum mlxd_status_source {
    MLXD_STATUS_PERFTEST = 1,  /* "Failed status 12: wr_id 0 syndrom 0x81" */
    MLXD_STATUS_UCX,           /* "... on mlx5_0:1/RoCE (synd 0x15 vend 0x81 hw_synd 0/0)",
                                  "send completion with error: <status words> ... vendor_err 0x.." */
    MLXD_STATUS_NCCL,          /* "NET/IB : Got completion from peer ... status=12 ... vendor err 129" */
    MLXD_STATUS_RC_EXAMPLE,    /* "got bad completion with status: 0xc, vendor syndrome: 0x81" */
    MLXD_STATUS_LIBFABRIC,     /* "cq_readerr (Provider errno: 12) : ..." (verbs provider) */
    MLXD_STATUS_DAPL,          /* "DTO completion ERR: status 10, op ..., vendor_err 0x88 - ..." */
};

/* A status-only line: what the line gives, -1 for what it does not. */
struct mlxd_dump_status {
    unsigned line;             /* 1-based line of the input */
    enum mlxd_status_source source;
    int  status;               /* ibv_wc_status (enum mlxd_wc_status), as printed or, for UCX,
                                  mapped from the syndrome as libmlx5 does; -1 unknown */
    bool status_from_syndrome; /* status was derived from the syndrome, not printed */
    int  syndrome;             /* mlx5 syndrome (CQE byte 55) when printed (UCX), else the one
                                  libmlx5 maps to status (mlxd_wc_status_to_syndrome), else -1 */
    bool syndrome_printed;     /* syndrome was printed, not derived from the status */
    int  vendor_syndrome;      /* vendor_err / CQE byte 54; -1 when not printed */
    int  hw_err_synd;          /* CQE byte 52 (UCX "hw_synd A/B": B); -1 when not printed */
    int  hw_synd_type_hi;      /* CQE byte 53 >> 4 (UCX "hw_synd A/B": A); -1 when not printed */
    int  cqe;                  /* the CQE dump next to it (within 20 lines) it was cross-checked
                                  against, index into cqes[]; -1 none */
    unsigned mismatches;       /* fields that disagree with that CQE (each also a warning) */
};

struct mlxd_dump_result {
    struct mlxd_dump_cqe  *cqes;   /* ncqes CQEs that were decoded, in input order */
    size_t                 ncqes;
    struct mlxd_dump_diag *diags;  /* ndiags diagnostics, in input order */
    size_t                 ndiags;
    size_t                 nerrors;   /* diags with severity MLXD_DUMP_ERROR */
    size_t                 nwarnings; /* diags with severity MLXD_DUMP_WARNING */
    struct mlxd_dump_status *statuses; /* nstatuses status-only lines, in input order */
    size_t                 nstatuses;
};

/* Parses text[0..len) (need not be NUL-terminated; NUL bytes end a line).  On success returns 0
 * and *out owns a result (ncqes and nstatuses both 0: nothing decodable), to be freed with
 * mlxd_cqe_dump_free().  Errors: -EINVAL (NULL text with len > 0, NULL out, or len > PTRDIFF_MAX - 1,
 * a length no object can have: the line buffer of len + 1 bytes would wrap), -ENOMEM.
 * Time is linear in len (the work per CQE does not depend on how many came before); memory is
 * len + 1 bytes while parsing, plus the result (sizeof each struct per CQE and diagnostic).
 * Callers reading untrusted streams should bound len (mlxd-cqe reads at most 64 MiB).
 * Thread-safe (no shared state). */
int mlxd_cqe_dump_parse(const char *text, size_t len, struct mlxd_dump_result **out);

/* Frees a result (NULL is a no-op). */
void mlxd_cqe_dump_free(struct mlxd_dump_result *r);

/* "rdma-core words", "print_hex_dump rows", "mlx5e Error cqe", "DPDK hexdump", "plain hex",
 * "fixture record"; NULL if unknown. */
const char *mlxd_dump_format_name(enum mlxd_dump_format f);

/* "perftest", "UCX", "NCCL", "RDMA_RC_example", "libfabric fabtests", "DAPL"; NULL if unknown. */
const char *mlxd_status_source_name(enum mlxd_status_source s);

#ifdef __cplusplus
}
#endif
#endif
