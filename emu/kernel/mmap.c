/* mmap.c: mmap() of the uverbs fd (k: hw/mlx5/main.c mlx5_ib_mmap, uar_mmap, mlx5_ib_mmap_offset;
 * core/ib_core_uverbs.c rdma_user_mmap_io / rdma_user_mmap_entry_get).
 *   no ucontext -> ENODEV (ib_uverbs_mmap); length != PAGE_SIZE -> EINVAL;
 *   cmd 0/2/3 (static UAR regular/WC/NC page idx): DYN_UAR context -> EINVAL, idx beyond the
 *       static pages -> EINVAL, not MAP_SHARED -> EINVAL;
 *   cmd 1 -> ENOSYS; cmd 5 CORE_CLOCK: writable -> EPERM; cmd 7 CLOCK_INFO: writable or
 *       executable -> EPERM, index not V1 -> EINVAL; cmd 6, 8 -> EOPNOTSUPP;
 *   cmd >= 9: a dynamic UAR's offset from UAR_OBJ_ALLOC; unknown -> EINVAL; not MAP_SHARED ->
 *       EINVAL.
 * UAR pages are 4 KiB memfds: the process's mapping and the emulator's own view (uar->page, the
 * one the engine watches) are the same memory.  CORE_CLOCK is a read-only page whose first 8
 * bytes hold the internal timer (emu/nic/nic_clock.c) as two big-endian 32-bit words, high word
 * first (the layout of the HCA's internal_timer_h/l); CLOCK_INFO is the kernel's struct
 * mlx5_ib_clock_info; both are refreshed every millisecond by a thread that starts with the
 * first mapping of either. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <rdma/mlx5-abi.h>
#include "kernel.h"

/* The kernel's clock-info page (k: drivers/net/ethernet/mellanox/mlx5/core/lib/clock.c
 * mlx5_init_clock_info / mlx5_update_clock_info_page): a timecounter over the internal timer,
 * nsec = CLOCK_REALTIME at its start, advanced by (delta * mult + frac) >> shift at each update
 * (every millisecond here), written under the `sign` sequence word.  Its mask is the kernel's
 * CLOCKSOURCE_MASK(41), or the timer's own when that is narrower. */
struct tc {
    unsigned gen;          /* emu_nic_clock_generation() of the model it follows */
    uint32_t khz;
    uint64_t dev_mask, mask, cycles, nsec, frac;
    uint32_t mult, shift;
};
static struct tc tc;   /* clock thread only (and clock_setup before it starts) */

static void tc_init(uint32_t khz, uint64_t dev_mask)
{
    tc.gen = emu_nic_clock_generation();
    tc.khz = khz;
    tc.dev_mask = dev_mask;
    tc.mask = dev_mask < (1ull << 41) - 1 ? dev_mask : (1ull << 41) - 1;
    /* the largest shift whose mult (ns per cycle << shift, rounded: clocksource_khz2mult) stays
     * below 2^31 */
    tc.shift = 31;
    while (tc.shift > 1 && ((1000000ull << tc.shift) + khz / 2) / khz >= (1ull << 31)) tc.shift--;
    tc.mult = (uint32_t)(((1000000ull << tc.shift) + khz / 2) / khz);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    tc.nsec = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    tc.cycles = emu_nic_clock_cycles();
    tc.frac = 0;
}

static void clock_info_store(void)
{
    uint32_t khz = emu_nic_clock_khz();
    uint64_t dev_mask = emu_nic_clock_mask();
    uint64_t now = emu_nic_clock_cycles();
    if (tc.gen != emu_nic_clock_generation() || khz != tc.khz || dev_mask != tc.dev_mask ||
        ((now - tc.cycles) & tc.mask) > tc.mask / 2)
        tc_init(khz, dev_mask);      /* a new clock (mlxd_emu_clock_set): a new time base */
    else {
        uint64_t delta = (now - tc.cycles) & tc.mask;
        uint64_t ns = delta * tc.mult + tc.frac;
        tc.nsec += ns >> tc.shift;
        tc.frac = ns & ((1ull << tc.shift) - 1);
        tc.cycles = now;
    }
    volatile struct mlx5_ib_clock_info *ci = (volatile struct mlx5_ib_clock_info *)emu_g.clock_info_page;
    uint32_t sign = __atomic_load_n(&ci->sign, __ATOMIC_ACQUIRE);
    __atomic_store_n(&ci->sign, sign | MLX5_IB_CLOCK_INFO_KERNEL_UPDATING, __ATOMIC_SEQ_CST);
    /* relaxed atomic stores: the process reads the page while it changes (the sign word orders it) */
    __atomic_store_n(&ci->nsec, tc.nsec, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->cycles, tc.cycles, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->frac, tc.frac, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->mult, tc.mult, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->shift, tc.shift, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->mask, tc.mask, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->overflow_period, (((1ull << 63) / tc.mult) >> 1) * 1000000ull / tc.khz, __ATOMIC_RELAXED);
    __atomic_store_n(&ci->sign, (sign & ~(uint32_t)MLX5_IB_CLOCK_INFO_KERNEL_UPDATING) + 2, __ATOMIC_RELEASE);
}

static void clock_store(void)
{
    uint64_t t = emu_nic_clock_cycles();   /* the internal timer CQE timestamps use */
    volatile uint32_t *w = (volatile uint32_t *)(emu_g.clock_page + EMU_CORE_CLOCK_OFF);
    __atomic_store_n(&w[0], htobe32((uint32_t)(t >> 32)), __ATOMIC_RELAXED);
    __atomic_store_n(&w[1], htobe32((uint32_t)t), __ATOMIC_RELAXED);
    clock_info_store();
}

static void *clock_thread(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&emu_g.clock_stop, __ATOMIC_ACQUIRE)) {
        clock_store();
        struct timespec d = { 0, 1000000 };
        nanosleep(&d, NULL);
    }
    return NULL;
}

/* fork(): the child has the page but not the thread that advances it */
static void clock_atfork_child(void)
{
    if (!emu_g.clock_thread_started) return;
    emu_g.clock_thread_started = false;
    __atomic_store_n(&emu_g.clock_stop, false, __ATOMIC_RELEASE);
    if (pthread_create(&emu_g.clock_thread, NULL, clock_thread, NULL) == 0)
        emu_g.clock_thread_started = true;
}

static int page_memfd(const char *name, int *fd, volatile uint8_t **view)
{
    int mfd = (int)syscall(SYS_memfd_create, name, 1u);
    if (mfd < 0) return -ENOMEM;
    if (ftruncate(mfd, EMU_PAGE) < 0) { emu_real.close(mfd); return -ENOMEM; }
    void *p = emu_real.mmap(NULL, EMU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (p == MAP_FAILED) { emu_real.close(mfd); return -ENOMEM; }
    *fd = mfd;
    *view = p;
    return 0;
}

/* Both clock pages (core clock, clock info) and the thread that advances them; the first
 * mapping of either starts them. */
static int clock_setup(void)
{
    if (emu_g.clock_page) return 0;
    int r = page_memfd("mlxd-emu-clock-info", &emu_g.clock_info_memfd, &emu_g.clock_info_page);
    if (r) return r;
    r = page_memfd("mlxd-emu-clock", &emu_g.clock_memfd, &emu_g.clock_page);
    if (r) return r;
    /* the views stay; the files are not needed any more (map_view) */
    emu_real.close(emu_g.clock_info_memfd);
    emu_real.close(emu_g.clock_memfd);
    emu_g.clock_info_memfd = emu_g.clock_memfd = -1;
    tc_init(emu_nic_clock_khz(), emu_nic_clock_mask());
    clock_store();
    __atomic_store_n(&emu_g.clock_stop, false, __ATOMIC_RELEASE);
    if (pthread_create(&emu_g.clock_thread, NULL, clock_thread, NULL) == 0)
        emu_g.clock_thread_started = true;
    pthread_atfork(NULL, NULL, clock_atfork_child);
    return 0;
}

static void *map_record(struct emu_file *f, void *p, size_t len, int kind, struct k_uar *uar, int *err);

static void *map_fd(struct emu_file *f, void *addr, size_t len, int prot, int flags, int fd,
                    int kind, struct k_uar *uar, int *err)
{
    void *p = emu_real.mmap(addr, len, prot, flags, fd, 0);
    if (p == MAP_FAILED) { *err = errno; return MAP_FAILED; }
    return map_record(f, p, len, kind, uar, err);
}

/* A clock page: a new mapping of the emulator's own view (mremap with old_size 0 duplicates a
 * shared mapping), read-only, so that no file descriptor stays open for it (a kernel's pages
 * cost the process none). */
static void *map_view(struct emu_file *f, void *addr, size_t len, int prot, int flags, volatile uint8_t *view,
                      int *err)
{
    void *p = (flags & MAP_FIXED) ? mremap((void *)view, 0, len, MREMAP_MAYMOVE | MREMAP_FIXED, addr)
                                  : mremap((void *)view, 0, len, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) { *err = errno; return MAP_FAILED; }
    if (mprotect(p, len, prot) < 0) { *err = errno; emu_real.munmap(p, len); return MAP_FAILED; }
    return map_record(f, p, len, 1, NULL, err);
}

static void *map_record(struct emu_file *f, void *p, size_t len, int kind, struct k_uar *uar, int *err)
{
    struct k_map *m = calloc(1, sizeof *m);
    if (!m) { emu_real.munmap(p, len); *err = ENOMEM; return MAP_FAILED; }
    m->addr = (uintptr_t)p;
    m->len = len;
    m->kind = kind;
    m->uar = uar;
    m->next = f->maps;
    f->maps = m;
    emu_g.nmaps++;
    return p;
}

void *emu_mmap(struct emu_file *f, void *addr, size_t len, int prot, int flags, off_t off, int *err)
{
    int fe = emu_fault_check(NULL);
    if (!fe) fe = emu_fault_check("MMAP");
    if (fe) { *err = fe; return MAP_FAILED; }
    if (!f->ctx.has_ucontext) { *err = ENODEV; return MAP_FAILED; }
    if (off < 0 || (off & (EMU_PAGE - 1))) { *err = EINVAL; return MAP_FAILED; }
    uint64_t pgoff = (uint64_t)off / EMU_PAGE;
    unsigned cmd = (pgoff >> 8) & 0xff;
    uint64_t idx = (pgoff & 0xff) | ((pgoff >> 16) << 8);
    bool shared = (flags & MAP_SHARED) || (flags & MAP_SHARED_VALIDATE) == MAP_SHARED_VALIDATE;
    switch (cmd) {
    case MLX5_IB_MMAP_REGULAR_PAGE:
    case MLX5_IB_MMAP_WC_PAGE:
    case MLX5_IB_MMAP_NC_PAGE:
        if (len != EMU_PAGE) { *err = EINVAL; return MAP_FAILED; }
        if (f->ctx.dyn_uar || idx >= f->nstatic) { *err = EINVAL; return MAP_FAILED; }
        if (!shared) { *err = EINVAL; return MAP_FAILED; }
        return map_fd(f, addr, len, prot, flags, f->static_uars[idx]->memfd, 0, f->static_uars[idx], err);
    case MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES:
        *err = ENOSYS;
        return MAP_FAILED;
    case MLX5_IB_MMAP_CORE_CLOCK: {
        if (len != EMU_PAGE) { *err = EINVAL; return MAP_FAILED; }
        if (prot & PROT_WRITE) { *err = EPERM; return MAP_FAILED; }
        int r = clock_setup();
        if (r) { *err = -r; return MAP_FAILED; }
        return map_view(f, addr, len, prot, flags, emu_g.clock_page, err);
    }
    case MLX5_IB_MMAP_CLOCK_INFO: {
        /* k: hw/mlx5/main.c mlx5_ib_mmap_clock_info_page: one page, not writable (EPERM),
         * version index MLX5_IB_CLOCK_INFO_V1 only (EINVAL) */
        if (len != EMU_PAGE) { *err = EINVAL; return MAP_FAILED; }
        if (prot & (PROT_WRITE | PROT_EXEC)) { *err = EPERM; return MAP_FAILED; }
        if (idx != MLX5_IB_CLOCK_INFO_V1) { *err = EINVAL; return MAP_FAILED; }
        int r = clock_setup();
        if (r) { *err = -r; return MAP_FAILED; }
        return map_view(f, addr, len, prot, flags, emu_g.clock_info_page, err);
    }
    case MLX5_IB_MMAP_ALLOC_WC:
    case MLX5_IB_MMAP_DEVICE_MEM:
        *err = EOPNOTSUPP;
        return MAP_FAILED;
    default:
        break;
    }
    for (uint32_t h = 0; h < f->nobjs; h++) {
        if (f->objs[h].kind != UO_UAR) continue;
        struct k_uar *u = f->objs[h].obj;
        if (u->pub.mmap_offset != (uint64_t)off) continue;
        if (len != EMU_PAGE || !shared) { *err = EINVAL; return MAP_FAILED; }
        return map_fd(f, addr, len, prot, flags, u->memfd, 0, u, err);
    }
    *err = EINVAL;
    return MAP_FAILED;
}

/* munmap(): forget every tracked mapping that overlaps the range (a 4 KiB page cannot be split). */
void emu_munmap_note(void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr, e = a + len;
    for (struct emu_file *f = emu_g.files; f && emu_g.nmaps; f = f->next) {
        for (struct k_map **pp = &f->maps; *pp;) {
            struct k_map *m = *pp;
            if (m->addr < e && a < m->addr + m->len) {
                *pp = m->next;
                free(m);
                emu_g.nmaps--;
                continue;
            }
            pp = &m->next;
        }
    }
}

/* close(): the bookkeeping goes; the pages stay mapped until the process unmaps them (the
 * memory is the emulator's memfd, so nothing dangles). */
void emu_file_drop_maps(struct emu_file *f)
{
    for (struct k_map *m = f->maps, *n; m; m = n) { n = m->next; free(m); emu_g.nmaps--; }
    f->maps = NULL;
}
