// IPVS's connection-count schedulers, all weights 1 (Kubernetes endpoints carry no weight):
// lc picks the fewest live flows; sed the smallest (active + 1) / weight, the same order at
// weight 1 but kept as its own plug-in for when weights arrive; nq picks an idle endpoint first,
// otherwise behaves as sed. Ties go to the first in set order, as in IPVS.
#include "dataplane/lb/scheduler.h"

namespace svcgate::dp {

namespace {
int32_t active_of(const SelectCtx& c, uint32_t pos) noexcept {
    const Endpoint& e = c.snap.endpoints[c.snap.members[c.set.first + pos]];
    return c.stats.active.total(e.slot);
}
uint32_t least(const SelectCtx& c, int32_t bias) noexcept {
    uint32_t best = 0;
    int64_t best_cost = INT64_MAX;
    for (uint32_t i = 0; i < c.set.count; ++i) {
        int64_t cost = int64_t{active_of(c, i)} + bias;  // weight 1: overhead == active (+1 for sed)
        if (cost < best_cost) best = i, best_cost = cost;
    }
    return best;
}
}  // namespace

uint32_t LeastConnScheduler::pick(const SelectCtx& c) noexcept { return least(c, 0); }

uint32_t ShortestDelayScheduler::pick(const SelectCtx& c) noexcept { return least(c, 1); }

uint32_t NeverQueueScheduler::pick(const SelectCtx& c) noexcept {
    for (uint32_t i = 0; i < c.set.count; ++i)
        if (active_of(c, i) == 0) return i;
    return least(c, 1);
}

}  // namespace svcgate::dp
