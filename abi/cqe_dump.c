/* cqe_dump.c: finds and parses the mlx5 CQEs in text pasted from logs (mlxd_cqe_dump.h).
 *
 * The input is read line by line.  Each line is classified after its dmesg-style prefixes
 * ("[  408.380187] ", "[  +0.000001] ", "<4>") are removed:
 *   header   "got completion with error", "dump error cqe", "Error cqe on cqn ...",
 *            "MLX5 Error CQE: ... len=N", "WQE DUMP: ...", and "WC error: N" (a hint only);
 *   row      "XXXXXXXX: b0 b1 ... b15" (8 hex digits, a colon, bytes; optional ASCII column);
 *   words    4 words of 8 hex digits (4 lines make one CQE: rdma-core / old kernel);
 *   plain    128 hex digits (one CQE);
 *   comment  a line starting with '#' (provenance lines of fixtures/cqe-dumps/): skipped;
 *   other    any other log line: ignored, except that it ends a run of word lines.
 * Rows carry their offset, so rows belong to the CQE (or WQE) being built until an offset goes
 * back; word lines carry none, so a run of word lines must be a multiple of 4 or it is refused.
 * Repairs are made only when they are unambiguous and are always reported (see mlxd_cqe_dump.h
 * and docs/cqe-tool.md). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cqe_status.h"
#include "mlxd_abi.h"
#include "mlxd_cqe.h"
#include "mlxd_cqe_dump.h"
#include "mlxd_error.h"
#include "mlxd_names.h"

#define PENDING_CUR  (-2)   /* diag belongs to the CQE being built */
#define MAX_ROWS     8      /* 128 bytes of CQE */
#define MAX_WQE_ROWS 16     /* 256 bytes of WQE kept */

/* A word line's warning is kept here, not in the diag list, until the run is grouped into CQEs:
 * it is then emitted with its CQE, so that no pass over the diag list is needed per CQE (which
 * made a long run of word lines quadratic). */
enum word_warn { WW_NONE = 0, WW_GLUED, WW_AFTER };

struct word_line {
    unsigned line;
    uint8_t  b[16];
    bool     bad;           /* not exactly 4 words: the run is refused */
    enum word_warn warn;
    unsigned wrapped;       /* the continuation line joined to this one (0: none) */
    char     text[31];      /* the text the warning quotes (at most 30 characters) */
};

struct cur {
    bool     active;
    bool     refused;
    enum mlxd_dump_format fmt;
    unsigned first_line, last_line, hdr_line;
    const char *hdr_what;   /* the header's words, for messages */
    uint8_t  bytes[128];
    unsigned rowmask;       /* bit i: row at offset 16*i seen */
    unsigned row_line[MAX_ROWS];
    int      last_off;
    unsigned declared_len;  /* from "len=N" (DPDK), else 0 */
    size_t   diag_start;
    /* mlx5e header */
    bool     has_mlx5e, mlx5e_cont;
    uint32_t cqn, ci, qn, opcode, syndrome, vendor;
    bool     have_opcode, have_syndrome, have_vendor, have_cqn, have_ci, have_qn;
    /* "WC error: N" seen just before */
    int      wc_hint;
    unsigned wc_line;
    /* WQE dump */
    bool     in_wqe, has_wqe;
    uint8_t  wqe[256];
    unsigned wqe_rowmask;
    int      wqe_last_off;
    unsigned wqe_declared, wqe_index, wq_size, wqe_line, wqe_last_line;
};

struct parser {
    struct mlxd_dump_result *res;
    size_t cqe_cap, diag_cap;
    int    oom;
    struct cur cur;
    struct word_line *run;
    size_t nrun, run_cap;
    int    pending_wc;      /* "WC error: N" not yet attached (-1 none) */
    unsigned pending_wc_line;
    size_t status_cap;
    unsigned joined;        /* the line being processed is joined with this continuation line */
    unsigned joined_n1, joined_n2;   /* bytes (or words) on each of the two lines */
};

/* ---- result building ----------------------------------------------------------------------- */
static void diag(struct parser *p, unsigned line, enum mlxd_dump_severity sev, int cqe,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void diag(struct parser *p, unsigned line, enum mlxd_dump_severity sev, int cqe,
                 const char *fmt, ...)
{
    struct mlxd_dump_result *r = p->res;
    if (p->oom) return;
    if (r->ndiags == p->diag_cap) {
        size_t n = p->diag_cap ? p->diag_cap * 2 : 16;
        if (n > SIZE_MAX / 2 / sizeof *r->diags) { p->oom = 1; return; }
        void *q = realloc(r->diags, n * sizeof *r->diags);
        if (!q) { p->oom = 1; return; }
        r->diags = q;
        p->diag_cap = n;
    }
    struct mlxd_dump_diag *d = &r->diags[r->ndiags++];
    d->line = line;
    d->severity = sev;
    d->cqe = cqe;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
}

/* Gives the diags of the CQE being built (from start on) the index idx (-1: it was refused).
 * start is where that CQE began, so each diag is visited by one call only: linear overall. */
static void settle_diags(struct parser *p, size_t start, int idx, unsigned *nwarn)
{
    for (size_t i = start; i < p->res->ndiags; i++) {
        struct mlxd_dump_diag *d = &p->res->diags[i];
        if (d->cqe != PENDING_CUR) continue;
        d->cqe = idx;
        if (nwarn && d->severity == MLXD_DUMP_WARNING) (*nwarn)++;
    }
}

static struct mlxd_dump_cqe *push_cqe(struct parser *p)
{
    struct mlxd_dump_result *r = p->res;
    if (p->oom) return NULL;
    if (r->ncqes == p->cqe_cap) {
        size_t n = p->cqe_cap ? p->cqe_cap * 2 : 4;
        if (n > SIZE_MAX / 2 / sizeof *r->cqes) { p->oom = 1; return NULL; }
        void *q = realloc(r->cqes, n * sizeof *r->cqes);
        if (!q) { p->oom = 1; return NULL; }
        r->cqes = q;
        p->cqe_cap = n;
    }
    struct mlxd_dump_cqe *c = &r->cqes[r->ncqes++];
    memset(c, 0, sizeof *c);
    return c;
}

/* ---- lexical helpers ----------------------------------------------------------------------- */
static int hexv(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (hexv((unsigned char)s[i]) < 0) return false;
    return n > 0;
}
static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* Case-sensitive search bounded to a NUL-terminated line. */
static const char *find(const char *s, const char *needle) { return strstr(s, needle); }

/* Value of "key 0xHEX" / "key: N" / "key=N" at a word boundary; base 16 with 0x, else 10.
 * skip_after_vendor: ignore occurrences of key preceded by "vendor ". */
static bool kv(const char *s, const char *key, bool skip_after_vendor, uint32_t *out)
{
    size_t kl = strlen(key);
    for (const char *q = s; (q = strstr(q, key)) != NULL; q += kl) {
        if (q > s && (isalnum((unsigned char)q[-1]) || q[-1] == '_')) continue;
        if (skip_after_vendor && q - s >= 7 && !strncmp(q - 7, "vendor ", 7)) continue;
        const char *v = q + kl;
        while (*v == ' ' || *v == ':' || *v == '=') v++;
        unsigned long long x = 0;
        int base = 10, nd = 0;
        if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) { base = 16; v += 2; }
        for (; *v; v++, nd++) {
            int d = hexv((unsigned char)*v);
            if (d < 0 || (base == 10 && d > 9)) break;
            x = x * (unsigned)base + (unsigned)d;
            if (x > 0xFFFFFFFFull) return false;
        }
        if (!nd) continue;
        *out = (uint32_t)x;
        return true;
    }
    return false;
}

/* Skips leading blanks and dmesg/syslog decorations: "[ 408.380187]", "[  +0.000001]",
 * "[Mon Nov 19 ...]", "<4>". */
static const char *strip_prefix(const char *s)
{
    for (;;) {
        while (is_space(*s)) s++;
        if (*s == '[') {
            const char *e = strchr(s, ']');
            if (!e || e - s > 64) return s;
            bool stamp = true;   /* only digits, blanks, '.', '+', ':', '-', and letters of dates */
            for (const char *q = s + 1; q < e; q++)
                if (!(isalnum((unsigned char)*q) || is_space(*q) || *q == '.' || *q == '+' ||
                      *q == ':' || *q == '-')) { stamp = false; break; }
            if (!stamp) return s;
            s = e + 1;
            continue;
        }
        if (*s == '<' && isdigit((unsigned char)s[1]) && s[2] == '>') { s += 3; continue; }
        if (*s == '>') { s++; continue; }   /* e-mail quoting: "> ", "> > ", ">>" */
        return s;
    }
}

/* What DPDK and print_hex_dump show for a byte in their ASCII column. */
static char ascii_of(uint8_t b) { return b >= 0x20 && b < 0x7f ? (char)b : '.'; }

/* ---- the CQE being built ------------------------------------------------------------------- */
static void cur_start(struct parser *p, enum mlxd_dump_format fmt, unsigned line, const char *what)
{
    memset(&p->cur, 0, sizeof p->cur);
    struct cur *c = &p->cur;
    c->active = true;
    c->fmt = fmt;
    c->first_line = c->last_line = c->hdr_line = line;
    c->hdr_what = what;
    c->last_off = -1;
    c->wqe_last_off = -1;
    c->diag_start = p->res->ndiags;
    c->wc_hint = -1;
    /* a "WC error: N" line belongs to the dump printed right after it (mlx5_ib prints the two
     * lines together); older hints are dropped */
    if (p->pending_wc >= 0 && line - p->pending_wc_line <= 2) {
        c->wc_hint = p->pending_wc;
        c->wc_line = p->pending_wc_line;
    }
    p->pending_wc = -1;
}

static bool cur_has_data(const struct cur *c) { return c->rowmask != 0; }

static void refuse(struct parser *p, unsigned line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(struct parser *p, unsigned line, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!p->cur.refused)
        diag(p, line, MLXD_DUMP_ERROR, PENDING_CUR, "%s; CQE refused", msg);
    else
        diag(p, line, MLXD_DUMP_ERROR, PENDING_CUR, "%s", msg);
    p->cur.refused = true;
}

/* Checks a decoded CQE against what the log said about it; adds notes and warnings. */
static void cross_check(struct parser *p, const struct cur *c, const uint8_t *cqe64)
{
    uint8_t op = mlxd_cqe_opcode(cqe64);
    bool err = mlxd_cqe_is_error(cqe64);
    if (op == MLXD_CQE_INVALID)
        diag(p, c->last_line, MLXD_DUMP_WARNING, PENDING_CUR,
             "opcode 0xf (INVALID) is never written by hardware: not a completed CQE, or a damaged paste");
    if (c->has_mlx5e) {
        if (c->have_opcode && c->opcode != op)
            diag(p, c->hdr_line, MLXD_DUMP_WARNING, PENDING_CUR,
                 "header says opcode 0x%x but byte 63 gives 0x%x: a row may be damaged", c->opcode, op);
        if (c->have_syndrome && err && c->syndrome != mlxd_cqe_syndrome(cqe64))
            diag(p, c->hdr_line, MLXD_DUMP_WARNING, PENDING_CUR,
                 "header says syndrome 0x%x but byte 55 is 0x%02x: a row may be damaged",
                 c->syndrome, mlxd_cqe_syndrome(cqe64));
        if (c->have_vendor && err && c->vendor != mlxd_cqe_vendor_syndrome(cqe64))
            diag(p, c->hdr_line, MLXD_DUMP_WARNING, PENDING_CUR,
                 "header says vendor syndrome 0x%x but byte 54 is 0x%02x: a row may be damaged",
                 c->vendor, mlxd_cqe_vendor_syndrome(cqe64));
        if (c->have_qn && c->qn != mlxd_cqe_qpn(cqe64))
            diag(p, c->hdr_line, MLXD_DUMP_NOTE, PENDING_CUR,
                 "header qn 0x%x differs from the CQE's QPN 0x%06x (mlx5e prints its own queue "
                 "number; an RQ object's CQEs may carry QPN 0)", c->qn, mlxd_cqe_qpn(cqe64));
    }
    if (c->wc_hint >= 0 && err) {
        int st = mlxd_syndrome_to_wc_status(mlxd_cqe_syndrome(cqe64));
        if (st != c->wc_hint)
            diag(p, c->wc_line, MLXD_DUMP_WARNING, PENDING_CUR,
                 "log says WC error %d but syndrome 0x%02x maps to %d: the dump may not belong to "
                 "this message, or a row is damaged", c->wc_hint, mlxd_cqe_syndrome(cqe64), st);
    }
}

/* The WQE dump that came with the current CQE (c64: its 64-byte CQE): missing rows zeroed (with a
 * warning), no ctrl segment: not decoded; a ctrl segment that disagrees with an error CQE: a note. */
static void finish_wqe(struct parser *p, struct cur *c, const uint8_t *c64)
{
    unsigned wl = c->wqe_declared ? c->wqe_declared : 0;
    unsigned maxrow = 0;
    for (unsigned i = 0; i < MAX_WQE_ROWS; i++)
        if (c->wqe_rowmask & (1u << i)) maxrow = i + 1;
    if (!wl || wl > 256) wl = maxrow * 16;
    if (wl > 256) wl = 256;
    for (unsigned i = 0; i < wl / 16; i++)
        if (!(c->wqe_rowmask & (1u << i))) {
            memset(c->wqe + i * 16, 0, 16);
            diag(p, c->wqe_last_line, MLXD_DUMP_WARNING, PENDING_CUR,
                 "WQE dump row %08x is missing; assumed zero", i * 16);
        }
    if (!(c->wqe_rowmask & 1u)) {
        diag(p, c->wqe_line, MLXD_DUMP_WARNING, PENDING_CUR,
             "WQE dump has no row 00000000 (the ctrl segment); WQE not decoded");
        c->has_wqe = false;
    } else {
        const uint8_t *w = c->wqe;
        unsigned wop = w[3], widx = (unsigned)w[1] << 8 | w[2];
        uint32_t wqpn = (uint32_t)w[4] << 16 | (uint32_t)w[5] << 8 | w[6];
        if (mlxd_cqe_is_error(c64) &&
            (wop != mlxd_cqe_err_wqe_opcode(c64) || widx != mlxd_cqe_wqe_counter(c64) ||
             wqpn != mlxd_cqe_err_qpn(c64)))
            diag(p, c->wqe_line, MLXD_DUMP_NOTE, PENDING_CUR,
                 "the WQE's ctrl segment disagrees with the CQE (opcode 0x%02x vs 0x%02x, "
                 "index 0x%04x vs 0x%04x, QPN 0x%06x vs 0x%06x): the WQE in the ring was "
                 "overwritten or corrupted", wop, mlxd_cqe_err_wqe_opcode(c64), widx,
                 mlxd_cqe_wqe_counter(c64), wqpn, mlxd_cqe_err_qpn(c64));
        c->wqe_declared = wl;
    }
}

static void finish_cur(struct parser *p)
{
    struct cur *c = &p->cur;
    if (!c->active) return;
    c->active = false;
    if (c->refused) { settle_diags(p, c->diag_start, -1, NULL); return; }
    if (!cur_has_data(c)) {
        diag(p, c->hdr_line, MLXD_DUMP_ERROR, PENDING_CUR,
             "'%s' is not followed by a CQE dump", c->hdr_what ? c->hdr_what : "header");
        settle_diags(p, c->diag_start, -1, NULL);
        return;
    }
    unsigned size = (c->declared_len == 128 || (c->rowmask & 0xF0)) ? 128 : 64;
    unsigned nrows = size / 16, last = nrows - 1;
    if (!(c->rowmask & (1u << last))) {
        diag(p, c->last_line, MLXD_DUMP_ERROR, PENDING_CUR,
             "lines %u-%u: the CQE has no row %08x (bytes %u-%u hold the opcode, syndrome, QPN "
             "and wqe_counter); CQE refused", c->first_line, c->last_line, last * 16,
             last * 16, last * 16 + 15);
        settle_diags(p, c->diag_start, -1, NULL);
        return;
    }
    for (unsigned i = 0; i < nrows; i++)
        if (!(c->rowmask & (1u << i))) {
            memset(c->bytes + i * 16, 0, 16);
            diag(p, c->last_line, MLXD_DUMP_WARNING, PENDING_CUR,
                 "lines %u-%u: row %08x is missing; assumed bytes %u-%u are zero",
                 c->first_line, c->last_line, i * 16, i * 16, i * 16 + 15);
        }
    const uint8_t *c64 = c->bytes + (size - 64);
    cross_check(p, c, c64);
    if (c->fmt == MLXD_DUMP_DPDK && size == 64 && !memcmp(c->bytes + 1, "seen", 4))
        diag(p, c->first_line, MLXD_DUMP_NOTE, PENDING_CUR,
             "bytes 1-4 read \"seen\": DPDK's mlx5 PMD wrote them before dumping (reserved bytes, "
             "not hardware data)");
    if (c->has_wqe) finish_wqe(p, c, c64);
    struct mlxd_dump_cqe *o = push_cqe(p);
    if (!o) return;
    memcpy(o->bytes, c->bytes, size);
    o->size = size;
    o->format = c->fmt;
    o->first_line = c->first_line;
    o->last_line = c->has_wqe && c->wqe_last_line > c->last_line ? c->wqe_last_line : c->last_line;
    o->has_mlx5e_hdr = c->has_mlx5e;
    o->hdr_cqn = c->cqn; o->hdr_ci = c->ci; o->hdr_qn = c->qn;
    o->hdr_opcode = c->opcode; o->hdr_syndrome = c->syndrome; o->hdr_vendor_syndrome = c->vendor;
    o->has_wqe = c->has_wqe;
    if (c->has_wqe) {
        memcpy(o->wqe, c->wqe, sizeof o->wqe);
        o->wqe_len = c->wqe_declared;
        o->wqe_index = c->wqe_index;
        o->wq_size = c->wq_size;
    }
    settle_diags(p, c->diag_start, (int)(p->res->ncqes - 1), &o->nwarnings);
}

/* ---- word lines ---------------------------------------------------------------------------- */
/* Emits the warning remembered for a word line, for the CQE cqe (PENDING_CUR or -1). */
static void word_line_diag(struct parser *p, const struct word_line *w, int cqe)
{
    if (w->wrapped)
        diag(p, w->line, MLXD_DUMP_WARNING, cqe,
             "lines %u-%u: a word line wrapped onto the next line (by e-mail or a terminal) was "
             "joined", w->line, w->wrapped);
    if (w->warn == WW_GLUED)
        diag(p, w->line, MLXD_DUMP_WARNING, cqe,
             "text glued to the 4th word ('%s'); took the first 8 hex digits as the word and "
             "ignored the rest", w->text);
    else if (w->warn == WW_AFTER)
        diag(p, w->line, MLXD_DUMP_WARNING, cqe, "ignored text after the 4 words ('%s')", w->text);
}

/* Refuses a run of n word lines that cannot be grouped into CQEs. */
static void refuse_run(struct parser *p, size_t n, size_t bad, bool hdr)
{
    for (size_t i = 0; i < n; i++) word_line_diag(p, &p->run[i], -1);
    if (bad < n)
        diag(p, p->run[bad].line, MLXD_DUMP_ERROR, -1,
             "lines %u-%u: line %u does not have exactly 4 words of 8 hex digits, so the "
             "word lines cannot be assigned to CQEs; refused", p->run[0].line,
             p->run[n - 1].line, p->run[bad].line);
    else
        diag(p, p->run[n - 1].line, MLXD_DUMP_ERROR, -1,
             "lines %u-%u: %zu lines of words is not a multiple of 4 (one CQE is 4 lines): a "
             "line is missing or extra and the words cannot be assigned to CQEs; refused",
             p->run[0].line, p->run[n - 1].line, n);
    if (hdr) { p->cur.refused = true; finish_cur(p); }
}

static void flush_run(struct parser *p)
{
    size_t n = p->nrun;
    if (!n) return;
    p->nrun = 0;
    struct cur *c = &p->cur;
    bool hdr = c->active && !cur_has_data(c) && !c->refused;
    size_t bad = n;
    for (size_t i = 0; i < n; i++)
        if (p->run[i].bad) { bad = i; break; }
    if (bad < n || n % 4) { refuse_run(p, n, bad, hdr); return; }
    for (size_t g = 0; g < n; g += 4) {
        if (!(g == 0 && hdr)) {
            finish_cur(p);
            cur_start(p, MLXD_DUMP_WORDS, p->run[g].line, NULL);
        } else {
            c->fmt = c->fmt == MLXD_DUMP_MLX5E || c->fmt == MLXD_DUMP_DPDK ? c->fmt : MLXD_DUMP_WORDS;
        }
        for (int k = 0; k < 4; k++) {
            word_line_diag(p, &p->run[g + k], PENDING_CUR);
            memcpy(p->cur.bytes + 16 * k, p->run[g + k].b, 16);
        }
        p->cur.rowmask = 0xF;
        p->cur.last_off = 48;
        p->cur.last_line = p->run[g + 3].line;
        finish_cur(p);
    }
}

/* Tries s as a line of words.  Returns 0 if it is not one, 1 if it was taken. */
static int try_words(struct parser *p, const char *s, unsigned line)
{
    /* tokens */
    const char *tok[12];
    size_t len[12];
    int nt = 0;
    for (const char *q = s; *q && nt < 12;) {
        while (is_space(*q)) q++;
        if (!*q) break;
        tok[nt] = q;
        while (*q && !is_space(*q)) q++;
        len[nt] = (size_t)(q - tok[nt]);
        nt++;
    }
    /* the first 8-hex-digit token; only log prefixes ending in ':' or ']' may come before it */
    int first = -1;
    for (int i = 0; i < nt; i++)
        if (len[i] == 8 && all_hex(tok[i], 8)) { first = i; break; }
    if (first < 0) return 0;
    for (int i = 0; i < first; i++)
        if (tok[i][len[i] - 1] != ':' && tok[i][len[i] - 1] != ']') return 0;
    int nw = 0;
    bool glued = false;
    for (int i = first; i < nt; i++) {
        if (len[i] == 8 && all_hex(tok[i], 8)) { nw++; continue; }
        /* "0dd0c1d3mlx5: ..." : a log line glued to the 4th word */
        if (nw == 3 && len[i] > 8 && all_hex(tok[i], 8) && !isxdigit((unsigned char)tok[i][8])) {
            nw++;
            glued = true;
        }
        break;
    }
    if (nw < 2) return 0;           /* one 8-digit number in a log line is not a dump */
    int after = first + nw;
    if (p->cur.active && cur_has_data(&p->cur)) finish_cur(p);
    if (p->nrun == p->run_cap) {
        size_t ncap = p->run_cap ? p->run_cap * 2 : 16;
        if (ncap > SIZE_MAX / 2 / sizeof *p->run) { p->oom = 1; return 1; }
        void *q = realloc(p->run, ncap * sizeof *p->run);
        if (!q) { p->oom = 1; return 1; }
        p->run = q;
        p->run_cap = ncap;
    }
    struct word_line *w = &p->run[p->nrun++];
    memset(w, 0, sizeof *w);
    w->line = line;
    w->wrapped = p->joined;
    if (nw != 4) { w->bad = true; return 1; }
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++)
            w->b[k * 4 + j] = (uint8_t)(hexv((unsigned char)tok[first + k][2 * j]) << 4 |
                                        hexv((unsigned char)tok[first + k][2 * j + 1]));
    if (glued) {
        w->warn = WW_GLUED;
        snprintf(w->text, sizeof w->text, "%s", tok[first + 3] + 8);
    } else if (after < nt) {
        w->warn = WW_AFTER;
        snprintf(w->text, sizeof w->text, "%s", tok[after]);
    }
    return 1;
}

/* ---- rows ---------------------------------------------------------------------------------- */
/* The hex bytes at the start of a row (up to end): n of them into b; rest: the first text that
 * is not a byte (NULL: none); glued: that text was glued to the last byte, whose 2 hex digits
 * were taken; after16: where the 16th byte ended (NULL: fewer). */
struct row_scan { int n; const char *rest, *after16; bool glued; };

/* Returns 0, or -1 for more than 64 bytes (message in why). */
static int row_scan(const char *s, const char *end, uint8_t *b, struct row_scan *r, char *why, size_t whylen)
{
    *r = (struct row_scan){ 0 };
    const char *q = s;
    while (q < end) {
        while (q < end && is_space(*q)) q++;
        if (q >= end) break;
        const char *t = q;
        while (q < end && !is_space(*q)) q++;
        size_t tl = (size_t)(q - t);
        if (tl == 2 && all_hex(t, 2)) {
            if (r->n >= 64) { snprintf(why, whylen, "row has more than 64 bytes"); return -1; }
            b[r->n++] = (uint8_t)(hexv((unsigned char)t[0]) << 4 | hexv((unsigned char)t[1]));
            if (r->n == 16) r->after16 = q;
            continue;
        }
        if (tl > 2 && all_hex(t, 2) && !isxdigit((unsigned char)t[2]) && r->n >= 15) {
            b[r->n++] = (uint8_t)(hexv((unsigned char)t[0]) << 4 | hexv((unsigned char)t[1]));
            if (r->n == 16) r->after16 = t + 2;
            r->rest = t + 2;
            r->glued = true;
            break;
        }
        r->rest = t;
        break;
    }
    return 0;
}

/* An ASCII column without '|' (print_hex_dump ascii=true): the text a, trimmed, is exactly the
 * rendering of the 16 bytes b. */
static bool bare_ascii_column(const char *a, const uint8_t *b)
{
    while (is_space(*a)) a++;
    size_t al = strlen(a);
    while (al && is_space(a[al - 1])) al--;
    if (al != 16) return false;
    for (int i = 0; i < 16; i++)
        if (a[i] != ascii_of(b[i])) return false;
    return true;
}

/* The ASCII column after '|' (a: the text after it) against the 16 bytes b: a warning when
 * they differ. */
static void check_ascii_column(struct parser *p, unsigned line, int pend, const char *a, const uint8_t *b)
{
    if (*a == ' ') a++;
    size_t al = strlen(a);
    while (al && is_space(a[al - 1])) al--;
    bool same = al >= 16;
    for (int i = 0; same && i < 16; i++)
        if (a[i] != ascii_of(b[i]) && !(a[i] == ' ' && b[i] == 0x20)) same = false;
    if (!same)
        diag(p, line, MLXD_DUMP_WARNING, pend,
             "the ASCII column does not match the bytes; a byte may be damaged (the bytes "
             "were used)");
}

/* Parses the bytes of one row (text after "XXXXXXXX:").  Returns the number of bytes (>= 0,
 * stored in b, at most 64) or -1 when the row must be refused (message in why). */
static int row_bytes(struct parser *p, const char *s, unsigned line, uint8_t *b, char *why,
                     size_t whylen, int pend)
{
    const char *bar = strchr(s, '|');
    struct row_scan r;
    if (row_scan(s, bar ? bar : s + strlen(s), b, &r, why, whylen) < 0) return -1;
    int n = r.n;
    if (!bar && n >= 16 && r.after16 && bare_ascii_column(r.after16, b)) {
        n = 16;
        r.rest = NULL;
        r.glued = false;
    }
    if (r.rest && *r.rest) {
        if (n < 16) {
            snprintf(why, whylen, "'%.20s' after %d bytes is not a byte", r.rest, n);
            return -1;
        }
        diag(p, line, MLXD_DUMP_WARNING, pend,
             r.glued ? "text glued to the last byte ('%.30s'); took its first 2 hex digits as the "
                       "byte and ignored the rest"
                     : "ignored text after the bytes ('%.30s')", r.rest);
    }
    if (n > 16) {
        bool same = true;
        for (int i = 1; i < n; i++)
            if (b[i] != b[0]) { same = false; break; }
        if (!same) {
            snprintf(why, whylen, "row has %d bytes, expected 16, and they differ: cannot tell "
                                  "which is extra", n);
            return -1;
        }
        diag(p, line, MLXD_DUMP_WARNING, pend,
             "row has %d bytes, all 0x%02x: assumed a paste artifact duplicated %d of them and "
             "kept 16", n, b[0], n - 16);
        n = 16;
    }
    if (n < 16) {
        snprintf(why, whylen, "row has %d bytes, expected 16", n);
        return -1;
    }
    if (bar) check_ascii_column(p, line, pend, bar + 1, b);
    return n;
}

/* Locates "XXXXXXXX:" in s: returns its position or NULL. */
static const char *find_offset(const char *s)
{
    for (const char *c = strchr(s, ':'); c; c = strchr(c + 1, ':')) {
        if (c - s < 8 || !all_hex(c - 8, 8)) continue;
        if (c - s > 8 && isxdigit((unsigned char)c[-9])) continue;   /* more than 8 digits */
        if (c[1] != ' ' && c[1] != '\t') continue;
        const char *t = c + 1;
        while (is_space(*t)) t++;
        if (!(isxdigit((unsigned char)t[0]) && isxdigit((unsigned char)t[1]))) continue;
        return c - 8;
    }
    return NULL;
}

static void process_line(struct parser *p, const char *s, unsigned line, int depth);

static void take_row(struct parser *p, const char *off_at, unsigned line, const char *glued, size_t col)
{
    unsigned off = 0;
    for (int i = 0; i < 8; i++) off = off << 4 | (unsigned)hexv((unsigned char)off_at[i]);
    const char *data = off_at + 9;
    flush_run(p);
    struct cur *c = &p->cur;
    uint8_t b[64];
    char why[160];

    if (c->active && c->in_wqe) {
        bool restart = (off == 0 && c->wqe_rowmask) || (int)off <= c->wqe_last_off;
        if (!restart) {
            if (glued)
                diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR,
                     "text '%.30s' is glued before the row at column %zu; ignored it", glued, col);
            int n = row_bytes(p, data, line, b, why, sizeof why, PENDING_CUR);
            if (n < 0) {
                diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR, "WQE dump row: %s; row ignored", why);
                return;
            }
            if (off % 16) {
                diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR,
                     "WQE dump row offset %08x is not a multiple of 16; row ignored", off);
                return;
            }
            if (off / 16 < MAX_WQE_ROWS) {
                memcpy(c->wqe + off, b, 16);
                c->wqe_rowmask |= 1u << (off / 16);
            }
            c->wqe_last_off = (int)off;
            c->wqe_last_line = line;
            c->has_wqe = true;
            return;
        }
        finish_cur(p);   /* rows of a new CQE */
    }
    if (c->active && !c->refused && cur_has_data(c) && (off == 0 || (int)off <= c->last_off))
        finish_cur(p);
    if (c->active && c->refused && (off == 0 || (int)off <= c->last_off) && c->rowmask)
        finish_cur(p);
    if (!c->active) cur_start(p, MLXD_DUMP_HEXROWS, line, NULL);
    else if (c->fmt == MLXD_DUMP_WORDS && !cur_has_data(c)) c->fmt = MLXD_DUMP_HEXROWS;
    c->last_line = line;
    if (p->joined)
        diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR,
             "lines %u-%u: row %08x wrapped after %u bytes onto the next line (by e-mail or a "
             "terminal); joined the %u bytes there", line, p->joined, off, p->joined_n1, p->joined_n2);
    if (glued)
        diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR,
             "text '%.30s' is glued before the row at column %zu; ignored it", glued, col);
    int n = row_bytes(p, data, line, b, why, sizeof why, PENDING_CUR);
    if (c->refused) { c->last_off = (int)off; c->rowmask |= 1; return; }
    if (n < 0) { refuse(p, line, "row %08x: %s", off, why); c->last_off = (int)off; c->rowmask |= 1; return; }
    unsigned lim = c->declared_len ? c->declared_len : 128;
    if (off % 16 || off + 16 > lim) {
        refuse(p, line, "row offset %08x is not a multiple of 16 below %u", off, lim);
        c->last_off = (int)off;
        c->rowmask |= 1;
        return;
    }
    if (c->rowmask & (1u << (off / 16))) {
        refuse(p, line, "row %08x appears twice", off);
        return;
    }
    memcpy(c->bytes + off, b, 16);
    c->rowmask |= 1u << (off / 16);
    c->row_line[off / 16] = line;
    c->last_off = (int)off;
}

/* ---- headers ------------------------------------------------------------------------------- */
static void new_header(struct parser *p, enum mlxd_dump_format fmt, unsigned line, const char *what)
{
    flush_run(p);
    finish_cur(p);
    cur_start(p, fmt, line, what);
}

/* Handles the text after a header marker on the same line. */
static void header_rest(struct parser *p, const char *rest, unsigned line, int depth)
{
    while (*rest == ':' || is_space(*rest)) rest++;
    if (!*rest || depth > 2) return;
    diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR,
         "text follows the header on the same line; read it as the next line");
    process_line(p, rest, line, depth + 1);
}

static void mlx5e_fields(struct cur *c, const char *s)
{
    uint32_t v;
    if (kv(s, "cqn", false, &v)) { c->cqn = v; c->have_cqn = true; }
    if (kv(s, "ci", false, &v)) { c->ci = v; c->have_ci = true; }
    if (kv(s, "qn", false, &v)) { c->qn = v; c->have_qn = true; }
    if (kv(s, "opcode", false, &v)) { c->opcode = v; c->have_opcode = true; }
    if (kv(s, "syndrome", true, &v)) { c->syndrome = v; c->have_syndrome = true; }
    if (kv(s, "vendor syndrome", false, &v)) { c->vendor = v; c->have_vendor = true; }
}

/* Records a status-only line. */
static void push_status(struct parser *p, const struct mlxd_dump_status *st)
{
    struct mlxd_dump_result *r = p->res;
    if (p->oom) return;
    if (r->nstatuses == p->status_cap) {
        size_t n = p->status_cap ? p->status_cap * 2 : 4;
        if (n > SIZE_MAX / 2 / sizeof *r->statuses) { p->oom = 1; return; }
        void *q = realloc(r->statuses, n * sizeof *r->statuses);
        if (!q) { p->oom = 1; return; }
        r->statuses = q;
        p->status_cap = n;
    }
    r->statuses[r->nstatuses++] = *st;
}

/* One whole CQE given on one line (plain hex, a fixture record): size 64 or 128 bytes. */
static void take_whole_cqe(struct parser *p, const uint8_t *b, unsigned size,
                           enum mlxd_dump_format fmt, unsigned line)
{
    flush_run(p);
    struct cur *c = &p->cur;
    if (!(c->active && !cur_has_data(c) && !c->refused && !c->in_wqe)) {
        finish_cur(p);
        cur_start(p, fmt, line, NULL);
    } else if (c->fmt == MLXD_DUMP_WORDS) {
        c->fmt = fmt;
    }
    memcpy(c->bytes, b, size);
    c->rowmask = size == 128 ? 0xFF : 0xF;
    c->last_off = (int)size - 16;
    c->last_line = line;
    finish_cur(p);
}

/* A line of the project's CQE fixture format (docs/fixture-format.md): "[+DELAY] HEX [# comment]",
 * HEX 128 or 256 digits, blanks allowed between them.  Returns 1 when taken (decoded or refused
 * with an error naming the line), 0 when the line is not one. */
static int try_fixture_record(struct parser *p, const char *s, unsigned line)
{
    const char *t = s;
    bool delay = false;
    if (*t == '+') {
        t++;
        if (!isdigit((unsigned char)*t)) return 0;
        while (isdigit((unsigned char)*t)) t++;
        if ((t[0] == 'n' || t[0] == 'u' || t[0] == 'm') && t[1] == 's') t += 2;
        else if (t[0] == 's') t++;
        else return 0;
        if (!is_space(*t)) return 0;
        delay = true;
    }
    const char *hash = strchr(t, '#');
    const char *end = hash ? hash : t + strlen(t);
    uint8_t b[128];
    size_t n = 0;
    for (const char *q = t; q < end; q++) {
        if (is_space(*q)) continue;
        int d = hexv((unsigned char)*q);
        if (d < 0) return 0;
        if (n < 256) b[n / 2] = (uint8_t)(n & 1 ? b[n / 2] | d : d << 4);
        n++;
    }
    if (n != 128 && n != 256) {
        if (!(delay || (hash && n > 64))) return 0;
        flush_run(p);
        diag(p, line, MLXD_DUMP_ERROR, -1,
             "fixture record has %zu hex digits; a CQE record has 128 (64 bytes) or 256 (128 "
             "bytes); ignored", n);
        return 1;
    }
    take_whole_cqe(p, b, (unsigned)n / 2, delay || hash ? MLXD_DUMP_FIXTURE : MLXD_DUMP_PLAIN, line);
    return 1;
}

/* A "XXXXXXXX: .." found in a line is a row when it carries at least 8 bytes, or when a CQE (or
 * its WQE) is being built and the offset is one a dump prints: a damaged row is then reported.
 * Otherwise it is a log line that happens to start with 8 hex digits and a colon ("worker
 * 7f3a2b1c: 12 errors since start"), passed over. */
static bool row_like(const struct parser *p, const char *off_at)
{
    unsigned off = 0;
    for (int i = 0; i < 8; i++) off = off << 4 | (unsigned)hexv((unsigned char)off_at[i]);
    int nb = 0;
    for (const char *q = off_at + 9; *q && *q != '|';) {
        while (is_space(*q)) q++;
        const char *t = q;
        while (*q && !is_space(*q)) q++;
        if (q - t < 2 || !all_hex(t, 2)) break;
        nb++;
        if (q - t != 2) break;   /* text glued to a byte ends the row */
    }
    if (nb >= 8) return true;
    return p->cur.active && off % 16 == 0 && off < 256;
}

/* A row at off (found in s, the line without its prefix; s0 the whole line), possibly with a
 * log line glued before it. */
static void row_line(struct parser *p, const char *s0, const char *s, const char *off, unsigned line,
                     int depth)
{
    if (off == s) { take_row(p, off, line, NULL, 0); return; }
    bool sep = is_space(off[-1]);
    size_t pl = (size_t)(off - s);
    char pre[512];
    if (pl >= sizeof pre) pl = sizeof pre - 1;
    memcpy(pre, s, pl);
    pre[pl] = 0;
    /* A header marker in the text before the row is handled as its own line. */
    if (find(pre, "dump error cqe") || find(pre, "got completion with error") ||
        find(pre, "Error cqe on") || find(pre, "MLX5 Error CQE") || find(pre, "WQE DUMP")) {
        process_line(p, pre, line, depth + 1);
        diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR,
             "a log line is glued before the row at column %zu; split it there",
             (size_t)(off - s0) + 1);
        take_row(p, off, line, NULL, 0);
    } else {
        take_row(p, off, line, sep ? NULL : pre, (size_t)(off - s0) + 1);
    }
}

/* "WQE DUMP" (at m): the WQE rows that follow belong to the CQE dumped just before. */
static void wqe_dump_header(struct parser *p, const char *m, unsigned line)
{
    uint32_t v;
    flush_run(p);
    struct cur *c = &p->cur;
    if (!c->active || !cur_has_data(c) || c->in_wqe) {
        diag(p, line, MLXD_DUMP_WARNING, c->active ? PENDING_CUR : -1,
             "WQE DUMP without a CQE dump before it; its rows are ignored");
        if (c->active && c->in_wqe) finish_cur(p);
        cur_start(p, MLXD_DUMP_HEXROWS, line, "WQE DUMP");
        p->cur.refused = true;    /* swallow the rows quietly */
        p->cur.in_wqe = true;
        return;
    }
    c->in_wqe = true;
    c->wqe_line = c->wqe_last_line = line;
    if (kv(m, "WQ size", false, &v)) c->wq_size = v;
    if (kv(m, "WQE index", false, &v)) c->wqe_index = v;
    if (kv(m, "len", false, &v)) c->wqe_declared = v;
}

/* A header line of a known dump format (or the continuation of an mlx5e one); false when s is
 * none. */
static bool header_line(struct parser *p, const char *s, unsigned line, int depth)
{
    const char *m;
    uint32_t v;
    if ((m = find(s, "got completion with error")) != NULL) {
        new_header(p, MLXD_DUMP_WORDS, line, "got completion with error");
        header_rest(p, m + strlen("got completion with error"), line, depth);
    } else if ((m = find(s, "dump error cqe")) != NULL) {
        new_header(p, MLXD_DUMP_WORDS, line, "dump error cqe");
        header_rest(p, m + strlen("dump error cqe"), line, depth);
    } else if ((m = find(s, "Error cqe on cqn")) != NULL) {
        new_header(p, MLXD_DUMP_MLX5E, line, "Error cqe on cqn");
        p->cur.has_mlx5e = true;
        mlx5e_fields(&p->cur, m);
        p->cur.mlx5e_cont = !p->cur.have_syndrome;
    } else if ((m = find(s, "MLX5 Error CQE")) != NULL) {
        new_header(p, MLXD_DUMP_DPDK, line, "MLX5 Error CQE");
        if (kv(m, "len", false, &v)) {
            if (v == 64 || v == 128) p->cur.declared_len = v;
            else diag(p, line, MLXD_DUMP_WARNING, PENDING_CUR,
                      "len=%u is not a CQE size (64 or 128); the rows decide", v);
        }
    } else if ((m = find(s, "WQE DUMP")) != NULL) {
        wqe_dump_header(p, m, line);
    } else if ((m = find(s, "WC error")) != NULL && kv(m, "WC error", false, &v)) {
        flush_run(p);
        p->pending_wc = (int)v;
        p->pending_wc_line = line;
    } else if (p->cur.active && p->cur.mlx5e_cont && !cur_has_data(&p->cur) &&
               (find(s, "syndrome") || find(s, "opcode"))) {
        mlx5e_fields(&p->cur, s);
        p->cur.mlx5e_cont = false;
    } else {
        return false;
    }
    return true;
}

/* 128 plain hex digits (optionally "0x"), alone or as the last word of the line: a whole CQE
 * (256: a 128-byte one); a longer hex word is reported.  False when the line has none. */
static bool hex_word_line(struct parser *p, const char *s, unsigned line)
{
    const char *t = s + strlen(s);
    while (t > s && is_space(t[-1])) t--;
    const char *e = t;
    while (t > s && !is_space(t[-1])) t--;
    const char *h = t;
    if (e - h > 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X')) h += 2;
    if ((e - h == 128 || e - h == 256) && all_hex(h, (size_t)(e - h))) {
        uint8_t b[128];
        for (int i = 0; i < (e - h) / 2; i++)
            b[i] = (uint8_t)(hexv((unsigned char)h[2 * i]) << 4 | hexv((unsigned char)h[2 * i + 1]));
        take_whole_cqe(p, b, (unsigned)(e - h) / 2, MLXD_DUMP_PLAIN, line);
        return true;
    }
    if (e - h > 64 && all_hex(h, (size_t)(e - h))) {
        flush_run(p);
        diag(p, line, MLXD_DUMP_ERROR, -1,
             "%zu hex digits in one word; a CQE is 128 (or 256 for 128 bytes); ignored", (size_t)(e - h));
        return true;
    }
    return false;
}

/* Any other line ends a run of words (log lines between rows are tolerated); hex-looking data
 * in no known format is reported. */
static void other_line(struct parser *p, const char *s, unsigned line)
{
    flush_run(p);
    /* A kernel oops's instruction bytes ("Code: 48 8b ... <0f> 0b ...", printed by the kernel's
     * show_opcodes, arch/x86/kernel/dumpstack.c) are hex by nature and never a CQE: a dmesg
     * piped whole into the tool must not be reported for them. */
    if (!strncmp(s, "Code: ", 6)) return;
    /* Hex-looking data in no known format must not pass unnoticed. */
    int ntok = 0, nhex = 0;
    for (const char *q = s; *q;) {
        while (is_space(*q)) q++;
        if (!*q) break;
        const char *t = q;
        while (*q && !is_space(*q)) q++;
        ntok++;
        if (all_hex(t, (size_t)(q - t)) && (q - t) % 2 == 0) nhex++;
    }
    if (nhex >= 8 && nhex * 4 >= ntok * 3)
        diag(p, line, MLXD_DUMP_ERROR, -1,
             "looks like hex data but matches no known CQE dump format; ignored");
}

static void process_line(struct parser *p, const char *s0, unsigned line, int depth)
{
    const char *s = strip_prefix(s0);
    /* A blank line ends a run of word lines only where it could end a CQE (a multiple of 4
     * lines): forums and mail publish dumps with a blank line between rows. */
    if (!*s) { if (p->nrun % 4 == 0) flush_run(p); return; }
    /* '#' lines are comments (the provenance lines of fixtures/cqe-dumps/, shell prompts) */
    if (*s == '#' && depth == 0) return;
    struct mlxd_dump_status st;
    if (depth == 0 && mlxd__status_line(s, &st)) {
        flush_run(p);
        st.line = line;
        push_status(p, &st);
        return;
    }
    const char *off = find_offset(s);
    if (off && row_like(p, off)) { row_line(p, s0, s, off, line, depth); return; }
    if (header_line(p, s, line, depth)) return;
    /* a fixture's 'md' line is a frame's metadata block, not a CQE */
    if (!strncmp(s, "md ", 3) && all_hex(s + 3, strspn(s + 3, "0123456789abcdefABCDEF"))) { flush_run(p); return; }
    if (try_fixture_record(p, s, line)) return;
    if (hex_word_line(p, s, line)) return;
    if (try_words(p, s, line)) return;
    other_line(p, s, line);
}

/* ---- wrapped rows ---------------------------------------------------------------------------- */
/* Mail and terminals wrap a long row: "00000000: 00 .. 00" (13 bytes) and "   00 00 00" on the
 * next line.  A line that is a row (or word line) short of bytes (words) is held back; when the
 * next line holds only bytes (words) that make it exactly whole, the two are joined (a warning
 * names both lines); otherwise the held line is read as it is. */
enum wrap_kind { WRAP_NONE, WRAP_ROW, WRAP_WORDS };

/* How many blank-separated tokens s has, when all are hex of width w; -1 if any is not. */
static int hex_tokens(const char *s, size_t w)
{
    int k = 0;
    for (const char *q = s; *q;) {
        while (is_space(*q)) q++;
        if (!*q) break;
        const char *t = q;
        while (*q && !is_space(*q)) q++;
        if ((size_t)(q - t) != w || !all_hex(t, w)) return -1;
        k++;
    }
    return k;
}

static enum wrap_kind wrappable(const char *line, int *n)
{
    const char *s = strip_prefix(line);
    const char *off = find_offset(s);
    if (off) {
        int k = hex_tokens(off + 9, 2);
        if (k >= 1 && k < 16) { *n = k; return WRAP_ROW; }
        return WRAP_NONE;
    }
    int k = hex_tokens(s, 8);
    if (k >= 1 && k < 4) { *n = k; return WRAP_WORDS; }
    return WRAP_NONE;
}

/* ---- status lines next to CQE dumps ----------------------------------------------------------- */
#define STATUS_NEAR 20   /* lines: a status line and a CQE dump this close describe one completion */

/* Compares status line st with CQE k; one warning lists what disagrees, a note says it agrees. */
static void check_status(struct parser *p, struct mlxd_dump_status *st, size_t k)
{
    const struct mlxd_dump_cqe *c = &p->res->cqes[k];
    const uint8_t *c64 = c->bytes + (c->size - 64);
    char why[200] = "";
    size_t w = 0;
    unsigned bad = 0;
#define WHY(...) do { bad++; if (w < sizeof why) w += (size_t)snprintf(why + w, sizeof why - w, __VA_ARGS__); } while (0)
    if (!mlxd_cqe_is_error(c64)) {
        WHY("; the CQE is not an error CQE (opcode 0x%x)", mlxd_cqe_opcode(c64));
    } else {
        unsigned synd = mlxd_cqe_syndrome(c64);
        int cst = mlxd_syndrome_to_wc_status(synd);
        if (st->syndrome_printed && (unsigned)st->syndrome != synd)
            WHY("; syndrome 0x%x vs byte 55 0x%02x", st->syndrome, synd);
        if (!st->status_from_syndrome && st->status != cst)
            WHY("; status %d vs %d (syndrome 0x%02x)", st->status, cst, synd);
        if (st->vendor_syndrome >= 0 && (unsigned)st->vendor_syndrome != mlxd_cqe_vendor_syndrome(c64))
            WHY("; vendor syndrome 0x%x vs byte 54 0x%02x", st->vendor_syndrome, mlxd_cqe_vendor_syndrome(c64));
        if (st->hw_err_synd >= 0 && st->hw_err_synd != c64[MLXD_ERR_CQE_OFF_HW_ERR_SYND])
            WHY("; hw_err_synd %d vs byte 52 %u", st->hw_err_synd, c64[MLXD_ERR_CQE_OFF_HW_ERR_SYND]);
        if (st->hw_synd_type_hi >= 0 && st->hw_synd_type_hi != c64[MLXD_ERR_CQE_OFF_HW_SYND_TYPE] >> 4)
            WHY("; hw_synd_type %d vs byte 53 >> 4 = %u", st->hw_synd_type_hi, c64[MLXD_ERR_CQE_OFF_HW_SYND_TYPE] >> 4);
    }
#undef WHY
    st->cqe = (int)k;
    st->mismatches = bad;
    if (bad)
        diag(p, st->line, MLXD_DUMP_WARNING, -1,
             "%s status line disagrees with CQE %zu (lines %u-%u)%s: it may report another "
             "completion, or a row is damaged", mlxd_status_source_name(st->source), k + 1,
             c->first_line, c->last_line, why);
    else
        diag(p, st->line, MLXD_DUMP_NOTE, -1, "%s status line agrees with CQE %zu (lines %u-%u)",
             mlxd_status_source_name(st->source), k + 1, c->first_line, c->last_line);
}

/* Each status line is checked against the nearest CQE dump within STATUS_NEAR lines.  Both lists
 * are in input order: one pass. */
static void check_statuses(struct parser *p)
{
    struct mlxd_dump_result *r = p->res;
    size_t k = 0;
    for (size_t i = 0; i < r->nstatuses; i++) {
        struct mlxd_dump_status *st = &r->statuses[i];
        while (k < r->ncqes && r->cqes[k].last_line < st->line) k++;
        /* k: the first CQE ending at or after the line; k - 1 ends before it */
        long best = -1;
        unsigned dist = STATUS_NEAR + 1;
        if (k > 0 && st->line - r->cqes[k - 1].last_line <= STATUS_NEAR) {
            best = (long)k - 1;
            dist = st->line - r->cqes[k - 1].last_line;
        }
        if (k < r->ncqes) {
            unsigned d = r->cqes[k].first_line > st->line ? r->cqes[k].first_line - st->line : 0;
            if (d < dist && d <= STATUS_NEAR) best = (long)k;
        }
        if (best >= 0) check_status(p, st, (size_t)best);
    }
}

/* ---- entry points -------------------------------------------------------------------------- */
/* Feeds text, line by line (line: a buffer of len + 1 bytes), to process_line, joining a row or
 * word line wrapped over two lines. */
static void split_lines(struct parser *p, const char *text, size_t len, char *line)
{
    unsigned lineno = 0;
    size_t i = 0;
    char held[256];         /* a short row or word line held back (see "wrapped rows") */
    size_t held_n = 0;
    unsigned held_line = 0;
    enum wrap_kind held_kind = WRAP_NONE;
    int held_count = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != '\n' && text[j] != '\0') j++;
        size_t n = j - i;
        memcpy(line, text + i, n);
        while (n && (line[n - 1] == '\r' || is_space(line[n - 1]))) n--;
        line[n] = 0;
        lineno++;
        i = j + 1;
        if (held_kind != WRAP_NONE) {
            const char *cont = strip_prefix(line);
            const enum wrap_kind kind = held_kind;
            int k = hex_tokens(cont, kind == WRAP_ROW ? 2 : 8);
            held_kind = WRAP_NONE;
            if (k >= 1 && held_count + k == (kind == WRAP_ROW ? 16 : 4)) {
                /* held + ' ' + cont fits: the two lines and a newline came from the text */
                size_t cn = strlen(cont);
                memmove(line + held_n + 1, cont, cn + 1);
                memcpy(line, held, held_n);
                line[held_n] = ' ';
                p->joined = lineno;
                p->joined_n1 = (unsigned)held_count;
                p->joined_n2 = (unsigned)k;
                process_line(p, line, held_line, 0);
                p->joined = 0;
                continue;
            }
            process_line(p, held, held_line, 0);
        }
        if (n < sizeof held && (held_kind = wrappable(line, &held_count)) != WRAP_NONE) {
            memcpy(held, line, n + 1);
            held_n = n;
            held_line = lineno;
            continue;
        }
        process_line(p, line, lineno, 0);
    }
    if (held_kind != WRAP_NONE) process_line(p, held, held_line, 0);
}

/* Counts the errors and warnings, and puts the diags in input order. */
static void tally_diags(struct mlxd_dump_result *res)
{
    for (size_t k = 0; k < res->ndiags; k++) {
        if (res->diags[k].cqe < -1) res->diags[k].cqe = -1;
        if (res->diags[k].severity == MLXD_DUMP_ERROR) res->nerrors++;
        if (res->diags[k].severity == MLXD_DUMP_WARNING) res->nwarnings++;
    }
    /* diags in input order (stable: insertion order within a line is kept).  Insertion sort is
     * linear here: diags are appended in line order except those a CQE adds when it is finished,
     * which go back at most over the diags of that CQE's own lines. */
    for (size_t a = 1; a < res->ndiags; a++) {
        struct mlxd_dump_diag d = res->diags[a];
        size_t b = a;
        while (b > 0 && res->diags[b - 1].line > d.line) { res->diags[b] = res->diags[b - 1]; b--; }
        res->diags[b] = d;
    }
}

int mlxd_cqe_dump_parse(const char *text, size_t len, struct mlxd_dump_result **out)
{
    if (!out || (!text && len))
        return mlxd_err(EINVAL, "mlxd_cqe_dump_parse: %s is NULL", out ? "text" : "out");
    /* The line buffer is len + 1 bytes: refuse a len no object can have (it would wrap). */
    if (len > (size_t)PTRDIFF_MAX - 1)
        return mlxd_err(EINVAL, "mlxd_cqe_dump_parse: length %zu exceeds the largest object "
                        "(%td bytes)", len, PTRDIFF_MAX - 1);
    struct parser p;
    memset(&p, 0, sizeof p);
    p.pending_wc = -1;
    p.res = calloc(1, sizeof *p.res);
    if (!p.res) return mlxd_err(ENOMEM, "mlxd_cqe_dump_parse: out of memory");
    char *line = malloc(len + 1);
    if (!line) { free(p.res); return mlxd_err(ENOMEM, "mlxd_cqe_dump_parse: out of memory"); }
    split_lines(&p, text, len, line);
    flush_run(&p);
    finish_cur(&p);
    check_statuses(&p);
    free(line);
    free(p.run);
    if (p.oom) {
        mlxd_cqe_dump_free(p.res);
        return mlxd_err(ENOMEM, "mlxd_cqe_dump_parse: out of memory");
    }
    tally_diags(p.res);
    *out = p.res;
    return 0;
}

void mlxd_cqe_dump_free(struct mlxd_dump_result *r)
{
    if (!r) return;
    free(r->cqes);
    free(r->diags);
    free(r->statuses);
    free(r);
}

const char *mlxd_dump_format_name(enum mlxd_dump_format f)
{
    switch (f) {
    case MLXD_DUMP_WORDS: return "rdma-core words";
    case MLXD_DUMP_HEXROWS: return "print_hex_dump rows";
    case MLXD_DUMP_MLX5E: return "mlx5e Error cqe";
    case MLXD_DUMP_DPDK: return "DPDK hexdump";
    case MLXD_DUMP_PLAIN: return "plain hex";
    case MLXD_DUMP_FIXTURE: return "fixture record";
    }
    return NULL;
}
