// Routes: an rte_lpm longest-prefix-match table from destination to next hop (a gateway address,
// or "directly connected" on a port). Built by the control plane as part of a snapshot; workers
// only look up. The routes as configured are the catalogue's (snapshot.h).
//
// Runs on: build: control thread (needs the EAL for rte_lpm's memory). lookup: any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_lpm.h>

#include "fixed_array.h"
#include "types.h"

namespace svcgate::dp {

struct NextHop {
    Ip4 gateway;         // zero: the destination itself is on the port's link
    uint16_t port = 0;   // egress port index
    Ip4 source;          // the port address on the next hop's subnet: the masquerade address

    friend bool operator==(const NextHop&, const NextHop&) noexcept = default;
};

struct LpmDeleter {
    void operator()(rte_lpm* l) const noexcept { rte_lpm_free(l); }
};
using LpmPtr = std::unique_ptr<rte_lpm, LpmDeleter>;

class RouteTable {
public:
    struct Route {
        Cidr4 prefix;
        NextHop hop;

        friend bool operator==(const Route&, const Route&) noexcept = default;
    };
    // nullptr (and `err` set) when rte_lpm cannot be created (no EAL, no memory).
    static std::unique_ptr<RouteTable> create(const std::vector<Route>& routes, std::string& err);

    // nullptr when no route covers `dst`.
    const NextHop* lookup(Ip4 dst) const noexcept {
        uint32_t idx;
        if (!lpm_ || rte_lpm_lookup(lpm_.get(), dst.host(), &idx) != 0)
            return default_ >= 0 ? &hops_[static_cast<uint32_t>(default_)] : nullptr;
        return &hops_[idx];
    }

private:
    RouteTable() = default;
    LpmPtr lpm_;
    int32_t default_ = -1;  // index of the 0.0.0.0/0 hop, if any
    FixedArray<NextHop> hops_;
};

}  // namespace svcgate::dp
