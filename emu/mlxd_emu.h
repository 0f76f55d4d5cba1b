/* mlxd_emu.h: the test and observability interface of the mlx5direct emulator
 * (libmlx5direct-emu.so).
 *
 * The emulator answers the system calls a verbs program makes on /dev/infiniband/uverbsN (open,
 * close, stat/fstat/statx, ioctl, write, read, mmap, munmap, and socket for NETLINK_RDMA) inside
 * the process, either preloaded (LD_PRELOAD=libmlx5direct-emu.so) or linked in.  These calls let
 * a test inspect and steer it.  See docs/emulator.md for what is emulated.
 *
 * Threads: every call may be made from any thread; each takes the emulator's global lock.
 * Errors: negative errno; nothing here prints, aborts or exits.
 * In a preloaded program, find the functions with dlsym(RTLD_DEFAULT, "mlxd_emu_...").
 */
#ifndef MLXD_EMU_PUBLIC_H
#define MLXD_EMU_PUBLIC_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Live objects and resources of this process's emulated kernel. */
struct mlxd_emu_counts {
    size_t sz;                   /* set to sizeof(struct mlxd_emu_counts) by the caller */
    unsigned files;              /* open fds of /dev/infiniband/uverbsN */
    unsigned contexts;           /* of those, with GET_CONTEXT done */
    unsigned event_fds;          /* completion-channel and async-event fds the process holds */
    unsigned mappings;           /* live mmaps of uverbs fds (UAR pages, CORE_CLOCK) */
    unsigned pd, mr, cq, qp;     /* live objects per type */
    unsigned uar;                /* dynamic UAR objects (MLX5_IB_OBJECT_UAR) */
    unsigned comp_channel;       /* completion channels whose fd is open */
    unsigned async_event;        /* async-event fds that are open */
    unsigned long long kernel_calls;  /* ioctl + write + mmap calls on uverbs fds so far */
};

/* Fills *c (c->sz must be set; fields past c->sz are not written).
 * -EINVAL: c is NULL or c->sz is smaller than the first field set. */
int mlxd_emu_get_counts(struct mlxd_emu_counts *c);

/* Sum of live pd + mr + cq + qp + uar + comp_channel + async_event, plus open files and
 * mappings: 0 means the emulated kernel holds nothing for this process. */
unsigned mlxd_emu_live_total(void);

/* Whether emulation is on (MLXD_EMU unset or not "0"/"off"). */
bool mlxd_emu_active(void);

/* The sysfs tree the emulator serves (also exported as SYSFS_PATH); "" when inactive.  The
 * string belongs to the emulator and changes with mlxd_emu_configure(). */
const char *mlxd_emu_sysfs_path(void);

/* Number of emulated devices; device N is /dev/infiniband/uverbsN. */
int mlxd_emu_num_devices(void);

/* Replaces the device list, as MLXD_EMU_DEVICES would (NULL or "" = the defaults), rebuilds
 * the sysfs tree and re-exports SYSFS_PATH.
 * -EBUSY: a uverbs fd is open;  -EINVAL: spec does not parse (see docs/emulator.md). */
int mlxd_emu_configure(const char *devices);

/* Fault injection: fail the nth kernel call from now (n = 1: the next one) with errno err
 * (positive), once.  Kernel calls are ioctl, write and mmap on uverbs fds.
 * -EINVAL: n == 0 or err out of 1..4095;  -ENOSPC: 32 rules pending. */
int mlxd_emu_fail_nth_call(unsigned n, int err);

/* Same, counting only calls of one method, by name (docs/emulator.md lists the names:
 * e.g. "QP_CREATE", "ALLOC_PD", "MODIFY_QP", "MMAP"). */
int mlxd_emu_fail_method(const char *method, unsigned n, int err);

/* Drops every pending fault rule. */
void mlxd_emu_fail_clear(void);

/* Sets the port state of device dev: sysfs ports/1/state and phys_state, QUERY_PORT state, and
 * the engine (emu_nic_port_event), which raises IB_EVENT_PORT_ACTIVE (9) / IB_EVENT_PORT_ERR (10)
 * on the async fds of the device's contexts and stops moving packets while down.
 * -EINVAL: no such device. */
int mlxd_emu_set_link(unsigned dev, bool up);

#ifdef __cplusplus
}
#endif
#endif
