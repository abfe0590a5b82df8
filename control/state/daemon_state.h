// What the running daemon holds, for its control loop and for the views (svcgatectl replies,
// Prometheus text, telemetry). The DPDK resources themselves are owned by the daemon's Runtime
// (daemon.cpp); this names them. Here, under api/ (which reads it) and daemon/ (which writes it).
//
// Runs on: the control thread; the telemetry and metrics threads read it under `mu`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <rte_mempool.h>

#include "control/base/histogram.h"
#include "control/config/config_model.h"
#include "dataplane/flow/flow_table.h"
#include "control/routing/health.h"
#include "control/snapshot/publisher.h"
#include "dataplane/pipeline/worker.h"

namespace svcgate::ctl {

class Syncer;
namespace kube {
class KubeApi;
}
namespace lb {
class Controller;
}
class Prober;
class IpfixExporter;

// A member link of a bond port, as the bonding driver sees it now (control/daemon/bond.h). LACP's
// states are the 802.1AX bits: 0x01 active, 0x02 short timeout, 0x04 aggregatable, 0x08 in sync,
// 0x10 collecting, 0x20 distributing, 0x40 defaulted, 0x80 expired.
struct BondMemberView {
    std::string device;
    bool link = false;
    bool active = false;  // carries traffic: distributing (802.3ad), or the active member (active-backup)
    bool lacp = false;    // the actor and partner states below are LACP's
    uint8_t actor_state = 0, partner_state = 0;
};

struct PortView {
    std::string name, device;
    uint16_t id = 0;        // the DPDK port id of its device
    uint16_t index = 0;     // its port index (config order)
    uint16_t vlan = 0;      // 0: untagged
    bool on_trunk = false;  // its device has VLAN ports: its packets are counted by the workers
    uint16_t rxq = 1, txq = 1;
    std::string rss_steering;  // Port::steering_note(): masquerade ports chosen for RSS, or why not
    bool bond = false;         // its device is a bond (dataplane.bonds[]): DaemonState::bond_members
};

// What one reload did: published (ok) or refused (the running config stays), and the line it
// logged, which svcgatectl shows.
struct ReloadOutcome {
    bool ok = false;
    std::string message;
};

struct ReloadStatus {
    uint64_t ok = 0, failed = 0;
    bool last_ok = true;
    std::string last_error;    // the refused config's errors
    double last_seconds = 0;   // last successful reload: read → published
    std::string last_trigger;  // SIGHUP, file change, svcgatectl
    double last_ok_unix = 0;   // when the config in service was published (the first one too), Unix seconds
    // Durations of successful reloads, kube-proxy's buckets (sync_proxy_rules_duration_seconds:
    // 1 ms doubling, 15 buckets).
    Histogram durations{Histogram::exponential(0.001, 2, 15)};

    void observe(double seconds, double now_unix) noexcept {
        durations.observe(seconds);
        last_ok_unix = now_unix;
    }
};

struct DaemonState {
    // Held by the publisher while it swaps snapshots and gives back slots, by the control thread
    // while it swaps the config and the reload status, and by every view on another thread.
    std::mutex mu;
    std::string config_path;
    Config cfg;  // the running config
    std::vector<PortView> ports;
    // A bond port's members now, by the DPDK port id of the bond (set by the daemon, which links
    // the bonding driver).
    std::function<std::vector<BondMemberView>(uint16_t)> bond_members;
    rte_mempool* pool = nullptr;
    dp::FlowTable* flows = nullptr;
    dp::FlowTable6* flows6 = nullptr;
    dp::FragTable* frags = nullptr;
    // Both families' tables together.
    uint32_t flows_live() const { return flows->live_total() + (flows6 ? flows6->live_total() : 0); }
    uint32_t flows_capacity() const { return flows->capacity() + (flows6 ? flows6->capacity() : 0); }
    std::vector<const dp::Worker*> workers;
    const Publisher* publisher = nullptr;
    const Syncer* sync = nullptr;    // flow replication (ha:), null when off
    kube::KubeApi* kube = nullptr;   // following the API server (kubernetes.api), null when off
    lb::Controller* lb = nullptr;    // the cluster's load balancer (kubernetes.load_balancer), null when off
    const Prober* prober = nullptr;  // the active health checks (control/probe/), null before the workers run
    IpfixExporter* ipfix = nullptr;  // NAT events to IPFIX collectors (export.ipfix), null when off
    ReloadStatus reload;
    HealthState health;  // the control loop's view (health.h)
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

    const dp::ServiceSnapshot& snap() const { return *publisher->current(); }
    const SlotRegistry& slots() const { return publisher->slots(); }
    uint32_t generation() const { return publisher->generation(); }
};

dp::WorkerCounters sum_counters(const DaemonState& st);
// Every worker's sampled time inside the gateway (dataplane.latency_sampling).
dp::LatencyHistogram sum_latency(const DaemonState& st);

}  // namespace svcgate::ctl
