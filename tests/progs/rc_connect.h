/* rc_connect.h: RESET/INIT -> RTR -> RTS of an RC QP to a peer QP of this host, as the rdma-core
 * test programs here connect them (RoCE v2 GID index 3, 1024-byte path MTU, ack timeout code 20,
 * 7 retries, RNR retries forever).  The includer defines FAIL(...) (print, exit 1). */
#ifndef MLXD_TESTS_RC_CONNECT_H
#define MLXD_TESTS_RC_CONNECT_H
#include <infiniband/verbs.h>

static void connect_to(struct ibv_qp *qp, const struct ibv_qp *peer, const union ibv_gid *gid)
{
    struct ibv_qp_attr m = {
        .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer->qp_num,
        .max_dest_rd_atomic = 1, .min_rnr_timer = 1,
        .ah_attr = {.is_global = 1, .port_num = 1, .grh = {.dgid = *gid, .sgid_index = 3, .hop_limit = 1}},
    };
    if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        FAIL("RTR");
    m.qp_state = IBV_QPS_RTS;
    m.timeout = 20; m.retry_cnt = 7; m.rnr_retry = 7; m.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
        FAIL("RTS");
}
#endif
