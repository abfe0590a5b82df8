// The endpoints failing their Service's health checks, as the snapshot builder takes them: the
// prober (control/probe/) writes the view, the publisher hands it to every build, so a reload and
// a health transition publish alike. An endpoint in the view stays listed (its flows keep it, as
// kube-proxy keeps connections on a terminating endpoint) but is neither ready nor serving
// (EndpointCond kUnhealthy); under on_failure: reset it is listed as gone to the post-publish
// sweep too (kEvicted), so its TCP flows are answered with RST and its datagram flows removed.
// What the Service's check says (on_failure, all_down) is the builder's to apply, from the config
// it publishes.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>

#include "control/base/address.h"
#include "dataplane/base/types.h"

namespace svcgate::ctl {

struct EndpointHealthView {
    // key(service, address) of each failing endpoint.
    std::unordered_set<std::string> down;

    // "namespace/name address".
    static std::string key(const std::string& service, const dp::IpAddr& ip) { return service + " " + format_ip(ip); }
    bool failing(const std::string& service, const dp::IpAddr& ip) const {
        return !down.empty() && down.count(key(service, ip)) != 0;
    }
};

using EndpointHealthPtr = std::shared_ptr<const EndpointHealthView>;

}  // namespace svcgate::ctl
