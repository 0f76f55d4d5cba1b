/* mmap.c: mmap() of the uverbs fd (k: hw/mlx5/main.c mlx5_ib_mmap, uar_mmap, mlx5_ib_mmap_offset;
 * core/ib_core_uverbs.c rdma_user_mmap_io / rdma_user_mmap_entry_get).
 *   no ucontext -> ENODEV (ib_uverbs_mmap); length != PAGE_SIZE -> EINVAL;
 *   cmd 0/2/3 (static UAR regular/WC/NC page idx): DYN_UAR context -> EINVAL, idx beyond the
 *       static pages -> EINVAL, not MAP_SHARED -> EINVAL;
 *   cmd 1 -> ENOSYS; cmd 5 CORE_CLOCK: writable -> EPERM; cmd 6, 7, 8 -> EOPNOTSUPP;
 *   cmd >= 9: a dynamic UAR's offset from UAR_OBJ_ALLOC; unknown -> EINVAL; not MAP_SHARED ->
 *       EINVAL.
 * UAR pages are 4 KiB memfds: the process's mapping and the emulator's own view (uar->page, the
 * one the engine watches) are the same memory.  CORE_CLOCK is a read-only page whose first 8
 * bytes hold a free-running nanosecond counter as two big-endian 32-bit words, high word first
 * (the layout of the HCA's internal_timer_h/l), refreshed every millisecond by a thread that
 * starts with the first CORE_CLOCK mapping. */
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

static void clock_store(void)
{
    uint64_t t = emu_nic_clock_ns();   /* the clock CQE timestamps use */
    volatile uint32_t *w = (volatile uint32_t *)(emu_g.clock_page + EMU_CORE_CLOCK_OFF);
    w[0] = htobe32((uint32_t)(t >> 32));
    w[1] = htobe32((uint32_t)t);
}

static void *clock_thread(void *arg)
{
    (void)arg;
    while (!emu_g.clock_stop) {
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
    emu_g.clock_stop = false;
    if (pthread_create(&emu_g.clock_thread, NULL, clock_thread, NULL) == 0)
        emu_g.clock_thread_started = true;
}

static int clock_setup(void)
{
    if (emu_g.clock_page) return 0;
    int mfd = (int)syscall(SYS_memfd_create, "mlxd-emu-clock", 1u);
    if (mfd < 0) return -ENOMEM;
    if (ftruncate(mfd, EMU_PAGE) < 0) { emu_real.close(mfd); return -ENOMEM; }
    void *p = emu_real.mmap(NULL, EMU_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (p == MAP_FAILED) { emu_real.close(mfd); return -ENOMEM; }
    emu_g.clock_memfd = mfd;
    emu_g.clock_page = p;
    clock_store();
    emu_g.clock_stop = false;
    if (pthread_create(&emu_g.clock_thread, NULL, clock_thread, NULL) == 0)
        emu_g.clock_thread_started = true;
    pthread_atfork(NULL, NULL, clock_atfork_child);
    return 0;
}

static void *map_fd(struct emu_file *f, void *addr, size_t len, int prot, int flags, int fd,
                    int kind, struct k_uar *uar, int *err)
{
    void *p = emu_real.mmap(addr, len, prot, flags, fd, 0);
    if (p == MAP_FAILED) { *err = errno; return MAP_FAILED; }
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
        return map_fd(f, addr, len, prot, flags, emu_g.clock_memfd, 1, NULL, err);
    }
    case MLX5_IB_MMAP_ALLOC_WC:
    case MLX5_IB_MMAP_CLOCK_INFO:
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
