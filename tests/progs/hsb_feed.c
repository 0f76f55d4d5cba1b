/* hsb_feed: plays the part of the sensor bridge for a receiver in another process: replays a
 * capture (fixtures/roce-pcaps) to the QP, rkey and address that receiver printed, as
 * programming a sensor bridge's DP_QP, DP_RKEY and DP_PAGE registers does.
 *
 *   hsb_feed FILE.pcap DST_IP QPN RKEY ADDRESS [FRAME_GAP_US]
 * The page size and page count are the capture's.  Packets leave from 127.0.0.1 (the peer the
 * receiver connected to).  Exit 0 when every packet was sent. */
#include <stdio.h>
#include <stdlib.h>

#include "mlxd_capture.h"
#include "mlxd_error.h"

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: hsb_feed FILE.pcap DST_IP QPN RKEY ADDRESS [FRAME_GAP_US]\n");
        return 2;
    }
    struct mlxd_capture *c;
    if (mlxd_capture_load(argv[1], &c) < 0) {
        fprintf(stderr, "hsb_feed: %s\n", mlxd_errmsg());
        return 1;
    }
    struct mlxd_replay_map m = { .qpn = (uint32_t)strtoul(argv[3], NULL, 0),
                                 .rkey = (uint32_t)strtoul(argv[4], NULL, 0),
                                 .base_va = strtoull(argv[5], NULL, 0),
                                 .page_size = c->geo.page_size, .pages = c->geo.pages };
    struct mlxd_send_opts so = { .sz = sizeof so, .dst_ip = argv[2], .src_ip = "127.0.0.1",
                                 .frame_gap_us = argc == 7 ? (unsigned)strtoul(argv[6], NULL, 0) : 10000 };
    struct mlxd_send_stats st;
    int rc = mlxd_capture_replay(c, &m, &so, &st);
    if (rc < 0)
        fprintf(stderr, "hsb_feed: %s\n", mlxd_errmsg());
    else
        printf("sent %llu packets, %llu frames, %llu send errors\n", (unsigned long long)st.packets,
               (unsigned long long)st.frames, (unsigned long long)st.send_errors);
    int ok = rc == 0 && st.packets == c->npackets && st.send_errors == 0;
    mlxd_capture_free(c);
    return ok ? 0 : 1;
}
