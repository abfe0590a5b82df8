#include "dataplane/lb/scheduler.h"

namespace svcgate::dp {

uint32_t RandomScheduler::pick(const SelectCtx& c) noexcept { return c.rng.below(c.set.count); }

}  // namespace svcgate::dp
