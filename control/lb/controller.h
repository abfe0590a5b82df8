// The cluster's load balancer (docs/load-balancer.md): from the Services the API client holds
// (control/kube/kube_api.h), the gateway that holds the Lease (election.h) decides each managed
// Service's addresses with the allocator (allocator.h) and writes them: a merge PATCH of the
// Service's status subresource, conditional on its resourceVersion (a 409 reads the object again
// and decides again), carrying status.loadBalancer.ingress[] = {ip, ipMode: VIP} and the pool in
// the annotation svcgate.io/ip-allocated-from-pool, at most write_qps a second (burst
// write_burst). Events on the Service for what a user must see (IPAllocated, AllocationFailed,
// ClearAssignment), each posted once per decision, through a bucket of their own. The other
// gateways write nothing: they re-learn the addresses from status only, so that their counts
// are true and a takeover starts warm.
//
// A pass runs when a Service asks for something else, is added or removed, or carries a status
// this gateway did not decide (not on the echo of its own write), when a Namespace's labels, the
// config or the role change, or after a refused write; at most one per kMinPass. Its order: give
// back what deleted or no longer managed Services held; clear the status of Services this gateway
// assigned that are no longer LoadBalancers; re-learn every address in status that still fits;
// then decide, Services that have addresses in status first, then the rest, oldest first in each
// (so a restart or a pool edit moves only what no longer fits, and pending Services get freed
// addresses oldest first).
//
// Runs on: a thread of its own, plus the elector's; start/stop/set_config on the control thread;
// status and metrics from any thread (under mu_).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/config/config_model.h"
#include "control/kube/api_client.h"
#include "control/kube/kube_api.h"
#include "control/lb/allocator.h"
#include "control/lb/election.h"
#include "control/lb/lb_report.h"

namespace svcgate::ctl {
class MetricsText;
}  // namespace svcgate::ctl

namespace svcgate::ctl::lb {

// What a status write came to (svcgate_lb_status_writes_total{result}): 200, 409, 404, or
// anything else (another status, no answer).
#define SVCGATE_LB_WRITE_RESULTS(X) X(ok, "ok") X(conflict, "conflict") X(not_found, "not_found") X(error, "error")
enum class WriteResult : uint8_t { SVCGATE_LB_WRITE_RESULTS(SVCGATE_ENUM_ID) };
inline constexpr std::array kWriteResultNames{SVCGATE_LB_WRITE_RESULTS(SVCGATE_ENUM_NAME)};

// client-go's token bucket (flowcontrol.NewTokenBucketRateLimiter): `burst` at once, then `qps`.
class TokenBucket {
public:
    TokenBucket(double qps, double burst) { set(qps, burst); }
    void set(double qps, double burst);
    bool take(std::chrono::steady_clock::time_point now);
    // How long until take() can succeed.
    std::chrono::milliseconds wait(std::chrono::steady_clock::time_point now) const;

private:
    void refill(std::chrono::steady_clock::time_point now);
    double qps_ = 1, burst_ = 1, tokens_ = 1;
    std::chrono::steady_clock::time_point last_{};
};

class Controller {
public:
    Controller(const LoadBalancerConfig& cfg, kube::KubeApi& api, std::string identity);
    ~Controller();
    Controller(const Controller&) = delete;
    Controller& operator=(const Controller&) = delete;

    void start();
    void stop();  // the Lease is released
    // A reload: pools, class and write rates take effect at the next pass.
    void set_config(const LoadBalancerConfig& cfg);

    report::LoadBalancer status() const;
    void metrics(MetricsText& m) const;

    // "<node name or host name>_<random>", as client-go's hostname + "_" + a UUID.
    static std::string identity_for(const std::string& node_name);

private:
    struct Want {
        std::string key, ns, name, version;
        std::vector<IpAddr> ips;  // none: clear
        std::string pool;
    };
    struct Event {
        std::string ns, name, uid, version, type, reason, message;
    };

    void run();
    void pass(bool writer);
    void decide(const LbService& s, const NamespaceLabels& ns);
    // The Services as the API client holds them now (remember(): or as the server answered since);
    // `changed` gets the keys added, removed or of a new version that asks for something else or
    // whose status is not what this gateway decided.
    std::vector<const LbService*> views(std::set<std::string>& changed);
    NamespaceLabels namespaces() const;
    void want(const LbService& s, std::vector<IpAddr> ips, std::string pool);
    bool event(const LbService& s, const char* type, const char* reason, std::string message);  // false: posted already
    void write_one();
    void post_event();
    void refetch(const Want& w);  // after a 409: the object as it is now, for the next pass
    void remember(const std::string& key, const std::string& body);

    kube::KubeApi& api_;
    Elector elector_;
    kube::ApiClient client_;

    mutable std::mutex mu_;  // cfg_, report_ and the counters below
    LoadBalancerConfig cfg_;
    uint64_t cfg_generation_ = 0;
    report::LoadBalancer report_;
    std::map<std::string, uint64_t> allocations_;  // by pool
    std::array<uint64_t, kFailureNames.size()> failures_{};
    std::array<uint64_t, kWriteResultNames.size()> write_results_{};
    std::map<std::string, uint64_t> events_by_reason_;

    // The controller thread's own.
    LoadBalancerConfig running_;
    Allocator alloc_;
    // key -> (the version the watch holds, the view: of that version, or of the server's answer to
    // a write or a read made since, until the watch holds a newer one)
    std::map<std::string, std::pair<std::string, LbService>> cache_;
    uint64_t services_seq_ = 0;  // cache_ holds the Services' changes up to here (KubeApi::changes_since)
    std::deque<Want> queue_;
    std::map<std::string, std::map<std::string, std::string>> last_event_;  // key -> reason -> message posted
    std::deque<Event> events_;
    TokenBucket writes_{20, 30}, event_tokens_{20, 30};
    std::chrono::steady_clock::time_point retry_at_{};  // after a failed write
    std::chrono::milliseconds backoff_{0};
    bool dirty_ = true;  // a full pass is due whatever changed (config, role, a refused write)
    NamespaceLabels last_ns_;

    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

}  // namespace svcgate::ctl::lb
