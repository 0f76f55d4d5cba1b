/* driver.h (private): the objects behind the opaque handles of mlxd_uverbs.h / mlxd_mlx5.h,
 * shared by uverbs/ (kernel calls) and mlx5/ (the data path).  Hot fields come first. */
#ifndef MLXD_DRIVER_H
#define MLXD_DRIVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "mlxd_uverbs.h"
#include "mlxd_mlx5.h"
#include "fork_gen.h"
#include "mlxd_abi.h"

#define MLXD_MAX_QPS 4096          /* per NIC; uidx (cqe_version 1) indexes nic->qp_table */
#define MLXD_MAX_GIDS 256

enum obj_state { OBJ_LIVE = 0x4c495645 /* "LIVE" */, OBJ_DEAD = 0x44454144 /* "DEAD" */ };

/* What a run of CQEs of one QP frees in that QP's rings (mlx5/poll.c struct release). */
struct mlxd__run {
    struct mlxd_qp *qp;            /* the run's QP (NULL: none yet, or a CQE of no known QP) */
    uint32_t rq_done;              /* receives the run completed */
    const uint64_t *sq_next;       /* sq_next[] of the run's last requester CQE; NULL: none */
};

/* A compressed CQE session being expanded (mlx5/cqe_mini.c): its title is the CQE at ci, which
 * stays there (and the consumer index with it) until the last mini-CQE has been returned. */
struct mlxd__zip {
    uint32_t n;                    /* mini-CQEs of the session; 0: none open */
    uint32_t i;                    /* the next one to return */
    bool     req;                  /* a requester session (s_wqe_info mini-CQEs) */
    uint16_t wc;                   /* the title's wqe_counter (responder: + i per mini-CQE) */
    struct mlxd__run run;          /* what the returned completions free, at the session's end */
    uint8_t  title[64];            /* the title CQE, format bits cleared */
    uint64_t tmpl[7];              /* responder: the completion of the title (struct mlxd_completion) */
    bool     drop;                 /* its QP was destroyed: close it, returning nothing more */
    char     broken[192];          /* not "": a title could not be decoded; every poll fails */
};

/* The QPN mlxd_qp_destroy writes into a removed full CQE or title of a compressed CQ
 * (mlx5/cq_clean.c): the poll loop skips such a unit.  0xFFFFFF is the IB multicast QPN (IB
 * spec 10.5.2.1), never a QP's number. */
#define MLXD__QPN_CLEANED 0xFFFFFFu

struct mlxd_cq {
    /* --- hot: mlxd_cq_poll / mlxd_cq_arm --- */
    volatile uint8_t *buf;          /* ncqe CQEs of 64 bytes */
    uint32_t ci;                    /* consumer index (free-running) */
    uint32_t ncqe;                  /* power of two */
    volatile uint32_t *dbrec;       /* [0] SET_CI BE32, [1] ARM BE32; an overrun-ignoring CQ's
                                       points at ci_sink: the poll loop's consumer-index stores
                                       (one per batch) then never reach the doorbell record */
    struct mlxd_qp *const *qp_table;/* nic->qp_table, NULL for detached CQs */
    uint32_t state;                 /* enum obj_state */
    uint8_t  cqe_version;
    bool     events;                /* armable (comp channel attached) */
    bool     detached;
    bool     comp;                  /* cqe_comp != 0, here in the hot line: poll_batch's hook */
    uint32_t cqn;
    struct mlxd_qp *hot_qp;         /* the QP of the last batch's last run, when it has a receive
                                       ring: the poll loop's hot path (mlx5/poll.c); written by
                                       the poller, cleared by mlxd_qp_destroy (no poll running) */
    volatile uint64_t *arm_db;      /* NC UAR + 0x20 */
    _Atomic uint32_t arm_sn;        /* incremented per completion event read (mlxd_wait) */
    /* --- cold --- */
    struct mlxd_nic *nic;
    uint32_t handle;
    uint64_t user_data;
    void    *mem;                   /* mmap'ed ring */
    size_t   mem_len;
    uint64_t pinned_ring, pinned_db;  /* pages the kernel pinned for it (memlock.c), 0 once released */
    void    *db;                    /* the doorbell record (in the ring's mapping) */
    volatile uint32_t *arm_rec;     /* &db[1]: the arm word mlxd_cq_arm writes */
    bool     ignore_overrun;        /* IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN */
    bool     real_time;             /* MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS */
    uint32_t ci_sink[2];            /* dbrec of an overrun-ignoring CQ */
    uint64_t committed;             /* the send/receive depths of its QPs, and the depth of each
                                       SRQ whose QPs complete receives here (under nic->lock): the
                                       overrun checks of mlxd_qp_create */
    unsigned qps;                   /* QPs using this CQ (under nic->lock) */
    int      destroy_result;
    struct mlxd_cq *next;
    struct mlxd_recorder *recorder; /* mlxd_cq_record_start: the poll loop's general path copies
                                       each consumed CQE there (mlx5/record.c); NULL: off */
    uint32_t cqe_comp;              /* enum mlxd_cqe_comp: the responder mini-CQE format the CQ
                                       was created with; 0: no CQE compression (mlx5/cqe_mini.c) */
    struct mlxd__zip zip;           /* the compressed session at ci being expanded (cqe_mini.c) */
};

/* A shared receive queue (uverbs/srq.c, mlx5/srq_ring.c).  The WQEs form a list linked by their
 * next_wqe_index (struct mlx5_wqe_srq_next_seg): mlxd_srq_receive fills from head, the poll
 * loop links a completed WQE after tail (the WQE at tail is never posted: head == tail is
 * empty of free WQEs).  free_wqes is released by the poller after it linked the WQE, acquired
 * by the poster before it follows the link. */
struct mlxd_srq {
    /* --- hot: mlxd_srq_receive / completions --- */
    volatile uint8_t *buf;          /* nwqe WQEs of 1 << wqe_shift bytes */
    uint32_t wqe_shift, nwqe;       /* nwqe a power of two */
    uint32_t max_sge, depth;
    uint32_t head;                  /* next WQE to fill (mlxd_srq_receive) */
    uint32_t tail;                  /* last WQE of the free list (the poller) */
    uint32_t posted;                /* receives posted (free-running; BE32 in the record) */
    _Atomic uint32_t free_wqes;     /* WQEs mlxd_srq_receive may fill */
    volatile uint32_t *dbrec;
    uint64_t *wrid;                 /* [WQE index] wr_id */
    uint32_t state;                 /* enum obj_state */
    /* --- cold --- */
    struct mlxd_nic *nic;
    uint32_t handle, srqn;
    uint64_t user_data;
    void    *mem;
    size_t   mem_len;
    uint64_t pinned_ring, pinned_db;
    unsigned qps;                   /* live QPs using it (under nic->lock) */
    struct mlxd_srq_cq *rcqs;       /* the receive CQs of its QPs: its depth counts on each once */
    int      destroy_result;
    struct mlxd_srq *next;
};
/* A receive CQ of an SRQ's QPs (uverbs/qp.c): the SRQ's depth is in cq->committed while users
 * QPs (or QPs being created) complete its receives there (under nic->lock). */
struct mlxd_srq_cq {
    struct mlxd_cq *cq;
    unsigned users;
    struct mlxd_srq_cq *next;
};
/* mlx5/srq_ring.c: the completion of SRQ WQE index wc: its wr_id; links the WQE after tail (poll
 * thread).  mlxd_srq_receive may fill it only once mlxd__srq_free has counted it, which the
 * poll loop does once per run of completions and only after the CQ's doorbell record handed
 * their CQE slots back (struct release in mlx5/poll.c). */
uint64_t mlxd__srq_complete(struct mlxd_srq *srq, uint32_t wc);
void mlxd__srq_free(struct mlxd_srq *srq, uint32_t n);
void mlxd__srq_release(struct mlxd_srq *srq);

struct mlxd_qp {
    /* --- hot: send --- */
    volatile uint8_t *sq;           /* send ring: sq_wqebbs blocks of 64 bytes */
    uint32_t sq_pi;                 /* producer index in WQEBBs (free-running) */
    uint32_t sq_wqebbs;             /* power of two (0 = no send ring) */
    uint32_t sq_posted;             /* entries posted (free-running) */
    uint32_t sq_depth;              /* entries outstanding at most: the send_depth asked for */
    /* Released by completions (written by poll, read by post): entries << 32 | WQEBBs, both
     * free-running, one 64-bit store so that a poster never sees one without the other. */
    _Atomic uint64_t sq_ci;
    uint32_t qpn;
    uint64_t *sq_wrid;              /* [idx] wr_id of the WQE starting at idx */
    uint64_t *sq_next;              /* [idx] sq_ci after the WQE starting at idx (same packing) */
    volatile uint32_t *dbrec;       /* [0] RCV BE32, [1] SND BE32 */
    volatile uint8_t *bf_reg;       /* UAR + 0x800 */
    uint32_t bf_offset;             /* 0 or bf_buf_size, toggled per ring */
    uint32_t bf_buf_size;           /* half of bf_reg_size for a WC UAR; 0 = doorbell only */
    uint32_t pending;               /* WQEs posted since the last ring */
    uint8_t  next_fence;            /* fm_ce_se bits for the next WQE (small fence after a bind) */
    uint32_t last_pi;               /* sq_pi of the last posted WQE */
    uint32_t last_nbb;              /* its WQEBBs */
    uint32_t max_inline;
    uint32_t state;                 /* enum obj_state */
    uint32_t type;                  /* MLXD_QP_RC / MLXD_QP_UC */
    /* --- hot: receive --- */
    volatile uint8_t *rq;
    uint32_t rq_head;               /* receives posted (free-running) */
    uint32_t rq_wqe_cnt;            /* power of two (0 = no receive ring) */
    uint32_t rq_depth;              /* receives outstanding at most: the recv_depth asked for */
    _Atomic uint32_t rq_ci;         /* receives completed (written by poll) */
    uint32_t rq_wqe_shift;          /* log2 of the receive WQE stride */
    uint32_t max_send_sge;          /* data segments per send WQE at most */
    uint32_t max_recv_sge;          /* data segments written per receive at most */
    uint64_t *rq_wrid;
    /* --- cold --- */
    struct mlxd_nic *nic;
    struct mlxd_cq *send_cq, *recv_cq;
    struct mlxd_srq *srq;           /* receives come from this SRQ (then rq_wrid is NULL) */
    uint32_t handle;
    uint32_t uidx;
    uint32_t ib_state;              /* IB_QPS_*: 0 RESET 1 INIT 2 RTR 3 RTS 6 ERR */
    uint32_t psn;
    uint32_t qkey;                  /* UD: the Q_Key set by mlxd_qp_ud_ready */
    uint32_t gid_index;
    uint8_t  gid[16];
    uint64_t user_data;
    void    *mem;                   /* mmap'ed QP buffer */
    size_t   mem_len;
    uint64_t pinned_ring, pinned_db;  /* pages the kernel pinned for it (memlock.c), 0 once released */
    void    *db;
    uint32_t uar_handle;
    void    *uar_map;
    bool     uar_bf;
    int      destroy_result;
    struct mlxd_qp *next;
};

struct mlxd_region {
    uint64_t iova, length;
    uint32_t lkey, rkey;
    uint32_t state;
    uint32_t handle;
    struct mlxd_nic *nic;
    int      deregister_result;
    void    *host_addr;             /* host memory registered (NULL: dma-buf): MADV_DONTFORK */
    uint64_t pinned_pages;          /* what its registration pinned (memlock.c) */
    struct mlxd_region *next;
};

/* An address handle (uverbs/ud.c): the AV every UD WQE through it copies. */
struct mlxd_ah {
    uint32_t state;                 /* enum obj_state */
    uint8_t  av[MLXD_WQE_AV_SIZE];  /* struct mlx5_wqe_av, qkey and dqp_dct left 0 */
    struct mlxd_nic *nic;
    uint32_t handle;
    int      destroy_result;
    struct mlxd_ah *next;
};

/* A memory window (uverbs/mw.c). */
struct mlxd_mw {
    uint32_t state;                 /* enum obj_state */
    uint32_t type;                  /* 1 or 2 */
    uint32_t rkey;                  /* as of the last bind posted */
    uint32_t handle;
    struct mlxd_nic *nic;
    int      destroy_result;
    struct mlxd_mw *next;
};

struct mlxd_nic {
    uint32_t state;                 /* enum obj_state (DEAD after close) */
    unsigned fork_gen;              /* mlxd__fork_gen at open: a child of fork may not use it */
    char     name[64];
    char     dev_path[64];
    int      fd, async_fd, comp_fd;
    /* GET_CONTEXT (struct mlx5_ib_alloc_ucontext_resp) */
    uint32_t bf_reg_size, cache_line_size, max_send_wqebb, max_recv_wr, num_uars_per_page;
    uint32_t max_sq_desc_sz, max_rq_desc_sz, num_comp_vectors;
    uint8_t  cqe_version;
    /* QUERY_DEVICE (defaults when the kernel does not answer it) */
    uint32_t max_cqe, max_qp_wr, max_sge, max_qp_rd_atom;
    uint32_t max_srq_wr, max_srq_sge;   /* QUERY_DEVICE; 0: no SRQs */
    /* QUERY_PORT(1) */
    struct mlxd_port_info port;
    struct mlxd_gid gids[MLXD_MAX_GIDS];
    unsigned ngids;
    int      default_gid;
    /* the NC UAR for CQ arm doorbells */
    uint32_t uar_handle, uar_page_id;
    void    *uar_map;
    uint32_t pd_handle, pdn;
    pthread_mutex_t lock;           /* object lists, qp_table, pinned bytes (never on hot paths) */
    struct mlxd_region *regions;
    struct mlxd_cq *cqs;
    struct mlxd_qp *qps;
    struct mlxd_srq *srqs;
    struct mlxd_ah *ahs;
    struct mlxd_mw *mws;
    struct mlxd_qp *qp_table[MLXD_MAX_QPS];
    struct mlxd_nic *next_closed;
    /* clocks (uverbs/clock.c) */
    bool     real_time_ts;          /* GET_CONTEXT: MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS */
    uint8_t  clock_info_versions;   /* GET_CONTEXT: bit MLX5_IB_CLOCK_INFO_V1 */
    uint32_t hca_core_clock;        /* kHz (EX_QUERY_DEVICE); 0 unknown */
    uint64_t timestamp_mask;        /* EX_QUERY_DEVICE */
    const volatile void *clock_info;/* the kernel's struct mlx5_ib_clock_info page, or NULL */
};

/* Validity checks used by every entry point (misuse -> -EINVAL with a message). */
/* Live, and used by the process that opened it (not a child of fork: the child shares the
 * parent's uverbs file, so its calls would act on the parent's objects). */
static inline bool nic_ok(const struct mlxd_nic *n)
{
    return n && n->state == OBJ_LIVE && n->fork_gen == mlxd__fork_gen;
}

/* The refusal of a destroy or close in a child of fork (fn: the call).  The child shares the
 * parent's uverbs file, so the kernel would destroy the parent's object. */
int mlxd__forked_child(const char *fn, const struct mlxd_nic *n);
#define NIC_FORKED(n) ((n)->fork_gen != mlxd__fork_gen)

/* Kernel-side helpers (uverbs/). */
/* UAR_OBJ_ALLOC + mmap.  0, a negative errno of the kernel (ioctl or mmap), or
 * MLXD__UAR_TOO_SMALL when the kernel's mapping length is below a system page (undone). */
#define MLXD__UAR_TOO_SMALL 1
int  mlxd__uar_alloc(struct mlxd_nic *nic, uint32_t type, uint32_t *handle, uint32_t *page_id,
                     void **map);
int  mlxd__uar_free(struct mlxd_nic *nic, uint32_t handle, void *map);
void mlxd__cq_release(struct mlxd_cq *cq);      /* rings + db (no kernel call) */
/* The NIC's clock caps and its clock-info page (uverbs/clock.c); nothing fails: a clock the
 * kernel does not describe is reported as absent. */
void mlxd__clock_open(struct mlxd_nic *nic);
void mlxd__clock_close(struct mlxd_nic *nic);

/* memlock.c: pages pinned through the kernel, per process, as core/umem.c counts them */
enum mlxd_pin_kind { MLXD_PIN_REGION, MLXD_PIN_RING, MLXD_PIN_DBREC, MLXD_PIN__N };
uint64_t mlxd__pin_pages(uint64_t addr, uint64_t len);        /* pages [addr, addr + len) touches */
void mlxd__pinned_add(enum mlxd_pin_kind k, int64_t pages);
/* For a kernel refusal rc of `call` that would have pinned `pages` more: when RLIMIT_MEMLOCK
 * explains it (ENOMEM, a finite limit, no CAP_IPC_LOCK, the count past the limit), sets the
 * message saying what was counted and returns -ENOMEM; else returns 0 (the caller's message). */
int mlxd__memlock_error(const char *fn, const char *dev, const char *call, int rc, uint64_t pages);
void mlxd__qp_release(struct mlxd_qp *qp);
/* Removes the CQEs of QP qpn that the software owns from cq (mlx5/cq_clean.c), after
 * QP_DESTROY, with no poll of cq running; returns how many. */
uint32_t mlxd__cq_clean(struct mlxd_cq *cq, uint32_t qpn);
/* uverbs/cqe_comp.c: 0 when the device compresses CQEs in mini-CQE format `format` (enum
 * mlxd_cqe_comp), else -EINVAL / -EOPNOTSUPP with the message set. */
int mlxd__cqe_comp_check(struct mlxd_nic *nic, uint32_t format);
/* mlx5/poll.c for mlx5/cqe_mini.c: decode one full CQE c into w with the general path's rules
 * (run carries the QP and what is freed; account false: no SRQ WQE is taken back, for a
 * template); the general path's batch of n owned full CQEs at ci (after the read barrier);
 * freeing a run's ring slots (after the doorbell record handed its CQE slots back). */
void mlxd__decode_one(const struct mlxd_cq *cq, const uint8_t *c, struct mlxd_completion *w,
                      struct mlxd__run *run, bool account);
int  mlxd__poll_full(struct mlxd_cq *cq, struct mlxd_completion *out, uint32_t n);
void mlxd__release_run(const struct mlxd__run *run);
/* mlx5/cqe_mini.c: a CQ created with CQE compression polls here (the poll loop's hook: the CQ
 * never has a hot QP); a destroyed QP is forgotten by an open session. */
int  mlxd__cq_poll_mini(struct mlxd_cq *cq, struct mlxd_completion *out, int max);
void mlxd__cq_mini_forget_qp(struct mlxd_cq *cq, const struct mlxd_qp *qp);
uint32_t mlxd__cq_clean_srq(struct mlxd_cq *cq, uint32_t qpn, struct mlxd_srq *srq);
/* Sizing shared with the tests' expectations (rdma-core providers/mlx5/verbs.c
 * mlx5_calc_send_wqe, mlx5_calc_sq_size). */
uint32_t mlxd__roundup_pow2(uint32_t v);
uint32_t mlxd__send_wqe_size(uint32_t max_inline, uint32_t max_send_sge);
/* uverbs/ud.c: the send WQE of a UD QP (ctrl + datagram segment + data or inline); mlxd_close
 * destroys the live address handles (their memory stays with the closed NIC, as the QPs'). */
uint32_t mlxd__ud_send_wqe_size(uint32_t max_inline, uint32_t max_send_sge);
int  mlxd__ah_destroy_all(struct mlxd_nic *nic);
int  mlxd__mw_free_all(struct mlxd_nic *nic);

#endif
