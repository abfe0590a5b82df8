#include "dataplane/route/route.h"

#include <atomic>

#include <rte_errno.h>

namespace svcgate::dp {

template <typename A>
std::unique_ptr<BasicRouteTable<A>> BasicRouteTable<A>::create(const std::vector<Route>& routes, std::string& err) {
    static std::atomic<uint64_t> serials{0};
    std::unique_ptr<BasicRouteTable> t(new BasicRouteTable());
    t->serial_ = serials.fetch_add(1, std::memory_order_relaxed) + 1;
    if (routes.empty()) return t;
    static std::atomic<uint32_t> seq{0};
    constexpr bool v4 = std::is_same_v<A, Ip4>;
    std::string name = (v4 ? "svcgate_rt" : "svcgate_rt6") + std::to_string(seq.fetch_add(1));
    if constexpr (v4) {
        rte_lpm_config cfg{};
        cfg.max_rules = static_cast<uint32_t>(routes.size() * 2 + 16);
        cfg.number_tbl8s = 256;
        t->lpm_.reset(rte_lpm_create(name.c_str(), SOCKET_ID_ANY, &cfg));
    } else {
        rte_lpm6_config cfg{};
        cfg.max_rules = static_cast<uint32_t>(routes.size() * 2 + 16);
        // A /128 takes up to 13 tbl8 groups below the first 3 bytes: room for every route's worst.
        cfg.number_tbl8s = static_cast<uint32_t>(routes.size() * 14 + 64);
        t->lpm_.reset(rte_lpm6_create(name.c_str(), SOCKET_ID_ANY, &cfg));
    }
    if (!t->lpm_) {
        err = std::string(v4 ? "rte_lpm_create: " : "rte_lpm6_create: ") + rte_strerror(rte_errno);
        return nullptr;
    }
    t->hops_ = FixedArray<Hop>(routes.size());
    for (uint32_t idx = 0; idx < routes.size(); ++idx) {
        // One next-hop index per route; routes are few, identical hops are not merged.
        const Route& r = routes[idx];
        t->hops_[idx] = r.hop;
        if (r.prefix.len == 0) {  // the LPMs take depths from 1: the default route stands apart
            t->default_ = static_cast<int32_t>(idx);
            continue;
        }
        int rc;
        if constexpr (v4)
            rc = rte_lpm_add(t->lpm_.get(), r.prefix.addr.host(), r.prefix.len, idx);
        else
            rc = rte_lpm6_add(t->lpm_.get(), r.prefix.addr.b, r.prefix.len, idx);
        if (rc != 0) {
            err = v4 ? "rte_lpm_add failed" : "rte_lpm6_add failed";
            return nullptr;
        }
    }
    return t;
}

template class BasicRouteTable<Ip4>;
template class BasicRouteTable<Ip6>;

}  // namespace svcgate::dp
