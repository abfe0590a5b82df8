// The publisher: the one way a config reaches the workers, for the daemon and for `svcgatectl
// trace` alike. build (off the fast path) → a larger StatsTable first when the slots could run
// out (published, grace period, old one folded in) → stable slots → publish (one atomic pointer
// store) → grace period (every worker has moved to the new snapshot) → retire the old snapshot →
// sweep the flows whose endpoint left → give back unused slots. A config that fails to build
// changes nothing.
//
// Runs on: the control thread. Views on other threads (telemetry, metrics) read current() and
// slots() under the lock named in PublishTarget::readers.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include <rte_rcu_qsbr.h>

#include "control/config/config_model.h"
#include "control/snapshot/endpoint_health.h"
#include "control/snapshot/flow_sweep.h"
#include "dataplane/flow/flow_table.h"
#include "control/snapshot/slot_registry.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

// Where the publisher's snapshots go.
struct PublishTarget {
    // Makes the snapshot the one workers read (the daemon: a release store of the pointer they
    // load each loop; trace: its WorkerCtx).
    std::function<void(const dp::ServiceSnapshot*)> store;
    // Makes the StatsTable the one workers count into (the daemon: a release store they load
    // after the snapshot; trace: its WorkerCtx).
    std::function<void(dp::StatsTable*)> store_stats;
    rte_rcu_qsbr* qsbr = nullptr;  // the workers' grace periods; null: no concurrent reader
    dp::FlowTable* flows = nullptr;
    dp::FlowTable6* flows6 = nullptr;
    // A datagram flow to a removed endpoint, for its owner to remove (daemon: the owner's ring;
    // trace: at once).
    std::function<void(uint32_t id, uint8_t owner)> remove_dgram;
    std::mutex* readers = nullptr;  // held while the current snapshot changes
};

struct PublishResult {
    uint32_t generation = 0;
    size_t service_ports = 0;
    SweepResult sweep;
};

class Publisher {
public:
    Publisher(uint16_t workers, PublishTarget target);
    ~Publisher();

    // Publishes `cfg` as the next generation. `commit` runs under the readers' lock right after
    // the swap (the daemon swaps its running config there: `cfg` is not read once `commit`
    // runs, so it may move `cfg` away). Throws ConfigError, with nothing changed, when the config
    // does not build.
    PublishResult publish(const Config& cfg, const std::function<void()>& commit = {});
    // The endpoints failing their health checks, for this and every later publish (none: all serve).
    void set_health(EndpointHealthPtr health) { health_ = std::move(health); }
    // Periodic: gives back the slots flows stopped holding since the last reload.
    void tick();

    const dp::ServiceSnapshot* current() const { return current_.get(); }
    const SlotRegistry& slots() const { return slots_; }
    uint32_t generation() const { return current_ ? current_->generation : 0; }

private:
    PublishTarget target_;
    SlotRegistry slots_;
    std::unique_ptr<dp::ServiceSnapshot> current_;
    EndpointHealthPtr health_;
};

}  // namespace svcgate::ctl
