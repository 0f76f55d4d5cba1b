/* memlock.c: the pages this process has pinned through the kernel for mlx5direct's objects,
 * counted as the kernel counts them in the process's pinned_vm (drivers/infiniband/core/umem.c
 * ib_umem_get: the pages a buffer touches, checked against RLIMIT_MEMLOCK unless the process has
 * CAP_IPC_LOCK): region ranges (REG_MR; dma-buf regions pin nothing here), CQ rings
 * (hw/mlx5/cq.c create_cq_user), QP buffers (hw/mlx5/qp.c _create_user_qp) and one page per
 * doorbell record (hw/mlx5/doorbell.c mlx5_ib_db_map_user; each of ours is alone in its page).
 * One count per process, over every NIC, as pinned_vm is one per mm.  It explains an ENOMEM from
 * the kernel; it is never on a hot path. */
#include <errno.h>
#include <linux/capability.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "driver.h"
#include "mlxd_error.h"

static _Atomic uint64_t pinned[MLXD_PIN__N];

uint64_t mlxd__pin_pages(uint64_t addr, uint64_t len)
{
    if (!len) return 0;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t first = addr & ~(pg - 1), end = (addr + len + pg - 1) & ~(pg - 1);
    return (end - first) / pg;
}

void mlxd__pinned_add(enum mlxd_pin_kind k, int64_t pages)
{
    atomic_fetch_add_explicit(&pinned[k], (uint64_t)pages, memory_order_relaxed);
}

static bool cap_ipc_lock(void)
{
    struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0) return false;
    return d[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32));
}

int mlxd__memlock_error(const char *fn, const char *dev, const char *call, int rc, uint64_t pages)
{
    struct rlimit rl;
    if (rc != -ENOMEM || getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || cap_ipc_lock())
        return 0;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), limit = rl.rlim_cur / pg;
    uint64_t reg = atomic_load_explicit(&pinned[MLXD_PIN_REGION], memory_order_relaxed);
    uint64_t ring = atomic_load_explicit(&pinned[MLXD_PIN_RING], memory_order_relaxed);
    uint64_t db = atomic_load_explicit(&pinned[MLXD_PIN_DBREC], memory_order_relaxed);
    if (reg + ring + db + pages <= limit) return 0;     /* something else explains it */
    return mlxd_err(ENOMEM, "%s %s: the kernel refused %s (%s): it would pin %llu more pages of %llu bytes, "
                    "and RLIMIT_MEMLOCK allows %llu pages (%llu bytes) per process; mlx5direct has %llu pinned "
                    "already (%llu in regions, %llu in CQ and QP rings, %llu doorbell-record pages), as the "
                    "kernel counts them (core/umem.c); raise the limit (ulimit -l, limits.conf) or grant "
                    "CAP_IPC_LOCK", fn, dev, call, strerror(ENOMEM), (unsigned long long)pages,
                    (unsigned long long)pg, (unsigned long long)limit, (unsigned long long)rl.rlim_cur,
                    (unsigned long long)(reg + ring + db), (unsigned long long)reg, (unsigned long long)ring,
                    (unsigned long long)db);
}
