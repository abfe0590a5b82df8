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

#include "dataplane/base/fixed_array.h"
#include "dataplane/base/types.h"

namespace svcgate::dp {

template <typename A>
struct BasicNextHop {
    A gateway;          // zero: the destination itself is on the port's link
    uint16_t port = 0;  // egress port index
    A source;           // the port address on the next hop's subnet: the masquerade address

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

    // A number no other table of this process has had or will have: what HopCache (hop_cache.h) tags its
    // answers with, so that a table built by a reload (even at a freed table's address) never
    // meets an answer of another.
    uint64_t serial() const noexcept { return serial_; }
    // A hop as an index and back (HopCache keeps indices): kNoHop for "no route".
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
        if constexpr (std::is_same_v<A, Ip4>)
            return rte_lpm_lookup(lpm_.get(), dst.host(), &idx);
        else
            return rte_lpm6_lookup(lpm_.get(), dst.b, &idx);
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

}  // namespace svcgate::dp
