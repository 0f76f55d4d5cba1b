/* qp_transitions.c: which QP state transitions exist and which attribute-mask bits each requires
 * or allows, for RC and UC QPs.  The facts are those of the kernel's qp_state_table and
 * ib_modify_qp_is_ok() (k: drivers/infiniband/core/verbs.c); the emulator keeps only the RC and
 * UC columns.  STATE is always allowed in addition to required|optional. */
#include <rdma/ib_user_ioctl_verbs.h>
#include "kernel.h"

struct trans { bool valid; uint32_t req[2], opt[2]; };   /* [0] RC, [1] UC */

#define BOTH(x) { x, x }
static const struct trans table[7][7] = {
    [EMU_QPS_RESET] = {
        [EMU_QPS_RESET] = { .valid = true },
        [EMU_QPS_ERR]   = { .valid = true },
        [EMU_QPS_INIT]  = { .valid = true,
            .req = BOTH(EMU_QP_PKEY_INDEX | EMU_QP_PORT | EMU_QP_ACCESS_FLAGS) },
    },
    [EMU_QPS_INIT] = {
        [EMU_QPS_RESET] = { .valid = true },
        [EMU_QPS_ERR]   = { .valid = true },
        [EMU_QPS_INIT]  = { .valid = true,
            .opt = BOTH(EMU_QP_PKEY_INDEX | EMU_QP_PORT | EMU_QP_ACCESS_FLAGS) },
        [EMU_QPS_RTR]   = { .valid = true,
            .req = { EMU_QP_AV | EMU_QP_PATH_MTU | EMU_QP_DEST_QPN | EMU_QP_RQ_PSN |
                     EMU_QP_MAX_DEST_RD_ATOMIC | EMU_QP_MIN_RNR_TIMER,
                     EMU_QP_AV | EMU_QP_PATH_MTU | EMU_QP_DEST_QPN | EMU_QP_RQ_PSN },
            .opt = BOTH(EMU_QP_ALT_PATH | EMU_QP_ACCESS_FLAGS | EMU_QP_PKEY_INDEX) },
    },
    [EMU_QPS_RTR] = {
        [EMU_QPS_RESET] = { .valid = true },
        [EMU_QPS_ERR]   = { .valid = true },
        [EMU_QPS_RTS]   = { .valid = true,
            .req = { EMU_QP_TIMEOUT | EMU_QP_RETRY_CNT | EMU_QP_RNR_RETRY | EMU_QP_SQ_PSN |
                     EMU_QP_MAX_QP_RD_ATOMIC,
                     EMU_QP_SQ_PSN },
            .opt = { EMU_QP_CUR_STATE | EMU_QP_ALT_PATH | EMU_QP_ACCESS_FLAGS |
                     EMU_QP_MIN_RNR_TIMER | EMU_QP_PATH_MIG_STATE,
                     EMU_QP_CUR_STATE | EMU_QP_ALT_PATH | EMU_QP_ACCESS_FLAGS |
                     EMU_QP_PATH_MIG_STATE } },
    },
    [EMU_QPS_RTS] = {
        [EMU_QPS_RESET] = { .valid = true },
        [EMU_QPS_ERR]   = { .valid = true },
        [EMU_QPS_RTS]   = { .valid = true,
            .opt = { EMU_QP_CUR_STATE | EMU_QP_ACCESS_FLAGS | EMU_QP_ALT_PATH |
                     EMU_QP_PATH_MIG_STATE | EMU_QP_MIN_RNR_TIMER,
                     EMU_QP_CUR_STATE | EMU_QP_ACCESS_FLAGS | EMU_QP_ALT_PATH |
                     EMU_QP_PATH_MIG_STATE } },
        [EMU_QPS_SQD]   = { .valid = true, .opt = BOTH(EMU_QP_EN_SQD_ASYNC_NOTIFY) },
    },
    [EMU_QPS_SQD] = {
        [EMU_QPS_RESET] = { .valid = true },
        [EMU_QPS_ERR]   = { .valid = true },
        [EMU_QPS_RTS]   = { .valid = true,
            .opt = { EMU_QP_CUR_STATE | EMU_QP_ALT_PATH | EMU_QP_ACCESS_FLAGS |
                     EMU_QP_MIN_RNR_TIMER | EMU_QP_PATH_MIG_STATE,
                     EMU_QP_CUR_STATE | EMU_QP_ALT_PATH | EMU_QP_ACCESS_FLAGS |
                     EMU_QP_PATH_MIG_STATE } },
        [EMU_QPS_SQD]   = { .valid = true,
            .opt = { EMU_QP_PORT | EMU_QP_AV | EMU_QP_TIMEOUT | EMU_QP_RETRY_CNT |
                     EMU_QP_RNR_RETRY | EMU_QP_MAX_QP_RD_ATOMIC | EMU_QP_MAX_DEST_RD_ATOMIC |
                     EMU_QP_ALT_PATH | EMU_QP_ACCESS_FLAGS | EMU_QP_PKEY_INDEX |
                     EMU_QP_MIN_RNR_TIMER | EMU_QP_PATH_MIG_STATE,
                     EMU_QP_AV | EMU_QP_ALT_PATH | EMU_QP_ACCESS_FLAGS | EMU_QP_PKEY_INDEX |
                     EMU_QP_PATH_MIG_STATE } },
    },
    [EMU_QPS_SQE] = {
        [EMU_QPS_RESET] = { .valid = true },
        [EMU_QPS_ERR]   = { .valid = true },
        [EMU_QPS_RTS]   = { .valid = true,
            .opt = { 0, EMU_QP_CUR_STATE | EMU_QP_ACCESS_FLAGS } },
    },
    [EMU_QPS_ERR] = {
        [EMU_QPS_RESET] = { .valid = true },
        [EMU_QPS_ERR]   = { .valid = true },
    },
};

static int col(unsigned type) { return type == IB_UVERBS_QPT_UC ? 1 : 0; }

bool emu_qp_transition_valid(unsigned cur, unsigned next)
{
    return cur <= EMU_QPS_ERR && next <= EMU_QPS_ERR && table[cur][next].valid;
}

uint32_t emu_qp_req_mask(unsigned cur, unsigned next, unsigned type)
{
    return emu_qp_transition_valid(cur, next) ? table[cur][next].req[col(type)] : 0;
}

uint32_t emu_qp_opt_mask(unsigned cur, unsigned next, unsigned type)
{
    return emu_qp_transition_valid(cur, next) ? table[cur][next].opt[col(type)] : 0;
}

bool emu_modify_qp_is_ok(unsigned cur, unsigned next, unsigned type, uint32_t mask)
{
    if (cur > EMU_QPS_ERR || next > EMU_QPS_ERR) return false;
    /* CUR_STATE may only be given when leaving RTR, RTS, SQD or SQE */
    if ((mask & EMU_QP_CUR_STATE) && cur != EMU_QPS_RTR && cur != EMU_QPS_RTS &&
        cur != EMU_QPS_SQD && cur != EMU_QPS_SQE)
        return false;
    if (!table[cur][next].valid) return false;
    uint32_t req = table[cur][next].req[col(type)], opt = table[cur][next].opt[col(type)];
    if ((mask & req) != req) return false;
    if (mask & ~(req | opt | EMU_QP_STATE)) return false;
    return true;
}
