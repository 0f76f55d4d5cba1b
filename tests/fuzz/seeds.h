/* seeds.h: seed corpora made at run time from fixtures/roce-pcaps (shared by the fuzz targets
 * that take packets).  A target whose LLVMFuzzerInitialize sees MLXD_FUZZ_MKSEEDS=<dir> writes
 * its seeds there and exits (tests/fuzz/run.sh does this before fuzzing). */
#ifndef MLXD_FUZZ_SEEDS_H
#define MLXD_FUZZ_SEEDS_H
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_capture.h"

static inline void seed_write(const char *dir, unsigned n, const void *d, size_t len)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/seed-%04u", dir, n);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(d, 1, len, f) != len) { fprintf(stderr, "cannot write %s\n", p); exit(1); }
    fclose(f);
}

/* Calls emit(capture, dir, &counter) for every capture in fixtures/roce-pcaps (MLXD_SRC or .). */
typedef void (*seed_emit_fn)(const struct mlxd_capture *c, const char *dir, unsigned *n);

static inline void seeds_from_pcaps(seed_emit_fn emit)
{
    const char *dir = getenv("MLXD_FUZZ_MKSEEDS");
    if (!dir) return;
    const char *src = getenv("MLXD_SRC") ? getenv("MLXD_SRC") : ".";
    char pd[4096];
    snprintf(pd, sizeof pd, "%s/fixtures/roce-pcaps", src);
    DIR *d = opendir(pd);
    if (!d) { fprintf(stderr, "no %s\n", pd); exit(1); }
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".pcap")) continue;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", pd, e->d_name);
        struct mlxd_capture *c;
        if (mlxd_capture_load(p, &c)) { fprintf(stderr, "cannot load %s\n", p); exit(1); }
        emit(c, dir, &n);
        mlxd_capture_free(c);
    }
    closedir(d);
    fprintf(stderr, "%u seeds written to %s\n", n, dir);
    exit(0);
}
#endif
