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

namespace svcgate::dp {

constexpr uint16_t csum_fold(uint32_t sum) noexcept {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

// RFC 1624 eqn. 3 for one 16-bit word.
inline void csum_replace2(rte_be16_t* csum, rte_be16_t from, rte_be16_t to) noexcept {
    uint32_t sum = static_cast<uint16_t>(~*csum);
    sum += static_cast<uint16_t>(~from);
    sum += to;
    *csum = static_cast<rte_be16_t>(~csum_fold(sum));
}

// RFC 1624 eqn. 3 for a 32-bit field (an address): two words at once.
inline void csum_replace4(rte_be16_t* csum, rte_be32_t from, rte_be32_t to) noexcept {
    uint32_t sum = static_cast<uint16_t>(~*csum);
    sum += static_cast<uint16_t>(~from & 0xffff) + static_cast<uint16_t>(~from >> 16);
    sum += (to & 0xffff) + (to >> 16);
    *csum = static_cast<rte_be16_t>(~csum_fold(sum));
}

// UDP (RFC 768): a zero checksum means "none" and must stay zero; a computed zero is sent as
// 0xffff. The helpers keep both rules.
inline void udp_csum_replace2(rte_be16_t* csum, rte_be16_t from, rte_be16_t to) noexcept {
    if (*csum == 0) return;
    csum_replace2(csum, from, to);
    if (*csum == 0) *csum = 0xffff;
}
inline void udp_csum_replace4(rte_be16_t* csum, rte_be32_t from, rte_be32_t to) noexcept {
    if (*csum == 0) return;
    csum_replace4(csum, from, to);
    if (*csum == 0) *csum = 0xffff;
}

// Plain one's-complement sum of a buffer (network-order words), not folded or inverted.
uint32_t csum_partial(const void* data, size_t len, uint32_t sum = 0) noexcept;

// The Internet checksum (RFC 1071) of a buffer, its checksum field taken as it is: 0 for an IPv4
// header or ICMP message whose checksum verifies; the value to store when the field is zero.
uint16_t inet_csum(const void* data, size_t len) noexcept;

// True when an IPv4 header of `ihl` bytes (a multiple of 4) verifies: 32-bit words summed into
// 64 bits, then folded; the per-packet check on ports without checksum offload.
inline bool ipv4_header_csum_ok(const uint8_t* ip, unsigned ihl) noexcept {
    uint64_t sum = 0;
    for (unsigned i = 0; i < ihl; i += 4) {
        uint32_t w;
        std::memcpy(&w, ip + i, 4);
        sum += w;
    }
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffffffff) + (sum >> 32);
    uint32_t s = static_cast<uint32_t>(sum);
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return s == 0xffff;
}

// Full TCP/UDP checksum with the IPv4 pseudo-header (RFC 793 / RFC 768) over `l4_len` bytes
// starting at `l4`, checksum field taken as it is (0 = verifies when the field is filled in).
uint16_t ipv4_l4_csum(const void* ip_hdr, const void* l4, size_t l4_len) noexcept;

// SCTP's CRC32c (RFC 4960 appendix B) over the whole SCTP packet, checksum field taken as zero.
rte_be32_t sctp_crc32c(const void* sctp, size_t len) noexcept;

}  // namespace svcgate::dp
