// Prometheus text, one collector per feature: each writes its metric families (HELP, TYPE, the
// samples) from plain values, so each is tested on its own text; /metrics is their concatenation
// (metrics.cpp gathers the values from the running daemon, under its lock).
//
// Runs on: any thread (pure functions).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "control/base/histogram.h"
#include "control/daemon/daemon_state.h"
#include "control/ha/sync.h"
#include "control/snapshot/slot_registry.h"
#include "dataplane/lb/snapshot.h"
#include "dataplane/pipeline/counters.h"

namespace svcgate::ctl {

// The text exposition format: a family's HELP and TYPE, then its samples.
class MetricsText {
public:
    void family(std::string_view name, std::string_view type, std::string_view help);
    void sample(std::string_view name, std::string_view labels, uint64_t value);
    void sample(std::string_view name, std::string_view labels, int64_t value);
    void sample(std::string_view name, std::string_view labels, double value, int decimals);
    // A whole histogram family: HELP, TYPE, the buckets, +Inf, sum and count.
    void histogram(std::string_view name, std::string_view help, const Histogram& h);
    std::string& str() { return out_; }

private:
    std::string out_;
};

// Service ports and endpoints: packets, bytes, live flows per endpoint.
void collect_services(MetricsText& m, const dp::ServiceSnapshot& s, const SlotRegistry& slots);

// The flow tables: live flows and capacity by family, flows created and early-dropped.
struct FlowGauges {
    uint64_t live4 = 0, capacity4 = 0;
    bool has_v6 = false;
    uint64_t live6 = 0, capacity6 = 0;
};
void collect_flows(MetricsText& m, const FlowGauges& g, const dp::WorkerCounters& t);

// Fragments by outcome; the hold's gauges.
void collect_fragments(MetricsText& m, const dp::WorkerCounters& t, uint64_t held, uint64_t datagrams);

// Verdicts, drops and rejects by reason; packet buffers in use.
void collect_verdicts(MetricsText& m, const dp::WorkerCounters& t, uint64_t mbufs_in_use);

// Ports: packets per direction (the NIC's counters) and link state.
struct PortSample {
    std::string name;
    uint64_t rx = 0, tx = 0;
    bool link_up = false;
};
void collect_ports(MetricsText& m, std::span<const PortSample> ports);

// The host path and health: punted packets, the kernel's frames out, healthy, draining, the
// prefixes announced.
void collect_host_path(MetricsText& m, const dp::WorkerCounters& t, const HealthState& h);

// Flow replication (ha:): readiness, peers, records, lag, replicas, takeovers, drops by reason.
void collect_sync(MetricsText& m, const SyncStatus& y, const dp::WorkerCounters& t);

// Reloads (kube-proxy's sync_proxy_rules_* under svcgate's names), the generation in service and
// the build.
void collect_reload(MetricsText& m, const ReloadStatus& r, uint64_t generation, std::string_view version,
                    std::string_view dpdk);

}  // namespace svcgate::ctl
