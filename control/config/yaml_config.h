// YAML → Config. Every error names file, line and column (yaml-cpp marks, 0-based, printed +1)
// and the path of the value; all errors are collected before ConfigError is thrown. Unknown
// fields are warnings.
//
// Runs on: the control thread and the command-line tools. Throws ConfigError.
#pragma once

#include <string>

#include "control/config/config_model.h"

namespace svcgate::ctl {

Config load_config_file(const std::string& path);
Config load_config_string(const std::string& yaml, const std::string& name = "<string>");

// "10.0.0.1" / "10.0.0.0/8" parsers shared with trace; nullopt on a bad string.
std::optional<Ip4> parse_ip4(std::string_view s);
std::optional<Cidr4> parse_cidr4(std::string_view s, bool keep_host_bits = false);
std::string format_ip4(Ip4 a);
std::string format_cidr4(const Cidr4& c);
// Either family: "fd00::1" (RFC 4291 text, no zone) or "10.0.0.1"; "fd00::/64" or "10.0.0.0/8".
std::optional<Ip6> parse_ip6(std::string_view s);
std::optional<IpAddr> parse_ip(std::string_view s);
std::optional<IpCidr> parse_cidr(std::string_view s, bool keep_host_bits = false);
IpCidr mask_cidr(const IpCidr& c);  // host bits cleared
// RFC 5952's canonical text for IPv6.
std::string format_ip6(const Ip6& a);
std::string format_ip(const IpAddr& a);
std::string format_cidr(const IpCidr& c);
// "10.0.0.1:80" or "[fd00::1]:80" (net.JoinHostPort's form, as kube-proxy writes endpoints).
std::string format_endpoint(const IpAddr& a, uint16_t port);
// TCP, UDP, SCTP, ICMP in any case; names in Kubernetes' spelling, or tcpdump's (lowercase).
std::optional<Proto> parse_proto(std::string_view s);
// "02:00:5e:00:00:01" (six hex pairs, ':' or '-').
std::optional<std::array<uint8_t, 6>> parse_mac(std::string_view s);
std::string proto_name(Proto p, bool lowercase = false);

}  // namespace svcgate::ctl
