/* Nothing leaks: after close, and after a fault injected at each kernel call (ioctl, write,
 * mmap on the verbs fd) of open, region registration, CQ creation, QP creation and connect, the
 * emulated kernel holds no object, fd or mapping of this process (mlxd_emu.h live counts); and
 * each failure names the refused call.  Also: the open errors the emulator can produce (port
 * down, a kernel refusal). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "mlxd_emu.h"
#include "mlxd_error.h"
#include "mlxd_mlx5.h"
#include "mlxd_uverbs.h"

static char spec[128];

static void emu_setup(void)
{
    unsigned v = (unsigned)getpid() * 2654435761u;
    snprintf(spec, sizeof spec, "mlx5_0:127.%u.%u.1,mlx5_1:127.%u.%u.2", 1 + (v >> 8) % 250, (v >> 16) & 0xff,
             1 + (v >> 8) % 250, (v >> 16) & 0xff);
    ck_assert_int_eq(mlxd_emu_configure(spec), 0);
    mlxd_emu_fail_clear();
}

static unsigned long long calls(void)
{
    struct mlxd_emu_counts c = { .sz = sizeof c };
    ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
    return c.kernel_calls;
}

static void assert_nothing_live(const char *when)
{
    struct mlxd_emu_counts c = { .sz = sizeof c };
    ck_assert_int_eq(mlxd_emu_get_counts(&c), 0);
    ck_assert_msg(mlxd_emu_live_total() == 0 && c.event_fds == 0,
                  "%s: live files %u maps %u pd %u mr %u cq %u qp %u uar %u comp %u async %u", when,
                  c.files, c.mappings, c.pd, c.mr, c.cq, c.qp, c.uar, c.comp_channel, c.async_event);
}

START_TEST(close_releases_everything)
{
    assert_nothing_live("start");
    struct mlxd_nic *a, *b;
    ck_assert_msg(mlxd_open("mlx5_0", NULL, &a) == 0, "%s", mlxd_errmsg());
    ck_assert_msg(mlxd_open("mlx5_1", NULL, &b) == 0, "%s", mlxd_errmsg());
    static uint8_t buf[8192] __attribute__((aligned(4096)));
    struct mlxd_region *r;
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE | MLXD_ACCESS_REMOTE_WRITE };
    ck_assert_int_eq(mlxd_region_register(a, buf, sizeof buf, &ro, &r), 0);
    struct mlxd_cq *cq, *cq2;
    struct mlxd_cq_opts co = { .sz = sizeof co, .events = true };
    ck_assert_int_eq(mlxd_cq_create(a, 16, &co, &cq), 0);
    ck_assert_int_eq(mlxd_cq_create(a, 16, NULL, &cq2), 0);
    struct mlxd_qp *qp, *qp2;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 8, .recv_depth = 8, .recv_cq = cq2 };
    ck_assert_int_eq(mlxd_qp_create(cq, &qo, &qp), 0);
    qo.type = MLXD_QP_UC;
    ck_assert_int_eq(mlxd_qp_create(cq, &qo, &qp2), 0);
    struct mlxd_emu_counts c = { .sz = sizeof c };
    mlxd_emu_get_counts(&c);
    ck_assert_uint_eq(c.qp, 2);
    ck_assert_uint_eq(c.cq, 2);
    ck_assert_uint_eq(c.mr, 1);
    ck_assert_uint_eq(c.pd, 2);
    ck_assert_uint_eq(c.files, 2);
    ck_assert_int_eq(mlxd_qp_destroy(qp2), 0);        /* some destroyed by hand, the rest by close */
    ck_assert_int_eq(mlxd_close(a), 0);
    ck_assert_int_eq(mlxd_close(b), 0);
    assert_nothing_live("after close");
    ck_assert_int_eq(mlxd_close(a), 0);
    ck_assert_int_eq(mlxd_qp_destroy(qp), -EINVAL);   /* object of a closed NIC */
}
END_TEST

START_TEST(fault_at_each_call_of_open)
{
    unsigned long long c0 = calls();
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    unsigned n = (unsigned)(calls() - c0);
    ck_assert_uint_ge(n, 7);   /* GET_CONTEXT ASYNC QUERY_PORT GID_TABLE (QUERY_DEVICE) UAR MMAP ALLOC_PD */
    ck_assert_int_eq(mlxd_close(nic), 0);
    for (unsigned k = 1; k <= n; k++) {
        ck_assert_int_eq(mlxd_emu_fail_nth_call(k, EIO), 0);
        nic = NULL;
        int rc = mlxd_open("mlx5_0", NULL, &nic);
        if (rc == 0) {
            /* only the optional QUERY_DEVICE may fail without failing open */
            ck_assert_int_eq(mlxd_close(nic), 0);
        } else {
            ck_assert_int_eq(rc, -EIO);
            ck_assert_ptr_null(nic);
            ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "refused"));
        }
        mlxd_emu_fail_clear();
        char when[64];
        snprintf(when, sizeof when, "open, fault at call %u", k);
        assert_nothing_live(when);
    }
}
END_TEST

/* Counts the kernel calls of `step` on a fresh NIC, then fails each in turn; after each failure
 * the NIC is closed and nothing may be left. */
enum step { REGISTER, CQ, QP, CONNECT };

struct prep { struct mlxd_cq *cq; struct mlxd_qp *qp; struct mlxd_endpoint peer; };

/* What a step needs, made before the faults are armed (its calls are not counted). */
static void prepare(enum step s, struct mlxd_nic *nic, struct mlxd_nic *peer_nic, struct prep *p)
{
    memset(p, 0, sizeof *p);
    if (s == REGISTER || s == CQ) return;
    ck_assert_int_eq(mlxd_cq_create(nic, 32, NULL, &p->cq), 0);
    if (s == QP) return;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 8, .recv_depth = 8 };
    ck_assert_int_eq(mlxd_qp_create(p->cq, &qo, &p->qp), 0);
    struct mlxd_cq *pcq; struct mlxd_qp *pqp;
    ck_assert_int_eq(mlxd_cq_create(peer_nic, 32, NULL, &pcq), 0);
    ck_assert_int_eq(mlxd_qp_create(pcq, &qo, &pqp), 0);
    mlxd_qp_endpoint(pqp, &p->peer);
}

static int run_step(enum step s, struct mlxd_nic *nic, struct prep *p)
{
    static uint8_t buf[8192] __attribute__((aligned(4096)));
    struct mlxd_region *r;
    struct mlxd_region_opts ro = { .sz = sizeof ro, .access = MLXD_ACCESS_LOCAL_WRITE };
    struct mlxd_cq_opts co = { .sz = sizeof co, .events = true };
    struct mlxd_cq *cq;
    struct mlxd_qp *qp;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 8, .recv_depth = 8 };
    switch (s) {
    case REGISTER: return mlxd_region_register(nic, buf, sizeof buf, &ro, &r);
    case CQ: return mlxd_cq_create(nic, 32, &co, &cq);
    case QP: return mlxd_qp_create(p->cq, &qo, &qp);
    default: return mlxd_qp_connect(p->qp, &p->peer, NULL);
    }
}

static void faults_in(enum step s, const char *what)
{
    struct mlxd_nic *nic, *peer;
    struct prep p;
    ck_assert_int_eq(mlxd_open("mlx5_1", NULL, &peer), 0);
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    prepare(s, nic, peer, &p);
    unsigned long long c0 = calls();
    ck_assert_int_eq(run_step(s, nic, &p), 0);
    unsigned total = (unsigned)(calls() - c0);
    ck_assert_int_eq(mlxd_close(nic), 0);
    ck_assert_int_eq(mlxd_close(peer), 0);
    assert_nothing_live(what);
    unsigned failures = 0;
    for (unsigned k = 1; k <= total; k++) {
        ck_assert_int_eq(mlxd_open("mlx5_1", NULL, &peer), 0);
        ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
        prepare(s, nic, peer, &p);
        ck_assert_int_eq(mlxd_emu_fail_nth_call(k, EIO), 0);
        int rc = run_step(s, nic, &p);
        mlxd_emu_fail_clear();
        ck_assert_msg(rc == -EIO, "%s: fault at call %u of %u: rc %d", what, k, total, rc);
        ck_assert_msg(strstr(mlxd_errmsg(), "refused"), "%s: %s", what, mlxd_errmsg());
        failures++;
        ck_assert_int_eq(mlxd_close(nic), 0);
        ck_assert_int_eq(mlxd_close(peer), 0);
        char when[96];
        snprintf(when, sizeof when, "%s, fault at call %u of %u", what, k, total);
        assert_nothing_live(when);
    }
    ck_assert_uint_gt(failures, 0);
}

START_TEST(fault_at_each_call_of_register) { faults_in(REGISTER, "register"); }
END_TEST
START_TEST(fault_at_each_call_of_cq_create) { faults_in(CQ, "cq_create"); }
END_TEST
START_TEST(fault_at_each_call_of_qp_create) { faults_in(QP, "qp_create"); }
END_TEST
START_TEST(fault_at_each_call_of_connect) { faults_in(CONNECT, "connect"); }
END_TEST

START_TEST(failed_create_changes_nothing)
{
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create(nic, 16, NULL, &cq), 0);
    struct mlxd_emu_counts before = { .sz = sizeof before }, after = { .sz = sizeof after };
    mlxd_emu_get_counts(&before);
    ck_assert_int_eq(mlxd_emu_fail_method("QP_CREATE", 1, ENOMEM), 0);
    struct mlxd_qp *qp = NULL;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 8 };
    ck_assert_int_eq(mlxd_qp_create(cq, &qo, &qp), -ENOMEM);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "QP_CREATE"));
    ck_assert_ptr_null(qp);
    mlxd_emu_get_counts(&after);
    ck_assert_uint_eq(after.qp, before.qp);
    ck_assert_uint_eq(after.uar, before.uar);
    ck_assert_uint_eq(after.mappings, before.mappings);
    ck_assert_int_eq(mlxd_cq_destroy(cq), 0);          /* no QP was left attached */
    ck_assert_int_eq(mlxd_close(nic), 0);
    assert_nothing_live("after close");
}
END_TEST

START_TEST(open_port_down)
{
    char s2[160];
    snprintf(s2, sizeof s2, "%s:link=down", spec);
    ck_assert_int_eq(mlxd_emu_configure(s2), 0);
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_open("mlx5_1", NULL, &nic), -ENETDOWN);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "not active"));
    assert_nothing_live("port down");
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    ck_assert_int_eq(mlxd_close(nic), 0);
}
END_TEST

START_TEST(open_kernel_refusal_names_call)
{
    struct mlxd_nic *nic = NULL;
    ck_assert_int_eq(mlxd_emu_fail_method("GET_CONTEXT", 1, EPERM), 0);
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), -EPERM);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "GET_CONTEXT"));
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), strerror(EPERM)));
    ck_assert_int_eq(mlxd_emu_fail_method("ALLOC_PD", 1, ENOMEM), 0);
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), -ENOMEM);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "ALLOC_PD"));
    assert_nothing_live("refusals");
}
END_TEST

START_TEST(port_events)
{
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create(nic, 8, NULL, &cq), 0);
    ck_assert_int_eq(mlxd_emu_set_link(0, false), 0);
    struct mlxd_event ev[4];
    ck_assert_int_eq(mlxd_wait(nic, 5000, ev, 4), 1);
    ck_assert_uint_eq(ev[0].kind, MLXD_EVENT_PORT_ERROR);
    ck_assert_uint_eq(ev[0].kernel_type, 10);
    ck_assert_uint_eq(ev[0].user_data, 1);
    ck_assert_int_eq(mlxd_emu_set_link(0, true), 0);
    ck_assert_int_eq(mlxd_wait(nic, 5000, ev, 4), 1);
    ck_assert_uint_eq(ev[0].kind, MLXD_EVENT_PORT_ACTIVE);
    ck_assert_int_eq(mlxd_close(nic), 0);
}
END_TEST

/* A refusal the locked-memory limit does not explain (an injected ENOMEM within the limit) names
 * REG_MR and not the limit (the limit itself: test_fidelity.c memlock_limit_enforced). */
START_TEST(memlock_message)
{
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    static uint8_t buf[3 * 65536] __attribute__((aligned(4096)));
    struct rlimit rl = { 65536, 65536 };
    ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
    struct mlxd_region *r;
    /* within the limit: the message names REG_MR but not the limit */
    ck_assert_int_eq(mlxd_emu_fail_method("REG_MR", 1, ENOMEM), 0);
    ck_assert_int_eq(mlxd_region_register(nic, buf, 4096, NULL, &r), -ENOMEM);
    ck_assert_ptr_null(strstr(mlxd_errmsg(), "RLIMIT_MEMLOCK"));
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "REG_MR"));
    ck_assert_int_eq(mlxd_close(nic), 0);
    assert_nothing_live("memlock");
}
END_TEST

/* A destroy the kernel refuses: the object counts as destroyed, a second destroy returns the
 * same error, and close releases what the kernel still held. */
START_TEST(refused_destroy)
{
    struct mlxd_nic *nic;
    ck_assert_int_eq(mlxd_open("mlx5_0", NULL, &nic), 0);
    struct mlxd_cq *cq;
    ck_assert_int_eq(mlxd_cq_create(nic, 16, NULL, &cq), 0);
    struct mlxd_qp *qp;
    struct mlxd_qp_opts qo = { .sz = sizeof qo, .send_depth = 8 };
    ck_assert_int_eq(mlxd_qp_create(cq, &qo, &qp), 0);
    ck_assert_int_eq(mlxd_emu_fail_method("QP_DESTROY", 1, EIO), 0);
    ck_assert_int_eq(mlxd_qp_destroy(qp), -EIO);
    ck_assert_ptr_nonnull(strstr(mlxd_errmsg(), "QP_DESTROY"));
    ck_assert_int_eq(mlxd_qp_destroy(qp), -EIO);         /* the first one's result */
    struct mlxd_entry e = { .op = MLXD_OP_NOP };
    ck_assert_int_eq(mlxd_qp_post(qp, &e), -EINVAL);     /* counts as destroyed */
    ck_assert_int_eq(mlxd_emu_fail_method("CQ_DESTROY", 1, EIO), 0);
    ck_assert_int_eq(mlxd_cq_destroy(cq), -EIO);
    ck_assert_int_eq(mlxd_cq_destroy(cq), -EIO);
    ck_assert_int_eq(mlxd_close(nic), 0);
    assert_nothing_live("refused destroys, then close");
}
END_TEST

Suite *driver_leaks_suite(void)
{
    Suite *s = suite_create("driver_leaks");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, emu_setup, NULL);
    tcase_add_test(tc, close_releases_everything);
    tcase_add_test(tc, fault_at_each_call_of_open);
    tcase_add_test(tc, fault_at_each_call_of_register);
    tcase_add_test(tc, fault_at_each_call_of_cq_create);
    tcase_add_test(tc, fault_at_each_call_of_qp_create);
    tcase_add_test(tc, fault_at_each_call_of_connect);
    tcase_add_test(tc, failed_create_changes_nothing);
    tcase_add_test(tc, open_port_down);
    tcase_add_test(tc, open_kernel_refusal_names_call);
    tcase_add_test(tc, port_events);
    tcase_add_test(tc, memlock_message);
    tcase_add_test(tc, refused_destroy);
    suite_add_tcase(s, tc);
    return s;
}
