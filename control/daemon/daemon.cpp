// The daemon's start and stop: the config loaded and checked, the runtime built (runtime.h), the
// first config published, the flows of the last orderly stop restored (state_file.h), the sync
// thread started, the control loop run (control_loop.h); then the workers stopped, the flows
// written, the counters printed.
#include "control/daemon/daemon.h"

#include <unistd.h>

#include <chrono>

#include <fmt/format.h>
#include <rte_ethdev.h>

#include "control/api/commands.h"
#include "control/base/clock.h"
#include "control/base/log.h"
#include "control/config/kube_objects.h"
#include "control/config/yaml_config.h"
#include "control/daemon/bond.h"
#include "control/daemon/control_loop.h"
#include "control/state/daemon_state.h"
#include "control/daemon/host_interface.h"
#include "control/daemon/resources.h"
#include "control/daemon/runtime.h"
#include "control/ha/state_file.h"
#include "control/ha/sync.h"
#include "control/kube/kube_api.h"
#include "control/lb/controller.h"
#include "control/snapshot/publisher.h"
#include "control/snapshot/snapshot_builder.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

void print_summary(const DaemonState& st) {
    const WorkerCounters t = sum_counters(st);
    fmt::print("svcgate: {} packets in ({} bytes), {} out; flows: {} created, {} expired, {} live\n", t.rx_packets,
               t.rx_bytes, t.tx_packets, t.flows_created, t.flows_expired, st.flows_live());
    for (unsigned v = 0; v < kVerdicts; ++v)
        if (t.verdicts[v]) fmt::print("  verdict {:<8} {}\n", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
    for (unsigned r = 1; r < kDropReasons; ++r) {
        if (t.drops[r]) fmt::print("  drop    {:<26} {}\n", drop_reason_name(static_cast<DropReason>(r)), t.drops[r]);
        if (t.rejects[r])
            fmt::print("  reject  {:<26} {}\n", drop_reason_name(static_cast<DropReason>(r)), t.rejects[r]);
    }
    for (const PortView& p : st.ports) {
        const report::PortCounters c = port_counters(st, p);
        fmt::print("  port {:<8} rx {} tx {} missed {} rx-errors {} tx-errors {}\n", p.name, c.rx_packets, c.tx_packets,
                   c.rx_missed, c.rx_errors, c.tx_errors);
    }
}

// The state file's directory must be there and writable: found at --check and at start, not when
// the flows are to be written at the stop.
std::vector<std::string> state_file_problems(const Config& cfg) {
    const std::string& f = cfg.dataplane.state_file;
    if (f.empty()) return {};
    const std::string dir = f.find('/') == std::string::npos ? "." : f.substr(0, std::max<size_t>(f.rfind('/'), 1));
    if (access(dir.c_str(), W_OK | X_OK) == 0) return {};
    return {fmt::format("dataplane.flow_table.state_file {}: directory {} {}", f, dir,
                        access(dir.c_str(), F_OK) == 0 ? "is not writable" : "does not exist")};
}

// The flows of the last orderly stop, back in the tables before the workers run (control/ha/state_file.h).
void restore_flows(DaemonState& st, Runtime& rt, const WorkerShared& shared) {
    const std::string& path = st.cfg.dataplane.state_file;
    const auto t0 = std::chrono::steady_clock::now();
    FlowImporter importer(st.snap(), *shared.stats.load(), *rt.flows, rt.flows6.get(), st.cfg.dataplane.workers);
    RestoreResult r;
    const Status s = restore_flow_state(path, gateway_identity(st.cfg), st.cfg.dataplane.state_max_age, importer,
                                        flow_clock_now(), static_cast<uint64_t>(unix_now()), r);
    if (!s) {
        log_err(fmt::format("flow state {}: refused, starting without it: {}", path, s.error()));
        return;
    }
    if (!r.found) {
        log_info(fmt::format("flow state {}: none, starting with an empty flow table", path));
        return;
    }
    using O = FlowImporter::Outcome;
    auto n = [&r](O o) { return r.outcome[static_cast<unsigned>(o)]; };
    log_info(
        fmt::format("flow state {}: restored {} of {} flows written {} s ago in {:.0f} ms; left out: {} whose service "
                    "port or endpoint is gone, {} expired, {} already there, {} clashing, {} for want of room",
                    path, n(O::inserted), r.records, r.age,
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                    n(O::gone), n(O::expired), n(O::exists), n(O::clash), n(O::full)));
    for (size_t w = 0; w < rt.workers.size(); ++w)
        rt.workers[w]->set_snat_cursor(importer.snat_cursor(static_cast<uint16_t>(w)));
    if (!r.unlink_error.empty())
        log_warning(fmt::format("flow state {}: cannot remove it after reading: {}", path, r.unlink_error));
}

// Every live flow to the state file, the workers stopped.
void save_flows(const DaemonState& st, const Runtime& rt) {
    const std::string& path = st.cfg.dataplane.state_file;
    const auto t0 = std::chrono::steady_clock::now();
    uint32_t written = 0;
    if (Status s = save_flow_state(path, gateway_identity(st.cfg), *rt.flows, rt.flows6.get(), flow_clock_now(),
                                   static_cast<uint64_t>(unix_now()), written);
        !s) {
        log_err(fmt::format("flow state: not written: {}", s.error()));
        return;
    }
    log_info(fmt::format("flow state {}: wrote {} flows in {:.0f} ms", path, written,
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()));
}

}  // namespace

int check_config(const std::string& path) {
    try {
        Config cfg = load_config_file(path);
        for (const auto& w : cfg.warnings) fmt::print(stderr, "warning: {}\n", w.str());
        auto snap = build_snapshot(cfg, 1, nullptr, BuildMode::validate);  // no DPDK: nothing is started
        for (const ObjectIssue& i : snap->catalogue.object_issues)         // served without them, as at run time
            fmt::print(stderr, "warning: {}: {} [{}]\n", i.object, i.message, issue_reason_name(i.reason));
        auto problems = host_interface_problems(cfg);
        if (cfg.kube_api.enabled) {
            try {  // the kubeconfig read as at start; nothing is connected
                kube::KubeApi api(cfg.kube_api, cfg.cluster.node_name);
            } catch (const std::exception& e) {
                problems.push_back(fmt::format("kubernetes.api: {}", e.what()));
            }
        }
        for (std::string& m : state_file_problems(cfg)) problems.push_back(std::move(m));
        if (!problems.empty()) {
            for (const std::string& m : problems) fmt::print(stderr, "{}\n", m);
            fmt::print(stderr, "{}: {} error{}\n", path, problems.size(), problems.size() == 1 ? "" : "s");
            return 1;
        }
        fmt::print("{}: OK: {} service ports, {} endpoints, {} ports, {} routes", path, snap->services.size(),
                   snap->endpoints.size(), cfg.dataplane.ports.size(), cfg.dataplane.routes.size());
        if (!cfg.manifests.empty()) fmt::print("; Kubernetes: {}", kube_summary(cfg.kube));
        fmt::print("\n");
        return 0;
    } catch (const ConfigError& e) {
        for (const auto& w : e.warnings) fmt::print(stderr, "warning: {}\n", w.str());
        fmt::print(stderr, "{}\n{}: {} error{}\n", e.what(), path, e.issues.size(), e.issues.size() == 1 ? "" : "s");
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "{}: {}\n", path, e.what());
        return 1;
    }
}

namespace {

// The config, loaded and checked for what would keep the gateway from starting. False (logged) when
// it cannot start.
bool load_for_start(const std::string& path, DaemonState& st) {
    st.config_path = path;
    try {
        st.cfg = load_config_file(path, ObjectErrors::leave_out);
    } catch (const ConfigError& e) {
        for (const auto& w : e.warnings) log_warning(w.str());
        log_err(e.what());
        return false;
    }
    for (const auto& w : st.cfg.warnings) log_warning(w.str());
    for (const auto& i : st.cfg.left_out) log_warning("a manifest's object is left out: " + i.str());
    auto problems = host_interface_problems(st.cfg);
    for (std::string& m : state_file_problems(st.cfg)) problems.push_back(std::move(m));
    for (const std::string& m : problems) log_err(m);
    return problems.empty();
}

// The runtime built, the host interfaces' addresses set, and what the views read of it in `st`.
Status start_runtime(Runtime& rt, DaemonState& st, const std::vector<std::string>& eal_extra) {
    const DataplaneConfig& dpc = st.cfg.dataplane;
    if (Status s = build_runtime(rt, dpc, st.cfg.ha, st.cfg.ipfix, eal_extra); !s) return s;
    st.ipfix = rt.ipfix.get();
    if (Status s = sync_host_addresses(rt, st.cfg); !s) return s;
    for (size_t p = 0; p < rt.ports.size(); ++p)
        st.ports.push_back(PortView{.name = dpc.ports[p].name,
                                    .device = dpc.ports[p].device,
                                    .id = rt.ports[p].id(),
                                    .index = static_cast<uint16_t>(p),
                                    .vlan = dpc.ports[p].vlan,
                                    .on_trunk = rt.shared->port_vlans[p] != 0,
                                    .rxq = rt.ports[p].rx_queues(),
                                    .txq = rt.ports[p].tx_queues(),
                                    .rss_steering = rt.ports[p].steering_note(),
                                    .bond = bond_of(dpc, dpc.ports[p].device) != nullptr});
    st.bond_members = bond_members;
    st.pool = rt.pool.get();
    st.flows = rt.flows.get();
    st.flows6 = rt.flows6.get();
    st.frags = rt.frags.get();
    for (const auto& w : rt.workers) st.workers.push_back(w.get());
    return {};
}

// Where the publisher puts a snapshot and its counters, and how a reload's sweep hands a datagram
// flow to its owner for removal.
PublishTarget publish_target(Runtime& rt, DaemonState& st) {
    WorkerShared& shared = *rt.shared;
    return PublishTarget{
        .store = [&shared](const ServiceSnapshot* s) { shared.snapshot.store(s, std::memory_order_release); },
        .store_stats = [&shared](StatsTable* t) { shared.stats.store(t, std::memory_order_release); },
        .qsbr = rt.qsbr.get(),
        .flows = rt.flows.get(),
        .flows6 = rt.flows6.get(),
        // The owner removes it (a full ring leaves the rest to their timeout).
        .remove_dgram =
            [&shared](uint32_t id, uint8_t owner) {
                if (owner < shared.remove_rings.size())
                    rte_ring_sp_enqueue(shared.remove_rings[owner], reinterpret_cast<void*>(uintptr_t{id}));
            },
        .readers = &st.mu};
}

// Replicating (ha:): the sync thread, reading the tables as a QSBR reader and inserting replicas
// as their last owner.
Status start_sync(DaemonState& st, Runtime& rt) {
    if (!st.cfg.ha.enabled()) return {};
    const uint16_t workers = st.cfg.dataplane.workers;
    Syncer::Wiring w{.flows = rt.flows.get(),
                     .flows6 = rt.flows6.get(),
                     .owner = sync_owner(workers),
                     .workers = workers,
                     .rings = {},
                     .qsbr = rt.qsbr.get(),
                     .qsbr_id = sync_qsbr_id(workers),
                     .snapshot = &rt.shared->snapshot,
                     .stats = &rt.shared->stats,
                     .takeover = takeover_addresses(st.cfg)};
    for (const RingPtr& r : rt.sync_rings) w.rings.push_back(r.get());
    rt.sync = std::make_unique<Syncer>(st.cfg.ha, std::move(w));
    if (Status s = rt.sync->start(); !s) return s;
    st.sync = rt.sync.get();
    log_info(fmt::format("ha: replicating flows with {} peers; announcing once they have sent theirs",
                         st.cfg.ha.peers.size()));
    return {};
}

}  // namespace

int run_daemon(const DaemonOptions& opts) {
    DaemonState st;
    if (!load_for_start(opts.config, st)) return 1;
    // kubernetes.api: its kubeconfig read now (a bad one stops the start); it connects once the
    // workers run, and the gateway is not ready before every kind has listed.
    std::unique_ptr<kube::KubeApi> api;
    if (st.cfg.kube_api.enabled) {
        try {
            api = std::make_unique<kube::KubeApi>(st.cfg.kube_api, st.cfg.cluster.node_name,
                                                  st.cfg.load_balancer.enabled);
        } catch (const std::exception& e) {
            log_err(fmt::format("kubernetes.api: {}", e.what()));
            return 1;
        }
    }
    Runtime rt;
    if (Status s = start_runtime(rt, st, opts.eal_extra); !s) {
        log_err(s.error());
        log_info("stopping");
        return 1;
    }
    Publisher pub(st.cfg.dataplane.workers, publish_target(rt, st));
    try {
        pub.publish(st.cfg);
        st.reload.last_ok_unix = unix_now();  // the config in service since now (kube-proxy's first sync)
    } catch (const std::exception& e) {
        log_err(e.what());
        return 1;
    }
    st.publisher = &pub;
    if (!st.cfg.dataplane.state_file.empty()) {
        try {
            restore_flows(st, rt, *rt.shared);
        } catch (const std::exception& e) {  // out of memory reading it: start without it
            log_err(fmt::format("flow state {}: not restored: {}", st.cfg.dataplane.state_file, e.what()));
        }
    }
    if (Status s = start_sync(st, rt); !s) {
        log_err(s.error());
        log_info("stopping");
        return 1;
    }
    // From here on workers run: they stop before the publisher's snapshots go, whatever the exit.
    struct StopWorkers {
        Runtime& rt;
        ~StopWorkers() { rt.stop_workers(); }
    } stop_workers{rt};
    if (api) {
        log_info(fmt::format("kubernetes API {} ({}): listing Services and EndpointSlices; not ready until both are",
                             api->server().server, api->server().source));
        api->start();
        st.kube = api.get();
    }
    std::unique_ptr<lb::Controller> lb;
    if (api && st.cfg.load_balancer.enabled) {
        lb = std::make_unique<lb::Controller>(st.cfg.load_balancer, *api,
                                              lb::Controller::identity_for(st.cfg.cluster.node_name));
        log_info(fmt::format("load balancer: electing the writer on the Lease {}/{}", st.cfg.load_balancer.election.ns,
                             st.cfg.load_balancer.election.name));
        lb->start();
        st.lb = lb.get();
    }

    serve(st, pub, rt);
    log_info("stopping");
    if (lb) lb->stop();  // the Lease released: another gateway writes from its next try
    if (api) api->stop();
    if (rt.sync) rt.sync->stop();  // its peers take over this gateway's addresses now
    rt.stop_workers();
    if (!st.cfg.dataplane.state_file.empty()) save_flows(st, rt);
    print_summary(st);
    return 0;
}

}  // namespace svcgate::ctl
