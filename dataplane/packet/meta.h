// The packet's contract under every stage and feature: what parse (pipeline/parse.h) says of a
// frame, as PacketMeta (offsets, the 5-tuple, TCP flags, an ICMP error's embedded tuple, a
// fragment's place), and the TCP flag and ICMP type names the features read it by.
//
// Runs on: worker lcores, `svcgatectl trace`, tests. A plain value.
#pragma once

#include <cstdint>

#include "dataplane/base/types.h"

namespace svcgate::dp {

enum class L3Kind : uint8_t { ipv4, arp, ipv6 };

// ICMP types the dataplane tells apart (RFC 792; DPDK 22.11 names only the echo pair).
enum IcmpType : uint8_t {
    kIcmpEchoReply = 0,
    kIcmpDestUnreach = 3,
    kIcmpSourceQuench = 4,
    kIcmpEchoRequest = 8,
    kIcmpTimeExceeded = 11,
    kIcmpParamProblem = 12,
};

// ICMPv6 types the dataplane tells apart (RFC 4443, RFC 4861).
enum Icmp6Type : uint8_t {
    kIcmp6DestUnreach = 1,
    kIcmp6PacketTooBig = 2,
    kIcmp6TimeExceeded = 3,
    kIcmp6ParamProblem = 4,
    kIcmp6EchoRequest = 128,
    kIcmp6EchoReply = 129,
    kIcmp6RouterSolicit = 133,
    kIcmp6RouterAdvert = 134,
    kIcmp6NeighborSolicit = 135,
    kIcmp6NeighborAdvert = 136,
    kIcmp6Redirect = 137,
};

// TCP flag bits as they sit in byte 13 of the TCP header.
enum TcpFlag : uint8_t { kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10, kUrg = 0x20 };

struct PacketMeta {
    // The tuple of the packet's family (l3): key for IPv4, key6 for IPv6. For ICMP echo
    // sport = dport = identifier. parse_packet zeroes the whole struct first (one memset); the
    // constructor zeroes the IPv4 keys, which is all the other users need.
    union {
        FlowKey key;
        FlowKey6 key6;
    };
    uint16_t l3_off = 0;  // IPv4, IPv6 or ARP header
    uint16_t l4_off = 0;  // L4 header (IPv6: after the extension headers)
    uint16_t l4_len = 0;  // L4 header and payload, from the IP total / payload length
    uint16_t ip_len = 0;  // IPv4 total length; IPv6: 40 + payload length
    uint8_t tcp_flags = 0;
    uint8_t icmp_type = 0;
    L3Kind l3 = L3Kind::ipv4;
    // IPv4's flags, in one byte: MF (also IPv6's M: not the last fragment of its datagram) and DF
    // (too big for the egress MTU: an error back, not fragments; mtu.h).
    bool more_fragments : 1 = false;
    bool dont_fragment : 1 = false;
    // ICMP / ICMPv6 errors (destination unreachable, time exceeded, parameter problem, source
    // quench, packet too big) about a TCP/UDP/SCTP packet: where the embedded IP header starts (0 =
    // not such an error), where its L4 header starts, how many bytes of that came along, and the
    // embedded tuple reversed: the flow's tuple in the error's own direction, which the flow table
    // is asked for (conntrack's RELATED).
    uint16_t inner_off = 0;
    uint16_t inner_l4_off = 0;
    uint16_t inner_l4_len = 0;
    // A fragment (RFC 791 / RFC 8200 4.5; is_fragment()): its offset in bytes (0: the first
    // fragment, which carries the L4 header; a later one has no ports and no L4 parse). In the
    // padding before the union: PacketMeta stays 100 bytes.
    uint16_t frag_off = 0;
    // Where a fragment's data starts in the frame (IPv4: after the header; IPv6: after the
    // Fragment header) and its datagram's identification. A fragment is never read as an ICMP
    // error (parse skips errors that are fragments), so they share the error key's room.
    struct FragFields {
        uint32_t id;
        uint16_t data;
    };
    union {
        FlowKey err_key;
        FlowKey6 err_key6;
        FragFields frag;
    };

    PacketMeta() noexcept : key{}, err_key{} {}
    bool is_v6() const noexcept { return l3 == L3Kind::ipv6; }
    // An IPv6 atomic fragment (a Fragment header, offset 0, M clear, RFC 6946) is not one.
    bool is_fragment() const noexcept { return frag_off != 0 || more_fragments; }
    bool later_fragment() const noexcept { return frag_off != 0; }
    // The fragment's data bytes (the datagram's bytes frag_off .. frag_off + frag_len).
    uint16_t frag_len() const noexcept { return static_cast<uint16_t>(l3_off + ip_len - frag.data); }
    // Neighbor Discovery (RFC 4861: router and neighbor solicitations and advertisements,
    // redirects): for the output stage, never forwarded.
    bool is_nd() const noexcept {
        return l3 == L3Kind::ipv6 && key6.proto == static_cast<uint8_t>(Proto::icmp6) &&
            icmp_type >= kIcmp6RouterSolicit && icmp_type <= kIcmp6Redirect;
    }
};
// dont_fragment's bit in the byte its bit-fields share (after `l3`), for the stage that writes the
// byte whole (parse.cpp's fast path; ParseBurst.FlagsByteLayout checks it).
inline constexpr uint8_t kDontFragmentBit = 0x02;

// Copied whole from a zero object by parse_packet (six 16-byte loads and stores): a field added
// past the padding costs every packet.
static_assert(sizeof(PacketMeta) == 100);

}  // namespace svcgate::dp
