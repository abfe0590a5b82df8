// Prometheus text for the dataplane's own counters: the flow tables, fragments, verdicts and
// drops, the ports. Every feature has its collector beside its code, each writing its metric
// families (HELP, TYPE, the samples) from plain values and tested on its own text: these here
// (the dataplane links no control code), the Services' (control/snapshot/service_metrics.h), the
// host path's and health's (control/routing/health_metrics.h), replication's
// (control/ha/sync_metrics.h), the reloads' (control/state/reload_metrics.h). /metrics is their
// concatenation (metrics.cpp gathers the values from the running daemon, under its lock).
//
// Runs on: any thread (pure functions).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "control/base/metrics_text.h"
#include "control/state/daemon_state.h"
#include "dataplane/packet/counters.h"

namespace svcgate::ctl {

// The flow tables: live flows and capacity by family, flows created and early-dropped.
struct FlowGauges {
    uint64_t live4 = 0, capacity4 = 0;
    bool has_v6 = false;
    uint64_t live6 = 0, capacity6 = 0;
    uint64_t index_moves4 = 0, index_moves6 = 0;  // entries moved to make room (flow_table.h)
};
void collect_flows(MetricsText& m, const FlowGauges& g, const dp::WorkerCounters& t);

// Fragments by outcome; the hold's gauges.
void collect_fragments(MetricsText& m, const dp::WorkerCounters& t, uint64_t held, uint64_t datagrams);

// Verdicts, drops and rejects by reason; packet buffers in use.
void collect_verdicts(MetricsText& m, const dp::WorkerCounters& t, uint64_t mbufs_in_use);

// dataplane.latency_sampling: the sampled packets' time inside the gateway, a histogram in
// seconds with a bucket per octave from 4 ns.
void collect_latency(MetricsText& m, const dp::LatencyHistogram& h);

// Ports: packets per direction (the NIC's counters) and link state.
struct PortSample {
    std::string name;
    uint64_t rx = 0, tx = 0;
    bool link_up = false;
    std::vector<BondMemberView> members;  // a bond's
};
void collect_ports(MetricsText& m, std::span<const PortSample> ports);

}  // namespace svcgate::ctl
