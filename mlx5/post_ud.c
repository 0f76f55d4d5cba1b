/* post_ud.c: the part of a UD send that connected QPs do not have: the datagram segment
 * (struct mlx5_wqe_datagram_seg = struct mlx5_wqe_av, mlx5dv.h), copied from the address
 * handle with the entry's Q_Key and destination QPN put in, as rdma-core providers/mlx5/qp.c
 * set_datagram_seg does.  Hot path: no system call, lock, allocation or division. */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "barrier.h"
#include "driver.h"
#include "mlxd_abi.h"
#include "mlxd_error.h"
#include "wqe.h"

int mlxd__ud_entry_check(const struct mlxd_qp *qp, const struct mlxd_entry *e)
{
    if (e->op == MLXD_OP_NOP) return 0;
    const struct mlxd_ah *ah = e->ah;
    if (mlxd_unlikely((e->op != MLXD_OP_SEND && e->op != MLXD_OP_SEND_IMM) || !ah ||
                      ah->state != OBJ_LIVE || ah->nic != qp->nic || e->remote_qpn > 0xffffff)) {
        mlxd_err(EINVAL, "mlxd_qp_post: UD QP 0x%x: op %u (UD sends only SEND/SEND_IMM), ah %s, remote_qpn 0x%x "
                 "(24 bits)", qp->qpn, e->op, !ah ? "NULL" : ah->state != OBJ_LIVE ? "destroyed"
                 : ah->nic != qp->nic ? "of another NIC" : "ok", e->remote_qpn);
        return -1;
    }
    return (int)MLXD_WQE_AV_SIZE;
}

void mlxd__ud_put_av(uint8_t *sq, uint32_t ring_mask, uint32_t pos, const struct mlxd_entry *e,
                     const uint8_t *av)
{
    uint8_t seg[MLXD_WQE_AV_SIZE];
    memcpy(seg, av, sizeof seg);
    uint32_t qkey = htobe32(e->remote_qkey), dqp = htobe32(e->remote_qpn | MLXD_EXTENDED_UD_AV);
    memcpy(seg + MLXD_WQE_AV_OFF_QKEY, &qkey, 4);
    memcpy(seg + MLXD_WQE_AV_OFF_DQP_DCT, &dqp, 4);
    for (uint32_t i = 0; i < MLXD_WQE_AV_SIZE; i += 16)     /* 16-byte pieces never straddle the end */
        memcpy(sq + ((pos + i) & ring_mask), seg + i, 16);
}
