// The gateway's own addresses: ARP and ICMP echo, answered in place by the output stage of the
// worker that received them, from the packet's parsed meta. ARP is answered for port addresses,
// node IPs, ClusterIPs, external IPs and LB IPs (the gateway owns every service address on the
// wire); every ARP packet teaches the neighbor cache.
//
// Runs on: workers (output.h). Writes: the packet, the neighbor cache.
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "neighbor.h"
#include "parse.h"
#include "snapshot.h"
#include "verdict.h"

namespace svcgate::dp {

// For a packet with Verdict::local, parsed into `pm`. Returns DropReason::none when the frame
// now holds a reply to send back out of the port it came in on; otherwise the reason to count
// and free it.
DropReason answer_local(uint8_t* frame, const PacketMeta& pm, const rte_ether_addr& port_mac,
                        const ServiceSnapshot& s, NeighborTable& neighbors, uint32_t now) noexcept;

// Writes a broadcast ARP request for `target` from (mac, source) into `m` (reset first).
bool build_arp_request(rte_mbuf* m, const rte_ether_addr& mac, Ip4 source, Ip4 target) noexcept;

}  // namespace svcgate::dp
