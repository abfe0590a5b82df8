#include "control/trace/pcap_io.h"

#include <cstring>
#include <fstream>

namespace svcgate::ctl {

namespace {
constexpr uint32_t kMagicUs = 0xa1b2c3d4, kMagicNs = 0xa1b23c4d;
constexpr uint32_t kMaxFrame = 256 * 1024;

uint32_t bswap_if(uint32_t v, bool swap) { return swap ? __builtin_bswap32(v) : v; }
}  // namespace

Status read_pcap(const std::string& path, std::vector<Frame>& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::fail(path + ": cannot open");
    uint32_t gh[6];
    if (!in.read(reinterpret_cast<char*>(gh), sizeof gh))
        return Status::fail(path + ": not a pcap file (short header)");
    bool swap = false;
    if (gh[0] == __builtin_bswap32(kMagicUs) || gh[0] == __builtin_bswap32(kMagicNs))
        swap = true;
    else if (gh[0] != kMagicUs && gh[0] != kMagicNs)
        return Status::fail(path + ": not a pcap file (bad magic)");
    if (bswap_if(gh[5], swap) != 1) return Status::fail(path + ": link type is not Ethernet");
    out.clear();
    uint32_t rh[4];
    while (in.read(reinterpret_cast<char*>(rh), sizeof rh)) {
        uint32_t caplen = bswap_if(rh[2], swap);
        if (caplen > kMaxFrame) return Status::fail(path + ": record larger than 256 KiB");
        Frame f(caplen);
        if (!in.read(reinterpret_cast<char*>(f.data()), caplen)) return Status::fail(path + ": truncated record");
        out.push_back(std::move(f));
    }
    return {};
}

Status write_pcap(const std::string& path, const std::vector<Frame>& frames) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return Status::fail(path + ": cannot create");
    const uint32_t gh[6] = {kMagicUs, 0x00040002u /* version 2.4 */, 0, 65535, 0, 1};
    out.write(reinterpret_cast<const char*>(gh), sizeof gh);
    uint32_t ts = 0;
    for (const Frame& f : frames) {
        const uint32_t rh[4] = {ts++, 0, static_cast<uint32_t>(f.size()), static_cast<uint32_t>(f.size())};
        out.write(reinterpret_cast<const char*>(rh), sizeof rh);
        out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
    }
    if (!out) return Status::fail(path + ": write failed");
    return {};
}

}  // namespace svcgate::ctl
