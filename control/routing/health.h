// The gateway's health, as kube-proxy shows its own and as routers and load balancers probe it.
//
//   live     the workers make progress (each passed a quiescent state within kLiveSeconds) and a
//            config is published: /livez 200.
//   healthy  live, every port's link up, and not draining: /healthz 200, the addresses are
//            announced (announce.h).
//   draining svcgatectl drain: /healthz 503 and the announcements withdrawn while the flows
//            already here are served; the daemon exits once no connection is left (and at
//            least kDrainMinSeconds after the withdrawal) or the drain's deadline passes. svcgatectl undrain reverses
//            it.
//
// kube-proxy's healthCheckNodePort: for each LoadBalancer Service under externalTrafficPolicy
// Local that has one, an HTTP listener on that port (every address of the namespace, so the
// node IPs on the host interfaces: the dataplane hands such traffic to the kernel) answering 200
// with the count of ready local endpoints, 503 with none (or while the gateway is not healthy),
// with kube-proxy's JSON body.
//
// Runs on: the control thread (HealthState is written there under the daemon's lock) and the
// HTTP servers' threads (they read it under the lock).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/base/status.h"
#include "control/config/config_model.h"

namespace httplib {
class Server;
}

namespace svcgate::ctl {

struct HealthState {
    static constexpr double kLiveSeconds = 5;
    // A drain ends on no connection left no sooner than this after it began: the withdrawal
    // reaches the routers (the routing daemon reads the table at once, BGP sends the update, the
    // routers reprogram their ECMP sets) and connections that raced it are counted.
    static constexpr double kDrainMinSeconds = 3;
    bool live = false;
    bool ports_up = false;
    bool healthy = false;
    bool draining = false;
    bool synced = true;      // replicating (sync.h): the peers' flows are here
    bool api_synced = true;  // following the API (control/kube/): every kind listed once
    // and its changes are published: none has waited longer than KubeApi::stale_after_seconds()
    bool api_fresh = true;
    double drain_started_unix = 0, drain_deadline_unix = 0;
    uint32_t connections_left = 0;  // while draining, counted once a second
    double last_update_unix = 0;    // the config in service was published then
    std::string announce_error;     // the last failure writing the announcement table
    // Active health checks (control/probe/): endpoints checked, and of them failing. Every one
    // failing is said in /healthz's body, and the gateway stays healthy: the cluster may be down,
    // not the gateway, and its peers would see the same.
    size_t endpoints_checked = 0, endpoints_down = 0;
    std::vector<std::string> announced;
};

// kube-proxy's /healthz and /livez: status code and JSON body.
std::pair<int, std::string> healthz_answer(const HealthState& h, double now_unix, bool livez);

struct HealthCheckPort {
    uint16_t port = 0;
    std::string ns, name;
    unsigned local_endpoints = 0;
};
// Every healthCheckNodePort of `cfg` that kube-proxy would serve (LoadBalancers under policy
// Local; it ignores the field elsewhere) with its Service's ready local endpoints.
std::vector<HealthCheckPort> health_check_ports(const Config& cfg);
// kube-proxy's answer on a healthCheckNodePort.
std::pair<int, std::string> health_check_answer(const HealthCheckPort& p, bool healthy);

// The healthCheckNodePort listeners, following reloads. Each answer reads `health` under `mu`
// (the daemon's lock, which guards both).
class HealthCheckServers {
public:
    HealthCheckServers(std::mutex& mu, const HealthState& health);
    ~HealthCheckServers();
    // Opens listeners for new ports, closes those of ports gone. A failure lists every port that
    // failed, one line each: the gateway runs on without that listener.
    Status update(const std::vector<HealthCheckPort>& ports);
    // The port's current answer data (under the daemon's lock).
    const std::map<uint16_t, HealthCheckPort>& ports() const { return ports_; }

private:
    struct Listener {
        std::unique_ptr<httplib::Server> server;
        std::thread thread;
    };
    void stop(Listener& l);
    std::mutex& mu_;
    const HealthState& health_;
    std::map<uint16_t, HealthCheckPort> ports_;  // guarded by mu_
    std::map<uint16_t, Listener> listeners_;
};

}  // namespace svcgate::ctl
