// Active health checks (a Service's health_check, HealthCheckConfig): the gateway checks each
// endpoint address itself and the endpoints failing them are published as neither ready nor
// serving (control/snapshot/endpoint_health.h).
//
// Where the probes come from: the kernel's sockets over the host interface of the port the
// dataplane reaches the endpoint by (ports[].host_interface), from that port's address, with a
// source port of 512-1023, below every masquerade port (cluster.masquerade_ports starts at 1024 at
// the lowest): what the kernel sends there leaves by the port without the pipeline, so it never
// makes a flow, and the endpoint's answer, to the gateway's own address and a port no flow can
// hold, is handed back to the kernel by the host path. The kernel finds the next hop through the
// dataplane's own routes, mirrored into its main table (host_routes) at a metric of their own.
// A TCP check ends with RST (no TIME_WAIT to hold its port), as HAProxy's does.
//
// Checks are spread over the interval (each endpoint at its own phase, a hash of its name), at
// most kMaxInFlight at a time; one that waits for room starts late, it is never skipped.
//
// Runs on: a thread of its own; its methods on the control thread and the views' threads.
#pragma once

#include <atomic>
#include <bitset>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control/base/histogram.h"
#include "control/base/metrics_text.h"
#include "control/base/netlink.h"
#include "control/config/config_model.h"
#include "control/probe/health_state.h"
#include "control/snapshot/endpoint_health.h"

namespace svcgate::ctl {

// One endpoint address of one Service, as the prober checks it.
struct ProbeTarget {
    std::string service;  // namespace/name
    IpAddr ip;
    uint16_t port = 0;  // the check's port
    HealthCheckConfig check;
    IpAddr source;          // the port's address towards it
    std::string device;     // the host interface the probes leave by
    std::string unchecked;  // why it cannot be checked ("" when it can): it is then left up
    std::string key() const { return EndpointHealthView::key(service, ip); }
};

// Every endpoint address of every Service with a health check, once per Service.
std::vector<ProbeTarget> probe_targets(const Config& cfg);

// A route of the dataplane's through a port with a host interface, as the kernel gets it.
struct HostRoute {
    IpCidr prefix;
    IpAddr via;
    std::string device;
    bool operator==(const HostRoute&) const = default;
};
// The routes the probes need: none when no Service has a health check.
std::vector<HostRoute> host_routes(const Config& cfg);

// The routes of host_routes() in the kernel's main table, at kHostRouteMetric (so that any route of
// the operator's to the same prefix wins), kept equal to a set; removed when it goes.
class HostRouteMirror {
public:
    static constexpr uint32_t kHostRouteMetric = 4242;
    ~HostRouteMirror();
    // Every failure, one line each (the rest is still done).
    Status sync(const std::vector<HostRoute>& want);

private:
    Netlink nl_;
    std::vector<HostRoute> have_;
};

// svcgatectl endpoints' health columns.
struct EndpointHealthRow {
    std::string state;  // up, down, unchecked
    std::string check;  // describe(HealthCheckConfig)
    double since = 0;
    std::string last_failure;
    double last_failure_at = 0;
};

class Prober {
public:
    static constexpr unsigned kMaxInFlight = 256;
    static constexpr uint16_t kFirstPort = 512, kLastPort = 1023;

    Prober();
    ~Prober();
    Prober(const Prober&) = delete;
    Prober& operator=(const Prober&) = delete;

    // After a reload: what to check. An endpoint checked before keeps its state and history.
    void set_targets(std::vector<ProbeTarget> targets);
    // Counts transitions: the control loop publishes when it moves.
    uint64_t changes() const { return changes_.load(std::memory_order_acquire); }
    // The endpoints to publish as failing.
    EndpointHealthPtr view() const;
    // By EndpointHealthView::key; none for an endpoint not checked.
    std::optional<EndpointHealthRow> row(const std::string& key) const;
    // Endpoints checked, and of them down: /healthz says when every one is.
    std::pair<size_t, size_t> checked_down() const;
    void metrics(MetricsText& m) const;

private:
    struct Slot;
    struct Probe;
    void run();
    void start_due(std::vector<Probe>& flying);
    bool advance(Probe& p, short revents, bool expired);
    void finish(Probe& p, bool ok, const std::string& failure);
    void rebuild_view() const;  // under mu_

    mutable std::mutex mu_;
    std::vector<Slot> slots_;
    std::unordered_map<std::string, size_t> index_;  // slots_ by ProbeTarget::key()
    uint64_t epoch_ = 0;                             // set_targets: probes of an older epoch are dropped
    mutable EndpointHealthPtr view_;
    mutable bool view_dirty_ = true;
    Histogram latency_{Histogram::exponential(0.0005, 2, 14)};
    uint64_t results_[8] = {};
    uint64_t to_up_ = 0, to_down_ = 0;
    std::atomic<uint64_t> changes_{0};
    // The thread's own: when each checked endpoint is due (a min-heap, rebuilt for a new epoch),
    // the source ports in use.
    std::vector<std::pair<std::chrono::steady_clock::time_point, size_t>> heap_;
    uint64_t heap_epoch_ = ~uint64_t{0};
    std::vector<ProbeTarget> targets_starting_;
    std::bitset<kLastPort - kFirstPort + 1> ports_in_use_;
    uint16_t port_cursor_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace svcgate::ctl
