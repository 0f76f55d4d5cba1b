/* mlxd_emu.h: the test and observability interface of the mlx5direct emulator
 * (libmlx5direct-emu.so).
 *
 * The emulator answers the system calls a verbs program makes on /dev/infiniband/uverbsN (open,
 * close, stat/fstat/statx, ioctl, write, read, mmap, munmap, and socket for NETLINK_RDMA) inside
 * the process, either preloaded (LD_PRELOAD=libmlx5direct-emu.so) or linked in.  These calls let
 * a test inspect and steer it.  See docs/emulator.md for what is emulated.
 *
 * Threads: every call may be made from any thread; each takes the emulator's global lock.
 * Errors: the mlxd_emu_* functions return a negative errno only: they do not set mlxd_errmsg()
 * (abi/mlxd_error.h).  The emulator is a separate library with its own copy of abi/, so a
 * message it kept would sit in its own per-thread buffer, which the caller's mlxd_errmsg() (the
 * main library's) cannot see.  None of these functions prints, aborts or exits.
 * Configuration read from the environment when the emulator starts has no caller to return an
 * error to, so the preloaded emulator reports its problems on stderr, prefixed
 * "mlx5direct-emu: ", and carries on: MLXD_EMU_CONFIG naming a file it cannot read, a device
 * configuration (MLXD_EMU_DEVICES or that file) that does not parse (the defaults are used), a
 * bad MLXD_EMU_FAIL (ignored from the first bad rule on), and an emulated sysfs tree that
 * cannot be made under TMPDIR (no emulated device is then visible).
 * In a preloaded program, find the functions with dlsym(RTLD_DEFAULT, "mlxd_emu_...").
 */
#ifndef MLXD_EMU_PUBLIC_H
#define MLXD_EMU_PUBLIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Live objects and resources of this process's emulated kernel. */
struct mlxd_emu_counts {
    size_t sz;                   /* set to sizeof(struct mlxd_emu_counts) by the caller */
    unsigned files;              /* open fds of /dev/infiniband/uverbsN */
    unsigned contexts;           /* of those, with GET_CONTEXT done */
    unsigned event_fds;          /* completion-channel and async-event fds the process holds */
    unsigned mappings;           /* live mmaps of uverbs fds (UAR pages, CORE_CLOCK) */
    unsigned pd, mr, cq, qp;     /* live objects per type */
    unsigned uar;                /* dynamic UAR objects (MLX5_IB_OBJECT_UAR) */
    unsigned comp_channel;       /* completion channels whose fd is open */
    unsigned async_event;        /* async-event fds that are open */
    unsigned long long kernel_calls;  /* ioctl + write + mmap calls on uverbs fds so far */
    unsigned srq;                /* live shared receive queues */
    unsigned ah;                 /* live address handles (CREATE_AH) */
    unsigned mw;                 /* live memory windows (ALLOC_MW) */
};

/* Fills *c (c->sz must be set; fields past c->sz are not written).
 * -EINVAL: c is NULL or c->sz is smaller than the first field set. */
int mlxd_emu_get_counts(struct mlxd_emu_counts *c);

/* Sum of live pd + mr + cq + qp + srq + uar + comp_channel + async_event + ah, plus open files and
 * mappings: 0 means the emulated kernel holds nothing for this process. */
unsigned mlxd_emu_live_total(void);

/* Whether emulation is on (MLXD_EMU unset or not "0"/"off"). */
bool mlxd_emu_active(void);

/* The sysfs tree the emulator serves (also exported as SYSFS_PATH); "" when inactive.  The
 * string belongs to the emulator and changes with mlxd_emu_configure(). */
const char *mlxd_emu_sysfs_path(void);

/* The emulated devices' clock (every device of the process; emu/nic/nic_clock.c):
 *   khz        the free-running timer's frequency, reported as hca_core_clock (1000..10^7;
 *              default 156250);
 *   bits       its width: it wraps at 2^bits, reported as timestamp_mask (32..64; default 64);
 *   start      its value now (< 2^bits), e.g. just below the wrap (default: 0 at boot, the
 *              timer counting CLOCK_MONOTONIC_RAW, the same in every process);
 *   real_time  whether the devices have the real-time (PTP) CQE timestamp format
 *              (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS; default true).
 * The timer runs on CLOCK_MONOTONIC_RAW, the real-time format on CLOCK_REALTIME.  Takes effect
 * at once, in the calling process only (processes sharing a device then disagree: a test
 * facility), for CQEs, the core-clock page and the clock-info page (which restarts its time
 * base); contexts opened before see the old caps.  Returns 0 or -EINVAL (a value out of range). */
int mlxd_emu_clock_set(uint32_t khz, unsigned bits, uint64_t start, bool real_time);

/* The emulated devices' CQE compression caps (emu/nic/nic_cqe_comp.c; reported in
 * EX_QUERY_DEVICE's mlx5 response, cqe_comp_caps, as drivers/infiniband/hw/mlx5/main.c
 * mlx5_ib_query_device does from the HCA caps):
 *   max_num       the most CQEs one compressed session holds (cqe_compression_max_num;
 *                 2..256; default 64); 0: no CQE compression (the kernel then refuses
 *                 cqe_comp_en with EOPNOTSUPP, and CQs that have it write full CQEs);
 *   stride_index  the CSUM_STRIDX mini-CQE format (mini_cqe_resp_stride_index; default true).
 * Takes effect at once for every device of the calling process.  0 or -EINVAL (1 or > 256). */
int mlxd_emu_cqe_comp_set(unsigned max_num, bool stride_index);

/* Number of emulated devices; device N is /dev/infiniband/uverbsN. */
int mlxd_emu_num_devices(void);

/* Replaces the device list, as MLXD_EMU_DEVICES would (NULL or "" = the defaults), rebuilds
 * the sysfs tree and re-exports SYSFS_PATH.
 * -EBUSY: a uverbs fd is open;  -EINVAL: spec does not parse (see docs/emulator.md). */
int mlxd_emu_configure(const char *devices);

/* Fault injection: fail the nth kernel call from now (n = 1: the next one) with errno err
 * (positive), once.  Kernel calls are ioctl, write and mmap on uverbs fds.
 * -EINVAL: n == 0 or err out of 1..4095;  -ENOSPC: 32 rules pending. */
int mlxd_emu_fail_nth_call(unsigned n, int err);

/* Same, counting only calls of one method, by name (docs/emulator.md lists the names:
 * e.g. "QP_CREATE", "ALLOC_PD", "MODIFY_QP", "MMAP"; emu/kernel/faults.c has the full list: the ioctl
 * methods, the legacy write commands and MMAP).
 * -EINVAL: method NULL, "*" (use mlxd_emu_fail_nth_call) or a name the emulator does not know
 * (a rule for it would never fire), n == 0, or err out of 1..4095;  -ENOSPC: 32 rules pending. */
int mlxd_emu_fail_method(const char *method, unsigned n, int err);

/* Drops every pending fault rule. */
void mlxd_emu_fail_clear(void);

/* Sets the port state of device dev: sysfs ports/1/state and phys_state, QUERY_PORT state, and
 * the engine (emu_nic_port_event), which raises IB_EVENT_PORT_ACTIVE (9) / IB_EVENT_PORT_ERR (10)
 * on the default async fd of every open context of the device (objects or not, as the kernel's
 * ib_dispatch_event does) and stops moving packets while down.
 * -EINVAL: no such device.  A negative errno from rewriting the sysfs files (e.g. -EACCES,
 * -ENOSPC): the state change itself has still taken effect. */
int mlxd_emu_set_link(unsigned dev, bool up);

/* ---- The emulated NIC (appended by the NIC half: emu/nic/) -----------------
 *
 * All functions are exported by libmlx5direct-emu.so (default visibility), thread-safe, and
 * take the emulated device by its index N (the N of /dev/infiniband/uverbsN).  They may be
 * called before the device is opened (the settings wait for it) and return 0 or a negative
 * errno (-EINVAL: index >= 16 or a bad argument; -ENODEV: the device is not open, for the calls
 * that need a running engine).
 *
 * Environment (read when the device is opened; N = device index):
 *   MLXD_EMU_FAULT, MLXD_EMU_FAULT_<N>   egress faults, e.g. "drop=0.01,dup=0.02,reorder=0.01,
 *        corrupt=0.001,drop_idx=3:7,dup_idx=2,reorder_idx=5,corrupt_idx=9,seed=42".  Rates are
 *        probabilities per packet (0..1); *_idx are ':'-separated 0-based indices of the packets
 *        this device sends after the faults take effect.  The per-device variable wins.
 *   MLXD_EMU_PCAP, MLXD_EMU_PCAP_<N>     write the device's wire (egress and ingress) to this
 *        pcap file (Ethernet link type, zero MAC addresses) unless the device configuration
 *        (emu_device_cfg.pcap_path) already names one.  "%d" in the value is replaced by N.
 *   MLXD_EMU_SPIN_US                     how long an engine keeps polling after its last work,
 *        in microseconds (default 2000); doorbells rung meanwhile are seen within microseconds.
 *   MLXD_EMU_POLL_US                     longest sleep of an idle engine in microseconds
 *        (default 1000): the worst-case delay before an engine idle for over 100 ms notices a
 *        doorbell (between SPIN_US and 100 ms of idleness it sleeps 50 us at a time).
 */
#define MLXD_EMU_FAULT_MAX_IDX 16

/* Egress packet faults of one device. */
struct mlxd_emu_fault {
    size_t   sz;                   /* sizeof(struct mlxd_emu_fault) */
    double   drop_rate, dup_rate, reorder_rate, corrupt_rate;   /* probability per packet */
    uint64_t drop_idx[MLXD_EMU_FAULT_MAX_IDX];    /* packet indices (0-based, since set) */
    uint64_t dup_idx[MLXD_EMU_FAULT_MAX_IDX];
    uint64_t reorder_idx[MLXD_EMU_FAULT_MAX_IDX]; /* held back and sent after the next one */
    uint64_t corrupt_idx[MLXD_EMU_FAULT_MAX_IDX]; /* one payload/header bit flipped: iCRC fails */
    unsigned n_drop_idx, n_dup_idx, n_reorder_idx, n_corrupt_idx;
    uint64_t seed;                 /* PRNG seed for the rates (0: a fixed default) */
};

/* Counters of one device since it was opened. */
struct mlxd_emu_nic_stats {
    size_t   sz;                   /* sizeof(struct mlxd_emu_nic_stats) */
    uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
    uint64_t rx_bad_icrc, rx_malformed, rx_unknown_qp, rx_bad_state, rx_dup, rx_out_of_seq;
    uint64_t rx_dropped_uc, tx_dropped_fault, tx_dup_fault, tx_reordered_fault,
             tx_corrupted_fault, tx_dropped_link_down, rx_dropped_link_down;
    uint64_t acks_sent, naks_sent, rnr_naks_sent, retransmits, timeouts, cqes, comp_events,
             async_events;
    uint64_t rx_wrong_source;      /* from an address other than the QP's connected peer */
    uint64_t rx_forwarded;         /* received for a QP of another process sharing the device,
                                      handed to it (docs/emulator.md "One device, many processes") */
    uint64_t rx_via_peer;          /* received by another process sharing the device and handed to
                                      this one (also counted in rx_pkts) */
    uint64_t rx_atomics;           /* compare-and-swap / fetch-and-add requests executed */
    uint64_t rx_ud_datagrams;      /* UD datagrams delivered into a receive WQE */
    uint64_t rx_ud_bad_qkey;       /* UD datagrams dropped: DETH Q_Key is not the QP's */
    uint64_t rx_ud_no_recv;        /* UD datagrams dropped: no receive WQE posted */
    uint64_t rx_dropped_socket;    /* datagrams for this port the host dropped before the port saw
                                      them (its UDP socket's receive buffer was full: the engine
                                      was not scheduled in time on a loaded machine): lost on the
                                      emulated wire.  The socket's SO_MEMINFO drop counter. */
    uint64_t timeouts_peer_frozen; /* RC timer expiries not counted against retry_cnt: the peer's
                                      emulated NIC (a thread of its process) had not run since
                                      the previous one (docs/emulator.md "Starved responder") */
};

/* Sets (f) or clears (f == NULL) the egress faults of device `index`; resets the packet index
 * counter.  -EINVAL if f->sz is not sizeof(struct mlxd_emu_fault), a rate outside [0, 1] or a
 * count above MLXD_EMU_FAULT_MAX_IDX. */
int mlxd_emu_fault_set(unsigned index, const struct mlxd_emu_fault *f);

/* Takes the port of device `index` down (up = false) or up: mlxd_emu_set_link() for an open
 * device.  While down nothing is sent or received (both counted as dropped), QUERY_PORT and
 * sysfs report DOWN, and every open context of the device (with an async fd) gets
 * IB_EVENT_PORT_ERR (10) / IB_EVENT_PORT_ACTIVE (9) on its default async fd.  -ENODEV if the device is not open. */
int mlxd_emu_port_set(unsigned index, bool up);

/* Raises a hardware error on device `index`, as the kernel reports it on the async fd
 * (include/rdma/ib_verbs.h enum ib_event_type):
 *   type 8 (IB_EVENT_DEVICE_FATAL): every QP of the device goes to the error state (its receives
 *          flushed) and every open context gets the event (mlx5_ib_handle_internal_error);
 *   type 1, 2, 3 (IB_EVENT_QP_FATAL, _REQ_ERR, _ACCESS_ERR): QP number `num` (UINT32_MAX: every
 *          RC/UC QP of the device) goes to the error state and its owner gets the event;
 *   type 0 (IB_EVENT_CQ_ERR): CQ number `num` (UINT32_MAX: every CQ) takes no more CQEs and its
 *          owner gets the event.
 * Returns 0; -EINVAL another type or index; -ENODEV the device is not open; -ENOENT no such QP
 * or CQ. */
int mlxd_emu_inject_event(unsigned index, uint32_t type, uint32_t num);

/* Address resolution at RTR (kernel core/addr.c, emu/kernel/neigh.c): whether the IPv4 address
 * answers ARP.  answers 1: it does; 0: it is silent (a MODIFY_QP to it waits 1 s and fails with
 * ETIMEDOUT; setting 1 meanwhile ends the wait with success, as a late reply); -1: back to the
 * default (127/8, the host's own addresses and complete /proc/net/arp entries answer).
 * -EINVAL bad address or value; -ENOSPC more than 32 addresses set. */
int mlxd_emu_neigh_set(const char *ipv4, int answers);

/* Starts (path) or stops (NULL) the wire capture of device `index`.  -ENODEV if not open;
 * -EIO if the file cannot be created. */
int mlxd_emu_pcap(unsigned index, const char *path);

/* Copies the counters of device `index`.  -ENODEV if not open; -EINVAL if st->sz is wrong. */
int mlxd_emu_nic_stats(unsigned index, struct mlxd_emu_nic_stats *st);

#ifdef __cplusplus
}
#endif
#endif
