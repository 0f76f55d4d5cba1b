/* faults: every kernel call of open, region registration, CQ creation, QP creation, connect,
 * receiver start, address handle creation and making a UD QP ready fails in turn, with each errno the kernel can return there.  For each fault:
 * the call returns exactly -errno, its message names the refused kernel call (the emulator's
 * method name, e.g. "QP_CREATE", "MODIFY_QP", "MMAP"), nothing was left half made, and after
 * closing what the test made the emulator holds no object, fd or mapping of this process
 * (mlxd_emu.h live counts).
 *
 * Which methods a step uses is not assumed: every method of the emulator's list
 * (emu/kernel/faults.c, docs/emulator.md) is armed in turn; a method the step does not call leaves the
 * step succeeding (the rule is then cleared), and each step must be refused for at least the
 * methods listed in `must` (the calls rdma-core/the kernel make for it: libibverbs device.c,
 * cmd_*.c, providers/mlx5/mlx5.c and verbs.c).  The SRQ steps: mlxd_srq_create (SRQ_CREATE),
 * mlxd_srq_arm_limit (MODIFY_SRQ), mlxd_qp_create of a QP on an SRQ, mlxd_srq_destroy
 * (SRQ_DESTROY: the SRQ then stays until mlxd_close, which frees it).  Memory windows:
 * mlxd_mw_alloc (ALLOC_MW), mlxd_mw_free (MW_DESTROY: the window then stays until mlxd_close).
 *
 * errnos (kernel sources: drivers/infiniband/core/uverbs_*.c, rdma_core.c, umem.c,
 * hw/mlx5/main.c, qp.c, cq.c, mr.c; mlx5_cmd_status_to_err): every call can give EINVAL (bad
 * attribute), ENOMEM (allocation), EFAULT (copy_from/to_user) and EIO (firmware command
 * failure); plus, per method: fd allocation EMFILE/ENFILE (ASYNC_EVENT_ALLOC,
 * CREATE_COMP_CHANNEL), pinning EPERM/EAGAIN (REG_MR: RLIMIT_MEMLOCK, ib_umem_get), resource
 * exhaustion ENOSPC (QP/CQ/UAR/PD numbers: mlx5_cmd_status_to_err MLX5_CMD_STAT_LIM_ERR; UAR's
 * also has its own regression test, uar_alloc_enospc_named),
 * EOPNOTSUPP (GET_CONTEXT, QP_CREATE, MODIFY_QP: unsupported attributes), EAGAIN/EPERM (MMAP:
 * remap_pfn_range, VM_WRITE on a read-only page), EBUSY (UAR_OBJ_ALLOC). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_receiver.h"
#include "mlxd_uverbs.h"

static const char *const methods[] = {
    "GET_CONTEXT", "QUERY_PORT", "QUERY_GID_TABLE", "QUERY_GID_ENTRY", "QUERY_CONTEXT",
    "CQ_CREATE", "QP_CREATE", "REG_DMABUF_MR", "ASYNC_EVENT_ALLOC", "UAR_OBJ_ALLOC",
    "QUERY_DEVICE", "ALLOC_PD", "REG_MR", "CREATE_COMP_CHANNEL", "CREATE_CQ", "CREATE_QP",
    "QUERY_QP", "MODIFY_QP", "EX_QUERY_DEVICE", "EX_MODIFY_QP", "MMAP", "CREATE_AH",
    "SRQ_CREATE", "SRQ_DESTROY", "MODIFY_SRQ", "ALLOC_MW", "MW_DESTROY", "DEALLOC_MW",
};

static int errnos_of(const char *m, int *out)
{
    int n = 0;
    out[n++] = EINVAL; out[n++] = ENOMEM; out[n++] = EFAULT; out[n++] = EIO;
    if (!strcmp(m, "ASYNC_EVENT_ALLOC") || !strcmp(m, "CREATE_COMP_CHANNEL")) { out[n++] = EMFILE; out[n++] = ENFILE; }
    if (!strcmp(m, "REG_MR") || !strcmp(m, "REG_DMABUF_MR")) { out[n++] = EPERM; out[n++] = EAGAIN; }
    if (!strcmp(m, "QP_CREATE") || !strcmp(m, "CREATE_QP") || !strcmp(m, "CQ_CREATE") ||
        !strcmp(m, "CREATE_CQ") || !strcmp(m, "UAR_OBJ_ALLOC") || !strcmp(m, "ALLOC_PD"))
        out[n++] = ENOSPC;
    if (!strcmp(m, "GET_CONTEXT") || !strcmp(m, "QP_CREATE") || !strcmp(m, "MODIFY_QP"))
        out[n++] = EOPNOTSUPP;
    if (!strcmp(m, "MMAP")) { out[n++] = EAGAIN; out[n++] = EPERM; }
    if (!strcmp(m, "UAR_OBJ_ALLOC")) out[n++] = EBUSY;
    return n;
}

enum step { S_OPEN, S_REGISTER, S_CQ, S_QP, S_CONNECT, S_RECEIVER, S_AH, S_UD_READY, S_SRQ, S_SRQ_ARM,
            S_SRQ_QP, S_SRQ_DESTROY, S_MW, S_MW_FREE, S__N };
static const char *const step_names[] = { "mlxd_open", "mlxd_region_register", "mlxd_cq_create",
                                          "mlxd_qp_create", "mlxd_qp_connect", "mlxd_receiver_start",
                                          "mlxd_ah_create", "mlxd_qp_ud_ready", "mlxd_srq_create",
                                          "mlxd_srq_arm_limit", "mlxd_qp_create", "mlxd_srq_destroy",
                                          "mlxd_mw_alloc", "mlxd_mw_free" };

static unsigned net_a, net_b;

static void emu_setup(void)
{
    unsigned v = (unsigned)getpid() * 2654435761u;
    net_a = 1 + (v >> 8) % 250;
    net_b = (v >> 16) & 0xff;
    char spec[128];
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2", net_a, net_b, net_a, net_b);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
    setenv("SYSFS_PATH", mlxd_emu_sysfs_path(), 1);
    mlxd_emu_fail_clear();
}

static void assert_nothing_live(const char *when)
{
    struct mlxd_emu_counts c = { .sz = sizeof c };
    ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
    ck_assert_msg(mlxd_emu_live_total() == 0 && c.event_fds == 0,
                  "%s: live files %u maps %u pd %u mr %u cq %u qp %u uar %u comp %u async %u evfd %u ah %u",
                  when, c.files, c.mappings, c.pd, c.mr, c.cq, c.qp, c.uar, c.comp_channel,
                  c.async_event, c.event_fds, c.ah);
}

/* What a step needs, made before the fault is armed; run; teardown. */
struct ctx {
    struct mlxd_nic *nic, *peer;
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_endpoint ep;
    struct mlxd_receiver *r;
    struct mlxd_srq *srq;
    struct mlxd_mw *mw;
};

static uint8_t buf[1 << 16] __attribute__((aligned(4096)));

static void prepare(enum step s, struct ctx *c)
{
    memset(c, 0, sizeof *c);
    if (s == S_OPEN) return;
    if (s == S_RECEIVER) { c->r = mlxd_receiver_new(); ck_assert_ptr_nonnull(c->r); return; }
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &c->nic), 0);
    if (s == S_REGISTER || s == S_CQ || s == S_AH || s == S_SRQ || s == S_MW) return;
    if (s == S_MW_FREE) { ck_assert_int_eq(mlxd_mw_alloc(c->nic, MLXD_MW_TYPE_2, &c->mw), 0); return; }
    if (s == S_SRQ_ARM || s == S_SRQ_QP || s == S_SRQ_DESTROY) {
        struct mlxd_srq_opts so = { .sz = sizeof so, .depth = 8 };
        ck_assert_int_eq(mlxd_srq_create(c->nic, &so, &c->srq), 0);
        if (s != S_SRQ_QP) return;
    }
    struct mlxd_cq_opts co = { .sz = sizeof co, .events = true };
    ck_assert_int_eq(mlxd_cq_create(c->nic, 32, &co, &c->cq), 0);
    if (s == S_QP) return;
    if (s == S_UD_READY) {
        struct mlxd_qp_opts uo = { .sz = sizeof uo, .type = MLXD_QP_UD, .send_depth = 8, .recv_depth = 8 };
        ck_assert_int_eq(mlxd_qp_create(c->cq, &uo, &c->qp), 0);
        return;
    }
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_RC, .send_depth = 8, .recv_depth = 8 };
    ck_assert_int_eq(mlxd_qp_create(c->cq, &qo, &c->qp), 0);
    ck_assert_int_eq(mlxd_open("mlx5_1", NULL, &c->peer), 0);
    struct mlxd_cq *pcq;
    struct mlxd_qp *pqp;
    ck_assert_int_eq(mlxd_cq_create(c->peer, 32, NULL, &pcq), 0);
    ck_assert_int_eq(mlxd_qp_create(pcq, &qo, &pqp), 0);
    ck_assert_int_eq(mlxd_qp_endpoint(pqp, &c->ep), 0);
}

static int run(enum step s, struct ctx *c)
{
    struct mlxd_region *reg;
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE };
    struct mlxd_cq_opts co = { .sz = sizeof co, .events = true };
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .type = MLXD_QP_UC, .send_depth = 8, .recv_depth = 8 };
    struct mlxd_receiver_opts o = { .sz = sizeof o, .device = "mlx5_0", .buffer = (uintptr_t)buf,
        .buffer_size = sizeof buf, .frame_size = 4096, .page_size = 8192, .pages = 4,
        .metadata_offset = 4096, .peer_ip = "127.0.0.1", .queue_size = 2,
        .mode = MLXD_RECEIVER_EVENT, .recv_depth = 16, .repost_batch = 4 };
    switch (s) {
    case S_OPEN: return mlxd_open("mlx5_0", NULL, &c->nic);
    case S_REGISTER: return mlxd_region_register(c->nic, buf, sizeof buf, &ro, &reg);
    case S_CQ: return mlxd_cq_create(c->nic, 64, &co, &cq);
    case S_QP: return mlxd_qp_create(c->cq, &qo, &qp);
    case S_CONNECT: return mlxd_qp_connect(c->qp, &c->ep, NULL);
    case S_RECEIVER: return mlxd_receiver_start(c->r, &o);
    case S_AH: {
        static const uint8_t gid[16] = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 };
        struct mlxd_ah *ah;
        return mlxd_ah_create(c->nic, gid, NULL, &ah);
    }
    case S_UD_READY: return mlxd_qp_ud_ready(c->qp, 0x11111111);
    case S_SRQ: {
        struct mlxd_srq_opts so = { .sz = sizeof so, .depth = 8 };
        struct mlxd_srq *srq;
        return mlxd_srq_create(c->nic, &so, &srq);
    }
    case S_SRQ_ARM: return mlxd_srq_arm_limit(c->srq, 2);
    case S_SRQ_QP: {
        struct mlxd_qp_opts so = { .sz = sizeof so, .type = MLXD_QP_RC, .send_depth = 8, .srq = c->srq };
        return mlxd_qp_create(c->cq, &so, &qp);
    }
    case S_SRQ_DESTROY: return mlxd_srq_destroy(c->srq);
    case S_MW: return mlxd_mw_alloc(c->nic, MLXD_MW_TYPE_1, &c->mw);
    case S_MW_FREE: return mlxd_mw_free(c->mw);    /* refused: the window stays until mlxd_close */
    case S__N: break;
    }
    return -ENOSYS;
}

static void teardown(enum step s, struct ctx *c, bool ok)
{
    if (s == S_RECEIVER) {
        ck_assert_int_eq(mlxd_receiver_started(c->r), ok);
        ck_assert_int_eq(mlxd_receiver_close(c->r), 0);
        mlxd_receiver_destroy(c->r);
        return;
    }
    if (c->nic) ck_assert_int_eq(mlxd_close(c->nic), 0);
    if (c->peer) ck_assert_int_eq(mlxd_close(c->peer), 0);
}

static void faults_in(enum step s)
{
    const char *name = step_names[s];
    struct ctx c;
    /* the step works without faults */
    prepare(s, &c);
    int rc = run(s, &c);
    ck_assert_msg(rc == 0, "%s without a fault: %d %s", name, rc, mlxd_errmsg());
    teardown(s, &c, true);
    assert_nothing_live(name);
    unsigned faults = 0, used = 0, calls = 0;
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        int errs[16];
        int ne = errnos_of(methods[m], errs);
        /* the nth call of the method (n = 1, 2, ...) until the step makes fewer than n */
        bool more = true;
        for (unsigned n = 1; more && n <= 16; n++) {
            for (int k = 0; k < ne; k++) {
                prepare(s, &c);
                ck_assert_int_eq(mlxd_emu_fail_method(methods[m], n, errs[k]), 0);
                rc = run(s, &c);
                mlxd_emu_fail_clear();
                if (rc == 0) {
                    /* the step makes fewer than n calls of this method */
                    ck_assert_msg(k == 0, "%s: call %u of %s failed with %s but succeeded with %s",
                                  name, n, methods[m], strerror(errs[0]), strerror(errs[k]));
                    teardown(s, &c, true);
                    assert_nothing_live(name);
                    more = false;
                    break;
                }
                if (k == 0) { calls++; if (n == 1) used++; }
                faults++;
                char when[160];
                snprintf(when, sizeof when, "%s, call %u of %s failing with %s", name, n, methods[m],
                         strerror(errs[k]));
                ck_assert_msg(rc == -errs[k], "%s: returned %d (%s)", when, rc, mlxd_errmsg());
                const char *msg = mlxd_errmsg();
                /* the message names the refused call; the legacy MODIFY_QP may be named by the
                 * transition, the mmap by "mmap" */
                bool named = strstr(msg, methods[m]) != NULL ||
                             (!strcmp(methods[m], "MMAP") && strstr(msg, "mmap")) ||
                             (!strcmp(methods[m], "MODIFY_QP") && strstr(msg, "->"));
                ck_assert_msg(named, "%s: message does not name %s: \"%s\"", when, methods[m], msg);
                ck_assert_msg(strstr(msg, strerror(errs[k])), "%s: message lacks \"%s\": \"%s\"",
                              when, strerror(errs[k]), msg);
                /* ... and the step: the driver call that failed (for receiver start, the step of
                 * start that failed: mlxd_open, mlxd_cq_create, ...) */
                bool step_named = false;
                for (int t = 0; t < S__N; t++)
                    if (t != S_RECEIVER && !strncmp(msg, step_names[t], strlen(step_names[t])) &&
                        (s == S_RECEIVER || t == (int)s))
                        step_named = true;
                ck_assert_msg(step_named, "%s: message does not start with the step: \"%s\"", when, msg);
                if (getenv("MLXD_FAULTS_VERBOSE")) fprintf(stderr, "%s: %s\n", when, msg);
                teardown(s, &c, false);
                assert_nothing_live(when);
            }
        }
    }
    fprintf(stderr, "faults: %s: %u kernel methods, %u kernel calls, %u faults injected, each "
            "reported and undone\n", name, used, calls, faults);
    ck_assert_uint_gt(used, 0);
}

/* Regression (uverbs/nic.c mlxd_open + mlxd__uar_alloc): mlxd__uar_alloc returns -ENOSPC both
 * when the kernel refuses UAR_OBJ_ALLOC with ENOSPC (no free UAR: mlx5_cmd_status_to_err of
 * MLX5_CMD_STAT_LIM_ERR) and when the mapping length it reports is below a system page;
 * mlxd_open turns every -ENOSPC into "the kernel's doorbell register mapping is smaller than a
 * system page", so the kernel's refusal is misreported and the refused call is not named.
 * (Found by this suite; fixed in uverbs/nic.c, be594be.) */
START_TEST(uar_alloc_enospc_named)
{
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_emu_fail_method("UAR_OBJ_ALLOC", 1, ENOSPC), 0);
    int rc = mlxd_open("mlx5_0", NULL, &nic);
    mlxd_emu_fail_clear();
    ck_assert_int_eq(rc, -ENOSPC);
    ck_assert_ptr_null(nic);
    ck_assert_msg(strstr(mlxd_errmsg(), "UAR_OBJ_ALLOC"), "message does not name UAR_OBJ_ALLOC: \"%s\"",
                  mlxd_errmsg());
    assert_nothing_live("open, UAR_OBJ_ALLOC failing with ENOSPC");
}
END_TEST

START_TEST(open_faults) { faults_in(S_OPEN); }
END_TEST
START_TEST(register_faults) { faults_in(S_REGISTER); }
END_TEST
START_TEST(cq_create_faults) { faults_in(S_CQ); }
END_TEST
START_TEST(qp_create_faults) { faults_in(S_QP); }
END_TEST
START_TEST(connect_faults) { faults_in(S_CONNECT); }
END_TEST
START_TEST(receiver_start_faults) { faults_in(S_RECEIVER); }
END_TEST
START_TEST(ah_create_faults) { faults_in(S_AH); }
END_TEST
START_TEST(ud_ready_faults) { faults_in(S_UD_READY); }
END_TEST
START_TEST(srq_create_faults) { faults_in(S_SRQ); }
END_TEST
START_TEST(srq_arm_faults) { faults_in(S_SRQ_ARM); }
END_TEST
START_TEST(srq_qp_create_faults) { faults_in(S_SRQ_QP); }
END_TEST
START_TEST(srq_destroy_faults) { faults_in(S_SRQ_DESTROY); }
END_TEST

START_TEST(mw_alloc_faults) { faults_in(S_MW); }
END_TEST

START_TEST(mw_free_faults) { faults_in(S_MW_FREE); }
END_TEST

Suite *faults_suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("each_call_each_errno");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, emu_setup, NULL);
    tcase_add_test(tc, open_faults);
    tcase_add_test(tc, register_faults);
    tcase_add_test(tc, cq_create_faults);
    tcase_add_test(tc, qp_create_faults);
    tcase_add_test(tc, connect_faults);
    tcase_add_test(tc, ah_create_faults);
    tcase_add_test(tc, ud_ready_faults);
    tcase_add_test(tc, srq_create_faults);
    tcase_add_test(tc, srq_arm_faults);
    tcase_add_test(tc, srq_qp_create_faults);
    tcase_add_test(tc, srq_destroy_faults);
    tcase_add_test(tc, mw_alloc_faults);
    tcase_add_test(tc, mw_free_faults);
    tcase_add_test(tc, receiver_start_faults);
    tcase_add_test(tc, uar_alloc_enospc_named);
    suite_add_tcase(s, tc);
    return s;
}
