// Strong types for the fast path: addresses and ports stay in network byte order from parse to
// rewrite; conversion to host order happens only where a human or a hash wants it.
//
// Runs on: any thread. Owns: nothing (plain value types).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#if defined(__SSSE3__)
#include <immintrin.h>
#endif
#include <compare>

#include <rte_byteorder.h>

namespace svcgate::dp {

// constexpr byte-order conversion (rte_cpu_to_be_* is not usable in constant expressions).
constexpr uint32_t to_be32(uint32_t h) noexcept {
    if constexpr (std::endian::native == std::endian::little) return __builtin_bswap32(h);
    return h;
}
constexpr uint16_t to_be16(uint16_t h) noexcept {
    if constexpr (std::endian::native == std::endian::little) return __builtin_bswap16(h);
    return h;
}

// An IPv4 address in network byte order. Comparisons are on the raw value: equality is what the
// fast path needs; ordering is only for sorted control-plane containers.
struct Ip4 {
    rte_be32_t be = 0;

    static constexpr Ip4 from_host(uint32_t h) noexcept { return Ip4{to_be32(h)}; }
    constexpr uint32_t host() const noexcept { return to_be32(be); }
    constexpr bool is_zero() const noexcept { return be == 0; }
    friend constexpr bool operator==(Ip4 a, Ip4 b) noexcept { return a.be == b.be; }
    friend constexpr auto operator<=>(Ip4 a, Ip4 b) noexcept { return a.host() <=> b.host(); }
};

// A prefix: address (host bits cleared by the builder) and length 0..32.
struct Cidr4 {
    Ip4 addr;
    uint8_t len = 0;

    constexpr uint32_t mask_host() const noexcept {
        return len == 0 ? 0u : ~uint32_t{0} << (32 - len);
    }
    constexpr bool contains(Ip4 a) const noexcept {
        return (a.host() & mask_host()) == (addr.host() & mask_host());
    }
    friend constexpr bool operator==(Cidr4, Cidr4) noexcept = default;
};

enum class Proto : uint8_t { icmp = 1, tcp = 6, udp = 17, sctp = 132 };

// The 5-tuple of one direction of a flow. 16 bytes, network byte order, no padding holes left
// uninitialised: two keys compare with one 16-byte memcmp (l3fwd's masked xmm key).
struct FlowKey {
    Ip4 src;
    Ip4 dst;
    rte_be16_t sport = 0;
    rte_be16_t dport = 0;
    uint8_t proto = 0;
    uint8_t pad[3] = {0, 0, 0};

    // The key of the packets coming back: source and destination swapped.
    // One 16-byte shuffle where SSSE3 is there: built field by field, the key is written in
    // pieces and read back whole: a store-forwarding stall that held 17% of process_burst's samples.
    FlowKey reversed() const noexcept {
#if defined(__SSSE3__)
        const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(this));
        const __m128i r = _mm_shuffle_epi8(k, _mm_setr_epi8(4, 5, 6, 7, 0, 1, 2, 3, 10, 11, 8, 9, 12, 13, 14, 15));
        FlowKey out;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(&out), r);
        return out;
#else
        return FlowKey{.src = dst, .dst = src, .sport = dport, .dport = sport, .proto = proto};
#endif
    }
    friend bool operator==(const FlowKey& a, const FlowKey& b) noexcept {
        return std::memcmp(&a, &b, sizeof(FlowKey)) == 0;
    }
};
static_assert(sizeof(FlowKey) == 16, "FlowKey must stay one 16-byte load");

// An endpoint by address: what session-affinity records pin and what Maglev tables hash, so that
// the choice survives a reload that renumbers the snapshot. One word: ip << 16 | port, both in
// network order.
struct EndpointKey {
    Ip4 ip;
    rte_be16_t port = 0;

    constexpr uint64_t encode() const noexcept { return uint64_t{ip.be} << 16 | port; }
    static constexpr EndpointKey decode(uint64_t v) noexcept {
        return EndpointKey{Ip4{static_cast<rte_be32_t>(v >> 16)}, static_cast<rte_be16_t>(v)};
    }
    friend constexpr bool operator==(EndpointKey, EndpointKey) noexcept = default;
};

inline constexpr uint16_t kBurst = 32;  // packets per burst: every per-burst array has this size

}  // namespace svcgate::dp
