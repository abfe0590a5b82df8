#include "test_support.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <rte_arp.h>
#include <rte_ip.h>

#include "dataplane/base/checksum.h"

namespace svcgate::test {

using namespace svcgate::dp;

bool checksums_verify(const std::vector<uint8_t>& f) {
    PacketMeta m;
    if (parse_packet(f.data(), static_cast<uint32_t>(f.size()), m) != DropReason::none) return false;
    if (m.l3 == L3Kind::ipv6) {
        // parse has verified ICMPv6; TCP and UDP over the IPv6 pseudo-header (UDP's is mandatory).
        const uint8_t* ip = f.data() + m.l3_off;
        const uint8_t* l4 = f.data() + m.l4_off;
        switch (static_cast<Proto>(m.key6.proto)) {
            case Proto::tcp:
            case Proto::udp:
                return ipv6_l4_csum(ip, l4, m.l4_len, m.key6.proto) == 0;
            case Proto::sctp: {
                rte_be32_t c;
                std::memcpy(&c, l4 + 8, 4);
                return c == sctp_crc32c(l4, m.l4_len);
            }
            default:
                return true;
        }
    }
    if (m.l3 != L3Kind::ipv4) return true;
    const uint8_t* ip = f.data() + m.l3_off;
    if (inet_csum(ip, m.l4_off - m.l3_off) != 0) return false;
    const uint8_t* l4 = f.data() + m.l4_off;
    switch (static_cast<Proto>(m.key.proto)) {
        case Proto::tcp:
            return ipv4_l4_csum(ip, l4, m.l4_len) == 0;
        case Proto::udp:
            return (l4[6] == 0 && l4[7] == 0) || ipv4_l4_csum(ip, l4, m.l4_len) == 0;
        case Proto::icmp:
            return inet_csum(l4, m.l4_len) == 0;
        case Proto::icmp6:
            return true;
        case Proto::sctp: {
            rte_be32_t c;
            std::memcpy(&c, l4 + 8, 4);
            return c == sctp_crc32c(l4, m.l4_len);
        }
    }
    return true;
}

std::vector<uint8_t> icmp_error_frame(uint8_t type, uint8_t code, const std::string& src, const std::string& dst,
                                      const std::vector<uint8_t>& about, size_t quote, uint32_t rest) {
    PacketMeta am;
    if (parse_packet(about.data(), static_cast<uint32_t>(about.size()), am) != DropReason::none)
        throw std::invalid_argument("icmp_error_frame: the quoted frame does not parse");
    const size_t quoted = std::min<size_t>(am.l4_off - am.l3_off + quote, am.ip_len);
    // Start from an echo request between the two addresses, then make it the error.
    std::vector<uint8_t> f = ctl::build_frame(test::packet("icmp " + src + " > " + dst));
    PacketMeta m;
    (void)parse_packet(f.data(), static_cast<uint32_t>(f.size()), m);
    f.resize(m.l4_off + 8);
    f.insert(f.end(), about.begin() + am.l3_off, about.begin() + am.l3_off + quoted);
    uint8_t* ip = f.data() + m.l3_off;
    uint8_t* icmp = f.data() + m.l4_off;
    const rte_be16_t total = rte_cpu_to_be_16(static_cast<uint16_t>(f.size() - m.l3_off));
    std::memcpy(ip + 2, &total, 2);
    ip[10] = ip[11] = 0;
    const uint16_t ipc = inet_csum(ip, m.l4_off - m.l3_off);
    std::memcpy(ip + 10, &ipc, 2);
    icmp[0] = type;
    icmp[1] = code;
    icmp[2] = icmp[3] = 0;
    const rte_be32_t r = rte_cpu_to_be_32(rest);
    std::memcpy(icmp + 4, &r, 4);
    const uint16_t c = inet_csum(icmp, f.size() - m.l4_off);
    std::memcpy(icmp + 2, &c, 2);
    return f;
}

namespace {
uint16_t keep(void* self, uint16_t, rte_mbuf** pkts, uint16_t n) noexcept {
    auto* o = static_cast<TestOutput*>(self);
    o->sent.insert(o->sent.end(), pkts, pkts + n);
    return n;
}
}  // namespace

std::vector<uint8_t> arp_frame(uint16_t op, const uint8_t (&sender_mac)[6], const std::string& sender,
                               const std::string& target, const uint8_t (&target_mac)[6]) {
    std::vector<uint8_t> f(14 + sizeof(rte_arp_hdr), 0);
    const bool reply = op == RTE_ARP_OP_REPLY;
    std::memset(f.data(), 0xff, 6);
    if (reply) std::memcpy(f.data(), target_mac, 6);
    std::memcpy(f.data() + 6, sender_mac, 6);
    f[12] = 0x08, f[13] = 0x06;
    auto* a = reinterpret_cast<rte_arp_hdr*>(f.data() + 14);
    a->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
    a->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    a->arp_hlen = 6;
    a->arp_plen = 4;
    a->arp_opcode = rte_cpu_to_be_16(op);
    std::memcpy(a->arp_data.arp_sha.addr_bytes, sender_mac, 6);
    a->arp_data.arp_sip = ctl::parse_ip4(sender)->be;
    if (reply) std::memcpy(a->arp_data.arp_tha.addr_bytes, target_mac, 6);
    a->arp_data.arp_tip = ctl::parse_ip4(target)->be;
    return f;
}

void TestOutput::attach(WorkerCtx& ctx, const ServiceSnapshot& s) {
    macs.assign(std::max<size_t>(s.catalogue.ports.size(), 1), rte_ether_addr{{0x02, 0, 0, 0, 0, 0x01}});
    for (const auto& r : s.catalogue.route_list)
        if (!r.hop.gateway.is_zero()) (void)neighbors.pin(r.hop.gateway, rte_ether_addr{{0x02, 0, 0, 0, 0, 0x99}});
    for (const auto& r : s.catalogue.route_list6)
        if (!r.hop.gateway.is_zero()) (void)neighbors6.pin(r.hop.gateway, rte_ether_addr{{0x02, 0, 0, 0, 0, 0x99}});
    ctx.out.init(neighbors, neighbors6, ctl::tool_mempool(), macs.data(), static_cast<uint16_t>(macs.size()),
                 TxSink{.send = &keep, .arg = this});
}

void TestOutput::free_sent() {
    for (rte_mbuf* m : sent) rte_pktmbuf_free(m);
    sent.clear();
}

std::unique_ptr<ctl::Tracer> tracer(const std::string& yaml, uint64_t seed) {
    return tracer_of(yaml, ctl::TraceOptions{.seed = seed});
}

std::unique_ptr<ctl::Tracer> tracer_of(const std::string& yaml, ctl::TraceOptions opts) {
    ensure_eal();
    opts.on_refused = [](const ctl::Status& s) { ADD_FAILURE() << "trace failed: " << s.error(); };
    auto t = std::make_unique<ctl::Tracer>(ctl::load_config_string(yaml, "test.yaml"), std::move(opts));
    if (!t->status()) {
        std::fprintf(stderr, "svcgate-test: tracer: %s\n", t->status().error().c_str());
        std::abort();
    }
    return t;
}

}  // namespace svcgate::test
