// The endpoints failing their Service's health checks, as the snapshot builder takes them: the
// prober (control/probe/) writes the view, the publisher hands it to every build, so a reload and
// a health transition publish alike. An endpoint in the view stays listed (its flows keep it, as
// kube-proxy keeps connections on a terminating endpoint) but is neither ready nor serving
// (EndpointCond kUnhealthy); one marked `evict` is listed as gone to the post-publish sweep too,
// so its TCP flows are answered with RST and its datagram flows removed (on_failure: reset).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "control/base/address.h"
#include "dataplane/base/types.h"

namespace svcgate::ctl {

struct EndpointHealthView {
    // key(service, address) → evict.
    std::unordered_map<std::string, bool> down;

    // "namespace/name address".
    static std::string key(const std::string& service, const dp::IpAddr& ip) { return service + " " + format_ip(ip); }
    // Whether the endpoint fails, and whether its flows are ended; none when it serves.
    std::optional<bool> find(const std::string& service, const dp::IpAddr& ip) const {
        if (down.empty()) return std::nullopt;
        const auto it = down.find(key(service, ip));
        return it == down.end() ? std::nullopt : std::optional(it->second);
    }
};

using EndpointHealthPtr = std::shared_ptr<const EndpointHealthView>;

}  // namespace svcgate::ctl
