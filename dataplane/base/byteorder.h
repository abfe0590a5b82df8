// Byte order of the wire's fields.
//
// Runs on: anywhere (pure functions).
#pragma once

#include <bit>
#include <cstdint>

namespace svcgate::dp {

// Byte-order conversion, constexpr (rte_cpu_to_be_* is not usable in constant expressions) and
// through the compiler's builtin: DPDK 22.11's rte_bswap16/32 on x86 is an `asm volatile`, which
// the compiler may not move past another. The builtin is as many instructions (13 an established
// packet, callgrind), scheduled freely: BM_Parse +7.7% (bench/HISTORY.md round thirteen).
constexpr uint32_t to_be32(uint32_t h) noexcept {
    if constexpr (std::endian::native == std::endian::little) return __builtin_bswap32(h);
    return h;
}
constexpr uint16_t to_be16(uint16_t h) noexcept {
    if constexpr (std::endian::native == std::endian::little) return __builtin_bswap16(h);
    return h;
}
constexpr uint32_t from_be32(uint32_t b) noexcept { return to_be32(b); }
constexpr uint16_t from_be16(uint16_t b) noexcept { return to_be16(b); }

}  // namespace svcgate::dp
