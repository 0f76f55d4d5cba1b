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
 *   - 128 plain hex digits (one 64-byte CQE) on one line.
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

struct mlxd_dump_result {
    struct mlxd_dump_cqe  *cqes;   /* ncqes CQEs that were decoded, in input order */
    size_t                 ncqes;
    struct mlxd_dump_diag *diags;  /* ndiags diagnostics, in input order */
    size_t                 ndiags;
    size_t                 nerrors;   /* diags with severity MLXD_DUMP_ERROR */
    size_t                 nwarnings; /* diags with severity MLXD_DUMP_WARNING */
};

/* Parses text[0..len) (need not be NUL-terminated; NUL bytes end a line).  On success returns 0
 * and *out owns a result (possibly with ncqes == 0: nothing decodable), to be freed with
 * mlxd_cqe_dump_free().  Errors: -EINVAL (NULL text with len > 0, NULL out, or len > PTRDIFF_MAX - 1,
 * a length no object can have: the line buffer of len + 1 bytes would wrap), -ENOMEM.
 * Time is linear in len (the work per CQE does not depend on how many came before); memory is
 * len + 1 bytes while parsing, plus the result (sizeof each struct per CQE and diagnostic).
 * Callers reading untrusted streams should bound len (mlxd-cqe reads at most 64 MiB).
 * Thread-safe (no shared state). */
int mlxd_cqe_dump_parse(const char *text, size_t len, struct mlxd_dump_result **out);

/* Frees a result (NULL is a no-op). */
void mlxd_cqe_dump_free(struct mlxd_dump_result *r);

/* "rdma-core words", "print_hex_dump rows", "mlx5e Error cqe", "DPDK hexdump", "plain hex";
 * NULL if unknown. */
const char *mlxd_dump_format_name(enum mlxd_dump_format f);

#ifdef __cplusplus
}
#endif
#endif
