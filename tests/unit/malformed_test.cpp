// Malformed and hostile input through the whole pipeline (process_burst, as the workers run it):
// one case per class, each checking its named drop counter goes up by exactly one, the verdict,
// and that no mbuf is kept. Built from a valid frame with one thing broken.
#include <cstring>
#include <functional>

#include <fmt/format.h>
#include <rte_mbuf.h>

#include <gtest/gtest.h>

#include "dataplane/base/checksum.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

const std::string kConfig = test::gateway_config(R"(
  - name: default/web
    type: NodePort
    cluster_ip: 10.96.0.20
    ports: [{name: http, protocol: TCP, port: 80, node_port: 30001}, {name: dns, protocol: UDP, port: 53}]
    endpoints: [10.244.2.4]
)");

constexpr unsigned kIp = 14;       // IPv4 header offset in an untagged frame
constexpr unsigned kL4 = 14 + 20;  // L4 header offset

using Frame = std::vector<uint8_t>;

Frame spec(const std::string& s) { return ctl::build_frame(test::packet(s)); }
const std::string kSyn = "tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]";

void fix_ip_csum(Frame& f, unsigned ip = kIp) {
    f[ip + 10] = f[ip + 11] = 0;
    const uint16_t c = inet_csum(f.data() + ip, (f[ip] & 0x0f) * 4u);
    std::memcpy(&f[ip + 10], &c, 2);
}

void set_total_length(Frame& f, uint16_t len) {
    f[kIp + 2] = static_cast<uint8_t>(len >> 8);
    f[kIp + 3] = static_cast<uint8_t>(len);
    fix_ip_csum(f);
}

// The frame cut to an IP payload of `l4` bytes, with a consistent IP header.
Frame with_l4_bytes(Frame f, unsigned l4) {
    f.resize(kL4 + l4);
    set_total_length(f, static_cast<uint16_t>(20 + l4));
    return f;
}

Frame vlan_tags(Frame f, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
        const uint8_t tag[4] = {0x81, 0x00, 0x00, static_cast<uint8_t>(10 + i)};
        f.insert(f.begin() + 12, tag, tag + 4);
    }
    return f;
}

struct Case {
    const char* name;
    std::function<Frame()> frame;
    DropReason reason;
    Verdict verdict = Verdict::drop;
};

const Case kCases[] = {
    {"truncated Ethernet",
     [] {
         Frame f = spec(kSyn);
         f.resize(10);
         return f;
     },
     DropReason::eth_truncated},
    {"truncated IPv4",
     [] {
         Frame f = spec(kSyn);
         f.resize(kIp + 19);
         return f;
     },
     DropReason::ip_truncated},
    {"truncated TCP", [] { return with_l4_bytes(spec(kSyn), 12); }, DropReason::tcp_truncated},
    {"truncated UDP", [] { return with_l4_bytes(spec("udp 10.244.2.4:53 > 10.96.0.20:53"), 4); },
     DropReason::udp_truncated},
    {"truncated SCTP", [] { return with_l4_bytes(spec("sctp 10.244.2.9:5000 > 10.96.0.20:9000"), 8); },
     DropReason::sctp_truncated},
    {"truncated ICMP", [] { return with_l4_bytes(spec("icmp 192.168.67.100 > 192.168.67.8"), 4); },
     DropReason::icmp_truncated},
    {"IP version 5",
     [] {
         Frame f = spec(kSyn);
         f[kIp] = 0x55;
         fix_ip_csum(f);
         return f;
     },
     DropReason::ip_bad_version},
    {"IHL below 5",
     [] {
         Frame f = spec(kSyn);
         f[kIp] = 0x44;
         return f;
     },
     DropReason::ip_bad_ihl},
    {"IHL past the frame",
     [] {
         Frame f = spec(kSyn);
         f.resize(kIp + 40);
         f[kIp] = 0x4f;
         return f;
     },
     DropReason::ip_bad_ihl},
    {"total length past the frame",
     [] {
         Frame f = spec(kSyn);
         set_total_length(f, 1500);
         return f;
     },
     DropReason::ip_bad_total_length},
    {"total length below the header",
     [] {
         Frame f = spec(kSyn);
         set_total_length(f, 12);
         return f;
     },
     DropReason::ip_bad_total_length},
    {"bad IPv4 checksum",
     [] {
         Frame f = spec(kSyn);
         f[kIp + 10] ^= 0x5a;
         return f;
     },
     DropReason::ip_bad_checksum},
    {"TTL 1 to a service", [] { return spec(kSyn + " ttl=1"); }, DropReason::ip_ttl_exceeded},
    {"TTL 0 to a service",
     [] {
         Frame f = spec(kSyn);
         f[kIp + 8] = 0;
         fix_ip_csum(f);
         return f;
     },
     DropReason::ip_ttl_exceeded},
    {"TTL 1 routed", [] { return spec("tcp 192.168.67.100:1 > 10.244.2.9:22 [S] ttl=1"); },
     DropReason::ip_ttl_exceeded},
    {"TCP data offset below 5",
     [] {
         Frame f = spec(kSyn);
         f[kL4 + 12] = 0x40;
         return f;
     },
     DropReason::tcp_bad_doff},
    {"TCP data offset past the frame",
     [] {
         Frame f = spec(kSyn);
         f[kL4 + 12] = 0xf0;
         return f;
     },
     DropReason::tcp_bad_doff},
    {"TCP SYN+FIN", [] { return spec("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [SF]"); },
     DropReason::tcp_bad_flags},
    {"TCP null scan",
     [] {
         Frame f = spec(kSyn);
         f[kL4 + 13] = 0;
         return f;
     },
     DropReason::tcp_bad_flags},
    {"TCP xmas scan",
     [] {
         Frame f = spec(kSyn);
         f[kL4 + 13] = kFin | kPsh | kUrg;
         return f;
     },
     DropReason::tcp_bad_flags},
    {"UDP length zero",
     [] {
         Frame f = spec("udp 10.244.2.4:5000 > 10.96.0.20:53");
         f[kL4 + 4] = f[kL4 + 5] = 0;
         return f;
     },
     DropReason::udp_bad_length},
    {"UDP length past the payload",
     [] {
         Frame f = spec("udp 10.244.2.4:5000 > 10.96.0.20:53");
         f[kL4 + 5] = 200;
         return f;
     },
     DropReason::udp_bad_length},
    {"unknown EtherType (LLDP)",
     [] {
         Frame f = spec(kSyn);
         f[12] = 0x88;
         f[13] = 0xcc;
         return f;
     },
     DropReason::ethertype_unknown},
    {"IPv4 bytes under the IPv6 EtherType",
     [] {
         Frame f = spec(kSyn);
         f[12] = 0x86;
         f[13] = 0xdd;
         return f;
     },
     DropReason::ip6_bad_version},
    {"two stacked VLAN tags", [] { return vlan_tags(spec(kSyn), 2); }, DropReason::vlan_stacked},
    {"a VLAN ID no port has", [] { return vlan_tags(spec(kSyn), 1); }, DropReason::vlan_unknown},
    {"802.1ad outer tag",
     [] {
         Frame f = vlan_tags(spec(kSyn), 1);
         f[12] = 0x88;
         f[13] = 0xa8;
         return f;
     },
     DropReason::vlan_stacked},
    {"IPv4 to the broadcast MAC",
     [] {
         Frame f = spec(kSyn);
         std::memset(f.data(), 0xff, 6);
         return f;
     },
     DropReason::l2_not_for_us},
    {"IPv4 to a multicast MAC",
     [] {
         Frame f = spec(kSyn);
         f[0] = 0x01;
         f[1] = 0x00;
         f[2] = 0x5e;
         return f;
     },
     DropReason::l2_not_for_us},
    {"multicast source address", [] { return spec("udp 224.0.0.5:5000 > 10.96.0.20:53"); }, DropReason::ip_bad_source},
    {"a ClusterIP on a port no Service serves", [] { return spec("tcp 10.244.2.9:1000 > 10.96.0.20:81 [S]"); },
     DropReason::reject_unknown_port, Verdict::reject},
    {"an unallocated service-CIDR address", [] { return spec("udp 10.244.2.9:1000 > 10.96.0.99:53"); },
     DropReason::service_cidr_unallocated},
    {"TCP FIN with no connection", [] { return spec("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [F.]"); },
     DropReason::conntrack_invalid},
    {"ICMP error quoting too little",
     [] { return test::icmp_error_frame(kIcmpDestUnreach, 1, "10.192.0.3", "10.192.0.2", spec(kSyn), 2); },
     DropReason::icmp_error_bad_inner},
};

class Malformed : public ::testing::TestWithParam<Case> {};

TEST_P(Malformed, CountedUnderItsReasonAndNothingKept) {
    const Case& c = GetParam();
    auto t = test::tracer(kConfig);
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    const Frame f = c.frame();
    auto r = t->run_frame(f, c.name);
    EXPECT_EQ(r.verdict, c.verdict) << r.text();
    EXPECT_EQ(drop_reason_name(r.reason), drop_reason_name(c.reason));
    const WorkerCounters& k = t->ctx().counters;
    // Freed under its reason, or (a REJECT) answered and counted under it.
    EXPECT_EQ((c.verdict == Verdict::reject ? k.rejects : k.drops)[static_cast<unsigned>(c.reason)], 1u);
    EXPECT_EQ(k.dropped() + k.rejected(), 1u) << "one reason per packet";
    EXPECT_EQ(k.rx_packets, 1u);
    EXPECT_EQ(t->flows().live_total(), 0u) << "no flow for a packet that went nowhere";
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use) << "no mbuf kept";
    // Every prefix of the broken frame is handled too: nothing kept. (The frame is copied into a
    // pool mbuf, so ASan cannot see a read past a prefix: the parser's own length checks are what
    // this runs.)
    for (size_t n = 0; n < f.size(); ++n) (void)t->run_frame(Frame(f.begin(), f.begin() + n), "prefix");
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use);
}

INSTANTIATE_TEST_SUITE_P(EachClass, Malformed, ::testing::ValuesIn(kCases), [](const auto& info) {
    std::string n;
    for (const char* p = info.param.name; *p; ++p) n += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
    return n;
});

// A frame larger than one mbuf's data room arrives as a chain of segments.
TEST(Malformed, ChainedMbufIsCountedNotParsed) {
    test::ensure_eal();
    auto t = test::tracer(kConfig);
    rte_mempool* pool = ctl::tool_mempool();
    const unsigned in_use = rte_mempool_in_use_count(pool);
    const Frame f = spec(kSyn);
    rte_mbuf* head = rte_pktmbuf_alloc(pool);
    rte_mbuf* tail = rte_pktmbuf_alloc(pool);
    ASSERT_TRUE(head && tail);
    std::memcpy(rte_pktmbuf_append(head, 30), f.data(), 30);
    std::memcpy(rte_pktmbuf_append(tail, static_cast<uint16_t>(f.size() - 30)), f.data() + 30, f.size() - 30);
    ASSERT_EQ(rte_pktmbuf_chain(head, tail), 0);
    auto b = std::make_unique<Burst>();
    b->mbufs[0] = head;
    b->start(1, 0);
    process_burst(*b, t->ctx());
    EXPECT_EQ(b->pkt[0].verdict, Verdict::drop);
    EXPECT_EQ(b->pkt[0].reason, DropReason::mbuf_chained);
    EXPECT_EQ(t->ctx().counters.drops[static_cast<unsigned>(DropReason::mbuf_chained)], 1u);
    EXPECT_EQ(rte_mempool_in_use_count(pool), in_use) << "the output stage freed it, every segment";
}

}  // namespace
