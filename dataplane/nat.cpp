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
    const auto proto = static_cast<Proto>(m.key.proto);
    const bool tcp = proto == Proto::tcp, udp = proto == Proto::udp;

    // RFC 1624 eqn. 3 for every changed word at once: the ~old + new terms are summed and each
    // checksum folded once (one's-complement addition is associative), instead of a fold per
    // field. Addresses count in the IPv4 header and in the TCP/UDP pseudo-header, ports in L4.
    auto delta32 = [](rte_be32_t from, rte_be32_t nw) noexcept {
        return (~from & 0xffffu) + (~from >> 16) + (nw & 0xffffu) + (nw >> 16);
    };
    auto delta16 = [](rte_be16_t from, rte_be16_t nw) noexcept { return uint32_t{static_cast<uint16_t>(~from)} + nw; };
    uint32_t addr_sum = 0, port_sum = 0;
    bool addr_changed = false, ports_changed = false;
    if (!(m.key.src == to.src)) {
        store(ip + 12, to.src.be);
        addr_sum += delta32(m.key.src.be, to.src.be);
        addr_changed = true;
    }
    if (!(m.key.dst == to.dst)) {
        store(ip + 16, to.dst.be);
        addr_sum += delta32(m.key.dst.be, to.dst.be);
        addr_changed = true;
    }
    if (tcp || udp || proto == Proto::sctp) {
        if (m.key.sport != to.sport) {
            store(l4, to.sport);
            port_sum += delta16(m.key.sport, to.sport);
            ports_changed = true;
        }
        if (m.key.dport != to.dport) {
            store(l4 + 2, to.dport);
            port_sum += delta16(m.key.dport, to.dport);
            ports_changed = true;
        }
    }
    if (addr_changed) {
        const auto c = load<rte_be16_t>(ip + 10);
        store(ip + 10, static_cast<rte_be16_t>(~csum_fold(uint32_t{static_cast<uint16_t>(~c)} + addr_sum)));
    }
    if ((tcp || udp) && (addr_changed || ports_changed)) {
        uint8_t* p = l4 + (tcp ? kTcpCsumOff : kUdpCsumOff);
        const auto c = load<rte_be16_t>(p);
        if (tcp || c != 0) {  // a UDP checksum of 0 means none (RFC 768)
            auto n = static_cast<rte_be16_t>(~csum_fold(uint32_t{static_cast<uint16_t>(~c)} + addr_sum + port_sum));
            if (udp && n == 0) n = 0xffff;
            store(p, n);
        }
    }
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

}  // namespace svcgate::dp
