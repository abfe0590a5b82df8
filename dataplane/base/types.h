// Strong types for the fast path: addresses and ports stay in network byte order from parse to
// rewrite; conversion to host order happens only where a human or a hash wants it.
//
// Runs on: any thread. Owns: nothing (plain value types).
#pragma once

#include <cstddef>
#include <bit>
#include <cstdint>
#include <cstring>
#if defined(__SSSE3__)
#include <immintrin.h>
#endif
#include <compare>

#include <rte_byteorder.h>

#include "dataplane/base/byteorder.h"

namespace svcgate::dp {

// The little-endian fields of the formats svcgate writes itself (flow records, the flow state
// file, replication datagrams): the low `bytes` (1-8) of v at p, and back.
inline void store_le(uint8_t* p, uint64_t v, unsigned bytes) noexcept {
    for (unsigned i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint64_t load_le(const uint8_t* p, unsigned bytes) noexcept {
    uint64_t v = 0;
    for (unsigned i = bytes; i-- > 0;) v = v << 8 | p[i];
    return v;
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

    constexpr uint32_t mask_host() const noexcept { return len == 0 ? 0u : ~uint32_t{0} << (32 - len); }
    constexpr bool contains(Ip4 a) const noexcept { return (a.host() & mask_host()) == (addr.host() & mask_host()); }
    friend constexpr bool operator==(Cidr4, Cidr4) noexcept = default;
};

// An IPv6 address in network byte order (RFC 8200). Equality and ordering are bytewise: the
// same as numeric order for an address in network order.
struct Ip6 {
    alignas(4) uint8_t b[16] = {};

    constexpr bool is_zero() const noexcept {
        for (uint8_t x : b)
            if (x) return false;
        return true;
    }
    constexpr bool is_multicast() const noexcept { return b[0] == 0xff; }  // ff00::/8
    constexpr bool is_link_local() const noexcept { return b[0] == 0xfe && (b[1] & 0xc0) == 0x80; }
    constexpr bool is_loopback() const noexcept {
        for (int i = 0; i < 15; ++i)
            if (b[i]) return false;
        return b[15] == 1;
    }
    // ::ffff:a.b.c.d (RFC 4291 2.5.5.2): how IpAddr holds an IPv4 address.
    constexpr bool is_v4_mapped() const noexcept {
        for (int i = 0; i < 10; ++i)
            if (b[i]) return false;
        return b[10] == 0xff && b[11] == 0xff;
    }
    // Two words, not memcmp: GCC calls libc's memcmp for it, on every flow and neighbor match.
    friend bool operator==(const Ip6& x, const Ip6& y) noexcept {
        uint64_t a[2], b[2];
        std::memcpy(a, x.b, 16);
        std::memcpy(b, y.b, 16);
        return ((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0;
    }
    friend auto operator<=>(const Ip6& x, const Ip6& y) noexcept { return std::memcmp(x.b, y.b, 16) <=> 0; }
};
static_assert(sizeof(Ip6) == 16);

// An IPv6 prefix: address (host bits cleared by the builder) and length 0..128.
struct Cidr6 {
    Ip6 addr;
    uint8_t len = 0;

    bool contains(const Ip6& a) const noexcept {
        const unsigned full = len / 8, rest = len % 8;
        if (std::memcmp(a.b, addr.b, full) != 0) return false;
        if (rest == 0) return true;
        const uint8_t m = static_cast<uint8_t>(0xff00u >> rest);
        return (a.b[full] & m) == (addr.b[full] & m);
    }
    friend bool operator==(const Cidr6&, const Cidr6&) noexcept = default;
};

enum class Family : uint8_t { v4 = 4, v6 = 6 };

// An address of either family, for the control plane, trace and the cold paths: held as an IPv6
// address, an IPv4 one IPv4-mapped (as Go's netip and the sockets API do), so one type compares,
// orders and hashes both. The fast path uses Ip4 and Ip6.
struct IpAddr {
    Ip6 a;

    static IpAddr of(Ip4 v4) noexcept {
        IpAddr r;
        r.a.b[10] = r.a.b[11] = 0xff;
        std::memcpy(r.a.b + 12, &v4.be, 4);
        return r;
    }
    static IpAddr of(const Ip6& v6) noexcept { return IpAddr{v6}; }
    bool is_v4() const noexcept { return a.is_v4_mapped(); }
    Family family() const noexcept { return is_v4() ? Family::v4 : Family::v6; }
    Ip4 v4() const noexcept {
        Ip4 r;
        std::memcpy(&r.be, a.b + 12, 4);
        return r;
    }
    const Ip6& v6() const noexcept { return a; }
    bool is_zero() const noexcept { return is_v4() ? v4().is_zero() : a.is_zero(); }
    friend bool operator==(const IpAddr&, const IpAddr&) noexcept = default;
    friend auto operator<=>(const IpAddr& x, const IpAddr& y) noexcept { return x.a <=> y.a; }
};

// A prefix of either family; `len` counts the family's own bits (0..32 or 0..128).
struct IpCidr {
    IpAddr addr;
    uint8_t len = 0;

    Family family() const noexcept { return addr.family(); }
    Cidr4 v4() const noexcept { return Cidr4{addr.v4(), len}; }
    Cidr6 v6() const noexcept { return Cidr6{addr.v6(), len}; }
    bool contains(const IpAddr& x) const noexcept {
        if (x.family() != family()) return false;
        return family() == Family::v4 ? v4().contains(x.v4()) : v6().contains(x.v6());
    }
    friend bool operator==(const IpCidr&, const IpCidr&) noexcept = default;
};

enum class Proto : uint8_t { icmp = 1, tcp = 6, udp = 17, icmp6 = 58, sctp = 132 };

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

// The 5-tuple of one direction of an IPv6 flow: 40 bytes, network byte order, no holes.
struct FlowKey6 {
    Ip6 src;
    Ip6 dst;
    rte_be16_t sport = 0;
    rte_be16_t dport = 0;
    uint8_t proto = 0;
    uint8_t pad[3] = {0, 0, 0};

    // Whole words, as FlowKey::reversed(): the field-by-field form was written in pieces and read
    // back whole (a store-forwarding stall, 28% of the IPv6 established burst's own samples).
    FlowKey6 reversed() const noexcept {
        FlowKey6 out;
        std::memcpy(out.src.b, dst.b, 16);
        std::memcpy(out.dst.b, src.b, 16);
        // sport, dport, proto, pad as one 8-byte word written once (pieces would stall the copy
        // that reads the key back whole): the two ports swapped, proto kept, padding zero.
        uint64_t tail;
        std::memcpy(&tail, reinterpret_cast<const char*>(this) + offsetof(FlowKey6, sport), 8);
        if constexpr (std::endian::native == std::endian::little)
            tail = (tail & 0xff00000000ull) | std::rotl(static_cast<uint32_t>(tail), 16);
        else
            tail = (uint64_t{std::rotl(static_cast<uint32_t>(tail >> 32), 16)} << 32) | (tail & 0xff000000ull);
        std::memcpy(reinterpret_cast<char*>(&out) + offsetof(FlowKey6, sport), &tail, 8);
        return out;
    }
    // Loaded straight into registers: compared through arrays of words, GCC copied both keys to
    // the stack with 32-byte stores and read them back as 8-byte words, a store-forwarding stall
    // that held a fifth of the IPv6 lookup stage's samples through the port.
    friend bool operator==(const FlowKey6& a, const FlowKey6& b) noexcept {
        const auto* x = reinterpret_cast<const char*>(&a);
        const auto* y = reinterpret_cast<const char*>(&b);
        uint64_t tx, ty;
        std::memcpy(&tx, x + 32, 8);
        std::memcpy(&ty, y + 32, 8);
#if defined(__AVX__)
        const __m256i d = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)),
                                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y)));
        return _mm256_testz_si256(d, d) & (tx == ty);
#else
        uint64_t diff = tx ^ ty;
        for (unsigned i = 0; i < 32; i += 8) {
            uint64_t u, v;
            std::memcpy(&u, x + i, 8);
            std::memcpy(&v, y + i, 8);
            diff |= u ^ v;
        }
        return diff == 0;
#endif
    }
};
static_assert(sizeof(FlowKey6) == 40, "FlowKey6 has no padding holes");
static_assert(offsetof(FlowKey6, dport) == offsetof(FlowKey6, sport) + 2 &&
                  offsetof(FlowKey6, proto) == offsetof(FlowKey6, sport) + 4,
              "reversed() rewrites sport, dport, proto and the padding as one word");

// An endpoint by address: what session-affinity records pin and what Maglev tables hash, so that
// the choice survives a reload that renumbers the snapshot.
struct EndpointKey {
    IpAddr ip;
    rte_be16_t port = 0;

    // One word: for IPv4 ip << 16 | port (both in network order: 48 bits, exact); for IPv6 a
    // 63-bit fingerprint of address and port with bit 63 set (the two never meet). Affinity
    // records pin it (an atomic word, updated in place), Maglev permutes by it.
    uint64_t word() const noexcept {
        if (ip.is_v4()) return uint64_t{ip.v4().be} << 16 | port;
        uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the 18 bytes, then a final mix
        for (uint8_t x : ip.a.b) h = (h ^ x) * 0x100000001b3ull;
        h = (h ^ (port & 0xff)) * 0x100000001b3ull;
        h = (h ^ (port >> 8)) * 0x100000001b3ull;
        h ^= h >> 29;
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 32;
        return h | (uint64_t{1} << 63);
    }
    friend bool operator==(const EndpointKey&, const EndpointKey&) noexcept = default;
};

// Packets per burst: every per-burst array has this size, and a worker asks its queue for this
// many at once. 64, not DPDK's customary 32: a burst's flow lookups wait for memory twice (the
// buckets, then the records), and with a table far larger than the caches those two round trips
// are most of a packet's lookup; 64 packets share them. Through the port (bench/HISTORY.md, round
// eighteen): 1M flows +10%, 4,096 flows +1.6%, IPv6 +2.7%; new connections in process +5-11%.
inline constexpr uint16_t kBurst = 64;

}  // namespace svcgate::dp
