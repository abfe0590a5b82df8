#include "dataplane/base/checksum.h"

#include <cstring>

#include <rte_ip.h>

namespace svcgate::dp {

uint16_t ipv4_l4_csum(const void* ip_hdr, const void* l4, size_t l4_len) noexcept {
    const auto* ip = static_cast<const rte_ipv4_hdr*>(ip_hdr);
    uint32_t sum = 0;
    sum = csum_partial(&ip->src_addr, 4, sum);
    sum = csum_partial(&ip->dst_addr, 4, sum);
    sum += to_be16(static_cast<uint16_t>(ip->next_proto_id));
    sum += to_be16(static_cast<uint16_t>(l4_len));
    sum = csum_partial(l4, l4_len, sum);
    return static_cast<uint16_t>(~csum_fold(sum));
}

namespace {
// Castagnoli polynomial, reflected (RFC 4960 appendix B / RFC 3309).
constexpr uint32_t kCrc32cPoly = 0x82F63B78u;
struct Crc32cTable {
    uint32_t t[256];
    constexpr Crc32cTable() : t{} {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
            t[i] = c;
        }
    }
};
constexpr Crc32cTable kCrcTable{};
}  // namespace

rte_be32_t sctp_crc32c(const void* sctp, size_t len) noexcept {
    const auto* p = static_cast<const uint8_t*>(sctp);
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; ++i) {
        uint8_t b = (i >= 8 && i < 12) ? 0 : p[i];  // bytes 8..11 are the checksum field
        crc = kCrcTable.t[(crc ^ b) & 0xff] ^ (crc >> 8);
    }
    crc = ~crc;
    // RFC 4960 B: the CRC is stored least significant byte first ("reflected" into network order).
    rte_be32_t out;
    uint8_t bytes[4] = {static_cast<uint8_t>(crc), static_cast<uint8_t>(crc >> 8), static_cast<uint8_t>(crc >> 16),
                        static_cast<uint8_t>(crc >> 24)};
    std::memcpy(&out, bytes, 4);
    return out;
}

}  // namespace svcgate::dp
