// A Service's health check (HealthCheckConfig) as the two forms write it: the compact form's
// `health_check:` mapping and the Kubernetes annotation `svcgate.io/health-check`, whose text is
// `TYPE[:PATH] [KEY=VALUE ...]` with the mapping's keys (`http:/healthz interval_ms=500 fall=2`).
// Both go through one table of keys, so they take the same values and say the same errors.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "control/config/config_model.h"
#include "control/config/yaml_reader.h"

namespace svcgate::ctl {

inline constexpr const char* kHealthCheckAnnotation = "svcgate.io/health-check";

// The compact form's mapping at `n`; none (with the errors recorded) when it is not valid.
std::optional<HealthCheckConfig> read_health_check(Reader& r, const ytree::Node& n, const Path& path);

// The annotation's text; none with `error` set when it is not valid.
std::optional<HealthCheckConfig> parse_health_check(std::string_view text, std::string& error);

// "tcp", "http", "udp".
const char* health_check_type_name(HealthCheckConfig::Type t);

// One line for the operator: "http GET /healthz :8080 every 2000 ms, timeout 1000 ms, rise 2, fall 3".
std::string describe(const HealthCheckConfig& hc);

}  // namespace svcgate::ctl
