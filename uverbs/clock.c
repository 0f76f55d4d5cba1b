/* clock.c: the NIC's clock as the kernel describes it (issue 18).
 *   - EX_QUERY_DEVICE (kernel drivers/infiniband/core/uverbs_cmd.c ib_uverbs_ex_query_device):
 *     hca_core_clock (kHz) and timestamp_mask of the free-running internal timer;
 *   - the clock-info page (mmap command MLX5_IB_MMAP_CLOCK_INFO, index MLX5_IB_CLOCK_INFO_V1,
 *     read-only; drivers/infiniband/hw/mlx5/main.c mlx5_ib_mmap_clock_info_page): struct
 *     mlx5_ib_clock_info (include/uapi/rdma/mlx5-abi.h), read under its `sign` word as
 *     rdma-core's mlx5dv_get_clock_info does (providers/mlx5/mlx5.c).
 * Both are optional: a kernel without them leaves hca_core_clock 0 / clock_info false. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include "driver.h"
#include "ioctl.h"
#include "mlxd_error.h"

static long page_size(void) { long p = sysconf(_SC_PAGESIZE); return p > 0 ? p : 4096; }

void mlxd__clock_open(struct mlxd_nic *nic)
{
    struct ib_uverbs_ex_query_device req = { 0 };
    struct ib_uverbs_ex_query_device_resp resp;
    memset(&resp, 0, sizeof resp);
    if (mlxd__invoke_write(nic->fd, IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_QUERY_DEVICE, &req,
                           sizeof req, &resp, sizeof resp, NULL, 0, NULL, 0) == 0) {
        nic->hca_core_clock = (uint32_t)resp.hca_core_clock;
        nic->timestamp_mask = resp.timestamp_mask;
    }
    nic->port.hca_core_clock = nic->hca_core_clock;
    nic->port.timestamp_mask = nic->timestamp_mask;
    nic->port.real_time_ts = nic->real_time_ts;
    if (nic->clock_info_versions & (1u << MLX5_IB_CLOCK_INFO_V1)) {
        /* offset: command in bits 8..15 of the page offset, the version index below */
        off_t off = (off_t)((MLX5_IB_MMAP_CLOCK_INFO << 8) | MLX5_IB_CLOCK_INFO_V1) * page_size();
        void *m = mmap(NULL, (size_t)page_size(), PROT_READ, MAP_SHARED, nic->fd, off);
        if (m != MAP_FAILED)
            nic->clock_info = m;
    }
    nic->port.clock_info = nic->clock_info != NULL;
}

void mlxd__clock_close(struct mlxd_nic *nic)
{
    if (nic->clock_info)
        munmap((void *)(uintptr_t)nic->clock_info, (size_t)page_size());
    nic->clock_info = NULL;
}

int mlxd_clock_info(const struct mlxd_nic *nic, struct mlxd_clock_info *out)
{
    if (!nic_ok(nic) || !out)
        return mlxd_err(EINVAL, "mlxd_clock_info: invalid or closed nic, or out NULL");
    if (!nic->clock_info)
        return mlxd_err(EOPNOTSUPP, "mlxd_clock_info %s: the kernel offers no clock-info page", nic->name);
    const volatile struct mlx5_ib_clock_info *ci = nic->clock_info;
    for (int i = 0; i < 1000; i++) {
        uint32_t sign = __atomic_load_n(&ci->sign, __ATOMIC_ACQUIRE);
        if (sign & MLX5_IB_CLOCK_INFO_KERNEL_UPDATING)
            continue;
        /* the kernel rewrites the page meanwhile: single loads, checked by the sign word */
        out->nsec = __atomic_load_n(&ci->nsec, __ATOMIC_RELAXED);
        out->last_cycles = __atomic_load_n(&ci->cycles, __ATOMIC_RELAXED);
        out->frac = __atomic_load_n(&ci->frac, __ATOMIC_RELAXED);
        out->mult = __atomic_load_n(&ci->mult, __ATOMIC_RELAXED);
        out->shift = __atomic_load_n(&ci->shift, __ATOMIC_RELAXED);
        out->mask = __atomic_load_n(&ci->mask, __ATOMIC_RELAXED);
        out->overflow_period = __atomic_load_n(&ci->overflow_period, __ATOMIC_RELAXED);
        atomic_thread_fence(memory_order_acquire);
        if (__atomic_load_n(&ci->sign, __ATOMIC_RELAXED) == sign)
            return 0;
    }
    return mlxd_err(EBUSY, "mlxd_clock_info %s: the kernel kept updating the clock-info page", nic->name);
}
