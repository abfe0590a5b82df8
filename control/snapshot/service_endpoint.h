// A Service port's endpoint as the control plane keys it across snapshots: the service port's
// stable id and the endpoint's address and port (EndpointKey::word()). A NAT flow's is its
// service id and the source of its reply tuple (key[1]: the endpoint answers). The sweep after a
// reload and the flow importer (state file, replication) look flows up by it.
//
// Runs on: any thread (a value type).
#pragma once

#include <cstdint>
#include <functional>

#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

struct ServiceEndpoint {
    uint32_t svc = 0;
    uint64_t ep = 0;  // EndpointKey::word()
    bool operator==(const ServiceEndpoint&) const = default;

    // The endpoint a NAT flow (a record, or a record being imported) is bound to.
    template <typename Flow>
    static ServiceEndpoint of_flow(const Flow& f) noexcept {
        return {f.svc_id, dp::EndpointKey{dp::IpAddr::of(f.key[1].src), f.key[1].sport}.word()};
    }
};

struct ServiceEndpointHash {
    size_t operator()(const ServiceEndpoint& k) const noexcept {
        return std::hash<uint64_t>()(k.ep * 0x9e3779b97f4a7c15ull ^ k.svc);
    }
};

}  // namespace svcgate::ctl
