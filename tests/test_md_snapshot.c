/* md_snapshot: the receiver's metadata snapshot (receiver/md_snapshot.h) against a device that
 * rewrites the block in the middle of the copy, deterministically.
 *
 * The copy is the library's own function compiled with MD_SNAPSHOT_COPY replaced by a copy that
 * stops after `split` bytes, lets "the device" land the next frame's block up to byte `upto`
 * (ascending, 8 bytes at a time: the order md_snapshot.h relies on), then copies the rest.  The
 * device may also have landed a prefix before the copy began (`before`).  For every split point,
 * prefix and extent, a snapshot that md_snapshot_host accepts with the completed frame's PSN must
 * be exactly that frame's block (tests/test_soak.c's "each consumed frame must carry its own
 * metadata", here without timing); and the case `make soak` found -- bytes 0..31 copied, the
 * rewrite lands, bytes 32..47 copied: the completed frame's PSN with the next frame's number --
 * must be refused (the PSN check of the copy alone accepts it, which the test shows first). */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "mlxd_hsb.h"

static uint8_t *dev_blk;                      /* the block the "device" writes */
static uint8_t newer[MLXD_HSB_METADATA_SIZE]; /* the rewriting frame's block */
static size_t split_at, land_upto, landed;    /* copy split point; rewrite extent; bytes landed */

static void device_lands(size_t upto)
{
    for (; landed + 8 <= upto; landed += 8)   /* ascending, one 8-byte unit at a time */
        memcpy(dev_blk + landed, newer + landed, 8);
}

static void copy_with_rewrite(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t s = split_at < n ? split_at : n;
    memcpy(dst, src, s);
    device_lands(land_upto);
    memcpy(dst + s, src + s, n - s);
}

#define MD_SNAPSHOT_COPY(dst, src, n) copy_with_rewrite((dst), (src), (n))
#include "md_snapshot.h"

static uint8_t older[MLXD_HSB_METADATA_SIZE];
static uint8_t mem[MLXD_HSB_METADATA_SIZE + 8];

static void blocks(void)
{
    /* frame 7 (metadata PSN 15, as the soak's sensor sends it) and frame 15 that rewrites the
     * page (8 pages later): every field differs */
    struct mlxd_hsb_metadata a = { .flags = 0, .psn = 15, .crc = 0x11111111, .timestamp_s = 100,
                                   .timestamp_ns = 5, .bytes_written = 1024, .frame_number32 = 7,
                                   .metadata_s = 100, .metadata_ns = 6 };
    struct mlxd_hsb_metadata b = { .flags = MLXD_HSB_FLAG_UNSYNC, .psn = 31, .crc = 0x22222222,
                                   .timestamp_s = 101, .timestamp_ns = 7, .bytes_written = 512,
                                   .frame_number32 = 15, .metadata_s = 101, .metadata_ns = 8 };
    ck_assert_int_eq(mlxd_hsb_metadata_encode(&a, older, sizeof older), 0);
    ck_assert_int_eq(mlxd_hsb_metadata_encode(&b, newer, sizeof newer), 0);
}

/* One snapshot of a block that holds `older`, with `before` bytes of `newer` landed before the
 * copy and the rewrite reaching `upto` at the copy's byte `split`.  Returns the verdict. */
static bool snap(size_t offset, size_t before, size_t split, size_t upto, uint8_t md[48])
{
    dev_blk = mem + offset;
    memcpy(dev_blk, older, sizeof older);
    landed = 0;
    device_lands(before);
    split_at = split;
    land_upto = upto;
    return md_snapshot_host(dev_blk, md);
}

static uint32_t be32_at(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

START_TEST(found_by_soak_is_refused)
{
    blocks();
    uint8_t md[48];
    /* bytes 0..31 copied, then the next frame's block lands whole, then bytes 32..47 */
    bool ok = snap(0, 0, 32, MLXD_HSB_METADATA_SIZE, md);
    struct mlxd_hsb_metadata d;
    ck_assert_int_eq(mlxd_hsb_metadata_decode(md, sizeof md, &d), 0);
    /* the mix the PSN check of the copy alone takes for frame 7 ... */
    ck_assert_uint_eq(d.psn, 15);
    ck_assert_uint_eq(d.frame_number32, 15);
    /* ... is refused */
    ck_assert_msg(!ok, "a copy with frame 7's PSN and frame 15's number was accepted");
}
END_TEST

START_TEST(untouched_block_is_accepted)
{
    blocks();
    uint8_t md[48];
    for (size_t off = 0; off < 8; off++) {   /* the block may be unaligned (the caller's buffer) */
        ck_assert(snap(off, 0, 0, 0, md));
        ck_assert_mem_eq(md, older, 48);
        ck_assert(snap(off, 0, 48, 0, md));
        ck_assert_mem_eq(md, older, 48);
    }
}
END_TEST

/* A rewrite that lands after the copy but before the second read: the copy is frame 7's, but
 * the page is being rewritten, so it is refused (counted overwritten by the receiver). */
START_TEST(rewrite_after_copy_is_refused)
{
    blocks();
    uint8_t md[48];
    for (size_t upto = 8; upto <= MLXD_HSB_METADATA_SIZE; upto += 8) {
        ck_assert_msg(!snap(0, 0, 48, upto, md), "rewrite to byte %zu after the copy accepted", upto);
        ck_assert_mem_eq(md, older, 48);
    }
}
END_TEST

/* Every split of the copy, every prefix landed before it, every extent of the rewrite at the
 * split, three alignments: accepted with the old PSN => exactly the old block; accepted with the
 * new PSN => not the old frame's (the receiver flags it); and every mix with the old PSN is
 * refused. */
START_TEST(every_interleaving)
{
    blocks();
    uint8_t md[48];
    unsigned accepted_old = 0, refused = 0, new_psn = 0;
    for (size_t off = 0; off < 3; off++)
        for (size_t before = 0; before <= MLXD_HSB_METADATA_SIZE; before += 8)
            for (size_t split = 0; split <= 48; split++)
                for (size_t upto = before; upto <= MLXD_HSB_METADATA_SIZE; upto += 8) {
                    bool ok = snap(off, before, split, upto, md);
                    uint32_t psn = be32_at(md + MLXD_HSB_MD_PSN);
                    bool mixed = memcmp(md, older, 48) && memcmp(md, newer, 48);
                    if (!ok) { refused++; continue; }
                    if (psn == 15) {
                        accepted_old++;
                        ck_assert_msg(!memcmp(md, older, 48), "off %zu before %zu split %zu upto "
                                      "%zu: accepted a copy with frame 7's PSN that is not frame "
                                      "7's block (mixed %d)", off, before, split, upto, mixed);
                    } else {
                        ck_assert_uint_eq(psn, 31);
                        new_psn++;
                    }
                }
    /* the three outcomes all occur (the loops are not vacuous) */
    ck_assert_uint_gt(accepted_old, 0);
    ck_assert_uint_gt(refused, 0);
    ck_assert_uint_gt(new_psn, 0);
}
END_TEST

Suite *md_snapshot_suite(void)
{
    Suite *s = suite_create("md_snapshot");
    TCase *tc = tcase_create("rewrite");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, found_by_soak_is_refused);
    tcase_add_test(tc, untouched_block_is_accepted);
    tcase_add_test(tc, rewrite_after_copy_is_refused);
    tcase_add_test(tc, every_interleaving);
    suite_add_tcase(s, tc);
    return s;
}
