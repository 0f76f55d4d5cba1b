/* MODIFY_QP on the emulated kernel: every transition, valid and invalid, for RC and UC.
 *
 * The expected table below is written out from the kernel's qp_state_table
 * (drivers/infiniband/core/verbs.c), RC and UC columns, as checked by ib_modify_qp_is_ok():
 *   - a transition absent from the table -> EINVAL
 *   - a required attribute missing, or an attribute outside required|optional|STATE -> EINVAL
 *   - CUR_STATE only when leaving RTR, RTS, SQD or SQE
 * plus the uverbs/mlx5 checks on values (drivers/infiniband/core/uverbs_cmd.c modify_qp,
 * core/verbs.c _ib_modify_qp / rdma_check_ah_attr, hw/mlx5/qp.c mlx5_ib_modify_qp). */
#include <check.h>
#include "test_emu_kernel.h"

enum { RESET, INIT, RTR, RTS, SQD, SQE, ERR };
enum {
    STATE = 1 << 0, CUR_STATE = 1 << 1, EN_SQD = 1 << 2, ACCESS = 1 << 3, PKEY = 1 << 4,
    PORT = 1 << 5, QKEY = 1 << 6, AV = 1 << 7, MTU = 1 << 8, TIMEOUT = 1 << 9, RETRY = 1 << 10,
    RNR_RETRY = 1 << 11, RQ_PSN = 1 << 12, RD_ATOMIC = 1 << 13, ALT_PATH = 1 << 14,
    MIN_RNR = 1 << 15, SQ_PSN = 1 << 16, DEST_RD_ATOMIC = 1 << 17, MIG_STATE = 1 << 18,
    CAP = 1 << 19, DEST_QPN = 1 << 20, RATE_LIMIT = 1 << 25,
};

struct tr { int cur, next; uint32_t rc_req, uc_req, rc_opt, uc_opt; };

/* qp_state_table, RC and UC columns (k: core/verbs.c) */
static const struct tr table[] = {
    { RESET, RESET, 0, 0, 0, 0 },
    { RESET, INIT, PKEY | PORT | ACCESS, PKEY | PORT | ACCESS, 0, 0 },
    { RESET, ERR, 0, 0, 0, 0 },
    { INIT, RESET, 0, 0, 0, 0 },
    { INIT, ERR, 0, 0, 0, 0 },
    { INIT, INIT, 0, 0, PKEY | PORT | ACCESS, PKEY | PORT | ACCESS },
    { INIT, RTR, AV | MTU | DEST_QPN | RQ_PSN | DEST_RD_ATOMIC | MIN_RNR, AV | MTU | DEST_QPN | RQ_PSN,
      ALT_PATH | ACCESS | PKEY, ALT_PATH | ACCESS | PKEY },
    { RTR, RESET, 0, 0, 0, 0 },
    { RTR, ERR, 0, 0, 0, 0 },
    { RTR, RTS, TIMEOUT | RETRY | RNR_RETRY | SQ_PSN | RD_ATOMIC, SQ_PSN,
      CUR_STATE | ALT_PATH | ACCESS | MIN_RNR | MIG_STATE, CUR_STATE | ALT_PATH | ACCESS | MIG_STATE },
    { RTS, RESET, 0, 0, 0, 0 },
    { RTS, ERR, 0, 0, 0, 0 },
    { RTS, RTS, 0, 0, CUR_STATE | ACCESS | ALT_PATH | MIG_STATE | MIN_RNR,
      CUR_STATE | ACCESS | ALT_PATH | MIG_STATE },
    { RTS, SQD, 0, 0, EN_SQD, EN_SQD },
    { SQD, RESET, 0, 0, 0, 0 },
    { SQD, ERR, 0, 0, 0, 0 },
    { SQD, RTS, 0, 0, CUR_STATE | ALT_PATH | ACCESS | MIN_RNR | MIG_STATE,
      CUR_STATE | ALT_PATH | ACCESS | MIG_STATE },
    { SQD, SQD, 0, 0, PORT | AV | TIMEOUT | RETRY | RNR_RETRY | RD_ATOMIC | DEST_RD_ATOMIC |
      ALT_PATH | ACCESS | PKEY | MIN_RNR | MIG_STATE, AV | ALT_PATH | ACCESS | PKEY | MIG_STATE },
    { SQE, RESET, 0, 0, 0, 0 },
    { SQE, ERR, 0, 0, 0, 0 },
    { SQE, RTS, 0, 0, 0, CUR_STATE | ACCESS },
    { ERR, RESET, 0, 0, 0, 0 },
    { ERR, ERR, 0, 0, 0, 0 },
};

static const struct tr *lookup(int cur, int next)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].cur == cur && table[i].next == next) return &table[i];
    return NULL;
}

static struct tk_env env;
static struct tk_mem qmem;

/* A modify request with every field at a valid value (RoCE v2: global AV, GID index 3, port 1);
 * the mask decides what the kernel looks at. */
static void fill(struct ib_uverbs_modify_qp *m, uint32_t qp, int next, uint32_t mask, uint32_t qpn)
{
    memset(m, 0, sizeof *m);
    m->qp_handle = qp;
    m->attr_mask = mask;
    m->qp_state = (uint8_t)next;
    m->pkey_index = 0;
    m->port_num = 1;
    m->qp_access_flags = IB_UVERBS_ACCESS_LOCAL_WRITE | IB_UVERBS_ACCESS_REMOTE_WRITE;
    m->path_mtu = 3;
    m->dest_qp_num = qpn;
    m->rq_psn = 0x123;
    m->sq_psn = 0x456;
    m->max_dest_rd_atomic = 1;
    m->max_rd_atomic = 1;
    m->min_rnr_timer = 12;
    m->timeout = 14;
    m->retry_cnt = 7;
    m->rnr_retry = 7;
    m->dest.is_global = 1;
    m->dest.sgid_index = 3;
    m->dest.hop_limit = 64;
    m->dest.port_num = 1;
    m->dest.dgid[10] = m->dest.dgid[11] = 0xff;
    m->dest.dgid[12] = 127;
    m->dest.dgid[15] = 1;
    m->alt_port_num = 1;
    m->alt_dest.port_num = 1;
    m->alt_dest.is_global = 1;
    m->alt_dest.sgid_index = 3;
}

static uint32_t req_of(const struct tr *t, uint32_t type) { return type == IB_UVERBS_QPT_RC ? t->rc_req : t->uc_req; }
static uint32_t opt_of(const struct tr *t, uint32_t type) { return type == IB_UVERBS_QPT_RC ? t->rc_opt : t->uc_opt; }

static int step(uint32_t qp, uint32_t qpn, int next, uint32_t mask)
{
    struct ib_uverbs_modify_qp m;
    fill(&m, qp, next, mask, qpn);
    return tk_modify_qp(env.fd, &m);
}

/* Drives a fresh QP of the type to state s along RESET-INIT-RTR-RTS(-SQD), or to ERR. */
static uint32_t qp_in_state(uint32_t type, int s, uint32_t *qpn)
{
    struct tk_qp_opts o;
    tk_qp_defaults(&o, type, env.pd, env.cq, env.uar_page);
    uint32_t h = 0;
    ck_assert_int_eq(tk_create_qp(env.fd, &o, &qmem, &h, qpn), 0);
    static const int path[] = { INIT, RTR, RTS, SQD };
    if (s == ERR) {
        ck_assert_int_eq(step(h, *qpn, ERR, STATE), 0);
    } else {
        for (int i = 0; i < 4 && s != RESET; i++) {
            const struct tr *t = lookup(i ? path[i - 1] : RESET, path[i]);
            ck_assert_int_eq(step(h, *qpn, path[i], STATE | req_of(t, type)), 0);
            if (path[i] == s) break;
        }
    }
    ck_assert_int_eq(tk_query_qp_state(env.fd, h), s);
    return h;
}

static void setup(void)
{
    tk_unique_devices();
    tk_env_open(&env, 0);
    tk_mem_alloc(&qmem, 16 * 16 + 16 * 64);
}

static void teardown(void)
{
    close(env.fd);
}

static const int reachable[] = { RESET, INIT, RTR, RTS, SQD, ERR };   /* SQE only by hardware */

static void all_transitions(uint32_t type)
{
    for (size_t a = 0; a < sizeof reachable / sizeof reachable[0]; a++)
        for (int next = RESET; next <= ERR; next++) {
            int cur = reachable[a];
            const struct tr *t = lookup(cur, next);
            uint32_t qpn, h = qp_in_state(type, cur, &qpn);
            uint32_t mask = STATE | (t ? req_of(t, type) : 0);
            int r = step(h, qpn, next, mask);
            ck_assert_msg(r == (t ? 0 : -EINVAL), "type %u %d->%d mask 0x%x: got %d", type, cur, next, mask, r);
            ck_assert_int_eq(tk_query_qp_state(env.fd, h), t ? next : cur);
            ck_assert_int_eq(tk_destroy_qp(env.fd, h), 0);
        }
}

START_TEST(rc_all_transitions) { all_transitions(IB_UVERBS_QPT_RC); }
END_TEST
START_TEST(uc_all_transitions) { all_transitions(IB_UVERBS_QPT_UC); }
END_TEST

/* For every valid transition: each required bit missing -> EINVAL; every optional bit accepted;
 * a bit outside required|optional -> EINVAL. */
static void masks(uint32_t type)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const struct tr *t = &table[i];
        if (t->cur == SQE) continue;                      /* unreachable by MODIFY_QP */
        uint32_t req = req_of(t, type), opt = opt_of(t, type);
        for (int b = 0; b < 21; b++) {
            uint32_t bit = 1u << b;
            if (bit == STATE) continue;
            uint32_t qpn, h = qp_in_state(type, t->cur, &qpn);
            int want;
            uint32_t mask;
            if (req & bit) { mask = (STATE | req) & ~bit; want = -EINVAL; }
            else if (opt & bit) { mask = STATE | req | bit; want = 0; }
            else { mask = STATE | req | bit; want = -EINVAL; }
            if (bit == CUR_STATE && (opt & bit)) {
                /* cur_qp_state must then name the QP's state */
                struct ib_uverbs_modify_qp m;
                fill(&m, h, t->next, mask, qpn);
                m.cur_qp_state = (uint8_t)t->cur;
                ck_assert_int_eq(tk_modify_qp(env.fd, &m), 0);
            } else {
                int r = step(h, qpn, t->next, mask);
                ck_assert_msg(r == want, "type %u %d->%d bit 0x%x mask 0x%x: got %d want %d", type,
                              t->cur, t->next, bit, mask, r, want);
            }
            ck_assert_int_eq(tk_destroy_qp(env.fd, h), 0);
        }
    }
}

START_TEST(rc_masks) { masks(IB_UVERBS_QPT_RC); }
END_TEST
START_TEST(uc_masks) { masks(IB_UVERBS_QPT_UC); }
END_TEST

/* Without STATE the QP stays where it is and the same-state entry of the table applies:
 * RTS -> RTS with optional attributes is fine, RTR -> RTR does not exist. */
START_TEST(no_state_bit)
{
    uint32_t qpn, h = qp_in_state(IB_UVERBS_QPT_RC, RTS, &qpn);
    ck_assert_int_eq(step(h, qpn, RTS, MIN_RNR), 0);
    ck_assert_int_eq(tk_query_qp_state(env.fd, h), RTS);
    uint32_t h2 = qp_in_state(IB_UVERBS_QPT_RC, RTR, &qpn);
    ck_assert_int_eq(step(h2, qpn, RTR, ACCESS), -EINVAL);
    /* CUR_STATE from INIT is refused by ib_modify_qp_is_ok */
    uint32_t h3 = qp_in_state(IB_UVERBS_QPT_UC, INIT, &qpn);
    struct ib_uverbs_modify_qp m;
    fill(&m, h3, INIT, STATE | CUR_STATE, qpn);
    m.cur_qp_state = INIT;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
}
END_TEST

/* Values the uverbs core and mlx5 reject, one at a time on an otherwise valid INIT -> RTR. */
START_TEST(roce_and_values)
{
    const uint32_t rtr = STATE | AV | MTU | DEST_QPN | RQ_PSN | DEST_RD_ATOMIC | MIN_RNR;
    uint32_t qpn, h = qp_in_state(IB_UVERBS_QPT_RC, INIT, &qpn);
    struct ib_uverbs_modify_qp m;
    /* RoCE: an AH without GRH -> EINVAL (rdma_check_ah_attr) */
    fill(&m, h, RTR, rtr, qpn); m.dest.is_global = 0;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    /* AV port must be a valid port and the QP's port (uverbs_cmd.c modify_qp) */
    fill(&m, h, RTR, rtr, qpn); m.dest.port_num = 2;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    fill(&m, h, RTR, rtr | PORT, qpn); m.port_num = 2; m.dest.port_num = 2;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    /* source GID index past the table -> EINVAL; an empty entry -> ENODATA (rdma_get_gid_attr) */
    fill(&m, h, RTR, rtr, qpn); m.dest.sgid_index = 200;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    fill(&m, h, RTR, rtr, qpn); m.dest.sgid_index = 9;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -ENODATA);
    /* mlx5_ib_modify_qp: path MTU outside 256..4096, rd_atomic beyond the device, pkey index
     * beyond the table (1 entry on RoCE) -> EINVAL */
    fill(&m, h, RTR, rtr, qpn); m.path_mtu = 6;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    fill(&m, h, RTR, rtr, qpn); m.path_mtu = 0;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    fill(&m, h, RTR, rtr, qpn); m.max_dest_rd_atomic = 17;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    fill(&m, h, RTR, rtr | PKEY, qpn); m.pkey_index = 1;
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    /* qp_state beyond ERR -> EINVAL; unknown handle -> EINVAL (write path lookup) */
    fill(&m, h, 7, STATE, qpn);
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    fill(&m, 999, RTR, rtr, qpn);
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EINVAL);
    /* the non-EX command rejects mask bits above DEST_QPN -> EOPNOTSUPP */
    fill(&m, h, RTR, rtr | RATE_LIMIT, qpn);
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), -EOPNOTSUPP);
    /* nothing above changed the QP */
    ck_assert_int_eq(tk_query_qp_state(env.fd, h), INIT);
    fill(&m, h, RTR, rtr, qpn);
    ck_assert_int_eq(tk_modify_qp(env.fd, &m), 0);
    /* the attributes stick: QUERY_QP shows them */
    struct ib_uverbs_query_qp req = { .qp_handle = h };
    struct ib_uverbs_query_qp_resp resp;
    ck_assert_int_eq(tk_invoke(env.fd, IB_USER_VERBS_CMD_QUERY_QP, &req, sizeof req, &resp, sizeof resp, NULL, 0, NULL, 0), 0);
    ck_assert_uint_eq(resp.qp_state, RTR);
    ck_assert_uint_eq(resp.dest_qp_num, qpn);
    ck_assert_uint_eq(resp.rq_psn, 0x123);
    ck_assert_uint_eq(resp.path_mtu, 3);
    ck_assert_uint_eq(resp.dest.sgid_index, 3);
    /* the same through EX_MODIFY_QP: RATE_LIMIT is known there but mlx5 only supports it on
     * raw-packet QPs -> EOPNOTSUPP; a plain RTR -> RTS works */
    struct ib_uverbs_ex_modify_qp ex;
    struct ib_uverbs_ex_modify_qp_resp exr;
    fill(&ex.base, h, RTS, STATE | TIMEOUT | RETRY | RNR_RETRY | SQ_PSN | RD_ATOMIC | RATE_LIMIT, qpn);
    ex.rate_limit = 1000;
    ex.reserved = 0;
    uint32_t cmd = IB_USER_VERBS_EX_CMD_MODIFY_QP | IB_USER_VERBS_CMD_FLAG_EXTENDED;
    ck_assert_int_eq(tk_invoke(env.fd, cmd, &ex, sizeof ex, &exr, sizeof exr, NULL, 0, NULL, 0), -EOPNOTSUPP);
    ex.base.attr_mask &= ~(uint32_t)RATE_LIMIT;
    ck_assert_int_eq(tk_invoke(env.fd, cmd, &ex, sizeof ex, &exr, sizeof exr, NULL, 0, NULL, 0), 0);
    ck_assert_uint_eq(exr.response_length, sizeof exr);
    ck_assert_int_eq(tk_query_qp_state(env.fd, h), RTS);
}
END_TEST

Suite *emu_kernel_qp_suite(void)
{
    Suite *s = suite_create("emu_kernel_qp");
    TCase *tc = tcase_create("modify_qp");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, rc_all_transitions);
    tcase_add_test(tc, uc_all_transitions);
    tcase_add_test(tc, rc_masks);
    tcase_add_test(tc, uc_masks);
    tcase_add_test(tc, no_state_bit);
    tcase_add_test(tc, roce_and_values);
    suite_add_tcase(s, tc);
    return s;
}
