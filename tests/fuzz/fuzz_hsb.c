/* libFuzzer target: the HSB metadata decoder and payload checker (receiver/mlxd_hsb.h).
 * Oracle: no crash or sanitizer report; decode refuses exactly the blocks shorter than 48 bytes;
 * decoded fields fit their wire widths; encode(decode(x)) reproduces the 48 used bytes of x except
 * the 16-bit frame counter's upper neighbour (the encoder writes the 32-bit word at 32, as
 * documented); the payload checker reports the first mismatch against the generator's fill. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "mlxd_hsb.h"
#include "seeds.h"

/* seeds: the metadata blocks and the first payload bytes of the frames in fixtures/roce-pcaps */
static void emit(const struct mlxd_capture *c, const char *dir, unsigned *n)
{
    for (size_t i = 0; i < c->npackets && i < 64; i++) {
        const struct mlxd_roce_pkt *h = &c->pkts[i].hdr;
        if (h->payload_len >= MLXD_HSB_METADATA_SIZE && (h->opcode & 0x1f) == MLXD_ROCE_OP_WRITE_ONLY_IMM)
            seed_write(dir, (*n)++, h->payload + h->payload_len - MLXD_HSB_METADATA_SIZE,
                       MLXD_HSB_METADATA_SIZE);
        else if (h->payload_len)
            seed_write(dir, (*n)++, h->payload, h->payload_len < 512 ? h->payload_len : 512);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    seeds_from_pcaps(emit);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    struct mlxd_hsb_metadata md, md2;
    memset(&md, 0, sizeof md);   /* padding compares equal below */
    memset(&md2, 0, sizeof md2);
    int rc = mlxd_hsb_metadata_decode(buf, size, &md);
    if ((rc == 0) != (size >= MLXD_HSB_METADATA_USED)) abort();
    if (rc == 0) {
        if ((uint16_t)md.frame_number32 != md.frame_number) abort();
        uint8_t blk[MLXD_HSB_METADATA_SIZE];
        if (mlxd_hsb_metadata_encode(&md, blk, sizeof blk)) abort();
        if (memcmp(blk, buf, MLXD_HSB_METADATA_USED)) abort();
        for (size_t i = MLXD_HSB_METADATA_USED; i < sizeof blk; i++)
            if (blk[i]) abort();
        if (mlxd_hsb_metadata_decode(blk, sizeof blk, &md2) || memcmp(&md, &md2, sizeof md)) abort();
    } else if (rc != -EINVAL) {
        abort();
    }
    /* payload pattern: the fuzzer's bytes against frame tag buf[0] */
    uint32_t frame = size ? buf[0] : 0;
    long off = mlxd_hsb_payload_check(buf, size, frame);
    uint8_t *ref = malloc(size ? size : 1);
    if (!ref) abort();
    mlxd_hsb_payload_fill(ref, size, frame);
    long want = -1;
    for (size_t i = 0; i < size; i++)
        if (ref[i] != buf[i]) { want = (long)i; break; }
    if (off != want) abort();
    if (mlxd_hsb_payload_check(ref, size, frame) != -1) abort();
    /* immediate split and rebuild, both layouts */
    if (size >= 4) {
        uint32_t imm;
        memcpy(&imm, buf, 4);
        for (int l = 0; l < 2; l++) {
            uint32_t pg = mlxd_hsb_imm_page(imm, l), psn = mlxd_hsb_imm_psn(imm, l);
            if (mlxd_hsb_imm_make(pg, psn, l) != imm) abort();
        }
    }
    free(ref);
    free(buf);
    return 0;
}
