#include "local.h"

#include <cstring>

#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include "checksum.h"
#include "parse.h"

namespace svcgate::dp {

namespace {
constexpr uint32_t kAnswerArp = kPortAddr | kNodeAddr | kClusterIp | kServiceAddr;

DropReason arp(uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac,
               const ServiceSnapshot& s, NeighborTable& nt, uint32_t now) noexcept {
    auto* a = reinterpret_cast<rte_arp_hdr*>(frame + pm.l3_off);
    if (a->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) || a->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
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
    if (a->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST) || !to_us || sender == target /* gratuitous */)
        return DropReason::arp_consumed;
    a->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
    a->arp_data.arp_tha = a->arp_data.arp_sha;
    a->arp_data.arp_tip = sender.be;
    a->arp_data.arp_sha = port_mac;
    a->arp_data.arp_sip = target.be;
    auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
    eth->dst_addr = a->arp_data.arp_tha;
    eth->src_addr = port_mac;
    return DropReason::none;
}

DropReason echo(uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac, const ServiceSnapshot& s) noexcept {
    if (static_cast<Proto>(pm.key.proto) != Proto::icmp || pm.icmp_type != RTE_IP_ICMP_ECHO_REQUEST ||
        !(s.local_flags(pm.key.dst) & kAnswerArp))
        return DropReason::to_gateway;
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(frame + pm.l3_off);
    auto* icmp = reinterpret_cast<rte_icmp_hdr*>(frame + pm.l4_off);
    const rte_be32_t src = ip->src_addr;  // swapping the addresses keeps the header checksum
    ip->src_addr = ip->dst_addr;
    ip->dst_addr = src;
    const uint16_t old_word = rte_cpu_to_be_16(uint16_t{RTE_IP_ICMP_ECHO_REQUEST} << 8);
    const uint16_t new_word = rte_cpu_to_be_16(uint16_t{RTE_IP_ICMP_ECHO_REPLY} << 8);
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

DropReason answer_local(uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac,
                        const ServiceSnapshot& s, NeighborTable& nt, uint32_t now) noexcept {
    return pm.l3 == L3Kind::arp ? arp(frame, pm, port_mac, s, nt, now) : echo(frame, pm, port_mac, s);
}

bool build_arp_request(rte_mbuf* m, const rte_ether_addr& mac, Ip4 source, Ip4 target) noexcept {
    rte_pktmbuf_reset(m);
    constexpr uint16_t len = sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(m, len));
    if (!eth) return false;
    std::memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
    eth->src_addr = mac;
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
    auto* a = reinterpret_cast<rte_arp_hdr*>(eth + 1);
    a->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
    a->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    a->arp_hlen = RTE_ETHER_ADDR_LEN;
    a->arp_plen = 4;
    a->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
    a->arp_data.arp_sha = mac;
    a->arp_data.arp_sip = source.be;
    std::memset(&a->arp_data.arp_tha, 0, RTE_ETHER_ADDR_LEN);
    a->arp_data.arp_tip = target.be;
    return true;
}

}  // namespace svcgate::dp
