// Refuse fast, as kube-proxy's REJECT does: turn the offending packet, in place, into a TCP RST
// (for TCP) or an ICMP port-unreachable (everything else) addressed back to its source, with the
// Ethernet addresses swapped so it can leave by the port it came in on. Cold path.
//
// Runs on: worker lcores, trace, tests. Writes: the mbuf (length, contents).
#pragma once

#include <rte_mbuf.h>

#include "dataplane/packet/meta.h"

namespace svcgate::dp {

// Sets a frame built in place to `len` bytes in one segment (chained ones are freed); false
// when the mbuf has no room for it.
bool set_frame_length(rte_mbuf* m, uint32_t len) noexcept;

// False when the mbuf has no room for the reply (the caller drops with reject_failed).
[[nodiscard]] bool build_reject(rte_mbuf* m, const PacketMeta& meta) noexcept;

// The packet, too big for an egress MTU of `mtu`, becomes in place the error its sender needs for
// path-MTU discovery, from `src` (the gateway's address towards it): ICMP destination unreachable,
// fragmentation needed, with the next-hop MTU (RFC 1191 4), or ICMPv6 Packet Too Big (RFC 4443
// 3.2), quoting the packet as it arrived. False when the mbuf has no room.
[[nodiscard]] bool build_too_big(rte_mbuf* m, const PacketMeta& meta, uint16_t mtu, const IpAddr& src) noexcept;

}  // namespace svcgate::dp
