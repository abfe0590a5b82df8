#include "control/snapshot/flow_sweep.h"

#include <unordered_set>

#include "control/snapshot/flow_scan.h"
#include "control/snapshot/service_endpoint.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {
// Which endpoints each Service still lists.
using Alive = std::unordered_set<ServiceEndpoint, ServiceEndpointHash>;

template <typename K>
void sweep(BasicFlowTable<K>& flows, const Alive& alive, uint32_t generation, uint32_t id_bit,
           const std::function<void(uint32_t, uint8_t)>& remove_dgram, SweepResult& r) {
    scan_live_flows(flows, [&](uint32_t id, BasicFlow<K>& f) {
        if (f.kind != FlowKind::nat || f.gen == generation) return true;
        ++r.scanned;
        // key[1] is the reply tuple: its source is the endpoint.
        if (alive.count(ServiceEndpoint::of_flow(f))) return true;
        if (FlowState{f.state.fetch_or(FlowState::kGone, std::memory_order_relaxed)}.gone())
            return true;  // marked before
        if (static_cast<Proto>(f.key[0].proto) == Proto::tcp) {
            ++r.tcp_closed;
        } else {
            ++r.dgram_removed;
            remove_dgram(id | id_bit, f.owner);
        }
        return true;
    });
}
}  // namespace

SweepResult sweep_removed_endpoints(FlowTable& flows, FlowTable6* flows6, const ServiceSnapshot& fresh,
                                    const std::function<void(uint32_t, uint8_t)>& remove_dgram) {
    Alive alive;
    alive.reserve(fresh.endpoints.size());
    for (const ServicePort& sp : fresh.services)
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i)
            if (!(fresh.endpoints[i].cond & kEvicted))  // failing its health checks, on_failure: reset
                alive.insert(ServiceEndpoint{sp.id, fresh.endpoints[i].key().word()});
    SweepResult r;
    sweep(flows, alive, fresh.generation, 0, remove_dgram, r);
    if (flows6) sweep(*flows6, alive, fresh.generation, kFlowIdV6, remove_dgram, r);
    return r;
}

}  // namespace svcgate::ctl
