/* md_snapshot.h (private): the monitor's copy of a page's metadata block, taken while the device
 * may be rewriting it, and the test that tells a frame's own block from a mixed one.
 *
 * The problem.  The device writes a page's 128-byte metadata block with one RDMA WRITE, and the
 * CQE of that frame comes after the write (the responder writes the payload, then the CQE).
 * Nothing holds the device back from the page afterwards: when it laps the monitor, the next
 * frame for the same page rewrites the block while the monitor copies it.  Such a copy can mix
 * two frames, e.g. bytes 0..31 (flags, PSN, ...) still the completed frame's and bytes 32..47
 * (frame number, metadata time) already the next one's.  Its PSN is the immediate's, so a PSN
 * check of the copy alone takes it for a good frame: the torn snapshot that `make soak`
 * (MLXD_SOAK_WINDOW=12 on 8 pages) found (tests/test_soak.c, "each consumed frame must carry
 * its own metadata").
 *
 * The rule.  Copy bytes [0, 48), then read the PSN (bytes 4..7) of the block a second time.  The
 * copy is the completed frame's own block when the second read equals the copy's PSN and that
 * PSN is the immediate's (the caller's check).  Why that is sound:
 *   - the device's write lands in ascending address order: PCIe does not reorder the posted
 *     writes of one requester unless they carry the Relaxed Ordering attribute, which the NIC
 *     sets only for regions registered with relaxed ordering (IBV_ACCESS_RELAXED_ORDERING; the
 *     receiver's region is not); and bytes 0..7 (flags + PSN) land at once (the root complex
 *     writes whole cache lines; the emulator's memcpy stores 16 bytes or more at a time);
 *   - let T be when the rewrite's bytes 0..7 land; every later byte of it lands after T.  A
 *     load fence orders all loads of the copy before the second read.  If T came before the
 *     second read began, the second read returns the new PSN, which is not the old one (two
 *     frames' PSNs differ): then either the copy's PSN is the old one (the reads differ: false)
 *     or it is the new one (the caller's check fails: another frame's block).  So true with the
 *     immediate's PSN means T came after the second read began, hence after every load of the
 *     copy: no byte of the rewrite was visible to it, the copy is entirely the completed frame's.
 *     (Bytes of the second read are compared one by one; ones read after T are the new PSN's, so
 *     a second read spanning T cannot match the old PSN in every byte unless the new PSN equals
 *     it.)
 * A false return means a rewrite of the block became visible while it was copied: the page was
 * overwritten.  A copy whose PSN is another frame's is that frame's block as far as it had landed.
 * The second read is four volatile byte loads (the block may be unaligned: the buffer is the
 * application's), so the compiler can neither drop it nor take it from the copy.
 *
 * Cost: the copy, one load fence (no instruction on x86-64, dmb oshld on aarch64), four byte loads;
 * no system call, lock, allocation or division.
 *
 * Tests define MD_SNAPSHOT_COPY before including this file to play the device's rewrite in the
 * middle of the copy (tests/test_md_snapshot.c); the library uses memcpy. */
#ifndef MLXD_MD_SNAPSHOT_H
#define MLXD_MD_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mlxd_hsb.h"

/* Orders the loads before it before the loads after it (the device writes the block by DMA into
 * coherent memory).  x86-64: loads are not reordered with older loads (TSO), so a compiler
 * barrier; aarch64: dmb oshld, as a read of CQE fields after op_own (mlx5/barrier.h).  Not
 * atomic_thread_fence: GCC refuses it under -fsanitize=thread. */
#if defined(__x86_64__) || defined(__i386__)
#define md_load_fence() __asm__ __volatile__("" ::: "memory")
#elif defined(__aarch64__)
#define md_load_fence() __asm__ __volatile__("dmb oshld" ::: "memory")
#else
#define md_load_fence() __sync_synchronize()
#endif

#ifndef MD_SNAPSHOT_COPY
#define MD_SNAPSHOT_COPY(dst, src, n) memcpy((dst), (const void *)(src), (n))
#endif

/* Copies bytes [0, MLXD_HSB_METADATA_USED) of the block at blk (host memory the device writes)
 * into md, then reads the block's PSN again.  Returns true when the second read equals the copy's
 * PSN, false when a rewrite of the block became visible meanwhile (md may then mix two frames).
 * With true, md is the completed frame's own block if its PSN is that frame's (see above). */
static inline bool md_snapshot_host(const uint8_t *blk, uint8_t md[MLXD_HSB_METADATA_USED])
{
    MD_SNAPSHOT_COPY(md, blk, MLXD_HSB_METADATA_USED);
    md_load_fence();   /* the copy's loads before the second read */
    const volatile uint8_t *p = (const volatile uint8_t *)blk + MLXD_HSB_MD_PSN;
    uint8_t a = p[0], b = p[1], c = p[2], d = p[3];
    return a == md[MLXD_HSB_MD_PSN] && b == md[MLXD_HSB_MD_PSN + 1] &&
           c == md[MLXD_HSB_MD_PSN + 2] && d == md[MLXD_HSB_MD_PSN + 3];
}

#endif
