/* libFuzzer target: the CQE fixture reader (abi/mlxd_fixture.h, mlxd_fixture_open_mem).
 * Oracle: no crash or sanitizer report; an accepted header obeys the format's rules
 * (docs/fixture-format.md: version 1, cqe_size 64/128, ring_size a power of two <= 2^24, cqn 24
 * bits, a non-empty one-line source); every record carries the header's cqe_size and a line
 * number that grows; after an error every later call gives the same error; and what was read
 * survives a write + re-read unchanged.
 * Input: the fixture text when it starts with "mlxd-cqe-fixture" (the seeds); otherwise the bytes
 * describe one (build below: the magic line, a header whose numbers the bytes choose, then records
 * of the bytes in hex, some with a delay, some lines broken when the bytes say so), so that an
 * empty corpus gets past the header at once (from an empty corpus the raw text took more than
 * 30 s to find even the second header line). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_fixture.h"
#include "structured.h"

#define MAXREC 64

/* A fixture text from the fuzzer's bytes into out (cap bytes); returns its length. */
static size_t build(struct fz *z, char *out, size_t cap)
{
    unsigned ctl = (unsigned)fz_take(z, 1);
    unsigned cqe = (ctl & 1) ? 128 : 64;
    unsigned ring_log = (unsigned)fz_take(z, 1) % 26;          /* 2^0 .. 2^25: one too many */
    int n = snprintf(out, cap, "mlxd-cqe-fixture %u\ncqe_size %u%s\nring_size %s%lu\ncqn 0x%06x\nsource %s\n",
                     (ctl & 2) ? 2 : 1, (ctl & 4) ? 96 : cqe, (ctl & 8) ? " # c" : "",
                     (ctl & 16) ? "0x" : "", 1ul << ring_log, (unsigned)fz_take(z, 3) & ((ctl & 32) ? 0xFFFFFFF : 0xFFFFFF),
                     (ctl & 64) ? "" : "fuzz #1");
    size_t at = n > 0 ? (size_t)n : 0;
    unsigned recs = (unsigned)fz_take(z, 1) % 8;
    for (unsigned k = 0; k < recs && at + 600 < cap; k++) {
        unsigned rc = (unsigned)fz_take(z, 1);
        if (rc & 1)
            at += (size_t)snprintf(out + at, cap - at, "+%luns ", (unsigned long)fz_take(z, 4));
        unsigned digits = cqe / 8 * 2 * 8 - ((rc & 2) ? 1 : 0);  /* 2 x cqe hex digits, or one short */
        for (unsigned d = 0; d < digits; d += 2)
            at += (size_t)snprintf(out + at, cap - at, "%02x", (unsigned)fz_take(z, 1));
        if (rc & 4) out[at++] = (char)fz_take(z, 1);              /* a stray byte */
        at += (size_t)snprintf(out + at, cap - at, "%s\n", (rc & 8) ? "   # comment" : "");
    }
    return at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char built[8192];
    if (size < 16 || memcmp(data, "mlxd-cqe-fixture", 16)) {
        struct fz z = { data, size };
        size = build(&z, built, sizeof built);
        data = (const uint8_t *)built;
    }
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
