#include "test_support.h"

#include <rte_ip.h>

#include "checksum.h"

namespace svcgate::test {

using namespace svcgate::dp;

bool checksums_verify(const std::vector<uint8_t>& f) {
    PacketMeta m;
    if (parse_packet(f.data(), static_cast<uint32_t>(f.size()), m) != DropReason::none) return false;
    if (m.l3 != L3Kind::ipv4) return true;
    const uint8_t* ip = f.data() + m.l3_off;
    if (inet_csum(ip, m.l4_off - m.l3_off) != 0) return false;
    const uint8_t* l4 = f.data() + m.l4_off;
    switch (static_cast<Proto>(m.key.proto)) {
    case Proto::tcp: return ipv4_l4_csum(ip, l4, m.l4_len) == 0;
    case Proto::udp: return (l4[6] == 0 && l4[7] == 0) || ipv4_l4_csum(ip, l4, m.l4_len) == 0;
    case Proto::icmp: return inet_csum(l4, m.l4_len) == 0;
    case Proto::sctp: {
        rte_be32_t c;
        std::memcpy(&c, l4 + 8, 4);
        return c == sctp_crc32c(l4, m.l4_len);
    }
    }
    return true;
}

std::unique_ptr<ctl::Tracer> tracer(const std::string& yaml, uint64_t seed) {
    ensure_eal();
    return std::make_unique<ctl::Tracer>(ctl::load_config_string(yaml, "test.yaml"), ctl::TraceOptions{.seed = seed});
}

}  // namespace svcgate::test
