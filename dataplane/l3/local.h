// The gateway's own addresses: ARP, Neighbor Discovery and ICMP/ICMPv6 echo, answered in place by
// the output stage of the worker that received them, from the packet's parsed meta. ARP and
// Neighbor Solicitations are answered for port addresses, node IPs, ClusterIPs, external IPs and
// LB IPs (the gateway owns every service address on the wire); every ARP packet, solicitation
// and advertisement teaches the neighbor caches.
//
// Runs on: workers (output.h). Writes: the packet, the neighbor cache.
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "dataplane/l3/neighbor.h"
#include "dataplane/packet/meta.h"
#include "dataplane/lb/snapshot.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

// For a packet with Verdict::local, parsed into `pm`. Returns DropReason::none when the frame
// now holds a reply to send back out of the port it came in on; otherwise the reason to count
// and free it.
DropReason answer_local(rte_mbuf* m, const PacketMeta& pm, const rte_ether_addr& port_mac, const ServiceSnapshot& s,
                        NeighborTable& neighbors, NeighborTable6& neighbors6, uint32_t now) noexcept;

// Writes a broadcast ARP request for `target` from (mac, source) into `m` (reset first).
bool build_arp_request(rte_mbuf* m, const rte_ether_addr& mac, Ip4 source, Ip4 target) noexcept;

// A fixed IPv6 header (no traffic class, no flow label) for packets the gateway builds.
void write_ip6_header(uint8_t* ip, uint16_t payload, uint8_t proto, uint8_t hop_limit, const Ip6& src,
                      const Ip6& dst) noexcept;

// Writes a Neighbor Solicitation for `target` from (mac, source) to its solicited-node group.
bool build_nd_solicit(rte_mbuf* m, const rte_ether_addr& mac, const Ip6& source, const Ip6& target) noexcept;
// The announcements of an address this gateway has just taken (ha: a dead peer's): a gratuitous
// ARP request (build_arp_request with `addr` as sender and target) or an unsolicited Neighbor
// Advertisement with Override to all nodes (RFC 4861 7.2.6): neighbors that cached `addr` move
// it to `mac`.
bool build_unsolicited_na(rte_mbuf* m, const rte_ether_addr& mac, const Ip6& addr) noexcept;

}  // namespace svcgate::dp
