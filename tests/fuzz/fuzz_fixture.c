/* libFuzzer target: the CQE fixture reader (abi/mlxd_fixture.h, mlxd_fixture_open_mem).
 * Oracle: no crash or sanitizer report; an accepted header obeys the format's rules
 * (docs/fixture-format.md: version 1, cqe_size 64/128, ring_size a power of two <= 2^24, cqn 24
 * bits, a non-empty one-line source); every record carries the header's cqe_size and a line
 * number that grows; after an error every later call gives the same error; and what was read
 * survives a write + re-read unchanged. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_fixture.h"

#define MAXREC 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mlxd_fixture_reader *r = NULL;
    int rc = mlxd_fixture_open_mem((const char *)data, size, "fuzz", &r);
    if (rc) {
        if (rc != -EINVAL && rc != -ENOMEM) abort();
        return 0;
    }
    const struct mlxd_fixture_header *h = mlxd_fixture_header(r);
    if (h->version < 1 || h->version > MLXD_FIXTURE_VERSION || (h->cqe_size != 64 && h->cqe_size != 128) ||
        !h->ring_size || (h->ring_size & (h->ring_size - 1)) || h->ring_size > MLXD_FIXTURE_MAX_RING ||
        h->cqn > 0xffffff || !h->source[0] || !memchr(h->source, 0, sizeof h->source) ||
        strchr(h->source, '\n'))
        abort();
    static struct mlxd_fixture_record recs[MAXREC];
    size_t n = 0;
    unsigned last_line = 0;
    struct mlxd_fixture_record rec;
    while ((rc = mlxd_fixture_next(r, &rec)) == 1) {
        if (rec.cqe_size != h->cqe_size || rec.line <= last_line) abort();
        if (!rec.has_delay && rec.delay_ns) abort();
        last_line = rec.line;
        if (n < MAXREC) recs[n++] = rec;
    }
    if (rc < 0) {
        if (rc != -EINVAL || mlxd_fixture_next(r, &rec) != rc) abort();
    }
    /* round trip: write what was read, read it back.  Known finding (tests/test_security_fuzz.c
     * fixture_source_with_cr): the reader keeps a CR inside 'source', which the writer refuses;
     * skipped here so that the fuzzer goes on looking for other things. */
    if (strchr(h->source, '\r')) { mlxd_fixture_close(r); return 0; }
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    if (!f) abort();
    struct mlxd_fixture_writer *w;
    if (mlxd_fixture_writer_stream(f, h, &w)) abort();
    for (size_t i = 0; i < n; i++)
        if (mlxd_fixture_write(w, recs[i].cqe, recs[i].has_delay, recs[i].delay_ns)) abort();
    if (mlxd_fixture_writer_close(w)) abort();
    fclose(f);
    struct mlxd_fixture_reader *r2;
    if (mlxd_fixture_open_mem(out, outlen, "rt", &r2)) abort();
    const struct mlxd_fixture_header *h2 = mlxd_fixture_header(r2);
    if (h2->cqe_size != h->cqe_size || h2->ring_size != h->ring_size || h2->cqn != h->cqn ||
        strcmp(h2->source, h->source))
        abort();
    for (size_t i = 0; i < n; i++) {
        if (mlxd_fixture_next(r2, &rec) != 1) abort();
        if (memcmp(rec.cqe, recs[i].cqe, h->cqe_size) || rec.has_delay != recs[i].has_delay ||
            rec.delay_ns != recs[i].delay_ns)
            abort();
    }
    if (mlxd_fixture_next(r2, &rec) != 0) abort();
    mlxd_fixture_close(r2);
    free(out);
    mlxd_fixture_close(r);
    return 0;
}
