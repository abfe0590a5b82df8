// What happens to a packet: one Verdict per packet, and for drops and rejects one DropReason.
// The reasons are declared once (VPP's foreach_*_error): the list generates the enum, the names
// used by counters, metrics and `svcgatectl trace`.
//
// Runs on: any thread. Owns: nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "dataplane/base/enum_names.h"

namespace svcgate::dp {

#define SVCGATE_VERDICTS(X)                                                                                    \
    X(dnat, "dnat")       /* original direction of a service flow: destination (and maybe source) rewritten */ \
    X(reply, "reply")     /* reply direction of a service flow: translated back to the VIP / client */         \
    X(forward, "forward") /* no service involved: routed untouched (TTL decremented) */                        \
    X(local, "local")     /* addressed to the gateway itself: ARP and ICMP echo answered by output */          \
    X(reject, "reject")   /* answered by the dataplane: TCP RST or ICMP port-unreachable, sent back */         \
    X(drop, "drop")       /* freed and counted under a DropReason */
enum class Verdict : uint8_t { SVCGATE_VERDICTS(SVCGATE_ENUM_ID) };
inline constexpr std::array kVerdictNames{SVCGATE_VERDICTS(SVCGATE_ENUM_NAME)};
inline constexpr unsigned kVerdicts = kVerdictNames.size();

inline std::string_view verdict_name(Verdict v) noexcept { return enum_name(v, kVerdictNames); }

// X(name, description). The reasons of `reject` verdicts are listed here too (reject_*): every
// refusal has a reason. A packet freed is counted under its reason in WorkerCounters::drops, a
// packet answered in WorkerCounters::rejects.
#define SVCGATE_DROP_REASONS(X)                                                                                       \
    X(none, "not dropped")                                                                                            \
    X(eth_truncated, "frame shorter than an Ethernet header")                                                         \
    X(mbuf_chained, "frame larger than one mbuf (chained segments are not parsed)")                                   \
    X(vlan_truncated, "frame too short for its 802.1Q tag")                                                           \
    X(vlan_stacked, "more than one VLAN tag")                                                                         \
    X(vlan_unknown, "tagged with a VLAN ID no port of its device has (dataplane.ports[].vlan)")                       \
    X(ethertype_unknown, "EtherType neither IPv4, ARP nor IPv6")                                                      \
    X(arp_truncated, "ARP packet shorter than an IPv4 ARP body")                                                      \
    X(ip_truncated, "frame shorter than an IPv4 header")                                                              \
    X(ip_bad_version, "IP version is not 4")                                                                          \
    X(ip_bad_ihl, "IHL below 5 or past the frame")                                                                    \
    X(ip_bad_total_length, "IP total length below the header or past the frame")                                      \
    X(ip_bad_checksum, "IPv4 header checksum does not verify")                                                        \
    X(ip_ttl_exceeded, "TTL 0 or 1: not forwarded")                                                                   \
    X(frag_tiny, "first fragment without its whole L4 header (RFC 3128, RFC 7112), or TCP at offset 8 (RFC 1858)")    \
    X(frag_oversize, "fragment ending past 65,535 bytes")                                                             \
    X(frag_misaligned, "fragment with no data, or not the last and not a multiple of 8 bytes")                        \
    X(frag_overlap, "fragment overlapping another of its datagram: the whole datagram is dropped")                    \
    X(frag_duplicate, "fragment seen before (same offset and length)")                                                \
    X(frag_too_many, "more fragments than a datagram may have (fragments.max_per_datagram)")                          \
    X(frag_hold_full, "fragment before its first fragment, and the hold is full (fragments.max_held)")                \
    X(frag_table_full, "no room for another fragmented datagram (fragments.max_datagrams)")                           \
    X(frag_timeout, "fragment held longer than fragments.timeout_ms without its first fragment")                      \
    X(frag_first_dropped, "later fragment of a datagram whose first fragment was dropped or refused")                 \
    X(ip_bad_source, "source address is broadcast, multicast or zero")                                                \
    X(ip6_truncated, "frame shorter than an IPv6 header")                                                             \
    X(ip6_bad_version, "IPv6 EtherType but IP version is not 6")                                                      \
    X(ip6_bad_payload_length, "IPv6 payload length past the frame")                                                   \
    X(ip6_multicast, "IPv6 multicast that is not Neighbor Discovery")                                                 \
    X(ip6_ext_truncated, "an IPv6 extension header past the payload")                                                 \
    X(ip6_hbh_not_first, "IPv6 hop-by-hop options header not right after the IPv6 header")                            \
    X(ip6_ext_chain_too_long, "more than 8 IPv6 extension headers (a loop of one, an overlong chain)")                \
    X(ip6_routing_type0, "IPv6 routing header type 0 (RFC 5095)")                                                     \
    X(ip6_scope, "IPv6 link-local source or destination, or loopback destination: never forwarded")                   \
    X(l2_not_for_us, "broadcast or multicast frame that is not ARP")                                                  \
    X(tcp_truncated, "TCP header past the IP payload")                                                                \
    X(tcp_bad_doff, "TCP data offset below 5 or past the IP payload")                                                 \
    X(tcp_bad_flags, "TCP flag combination no stack sends (SYN+FIN, null, xmas)")                                     \
    X(udp_truncated, "UDP header past the IP payload")                                                                \
    X(udp_bad_length, "UDP length field below 8 or past the IP payload")                                              \
    X(icmp_truncated, "ICMP or ICMPv6 header past the IP payload")                                                    \
    X(icmp_error_bad_inner, "ICMP error without a whole embedded IP header and 8 bytes of L4")                        \
    X(icmp6_bad_checksum, "ICMPv6 checksum does not verify")                                                          \
    X(nd_invalid, "Neighbor Discovery message failing RFC 4861 7.1 (hop limit, code, length)")                        \
    X(nd_bad_target, "Neighbor Solicitation or Advertisement for a multicast target")                                 \
    X(sctp_truncated, "SCTP common header past the IP payload")                                                       \
    X(no_route, "no route to the destination")                                                                        \
    X(service_cidr_unallocated, "inside a service CIDR but no ClusterIP")                                             \
    X(lb_source_range, "source outside the Service's loadBalancerSourceRanges")                                       \
    X(no_local_endpoints, "traffic policy Local and no local endpoint")                                               \
    X(flow_table_full, "flow table has no room for a new flow")                                                       \
    X(source_new_flow_limit, "the source started more new flows this second than allowed")                            \
    X(snat_ports_exhausted, "no free SNAT source port towards this endpoint")                                         \
    X(flow_reply_clash, "the reply tuple of a new flow is in use, as is every source port tried instead")             \
    X(pickup_awaits_replica,                                                                                          \
      "replicating: a masqueraded or preserved connection seen mid-stream waits for its replica")                     \
    X(reply_awaits_replica,                                                                                           \
      "replicating: a reply to a preserved client with no flow: held for its replica, dropped when the hold is full") \
    X(replica_late, "replicating: a reply held for its flow's replica, which did not come within 100 ms")             \
    X(conntrack_invalid, "packet conntrack calls INVALID for its flow")                                               \
    X(reject_no_endpoints, "rejected: the Service has no usable endpoint")                                            \
    X(reject_unknown_port, "rejected: a ClusterIP on a port no Service uses")                                         \
    X(reject_failed, "a reject or an ND answer could not be built (no room in the mbuf)")                             \
    X(reject_endpoint_gone, "rejected: a reload removed this TCP flow's endpoint (RST)")                              \
    X(endpoint_gone, "a reload removed this flow's endpoint")                                                         \
    X(arp_consumed, "ARP reply, announcement or request for another host: read, not forwarded")                       \
    X(nd_consumed, "Neighbor Advertisement, or Solicitation for another host: read, not forwarded")                   \
    X(to_gateway, "addressed to the gateway itself; only ARP, ND and echo are answered")                              \
    X(punt_limited, "for the host interface, over its rate limit (dataplane.host_path)")                              \
    X(frag_needed, "rejected: IPv4 with DF larger than the egress MTU (ICMP fragmentation needed sent)")              \
    X(packet_too_big, "rejected: IPv6 larger than the egress MTU (ICMPv6 Packet Too Big sent)")                       \
    X(icmp_rate_limited, "an ICMP error over the gateway's rate limit (icmp_errors_per_second)")                      \
    X(frag_out_failed, "could not be fragmented to the egress MTU (no mbufs)")                                        \
    X(neighbor_unresolved, "next hop did not answer ARP or ND in time")                                               \
    X(neighbor_hold_full, "too many packets waiting for ARP or ND resolution")                                        \
    X(tx_full, "transmit queue full")

enum class DropReason : uint8_t {
#define SVCGATE_X(name, desc) name,
    SVCGATE_DROP_REASONS(SVCGATE_X)
#undef SVCGATE_X
        count_
};
inline constexpr unsigned kDropReasons = static_cast<unsigned>(DropReason::count_);

std::string_view drop_reason_name(DropReason r) noexcept;
std::string_view drop_reason_description(DropReason r) noexcept;

}  // namespace svcgate::dp
