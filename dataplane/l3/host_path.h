// What of the gateway's own traffic goes to the kernel through the in-port's host interface
// (dataplane.ports[].host_interface), and in which budget. The output stage asks for each packet
// the dataplane did not answer itself (answer_local) and, for a packet that is the kernel's,
// queues it to the host interface within the class's per-worker budget (output.cpp).
//
// Runs on: workers (output.h). Reads: the packet, the snapshot's address flags. Writes: nothing.
#pragma once

#include <cstdint>

#include <rte_ether.h>

#include "dataplane/lb/snapshot.h"
#include "dataplane/packet/meta.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

// none: not the kernel's (dropped under its reason). control: the answers to the kernel's own
// neighbor questions and packets from on-link senders (TTL or hop limit 255, as BFD and BGP with
// GTSM send, RFC 5082). other: everything else for the gateway's own addresses (SSH, the health
// ports, a flood from off-link), in a budget of its own so that it cannot starve the control class.
enum class HostClass : uint8_t { none, control, other };

// For a packet answer_local refused with `reason`, received on a port with MAC `port_mac`.
HostClass host_class(const ServiceSnapshot& s, const rte_ether_addr& port_mac, const PacketMeta& pm,
                     const uint8_t* frame, DropReason reason) noexcept;

// The link-local address the kernel gives an interface with MAC `mac` (RFC 4291 appendix A).
Ip6 eui64_link_local(const rte_ether_addr& mac) noexcept;

}  // namespace svcgate::dp
