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

// An ICMP error (type, code; `rest` is the second word, e.g. the MTU of fragmentation-needed)
// from `src` to `dst`, quoting the IPv4 header of `about` and `quote` bytes of its payload, as a
// router would (RFC 1812 4.3.2.3). Checksums filled in.
std::vector<uint8_t> icmp_error_frame(uint8_t type, uint8_t code, const std::string& src,
                                      const std::string& dst, const std::vector<uint8_t>& about,
                                      size_t quote = 8, uint32_t rest = 0);

// A Tracer over a YAML config string.
std::unique_ptr<ctl::Tracer> tracer(const std::string& yaml, uint64_t seed = 1);

}  // namespace svcgate::test
