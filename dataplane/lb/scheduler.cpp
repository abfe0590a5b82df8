#include "dataplane/lb/scheduler.h"

namespace svcgate::dp {

uint32_t select_endpoint(Scheduler s, const SelectCtx& c) noexcept {
    uint32_t pos = 0;
    switch (s) {
        case Scheduler::random:
            pos = RandomScheduler::pick(c);
            break;
        case Scheduler::maglev:
            pos = MaglevScheduler::pick(c);
            break;
        case Scheduler::sh:
            pos = SourceHashScheduler::pick(c);
            break;
        case Scheduler::dh:
            pos = DestinationHashScheduler::pick(c);
            break;
        case Scheduler::rr:
            pos = RoundRobinScheduler::pick(c);
            break;
        case Scheduler::lc:
            pos = LeastConnScheduler::pick(c);
            break;
        case Scheduler::sed:
            pos = ShortestDelayScheduler::pick(c);
            break;
        case Scheduler::nq:
            pos = NeverQueueScheduler::pick(c);
            break;
    }
    return c.snap.members[c.set.first + pos];
}

}  // namespace svcgate::dp
