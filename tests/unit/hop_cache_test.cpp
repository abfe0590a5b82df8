// HopCache (dataplane/l3/hop_cache.h): a worker's copy of route and next-hop MAC answers is only ever
// the answer the route and neighbor tables would give now.
#include <vector>

#include <gtest/gtest.h>

#include "dataplane/l3/hop_cache.h"
#include "test_support.h"
#include "control/config/yaml_config.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

Ip4 ip4(const char* s) { return *ctl::parse_ip4(s); }
Ip6 ip6(const char* s) { return *ctl::parse_ip6(s); }
rte_ether_addr mac(uint8_t last) { return rte_ether_addr{{0x02, 0, 0, 0, 0, last}}; }

// One lookup's answer, unpacked.
template <typename A>
struct Answer {
    const BasicNextHop<A>* hop;
    bool resolved;
    uint8_t last;  // the MAC's last byte
};
template <typename A>
Answer<A> ask(HopCache<A>& c, const BasicRouteTable<A>& t, const BasicNeighborTable<A>& nt, const A& dst,
              uint32_t now) {
    uint64_t m = 0xdead;
    const auto* hop = c.lookup(t, nt, dst, now, m);
    EXPECT_TRUE(m == 0 || (m & HopCache<A>::kResolved)) << "a MAC or nothing";
    return {hop, m != 0, static_cast<uint8_t>(m >> 40)};
}

std::unique_ptr<RouteTable> routes4(const char* pod_gateway) {
    std::string err;
    auto t = RouteTable::create({{Cidr4{ip4("10.244.0.0"), 16}, NextHop{.gateway = ip4(pod_gateway), .port = 1}},
                                 {Cidr4{ip4("10.192.0.0"), 24}, NextHop{.gateway = Ip4{}, .port = 1}},
                                 {Cidr4{ip4("0.0.0.0"), 0}, NextHop{.gateway = ip4("192.168.67.1"), .port = 0}}},
                                err);
    EXPECT_TRUE(t) << err;
    return t;
}

}  // namespace

// Route answers: exactly the table's, and a reload's new table (even with the same prefixes) is
// never answered from the old one's entries; IPv6, many destinations colliding on entries.
TEST(HopCache, RoutesAnswerAsTheirTableAndNeverFromAReplacedOne) {
    test::ensure_eal();  // the LPM's memory
    auto cidr6 = [](const char* s, uint8_t len) { return Cidr6{ip6(s), len}; };
    std::string err;
    auto a = RouteTable6::create({{cidr6("fd00:244:2::", 64), NextHop6{.gateway = ip6("fd00:192::3"), .port = 1}},
                                  {cidr6("::", 0), NextHop6{.gateway = ip6("fd00:67::1"), .port = 0}}},
                                 err);
    auto b =
        RouteTable6::create({{cidr6("fd00:244:2::", 64), NextHop6{.gateway = ip6("fd00:192::4"), .port = 1}}}, err);
    ASSERT_TRUE(a && b) << err;
    ASSERT_NE(a->serial(), b->serial());
    NeighborTable6 nt;
    auto cache = std::make_unique<HopCache<Ip6>>();
    std::vector<Ip6> dsts;
    for (uint32_t i = 0; i < 2000; ++i) {  // more destinations than entries: collisions replace
        Ip6 d = ip6(i % 3 ? "fd00:244:2::" : "2001:db8::");
        d.b[12] = static_cast<uint8_t>(i >> 8), d.b[15] = static_cast<uint8_t>(i);
        dsts.push_back(d);
    }
    // Each table twice in a row over every destination (the second pass answers from the cache
    // where no other destination took the entry), then the other table, then back.
    for (const RouteTable6* t : {a.get(), a.get(), b.get(), b.get(), a.get(), b.get()})
        for (const Ip6& d : dsts)
            ASSERT_EQ(ask(*cache, *t, nt, d, 100).hop, t->lookup(d)) << (t == b.get() ? "b" : "a");
    for (int i = 0; i < 3; ++i) {  // one destination: a hit after the first lookup, for each table
        ASSERT_EQ(ask(*cache, *a, nt, dsts[1], 100).hop, a->lookup(dsts[1]));
        ASSERT_EQ(ask(*cache, *b, nt, dsts[1], 100).hop, b->lookup(dsts[1]))
            << "the new table's answer, not the old one's";
    }
    EXPECT_EQ(ask(*cache, *b, nt, ip6("2001:db8::1"), 100).hop, nullptr) << "no route in b";
    EXPECT_EQ(ask(*cache, *a, nt, ip6("2001:db8::1"), 100).hop->gateway, ip6("fd00:67::1")) << "a's default route";
}

// The MAC: resolved only while the neighbor entry is fresh, the new one as soon as it changes
// (learned anew, pinned, unpinned), never one of an unknown next hop; a gateway route resolves
// its gateway, an on-link route the destination itself.
TEST(HopCache, MacIsTheNeighborTablesFreshAnswerAtEveryMoment) {
    test::ensure_eal();
    auto t = routes4("10.192.0.3");
    NeighborTable nt;
    auto cache = std::make_unique<HopCache<Ip4>>();
    const Ip4 pod = ip4("10.244.2.4"), node = ip4("10.192.0.4");
    uint32_t now = 100;

    auto a = ask(*cache, *t, nt, pod, now);
    ASSERT_NE(a.hop, nullptr);
    EXPECT_EQ(a.hop->gateway, ip4("10.192.0.3"));
    EXPECT_FALSE(a.resolved) << "the gateway's MAC is unknown";
    EXPECT_FALSE(ask(*cache, *t, nt, pod, now).resolved) << "still unknown: nothing was copied";

    nt.learn(ip4("10.192.0.3"), mac(3), now, true);
    a = ask(*cache, *t, nt, pod, now);
    ASSERT_TRUE(a.resolved) << "learned since";
    EXPECT_EQ(a.last, 3);
    a = ask(*cache, *t, nt, pod, now + 1);  // from the copy
    ASSERT_TRUE(a.resolved);
    EXPECT_EQ(a.last, 3);

    // The gateway moved to another MAC (a gratuitous ARP): the next answer has it.
    nt.learn(ip4("10.192.0.3"), mac(33), now + 2, false);
    a = ask(*cache, *t, nt, pod, now + 2);
    ASSERT_TRUE(a.resolved);
    EXPECT_EQ(a.last, 33);

    // Stale (no ARP answer for kStaleAfter): not answered from the copy, so the output stage
    // forwards and asks again; fresh again once relearned.
    const uint32_t later = now + 2 + NeighborTable::kStaleAfter;
    EXPECT_FALSE(ask(*cache, *t, nt, pod, later).resolved);
    rte_ether_addr m;
    EXPECT_EQ(nt.lookup(ip4("10.192.0.3"), later, m), NeighborTable::State::stale);
    nt.learn(ip4("10.192.0.3"), mac(33), later, false);
    EXPECT_TRUE(ask(*cache, *t, nt, pod, later).resolved);

    // Pinned: never stale, and the pinned MAC at once; unpinned: stale at once.
    ASSERT_TRUE(nt.pin(ip4("10.192.0.3"), mac(44)));
    a = ask(*cache, *t, nt, pod, later + 10 * NeighborTable::kStaleAfter);
    ASSERT_TRUE(a.resolved);
    EXPECT_EQ(a.last, 44);
    nt.unpin(ip4("10.192.0.3"));
    EXPECT_FALSE(ask(*cache, *t, nt, pod, later + 10 * NeighborTable::kStaleAfter).resolved);

    // On-link: the destination's own MAC.
    EXPECT_FALSE(ask(*cache, *t, nt, node, now).resolved);
    nt.learn(node, mac(4), now, true);
    a = ask(*cache, *t, nt, node, now);
    ASSERT_TRUE(a.resolved);
    EXPECT_EQ(a.last, 4);
    EXPECT_TRUE(a.hop->gateway.is_zero());

    // A reload whose route sends the pods elsewhere: the new gateway's MAC, not the old one's.
    auto t2 = routes4("10.192.0.4");
    a = ask(*cache, *t2, nt, pod, now);
    ASSERT_TRUE(a.resolved);
    EXPECT_EQ(a.hop->gateway, node);
    EXPECT_EQ(a.last, 4);
}

// More destinations in use than entries: the cache turns itself off (the tables answer each
// packet, as before the cache), answers stay the tables' own throughout, and once the working set
// fits again the sampled lookups hit and turn it back on, MACs copied again.
TEST(HopCache, ThrashingTurnsItOffAndAWorkingSetThatFitsTurnsItBackOn) {
    test::ensure_eal();
    auto t = routes4("10.192.0.3");
    NeighborTable nt;
    nt.learn(ip4("10.192.0.3"), mac(3), 100, true);
    auto cache = std::make_unique<HopCache<Ip4>>();
    using C = HopCache<Ip4>;
    auto pod = [](uint32_t i) { return Ip4::from_host((10u << 24) | (244u << 16) | i); };

    // 8,000 pods, round robin: nearly every lookup misses.
    bool off = false;
    for (uint32_t n = 0; n < 4 * C::kWindow; ++n) {
        const Ip4 d = pod(n % 8000);
        const auto a = ask(*cache, *t, nt, d, 100);
        ASSERT_EQ(a.hop, t->lookup(d));
        if (a.resolved) {
            ASSERT_EQ(a.last, 3) << "a MAC given is the gateway's";
        }
        off = off || cache->bypassing();
    }
    EXPECT_TRUE(off) << "thrashing";
    EXPECT_TRUE(cache->bypassing());

    // 100 pods: the sampled lookups hit, and the cache comes back.
    for (uint32_t n = 0; n < 2 * C::kWindow * C::kSample && cache->bypassing(); ++n) {
        const Ip4 d = pod(n % 100);
        ASSERT_EQ(ask(*cache, *t, nt, d, 100).hop, t->lookup(d));
    }
    EXPECT_FALSE(cache->bypassing()) << "a working set that fits";
    for (int i = 0; i < 2; ++i) {
        const auto a = ask(*cache, *t, nt, pod(7), 100);
        EXPECT_TRUE(a.resolved) << "MACs are copied again";
        EXPECT_EQ(a.last, 3);
    }
}

// The output stage's copy of its last neighbor (LastNeighbor) answers what the table's own lookup
// answers at that moment, state and MAC, through everything that changes a neighbor: learned,
// moved to another MAC, gone stale, refreshed, pinned, unpinned, and lookups of another address
// in between. A copy used past any of these would answer a MAC or a freshness the table no
// longer has.
TEST(LastNeighbor, AnswersAsTheTableAtEveryMoment) {
    test::ensure_eal();
    NeighborTable nt;
    LastNeighbor<Ip4> last;
    const Ip4 a = ip4("10.192.0.3"), b = ip4("10.192.0.4");
    int steps = 0;
    auto same = [&](const Ip4& ip, uint32_t now, const char* what) {
        rte_ether_addr want{}, got{};
        const auto ws = nt.lookup(ip, now, want);
        const auto gs = last.lookup(nt, ip, now, got);
        EXPECT_EQ(gs, ws) << what;
        if (ws != NeighborTable::State::unknown) {
            EXPECT_TRUE(rte_is_same_ether_addr(&got, &want)) << what;
        }
        ++steps;
        return ws;
    };
    uint32_t now = 100;
    EXPECT_EQ(same(a, now, "unknown"), NeighborTable::State::unknown);
    nt.learn(a, mac(3), now, true);
    EXPECT_EQ(same(a, now, "learned"), NeighborTable::State::fresh);
    same(a, now + 1, "from the copy");
    nt.learn(a, mac(33), now + 2, false);
    same(a, now + 2, "moved to another MAC");
    nt.learn(b, mac(4), now + 2, true);
    same(b, now + 2, "another address");
    same(a, now + 3, "back to the first");
    const uint32_t later = now + 2 + NeighborTable::kStaleAfter;
    EXPECT_EQ(same(a, later, "stale"), NeighborTable::State::stale);
    nt.learn(a, mac(33), later, false);  // the same MAC again: a refresh, no version change
    EXPECT_EQ(same(a, later, "refreshed"), NeighborTable::State::fresh);
    same(a, later + NeighborTable::kStaleAfter - 1, "fresh by the refresh's time");
    ASSERT_TRUE(nt.pin(a, mac(44)));
    same(a, later + 1, "pinned");
    same(a, later + 10 * NeighborTable::kStaleAfter, "pinned: never stale");
    nt.unpin(a);
    same(a, later + 10 * NeighborTable::kStaleAfter, "unpinned: stale at once");
    EXPECT_EQ(steps, 12);
}
