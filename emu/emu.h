/* emu.h: the emulator's internal object model: the one header between its two halves.
 *
 *   the kernel half (emu/kernel/: boundary.c, uverbs_ioctl.c, objects.c, sysfs_tree.c ...,
 *       private header emu/kernel/kernel.h): decodes the system
 *       calls the process makes on /dev/infiniband/uverbsN and creates/destroys the objects below,
 *       validating as drivers/infiniband/core + hw/mlx5 do.
 *   the NIC half (emu/nic/: nic_engine.c, nic_req.c, nic_resp.c, wire_udp.c ..., private header
 *       emu/nic/nic.h): one engine thread per opened device that
 *       watches doorbell records and UAR pages in the process's memory, executes WQEs, moves
 *       real RoCE v2 packets over UDP and writes CQEs into the process's CQ rings.
 *
 * The two halves meet only here and in the emu_nic_* hooks at the end of this file.
 *
 * Locking: every field of every object of a device is guarded by dev->lock.  The kernel half
 * holds it while it creates, modifies or destroys; the engine holds it while it processes (and
 * drops it while it sleeps).  The process's memory (rings, doorbell records, UAR pages) is read
 * and written by the engine the way hardware does it: with no lock, relying on the ownership
 * protocols of the mlx5 ABI (see rdma-core providers/mlx5/cq.c, qp.c and util/udma_barrier.h;
 * kernel drivers/infiniband/hw/mlx5/doorbell.c for the doorbell records).
 *
 * Addresses: the emulator runs inside the process (LD_PRELOAD or linked), so a process virtual
 * address recorded at CQ/QP/MR creation is directly dereferenceable by the engine.  Two processes
 * each carry their own emulator; they talk only through the wire (UDP on loopback), and several
 * processes may open one device: they share its QPN space and UDP port (emu/nic/port_share.c).
 */
#ifndef MLXD_EMU_H
#define MLXD_EMU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#define EMU_MAX_DEVICES 16
#define EMU_MAX_GIDS 16
#define EMU_QPN_SLOTS 65536   /* QPN = generation << 16 | slot; slots 0 and 1 are QP0 and QP1 */

struct emu_device;
struct emu_context;

enum emu_obj_type {
    EMU_OBJ_PD, EMU_OBJ_MR, EMU_OBJ_CQ, EMU_OBJ_QP, EMU_OBJ_UAR, EMU_OBJ_COMP_CHANNEL,
    EMU_OBJ_ASYNC_EVENT, EMU_OBJ_SRQ, EMU_OBJ__COUNT
};

/* One GID table entry of port 1 (struct ib_uverbs_gid_entry semantics). */
struct emu_gid {
    uint8_t  raw[16];       /* network order; ::ffff:a.b.c.d for IPv4-mapped */
    uint32_t type;          /* 0 IB, 1 RoCE v1, 2 RoCE v2 */
    bool     valid;
};

/* Static configuration of one emulated device (from the environment / config file). */
struct emu_device_cfg {
    char     name[64];      /* "mlx5_0" */
    unsigned index;         /* N in uverbsN */
    struct in_addr ipv4;    /* the port's address (127.0.0.x by default) */
    uint16_t udp_port;      /* RoCE v2 UDP port it listens on (4791 default) */
    uint16_t dst_udp_port;  /* port it sends to (4791 default) */
    unsigned mtu;           /* IB MTU in bytes: 256..4096 (active_mtu derived from it) */
    bool     link_up;       /* port state ACTIVE(4) vs DOWN(1) */
    bool     ethernet;      /* link layer Ethernet (RoCE); false: an InfiniBand port (LID 1 + index) */
    bool     sf;            /* a sub-function: device/driver is mlx5_core.sf on the auxiliary bus */
    uint64_t node_guid;
    struct emu_gid gids[EMU_MAX_GIDS];
    unsigned ngids;
    unsigned gid_types;     /* RoCE versions the port has GIDs of: bit 0 v1, bit 1 v2 (default 3) */
    unsigned uars_per_page; /* GET_CONTEXT num_uars_per_page (default 1: one 4 KiB UAR per page) */
    char     pcap_path[256];/* "" = no wire capture */
};

struct emu_pd {
    uint32_t handle, pdn;
    struct emu_context *ctx;
};

struct emu_mr {
    uint32_t handle, lkey, rkey;
    /* which allocation of the mkey this is: unique per device for its life (the key's 8-bit tag
     * repeats, and a freed slot is taken again), so a window can tell its region from a later
     * one under the same key */
    uint64_t mkey_serial;
    uint64_t addr;          /* process VA of the first byte */
    uint64_t iova;          /* address the NIC (and remote peers) use: hca_va / iova */
    uint64_t length;        /* bytes */
    uint32_t access;        /* IB_UVERBS_ACCESS_* */
    int      dmabuf_fd;     /* -1 for host memory; else the dup'ed fd */
    void    *dmabuf_map;    /* dma-buf MRs: the emulator's own mapping; addr points into it */
    struct emu_pd *pd;
    /* A memory window (ALLOC_MW; k: hw/mlx5/mr.c mlx5_ib_alloc_mw: a KLM mkey created 'free',
     * en_rinval for type 2) shares the mkey space of the regions.  It has no lkey (0).  While
     * bound (mw_free false) rkey is the bound key (its low byte chosen by the bind), iova/length
     * the window as peers address it, access its REMOTE_* rights, mw_base the window's first
     * byte as an address of the region mw_mr_key names (looked up again at each access: a
     * region deregistered meanwhile fails the access, and so does another region under the same
     * key, told apart by mw_mr_serial, its mkey_serial at bind time), and for type 2 mw_qpn the
     * one QP it may be used through (emu/nic/nic_mw.c). */
    uint8_t  mw_type;       /* 0: a memory region; 1 or 2: a window of that type */
    bool     mw_free;
    uint32_t mw_qpn;
    uint32_t mw_mr_key;
    uint64_t mw_mr_serial;
    uint64_t mw_base;
};

struct emu_comp_channel {
    int      fd;            /* the fd handed to the process (an eventfd-like fd the emulator owns) */
    struct emu_context *ctx;
};

struct emu_uar {
    uint32_t handle;
    uint32_t page_id;       /* the HW UAR index (PAGE_ID attribute) */
    uint32_t type;          /* 0 BF (write-combining), 1 NC */
    volatile uint8_t *page; /* the 4096-byte page mapped into the process (NULL until mmap) */
    uint64_t mmap_offset;
};

struct emu_cq {
    uint32_t handle, cqn;
    uint64_t user_handle;         /* echoed in completion / async events */
    volatile uint8_t *buf;        /* the process's CQ ring (CQE size * ncqe bytes) */
    uint32_t ncqe;                /* power of two */
    uint32_t cqe_size;            /* 64 or 128 */
    volatile uint32_t *dbrec;     /* [0] SET_CI BE32 (ci & 0xffffff), [1] ARM BE32 word */
    bool     real_time_ts;        /* MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS: CQE timestamps in the
                                     real-time format (emu_nic_cqe_timestamp) */
    bool     ignore_overrun;      /* IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN (k: hw/mlx5/cq.c sets cqc.oi):
                                     the NIC never reads [0] and never stops on an overrun */
    uint8_t  cqe_comp;            /* cqe_comp_en with this MLX5_IB_CQE_RES_FORMAT_* (1, 2, 4); 0: off
                                     (the NIC compresses bursts: emu/nic/nic_cqe_comp.c) */
    struct emu_uar *uar;          /* the UAR whose +0x20 takes the arm doorbell */
    struct emu_comp_channel *channel;  /* may be NULL */
    int      async_fd;            /* where CQ errors go (EVENT_FD or the default async fd) */
    uint32_t comp_events_reported, async_events_reported;
    /* engine state */
    uint32_t pi;                  /* producer index: CQEs written so far */
    uint32_t last_arm_sn;         /* last arm sequence number that produced an event */
    bool     armed, armed_solicited;
    void    *nic;                 /* engine-private */
    struct emu_context *ctx;
};

/* A shared receive queue (k: hw/mlx5/srq.c mlx5_ib_create_srq; rdma-core providers/mlx5/srq.c).
 * The buffer holds nwqe WQEs of 1 << wqe_shift bytes: struct mlx5_wqe_srq_next_seg (16 B, the
 * next WQE's index BE16 at byte 2) then data segments.  The doorbell record [0] holds the BE32
 * counter of WQEs the process has posted.  The NIC takes WQEs from its own head, following the
 * next pointers (nic_srq.c). */
struct emu_srq {
    uint32_t handle, srqn;
    uint64_t user_handle;         /* echoed in SRQ async events */
    struct emu_pd *pd;
    volatile uint8_t *buf;
    uint32_t nwqe, wqe_shift, max_gs;   /* nwqe a power of two; max_gs data segments per WQE */
    volatile uint32_t *dbrec;
    uint32_t limit;               /* armed limit (MODIFY_SRQ IB_SRQ_LIMIT); 0 = not armed */
    int      async_fd;
    uint32_t events_reported;
    /* engine state */
    uint16_t head;                /* index of the next WQE the NIC takes */
    uint16_t taken;               /* WQEs taken so far (low 16 bits, like the posted counter) */
    struct emu_context *ctx;
};

/* Attributes as MODIFY_QP leaves them (struct ib_uverbs_modify_qp semantics, host order). */
struct emu_qp_attr {
    uint8_t  port_num, path_mtu, timeout, retry_cnt, rnr_retry, min_rnr_timer;
    uint8_t  max_rd_atomic, max_dest_rd_atomic, sgid_index, hop_limit, traffic_class, sl;
    uint16_t pkey_index;
    uint32_t access_flags, dest_qp_num, rq_psn, sq_psn, qkey, flow_label;
    uint8_t  dgid[16];
};

struct emu_qp {
    uint32_t handle, qpn;
    uint32_t type;                /* 2 RC, 3 UC (IB_UVERBS_QPT_*) */
    uint32_t state;               /* IB_QPS_*: RESET 0, INIT 1, RTR 2, RTS 3, SQD 4, SQE 5, ERR 6 */
    uint64_t user_handle;
    struct emu_pd *pd;
    struct emu_cq *send_cq, *recv_cq;
    struct emu_srq *srq;          /* receives come from this SRQ (then rq_wqe_cnt is 0) */
    volatile uint8_t *buf;        /* process QP buffer: RQ at 0, SQ at rq_wqe_cnt << rq_wqe_shift */
    volatile uint8_t *sq, *rq;
    uint32_t sq_wqe_cnt;          /* WQEBBs (64 B each), power of two, 0 = no SQ */
    uint32_t rq_wqe_cnt, rq_wqe_shift;
    volatile uint32_t *dbrec;     /* [0] RCV BE32 (rq head & 0xffff), [1] SND BE32 (sq pi & 0xffff) */
    struct emu_uar *uar;          /* send doorbell / BlueFlame page */
    uint32_t bf_off;              /* the QP's bfreg in it: 0x800 + 0x200 * k (two 256-B halves);
                                     0: not known to the kernel (MLX5_QP_FLAG_UAR_PAGE_INDEX: the
                                     library picks it, rdma-core providers/mlx5/verbs.c
                                     mlx5_insert_dyn_uuars; emu/nic/nic_doorbell.c) */
    uint32_t uidx;                /* cqe_version 1: echoed in CQE srqn_uidx; else 0xffffff */
    bool     sq_sig_all, scatter_to_cqe;
    uint32_t max_inline, max_send_sge, max_recv_sge, max_send_wr, max_recv_wr;
    int      async_fd;
    uint32_t events_reported;
    struct emu_qp_attr attr;
    void    *nic;                 /* engine-private */
    struct emu_context *ctx;
};

/* One open file of /dev/infiniband/uverbsN. */
struct emu_context {
    struct emu_device *dev;
    int      fd;                  /* the fd the process holds */
    bool     has_ucontext;        /* GET_CONTEXT done */
    bool     dyn_uar;             /* lib_caps DYN_UAR granted */
    uint8_t  cqe_version;         /* 0 or 1 */
    int      default_async_fd;    /* -1 until ASYNC_EVENT_ALLOC / legacy GET_CONTEXT */
    /* objects owned by this file: the kernel half keeps them in its own tables */
    void    *objs;
};

struct emu_device {
    struct emu_device_cfg cfg;
    pthread_mutex_t lock;         /* guards every object of this device, see the top */
    unsigned open_contexts;       /* contexts with GET_CONTEXT done; the engine runs while > 0 */
    /* hw_counters/rx_write_requests: RDMA WRITE request packets the responder accepted (the
     * engine adds with relaxed atomics before the packet's CQE, if any, is released; readers load
     * without a lock).  Lives as long as the configuration (as a Q counter lives as long as the
     * driver), across engine restarts.  Written only by the engine's pass, under dev->lock. */
    _Atomic uint64_t rx_write_requests;
    /* hw_counters/out_of_buffer: packets dropped because no receive WQE was posted (mlx5 Q
     * counter; kernel drivers/infiniband/hw/mlx5/counters.c); hw_counters/out_of_sequence:
     * packets that arrived with a PSN gap before them.  Same rules as rx_write_requests. */
    _Atomic uint64_t out_of_buffer, out_of_sequence;
    void    *nic;                 /* engine-private (thread, socket, pcap, ...) */
    /* lookups the engine needs (kernel half maintains them under dev->lock) */
    struct emu_qp *(*qp_by_qpn)(struct emu_device *dev, uint32_t qpn);
    struct emu_mr *(*mr_by_key)(struct emu_device *dev, uint32_t key);   /* lkey or rkey */
    struct emu_mr *(*mkey_by_index)(struct emu_device *dev, uint32_t key); /* key >> 8 only: a UMR
                                                                              names its mkey so */
};

/* ---- hooks: the kernel half calls these (with dev->lock held); the NIC half implements them.
 * Each returns 0 or a negative errno, which the kernel half returns to the process. */
int  emu_nic_device_open(struct emu_device *dev);     /* first context: start engine, bind UDP */
void emu_nic_device_close(struct emu_device *dev);    /* last context gone: stop engine, close */
int  emu_nic_cq_create(struct emu_cq *cq);
void emu_nic_cq_destroy(struct emu_cq *cq);
int  emu_nic_qp_create(struct emu_qp *qp);
/* After a successful state change (attr already updated).  To ERR: flush posted WQEs. */
void emu_nic_qp_modified(struct emu_qp *qp, uint32_t old_state);
void emu_nic_qp_destroy(struct emu_qp *qp);
/* The QPN space is the port's, shared by every process that has the device open (as firmware
 * assigns QPNs on a real port): claims slot (qpn & 0xffff) for this process before the kernel
 * half uses it; -EBUSY if another process holds it.  Released when the QP is destroyed, or by
 * the kernel when the process dies (emu/nic/port_share.c).  Needs the device open. */
int  emu_nic_qpn_claim(struct emu_device *dev, uint32_t slot);
void emu_nic_qpn_release(struct emu_device *dev, uint32_t slot);
/* The port's state changed (fault injection): the engine raises PORT_ACTIVE/PORT_ERR. */
void emu_nic_port_event(struct emu_device *dev, bool up);

/* Added by the NIC half (emu/nic/nic_clock.c): the device clocks that stamp CQEs
 * (mlx5_cqe64.timestamp).  The free-running internal timer: its value now (what the core-clock
 * page shows), its frequency (hca_core_clock, kHz) and wrap mask (timestamp_mask); whether the
 * device has the real-time (PTP) format; the real-time value now (seconds << 32 | ns); and the
 * timestamp a CQE of cq gets now (real time for a CQ created with REAL_TIME_TS). */
uint64_t emu_nic_clock_cycles(void);
uint32_t emu_nic_clock_khz(void);
uint64_t emu_nic_clock_mask(void);
bool     emu_nic_clock_real_time(void);
/* CQE compression caps (emu/nic/nic_cqe_comp.c): the session's maximum (0: no compression) and
 * whether the CSUM_STRIDX mini-CQE format is there (mini_cqe_resp_stride_index). */
uint32_t emu_nic_cqe_comp_max(void);
bool     emu_nic_cqe_comp_stridx(void);
uint64_t emu_nic_real_time_ts(void);
uint64_t emu_nic_cqe_timestamp(const struct emu_cq *cq);
/* Changes with every mlxd_emu_clock_set (the kernel half restarts its clock-info time base). */
unsigned emu_nic_clock_generation(void);

/* ---- services the kernel half offers the NIC half. */
/* Queue an async event (struct ib_uverbs_async_event_desc) on fd; element = user_handle or port. */
void emu_async_event(int async_fd, uint64_t element, uint32_t event_type);
/* Queue one completion event (struct ib_uverbs_comp_event_desc) for cq on its channel. */
void emu_comp_event(struct emu_cq *cq);
/* Rewrite dev's sysfs hw_counters files with the current values (for readers in other processes;
 * in-process reads are served live by the boundary).  The engine calls it at most every 10 ms
 * while a value changes, and when the device closes.  Takes no lock. */
void emu_sysfs_publish_counters(struct emu_device *dev);
/* The default async-event fd of every open context of dev (GET_CONTEXT done and an async fd
 * allocated), each once, at most max of them; returns how many.  Port events go to all of them,
 * whether or not the context owns objects (k: core/device.c ib_dispatch_event -> every
 * registered event handler; core/uverbs_main.c registers one per uverbs file with an async
 * event file, ib_uverbs_event_handler).  Call with dev->lock held from a hook the kernel half
 * called (it then holds the global lock that guards the list of files). */
unsigned emu_device_async_fds(struct emu_device *dev, int *fds, unsigned max);


/* Added by the kernel half (comment only): emu_async_event() and emu_comp_event() take only the
 * kernel half's event-queue lock, never dev->lock, so the engine calls them with dev->lock held
 * (emu_async_event needs it held: it walks the context's objects to credit events_reported).
 * Events for an fd the process has closed are dropped, as the kernel drops them. */

#endif
