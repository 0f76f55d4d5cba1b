/* umem.c: pinned-page accounting, as the kernel's core/umem.c does it for ib_umem_get.
 *
 * Every user buffer a verbs object pins counts in the process's mm->pinned_vm, in pages: the
 * pages the range [addr, addr + len) touches.  When the new total passes RLIMIT_MEMLOCK (in
 * pages) and the caller lacks CAP_IPC_LOCK (capable(): the effective set), the registration
 * fails with ENOMEM and nothing is counted.  Pinned: MR ranges (REG_MR; dma-buf MRs are not,
 * ib_umem_dmabuf_get), the CQ ring (hw/mlx5/cq.c create_cq_user), the QP buffer
 * (hw/mlx5/qp.c _create_user_qp, when it has one), and the page of each doorbell record
 * (hw/mlx5/doorbell.c mlx5_ib_db_map_user: one page per distinct page per context, reference
 * counted).  The count is per process and spans every device (one mm), as pinned_vm does. */
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kernel.h"

struct k_dbpage { struct k_dbpage *next; uint64_t page; unsigned refs; };

static bool cap_ipc_lock(void)
{
    struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0) return false;
    return d[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32));
}

/* k: ib_umem_get: npages, then atomic64_add_return on pinned_vm against the limit */
static int pin(uint64_t n)
{
    struct rlimit rl;
    uint64_t limit = UINT64_MAX;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) limit = rl.rlim_cur / EMU_PAGE;
    if (emu_g.pinned_pages + n > limit && !cap_ipc_lock()) return -ENOMEM;
    emu_g.pinned_pages += n;
    return 0;
}

static int db_pin(struct emu_file *f, uint64_t page)
{
    for (struct k_dbpage *d = f->dbpages; d; d = d->next)
        if (d->page == page) { d->refs++; return 0; }
    struct k_dbpage *d = calloc(1, sizeof *d);
    if (!d) return -ENOMEM;
    int r = pin(1);
    if (r) { free(d); return r; }
    d->page = page;
    d->refs = 1;
    d->next = f->dbpages;
    f->dbpages = d;
    return 0;
}

static void db_unpin(struct emu_file *f, uint64_t page)
{
    for (struct k_dbpage **pp = &f->dbpages; *pp; pp = &(*pp)->next) {
        struct k_dbpage *d = *pp;
        if (d->page != page) continue;
        if (--d->refs == 0) {
            *pp = d->next;
            free(d);
            emu_g.pinned_pages--;
        }
        return;
    }
}

int emu_pins_take(struct emu_file *f, struct emu_pins *p, uint64_t addr, uint64_t len, uint64_t db_addr)
{
    *p = (struct emu_pins){ 0 };
    if (len) {
        uint64_t first = addr & ~(uint64_t)(EMU_PAGE - 1);
        uint64_t end = addr + len;
        if (end < addr || end > UINT64_MAX - EMU_PAGE) return -EINVAL;
        uint64_t n = ((end + EMU_PAGE - 1) & ~(uint64_t)(EMU_PAGE - 1)) - first;
        n /= EMU_PAGE;
        if (n > UINT_MAX) return -EINVAL;                 /* k: npages > UINT_MAX */
        int r = pin(n);
        if (r) return r;
        p->pages = n;
    }
    if (db_addr) {
        int r = db_pin(f, db_addr & ~(uint64_t)(EMU_PAGE - 1));
        if (r) { emu_g.pinned_pages -= p->pages; p->pages = 0; return r; }
        p->db_page = db_addr & ~(uint64_t)(EMU_PAGE - 1);
        p->has_db = true;
    }
    return 0;
}

void emu_pins_release(struct emu_file *f, struct emu_pins *p)
{
    emu_g.pinned_pages -= p->pages;
    if (p->has_db) db_unpin(f, p->db_page);
    *p = (struct emu_pins){ 0 };
}
