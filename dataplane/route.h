// Routes: longest-prefix-match tables from destination to next hop (a gateway address, or
// "directly connected" on a port), one per family: rte_lpm for IPv4 (RouteTable), rte_lpm6 for
// IPv6 (RouteTable6). Built by the control plane as part of a snapshot; workers only look up. The
// routes as configured are the catalogue's (snapshot.h).
//
// Runs on: build: control thread (needs the EAL for the LPM's memory). lookup: any thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_lpm.h>
#include <rte_lpm6.h>

#include "fixed_array.h"
#include "types.h"

namespace svcgate::dp {

template <typename A>
struct BasicNextHop {
    A gateway;           // zero: the destination itself is on the port's link
    uint16_t port = 0;   // egress port index
    A source;            // the port address on the next hop's subnet: the masquerade address

    friend bool operator==(const BasicNextHop&, const BasicNextHop&) noexcept = default;
};
using NextHop = BasicNextHop<Ip4>;
using NextHop6 = BasicNextHop<Ip6>;

struct LpmDeleter {
    void operator()(rte_lpm* l) const noexcept { rte_lpm_free(l); }
    void operator()(rte_lpm6* l) const noexcept { rte_lpm6_free(l); }
};

template <typename A>
class BasicRouteTable {
public:
    using Cidr = std::conditional_t<std::is_same_v<A, Ip4>, Cidr4, Cidr6>;
    using Hop = BasicNextHop<A>;
    using Lpm = std::conditional_t<std::is_same_v<A, Ip4>, rte_lpm, rte_lpm6>;
    struct Route {
        Cidr prefix;
        Hop hop;

        friend bool operator==(const Route&, const Route&) noexcept = default;
    };
    // nullptr (and `err` set) when the LPM cannot be created (no EAL, no memory).
    static std::unique_ptr<BasicRouteTable> create(const std::vector<Route>& routes, std::string& err);

    // A number no other table of this process has had or will have: what RouteMemo6 tags its
    // answers with, so that a table built by a reload (even at a freed table's address) never
    // meets an answer of another.
    uint64_t serial() const noexcept { return serial_; }
    // A hop as an index and back (RouteMemo6 keeps indices): kNoHop for "no route".
    static constexpr uint32_t kNoHop = UINT32_MAX;
    uint32_t index_of(const Hop* h) const noexcept { return h ? static_cast<uint32_t>(h - hops_.data()) : kNoHop; }
    const Hop* hop_at(uint32_t idx) const noexcept { return idx == kNoHop ? nullptr : &hops_[idx]; }

    // nullptr when no route covers `dst`.
    const Hop* lookup(const A& dst) const noexcept {
        uint32_t idx;
        if (!lpm_ || lpm_lookup(dst, idx) != 0)
            return default_ >= 0 ? &hops_[static_cast<uint32_t>(default_)] : nullptr;
        return &hops_[idx];
    }

private:
    BasicRouteTable() = default;
    int lpm_lookup(const A& dst, uint32_t& idx) const noexcept {
        if constexpr (std::is_same_v<A, Ip4>) return rte_lpm_lookup(lpm_.get(), dst.host(), &idx);
        else return rte_lpm6_lookup(lpm_.get(), dst.b, &idx);
    }
    std::unique_ptr<Lpm, LpmDeleter> lpm_;
    int32_t default_ = -1;  // index of the 0.0.0.0/0 or ::/0 hop, if any
    uint64_t serial_ = 0;
    FixedArray<Hop> hops_;
};
using RouteTable = BasicRouteTable<Ip4>;
using RouteTable6 = BasicRouteTable<Ip6>;
extern template class BasicRouteTable<Ip4>;
extern template class BasicRouteTable<Ip6>;

// One worker's memo of IPv6 route lookups. rte_lpm6 walks a trie a byte at a time past its first
// 24 bits (a /64 pod route: 6 dependent reads, about 10 ns a packet here, the largest single cost
// of an established IPv6 packet after parsing); rte_lpm answers IPv4 in one or two reads and needs
// none. Direct-mapped on the destination (1,024 entries of 32 bytes), each entry tagged with the
// table's serial: a reload's new table misses every old entry. Owned by one worker, never shared.
class RouteMemo6 {
public:
    const NextHop6* lookup(const RouteTable6& t, const Ip6& dst) noexcept {
        uint64_t a, b;
        std::memcpy(&a, dst.b, 8);
        std::memcpy(&b, dst.b + 8, 8);
        Entry& e = entries_[((a ^ b) * 0x9e3779b97f4a7c15ull) >> (64 - kBits)];
        const uint64_t serial = t.serial();
        if (e.serial == serial && e.dst == dst) return t.hop_at(e.hop);
        const NextHop6* hop = t.lookup(dst);
        e = Entry{.dst = dst, .serial = serial, .hop = t.index_of(hop)};
        return hop;
    }

private:
    static constexpr unsigned kBits = 10;
    struct Entry {
        Ip6 dst;
        uint64_t serial = 0;  // the table's; 0: empty (tables count from 1)
        uint32_t hop = 0;     // index into the table's hops, or kNoHop
    };
    Entry entries_[1u << kBits]{};
};

}  // namespace svcgate::dp
