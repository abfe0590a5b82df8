// One worker's cache of where a destination leaves: its route (egress port, next hop) and, once
// resolved, the next hop's MAC. An established packet otherwise pays a route lookup (rte_lpm: one
// or two dependent reads; rte_lpm6: a trie walk a byte at a time past its first 24 bits, about
// 10 ns for a /64 pod route) and a neighbor lookup (a CRC and a shared slot) for an answer that
// changes only on a reload or an ARP / ND change. Before this cache, the route stage (lookup, hop,
// MTU, TTL) and the output stage's send with its neighbor lookup held 18% of an established IPv4
// packet's samples, most of the route stage's on the lookup's chain of dependent loads
// (bench/HISTORY.md, round six).
//
// Direct-mapped on the destination (1,024 entries a family), each entry tagged with
// - the route table's serial (route.h): a reload's new table misses every old entry;
// - the neighbor table's version (neighbor.h), read before the MAC: any MAC change (learned
//   anew, pinned, unpinned) misses every copied MAC;
// - when its MAC was learned: a copy is used only while the neighbor entry is fresh, so a stale
//   one goes through the output stage as before (it still forwards, and one request refreshes it).
// A destination whose next hop is unresolved keeps its route here and resolves in the output
// stage (ARP / ND hold).
//
// The cache is keyed by the packet's final destination, not by flow: the 64-byte IPv4 flow
// record has no room for a next hop and a MAC per direction, and the flows of one endpoint (or
// one client) share an entry.
//
// More destinations in use than entries (thousands of endpoints) make every lookup a miss that
// pays the tables and an entry's write, and the entries' lines crowd the burst out of L1: 11-14%
// slower than no cache at 1,000 to 100,000 Services in process (`BM_PipelineEstablished`), 7-10%
// through net_pcap (bench/HISTORY.md, round seven). So the cache watches itself: when more than
// half of a window's lookups miss, it turns off (each packet then goes to the tables as before
// the cache, writing and prefetching nothing); one lookup in kSample, at random, still goes
// through it, so a working set that fits again shows as hits and turns it back on (under a
// quarter of misses).
//
// Runs on: the worker that owns it. Never shared.
#pragma once

#include <cstdint>
#include <cstring>

#include <rte_ether.h>
#include <rte_prefetch.h>

#include "dataplane/l3/neighbor.h"
#include "dataplane/route/route.h"

namespace svcgate::dp {

template <typename A>
class HopCache {
public:
    using Hop = BasicNextHop<A>;
    // A MAC as `mac_out` carries it: the 6 bytes in memory order in the low bits, kResolved set
    // (bits 48-62 are the cache's own).
    // One 8-byte word: copied whole, never rebuilt from pieces (a 6-byte struct returned by value
    // was stored in two parts and reloaded whole, a store-forwarding stall per packet).
    static constexpr uint64_t kResolved = uint64_t{1} << 63;

    // The route for `dst` (null: none); `mac_out` the next hop's MAC | kResolved when fresh, 0
    // when the output stage has to resolve it. Always inlined into the route stage: GCC left
    // IPv6's a call, 9% of an IPv6 worker's samples through the port (bench/profile).
    [[gnu::always_inline]] const Hop* lookup(const BasicRouteTable<A>& routes, const BasicNeighborTable<A>& neighbors,
                                             const A& dst, uint32_t now, uint64_t& mac_out) noexcept {
        // While off, a random one in kSample (a fixed stride could sample a subset of a round
        // robin that fits and read it as the whole working set).
        if (bypass_ && (sample_ = sample_ * 1664525u + 1013904223u) >> (32 - kSampleBits)) {
            mac_out = 0;  // the output stage resolves it
            return routes.lookup(dst);
        }
        Entry& e = entries_[slot(dst)];
        const uint64_t serial = routes.serial();
        const uint32_t version = neighbors.version();  // before the MAC (neighbor.h)
        const Hop* hop;
        const bool hit = e.serial == serial && e.dst == dst;
        missed_ += !hit;
        if (++looked_ == (bypass_ ? kWindow / kSample : kWindow)) {
            // Off above half misses, back on below a quarter: no flapping in between.
            bypass_ = bypass_ ? 4 * missed_ >= looked_ : 2 * missed_ > looked_;
            looked_ = missed_ = 0;
        }
        if (hit) [[likely]] {
            hop = routes.hop_at(e.hop);
            if (e.mac && e.version == version && BasicNeighborTable<A>::fresh(e.mac & kPinned, e.learned, now)) {
                mac_out = e.mac;
                return hop;
            }
        } else {
            hop = routes.lookup(dst);
            e.dst = dst;
            e.serial = serial;
            e.hop = routes.index_of(hop);
        }
        e.mac = mac_out = 0;
        if (!hop) return hop;
        typename BasicNeighborTable<A>::Resolved r;
        const A& next = hop->gateway.is_zero() ? dst : hop->gateway;
        if (!neighbors.resolve(next, r) || !BasicNeighborTable<A>::fresh(r, now)) return hop;
        uint64_t m = 0;
        std::memcpy(&m, r.mac.addr_bytes, RTE_ETHER_ADDR_LEN);
        e.mac = mac_out = m | kResolved | (r.pinned ? kPinned : 0);
        e.learned = r.learned;
        e.version = version;
        return hop;
    }

    // The entry for `dst`, ahead of its lookup (the established stage asks as it sets a packet's
    // tuple: the entries compete with the burst's mbufs for the cache).
    void prefetch(const A& dst) const noexcept {
        if (!bypass_) rte_prefetch0(&entries_[slot(dst)]);
    }
    // Off: thrashing (more destinations in use than entries).
    bool bypassing() const noexcept { return bypass_; }

    static constexpr uint32_t kWindow = 4096;  // lookups a decision is made over
    static constexpr unsigned kSampleBits = 4;
    static constexpr uint32_t kSample = 1u << kSampleBits;  // while off, one lookup in kSample goes through

private:
    static constexpr unsigned kBits = 10;
    static uint32_t slot(const Ip4& a) noexcept { return (a.be * 0x9e3779b1u) >> (32 - kBits); }
    static uint32_t slot(const Ip6& a) noexcept {
        uint64_t x, y;
        std::memcpy(&x, a.b, 8);
        std::memcpy(&y, a.b + 8, 8);
        return static_cast<uint32_t>(((x ^ y) * 0x9e3779b97f4a7c15ull) >> (64 - kBits));
    }
    static constexpr uint64_t kPinned = uint64_t{1} << 62;  // in Entry::mac: never stale
    // One line at most: 32 bytes for IPv4, a line of its own for IPv6 (an entry across two lines
    // would cost two misses).
    struct alignas(sizeof(A) == 4 ? 32 : 64) Entry {
        uint64_t serial = 0;  // the route table's; 0: empty (tables count from 1)
        uint64_t mac = 0;     // as mac_out, | kPinned; 0: not resolved (version, learned unset)
        A dst{};
        uint32_t hop = 0;      // index into the table's hops, or kNoHop
        uint32_t version = 0;  // the neighbor table's, when the MAC was copied
        uint32_t learned = 0;  // when the neighbor entry learned it
    };
    static_assert(sizeof(Entry) == (sizeof(A) == 4 ? 32 : 64));
    Entry entries_[1u << kBits]{};
    uint32_t looked_ = 0, missed_ = 0;  // this window's lookups through the entries, and misses
    uint32_t sample_ = 1;               // LCG state: which lookups go through while off
    bool bypass_ = false;
};

}  // namespace svcgate::dp
