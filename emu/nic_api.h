/* nic_api.h: the emulated NIC's control API (fault injection, port state, wire capture,
 * statistics).  These declarations are also appended to the emulator's public header
 * emu/mlxd_emu.h; this file exists so the NIC half builds before that header does.
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
#ifndef MLXD_EMU_NIC_API_H
#define MLXD_EMU_NIC_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
};

/* Sets (f) or clears (f == NULL) the egress faults of device `index`; resets the packet index
 * counter.  -EINVAL if f->sz is not sizeof(struct mlxd_emu_fault), a rate outside [0, 1] or a
 * count above MLXD_EMU_FAULT_MAX_IDX. */
int mlxd_emu_fault_set(unsigned index, const struct mlxd_emu_fault *f);

/* Takes the port of device `index` down (up = false) or up: while down nothing is sent or
 * received, QUERY_PORT reports DOWN, and every context that has objects on the device gets
 * IB_EVENT_PORT_ERR (10) / IB_EVENT_PORT_ACTIVE (9) on its async fd.  -ENODEV if not open. */
int mlxd_emu_port_set(unsigned index, bool up);

/* Starts (path) or stops (NULL) the wire capture of device `index`.  -ENODEV if not open;
 * -EIO if the file cannot be created. */
int mlxd_emu_pcap(unsigned index, const char *path);

/* Copies the counters of device `index`.  -ENODEV if not open; -EINVAL if st->sz is wrong. */
int mlxd_emu_nic_stats(unsigned index, struct mlxd_emu_nic_stats *st);

#ifdef __cplusplus
}
#endif
#endif
