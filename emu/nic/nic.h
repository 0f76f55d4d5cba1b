/* nic.h: private state of the emulated NIC (engine, wire, faults).  Not installed.
 *
 * Everything here is guarded by the owning device's dev->lock (emu.h), except the fields
 * marked "engine thread only" and the atomics. */
#ifndef MLXD_EMU_NIC_H
#define MLXD_EMU_NIC_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "../emu.h"
#include "mlxd_emu.h"      /* the NIC control API: the public header's NIC section */
#include "mlxd_roce.h"

#define NIC_PKT_MAX     (MLXD_ROCE_MAX_HDR_LEN + 4096 + 8)   /* one packet incl. IP/UDP */
#define NIC_TX_BATCH    64
#define NIC_RX_BATCH    16
#define NIC_RX_BUF      65536      /* one read: up to 64 KiB of GRO-coalesced datagrams */
#define NIC_MAX_SGE     64
#define NIC_ATOMIC_SAVED 16        /* responder: atomic results kept for duplicates (>= max_dest_rd_atomic) */
#define NIC_WQE_MAX     (63 * 16)  /* ds is 6 bits */
#define NIC_RC_WINDOW   2048u      /* at most this many unacknowledged PSNs in flight (RC), and no
                                    * more than half the receive buffer's worth of packets */

/* mlx5 WQE opcodes (mlx5dv.h MLX5_OPCODE_*) */
enum { NIC_OP_NOP = 0x00, NIC_OP_RDMA_WRITE = 0x08, NIC_OP_RDMA_WRITE_IMM = 0x09,
       NIC_OP_SEND = 0x0a, NIC_OP_SEND_IMM = 0x0b, NIC_OP_RDMA_READ = 0x10,
       NIC_OP_ATOMIC_CS = 0x11, NIC_OP_ATOMIC_FA = 0x12, NIC_OP_SEND_INV = 0x01, NIC_OP_UMR = 0x25 };
static inline bool nic_op_is_atomic(uint8_t op) { return op == NIC_OP_ATOMIC_CS || op == NIC_OP_ATOMIC_FA; }
/* A READ or an atomic: the requester waits for response data, not only an ACK */
static inline bool nic_op_has_response(uint8_t op) { return op == NIC_OP_RDMA_READ || nic_op_is_atomic(op); }
/* CQE opcodes (mlx5dv.h MLX5_CQE_*) */
enum { NIC_CQE_REQ = 0, NIC_CQE_RESP_WR_IMM = 1, NIC_CQE_RESP_SEND = 2, NIC_CQE_RESP_SEND_IMM = 3,
       NIC_CQE_RESP_SEND_INV = 4,
       NIC_CQE_REQ_ERR = 13, NIC_CQE_RESP_ERR = 14 };
/* syndromes (mlx5dv.h MLX5_CQE_SYNDROME_*) and the vendor syndromes ConnectX reports with them */
enum { NIC_SYND_LOCAL_LENGTH = 0x01, NIC_SYND_LOCAL_QP_OP = 0x02, NIC_SYND_LOCAL_PROT = 0x04,
       NIC_SYND_WR_FLUSH = 0x05, NIC_SYND_BAD_RESP = 0x10, NIC_SYND_REMOTE_INVAL_REQ = 0x12,
       NIC_SYND_REMOTE_ACCESS = 0x13, NIC_SYND_REMOTE_OP = 0x14, NIC_SYND_RETRY_EXC = 0x15,
       NIC_SYND_RNR_RETRY_EXC = 0x16, NIC_SYND_MW_BIND = 0x06 };
/* async event types (ib_user_verbs.h IB_UVERBS ... / ib_event_type) */
enum { NIC_EV_CQ_ERR = 0, NIC_EV_QP_FATAL = 1, NIC_EV_QP_REQ_ERR = 2, NIC_EV_QP_ACCESS_ERR = 3,
       NIC_EV_DEVICE_FATAL = 8, NIC_EV_PORT_ACTIVE = 9, NIC_EV_PORT_ERR = 10,
       NIC_EV_SRQ_LIMIT_REACHED = 15, NIC_EV_QP_LAST_WQE_REACHED = 16 };
/* QP states (IB_QPS_*) */
enum { NIC_QPS_RESET = 0, NIC_QPS_INIT = 1, NIC_QPS_RTR = 2, NIC_QPS_RTS = 3, NIC_QPS_SQD = 4,
       NIC_QPS_SQE = 5, NIC_QPS_ERR = 6 };
/* MR access (IB_UVERBS_ACCESS_*) */
enum { NIC_ACC_LOCAL_WRITE = 1, NIC_ACC_REMOTE_WRITE = 2, NIC_ACC_REMOTE_READ = 4,
       NIC_ACC_REMOTE_ATOMIC = 8 };

/* A gather/scatter element: inline data (lkey_valid false) points into the send ring; the others
 * are re-resolved through their lkey whenever the engine comes back to the message, so a region
 * deregistered meanwhile gives a protection error instead of a dangling pointer. */
struct nic_sge { uint8_t *ptr; uint32_t len; uint32_t lkey; bool lkey_valid; uint64_t addr; };

/* One send WQE being executed (requester). */
struct nic_msg {
    uint16_t wqe_idx;          /* WQE counter of the first WQEBB */
    uint8_t  opcode, fm_ce_se, err_synd, nsge;
    uint32_t imm;              /* raw (wire order) */
    uint64_t raddr;
    uint32_t rkey, len;
    uint64_t swap_add, compare;/* atomics: the atomic segment (host order) */
    uint32_t ud_qkey, ud_dqpn; /* UD: the datagram segment's Q_Key and destination QP */
    uint32_t ud_dip;           /* UD: destination IPv4 (network order, from the AV's rgid) */
    uint8_t  ud_tclass, ud_hop;
    struct {                   /* UMR (memory window bind / invalidation, nic_mw.c) */
        uint8_t  flags, free, access;
        bool     has_klm, done;
        uint32_t qpn_mkey, klm_len, klm_key;
        uint64_t start, len, klm_addr;
    } umr;
    uint32_t first_psn, npsn;  /* PSNs the message uses (READ: its responses) */
    uint32_t read_rcvd;        /* READ: response bytes received */
    bool     read_done;
    struct nic_sge sge[NIC_MAX_SGE + 1];
};

struct nic_dev;

struct nic_qp {
    struct emu_qp *qp;
    struct nic_dev *nd;
    struct nic_qp *next;
    uint32_t mtu;
    struct sockaddr_in peer;
    /* requester */
    uint16_t sq_ci;             /* next WQEBB counter to fetch */
    uint16_t sq_rung;           /* WQEBB counter the UAR doorbell has announced (nic_doorbell.c) */
    uint8_t  bfregs;            /* bfregs of its UAR its rings come in (bit k: 0x800 + 0x200 k) */
    uint32_t next_psn;          /* PSN of the next packet sent */
    struct nic_msg *msgs;       /* ring, cap = sq_wqe_cnt */
    uint32_t cap, head, send, tail;  /* head: oldest not completed; send: being sent; tail: next free */
    uint32_t send_pkt;          /* packets of msgs[send] already sent */
    uint32_t sent_hi;           /* one past the last message sent from (>= send: a retransmission
                                   rewinds send, not this), and the PSN after the highest sent: */
    uint32_t psn_hi;            /* an ACK of any PSN sent counts, even after the rewind */
    uint64_t deadline_ns;       /* RC retransmission timer (0 = stopped) */
    uint64_t rnr_until_ns;      /* RC: RNR wait */
    int      retries_left, rnr_left;
    uint32_t peer_pid;          /* at the last timer expiry: the peer QP's process, the CPU time */
    uint64_t peer_ran;          /* of its engine threads (nic_peer.c) */
    /* responder */
    uint32_t epsn, msn;
    uint16_t rq_ci;             /* next receive WQE (bound to a message while in_msg) */
    uint16_t srq_wqe;           /* with an SRQ: the WQE index bound to the message */
    bool     srq_bound;         /* ... taken and not yet completed (nic_srq.c) */
    bool     in_msg, uc_drop, nak_sent, ack_pending;
    uint8_t  msg_kind;          /* 1 SEND, 2 WRITE */
    bool     msg_imm_wqe;       /* the message's receive WQE has been checked/bound */
    uint64_t w_va;              /* WRITE: next VA */
    uint32_t w_left;            /* WRITE: DMA length left */
    uint32_t w_rkey;            /* WRITE: the rkey, looked up again for every packet */
    uint32_t r_bytes, r_sge, r_off;   /* SEND: bytes scattered, cursor */
    uint32_t ack_psn;
    uint32_t hw_drops;          /* UC: packets dropped for want of a receive WQE since the last
                                   responder CQE (reported in the next one, saturating at 255) */
    /* responder: the results of the last atomics, replayed for a duplicate request (IB spec
     * 9.7.5.1.3: a duplicate atomic is not executed again; its saved response is resent) */
    struct { uint32_t psn; bool valid; uint64_t orig; } atomic_saved[NIC_ATOMIC_SAVED];
    unsigned atomic_next;
    struct emu_mr mw_view;      /* responder: the access being served through a memory window,
                                   as a region (nic_mw_translate) */
    /* statistics */
    uint64_t retransmits;
};

struct nic_cq {
    struct emu_cq *cq;
    struct nic_cq *next;
    uint32_t last_dbrec_arm;    /* last value seen in dbrec[1] */
    uint64_t last_uar_arm;      /* last value seen at uar + 0x20 */
    bool     event_fired;       /* an event has been delivered at least once */
    uint8_t  fired_sn;          /* sn of the arm that produced the last event */
    bool     overrun;
    bool     failed;            /* a CQ error was raised (mlxd_emu_inject_event): no more CQEs */
    struct nic_zip *zip;        /* CQE compression: the burst being collected (nic_cqe_comp.c) */
};

struct nic_txslot { uint8_t buf[NIC_PKT_MAX]; uint32_t len; struct sockaddr_in to; };

struct nic_fault_state {
    struct mlxd_emu_fault f;
    uint64_t idx;               /* egress packets seen since the faults were set */
    uint64_t rng;
    bool     active;
    struct nic_txslot held;     /* reorder: packet held back */
    bool     holding;
};

/* port_share.c: this process's part in a port shared with other processes */
struct nic_share {
    int      tabfd;             /* the port's QPN table file (slot locks are on it) */
    char     path[600];         /* its path */
    _Atomic uint64_t *tab;      /* EMU_QPN_SLOTS entries: owner pid | inbox port << 32, 0 free */
    int      inbox;             /* UDP socket other processes forward our packets to */
    uint16_t inbox_port;        /* host order */
    uint32_t pid;
};

struct nic_dev {
    struct emu_device *dev;
    pthread_t thread;
    atomic_bool stop;
    _Atomic uint64_t passes;    /* engine passes made (nic_peer.c: did this NIC run?) */
    int      sock;
    struct sockaddr_in self;
    struct nic_share *share;    /* NULL: the port is not shared (port_share.c) */
    struct nic_qp *qps;
    struct nic_cq *cqs;
    /* tx batch (engine thread only, while holding dev->lock) */
    struct nic_txslot *tx;
    unsigned ntx;
    /* rx */
    uint8_t (*rx)[NIC_RX_BUF];
    bool     no_gso;
    void    *pcap, *pcap_dumper;
    struct nic_fault_state fault;
    struct mlxd_emu_nic_stats st;
    uint64_t now_ns;
    unsigned poll_max_us, spin_us;
    unsigned rcvbuf;            /* the socket's receive buffer in bytes (sizes the RC window) */
    uint64_t cnt_published, cnt_pub_ns;   /* rx_write_requests last written to sysfs, and when */
};

/* nic_engine.c */
uint64_t nic_now_ns(void);

/* nic_doorbell.c: takes the rings from q's bfreg; returns how many */
int nic_doorbell_scan(struct nic_qp *q);
uint8_t nic_doorbell_bfregs(const struct emu_qp *qp);
struct nic_dev *nic_dev_get(unsigned index);      /* registry (NULL if not open) */
extern atomic_bool nic_engines_parked;             /* mlxd_emu_bench_park */
void nic_qp_to_err(struct nic_qp *q, int event);  /* event < 0: none */
/* A packet arrived with a PSN gap before it: st.rx_out_of_seq and hw_counters/out_of_sequence. */
void nic_count_out_of_seq(struct nic_dev *nd);

/* nic_cq.c */
struct nic_cqe {
    uint8_t  opcode, syndrome, vendor, se;
    uint8_t  wqe_opcode;        /* REQ: the WQE opcode (sop_drop_qpn[31:24]) */
    uint8_t  hw_drops;          /* RESP: packets dropped for lack of receives before this one
                                   (sop_drop_qpn[31:24] of a responder CQE) */
    uint16_t wqe_counter;
    uint32_t byte_cnt, imm;     /* imm raw */
    uint32_t qpn, uidx;
    uint32_t flags_rqpn;        /* responder, UD: @24 of the CQE (nic_ud.c) */
    const uint8_t *inl;         /* responder scatter-to-CQE: the message, inl_len bytes (<= 32 in a
                                 * 64-byte CQE: format 1; <= 64 in a 128-byte one: format 2) */
    uint8_t  inl_len;
};
int  nic_cqe_write(struct nic_dev *nd, struct emu_cq *cq, const struct nic_cqe *c);
int  nic_cq_room(struct nic_dev *nd, struct emu_cq *cq, uint32_t idx);
void nic_cqe_put(struct nic_dev *nd, struct emu_cq *cq, const struct nic_cqe *c, uint32_t byte_cnt,
                 uint8_t format, uint32_t n);
/* nic_cqe_comp.c: a compressing CQ's CQEs are held while they can join one session, written
 * when one cannot, at the session's maximum, and at the end of every engine pass (the burst) */
int  nic_cqe_comp_write(struct nic_dev *nd, struct emu_cq *cq, const struct nic_cqe *c);
void nic_cqe_comp_flush(struct nic_dev *nd, struct nic_cq *c);
int  nic_cq_poll_arm(struct nic_dev *nd, struct nic_cq *c);

/* nic_req.c: requester */
int  nic_req_progress(struct nic_qp *q);
void nic_req_on_ack(struct nic_qp *q, const struct mlxd_roce_pkt *p);
void nic_req_on_read_resp(struct nic_qp *q, const struct mlxd_roce_pkt *p);
void nic_req_on_atomic_ack(struct nic_qp *q, const struct mlxd_roce_pkt *p);
void nic_req_timers(struct nic_qp *q);
void nic_req_flush(struct nic_qp *q);
void nic_req_reset(struct nic_qp *q);

/* nic_resp.c: responder */
void nic_resp_packet(struct nic_dev *nd, const struct mlxd_roce_pkt *p);
void nic_resp_flush_acks(struct nic_qp *q);
void nic_resp_flush_rq(struct nic_qp *q);
/* nic_srq.c: a QP with an SRQ binds the SRQ's next WQE to its message (false: the SRQ is
 * empty); the bound WQE's data segments and their count. */
bool nic_srq_take(struct nic_qp *q);
volatile uint8_t *nic_srq_wqe_data(const struct nic_qp *q, uint32_t *nseg);
void nic_resp_reset(struct nic_qp *q);
/* nic_mw.c: memory windows */
void nic_mw_parse(struct nic_msg *m, const uint8_t b[144], uint32_t end);
uint8_t nic_mw_umr(struct nic_qp *q, const struct nic_msg *m);     /* 0 or a syndrome */
struct emu_mr *nic_mw_translate(struct nic_qp *q, const struct emu_mr *w, uint64_t va, uint32_t len,
                                uint32_t acc);
bool nic_mw_remote_inv(struct nic_qp *q, uint32_t rkey);

/* nic_atomic.c: the responder's compare-and-swap and fetch-and-add */
void nic_resp_atomic(struct nic_qp *q, const struct mlxd_roce_pkt *p);
/* nic_resp.c, for nic_atomic.c */
void nic_resp_send_aeth(struct nic_qp *q, uint32_t psn, uint8_t syndrome);
void nic_resp_fatal(struct nic_qp *q, uint32_t psn, uint8_t nak_code, int event);
struct emu_mr *nic_resp_rkey_check(struct nic_qp *q, uint32_t rkey, uint64_t va, uint32_t len,
                                   uint32_t acc);

/* nic_resp.c, for nic_ud.c */
uint16_t nic_resp_rq_pi(const struct nic_qp *q);
uint8_t  nic_resp_scatter(struct nic_qp *q, uint32_t off, const uint8_t *src, uint32_t len, bool dry);
/* nic_ud.c: unreliable datagram */
/* Reads the datagram segment (48 bytes) of a send WQE into m. */
void nic_ud_parse_av(struct nic_msg *m, const uint8_t av[48]);
void nic_ud_hdr(struct nic_qp *q, const struct nic_msg *m, struct mlxd_roce_pkt *p,
                struct sockaddr_in *to);
void nic_ud_recv(struct nic_qp *q, const struct mlxd_roce_pkt *p);
static inline bool nic_qp_is_ud(const struct nic_qp *q) { return q->qp->type == 4; }

/* wire_udp.c */
int  wire_open(struct nic_dev *nd);
void wire_close(struct nic_dev *nd);
/* A slot to build one packet in (IP header at buf[0]); NULL if the batch is full (flush). */
struct nic_txslot *wire_tx_slot(struct nic_dev *nd);
void wire_tx_commit(struct nic_dev *nd, struct nic_txslot *s, uint32_t len,
                    const struct sockaddr_in *to);
void wire_tx_flush(struct nic_dev *nd);
int  wire_rx(struct nic_dev *nd);       /* receives and dispatches a batch; returns packets */
uint64_t wire_rx_socket_drops(const struct nic_dev *nd);   /* datagrams the host dropped for us */
void wire_fault_parse_env(struct nic_dev *nd);

/* port_share.c */
/* Joins the port's shared QPN table and opens this process's inbox; 0 with nd->share NULL when
 * sharing is off (MLXD_EMU_SHARE=0), else 0 or a negative errno (nd->share NULL: unshared). */
int  share_open(struct nic_dev *nd, const struct sockaddr_in *self);
void share_close(struct nic_dev *nd);
void share_close_struct(struct nic_share *sh);
uint32_t share_qpn_holder(const struct sockaddr_in *port, uint32_t qpn);

#define NIC_THREAD_NAME "mlxd-nic"    /* the engine threads' name (nic_peer.c finds them by it) */
bool nic_peer_frozen(struct nic_qp *q);
bool nic_local_passes(const struct sockaddr_in *port, uint64_t *passes);
/* bth: a received UDP payload of len bytes.  True if its destination QP belongs to another
 * process: then it was forwarded there (rx_forwarded) or lost (rx_unknown_qp). */
bool share_forward(struct nic_dev *nd, const uint8_t *bth, uint32_t len,
                   const struct sockaddr_in *from);
/* An inbox datagram: checks it, sets *from to the packet's real source; returns the header
 * length to skip, or -1 for a datagram that is not a forwarded packet. */
int  share_unwrap(const struct nic_dev *nd, uint8_t *buf, uint32_t len, struct sockaddr_in *from);

/* pcap_writer.c */
int  pcap_writer_open(struct nic_dev *nd, const char *path);
void pcap_writer_packet(struct nic_dev *nd, const uint8_t *ip, uint32_t len);
void pcap_writer_flush(struct nic_dev *nd);
void pcap_writer_close(struct nic_dev *nd);

/* Build the headers of a packet for q into s->buf; returns header length. */
uint32_t nic_pkt_hdrs(struct nic_qp *q, uint8_t *buf, const struct mlxd_roce_pkt *p,
                      uint32_t payload_len);
/* Finish a packet whose payload is in place: pad, iCRC, commit. */
void nic_pkt_send(struct nic_qp *q, struct nic_txslot *s, uint32_t hl, uint32_t payload_len);

static inline uint32_t be32_load(const volatile void *p)
{
    return __builtin_bswap32(*(const volatile uint32_t *)p);
}
static inline uint32_t rd_be32(const volatile uint8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, (const void *)p, 4);
    return __builtin_bswap32(v);
}
static inline uint64_t rd_be64(const volatile uint8_t *p)
{
    uint64_t v;
    __builtin_memcpy(&v, (const void *)p, 8);
    return __builtin_bswap64(v);
}
static inline struct emu_device *nic_qp_dev(struct nic_qp *q) { return q->nd->dev; }

#endif
