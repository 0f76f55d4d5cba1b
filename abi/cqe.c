/* cqe.c: mlxd_cqe_decode() (mlxd_cqe.h). */
#include <errno.h>
#include "mlxd_cqe.h"
#include "mlxd_error.h"
#include "mlxd_names.h"

int mlxd_cqe_decode(const void *cqe, size_t cqe_size, struct mlxd_cqe_decoded *out)
{
    if (!cqe || !out)
        return mlxd_err(EINVAL, "mlxd_cqe_decode: %s is NULL", cqe ? "out" : "cqe");
    if (cqe_size != MLXD_CQE_SIZE && cqe_size != MLXD_CQE128_SIZE)
        return mlxd_err(EINVAL, "mlxd_cqe_decode: cqe_size %zu is neither 64 nor 128", cqe_size);
    const uint8_t *c = (const uint8_t *)cqe + (cqe_size - MLXD_CQE_SIZE);
    struct mlxd_cqe_decoded d = {0};
    d.op_own = mlxd_cqe_u8(c, MLXD_CQE_OFF_OP_OWN);
    d.opcode = mlxd_cqe_opcode(c);
    d.owner = mlxd_cqe_owner(c);
    d.solicited = mlxd_cqe_solicited(c);
    d.format = mlxd_cqe_format(c);
    d.is_error = mlxd_cqe_is_error(c);
    d.is_requester = d.opcode == MLXD_CQE_REQ || d.opcode == MLXD_CQE_REQ_ERR;
    d.byte_cnt = mlxd_cqe_byte_cnt(c);
    d.imm_raw = mlxd_cqe_imm_raw(c);
    d.imm = mlxd_cqe_imm(c);
    d.srqn_uidx = mlxd_cqe_srqn_uidx(c);
    d.timestamp = mlxd_cqe_timestamp(c);
    d.drop_counter = mlxd_cqe_drop_counter(c);
    d.wqe_opcode = mlxd_cqe_wqe_opcode(c);
    d.qpn = mlxd_cqe_qpn(c);
    d.wqe_counter = mlxd_cqe_wqe_counter(c);
    d.signature = mlxd_cqe_signature(c);
    d.src_qpn = mlxd_cqe_src_qpn(c);
    if (d.is_error) {
        d.syndrome = mlxd_cqe_syndrome(c);
        d.vendor_syndrome = mlxd_cqe_vendor_syndrome(c);
        d.hw_err_synd = mlxd_cqe_hw_err_synd(c);
        d.hw_synd_type = mlxd_cqe_hw_synd_type(c);
        d.wc_status = mlxd_syndrome_to_wc_status(d.syndrome);
    } else {
        d.wc_status = MLXD_WC_SUCCESS;
    }
    *out = d;
    return 0;
}
