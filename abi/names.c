/* names.c: name tables for CQE opcodes, WQE opcodes, syndromes and ibv_wc_status (mlxd_names.h).
 * Values: rdma-core mlx5dv.h and verbs.h (checked in abi_assert.c); explanations in our words. */
#include <stddef.h>
#include <string.h>
#include "mlxd_abi.h"
#include "mlxd_names.h"

struct entry { unsigned value; const char *name, *text; };

static const struct entry cqe_opcodes[] = {
    { MLXD_CQE_REQ,           "REQ",           "requester completion" },
    { MLXD_CQE_RESP_WR_IMM,   "RESP_WR_IMM",   "responder: RDMA WRITE with immediate" },
    { MLXD_CQE_RESP_SEND,     "RESP_SEND",     "responder: SEND" },
    { MLXD_CQE_RESP_SEND_IMM, "RESP_SEND_IMM", "responder: SEND with immediate" },
    { MLXD_CQE_RESP_SEND_INV, "RESP_SEND_INV", "responder: SEND with invalidate" },
    { MLXD_CQE_RESIZE_CQ,     "RESIZE_CQ",     "CQ resize marker" },
    { MLXD_CQE_NO_PACKET,     "NO_PACKET",     "no packet (striding RQ filler)" },
    { MLXD_CQE_SIG_ERR,       "SIG_ERR",       "signature error" },
    { MLXD_CQE_REQ_ERR,       "REQ_ERR",       "requester error" },
    { MLXD_CQE_RESP_ERR,      "RESP_ERR",      "responder error" },
    { MLXD_CQE_INVALID,       "INVALID",       "invalid (never written by hardware)" },
};

static const struct entry wqe_opcodes[] = {
    { MLXD_WQE_NOP,              "NOP",              "NOP" },
    { MLXD_WQE_SEND_INVAL,       "SEND_INVAL",       "SEND with invalidate" },
    { MLXD_WQE_RDMA_WRITE,       "RDMA_WRITE",       "RDMA WRITE" },
    { MLXD_WQE_RDMA_WRITE_IMM,   "RDMA_WRITE_IMM",   "RDMA WRITE with immediate" },
    { MLXD_WQE_SEND,             "SEND",             "SEND" },
    { MLXD_WQE_SEND_IMM,         "SEND_IMM",         "SEND with immediate" },
    { MLXD_WQE_TSO,              "TSO",              "TCP segmentation offload (LSO)" },
    { MLXD_WQE_RDMA_READ,        "RDMA_READ",        "RDMA READ" },
    { MLXD_WQE_ATOMIC_CS,        "ATOMIC_CS",        "atomic compare and swap" },
    { MLXD_WQE_ATOMIC_FA,        "ATOMIC_FA",        "atomic fetch and add" },
    { MLXD_WQE_ATOMIC_MASKED_CS, "ATOMIC_MASKED_CS", "masked atomic compare and swap" },
    { MLXD_WQE_ATOMIC_MASKED_FA, "ATOMIC_MASKED_FA", "masked atomic fetch and add" },
    { MLXD_WQE_FMR,              "FMR",              "fast memory registration" },
    { MLXD_WQE_LOCAL_INVAL,      "LOCAL_INVAL",      "local invalidate" },
    { MLXD_WQE_CONFIG_CMD,       "CONFIG_CMD",       "configuration command" },
    { MLXD_WQE_SET_PSV,          "SET_PSV",          "set protection signature value" },
    { MLXD_WQE_UMR,              "UMR",              "user-mode memory registration" },
    { MLXD_WQE_TAG_MATCHING,     "TAG_MATCHING",     "tag matching list operation" },
    { MLXD_WQE_FLOW_TBL_ACCESS,  "FLOW_TBL_ACCESS",  "flow table access" },
    { MLXD_WQE_MMO,              "MMO",              "memory-to-memory offload" },
};

struct synd { unsigned value; const char *name, *words, *explain; int wc; };

static const struct synd syndromes[] = {
    { MLXD_SYND_LOCAL_LENGTH_ERR, "LOCAL_LENGTH_ERR", "local length error",
      "The message did not fit: a receive buffer shorter than the incoming message, or a send "
      "whose length or layout the QP cannot carry (e.g. over the MTU for UD, an empty inline header).",
      MLXD_WC_LOC_LEN_ERR },
    { MLXD_SYND_LOCAL_QP_OP_ERR, "LOCAL_QP_OP_ERR", "local QP operation error",
      "The NIC found the WQE itself inconsistent: a malformed or overwritten WQE (bad opcode, ds, "
      "QPN), usually two writers racing on one send queue or a WQE built wrongly.",
      MLXD_WC_LOC_QP_OP_ERR },
    { MLXD_SYND_LOCAL_PROT_ERR, "LOCAL_PROT_ERR", "local protection error",
      "A local buffer failed its memory-key check: wrong lkey, a buffer outside or spanning past the "
      "registered MR, missing access rights, or memory unmapped/deregistered while in use (IOMMU faults).",
      MLXD_WC_LOC_PROT_ERR },
    { MLXD_SYND_WR_FLUSH_ERR, "WR_FLUSH_ERR", "Work Request Flushed Error",
      "The QP was already in the error state and this WQE was flushed without being executed; "
      "look for the first completion with a different status.",
      MLXD_WC_WR_FLUSH_ERR },
    { MLXD_SYND_MW_BIND_ERR, "MW_BIND_ERR", "memory window bind error",
      "A memory window bind failed: wrong MR, access rights or range.",
      MLXD_WC_MW_BIND_ERR },
    { MLXD_SYND_BAD_RESP_ERR, "BAD_RESP_ERR", "bad response error",
      "The responder sent an unexpected transport response (protocol error on the wire or a "
      "peer that reset/re-created its QP).",
      MLXD_WC_BAD_RESP_ERR },
    { MLXD_SYND_LOCAL_ACCESS_ERR, "LOCAL_ACCESS_ERR", "local access error",
      "An incoming RDMA WRITE with immediate or SEND failed the local access check on the receive side.",
      MLXD_WC_LOC_ACCESS_ERR },
    { MLXD_SYND_REMOTE_INVAL_REQ_ERR, "REMOTE_INVAL_REQ_ERR", "remote invalid request error",
      "The responder rejected the request as invalid: operation not enabled on its QP (remote "
      "read/write/atomic access flags), message longer than it accepts, or a DC target refusing it.",
      MLXD_WC_REM_INV_REQ_ERR },
    { MLXD_SYND_REMOTE_ACCESS_ERR, "REMOTE_ACCESS_ERR", "remote access error",
      "The peer refused the RDMA access: wrong or stale rkey, address/length outside the remote MR, "
      "MR without remote access rights, or memory the peer already deregistered.",
      MLXD_WC_REM_ACCESS_ERR },
    { MLXD_SYND_REMOTE_OP_ERR, "REMOTE_OP_ERR", "remote operation error",
      "The responder could not complete the operation (e.g. its receive WQE was bad or its own "
      "protection check failed).",
      MLXD_WC_REM_OP_ERR },
    { MLXD_SYND_TRANSPORT_RETRY_EXC_ERR, "TRANSPORT_RETRY_EXC_ERR", "transport retry counter exceeded",
      "No acknowledgement within timeout x retry_cnt: the peer is gone, its QP is in error, or "
      "the path drops packets (link, PFC/ECN, wrong GID/MTU).",
      MLXD_WC_RETRY_EXC_ERR },
    { MLXD_SYND_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR", "RNR retry counter exceeded",
      "The responder kept answering receiver-not-ready: it posted no receive WQE in time.",
      MLXD_WC_RNR_RETRY_EXC_ERR },
    { MLXD_SYND_REMOTE_ABORTED_ERR, "REMOTE_ABORTED_ERR", "remote aborted error",
      "The responder aborted the operation; with vendor syndrome 0x93 it is an on-demand-paging "
      "page fault abort.",
      MLXD_WC_REM_ABORT_ERR },
};

static const char *const wc_names[] = {
    "IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR",
    "IBV_WC_REM_OP_ERR", "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR",
    "IBV_WC_LOC_RDD_VIOL_ERR", "IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR",
    "IBV_WC_INV_EECN_ERR", "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
    "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR", "IBV_WC_TM_ERR", "IBV_WC_TM_RNDV_INCOMPLETE",
};
/* The words ibv_wc_status_str() is known to print for each status (these strings are what users
 * grep for in logs). */
static const char *const wc_texts[] = {
    "success", "local length error", "local QP operation error", "local EE context operation error",
    "local protection error", "Work Request Flushed Error", "memory management operation error",
    "bad response error", "local access error", "remote invalid request error",
    "remote access error", "remote operation error", "transport retry counter exceeded",
    "RNR retry counter exceeded", "local RDD violation error", "remote invalid RD request",
    "aborted error", "invalid EE context number", "invalid EE context state",
    "fatal error", "response timeout error", "general error", "TM error",
    "TM software rendezvous",
};
_Static_assert(sizeof wc_names / sizeof wc_names[0] == MLXD_WC_TM_RNDV_INCOMPLETE + 1, "wc_names");
_Static_assert(sizeof wc_texts / sizeof wc_texts[0] == MLXD_WC_TM_RNDV_INCOMPLETE + 1, "wc_texts");

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct entry *find(const struct entry *t, size_t n, unsigned v)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].value == v) return &t[i];
    return NULL;
}
static const struct synd *find_synd(unsigned v)
{
    for (size_t i = 0; i < COUNT(syndromes); i++)
        if (syndromes[i].value == v) return &syndromes[i];
    return NULL;
}

const char *mlxd_cqe_opcode_name(unsigned op)
{
    const struct entry *e = find(cqe_opcodes, COUNT(cqe_opcodes), op);
    return e ? e->name : NULL;
}
const char *mlxd_cqe_opcode_text(unsigned op)
{
    const struct entry *e = find(cqe_opcodes, COUNT(cqe_opcodes), op);
    return e ? e->text : NULL;
}
const char *mlxd_wqe_opcode_name(unsigned op)
{
    const struct entry *e = find(wqe_opcodes, COUNT(wqe_opcodes), op);
    return e ? e->name : NULL;
}
const char *mlxd_wqe_opcode_text(unsigned op)
{
    const struct entry *e = find(wqe_opcodes, COUNT(wqe_opcodes), op);
    return e ? e->text : NULL;
}
const char *mlxd_syndrome_name(unsigned s)
{
    const struct synd *e = find_synd(s);
    return e ? e->name : NULL;
}
const char *mlxd_syndrome_text(unsigned s)
{
    /* The words of the status verbs reports for it, so that the text matches users' logs. */
    const struct synd *e = find_synd(s);
    return e ? mlxd_wc_status_text(e->wc) : NULL;
}
const char *mlxd_syndrome_explain(unsigned s)
{
    const struct synd *e = find_synd(s);
    return e ? e->explain : NULL;
}
int mlxd_syndrome_to_wc_status(unsigned s)
{
    const struct synd *e = find_synd(s);
    return e ? e->wc : MLXD_WC_GENERAL_ERR;
}
const char *mlxd_wc_status_name(int st)
{
    return st >= 0 && (size_t)st < COUNT(wc_names) ? wc_names[st] : NULL;
}
const char *mlxd_wc_status_text(int st)
{
    return st >= 0 && (size_t)st < COUNT(wc_texts) ? wc_texts[st] : NULL;
}
int mlxd_wc_status_to_syndrome(int st)
{
    /* the inverse of the switch in mlx5_handle_error_cqe: one syndrome per status there, except
     * IBV_WC_GENERAL_ERR, which every unlisted syndrome gives */
    if (st == MLXD_WC_GENERAL_ERR) return -1;
    for (size_t i = 0; i < COUNT(syndromes); i++)
        if (syndromes[i].wc == st) return (int)syndromes[i].value;
    return -1;
}
int mlxd_wc_status_from_text(const char *s)
{
    if (!s) return -1;
    int best = -1;
    size_t best_len = 0;
    for (size_t i = 0; i < COUNT(wc_texts); i++) {
        const char *const cand[2] = { wc_texts[i], wc_names[i] };
        for (int k = 0; k < 2; k++) {
            size_t n = strlen(cand[k]);
            if (n > best_len && !strncmp(s, cand[k], n)) { best = (int)i; best_len = n; }
        }
    }
    return best;
}
