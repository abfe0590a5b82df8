#include "parse.h"

#include <cstring>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>
#include <rte_icmp.h>

#include "checksum.h"

namespace svcgate::dp {

namespace {

constexpr uint16_t kEthVlan = RTE_ETHER_TYPE_VLAN;
constexpr uint16_t kEthQinQ = RTE_ETHER_TYPE_QINQ;
constexpr uint32_t kArpIpv4Len = 28;  // RFC 826 body for Ethernet/IPv4

template <typename T>
T load(const uint8_t* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

bool is_martian_source(Ip4 a) noexcept {
    uint32_t h = a.host();
    // RFC 1812 5.3.7: never forward a packet whose source is 0/8 "this network", a multicast
    // (224/4) or the limited broadcast address.
    return (h >> 24) == 0 || (h >> 28) == 0xe || h == 0xffffffffu;
}

bool is_icmp_error(uint8_t type) noexcept {
    return type == kIcmpDestUnreach || type == kIcmpTimeExceeded || type == kIcmpParamProblem ||
           type == kIcmpSourceQuench;
}

// RFC 792 / RFC 1812 4.3.2.3: an ICMP error carries the offending packet's IP header and at
// least the first 8 bytes of its payload, which is where TCP, UDP and SCTP keep their ports.
// Errors about anything else (an ICMP message, a later fragment) relate to no flow of ours and
// are routed as they are.
DropReason parse_icmp_error(const uint8_t* l4, PacketMeta& m) noexcept {
    const uint8_t* in = l4 + sizeof(rte_icmp_hdr);
    const uint32_t avail = m.l4_len - sizeof(rte_icmp_hdr);
    if (avail < sizeof(rte_ipv4_hdr) || (in[0] >> 4) != 4) return DropReason::icmp_error_bad_inner;
    const uint32_t ihl = (in[0] & 0x0f) * 4u;
    if (ihl < sizeof(rte_ipv4_hdr) || ihl + 8 > avail) return DropReason::icmp_error_bad_inner;
    if (rte_be_to_cpu_16(load<rte_be16_t>(in + 6)) & RTE_IPV4_HDR_OFFSET_MASK) return DropReason::none;
    const auto proto = static_cast<Proto>(in[9]);
    if (proto != Proto::tcp && proto != Proto::udp && proto != Proto::sctp) return DropReason::none;
    const FlowKey embedded{.src = Ip4{load<rte_be32_t>(in + 12)},
                           .dst = Ip4{load<rte_be32_t>(in + 16)},
                           .sport = load<rte_be16_t>(in + ihl),
                           .dport = load<rte_be16_t>(in + ihl + 2),
                           .proto = in[9]};
    m.err_key = embedded.reversed();
    m.inner_off = static_cast<uint16_t>(m.l4_off + sizeof(rte_icmp_hdr));
    m.inner_l4_len = static_cast<uint16_t>(avail - ihl);
    return DropReason::none;
}

DropReason parse_l4(const uint8_t* l4, PacketMeta& m) noexcept {
    switch (static_cast<Proto>(m.key.proto)) {
    case Proto::tcp: {
        if (m.l4_len < sizeof(rte_tcp_hdr)) return DropReason::tcp_truncated;
        uint8_t doff = l4[12] >> 4;
        if (doff < 5 || doff * 4u > m.l4_len) return DropReason::tcp_bad_doff;
        m.key.sport = load<rte_be16_t>(l4);
        m.key.dport = load<rte_be16_t>(l4 + 2);
        m.tcp_flags = l4[13] & 0x3f;
        uint8_t f = m.tcp_flags;
        // No stack sends these; scanners do (nmap -sN/-sX, SYN+FIN / SYN+RST probes).
        if (f == 0 || (f & (kSyn | kFin)) == (kSyn | kFin) || (f & (kSyn | kRst)) == (kSyn | kRst) ||
            (f & (kFin | kPsh | kUrg)) == (kFin | kPsh | kUrg))
            return DropReason::tcp_bad_flags;
        return DropReason::none;
    }
    case Proto::udp: {
        if (m.l4_len < sizeof(rte_udp_hdr)) return DropReason::udp_truncated;
        uint16_t ulen = rte_be_to_cpu_16(load<rte_be16_t>(l4 + 4));
        // A first fragment carries only part of the datagram: its length may exceed the payload.
        if (ulen < sizeof(rte_udp_hdr) || (!m.more_fragments && ulen > m.l4_len))
            return DropReason::udp_bad_length;
        m.key.sport = load<rte_be16_t>(l4);
        m.key.dport = load<rte_be16_t>(l4 + 2);
        return DropReason::none;
    }
    case Proto::sctp:
        if (m.l4_len < 12) return DropReason::sctp_truncated;
        m.key.sport = load<rte_be16_t>(l4);
        m.key.dport = load<rte_be16_t>(l4 + 2);
        return DropReason::none;
    case Proto::icmp: {
        if (m.l4_len < sizeof(rte_icmp_hdr)) return DropReason::icmp_truncated;
        m.icmp_type = l4[0];
        if (m.icmp_type == RTE_IP_ICMP_ECHO_REQUEST || m.icmp_type == RTE_IP_ICMP_ECHO_REPLY) {
            // conntrack keys echo by identifier; both "ports" carry it so the reply key is the
            // plain reversal of the request key.
            m.key.sport = m.key.dport = load<rte_be16_t>(l4 + 4);
        } else if (is_icmp_error(m.icmp_type) && !m.more_fragments) {
            return parse_icmp_error(l4, m);
        }
        return DropReason::none;
    }
    }
    return DropReason::none;  // other protocols: addresses only
}

}  // namespace

DropReason parse_packet(const uint8_t* f, uint32_t len, PacketMeta& m, ParseOptions opts) noexcept {
    m = PacketMeta{};
    if (len < sizeof(rte_ether_hdr)) [[unlikely]]
        return DropReason::eth_truncated;
    uint16_t off = sizeof(rte_ether_hdr);
    uint16_t type = rte_be_to_cpu_16(load<rte_be16_t>(f + 12));
    if (type == kEthVlan) {
        if (len < off + sizeof(rte_vlan_hdr)) [[unlikely]]
            return DropReason::vlan_truncated;
        type = rte_be_to_cpu_16(load<rte_be16_t>(f + off + 2));
        off += sizeof(rte_vlan_hdr);
        if (type == kEthVlan || type == kEthQinQ) [[unlikely]]
            return DropReason::vlan_stacked;
    } else if (type == kEthQinQ) [[unlikely]] {
        return DropReason::vlan_stacked;
    }

    if (type == RTE_ETHER_TYPE_ARP) {
        if (len < off + kArpIpv4Len) [[unlikely]]
            return DropReason::arp_truncated;
        m.l3 = L3Kind::arp;
        m.l3_off = off;
        return DropReason::none;
    }
    if (type == RTE_ETHER_TYPE_IPV6) return DropReason::ipv6;
    if (type != RTE_ETHER_TYPE_IPV4) [[unlikely]]
        return DropReason::ethertype_unknown;

    // RFC 1812 5.3.4: a router does not forward IP packets received as link-layer broadcast or
    // multicast (bit 0 of the first destination octet).
    if (f[0] & 0x01) [[unlikely]]
        return DropReason::l2_not_for_us;

    // RFC 1812 5.2.2 (1): the frame is long enough for a minimal IP header.
    if (len < off + sizeof(rte_ipv4_hdr)) [[unlikely]]
        return DropReason::ip_truncated;
    const uint8_t* ip = f + off;
    // (3): version 4.
    if ((ip[0] >> 4) != 4) [[unlikely]]
        return DropReason::ip_bad_version;
    // (4): IHL at least 5 words, and the header fits in the frame.
    uint16_t ihl = (ip[0] & 0x0f) * 4;
    if (ihl < sizeof(rte_ipv4_hdr) || off + ihl > len) [[unlikely]]
        return DropReason::ip_bad_ihl;
    // (5): total length at least the header, and within the frame (padding after it is allowed).
    uint16_t total = rte_be_to_cpu_16(load<rte_be16_t>(ip + 2));
    if (total < ihl || off + total > len) [[unlikely]]
        return DropReason::ip_bad_total_length;
    // (2): the header checksum verifies.
    if (!opts.ip_csum_verified && inet_csum(ip, ihl) != 0) [[unlikely]]
        return DropReason::ip_bad_checksum;

    m.l3 = L3Kind::ipv4;
    m.l3_off = off;
    m.l4_off = off + ihl;
    m.ip_len = total;
    m.l4_len = total - ihl;
    m.key.src = Ip4{load<rte_be32_t>(ip + 12)};
    m.key.dst = Ip4{load<rte_be32_t>(ip + 16)};
    m.key.proto = ip[9];
    if (is_martian_source(m.key.src)) [[unlikely]]
        return DropReason::ip_bad_source;

    uint16_t frag = rte_be_to_cpu_16(load<rte_be16_t>(ip + 6));
    if (frag & RTE_IPV4_HDR_OFFSET_MASK) [[unlikely]]
        return DropReason::ip_fragment;  // no L4 header here: see README, Reliability
    m.more_fragments = (frag & RTE_IPV4_HDR_MF_FLAG) != 0;
    return parse_l4(f + m.l4_off, m);
}

}  // namespace svcgate::dp
