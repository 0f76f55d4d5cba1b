/* fake_qp.h: a QP made by hand for the poll-loop suites that fill rings themselves
 * (tests/test_poll.c, tests/test_cqe_mini.c): receive and send wr_id tables of 8, a QPN and a
 * user index, entered in a QP table that a test sets as the CQ's (cq->qp_table), as a NIC's CQ
 * finds its QPs by the CQE's user index (cqe_version 1). */
#ifndef MLXD_TEST_FAKE_QP_H
#define MLXD_TEST_FAKE_QP_H
#include <stdint.h>
#include <string.h>
#include "driver.h"

struct fq {
    struct mlxd_qp qp;
    uint64_t rwrid[8], swrid[8];
    uint64_t snext[8];   /* entries << 32 | WQEBBs after the WQE at each index */
};

static struct mlxd_qp *table[MLXD_MAX_QPS];

/* wr_ids: receives base + i, sends base + 100 + i; sq_next[i] = (50 + i) << 32 | (1000 + i). */
static inline void fq_init(struct fq *f, uint32_t qpn, uint32_t uidx, uint64_t base)
{
    memset(f, 0, sizeof *f);
    f->qp.qpn = qpn;
    f->qp.uidx = uidx;
    f->qp.state = OBJ_LIVE;
    f->qp.rq_wqe_cnt = 8;
    f->qp.rq_wrid = f->rwrid;
    f->qp.sq_wqebbs = 8;
    f->qp.sq_wrid = f->swrid;
    f->qp.sq_next = f->snext;
    for (int i = 0; i < 8; i++) {
        f->rwrid[i] = base + i;
        f->swrid[i] = base + 100 + i;
        f->snext[i] = (uint64_t)(50 + i) << 32 | (1000u + (uint32_t)i);
    }
    table[uidx] = &f->qp;
}
#endif
