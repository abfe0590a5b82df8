#include "packet_spec.h"

#include <charconv>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "checksum.h"
#include "yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

// A number in [lo, hi] from `s`, or a readable std::invalid_argument.
unsigned number(const std::string& s, unsigned lo, unsigned hi, const std::string& what, const std::string& all) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || s.empty() || v < lo || v > hi)
        throw std::invalid_argument(fmt::format("\"{}\": bad {} \"{}\" ({}-{})", all, what, s, lo, hi));
    return v;
}

void parse_endpoint(const std::string& s, bool with_port, Ip4& ip, rte_be16_t& port, const std::string& all) {
    std::string addr = s;
    if (with_port) {
        auto colon = s.rfind(':');
        if (colon == std::string::npos) throw std::invalid_argument(fmt::format("\"{}\": \"{}\" needs :port", all, s));
        addr = s.substr(0, colon);
        port = rte_cpu_to_be_16(static_cast<uint16_t>(number(s.substr(colon + 1), 0, 65535, "port", all)));
    }
    auto a = parse_ip4(addr);
    if (!a) throw std::invalid_argument(fmt::format("\"{}\": \"{}\" is not an IPv4 address", all, addr));
    ip = *a;
}

}  // namespace

std::string format_tcp_flags(uint8_t f) {
    std::string s;
    if (f & kSyn) s += 'S';
    if (f & kFin) s += 'F';
    if (f & kRst) s += 'R';
    if (f & kPsh) s += 'P';
    if (f & kUrg) s += 'U';
    if (f & kAck) s += '.';
    return s;
}

std::string format_tuple(const FlowKey& k) {
    auto p = static_cast<Proto>(k.proto);
    const std::string word = proto_name(p, true);
    if (p == Proto::tcp || p == Proto::udp || p == Proto::sctp)
        return fmt::format("{} {}:{} > {}:{}", word, format_ip4(k.src), rte_be_to_cpu_16(k.sport),
                           format_ip4(k.dst), rte_be_to_cpu_16(k.dport));
    return fmt::format("{} {} > {}", word, format_ip4(k.src), format_ip4(k.dst));
}

PacketSpec parse_packet_spec(const std::string& text) {
    std::istringstream is(text);
    std::string proto, src, arrow, dst;
    if (!(is >> proto >> src >> arrow >> dst) || arrow != ">")
        throw std::invalid_argument(fmt::format("\"{}\": expected \"PROTO SRC > DST [FLAGS]\"", text));
    PacketSpec p;
    const auto pr = parse_proto(proto);
    if (!pr) throw std::invalid_argument(fmt::format("\"{}\": protocol \"{}\" is not tcp, udp, sctp or icmp", text, proto));
    p.key.proto = static_cast<uint8_t>(*pr);
    const bool ports = *pr != Proto::icmp;
    if (!dst.empty() && dst.back() == ':') dst.pop_back();  // tcpdump prints "dst.port:"
    parse_endpoint(src, ports, p.key.src, p.key.sport, text);
    parse_endpoint(dst, ports, p.key.dst, p.key.dport, text);
    if (!ports) p.key.sport = p.key.dport = rte_cpu_to_be_16(1);  // echo identifier
    std::string word;
    bool flags_seen = false;
    while (is >> word) {
        if (word.size() >= 2 && word.front() == '[' && word.back() == ']') {
            for (char c : word.substr(1, word.size() - 2)) {
                switch (c) {
                case 'S': p.tcp_flags |= kSyn; break;
                case 'F': p.tcp_flags |= kFin; break;
                case 'R': p.tcp_flags |= kRst; break;
                case 'P': p.tcp_flags |= kPsh; break;
                case 'U': p.tcp_flags |= kUrg; break;
                case '.': p.tcp_flags |= kAck; break;
                case 'E': case 'W': break;
                default: throw std::invalid_argument(fmt::format("\"{}\": unknown TCP flag '{}'", text, c));
                }
            }
            flags_seen = true;
        } else if (word.rfind("ttl=", 0) == 0) {
            p.ttl = static_cast<uint8_t>(number(word.substr(4), 0, 255, "ttl", text));
        } else if (word.rfind("len=", 0) == 0) {
            p.payload = static_cast<uint16_t>(number(word.substr(4), 0, 1400, "len", text));
        } else {
            throw std::invalid_argument(fmt::format("\"{}\": unexpected \"{}\"", text, word));
        }
    }
    if (p.key.proto == static_cast<uint8_t>(Proto::tcp) && !flags_seen) p.tcp_flags = kAck;
    return p;
}

std::vector<uint8_t> build_frame(const PacketSpec& p) {
    const auto proto = static_cast<Proto>(p.key.proto);
    size_t l4 = proto == Proto::tcp ? sizeof(rte_tcp_hdr) : proto == Proto::sctp ? 12 : 8;
    size_t ip_len = sizeof(rte_ipv4_hdr) + l4 + p.payload;
    std::vector<uint8_t> f(sizeof(rte_ether_hdr) + ip_len, 0);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(f.data());
    const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x01}, smac[6] = {0x02, 0, 0, 0, 0, 0x02};
    std::memcpy(&eth->dst_addr, dmac, 6);
    std::memcpy(&eth->src_addr, smac, 6);
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    uint8_t* ip = f.data() + sizeof(rte_ether_hdr);
    auto* h = reinterpret_cast<rte_ipv4_hdr*>(ip);
    h->version_ihl = 0x45;
    h->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(ip_len));
    h->packet_id = rte_cpu_to_be_16(1);
    h->time_to_live = p.ttl;
    h->next_proto_id = p.key.proto;
    h->src_addr = p.key.src.be;
    h->dst_addr = p.key.dst.be;
    h->hdr_checksum = inet_csum(ip, sizeof(rte_ipv4_hdr));
    uint8_t* l = ip + sizeof(rte_ipv4_hdr);
    switch (proto) {
    case Proto::tcp: {
        auto* t = reinterpret_cast<rte_tcp_hdr*>(l);
        t->src_port = p.key.sport;
        t->dst_port = p.key.dport;
        t->sent_seq = rte_cpu_to_be_32(1000);
        t->recv_ack = rte_cpu_to_be_32((p.tcp_flags & kAck) ? 2000 : 0);
        t->data_off = 5 << 4;
        t->tcp_flags = p.tcp_flags;
        t->rx_win = rte_cpu_to_be_16(65535);
        t->cksum = ipv4_l4_csum(ip, l, l4 + p.payload);
        break;
    }
    case Proto::udp: {
        auto* u = reinterpret_cast<rte_udp_hdr*>(l);
        u->src_port = p.key.sport;
        u->dst_port = p.key.dport;
        u->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(l4 + p.payload));
        u->dgram_cksum = ipv4_l4_csum(ip, l, l4 + p.payload);
        if (u->dgram_cksum == 0) u->dgram_cksum = 0xffff;
        break;
    }
    case Proto::sctp: {
        std::memcpy(l, &p.key.sport, 2);
        std::memcpy(l + 2, &p.key.dport, 2);
        rte_be32_t crc = sctp_crc32c(l, l4 + p.payload);
        std::memcpy(l + 8, &crc, 4);
        break;
    }
    case Proto::icmp: {
        l[0] = 8;  // echo request
        std::memcpy(l + 4, &p.key.sport, 2);
        uint16_t c = inet_csum(l, l4 + p.payload);
        std::memcpy(l + 2, &c, 2);
        break;
    }
    }
    return f;
}

}  // namespace svcgate::ctl
