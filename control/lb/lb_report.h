// svcgatectl status's kubernetes.load_balancer (docs/load-balancer.md): this gateway's role, the
// Lease as last seen, the pools' counts, and what the writer decided and wrote. The controller
// fills it (controller.h); views.h carries it in the status report, svcgatectl renders it.
//
// Runs on: any thread (plain data).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/base/report_members.h"

namespace svcgate::ctl::report {

struct LbFamily {
    uint64_t assigned = 0, available = 0;
};
void members(Of<LbFamily> auto& r, auto&& f) { f("assigned", r.assigned), f("available", r.available); }

// One pool; a family it has no address of is left out.
struct LbPool {
    std::string name;
    std::optional<LbFamily> ipv4, ipv6;
};
void members(Of<LbPool> auto& r, auto&& f) { f("name", r.name), f("ipv4", r.ipv4, omit), f("ipv6", r.ipv6, omit); }

struct LbLease {
    std::string ns, name, holder, renewed;  // renewed: the Lease's spec.renewTime as written
    uint64_t transitions = 0;
};
void members(Of<LbLease> auto& r, auto&& f) {
    f("namespace", r.ns), f("name", r.name), f("holder", r.holder), f("renewed", r.renewed),
        f("transitions", r.transitions);
}

struct LoadBalancer {
    std::string role = "off";  // off, writer or reader
    std::string identity, lb_class;
    bool default_class = true;
    LbLease lease;
    bool pools_configured = false;  // no pools key: nothing assigned, nothing written
    std::vector<LbPool> pools;
    uint64_t services = 0, assigned = 0, pending = 0;  // the Services it assigns for
    uint64_t writes = 0, conflicts = 0, write_errors = 0, queued_writes = 0;
    uint64_t events = 0, events_dropped = 0;
    std::string last_error;
};
void members(Of<LoadBalancer> auto& r, auto&& f) {
    f("role", r.role), f("identity", r.identity), f("class", r.lb_class), f("default_class", r.default_class),
        f("lease", r.lease), f("pools_configured", r.pools_configured), f("pools", r.pools), f("services", r.services),
        f("assigned", r.assigned), f("pending", r.pending), f("writes", r.writes), f("conflicts", r.conflicts),
        f("write_errors", r.write_errors), f("queued_writes", r.queued_writes), f("events", r.events),
        f("events_dropped", r.events_dropped), f("last_error", r.last_error);
}

}  // namespace svcgate::ctl::report
