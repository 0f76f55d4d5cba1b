/* config.c: which devices the emulator presents.
 *
 *   MLXD_EMU_DEVICES="mlx5_0:127.0.0.1,mlx5_1:127.0.0.2:mtu=4096:link=down:pcap=/tmp/a.pcap"
 *   MLXD_EMU_CONFIG=<file>   the same entries, one per line or comma separated, '#' comments
 *
 * Entry: <name>:<ipv4>[:<option>=<value>]...  Options: mtu (IB MTU bytes 256..4096, default
 * 1024 = what a 1500-byte Ethernet MTU gives), port (UDP port it listens on, 4791), dport (UDP
 * port it sends to, 4791), link (up|down), pcap (capture file path), guid (node GUID, hex),
 * gids (v1, v2 or v1v2: the RoCE versions port 1 has GIDs of, default v1v2), uars_per_page
 * (GET_CONTEXT num_uars_per_page, default 1; 0 models the kernel error case, docs/emulator.md),
 * link_layer (eth, default, or ib: an InfiniBand port, LID addressed), sf (1: a sub-function,
 * bound to mlx5_core.sf on the auxiliary bus).
 * Default (nothing set): mlx5_0 on 127.0.0.1 and mlx5_1 on 127.0.0.2.
 * The uverbs index N of a device is its position in the list. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel.h"

/* GID table of port 1, the way mlx5 on a RoCE netdev fills it (k: core/roce_gid_mgmt.c adds one
 * entry per RoCE version the port supports -- IB_PORT_ROCE and IB_PORT_ROCE_UDP_ENCAP, which
 * mlx5_ib derives from the device's roce_version capability -- for the link-local address and
 * for each IP address), RoCE v1 before v2:
 *   both (default)   0 fe80::<EUI-64> v1   1 same v2   2 ::ffff:<ipv4> v1   3 same v2
 *   gids=v1 or v2    0 fe80::<EUI-64>      1 ::ffff:<ipv4>     (of that version only)
 * The emulated MAC is 02:00:<ipv4 bytes> (locally administered). */
static void fill_gids(struct emu_device_cfg *c)
{
    const uint8_t *ip = (const uint8_t *)&c->ipv4.s_addr;
    uint8_t mac[6] = { 0x02, 0x00, ip[0], ip[1], ip[2], ip[3] };
    memset(c->gids, 0, sizeof c->gids);
    if (!c->ethernet) {
        /* an InfiniBand port: GID 0 is the default subnet prefix fe80:: and the port GUID (IB
         * spec 4.1.1; the node GUID here), type IB */
        uint8_t *g = c->gids[0].raw;
        g[0] = 0xfe; g[1] = 0x80;
        for (int i = 0; i < 8; i++) g[8 + i] = (uint8_t)(c->node_guid >> (56 - 8 * i));
        c->gids[0].type = 0;
        c->gids[0].valid = true;
        c->ngids = 1;
        return;
    }
    unsigned types[2], nt = 0;
    if (c->gid_types & 1) types[nt++] = 1;
    if (c->gid_types & 2) types[nt++] = 2;
    for (unsigned v = 0; v < nt; v++) {
        uint8_t *g = c->gids[v].raw;
        g[0] = 0xfe; g[1] = 0x80;
        g[8] = mac[0] ^ 0x02; g[9] = mac[1]; g[10] = mac[2]; g[11] = 0xff; g[12] = 0xfe;
        g[13] = mac[3]; g[14] = mac[4]; g[15] = mac[5];
        c->gids[v].type = types[v];
        c->gids[v].valid = true;
        uint8_t *h = c->gids[nt + v].raw;
        h[10] = 0xff; h[11] = 0xff;
        memcpy(h + 12, ip, 4);
        c->gids[nt + v].type = types[v];
        c->gids[nt + v].valid = true;
    }
    c->ngids = 2 * nt;
}

static void cfg_init(struct emu_device_cfg *c, unsigned index)
{
    memset(c, 0, sizeof *c);
    c->index = index;
    c->udp_port = 4791;
    c->dst_udp_port = 4791;
    c->mtu = 1024;
    c->link_up = true;
    c->ethernet = true;
    c->gid_types = 3;
    c->uars_per_page = 1;
}

static void cfg_finish(struct emu_device_cfg *c)
{
    if (!c->node_guid) {
        /* Mellanox OUI 00:02:c9 style GUID, unique per address: 0002:c903:00<ip2>:<ip3><idx> */
        const uint8_t *ip = (const uint8_t *)&c->ipv4.s_addr;
        c->node_guid = 0x0002c90300000000ull | ((uint64_t)ip[1] << 24) | ((uint64_t)ip[2] << 16) |
                       ((uint64_t)ip[3] << 8) | (c->index & 0xff);
    }
    fill_gids(c);
}

void emu_config_defaults(struct emu_device_cfg *out, unsigned *n)
{
    static const char *names[2] = { "mlx5_0", "mlx5_1" };
    static const char *ips[2] = { "127.0.0.1", "127.0.0.2" };
    for (unsigned i = 0; i < 2; i++) {
        cfg_init(&out[i], i);
        snprintf(out[i].name, sizeof out[i].name, "%s", names[i]);
        inet_pton(AF_INET, ips[i], &out[i].ipv4);
        cfg_finish(&out[i]);
    }
    *n = 2;
}

/* One option=value of a device entry (name: the device's, for messages).  Returns 0, or -EINVAL
 * with the reason in err. */
static int parse_option(struct emu_device_cfg *c, const char *name, const char *opt, const char *v,
                        char *err, size_t errlen)
{
    char *end;
    if (!strcmp(opt, "mtu")) {
        unsigned long m = strtoul(v, &end, 10);
        if (*end || (m != 256 && m != 512 && m != 1024 && m != 2048 && m != 4096)) {
            snprintf(err, errlen, "%s: mtu must be 256, 512, 1024, 2048 or 4096", name);
            return -EINVAL;
        }
        c->mtu = (unsigned)m;
    } else if (!strcmp(opt, "port") || !strcmp(opt, "dport")) {
        unsigned long p = strtoul(v, &end, 10);
        if (*end || !p || p > 65535) {
            snprintf(err, errlen, "%s: bad UDP port '%s'", name, v);
            return -EINVAL;
        }
        if (opt[0] == 'p') c->udp_port = (uint16_t)p; else c->dst_udp_port = (uint16_t)p;
    } else if (!strcmp(opt, "link")) {
        if (!strcmp(v, "up")) c->link_up = true;
        else if (!strcmp(v, "down")) c->link_up = false;
        else { snprintf(err, errlen, "%s: link must be up or down", name); return -EINVAL; }
    } else if (!strcmp(opt, "pcap")) {
        if (strlen(v) >= sizeof c->pcap_path) {
            snprintf(err, errlen, "%s: pcap path too long", name);
            return -EINVAL;
        }
        snprintf(c->pcap_path, sizeof c->pcap_path, "%s", v);
    } else if (!strcmp(opt, "gids")) {
        if (!strcmp(v, "v1")) c->gid_types = 1;
        else if (!strcmp(v, "v2")) c->gid_types = 2;
        else if (!strcmp(v, "v1v2")) c->gid_types = 3;
        else { snprintf(err, errlen, "%s: gids must be v1, v2 or v1v2", name); return -EINVAL; }
    } else if (!strcmp(opt, "uars_per_page")) {
        unsigned long u = strtoul(v, &end, 10);
        if (!*v || *end || u > 256) {
            snprintf(err, errlen, "%s: uars_per_page must be 0..256", name);
            return -EINVAL;
        }
        c->uars_per_page = (unsigned)u;
    } else if (!strcmp(opt, "link_layer")) {
        if (!strcmp(v, "eth")) c->ethernet = true;
        else if (!strcmp(v, "ib")) c->ethernet = false;
        else { snprintf(err, errlen, "%s: link_layer must be eth or ib", name); return -EINVAL; }
    } else if (!strcmp(opt, "sf")) {
        if (strcmp(v, "0") && strcmp(v, "1")) { snprintf(err, errlen, "%s: sf must be 0 or 1", name); return -EINVAL; }
        c->sf = v[0] == '1';
    } else if (!strcmp(opt, "guid")) {
        c->node_guid = strtoull(v, &end, 16);
        if (*end || !c->node_guid) { snprintf(err, errlen, "%s: bad guid", name); return -EINVAL; }
    } else {
        snprintf(err, errlen, "%s: unknown option '%s'", name, opt);
        return -EINVAL;
    }
    return 0;
}

static int parse_entry(char *ent, struct emu_device_cfg *c, unsigned index, char *err, size_t errlen)
{
    cfg_init(c, index);
    char *save = NULL;
    char *name = strtok_r(ent, ":", &save);
    char *ip = strtok_r(NULL, ":", &save);
    if (!name || !*name || strlen(name) >= sizeof c->name) {
        snprintf(err, errlen, "entry %u: missing or too long device name", index);
        return -EINVAL;
    }
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-')) {
            snprintf(err, errlen, "entry %u: bad character in device name '%s'", index, name);
            return -EINVAL;
        }
    snprintf(c->name, sizeof c->name, "%s", name);
    if (!ip || inet_pton(AF_INET, ip, &c->ipv4) != 1) {
        snprintf(err, errlen, "%s: missing or bad IPv4 address", name);
        return -EINVAL;
    }
    char *opt;
    while ((opt = strtok_r(NULL, ":", &save))) {
        char *eq = strchr(opt, '=');
        if (!eq) { snprintf(err, errlen, "%s: option '%s' lacks '='", name, opt); return -EINVAL; }
        *eq = 0;
        int rc = parse_option(c, name, opt, eq + 1, err, errlen);
        if (rc < 0) return rc;
    }
    cfg_finish(c);
    return 0;
}

int emu_config_parse(const char *spec, struct emu_device_cfg *out, unsigned *n, char *err, size_t errlen)
{
    size_t len = strlen(spec);
    char *copy = malloc(len + 1);
    if (!copy) return -ENOMEM;
    /* strip comments, turn newlines into separators */
    size_t j = 0;
    bool comment = false;
    for (size_t i = 0; i < len; i++) {
        char ch = spec[i];
        if (ch == '#') comment = true;
        if (ch == '\n') { comment = false; ch = ','; }
        if (comment || ch == ' ' || ch == '\t' || ch == '\r') continue;
        copy[j++] = ch;
    }
    copy[j] = 0;
    unsigned cnt = 0;
    int rc = 0;
    char *save = NULL;
    for (char *ent = strtok_r(copy, ",", &save); ent; ent = strtok_r(NULL, ",", &save)) {
        if (!*ent) continue;
        if (cnt >= EMU_MAX_DEVICES) {
            snprintf(err, errlen, "more than %d devices", EMU_MAX_DEVICES);
            rc = -EINVAL;
            break;
        }
        char *dup = strdup(ent);
        if (!dup) { rc = -ENOMEM; break; }
        rc = parse_entry(dup, &out[cnt], cnt, err, errlen);
        free(dup);
        if (rc) break;
        for (unsigned k = 0; k < cnt; k++)
            if (!strcmp(out[k].name, out[cnt].name)) {
                snprintf(err, errlen, "device name %s given twice", out[cnt].name);
                rc = -EINVAL;
            }
        if (rc) break;
        cnt++;
    }
    free(copy);
    if (!rc && !cnt) { snprintf(err, errlen, "no device given"); rc = -EINVAL; }
    if (!rc) *n = cnt;
    return rc;
}

void emu_config_canonical(const struct emu_device_cfg *c, unsigned n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < n && o < len; i++) {
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &c[i].ipv4, ip, sizeof ip);
        static const char *gt[4] = { "", "v1", "v2", "v1v2" };
        o += snprintf(buf + o, len - o, "%s%s:%s:mtu=%u:port=%u:dport=%u:link=%s:guid=%llx%s%s",
                      i ? "," : "", c[i].name, ip, c[i].mtu, c[i].udp_port, c[i].dst_udp_port,
                      c[i].link_up ? "up" : "down", (unsigned long long)c[i].node_guid,
                      c[i].pcap_path[0] ? ":pcap=" : "", c[i].pcap_path);
        if (o < len && (c[i].gid_types != 3 || c[i].uars_per_page != 1))
            o += snprintf(buf + o, len - o, ":gids=%s:uars_per_page=%u", gt[c[i].gid_types & 3],
                          c[i].uars_per_page);
        if (o < len && (!c[i].ethernet || c[i].sf))
            o += snprintf(buf + o, len - o, ":link_layer=%s:sf=%d", c[i].ethernet ? "eth" : "ib", c[i].sf);
    }
}

static struct emu_qp *lookup_qp(struct emu_device *dev, uint32_t qpn)
{
    struct emu_devstate *ds = (struct emu_devstate *)dev;
    if (!ds->qp_tab) return NULL;
    struct k_qp *q = ds->qp_tab[qpn & (EMU_QP_SLOTS - 1)];
    return q && q->pub.qpn == (qpn & 0xffffff) ? &q->pub : NULL;
}

static struct emu_mr *lookup_mr(struct emu_device *dev, uint32_t key)
{
    struct emu_devstate *ds = (struct emu_devstate *)dev;
    if (!ds->mr_tab) return NULL;
    struct k_mr *m = ds->mr_tab[(key >> 8) & (EMU_MR_SLOTS - 1)];
    return m && (m->pub.lkey == key || m->pub.rkey == key) ? &m->pub : NULL;
}

static struct emu_mr *lookup_mkey(struct emu_device *dev, uint32_t key)
{
    struct emu_devstate *ds = (struct emu_devstate *)dev;
    if (!ds->mr_tab) return NULL;
    struct k_mr *m = ds->mr_tab[(key >> 8) & (EMU_MR_SLOTS - 1)];
    return m ? &m->pub : NULL;
}

/* Installs a configuration.  Refused (-EBUSY) while any emulated file is open. */
int emu_config_apply(const struct emu_device_cfg *c, unsigned n)
{
    if (emu_g.nfiles) return -EBUSY;
    for (unsigned i = 0; i < emu_g.ndev; i++) {
        struct emu_devstate *ds = &emu_g.devs[i];
        free(ds->qp_tab);
        free(ds->mr_tab);
        pthread_mutex_destroy(&ds->dev.lock);
    }
    memset(emu_g.devs, 0, sizeof emu_g.devs);
    for (unsigned i = 0; i < n; i++) {
        struct emu_devstate *ds = &emu_g.devs[i];
        ds->dev.cfg = c[i];
        ds->dev.cfg.index = i;
        pthread_mutex_init(&ds->dev.lock, NULL);
        ds->dev.qp_by_qpn = lookup_qp;
        ds->dev.mr_by_key = lookup_mr;
        ds->dev.mkey_by_index = lookup_mkey;
        ds->qp_cursor = 2;
        ds->mr_cursor = 2;
        ds->next_cqn = 0x400;
        ds->next_pdn = 0x10;
        ds->next_uar_page = 0x100;
    }
    emu_g.ndev = n;
    emu_g.cfg_gen++;
    emu_config_canonical(c, n, emu_g.cfg_string, sizeof emu_g.cfg_string);
    return emu_sysfs_build();
}
