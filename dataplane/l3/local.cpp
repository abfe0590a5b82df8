#include "dataplane/l3/local.h"

#include <cstring>

#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "dataplane/base/checksum.h"
#include "dataplane/packet/meta.h"
#include "dataplane/l3/reject.h"

namespace svcgate::dp {

namespace {
constexpr uint32_t kAnswerArp = kPortAddr | kNodeAddr | kClusterIp | kServiceAddr;

DropReason arp(uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac, const ServiceSnapshot& s,
               NeighborTable& nt, uint32_t now) noexcept {
    auto* a = reinterpret_cast<rte_arp_hdr*>(frame + pm.l3_off);
    if (a->arp_hardware != to_be16(RTE_ARP_HRD_ETHER) || a->arp_protocol != to_be16(RTE_ETHER_TYPE_IPV4) ||
        a->arp_hlen != RTE_ETHER_ADDR_LEN || a->arp_plen != 4)
        return DropReason::to_gateway;
    const Ip4 sender{a->arp_data.arp_sip};
    const Ip4 target{a->arp_data.arp_tip};
    const bool to_us = s.local_flags(target) & kAnswerArp;
    if (!sender.is_zero() && !rte_is_multicast_ether_addr(&a->arp_data.arp_sha)) {
        // RFC 826's merge step, then a new entry only for an on-link sender talking to us.
        const NextHop* nh = s.route(sender);
        nt.learn(sender, a->arp_data.arp_sha, now, to_us && nh && nh->gateway.is_zero());
    }
    // Replies (to our requests), announcements and questions about other hosts end here: the
    // cache has what it needs from them. Counted apart from to_gateway, which is traffic the
    // gateway refuses.
    if (a->arp_opcode != to_be16(RTE_ARP_OP_REQUEST) || !to_us || sender == target /* gratuitous */)
        return DropReason::arp_consumed;
    a->arp_opcode = to_be16(RTE_ARP_OP_REPLY);
    a->arp_data.arp_tha = a->arp_data.arp_sha;
    a->arp_data.arp_tip = sender.be;
    a->arp_data.arp_sha = port_mac;
    a->arp_data.arp_sip = target.be;
    auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
    eth->dst_addr = a->arp_data.arp_tha;
    eth->src_addr = port_mac;
    return DropReason::none;
}

// The solicited-node multicast address of `target` (RFC 4291 2.7.1) and its MAC (RFC 2464 7).
Ip6 solicited_node(const Ip6& target) noexcept {
    Ip6 a{};
    a.b[0] = 0xff, a.b[1] = 0x02, a.b[11] = 0x01, a.b[12] = 0xff;
    std::memcpy(a.b + 13, target.b + 13, 3);
    return a;
}
rte_ether_addr multicast_mac(const Ip6& group) noexcept {
    rte_ether_addr m{{0x33, 0x33, group.b[12], group.b[13], group.b[14], group.b[15]}};
    return m;
}

// An NS or NA (RFC 4861 4.3, 4.4) as the gateway sends them: 24 bytes of message (type, `flags`,
// `target`) and one link-layer address option (source for an NS, target for an NA) with `mac`.
constexpr uint16_t kNdLen = 24 + 8;
void write_nd(uint8_t* ip, uint8_t type, uint8_t flags, const Ip6& src, const Ip6& dst, const Ip6& target,
              const rte_ether_addr& mac) noexcept {
    write_ip6_header(ip, kNdLen, static_cast<uint8_t>(Proto::icmp6), 255, src, dst);
    uint8_t* msg = ip + 40;
    std::memset(msg, 0, kNdLen);
    msg[0] = type;
    msg[4] = flags;
    std::memcpy(msg + 8, target.b, 16);
    msg[24] = type == kIcmp6NeighborSolicit ? 1 : 2;
    msg[25] = 1;  // in units of 8 bytes
    std::memcpy(msg + 26, mac.addr_bytes, RTE_ETHER_ADDR_LEN);
    const uint16_t c = ipv6_l4_csum(ip, msg, kNdLen, static_cast<uint8_t>(Proto::icmp6));
    std::memcpy(msg + 2, &c, 2);
}

// The link-layer address option of type `type` (1 source, 2 target) in an ND message, if any.
const uint8_t* nd_lladdr(const uint8_t* icmp, uint32_t len, uint8_t type) noexcept {
    for (uint32_t o = 24; o + 8 <= len && icmp[o + 1]; o += icmp[o + 1] * 8u)
        if (icmp[o] == type && icmp[o + 1] == 1) return icmp + o + 2;
    return nullptr;
}

// Neighbor Discovery (RFC 4861), checked by parse (7.1): every solicitation and advertisement
// teaches the cache; a solicitation for one of the gateway's addresses is answered with a
// solicited advertisement from the router (R, S, O set; from the target, to the solicitation's
// source or, for duplicate address detection, to all nodes).
DropReason nd(rte_mbuf* m, uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac,
              const ServiceSnapshot& s, NeighborTable6& nt, uint32_t now) noexcept {
    const uint8_t* icmp = frame + pm.l4_off;
    if (pm.icmp_type != kIcmp6NeighborSolicit && pm.icmp_type != kIcmp6NeighborAdvert) return DropReason::nd_consumed;
    Ip6 target;
    std::memcpy(target.b, icmp + 8, 16);
    const bool solicit = pm.icmp_type == kIcmp6NeighborSolicit;
    const bool to_us = solicit && (s.local_flags(target) & kAnswerArp);
    // Who the message tells us about: an NS its source (with its source link-layer option), an
    // NA its target (with its target link-layer option, else the frame's source).
    const Ip6 who = solicit ? pm.key6.src : target;
    const uint8_t* ll = nd_lladdr(icmp, pm.l4_len, solicit ? 1 : 2);
    if (!who.is_zero() && (ll || !solicit)) {
        rte_ether_addr mac;
        std::memcpy(mac.addr_bytes, ll ? ll : frame + RTE_ETHER_ADDR_LEN, RTE_ETHER_ADDR_LEN);
        if (!rte_is_multicast_ether_addr(&mac)) {
            const NextHop6* nh = s.route(who);
            // As for ARP: a new entry only for an on-link sender talking to us (an NS for our
            // address); an NA updates what we asked for (a slot claimed by our solicitation).
            nt.learn(who, mac, now, to_us && nh && nh->gateway.is_zero());
        }
    }
    if (!to_us) return DropReason::nd_consumed;
    const bool dad = pm.key6.src.is_zero();
    rte_ether_addr dst_mac;
    if (ll)
        std::memcpy(dst_mac.addr_bytes, ll, RTE_ETHER_ADDR_LEN);
    else
        std::memcpy(dst_mac.addr_bytes, frame + RTE_ETHER_ADDR_LEN, RTE_ETHER_ADDR_LEN);
    Ip6 dst = pm.key6.src;
    if (dad) {
        dst = Ip6{};
        dst.b[0] = 0xff, dst.b[1] = 0x02, dst.b[15] = 0x01;  // ff02::1
        dst_mac = multicast_mac(dst);
    }
    if (!set_frame_length(m, pm.l3_off + 40u + kNdLen)) return DropReason::reject_failed;
    write_nd(frame + pm.l3_off, kIcmp6NeighborAdvert, dad ? 0xa0 : 0xe0 /* Router, Solicited (not for DAD), Override */,
             target, dst, target, port_mac);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
    eth->dst_addr = dst_mac;
    eth->src_addr = port_mac;
    return DropReason::none;
}

// ICMPv6 echo to one of the gateway's addresses (RFC 4443 4.2): answered in place, the checksum
// adjusted for the type (the pseudo-header is symmetric in the swapped addresses).
DropReason echo6(uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac,
                 const ServiceSnapshot& s) noexcept {
    if (static_cast<Proto>(pm.key6.proto) != Proto::icmp6 || pm.icmp_type != kIcmp6EchoRequest ||
        !(s.local_flags(pm.key6.dst) & kAnswerArp))
        return DropReason::to_gateway;
    uint8_t* ip = frame + pm.l3_off;
    std::memcpy(ip + 8, pm.key6.dst.b, 16);
    std::memcpy(ip + 24, pm.key6.src.b, 16);
    ip[7] = 64;
    uint8_t* icmp = frame + pm.l4_off;
    const uint16_t old_word = to_be16(uint16_t{kIcmp6EchoRequest} << 8);
    const uint16_t new_word = to_be16(uint16_t{kIcmp6EchoReply} << 8);
    icmp[0] = kIcmp6EchoReply;
    rte_be16_t c;
    std::memcpy(&c, icmp + 2, 2);
    csum_replace2(&c, old_word, new_word);
    std::memcpy(icmp + 2, &c, 2);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
    eth->dst_addr = eth->src_addr;
    eth->src_addr = port_mac;
    return DropReason::none;
}

DropReason echo(uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac,
                const ServiceSnapshot& s) noexcept {
    if (static_cast<Proto>(pm.key.proto) != Proto::icmp || pm.icmp_type != RTE_IP_ICMP_ECHO_REQUEST ||
        !(s.local_flags(pm.key.dst) & kAnswerArp))
        return DropReason::to_gateway;
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(frame + pm.l3_off);
    auto* icmp = reinterpret_cast<rte_icmp_hdr*>(frame + pm.l4_off);
    const rte_be32_t src = ip->src_addr;  // swapping the addresses keeps the header checksum
    ip->src_addr = ip->dst_addr;
    ip->dst_addr = src;
    const uint16_t old_word = to_be16(uint16_t{RTE_IP_ICMP_ECHO_REQUEST} << 8);
    const uint16_t new_word = to_be16(uint16_t{RTE_IP_ICMP_ECHO_REPLY} << 8);
    icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
    rte_be16_t c = icmp->icmp_cksum;
    csum_replace2(&c, old_word, new_word);
    icmp->icmp_cksum = c;
    auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
    eth->dst_addr = eth->src_addr;
    eth->src_addr = port_mac;
    return DropReason::none;
}
}  // namespace

DropReason answer_local(rte_mbuf* m, const PacketMeta& pm, const rte_ether_addr& port_mac, const ServiceSnapshot& s,
                        NeighborTable& nt, NeighborTable6& nt6, uint32_t now) noexcept {
    uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
    switch (pm.l3) {
        case L3Kind::arp:
            return arp(frame, pm, port_mac, s, nt, now);
        case L3Kind::ipv4:
            return echo(frame, pm, port_mac, s);
        case L3Kind::ipv6:
            return pm.is_nd() ? nd(m, frame, pm, port_mac, s, nt6, now) : echo6(frame, pm, port_mac, s);
    }
    return DropReason::to_gateway;
}

void write_ip6_header(uint8_t* ip, uint16_t payload, uint8_t proto, uint8_t hop_limit, const Ip6& src,
                      const Ip6& dst) noexcept {
    const rte_be32_t vtc = to_be32(6u << 28);
    std::memcpy(ip, &vtc, 4);
    const rte_be16_t plen = to_be16(payload);
    std::memcpy(ip + 4, &plen, 2);
    ip[6] = proto;
    ip[7] = hop_limit;
    std::memcpy(ip + 8, src.b, 16);
    std::memcpy(ip + 24, dst.b, 16);
}

bool build_nd_solicit(rte_mbuf* m, const rte_ether_addr& mac, const Ip6& source, const Ip6& target) noexcept {
    rte_pktmbuf_reset(m);
    constexpr uint16_t len = sizeof(rte_ether_hdr) + 40 + kNdLen;
    auto* eth = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(m, len));
    if (!eth) return false;
    const Ip6 group = solicited_node(target);
    eth->dst_addr = multicast_mac(group);
    eth->src_addr = mac;
    eth->ether_type = to_be16(RTE_ETHER_TYPE_IPV6);
    write_nd(reinterpret_cast<uint8_t*>(eth + 1), kIcmp6NeighborSolicit, 0, source, group, target, mac);
    return true;
}

bool build_arp_request(rte_mbuf* m, const rte_ether_addr& mac, Ip4 source, Ip4 target) noexcept {
    rte_pktmbuf_reset(m);
    constexpr uint16_t len = sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(m, len));
    if (!eth) return false;
    std::memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
    eth->src_addr = mac;
    eth->ether_type = to_be16(RTE_ETHER_TYPE_ARP);
    auto* a = reinterpret_cast<rte_arp_hdr*>(eth + 1);
    a->arp_hardware = to_be16(RTE_ARP_HRD_ETHER);
    a->arp_protocol = to_be16(RTE_ETHER_TYPE_IPV4);
    a->arp_hlen = RTE_ETHER_ADDR_LEN;
    a->arp_plen = 4;
    a->arp_opcode = to_be16(RTE_ARP_OP_REQUEST);
    a->arp_data.arp_sha = mac;
    a->arp_data.arp_sip = source.be;
    std::memset(&a->arp_data.arp_tha, 0, RTE_ETHER_ADDR_LEN);
    a->arp_data.arp_tip = target.be;
    return true;
}

bool build_unsolicited_na(rte_mbuf* m, const rte_ether_addr& mac, const Ip6& addr) noexcept {
    rte_pktmbuf_reset(m);
    constexpr uint16_t len = sizeof(rte_ether_hdr) + 40 + kNdLen;
    auto* eth = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(m, len));
    if (!eth) return false;
    Ip6 all_nodes{};
    all_nodes.b[0] = 0xff, all_nodes.b[1] = 0x02, all_nodes.b[15] = 1;
    eth->dst_addr = multicast_mac(all_nodes);
    eth->src_addr = mac;
    eth->ether_type = to_be16(RTE_ETHER_TYPE_IPV6);
    write_nd(reinterpret_cast<uint8_t*>(eth + 1), kIcmp6NeighborAdvert, 0x20 /* Override */, addr, all_nodes, addr,
             mac);
    return true;
}

}  // namespace svcgate::dp
