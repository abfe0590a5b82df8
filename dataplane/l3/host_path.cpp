#include "dataplane/l3/host_path.h"

#include <cstring>

#include <rte_arp.h>

namespace svcgate::dp {

Ip6 eui64_link_local(const rte_ether_addr& mac) noexcept {
    Ip6 a{};
    const uint8_t* b = mac.addr_bytes;
    a.b[0] = 0xfe, a.b[1] = 0x80;
    a.b[8] = b[0] ^ 0x02, a.b[9] = b[1], a.b[10] = b[2], a.b[11] = 0xff, a.b[12] = 0xfe;
    a.b[13] = b[3], a.b[14] = b[4], a.b[15] = b[5];
    return a;
}

// IP to a port address or node IP (answer_local's to_gateway: BGP, BFD, SSH, the health ports),
// and the answers to the kernel's own neighbor questions — ARP replies and Neighbor
// Advertisements to those addresses — so that its neighbor entries resolve. Nothing else of ARP
// and ND: the dataplane answers requests for the gateway's addresses itself, and the kernel takes
// no router advertisement, redirect or question about another host.
HostClass host_class(const ServiceSnapshot& s, const rte_ether_addr& port_mac, const PacketMeta& pm,
                     const uint8_t* frame, DropReason reason) noexcept {
    constexpr uint32_t kHostAddr = kPortAddr | kNodeAddr;
    if (pm.l3 == L3Kind::arp) {
        if (reason != DropReason::arp_consumed) return HostClass::none;
        const auto* a = reinterpret_cast<const rte_arp_hdr*>(frame + pm.l3_off);
        const Ip4 target{a->arp_data.arp_tip};
        if (a->arp_opcode != to_be16(RTE_ARP_OP_REPLY) || !(s.local_flags(target) & kHostAddr)) return HostClass::none;
        return HostClass::control;
    }
    if (pm.is_nd()) {
        if (reason != DropReason::nd_consumed) return HostClass::none;
        if (pm.icmp_type == kIcmp6NeighborAdvert) {
            // To one of its addresses, or to its link-local one (the kernel's probes come from it).
            if (!(s.local_flags(pm.key6.dst) & kHostAddr) && !pm.key6.dst.is_link_local()) return HostClass::none;
        } else if (pm.icmp_type == kIcmp6NeighborSolicit) {
            // For its link-local address (the dataplane answers for the others): peers ask
            // before they answer the kernel's probes.
            Ip6 target;
            std::memcpy(target.b, frame + pm.l4_off + 8, 16);
            if (!(target == eui64_link_local(port_mac))) return HostClass::none;
        } else {
            return HostClass::none;
        }
        return HostClass::control;
    }
    if (reason != DropReason::to_gateway) return HostClass::none;
    const uint32_t own = pm.is_v6() ? s.local_flags(pm.key6.dst) : s.local_flags(pm.key.dst);
    if (!(own & kHostAddr)) return HostClass::none;  // a service address: nothing for the kernel
    return frame[pm.l3_off + (pm.is_v6() ? 7 : 8)] == 255 ? HostClass::control : HostClass::other;
}

}  // namespace svcgate::dp
