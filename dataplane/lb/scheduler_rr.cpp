#include "dataplane/lb/scheduler.h"

namespace svcgate::dp {

uint32_t RoundRobinScheduler::pick(const SelectCtx& c) noexcept {
    // relaxed: the cursor only spreads load; no other data is published through it.
    uint32_t n = c.snap.rr_cursor[c.set_index].fetch_add(1, std::memory_order_relaxed);
    return n % c.set.count;
}

}  // namespace svcgate::dp
