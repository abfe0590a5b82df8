// Parse: frame bytes → PacketMeta (offsets, 5-tuple, TCP flags) or a DropReason. Every read is
// bounds-checked against the frame length before it happens; nothing is written.
//
// Runs on: worker lcores, `svcgatectl trace`, tests. Reads: the frame. Writes: the PacketMeta.
#pragma once

#include <cstdint>

#include "types.h"
#include "verdict.h"

namespace svcgate::dp {

enum class L3Kind : uint8_t { ipv4, arp };

// ICMP types the dataplane tells apart (RFC 792; DPDK 22.11 names only the echo pair).
enum IcmpType : uint8_t {
    kIcmpEchoReply = 0, kIcmpDestUnreach = 3, kIcmpSourceQuench = 4, kIcmpEchoRequest = 8,
    kIcmpTimeExceeded = 11, kIcmpParamProblem = 12,
};

// TCP flag bits as they sit in byte 13 of the TCP header.
enum TcpFlag : uint8_t { kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10, kUrg = 0x20 };

struct PacketMeta {
    FlowKey key;             // for ICMP echo: sport = dport = identifier
    uint16_t l3_off = 0;     // IPv4 or ARP header
    uint16_t l4_off = 0;     // L4 header (IPv4 only)
    uint16_t l4_len = 0;     // IP payload length, from the IP total length
    uint16_t ip_len = 0;     // IP total length
    uint8_t tcp_flags = 0;
    uint8_t icmp_type = 0;
    L3Kind l3 = L3Kind::ipv4;
    bool more_fragments = false;  // first fragment of a fragmented datagram
    // ICMP errors (destination unreachable, time exceeded, parameter problem, source quench)
    // about a TCP/UDP/SCTP packet: where the embedded IPv4 header starts (0 = not such an error),
    // how many bytes of its L4 header came along, and the embedded tuple reversed: the flow's
    // tuple in the error's own direction, which the flow table is asked for (conntrack's RELATED).
    uint16_t inner_off = 0;
    uint16_t inner_l4_len = 0;
    FlowKey err_key;
};

struct ParseOptions {
    bool ip_csum_verified = false;  // the NIC said the IPv4 header checksum is good
};

// RFC 1812 section 5.2.2 checks (numbered in the implementation), then the L4 header.
[[nodiscard]] DropReason parse_packet(const uint8_t* frame, uint32_t len, PacketMeta& meta,
                                      ParseOptions opts = {}) noexcept;

}  // namespace svcgate::dp
