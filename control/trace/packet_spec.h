// Packets written the way tcpdump prints them, for `svcgatectl trace` and the tests:
//   tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]
//   udp 10.244.3.5:34361 > 10.96.0.10:53
//   icmp 10.0.0.1 > 10.0.0.2            (echo request)
// and frames built from them (Ethernet + IPv4 + L4, checksums filled in).
//
// Runs on: the control thread and tools. A spec that does not read fails with the spec and why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/base/status.h"
#include "dataplane/pipeline/parse.h"
#include "dataplane/base/types.h"

namespace svcgate::ctl {

struct PacketSpec {
    bool v6 = false;  // which of the two keys holds the tuple
    dp::FlowKey key;
    dp::FlowKey6 key6;
    uint8_t tcp_flags = 0;
    uint8_t ttl = 64;
    uint16_t payload = 0;  // bytes of zero payload
};

// `text` (a spec, or a line of `tcpdump -n`) into `out`.
Status parse_packet_spec(const std::string& text, PacketSpec& out);
// "tcp a:p > b:q [S.]" from a parsed frame; TCP flags in tcpdump's letters.
// "tcp 10.0.0.1:80 > 10.0.0.2:4000"; IPv6 endpoints as [addr]:port (RFC 5952 text).
std::string format_tuple(const dp::FlowKey& k);
std::string format_tuple(const dp::FlowKey6& k);
std::string format_tcp_flags(uint8_t flags);
std::vector<uint8_t> build_frame(const PacketSpec& p);

}  // namespace svcgate::ctl
