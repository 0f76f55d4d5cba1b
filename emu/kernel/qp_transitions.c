/* qp_transitions.c: which QP state transitions exist and which attribute-mask bits each requires
 * or allows, for RC, UC and UD QPs.  The facts are those of the kernel's qp_state_table and
 * ib_modify_qp_is_ok() (k: drivers/infiniband/core/verbs.c); the emulator keeps the RC, UC and
 * UD columns (the transitions are the same for all three; UD's masks are in `ud` below).  STATE
 * is always allowed in addition to required|optional. */
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

/* The IB_QPT_UD column of qp_state_table: a datagram QP has no address vector, PSN on receive
 * or access flags; its Q_Key is set at INIT and may change later. */
struct ud_masks { uint32_t req, opt; };
static const struct ud_masks ud[7][7] = {
    [EMU_QPS_RESET][EMU_QPS_INIT] = { EMU_QP_PKEY_INDEX | EMU_QP_PORT | EMU_QP_QKEY, 0 },
    [EMU_QPS_INIT][EMU_QPS_INIT]  = { 0, EMU_QP_PKEY_INDEX | EMU_QP_PORT | EMU_QP_QKEY },
    [EMU_QPS_INIT][EMU_QPS_RTR]   = { 0, EMU_QP_PKEY_INDEX | EMU_QP_QKEY },
    [EMU_QPS_RTR][EMU_QPS_RTS]    = { EMU_QP_SQ_PSN, EMU_QP_CUR_STATE | EMU_QP_QKEY },
    [EMU_QPS_RTS][EMU_QPS_RTS]    = { 0, EMU_QP_CUR_STATE | EMU_QP_QKEY },
    [EMU_QPS_RTS][EMU_QPS_SQD]    = { 0, EMU_QP_EN_SQD_ASYNC_NOTIFY },
    [EMU_QPS_SQD][EMU_QPS_RTS]    = { 0, EMU_QP_CUR_STATE | EMU_QP_QKEY },
    [EMU_QPS_SQD][EMU_QPS_SQD]    = { 0, EMU_QP_PKEY_INDEX | EMU_QP_QKEY },
    [EMU_QPS_SQE][EMU_QPS_RTS]    = { 0, EMU_QP_CUR_STATE | EMU_QP_QKEY },
};

static int col(unsigned type) { return type == IB_UVERBS_QPT_UC ? 1 : 0; }

static uint32_t req_of(unsigned cur, unsigned next, unsigned type)
{
    return type == IB_UVERBS_QPT_UD ? ud[cur][next].req : table[cur][next].req[col(type)];
}

static uint32_t opt_of(unsigned cur, unsigned next, unsigned type)
{
    return type == IB_UVERBS_QPT_UD ? ud[cur][next].opt : table[cur][next].opt[col(type)];
}

bool emu_qp_transition_valid(unsigned cur, unsigned next)
{
    return cur <= EMU_QPS_ERR && next <= EMU_QPS_ERR && table[cur][next].valid;
}

uint32_t emu_qp_req_mask(unsigned cur, unsigned next, unsigned type)
{
    return emu_qp_transition_valid(cur, next) ? req_of(cur, next, type) : 0;
}

uint32_t emu_qp_opt_mask(unsigned cur, unsigned next, unsigned type)
{
    return emu_qp_transition_valid(cur, next) ? opt_of(cur, next, type) : 0;
}

bool emu_modify_qp_is_ok(unsigned cur, unsigned next, unsigned type, uint32_t mask)
{
    if (cur > EMU_QPS_ERR || next > EMU_QPS_ERR) return false;
    /* CUR_STATE may only be given when leaving RTR, RTS, SQD or SQE */
    if ((mask & EMU_QP_CUR_STATE) && cur != EMU_QPS_RTR && cur != EMU_QPS_RTS &&
        cur != EMU_QPS_SQD && cur != EMU_QPS_SQE)
        return false;
    if (!table[cur][next].valid) return false;
    uint32_t req = req_of(cur, next, type), opt = opt_of(cur, next, type);
    if ((mask & req) != req) return false;
    if (mask & ~(req | opt | EMU_QP_STATE)) return false;
    return true;
}
