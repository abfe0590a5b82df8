// Minimal libpcap file reading and writing (classic format, Ethernet link type): enough for
// `svcgatectl trace --pcap`, the fixture tests and the benchmark generators.
//
// Runs on: the control thread and tools. Throws std::runtime_error on a malformed file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace svcgate::ctl {

using Frame = std::vector<uint8_t>;

std::vector<Frame> read_pcap(const std::string& path);
void write_pcap(const std::string& path, const std::vector<Frame>& frames);

}  // namespace svcgate::ctl
