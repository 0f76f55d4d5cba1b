/* mlxd_uverbs.h: opening a ConnectX (mlx5) NIC through the kernel's RDMA interface, without
 * libibverbs, and making its objects: regions, completion queues, queue pairs.
 *
 * Model (the verbs objects of rdma-core's libibverbs, ibv_open_device(3), ibv_reg_mr(3),
 * ibv_create_cq(3), ibv_create_qp(3), narrowed to what a sensor receiver needs):
 *   - A NIC (struct mlxd_nic) is port 1 of one RDMA device ("mlx5_0") opened through its verbs
 *     file /dev/infiniband/uverbsN.  Each NIC has one protection domain shared by its regions and
 *     queue pairs, one completion channel (made when the first CQ asks for events) and one
 *     async-event fd.
 *   - A region (struct mlxd_region) is host memory, or dma-buf memory, the NIC may access.
 *   - A completion queue (struct mlxd_cq) is a ring in this process's memory that the NIC
 *     writes completions into.  Polling and arming are in ../mlx5/mlxd_mlx5.h.
 *   - A queue pair (struct mlxd_qp, RC or UC) is a send ring and an optional receive ring in
 *     this process's memory, connected to one peer queue pair.  Posting is in ../mlx5/mlxd_mlx5.h.
 * The kernel makes every object (RDMA_VERBS_IOCTL on the verbs file; legacy commands through the
 * DEVICE/INVOKE_WRITE method, never write()); the process owns the rings and doorbell records.
 * Closing the verbs file (mlxd_close, or process death) makes the kernel destroy every object.
 *
 * Errors (abi/mlxd_error.h): every int-returning call returns 0 (or a count) on success and a
 * negative errno on failure, with a per-thread message (mlxd_errmsg()) naming the call and the
 * reason.  Misuse (NULL object, destroyed object, object of a closed NIC, options with a wrong
 * sz or an out-of-range value) gives -EINVAL and changes nothing.  Options structs: sz is
 * sizeof(the struct); a smaller sz than the first version's is refused, a larger one (a newer
 * header) is accepted when every byte past the fields this library knows is zero.  A call the kernel refuses gives
 * the kernel's errno, the message naming the kernel call ("QP_CREATE", "MODIFY_QP INIT->RTR"...)
 * and strerror of the reason.
 *
 * Lifetime: destroy/deregister release the kernel object, its rings and mappings at once; the
 * small struct stays (a tombstone) so that a later call on it gives -EINVAL and a second destroy
 * returns the first one's result.  mlxd_close releases everything of the NIC; the tombstones of
 * the NIC and its objects (a few hundred bytes each) stay reachable until the process exits, so
 * that a call on any of them gives -EINVAL and a second mlxd_close does nothing.
 *
 * Thread rules ("domains" of the seed): any thread may make any call concurrently with other
 * threads, except:
 *   - mlxd_qp_post and mlxd_qp_ring of one QP run one call at a time; so does mlxd_qp_receive;
 *   - mlxd_cq_poll and mlxd_cq_arm of one CQ run one call at a time;
 *   - mlxd_wait of one NIC runs one call at a time;
 *   - mlxd_qp_connect of one QP runs one call at a time (it moves the QP through three states);
 *   - a destroy/deregister runs after every other call on its object has returned (a poll of a
 *     CQ counts as a call on every QP attached to that CQ), and mlxd_close after every other
 *     call on the NIC and its objects has returned.
 * A QP may be posted while another thread polls its CQ.
 * A child of fork() must not use its parent's NICs or objects: the rings, doorbell records and
 * registered host memory (whole pages) are MADV_DONTFORK, so not mapped in the child, and the
 * calls that check their NIC (creation, connect, query, wait, destroy, deregister, close)
 * return -EINVAL there and do nothing (the child shares the parent's uverbs file: a destroy
 * would destroy the parent's object).
 *
 * Privileges: opening needs read+write access to /dev/infiniband/uverbsN only.  Registering
 * memory pins it: RLIMIT_MEMLOCK bounds the bytes unless the process has CAP_IPC_LOCK.
 * dma-buf regions need Linux >= 5.12; the NIC objects need Linux >= 5.8 (QP_CREATE ioctl) and
 * dynamic UARs (>= 5.7) (see kernel drivers/infiniband/core/uverbs_std_types_mr.c
 * REG_DMABUF_MR, uverbs_std_types_qp.c QP_CREATE, drivers/infiniband/hw/mlx5/main.c
 * MLX5_IB_OBJECT_UAR).
 */
#ifndef MLXD_UVERBS_H
#define MLXD_UVERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mlxd_nic;
struct mlxd_region;
struct mlxd_cq;
struct mlxd_qp;

/* ---------------------------------------------------------------------------------------- */
/* Discovery                                                                                  */

/* The sysfs root: $SYSFS_PATH when set and the process is not setuid (getuid()==geteuid()),
 * trailing '/' removed; else "/sys" (rdma-core's convention, libibverbs/sysfs.c
 * ibv_get_sysfs_path).
 * Returns "/sys" or a per-thread buffer, rewritten by the next call on the same thread (not
 * thread-safe against setenv). */
const char *mlxd_sysfs_root(void);

/* The names of this machine's RDMA devices whose PCI function the mlx5_core driver holds,
 * sorted as strings with strcmp ("mlx5_10" before "mlx5_2").
 *
 * Source: <root>/class/infiniband/<name>/ (one directory per RDMA device).  A device counts as
 * mlx5_core's when the basename of the symlink <root>/class/infiniband/<name>/device/driver is
 * "mlx5_core"; when that link is absent, when <root>/class/infiniband/<name>/device/modalias
 * names PCI vendor 0x15B3 (Mellanox) ("pci:v000015B3d..."), which is how rdma-core matches
 * devices (libibverbs/init.c match_device).  Listing changes nothing.
 *
 * *out receives a malloc'ed array of *count malloc'ed strings (owned by the caller; free with
 * mlxd_names_free).  With no device, *out = NULL and *count = 0.
 * Errors: -EINVAL out or count NULL; 0 with an empty list when <root>/class/infiniband does not
 * exist (ENOENT); the errno of opendir/readdir (e.g. -EACCES, -ENOTDIR) when it exists but
 * cannot be read, the message naming the path and the reason; -ENOMEM.
 * Thread rules: any thread, any time. */
int mlxd_names(char ***out, size_t *count);
void mlxd_names_free(char **names, size_t count);

/* ---------------------------------------------------------------------------------------- */
/* Open / close                                                                               */

struct mlxd_open_opts {
    size_t sz;            /* sizeof(struct mlxd_open_opts) */
    uint32_t port;        /* 0 or 1: port 1 (a ConnectX function has one port) */
};

/* Opens port 1 of RDMA device `name` ("mlx5_0").  opts may be NULL.
 *
 * Steps (the order of rdma-core's ibv_open_device and mlx5_alloc_context, libibverbs/device.c
 * and providers/mlx5/mlx5.c): find uverbsN under <root>/class/infiniband_verbs whose
 * `ibdev` is name; open /dev/infiniband/uverbsN O_RDWR|O_CLOEXEC; GET_CONTEXT (DYN_UAR, 4K_UAR,
 * cqe_version 1); ASYNC_EVENT_ALLOC; QUERY_PORT(1); QUERY_GID_TABLE; UAR_OBJ_ALLOC NC (CQ arm
 * doorbells) and BF (send doorbells; NC when the device has no write-combining) + mmap;
 * ALLOC_PD.  Every step is undone in reverse order on failure.
 *
 * Errors (each message names the device and what failed):
 *   -EINVAL  name NULL/empty/too long or containing '/', out NULL, opts->sz too small (or
 *            larger with unknown fields set), opts->port not 0/1
 *   -ENODEV  no RDMA device `name` (no <root>/class/infiniband/<name>)
 *   -ENODEV  neither mlx5_core (a PCI function) nor mlx5_core.sf (a sub-function) holds the
 *            device ("not held by mlx5_core or mlx5_core.sf")
 *   -ENOENT  no verbs file: no uverbsN whose ibdev is name, or /dev/infiniband/uverbsN missing
 *   -errno   the verbs file cannot be opened (path + strerror), e.g. -EACCES
 *   -errno   the kernel refused a call (call name + strerror)
 *   -ENETDOWN port 1 is not ACTIVE (state from QUERY_PORT, IB spec 14.2.5.6: 4 = ACTIVE)
 *   -EPROTONOSUPPORT port 1 is InfiniBand: peers are addressed by GID over RoCE v2 only, an IB
 *            port would need LIDs (kernel hw/mlx5/qp.c mlx5_set_path)
 *   -EADDRNOTAVAIL an Ethernet port without any RoCE v2 GID (gid_type 2)
 *   -ENOSPC  the kernel gives fewer doorbell registers than one system page holds
 *            (num_uars_per_page == 0 or the UAR mmap length is not a page)
 *   -ENOMEM
 * Thread rules: any thread.  The NIC belongs to the caller until mlxd_close. */
int mlxd_open(const char *name, const struct mlxd_open_opts *opts, struct mlxd_nic **out);

/* Destroys every QP, CQ and region of nic (in that order), the PD, unmaps and destroys the
 * UARs, closes the completion channel, the async fd and the verbs file, and frees the rings.
 * Returns 0, or the first error a kernel destroy call made during this close gave (everything
 * is released anyway: closing the verbs file makes the kernel destroy what is left).  When an
 * earlier destroy was refused, the PD and UAR are left to that final close (their destroys
 * would be refused as busy).  A second close does nothing and returns 0.  nic NULL: -EINVAL.
 * Thread rules: after every other call on nic and its objects has returned. */
int mlxd_close(struct mlxd_nic *nic);

/* ---------------------------------------------------------------------------------------- */
/* Queries (values the kernel reported at mlxd_open; no system call)                         */

enum mlxd_link_layer {
    MLXD_LINK_INFINIBAND = 1,   /* IB_LINK_LAYER_INFINIBAND (QUERY_PORT link_layer) */
    MLXD_LINK_ETHERNET = 2,     /* RoCE: every packet carries a GRH (RoCE v2: IP/UDP 4791) */
};

struct mlxd_port_info {
    uint32_t link_layer;        /* enum mlxd_link_layer */
    uint32_t state;             /* IB port state: 4 = ACTIVE (always 4 on an open NIC) */
    uint32_t max_msg_sz;        /* bytes: the most one WRITE, READ or SEND moves */
    uint32_t active_mtu;        /* IB MTU enum: 1=256 2=512 3=1024 4=2048 5=4096 */
    uint32_t active_mtu_bytes;  /* 256 << (active_mtu - 1) */
    uint32_t gid_tbl_len;       /* entries of port 1's GID table */
    uint32_t max_cqe;           /* largest CQ (entries) mlxd_cq_create accepts */
    uint32_t max_qp_wr;         /* largest send/recv depth mlxd_qp_create accepts */
    uint32_t max_inline;        /* largest max_inline mlxd_qp_create accepts (bytes) */
    uint32_t bf_reg_size;       /* BlueFlame register bytes; 0 = no write-combining, doorbells only */
    uint8_t  cqe_version;       /* 0 or 1 (GET_CONTEXT response) */
    /* the NIC's clock (mlxd_clock_info below) */
    uint32_t hca_core_clock;    /* kHz of the free-running timer that stamps CQEs (EX_QUERY_DEVICE);
                                   0 when the kernel does not say */
    uint64_t timestamp_mask;    /* the timer wraps at timestamp_mask + 1 (EX_QUERY_DEVICE) */
    bool     real_time_ts;      /* CQs may stamp in real time (mlxd_cq_opts.real_time_ts):
                                   MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS */
    bool     clock_info;        /* the kernel's clock-info page is mapped: mlxd_clock_info works */
};

/* Fills *out.  Errors: -EINVAL nic/out NULL or closed.  Any thread.  No system call. */
int mlxd_port_info(const struct mlxd_nic *nic, struct mlxd_port_info *out);
/* enum mlxd_link_layer of port 1, or -EINVAL.  Any thread. */
int mlxd_link_layer(const struct mlxd_nic *nic);
/* Bytes one message carries at most (QUERY_PORT max_msg_sz), or 0 when nic is invalid.
 * Any thread. */
uint32_t mlxd_max_message(const struct mlxd_nic *nic);
/* The device name given to mlxd_open ("" when nic is NULL).  Any thread. */
const char *mlxd_nic_name(const struct mlxd_nic *nic);

/* One valid GID of port 1 (struct ib_uverbs_gid_entry, from QUERY_GID_TABLE at open). */
struct mlxd_gid {
    uint8_t  raw[16];           /* network order; IPv4 addresses as ::ffff:a.b.c.d */
    uint32_t index;             /* GID table index (the sgid_index of a connection) */
    uint32_t type;              /* enum ib_uverbs_gid_type (rdma/ib_user_ioctl_verbs.h), copied as
                                 * is: 0 IB, 1 RoCE v1, 2 RoCE v2 (MLXD_GID_TYPE_ROCE_V2).  Sysfs
                                 * gid_attrs/types prints both 0 and 1 as "IB/RoCE v1". */
    uint32_t ifindex;           /* netdev ifindex (0 if none) */
};
#define MLXD_GID_TYPE_ROCE_V2 2

/* Copies up to cap valid GIDs of port 1 (ascending index) into out (may be NULL when cap is 0)
 * and returns how many port 1 has (which may exceed cap).  Errors: -EINVAL.  Any thread. */
int mlxd_gids(const struct mlxd_nic *nic, struct mlxd_gid *out, size_t cap);

/* The GID index this NIC uses when a QP does not name one: the lowest-index RoCE v2 GID that is
 * IPv4-mapped, else the lowest-index RoCE v2 GID; on InfiniBand the GID at index 0.
 * Returns the index (>= 0), -EINVAL, or -EADDRNOTAVAIL (no GID).  Any thread. */
int mlxd_default_gid_index(const struct mlxd_nic *nic);

/* The RoCE v2 GID whose address the kernel's routing table uses as the source towards peer
 * (AF_INET or AF_INET6 sockaddr; a UDP socket is connect()ed and getsockname()d, nothing is
 * sent).  Returns the GID index (>= 0) and fills *gid when gid is not NULL.
 * Errors: -EINVAL bad arguments (nic or peer NULL, a family other than AF_INET/AF_INET6, len
 * shorter than its sockaddr or longer than a sockaddr_storage); -errno of socket/connect (no
 * route, e.g. -ENETUNREACH);
 * -EADDRNOTAVAIL when no RoCE v2 GID of this port carries that source address (the message
 * names the address).  Not on a hot path (system calls).  Any thread. */
int mlxd_gid_for_peer(const struct mlxd_nic *nic, const struct sockaddr *peer, socklen_t len,
                      struct mlxd_gid *gid);

/* ---------------------------------------------------------------------------------------- */
/* Regions                                                                                    */

/* Access flags: the values of IB_UVERBS_ACCESS_* (rdma/ib_user_ioctl_verbs.h). */
enum mlxd_access {
    MLXD_ACCESS_LOCAL_WRITE   = 1,     /* the NIC may write it (receives, READ responses) */
    MLXD_ACCESS_REMOTE_WRITE  = 2,     /* peers may WRITE into it (needs LOCAL_WRITE) */
    MLXD_ACCESS_REMOTE_READ   = 4,     /* peers may READ it */
    MLXD_ACCESS_REMOTE_ATOMIC = 8,     /* peers may do atomics on it (needs LOCAL_WRITE) */
    MLXD_ACCESS_MW_BIND       = 16,    /* memory windows may be bound to it (mlxd_mw_alloc) */
};

enum mlxd_order {
    MLXD_ORDER_IN_ORDER = 0,   /* the NIC's writes land in the order of the QP's entries */
    MLXD_ORDER_RELAXED  = 1,   /* PCIe relaxed ordering allowed (IB_UVERBS_ACCESS_RELAXED_ORDERING,
                                  0x100000; dropped silently by kernels that lack it) */
};

struct mlxd_region_opts {
    size_t   sz;               /* sizeof(struct mlxd_region_opts) */
    uint32_t access;           /* OR of enum mlxd_access; 0 = local read only */
    uint32_t order;            /* enum mlxd_order; 0 = in order */
    uint64_t iova;             /* address the NIC and peers use for the first byte; 0 = default:
                                  the VA for host memory, the offset for dma-buf memory, unless
                                  flags has MLXD_REGION_IOVA_EXACT */
    uint32_t flags;            /* OR of enum mlxd_region_flags; 0 = none */
    uint32_t reserved;         /* 0 */
};

enum mlxd_region_flags {
    /* iova is taken as given, 0 included: iova 0 makes a zero-based region, whose first byte
     * peers and work entries address as 0 (what ibv_reg_mr_iova(pd, addr, len, 0, access) asks
     * for; Holoscan Sensor Bridge's gpu_roce_transceiver registers its rings so).  The kernel's
     * rule still applies: iova and addr (offset for dma-buf) share their in-page offset, so a
     * zero-based region starts on a page boundary (uverbs_cmd.c ib_uverbs_reg_mr). */
    MLXD_REGION_IOVA_EXACT = 1,
};

/* Where the NIC reads or writes local bytes: the scatter/gather entry of a work entry. */
struct mlxd_local {
    uint64_t addr;             /* IOVA of the first byte (the VA for host regions by default) */
    uint32_t length;           /* bytes */
    uint32_t lkey;
};

/* What a peer needs to WRITE or READ a region: send it out of band. */
struct mlxd_remote {
    uint64_t addr;             /* IOVA of the first byte */
    uint64_t length;           /* bytes */
    uint32_t rkey;
    uint32_t reserved;         /* 0 */
};

/* Registers [addr, addr+length) of this process (REG_MR via INVOKE_WRITE).  length > 0.
 * opts NULL = { access 0, in order, iova = addr }; iova 0 with MLXD_REGION_IOVA_EXACT: zero-based.
 * The memory must stay mapped until deregistered; the caller keeps owning it.
 * Errors: -EINVAL misuse (NULL, length 0, unknown access bits or flags, REMOTE_WRITE/ATOMIC without
 * LOCAL_WRITE (kernel rule ib_check_mr_access), iova with another in-page offset than addr);
 * -EFAULT from the kernel when [addr, addr + length) is not mapped memory of this process;
 * -ENOMEM/-EAGAIN/-EPERM from the kernel: when the locked-memory limit is the cause
 * (RLIMIT_MEMLOCK below the bytes pinned so far plus length, and no CAP_IPC_LOCK), the message
 * says "RLIMIT_MEMLOCK", the limit and the bytes asked for; other kernel refusals name REG_MR.
 * Thread rules: any thread. */
int mlxd_region_register(struct mlxd_nic *nic, void *addr, size_t length,
                         const struct mlxd_region_opts *opts, struct mlxd_region **out);

/* Registers bytes [offset, offset+length) of dma-buf `fd` (MR/REG_DMABUF_MR ioctl; Linux
 * >= 5.12).  The iova (opts->iova, default = offset) must have the same in-page offset as
 * offset.  The library dup()s nothing: the kernel takes its own reference; the caller may close
 * fd after this returns.  Errors as mlxd_region_register, plus -EINVAL fd < 0; the kernel's
 * -EOPNOTSUPP/-EPROTONOSUPPORT when the kernel lacks dma-buf regions.  Any thread. */
int mlxd_region_register_dmabuf(struct mlxd_nic *nic, int fd, uint64_t offset, size_t length,
                                const struct mlxd_region_opts *opts, struct mlxd_region **out);

/* The whole region as a local descriptor (length = min(region bytes, 0xFFFFFFFF): a work entry
 * moves at most max_msg_sz bytes anyway; use mlxd_region_slice for parts) / as a remote
 * descriptor.  Both are zeroed when r is NULL or deregistered.  No system call; any thread. */
struct mlxd_local  mlxd_region_local(const struct mlxd_region *r);
struct mlxd_remote mlxd_region_remote(const struct mlxd_region *r);
/* Local descriptor of bytes [off, off+len) of r; -EINVAL when out of range or r invalid. */
int mlxd_region_slice(const struct mlxd_region *r, uint64_t off, uint32_t len,
                      struct mlxd_local *out);

/* MR_DESTROY.  Errors: -EINVAL NULL / NIC closed; the kernel's errno (message "MR_DESTROY").
 * A second call returns the first one's result.  Thread rules: after every other call on r
 * (and every posted entry naming it has completed). */
int mlxd_region_deregister(struct mlxd_region *r);

/* ---------------------------------------------------------------------------------------- */
/* Completion queues (creation; polling and arming are in mlx5/mlxd_mlx5.h)                  */

struct mlxd_cq_opts {
    size_t   sz;               /* sizeof(struct mlxd_cq_opts) */
    bool     events;           /* attach the NIC's completion channel: mlxd_cq_arm + mlxd_wait */
    uint32_t comp_vector;      /* < the device's completion vectors; 0 default */
    uint64_t user_data;        /* returned in struct mlxd_event.user_data */
    bool     ignore_overrun;   /* IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN (see below) */
    bool     real_time_ts;     /* CQE timestamps in real time (MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS;
                                  see below); -EOPNOTSUPP where the device has no such clock */
    uint32_t cqe_comp;         /* CQE compression: 0 off, else the responder mini-CQE format,
                                  enum mlxd_cqe_comp (see below) */
};

/* CQE compression (cqe_comp; the kernel's mlx5_ib_create_cq.cqe_comp_en / cqe_comp_res_format,
 * include/uapi/rdma/mlx5-abi.h; what libmlx5's mlx5dv_create_cq does with
 * MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE): the NIC may write a burst of CQEs that differ only
 * in what a mini-CQE carries as one title CQE and 8-byte mini-CQEs (8 per 64-byte slot), which
 * mlxd_cq_poll expands into the same completions (mlx5/cqe_mini.c; docs/driver.md):
 *   - the values are the bits of enum mlx5dv_cqe_comp_res_format (infiniband/mlx5dv.h), one of
 *     them: HASH (a mini-CQE holds the RSS hash and byte_cnt), CSUM (checksum, byte_cnt),
 *     CSUM_STRIDX (checksum, stride index, byte_cnt); requester completions always use the
 *     s_wqe_info mini-CQE (wqe_counter, WQE opcode, byte_cnt).  The hash, checksum and stride
 *     index have no field in struct mlxd_completion, so every format gives the same completions;
 *   - what a mini-CQE lacks is the title's: the immediate, QPN, flags, and the timestamp, which
 *     is the title's for every completion of a session (choose no compression when per-CQE
 *     timestamps matter); the NIC compresses only CQEs whose immediates etc. are equal (a
 *     sensor bridge's WRITE-with-immediate frames, each with its own immediate, are not);
 *   - the gain: 8 bytes of CQ read per completion instead of 64, and fewer instructions;
 *   - errors: -EOPNOTSUPP the device reports no CQE compression (mlx5_ib_query_device_resp
 *     cqe_comp_caps.max_num 0) or not this format (its supported_format); -EINVAL a value that
 *     is not one format bit; the kernel's refusals as its errno (message "CQ_CREATE");
 *   - mlxd_cq_poll returns -EPROTO (nothing consumed) for a title that announces fewer than 2
 *     or more mini-CQEs than the ring holds, or that has an opcode no session can have;
 *   - a compressed CQ cannot be recorded (mlxd_cq_record_start: -EINVAL); a destroyed QP's
 *     CQEs behind a compressed session stay in the CQ (they complete with qp NULL). */
enum mlxd_cqe_comp {
    MLXD_CQE_COMP_HASH = 1,         /* MLX5DV_CQE_RES_FORMAT_HASH */
    MLXD_CQE_COMP_CSUM = 2,         /* MLX5DV_CQE_RES_FORMAT_CSUM */
    MLXD_CQE_COMP_CSUM_STRIDX = 4,  /* MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX */
};

/* CQE timestamps (struct mlxd_completion.timestamp, mlx5_cqe64.timestamp) come in one of two
 * formats, chosen when the CQ is created:
 *   - free-running (default): ticks of the NIC's internal timer (hca_core_clock kHz, wrapping at
 *     timestamp_mask).  To nanoseconds: mlxd_clock_info() then mlxd_ts_to_ns(), as libmlx5's
 *     mlx5dv_get_clock_info() / mlx5dv_ts_to_ns() (infiniband/mlx5dv.h) do.  The kernel keeps
 *     the conversion in its clock-info page (struct mlx5_ib_clock_info, include/uapi/rdma/
 *     mlx5-abi.h; drivers/net/ethernet/mellanox/mlx5/core/lib/clock.c), a timecounter whose time
 *     base is the PHC's (CLOCK_REALTIME when nothing disciplines it), refreshed at least every
 *     overflow_period;
 *   - real time (real_time_ts = true, where mlxd_port_info.real_time_ts): the PHC's time,
 *     seconds in bits 63..32 and nanoseconds in bits 31..0 (the kernel's REAL_TIME_TO_NS,
 *     drivers/net/ethernet/mellanox/mlx5/core/lib/clock.h); mlxd_real_time_ts_to_ns(). */

/* Overrun-ignoring CQs (ignore_overrun; the kernel's IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN,
 * include/uapi/rdma/ib_user_verbs.h, which drivers/infiniband/hw/mlx5/cq.c turns into the CQ
 * context's `oi` bit; UCX creates its CQs so): the device does not check the consumer index, so
 * mlxd_cq_poll never writes the consumer-index doorbell record (dbrec[0] stays 0); a batch
 * saves that store and, on a real NIC, the cache-line transfer to the device that follows it.
 * The price: a CQ that does overrun is not stopped with a CQ error (MLXD_EVENT_CQ_ERROR) but
 * has its oldest unpolled CQEs overwritten, completions lost without a trace.  Choose it only
 * when the CQ cannot overrun: entries >= the send_depth + recv_depth of every QP completing
 * into it (then mlxd_qp_post / mlxd_qp_receive keep the outstanding work within the CQ: the
 * sizing rule above), as mlxd_qp_create then enforces for such a CQ (-EINVAL otherwise).
 * mlxd_cq_arm still writes the arm word with the consumer index.  The kernel may refuse it
 * (-EOPNOTSUPP from CQ_CREATE: the device lacks the cq_oi capability). */

/* Creates a CQ of `entries` rounded up to a power of two (>= 2) CQEs of 64 bytes.  The ring
 * (page aligned, entries*64 bytes, every CQE's op_own = 0xF0: opcode INVALID, owner 0) and its
 * 8-byte doorbell record (page aligned, zeroed) are mapped and owned by the library,
 * MADV_DONTFORK (the kernel pins them: drivers/infiniband/hw/mlx5/cq.c create_cq_user,
 * doorbell.c mlx5_ib_db_map_user).  opts NULL = no events, vector 0.
 * Sizing: at least the send_depth + recv_depth of every QP completing into the CQ (the sizing
 * rule of ibv_create_cq(3)); mlxd_qp_post/mlxd_qp_receive never let more entries be
 * outstanding, and mlxd_cq_poll frees their slots only after handing the CQE slots back, so such
 * a CQ never overruns.  A smaller one can: the NIC then reports a CQ error and moves the QPs to ERR.
 * Errors: -EINVAL misuse or entries 0; -EINVAL "exceeds the device's maximum N" when the
 * rounded size is above the device bound (mlxd_port_info.max_cqe); -ENOMEM; the kernel's
 * errno (message "CQ_CREATE" or "CREATE_COMP_CHANNEL").  Any thread. */
int mlxd_cq_create(struct mlxd_nic *nic, uint32_t entries, const struct mlxd_cq_opts *opts,
                   struct mlxd_cq **out);

/* CQ_DESTROY, then frees the ring.  Every QP using the CQ must be destroyed first (-EBUSY
 * otherwise, nothing changed).  A second call returns the first one's result; -EINVAL when cq
 * is NULL or its NIC is closed; the kernel's errno (message "CQ_DESTROY"; the ring is then
 * kept until mlxd_close).  Thread rules: after every other call on cq has returned. */
int mlxd_cq_destroy(struct mlxd_cq *cq);

/* Number of CQEs of the ring (a power of two), or 0 when cq is invalid.  Any thread. */
uint32_t mlxd_cq_size(const struct mlxd_cq *cq);

/* ---------------------------------------------------------------------------------------- */
/* Queue pairs                                                                                */

enum mlxd_qp_type {
    MLXD_QP_RC = 2,            /* IB_UVERBS_QPT_RC: reliable connected */
    MLXD_QP_UC = 3,            /* IB_UVERBS_QPT_UC: unreliable connected (no READ) */
    MLXD_QP_UD = 4,            /* IB_UVERBS_QPT_UD: unreliable datagram: SEND / SEND_IMM of at
                                  most the port MTU to any UD QP, addressed per entry by an
                                  address handle (mlxd_ah_create), remote QPN and Q_Key; made
                                  ready with mlxd_qp_ud_ready, not mlxd_qp_connect */
};

struct mlxd_qp_opts {
    size_t   sz;               /* sizeof(struct mlxd_qp_opts) */
    uint32_t type;             /* enum mlxd_qp_type; 0 = RC */
    uint32_t send_depth;       /* work entries outstanding at most (the ring holds that many
                                  of the largest size max_inline allows); 0 = no sends */
    uint32_t recv_depth;       /* receives outstanding at most; 0 = no receive ring */
    uint32_t max_inline;       /* bytes of inline data one entry may carry; 0 = none */
    uint32_t max_recv_sge;     /* scatter entries per receive; 0 = 1 */
    struct mlxd_cq *recv_cq;   /* CQ for receive completions; NULL = the send CQ */
    bool     has_gid_index;    /* use gid_index below, else mlxd_default_gid_index() */
    uint32_t gid_index;        /* local GID table index (source GID of every packet) */
    uint32_t psn;              /* first send PSN (24 bits); 0 = random */
    uint64_t user_data;        /* returned in struct mlxd_event.user_data for QP events */
    uint32_t max_send_sge;     /* data entries per send entry (struct mlxd_entry sgl); 0 = 1.
                                  The send WQE is sized for this many data segments or the
                                  inline data, whichever is larger (libmlx5 mlx5_calc_send_wqe) */
    uint8_t  blueflame;        /* enum mlxd_blueflame; 0 = MLXD_BLUEFLAME_DEFAULT */
    bool     share_cq;         /* the caller sizes the CQ itself: skip the overrun check below
                                  (e.g. not every send is signaled, or the QPs sharing the CQ
                                  never have all their entries outstanding at once) */
    struct mlxd_srq *srq;      /* receives come from this shared receive queue (of the same
                                  NIC; recv_depth and max_recv_sge must then be 0); NULL = the
                                  QP's own receive ring.  The SRQ must outlive the QP.
                                  RC, UC and UD (each datagram takes one SRQ receive, GRH
                                  first, as on a UD QP's own ring) */
};

/* BlueFlame: mlxd_qp_ring of a single WQE that fits half the BlueFlame register (bf_reg_size/2,
 * mlxd_port_info) copies the whole WQE into the write-combining register, so the NIC starts
 * without reading the WQE from host memory (lower latency for small sends); otherwise, or with
 * BlueFlame off, it writes the 8-byte doorbell and the NIC fetches the WQE by DMA.
 * Off suits: senders of large or batched WQEs (BlueFlame is never used for a batch anyway),
 * hosts where write-combining stores are slow or flushed late (some virtual machines and CPUs:
 * the DPDK mlx5 guide and libvma advise MLX5_SHUT_UP_BF=1 there), and a receive-only QP.
 * On suits: latency-bound senders posting one small WQE per ring.
 * MLXD_BLUEFLAME_DEFAULT is on when the device has write-combining registers, unless the
 * environment variable MLX5_SHUT_UP_BF is set and not "0" (libmlx5's switch, read at
 * mlxd_qp_create).  _ON and _OFF ignore the environment; _ON on a device without
 * write-combining registers (bf_reg_size 0) is doorbell-only, as libmlx5. */
enum mlxd_blueflame {
    MLXD_BLUEFLAME_DEFAULT = 0,
    MLXD_BLUEFLAME_ON = 1,
    MLXD_BLUEFLAME_OFF = 2,
};

/* Creates a QP on cq (QP_CREATE ioctl, state RESET).  The QP buffer (receive ring, then send
 * ring, page aligned) and its doorbell record are owned by the library.
 * UD (MLXD_QP_UD): the send WQE holds the datagram segment instead of the remote address
 * (libmlx5 mlx5_calc_send_wqe); each receive must leave 40 bytes in front of the data for the
 * GRH (MLXD_UD_GRH_LEN).
 * Errors: -EINVAL misuse (type not RC/UC/UD, both depths 0, gid index not valid on the port,
 * blueflame not an enum mlxd_blueflame value);
 * -EINVAL "exceeds the device's maximum" when a depth, the inline size or the WQE size
 * (max_sq_desc_sz) is beyond the device (the message names the bound); -ENOMEM; -ENOSPC when
 * the NIC's table of QPs (4096 per NIC) is full; the kernel's errno (message "QP_CREATE").
 * Any thread. */
int mlxd_qp_create(struct mlxd_cq *cq, const struct mlxd_qp_opts *opts, struct mlxd_qp **out);

/* What the peer needs to connect to this QP; send it out of band (e.g. TCP). */
struct mlxd_endpoint {
    uint32_t qpn;              /* 24-bit QP number */
    uint32_t psn;              /* 24-bit first send PSN of this QP */
    uint8_t  gid[16];          /* this QP's source GID (network order) */
};

/* Whether mlxd_qp_ring of this QP uses BlueFlame (enum mlxd_blueflame); false for NULL, a
 * destroyed QP, or a QP without a send ring.  Any thread. */
bool mlxd_qp_blueflame(const struct mlxd_qp *qp);

/* Fills *out (the PSN is the one connect will use for sends).  -EINVAL on misuse.  Any thread. */
int mlxd_qp_endpoint(const struct mlxd_qp *qp, struct mlxd_endpoint *out);

struct mlxd_connect_opts {
    size_t   sz;               /* sizeof(struct mlxd_connect_opts) */
    uint32_t peer_access;      /* what the peer may do through this QP: OR of
                                  MLXD_ACCESS_REMOTE_WRITE / _READ / _ATOMIC (UC: WRITE only) */
    bool     receive_only;     /* stop at RTR (the QP never sends); else go on to RTS */
    uint8_t  path_mtu;         /* IB MTU enum 1..5; 0 = the port's active MTU */
    uint8_t  hop_limit;        /* 0 = 64 (the kernel may overwrite it with the route's) */
    uint8_t  traffic_class;    /* IPv4 TOS / DSCP<<2; default 0 */
    uint8_t  sl;               /* 802.1p priority on RoCE, 0..7 (3 bits, kernel hw/mlx5/qp.c
                                  mlx5_set_path); default 0 */
    uint8_t  timeout;          /* RC ack timeout 4.096 us * 2^t; 0 = 14 (~67 ms) */
    uint8_t  retry_cnt;        /* RC; 0 = 7 */
    uint8_t  rnr_retry;        /* RC; 0 = 7 (infinite) */
    uint8_t  min_rnr_timer;    /* RC; 0 = 12 */
    uint8_t  max_rd_atomic;    /* RC outstanding READs both ways; 0 = 1 */
};

/* Connects qp to the peer's endpoint with MODIFY_QP (INVOKE_WRITE 26): RESET->INIT (port 1,
 * pkey 0, access = peer_access), INIT->RTR (is_global=1, dgid = peer->gid, sgid_index = the
 * QP's GID index, hop_limit, dest_qp_num, rq_psn = peer->psn; RC: max_dest_rd_atomic,
 * min_rnr_timer), and unless receive_only RTR->RTS (sq_psn = own psn; RC: timeout, retry_cnt,
 * rnr_retry, max_rd_atomic).  Masks per kernel drivers/infiniband/core/verbs.c qp_state_table.
 * opts NULL = defaults, receive_only false.
 * Addressing is by GID only (global route, dlid 0): RoCE ports.  InfiniBand ports, which route
 * by LID, are not supported by connect (the endpoint carries no LID).
 * Errors: -EINVAL misuse or a QP not in RESET (connect once; state unchanged); the kernel's
 * errno with the transition in the message; after a kernel refusal the QP is left in the
 * state it reached (the message says which).  -ETIMEDOUT from INIT->RTR: the kernel could not
 * resolve the peer's MAC address within its 1 s (drivers/infiniband/core/addr.c); the QP stays
 * in INIT and connect may be called again, resuming at RTR (Holoscan Sensor Bridge's receiver
 * retries this).  Any thread, one call per QP at a time. */
int mlxd_qp_connect(struct mlxd_qp *qp, const struct mlxd_endpoint *peer,
                    const struct mlxd_connect_opts *opts);

/* ---- Unreliable datagram ---------------------------------------------------------------- */

/* Bytes in front of every UD receive that the NIC fills with the packet's GRH: on RoCE v2 over
 * IPv4, bytes 0..19 are zero and bytes 20..39 hold the IPv4 header (as ConnectX writes them;
 * IB spec 11.4.1.1 "the first 40 bytes ... contain the GRH").  A receive needs 40 + the largest
 * datagram bytes; the completion's byte_len counts the 40. */
#define MLXD_UD_GRH_LEN 40u

/* Brings a UD QP from RESET to RTS (MODIFY_QP, INVOKE_WRITE 26): RESET->INIT (pkey 0, port 1,
 * qkey), INIT->RTR, RTR->RTS (sq_psn = the QP's PSN); masks per kernel drivers/infiniband/core/
 * verbs.c qp_state_table (IB_QPT_UD).  qkey: the Q_Key datagrams must carry to be accepted by
 * this QP (others are dropped by the NIC, IB spec 10.2.5), and the one sent by an entry whose
 * remote_qkey has the high bit set.  A Q_Key with the high bit set is "controlled": only
 * privileged processes may set one (the kernel refuses with EPERM).
 * Errors: -EINVAL misuse (not a UD QP, not in RESET); the kernel's errno with the transition in
 * the message (the QP is left in the state it reached).  Any thread, one call per QP at a time. */
int mlxd_qp_ud_ready(struct mlxd_qp *qp, uint32_t qkey);

/* An address handle: where a UD entry goes (struct mlxd_entry ah). */
struct mlxd_ah;

struct mlxd_ah_opts {
    size_t   sz;               /* sizeof(struct mlxd_ah_opts) */
    bool     has_gid_index;    /* use gid_index as the source GID, else mlxd_default_gid_index() */
    uint32_t gid_index;
    uint8_t  hop_limit;        /* 0 = 64 */
    uint8_t  traffic_class;    /* IPv4 TOS / DSCP<<2 */
    uint8_t  sl;               /* 0..7 on RoCE (802.1p priority) */
    uint32_t flow_label;       /* 20 bits */
};

/* Creates an address handle for the destination GID gid (16 bytes, network order; on RoCE v2
 * over IPv4 ::ffff:a.b.c.d) through the kernel (CREATE_AH, INVOKE_WRITE 18), as libmlx5's
 * mlx5_create_ah does on RoCE: the kernel resolves the destination MAC and returns it in the
 * mlx5 response (struct mlx5_ib_create_ah_resp dmac).  The library keeps the address vector
 * (struct mlx5_wqe_av, mlx5dv.h: GRH present, source GID index, hop limit, traffic class, flow
 * label, destination GID and MAC) that every UD WQE through it copies.  opts NULL: defaults.
 * Errors: -EINVAL misuse (nic closed, gid/out NULL, a gid index not valid on the port, sl > 7,
 * flow_label above 20 bits); -ENOMEM; the kernel's errno (message "CREATE_AH").  Any thread. */
int mlxd_ah_create(struct mlxd_nic *nic, const uint8_t gid[16], const struct mlxd_ah_opts *opts,
                   struct mlxd_ah **out);

/* DESTROY_AH (INVOKE_WRITE 19).  Entries already posted through it are not affected (the WQE
 * holds a copy of the address vector).  A second call returns the first one's result.
 * mlxd_close destroys the handles still live.  Errors: -EINVAL ah NULL or its NIC closed; the kernel's
 * errno (message "DESTROY_AH").  Thread rules: after every mlxd_qp_post that uses it returned. */
int mlxd_ah_destroy(struct mlxd_ah *ah);

/* ---------------------------------------------------------------------------------------- */
/* Memory windows                                                                             */

/* A memory window: an rkey of its own through which peers reach part of a region (one with
 * MLXD_ACCESS_MW_BIND), with rights of its own, bound and unbound through a send queue without
 * a system call (IB spec vol. 1 10.6.7; kernel drivers/infiniband/hw/mlx5/mr.c
 * mlx5_ib_alloc_mw; rdma-core providers/mlx5/qp.c set_bind_wr, verbs.c mlx5_alloc_mw).
 *   Type 1: bound by MLXD_OP_BIND_MW through any RC/UC QP of the NIC (mlxd_mw_bind posts and
 *     rings one, as ibv_bind_mw does); any QP of the NIC may then use its rkey; a new bind
 *     moves it, a zero-length bind unbinds it.  It cannot be zero-based.
 *   Type 2 (2B): bound by MLXD_OP_BIND_MW to the one QP that posts the bind, usable only through
 *     that QP; it must be unbound to be bound again: MLXD_OP_LOCAL_INV on that QP, or a peer's
 *     SEND with Invalidate (MLXD_OP_SEND_INV) arriving on it.
 * Every bind gives the window a new rkey (the key byte, bits 7:0, moves on by one, as libibverbs'
 * ibv_inc_rkey), so the rkey of an earlier binding stops working: read the new one with
 * mlxd_mw_rkey() after posting the bind.  What the NIC checks when the bind runs (and completes
 * with IBV_WC_MW_BIND_ERR, syndrome 0x06, the QP going to ERR, when one fails): the window, the
 * QP and the region are of one PD (a NIC has one), the region has MLXD_ACCESS_MW_BIND and holds
 * [addr, addr + length), remote write or atomic rights need the region's local write, a type 2
 * window is free, a local invalidation names a type 2 window bound to that QP.  A peer's access
 * through a window the NIC checks as for a region (rkey, range, rights, and type 2: the QP):
 * IBV_WC_REM_ACCESS_ERR (0x13) at the peer otherwise.  Deregistering the region leaves the
 * window bound to nothing: accesses fail.  Not offered: type 2A windows (mlx5_ib advertises
 * IB_DEVICE_MEM_WINDOW_TYPE_2B only), a window over several regions (libmlx5 binds one KLM). */
struct mlxd_mw;

enum mlxd_mw_type { MLXD_MW_TYPE_1 = 1, MLXD_MW_TYPE_2 = 2 };

/* ALLOC_MW (legacy write command 14 through INVOKE_WRITE, as libibverbs' ibv_cmd_alloc_mw; the
 * kernel has no ioctl method to create one) on the NIC's PD.  The window starts unbound: its rkey
 * (mlxd_mw_rkey) reaches nothing.  Errors: -EINVAL nic closed, out NULL, type not 1 or 2; -ENOMEM;
 * the kernel's errno (message "ALLOC_MW").  Any thread. */
int mlxd_mw_alloc(struct mlxd_nic *nic, uint32_t type, struct mlxd_mw **out);

/* MW_DESTROY (ioctl, as libibverbs 44 sends it; a bound window is destroyed with its binding).
 * A second call returns the first one's result; mlxd_close frees the windows still live.
 * Errors: -EINVAL mw NULL or its NIC closed; the kernel's errno (message "MW_DESTROY").
 * Thread rules: no bind or invalidation of it posted and not completed. */
int mlxd_mw_free(struct mlxd_mw *mw);

/* The window's rkey as of the last bind posted (the one to give peers); 0 for NULL. */
uint32_t mlxd_mw_rkey(const struct mlxd_mw *mw);
/* MLXD_MW_TYPE_1 or _2; 0 for NULL. */
uint32_t mlxd_mw_type(const struct mlxd_mw *mw);

/* Moves qp to ERR (MODIFY_QP, mask STATE): the NIC flushes posted entries with
 * IBV_WC_WR_FLUSH_ERR completions.  Errors: -EINVAL misuse; the kernel's errno.  Any thread. */
int mlxd_qp_to_error(struct mlxd_qp *qp);

/* The QP's IB state as last set by this library: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 6 ERR; -EINVAL
 * when qp is invalid.  (The NIC may have moved it to ERR since: see its completions/events.)
 * Any thread. */
int mlxd_qp_state(const struct mlxd_qp *qp);

/* QP_DESTROY, then removes the QP's completions nobody polled from its CQs (the other QPs'
 * CQEs keep their order; as libmlx5's ibv_destroy_qp, rdma-core providers/mlx5/cq.c
 * __mlx5_cq_clean), unmaps its UAR and frees its rings.  A second call returns the first one's
 * result; -EINVAL when qp is NULL or its NIC is closed; the kernel's errno (message
 * "QP_DESTROY"; the memory is then kept until mlxd_close).
 * Thread rules: after every other call on qp, and no poll of its CQs running. */
int mlxd_qp_destroy(struct mlxd_qp *qp);

/* ---------------------------------------------------------------------------------------- */
/* Shared receive queues                                                                      */

/* A shared receive queue (SRQ): one list of receive WQEs that every QP created with
 * mlxd_qp_opts.srq takes its receives from, in the order they were posted (IB spec 10.2.9;
 * kernel drivers/infiniband/hw/mlx5/srq.c; rdma-core providers/mlx5/srq.c).  A completion of a
 * receive taken from it comes on the QP's receive CQ with the QP's qpn and the wr_id given to
 * mlxd_srq_receive (mlx5/mlxd_mlx5.h).  An RC message finding it empty is NAKed with RNR (the
 * sender retries rnr_retry times); a UC message or a UD datagram is dropped by the NIC.  A QP of
 * the SRQ that goes to ERR leaves the SRQ's receives to the other QPs (they are not flushed to
 * it) and raises MLXD_EVENT_QP_LAST_WQE once its last receive has completed (IB spec 10.2.9.5). */
struct mlxd_srq;

struct mlxd_srq_opts {
    size_t   sz;               /* sizeof(struct mlxd_srq_opts) */
    uint32_t depth;            /* receives outstanding at most: 1 .. the device's max_srq_wr
                                  (QUERY_DEVICE; 32767 on the emulator) */
    uint32_t max_sge;          /* scatter entries per receive; 0 = 1 */
    uint64_t user_data;        /* returned in struct mlxd_event.user_data for SRQ events */
};

/* Creates an SRQ on nic (SRQ_CREATE ioctl, kernel core/uverbs_std_types_srq.c).  Its buffer
 * (a power of two of WQEs of 16 + 16 * max_sge bytes rounded to a power of two) and doorbell
 * record are owned by the library.  Errors: -EINVAL misuse (NULL, sz too small or unknown
 * nonzero tail, depth 0, depth or max_sge over the device's maximum); -ENOMEM; -errno of the
 * kernel's refusal (message names SRQ_CREATE).  Thread rules: any thread (takes nic->lock). */
int mlxd_srq_create(struct mlxd_nic *nic, const struct mlxd_srq_opts *opts, struct mlxd_srq **out);

/* Arms the limit: when the receives posted and not yet taken by a message fall below limit,
 * the NIC raises IB_EVENT_SRQ_LIMIT_REACHED once (mlxd_wait: MLXD_EVENT_SRQ_LIMIT) and the SRQ
 * is disarmed; arm again to hear of it again; limit 0 disarms (MODIFY_SRQ with IB_SRQ_LIMIT,
 * write command 23 through INVOKE_WRITE; kernel hw/mlx5/srq.c mlx5_ib_modify_srq).
 * Errors: -EINVAL NULL/destroyed SRQ or limit > depth (nothing changes); -errno of MODIFY_SRQ.
 * Any thread. */
int mlxd_srq_arm_limit(struct mlxd_srq *srq, uint32_t limit);

/* Destroys the SRQ (SRQ_DESTROY).  -EBUSY while a live QP uses it (nothing changes); -EINVAL
 * NULL or closed NIC; -errno of SRQ_DESTROY (the SRQ then stays until mlxd_close).  A second
 * call after success returns 0.  No mlxd_srq_receive may run meanwhile. */
int mlxd_srq_destroy(struct mlxd_srq *srq);

/* ---------------------------------------------------------------------------------------- */
/* Events                                                                                     */

enum mlxd_event_kind {
    MLXD_EVENT_COMPLETION = 1, /* an armed CQ got a completion (one per mlxd_cq_arm) */
    MLXD_EVENT_CQ_ERROR,       /* IB_EVENT_CQ_ERR (0): the CQ overran or failed */
    MLXD_EVENT_QP_FATAL,       /* IB_EVENT_QP_FATAL (1) */
    MLXD_EVENT_QP_REQ_ERROR,   /* IB_EVENT_QP_REQ_ERR (2) */
    MLXD_EVENT_QP_ACCESS_ERROR,/* IB_EVENT_QP_ACCESS_ERR (3) */
    MLXD_EVENT_PORT_ACTIVE,    /* IB_EVENT_PORT_ACTIVE (9) */
    MLXD_EVENT_PORT_ERROR,     /* IB_EVENT_PORT_ERR (10) */
    MLXD_EVENT_DEVICE_FATAL,   /* IB_EVENT_DEVICE_FATAL (8) */
    MLXD_EVENT_OTHER,          /* any other async event: see kernel_type */
    MLXD_EVENT_SRQ_LIMIT,      /* IB_EVENT_SRQ_LIMIT_REACHED (15): srq fell below its armed limit */
    MLXD_EVENT_QP_LAST_WQE,    /* IB_EVENT_QP_LAST_WQE_REACHED (16): qp, attached to an SRQ, is in
                                  ERR and its last receive has completed (IB spec 10.2.9.5,
                                  11.6.3.1): the SRQ's WQEs stay for the other QPs, and once its
                                  CQs are polled past this point qp may be destroyed without
                                  losing a receive */
};

struct mlxd_event {
    uint32_t kind;             /* enum mlxd_event_kind */
    uint32_t kernel_type;      /* ib_uverbs_async_event_desc.event_type; 0 for completions */
    struct mlxd_cq *cq;        /* COMPLETION, CQ_ERROR: the CQ; else NULL */
    struct mlxd_qp *qp;        /* QP_*: the QP; else NULL */
    uint64_t user_data;        /* the object's opts.user_data; the port number for PORT_* */
    struct mlxd_srq *srq;      /* SRQ_LIMIT: the SRQ; else NULL */
};

/* Waits up to ms milliseconds (0 = do not block) for events of nic: completion events of armed
 * CQs (read from the completion channel; each consumes that CQ's arm, and increments the arm
 * sequence number, rdma-core providers/mlx5/cq.c mlx5_cq_event) and async events (port state, QP
 * fatal, CQ error).  Fills up to cap events into out and returns how many (0 on timeout).  Events
 * for objects destroyed since are dropped.  Errors: -EINVAL ms < 0, cap 0, NULL; -errno of
 * poll/read (-EINTR is retried).  Thread rules: one call per NIC at a time; other threads run
 * meanwhile. */
int mlxd_wait(struct mlxd_nic *nic, int ms, struct mlxd_event *out, size_t cap);

/* The fds mlxd_wait polls (for an application's own epoll): the async fd and the completion
 * channel fd (-1 until a CQ with events exists).  Read them only through mlxd_wait or
 * mlxd_read_completion_event; they belong to the NIC (closed by mlxd_close).  Returns 0 or
 * -EINVAL.  Any thread. */
int mlxd_event_fds(const struct mlxd_nic *nic, int *async_fd, int *comp_fd);

/* A consistent copy of the kernel's clock-info page (the fields of mlx5dv.h's struct
 * mlx5dv_clock_info): nsec at last_cycles, and the cycles-to-ns multiplier (ns = cycles * mult
 * >> shift, with frac the carried fraction).  Valid for timestamps within overflow_period of
 * last_cycles: take a new copy at least that often (the kernel refreshes the page). */
struct mlxd_clock_info {
    uint64_t nsec;
    uint64_t last_cycles;
    uint64_t frac;
    uint32_t mult;
    uint32_t shift;
    uint64_t mask;
    uint64_t overflow_period;  /* as the kernel states it (the mlx5 driver: in ns, via jiffies on
                                  some versions); informative */
};

/* Reads the page under its `sign` sequence word (the kernel sets MLX5_IB_CLOCK_INFO_KERNEL_UPDATING
 * while it writes), as mlx5dv_get_clock_info does.  No system call, no lock: the hot path may
 * call it once per batch.  Errors: -EINVAL nic or out NULL, nic closed; -EOPNOTSUPP the kernel
 * offers no clock-info page (mlxd_port_info.clock_info false); -EBUSY the kernel kept updating
 * it over 1000 reads. */
int mlxd_clock_info(const struct mlxd_nic *nic, struct mlxd_clock_info *out);

/* A free-running CQE timestamp to ns on the clock-info's time base, exactly as mlx5dv_ts_to_ns:
 * a timestamp up to mask/2 ticks after last_cycles is later, one more than that is earlier
 * (this is what keeps the conversion right across the timer's wrap); no division. */
static inline uint64_t mlxd_ts_to_ns(const struct mlxd_clock_info *ci, uint64_t ts)
{
    uint64_t delta = (ts - ci->last_cycles) & ci->mask;
    if (delta > ci->mask / 2) {
        delta = (ci->last_cycles - ts) & ci->mask;
        return ci->nsec - ((delta * ci->mult - ci->frac) >> ci->shift);
    }
    return ci->nsec + ((delta * ci->mult + ci->frac) >> ci->shift);
}

/* A real-time CQE timestamp (CQ created with real_time_ts) to ns since the epoch. */
static inline uint64_t mlxd_real_time_ts_to_ns(uint64_t ts)
{
    return (ts >> 32) * 1000000000ull + (uint32_t)ts;
}

/* Whether cq was created with real_time_ts (false for NULL or a destroyed CQ). */
bool mlxd_cq_real_time(const struct mlxd_cq *cq);

/* For an application that waits on the completion channel fd itself (poll/epoll on
 * mlxd_event_fds' comp_fd, e.g. together with fds of its own): exactly one read(2) of the
 * channel, which is what the kernel's interface needs per wake-up (one wait, one read of one
 * struct ib_uverbs_comp_event_desc: include/uapi/rdma/ib_user_verbs.h; ibv_get_cq_event does
 * the same).  Returns 1 with ev filled (kind MLXD_EVENT_COMPLETION, cq, user_data; the CQ's
 * arm sequence advances as mlxd_wait's does), 0 when nothing was queued (EAGAIN/EINTR) or the
 * event was for a CQ destroyed since.  The channel is a blocking fd: call it once poll says the
 * fd is readable, or it waits for the next event.  Errors: -EINVAL nic or ev NULL, nic closed,
 * or no completion channel yet (no CQ with events); -errno of read.  Thread rules: as
 * mlxd_wait (one reader of a NIC's events at a time). */
int mlxd_read_completion_event(struct mlxd_nic *nic, struct mlxd_event *ev);

#ifdef __cplusplus
}
#endif
#endif
