/* ioctl_bundle.h: the attribute bundle of one RDMA_VERBS_IOCTL call (private to uverbs_ioctl.c). */
#ifndef MLXD_EMU_IOCTL_H
#define MLXD_EMU_IOCTL_H
#include <stdbool.h>
#include <stdint.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include "kernel.h"

#define MAX_BATTRS 20

struct battr {
    bool present, has_new;
    uint16_t len;
    unsigned uidx;          /* index in the caller's attr array */
    uint64_t data;          /* the caller's attr.data (pointer or inline bytes) */
    uint8_t *buf;           /* PTR_IN: the bytes (inline or copied from the pointer) */
    void *obj;              /* IDR/FD: the object looked up */
    uint64_t new_value;     /* ACCESS_NEW: handle/fd to write back */
};

struct mspec;
struct bundle {
    struct emu_file *f;
    const struct mspec *m;
    uint64_t uattrs;        /* user address of attrs[0] */
    struct ib_uverbs_attr *ua;
    unsigned n;
    struct battr at[MAX_BATTRS];   /* indexed like the method's spec */
};

#endif
