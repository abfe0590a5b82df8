// The egress MTU (RFC 1191, RFC 8201): an IPv4 packet with DF or an IPv6 packet
// larger than its egress port's MTU is answered with ICMP fragmentation needed / ICMPv6 Packet
// Too Big quoting the packet as its sender sent it (so a translated flow's sender recognises its
// own packet), under a per-worker rate limit (the forward stage decides: pipeline/forward.cpp); an
// IPv4 packet without DF is fragmented.
//
// Runs on: worker lcores, trace, tests (the token bucket is per worker).
#pragma once

#include <algorithm>
#include <cstdint>

#include <rte_mbuf.h>

namespace svcgate::dp {

// A per-worker token bucket for the ICMP errors the gateway originates (RFC 1812 4.3.2.8).
struct TokenBucket {
    uint32_t per_second = 1000;  // 0: no limit
    uint64_t tokens_milli = 0;   // thousandths of a token
    uint64_t last_ms = 0;

    bool allow(uint64_t now_ms) noexcept {
        if (per_second == 0) return true;
        const uint64_t cap = uint64_t{per_second} * 1000;
        if (last_ms == 0 || now_ms - last_ms > 1000)
            tokens_milli = cap;
        else
            tokens_milli = std::min<uint64_t>(cap, tokens_milli + (now_ms - last_ms) * per_second);
        last_ms = now_ms;
        if (tokens_milli < 1000) return false;
        tokens_milli -= 1000;
        return true;
    }
};

// Splits the IPv4 frame `m` (L2 header `l2` bytes) into fragments of at most `mtu` IP bytes, each
// a one-segment mbuf from `pool` with the same L2 header; IP options without the copy flag only in
// the first (RFC 791 3.2). `m` is left to the caller. Returns the number of fragments, 0 on failure.
unsigned fragment_ipv4(const rte_mbuf* m, uint16_t l2, uint16_t mtu, rte_mempool* pool, rte_mbuf** out,
                       unsigned max) noexcept;

}  // namespace svcgate::dp
