// IPv6 on real packet bytes, through Tracer (process_burst with real mbufs): the dual-stack
// lab mirror of docs/ipv6.md (fd00:67::/64 clients, fd00:192::/64 nodes, fd00:244:N::/64 pods,
// fd00:96::/108 services) beside the IPv4 one. Translation and its checksums, replies, REJECT,
// ICMPv6 errors about a flow, Neighbor Discovery, echo, and every malformed class with its
// named drop.
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <rte_mempool.h>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "dataplane/base/checksum.h"
#include "control/trace/packet_spec.h"
#include "test_support.h"
#include "control/config/yaml_config.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

const std::string kDualStack = test::dual_stack_config(R"(
  - name: default/test-svc
    type: NodePort
    cluster_ips: [10.107.169.79, 'fd00:96::79']
    ports: [{name: http, protocol: TCP, port: 80, target_port: 80, node_port: 30001}]
    endpoints: [{ip: 10.244.2.4, node: n1}, {ip: 10.244.2.6, node: n1}, {ip: 10.244.3.6, node: n2},
                {ip: 'fd00:244:2::4', node: n1}, {ip: 'fd00:244:2::6', node: n1}, {ip: 'fd00:244:3::6', node: n2}]
  - name: kube-system/kube-dns
    cluster_ips: ['fd00:96::a']
    ports: [{name: dns, protocol: UDP, port: 53}]
    endpoints: [{ip: 'fd00:244:2::2', node: n1}]
  - name: default/empty
    type: LoadBalancer
    cluster_ips: ['fd00:96::e']
    load_balancer_ips: ['fd00:67::e']
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30002}, {name: u, protocol: UDP, port: 81, node_port: 30003}]
)");

using Frame = std::vector<uint8_t>;

Frame spec(const std::string& s) { return ctl::build_frame(test::packet(s)); }

constexpr size_t kL3 = 14;  // Ethernet header

// The IPv6 upper-layer checksum of a frame built by spec() recomputed (after a test edits it).
void fix_l4_csum(Frame& f, size_t l4_off, uint8_t proto) {
    const size_t csum_at = proto == 6 ? 16 : proto == 17 ? 6 : 2;
    f[l4_off + csum_at] = f[l4_off + csum_at + 1] = 0;
    const uint16_t c = ipv6_l4_csum(f.data() + kL3, f.data() + l4_off, static_cast<uint32_t>(f.size() - l4_off), proto);
    std::memcpy(f.data() + l4_off + csum_at, &c, 2);
}

// Inserts an extension header of `type` (8 * units bytes) right after the fixed header.
Frame with_ext(Frame f, uint8_t type, uint8_t units = 1, uint8_t b2 = 0, uint8_t b3 = 0) {
    std::vector<uint8_t> h(8u * units, 0);
    h[0] = f[kL3 + 6];  // it names what followed the fixed header
    h[1] = type == 44 ? 0 : static_cast<uint8_t>(units - 1);
    h[2] = b2;
    h[3] = b3;
    f[kL3 + 6] = type;
    f.insert(f.begin() + kL3 + 40, h.begin(), h.end());
    const uint16_t plen = static_cast<uint16_t>((f[kL3 + 4] << 8 | f[kL3 + 5]) + h.size());
    f[kL3 + 4] = static_cast<uint8_t>(plen >> 8);
    f[kL3 + 5] = static_cast<uint8_t>(plen);
    return f;
}

// A Neighbor Solicitation for `target` from `src` (with its link-layer address option) to the
// target's solicited-node group.
Frame neighbor_solicit(const std::string& src, const std::string& target, uint8_t hop_limit = 255) {
    const Ip6 s = *ctl::parse_ip6(src), t = *ctl::parse_ip6(target);
    Frame f(kL3 + 40 + 32, 0);
    const uint8_t eth[14] = {0x33, 0x33, 0xff, t.b[13], t.b[14], t.b[15], 0x02, 0, 0, 0, 0, 0x42, 0x86, 0xdd};
    std::memcpy(f.data(), eth, 14);
    uint8_t* ip = f.data() + kL3;
    ip[0] = 0x60;
    ip[5] = 32;
    ip[6] = 58;
    ip[7] = hop_limit;
    std::memcpy(ip + 8, s.b, 16);
    const uint8_t group[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t.b[13], t.b[14], t.b[15]};
    std::memcpy(ip + 24, group, 16);
    uint8_t* ns = ip + 40;
    ns[0] = 135;
    std::memcpy(ns + 8, t.b, 16);
    ns[24] = 1;
    ns[25] = 1;
    const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 0x42};
    std::memcpy(ns + 26, mac, 6);
    const uint16_t c = ipv6_l4_csum(ip, ns, 32, 58);
    std::memcpy(ns + 2, &c, 2);
    return f;
}

PacketMeta parsed(const Frame& f) {
    PacketMeta m;
    EXPECT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m), DropReason::none);
    return m;
}

}  // namespace

TEST(Ipv6, NodePortSynIsTranslatedAndItsReplyTranslatedBack) {
    auto t = test::tracer(kDualStack, 7);
    auto syn = t->run_spec("tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [S]");
    ASSERT_EQ(syn.verdict, Verdict::dnat) << syn.text();
    EXPECT_EQ(*syn.service, "default/test-svc:http");
    EXPECT_TRUE(syn.masquerade) << "externalTrafficPolicy Cluster masquerades NodePort traffic";
    const std::set<std::string> pods{"[fd00:244:2::4]:80", "[fd00:244:2::6]:80", "[fd00:244:3::6]:80"};
    EXPECT_TRUE(pods.count(*syn.endpoint)) << *syn.endpoint;
    ASSERT_TRUE(syn.out);
    EXPECT_EQ(syn.out->rfind("tcp [fd00:192::2]:", 0), 0u) << *syn.out << ": the source is the cluster port's address";
    EXPECT_NE(syn.out->find("> " + *syn.endpoint), std::string::npos) << *syn.out;
    EXPECT_EQ(*syn.port, "cluster");
    EXPECT_TRUE(test::checksums_verify(syn.frame)) << "TCP over the new pseudo-header";
    EXPECT_EQ(syn.frame[kL3 + 7], 63) << "hop limit decremented";

    auto reply = t->run_spec("reply 1 [S.]");
    ASSERT_EQ(reply.verdict, Verdict::reply) << reply.text();
    EXPECT_EQ(*reply.out, "tcp [fd00:67::8]:30001 > [fd00:67::100]:40000");
    EXPECT_EQ(*reply.port, "ext");
    EXPECT_TRUE(test::checksums_verify(reply.frame));

    // The same flow again: the same endpoint, no new flow.
    auto ack = t->run_spec("tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [.]");
    EXPECT_EQ(ack.verdict, Verdict::dnat);
    EXPECT_EQ(*ack.endpoint, *syn.endpoint);
    EXPECT_FALSE(ack.new_flow);
}

TEST(Ipv6, TcpdumpsOwnFormIsAccepted) {
    auto t = test::tracer(kDualStack, 7);
    auto r = t->run_spec("tcp fd00:67::100.40001 > fd00:67::8.30001: [S]");
    EXPECT_EQ(r.verdict, Verdict::dnat) << r.text();
    ctl::TraceRecord mixed;
    EXPECT_NONFATAL_FAILURE(mixed = t->run_spec("tcp fd00:67::100.1 > 192.168.67.8.30001: [S]"), "different families");
    EXPECT_FALSE(mixed.traced.ok()) << "a tuple mixing the families";
    EXPECT_NE(mixed.traced.error().find("different families"), std::string::npos) << mixed.traced.error();
}

TEST(Ipv6, NodePortsOfEachFamilyOnlyOnThatFamilysNodeIps) {
    auto t = test::tracer(kDualStack, 7);
    EXPECT_EQ(t->run_spec("tcp 192.168.67.100:1 > 192.168.67.8:30001 [S]").verdict, Verdict::dnat);
    auto r = t->run_spec("tcp [fd00:67::100]:1 > [fd00:67::8]:30001 [S]");
    ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_NE(r.endpoint->find('['), std::string::npos) << "an IPv6 client gets an IPv6 pod: " << *r.endpoint;
}

TEST(Ipv6, PodToClusterIpKeepsItsSourceAndDnsGoesToCoreDns) {
    auto t = test::tracer(kDualStack, 7);
    auto r = t->run_spec("udp [fd00:244:3::5]:34361 > [fd00:96::a]:53");
    ASSERT_EQ(r.verdict, Verdict::dnat) << r.text();
    EXPECT_FALSE(r.masquerade) << "a pod inside cluster_cidrs is not masqueraded";
    EXPECT_EQ(*r.out, "udp [fd00:244:3::5]:34361 > [fd00:244:2::2]:53");
    EXPECT_TRUE(test::checksums_verify(r.frame));
    auto back = t->run_spec("reply 1");
    EXPECT_EQ(*back.out, "udp [fd00:96::a]:53 > [fd00:244:3::5]:34361");
    EXPECT_TRUE(test::checksums_verify(back.frame));
}

TEST(Ipv6, HairpinMasqueradesToTheGatewayAddress) {
    auto t = test::tracer(kDualStack, 7);
    // A pod reaching itself through its Service: kube-proxy's KUBE-SEP-* saddr rule.
    for (int port = 1000; port < 1040; ++port) {
        auto r = t->run_spec(fmt::format("tcp [fd00:244:2::4]:{} > [fd00:96::79]:80 [S]", port));
        ASSERT_EQ(r.verdict, Verdict::dnat);
        if (*r.endpoint != "[fd00:244:2::4]:80") continue;
        EXPECT_TRUE(r.masquerade);
        EXPECT_EQ(r.out->rfind("tcp [fd00:192::2]:", 0), 0u) << *r.out;
        return;
    }
    FAIL() << "40 connections never picked the client's own pod";
}

TEST(Ipv6, NoEndpointsRejectsWithRstAndPortUnreachable) {
    auto t = test::tracer(kDualStack, 7);
    auto rst = t->run_spec("tcp [fd00:67::100]:40000 > [fd00:67::e]:80 [S]");
    ASSERT_EQ(rst.verdict, Verdict::reject) << rst.text();
    EXPECT_EQ(rst.reason, DropReason::reject_no_endpoints);
    EXPECT_EQ(*rst.out, "tcp [fd00:67::e]:80 > [fd00:67::100]:40000");
    EXPECT_EQ(*rst.out_flags, "R.");
    EXPECT_TRUE(test::checksums_verify(rst.frame));

    auto unreach = t->run_spec("udp [fd00:67::100]:5000 > [fd00:67::e]:81 len=100");
    ASSERT_EQ(unreach.verdict, Verdict::reject) << unreach.text();
    const PacketMeta m = parsed(unreach.frame);  // parse verifies the ICMPv6 checksum
    ASSERT_TRUE(m.is_v6());
    EXPECT_EQ(m.key6.proto, 58);
    EXPECT_EQ(m.icmp_type, kIcmp6DestUnreach);
    EXPECT_EQ(unreach.frame[m.l4_off + 1], 4) << "code 4: port unreachable";
    EXPECT_EQ(ctl::format_ip6(m.key6.dst), "fd00:67::100");
    // The quote: the offending packet from its IPv6 header on.
    EXPECT_EQ(unreach.frame.size(), kL3 + 40 + 8 + 40 + 8 + 100);
}

TEST(Ipv6, UnknownPortOfAClusterIpIsRejectedAndAnUnallocatedServiceAddressDropped) {
    auto t = test::tracer(kDualStack, 7);
    auto r = t->run_spec("tcp [fd00:244:3::5]:1 > [fd00:96::79]:81 [S]");
    EXPECT_EQ(r.verdict, Verdict::reject);
    EXPECT_EQ(r.reason, DropReason::reject_unknown_port);
    auto d = t->run_spec("tcp [fd00:244:3::5]:1 > [fd00:96::99]:80 [S]");
    EXPECT_EQ(d.verdict, Verdict::drop);
    EXPECT_EQ(d.reason, DropReason::service_cidr_unallocated);
}

TEST(Ipv6, PacketTooBigAboutATranslatedFlowIsTranslatedOuterAndEmbedded) {
    auto t = test::tracer(kDualStack, 7);
    auto syn = t->run_spec("tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [S]");
    ASSERT_EQ(syn.verdict, Verdict::dnat);
    // The pod's router says the SYN's path MTU is 1280: a Packet Too Big from fd00:192::3 about
    // the packet as the gateway sent it (the translated SYN), carrying its first 48 bytes.
    const PacketMeta sm = parsed(syn.frame);
    Frame err(kL3 + 40 + 8 + 48, 0);
    std::memcpy(err.data(), syn.frame.data(), kL3);
    uint8_t* ip = err.data() + kL3;
    ip[0] = 0x60;
    ip[5] = 56;
    ip[6] = 58;
    ip[7] = 64;
    const Ip6 router = *ctl::parse_ip6("fd00:192::3");
    std::memcpy(ip + 8, router.b, 16);
    std::memcpy(ip + 24, sm.key6.src.b, 16);  // to the masquerade address
    uint8_t* icmp = ip + 40;
    icmp[0] = kIcmp6PacketTooBig;
    icmp[6] = 0x05;  // MTU 1280
    std::memcpy(icmp + 8, syn.frame.data() + kL3, 48);
    fix_l4_csum(err, kL3 + 40, 58);
    auto r = t->run_frame(err, "packet too big");
    ASSERT_EQ(r.verdict, Verdict::reply) << r.text();
    const PacketMeta m = parsed(r.frame);  // the ICMPv6 checksum verifies
    EXPECT_EQ(ctl::format_ip6(m.key6.dst), "fd00:67::100") << "to the client";
    EXPECT_EQ(ctl::format_ip6(m.key6.src), "fd00:67::8") << "from the address the client talked to";
    // The embedded packet is the client's SYN as the client sent it.
    Ip6 in_src, in_dst;
    std::memcpy(in_src.b, r.frame.data() + m.inner_off + 8, 16);
    std::memcpy(in_dst.b, r.frame.data() + m.inner_off + 24, 16);
    EXPECT_EQ(ctl::format_ip6(in_src), "fd00:67::100");
    EXPECT_EQ(ctl::format_ip6(in_dst), "fd00:67::8");
    EXPECT_EQ(r.frame[m.inner_l4_off] << 8 | r.frame[m.inner_l4_off + 1], 40000);
    EXPECT_EQ(r.frame[m.inner_l4_off + 2] << 8 | r.frame[m.inner_l4_off + 3], 30001);
    EXPECT_EQ(*r.port, "ext");
}

TEST(Ipv6, NeighborSolicitationsAreAnsweredForEveryAddressTheGatewayOwns) {
    auto t = test::tracer(kDualStack, 7);
    for (const char* target : {"fd00:67::8", "fd00:67::e", "fd00:96::79"}) {
        auto r = t->run_frame(neighbor_solicit("fd00:67::100", target), target);
        ASSERT_EQ(r.verdict, Verdict::local) << target;
        ASSERT_EQ(r.l2, L2Outcome::sent) << target << ": " << r.text();
        const PacketMeta m = parsed(r.frame);  // checksum and RFC 4861 7.1 checks
        EXPECT_EQ(m.icmp_type, kIcmp6NeighborAdvert);
        EXPECT_EQ(r.frame[kL3 + 7], 255);
        EXPECT_EQ(ctl::format_ip6(m.key6.dst), "fd00:67::100");
        EXPECT_EQ(ctl::format_ip6(m.key6.src), target);
        EXPECT_EQ(r.frame[m.l4_off + 4], 0xe0) << "router, solicited, override";
        EXPECT_EQ(r.frame[m.l4_off + 24], 2) << "target link-layer address option";
        EXPECT_EQ(r.frame[m.l4_off + 31], 0x01) << "the ext port's MAC, 02:00:00:00:00:01";
        EXPECT_EQ(r.frame[5], 0x42) << "back to the soliciting host";
    }
    auto other = t->run_frame(neighbor_solicit("fd00:67::100", "fd00:67::77"), "someone else");
    EXPECT_EQ(other.l2, L2Outcome::dropped);
    EXPECT_EQ(other.reason, DropReason::nd_consumed);
}

TEST(Ipv6, EchoToTheGatewayIsAnswered) {
    auto t = test::tracer(kDualStack, 7);
    auto r = t->run_spec("icmp6 fd00:67::100 > fd00:67::8 len=56");
    ASSERT_EQ(r.verdict, Verdict::local) << r.text();
    ASSERT_EQ(r.l2, L2Outcome::sent);
    const PacketMeta m = parsed(r.frame);  // the checksum verifies
    EXPECT_EQ(m.icmp_type, kIcmp6EchoReply);
    EXPECT_EQ(ctl::format_ip6(m.key6.dst), "fd00:67::100");
    auto far = t->run_spec("icmp6 fd00:67::100 > fd00:244:2::4");
    EXPECT_EQ(far.verdict, Verdict::forward) << "ping to a pod is routed";
}

TEST(Ipv6, ARoutedPacketWaitsForNeighborDiscoveryOfItsNextHop) {
    // No neighbor pinned: the trace's neighbor cache knows no MACs, so the first packet to a pod
    // is held while a solicitation for its next hop goes out.
    auto t = test::tracer(kDualStack, 7);
    auto r = t->run_spec("tcp [fd00:67::100]:40000 > [fd00:244:2::4]:80 [S]");
    EXPECT_EQ(r.verdict, Verdict::forward);
    EXPECT_EQ(r.l2, L2Outcome::held) << r.text();
    EXPECT_EQ(*r.next_hop, "fd00:192::3");
    EXPECT_TRUE(r.arp_request) << "a neighbor solicitation for the next hop";
}

// Every malformed IPv6 class is a drop under its own name.
TEST(Ipv6, EachMalformedClassHasItsReason) {
    auto t = test::tracer(kDualStack, 7);
    const Frame syn = spec("tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [S]");
    struct Case {
        const char* name;
        Frame f;
        DropReason want;
    };
    auto edit = [&](auto&& fn) {
        Frame f = syn;
        fn(f);
        return f;
    };
    Frame too_long = syn;
    for (int i = 0; i < 9; ++i) too_long = with_ext(too_long, 60);
    const std::vector<Case> cases = {
        {"truncated header", edit([](Frame& f) { f.resize(kL3 + 30); }), DropReason::ip6_truncated},
        {"payload length past the frame", edit([](Frame& f) { f[kL3 + 4] = 0x05; }),
         DropReason::ip6_bad_payload_length},
        {"version 4 under the IPv6 EtherType", edit([](Frame& f) { f[kL3] = 0x45; }), DropReason::ip6_bad_version},
        {"hop-by-hop not first", with_ext(with_ext(syn, 0), 60), DropReason::ip6_hbh_not_first},
        {"nine destination options (a loop of one header)", too_long, DropReason::ip6_ext_chain_too_long},
        {"extension header past the payload", edit([](Frame& f) {
             f = with_ext(f, 60, 1);
             f[kL3 + 41] = 40;
         }),
         DropReason::ip6_ext_truncated},
        {"routing type 0", with_ext(syn, 43, 1, 0, 1), DropReason::ip6_routing_type0},
        {"TCP fragment at offset 8 (RFC 1858)", with_ext(syn, 44, 1, 0, 0x08), DropReason::frag_tiny},
        {"multicast source", edit([](Frame& f) { f[kL3 + 8] = 0xff; }), DropReason::ip_bad_source},
        {"unspecified source", edit([](Frame& f) { std::memset(f.data() + kL3 + 8, 0, 16); }),
         DropReason::ip_bad_source},
        {"multicast destination", edit([](Frame& f) {
             f[kL3 + 24] = 0xff;
             fix_l4_csum(f, kL3 + 40, 6);
         }),
         DropReason::ip6_multicast},
        {"link-local destination", edit([](Frame& f) {
             f[kL3 + 24] = 0xfe;
             f[kL3 + 25] = 0x80;
             fix_l4_csum(f, kL3 + 40, 6);
         }),
         DropReason::ip6_scope},
        {"loopback destination", edit([](Frame& f) {
             std::memset(f.data() + kL3 + 24, 0, 15);
             f[kL3 + 39] = 1;
             fix_l4_csum(f, kL3 + 40, 6);
         }),
         DropReason::ip6_scope},
        {"loopback source", edit([](Frame& f) {
             std::memset(f.data() + kL3 + 8, 0, 15);
             f[kL3 + 23] = 1;
         }),
         DropReason::ip_bad_source},
        {"tcp truncated", edit([](Frame& f) {
             f.resize(kL3 + 50);
             f[kL3 + 4] = 0;
             f[kL3 + 5] = 10;
         }),
         DropReason::tcp_truncated},
        {"hop limit 1 to a VIP", edit([](Frame& f) { f[kL3 + 7] = 1; }), DropReason::ip_ttl_exceeded},
        {"hop limit 0 to a VIP", edit([](Frame& f) { f[kL3 + 7] = 0; }), DropReason::ip_ttl_exceeded},
        {"bad ICMPv6 checksum", edit([](Frame& f) {
             f = spec("icmp6 fd00:67::100 > fd00:67::8");
             f[kL3 + 42] ^= 1;
         }),
         DropReason::icmp6_bad_checksum},
        {"icmpv6 truncated", edit([](Frame& f) {
             f = spec("icmp6 fd00:67::100 > fd00:67::8");
             f.resize(kL3 + 44);
             f[kL3 + 5] = 4;
         }),
         DropReason::icmp_truncated},
        {"NS with a multicast target", edit([](Frame& f) { f = neighbor_solicit("fd00:67::100", "ff02::1"); }),
         DropReason::nd_bad_target},
        {"NS from off the link (hop limit 254)", neighbor_solicit("fd00:67::100", "fd00:67::8", 254),
         DropReason::nd_invalid},
        {"NS with a zero-length option", edit([](Frame& f) {
             f = neighbor_solicit("fd00:67::100", "fd00:67::8");
             f[kL3 + 40 + 25] = 0;
             fix_l4_csum(f, kL3 + 40, 58);
         }),
         DropReason::nd_invalid},
    };
    const WorkerCounters& k = t->ctx().counters;
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    for (const Case& c : cases) {
        const uint64_t before = k.drops[static_cast<unsigned>(c.want)], dropped = k.dropped();
        auto r = t->run_frame(c.f, c.name);
        EXPECT_EQ(r.verdict, Verdict::drop) << c.name << ": " << r.text();
        EXPECT_EQ(r.reason, c.want) << c.name << ": " << drop_reason_name(r.reason);
        EXPECT_EQ(k.drops[static_cast<unsigned>(c.want)], before + 1) << c.name << ": counted once under its name";
        EXPECT_EQ(k.dropped(), dropped + 1) << c.name << ": one reason per packet";
        // Every prefix of the broken frame is handled too, nothing kept. (The frame
        // is copied into a pool mbuf, so ASan cannot see a read past a prefix: the parser's own
        // length checks are what this runs.)
        for (size_t n = 0; n < c.f.size(); ++n) (void)t->run_frame(Frame(c.f.begin(), c.f.begin() + n), "prefix");
    }
    EXPECT_EQ(t->flows6().live_total(), 0u) << "no flow for a packet that went nowhere";
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use) << "no mbuf kept";
    EXPECT_EQ(k.unaccounted(), 0);
}

TEST(Ipv6, ExtensionHeadersInAnyOrderWithinTheBoundAreWalked) {
    // RFC 8200 4.1: a receiver takes extension headers in any order and any number of times (but
    // hop-by-hop first): eight, the bound, are walked to the TCP header behind them. with_ext()
    // puts each new header first, so the last one added is the first in the chain.
    const Frame syn = spec("tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [S]");
    Frame ok = with_ext(
        with_ext(with_ext(with_ext(with_ext(with_ext(with_ext(with_ext(syn, 60), 60, 2), 43, 1, 2), 60), 44), 43, 1, 4),
                 60),
        0);
    PacketMeta m;
    ASSERT_EQ(parse_packet(ok.data(), static_cast<uint32_t>(ok.size()), m), DropReason::none);
    EXPECT_EQ(m.key6.proto, 6);
    EXPECT_EQ(m.l4_off, kL3 + 40 + 8 * 8 + 8) << "eight headers, one of them 16 bytes";
    EXPECT_EQ(rte_be_to_cpu_16(m.key6.dport), 30001);
    Frame nine = with_ext(ok, 60);
    EXPECT_EQ(parse_packet(nine.data(), static_cast<uint32_t>(nine.size()), m), DropReason::ip6_hbh_not_first);
    // Translated through them: the TCP header behind the chain is rewritten.
    auto t = test::tracer(kDualStack, 7);
    auto r = t->run_frame(ok, "eight extension headers");
    EXPECT_EQ(r.verdict, Verdict::dnat) << r.text();
    EXPECT_TRUE(test::checksums_verify(r.frame));
}

TEST(Ipv6, AReversedTupleSwapsAddressesAndPortsAndKeepsTheProtocol) {
    const FlowKey6 k = test::packet("udp [fd00:67::100]:40000 > [fd00:96::a]:53").key6;
    ASSERT_NE(k.sport, k.dport);
    FlowKey6 dirty = k;
    dirty.pad[1] = 7;  // a key's padding is zero; reversed() keeps it so whatever it is given
    const FlowKey6 r = dirty.reversed();
    EXPECT_EQ(std::memcmp(r.src.b, k.dst.b, 16), 0);
    EXPECT_EQ(std::memcmp(r.dst.b, k.src.b, 16), 0);
    EXPECT_EQ(r.sport, k.dport);
    EXPECT_EQ(r.dport, k.sport);
    EXPECT_EQ(r.proto, k.proto);
    EXPECT_EQ(r.pad[0] | r.pad[1] | r.pad[2], 0) << "the padding is zero: keys compare whole";
    EXPECT_TRUE(r.reversed() == k);
    EXPECT_FALSE(r == k);
}

TEST(Ipv6, FlowTableHoldsBothTuplesOfAnIpv6Flow) {
    auto t = FlowTable6::create(FlowTableParams{.capacity = 4096});
    ASSERT_TRUE(t);
    FlowKey6 a{.src = *ctl::parse_ip6("fd00:67::100"),
               .dst = *ctl::parse_ip6("fd00:96::79"),
               .sport = rte_cpu_to_be_16(40000),
               .dport = rte_cpu_to_be_16(80),
               .proto = 6};
    FlowKey6 b{.src = *ctl::parse_ip6("fd00:244:2::4"),
               .dst = *ctl::parse_ip6("fd00:192::2"),
               .sport = rte_cpu_to_be_16(80),
               .dport = rte_cpu_to_be_16(61001),
               .proto = 6};
    const InsertResult r = t->insert(0, FlowInit6{.key = {a, b}}, 1);
    ASSERT_EQ(r.status, InsertStatus::inserted);
    EXPECT_EQ(t->lookup(a).id, r.id);
    EXPECT_EQ(t->lookup(a).dir, Direction::original);
    EXPECT_EQ(t->lookup(b.reversed().reversed()).dir, Direction::reply);
    FlowKey6 c = a;
    c.src.b[15] ^= 1;
    EXPECT_FALSE(t->lookup(c).hit()) << "one bit of the address apart";
    EXPECT_EQ(t->insert(0, FlowInit6{.key = {c, b}}, 1).status, InsertStatus::reply_clash);
    t->remove(r.id);
    EXPECT_FALSE(t->lookup(a).hit());
}

TEST(Ipv6, ADualStackServiceCountsEachFamilyUnderItsName) {
    auto t = test::tracer(kDualStack, 7);
    ASSERT_EQ(t->run_spec("tcp 192.168.67.100:1 > 192.168.67.8:30001 [S]").verdict, Verdict::dnat);
    ASSERT_EQ(t->run_spec("tcp [fd00:67::100]:1 > [fd00:67::8]:30001 [S]").verdict, Verdict::dnat);
    ASSERT_EQ(t->run_spec("tcp [fd00:67::100]:2 > [fd00:67::8]:30001 [S]").verdict, Verdict::dnat);
    const ServiceSnapshot& s = t->snapshot();
    uint64_t v4 = 0, v6 = 0;
    for (uint32_t i = 0; i < s.services.size(); ++i) {
        if (s.info(i).name != "default/test-svc:http") continue;
        (s.services[i].family == Family::v6 ? v6 : v4) += t->slots().service_total(s.services[i].slot).packets;
    }
    EXPECT_EQ(v4, 1u);
    EXPECT_EQ(v6, 2u);
}

TEST(Ipv6, SourceRangesOfOneFamilyLeaveTheOtherUnrestricted) {
    // kube-proxy's service change tracker keeps each family's loadBalancerSourceRanges and ignores
    // the other's: an IPv4-only list guards the IPv4 LB IP and leaves the IPv6 one open.
    std::string cfg = kDualStack + R"(
  - name: default/lb
    type: LoadBalancer
    cluster_ips: [10.107.0.9, 'fd00:96::9']
    load_balancer_ips: [192.168.67.50, 'fd00:67::50']
    load_balancer_source_ranges: [203.0.113.0/24]
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30009}]
    endpoints: [10.244.2.4, 'fd00:244:2::4']
)";
    auto t = test::tracer(cfg, 7);
    auto v4 = t->run_spec("tcp 192.168.67.100:1 > 192.168.67.50:80 [S]");
    EXPECT_EQ(v4.verdict, Verdict::drop);
    EXPECT_EQ(v4.reason, DropReason::lb_source_range);
    EXPECT_EQ(t->run_spec("tcp 203.0.113.7:1 > 192.168.67.50:80 [S]").verdict, Verdict::dnat);
    auto v6 = t->run_spec("tcp [fd00:67::100]:1 > [fd00:67::50]:80 [S]");
    EXPECT_EQ(v6.verdict, Verdict::dnat) << v6.text();
    EXPECT_EQ(*v6.endpoint, "[fd00:244:2::4]:80");
}
