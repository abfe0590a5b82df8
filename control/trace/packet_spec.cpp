#include "control/trace/packet_spec.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <sstream>

#include <fmt/format.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "control/base/address.h"
#include "control/config/yaml_config.h"
#include "dataplane/base/checksum.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

// A number in [lo, hi] from `s` into `v`, or why not.
Status number(const std::string& s, unsigned lo, unsigned hi, const std::string& what, const std::string& all,
              unsigned& v) {
    const auto n = parse_number(s, lo, hi);
    if (!n) return Status::fail(fmt::format("\"{}\": bad {} \"{}\" ({}-{})", all, what, s, lo, hi));
    v = static_cast<unsigned>(*n);
    return {};
}

// ADDR:PORT or [ADDR]:PORT, or tcpdump's ADDR.PORT (IPv4 with four dots, IPv6 with colons);
// without ports just ADDR.
Status parse_endpoint(const std::string& s, bool with_port, IpAddr& ip, rte_be16_t& port, const std::string& all) {
    std::string addr = s;
    if (with_port) {
        size_t sep;
        if (!s.empty() && s.front() == '[') {
            sep = s.find("]:");
            if (sep == std::string::npos) return Status::fail(fmt::format("\"{}\": \"{}\" needs ]:port", all, s));
            addr = s.substr(1, sep - 1);
            ++sep;
        } else if (std::count(s.begin(), s.end(), ':') >= 2 || std::count(s.begin(), s.end(), '.') == 4) {
            sep = s.rfind('.');  // tcpdump: fd00::1.80, 10.0.0.1.80
            if (sep == std::string::npos) return Status::fail(fmt::format("\"{}\": \"{}\" needs .port", all, s));
            addr = s.substr(0, sep);
        } else {
            sep = s.rfind(':');
            if (sep == std::string::npos) return Status::fail(fmt::format("\"{}\": \"{}\" needs :port", all, s));
            addr = s.substr(0, sep);
        }
        unsigned n = 0;
        if (Status st = number(s.substr(sep + 1), 0, 65535, "port", all, n); !st) return st;
        port = rte_cpu_to_be_16(static_cast<uint16_t>(n));
    }
    if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
    auto a = parse_ip(addr);
    if (!a) return Status::fail(fmt::format("\"{}\": \"{}\" is not an IPv4 or IPv6 address", all, addr));
    ip = *a;
    return {};
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

namespace {
template <typename K>
std::string tuple_text(const K& k) {
    auto p = static_cast<Proto>(k.proto);
    const std::string word = proto_name(p, true);
    const IpAddr src = IpAddr::of(k.src), dst = IpAddr::of(k.dst);
    if (p == Proto::tcp || p == Proto::udp || p == Proto::sctp)
        return fmt::format("{} {} > {}", word, format_endpoint(src, rte_be_to_cpu_16(k.sport)),
                           format_endpoint(dst, rte_be_to_cpu_16(k.dport)));
    return fmt::format("{} {} > {}", word, format_ip(src), format_ip(dst));
}
}  // namespace

std::string format_tuple(const FlowKey& k) { return tuple_text(k); }
std::string format_tuple(const FlowKey6& k) { return tuple_text(k); }

namespace {
// A line as `tcpdump -n` prints it ("[TIME] IP|IP6 SRC.PORT > DST.PORT: Flags [S], seq ...",
// "... : UDP, length 12", "... : ICMP6, echo request, ..."), rewritten into the spec form
// ("tcp SRC.PORT > DST.PORT: [S]"); what follows the protocol (seq, win, length) is dropped.
// Any other line is kept as it is.
Status from_tcpdump(const std::string& text, std::string& spec) {
    spec = text;
    std::istringstream is(text);
    std::string w, src, arrow, dst, what;
    // Timestamps: "12:00:00.000000" (default), "1700000000.000000" (-tt), "2026-11-23 12:00:00.0" (-tttt).
    auto stamp = [](const std::string& x) {
        return !x.empty() && std::isdigit(static_cast<unsigned char>(x[0])) &&
            x.find_first_not_of("0123456789:.-") == std::string::npos && x.find_first_of(":.-") != std::string::npos;
    };
    while (is >> w && stamp(w)) {}
    if (w != "IP" && w != "IP6") return {};
    if (!(is >> src >> arrow >> dst >> what) || arrow != ">")
        return Status::fail(fmt::format("\"{}\": expected tcpdump's \"IP SRC > DST: ...\"", text));
    if (what == "Flags") {
        std::string flags;
        is >> flags;
        if (!flags.empty() && flags.back() == ',') flags.pop_back();
        spec = fmt::format("tcp {} > {} {}", src, dst, flags);
        return {};
    }
    if (!what.empty() && what.back() == ',') what.pop_back();
    if (what == "UDP" || what == "sctp") {
        spec = fmt::format("{} {} > {}", what == "UDP" ? "udp" : "sctp", src, dst);
        return {};
    }
    if (what == "ICMP" || what == "ICMP6") {
        // The spec form builds an echo request: any other ICMP message is refused, not traced as one.
        std::string a, b;
        is >> a >> b;
        if (!(a == "echo" && (b == "request" || b == "request,")))
            return Status::fail(
                fmt::format("\"{}\": only an ICMP echo request can be traced from a tcpdump line", text));
        spec = fmt::format("{} {} > {}", w == "IP6" ? "icmp6" : "icmp", src, dst);
        return {};
    }
    return Status::fail(fmt::format(
        "\"{}\": which protocol tcpdump decoded as \"{}\" is not known; write it as \"udp SRC > DST\"", text, what));
}
}  // namespace

Status parse_packet_spec(const std::string& line, PacketSpec& p) {
    std::string text;
    if (Status st = from_tcpdump(line, text); !st) return st;
    std::istringstream is(text);
    std::string proto, src, arrow, dst;
    if (!(is >> proto >> src >> arrow >> dst) || arrow != ">")
        return Status::fail(fmt::format("\"{}\": expected \"PROTO SRC > DST [FLAGS]\"", text));
    p = PacketSpec{};
    auto pr = parse_proto(proto);
    if (!pr)
        return Status::fail(fmt::format("\"{}\": protocol \"{}\" is not tcp, udp, sctp, icmp or icmp6", text, proto));
    const bool ports = *pr != Proto::icmp && *pr != Proto::icmp6;
    if (!dst.empty() && dst.back() == ':') dst.pop_back();  // tcpdump prints "dst.port:"
    rte_be16_t sport = 0, dport = 0;
    IpAddr s, d;
    if (Status st = parse_endpoint(src, ports, s, sport, text); !st) return st;
    if (Status st = parse_endpoint(dst, ports, d, dport, text); !st) return st;
    if (s.family() != d.family())
        return Status::fail(fmt::format("\"{}\": source and destination are of different families", text));
    if (!ports) sport = dport = rte_cpu_to_be_16(1);  // echo identifier
    p.v6 = !s.is_v4();
    if (p.v6 && *pr == Proto::icmp) pr = Proto::icmp6;  // ping6 written as icmp
    if (!p.v6 && *pr == Proto::icmp6) return Status::fail(fmt::format("\"{}\": icmp6 needs IPv6 addresses", text));
    if (p.v6)
        p.key6 =
            FlowKey6{.src = s.v6(), .dst = d.v6(), .sport = sport, .dport = dport, .proto = static_cast<uint8_t>(*pr)};
    else
        p.key =
            FlowKey{.src = s.v4(), .dst = d.v4(), .sport = sport, .dport = dport, .proto = static_cast<uint8_t>(*pr)};
    std::string word;
    bool flags_seen = false;
    while (is >> word) {
        if (word.size() >= 2 && word.front() == '[' && word.back() == ']') {
            for (char c : word.substr(1, word.size() - 2)) {
                switch (c) {
                    case 'S':
                        p.tcp_flags |= kSyn;
                        break;
                    case 'F':
                        p.tcp_flags |= kFin;
                        break;
                    case 'R':
                        p.tcp_flags |= kRst;
                        break;
                    case 'P':
                        p.tcp_flags |= kPsh;
                        break;
                    case 'U':
                        p.tcp_flags |= kUrg;
                        break;
                    case '.':
                        p.tcp_flags |= kAck;
                        break;
                    case 'E':
                    case 'W':
                        break;
                    default:
                        return Status::fail(fmt::format("\"{}\": unknown TCP flag '{}'", text, c));
                }
            }
            flags_seen = true;
        } else if (word.rfind("ttl=", 0) == 0) {
            unsigned n = 0;
            if (Status st = number(word.substr(4), 0, 255, "ttl", text, n); !st) return st;
            p.ttl = static_cast<uint8_t>(n);
        } else if (word.rfind("len=", 0) == 0) {
            unsigned n = 0;
            if (Status st = number(word.substr(4), 0, 1400, "len", text, n); !st) return st;
            p.payload = static_cast<uint16_t>(n);
        } else {
            return Status::fail(fmt::format("\"{}\": unexpected \"{}\"", text, word));
        }
    }
    if (*pr == Proto::tcp && !flags_seen) p.tcp_flags = kAck;
    return {};
}

std::vector<uint8_t> build_frame(const PacketSpec& p) {
    const uint8_t proto_no = p.v6 ? p.key6.proto : p.key.proto;
    const auto proto = static_cast<Proto>(proto_no);
    const rte_be16_t sport = p.v6 ? p.key6.sport : p.key.sport, dport = p.v6 ? p.key6.dport : p.key.dport;
    size_t l4 = proto == Proto::tcp ? sizeof(rte_tcp_hdr) : proto == Proto::sctp ? 12 : 8;
    const size_t ip_hdr = p.v6 ? 40 : sizeof(rte_ipv4_hdr);
    size_t ip_len = ip_hdr + l4 + p.payload;
    std::vector<uint8_t> f(sizeof(rte_ether_hdr) + ip_len, 0);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(f.data());
    const uint8_t dmac[6] = {0x02, 0, 0, 0, 0, 0x01}, smac[6] = {0x02, 0, 0, 0, 0, 0x02};
    std::memcpy(&eth->dst_addr, dmac, 6);
    std::memcpy(&eth->src_addr, smac, 6);
    eth->ether_type = rte_cpu_to_be_16(p.v6 ? RTE_ETHER_TYPE_IPV6 : RTE_ETHER_TYPE_IPV4);
    uint8_t* ip = f.data() + sizeof(rte_ether_hdr);
    if (p.v6) {
        ip[0] = 0x60;
        const rte_be16_t plen = rte_cpu_to_be_16(static_cast<uint16_t>(l4 + p.payload));
        std::memcpy(ip + 4, &plen, 2);
        ip[6] = proto_no;
        ip[7] = p.ttl;
        std::memcpy(ip + 8, p.key6.src.b, 16);
        std::memcpy(ip + 24, p.key6.dst.b, 16);
    } else {
        auto* h = reinterpret_cast<rte_ipv4_hdr*>(ip);
        h->version_ihl = 0x45;
        h->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(ip_len));
        h->packet_id = rte_cpu_to_be_16(1);
        h->time_to_live = p.ttl;
        h->next_proto_id = p.key.proto;
        h->src_addr = p.key.src.be;
        h->dst_addr = p.key.dst.be;
        h->hdr_checksum = inet_csum(ip, sizeof(rte_ipv4_hdr));
    }
    uint8_t* l = ip + ip_hdr;
    auto l4_csum = [&](size_t len) -> uint16_t {
        return p.v6 ? ipv6_l4_csum(ip, l, static_cast<uint32_t>(len), proto_no) : ipv4_l4_csum(ip, l, len);
    };
    switch (proto) {
        case Proto::tcp: {
            auto* t = reinterpret_cast<rte_tcp_hdr*>(l);
            t->src_port = sport;
            t->dst_port = dport;
            t->sent_seq = rte_cpu_to_be_32(1000);
            t->recv_ack = rte_cpu_to_be_32((p.tcp_flags & kAck) ? 2000 : 0);
            t->data_off = 5 << 4;
            t->tcp_flags = p.tcp_flags;
            t->rx_win = rte_cpu_to_be_16(65535);
            t->cksum = l4_csum(l4 + p.payload);
            break;
        }
        case Proto::udp: {
            auto* u = reinterpret_cast<rte_udp_hdr*>(l);
            u->src_port = sport;
            u->dst_port = dport;
            u->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(l4 + p.payload));
            u->dgram_cksum = l4_csum(l4 + p.payload);
            if (u->dgram_cksum == 0) u->dgram_cksum = 0xffff;
            break;
        }
        case Proto::sctp: {
            std::memcpy(l, &sport, 2);
            std::memcpy(l + 2, &dport, 2);
            rte_be32_t crc = sctp_crc32c(l, l4 + p.payload);
            std::memcpy(l + 8, &crc, 4);
            break;
        }
        case Proto::icmp: {
            l[0] = 8;  // echo request
            std::memcpy(l + 4, &sport, 2);
            uint16_t c = inet_csum(l, l4 + p.payload);
            std::memcpy(l + 2, &c, 2);
            break;
        }
        case Proto::icmp6: {
            l[0] = kIcmp6EchoRequest;
            std::memcpy(l + 4, &sport, 2);
            uint16_t c = l4_csum(l4 + p.payload);
            std::memcpy(l + 2, &c, 2);
            break;
        }
    }
    return f;
}

}  // namespace svcgate::ctl
