#include "flow_sweep.h"

#include <unordered_set>

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {
// (service id, endpoint ip, endpoint port): which endpoints each Service still lists.
struct Key {
    uint32_t svc, ip;
    uint16_t port;
    bool operator==(const Key&) const = default;
};
struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
        return std::hash<uint64_t>()((uint64_t{k.svc} << 32 | k.ip) ^ (uint64_t{k.port} << 48));
    }
};
}  // namespace

SweepResult sweep_removed_endpoints(FlowTable& flows, const ServiceSnapshot& fresh,
                                    const std::function<void(uint32_t, uint8_t)>& remove_dgram) {
    std::unordered_set<Key, KeyHash> alive;
    alive.reserve(fresh.endpoints.size());
    for (const ServicePort& sp : fresh.services)
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i)
            alive.insert(Key{sp.id, fresh.endpoints[i].ip.be, fresh.endpoints[i].port});

    SweepResult r;
    const FlowTable::ScanGuard reading(flows);  // no record is reused while we read it
    for (uint32_t id = 0; id < flows.capacity(); ++id) {
        Flow& f = flows.flow(id);
        if (!f.live.load(std::memory_order_acquire) || f.kind != FlowKind::nat || f.gen == fresh.generation) continue;
        ++r.scanned;
        // key[1] is the reply tuple: its source is the endpoint.
        if (alive.count(Key{f.svc_id, f.key[1].src.be, f.key[1].sport})) continue;
        if (f.state.fetch_or(kStateGone, std::memory_order_relaxed) & kStateGone) continue;  // marked before
        if (static_cast<Proto>(f.key[0].proto) == Proto::tcp) {
            ++r.tcp_closed;
        } else {
            ++r.dgram_removed;
            remove_dgram(id, f.owner);
        }
    }
    return r;
}

}  // namespace svcgate::ctl
