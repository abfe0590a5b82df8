// Minimal libpcap file reading and writing (classic format, Ethernet link type): enough for
// `svcgatectl trace --pcap`, the fixture tests and the benchmark generators.
//
// Runs on: the control thread and tools. A file that cannot be read or written, or is not a
// classic Ethernet pcap, fails with its path and why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/base/status.h"

namespace svcgate::ctl {

using Frame = std::vector<uint8_t>;

// Every frame of the file at `path`, in order, into `out`.
Status read_pcap(const std::string& path, std::vector<Frame>& out);
Status write_pcap(const std::string& path, const std::vector<Frame>& frames);

}  // namespace svcgate::ctl
