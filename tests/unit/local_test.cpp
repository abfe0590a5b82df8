// The gateway's own addresses: ARP answered (and learned from) and ping answered in place; the
// neighbor cache's freshness and request pacing.
#include <cstring>

#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include <gtest/gtest.h>

#include "dataplane/base/checksum.h"
#include "dataplane/l3/local.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

const std::string kConfig = R"(
dataplane:
  ports: [{name: ext, addresses: [192.168.67.8/24]}]
cluster:
  node_ips: [192.168.67.8]
services:
  - name: default/web
    type: LoadBalancer
    cluster_ip: 10.96.0.1
    load_balancer_ips: [198.51.100.7]
    ports: [{port: 80}]
    endpoints: [10.244.2.4]
)";

constexpr rte_ether_addr kPortMac = {{0x02, 0, 0, 0, 0, 0xaa}};
constexpr rte_ether_addr kPeerMac = {{0x02, 0, 0, 0, 0, 0xbb}};

rte_mbuf* mbuf_of(const std::vector<uint8_t>& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(ctl::tool_mempool());
    EXPECT_NE(m, nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    return m;
}

// A peer's ARP request, as the gateway itself would build one.
rte_mbuf* arp_request(Ip4 sender, Ip4 target) {
    rte_mbuf* m = rte_pktmbuf_alloc(ctl::tool_mempool());
    EXPECT_TRUE(m && build_arp_request(m, kPeerMac, sender, target));
    return m;
}

Ip4 addr(const char* s) { return *ctl::parse_ip4(s); }

// The output stage's answer to a packet for the gateway, from its parsed meta.
DropReason handle_local(rte_mbuf* m, const rte_ether_addr& port_mac, const ServiceSnapshot& s, NeighborTable& nt,
                        uint32_t now) {
    uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
    PacketMeta pm;
    if (DropReason r = parse_packet(frame, rte_pktmbuf_data_len(m), pm); r != DropReason::none) return r;
    static NeighborTable6 nt6;
    return answer_local(m, pm, port_mac, s, nt, nt6, now);
}

}  // namespace

TEST(Local, ArpIsAnsweredForEveryAddressTheGatewayOwnsAndTeachesTheCache) {
    test::ensure_eal();
    auto t = test::tracer(kConfig);
    NeighborTable nt;
    for (const char* target : {"192.168.67.8", "10.96.0.1", "198.51.100.7"}) {
        rte_mbuf* m = arp_request(addr("192.168.67.100"), addr(target));
        ASSERT_EQ(handle_local(m, kPortMac, t->snapshot(), nt, 100), DropReason::none) << target;
        auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
        auto* a = reinterpret_cast<rte_arp_hdr*>(eth + 1);
        EXPECT_EQ(a->arp_opcode, rte_cpu_to_be_16(RTE_ARP_OP_REPLY));
        const rte_be32_t sip = a->arp_data.arp_sip, tip = a->arp_data.arp_tip;  // packed: copy, not bind
        EXPECT_EQ(sip, addr(target).be);
        EXPECT_EQ(tip, addr("192.168.67.100").be);
        EXPECT_TRUE(rte_is_same_ether_addr(&a->arp_data.arp_sha, &kPortMac));
        EXPECT_TRUE(rte_is_same_ether_addr(&eth->dst_addr, &kPeerMac));
        EXPECT_TRUE(rte_is_same_ether_addr(&eth->src_addr, &kPortMac));
        rte_pktmbuf_free(m);
    }
    rte_ether_addr mac;
    EXPECT_EQ(nt.lookup(addr("192.168.67.100"), 100, mac), NeighborTable::State::fresh) << "the sender was learned";
    EXPECT_TRUE(rte_is_same_ether_addr(&mac, &kPeerMac));

    // An address the gateway does not own: not answered, and it refreshes only what the cache
    // already holds.
    rte_mbuf* m = arp_request(addr("192.168.67.101"), addr("192.168.67.50"));
    EXPECT_EQ(handle_local(m, kPortMac, t->snapshot(), nt, 100), DropReason::arp_consumed);
    EXPECT_EQ(nt.lookup(addr("192.168.67.101"), 100, mac), NeighborTable::State::unknown);
    rte_pktmbuf_free(m);
    m = arp_request(addr("192.168.67.100"), addr("192.168.67.50"));
    EXPECT_EQ(handle_local(m, kPortMac, t->snapshot(), nt, 130), DropReason::arp_consumed);
    EXPECT_EQ(nt.lookup(addr("192.168.67.100"), 100 + NeighborTable::kStaleAfter + 10, mac),
              NeighborTable::State::fresh)
        << "a known neighbor is refreshed by any of its ARPs";
    rte_pktmbuf_free(m);

    // A reply (to the gateway's own request) is read and ends there: consumed, not refused.
    m = arp_request(addr("192.168.67.100"), addr("192.168.67.8"));
    rte_pktmbuf_mtod_offset(m, rte_arp_hdr*, sizeof(rte_ether_hdr))->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
    EXPECT_EQ(handle_local(m, kPortMac, t->snapshot(), nt, 160), DropReason::arp_consumed);
    EXPECT_EQ(nt.lookup(addr("192.168.67.100"), 160 + NeighborTable::kStaleAfter - 1, mac),
              NeighborTable::State::fresh);
    rte_pktmbuf_free(m);
}

// An ARP storm: requests from thousands of spoofed senders, on-link and not, to the gateway and
// to others. Each is answered or counted (no amplification: one reply per request at most), and
// the cache keeps room: a next hop the gateway asks for afterwards is still learned.
TEST(Local, ArpStormFromSpoofedSendersCannotFillTheNeighborCache) {
    test::ensure_eal();
    auto t = test::tracer(kConfig);
    NeighborTable nt;
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    unsigned answered = 0, refused = 0;
    for (uint32_t i = 0; i < 20000; ++i) {
        const Ip4 sender = Ip4::from_host((i % 2 ? 0x0a000000u : 0xc0a84300u) + 1 + i % 250 + (i % 2) * (i << 8));
        rte_mbuf* m = arp_request(sender, i % 3 ? addr("192.168.67.8") : addr("192.168.67.77"));
        (handle_local(m, kPortMac, t->snapshot(), nt, 100) == DropReason::none ? answered : refused)++;
        rte_pktmbuf_free(m);
    }
    EXPECT_EQ(answered + refused, 20000u);
    EXPECT_GT(answered, 13000u);
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use) << "no mbuf kept";
    // Off-link senders were never entered; on-link ones at most the /24's 254.
    rte_ether_addr mac;
    EXPECT_EQ(nt.lookup(Ip4::from_host(0x0a000000u + 2 + (1u << 8)), 100, mac), NeighborTable::State::unknown);
    // Every address of the table's neighbourhood is still claimable: a next hop asked for later.
    unsigned learnable = 0;
    for (uint32_t h = 0; h < 512; ++h) {
        const Ip4 hop = Ip4::from_host(0xac100000u + h);  // 172.16.0.0/23, never seen in the storm
        if (nt.want_request(hop, 200)) {
            nt.learn(hop, kPeerMac, 200, false);  // its reply: the slot is there, so it is taken
            learnable += nt.lookup(hop, 200, mac) == NeighborTable::State::fresh;
        }
    }
    EXPECT_EQ(learnable, 512u);
}

TEST(Local, PingOfAGatewayAddressIsAnsweredWithAValidChecksum) {
    test::ensure_eal();
    auto t = test::tracer(kConfig);
    NeighborTable nt;
    auto spec = test::packet("icmp 192.168.67.100 > 192.168.67.8 len=56");
    rte_mbuf* m = mbuf_of(ctl::build_frame(spec));
    ASSERT_EQ(handle_local(m, kPortMac, t->snapshot(), nt, 100), DropReason::none);
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    auto* iph = reinterpret_cast<rte_ipv4_hdr*>(f + sizeof(rte_ether_hdr));
    auto* icmp = reinterpret_cast<rte_icmp_hdr*>(iph + 1);
    EXPECT_EQ(icmp->icmp_type, RTE_IP_ICMP_ECHO_REPLY);
    const rte_be32_t src = iph->src_addr, dst = iph->dst_addr;  // packed: copy, not bind
    EXPECT_EQ(src, addr("192.168.67.8").be);
    EXPECT_EQ(dst, addr("192.168.67.100").be);
    EXPECT_EQ(inet_csum(iph, sizeof(rte_ipv4_hdr)), 0) << "IP header checksum";
    EXPECT_EQ(inet_csum(icmp, sizeof(rte_icmp_hdr) + 56), 0) << "ICMP checksum";
    rte_pktmbuf_free(m);

    // Not ours, or not an echo request: not answered.
    m = mbuf_of(ctl::build_frame(test::packet("icmp 192.168.67.100 > 192.168.67.9")));
    EXPECT_EQ(handle_local(m, kPortMac, t->snapshot(), nt, 100), DropReason::to_gateway);
    rte_pktmbuf_free(m);
    m = mbuf_of(ctl::build_frame(test::packet("tcp 192.168.67.100:1000 > 192.168.67.8:22 [S]")));
    EXPECT_EQ(handle_local(m, kPortMac, t->snapshot(), nt, 100), DropReason::to_gateway);
    rte_pktmbuf_free(m);
}

TEST(Neighbor, PinnedEntriesStayFreshAndIgnoreArp) {
    NeighborTable nt;
    const Ip4 a = addr("10.192.0.3");
    const rte_ether_addr other{{0x02, 0, 0, 0, 0, 0x77}};
    rte_ether_addr mac;
    ASSERT_TRUE(nt.pin(a, kPeerMac));
    const uint32_t later = 100 + 10 * NeighborTable::kStaleAfter;
    EXPECT_EQ(nt.lookup(a, later, mac), NeighborTable::State::fresh) << "a configured entry never ages";
    EXPECT_FALSE(nt.want_request(a, later)) << "and is never asked for";
    nt.learn(a, other, later, true);
    nt.lookup(a, later, mac);
    EXPECT_TRUE(rte_is_same_ether_addr(&mac, &kPeerMac)) << "ARP does not override it";
    nt.unpin(a);
    EXPECT_EQ(nt.lookup(a, later, mac), NeighborTable::State::stale) << "unpinned: refreshed at once";
    EXPECT_TRUE(nt.want_request(a, later));
    nt.learn(a, other, later, true);
    EXPECT_EQ(nt.lookup(a, later, mac), NeighborTable::State::fresh);
    EXPECT_TRUE(rte_is_same_ether_addr(&mac, &other)) << "learned again";
}

TEST(Neighbor, FreshStaleAndOneRequestPerSecond) {
    NeighborTable nt;
    const Ip4 a = addr("10.192.0.3");
    rte_ether_addr mac;
    EXPECT_EQ(nt.lookup(a, 100, mac), NeighborTable::State::unknown);
    EXPECT_TRUE(nt.want_request(a, 100)) << "unknown: ask";
    EXPECT_FALSE(nt.want_request(a, 100)) << "asked this second already";
    EXPECT_TRUE(nt.want_request(a, 101));
    nt.learn(a, kPeerMac, 101, true);
    EXPECT_EQ(nt.lookup(a, 101, mac), NeighborTable::State::fresh);
    EXPECT_FALSE(nt.want_request(a, 102)) << "fresh: no request";
    const uint32_t later = 101 + NeighborTable::kStaleAfter;
    EXPECT_EQ(nt.lookup(a, later, mac), NeighborTable::State::stale) << "stale entries still forward";
    EXPECT_TRUE(rte_is_same_ether_addr(&mac, &kPeerMac));
    EXPECT_TRUE(nt.want_request(a, later)) << "stale: refresh";
    EXPECT_EQ(nt.lookup(Ip4{}, 100, mac), NeighborTable::State::unknown) << "0.0.0.0 is never a neighbor";
}
