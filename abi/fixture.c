/* fixture.c: CQE fixture reader and writer (mlxd_fixture.h; the format is docs/fixture-format.md).
 *
 * The reader works line by line on a FILE (a file, or a private copy of the caller's text opened
 * with fmemopen), so a replay can stream files of any length.  Every error message has the form
 * "<public function>: <name>:<line>: <what is wrong>". */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_error.h"
#include "mlxd_fixture.h"

#define MAGIC "mlxd-cqe-fixture"

/* HAVE_ALL: the keys every version requires; overflow (version 2) is optional */
enum { HAVE_CQE_SIZE = 1, HAVE_RING = 2, HAVE_CQN = 4, HAVE_SOURCE = 8, HAVE_ALL = 15, HAVE_OVERFLOW = 16 };

struct mlxd_fixture_reader {
    FILE    *f;
    char    *mem;          /* private copy for open_mem (fmemopen buffer) */
    char    *name;         /* file name for messages */
    const char *fn;        /* the public function being run, for messages */
    char    *line;         /* getline buffer */
    size_t   cap;
    unsigned lineno;
    bool     pending;      /* line holds a record line not yet returned */
    bool     have_md;      /* an 'md' line was read: it belongs to the next record */
    uint8_t  md[128];
    unsigned md_line;
    int      err;          /* sticky error (negative errno) */
    char     errmsg[512];  /* message of the sticky error */
    struct mlxd_fixture_header hdr;
};

struct mlxd_fixture_writer {
    FILE    *f;
    bool     owns;
    int      err;          /* first write error (positive errno) */
    uint32_t cqe_size;
    long     overflow_at;  /* file offset of the version 2 'overflow' value, -1 if none */
    uint64_t overflow;     /* mlxd_fixture_writer_set_overflow(): written there at close */
};

/* ---- small helpers -------------------------------------------------------------------------- */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parses a whole token as an unsigned number: decimal, or hexadecimal with 0x.  -1 if not. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s) return -1;
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) { base = 16; s += 2; if (!*s) return -1; }
    uint64_t v = 0;
    for (; *s; s++) {
        int d = base == 16 ? hexval((unsigned char)*s) : (*s >= '0' && *s <= '9' ? *s - '0' : -1);
        if (d < 0) return -1;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return -1;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* Records a sticky error on the reader and returns it. */
static int rerr(struct mlxd_fixture_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rerr(struct mlxd_fixture_reader *r, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->errmsg, sizeof r->errmsg, "%s:%u: %s", r->name, r->lineno, what);
    r->err = -EINVAL;
    return mlxd_err(EINVAL, "%s: %s", r->fn, r->errmsg);
}

/* Reads the next line into r->line (without the newline).  1, 0 at EOF, or -errno. */
static int read_line(struct mlxd_fixture_reader *r)
{
    errno = 0;
    ssize_t n = getline(&r->line, &r->cap, r->f);
    if (n < 0) {
        if (ferror(r->f)) {
            int e = errno ? errno : EIO;
            r->err = -e;
            snprintf(r->errmsg, sizeof r->errmsg, "%s:%u: read error: %s", r->name, r->lineno + 1,
                     strerror(e));
            return mlxd_err(e, "%s: %s", r->fn, r->errmsg);
        }
        return 0;
    }
    r->lineno++;
    if ((size_t)n != strlen(r->line))
        return rerr(r, "NUL byte in line");
    return 1;
}

/* The part of a line before an unescaped comment (" #" or a leading '#'), trimmed. */
static char *strip_comment(char *s)
{
    char *h = strchr(s, '#');
    if (h) *h = 0;
    return trim(s);
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* The rule for the 'source' value, one for the reader and the writer (docs/fixture-format.md):
 * 1..255 bytes of one line of text, no control character but tab (a CR inside the line is not
 * a line end in this format, but it is one for many tools, and on a terminal it hides the text
 * before it), no leading or trailing blank (a reader drops those).  Returns NULL when s obeys
 * it, else what is wrong, written into why. */
static const char *source_problem(const char *s, char *why, size_t len)
{
    size_t n = strnlen(s, MLXD_FIXTURE_SOURCE_MAX);
    if (n == 0) return "is empty: say where the stream came from";
    if (n == MLXD_FIXTURE_SOURCE_MAX) {
        snprintf(why, len, "is longer than %d bytes", MLXD_FIXTURE_SOURCE_MAX - 1);
        return why;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            snprintf(why, len, "contains the control character 0x%02x at byte %zu (one line of "
                     "text: tab is the only control character allowed)", c, i + 1);
            return why;
        }
    }
    if (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t')
        return "has a leading or trailing blank (a reader drops it)";
    return NULL;
}

static const char *missing_keys(unsigned have, char *buf, size_t len)
{
    buf[0] = 0;
    static const char *const names[] = { "cqe_size", "ring_size", "cqn", "source" };
    for (unsigned i = 0; i < 4; i++)
        if (!(have & (1u << i))) {
            strncat(buf, buf[0] ? ", " : "", len - strlen(buf) - 1);
            strncat(buf, names[i], len - strlen(buf) - 1);
        }
    return buf;
}

/* Parses one header key line (already known not to be a record).  0 or error. */
static int header_line(struct mlxd_fixture_reader *r, char *s, unsigned *have)
{
    char *key = s;
    char *val = s + strcspn(s, " \t");
    if (*val) *val++ = 0;
    if (!strcmp(key, "source")) {
        val = trim(val);          /* the source is free text: '#' is kept */
        if (*have & HAVE_SOURCE) return rerr(r, "duplicate header key 'source'");
        if (strlen(val) >= MLXD_FIXTURE_SOURCE_MAX)
            return rerr(r, "'source' is %zu bytes, at most %d", strlen(val), MLXD_FIXTURE_SOURCE_MAX - 1);
        char why[160];
        const char *bad = source_problem(val, why, sizeof why);
        if (bad) return rerr(r, "'source' %s", bad);
        strcpy(r->hdr.source, val);
        *have |= HAVE_SOURCE;
        return 0;
    }
    val = strip_comment(val);
    uint64_t v;
    unsigned bit;
    if (!strcmp(key, "cqe_size")) bit = HAVE_CQE_SIZE;
    else if (!strcmp(key, "ring_size")) bit = HAVE_RING;
    else if (!strcmp(key, "cqn")) bit = HAVE_CQN;
    else if (!strcmp(key, "overflow") && r->hdr.version >= 2) bit = HAVE_OVERFLOW;
    else return rerr(r, "unknown header key '%.40s' (expected cqe_size, ring_size, cqn or source%s)", key,
                     r->hdr.version >= 2 ? ", or overflow" : "");
    if (*have & bit) return rerr(r, "duplicate header key '%s'", key);
    if (parse_u64(val, &v) < 0 || strpbrk(val, " \t"))
        return rerr(r, "'%s' needs one number (decimal or 0x hex), found '%.40s'", key, val);
    if (bit == HAVE_CQE_SIZE) {
        if (v != 64 && v != 128) return rerr(r, "cqe_size %" PRIu64 " is neither 64 nor 128", v);
        r->hdr.cqe_size = (uint32_t)v;
    } else if (bit == HAVE_RING) {
        if (!is_pow2(v) || v > MLXD_FIXTURE_MAX_RING)
            return rerr(r, "ring_size %" PRIu64 " is not a power of two between 1 and %u", v,
                        MLXD_FIXTURE_MAX_RING);
        r->hdr.ring_size = (uint32_t)v;
    } else if (bit == HAVE_OVERFLOW) {
        r->hdr.overflow = v;
    } else {
        if (v > 0xFFFFFF) return rerr(r, "cqn 0x%" PRIx64 " exceeds 24 bits", v);
        r->hdr.cqn = (uint32_t)v;
    }
    *have |= bit;
    return 0;
}

/* A record line starts with '+' (a delay) or a hex digit; a header line starts with one of the
 * keys (cqe_size and cqn begin with the hex digit 'c', so keys are checked first).  A line that
 * is neither is reported where it stands (unknown key before the records, bad record after). */
static bool is_record_line(const char *s)
{
    if (*s == '+') return true;
    static const char *const keys[] = { "cqe_size", "ring_size", "cqn", "source", "overflow" };
    size_t n = strcspn(s, " \t#");
    for (unsigned i = 0; i < 5; i++)
        if (n == strlen(keys[i]) && !strncmp(s, keys[i], n)) return false;
    return hexval((unsigned char)*s) >= 0;
}

/* Refuses a CQE no ConnectX writes, which the poll loop could never consume: opcode 0xF
 * (MLX5_CQE_INVALID: the poll loop takes the slot for the NIC's and waits for ever), or cqe_format 2 (64 bytes of data inlined in the CQE, which
 * only a 128-byte CQE has room for) in a 64-byte CQE.  op_own: byte 63 of the 64-byte CQE
 * (struct mlx5_cqe64), opcode bits 7:4, cqe_format bits 3:2. */
static int record_consumable(struct mlxd_fixture_reader *r, const struct mlxd_fixture_record *rec)
{
    uint8_t op_own = rec->cqe[rec->cqe_size - 1];
    unsigned opcode = op_own >> 4, format = (op_own >> 2) & 3;
    if (opcode == 0xF)
        return rerr(r, "opcode 0xf (MLX5_CQE_INVALID) is never written by a NIC: the poll loop "
                       "would wait for this CQE for ever (op_own 0x%02x)", op_own);
    if (format == 2 && rec->cqe_size == 64)
        return rerr(r, "cqe_format 2 (64 bytes inline in the CQE) in a 64-byte CQE: only a "
                       "128-byte CQE carries it (op_own 0x%02x)", op_own);
    return 0;
}

/* Parses a record line into rec.  0 or error. */
static int record_line(struct mlxd_fixture_reader *r, char *s, struct mlxd_fixture_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->cqe_size = r->hdr.cqe_size;
    rec->line = r->lineno;
    s = strip_comment(s);
    if (*s == '+') {
        char *p = s + 1;
        uint64_t v = 0;
        if (!isdigit((unsigned char)*p)) return rerr(r, "delay '+' must be followed by a decimal number and a unit (ns, us, ms, s)");
        for (; isdigit((unsigned char)*p); p++) {
            uint64_t d = (uint64_t)(*p - '0');
            if (v > (UINT64_MAX - d) / 10) return rerr(r, "delay does not fit in 64 bits");
            v = v * 10 + d;
        }
        uint64_t mult;
        size_t ul;
        if (!strncmp(p, "ns", 2)) { mult = 1; ul = 2; }
        else if (!strncmp(p, "us", 2)) { mult = 1000; ul = 2; }
        else if (!strncmp(p, "ms", 2)) { mult = 1000000; ul = 2; }
        else if (*p == 's') { mult = 1000000000; ul = 1; }
        else return rerr(r, "delay needs a unit (ns, us, ms or s) right after the number");
        p += ul;
        if (*p != ' ' && *p != '\t')
            return rerr(r, "delay must be followed by a space and the CQE's hex digits");
        if (v > UINT64_MAX / mult) return rerr(r, "delay does not fit in 64 bits of nanoseconds");
        rec->has_delay = true;
        rec->delay_ns = v * mult;
        s = trim(p);
    }
    size_t want = 2u * r->hdr.cqe_size, n = 0;
    for (const char *p = s; *p; p++) {
        if (*p == ' ' || *p == '\t') continue;
        int d = hexval((unsigned char)*p);
        if (d < 0) return rerr(r, "'%c' at column %zu is not a hex digit", *p, (size_t)(p - r->line) + 1);
        if (n < want) {
            if (n & 1) rec->cqe[n / 2] |= (uint8_t)d;
            else rec->cqe[n / 2] = (uint8_t)(d << 4);
        }
        n++;
    }
    if (n != want)
        return rerr(r, "record has %zu hex digits, cqe_size %u needs %zu", n, r->hdr.cqe_size, want);
    return record_consumable(r, rec);
}

/* ---- reader --------------------------------------------------------------------------------- */
static int reader_start(struct mlxd_fixture_reader *r)
{
    unsigned have = 0;
    bool magic = false;
    int rc;
    while ((rc = read_line(r)) > 0) {
        char *s = trim(r->line);
        if (!*s || *s == '#') continue;
        if (!magic) {
            char *rest = s + strlen(MAGIC);
            if (strncmp(s, MAGIC, strlen(MAGIC)) || (*rest != ' ' && *rest != '\t'))
                return rerr(r, "first line must be '" MAGIC " %d' (or an older version), found '%.40s'",
                            MLXD_FIXTURE_VERSION, s);
            uint64_t v;
            rest = strip_comment(rest);
            if (parse_u64(rest, &v) < 0) return rerr(r, "bad version '%.20s'", rest);
            if (v < 1 || v > MLXD_FIXTURE_VERSION)
                return rerr(r, "version %" PRIu64 " is not supported (this library reads 1 to %d)", v,
                            MLXD_FIXTURE_VERSION);
            r->hdr.version = (uint32_t)v;
            magic = true;
            continue;
        }
        bool md = r->hdr.version >= 2 && !strncmp(s, "md", 2) && (s[2] == ' ' || s[2] == '\t');
        if (md && (have & HAVE_ALL) == HAVE_ALL) {   /* the first record's metadata block */
            r->pending = true;
            return 0;
        }
        if (is_record_line(s)) {
            char buf[64];
            size_t n = strcspn(s, " \t#");
            bool hexword = *s == '+';
            for (size_t i = 0; !hexword && i < n && hexval((unsigned char)s[i]) >= 0; i++)
                hexword = i + 1 == n;
            if ((have & HAVE_ALL) != HAVE_ALL && !hexword)
                return rerr(r, "unknown header key '%.*s' (expected cqe_size, ring_size, cqn or source)",
                            (int)(n > 40 ? 40 : n), s);
            if ((have & HAVE_ALL) != HAVE_ALL)
                return rerr(r, "record before the header is complete (missing %s)",
                            missing_keys(have, buf, sizeof buf));
            r->pending = true;
            return 0;
        }
        if ((rc = header_line(r, s, &have)) < 0) return rc;
    }
    if (rc < 0) return rc;
    if (!magic) return rerr(r, "empty file: no '" MAGIC " %d' line", MLXD_FIXTURE_VERSION);
    if ((have & HAVE_ALL) != HAVE_ALL) {
        char buf[64];
        return rerr(r, "end of file before the header is complete (missing %s)",
                    missing_keys(have, buf, sizeof buf));
    }
    return 0;   /* a header and no records: a valid empty stream */
}

static void reader_free(struct mlxd_fixture_reader *r)
{
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->mem);
    free(r->name);
    free(r->line);
    free(r);
}

static int reader_new(const char *fn, const char *name, struct mlxd_fixture_reader **out)
{
    struct mlxd_fixture_reader *r = calloc(1, sizeof *r);
    if (!r) return mlxd_err(ENOMEM, "%s: out of memory", fn);
    r->fn = fn;
    r->name = strdup(name);
    if (!r->name) { free(r); return mlxd_err(ENOMEM, "%s: out of memory", fn); }
    *out = r;
    return 0;
}

/* mlxd_fixture_open() for the public function fn (mlxd_fixture_open or mlxd_fixture_load). */
static int reader_open(const char *fn, const char *path, struct mlxd_fixture_reader **out)
{
    struct mlxd_fixture_reader *r;
    int rc = reader_new(fn, path, &r);
    if (rc < 0) return rc;
    r->f = fopen(path, "r");
    if (!r->f) {
        int e = errno ? errno : EIO;
        reader_free(r);
        return mlxd_err(e, "%s: %s: %s", fn, path, strerror(e));
    }
    if ((rc = reader_start(r)) < 0) { reader_free(r); return rc; }
    *out = r;
    return 0;
}

int mlxd_fixture_open(const char *path, struct mlxd_fixture_reader **out)
{
    if (!path || !out) return mlxd_err(EINVAL, "mlxd_fixture_open: %s is NULL", path ? "out" : "path");
    return reader_open("mlxd_fixture_open", path, out);
}

int mlxd_fixture_open_mem(const char *text, size_t len, const char *name,
                          struct mlxd_fixture_reader **out)
{
    if ((!text && len) || !out)
        return mlxd_err(EINVAL, "mlxd_fixture_open_mem: %s is NULL", out ? "text" : "out");
    /* The private copy is len + 1 bytes: refuse a len no object can have (it would wrap). */
    if (len > (size_t)PTRDIFF_MAX - 1)
        return mlxd_err(EINVAL, "mlxd_fixture_open_mem: length %zu exceeds the largest object "
                        "(%td bytes)", len, PTRDIFF_MAX - 1);
    struct mlxd_fixture_reader *r;
    int rc = reader_new("mlxd_fixture_open_mem", name ? name : "<memory>", &r);
    if (rc < 0) return rc;
    r->mem = malloc(len + 1);
    if (!r->mem) { reader_free(r); return mlxd_err(ENOMEM, "mlxd_fixture_open_mem: out of memory"); }
    if (len) memcpy(r->mem, text, len);
    r->mem[len] = 0;
    if (!len) {
        rc = rerr(r, "empty file: no '" MAGIC " %d' line", MLXD_FIXTURE_VERSION);
        reader_free(r);
        return rc;
    }
    r->f = fmemopen(r->mem, len, "r");
    if (!r->f) {
        int e = errno ? errno : EIO;
        reader_free(r);
        return mlxd_err(e, "mlxd_fixture_open_mem: fmemopen: %s", strerror(e));
    }
    if ((rc = reader_start(r)) < 0) { reader_free(r); return rc; }
    *out = r;
    return 0;
}

const struct mlxd_fixture_header *mlxd_fixture_header(const struct mlxd_fixture_reader *r)
{
    return r ? &r->hdr : NULL;
}

/* An 'md HEX' line (version 2): the 128-byte metadata block of the next record's frame. */
static int md_line(struct mlxd_fixture_reader *r, char *s)
{
    if (r->have_md) return rerr(r, "two 'md' lines in a row (one per record, before it)");
    s = strip_comment(s);
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        if (*p == ' ' || *p == '\t') continue;
        int d = hexval((unsigned char)*p);
        if (d < 0) return rerr(r, "'md': '%c' is not a hex digit", *p);
        if (n < 256) r->md[n / 2] = (uint8_t)(n & 1 ? r->md[n / 2] | d : d << 4);
        n++;
    }
    if (n != 256) return rerr(r, "'md' has %zu hex digits, a metadata block needs 256 (128 bytes)", n);
    r->have_md = true;
    r->md_line = r->lineno;
    return 0;
}

/* mlxd_fixture_next() without the argument check; messages name r->fn. */
static int reader_next(struct mlxd_fixture_reader *r, struct mlxd_fixture_record *rec)
{
    if (r->err) return mlxd_err(-r->err, "%s: %s", r->fn, r->errmsg);
    for (;;) {
        if (!r->pending) {
            int rc = read_line(r);
            if (rc == 0 && r->have_md) {
                r->lineno = r->md_line;
                return rerr(r, "'md' line not followed by a record");
            }
            if (rc <= 0) return rc;
        }
        r->pending = false;
        char *s = trim(r->line);
        if (!*s || *s == '#') continue;
        if (r->hdr.version >= 2 && !strncmp(s, "md", 2) && (s[2] == ' ' || s[2] == '\t')) {
            int rc = md_line(r, s + 3);
            if (rc < 0) return rc;
            continue;
        }
        if (!is_record_line(s)) {
            char *k = s;
            k[strcspn(k, " \t")] = 0;
            return rerr(r, "'%.40s' is not a record (header keys go before the first record; "
                           "records are [+DELAY] and %u hex digits)", k, 2 * r->hdr.cqe_size);
        }
        int rc = record_line(r, s, rec);
        if (rc < 0) return rc;
        if (r->have_md) {
            rec->has_md = true;
            memcpy(rec->md, r->md, sizeof rec->md);
            r->have_md = false;
        }
        return 1;
    }
}

int mlxd_fixture_next(struct mlxd_fixture_reader *r, struct mlxd_fixture_record *rec)
{
    if (!r || !rec) return mlxd_err(EINVAL, "mlxd_fixture_next: %s is NULL", r ? "rec" : "reader");
    r->fn = "mlxd_fixture_next";
    return reader_next(r, rec);
}

void mlxd_fixture_close(struct mlxd_fixture_reader *r) { reader_free(r); }

int mlxd_fixture_load(const char *path, struct mlxd_fixture **out)
{
    if (!path || !out) return mlxd_err(EINVAL, "mlxd_fixture_load: %s is NULL", path ? "out" : "path");
    struct mlxd_fixture_reader *r = NULL;
    struct mlxd_fixture *f = NULL;
    int rc = reader_open("mlxd_fixture_load", path, &r);
    if (rc < 0) return rc;
    f = calloc(1, sizeof *f);
    if (!f) { rc = mlxd_err(ENOMEM, "mlxd_fixture_load: out of memory"); goto fail; }
    f->header = r->hdr;
    size_t cap = 0;
    for (;;) {
        struct mlxd_fixture_record rec;
        rc = reader_next(r, &rec);
        if (rc < 0) goto fail;
        if (rc == 0) break;
        if (f->count == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            if (ncap > SIZE_MAX / sizeof *f->records) {
                rc = mlxd_err(ENOMEM, "mlxd_fixture_load: %s: too many records", path);
                goto fail;
            }
            void *p = realloc(f->records, ncap * sizeof *f->records);
            if (!p) { rc = mlxd_err(ENOMEM, "mlxd_fixture_load: out of memory"); goto fail; }
            f->records = p;
            cap = ncap;
        }
        f->records[f->count++] = rec;
    }
    mlxd_fixture_close(r);
    *out = f;
    return 0;
fail:
    mlxd_fixture_free(f);
    mlxd_fixture_close(r);
    return rc;
}

void mlxd_fixture_free(struct mlxd_fixture *f)
{
    if (!f) return;
    free(f->records);
    free(f);
}

/* ---- writer --------------------------------------------------------------------------------- */
static int check_header(const struct mlxd_fixture_header *h, const char *fn)
{
    if (h->version < 1 || h->version > MLXD_FIXTURE_VERSION)
        return mlxd_err(EINVAL, "%s: header version %u, expected 1 to %d", fn, h->version, MLXD_FIXTURE_VERSION);
    if (h->version < 2 && h->overflow)
        return mlxd_err(EINVAL, "%s: overflow %" PRIu64 " needs version 2", fn, h->overflow);
    if (h->cqe_size != 64 && h->cqe_size != 128)
        return mlxd_err(EINVAL, "%s: cqe_size %u is neither 64 nor 128", fn, h->cqe_size);
    if (!is_pow2(h->ring_size) || h->ring_size > MLXD_FIXTURE_MAX_RING)
        return mlxd_err(EINVAL, "%s: ring_size %u is not a power of two between 1 and %u", fn,
                        h->ring_size, MLXD_FIXTURE_MAX_RING);
    if (h->cqn > 0xFFFFFF) return mlxd_err(EINVAL, "%s: cqn 0x%x exceeds 24 bits", fn, h->cqn);
    if (strnlen(h->source, MLXD_FIXTURE_SOURCE_MAX) == MLXD_FIXTURE_SOURCE_MAX)
        return mlxd_err(EINVAL, "%s: source is not NUL-terminated", fn);
    const char *s = h->source;
    while (*s == ' ' || *s == '\t') s++;
    if (!*s) return mlxd_err(EINVAL, "%s: source is empty", fn);
    char why[160];
    const char *bad = source_problem(h->source, why, sizeof why);   /* the reader's rule */
    if (bad) return mlxd_err(EINVAL, "%s: source %s", fn, bad);
    return 0;
}

static void wcheck(struct mlxd_fixture_writer *w, int printed)
{
    if (printed < 0 && !w->err) w->err = errno ? errno : EIO;
}

static int writer_start(const char *fn, FILE *f, bool owns, const struct mlxd_fixture_header *h,
                        struct mlxd_fixture_writer **out)
{
    struct mlxd_fixture_writer *w = calloc(1, sizeof *w);
    if (!w) {
        if (owns) fclose(f);
        return mlxd_err(ENOMEM, "%s: out of memory", fn);
    }
    w->f = f;
    w->owns = owns;
    w->cqe_size = h->cqe_size;
    w->overflow_at = -1;
    w->overflow = h->overflow;
    wcheck(w, fprintf(f, MAGIC " %u\n# CQE fixture, format: docs/fixture-format.md\n"
                         "cqe_size %u\nring_size %u\ncqn 0x%06x\nsource %s\n",
                      h->version, h->cqe_size, h->ring_size, h->cqn, h->source));
    if (h->version >= 2 && !w->err) {
        /* a fixed-width value, so that close can write the final count in place */
        wcheck(w, fprintf(f, "overflow "));
        w->overflow_at = ftell(f);
        wcheck(w, fprintf(f, "%-20" PRIu64 "\n", h->overflow));
    }
    if (w->err) {
        int e = w->err;
        if (owns) fclose(f);
        free(w);
        return mlxd_err(e, "%s: writing the header: %s", fn, strerror(e));
    }
    *out = w;
    return 0;
}

int mlxd_fixture_writer_open(const char *path, const struct mlxd_fixture_header *h,
                             struct mlxd_fixture_writer **out)
{
    if (!path || !h || !out) return mlxd_err(EINVAL, "mlxd_fixture_writer_open: NULL argument");
    int rc = check_header(h, "mlxd_fixture_writer_open");
    if (rc < 0) return rc;
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno ? errno : EIO;
        return mlxd_err(e, "mlxd_fixture_writer_open: %s: %s", path, strerror(e));
    }
    return writer_start("mlxd_fixture_writer_open", f, true, h, out);
}

int mlxd_fixture_writer_stream(FILE *f, const struct mlxd_fixture_header *h,
                               struct mlxd_fixture_writer **out)
{
    if (!f || !h || !out) return mlxd_err(EINVAL, "mlxd_fixture_writer_stream: NULL argument");
    int rc = check_header(h, "mlxd_fixture_writer_stream");
    if (rc < 0) return rc;
    return writer_start("mlxd_fixture_writer_stream", f, false, h, out);
}

int mlxd_fixture_write(struct mlxd_fixture_writer *w, const void *cqe, bool has_delay,
                       uint64_t delay_ns)
{
    if (!w || !cqe) return mlxd_err(EINVAL, "mlxd_fixture_write: %s is NULL", w ? "cqe" : "writer");
    if (w->err) return mlxd_err(w->err, "mlxd_fixture_write: earlier write failed: %s", strerror(w->err));
    char buf[24 + 2 * 128 + 2], *p = buf;
    if (has_delay) p += sprintf(p, "+%" PRIu64 "ns ", delay_ns);
    static const char hex[] = "0123456789abcdef";
    const uint8_t *c = cqe;
    for (uint32_t i = 0; i < w->cqe_size; i++) {
        *p++ = hex[c[i] >> 4];
        *p++ = hex[c[i] & 15];
    }
    *p++ = '\n';
    if (fwrite(buf, 1, (size_t)(p - buf), w->f) != (size_t)(p - buf)) {
        w->err = errno ? errno : EIO;
        return mlxd_err(w->err, "mlxd_fixture_write: %s", strerror(w->err));
    }
    return 0;
}

int mlxd_fixture_write_md(struct mlxd_fixture_writer *w, const void *md)
{
    if (!w || !md) return mlxd_err(EINVAL, "mlxd_fixture_write_md: %s is NULL", w ? "md" : "writer");
    if (w->overflow_at < 0) return mlxd_err(EINVAL, "mlxd_fixture_write_md: the header is version 1 (no 'md' lines)");
    if (w->err) return mlxd_err(w->err, "mlxd_fixture_write_md: earlier write failed: %s", strerror(w->err));
    char buf[4 + 256 + 2], *p = buf;
    static const char hex[] = "0123456789abcdef";
    const uint8_t *b = md;
    p += sprintf(p, "md ");
    for (int i = 0; i < 128; i++) { *p++ = hex[b[i] >> 4]; *p++ = hex[b[i] & 15]; }
    *p++ = '\n';
    if (fwrite(buf, 1, (size_t)(p - buf), w->f) != (size_t)(p - buf)) {
        w->err = errno ? errno : EIO;
        return mlxd_err(w->err, "mlxd_fixture_write_md: %s", strerror(w->err));
    }
    return 0;
}

int mlxd_fixture_comment(struct mlxd_fixture_writer *w, const char *text)
{
    if (!w || !text) return mlxd_err(EINVAL, "mlxd_fixture_comment: %s is NULL", w ? "text" : "writer");
    if (strpbrk(text, "\r\n")) return mlxd_err(EINVAL, "mlxd_fixture_comment: text contains a newline");
    if (w->err) return mlxd_err(w->err, "mlxd_fixture_comment: earlier write failed: %s", strerror(w->err));
    wcheck(w, fprintf(w->f, "# %s\n", text));
    return w->err ? mlxd_err(w->err, "mlxd_fixture_comment: %s", strerror(w->err)) : 0;
}

int mlxd_fixture_writer_set_overflow(struct mlxd_fixture_writer *w, uint64_t n)
{
    if (!w) return mlxd_err(EINVAL, "mlxd_fixture_writer_set_overflow: writer is NULL");
    if (w->overflow_at < 0)
        return mlxd_err(EINVAL, "mlxd_fixture_writer_set_overflow: the header is version 1 (no overflow key)");
    w->overflow = n;
    return 0;
}

int mlxd_fixture_writer_close(struct mlxd_fixture_writer *w)
{
    if (!w) return 0;
    int e = w->err;
    if (!e && w->overflow_at >= 0 && w->overflow) {
        /* back to the remembered end, not SEEK_END: after a write behind the end, glibc's
         * open_memstream takes the write position for the end and the records would be cut */
        long end = ftell(w->f);
        if (end < 0 || fseek(w->f, w->overflow_at, SEEK_SET) != 0 ||
            fprintf(w->f, "%-20" PRIu64, w->overflow) < 0 || fseek(w->f, end, SEEK_SET) != 0)
            e = errno ? errno : EIO;
    }
    if (fflush(w->f) != 0 && !e) e = errno ? errno : EIO;
    if (ferror(w->f) && !e) e = EIO;
    if (w->owns && fclose(w->f) != 0 && !e) e = errno ? errno : EIO;
    free(w);
    return e ? mlxd_err(e, "mlxd_fixture_writer_close: %s", strerror(e)) : 0;
}
