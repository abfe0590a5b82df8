// kubernetes.load_balancer: the pools MetalLB's IPAddressPools describe, read and checked
// (overlaps, reversed ranges, empty pools, duplicate names: each refused with its position), and
// Kubernetes label selectors (matchLabels, matchExpressions) read and matched.
//
// Runs on: the control thread and the command-line tools. Internal to control/config/ but for
// LabelSelector::matches (config_model.h), which the allocator calls.
#pragma once

#include <optional>
#include <string_view>

#include "control/config/config_model.h"
#include "control/config/yaml_reader.h"

namespace svcgate::ctl {

// kubernetes.load_balancer (after kubernetes.api, which it needs).
void read_load_balancer(Reader& r, const ytree::Node& n, Config& cfg);

// "10.0.0.0/28" (host bits clear), "10.0.0.1-10.0.0.9" (one family, first <= last) or one address,
// as a range; nullopt with why.
std::optional<AddressRange> parse_address_range(std::string_view s, std::string& why);

}  // namespace svcgate::ctl
