/* rdma-core is used for its headers only: the built shared libraries must not name libibverbs
 * or libmlx5 in their dynamic section (DT_NEEDED).  Read the ELF file ourselves. */
#include <check.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util.h"

/* Collects the DT_NEEDED names of a 64-bit ELF shared object into out (joined by ' '). */
static int needed_libs(const char *path, char *out, size_t outlen)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) < 0) { close(fd); return -1; }
    const unsigned char *m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return -1;
    const Elf64_Ehdr *eh = (const void *)m;
    int n = 0;
    out[0] = 0;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64) goto done;
    const Elf64_Shdr *sh = (const void *)(m + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNAMIC) continue;
        const Elf64_Dyn *dyn = (const void *)(m + sh[i].sh_offset);
        const char *strtab = (const char *)(m + sh[sh[i].sh_link].sh_offset);
        for (; dyn->d_tag != DT_NULL; dyn++) {
            if (dyn->d_tag != DT_NEEDED) continue;
            strncat(out, strtab + dyn->d_un.d_val, outlen - strlen(out) - 2);
            strcat(out, " ");
            n++;
        }
    }
done:
    munmap((void *)m, st.st_size);
    return n;
}

static void check_no_verbs(const char *lib)
{
    char path[512], needed[4096];
    snprintf(path, sizeof path, "%s/lib/%s", mlxd_test_build_dir(), lib);
    int n = needed_libs(path, needed, sizeof needed);
    ck_assert_msg(n > 0, "%s: no DT_NEEDED entries read (is it built?)", path);
    ck_assert_msg(strstr(needed, "libc.so") != NULL, "%s: libc not among %s", path, needed);
    ck_assert_msg(strstr(needed, "libibverbs") == NULL, "%s links libibverbs: %s", path, needed);
    ck_assert_msg(strstr(needed, "libmlx5.so") == NULL, "%s links libmlx5: %s", path, needed);
}

START_TEST(library_has_no_verbs_dependency) { check_no_verbs("libmlx5direct.so"); }
END_TEST
START_TEST(emulator_has_no_verbs_dependency) { check_no_verbs("libmlx5direct-emu.so"); }
END_TEST

Suite *linkage_suite(void)
{
    Suite *s = suite_create("linkage");
    TCase *tc = tcase_create("dt_needed");
    tcase_add_test(tc, library_has_no_verbs_dependency);
    tcase_add_test(tc, emulator_has_no_verbs_dependency);
    suite_add_tcase(s, tc);
    return s;
}
