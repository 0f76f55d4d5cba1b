/* ah.c: address handles (k: core/uverbs_cmd.c ib_uverbs_create_ah / ib_uverbs_destroy_ah,
 * core/verbs.c rdma_create_user_ah + rdma_check_ah_attr, hw/mlx5/ah.c mlx5_ib_create_ah).
 *
 * The NIC never reads an address handle: libmlx5 copies the address vector (struct mlx5_wqe_av,
 * mlx5dv.h) into every UD send WQE itself.  What the kernel adds on RoCE is the destination MAC,
 * returned in struct mlx5_ib_create_ah_resp (rdma/mlx5-abi.h).  A real kernel resolves it through
 * the neighbour table of the GID's netdev; the emulated port has no netdev, so the MAC is made
 * from the destination's IPv4 address: 02:00:a:b:c:d (locally administered, unicast). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/mlx5-abi.h>
#include "kernel.h"

void emu_k_ah_dmac(const uint8_t dgid[16], uint8_t mac[6])
{
    mac[0] = 0x02; mac[1] = 0x00;
    memcpy(mac + 2, dgid + 12, 4);
}

int emu_k_create_ah(struct emu_file *f, struct k_pd *pd, const struct ib_uverbs_ah_attr *a,
                    size_t uhw_outlen, uint32_t *handle, struct mlx5_ib_create_ah_resp *resp,
                    size_t *resp_len)
{
    const struct emu_device_cfg *cfg = &f->ctx.dev->cfg;
    if (!pd) return -EINVAL;
    if (a->port_num != 1) return -EINVAL;                  /* rdma_is_port_valid */
    if (cfg->ethernet && !a->is_global) return -EINVAL;    /* rdma_check_ah_attr: RoCE needs a GRH */
    if (a->is_global) {                                    /* rdma_fill_sgid_attr */
        if (a->grh.sgid_index >= EMU_GID_TBL_LEN) return -EINVAL;
        if (a->grh.sgid_index >= cfg->ngids || !cfg->gids[a->grh.sgid_index].valid) return -ENODATA;
    }
    if (cfg->ethernet && a->sl > 7) return -EINVAL;        /* mlx5_ib_create_ah: RoCE SL is 3 bits */
    /* mlx5_ib_create_ah: the response must reach past dmac */
    size_t min = offsetof(struct mlx5_ib_create_ah_resp, dmac) + 6;
    if (cfg->ethernet && uhw_outlen && uhw_outlen < min) return -EINVAL;
    struct k_ah *ah = calloc(1, sizeof *ah);
    if (!ah) return -ENOMEM;
    int r = emu_uobj_alloc(f, UO_AH, ah, handle);
    if (r) { free(ah); return r; }
    ah->handle = *handle;
    ah->pd = pd;
    ah->attr = *a;
    pd->usecnt++;
    emu_g.live_ah++;
    memset(resp, 0, sizeof *resp);
    *resp_len = 0;
    if (cfg->ethernet && uhw_outlen) {
        resp->response_length = (uint32_t)min;
        emu_k_ah_dmac(a->grh.dgid, resp->dmac);
        *resp_len = min;
    }
    return 0;
}

int emu_k_destroy_ah(struct emu_file *f, struct k_ah *ah)
{
    emu_uobj_free(f, ah->handle);
    ah->pd->usecnt--;
    emu_g.live_ah--;
    free(ah);
    return 0;
}
