#include "nat.h"

#include <cstring>

#include <rte_ip.h>

#include "checksum.h"

namespace svcgate::dp {

namespace {

// Offsets of the checksum within the TCP and UDP headers.
constexpr uint8_t kTcpCsumOff = 16;
constexpr uint8_t kUdpCsumOff = 6;

template <typename T>
void store(uint8_t* p, T v) noexcept { std::memcpy(p, &v, sizeof v); }
template <typename T>
T load(const uint8_t* p) noexcept { T v; std::memcpy(&v, p, sizeof v); return v; }

// Writes `to` over the tuple `from` of the IPv4 header at `ip` (addresses) and, with `ports`, of
// the L4 header at `l4` (its first two words). The IPv4 header checksum follows the addresses;
// the TCP/UDP checksum at `l4_csum` (null: none to keep) follows addresses (pseudo-header) and
// ports, a UDP one (`udp`) keeping RFC 768's rules: 0 means none and stays 0, a computed 0 is
// sent as 0xffff. Each checksum is folded once. Returns whether a port changed.
bool rewrite_headers(uint8_t* ip, uint8_t* l4, const FlowKey& from, const FlowKey& to, bool ports,
                     uint8_t* l4_csum, bool udp) noexcept {
    uint32_t addr_sum = 0, port_sum = 0;
    bool addr_changed = false, ports_changed = false;
    if (!(from.src == to.src)) {
        store(ip + 12, to.src.be);
        addr_sum += csum_delta32(from.src.be, to.src.be);
        addr_changed = true;
    }
    if (!(from.dst == to.dst)) {
        store(ip + 16, to.dst.be);
        addr_sum += csum_delta32(from.dst.be, to.dst.be);
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
    if (addr_changed) store(ip + 10, csum_apply(load<rte_be16_t>(ip + 10), addr_sum));
    if (l4_csum && (addr_changed || ports_changed)) {
        const auto c = load<rte_be16_t>(l4_csum);
        if (!udp || c != 0) {
            const rte_be16_t n = csum_apply(c, addr_sum + port_sum);
            store(l4_csum, udp && n == 0 ? rte_be16_t{0xffff} : n);
        }
    }
    return ports_changed;
}

}  // namespace

void rewrite_tuple(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept {
    uint8_t* l4 = frame + m.l4_off;
    const auto proto = static_cast<Proto>(m.key.proto);
    const bool tcp = proto == Proto::tcp, udp = proto == Proto::udp;
    uint8_t* l4_csum = tcp ? l4 + kTcpCsumOff : udp ? l4 + kUdpCsumOff : nullptr;
    const bool ports_changed =
        rewrite_headers(frame + m.l3_off, l4, m.key, to, tcp || udp || proto == Proto::sctp, l4_csum, udp);
    // SCTP (RFC 4960 6.8): CRC32c over the SCTP packet; only ports are covered, so only a port
    // change needs it. A first fragment cannot be re-checksummed (the rest is elsewhere).
    if (proto == Proto::sctp && ports_changed && !m.more_fragments)
        store(l4 + 8, sctp_crc32c(l4, m.l4_len));
}

void rewrite_icmp_error(uint8_t* frame, const PacketMeta& m, const FlowKey& out, bool outer_src) noexcept {
    // Embedded packet: it travelled the other way, so it becomes `out` reversed. Its transport
    // checksum only where the whole field came along: TCP's sits at byte 16, past the 8 bytes an
    // error must carry (Linux's tcp_manip_pkt makes the same check); SCTP's CRC never does.
    uint8_t* in = frame + m.inner_off;
    uint8_t* il4 = in + (in[0] & 0x0f) * 4;
    const auto proto = static_cast<Proto>(in[9]);
    uint8_t* l4_csum = proto == Proto::tcp && m.inner_l4_len >= 20 ? il4 + kTcpCsumOff
                       : proto == Proto::udp                        ? il4 + kUdpCsumOff
                                                                    : nullptr;
    (void)rewrite_headers(in, il4, m.err_key.reversed(), out.reversed(), true, l4_csum, proto == Proto::udp);

    // Outer header, as a packet of the flow in the error's direction: addresses only.
    FlowKey outer = m.key;
    if (outer_src) outer.src = out.src;
    outer.dst = out.dst;
    (void)rewrite_headers(frame + m.l3_off, nullptr, m.key, outer, false, nullptr, false);

    // The ICMP checksum covers the whole message, embedded packet included (RFC 792).
    uint8_t* icmp = frame + m.l4_off;
    store<rte_be16_t>(icmp + 2, 0);
    store<uint16_t>(icmp + 2, inet_csum(icmp, m.l4_len));
}

bool decrement_ttl(uint8_t* frame, const PacketMeta& m) noexcept {
    uint8_t* ip = frame + m.l3_off;
    if (ip[8] <= 1) return false;
    // TTL and protocol share one 16-bit word of the header (bytes 8..9): the new word is made in
    // a register and stored once. (Decrementing the TTL byte in place and loading the word back
    // stalled on store forwarding: 8% of the worker's cycles on established flows.)
    const rte_be16_t before = load<rte_be16_t>(ip + 8);
    const rte_be16_t after = rte_cpu_to_be_16(static_cast<uint16_t>(rte_be_to_cpu_16(before) - 0x0100));
    store(ip + 8, after);
    rte_be16_t csum = load<rte_be16_t>(ip + 10);
    csum_replace2(&csum, before, after);
    store(ip + 10, csum);
    return true;
}

namespace {

// The checksum delta of one IPv6 address changed from `a` to `b` (eight 16-bit words).
uint32_t addr6_delta(const Ip6& a, const Ip6& b) noexcept {
    uint32_t sum = 0;
    for (unsigned i = 0; i < 16; i += 4) sum += csum_delta32(load<rte_be32_t>(a.b + i), load<rte_be32_t>(b.b + i));
    return sum;
}

// IPv6 has no header checksum: the addresses count only in the transport checksum (the
// pseudo-header, RFC 8200 8.1). Otherwise as rewrite_headers.
bool rewrite_headers6(uint8_t* ip, uint8_t* l4, const FlowKey6& from, const FlowKey6& to, bool ports,
                      uint8_t* l4_csum, bool udp) noexcept {
    uint32_t sum = 0;
    bool changed = false, ports_changed = false;
    if (!(from.src == to.src)) {
        std::memcpy(ip + 8, to.src.b, 16);
        sum += addr6_delta(from.src, to.src);
        changed = true;
    }
    if (!(from.dst == to.dst)) {
        std::memcpy(ip + 24, to.dst.b, 16);
        sum += addr6_delta(from.dst, to.dst);
        changed = true;
    }
    if (ports && from.sport != to.sport) {
        store(l4, to.sport);
        sum += csum_delta16(from.sport, to.sport);
        ports_changed = true;
    }
    if (ports && from.dport != to.dport) {
        store(l4 + 2, to.dport);
        sum += csum_delta16(from.dport, to.dport);
        ports_changed = true;
    }
    if (l4_csum && (changed || ports_changed)) {
        const auto c = load<rte_be16_t>(l4_csum);
        if (!udp || c != 0) {
            const rte_be16_t n = csum_apply(c, sum);
            store(l4_csum, udp && n == 0 ? rte_be16_t{0xffff} : n);
        }
    }
    return ports_changed;
}

}  // namespace

void rewrite_tuple(uint8_t* frame, const PacketMeta& m, const FlowKey6& to) noexcept {
    uint8_t* l4 = frame + m.l4_off;
    const auto proto = static_cast<Proto>(m.key6.proto);
    const bool tcp = proto == Proto::tcp, udp = proto == Proto::udp;
    uint8_t* l4_csum = tcp ? l4 + kTcpCsumOff : udp ? l4 + kUdpCsumOff : nullptr;
    const bool ports_changed =
        rewrite_headers6(frame + m.l3_off, l4, m.key6, to, tcp || udp || proto == Proto::sctp, l4_csum, udp);
    if (proto == Proto::sctp && ports_changed && !m.more_fragments)
        store(l4 + 8, sctp_crc32c(l4, m.l4_len));
}

void rewrite_icmp_error(uint8_t* frame, const PacketMeta& m, const FlowKey6& out, bool outer_src) noexcept {
    // As for IPv4 (nf_nat_icmp_reply_translation), with the embedded packet's extension headers
    // skipped by parse (inner_l4_off) and the ICMPv6 checksum over the IPv6 pseudo-header.
    uint8_t* in = frame + m.inner_off;
    uint8_t* il4 = frame + m.inner_l4_off;
    const auto proto = static_cast<Proto>(m.err_key6.proto);
    uint8_t* l4_csum = proto == Proto::tcp && m.inner_l4_len >= 20 ? il4 + kTcpCsumOff
                       : proto == Proto::udp                        ? il4 + kUdpCsumOff
                                                                    : nullptr;
    (void)rewrite_headers6(in, il4, m.err_key6.reversed(), out.reversed(), true, l4_csum, proto == Proto::udp);

    FlowKey6 outer = m.key6;
    if (outer_src) outer.src = out.src;
    outer.dst = out.dst;
    uint8_t* ip = frame + m.l3_off;
    (void)rewrite_headers6(ip, nullptr, m.key6, outer, false, nullptr, false);

    uint8_t* icmp = frame + m.l4_off;
    store<rte_be16_t>(icmp + 2, 0);
    store<uint16_t>(icmp + 2, ipv6_l4_csum(ip, icmp, m.l4_len, static_cast<uint8_t>(Proto::icmp6)));
}

bool decrement_hop_limit(uint8_t* frame, const PacketMeta& m) noexcept {
    uint8_t* ip = frame + m.l3_off;
    if (ip[7] <= 1) return false;
    --ip[7];  // no header checksum in IPv6
    return true;
}

}  // namespace svcgate::dp
