// What the running daemon holds, for its control loop and for the views (svcgatectl replies,
// Prometheus text, telemetry). Internal to the daemon.
//
// Runs on: the control thread; the telemetry thread reads it under `mu`.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config_model.h"
#include "flow_table.h"
#include "worker.h"

namespace svcgate::ctl {

struct PortSetup {
    uint16_t id = 0;
    uint16_t rxq = 1, txq = 1;
};

struct ReloadStatus {
    uint64_t ok = 0, failed = 0;
    bool last_ok = true;
    std::string last_error;    // the refused config's errors
    double last_seconds = 0;   // last successful reload: read → published
    std::string last_trigger;  // SIGHUP, file change, svcgatectl
};

struct DaemonState {
    std::mutex mu;  // held by the control thread while it swaps snapshots; by telemetry readers
    std::string config_path;
    Config cfg;  // the running config
    std::unique_ptr<dp::WorkerShared> shared;
    std::vector<PortSetup> ports;
    std::unique_ptr<dp::FlowTable> flows;
    std::vector<std::unique_ptr<dp::Worker>> workers;
    std::unique_ptr<dp::ServiceSnapshot> snap;
    uint32_t generation = 1;
    ReloadStatus reload;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    // Per-service and per-endpoint counters of snapshots already replaced, so that the exported
    // counters never go backwards: key "ns/name:port/PROTO" and that + " ip:port".
    std::map<std::string, dp::SvcCounters> carried;
};

dp::WorkerCounters sum_counters(const std::vector<std::unique_ptr<dp::Worker>>& workers);

// Service port i's packets and bytes: every worker of the current snapshot plus what earlier
// snapshots counted.
dp::SvcCounters service_total(const DaemonState& st, size_t i);

// Folds the current snapshot's counters into `carried` (before the snapshot is freed).
void carry_counters(DaemonState& st);

// svcgatectl's commands: the request line in, the reply out ("error: ..." on a bad request).
// `reload` is how the `reload` command reaches the control loop.
std::string handle_command(DaemonState& st, const std::string& line, const std::function<std::string()>& reload);

// Prometheus text exposition format.
std::string render_metrics(DaemonState& st);

}  // namespace svcgate::ctl
