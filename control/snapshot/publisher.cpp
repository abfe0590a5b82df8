#include "control/snapshot/publisher.h"

#include <utility>

#include <fmt/format.h>

#include "dataplane/base/rcu.h"
#include "control/base/log.h"
#include "control/snapshot/snapshot_builder.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

Publisher::Publisher(uint16_t workers, PublishTarget target) : target_(std::move(target)), slots_(workers) {
    target_.store_stats(slots_.current());
}

Publisher::~Publisher() = default;

PublishResult Publisher::publish(const Config& cfg, const std::function<void()>& commit) {
    std::unique_ptr<ServiceSnapshot> fresh =
        build_snapshot(cfg, generation() + 1, current_.get(), BuildMode::run, health_.get());
    std::unique_ptr<ServiceSnapshot> old;
    {
        std::unique_lock<std::mutex> lk;
        if (target_.readers) lk = std::unique_lock(*target_.readers);
        // Room for every slot the fresh snapshot could need, in the table every worker uses,
        // before any flow can be given such a slot.
        if (StatsTable* larger = slots_.reserve(*fresh)) {
            target_.store_stats(larger);
            if (target_.qsbr) rcu_synchronize(target_.qsbr);
            slots_.published();
        }
        slots_.assign(*fresh);
        target_.store(fresh.get());
        // Every worker has left the old snapshot once this returns.
        if (target_.qsbr) rcu_synchronize(target_.qsbr);
        old = std::exchange(current_, std::move(fresh));
        if (commit) commit();
    }
    old.reset();
    PublishResult r{.generation = current_->generation, .service_ports = current_->services.size()};
    // Flows whose endpoint left: TCP answered with RST, datagram flows removed by their owner.
    if (target_.flows && current_->generation > 1)
        r.sweep = sweep_removed_endpoints(*target_.flows, target_.flows6, *current_, target_.remove_dgram);
    tick();
    return r;
}

void Publisher::tick() {
    std::unique_lock<std::mutex> lk;
    if (target_.readers) lk = std::unique_lock(*target_.readers);
    slots_.reclaim(target_.qsbr);
    if (!current_) return;
    // client_ip preserve without the way back: said once per service port (docs/client-ip.md).
    for (const ServicePort& sp : current_->services)
        if (sp.preserve_client && slots_.no_return_first_seen(sp.slot))
            log_warning(
                fmt::format("{}: a client resent its SYN and no reply came through the gateway: with "
                            "client_ip preserve the nodes must route the clients' networks via the "
                            "gateways (docs/client-ip.md); counted in svcgate_client_ip_no_return_total",
                            slots_.service_name(sp.slot)));
}

}  // namespace svcgate::ctl
