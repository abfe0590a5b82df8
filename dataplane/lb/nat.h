// Translate: rewrite a parsed IPv4 or IPv6 packet's tuple in place (KUBE-SEP-* DNAT, KUBE-POSTROUTING
// MASQUERADE and their conntrack reversal), updating the IPv4, TCP and UDP checksums
// incrementally (RFC 1624) and SCTP's CRC32c in full (it covers no pseudo-header, only ports).
// Also the router's TTL step.
//
// Runs on: worker lcores, trace, tests. Writes: the packet only.
#pragma once

#include <cstdint>

#include "dataplane/packet/meta.h"

namespace svcgate::dp {

// Rewrites addresses and ports from m.key to `to` (same protocol). ICMP echo identifiers are
// left alone (no Service carries ICMP).
void rewrite_tuple(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept;

// An ICMP error about a translated flow (nf_nat_icmp_reply_translation): the embedded packet
// becomes `out` reversed (the packet the receiver of the error sent), its IPv4 checksum and, where
// the bytes came along, its TCP/UDP checksum follow; the outer destination becomes out.dst and,
// with `outer_src`, the outer source out.src; the ICMP checksum is computed afresh.
void rewrite_icmp_error(uint8_t* frame, const PacketMeta& m, const FlowKey& out, bool outer_src) noexcept;

// The same for IPv6: addresses in the fixed header, ports, the transport checksum over the IPv6
// pseudo-header; the ICMPv6 error's checksum computed afresh over the pseudo-header.
void rewrite_tuple(uint8_t* frame, const PacketMeta& m, const FlowKey6& to) noexcept;
// The addresses only (a later fragment: no L4 header), with the IPv4 header checksum.
void rewrite_addresses(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept;
void rewrite_addresses(uint8_t* frame, const PacketMeta& m, const FlowKey6& to) noexcept;
void rewrite_icmp_error(uint8_t* frame, const PacketMeta& m, const FlowKey6& out, bool outer_src) noexcept;

// RFC 8200 3: decrement the hop limit; false (packet untouched) when it would reach zero.
[[nodiscard]] bool decrement_hop_limit(uint8_t* frame, const PacketMeta& m) noexcept;

// RFC 1812 5.3.1: decrement TTL, updating the header checksum; false (packet untouched) when the
// TTL would reach zero.
[[nodiscard]] bool decrement_ttl(uint8_t* frame, const PacketMeta& m) noexcept;

// A translated packet's way out: decrement_ttl (decrement_hop_limit) and rewrite_tuple in one, the
// IPv4 header checksum updated once for both; false (packet untouched) when the TTL would reach
// zero.
[[nodiscard]] bool route_translate(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept;
[[nodiscard]] bool route_translate(uint8_t* frame, const PacketMeta& m, const FlowKey6& to) noexcept;

}  // namespace svcgate::dp
