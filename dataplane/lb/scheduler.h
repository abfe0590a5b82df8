// Endpoint selection for a new flow. Each scheduler is a small plug-in in its own file
// (DPVS's ip_vs_rr.c and friends) with one static `pick`; the SchedulerPlugin concept checks
// the interface at compile time and select_endpoint() dispatches with a switch on the enum
// stored in the Service: one predictable branch per new flow, no virtual call.
//
// Runs on: worker lcores (new flows only). Reads: the snapshot, the StatsTable's active counts.
// Writes: the set's rr cursor (atomic), nothing else.
#pragma once

#include <concepts>
#include <cstdint>

#include "dataplane/base/rng.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::dp {

struct SelectCtx {
    const ServiceSnapshot& snap;
    const StatsTable& stats;  // active counts (lc, sed, nq)
    const EndpointSet& set;
    uint32_t set_index;
    Rng& rng;
    // The original tuple of the new flow: one of the two, by the service port's family.
    const FlowKey* key = nullptr;
    const FlowKey6* key6 = nullptr;
};

template <typename T>
concept SchedulerPlugin = requires(const SelectCtx& c) {
    { T::pick(c) }
    noexcept->std::same_as<uint32_t>;  // position in the set, < set.count
};

// kube-proxy's KUBE-SVC-* `statistic --mode random`: uniform over the set.
struct RandomScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};
// Maglev over the 5-tuple.
struct MaglevScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};
// IPVS sh / dh: the Maglev table indexed by the source / destination address only.
struct SourceHashScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};
struct DestinationHashScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};
// IPVS rr: a shared cursor per set.
struct RoundRobinScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};
// IPVS lc / sed / nq: by live flows per endpoint (all weights 1).
struct LeastConnScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};
struct ShortestDelayScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};
struct NeverQueueScheduler {
    static uint32_t pick(const SelectCtx& c) noexcept;
};

static_assert(SchedulerPlugin<RandomScheduler> && SchedulerPlugin<MaglevScheduler> &&
              SchedulerPlugin<SourceHashScheduler> && SchedulerPlugin<DestinationHashScheduler> &&
              SchedulerPlugin<RoundRobinScheduler> && SchedulerPlugin<LeastConnScheduler> &&
              SchedulerPlugin<ShortestDelayScheduler> && SchedulerPlugin<NeverQueueScheduler>);

// Returns the endpoint index (into snap.endpoints); the set must not be empty.
uint32_t select_endpoint(Scheduler s, const SelectCtx& c) noexcept;

// Maglev lookup shared by the hashing schedulers.
inline uint32_t ring_pick(const SelectCtx& c, uint32_t hash) noexcept {
    if (c.set.ring_len == 0) return hash % c.set.count;
    return c.snap.rings[c.set.ring_off + hash % c.set.ring_len];
}

}  // namespace svcgate::dp
