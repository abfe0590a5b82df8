#include "dataplane/lb/nat.h"

#include <cstring>

#include <rte_ip.h>

#include "dataplane/base/checksum.h"

namespace svcgate::dp {

namespace {

// Offsets of the checksum within the TCP and UDP headers.
constexpr uint8_t kTcpCsumOff = 16;
constexpr uint8_t kUdpCsumOff = 6;

template <typename T>
void store(uint8_t* p, T v) noexcept {
    std::memcpy(p, &v, sizeof v);
}
template <typename T>
T load(const uint8_t* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// What differs between the families: where the addresses sit, how one is written and what its
// change adds to a checksum, whether the IP header has a checksum of its own, and the
// packet's tuples in the meta.
struct Nat4 {
    using Key = FlowKey;
    static constexpr unsigned kSrc = 12, kDst = 16;  // RFC 791
    static constexpr bool kHeaderCsum = true;
    static void put(uint8_t* p, Ip4 a) noexcept { store(p, a.be); }
    static uint32_t delta(Ip4 a, Ip4 b) noexcept { return csum_delta32(a.be, b.be); }
    static const Key& key(const PacketMeta& m) noexcept { return m.key; }
    static const Key& err_key(const PacketMeta& m) noexcept { return m.err_key; }
    // The ICMP checksum covers the message only (RFC 792).
    static uint16_t icmp_csum(const uint8_t*, const uint8_t* icmp, uint32_t len) noexcept {
        return inet_csum(icmp, len);
    }
};
struct Nat6 {
    using Key = FlowKey6;
    static constexpr unsigned kSrc = 8, kDst = 24;  // RFC 8200
    static constexpr bool kHeaderCsum = false;      // addresses count in the pseudo-header only
    static void put(uint8_t* p, const Ip6& a) noexcept { std::memcpy(p, a.b, 16); }
    static uint32_t delta(const Ip6& a, const Ip6& b) noexcept {
        uint32_t sum = 0;
        for (unsigned i = 0; i < 16; i += 4) sum += csum_delta32(load<rte_be32_t>(a.b + i), load<rte_be32_t>(b.b + i));
        return sum;
    }
    static const Key& key(const PacketMeta& m) noexcept { return m.key6; }
    static const Key& err_key(const PacketMeta& m) noexcept { return m.err_key6; }
    // The ICMPv6 checksum covers the IPv6 pseudo-header too (RFC 4443 2.3).
    static uint16_t icmp_csum(const uint8_t* ip, const uint8_t* icmp, uint32_t len) noexcept {
        return ipv6_l4_csum(ip, icmp, len, static_cast<uint8_t>(Proto::icmp6));
    }
};

// Writes `to` over the tuple `from` of the IP header at `ip` (addresses) and, with `ports`, of
// the L4 header at `l4` (its first two words). An IPv4 header checksum follows the addresses;
// the TCP/UDP checksum at `l4_csum` (null: none to keep) follows addresses (pseudo-header) and
// ports, a UDP one (`udp`) keeping RFC 768's rules: 0 means none and stays 0, a computed 0 is
// sent as 0xffff. `ip_delta`: a change to the IPv4 header made beside (the TTL's), added to its
// checksum with the addresses'. Each checksum is folded once. Returns whether a port changed.
template <typename N>
[[gnu::always_inline]] inline bool rewrite_headers(uint8_t* ip, uint8_t* l4, const typename N::Key& from,
                                                   const typename N::Key& to, bool ports, uint8_t* l4_csum, bool udp,
                                                   uint32_t ip_delta = 0) noexcept {
    uint32_t addr_sum = 0, port_sum = 0;
    bool addr_changed = false, ports_changed = false;
    if (!(from.src == to.src)) {
        N::put(ip + N::kSrc, to.src);
        addr_sum += N::delta(from.src, to.src);
        addr_changed = true;
    }
    if (!(from.dst == to.dst)) {
        N::put(ip + N::kDst, to.dst);
        addr_sum += N::delta(from.dst, to.dst);
        addr_changed = true;
    }
    if (ports && from.sport != to.sport) {
        store(l4, to.sport);
        port_sum += csum_delta16(from.sport, to.sport);
        ports_changed = true;
    }
    if (ports && from.dport != to.dport) {
        store(l4 + 2, to.dport);
        port_sum += csum_delta16(from.dport, to.dport);
        ports_changed = true;
    }
    if constexpr (N::kHeaderCsum)
        if (addr_changed || ip_delta) store(ip + 10, csum_apply(load<rte_be16_t>(ip + 10), addr_sum + ip_delta));
    if (l4_csum && (addr_changed || ports_changed)) {
        const auto c = load<rte_be16_t>(l4_csum);
        if (!udp || c != 0) {
            const rte_be16_t n = csum_apply(c, addr_sum + port_sum);
            store(l4_csum, udp && n == 0 ? rte_be16_t{0xffff} : n);
        }
    }
    return ports_changed;
}

template <typename N>
[[gnu::always_inline]] inline void tuple(uint8_t* frame, const PacketMeta& m, const typename N::Key& to,
                                         uint32_t ip_delta = 0) noexcept {
    uint8_t* l4 = frame + m.l4_off;
    const typename N::Key& from = N::key(m);
    const auto proto = static_cast<Proto>(from.proto);
    const bool tcp = proto == Proto::tcp, udp = proto == Proto::udp;
    uint8_t* l4_csum = tcp ? l4 + kTcpCsumOff : udp ? l4 + kUdpCsumOff : nullptr;
    const bool ports_changed =
        rewrite_headers<N>(frame + m.l3_off, l4, from, to, tcp || udp || proto == Proto::sctp, l4_csum, udp, ip_delta);
    // SCTP (RFC 4960 6.8): CRC32c over the SCTP packet; only ports are covered, so only a port
    // change needs it. A first fragment cannot be re-checksummed (the rest is elsewhere).
    if (proto == Proto::sctp && ports_changed && !m.more_fragments) store(l4 + 8, sctp_crc32c(l4, m.l4_len));
}

template <typename N>
void icmp_error(uint8_t* frame, const PacketMeta& m, const typename N::Key& out, bool outer_src) noexcept {
    // Embedded packet: it travelled the other way, so it becomes `out` reversed. Its transport
    // checksum only where the whole field came along: TCP's sits at byte 16, past the 8 bytes an
    // error must carry (Linux's tcp_manip_pkt makes the same check); SCTP's CRC never does. Parse
    // found its L4 header (inner_l4_off), past IPv4 options or IPv6 extension headers.
    uint8_t* il4 = frame + m.inner_l4_off;
    const typename N::Key& err = N::err_key(m);
    const auto proto = static_cast<Proto>(err.proto);
    uint8_t* l4_csum = proto == Proto::tcp && m.inner_l4_len >= 20 ? il4 + kTcpCsumOff
        : proto == Proto::udp                                      ? il4 + kUdpCsumOff
                                                                   : nullptr;
    (void)rewrite_headers<N>(frame + m.inner_off, il4, err.reversed(), out.reversed(), true, l4_csum,
                             proto == Proto::udp);

    // Outer header, as a packet of the flow in the error's direction: addresses only.
    const typename N::Key& key = N::key(m);
    typename N::Key outer = key;
    if (outer_src) outer.src = out.src;
    outer.dst = out.dst;
    uint8_t* ip = frame + m.l3_off;
    (void)rewrite_headers<N>(ip, nullptr, key, outer, false, nullptr, false);

    // The ICMP checksum covers the whole message, embedded packet included, computed afresh.
    uint8_t* icmp = frame + m.l4_off;
    store<rte_be16_t>(icmp + 2, 0);
    store<uint16_t>(icmp + 2, N::icmp_csum(ip, icmp, m.l4_len));
}

}  // namespace

void rewrite_tuple(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept { tuple<Nat4>(frame, m, to); }
void rewrite_tuple(uint8_t* frame, const PacketMeta& m, const FlowKey6& to) noexcept { tuple<Nat6>(frame, m, to); }
void rewrite_addresses(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept {
    (void)rewrite_headers<Nat4>(frame + m.l3_off, nullptr, m.key, to, false, nullptr, false);
}
void rewrite_addresses(uint8_t* frame, const PacketMeta& m, const FlowKey6& to) noexcept {
    (void)rewrite_headers<Nat6>(frame + m.l3_off, nullptr, m.key6, to, false, nullptr, false);
}

void rewrite_icmp_error(uint8_t* frame, const PacketMeta& m, const FlowKey& out, bool outer_src) noexcept {
    icmp_error<Nat4>(frame, m, out, outer_src);
}
void rewrite_icmp_error(uint8_t* frame, const PacketMeta& m, const FlowKey6& out, bool outer_src) noexcept {
    icmp_error<Nat6>(frame, m, out, outer_src);
}

namespace {

// RFC 1812 5.3.1 on the IPv4 header at `ip`: false (nothing written) when the TTL would reach
// zero; else the TTL is decremented and `delta` is what that adds to the header checksum (the
// caller applies it). TTL and protocol share one 16-bit word (bytes 8..9): the new word is made
// in a register and stored once. (Decrementing the TTL byte in place and loading the word back
// stalled on store forwarding: 8% of the worker's cycles on established flows.)
bool ttl_step(uint8_t* ip, uint32_t& delta) noexcept {
    if (ip[8] <= 1) return false;
    const rte_be16_t before = load<rte_be16_t>(ip + 8);
    const rte_be16_t after = to_be16(static_cast<uint16_t>(from_be16(before) - 0x0100));
    store(ip + 8, after);
    delta = csum_delta16(before, after);
    return true;
}

}  // namespace

bool decrement_ttl(uint8_t* frame, const PacketMeta& m) noexcept {
    uint8_t* ip = frame + m.l3_off;
    uint32_t delta;
    if (!ttl_step(ip, delta)) return false;
    store(ip + 10, csum_apply(load<rte_be16_t>(ip + 10), delta));
    return true;
}

bool route_translate(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept {
    // The TTL's change goes into the header checksum with the addresses': one load and store of
    // the field (apart, the translation reloaded what the TTL step had just stored).
    uint32_t delta;
    if (!ttl_step(frame + m.l3_off, delta)) return false;
    tuple<Nat4>(frame, m, to, delta);
    return true;
}

bool route_translate(uint8_t* frame, const PacketMeta& m, const FlowKey6& to) noexcept {
    if (!decrement_hop_limit(frame, m)) return false;
    tuple<Nat6>(frame, m, to);
    return true;
}

bool decrement_hop_limit(uint8_t* frame, const PacketMeta& m) noexcept {
    uint8_t* ip = frame + m.l3_off;
    if (ip[7] <= 1) return false;
    --ip[7];  // no header checksum in IPv6
    return true;
}

}  // namespace svcgate::dp
