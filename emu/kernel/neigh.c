/* neigh.c: address resolution at RTR (kernel drivers/infiniband/core/verbs.c ib_resolve_eth_dmac
 * -> core/addr.c rdma_addr_find_l2_eth_by_grh).  On RoCE, a MODIFY_QP that sets the address
 * vector resolves the destination GID's MAC address: a link-local GID carries it, an IPv4-mapped
 * one goes through the neighbour table (ARP), and the kernel waits up to 1000 ms for an answer,
 * then fails the MODIFY_QP with ETIMEDOUT.  The emulator answers for:
 *   - addresses in 127/8 (this host's loopback, where the emulated ports live), unless a test
 *     made one silent;
 *   - the host's own addresses (getifaddrs) and complete entries of the host's ARP table
 *     (/proc/net/arp, flag ATF_COM 0x2);
 *   - addresses mlxd_emu_neigh_set() says answer.
 * Anything else is silent: the MODIFY_QP waits the kernel's 1 s and fails with ETIMEDOUT.  A
 * peer that starts answering during the wait (mlxd_emu_neigh_set from another thread) ends it
 * at once, as a late ARP reply does. */
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include "kernel.h"
#include "mlxd_emu.h"

#define NEIGH_MAX 32
#define RESOLVE_TIMEOUT_MS 1000       /* rdma_addr_find_l2_eth_by_grh: rdma_resolve_ip(..., 1000) */

static pthread_mutex_t neigh_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint32_t ip; int answers; } neigh[NEIGH_MAX];   /* host order; overrides */
static unsigned nneigh;

static int override_of(uint32_t ip)
{
    int r = -1;
    pthread_mutex_lock(&neigh_lock);
    for (unsigned i = 0; i < nneigh; i++)
        if (neigh[i].ip == ip) r = neigh[i].answers;
    pthread_mutex_unlock(&neigh_lock);
    return r;
}

static bool host_has(uint32_t ip)
{
    struct ifaddrs *ifs = NULL, *i;
    bool found = false;
    if (getifaddrs(&ifs) == 0) {
        for (i = ifs; i && !found; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) == ip)
                found = true;
        freeifaddrs(ifs);
    }
    if (found) return true;
    FILE *f = fopen("/proc/net/arp", "re");
    if (!f) return false;
    char line[256];
    while (!found && fgets(line, sizeof line, f)) {
        char addr[64];
        unsigned hw, flags;
        struct in_addr a;
        if (sscanf(line, "%63s 0x%x 0x%x", addr, &hw, &flags) == 3 && inet_pton(AF_INET, addr, &a) == 1 &&
            ntohl(a.s_addr) == ip && (flags & 0x2))
            found = true;
    }
    fclose(f);
    return found;
}

static bool answers(uint32_t ip)
{
    int o = override_of(ip);
    if (o >= 0) return o;
    return (ip >> 24) == 127 || host_has(ip);
}

int emu_resolve_dgid(const uint8_t dgid[16])
{
    static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (memcmp(dgid, mapped, 12)) return 0;      /* link-local / IPv6 GIDs: not modelled */
    uint32_t ip = (uint32_t)dgid[12] << 24 | (uint32_t)dgid[13] << 16 | (uint32_t)dgid[14] << 8 | dgid[15];
    for (int waited = 0; waited < RESOLVE_TIMEOUT_MS; waited += 10) {
        if (answers(ip)) return 0;
        struct timespec ts = { 0, 10 * 1000000 };
        nanosleep(&ts, NULL);
    }
    return answers(ip) ? 0 : -ETIMEDOUT;
}

EMU_API int mlxd_emu_neigh_set(const char *ipv4, int answers_)
{
    struct in_addr a;
    if (!ipv4 || inet_pton(AF_INET, ipv4, &a) != 1 || answers_ < -1 || answers_ > 1) return -EINVAL;
    uint32_t ip = ntohl(a.s_addr);
    int rc = 0;
    pthread_mutex_lock(&neigh_lock);
    unsigned i = 0;
    while (i < nneigh && neigh[i].ip != ip) i++;
    if (answers_ < 0) {
        if (i < nneigh) neigh[i] = neigh[--nneigh];
    } else if (i < nneigh) {
        neigh[i].answers = answers_;
    } else if (nneigh < NEIGH_MAX) {
        neigh[nneigh].ip = ip;
        neigh[nneigh++].answers = answers_;
    } else {
        rc = -ENOSPC;
    }
    pthread_mutex_unlock(&neigh_lock);
    return rc;
}
