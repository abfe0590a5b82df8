#include "control/base/address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

namespace svcgate::ctl {

std::optional<uint64_t> parse_number(std::string_view s, uint64_t lo, uint64_t hi) {
    uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
    return v;
}

std::optional<std::array<uint8_t, 6>> parse_mac(std::string_view s) {
    std::array<uint8_t, 6> m{};
    if (s.size() != 17) return std::nullopt;
    for (size_t i = 0; i < 6; ++i) {
        const char* p = s.data() + 3 * i;
        if (i > 0 && p[-1] != ':' && p[-1] != '-') return std::nullopt;
        auto [q, ec] = std::from_chars(p, p + 2, m[i], 16);
        if (ec != std::errc{} || q != p + 2) return std::nullopt;
    }
    return m;
}

std::optional<Ip4> parse_ip4(std::string_view s) {
    uint32_t v = 0;
    int parts = 0;
    const char* p = s.data();
    const char* end = s.data() + s.size();
    while (parts < 4) {
        unsigned octet = 0;
        auto [q, ec] = std::from_chars(p, end, octet);
        if (ec != std::errc{} || octet > 255 || q - p > 3 || q == p) return std::nullopt;
        v = v << 8 | octet;
        ++parts;
        p = q;
        if (parts < 4) {
            if (p == end || *p != '.') return std::nullopt;
            ++p;
        }
    }
    if (p != end) return std::nullopt;
    return Ip4::from_host(v);
}

std::optional<Cidr4> parse_cidr4(std::string_view s, bool keep_host_bits) {
    auto c = parse_cidr(s, keep_host_bits);
    if (!c || !c->addr.is_v4()) return std::nullopt;
    return c->v4();
}

std::string format_ip4(Ip4 a) {
    uint32_t h = a.host();
    return fmt::format("{}.{}.{}.{}", h >> 24, (h >> 16) & 0xff, (h >> 8) & 0xff, h & 0xff);
}

std::optional<Ip6> parse_ip6(std::string_view s) {
    // inet_pton takes RFC 4291 2.2's forms (with an embedded dotted quad); no zone, no brackets.
    if (s.empty() || s.size() >= INET6_ADDRSTRLEN || s.find(':') == std::string_view::npos) return std::nullopt;
    char buf[INET6_ADDRSTRLEN];
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = 0;
    Ip6 a;
    if (inet_pton(AF_INET6, buf, a.b) != 1) return std::nullopt;
    return a;
}

std::optional<IpAddr> parse_ip(std::string_view s) {
    if (auto a = parse_ip4(s)) return IpAddr::of(*a);
    if (auto a = parse_ip6(s)) {
        if (a->is_v4_mapped()) return std::nullopt;  // ::ffff:a.b.c.d is no IPv6 address of a host
        return IpAddr::of(*a);
    }
    return std::nullopt;
}

std::optional<IpCidr> parse_cidr(std::string_view s, bool keep_host_bits) {
    auto slash = s.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto ip = parse_ip(s.substr(0, slash));
    unsigned len = 0;
    auto lens = s.substr(slash + 1);
    auto [q, ec] = std::from_chars(lens.data(), lens.data() + lens.size(), len);
    if (!ip || ec != std::errc{} || q != lens.data() + lens.size() || lens.empty()) return std::nullopt;
    if (len > (ip->is_v4() ? 32u : 128u)) return std::nullopt;
    IpCidr c{*ip, static_cast<uint8_t>(len)};
    if (!keep_host_bits) c = mask_cidr(c);
    return c;
}

IpCidr mask_cidr(const IpCidr& c) {
    IpCidr r = c;
    const unsigned bits = (c.addr.is_v4() ? 96u : 0u) + c.len;  // over the mapped form's 128 bits
    for (unsigned i = 0; i < 16; ++i) {
        const unsigned keep = bits > i * 8 ? std::min(8u, bits - i * 8) : 0u;
        r.addr.a.b[i] &= static_cast<uint8_t>(0xff00u >> keep);
    }
    return r;
}

std::string format_ip6(const Ip6& a) {
    // glibc's inet_ntop writes RFC 5952's canonical form: lower case, leading zeros dropped, the
    // longest run of two or more zero groups (the first of equals) as "::".
    char buf[INET6_ADDRSTRLEN];
    if (!inet_ntop(AF_INET6, a.b, buf, sizeof buf)) return "?";
    return buf;
}

std::string format_ip(const IpAddr& a) { return a.is_v4() ? format_ip4(a.v4()) : format_ip6(a.v6()); }

std::string format_cidr(const IpCidr& c) { return fmt::format("{}/{}", format_ip(c.addr), c.len); }

std::string format_endpoint(const IpAddr& a, uint16_t port) {
    return a.is_v4() ? fmt::format("{}:{}", format_ip4(a.v4()), port)
                     : fmt::format("[{}]:{}", format_ip6(a.v6()), port);
}

std::string format_host_port(const HostPort& e) { return format_endpoint(e.addr, e.port); }

std::string format_mac(const std::array<uint8_t, 6>& b) {
    return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5]);
}

std::optional<HostPort> parse_host_port(std::string_view s, uint16_t default_port) {
    std::string_view host = s, port;
    if (!s.empty() && s.front() == '[') {
        const auto close = s.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        host = s.substr(1, close - 1);
        if (close + 1 < s.size()) {
            if (s[close + 1] != ':') return std::nullopt;
            port = s.substr(close + 2);
            if (port.empty()) return std::nullopt;
        }
    } else if (const auto colon = s.rfind(':'); colon != std::string_view::npos && s.find(':') == colon) {
        host = s.substr(0, colon);  // one colon: IPv4:PORT (an IPv6 address alone has several)
        port = s.substr(colon + 1);
        if (port.empty()) return std::nullopt;
    }
    const auto a = parse_ip(host);
    if (!a) return std::nullopt;
    HostPort e{*a, default_port};
    if (!port.empty()) {
        const auto v = parse_number(port, 1, 65535);
        if (!v) return std::nullopt;
        e.port = static_cast<uint16_t>(*v);
    }
    return e.port ? std::optional(e) : std::nullopt;
}

}  // namespace svcgate::ctl
