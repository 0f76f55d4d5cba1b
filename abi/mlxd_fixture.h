/* mlxd_fixture.h: reading and writing CQE fixture files, the text format for recorded CQE
 * streams that tests and the emulator replay through the poll loop.  The format is specified in
 * docs/fixture-format.md; in short:
 *
 *     mlxd-cqe-fixture 2
 *     cqe_size 64
 *     ring_size 256
 *     cqn 0x000412
 *     source emulator: 1080p frame receiver, 4 frames
 *     overflow 0                                      # version 2 only (optional)
 *     # comment lines and blank lines anywhere
 *     0000...(128 hex digits)...00e1
 *     +1500ns 0000...(128 hex digits)...01e1      # optional delay since the previous CQE
 *
 * Reading is streaming: open, read the header, call mlxd_fixture_next() until it returns 0.
 * mlxd_fixture_load() reads a whole file into an array for replays that loop.
 *
 * Errors: every failing call returns a negative errno and sets the per-thread message
 * (mlxd_errmsg(), mlxd_error.h) that starts with the name of the function called.  A malformed
 * file gives -EINVAL with a message of the form "<function>: <file>:<line>: <what is wrong>",
 * e.g. "mlxd_fixture_next: cq.fix:7: record has 126 hex digits, cqe_size 64 needs 128".  A file
 * that cannot be opened gives the errno of fopen() ("<function>: <file>: <strerror>").
 * No function prints, aborts or exits.
 *
 * Threads: a reader or writer object is used by one thread at a time; distinct objects are
 * independent.
 */
#ifndef MLXD_FIXTURE_H
#define MLXD_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLXD_FIXTURE_VERSION     2   /* the newest version read and written; 1 is read too */
#define MLXD_FIXTURE_SOURCE_MAX  256   /* bytes of the source line kept, including the NUL */
#define MLXD_FIXTURE_MAX_RING    (1u << 24)  /* largest ring_size accepted (libmlx5's cap) */

/* The header of a fixture file. */
struct mlxd_fixture_header {
    uint32_t version;     /* MLXD_FIXTURE_VERSION */
    uint32_t cqe_size;    /* bytes per CQE: 64 or 128 (records then carry 128 or 256 digits) */
    uint32_t ring_size;   /* CQEs in the ring the stream was recorded from: power of two,
                             1 .. MLXD_FIXTURE_MAX_RING */
    uint32_t cqn;         /* CQ number, 24 bits */
    char     source[MLXD_FIXTURE_SOURCE_MAX];  /* where the stream came from: one line of text,
                             1..255 bytes, no control character but tab, no leading or trailing
                             blank (docs/fixture-format.md; reader and writer refuse the rest) */
    uint64_t overflow;    /* version 2: CQEs the recorder consumed but could not record (its ring
                             was full): the stream has that many gaps.  0 in version 1 */
};

/* One record: one CQE as it was in the ring. */
struct mlxd_fixture_record {
    uint8_t  cqe[128];    /* cqe_size bytes valid, in memory (big-endian field) order */
    uint32_t cqe_size;    /* 64 or 128, from the header */
    bool     has_delay;   /* the record gave a delay */
    uint64_t delay_ns;    /* nanoseconds since the previous record (0 when !has_delay) */
    unsigned line;        /* 1-based line number in the file */
    bool     has_md;      /* version 2: an 'md' line before the record gave md */
    uint8_t  md[128];     /* the 128-byte metadata block the sensor bridge wrote with this
                             record's frame (Holoscan Sensor Bridge; receiver/mlxd_hsb.h), as the
                             poll loop found it in the frame's page when it consumed the CQE */
};

struct mlxd_fixture_reader;   /* opaque */

/* Opens path (or reads text[0..len) from memory, named name in messages; the text is copied)
 * and reads the header.  On success *out owns the reader: free it with mlxd_fixture_close().
 * Errors: -EINVAL (NULL argument, malformed header: message names the line; open_mem: also
 * len > PTRDIFF_MAX - 1, a length no object can have, as the copy is len + 1 bytes), -ENOMEM,
 * or the errno of fopen()/read. */
int mlxd_fixture_open(const char *path, struct mlxd_fixture_reader **out);
int mlxd_fixture_open_mem(const char *text, size_t len, const char *name,
                          struct mlxd_fixture_reader **out);

/* The header read by open (owned by the reader; valid until close).  NULL if r is NULL. */
const struct mlxd_fixture_header *mlxd_fixture_header(const struct mlxd_fixture_reader *r);

/* Reads the next record into *rec.  Returns 1 (a record), 0 (end of file), or -EINVAL (NULL
 * argument, or a malformed line: message "mlxd_fixture_next: <file>:<line>: ...", and every
 * later call returns the same error).  Skips comments and blank lines. */
int mlxd_fixture_next(struct mlxd_fixture_reader *r, struct mlxd_fixture_record *rec);

/* Frees the reader (NULL is a no-op). */
void mlxd_fixture_close(struct mlxd_fixture_reader *r);

/* A whole fixture in memory. */
struct mlxd_fixture {
    struct mlxd_fixture_header  header;
    struct mlxd_fixture_record *records;   /* count records, owned by the fixture */
    size_t                      count;
};
/* Reads a whole file.  On success *out is owned by the caller: free it with mlxd_fixture_free().
 * Errors as mlxd_fixture_open() and mlxd_fixture_next() (messages name mlxd_fixture_load), and
 * -ENOMEM. */
int mlxd_fixture_load(const char *path, struct mlxd_fixture **out);
void mlxd_fixture_free(struct mlxd_fixture *f);

struct mlxd_fixture_writer;   /* opaque */

/* Starts a fixture: writes the header to path (created or truncated) or to an open stream (not
 * closed by the writer; the caller keeps ownership of f).  The header is checked like the reader
 * checks it, with the same rule for the source (so what the writer accepts reads back unchanged,
 * and a header the reader returned is accepted): a source with a control character other than
 * tab (CR, LF, ...) or a leading or trailing blank is refused.  Errors: -EINVAL (bad header,
 * NULL), -ENOMEM, or the errno of fopen()/fprintf(). */
int mlxd_fixture_writer_open(const char *path, const struct mlxd_fixture_header *h,
                             struct mlxd_fixture_writer **out);
int mlxd_fixture_writer_stream(FILE *f, const struct mlxd_fixture_header *h,
                               struct mlxd_fixture_writer **out);

/* Appends one record: cqe points to header.cqe_size bytes; delay_ns is written only if
 * has_delay.  Errors: -EINVAL (NULL), or the errno of the failed write. */
int mlxd_fixture_write(struct mlxd_fixture_writer *w, const void *cqe, bool has_delay,
                       uint64_t delay_ns);

/* Version 2: appends an 'md' line, the 128-byte metadata block of the next record's frame.
 * Errors: -EINVAL (NULL, or a version 1 header), or the errno of the failed write. */
int mlxd_fixture_write_md(struct mlxd_fixture_writer *w, const void *md);

/* Appends a comment line "# text" (text must not contain a newline: -EINVAL). */
int mlxd_fixture_comment(struct mlxd_fixture_writer *w, const char *text);

/* Version 2 headers: sets the overflow count written into the header at close (the writer
 * reserves room for it; the file must be seekable then, else close returns ESPIPE's errno).
 * Errors: -EINVAL (NULL, or a version 1 header). */
int mlxd_fixture_writer_set_overflow(struct mlxd_fixture_writer *w, uint64_t n);

/* Flushes, closes the file if the writer opened it, and frees the writer (NULL is a no-op and
 * returns 0).  Returns 0, or the errno of the first write/flush/close that failed. */
int mlxd_fixture_writer_close(struct mlxd_fixture_writer *w);

#ifdef __cplusplus
}
#endif
#endif
