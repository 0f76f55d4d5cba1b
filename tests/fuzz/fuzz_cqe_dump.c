/* libFuzzer target: the CQE dump parser (abi/mlxd_cqe_dump.h).
 * Oracle: no crash or sanitizer report, and the result is self-consistent: every CQE is 64 or
 * 128 bytes, its lines lie inside the input, diagnostics are counted as the header says and their
 * messages are NUL-terminated single lines; every status line (perftest, UCX, NCCL, ... formats)
 * lies inside the input, has a known source, a status of enum ibv_wc_status, byte-sized syndromes
 * or -1, and is cross-checked against an existing CQE or none; seeds for the "> " quoting, blank-line,
 * wrapped-row, fixture-record and status-line paths: tests/fuzz/corpus/fuzz_cqe_dump/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_cqe_dump.h"

static unsigned count_lines(const uint8_t *d, size_t n)
{
    unsigned l = 1;
    for (size_t i = 0; i < n; i++)
        if (d[i] == '\n' || d[i] == 0) l++;   /* NUL bytes end a line too (the header) */
    return l;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mlxd_dump_result *r = NULL;
    int rc = mlxd_cqe_dump_parse((const char *)data, size, &r);
    if (rc) {
        if (rc != -22 && rc != -12) abort();
        return 0;
    }
    unsigned lines = count_lines(data, size) + 1;
    size_t errs = 0, warns = 0;
    for (size_t i = 0; i < r->ncqes; i++) {
        const struct mlxd_dump_cqe *c = &r->cqes[i];
        if (c->size != 64 && c->size != 128) abort();
        if (c->first_line < 1 || c->first_line > c->last_line || c->last_line > lines) abort();
        if (!mlxd_dump_format_name(c->format)) abort();
    }
    for (size_t i = 0; i < r->ndiags; i++) {
        const struct mlxd_dump_diag *d = &r->diags[i];
        if (!memchr(d->msg, 0, sizeof d->msg) || strchr(d->msg, '\n')) abort();
        if (d->cqe >= (int)r->ncqes || d->cqe < -1) abort();
        if (d->line > lines) abort();
        if (d->severity == MLXD_DUMP_ERROR) errs++;
        if (d->severity == MLXD_DUMP_WARNING) warns++;
    }
    if (errs != r->nerrors || warns != r->nwarnings) abort();
    for (size_t i = 0; i < r->nstatuses; i++) {
        const struct mlxd_dump_status *s = &r->statuses[i];
        if (s->line < 1 || s->line > lines || !mlxd_status_source_name(s->source)) abort();
        if (s->status < 0 || s->status > 23) abort();
        if (s->syndrome < -1 || s->syndrome > 0xff || s->vendor_syndrome < -1 || s->vendor_syndrome > 0xff)
            abort();
        if (s->cqe < -1 || s->cqe >= (int)r->ncqes || (s->cqe < 0 && s->mismatches)) abort();
        if (i && s->line < r->statuses[i - 1].line) abort();
    }
    mlxd_cqe_dump_free(r);
    return 0;
}
