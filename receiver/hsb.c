/* hsb.c: the HSB frame format (see mlxd_hsb.h). */
#include <errno.h>
#include <string.h>

#include "mlxd_error.h"
#include "mlxd_hsb.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, v >> 32);
    put32(p + 4, (uint32_t)v);
}

int mlxd_hsb_metadata_decode(const void *block, size_t len, struct mlxd_hsb_metadata *out)
{
    if (!block || !out)
        return mlxd_err(EINVAL, "mlxd_hsb_metadata_decode: NULL %s", block ? "out" : "block");
    if (len < MLXD_HSB_METADATA_USED)
        return mlxd_err(EINVAL, "mlxd_hsb_metadata_decode: len %zu is below the %u bytes of fields",
                        len, MLXD_HSB_METADATA_USED);
    const uint8_t *b = block;
    out->flags = be32(b + MLXD_HSB_MD_FLAGS);
    out->psn = be32(b + MLXD_HSB_MD_PSN);
    out->crc = be32(b + MLXD_HSB_MD_CRC);
    out->timestamp_s = be64(b + MLXD_HSB_MD_TIMESTAMP_S);
    out->timestamp_ns = be32(b + MLXD_HSB_MD_TIMESTAMP_NS);
    out->bytes_written = be64(b + MLXD_HSB_MD_BYTES_WRITTEN);
    out->frame_number32 = be32(b + MLXD_HSB_MD_FRAME_NUMBER32);
    out->frame_number = (uint16_t)(b[MLXD_HSB_MD_FRAME_NUMBER] << 8 | b[MLXD_HSB_MD_FRAME_NUMBER + 1]);
    out->metadata_s = be64(b + MLXD_HSB_MD_METADATA_S);
    out->metadata_ns = be32(b + MLXD_HSB_MD_METADATA_NS);
    return 0;
}

int mlxd_hsb_metadata_encode(const struct mlxd_hsb_metadata *md, void *block, size_t len)
{
    if (!md || !block)
        return mlxd_err(EINVAL, "mlxd_hsb_metadata_encode: NULL %s", md ? "block" : "md");
    if (len < MLXD_HSB_METADATA_SIZE)
        return mlxd_err(EINVAL, "mlxd_hsb_metadata_encode: len %zu is below %u", len,
                        MLXD_HSB_METADATA_SIZE);
    uint8_t *b = block;
    memset(b, 0, MLXD_HSB_METADATA_SIZE);
    put32(b + MLXD_HSB_MD_FLAGS, md->flags);
    put32(b + MLXD_HSB_MD_PSN, md->psn);
    put32(b + MLXD_HSB_MD_CRC, md->crc);
    put64(b + MLXD_HSB_MD_TIMESTAMP_S, md->timestamp_s);
    put32(b + MLXD_HSB_MD_TIMESTAMP_NS, md->timestamp_ns);
    put64(b + MLXD_HSB_MD_BYTES_WRITTEN, md->bytes_written);
    put32(b + MLXD_HSB_MD_FRAME_NUMBER32, md->frame_number32);
    put64(b + MLXD_HSB_MD_METADATA_S, md->metadata_s);
    put32(b + MLXD_HSB_MD_METADATA_NS, md->metadata_ns);
    return 0;
}

long mlxd_hsb_payload_check(const void *data, size_t len, uint32_t frame)
{
    const uint8_t *p = data;
    uint32_t tag = (frame & 0xFFu) << 24;
    size_t words = len / 4;
    for (size_t i = 0; i < words; i++) {
        uint32_t want = tag | (uint32_t)i;
        if (be32(p + 4 * i) != want) {
            for (unsigned k = 0; k < 4; k++)
                if (p[4 * i + k] != (uint8_t)(want >> (24 - 8 * k)))
                    return (long)(4 * i + k);
        }
    }
    uint32_t last = tag | (uint32_t)words;
    for (size_t k = 0; k < len % 4; k++)
        if (p[4 * words + k] != (uint8_t)(last >> (24 - 8 * k)))
            return (long)(4 * words + k);
    return -1;
}

/* The fill is on the generator's path for every byte it sends (issue 18: 15 % of the e2e
 * benchmark's CPU time when written a word at a time).  Below word 2^24 the word is tag + i (the
 * index does not reach the tag's byte), so a vector of consecutive words steps by a constant:
 * eight words per AVX2 add and byte shuffle, or two per 64-bit add and byte swap.  Returns the
 * words written: a multiple of the step, at most `words` and 2^24. */
#define FILL_FAST_WORDS (1u << 24)
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2")))
static size_t fill_avx2(uint8_t *p, size_t words, uint32_t tag)
{
    const __m256i swap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
                                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
    __m256i v = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)tag));
    const __m256i step = _mm256_set1_epi32(8);
    size_t n = (words < FILL_FAST_WORDS ? words : FILL_FAST_WORDS) & ~(size_t)7;
    for (size_t i = 0; i < n; i += 8) {
        _mm256_storeu_si256((__m256i *)(void *)(p + 4 * i), _mm256_shuffle_epi8(v, swap));
        v = _mm256_add_epi32(v, step);
    }
    return n;
}
#endif

static size_t fill_fast(uint8_t *p, size_t words, uint32_t tag)
{
#if defined(__x86_64__)
    static int avx2 = -1;
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2");
    if (avx2)
        return fill_avx2(p, words, tag);
#endif
    size_t n = (words < FILL_FAST_WORDS ? words : FILL_FAST_WORDS) & ~(size_t)1;
    uint64_t v = (uint64_t)tag << 32 | (tag + 1u);      /* words i, i + 1 as one big-endian pair */
    for (size_t i = 0; i < n; i += 2) {
        uint64_t be = __builtin_bswap64(v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        be = v;
#endif
        memcpy(p + 4 * i, &be, 8);
        v += 0x0000000200000002ull;
    }
    return n;
}

void mlxd_hsb_payload_fill(void *data, size_t len, uint32_t frame)
{
    uint8_t *p = data;
    uint32_t tag = (frame & 0xFFu) << 24;
    size_t words = len / 4;
    for (size_t i = fill_fast(p, words, tag); i < words; i++)
        put32(p + 4 * i, tag | (uint32_t)i);
    uint8_t tail[4];
    put32(tail, tag | (uint32_t)words);
    memcpy(p + 4 * words, tail, len % 4);
}
