/* pcap_writer.c: records a device's wire (egress as sent, ingress as received) in a pcap file
 * with link type Ethernet (DLT_EN10MB, zero MAC addresses, EtherType IPv4), which is how the
 * shared RoCE captures look and what Wireshark/tshark dissect as RoCE v2 (UDP port 4791).
 *
 * The classic pcap format is written directly (global header: magic 0xa1b2c3d4, version 2.4,
 * snaplen 65535, link type 1; one 16-byte record header per frame: seconds, microseconds,
 * captured and original length, host byte order as the magic tells readers), not through
 * libpcap: linking libpcap pulls libdbus -> libsystemd -> libgcrypt -> libgpg-error into every
 * program the emulator is preloaded into, and libgpg-error's start-up under a preloaded ASan
 * runtime leaves glibc's gettext lock broken (docs/emulator.md, "Sanitizer builds"). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include "nic.h"

int pcap_writer_open(struct nic_dev *nd, const char *path)
{
    FILE *f = fopen(path, "wbe");
    if (!f) return -EIO;
    const uint32_t hdr[6] = { 0xa1b2c3d4u, 2u | (4u << 16), 0, 0, 65535, 1 /* DLT_EN10MB */ };
    if (fwrite(hdr, sizeof hdr, 1, f) != 1) { fclose(f); return -EIO; }
    nd->pcap = f;
    nd->pcap_dumper = f;
    return 0;
}

void pcap_writer_packet(struct nic_dev *nd, const uint8_t *ip, uint32_t len)
{
    FILE *f = nd->pcap_dumper;
    if (!f) return;
    uint8_t eth[14];
    if (len > NIC_PKT_MAX) len = NIC_PKT_MAX;
    memset(eth, 0, 12);
    eth[12] = 0x08; eth[13] = 0x00;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    const uint32_t rec[4] = { (uint32_t)tv.tv_sec, (uint32_t)tv.tv_usec, len + 14, len + 14 };
    fwrite(rec, sizeof rec, 1, f);
    fwrite(eth, sizeof eth, 1, f);
    fwrite(ip, len, 1, f);
}

void pcap_writer_flush(struct nic_dev *nd)
{
    if (nd->pcap_dumper) fflush(nd->pcap_dumper);
}

void pcap_writer_close(struct nic_dev *nd)
{
    if (nd->pcap_dumper) fclose(nd->pcap_dumper);
    nd->pcap_dumper = NULL;
    nd->pcap = NULL;
}
