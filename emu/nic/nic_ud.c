/* nic_ud.c: unreliable datagram (UD) QPs: the datagram segment of a send WQE, and receiving.
 *
 * Send: the WQE is the control segment, the datagram segment (mlx5dv.h struct
 * mlx5_wqe_datagram_seg = struct mlx5_wqe_av, 48 bytes: Q_Key @0, dqp_dct @8 with
 * MLX5_EXTENDED_UD_AV in bit 31, tclass @26, hop_limit @27, grh_gid_fl @28, rgid @32), then the
 * data segments (rdma-core providers/mlx5/qp.c set_datagram_seg).  One packet per message:
 * UD SEND Only [with Immediate], BTH + DETH (Q_Key, source QP) (IB spec 9.2, 9.3.3).  A message
 * longer than the port MTU completes with a local length error (IB spec 9.8.3.1: a UD message
 * fits one packet).  The Q_Key of the DETH is the WQE's, or the QP's when the WQE's has its high
 * bit set (IB spec 10.2.5, "controlled Q_Keys").
 * Receive: the Q_Key of the DETH must be the QP's, else the packet is dropped silently (IB spec
 * 9.6.1.1.1; counted rx_ud_bad_qkey).  A datagram that finds no posted receive WQE is dropped
 * (IB spec 9.8.3.2.2; counted rx_ud_no_recv).  A UD QP attached to a shared receive queue takes
 * the SRQ's next WQE for each datagram (nic_srq.c; ConnectX supports UD on an SRQ: rdma-core
 * providers/mlx5 accepts an SRQ for IBV_QPT_UD) and its CQE names that WQE in wqe_counter and the
 * SRQN in srqn_uidx, as for RC.  The receive buffer gets 40 bytes of GRH first:
 * for RoCE v2 over IPv4, bytes 0..19 are zero and 20..39 hold the packet's IPv4 header (what
 * ConnectX writes; applications read it as struct iphdr at offset 20), then the payload.
 * The CQE carries the source QPN and the GRH flag in flags_rqpn (mlx5dv.h struct mlx5_cqe64:
 * bits 28-29 'g', 24-25 the RoCE L3 type, 2 = IPv4, bits 0-23 the QPN). */
#include <string.h>
#include "nic.h"

#define UD_GRH_LEN 40u

void nic_ud_parse_av(struct nic_msg *m, const uint8_t av[48])
{
    uint32_t dqp = rd_be32(av + 8);
    m->ud_qkey = rd_be32(av);
    m->ud_dqpn = dqp & 0xffffff;
    m->ud_tclass = av[26];
    m->ud_hop = av[27];
    memcpy(&m->ud_dip, av + 32 + 12, 4);     /* ::ffff:a.b.c.d, the emulated ports' GIDs */
}

void nic_ud_hdr(struct nic_qp *q, const struct nic_msg *m, struct mlxd_roce_pkt *p,
                struct sockaddr_in *to)
{
    struct emu_qp *qp = q->qp;
    uint16_t port = q->nd->dev->cfg.dst_udp_port ? q->nd->dev->cfg.dst_udp_port : 4791;
    memset(to, 0, sizeof *to);
    to->sin_family = AF_INET;
    to->sin_addr.s_addr = m->ud_dip;
    to->sin_port = htons(port);
    memset(p, 0, sizeof *p);
    p->opcode = MLXD_ROCE_TRANSPORT_UD |
                (m->opcode == NIC_OP_SEND_IMM ? MLXD_ROCE_OP_SEND_ONLY_IMM : MLXD_ROCE_OP_SEND_ONLY);
    p->src_ip = ntohl(q->nd->self.sin_addr.s_addr);
    p->src_port = ntohs(q->nd->self.sin_port);
    p->dst_ip = ntohl(m->ud_dip);
    p->dst_port = port;
    p->tos = m->ud_tclass;
    p->ttl = m->ud_hop ? m->ud_hop : 64;
    p->dest_qp = m->ud_dqpn;
    p->psn = q->next_psn;
    p->se = m->fm_ce_se & 0x02;
    p->imm = m->imm;
    p->deth_qkey = (m->ud_qkey & 0x80000000u) ? qp->attr.qkey : m->ud_qkey;
    p->deth_src_qp = qp->qpn;
}

static void ud_cqe(struct nic_qp *q, uint8_t opcode, uint8_t synd, uint32_t byte_cnt,
                   const struct mlxd_roce_pkt *p)
{
    struct emu_qp *qp = q->qp;
    struct nic_cqe c = {
        .opcode = opcode, .syndrome = synd, .vendor = synd ? 0x68 : 0, .se = p->se,
        .wqe_counter = qp->srq ? q->srq_wqe : q->rq_ci, .byte_cnt = byte_cnt, .imm = p->imm,
        .qpn = qp->qpn, .uidx = qp->uidx != 0xffffff ? qp->uidx : qp->srq ? qp->srq->srqn : 0,
        .flags_rqpn = 1u << 28 | 2u << 24 | (p->deth_src_qp & 0xffffff),
    };
    if (qp->srq) q->srq_bound = false;
    else q->rq_ci++;
    if (qp->recv_cq && nic_cqe_write(q->nd, qp->recv_cq, &c)) nic_qp_to_err(q, NIC_EV_QP_FATAL);
}

void nic_ud_recv(struct nic_qp *q, const struct mlxd_roce_pkt *p)
{
    struct nic_dev *nd = q->nd;
    struct emu_qp *qp = q->qp;
    if (p->deth_qkey != qp->attr.qkey) { nd->st.rx_ud_bad_qkey++; return; }
    bool have_wqe = qp->srq ? nic_srq_take(q) : qp->rq_wqe_cnt && q->rq_ci != nic_resp_rq_pi(q);
    if (!have_wqe) { nd->st.rx_ud_no_recv++; return; }
    /* the packet's IPv4 header lies in front of its transport headers in the parsed buffer */
    uint32_t hl = MLXD_ROCE_BTH_OFF + MLXD_ROCE_BTH_LEN + mlxd_roce_ext_len(p->opcode);
    uint8_t grh[UD_GRH_LEN];
    memset(grh, 0, 20);
    memcpy(grh + 20, p->payload - hl, MLXD_ROCE_IPV4_LEN);
    uint8_t e = nic_resp_scatter(q, 0, grh, UD_GRH_LEN, true);
    if (!e) e = nic_resp_scatter(q, UD_GRH_LEN, p->payload, p->payload_len, true);
    if (e) {           /* a receive error (IB spec 10.7.2.4): error CQE, QP to the error state */
        ud_cqe(q, NIC_CQE_RESP_ERR, e, 0, p);
        nic_qp_to_err(q, -1);
        return;
    }
    nic_resp_scatter(q, 0, grh, UD_GRH_LEN, false);
    nic_resp_scatter(q, UD_GRH_LEN, p->payload, p->payload_len, false);
    nd->st.rx_ud_datagrams++;
    bool imm = (p->opcode & 0x1f) == MLXD_ROCE_OP_SEND_ONLY_IMM;
    ud_cqe(q, imm ? NIC_CQE_RESP_SEND_IMM : NIC_CQE_RESP_SEND, 0, UD_GRH_LEN + p->payload_len, p);
}
