/* The HSB frame format: metadata block, immediate, frame counter, payload pattern.
 * Expected values come from Holoscan Sensor Bridge src/hololink/core/hololink.cpp
 * Hololink::deserialize_metadata (field offsets, big-endian), the RTL concatenation in
 * fpga/nv_hsb_ip/dp_pkt/dp_pkt_top.sv, and the sidecars of the captures
 * (the .txt sidecars in fixtures/roce-pcaps: imm=0x0002e001 is page 1, psn 46). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mlxd_error.h"
#include "mlxd_hsb.h"

static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* The emulator's struct: twelve big-endian u32 (flags, psn, crc, ts_s_hi, ts_s_lo, ts_ns,
 * bytes_hi, bytes_lo, frame_number, md_s_hi, md_s_lo, md_ns) + 80 reserved bytes. */
START_TEST(decode_emulator_layout)
{
    uint8_t b[128];
    memset(b, 0xEE, sizeof b);
    uint32_t words[12] = { 0x00000003, 0x00ABCDEF, 0xDEADBEEF, 0x00001234, 0x6B0C4E4A,
                           271439148, 0x00000001, 0x00000010, 0x00012345, 0x00005678,
                           0x6B0C4E4B, 999999999 };
    for (int i = 0; i < 12; i++) put32(b + 4 * i, words[i]);
    struct mlxd_hsb_metadata md;
    memset(&md, 0x55, sizeof md);
    ck_assert_int_eq(mlxd_hsb_metadata_decode(b, sizeof b, &md), 0);
    ck_assert_uint_eq(md.flags, 3);
    ck_assert_uint_eq(md.psn, 0x00ABCDEF);
    ck_assert_uint_eq(md.crc, 0xDEADBEEF);
    ck_assert_uint_eq(md.timestamp_s, 0x000012346B0C4E4AULL);
    ck_assert_uint_eq(md.timestamp_ns, 271439148);
    ck_assert_uint_eq(md.bytes_written, 0x0000000100000010ULL);
    ck_assert_uint_eq(md.frame_number32, 0x00012345);
    ck_assert_uint_eq(md.frame_number, 0x2345);        /* low 16 bits at offset 34 */
    ck_assert_uint_eq(md.metadata_s, 0x000056786B0C4E4BULL);
    ck_assert_uint_eq(md.metadata_ns, 999999999);
}
END_TEST

/* The FPGA: {md_flags, 8'h0, psn24, crc, 16'h0, sof_ptp[79:0], bytes64, 16'h0, frame16, 16'h0, ptp80}. */
START_TEST(decode_rtl_layout)
{
    uint8_t b[128] = { 0 };
    b[3] = 0x02;                                   /* bpw_only */
    b[5] = 0x12; b[6] = 0x34; b[7] = 0x56;         /* psn[23:0] */
    b[14] = 0x00; b[15] = 0x01; b[16] = 0x02; b[17] = 0x03; b[18] = 0x04; b[19] = 0x05; /* 48-bit s */
    b[20] = 0x3B; b[21] = 0x9A; b[22] = 0xC9; b[23] = 0xFF;   /* 999999999 ns */
    b[31] = 0x80;                                  /* 128 bytes */
    b[34] = 0xFF; b[35] = 0xFE;                    /* frame 65534 */
    b[47] = 7;
    struct mlxd_hsb_metadata md;
    ck_assert_int_eq(mlxd_hsb_metadata_decode(b, 48, &md), 0);
    ck_assert_uint_eq(md.flags, MLXD_HSB_FLAG_BPW_ONLY);
    ck_assert_uint_eq(md.psn, 0x123456);
    ck_assert_uint_eq(md.timestamp_s, 0x000102030405ULL);
    ck_assert_uint_eq(md.timestamp_ns, 999999999);
    ck_assert_uint_eq(md.bytes_written, 128);
    ck_assert_uint_eq(md.frame_number, 65534);
    ck_assert_uint_eq(md.frame_number32, 65534);
    ck_assert_uint_eq(md.metadata_ns, 7);
}
END_TEST

START_TEST(decode_rejects_misuse)
{
    uint8_t b[128] = { 0 };
    struct mlxd_hsb_metadata md;
    memset(&md, 0x5A, sizeof md);
    struct mlxd_hsb_metadata copy = md;
    ck_assert_int_eq(mlxd_hsb_metadata_decode(b, 47, &md), -EINVAL);
    ck_assert(memcmp(&md, &copy, sizeof md) == 0);
    ck_assert(strstr(mlxd_errmsg(), "47") != NULL);
    ck_assert_int_eq(mlxd_hsb_metadata_decode(NULL, 128, &md), -EINVAL);
    ck_assert_int_eq(mlxd_hsb_metadata_decode(b, 128, NULL), -EINVAL);
    ck_assert_int_eq(mlxd_hsb_metadata_encode(&md, b, 127), -EINVAL);
}
END_TEST

START_TEST(encode_roundtrip)
{
    struct mlxd_hsb_metadata in = { .flags = 1, .psn = 939, .crc = 0x11223344,
        .timestamp_s = 1795933386, .timestamp_ns = 668393637, .bytes_written = 65536,
        .frame_number32 = 19, .metadata_s = 1795933386, .metadata_ns = 668393638 };
    uint8_t b[128];
    memset(b, 0xAA, sizeof b);
    ck_assert_int_eq(mlxd_hsb_metadata_encode(&in, b, sizeof b), 0);
    for (int i = 48; i < 128; i++) ck_assert_uint_eq(b[i], 0);
    ck_assert_uint_eq(b[4 * 8 + 3], 19);               /* frame_number at word 8 */
    struct mlxd_hsb_metadata out;
    ck_assert_int_eq(mlxd_hsb_metadata_decode(b, sizeof b, &out), 0);
    ck_assert_uint_eq(out.psn, 939);
    ck_assert_uint_eq(out.frame_number, 19);
    ck_assert_uint_eq(out.timestamp_ns, 668393637);
    ck_assert_uint_eq(out.bytes_written, 65536);
}
END_TEST

START_TEST(immediate_layouts)
{
    /* hsb_medium_64k_4pages.txt: imm=0x0002e001 (page=1, psn=46); imm=0x003ab000 (page=0, psn=939). */
    ck_assert_uint_eq(mlxd_hsb_imm_page(0x0002e001, MLXD_HSB_IMM_12_20), 1);
    ck_assert_uint_eq(mlxd_hsb_imm_psn(0x0002e001, MLXD_HSB_IMM_12_20), 46);
    ck_assert_uint_eq(mlxd_hsb_imm_page(0x003ab000, MLXD_HSB_IMM_12_20), 0);
    ck_assert_uint_eq(mlxd_hsb_imm_psn(0x003ab000, MLXD_HSB_IMM_12_20), 939);
    ck_assert_uint_eq(mlxd_hsb_imm_page(0xFFFFFFFF, MLXD_HSB_IMM_12_20), 4095);
    ck_assert_uint_eq(mlxd_hsb_imm_psn(0xFFFFFFFF, MLXD_HSB_IMM_12_20), 0xFFFFF);
    /* legacy: {psn[23:0], page[7:0]} */
    ck_assert_uint_eq(mlxd_hsb_imm_page(0x12345603, MLXD_HSB_IMM_LEGACY_8_24), 3);
    ck_assert_uint_eq(mlxd_hsb_imm_psn(0x12345603, MLXD_HSB_IMM_LEGACY_8_24), 0x123456);
    ck_assert_uint_eq(mlxd_hsb_imm_make(1, 46, MLXD_HSB_IMM_12_20), 0x0002e001);
    ck_assert_uint_eq(mlxd_hsb_imm_make(3, 0x123456, MLXD_HSB_IMM_LEGACY_8_24), 0x12345603);
    /* 20-bit compare ignores PSN bits 20..23; the legacy compare does not. */
    ck_assert(mlxd_hsb_psn_match(0x100000 | 46, 46, MLXD_HSB_IMM_12_20));
    ck_assert(!mlxd_hsb_psn_match(47, 46, MLXD_HSB_IMM_12_20));
    ck_assert(!mlxd_hsb_psn_match(0x100000 | 46, 46, MLXD_HSB_IMM_LEGACY_8_24));
}
END_TEST

START_TEST(frame_counter_wraps)
{
    struct mlxd_hsb_counter16 c = { 0 };
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&c, 0xFFFE), 65534);
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&c, 0xFFFF), 65535);
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&c, 0x0000), 65536);
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&c, 0x0003), 65539);   /* 2 frames lost */
    for (uint32_t i = 0; i < 3 * 65536; i++) mlxd_hsb_counter16_update(&c, (uint16_t)(4 + i));
    ck_assert_uint_eq(c.value, 65539 + 3 * 65536);
    /* serial-number arithmetic (RFC 1982): a step back (a stale block's number) is reported as
     * the older value and leaves the state alone, so the next numbers extend as before */
    struct mlxd_hsb_counter16 d = { 0 };
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&d, 12), 12);
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&d, 10), 10);
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&d, 13), 13);
    ck_assert_uint_eq(mlxd_hsb_counter16_peek(&d, 14), 14);
    ck_assert_uint_eq(d.value, 13);
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&d, 0x7FFF + 13), 0x7FFF + 13);  /* forward jump */
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&d, 14), 14);                  /* older: no move */
    ck_assert_uint_eq(mlxd_hsb_counter16_update(&d, 0x8000 + 13), 0x8000 + 13);
    ck_assert_uint_eq(mlxd_hsb_counter16_peek(&d, 5), 0x8000 + 13 + 32760);   /* 32760 ahead mod 2^16 */
}
END_TEST

START_TEST(geometry_helpers)
{
    ck_assert_uint_eq(mlxd_hsb_metadata_offset(3000), 3072);
    ck_assert_uint_eq(mlxd_hsb_metadata_offset(4096), 4096);
    ck_assert_uint_eq(mlxd_hsb_min_page_size(3000), 3200);
    ck_assert_uint_eq(mlxd_hsb_min_page_size(65536), 65664);
}
END_TEST

START_TEST(payload_pattern)
{
    uint8_t b[4 * 5 + 2];
    mlxd_hsb_payload_fill(b, sizeof b, 3);
    static const uint8_t want[] = { 3, 0, 0, 0, 3, 0, 0, 1, 3, 0, 0, 2, 3, 0, 0, 3, 3, 0, 0, 4, 3, 0 };
    ck_assert(memcmp(b, want, sizeof want) == 0);
    ck_assert_int_eq(mlxd_hsb_payload_check(b, sizeof b, 3), -1);
    ck_assert_int_eq(mlxd_hsb_payload_check(b, sizeof b, 259), -1);   /* tag is 8 bits */
    ck_assert_int_eq(mlxd_hsb_payload_check(b, sizeof b, 4), 0);
    b[13] ^= 1;
    ck_assert_int_eq(mlxd_hsb_payload_check(b, sizeof b, 3), 13);
    b[13] ^= 1;
    b[21] = 9;
    ck_assert_int_eq(mlxd_hsb_payload_check(b, sizeof b, 3), 21);
}
END_TEST

/* The vectorised fill (eight or two words per step below word 2^24) writes exactly the pattern's
 * words: every length 0..200 at every alignment, every tag, and across word 2^24, where the
 * index reaches the tag's byte and the word becomes tag | i (fixtures/roce-pcaps/README.md). */
static void want_word(uint8_t w[4], uint32_t frame, uint64_t i)
{
    uint32_t v = (frame & 0xFFu) << 24 | (uint32_t)i;
    w[0] = (uint8_t)(v >> 24); w[1] = (uint8_t)(v >> 16); w[2] = (uint8_t)(v >> 8); w[3] = (uint8_t)v;
}

START_TEST(payload_fill_every_length)
{
    static uint8_t buf[8 + 1000], want[1000];
    const uint32_t frames[] = { 0, 37, 255 };
    for (size_t fi = 0; fi < sizeof frames / sizeof frames[0]; fi++) {
        uint32_t frame = frames[fi];
        for (size_t k = 0; k < sizeof want; k++) {
            uint8_t w[4];
            want_word(w, frame, k / 4);
            want[k] = w[k % 4];
        }
        for (size_t off = 0; off < 8; off++)
            for (size_t len = 0; len <= 200; len++) {
                memset(buf, 0xA5, sizeof buf);
                mlxd_hsb_payload_fill(buf + off, len, frame);
                if (memcmp(buf + off, want, len))
                    ck_abort_msg("frame %u offset %zu len %zu: not the pattern", frame, off, len);
                for (size_t k = 0; k < sizeof buf; k++)
                    if ((k < off || k >= off + len) && buf[k] != 0xA5)
                        ck_abort_msg("frame %u offset %zu len %zu: byte %zu written", frame, off, len, k);
            }
    }
    /* 2^24 + 9 words: the fast part stops at word 2^24, where tag | i starts to differ from
     * tag + i */
    size_t len = ((size_t)1 << 26) + 36 + 3;
    uint8_t *big = malloc(len);
    ck_assert_ptr_nonnull(big);
    mlxd_hsb_payload_fill(big, len, 0xC3);
    for (uint64_t i = 0; i < len / 4; i += (i < 16 || i > ((uint64_t)1 << 24) - 16 ? 1 : 4093)) {
        uint8_t w[4];
        want_word(w, 0xC3, i);
        ck_assert_msg(!memcmp(big + 4 * i, w, 4), "word %llu", (unsigned long long)i);
    }
    uint8_t w[4];
    want_word(w, 0xC3, ((uint64_t)1 << 24) + 1);
    ck_assert_uint_eq(w[0], 0xC3);                       /* OR, not add: the tag stays */
    ck_assert(!memcmp(big + 4 * (((size_t)1 << 24) + 1), w, 4));
    ck_assert_int_eq(mlxd_hsb_payload_check(big, len, 0xC3), -1);
    free(big);
}
END_TEST

Suite *metadata_suite(void)
{
    Suite *s = suite_create("metadata");
    TCase *tc = tcase_create("hsb");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, decode_emulator_layout);
    tcase_add_test(tc, decode_rtl_layout);
    tcase_add_test(tc, decode_rejects_misuse);
    tcase_add_test(tc, encode_roundtrip);
    tcase_add_test(tc, immediate_layouts);
    tcase_add_test(tc, frame_counter_wraps);
    tcase_add_test(tc, geometry_helpers);
    tcase_add_test(tc, payload_pattern);
    tcase_add_test(tc, payload_fill_every_length);
    suite_add_tcase(s, tc);
    return s;
}
