#include "dataplane/lb/snapshot.h"

#include <string_view>

namespace svcgate::dp {

const char* scheduler_name(Scheduler s) noexcept {
    switch (s) {
        case Scheduler::random:
            return "random";
        case Scheduler::maglev:
            return "maglev";
        case Scheduler::rr:
            return "rr";
        case Scheduler::lc:
            return "lc";
        case Scheduler::sh:
            return "sh";
        case Scheduler::dh:
            return "dh";
        case Scheduler::sed:
            return "sed";
        case Scheduler::nq:
            return "nq";
    }
    return "?";
}

std::optional<Scheduler> scheduler_from_name(std::string_view s) noexcept {
    for (auto v : {Scheduler::random, Scheduler::maglev, Scheduler::rr, Scheduler::lc, Scheduler::sh, Scheduler::dh,
                   Scheduler::sed, Scheduler::nq})
        if (s == scheduler_name(v)) return v;
    return std::nullopt;
}

const char* addr_role_name(AddrRole r) noexcept {
    switch (r) {
        case AddrRole::cluster_ip:
            return "cluster-ip";
        case AddrRole::external_ip:
            return "external-ip";
        case AddrRole::lb_ip:
            return "load-balancer-ip";
        case AddrRole::node_port:
            return "node-port";
    }
    return "?";
}

}  // namespace svcgate::dp
