#include "route.h"

#include <atomic>

#include <rte_errno.h>

namespace svcgate::dp {

std::unique_ptr<RouteTable> RouteTable::create(const std::vector<Route>& routes, std::string& err) {
    std::unique_ptr<RouteTable> t(new RouteTable());
    if (routes.empty()) return t;
    static std::atomic<uint32_t> seq{0};
    std::string name = "svcgate_rt" + std::to_string(seq.fetch_add(1));
    rte_lpm_config cfg{};
    cfg.max_rules = static_cast<uint32_t>(routes.size() * 2 + 16);
    cfg.number_tbl8s = 256;
    t->lpm_.reset(rte_lpm_create(name.c_str(), SOCKET_ID_ANY, &cfg));
    if (!t->lpm_) {
        err = std::string("rte_lpm_create: ") + rte_strerror(rte_errno);
        return nullptr;
    }
    t->hops_ = FixedArray<NextHop>(routes.size());
    for (uint32_t idx = 0; idx < routes.size(); ++idx) {
        // One next-hop index per route; routes are few, identical hops are not merged.
        const Route& r = routes[idx];
        t->hops_[idx] = r.hop;
        if (r.prefix.len == 0) {  // rte_lpm takes depths 1-32: the default route stands apart
            t->default_ = static_cast<int32_t>(idx);
            continue;
        }
        if (rte_lpm_add(t->lpm_.get(), r.prefix.addr.host(), r.prefix.len, idx) != 0) {
            err = "rte_lpm_add failed";
            return nullptr;
        }
    }
    return t;
}

}  // namespace svcgate::dp
