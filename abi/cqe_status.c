/* cqe_status.c: status-only lines (cqe_status.h).  Each format with the source that prints it
 * (the tests in tests/test_cqe_status.c quote each as published):
 *   perftest   src/perftest_resources.c, NOTIFY_COMP_ERROR_SEND/RECV and run_iter_*:
 *              "Failed status %d: wr_id %d syndrom 0x%x" (status, wr_id, wc.vendor_err)
 *   UCX        src/uct/ib/mlx5/ib_mlx5.c, uct_ib_mlx5_completion_with_err:
 *              "%s on %s:%d/%s (synd 0x%x vend 0x%x hw_synd %d/%d)" (syndrome,
 *              vendor_err_synd, hw_synd_type >> 4, hw_err_synd of struct mlx5_err_cqe);
 *              src/uct/ib/rc/verbs/rc_verbs_iface.c: "send completion with error: %s qpn 0x%x
 *              wrid 0x%lx vendor_err 0x%x" (ibv_wc_status_str, ..., wc.vendor_err)
 *   NCCL       src/transport/net_ib.cc: "NET/IB : Got completion from peer %s with status=%d
 *              opcode=%d len=%d vendor err %d ..." and the older "... with error %d, opcode %d,
 *              len %d, vendor err %d" (wc.status, ..., wc.vendor_err in decimal)
 *   RDMA_RC_example (Mellanox RDMA Aware Networks Programming User Manual, copied by many
 *              rdma-core users): "got bad completion with status: 0x%x, vendor syndrome: 0x%x"
 *   libfabric  fabtests include/shared.h FT_CQ_ERR: "cq_readerr (Provider errno: %d) : %s" and
 *              "cq_readerr %d (%s), provider errno: %d (%s)"; for the verbs provider prov_errno
 *              is wc.status (prov/verbs/src/verbs_cq.c) and the text ibv_wc_status_str()
 *   DAPL       dapl/common/dapl_evd_util.c: "DTO completion ERR: status %d, op %s, vendor_err
 *              0x%x - %s" and " DTO completion ERROR: %d: op %#x"
 * The vendor syndrome these print is ibv_wc.vendor_err, which libmlx5 fills from byte 54 of the
 * error CQE (rdma-core providers/mlx5/cq.c, mlx5_handle_error_cqe). */
#include <stdint.h>
#include <string.h>
#include "cqe_status.h"
#include "mlxd_names.h"

static int digit(int c, int base)
{
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
            c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99;
    return d < base ? d : -1;
}

/* The number right after key in s (blanks, ':' and '=' skipped): 0x.. hexadecimal, else in base
 * (10, or 16 for fields always printed in hex).  false when key or a number is absent, or the
 * number exceeds 0xffffff. */
static bool field(const char *s, const char *key, int base, int *out)
{
    const char *v = strstr(s, key);
    if (!v) return false;
    v += strlen(key);
    while (*v == ' ' || *v == ':' || *v == '=') v++;
    if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) { base = 16; v += 2; }
    long x = 0;
    int n = 0, d;
    for (; (d = digit((unsigned char)*v, base)) >= 0; v++, n++) {
        x = x * base + d;
        if (x > 0xffffff) return false;
    }
    if (!n) return false;
    *out = (int)x;
    return true;
}

static bool perftest(const char *s, struct mlxd_dump_status *o)
{
    if (!field(s, "Failed status ", 10, &o->status)) return false;
    field(s, "syndrom ", 16, &o->vendor_syndrome);
    o->source = MLXD_STATUS_PERFTEST;
    return true;
}

static bool ucx(const char *s, struct mlxd_dump_status *o)
{
    const char *m = strstr(s, "(synd 0x");
    if (m && field(m, "(synd", 16, &o->syndrome)) {
        o->syndrome_printed = true;
        o->status = mlxd_syndrome_to_wc_status((unsigned)o->syndrome);
        o->status_from_syndrome = true;
        field(m, " vend", 16, &o->vendor_syndrome);
        int a, b;
        const char *h = strstr(m, "hw_synd ");
        if (h && field(h, "hw_synd ", 10, &a) && (h = strchr(h, '/')) && field(h, "/", 10, &b)) {
            o->hw_synd_type_hi = a;
            o->hw_err_synd = b;
        }
        o->source = MLXD_STATUS_UCX;
        return true;
    }
    m = strstr(s, "completion with error: ");
    if (m && strstr(m, "vendor_err ")) {
        o->status = mlxd_wc_status_from_text(m + strlen("completion with error: "));
        if (o->status < 0) return false;
        field(m, "vendor_err ", 16, &o->vendor_syndrome);
        o->source = MLXD_STATUS_UCX;
        return true;
    }
    return false;
}

static bool nccl(const char *s, struct mlxd_dump_status *o)
{
    const char *m = strstr(s, "Got completion");
    if (!m || !strstr(m, "vendor err ")) return false;
    if (!field(m, "status=", 10, &o->status) && !field(m, "with error ", 10, &o->status)) return false;
    field(m, "vendor err ", 10, &o->vendor_syndrome);
    o->source = MLXD_STATUS_NCCL;
    return true;
}

static bool rc_example(const char *s, struct mlxd_dump_status *o)
{
    const char *m = strstr(s, "ot bad completion with status");   /* "got" or "Got" */
    if (!m || m == s || (m[-1] != 'g' && m[-1] != 'G')) return false;
    if (!field(m, "with status", 16, &o->status)) return false;
    field(m, "vendor syndrome", 16, &o->vendor_syndrome);
    o->source = MLXD_STATUS_RC_EXAMPLE;
    return true;
}

static bool libfabric(const char *s, struct mlxd_dump_status *o)
{
    const char *m = strstr(s, "cq_readerr");
    if (!m) return false;
    const char *k = strstr(m, "Provider errno");
    if (!k) k = strstr(m, "provider errno");
    if (!k || !field(k, "errno", 10, &o->status)) return false;
    /* prov_errno is an ibv_wc_status only for the verbs provider: the text fi_cq_strerror()
     * printed after it must be that status's words (else it is another provider's number) */
    const char *t = strchr(k, ')');
    const char *w = t ? t + 1 : NULL;
    if (w && (w = strpbrk(w, "(:")) != NULL) {
        w++;
        while (*w == ' ') w++;
    }
    if (!w || !*w) w = strchr(k, '(') ? strchr(k, '(') + 1 : NULL;
    if (!w || mlxd_wc_status_from_text(w) != o->status) return false;
    o->source = MLXD_STATUS_LIBFABRIC;
    return true;
}

static bool dapl(const char *s, struct mlxd_dump_status *o)
{
    const char *m = strstr(s, "DTO completion ERR");
    if (!m) return false;
    if (!field(m, "ERR: status ", 10, &o->status) && !field(m, "ERROR:", 10, &o->status)) return false;
    field(m, "vendor_err ", 16, &o->vendor_syndrome);
    o->source = MLXD_STATUS_DAPL;
    return true;
}

bool mlxd__status_line(const char *s, struct mlxd_dump_status *o)
{
    memset(o, 0, sizeof *o);
    o->status = o->syndrome = o->vendor_syndrome = o->hw_err_synd = o->hw_synd_type_hi = -1;
    o->cqe = -1;
    if (!(perftest(s, o) || ucx(s, o) || nccl(s, o) || rc_example(s, o) || libfabric(s, o) || dapl(s, o)))
        return false;
    if (o->status < 0 || o->status > MLXD_WC_TM_RNDV_INCOMPLETE) return false;   /* not a status */
    /* each syndrome is one byte of the CQE: a larger number is not one */
    if (o->syndrome > 0xff || o->vendor_syndrome > 0xff || o->hw_err_synd > 0xff || o->hw_synd_type_hi > 0xf)
        return false;
    if (!o->syndrome_printed) o->syndrome = mlxd_wc_status_to_syndrome(o->status);
    return true;
}

const char *mlxd_status_source_name(enum mlxd_status_source s)
{
    switch (s) {
    case MLXD_STATUS_PERFTEST: return "perftest";
    case MLXD_STATUS_UCX: return "UCX";
    case MLXD_STATUS_NCCL: return "NCCL";
    case MLXD_STATUS_RC_EXAMPLE: return "RDMA_RC_example";
    case MLXD_STATUS_LIBFABRIC: return "libfabric fabtests";
    case MLXD_STATUS_DAPL: return "DAPL";
    }
    return NULL;
}
