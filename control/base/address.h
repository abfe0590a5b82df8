// Numbers, addresses, prefixes, MACs and ADDRESS:PORT endpoints as text: the one place they are parsed
// into their value types (dataplane/base/types.h's Ip4, Ip6, IpAddr, IpCidr; HostPort below) and
// the one place they are formatted, for the config, the tools, the replies and the logs alike.
// Parsers answer nullopt for anything that is not exactly one of the forms they name.
//
// Runs on: any thread (pure functions).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dataplane/base/types.h"

namespace svcgate::ctl {

using dp::Cidr4;
using dp::Ip4;
using dp::Ip6;
using dp::IpAddr;
using dp::IpCidr;

// An address and a port: a listener (control.metrics, ha.listen) or a peer (ha.peers).
struct HostPort {
    IpAddr addr;
    uint16_t port = 0;
    bool operator==(const HostPort&) const = default;
};

// A whole decimal number ("80"; not "", "+1", "8O", "80 ") within [lo, hi].
std::optional<uint64_t> parse_number(std::string_view s, uint64_t lo = 0, uint64_t hi = UINT64_MAX);

// "10.0.0.1" / "10.0.0.0/8".
std::optional<Ip4> parse_ip4(std::string_view s);
std::optional<Cidr4> parse_cidr4(std::string_view s, bool keep_host_bits = false);
std::string format_ip4(Ip4 a);
// Either family: "fd00::1" (RFC 4291 text, no zone, no brackets) or "10.0.0.1"; "fd00::/64" or
// "10.0.0.0/8". An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is refused: IPv4 is written as IPv4.
std::optional<Ip6> parse_ip6(std::string_view s);
std::optional<IpAddr> parse_ip(std::string_view s);
std::optional<IpCidr> parse_cidr(std::string_view s, bool keep_host_bits = false);
IpCidr mask_cidr(const IpCidr& c);  // host bits cleared
// RFC 5952's canonical text for IPv6.
std::string format_ip6(const Ip6& a);
std::string format_ip(const IpAddr& a);
std::string format_cidr(const IpCidr& c);
// "10.0.0.1:80" or "[fd00::1]:80" (net.JoinHostPort's form, as kube-proxy writes endpoints); with
// a default_port other than 0, an address alone ("10.0.0.1", "fd00::1", "[fd00::1]") too. Port 0
// is refused.
std::optional<HostPort> parse_host_port(std::string_view s, uint16_t default_port = 0);
std::string format_endpoint(const IpAddr& a, uint16_t port);
std::string format_host_port(const HostPort& e);
// "02:00:5e:00:00:01" (six hex pairs, ':' or '-'); formatted lower case with ':'.
std::optional<std::array<uint8_t, 6>> parse_mac(std::string_view s);
std::string format_mac(const std::array<uint8_t, 6>& m);

}  // namespace svcgate::ctl
