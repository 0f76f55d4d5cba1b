/* mlxd_emu_bench.h: benchmark hooks of the mlx5direct emulator (libmlx5direct-emu.so): write one
 * receive completion into a QP's CQ ring now, from the calling thread, the way the NIC writes it
 * at the end of an RDMA WRITE with immediate, and tell the caller the TSC at which it became
 * valid; and park the emulator's engine threads while such a benchmark runs.  Used by
 * tools/mlxd-bench.c (hand-off latency, rings filled for the poll benchmarks, rdma-core's libmlx5
 * fed the same CQEs) and tests/test_bench.c.
 *
 * In a preloaded program find them with dlsym(RTLD_DEFAULT, "mlxd_emu_bench_write_imm").
 * Source of the CQE layout: struct mlx5_cqe64 (mlx5dv.h); ownership: the owner bit of the pass
 * (rdma-core providers/mlx5/cq.c get_sw_cqe), written last with release semantics.
 */
#ifndef MLXD_EMU_BENCH_H
#define MLXD_EMU_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* On emulated device `dev` (the N of /dev/infiniband/uverbsN), for the QP numbered qpn (RC or
 * UC, in RTR, RTS or SQD, with a receive ring and a receive CQ): consumes the QP's next posted
 * receive and writes a MLX5_CQE_RESP_WR_IMM CQE into its receive CQ: srqn_uidx = the QP's user
 * index, immediate = htobe32(imm), byte_cnt = byte_len, timestamp = the device clock (cycles of
 * the free-running timer, or the real-time format for a REAL_TIME_TS CQ: emu/nic/nic_clock.c),
 * sop_drop_qpn = qpn (no drops), wqe_counter = the receive's index; 63 bytes first, then op_own
 * (opcode 1 << 4 | owner bit of the pass) as a release store.  If the CQ is armed (an arm
 * doorbell rung before this call is taken into account at once, as the hardware sees it) the
 * completion event is raised.  *tsc (when tsc is not NULL) receives the time stamp counter
 * (x86-64: lfence; rdtsc; aarch64: isb; cntvct_el0; abi/tsc.h, as the benchmark tools read it)
 * read immediately before the op_own store: the CQE becomes visible to a poller no earlier
 * than that.
 * Nothing of the wire is involved (no packet, no PSN): the RDMA payload, if any, is the caller's
 * to write into the registered memory before calling, as the NIC's DMA precedes its CQE.
 * Returns 0; -EAGAIN no receive is posted or the CQ holds ncqe unconsumed CQEs by its consumer
 * index (nothing written: call again later; the NIC would drop a UC message / overrun, a
 * benchmark producer waits; never for a CQ created with IGNORE_OVERRUN, which the NIC does not
 * check);
 * -ENODEV the device is not open (or dev >= 16); -ENOENT no such QP; -EINVAL the QP is in
 * another state or has no receive ring or receive CQ.
 * Threads: any thread; takes the device's lock (the engine's), so calls are serialised with the
 * engine.  The device must stay open during the call. */
int mlxd_emu_bench_write_imm(unsigned dev, uint32_t qpn, uint32_t imm, uint32_t byte_len,
                             uint64_t *tsc);

/* park != 0: every engine thread of the emulator stops working and sleeps 10 ms at a time until
 * called again with park == 0 (then it goes on within 10 ms).  While parked nothing is
 * executed: doorbells, CQ arm requests and packets wait (packets in the socket's buffer).
 * For measurements whose only producer is mlxd_emu_bench_write_imm in busy-poll mode: the
 * engine's idle wake-ups (every 50 us to 1 ms, MLXD_EMU_POLL_US) would otherwise preempt the
 * measured threads, which a real NIC does not do.  Not for event mode: arming needs the engine.
 * In a preloaded program find it with dlsym(RTLD_DEFAULT, "mlxd_emu_bench_park").
 * Returns 0.  Any thread. */
int mlxd_emu_bench_park(int park);

#ifdef __cplusplus
}
#endif
#endif
