// The daemon's wiring: the DPDK resources (resources.h) in a Runtime that gives them back on every
// exit path, the publisher (publisher.h) for the first config and every reload, and the control
// endpoints, each in its own file: the control socket (control_server.h, commands.h), Prometheus
// (metrics.h), DPDK telemetry (telemetry.h), the config watcher (watcher.h).
#include "daemon.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_spinlock.h>

#include "commands.h"
#include "control_server.h"
#include "daemon_state.h"
#include "kube_objects.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "publisher.h"
#include "resources.h"
#include "snapshot_builder.h"
#include "telemetry.h"
#include "trace.h"
#include "watcher.h"
#include "worker.h"
#include "yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) { g_signal.store(sig); }

void log(const std::string& s) { log_info(s); }

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What a running gateway owns, in the order it is built; destroyed in reverse, workers first.
struct Runtime {
    Eal eal;
    MempoolPtr pool;
    std::vector<Port> ports;
    QsbrPtr qsbr;
    std::unique_ptr<FlowTable> flows;
    std::unique_ptr<FlowTable6> flows6;
    std::unique_ptr<FragTable> frags;
    std::vector<RingPtr> remove_rings;
    std::unique_ptr<WorkerShared> shared;
    std::vector<std::unique_ptr<rte_spinlock_t[]>> tx_locks;
    std::vector<std::unique_ptr<Worker>> workers;
    bool launched = false;

    ~Runtime() { stop_workers(); }
    void stop_workers() {
        if (!launched) return;
        shared->stop.store(true);
        rte_eal_mp_wait_lcore();
        launched = false;
    }
};

// EAL, pool, ports, RCU, flow table, rings, workers (not yet launched). "" or what failed; what
// was built is given back by the Runtime either way.
std::string build_runtime(Runtime& rt, const DataplaneConfig& dpc, const std::vector<std::string>& eal_extra) {
    if (dpc.ports.empty()) return "the config has no dataplane.ports";
    std::string err;
    std::vector<std::string> args = eal_args(dpc, eal_extra, err);
    if (!err.empty()) return err;
    if (err = rt.eal.init(std::move(args)); !err.empty()) return err;
    if (rte_lcore_count() < 1u + dpc.workers)
        return fmt::format("{} workers need {} lcores (main + workers); EAL has {}", dpc.workers, dpc.workers + 1,
                           rte_lcore_count());
    if (!(rt.pool = create_packet_pool(dpc, err))) return err;
    rt.shared = std::make_unique<WorkerShared>();
    WorkerShared& shared = *rt.shared;
    shared.pool = rt.pool.get();
    (void)pin_neighbors(shared.neighbors, shared.neighbors6, dpc.neighbors, {});
    rt.ports.reserve(dpc.ports.size());
    shared.port_ids = FixedArray<uint16_t>(dpc.ports.size());
    shared.port_macs = FixedArray<rte_ether_addr>(dpc.ports.size());
    for (size_t p = 0; p < dpc.ports.size(); ++p) {
        rt.ports.emplace_back();
        if (err = rt.ports.back().open(dpc.ports[p], dpc.workers, rt.pool.get()); !err.empty()) return err;
        shared.port_ids[p] = rt.ports.back().id();
        shared.port_macs[p] = rt.ports.back().mac();
    }
    // QSBR threads: the workers (0..workers-1) and the control thread's record scans (workers).
    if (!(rt.qsbr = create_qsbr(dpc.workers + 1u))) return "RCU state: out of memory";
    shared.qsbr = rt.qsbr.get();
    rt.flows = FlowTable::create({.capacity = dpc.flow_capacity, .owners = dpc.workers, .qsbr = rt.qsbr.get(),
                                  .timeouts = dpc.timeouts, .scanner = dpc.workers,
                                  .new_flows_per_source = dpc.new_flows_per_source});
    if (!rt.flows) return fmt::format("flow table of {} flows: out of memory", dpc.flow_capacity);
    rt.flows6 = FlowTable6::create({.capacity = dpc.flow_capacity_v6, .owners = dpc.workers, .qsbr = rt.qsbr.get(),
                                    .timeouts = dpc.timeouts, .scanner = dpc.workers,
                                    .new_flows_per_source = dpc.new_flows_per_source});
    if (!rt.flows6) return fmt::format("IPv6 flow table of {} flows: out of memory", dpc.flow_capacity_v6);
    rt.frags = FragTable::create(dpc.fragments);
    if (!rt.frags) return fmt::format("fragment table of {} datagrams: out of memory", dpc.fragments.max_datagrams);
    shared.frags = rt.frags.get();
    shared.icmp_errors_per_second = dpc.icmp_errors_per_second;
    shared.port_mtus = FixedArray<uint16_t>(dpc.ports.size());
    for (size_t p = 0; p < dpc.ports.size(); ++p) shared.port_mtus[p] = dpc.ports[p].mtu;
    shared.remove_rings = FixedArray<rte_ring*>(dpc.workers);
    for (uint16_t w = 0; w < dpc.workers; ++w) {
        RingPtr r(rte_ring_create(fmt::format("svcgate_rm{}", w).c_str(), 1u << 16, SOCKET_ID_ANY,
                                  RING_F_SP_ENQ | RING_F_SC_DEQ));
        if (!r) return "flow removal rings: out of memory";
        shared.remove_rings[w] = r.get();
        rt.remove_rings.push_back(std::move(r));
    }
    // Queues to workers: port p's queue q goes to worker (p + q) % workers; transmit queues are
    // per worker where the device has enough, shared under a lock where it has not.
    const uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (uint16_t w = 0; w < dpc.workers; ++w)
        rt.workers.push_back(std::make_unique<Worker>(shared, w, dpc.workers, *rt.flows, *rt.flows6, seed));
    std::vector<rte_spinlock_t*> locks(rt.ports.size(), nullptr);
    std::vector<std::vector<RxQueue>> rx(dpc.workers);
    for (size_t p = 0; p < rt.ports.size(); ++p) {
        for (uint16_t q = 0; q < rt.ports[p].rx_queues(); ++q)
            rx[(p + q) % dpc.workers].push_back({static_cast<uint16_t>(p), q});
        if (rt.ports[p].tx_queues() < dpc.workers) {
            rt.tx_locks.push_back(std::make_unique<rte_spinlock_t[]>(rt.ports[p].tx_queues()));
            locks[p] = rt.tx_locks.back().get();
            for (uint16_t q = 0; q < rt.ports[p].tx_queues(); ++q) rte_spinlock_init(&locks[p][q]);
        }
    }
    for (uint16_t w = 0; w < dpc.workers; ++w) {
        std::vector<TxQueue> tx(rt.ports.size());
        for (size_t p = 0; p < rt.ports.size(); ++p) {
            tx[p].queue = static_cast<uint16_t>(w % rt.ports[p].tx_queues());
            if (locks[p]) tx[p].lock = &locks[p][tx[p].queue];
        }
        rt.workers[w]->set_queues(std::move(rx[w]), std::move(tx));
    }
    return {};
}

void launch_workers(Runtime& rt) {
    unsigned lcore = 0;
    size_t w = 0;
    RTE_LCORE_FOREACH_WORKER(lcore) {
        if (w == rt.workers.size()) break;
        rte_eal_remote_launch(&Worker::main, rt.workers[w++].get(), lcore);
    }
    rt.launched = true;
}

void print_summary(const DaemonState& st) {
    const WorkerCounters t = sum_counters(st);
    fmt::print("svcgate: {} packets in ({} bytes), {} out; flows: {} created, {} expired, {} live\n", t.rx_packets,
               t.rx_bytes, t.tx_packets, t.flows_created, t.flows_expired, st.flows_live());
    for (unsigned v = 0; v < kVerdicts; ++v)
        if (t.verdicts[v]) fmt::print("  verdict {:<8} {}\n", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
    for (unsigned r = 1; r < kDropReasons; ++r) {
        if (t.drops[r]) fmt::print("  drop    {:<26} {}\n", drop_reason_name(static_cast<DropReason>(r)), t.drops[r]);
        if (t.rejects[r]) fmt::print("  reject  {:<26} {}\n", drop_reason_name(static_cast<DropReason>(r)), t.rejects[r]);
    }
    for (const PortView& p : st.ports) {
        rte_eth_stats e{};
        rte_eth_stats_get(p.id, &e);
        fmt::print("  port {:<8} rx {} tx {} missed {} rx-errors {} tx-errors {}\n", p.name, e.ipackets, e.opackets,
                   e.imissed, e.ierrors, e.oerrors);
    }
}

// What a reload cannot change under running workers (EAL, workers, the port list, the flow
// table's size, the packet pool, the control endpoints) is taken from the running config, before
// the snapshot is built from it: the snapshot's port indices must match what runs. Returns the
// names of the fields that changed (they take a restart).
std::string keep_running_settings(Config& next, const Config& running) {
    std::string changed;
    auto keep = [&](auto& field, const auto& value, const char* what) {
        if (field == value) return;
        field = value;
        changed += (changed.empty() ? "" : ", ") + std::string(what);
    };
    DataplaneConfig& d = next.dataplane;
    const DataplaneConfig& r = running.dataplane;
    keep(d.eal, r.eal, "dataplane.eal");
    keep(d.workers, r.workers, "dataplane.workers");
    keep(d.flow_capacity, r.flow_capacity, "dataplane.flow_table.capacity");
    keep(d.flow_capacity_v6, r.flow_capacity_v6, "dataplane.flow_table.capacity_v6");
    keep(d.timeouts, r.timeouts, "dataplane.flow_table.timeouts");  // the flow table holds them
    keep(d.new_flows_per_source, r.new_flows_per_source, "dataplane.flow_table.new_flows_per_source");
    keep(d.mbufs, r.mbufs, "dataplane.mbufs");
    keep(d.fragments, r.fragments, "dataplane.fragments");
    keep(d.icmp_errors_per_second, r.icmp_errors_per_second, "dataplane.icmp_errors_per_second");
    // A port's addresses may change; the list of ports (names, devices) may not.
    bool same_ports = d.ports.size() == r.ports.size();
    for (size_t i = 0; same_ports && i < d.ports.size(); ++i)
        same_ports = d.ports[i].name == r.ports[i].name && d.ports[i].device == r.ports[i].device &&
                     d.ports[i].mtu == r.ports[i].mtu;
    if (!same_ports) {
        d.ports = r.ports;
        changed += std::string(changed.empty() ? "" : ", ") + "dataplane.ports";
    }
    keep(next.control.socket, running.control.socket, "control.socket");
    keep(next.control.metrics, running.control.metrics, "control.metrics");
    return changed;
}

// Reload: read, keep what takes a restart, publish. Returns the line to log and to tell svcgatectl.
std::string reload(DaemonState& st, Publisher& pub, WorkerShared& shared, const std::string& trigger) {
    // A config that keeps failing (a file saved over and over) or a neighbor list far larger than
    // the cache must not flood the journal.
    static RateLimit full(8, std::chrono::seconds(60)), refused(5, std::chrono::seconds(60));
    const auto t0 = std::chrono::steady_clock::now();
    PublishResult r;
    try {
        Config next = load_config_file(st.config_path);
        const std::string restart = keep_running_settings(next, st.cfg);
        r = pub.publish(next, [&] {
            for (const IpAddr& a : pin_neighbors(shared.neighbors, shared.neighbors6, next.dataplane.neighbors,
                                                 st.cfg.dataplane.neighbors))
                full.log(LogLevel::warning, fmt::format("neighbor {}: the neighbor cache has no room", format_ip(a)));
            st.cfg = std::move(next);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++st.reload.ok;
            st.reload.last_ok = true;
            st.reload.last_error.clear();
            st.reload.last_seconds = secs;
            st.reload.last_trigger = trigger;
            st.reload.observe(secs, unix_now());
        });
        if (!restart.empty()) log_warning(fmt::format("reload: {} changed; that takes a restart (the rest is applied)", restart));
    } catch (const std::exception& e) {
        std::lock_guard lk(st.mu);
        ++st.reload.failed;
        st.reload.last_ok = false;
        st.reload.last_error = e.what();
        std::string m = fmt::format("reload failed ({}), the running config stays:\n{}", trigger, e.what());
        refused.log(LogLevel::err, m);
        return m + "\n";
    }
    std::string m = fmt::format("reloaded {} ({}): generation {}, {} service ports, published in {:.1f} ms; flows to "
                                "removed endpoints: {} TCP closed, {} datagram removed (of {} earlier flows)",
                                st.config_path, trigger, r.generation, r.service_ports, st.reload.last_seconds * 1e3,
                                r.sweep.tcp_closed, r.sweep.dgram_removed, r.sweep.scanned);
    log(m);
    return m + "\n";
}

// The control loop: the operator's endpoints up (a failure to open one is logged, the gateway
// still runs), the workers launched, then signals, file changes and svcgatectl requests until
// SIGINT or SIGTERM.
void serve(DaemonState& st, Publisher& pub, Runtime& rt) {
    WorkerShared& shared = *rt.shared;
    ControlServer server;
    if (std::string e = server.open_socket(st.cfg.control.socket, st.cfg.control.socket_mode); !e.empty()) log_err(e);
    register_telemetry(st);
    struct Unregister {
        ~Unregister() { unregister_telemetry(); }
    } unregister;
    MetricsServer metrics;
    if (std::string e = metrics.start(st.cfg.control.metrics, st); !e.empty()) log_err(e);
    Watcher watch;
    auto rewatch = [&] {
        if (!st.cfg.control.watch) return;
        watch.reset(st.cfg, st.config_path);  // the manifests may have changed
        server.watch_fd(watch.fd(), [&] { watch.drain(); });
    };
    rewatch();

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGHUP, on_signal);
    std::signal(SIGPIPE, SIG_IGN);  // a svcgatectl that hangs up early
    launch_workers(rt);
    log(fmt::format("running: {} ports, {} workers, {} service ports, flow table {} flows; control socket {}, "
                    "metrics {}",
                    rt.ports.size(), rt.workers.size(), pub.current()->services.size(), rt.flows->capacity(),
                    st.cfg.control.socket.empty() ? "off" : st.cfg.control.socket,
                    st.cfg.control.metrics.empty() ? "off" : "http://" + st.cfg.control.metrics + "/metrics"));

    // systemd: ready now that the ports are up, the workers run and the first config is published.
    SystemdNotifier notify(rt.qsbr.get());
    uint64_t last_rx = 0;
    auto last_status = std::chrono::steady_clock::now();
    auto status = [&] {
        uint64_t rx = 0;
        for (const Worker* w : st.workers) rx += w->counters().rx_packets;
        const auto now = std::chrono::steady_clock::now();
        const double secs = std::chrono::duration<double>(now - last_status).count();
        std::string rate;  // over the time since the last line, once there is a second of it
        if (secs >= 1) {
            rate = fmt::format(", {:.0f} packets/s in", static_cast<double>(rx - last_rx) / secs);
            last_rx = rx, last_status = now;
        }
        return fmt::format("generation {}, {} service ports, {} flows{}", pub.generation(),
                           pub.current()->services.size(), st.flows_live(), rate);
    };
    notify.ready(status());
    if (notify.watchdog().count()) log(fmt::format("systemd watchdog: a keepalive every {} ms while the workers make progress",
                                                   notify.watchdog().count() / 2000));
    // A test hook (tests/cli/notify_test.py): the workers stop making progress this many seconds
    // after start, as a stuck worker would.
    const char* stall = std::getenv("SVCGATE_TEST_STALL_AFTER");
    const auto stall_at = std::chrono::steady_clock::now() + std::chrono::seconds(stall ? std::atoi(stall) : 0);

    auto do_reload = [&](const std::string& trigger) {
        notify.reloading();
        std::string r = reload(st, pub, shared, trigger);
        rewatch();
        notify.ready(status());
        return r;
    };
    auto last_tick = std::chrono::steady_clock::now();
    for (;;) {
        const int sig = g_signal.exchange(0);
        if (sig == SIGINT || sig == SIGTERM) break;
        if (sig == SIGHUP) do_reload("SIGHUP");
        if (watch.due()) do_reload("file change");
        server.poll_once(50, [&](const std::string& line) {
            return handle_command(st, line, [&] { return do_reload("svcgatectl"); });
        });
        notify.tick(status);
        if (stall && std::chrono::steady_clock::now() >= stall_at && !shared.test_stall.exchange(true))
            log_warning("test hook: the workers stall (SVCGATE_TEST_STALL_AFTER)");
        // Slots that flows stopped holding since the last reload go back, once a second.
        if (const auto now = std::chrono::steady_clock::now(); now - last_tick >= std::chrono::seconds(1)) {
            pub.tick();
            last_tick = now;
        }
    }
}

}  // namespace

int check_config(const std::string& path) {
    try {
        Config cfg = load_config_file(path);
        for (const auto& w : cfg.warnings) fmt::print(stderr, "warning: {}\n", w.str());
        auto snap = build_snapshot(cfg, 1, nullptr, BuildMode::validate);  // no DPDK: nothing is started
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

int run_daemon(const DaemonOptions& opts) {
    DaemonState st;
    st.config_path = opts.config;
    try {
        st.cfg = load_config_file(opts.config);
    } catch (const ConfigError& e) {
        for (const auto& w : e.warnings) log_warning(w.str());
        log_err(e.what());
        return 1;
    }
    for (const auto& w : st.cfg.warnings) log_warning(w.str());
    const DataplaneConfig dpc = st.cfg.dataplane;

    Runtime rt;
    if (std::string err = build_runtime(rt, dpc, opts.eal_extra); !err.empty()) {
        log_err(err);
        log("stopping");
        return 1;
    }
    WorkerShared& shared = *rt.shared;
    for (size_t p = 0; p < rt.ports.size(); ++p)
        st.ports.push_back(PortView{dpc.ports[p].name, dpc.ports[p].device, rt.ports[p].id(), rt.ports[p].rx_queues(),
                                    rt.ports[p].tx_queues()});
    st.pool = rt.pool.get();
    st.flows = rt.flows.get();
    st.flows6 = rt.flows6.get();
    st.frags = rt.frags.get();
    for (const auto& w : rt.workers) st.workers.push_back(w.get());

    Publisher pub(dpc.workers, PublishTarget{
        .store = [&shared](const ServiceSnapshot* s) { shared.snapshot.store(s, std::memory_order_release); },
        .store_stats = [&shared](StatsTable* t) { shared.stats.store(t, std::memory_order_release); },
        .qsbr = rt.qsbr.get(),
        .flows = rt.flows.get(),
        .flows6 = rt.flows6.get(),
        // The owner removes it (a full ring leaves the rest to their timeout).
        .remove_dgram = [&shared](uint32_t id, uint8_t owner) {
            if (owner < shared.remove_rings.size())
                rte_ring_sp_enqueue(shared.remove_rings[owner], reinterpret_cast<void*>(uintptr_t{id}));
        },
        .readers = &st.mu});
    try {
        pub.publish(st.cfg);
        st.reload.last_ok_unix = unix_now();  // the config in service since now (kube-proxy's first sync)
    } catch (const std::exception& e) {
        log_err(e.what());
        return 1;
    }
    st.publisher = &pub;
    // From here on workers run: they stop before the publisher's snapshots go, whatever the exit.
    struct StopWorkers {
        Runtime& rt;
        ~StopWorkers() { rt.stop_workers(); }
    } stop_workers{rt};

    serve(st, pub, rt);
    log("stopping");
    rt.stop_workers();
    print_summary(st);
    return 0;
}

}  // namespace svcgate::ctl
