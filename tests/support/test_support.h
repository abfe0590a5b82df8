// Shared test helpers: the tool EAL (once per binary), configs from YAML strings, frames from
// packet specs, and full checksum verification of a frame.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config_model.h"
#include "packet_spec.h"
#include "parse.h"
#include "tool_eal.h"
#include "trace.h"
#include "yaml_config.h"

namespace svcgate::test {

inline void ensure_eal() { ctl::init_tool_eal("svcgate-test"); }

// True when the IPv4 header and the TCP/UDP checksums of `frame` verify by full recomputation.
bool checksums_verify(const std::vector<uint8_t>& frame);

// A Tracer over a YAML config string.
std::unique_ptr<ctl::Tracer> tracer(const std::string& yaml, uint64_t seed = 1);

}  // namespace svcgate::test
