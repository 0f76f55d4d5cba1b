/* pcap_writer.c: records a device's wire (egress as sent, ingress as received) in a pcap file
 * with link type Ethernet (DLT_EN10MB, zero MAC addresses, EtherType IPv4), which is how the
 * shared RoCE captures look and what Wireshark/tshark dissect as RoCE v2 (UDP port 4791). */
#include <errno.h>
#include <pcap/pcap.h>
#include <string.h>
#include <sys/time.h>
#include "nic.h"

int pcap_writer_open(struct nic_dev *nd, const char *path)
{
    pcap_t *p = pcap_open_dead(DLT_EN10MB, 65535);
    if (!p) return -ENOMEM;
    pcap_dumper_t *d = pcap_dump_open(p, path);
    if (!d) { pcap_close(p); return -EIO; }
    nd->pcap = p;
    nd->pcap_dumper = d;
    return 0;
}

void pcap_writer_packet(struct nic_dev *nd, const uint8_t *ip, uint32_t len)
{
    if (!nd->pcap_dumper) return;
    uint8_t frame[14 + NIC_PKT_MAX];
    if (len > NIC_PKT_MAX) len = NIC_PKT_MAX;
    memset(frame, 0, 12);
    frame[12] = 0x08; frame[13] = 0x00;
    memcpy(frame + 14, ip, len);
    struct pcap_pkthdr h;
    gettimeofday(&h.ts, NULL);
    h.caplen = h.len = len + 14;
    pcap_dump(nd->pcap_dumper, &h, frame);
}

void pcap_writer_flush(struct nic_dev *nd)
{
    if (nd->pcap_dumper) pcap_dump_flush(nd->pcap_dumper);
}

void pcap_writer_close(struct nic_dev *nd)
{
    if (nd->pcap_dumper) pcap_dump_close(nd->pcap_dumper);
    if (nd->pcap) pcap_close(nd->pcap);
    nd->pcap_dumper = NULL;
    nd->pcap = NULL;
}
