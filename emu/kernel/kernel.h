/* kernel.h: private header of the emulator's kernel half (boundary, sysfs, uverbs core, mlx5_ib).
 *
 * Locks, outermost first:
 *   emu_g.lock      one global mutex: every system call the kernel half answers runs under it
 *                   (open/close/ioctl/write/mmap/munmap bookkeeping), so per-file tables need no
 *                   other lock.  Never held while blocking (event reads wait outside it).
 *   dev->lock       taken inside emu_g.lock whenever an object the engine can see is created,
 *                   changed or destroyed, and around every emu_nic_* hook.
 *   emu_g.ev_lock   event queues (comp channels, async fds).  emu_comp_event()/emu_async_event()
 *                   take only this one, so the engine may call them with dev->lock held.
 */
#ifndef MLXD_EMU_KERNEL_H
#define MLXD_EMU_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <rdma/ib_user_verbs.h>
#include "../emu.h"

#define EMU_API __attribute__((visibility("default")))

#define EMU_PAGE 4096u
#define EMU_MAX_FD 65536             /* fds above this are never emulated (see open_uverbs) */
#define EMU_UVERBS_MAJOR 231         /* IB_UVERBS_MAJOR */
#define EMU_UVERBS_BASE_MINOR 192    /* IB_UVERBS_BASE_MINOR */
#define EMU_QP_SLOTS EMU_QPN_SLOTS   /* per device: qpn & 0xffff indexes the table (emu.h) */
#define EMU_MR_SLOTS 65536           /* per device: (key >> 8) & 0xffff indexes the table */

/* ---- device limits reported by QUERY_DEVICE / GET_CONTEXT and enforced at create time ---- */
#define EMU_LOG_MAX_QP_SZ   15                   /* max_qp_wr = 32768 */
#define EMU_MAX_QP_WR       (1u << EMU_LOG_MAX_QP_SZ)
#define EMU_LOG_MAX_CQ_SZ   22                   /* max_cqe = 2^22 - 1 */
#define EMU_MAX_CQE         ((1u << EMU_LOG_MAX_CQ_SZ) - 1)
#define EMU_MAX_SQ_DESC     512                  /* max_sq_desc_sz: bytes of one send WQE */
#define EMU_MAX_RQ_DESC     512
#define EMU_MAX_SGE         30                   /* (512 - ctrl 16 - raddr 16) / 16 */
#define EMU_MAX_INLINE      476                  /* align(4 + inline, 16) <= 512 - 32 */
#define EMU_MAX_QP          (EMU_QP_SLOTS - 2)   /* slots 0 and 1 are QP0/QP1 */
#define EMU_MAX_MR          (EMU_MR_SLOTS - 2)   /* slots 0, 1 unused (0x100 = MLX5_INVALID_LKEY) */
#define EMU_MAX_CQ          65536
#define EMU_MAX_PD          65536
#define EMU_LOG_MAX_SRQ_SZ  15                   /* SRQ WQEs < 1 << log_max_srq_sz */
#define EMU_MAX_SRQ         65536
#define EMU_MAX_MSG         (1u << 30)           /* port max_msg_sz */
#define EMU_MAX_RD_ATOM     16                   /* 1 << log_max_ra_req/res_qp */
#define EMU_MAX_MR_SIZE     (~0ull)
#define EMU_NUM_COMP_VECTORS 4
#define EMU_BF_REG_SIZE     512
#define EMU_MAX_UARS_PER_CTX 512                 /* dynamic UAR objects per context */
#define EMU_MAX_STATIC_BFREGS 2048               /* MLX5_MAX_BFREGS */
#define EMU_GID_TBL_LEN     EMU_MAX_GIDS
#define EMU_CORE_CLOCK_OFF  0                    /* hca_core_clock_offset in the CORE_CLOCK page */

/* Async event numbers (k: include/rdma/ib_verbs.h enum ib_event_type; the ABI of
 * struct ib_uverbs_async_event_desc.event_type). */
enum {
    EMU_EV_CQ_ERR = 0, EMU_EV_QP_FATAL, EMU_EV_QP_REQ_ERR, EMU_EV_QP_ACCESS_ERR, EMU_EV_COMM_EST,
    EMU_EV_SQ_DRAINED, EMU_EV_PATH_MIG, EMU_EV_PATH_MIG_ERR, EMU_EV_DEVICE_FATAL,
    EMU_EV_PORT_ACTIVE, EMU_EV_PORT_ERR, EMU_EV_LID_CHANGE, EMU_EV_PKEY_CHANGE, EMU_EV_SM_CHANGE,
    EMU_EV_SRQ_ERR, EMU_EV_SRQ_LIMIT_REACHED, EMU_EV_QP_LAST_WQE_REACHED,
    EMU_EV_CLIENT_REREGISTER, EMU_EV_GID_CHANGE, EMU_EV_WQ_FATAL,
};

/* QP states and attribute-mask bits (k: include/rdma/ib_verbs.h enum ib_qp_state,
 * enum ib_qp_attr_mask; identical to libibverbs' IBV_QPS_* / IBV_QP_*). */
enum { EMU_QPS_RESET, EMU_QPS_INIT, EMU_QPS_RTR, EMU_QPS_RTS, EMU_QPS_SQD, EMU_QPS_SQE, EMU_QPS_ERR };
enum {
    EMU_QP_STATE = 1 << 0, EMU_QP_CUR_STATE = 1 << 1, EMU_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
    EMU_QP_ACCESS_FLAGS = 1 << 3, EMU_QP_PKEY_INDEX = 1 << 4, EMU_QP_PORT = 1 << 5,
    EMU_QP_QKEY = 1 << 6, EMU_QP_AV = 1 << 7, EMU_QP_PATH_MTU = 1 << 8, EMU_QP_TIMEOUT = 1 << 9,
    EMU_QP_RETRY_CNT = 1 << 10, EMU_QP_RNR_RETRY = 1 << 11, EMU_QP_RQ_PSN = 1 << 12,
    EMU_QP_MAX_QP_RD_ATOMIC = 1 << 13, EMU_QP_ALT_PATH = 1 << 14, EMU_QP_MIN_RNR_TIMER = 1 << 15,
    EMU_QP_SQ_PSN = 1 << 16, EMU_QP_MAX_DEST_RD_ATOMIC = 1 << 17, EMU_QP_PATH_MIG_STATE = 1 << 18,
    EMU_QP_CAP = 1 << 19, EMU_QP_DEST_QPN = 1 << 20, EMU_QP_RATE_LIMIT = 1 << 25,
};
/* The table of k: core/verbs.c qp_state_table for RC and UC (qp_transitions.c). */
bool emu_modify_qp_is_ok(unsigned cur, unsigned next, unsigned type, uint32_t mask);
uint32_t emu_qp_req_mask(unsigned cur, unsigned next, unsigned type);
uint32_t emu_qp_opt_mask(unsigned cur, unsigned next, unsigned type);
bool emu_qp_transition_valid(unsigned cur, unsigned next);

/* Object wrappers: the emu.h struct first, then what only the kernel half needs. */
struct k_pd   { struct emu_pd pub;  unsigned usecnt; };
/* Pages an object pinned (umem.c): its buffer, and the page of its doorbell record. */
struct emu_pins { uint64_t pages; uint64_t db_page; bool has_db; };

struct k_mr   { struct emu_mr pub;  unsigned slot; struct emu_pins pins; };
struct k_cq   { struct emu_cq pub;  unsigned usecnt; struct k_evq *chan_q; struct k_evq *async_q;
                struct emu_pins pins; };
struct k_qp   { struct emu_qp pub;  unsigned slot; struct k_evq *async_q; bool has_rq; int bfregn;
                struct emu_pins pins; };
struct k_srq  { struct emu_srq pub; unsigned usecnt; struct k_evq *async_q; struct emu_pins pins; };
struct k_ah   { uint32_t handle; struct k_pd *pd; struct ib_uverbs_ah_attr attr; };   /* ah.c */
struct k_uar  { struct emu_uar pub; int memfd; bool is_static; unsigned static_idx; unsigned usecnt; };

/* One queued event. */
struct k_event {
    struct k_event *next;
    uint64_t a;                 /* comp: cq user_handle; async: element */
    uint32_t type;              /* async: event_type */
    uint32_t *counter;          /* incremented when read (events_reported semantics) */
    void     *owner;            /* the object it belongs to, purged when it is destroyed */
};

/* An event file: completion channel or async-event fd.  The fd handed out is a real eventfd
 * whose counter is nonzero exactly while events are queued, so poll/select/epoll work natively. */
struct k_evq {
    struct emu_comp_channel chan;   /* chan.fd = the fd; chan.ctx = owning context or NULL */
    bool     is_async;
    bool     fd_open;               /* the process still holds chan.fd */
    unsigned refs;                  /* CQs/QPs that name it */
    struct k_event *head, *tail;
    unsigned nqueued;
    struct k_evq *next;             /* emu_g.evqs */
};

enum uobj_kind { UO_NONE, UO_PD, UO_MR, UO_CQ, UO_QP, UO_UAR, UO_COMP_CHANNEL, UO_ASYNC, UO_AH, UO_SRQ, UO_MW };

struct k_uobj { uint8_t kind; void *obj; };

/* A user mapping of the uverbs fd. */
struct k_map {
    uintptr_t addr;
    size_t    len;
    int       kind;                 /* 0 UAR, 1 CORE_CLOCK */
    struct k_uar *uar;
    struct k_map *next;
};

/* One open file of /dev/infiniband/uverbsN. */
struct emu_file {
    struct emu_context ctx;         /* ctx.objs points back here */
    struct k_uobj *objs;            /* handle -> object */
    uint32_t nobjs;                 /* capacity */
    uint32_t nlive;
    /* mlx5 static UARs (GET_CONTEXT without DYN_UAR) */
    struct k_uar **static_uars;
    unsigned nstatic, total_bfregs, num_low_lat;
    unsigned *bfreg_use;
    uint32_t next_mmap_index;       /* rdma_user_mmap_entry index for dynamic UARs */
    struct k_map *maps;
    struct k_dbpage *dbpages;       /* doorbell-record pages pinned by this context (umem.c) */
    bool     closing;
    struct emu_file *next;          /* emu_g.files */
};

/* The hw_counters files served live: rx_write_requests, out_of_buffer, out_of_sequence
 * (sysfs_tree.c emu_hw_counter_names, emu_hw_counter_value). */
#define EMU_HW_COUNTERS 3

/* Address resolution of a RoCE destination GID at MODIFY_QP (neigh.c): 0, or -ETIMEDOUT after
 * the kernel's 1 s when nothing answers for it. */
int emu_resolve_dgid(const uint8_t dgid[16]);
extern const char *const emu_hw_counter_names[EMU_HW_COUNTERS];
uint64_t emu_hw_counter_value(struct emu_device *dev, unsigned which);

struct emu_devstate {
    struct emu_device dev;          /* the emu.h device (cfg, lock, hooks) */
    struct k_qp **qp_tab;           /* EMU_QP_SLOTS, allocated at first open */
    struct k_mr **mr_tab;           /* EMU_MR_SLOTS */
    uint32_t qp_cursor, qp_gen, mr_cursor, mr_gen;
    uint64_t mkey_serial;           /* allocations of mkeys so far (emu_mr.mkey_serial) */
    uint32_t next_cqn, next_pdn, next_uar_page, next_srqn;
    unsigned nsrq;
    unsigned nqp, ncq, nmr, npd;
    dev_t    cnt_dev[EMU_HW_COUNTERS]; /* the sysfs hw_counters files (st_dev, st_ino) that */
    ino_t    cnt_ino[EMU_HW_COUNTERS]; /* open() recognises to serve the live value */
};

enum emu_fdkind { FD_NONE = 0, FD_UVERBS = 1, FD_EVQ = 2, FD_COUNTER = 3 };

/* An open fd of a sysfs hw_counters file (boundary.c): read() at offset 0 takes a fresh snapshot
 * of the value, as sysfs (seq_file) does; later offsets continue that snapshot. */
struct emu_cntfd {
    unsigned devidx;
    unsigned which;                 /* index in emu_hw_counter_names */
    unsigned gen;                   /* emu_g.cfg_gen when opened: stale after a reconfiguration */
    unsigned len;
    char     text[24];
};

struct emu_fdent { uint8_t kind; void *p; };

struct emu_global {
    pthread_mutex_t lock;
    pthread_mutex_t ev_lock;
    bool active;                    /* emulation on (MLXD_EMU != 0) */
    bool inited;
    unsigned ndev;
    struct emu_devstate devs[EMU_MAX_DEVICES];
    char sysfs_root[512];
    pid_t sysfs_owner;              /* pid that created (and removes) the tree; 0 = borrowed */
    char cfg_string[4096];          /* canonical configuration (marker of the sysfs tree) */
    unsigned cfg_gen;               /* incremented by every emu_config_apply */
    struct k_evq *evqs;
    struct emu_file *files;         /* every open uverbs file */
    unsigned live[EMU_OBJ__COUNT];
    unsigned live_ah;               /* address handles (ah.c) */
    unsigned live_mw;               /* memory windows (mw_objects.c) */
    unsigned nfiles, ncontexts, nmaps;
    uint64_t pinned_pages;          /* the process's pinned_vm from verbs objects (umem.c) */
    unsigned long long kernel_calls;
    /* CORE_CLOCK page */
    int      clock_memfd;
    volatile uint8_t *clock_page;   /* emulator's own writable view */
    int      clock_info_memfd;
    volatile uint8_t *clock_info_page;   /* struct mlx5_ib_clock_info, writable view */
    bool     clock_thread_started;
    pthread_t clock_thread;
    bool     clock_stop;            /* __atomic accesses: written at exit, read by the clock thread */
};

extern struct emu_global emu_g;
extern struct emu_fdent emu_fdtab[EMU_MAX_FD];

/* ---- real libc entry points (never the interposers) ---- */
struct emu_real {
    int   (*open)(const char *, int, ...);
    int   (*openat)(int, const char *, int, ...);
    int   (*close)(int);
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*pread)(int, void *, size_t, off_t);
    int   (*ioctl)(int, unsigned long, ...);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    int   (*munmap)(void *, size_t);
    int   (*socket)(int, int, int);
    int   (*stat)(const char *, struct stat *);
    int   (*lstat)(const char *, struct stat *);
    int   (*fstat)(int, struct stat *);
    int   (*fstatat)(int, const char *, struct stat *, int);
    int   (*statx)(int, const char *, int, unsigned, void *);
    int   (*dup2)(int, int);
    int   (*dup3)(int, int, int);
};
extern struct emu_real emu_real;
void emu_init(void);                 /* idempotent: resolves libc, reads config, builds sysfs */

/* ---- config.c ---- */
int  emu_config_parse(const char *spec, struct emu_device_cfg *out, unsigned *n, char *err, size_t errlen);
void emu_config_defaults(struct emu_device_cfg *out, unsigned *n);
void emu_config_canonical(const struct emu_device_cfg *c, unsigned n, char *buf, size_t len);
int  emu_config_apply(const struct emu_device_cfg *c, unsigned n);  /* under emu_g.lock */

/* ---- sysfs.c ---- */
int  emu_sysfs_build(void);
void emu_sysfs_remove(void);
int  emu_sysfs_update_port(unsigned devidx);   /* 0 or -errno of the sysfs write */

/* ---- uaccess.c: the process's memory, validated like copy_{from,to}_user ---- */
int  emu_copy_from_user(void *dst, uint64_t uaddr, size_t len);      /* 0 or -EFAULT */
int  emu_copy_to_user(uint64_t uaddr, const void *src, size_t len);  /* 0 or -EFAULT */
int  emu_clear_user(uint64_t uaddr, size_t len);
int  emu_user_buffer_cleared(uint64_t uaddr, size_t len);            /* 1 yes, 0 no, -EFAULT */
/* Is [uaddr, uaddr+len) mapped with the given access (PROT_READ/PROT_WRITE)?  0 or -EFAULT. */
int  emu_check_range(uint64_t uaddr, uint64_t len, int prot);

/* ---- objects.c ---- */
struct emu_file *emu_file_new(struct emu_devstate *ds, int fd);
void emu_file_destroy(struct emu_file *f);          /* close(): destroys everything it holds */
int  emu_uobj_alloc(struct emu_file *f, enum uobj_kind kind, void *obj, uint32_t *handle);
void emu_uobj_free(struct emu_file *f, uint32_t handle);
/* Look up a handle for use: -ENOENT absent, -EINVAL other type. */
int  emu_uobj_get(struct emu_file *f, uint32_t handle, enum uobj_kind kind, void **obj);
static inline struct emu_devstate *emu_ds(struct emu_file *f)
{ return (struct emu_devstate *)f->ctx.dev; }

struct emu_cq_args {
    uint32_t cqe; uint64_t user_handle; int comp_channel_fd; uint32_t comp_vector;
    int event_fd;                     /* -1: default async fd */
    uint32_t flags;
    const void *uhw_in; size_t uhw_inlen;   /* already copied */
    bool uar_index_attr; uint32_t uar_index;
};
struct emu_qp_args {
    uint32_t type; struct k_srq *srq;   /* srq: UVERBS_ATTR_CREATE_QP_SRQ_HANDLE / is_srq */
    uint64_t user_handle;
    uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
    bool sq_sig_all; int event_fd;
    const void *uhw_in; size_t uhw_inlen; size_t uhw_outlen;
};
int emu_k_alloc_pd(struct emu_file *f, uint32_t *handle, uint32_t *pdn);
int emu_k_dealloc_pd(struct emu_file *f, struct k_pd *pd);
/* ah.c */
struct mlx5_ib_create_ah_resp;
void emu_k_ah_dmac(const uint8_t dgid[16], uint8_t mac[6]);
int emu_k_create_ah(struct emu_file *f, struct k_pd *pd, const struct ib_uverbs_ah_attr *a,
                    size_t uhw_outlen, uint32_t *handle, struct mlx5_ib_create_ah_resp *resp,
                    size_t *resp_len);
int emu_k_destroy_ah(struct emu_file *f, struct k_ah *ah);
int emu_k_reg_mr(struct emu_file *f, struct k_pd *pd, uint64_t start, uint64_t length,
                 uint64_t iova, uint32_t access, int dmabuf_fd, uint64_t dmabuf_off,
                 uint32_t *handle, uint32_t *lkey, uint32_t *rkey);
int emu_k_dereg_mr(struct emu_file *f, struct k_mr *mr);
uint32_t emu_mkey_take(struct emu_devstate *ds, struct k_mr *mr);
/* mw_objects.c: memory windows (a k_mr whose pub.mw_type is 1 or 2) */
int emu_k_alloc_mw(struct emu_file *f, struct k_pd *pd, uint8_t type, const void *udata, size_t ulen,
                   uint32_t *handle, uint32_t *rkey);
int emu_k_dealloc_mw(struct emu_file *f, struct k_mr *mw);
int emu_k_create_cq(struct emu_file *f, const struct emu_cq_args *a, uint32_t *handle,
                    uint32_t *resp_cqe, uint32_t *cqn);
int emu_k_destroy_cq(struct emu_file *f, struct k_cq *cq, uint32_t *comp_rep, uint32_t *async_rep);
int emu_k_create_qp(struct emu_file *f, const struct emu_qp_args *a, struct k_pd *pd,
                    struct k_cq *scq, struct k_cq *rcq, uint32_t *handle, uint32_t *qpn,
                    void *uhw_resp /* struct mlx5_ib_create_qp_resp */);
int emu_k_destroy_qp(struct emu_file *f, struct k_qp *qp, uint32_t *events_reported);
/* ---- srq_objects.c: shared receive queues (k: core/uverbs_std_types_srq.c, uverbs_cmd.c, hw/mlx5/srq.c) */
struct emu_srq_args {
    uint32_t type, max_wr, max_sge, limit;
    uint64_t user_handle;
    int event_fd;                     /* -1: the default async fd */
    const void *uhw_in; size_t uhw_inlen;   /* struct mlx5_ib_create_srq, already copied */
};
int emu_k_create_srq(struct emu_file *f, struct k_pd *pd, const struct emu_srq_args *a,
                     uint32_t *handle, uint32_t *max_wr, uint32_t *max_sge, uint32_t *srqn);
int emu_k_destroy_srq(struct emu_file *f, struct k_srq *srq, uint32_t *events_reported);
int emu_k_modify_srq(struct emu_file *f, struct k_srq *srq, uint32_t mask, uint32_t max_wr, uint32_t limit);
void emu_k_query_srq(struct emu_file *f, struct k_srq *srq, uint32_t *max_wr, uint32_t *max_sge,
                     uint32_t *limit);
int emu_k_modify_qp(struct emu_file *f, const void *cmd /* struct ib_uverbs_modify_qp */, bool ex);
int emu_k_query_qp(struct emu_file *f, struct k_qp *qp, void *resp /* query_qp_resp */);
int emu_k_uar_alloc(struct emu_file *f, uint32_t type, uint32_t *handle, uint64_t *mmap_off,
                    uint32_t *page_id);
int emu_k_uar_destroy(struct emu_file *f, struct k_uar *u);
int emu_k_get_context(struct emu_file *f, const void *uhw_in, size_t inlen, void *resp72,
                      size_t *resp_len, size_t outlen);
int emu_k_async_alloc(struct emu_file *f, int *fd);
int emu_k_comp_channel(struct emu_file *f, int *fd);
void emu_k_fill_device_attr(struct emu_file *f, void *resp176);
void emu_k_fill_port(struct emu_file *f, void *resp40);
struct k_uar *emu_k_find_uar_by_page(struct emu_file *f, uint32_t page_id);

/* ---- umem.c: pinned pages against RLIMIT_MEMLOCK (k: core/umem.c ib_umem_get) ---- */
/* Pins the pages of [addr, addr + len) (none when len is 0) and the page of db_addr (none when
 * 0; once per context).  0, -ENOMEM over the limit without CAP_IPC_LOCK, -EINVAL; on failure
 * nothing stays counted. */
int  emu_pins_take(struct emu_file *f, struct emu_pins *p, uint64_t addr, uint64_t len, uint64_t db_addr);
void emu_pins_release(struct emu_file *f, struct emu_pins *p);

/* ---- events.c ---- */
struct k_evq *emu_evq_new(struct emu_file *f, bool is_async);    /* under emu_g.lock */
struct k_evq *emu_evq_by_fd(int fd);
void emu_evq_user_close(struct k_evq *q);   /* the process closed q's fd */
void emu_evq_put(struct k_evq *q);          /* an object stops naming q */
void emu_evq_purge_owner(struct k_evq *q, void *owner);
void emu_evq_detach_ctx(struct emu_context *ctx);
ssize_t emu_evq_read(struct k_evq *q, void *buf, size_t count);  /* called WITHOUT emu_g.lock */
int  emu_evq_push(struct k_evq *q, uint64_t a, uint32_t type, uint32_t *counter, void *owner);

/* ---- ioctl.c / write.c ---- */
int  emu_ioctl(struct emu_file *f, unsigned long req, void *arg);   /* 0 or -errno */
ssize_t emu_write(struct emu_file *f, const void *buf, size_t count);
/* A legacy command: in = core request (starting at `response` for non-EX), out = core response
 * user pointer; uhw = driver data.  Used by write() and by DEVICE/INVOKE_WRITE. */
struct emu_wcmd {
    uint32_t cmd; bool ex;
    const void *in; size_t inlen;     /* core request (copied), from `response` for non-EX */
    uint64_t out; size_t outlen;      /* user address of the core response (0 = none) */
    const void *uhw_in; size_t uhw_inlen;     /* driver data in (copied) */
    uint64_t uhw_out; size_t uhw_outlen;      /* user address of the driver response */
};
int  emu_write_cmd_min(uint32_t cmd, bool ex, size_t *req, size_t *resp, bool *known);
int  emu_run_write_cmd(struct emu_file *f, struct emu_wcmd *w);
const char *emu_write_cmd_name(uint32_t cmd, bool ex);

/* ---- mmap.c ---- */
void *emu_mmap(struct emu_file *f, void *addr, size_t len, int prot, int flags, off_t off, int *err);
void  emu_munmap_note(void *addr, size_t len);
void  emu_file_drop_maps(struct emu_file *f);
uint64_t emu_uar_mmap_offset(uint32_t index);

/* ---- faults.c ---- */
/* Called once per kernel call (ioctl, write, mmap on a uverbs fd) with the method's name.
 * Returns 0 or the positive errno to fail it with. */
int  emu_fault_check(const char *method);
void emu_fault_from_env(void);
int  emu_fault_add(const char *name, unsigned n, int err);
int  emu_fault_parse(const char *spec);
void emu_fault_clear(void);

#endif
