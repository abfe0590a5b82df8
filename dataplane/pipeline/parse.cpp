#include "dataplane/pipeline/parse.h"

#include <cstddef>
#include <cstring>
#include <type_traits>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>
#include <rte_icmp.h>
#include <rte_prefetch.h>

#include "dataplane/base/checksum.h"
#include "dataplane/pipeline/frag_stage.h"
#include "dataplane/pipeline/parse_stage.h"
#include "dataplane/pipeline/vlan.h"

namespace svcgate::dp {

namespace {

const PacketMeta kZeroMeta{};

// PacketMeta{} (l3 ipv4 is 0, both keys zero), before every parse. By stores alone where AVX is
// there (three 32-byte stores and one of 4 bytes); else copied from a zero object (six 16-byte loads
// and stores). Not assigned a temporary (GCC built that in pieces on the stack and read it back
// whole, a store-forwarding stall that held a fifth of an IPv6 worker's own samples) nor memset
// (GCC makes 100 bytes a `rep stosq`, whose start-up cost was a third of parse_packet's samples on
// the established path, bench/HISTORY.md round six).
[[gnu::always_inline]] inline void zero_meta(PacketMeta& m) noexcept {
    static_assert(std::is_trivially_copyable_v<PacketMeta> && static_cast<int>(L3Kind::ipv4) == 0);
#if defined(__AVX__)
    static_assert(sizeof(PacketMeta) == 100);
    auto* z = reinterpret_cast<uint8_t*>(&m);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(z), _mm256_setzero_si256());
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(z + 32), _mm256_setzero_si256());
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(z + 64), _mm256_setzero_si256());
    std::memset(z + 96, 0, sizeof(m) - 96);
#else
    std::memcpy(static_cast<void*>(&m), &kZeroMeta, sizeof(m));
#endif
}

constexpr uint16_t kEthVlan = RTE_ETHER_TYPE_VLAN;
constexpr uint16_t kEthQinQ = RTE_ETHER_TYPE_QINQ;
constexpr uint32_t kArpIpv4Len = 28;  // RFC 826 body for Ethernet/IPv4

template <typename T>
T load(const uint8_t* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

bool is_martian_source(Ip4 a) noexcept {
    uint32_t h = a.host();
    // RFC 1812 5.3.7: never forward a packet whose source is 0/8 "this network", a multicast
    // (224/4) or the limited broadcast address.
    return (h >> 24) == 0 || (h >> 28) == 0xe || h == 0xffffffffu;
}

bool is_icmp_error(uint8_t type) noexcept {
    return type == kIcmpDestUnreach || type == kIcmpTimeExceeded || type == kIcmpParamProblem ||
        type == kIcmpSourceQuench;
}

// RFC 792 / RFC 1812 4.3.2.3: an ICMP error carries the offending packet's IP header and at
// least the first 8 bytes of its payload, which is where TCP, UDP and SCTP keep their ports.
// Errors about anything else (an ICMP message, a later fragment) relate to no flow of ours and
// are routed as they are.
DropReason parse_icmp_error(const uint8_t* l4, PacketMeta& m) noexcept {
    const uint8_t* in = l4 + sizeof(rte_icmp_hdr);
    const uint32_t avail = m.l4_len - sizeof(rte_icmp_hdr);
    if (avail < sizeof(rte_ipv4_hdr) || (in[0] >> 4) != 4) return DropReason::icmp_error_bad_inner;
    const uint32_t ihl = (in[0] & 0x0f) * 4u;
    if (ihl < sizeof(rte_ipv4_hdr) || ihl + 8 > avail) return DropReason::icmp_error_bad_inner;
    if (from_be16(load<rte_be16_t>(in + 6)) & RTE_IPV4_HDR_OFFSET_MASK) return DropReason::none;
    const auto proto = static_cast<Proto>(in[9]);
    if (proto != Proto::tcp && proto != Proto::udp && proto != Proto::sctp) return DropReason::none;
    const FlowKey embedded{.src = Ip4{load<rte_be32_t>(in + 12)},
                           .dst = Ip4{load<rte_be32_t>(in + 16)},
                           .sport = load<rte_be16_t>(in + ihl),
                           .dport = load<rte_be16_t>(in + ihl + 2),
                           .proto = in[9]};
    m.err_key = embedded.reversed();
    m.inner_off = static_cast<uint16_t>(m.l4_off + sizeof(rte_icmp_hdr));
    m.inner_l4_off = static_cast<uint16_t>(m.inner_off + ihl);
    m.inner_l4_len = static_cast<uint16_t>(avail - ihl);
    return DropReason::none;
}

// IPv6 extension headers (RFC 8200 4): hop-by-hop options first or not at all; any others in any
// order and any number of times, as 4.1 requires of a receiver, but at most kMaxExtHeaders in
// all: a chain of hundreds (a "loop" of the same header) would make every packet a long walk.
// Routing type 0 is refused (RFC 5095). A fragment header with a non-zero offset is a later
// fragment: the walk stops there (what follows is data), `proto` is the header's next header.
constexpr unsigned kMaxExtHeaders = 8;
enum : uint8_t { kNhHopByHop = 0, kNhRouting = 43, kNhFragment = 44, kNhAuth = 51, kNhDestOpts = 60 };

struct ExtChain {
    uint8_t proto;  // the upper-layer protocol (or 59, no next header; 50, ESP)
    uint16_t l4;    // its offset from the IPv6 header
    bool more_fragments = false;
    bool fragment = false;   // a Fragment header was seen: the fields below are its
    uint16_t frag_off = 0;   // offset, bytes
    uint16_t frag_data = 0;  // where the fragmentable part starts, from the IPv6 header
    uint32_t frag_id = 0;
};

// Walks the chain of the IPv6 header at `ip`, whose packet is `end` bytes long (header included).
DropReason walk_ext(const uint8_t* ip, uint32_t end, ExtChain& c) noexcept {
    uint8_t nh = ip[6];
    uint32_t pos = 40;
    for (unsigned n = 0;; ++n) {
        switch (nh) {
            case kNhHopByHop:
            case kNhRouting:
            case kNhDestOpts:
            case kNhFragment:
            case kNhAuth:
                break;
            default:
                c.proto = nh;
                c.l4 = static_cast<uint16_t>(pos);
                return DropReason::none;
        }
        if (n == kMaxExtHeaders) return DropReason::ip6_ext_chain_too_long;
        if (nh == kNhHopByHop && pos != 40) return DropReason::ip6_hbh_not_first;
        if (pos + 8 > end) return DropReason::ip6_ext_truncated;
        const uint8_t* h = ip + pos;
        uint32_t hlen;
        if (nh == kNhFragment) {
            hlen = 8;
            const uint16_t fo = from_be16(load<rte_be16_t>(h + 2));
            c.fragment = true;
            c.more_fragments = fo & 1;
            c.frag_off = fo & 0xfff8;
            c.frag_data = static_cast<uint16_t>(pos + 8);
            c.frag_id = from_be32(load<rte_be32_t>(h + 4));
            if (c.frag_off) {  // a later fragment: data from here on
                c.proto = h[0];
                c.l4 = c.frag_data;
                return DropReason::none;
            }
        } else if (nh == kNhAuth) {
            hlen = (h[1] + 2u) * 4;
        } else {
            hlen = (h[1] + 1u) * 8;
            if (nh == kNhRouting && h[2] == 0) return DropReason::ip6_routing_type0;
        }
        if (pos + hlen > end) return DropReason::ip6_ext_truncated;
        nh = h[0];
        pos += hlen;
    }
}

bool is_icmp6_error(uint8_t type) noexcept {
    return type == kIcmp6DestUnreach || type == kIcmp6PacketTooBig || type == kIcmp6TimeExceeded ||
        type == kIcmp6ParamProblem;
}

bool is_nd(uint8_t type) noexcept { return type >= kIcmp6RouterSolicit && type <= kIcmp6Redirect; }

// RFC 4443 2.4 (c): an error carries as much of the offending packet as fits; we need its IPv6
// header, its extension headers and the first 8 bytes of its TCP/UDP/SCTP header.
DropReason parse_icmp6_error(const uint8_t* l4, PacketMeta& m) noexcept {
    const uint8_t* in = l4 + 8;
    const uint32_t avail = m.l4_len - 8u;
    if (avail < 40 || (in[0] >> 4) != 6) return DropReason::icmp_error_bad_inner;
    ExtChain c{};
    // The embedded packet is usually cut short: its chain is walked within what came along.
    if (walk_ext(in, avail, c) != DropReason::none || c.frag_off) return DropReason::none;  // about no flow of ours
    if (c.l4 + 8u > avail) return DropReason::icmp_error_bad_inner;
    const auto proto = static_cast<Proto>(c.proto);
    if (proto != Proto::tcp && proto != Proto::udp && proto != Proto::sctp) return DropReason::none;
    FlowKey6 embedded{};
    std::memcpy(embedded.src.b, in + 8, 16);
    std::memcpy(embedded.dst.b, in + 24, 16);
    embedded.sport = load<rte_be16_t>(in + c.l4);
    embedded.dport = load<rte_be16_t>(in + c.l4 + 2);
    embedded.proto = c.proto;
    m.err_key6 = embedded.reversed();
    m.inner_off = static_cast<uint16_t>(m.l4_off + 8);
    m.inner_l4_off = static_cast<uint16_t>(m.inner_off + c.l4);
    m.inner_l4_len = static_cast<uint16_t>(avail - c.l4);
    return DropReason::none;
}

// RFC 4861 7.1.1 / 7.1.2: what a node must check before it reads a Neighbor Solicitation or
// Advertisement (hop limit 255: it came from the link; code 0; 24 bytes at least; options of
// non-zero length within the message; a unicast target; from the unspecified address (DAD) only
// to a solicited-node address and without a source link-layer option).
DropReason check_nd(const uint8_t* ip, const uint8_t* l4, const PacketMeta& m) noexcept {
    const uint8_t type = l4[0];
    if (type != kIcmp6NeighborSolicit && type != kIcmp6NeighborAdvert)
        return DropReason::none;  // RS, RA, redirect: read by nobody
    if (ip[7] != 255 || l4[1] != 0 || m.l4_len < 24) return DropReason::nd_invalid;
    if (l4[8] == 0xff) return DropReason::nd_bad_target;
    bool slla = false;
    for (uint32_t o = 24; o < m.l4_len;) {
        if (o + 2 > m.l4_len || l4[o + 1] == 0 || o + l4[o + 1] * 8u > m.l4_len) return DropReason::nd_invalid;
        slla = slla || l4[o] == 1;
        o += l4[o + 1] * 8u;
    }
    if (type == kIcmp6NeighborSolicit && m.key6.src.is_zero() &&
        (slla ||
         !(m.key6.dst.b[0] == 0xff && m.key6.dst.b[1] == 0x02 && m.key6.dst.b[11] == 1 && m.key6.dst.b[12] == 0xff)))
        return DropReason::nd_invalid;
    if (type == kIcmp6NeighborAdvert && m.key6.dst.is_multicast() && (l4[4] & 0x40))
        return DropReason::nd_invalid;  // a solicited advertisement is unicast
    return DropReason::none;
}

void set_ports(PacketMeta& m, rte_be16_t sport, rte_be16_t dport) noexcept {
    if (m.is_v6()) {
        m.key6.sport = sport;
        m.key6.dport = dport;
    } else {
        m.key.sport = sport;
        m.key.dport = dport;
    }
}

DropReason parse_icmp6(const uint8_t* ip, const uint8_t* l4, PacketMeta& m) noexcept {
    if (m.l4_len < 8) return DropReason::icmp_truncated;
    m.icmp_type = l4[0];
    // A first fragment cannot be verified (the rest of the message is elsewhere).
    if (!m.more_fragments && ipv6_l4_csum(ip, l4, m.l4_len, static_cast<uint8_t>(Proto::icmp6)) != 0)
        return DropReason::icmp6_bad_checksum;
    if (m.icmp_type == kIcmp6EchoRequest || m.icmp_type == kIcmp6EchoReply) {
        m.key6.sport = m.key6.dport = load<rte_be16_t>(l4 + 4);
        return DropReason::none;
    }
    if (is_nd(m.icmp_type)) return check_nd(ip, l4, m);
    if (is_icmp6_error(m.icmp_type) && !m.more_fragments) return parse_icmp6_error(l4, m);
    return DropReason::none;
}

// The TCP flag combinations no stack sends and scanners do (nmap -sN/-sX, SYN+FIN and SYN+RST
// probes), as a bit per combination of the six flags: one shift and test a packet.
constexpr uint64_t kBadTcpFlags = [] {
    uint64_t bad = 0;
    for (unsigned f = 0; f < 64; ++f)
        if (f == 0 || (f & (kSyn | kFin)) == (kSyn | kFin) || (f & (kSyn | kRst)) == (kSyn | kRst) ||
            (f & (kFin | kPsh | kUrg)) == (kFin | kPsh | kUrg))
            bad |= uint64_t{1} << f;
    return bad;
}();

// TCP's header bounds on `l4_len` bytes of L4 header and payload at `l4`: the header whole, its
// data offset at least 5 words and within the payload. Nothing past l4_len is read.
[[gnu::always_inline]] inline DropReason check_tcp(const uint8_t* l4, uint32_t l4_len) noexcept {
    if (l4_len < sizeof(rte_tcp_hdr)) return DropReason::tcp_truncated;
    const uint32_t doff = l4[12] >> 4;
    if (doff < 5 || doff * 4 > l4_len) return DropReason::tcp_bad_doff;
    return DropReason::none;
}

// UDP's: the header whole, its length field at least the header and, unless the packet is a first
// fragment (which carries only part of the datagram), within the payload.
[[gnu::always_inline]] inline DropReason check_udp(const uint8_t* l4, uint32_t l4_len, bool more_fragments) noexcept {
    if (l4_len < sizeof(rte_udp_hdr)) return DropReason::udp_truncated;
    const uint32_t ulen = from_be16(load<rte_be16_t>(l4 + 4));
    if (ulen < sizeof(rte_udp_hdr) || (!more_fragments && ulen > l4_len)) return DropReason::udp_bad_length;
    return DropReason::none;
}

[[gnu::always_inline]] inline DropReason parse_l4(const uint8_t* l4, PacketMeta& m, uint8_t proto) noexcept {
    switch (static_cast<Proto>(proto)) {
        case Proto::tcp: {
            if (DropReason r = check_tcp(l4, m.l4_len); r != DropReason::none) return r;
            set_ports(m, load<rte_be16_t>(l4), load<rte_be16_t>(l4 + 2));
            m.tcp_flags = l4[13] & 0x3f;
            if (kBadTcpFlags >> m.tcp_flags & 1) return DropReason::tcp_bad_flags;
            return DropReason::none;
        }
        case Proto::udp:
            if (DropReason r = check_udp(l4, m.l4_len, m.more_fragments); r != DropReason::none) return r;
            set_ports(m, load<rte_be16_t>(l4), load<rte_be16_t>(l4 + 2));
            return DropReason::none;
        case Proto::sctp:
            if (m.l4_len < 12) return DropReason::sctp_truncated;
            set_ports(m, load<rte_be16_t>(l4), load<rte_be16_t>(l4 + 2));
            return DropReason::none;
        case Proto::icmp6:
            return DropReason::none;  // parse_icmp6 (IPv6 only; over IPv4 it is another protocol)
        case Proto::icmp: {
            if (m.is_v6()) return DropReason::none;
            if (m.l4_len < sizeof(rte_icmp_hdr)) return DropReason::icmp_truncated;
            m.icmp_type = l4[0];
            if (m.icmp_type == RTE_IP_ICMP_ECHO_REQUEST || m.icmp_type == RTE_IP_ICMP_ECHO_REPLY) {
                // conntrack keys echo by identifier; both "ports" carry it so the reply key is the
                // plain reversal of the request key.
                m.key.sport = m.key.dport = load<rte_be16_t>(l4 + 4);
            } else if (is_icmp_error(m.icmp_type) && !m.more_fragments) {
                return parse_icmp_error(l4, m);
            }
            return DropReason::none;
        }
    }
    return DropReason::none;  // other protocols: addresses only
}

// A fragment's own checks, once its offset and data are known (RFC 791, RFC 8200 4.5, RFC 1858).
DropReason set_fragment(PacketMeta& m, uint32_t off, uint32_t data, uint32_t len, uint32_t id, uint8_t proto) noexcept {
    m.frag_off = static_cast<uint16_t>(off);
    m.frag = PacketMeta::FragFields{.id = id, .data = static_cast<uint16_t>(data)};
    if (len == 0 || (m.more_fragments && len % 8)) return DropReason::frag_misaligned;
    if (off + len > 65535) return DropReason::frag_oversize;  // the ping of death
    // RFC 1858 3.2: a TCP fragment at offset 8 can only be meant to overwrite the flags.
    if (off == 8 && proto == static_cast<uint8_t>(Proto::tcp)) return DropReason::frag_tiny;
    return DropReason::none;
}

// A first fragment must hold its whole L4 header (RFC 3128; RFC 7112 for the IPv6 header chain):
// what parse_l4 calls truncated is, in a first fragment, a tiny fragment.
DropReason first_fragment(DropReason r, const uint8_t* l4) noexcept {
    switch (r) {
        case DropReason::tcp_truncated:
        case DropReason::udp_truncated:
        case DropReason::sctp_truncated:
        case DropReason::icmp_truncated:
            return DropReason::frag_tiny;
        case DropReason::tcp_bad_doff:
            return (l4[12] >> 4) >= 5 ? DropReason::frag_tiny : r;  // options cut off, not a bad offset
        default:
            return r;
    }
}

// RFC 8200 / RFC 4291, on the frame `f` and its tuple: a multicast or loopback source is never
// valid; the unspecified source only for duplicate address detection (an NS, `nd`, checked by
// parse_icmp6); multicast frames and destinations, and link-local addresses, concern the link:
// only Neighbor Discovery is read, nothing forwarded; the loopback destination concerns no link at
// all (2.5.3).
[[gnu::always_inline]] inline DropReason check_ip6_addresses(const uint8_t* f, const FlowKey6& k, bool nd) noexcept {
    if (k.src.is_multicast() || k.src.is_loopback() || (k.src.is_zero() && !nd)) [[unlikely]]
        return DropReason::ip_bad_source;
    if (nd) return DropReason::none;
    if ((f[0] & 0x01) || k.dst.is_multicast()) [[unlikely]]
        return DropReason::ip6_multicast;
    if (k.src.is_link_local() || k.dst.is_link_local() || k.dst.is_loopback()) [[unlikely]]
        return DropReason::ip6_scope;
    return DropReason::none;
}

DropReason parse_ipv6(const uint8_t* f, uint32_t len, uint16_t off, PacketMeta& m) noexcept {
    if (len < off + 40u) [[unlikely]]
        return DropReason::ip6_truncated;
    const uint8_t* ip = f + off;
    if ((ip[0] >> 4) != 6) [[unlikely]]
        return DropReason::ip6_bad_version;
    const uint32_t end = 40u + from_be16(load<rte_be16_t>(ip + 4));
    if (off + end > len) [[unlikely]]
        return DropReason::ip6_bad_payload_length;  // padding after it is allowed
    m.l3 = L3Kind::ipv6;
    m.l3_off = off;
    m.ip_len = static_cast<uint16_t>(end);
    // The key's ports, protocol and padding are still the zeroes parse_packet started from.
    std::memcpy(m.key6.src.b, ip + 8, 16);
    std::memcpy(m.key6.dst.b, ip + 24, 16);
    ExtChain c{};
    if (ip[6] == static_cast<uint8_t>(Proto::tcp) || ip[6] == static_cast<uint8_t>(Proto::udp)) [[likely]] {
        c.proto = ip[6];  // no extension header: what walk_ext() finds at once
        c.l4 = 40;
    } else if (DropReason r = walk_ext(ip, end, c); r != DropReason::none) [[unlikely]] {
        return r == DropReason::ip6_ext_truncated && c.more_fragments && !c.frag_off ? DropReason::frag_tiny : r;
    }
    m.key6.proto = c.proto;
    m.l4_off = static_cast<uint16_t>(off + c.l4);
    m.l4_len = static_cast<uint16_t>(end - c.l4);
    m.more_fragments = c.more_fragments;
    if (c.fragment && (c.frag_off || c.more_fragments)) [[unlikely]] {
        if (DropReason r = set_fragment(m, c.frag_off, off + c.frag_data, end - c.frag_data, c.frag_id, c.proto);
            r != DropReason::none)
            return r;
    }
    if (!m.later_fragment()) [[likely]] {  // a later fragment has no L4 header to read
        DropReason r = c.proto == static_cast<uint8_t>(Proto::icmp6) ? parse_icmp6(ip, f + m.l4_off, m)
                                                                     : parse_l4(f + m.l4_off, m, c.proto);
        if (m.is_fragment()) r = first_fragment(r, f + m.l4_off);
        if (r != DropReason::none) return r;
    }
    return check_ip6_addresses(f, m.key6, m.is_nd());
}

// IPv4 after the link layer, the frame long enough for a minimal header; `ihl` its header length
// (IHL × 4). Inlined into its caller twice, once with `ihl` the constant 20 (no options: almost
// every packet), where the header checksum is five unrolled words.
[[gnu::always_inline]] inline DropReason parse_ipv4(const uint8_t* f, uint32_t len, uint16_t off, PacketMeta& m,
                                                    ParseOptions opts, uint16_t ihl) noexcept {
    const uint8_t* ip = f + off;
    // (3): version 4.
    if ((ip[0] >> 4) != 4) [[unlikely]]
        return DropReason::ip_bad_version;
    // (4): IHL at least 5 words, and the header fits in the frame.
    if (ihl < sizeof(rte_ipv4_hdr) || off + ihl > len) [[unlikely]]
        return DropReason::ip_bad_ihl;
    // (5): total length at least the header, and within the frame (padding after it is allowed).
    uint16_t total = from_be16(load<rte_be16_t>(ip + 2));
    if (total < ihl || off + total > len) [[unlikely]]
        return DropReason::ip_bad_total_length;
    // (2): the header checksum verifies.
    if (!opts.ip_csum_verified && !ipv4_header_csum_ok(ip, ihl)) [[unlikely]]
        return DropReason::ip_bad_checksum;

    m.l3 = L3Kind::ipv4;
    m.l3_off = off;
    m.l4_off = off + ihl;
    m.ip_len = total;
    m.l4_len = total - ihl;
    m.key.src = Ip4{load<rte_be32_t>(ip + 12)};
    m.key.dst = Ip4{load<rte_be32_t>(ip + 16)};
    m.key.proto = ip[9];
    if (is_martian_source(m.key.src)) [[unlikely]]
        return DropReason::ip_bad_source;

    const uint16_t frag = from_be16(load<rte_be16_t>(ip + 6));
    m.more_fragments = (frag & RTE_IPV4_HDR_MF_FLAG) != 0;
    m.dont_fragment = (frag & RTE_IPV4_HDR_DF_FLAG) != 0;
    if (frag & (RTE_IPV4_HDR_OFFSET_MASK | RTE_IPV4_HDR_MF_FLAG)) [[unlikely]] {
        const uint32_t fo = (frag & RTE_IPV4_HDR_OFFSET_MASK) * 8u;
        if (DropReason r = set_fragment(m, fo, m.l4_off, m.l4_len, from_be16(load<rte_be16_t>(ip + 4)), ip[9]);
            r != DropReason::none)
            return r;
        if (fo) return DropReason::none;  // a later fragment: addresses only (frag_stage.h)
        return first_fragment(parse_l4(f + m.l4_off, m, m.key.proto), f + m.l4_off);
    }
    return parse_l4(f + m.l4_off, m, m.key.proto);
}

// The parser, inlined into the parse stage's loop (parse_burst); parse_packet is its entry for
// everyone else. As a call a packet, its register saves and restores and the call's argument moves
// were about 25 instructions of an established packet's 1,000 (callgrind).
[[gnu::always_inline]] inline DropReason parse_frame(const uint8_t* f, uint32_t len, PacketMeta& m,
                                                     ParseOptions opts) noexcept {
    zero_meta(m);
    if (len < sizeof(rte_ether_hdr)) [[unlikely]]
        return DropReason::eth_truncated;
    uint16_t off = sizeof(rte_ether_hdr);
    uint16_t type = from_be16(load<rte_be16_t>(f + 12));
    if (type == kEthVlan) {
        if (len < off + sizeof(rte_vlan_hdr)) [[unlikely]]
            return DropReason::vlan_truncated;
        type = from_be16(load<rte_be16_t>(f + off + 2));
        const uint16_t vid = from_be16(load<rte_be16_t>(f + off)) & 0xfff;
        off += sizeof(rte_vlan_hdr);
        if (type == kEthVlan || type == kEthQinQ) [[unlikely]]
            return DropReason::vlan_stacked;
        // A tagged frame of a device with VLAN ports had its ID checked by the dispatch (vlan.h);
        // on any other device a VLAN ID is one no port has. ID 0 is a priority tag only.
        if (vid != 0 && !opts.tags_checked) [[unlikely]]
            return DropReason::vlan_unknown;
    } else if (type == kEthQinQ) [[unlikely]] {
        return DropReason::vlan_stacked;
    }

    if (type == RTE_ETHER_TYPE_ARP) {
        if (len < off + kArpIpv4Len) [[unlikely]]
            return DropReason::arp_truncated;
        m.l3 = L3Kind::arp;
        m.l3_off = off;
        return DropReason::none;
    }
    if (type == RTE_ETHER_TYPE_IPV6) return parse_ipv6(f, len, off, m);
    if (type != RTE_ETHER_TYPE_IPV4) [[unlikely]]
        return DropReason::ethertype_unknown;

    // RFC 1812 5.3.4: a router does not forward IP packets received as link-layer broadcast or
    // multicast (bit 0 of the first destination octet).
    if (f[0] & 0x01) [[unlikely]]
        return DropReason::l2_not_for_us;

    // RFC 1812 5.2.2 (1): the frame is long enough for a minimal IP header.
    if (len < off + sizeof(rte_ipv4_hdr)) [[unlikely]]
        return DropReason::ip_truncated;
    const uint16_t ihl = (f[off] & 0x0f) * 4;
    if (ihl == sizeof(rte_ipv4_hdr)) [[likely]]
        return parse_ipv4(f, len, off, m, opts, sizeof(rte_ipv4_hdr));
    return parse_ipv4(f, len, off, m, opts, ihl);
}

// The L4 checks of parse_l4 (check_tcp, the flags, check_udp) for a packet that is not a fragment;
// `l4` has room for a TCP header's first 14 bytes. False: another protocol, or a check failed.
[[gnu::always_inline]] inline bool fast_l4(const uint8_t* l4, uint32_t l4_len, uint8_t proto) noexcept {
    if (proto == static_cast<uint8_t>(Proto::tcp))
        return check_tcp(l4, l4_len) == DropReason::none && !(kBadTcpFlags >> (l4[13] & 0x3f) & 1);
    if (proto == static_cast<uint8_t>(Proto::udp)) return check_udp(l4, l4_len, false) == DropReason::none;
    return false;
}

// The flags byte as the meta keeps it, read again where it is stored rather than kept from the
// checks: a value live across the checks was spilled by GCC as a byte and read back as a word, a
// store-forwarding stall that held a third of parse_burst's samples through the port.
[[gnu::always_inline]] inline uint32_t fast_tcp_flags(const uint8_t* l4, uint8_t proto) noexcept {
    return proto == static_cast<uint8_t>(Proto::tcp) ? l4[13] & 0x3fu : 0u;
}

// The shortest frame the fast paths below take: an IPv4 TCP header's (a minimum Ethernet frame, 60
// bytes, always has it).
constexpr uint32_t kFastMinLen = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_tcp_hdr);
// The fast paths' Ethernet header: untagged, or one 802.1Q tag whose ID the dispatch checked or 0.
constexpr uint32_t kL2Plain = sizeof(rte_ether_hdr), kL2Tagged = sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr);

// The frame nearly every packet is (EtherType 0x0800 after an L2 header of kEth bytes, which the
// caller has read): IPv4 to a unicast MAC, a 20-byte header, not a fragment, TCP or UDP, and every
// check of parse_frame passing. Decided from two 8-byte loads and a few compares, the tuple
// written as one 16-byte store from the frame's own bytes (source, destination and ports lie in
// the key's order there). Any other frame, or one failing any check,
// returns false and goes to parse_frame, which names its reason; for a frame it takes, the meta is
// parse_frame's byte for byte (ParseBurst tests).
template <uint32_t kEth>
[[gnu::always_inline]] inline bool parse_ipv4_fast(const uint8_t* f, uint32_t len, PacketMeta& m,
                                                   bool csum_verified) noexcept {
    constexpr uint32_t kIp = sizeof(rte_ipv4_hdr);
    if (len < kFastMinLen + (kEth - kL2Plain)) [[unlikely]]
        return false;
    // Bytes 12-19 of an untagged frame (EtherType, version and IHL, TOS, total length,
    // identification) and 20-27 (flags and fragment offset, TTL, protocol, checksum, half the
    // source), little-endian words; 4 bytes on for a tagged one.
    const uint64_t a = load<uint64_t>(f + kEth - 2);
    const uint64_t c = load<uint64_t>(f + kEth + 6);
    // Version 4 and IHL 5, a unicast destination MAC; neither MF nor an offset (DF and the reserved
    // bit may be set, as parse_ipv4 allows).
    if ((a & 0xff0000) != 0x450000 || (c & 0xff3f) != 0 || (f[0] & 0x01)) [[unlikely]]
        return false;
    const uint32_t total = from_be16(static_cast<uint16_t>(a >> 32));
    const uint8_t proto = static_cast<uint8_t>(c >> 24);
    const uint32_t l4_len = total - kIp;  // wraps when total < 20: then larger than any frame
    if (kEth + total > len || total < kIp) [[unlikely]]
        return false;
    const uint8_t* l4 = f + kEth + kIp;
    if (!fast_l4(l4, l4_len, proto)) [[unlikely]]
        return false;
    if (is_martian_source(Ip4{load<rte_be32_t>(f + kEth + 12)})) [[unlikely]]
        return false;
    if (!csum_verified && !ipv4_header_csum_ok(f + kEth, kIp)) [[unlikely]]
        return false;
    zero_meta(m);
#if defined(__SSE2__)
    // Source, destination, ports (bytes 26-37) and four bytes past them; the protocol in byte 12,
    // the padding zero.
    static_assert(offsetof(FlowKey, proto) == 12 && sizeof(FlowKey) == 16);
    __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f + kEth + 12));
    k = _mm_or_si128(_mm_and_si128(k, _mm_setr_epi32(-1, -1, -1, 0)), _mm_slli_si128(_mm_cvtsi32_si128(proto), 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&m.key), k);
#else
    m.key.src = Ip4{load<rte_be32_t>(f + kEth + 12)};
    m.key.dst = Ip4{load<rte_be32_t>(f + kEth + 16)};
    m.key.sport = load<rte_be16_t>(l4);
    m.key.dport = load<rte_be16_t>(l4 + 2);
    m.key.proto = proto;
#endif
    // l3_off, l4_off, l4_len and ip_len in one store; tcp_flags, icmp_type (0), l3 (ipv4, 0) and
    // the flags byte in another: DF is that byte's bit 1 (PacketMeta's bit-fields, the first in
    // the lowest bit as the x86-64 ABI lays them out; ParseBurst.FlagsByteLayout checks it).
    static_assert(offsetof(PacketMeta, l4_off) == offsetof(PacketMeta, l3_off) + 2 &&
                  offsetof(PacketMeta, l4_len) == offsetof(PacketMeta, l3_off) + 4 &&
                  offsetof(PacketMeta, ip_len) == offsetof(PacketMeta, l3_off) + 6 &&
                  offsetof(PacketMeta, icmp_type) == offsetof(PacketMeta, tcp_flags) + 1 &&
                  offsetof(PacketMeta, l3) == offsetof(PacketMeta, tcp_flags) + 2 &&
                  offsetof(PacketMeta, inner_off) == offsetof(PacketMeta, tcp_flags) + 4);
    // The total length read again from the frame, as the flags byte below is: kept from the
    // checks, GCC spilled it as 2 bytes and read it back as 8 for the shift, a store-forwarding
    // stall that held 39% of parse_burst's samples through the port (bench/profile).
    const uint64_t ip_len = from_be16(load<rte_be16_t>(f + kEth + 2));
    const uint64_t lens = kEth | uint64_t{kEth + kIp} << 16 | uint64_t{l4_len} << 32 | ip_len << 48;
    std::memcpy(&m.l3_off, &lens, sizeof lens);
    const uint32_t bytes = fast_tcp_flags(l4, proto) | (c & 0x40 ? kDontFragmentBit : 0u) << 24;
    std::memcpy(&m.tcp_flags, &bytes, sizeof bytes);
    return true;
}

// The same for IPv6 (EtherType 0x86dd, which the caller has read): a 40-byte header followed at
// once by TCP or UDP (no extension header), addresses and MAC that check_ip6_addresses lets
// through. The key's addresses and ports lie in its order in the frame (bytes 22-57 untagged).
template <uint32_t kEth>
[[gnu::always_inline]] inline bool parse_ipv6_fast(const uint8_t* f, uint32_t len, PacketMeta& m) noexcept {
    constexpr uint32_t kIp = 40;
    if (len < kEth + kIp + sizeof(rte_tcp_hdr)) [[unlikely]]  // a TCP header's room, as for IPv4
        return false;
    const uint8_t* ip = f + kEth;
    const uint32_t l4_len = from_be16(load<rte_be16_t>(ip + 4));
    const uint8_t proto = ip[6];
    if ((ip[0] >> 4) != 6 || kEth + kIp + l4_len > len) [[unlikely]]
        return false;
    if (!fast_l4(ip + kIp, l4_len, proto)) [[unlikely]]
        return false;
    static_assert(std::is_trivially_copyable_v<PacketMeta> && sizeof(FlowKey6) == 40 &&
                  offsetof(FlowKey6, sport) == 32 && offsetof(FlowKey6, proto) == 36);
    zero_meta(m);
    std::memcpy(static_cast<void*>(&m.key6), ip + 8, 36);  // source, destination, ports
    m.key6.proto = proto;
    if (check_ip6_addresses(f, m.key6, false) != DropReason::none) [[unlikely]]
        return false;
    m.l3 = L3Kind::ipv6;
    m.l3_off = kEth;
    m.l4_off = kEth + kIp;
    m.l4_len = static_cast<uint16_t>(l4_len);
    m.ip_len = static_cast<uint16_t>(kIp + l4_len);
    m.tcp_flags = static_cast<uint8_t>(fast_tcp_flags(ip + kIp, proto));
    return true;
}

}  // namespace

DropReason parse_packet(const uint8_t* f, uint32_t len, PacketMeta& m, ParseOptions opts) noexcept {
    return parse_frame(f, len, m, opts);
}

namespace {

// A frame the fast paths take, after an L2 header of kEth bytes: its meta written, its verdict
// forward, in its family's list.
template <uint32_t kEth>
[[gnu::always_inline]] inline bool parse_fast(Burst& b, uint16_t i, const uint8_t* f, uint32_t len, uint16_t type,
                                              uint64_t csum) noexcept {
    PacketState& p = b.pkt[i];
    if (type == to_be16(RTE_ETHER_TYPE_IPV4) &&
        parse_ipv4_fast<kEth>(f, len, p.meta, csum == RTE_MBUF_F_RX_IP_CKSUM_GOOD)) [[likely]] {
        p.set(Verdict::forward);
        b.flows.push(i);
        return true;
    }
    if (type == to_be16(RTE_ETHER_TYPE_IPV6) && parse_ipv6_fast<kEth>(f, len, p.meta)) {
        p.set(Verdict::forward);
        b.flows6.push(i);
        return true;
    }
    return false;
}

// The parse stage's loop. kTagged: a VLAN port's burst (Burst::tags_checked), whose frames carry
// their checked tag, read past on the fast paths first (vlan.h); else the fast paths take
// untagged frames only. A loop of each, so that the untagged one, nearly every burst, has no test
// for a tag.
template <bool kTagged>
[[gnu::always_inline]] inline void parse_loop(Burst& b, WorkerCtx& ctx) noexcept {
    uint64_t rx_bytes = 0;  // added to the counters once a burst
    for (uint16_t i = 0; i < b.n; ++i) {
        if (i + 1 < b.n) rte_prefetch0(rte_pktmbuf_mtod(b.mbufs[i + 1], void*));
        rte_mbuf* mb = b.mbufs[i];
        PacketState& p = b.pkt[i];
        rx_bytes += mb->pkt_len;
        p.ref = FlowRef{};
        p.attributed = false;
        p.frag = FragRole::none;
        p.l2 = L2Outcome::none;
        p.next_mac = 0;
        p.next_hop = Ip4{};
        if (b.trace) b.trace[i] = PacketTrace{};
        const uint64_t csum = mb->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
        const uint8_t* f = rte_pktmbuf_mtod(mb, const uint8_t*);
        const uint32_t len = rte_pktmbuf_data_len(mb);
        // The fast paths (above), for the common frames; the full parser for the rest and for
        // every error (a NIC's bad checksum too, whatever the frame: the full path's rule).
        if (mb->nb_segs == 1 && len >= kFastMinLen && csum != RTE_MBUF_F_RX_IP_CKSUM_BAD) [[likely]] {
            if constexpr (kTagged)
                if (vlan_tagged(f) && parse_fast<kL2Tagged>(b, i, f, len, load<rte_be16_t>(f + 16), csum)) [[likely]]
                    continue;
            if (parse_fast<kL2Plain>(b, i, f, len, load<rte_be16_t>(f + 12), csum)) [[likely]]
                continue;
        }
        // A frame larger than one mbuf arrives chained; headers split over segments are not
        // parsed (the data room is sized for an MTU: a jumbo frame here is a misconfiguration).
        ParseOptions po{.ip_csum_verified = csum == RTE_MBUF_F_RX_IP_CKSUM_GOOD, .tags_checked = kTagged};
        DropReason r = mb->nb_segs > 1 ? DropReason::mbuf_chained : parse_frame(f, len, p.meta, po);
        if (csum == RTE_MBUF_F_RX_IP_CKSUM_BAD && r == DropReason::none) r = DropReason::ip_bad_checksum;
        if (r != DropReason::none) {
            p.set(Verdict::drop, r);
        } else if (p.meta.is_fragment()) [[unlikely]] {
            p.set(Verdict::forward);
            frag_arrive(b, ctx, i);  // frag_stage.h: a first fragment goes on to its lookup
        } else if (p.meta.l3 == L3Kind::ipv4) [[likely]] {
            // No copy of the tuple into `out` here: parse has just written it field by field, and
            // a 16-byte load of it now would stall on store forwarding (4% of process_burst in
            // BM_PipelineEstablished). A forwarded packet leaves with meta.key.
            p.set(Verdict::forward);
            b.flows.push(i);
        } else if (p.meta.l3 == L3Kind::ipv6 && !p.meta.is_nd()) {
            p.set(Verdict::forward);
            b.flows6.push(i);
        } else {
            p.set(Verdict::local);  // ARP, Neighbor Discovery: answered or learned from by the output stage
        }
    }
    ctx.counters.rx_packets += b.n;
    ctx.counters.rx_bytes += rx_bytes;
}

}  // namespace

void parse_burst(Burst& b, WorkerCtx& ctx) noexcept {
    if (b.tags_checked) [[unlikely]]
        return parse_loop<true>(b, ctx);
    parse_loop<false>(b, ctx);
}

}  // namespace svcgate::dp
