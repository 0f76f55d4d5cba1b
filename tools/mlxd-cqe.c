/* mlxd-cqe: decodes mlx5 CQEs pasted from logs (docs/cqe-tool.md).
 *
 *   mlxd-cqe [--json] [FILE...]      (no FILE or "-": standard input)
 *
 * Exit status: 0 when at least one CQE was decoded, 1 when nothing was decodable, 2 for usage
 * errors.  Each input is read up to MAX_INPUT bytes: a larger one is refused. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_abi.h"
#include "mlxd_cqe.h"
#include "mlxd_cqe_dump.h"
#include "mlxd_error.h"
#include "mlxd_names.h"
#include "mlxd_version.h"

static const char usage_text[] =
    "usage: mlxd-cqe [--json] [FILE...]\n"
    "Decodes the mlx5 completion queue entries (CQEs) found in FILEs (or standard input), as\n"
    "pasted from rdma-core, kernel (mlx5_ib, mlx5e) and DPDK logs, as 128 hex digits or as CQE\n"
    "fixture lines, and explains the status lines of perftest, UCX, NCCL, libfabric and DAPL.\n"
    "  --json      machine-readable output (one JSON object on standard output)\n"
    "  --version   print the version\n"
    "  -h, --help  this text\n"
    "Each input may be at most 64 MiB.\n"
    "Exit status: 0 something decoded (a CQE or a status line), 1 nothing decodable, 2 usage error.\n";

/* The most bytes read from one input.  Without a bound, "mlxd-cqe /dev/zero" or "yes | mlxd-cqe"
 * grew its buffer until the OOM killer ended it.  64 MiB is twice the largest configurable kernel
 * log buffer (CONFIG_LOG_BUF_SHIFT is at most 25 in init/Kconfig: 32 MiB; only the log_buf_len=
 * boot parameter goes beyond) and far more than any paste; the parse result
 * can take about 22 times the input (docs/cqe-tool.md), so the bound also bounds that. */
#define MAX_INPUT ((size_t)64 << 20)
#define MAX_INPUT_TEXT "64 MiB"

/* ---- input ------------------------------------------------------------------------------- */
/* Reads all of f into *text (*len bytes), reading at most MAX_INPUT + 1 bytes.  Returns 0, or
 * an errno: EFBIG when f holds more than MAX_INPUT bytes (the rest is left unread), ENOMEM, EIO
 * (or the read's errno). */
static int read_all(FILE *f, char **text, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    if (!b) return ENOMEM;
    errno = 0;   /* a failed read leaves its errno; a stale one must not be reported */
    for (;;) {
        if (n == cap) {
            /* grow to at most MAX_INPUT + 1: one byte past the limit tells "too large" */
            size_t ncap = cap * 2 > MAX_INPUT + 1 ? MAX_INPUT + 1 : cap * 2;
            char *q = realloc(b, ncap);
            if (!q) { free(b); return ENOMEM; }
            b = q;
            cap = ncap;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (n > MAX_INPUT) { free(b); return EFBIG; }
        if (r == 0) break;
    }
    if (ferror(f)) { int e = errno ? errno : EIO; free(b); return e; }
    *text = b;
    *len = n;
    return 0;
}

static const char *sev_name(enum mlxd_dump_severity s)
{
    return s == MLXD_DUMP_ERROR ? "error" : s == MLXD_DUMP_WARNING ? "warning" : "note";
}

static const char *or_unknown(const char *s) { return s ? s : "unknown"; }

/* ---- text output ------------------------------------------------------------------------- */
/* The diags of each CQE, in input order: those of CQE i are order[first[i] .. first[i + 1]).
 * A counting sort, so that printing stays linear: looking through all diags for each CQE was
 * quadratic (64,000 CQEs with warnings took 16 s). */
struct diag_index {
    size_t *first;   /* ncqes + 1 entries */
    size_t *order;   /* ndiags entries */
};

static int diag_index_build(const struct mlxd_dump_result *r, struct diag_index *ix)
{
    ix->first = calloc(r->ncqes + 1, sizeof *ix->first);
    ix->order = malloc((r->ndiags ? r->ndiags : 1) * sizeof *ix->order);
    if (!ix->first || !ix->order) { free(ix->first); free(ix->order); return ENOMEM; }
    for (size_t k = 0; k < r->ndiags; k++)
        if (r->diags[k].cqe >= 0) ix->first[r->diags[k].cqe + 1]++;
    for (size_t i = 0; i < r->ncqes; i++) ix->first[i + 1] += ix->first[i];
    /* fill by advancing first[i]; afterwards first[i] is the old first[i + 1], so shift back */
    for (size_t k = 0; k < r->ndiags; k++)
        if (r->diags[k].cqe >= 0) ix->order[ix->first[r->diags[k].cqe]++] = k;
    for (size_t i = r->ncqes; i > 0; i--) ix->first[i] = ix->first[i - 1];
    ix->first[0] = 0;
    return 0;
}

static void print_rows(const uint8_t *b, unsigned n, const char *indent)
{
    for (unsigned off = 0; off < n; off += 16) {
        printf("%s%08x:", indent, off);
        for (unsigned i = 0; i < 16 && off + i < n; i++) printf(" %02x", b[off + i]);
        printf("\n");
    }
}

static void print_wqe(const struct mlxd_dump_cqe *c)
{
    const uint8_t *w = c->wqe;
    uint32_t oio = mlxd_load_be32(w + MLXD_WQE_CTRL_OFF_OPMOD_IDX_OPCODE);
    uint32_t qd = mlxd_load_be32(w + MLXD_WQE_CTRL_OFF_QPN_DS);
    uint8_t fm = w[MLXD_WQE_CTRL_OFF_FM_CE_SE];
    unsigned op = oio & 0xff, ds = qd & MLXD_WQE_DS_MASK;
    printf("  WQE DUMP (WQE index 0x%x, WQ size %u, %u bytes): ctrl segment\n", c->wqe_index,
           c->wq_size, c->wqe_len);
    printf("    opcode          0x%02x  %s (%s)\n", op, or_unknown(mlxd_wqe_opcode_name(op)),
           or_unknown(mlxd_wqe_opcode_text(op)));
    printf("    opmod           0x%02x\n", oio >> 24);
    printf("    wqe index       0x%04x\n", (oio >> 8) & 0xffff);
    printf("    qpn             0x%06x\n", qd >> 8);
    printf("    ds              %u (%u bytes, %u WQEBB)\n", ds, ds * MLXD_WQE_DS_SIZE,
           (ds * MLXD_WQE_DS_SIZE + MLXD_SEND_WQE_BB - 1) / MLXD_SEND_WQE_BB);
    printf("    signature       0x%02x\n", w[MLXD_WQE_CTRL_OFF_SIGNATURE]);
    printf("    fm_ce_se        0x%02x%s%s%s%s\n", fm,
           fm & MLXD_WQE_CTRL_CQ_UPDATE ? " CQ_UPDATE" : "",
           fm & MLXD_WQE_CTRL_SOLICITED ? " SOLICITED" : "",
           fm & MLXD_WQE_CTRL_FENCE ? " FENCE" : "",
           fm & MLXD_WQE_CTRL_INITIATOR_SMALL_FENCE ? " SMALL_FENCE" : "");
    printf("    imm             0x%08x\n", mlxd_load_be32(w + MLXD_WQE_CTRL_OFF_IMM));
    print_rows(c->wqe, c->wqe_len > 256 ? 256 : c->wqe_len, "    ");
}

static void print_cqe_diags(const struct mlxd_dump_result *r, const struct diag_index *ix, size_t i)
{
    for (size_t j = ix->first[i]; j < ix->first[i + 1]; j++) {
        const struct mlxd_dump_diag *d = &r->diags[ix->order[j]];
        printf("  %s: line %u: %s\n", sev_name(d->severity), d->line, d->msg);
    }
}

/* A status-only line: the status, the syndromes it gives, the causes as for a CQE. */
static void print_status(const char *name, const struct mlxd_dump_status *st)
{
    printf("%s: status line %u (%s): %s (status %d)\n", name, st->line,
           or_unknown(mlxd_status_source_name(st->source)), or_unknown(mlxd_wc_status_text(st->status)),
           st->status);
    printf("  ibv_wc_status   %-5d %s (\"%s\")%s\n", st->status, or_unknown(mlxd_wc_status_name(st->status)),
           or_unknown(mlxd_wc_status_text(st->status)),
           st->status_from_syndrome ? "  [mapped from the syndrome as libmlx5 does]" : "");
    if (st->syndrome >= 0)
        printf("  syndrome        0x%02x  %s%s\n", (unsigned)st->syndrome, or_unknown(mlxd_syndrome_name((unsigned)st->syndrome)),
               st->syndrome_printed ? "" : "  [not printed: the one libmlx5 maps to this status]");
    else
        printf("  syndrome        not printed (several syndromes give this status)\n");
    if (st->vendor_syndrome >= 0) printf("  vendor syndrome 0x%02x\n", (unsigned)st->vendor_syndrome);
    if (st->hw_err_synd >= 0) printf("  hw_err_synd     0x%02x\n", (unsigned)st->hw_err_synd);
    if (st->hw_synd_type_hi >= 0) printf("  hw_synd_type    0x%x_ (high 4 bits)\n", (unsigned)st->hw_synd_type_hi);
    const char *ex = st->syndrome >= 0 ? mlxd_syndrome_explain((unsigned)st->syndrome) : NULL;
    if (st->vendor_syndrome == MLXD_VENDOR_SYND_ODP_PFAULT && st->status == MLXD_WC_REM_ABORT_ERR)
        printf("  explanation     on-demand-paging page fault abort (vendor syndrome 0x93)\n");
    printf("  explanation     %s\n", ex ? ex : "no single syndrome gives this status; decode the full CQE if the log has one");
    if (st->cqe >= 0)
        printf("  cross-check     %s CQE %d\n", st->mismatches ? "DISAGREES with" : "agrees with", st->cqe + 1);
    printf("\n");
}

/* The fields of an error CQE (text output). */
static void print_error_fields(const struct mlxd_cqe_decoded *d)
{
    printf("  syndrome        0x%02x  %s (%s)\n", d->syndrome,
           or_unknown(mlxd_syndrome_name(d->syndrome)), or_unknown(mlxd_syndrome_text(d->syndrome)));
    printf("  ibv_wc_status   %d     %s (\"%s\")\n", d->wc_status,
           or_unknown(mlxd_wc_status_name(d->wc_status)), or_unknown(mlxd_wc_status_text(d->wc_status)));
    printf("  vendor syndrome 0x%02x\n", d->vendor_syndrome);
    printf("  hw_err_synd     0x%02x  (byte 52; named by MLNX_OFED/UCX/SPDK, reserved upstream)\n",
           d->hw_err_synd);
    printf("  hw_synd_type    0x%02x  (byte 53; named by MLNX_OFED/UCX/SPDK, reserved upstream)\n",
           d->hw_synd_type);
    printf("  WQE opcode      0x%02x  %s (%s)%s\n", d->wqe_opcode,
           or_unknown(mlxd_wqe_opcode_name(d->wqe_opcode)),
           or_unknown(mlxd_wqe_opcode_text(d->wqe_opcode)),
           d->is_requester ? "" : "  [responder: byte 56 is not a send opcode]");
    printf("  QPN             0x%06x\n", d->qpn);
    printf("  wqe_counter     %u (0x%04x)\n", d->wqe_counter, d->wqe_counter);
    printf("  srqn            0x%06x\n", d->srqn_uidx);
    printf("  signature       0x%02x\n", d->signature);
    if (d->syndrome == MLXD_SYND_REMOTE_ABORTED_ERR && d->vendor_syndrome == MLXD_VENDOR_SYND_ODP_PFAULT)
        printf("  explanation     on-demand-paging page fault abort (vendor syndrome 0x93)\n");
    const char *ex = mlxd_syndrome_explain(d->syndrome);
    printf("  explanation     %s\n", ex ? ex : "syndrome not in the public tables; verbs reports general error");
}

/* The fields of a successful CQE (text output). */
static void print_success_fields(const struct mlxd_cqe_decoded *d)
{
    printf("  byte count      %u\n", d->byte_cnt);
    printf("  imm/inval key   0x%08x (network-order bytes %02x %02x %02x %02x)\n", d->imm,
           d->imm >> 24, (d->imm >> 16) & 0xff, (d->imm >> 8) & 0xff, d->imm & 0xff);
    printf("  srqn/uidx       0x%06x\n", d->srqn_uidx);
    printf("  timestamp       %" PRIu64 " (HCA clock ticks)\n", d->timestamp);
    if (d->is_requester)
        printf("  WQE opcode      0x%02x  %s (%s)\n", d->wqe_opcode,
               or_unknown(mlxd_wqe_opcode_name(d->wqe_opcode)),
               or_unknown(mlxd_wqe_opcode_text(d->wqe_opcode)));
    else
        printf("  drop counter    %u\n", d->drop_counter);
    printf("  QPN             0x%06x\n", d->qpn);
    printf("  wqe_counter     %u (0x%04x)\n", d->wqe_counter, d->wqe_counter);
    printf("  signature       0x%02x\n", d->signature);
    printf("  source QPN      0x%06x (UD only)\n", d->src_qpn);
}

/* Returns 0, or ENOMEM (nothing printed). */
static int print_text(const char *name, const struct mlxd_dump_result *r)
{
    struct diag_index ix;
    if (diag_index_build(r, &ix)) return ENOMEM;
    for (size_t i = 0; i < r->ncqes; i++) {
        const struct mlxd_dump_cqe *c = &r->cqes[i];
        struct mlxd_cqe_decoded d;
        mlxd_cqe_decode(c->bytes, c->size, &d);
        printf("%s: CQE %zu of %zu, lines %u-%u (%s, %u bytes)\n", name, i + 1, r->ncqes,
               c->first_line, c->last_line, or_unknown(mlxd_dump_format_name(c->format)), c->size);
        const char *opn = or_unknown(mlxd_cqe_opcode_name(d.opcode));
        const char *opt = or_unknown(mlxd_cqe_opcode_text(d.opcode));
        if (d.is_error) {
            printf("  %s (%s): %s (syndrome 0x%02x), vendor syndrome 0x%02x", opt, opn,
                   or_unknown(mlxd_syndrome_text(d.syndrome)), d.syndrome, d.vendor_syndrome);
            if (d.is_requester)
                printf(", on %s", or_unknown(mlxd_wqe_opcode_text(d.wqe_opcode)));
            printf(", QPN 0x%06x, wqe_counter %u\n", d.qpn, d.wqe_counter);
        } else {
            printf("  %s (%s), QPN 0x%06x, wqe_counter %u\n", opt, opn, d.qpn, d.wqe_counter);
        }
        printf("  opcode          0x%x   %s (%s)\n", d.opcode, opn, opt);
        printf("  owner           %u\n", d.owner);
        printf("  solicited       %u\n", d.solicited);
        printf("  format          %u\n", d.format);
        if (d.is_error) print_error_fields(&d);
        else print_success_fields(&d);
        if (c->has_mlx5e_hdr)
            printf("  mlx5e header    cqn 0x%x, ci 0x%x, qn 0x%x, opcode 0x%x, syndrome 0x%x, vendor syndrome 0x%x\n",
                   c->hdr_cqn, c->hdr_ci, c->hdr_qn, c->hdr_opcode, c->hdr_syndrome, c->hdr_vendor_syndrome);
        printf("  bytes:\n");
        print_rows(c->bytes, c->size, "    ");
        if (c->has_wqe) print_wqe(c);
        print_cqe_diags(r, &ix, i);
        printf("\n");
    }
    for (size_t k = 0; k < r->nstatuses; k++) print_status(name, &r->statuses[k]);
    for (size_t k = 0; k < r->ndiags; k++)
        if (r->diags[k].cqe < 0)
            fprintf(stderr, "%s:%u: %s: %s\n", name, r->diags[k].line,
                    sev_name(r->diags[k].severity), r->diags[k].msg);
    if (!r->ncqes && !r->nstatuses) fprintf(stderr, "%s: no decodable CQE or status line found\n", name);
    free(ix.first);
    free(ix.order);
    return 0;
}

/* ---- JSON output ------------------------------------------------------------------------- */
static void jstr(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}
static void jname(const char *key, const char *val)
{
    printf(", \"%s\": ", key);
    if (val) jstr(val); else printf("null");
}
static void jhex(const uint8_t *b, unsigned n)
{
    putchar('"');
    for (unsigned i = 0; i < n; i++) printf("%02x", b[i]);
    putchar('"');
}

/* One CQE (index i) of the "cqes" array. */
static void json_cqe(const struct mlxd_dump_cqe *c, size_t i)
{
    struct mlxd_cqe_decoded d;
    mlxd_cqe_decode(c->bytes, c->size, &d);
    printf("%s\n    {\"index\": %zu, \"first_line\": %u, \"last_line\": %u", i ? "," : "", i,
           c->first_line, c->last_line);
    jname("format", mlxd_dump_format_name(c->format));
    printf(", \"size\": %u, \"bytes\": ", c->size);
    jhex(c->bytes, c->size);
    printf(", \"opcode\": %u", d.opcode);
    jname("opcode_name", mlxd_cqe_opcode_name(d.opcode));
    jname("opcode_text", mlxd_cqe_opcode_text(d.opcode));
    printf(", \"owner\": %u, \"solicited\": %u, \"format_bits\": %u, \"is_error\": %s",
           d.owner, d.solicited, d.format, d.is_error ? "true" : "false");
    printf(", \"qpn\": %u, \"wqe_counter\": %u, \"signature\": %u", d.qpn, d.wqe_counter,
           d.signature);
    if (d.is_error) {
        printf(", \"syndrome\": %u", d.syndrome);
        jname("syndrome_name", mlxd_syndrome_name(d.syndrome));
        jname("syndrome_text", mlxd_syndrome_text(d.syndrome));
        jname("explanation", mlxd_syndrome_explain(d.syndrome));
        printf(", \"wc_status\": %d", d.wc_status);
        jname("wc_status_name", mlxd_wc_status_name(d.wc_status));
        printf(", \"vendor_syndrome\": %u, \"hw_err_synd\": %u, \"hw_synd_type\": %u, "
               "\"wqe_opcode\": %u, \"srqn\": %u", d.vendor_syndrome, d.hw_err_synd,
               d.hw_synd_type, d.wqe_opcode, d.srqn_uidx);
        jname("wqe_opcode_name", mlxd_wqe_opcode_name(d.wqe_opcode));
    } else {
        printf(", \"byte_cnt\": %u, \"imm\": %u, \"srqn_uidx\": %u, \"timestamp\": %" PRIu64
               ", \"src_qpn\": %u", d.byte_cnt, d.imm, d.srqn_uidx, d.timestamp, d.src_qpn);
        if (d.is_requester) {
            printf(", \"wqe_opcode\": %u", d.wqe_opcode);
            jname("wqe_opcode_name", mlxd_wqe_opcode_name(d.wqe_opcode));
        } else {
            printf(", \"drop_counter\": %u", d.drop_counter);
        }
    }
    if (c->has_mlx5e_hdr)
        printf(", \"mlx5e_header\": {\"cqn\": %u, \"ci\": %u, \"qn\": %u, \"opcode\": %u, "
               "\"syndrome\": %u, \"vendor_syndrome\": %u}", c->hdr_cqn, c->hdr_ci, c->hdr_qn,
               c->hdr_opcode, c->hdr_syndrome, c->hdr_vendor_syndrome);
    if (c->has_wqe) {
        const uint8_t *w = c->wqe;
        uint32_t oio = mlxd_load_be32(w), qd = mlxd_load_be32(w + 4);
        printf(", \"wqe\": {\"index\": %u, \"wq_size\": %u, \"len\": %u, \"bytes\": ",
               c->wqe_index, c->wq_size, c->wqe_len);
        jhex(w, c->wqe_len > 256 ? 256 : c->wqe_len);
        printf(", \"ctrl\": {\"opcode\": %u", oio & 0xff);
        jname("opcode_name", mlxd_wqe_opcode_name(oio & 0xff));
        printf(", \"opmod\": %u, \"wqe_index\": %u, \"qpn\": %u, \"ds\": %u, \"signature\": %u, "
               "\"fm_ce_se\": %u, \"imm\": %u}}", oio >> 24, (oio >> 8) & 0xffff, qd >> 8,
               qd & MLXD_WQE_DS_MASK, w[8], w[11], mlxd_load_be32(w + 12));
    }
    printf("}");
}

/* One status line (index k) of the "status_lines" array. */
static void json_status(const struct mlxd_dump_status *st, size_t k)
{
    printf("%s\n    {\"line\": %u", k ? "," : "", st->line);
    jname("source", mlxd_status_source_name(st->source));
    printf(", \"status\": %d", st->status);
    jname("status_name", mlxd_wc_status_name(st->status));
    printf(", \"status_from_syndrome\": %s, \"syndrome\": %d, \"syndrome_printed\": %s, "
           "\"vendor_syndrome\": %d, \"hw_err_synd\": %d, \"hw_synd_type_hi\": %d",
           st->status_from_syndrome ? "true" : "false", st->syndrome,
           st->syndrome_printed ? "true" : "false", st->vendor_syndrome, st->hw_err_synd,
           st->hw_synd_type_hi);
    jname("explanation", st->syndrome >= 0 ? mlxd_syndrome_explain((unsigned)st->syndrome) : NULL);
    printf(", \"cqe\": %d, \"mismatches\": %u}", st->cqe, st->mismatches);
}

static void print_json(const char *name, const struct mlxd_dump_result *r, bool first)
{
    printf("%s\n  {\"name\": ", first ? "" : ",");
    jstr(name);
    printf(", \"cqes\": [");
    for (size_t i = 0; i < r->ncqes; i++)
        json_cqe(&r->cqes[i], i);
    printf("%s], \"status_lines\": [", r->ncqes ? "\n  " : "");
    for (size_t k = 0; k < r->nstatuses; k++)
        json_status(&r->statuses[k], k);
    printf("%s], \"diagnostics\": [", r->nstatuses ? "\n  " : "");
    for (size_t k = 0; k < r->ndiags; k++) {
        printf("%s\n    {\"line\": %u, \"severity\": \"%s\", \"cqe\": %d, \"message\": ", k ? "," : "",
               r->diags[k].line, sev_name(r->diags[k].severity), r->diags[k].cqe);
        jstr(r->diags[k].msg);
        printf("}");
    }
    printf("%s]}", r->ndiags ? "\n  " : "");
}

/* ---- main -------------------------------------------------------------------------------- */
int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    bool json = false;
    int o;
    while ((o = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
        switch (o) {
        case 'j': json = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("mlxd-cqe %s\n", mlxd_version()); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    static const char *const stdin_only[] = { "-" };
    const char *const *files = optind < argc ? (const char *const *)argv + optind : stdin_only;
    int nfiles = optind < argc ? argc - optind : 1;
    size_t decoded = 0;
    int nprinted = 0;
    if (json) printf("{\"inputs\": [");
    for (int i = 0; i < nfiles; i++) {
        bool is_stdin = !strcmp(files[i], "-");
        const char *name = is_stdin ? "<stdin>" : files[i];   /* the one name in every message */
        FILE *f = is_stdin ? stdin : fopen(files[i], "r");
        if (!f) {
            fprintf(stderr, "mlxd-cqe: %s: %s\n", name, strerror(errno));
            continue;
        }
        size_t len = 0;
        char *text = NULL;
        int rerr = read_all(f, &text, &len);
        if (!is_stdin) fclose(f);
        if (rerr == EFBIG) {
            fprintf(stderr, "mlxd-cqe: %s: more than " MAX_INPUT_TEXT " (the limit per input); "
                    "nothing decoded from it\n", name);
            continue;
        }
        if (rerr) {
            fprintf(stderr, "mlxd-cqe: %s: %s\n", name, strerror(rerr));
            continue;
        }
        struct mlxd_dump_result *r = NULL;
        int rc = mlxd_cqe_dump_parse(text, len, &r);
        free(text);
        if (rc < 0) {
            fprintf(stderr, "mlxd-cqe: %s: %s\n", name, mlxd_errmsg());
            continue;
        }
        if (json) print_json(name, r, nprinted++ == 0);
        else if (print_text(name, r)) {
            fprintf(stderr, "mlxd-cqe: %s: %s\n", name, strerror(ENOMEM));
            mlxd_cqe_dump_free(r);
            continue;
        }
        decoded += r->ncqes + r->nstatuses;
        mlxd_cqe_dump_free(r);
    }
    if (json) printf("\n]}\n");
    if (fflush(stdout) != 0) return 1;
    return decoded ? 0 : 1;
}
