// YAML → Config. Every error names file, line and column (yaml-cpp marks, 0-based, printed +1)
// and the path of the value; all errors are collected before ConfigError is thrown. Unknown
// fields are warnings.
//
// Runs on: the control thread and the command-line tools. Throws ConfigError.
#pragma once

#include <string>

#include "control/base/address.h"
#include "control/base/status.h"
#include "control/config/config_model.h"

namespace svcgate::ctl {

// What a Kubernetes object in a manifest that cannot be read does: refuse the file (--check, and
// svcgatectl trace: the operator's own file, every error shown), or leave out only that object,
// listed in Config::left_out (start and reload: one object never stops the rest, as for the API).
enum class ObjectErrors : uint8_t { refuse, leave_out };
Config load_config_file(const std::string& path, ObjectErrors objects = ObjectErrors::refuse);
Config load_config_string(const std::string& yaml, const std::string& name = "<string>");

// ha.key_file's text: 64 hex digits (`openssl rand -hex 32`), surrounding white space allowed.
Status parse_ha_key(const std::string& text, std::array<uint8_t, 32>& out);

// TCP, UDP, SCTP, ICMP in any case; names in Kubernetes' spelling, or tcpdump's (lowercase).
std::optional<Proto> parse_proto(std::string_view s);
std::string proto_name(Proto p, bool lowercase = false);

}  // namespace svcgate::ctl
