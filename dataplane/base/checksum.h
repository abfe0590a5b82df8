// Internet checksums. The fast path updates them incrementally (RFC 1624, eqn. 3:
// HC' = ~(~HC + ~m + m')); full recomputation exists for building packets and for tests.
// One's-complement sums do not depend on byte order as long as every word is taken in the same
// order, so the helpers work on the raw network-order values as they sit in the header.
//
// Runs on: any thread. Owns: nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>

#include "dataplane/base/byteorder.h"

namespace svcgate::dp {

constexpr uint16_t csum_fold(uint32_t sum) noexcept {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

// RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), for any number of changed words: sum the deltas of
// the changes (each ~old + new), then apply the sum to the checksum once. One's-complement
// addition is associative, so one fold covers them all; the sum stays far below 2^32.
constexpr uint32_t csum_delta16(rte_be16_t from, rte_be16_t to) noexcept {
    return uint32_t{static_cast<uint16_t>(~from)} + to;
}
constexpr uint32_t csum_delta32(rte_be32_t from, rte_be32_t to) noexcept {
    return (~from & 0xffffu) + (~from >> 16) + (to & 0xffffu) + (to >> 16);
}
constexpr rte_be16_t csum_apply(rte_be16_t csum, uint32_t delta) noexcept {
    return static_cast<rte_be16_t>(~csum_fold(uint32_t{static_cast<uint16_t>(~csum)} + delta));
}

// One 16-bit word.
inline void csum_replace2(rte_be16_t* csum, rte_be16_t from, rte_be16_t to) noexcept {
    *csum = csum_apply(*csum, csum_delta16(from, to));
}

// Plain one's-complement sum of a buffer (network-order words), folded to 16 bits plus carry,
// not inverted. Inline and word-wise: it verifies every IPv4 header on ports without checksum
// offload. Summing 32-bit words into 64 bits equals summing 16-bit words, as 2^16 = 1 mod 0xffff.
inline uint32_t csum_partial(const void* data, size_t len, uint32_t sum = 0) noexcept {
    const auto* p = static_cast<const uint8_t*>(data);
    uint64_t acc = sum;
    for (; len >= 4; p += 4, len -= 4) {
        uint32_t w;
        std::memcpy(&w, p, 4);
        acc += w;
    }
    if (len >= 2) {
        uint16_t w;
        std::memcpy(&w, p, 2);
        acc += w;
        p += 2;
        len -= 2;
    }
    if (len) {
        uint16_t w = 0;
        std::memcpy(&w, p, 1);  // the odd byte is the high-order byte of a zero-padded word
        acc += w;
    }
    acc = (acc & 0xffffffff) + (acc >> 32);
    acc = (acc & 0xffffffff) + (acc >> 32);
    return static_cast<uint32_t>((acc & 0xffff) + (acc >> 16));
}

// The Internet checksum (RFC 1071) of a buffer, its checksum field taken as it is: 0 for an IPv4
// header or ICMP message whose checksum verifies; the value to store when the field is zero.
inline uint16_t inet_csum(const void* data, size_t len) noexcept {
    return static_cast<uint16_t>(~csum_fold(csum_partial(data, len)));
}

// Whether an IPv4 header of `len` bytes (20 to 60, a multiple of 4: its IHL) verifies, as
// inet_csum(h, len) == 0: the parser's check of every header on ports without checksum offload.
// As 2^16 = 1 mod 0xffff, the one's-complement sum of the header's words is their integer sum mod
// 0xffff, 0xffff standing for 0 when the sum is not 0; the checksum verifies when it is 0xffff, so
// when the integer sum is a non-zero multiple of 0xffff. The words are added in pairs (each 8-byte
// load's halves apart) and tested with one multiply-based remainder, instead of csum_partial's
// chain of adds and folds: that chain was the longest of the parse stage's fast path (about a
// third of parse_burst's samples through the port).
[[gnu::always_inline]] inline bool ipv4_header_csum_ok(const void* h, size_t len) noexcept {
    const auto* p = static_cast<const uint8_t*>(h);
    uint64_t sum = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        sum += (w & 0xffffffff) + (w >> 32);
    }
    if (i < len) {
        uint32_t w;
        std::memcpy(&w, p + i, 4);
        sum += w;
    }
    return sum % 0xffff == 0 && sum != 0;
}

// Full TCP/UDP checksum with the IPv4 pseudo-header (RFC 793 / RFC 768) over `l4_len` bytes
// starting at `l4`, checksum field taken as it is (0 = verifies when the field is filled in).
uint16_t ipv4_l4_csum(const void* ip_hdr, const void* l4, size_t l4_len) noexcept;

// The IPv6 pseudo-header's sum (RFC 8200 8.1): both addresses, the upper-layer length and the
// next header, not folded, to seed csum_partial over the upper-layer packet.
inline uint32_t ipv6_pseudo_sum(const void* ip6_hdr, uint32_t l4_len, uint8_t proto) noexcept {
    uint32_t s = csum_partial(static_cast<const uint8_t*>(ip6_hdr) + 8, 32);
    return s + to_be16(static_cast<uint16_t>(l4_len >> 16)) + to_be16(static_cast<uint16_t>(l4_len)) + to_be16(proto);
}

// Full upper-layer checksum (TCP, UDP, ICMPv6) with the IPv6 pseudo-header over `l4_len` bytes at
// `l4`, checksum field taken as it is (0 = verifies).
inline uint16_t ipv6_l4_csum(const void* ip6_hdr, const void* l4, uint32_t l4_len, uint8_t proto) noexcept {
    return static_cast<uint16_t>(~csum_fold(csum_partial(l4, l4_len, ipv6_pseudo_sum(ip6_hdr, l4_len, proto))));
}

// SCTP's CRC32c (RFC 4960 appendix B) over the whole SCTP packet, checksum field taken as zero.
rte_be32_t sctp_crc32c(const void* sctp, size_t len) noexcept;

}  // namespace svcgate::dp
