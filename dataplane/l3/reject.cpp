#include "dataplane/l3/reject.h"

#include <algorithm>
#include <cstring>

#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_tcp.h>

#include "dataplane/base/checksum.h"
#include "dataplane/l3/local.h"

namespace svcgate::dp {

namespace {

constexpr uint8_t kTtl = 64;

void swap_macs(uint8_t* frame) noexcept {
    uint8_t tmp[RTE_ETHER_ADDR_LEN];
    std::memcpy(tmp, frame, RTE_ETHER_ADDR_LEN);
    std::memcpy(frame, frame + RTE_ETHER_ADDR_LEN, RTE_ETHER_ADDR_LEN);
    std::memcpy(frame + RTE_ETHER_ADDR_LEN, tmp, RTE_ETHER_ADDR_LEN);
}

void write_ip(uint8_t* ip, uint16_t total, uint8_t proto, Ip4 src, Ip4 dst) noexcept {
    auto* h = reinterpret_cast<rte_ipv4_hdr*>(ip);
    h->version_ihl = 0x45;
    h->type_of_service = 0;
    h->total_length = to_be16(total);
    h->packet_id = 0;
    h->fragment_offset = to_be16(RTE_IPV4_HDR_DF_FLAG);
    h->time_to_live = kTtl;
    h->next_proto_id = proto;
    h->hdr_checksum = 0;
    h->src_addr = src.be;
    h->dst_addr = dst.be;
    h->hdr_checksum = inet_csum(ip, sizeof(rte_ipv4_hdr));
}

}  // namespace

bool set_frame_length(rte_mbuf* m, uint32_t len) noexcept {
    if (len > static_cast<uint32_t>(m->buf_len - m->data_off)) return false;
    if (m->next) {
        rte_pktmbuf_free(m->next);
        m->next = nullptr;
        m->nb_segs = 1;
    }
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = len;
    return true;
}

namespace {

// RFC 793 "Reset Generation", case 1 (no connection exists): if the offending segment has an
// ACK the RST takes its sequence number from that ACK, otherwise seq 0 and ACK of seq + len.
bool build_rst(rte_mbuf* m, const PacketMeta& meta) noexcept {
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    const uint8_t* tcp_in = f + meta.l4_off;
    // memcpy: behind a 14-byte Ethernet header the TCP words are not 4-byte aligned.
    rte_be32_t seq_be, ack_be;
    std::memcpy(&seq_be, tcp_in + 4, 4);
    std::memcpy(&ack_be, tcp_in + 8, 4);
    const uint32_t seq = from_be32(seq_be), ack = from_be32(ack_be);
    uint8_t doff = tcp_in[12] >> 4;
    uint32_t seg_len = meta.l4_len - doff * 4u + ((meta.tcp_flags & kSyn) ? 1 : 0) + ((meta.tcp_flags & kFin) ? 1 : 0);
    const bool had_ack = meta.tcp_flags & kAck;

    // The reply carries no IPv6 extension headers: a fixed header and the segment.
    const bool v6 = meta.is_v6();
    const uint16_t ip_hdr = v6 ? 40 : sizeof(rte_ipv4_hdr);
    const uint16_t total = ip_hdr + sizeof(rte_tcp_hdr);
    if (!set_frame_length(m, meta.l3_off + total)) return false;
    swap_macs(f);
    uint8_t* ip = f + meta.l3_off;
    uint8_t* tcp = ip + ip_hdr;
    if (v6)
        write_ip6_header(ip, sizeof(rte_tcp_hdr), static_cast<uint8_t>(Proto::tcp), kTtl, meta.key6.dst, meta.key6.src);
    else
        write_ip(ip, total, static_cast<uint8_t>(Proto::tcp), meta.key.dst, meta.key.src);
    auto* t = reinterpret_cast<rte_tcp_hdr*>(tcp);
    t->src_port = v6 ? meta.key6.dport : meta.key.dport;
    t->dst_port = v6 ? meta.key6.sport : meta.key.sport;
    t->sent_seq = to_be32(had_ack ? ack : 0);
    t->recv_ack = to_be32(had_ack ? 0 : seq + seg_len);
    t->data_off = 5 << 4;
    t->tcp_flags = had_ack ? RTE_TCP_RST_FLAG : (RTE_TCP_RST_FLAG | RTE_TCP_ACK_FLAG);
    t->rx_win = 0;
    t->cksum = 0;
    t->tcp_urp = 0;
    t->cksum = v6 ? ipv6_l4_csum(ip, tcp, sizeof(rte_tcp_hdr), static_cast<uint8_t>(Proto::tcp))
                  : ipv4_l4_csum(ip, tcp, sizeof(rte_tcp_hdr));
    return true;
}

// RFC 4443 3.1: destination unreachable, code 4 (port unreachable), carrying as much of the
// offending packet as fits in the IPv6 minimum MTU (1280). Packet Too Big (3.2) is built the same
// way: type, code, the 32-bit word after the checksum (the MTU) and the source differ.
bool build_icmp6_error(rte_mbuf* m, const PacketMeta& meta, uint8_t type, uint8_t code, uint32_t word,
                       const Ip6& src) noexcept {
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    constexpr uint16_t kHead = 40 + 8;
    const uint16_t quoted = std::min<uint16_t>(meta.ip_len, 1280 - kHead);
    if (!set_frame_length(m, meta.l3_off + kHead + quoted)) return false;
    uint8_t* ip = f + meta.l3_off;
    const Ip6 dst = meta.key6.src;
    std::memmove(ip + kHead, ip, quoted);  // the quote first: the new headers overwrite its start
    swap_macs(f);
    write_ip6_header(ip, static_cast<uint16_t>(8 + quoted), static_cast<uint8_t>(Proto::icmp6), kTtl, src, dst);
    uint8_t* icmp = ip + 40;
    std::memset(icmp, 0, 8);
    icmp[0] = type;
    icmp[1] = code;
    const rte_be32_t w = to_be32(word);
    std::memcpy(icmp + 4, &w, 4);
    const uint16_t c = ipv6_l4_csum(ip, icmp, 8u + quoted, static_cast<uint8_t>(Proto::icmp6));
    std::memcpy(icmp + 2, &c, 2);
    return true;
}

// RFC 792 / RFC 1812 4.3.2.3: an ICMP error carrying the offending IP header and the first 8
// bytes of its payload; `word` is the 32 bits after the checksum (RFC 1191: the next-hop MTU).
bool build_icmp4_error(rte_mbuf* m, const PacketMeta& meta, uint8_t type, uint8_t code, uint32_t word,
                       Ip4 src) noexcept {
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    const uint16_t ihl = meta.l4_off - meta.l3_off;
    const uint16_t quoted = ihl + std::min<uint16_t>(8, meta.l4_len);
    uint8_t quote[60 + 8];
    std::memcpy(quote, f + meta.l3_off, quoted);

    const uint16_t total = sizeof(rte_ipv4_hdr) + sizeof(rte_icmp_hdr) + quoted;
    const Ip4 dst = meta.key.src;
    if (!set_frame_length(m, meta.l3_off + total)) return false;
    swap_macs(f);
    uint8_t* ip = f + meta.l3_off;
    uint8_t* icmp = ip + sizeof(rte_ipv4_hdr);
    write_ip(ip, total, static_cast<uint8_t>(Proto::icmp), src, dst);
    std::memset(icmp, 0, sizeof(rte_icmp_hdr));
    icmp[0] = type;
    icmp[1] = code;
    const rte_be32_t w = to_be32(word);
    std::memcpy(icmp + 4, &w, 4);
    std::memcpy(icmp + sizeof(rte_icmp_hdr), quote, quoted);
    uint16_t c = inet_csum(icmp, sizeof(rte_icmp_hdr) + quoted);
    std::memcpy(icmp + 2, &c, 2);
    return true;
}

}  // namespace

bool build_reject(rte_mbuf* m, const PacketMeta& meta) noexcept {
    // The refusal comes from the address refused (kube-proxy's REJECT, from the Service).
    if (meta.is_v6()) {
        if (static_cast<Proto>(meta.key6.proto) == Proto::tcp) return build_rst(m, meta);
        return build_icmp6_error(m, meta, kIcmp6DestUnreach, 4 /* port unreachable */, 0, meta.key6.dst);
    }
    if (static_cast<Proto>(meta.key.proto) == Proto::tcp) return build_rst(m, meta);
    return build_icmp4_error(m, meta, kIcmpDestUnreach, 3 /* port unreachable */, 0, meta.key.dst);
}

bool build_too_big(rte_mbuf* m, const PacketMeta& meta, uint16_t mtu, const IpAddr& src) noexcept {
    if (meta.is_v6()) return build_icmp6_error(m, meta, kIcmp6PacketTooBig, 0, mtu, src.v6());
    return build_icmp4_error(m, meta, kIcmpDestUnreach, 4 /* fragmentation needed */, mtu, src.v4());
}

}  // namespace svcgate::dp
