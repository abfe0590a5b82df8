#include "nat.h"

#include <cstring>

#include <rte_ip.h>

#include "checksum.h"

namespace svcgate::dp {

namespace {

// Offsets of the checksum within the L4 header; SIZE_MAX-like 0xff = none.
constexpr uint8_t kTcpCsumOff = 16;
constexpr uint8_t kUdpCsumOff = 6;

template <typename T>
void store(uint8_t* p, T v) noexcept { std::memcpy(p, &v, sizeof v); }
template <typename T>
T load(const uint8_t* p) noexcept { T v; std::memcpy(&v, p, sizeof v); return v; }

}  // namespace

void rewrite_tuple(uint8_t* frame, const PacketMeta& m, const FlowKey& to) noexcept {
    uint8_t* ip = frame + m.l3_off;
    uint8_t* l4 = frame + m.l4_off;
    rte_be16_t ip_csum = load<rte_be16_t>(ip + 10);
    const auto proto = static_cast<Proto>(m.key.proto);
    const bool tcp = proto == Proto::tcp, udp = proto == Proto::udp;
    rte_be16_t l4_csum = 0;
    uint8_t* l4_csum_p = nullptr;
    if (tcp) l4_csum_p = l4 + kTcpCsumOff;
    if (udp) l4_csum_p = l4 + kUdpCsumOff;
    if (l4_csum_p) l4_csum = load<rte_be16_t>(l4_csum_p);

    // Addresses: in the IPv4 header checksum and in the TCP/UDP pseudo-header.
    auto addr = [&](unsigned off, Ip4 from, Ip4 nw) {
        if (from == nw) return;
        store(ip + off, nw.be);
        csum_replace4(&ip_csum, from.be, nw.be);
        if (tcp) csum_replace4(&l4_csum, from.be, nw.be);
        if (udp) udp_csum_replace4(&l4_csum, from.be, nw.be);
    };
    addr(12, m.key.src, to.src);
    addr(16, m.key.dst, to.dst);

    const bool has_ports = tcp || udp || proto == Proto::sctp;
    bool ports_changed = false;
    auto port = [&](unsigned off, rte_be16_t from, rte_be16_t nw) {
        if (from == nw) return;
        ports_changed = true;
        store(l4 + off, nw);
        if (tcp) csum_replace2(&l4_csum, from, nw);
        if (udp) udp_csum_replace2(&l4_csum, from, nw);
    };
    if (has_ports) {
        port(0, m.key.sport, to.sport);
        port(2, m.key.dport, to.dport);
    }
    store(ip + 10, ip_csum);
    if (l4_csum_p) store(l4_csum_p, l4_csum);
    // SCTP (RFC 4960 6.8): CRC32c over the SCTP packet; only ports are covered, so only a port
    // change needs it. A first fragment cannot be re-checksummed (the rest is elsewhere).
    if (proto == Proto::sctp && ports_changed && !m.more_fragments)
        store(l4 + 8, sctp_crc32c(l4, m.l4_len));
}

void rewrite_icmp_error(uint8_t* frame, const PacketMeta& m, const FlowKey& out, bool outer_src) noexcept {
    // Embedded packet: it travelled the other way, so its tuple is `out` reversed.
    uint8_t* in = frame + m.inner_off;
    uint8_t* il4 = in + (in[0] & 0x0f) * 4;
    const auto proto = static_cast<Proto>(in[9]);
    // Its transport checksum only where the whole field came along: TCP's sits at byte 16, past
    // the 8 bytes an error must carry (Linux's tcp_manip_pkt makes the same check).
    uint8_t* l4_csum_p = nullptr;
    if (proto == Proto::tcp && m.inner_l4_len >= 20) l4_csum_p = il4 + kTcpCsumOff;
    if (proto == Proto::udp) l4_csum_p = il4 + kUdpCsumOff;
    rte_be16_t in_csum = load<rte_be16_t>(in + 10);
    rte_be16_t l4_csum = l4_csum_p ? load<rte_be16_t>(l4_csum_p) : 0;
    auto addr = [&](unsigned off, Ip4 nw) {
        const rte_be32_t from = load<rte_be32_t>(in + off);
        if (from == nw.be) return;
        store(in + off, nw.be);
        csum_replace4(&in_csum, from, nw.be);
        if (proto == Proto::tcp) csum_replace4(&l4_csum, from, nw.be);
        if (proto == Proto::udp) udp_csum_replace4(&l4_csum, from, nw.be);
    };
    auto port = [&](unsigned off, rte_be16_t nw) {
        const rte_be16_t from = load<rte_be16_t>(il4 + off);
        if (from == nw) return;
        store(il4 + off, nw);
        if (proto == Proto::tcp) csum_replace2(&l4_csum, from, nw);
        if (proto == Proto::udp) udp_csum_replace2(&l4_csum, from, nw);
    };
    addr(12, out.dst);
    addr(16, out.src);
    port(0, out.dport);
    port(2, out.sport);
    store(in + 10, in_csum);
    if (l4_csum_p) store(l4_csum_p, l4_csum);

    // Outer header, as a packet of the flow in the error's direction.
    uint8_t* ip = frame + m.l3_off;
    rte_be16_t ip_csum = load<rte_be16_t>(ip + 10);
    auto outer = [&](unsigned off, Ip4 from, Ip4 nw) {
        if (from == nw) return;
        store(ip + off, nw.be);
        csum_replace4(&ip_csum, from.be, nw.be);
    };
    if (outer_src) outer(12, m.key.src, out.src);
    outer(16, m.key.dst, out.dst);
    store(ip + 10, ip_csum);

    // The ICMP checksum covers the whole message, embedded packet included (RFC 792).
    uint8_t* icmp = frame + m.l4_off;
    store<rte_be16_t>(icmp + 2, 0);
    store<uint16_t>(icmp + 2, inet_csum(icmp, m.l4_len));
}

bool decrement_ttl(uint8_t* frame, const PacketMeta& m) noexcept {
    uint8_t* ip = frame + m.l3_off;
    if (ip[8] <= 1) return false;
    // TTL and protocol share one 16-bit word of the header (bytes 8..9).
    rte_be16_t before = load<rte_be16_t>(ip + 8);
    --ip[8];
    rte_be16_t after = load<rte_be16_t>(ip + 8);
    rte_be16_t csum = load<rte_be16_t>(ip + 10);
    csum_replace2(&csum, before, after);
    store(ip + 10, csum);
    return true;
}

}  // namespace svcgate::dp
