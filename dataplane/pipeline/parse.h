// Parse: frame bytes → PacketMeta (offsets, 5-tuple, TCP flags) or a DropReason. Every read is
// bounds-checked against the frame length before it happens; nothing is written.
//
// Runs on: worker lcores, `svcgatectl trace`, tests. Reads: the frame. Writes: the PacketMeta.
#pragma once

#include <cstdint>

#include "dataplane/packet/meta.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

struct ParseOptions {
    bool ip_csum_verified = false;  // the NIC said the IPv4 header checksum is good
    bool tags_checked = false;      // an 802.1Q tag's VLAN ID is its port's (Burst::tags_checked)
};

// IPv4: RFC 1812 section 5.2.2 checks (numbered in the implementation), then the L4 header.
// IPv6: RFC 8200's header and extension-header chain (bounded), then the L4 header; ICMPv6
// checksums are verified (the gateway answers and translates ICMPv6), Neighbor Discovery is
// checked as RFC 4861 7.1 requires before anything reads it.
[[nodiscard]] DropReason parse_packet(const uint8_t* frame, uint32_t len, PacketMeta& meta,
                                      ParseOptions opts = {}) noexcept;

}  // namespace svcgate::dp
