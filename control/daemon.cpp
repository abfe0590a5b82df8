#include "daemon.h"
#include "rcu.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cctype>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pdump.h>
#include <rte_telemetry.h>

#include "control_server.h"
#include "daemon_state.h"
#include "flow_sweep.h"
#include "flow_table.h"
#include "kube_objects.h"
#include "snapshot_builder.h"
#include "tool_eal.h"
#include "worker.h"
#include "yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) { g_signal.store(sig); }

constexpr uint16_t kRxDesc = 1024;
constexpr uint16_t kTxDesc = 1024;

void log(const std::string& s) { fmt::print(stderr, "svcgate: {}\n", s); }

// "net_af_packet0,iface=x" is a virtual device; anything else is a bus address (PCI).
bool is_vdev(const std::string& dev) { return dev.rfind("net_", 0) == 0; }
std::string dev_name(const std::string& dev) { return dev.substr(0, dev.find(',')); }

bool has_lcore_arg(const std::vector<std::string>& v) {
    for (const auto& a : v)
        if (a == "-c" || a.rfind("-l", 0) == 0 || a.rfind("--lcores", 0) == 0) return true;
    return false;
}


// Configures and starts one port: RSS over `workers` queues when the device can, else one queue.
bool setup_port(const PortConfig& pc, uint16_t workers, rte_mempool* pool, PortSetup& ps, rte_ether_addr& mac) {
    const std::string name = dev_name(pc.device);
    if (rte_eth_dev_get_port_by_name(name.c_str(), &ps.id) != 0) {
        log(fmt::format("port {}: no DPDK device \"{}\" (is it bound / is the vdev right?)", pc.name, name));
        return false;
    }
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(ps.id, &info) != 0) {
        log(fmt::format("port {}: cannot read device info", pc.name));
        return false;
    }
    rte_eth_conf conf{};
    // One receive queue per worker where the device has them. With RSS the NIC spreads flows over
    // them; without it each queue is fed on its own (a net_pcap file, an af_packet fanout
    // socket). The flow table is shared, so a flow may arrive on any queue either way.
    const bool rss = workers > 1 && info.max_rx_queues >= workers && info.flow_type_rss_offloads != 0;
    ps.rxq = static_cast<uint16_t>(std::clamp<uint32_t>(info.max_rx_queues, 1, workers));
    ps.txq = static_cast<uint16_t>(std::min<uint32_t>(workers, std::max<uint16_t>(info.max_tx_queues, 1)));
    if (rss) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf =
            (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_SCTP) & info.flow_type_rss_offloads;
    } else if (workers > 1) {
        log(fmt::format("port {}: {} has no RSS; {} receive queue(s) fed by the device itself", pc.name,
                        info.driver_name, ps.rxq));
    }
    int rc = rte_eth_dev_configure(ps.id, ps.rxq, ps.txq, &conf);
    if (rc != 0) {
        log(fmt::format("port {}: configure: {}", pc.name, rte_strerror(-rc)));
        return false;
    }
    uint16_t nrx = kRxDesc, ntx = kTxDesc;
    rte_eth_dev_adjust_nb_rx_tx_desc(ps.id, &nrx, &ntx);
    const int socket = rte_eth_dev_socket_id(ps.id);
    for (uint16_t q = 0; q < ps.rxq; ++q)
        if ((rc = rte_eth_rx_queue_setup(ps.id, q, nrx, socket, nullptr, pool)) != 0) {
            log(fmt::format("port {}: rx queue {}: {}", pc.name, q, rte_strerror(-rc)));
            return false;
        }
    for (uint16_t q = 0; q < ps.txq; ++q)
        if ((rc = rte_eth_tx_queue_setup(ps.id, q, ntx, socket, nullptr)) != 0) {
            log(fmt::format("port {}: tx queue {}: {}", pc.name, q, rte_strerror(-rc)));
            return false;
        }
    if ((rc = rte_eth_dev_start(ps.id)) != 0) {
        log(fmt::format("port {}: start: {}", pc.name, rte_strerror(-rc)));
        return false;
    }
    rte_eth_promiscuous_enable(ps.id);  // best effort: ARP for VIPs uses our own MAC anyway
    rte_eth_macaddr_get(ps.id, &mac);
    log(fmt::format("port {}: {} ({}), {} rx / {} tx queues, mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", pc.name,
                    name, info.driver_name, ps.rxq, ps.txq, mac.addr_bytes[0], mac.addr_bytes[1], mac.addr_bytes[2],
                    mac.addr_bytes[3], mac.addr_bytes[4], mac.addr_bytes[5]));
    return true;
}


DaemonState* g_state = nullptr;  // for the telemetry callbacks (they take g_state->mu)

int tel_stats(const char*, const char*, rte_tel_data* d) {
    if (!g_state) return -1;
    std::lock_guard lk(g_state->mu);
    const WorkerCounters t = sum_counters(g_state->workers);
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "rx_packets", t.rx_packets);
    rte_tel_data_add_dict_u64(d, "rx_bytes", t.rx_bytes);
    for (unsigned v = 0; v < std::size(t.verdicts); ++v)
        rte_tel_data_add_dict_u64(d, std::string(verdict_name(static_cast<Verdict>(v))).c_str(), t.verdicts[v]);
    for (unsigned r = 1; r < kDropReasons; ++r)
        if (t.drops[r])
            rte_tel_data_add_dict_u64(d, ("drop_" + std::string(drop_reason_name(static_cast<DropReason>(r)))).c_str(),
                                      t.drops[r]);
    rte_tel_data_add_dict_u64(d, "flows_created", t.flows_created);
    rte_tel_data_add_dict_u64(d, "flows_expired", t.flows_expired);
    rte_tel_data_add_dict_u64(d, "flows_live", g_state->flows->live_total());
    rte_tel_data_add_dict_u64(d, "flow_capacity", g_state->flows->capacity());
    rte_tel_data_add_dict_u64(d, "generation", g_state->generation);
    rte_tel_data_add_dict_u64(d, "reloads", g_state->reload.ok);
    rte_tel_data_add_dict_u64(d, "reload_failures", g_state->reload.failed);
    return 0;
}

int tel_services(const char*, const char*, rte_tel_data* d) {
    if (!g_state) return -1;
    std::lock_guard lk(g_state->mu);
    const ServiceSnapshot& s = *g_state->snap;
    rte_tel_data_start_dict(d);
    // One entry per service port: its packets (the telemetry dict holds up to 256).
    for (size_t i = 0; i < s.services.size(); ++i) {
        // Telemetry names allow letters, digits, '_' and '/': "ns/name:port" → "ns/name_port".
        std::string key = s.services[i].name;
        for (char& c : key)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/') c = '_';
        rte_tel_data_add_dict_u64(d, key.c_str(), service_total(*g_state, i).packets);
    }
    return 0;
}

void print_summary(DaemonState& st) {
    const WorkerCounters t = sum_counters(st.workers);
    uint64_t tx = 0;
    for (const auto& w : st.workers) tx += w->tx_packets();
    fmt::print("svcgate: {} packets in ({} bytes), {} out; flows: {} created, {} expired, {} live\n", t.rx_packets,
               t.rx_bytes, tx, t.flows_created, t.flows_expired, st.flows->live_total());
    for (unsigned v = 0; v < std::size(t.verdicts); ++v)
        if (t.verdicts[v]) fmt::print("  verdict {:<8} {}\n", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
    for (unsigned r = 1; r < kDropReasons; ++r)
        if (t.drops[r]) fmt::print("  drop    {:<26} {}\n", drop_reason_name(static_cast<DropReason>(r)), t.drops[r]);
    for (size_t p = 0; p < st.ports.size(); ++p) {
        rte_eth_stats e{};
        rte_eth_stats_get(st.ports[p].id, &e);
        fmt::print("  port {:<8} rx {} tx {} missed {} rx-errors {} tx-errors {}\n", st.cfg.dataplane.ports[p].name,
                   e.ipackets, e.opackets, e.imissed, e.ierrors, e.oerrors);
    }
}

// Configured neighbors into the ARP cache; those the new config dropped are learned again.
void pin_neighbors(NeighborTable& nt, const std::vector<NeighborConfig>& next, const std::vector<NeighborConfig>& old) {
    for (const NeighborConfig& o : old)
        if (std::none_of(next.begin(), next.end(), [&](const NeighborConfig& n) { return n.ip == o.ip; }))
            nt.unpin(o.ip);
    for (const NeighborConfig& n : next) {
        rte_ether_addr mac;
        std::copy(n.mac.begin(), n.mac.end(), mac.addr_bytes);
        if (!nt.pin(n.ip, mac)) log(fmt::format("neighbor {}: the ARP cache has no room", format_ip4(n.ip)));
    }
}

// What a reload cannot change under running workers (EAL, workers, the port list, the flow
// table's size, the packet pool, the control endpoints) is taken from the running config, before
// the snapshot is built from it: the snapshot's port indices and per-worker counters must match
// what runs. Returns the names of the fields that changed (they take a restart).
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
    keep(d.timeouts, r.timeouts, "dataplane.flow_table.timeouts");  // the flow table holds them
    keep(d.new_flows_per_source, r.new_flows_per_source, "dataplane.flow_table.new_flows_per_source");
    keep(d.mbufs, r.mbufs, "dataplane.mbufs");
    // A port's addresses may change; the list of ports (names, devices) may not.
    bool same_ports = d.ports.size() == r.ports.size();
    for (size_t i = 0; same_ports && i < d.ports.size(); ++i)
        same_ports = d.ports[i].name == r.ports[i].name && d.ports[i].device == r.ports[i].device;
    if (!same_ports) {
        d.ports = r.ports;
        changed += std::string(changed.empty() ? "" : ", ") + "dataplane.ports";
    }
    keep(next.control.socket, running.control.socket, "control.socket");
    keep(next.control.metrics, running.control.metrics, "control.metrics");
    return changed;
}

// Reload: build off the fast path, publish, wait until every worker has moved on, sweep the flows
// whose endpoint left, free the old snapshot. Returns the line to log and to tell svcgatectl.
std::string reload(DaemonState& st, const std::string& trigger) {
    const auto t0 = std::chrono::steady_clock::now();
    Config next;
    std::unique_ptr<ServiceSnapshot> fresh;
    try {
        next = load_config_file(st.config_path);
        const std::string restart = keep_running_settings(next, st.cfg);
        fresh = build_snapshot(next, st.generation + 1, st.snap.get());
        if (!restart.empty())
            log(fmt::format("reload: {} changed; that takes a restart (the rest is applied)", restart));
    } catch (const std::exception& e) {
        std::lock_guard lk(st.mu);
        ++st.reload.failed;
        st.reload.last_ok = false;
        st.reload.last_error = e.what();
        std::string m = fmt::format("reload failed ({}), the running config stays:\n{}", trigger, e.what());
        log(m);
        return m + "\n";
    }
    {
        std::lock_guard lk(st.mu);  // the telemetry thread reads st.snap and st.cfg
        st.shared->snapshot.store(fresh.get(), std::memory_order_release);
        rcu_synchronize(st.shared->qsbr);
        carry_counters(st);
        pin_neighbors(st.shared->neighbors, next.dataplane.neighbors, st.cfg.dataplane.neighbors);
        st.snap = std::move(fresh);
        st.cfg = std::move(next);
        ++st.generation;
        ++st.reload.ok;
        st.reload.last_ok = true;
        st.reload.last_error.clear();
        st.reload.last_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        st.reload.last_trigger = trigger;
    }
    // Flows whose endpoint left: TCP answered with RST, datagram flows removed by their owner
    // (a full ring leaves the rest to their timeout).
    SweepResult sw = sweep_removed_endpoints(*st.flows, *st.snap, [&](uint32_t id, uint8_t owner) {
        if (owner < st.shared->remove_rings.size())
            rte_ring_sp_enqueue(st.shared->remove_rings[owner], reinterpret_cast<void*>(uintptr_t{id}));
    });
    std::string m = fmt::format("reloaded {} ({}): generation {}, {} service ports, published in {:.1f} ms; flows to "
                                "removed endpoints: {} TCP closed, {} datagram removed (of {} earlier flows)",
                                st.config_path, trigger, st.generation, st.snap->services.size(), st.reload.last_seconds * 1e3,
                                sw.tcp_closed, sw.dgram_removed, sw.scanned);
    log(m);
    return m + "\n";
}

// inotify on the directories of the config file and its manifests (editors replace files by
// renaming): a change to one of those files schedules a reload.
struct Watcher {
    int fd = -1;
    std::map<int, std::string> dirs;         // watch descriptor → directory
    std::set<std::string> files;             // absolute paths that matter
    std::chrono::steady_clock::time_point due{};
    bool pending = false;

    void reset(const Config& cfg, const std::string& config_path) {
        if (fd >= 0) close(fd);
        fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        dirs.clear();
        files.clear();
        std::vector<std::string> paths = {config_path};
        paths.insert(paths.end(), cfg.manifests.begin(), cfg.manifests.end());
        for (const auto& p : paths) {
            std::error_code ec;
            auto abs = std::filesystem::absolute(p, ec);
            if (ec) continue;
            files.insert(abs.string());
            const std::string dir = abs.parent_path().string();
            bool have = false;
            for (auto& [w, d] : dirs) have = have || d == dir;
            if (have) continue;
            int w = inotify_add_watch(fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE);
            if (w >= 0) dirs[w] = dir;
        }
    }
    void drain() {
        alignas(inotify_event) char buf[4096];
        for (;;) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n <= 0) return;
            for (ssize_t off = 0; off < n;) {
                auto* e = reinterpret_cast<inotify_event*>(buf + off);
                off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
                if (!e->len || !dirs.count(e->wd)) continue;
                if (files.count(dirs[e->wd] + "/" + e->name)) {
                    pending = true;  // settle for 200 ms: editors write in several steps
                    due = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
                }
            }
        }
    }
    ~Watcher() {
        if (fd >= 0) close(fd);
    }
};

}  // namespace

int check_config(const std::string& path) {
    try {
        Config cfg = load_config_file(path);
        for (const auto& w : cfg.warnings) fmt::print(stderr, "warning: {}\n", w.str());
        init_tool_eal("svcgate-check");
        auto snap = build_snapshot(cfg);
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
        for (const auto& w : e.warnings) fmt::print(stderr, "warning: {}\n", w.str());
        fmt::print(stderr, "{}\n", e.what());
        return 1;
    }
    for (const auto& w : st.cfg.warnings) fmt::print(stderr, "warning: {}\n", w.str());
    const DataplaneConfig dpc = st.cfg.dataplane;
    if (dpc.ports.empty()) {
        log("the config has no dataplane.ports");
        return 1;
    }

    // EAL: the config's arguments, one --vdev / -a per port, the command line's extras.
    std::vector<std::string> args = {"svcgate"};
    args.insert(args.end(), dpc.eal.begin(), dpc.eal.end());
    for (const PortConfig& p : dpc.ports) {
        if (p.device.empty()) {
            log(fmt::format("port {} has no device", p.name));
            return 1;
        }
        if (is_vdev(p.device)) args.push_back("--vdev=" + p.device);
        else args.insert(args.end(), {"-a", p.device});
    }
    args.insert(args.end(), opts.eal_extra.begin(), opts.eal_extra.end());
    if (!has_lcore_arg(args)) args.insert(args.begin() + 1, {"-l", fmt::format("0-{}", dpc.workers)});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) {
        log(fmt::format("EAL initialisation failed: {}", rte_strerror(rte_errno)));
        return 1;
    }
    auto fail = [](const std::string& m) {
        log(m);
        rte_eal_cleanup();
        return 1;
    };
    if (rte_lcore_count() < 1u + dpc.workers)
        return fail(fmt::format("{} workers need {} lcores (main + workers); EAL has {}", dpc.workers,
                                dpc.workers + 1, rte_lcore_count()));
    if (rte_pdump_init() != 0) log("packet capture (dpdk-dumpcap) unavailable: multi-process is off (--in-memory?)");

    try {
        st.snap = build_snapshot(st.cfg, 1);
    } catch (const ConfigError& e) {
        return fail(e.what());
    }

    // One mempool: every descriptor, every worker's bursts and held packets, and slack.
    const uint32_t nports = static_cast<uint32_t>(dpc.ports.size());
    const uint32_t need = nports * dpc.workers * (kRxDesc + kTxDesc) + dpc.workers * (Worker::kHold + 4 * kBurst) + 4096;
    uint32_t n_mbufs = 1;  // 2^n - 1 mbufs suit the pool's ring best
    while (n_mbufs < need) n_mbufs <<= 1;
    if (dpc.mbufs >= n_mbufs) n_mbufs = dpc.mbufs + 1;  // as configured, when more
    rte_mempool* pool = rte_pktmbuf_pool_create("svcgate_mbufs", n_mbufs - 1, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                                static_cast<int>(rte_socket_id()));
    if (!pool) return fail(fmt::format("mempool of {} mbufs: {}", n_mbufs - 1, rte_strerror(rte_errno)));

    st.shared = std::make_unique<WorkerShared>();
    WorkerShared& shared = *st.shared;
    shared.pool = pool;
    pin_neighbors(shared.neighbors, dpc.neighbors, {});
    st.ports.resize(nports);
    shared.port_macs.resize(nports);
    for (uint32_t p = 0; p < nports; ++p) {
        if (!setup_port(dpc.ports[p], dpc.workers, pool, st.ports[p], shared.port_macs[p])) return fail("stopping");
        shared.port_ids.push_back(st.ports[p].id);
    }
    // QSBR threads: the workers (0..workers-1) and the control thread's record scans (workers).
    const size_t qsz = rte_rcu_qsbr_get_memsize(dpc.workers + 1);
    shared.qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("svcgate_qsbr", qsz, RTE_CACHE_LINE_SIZE));
    if (!shared.qsbr || rte_rcu_qsbr_init(shared.qsbr, dpc.workers + 1) != 0) return fail("RCU state: out of memory");
    st.flows = FlowTable::create(
        {.capacity = dpc.flow_capacity, .owners = dpc.workers, .qsbr = shared.qsbr, .timeouts = dpc.timeouts,
         .scanner = dpc.workers, .new_flows_per_source = dpc.new_flows_per_source});
    if (!st.flows) return fail(fmt::format("flow table of {} flows: out of memory", dpc.flow_capacity));
    shared.snapshot.store(st.snap.get(), std::memory_order_release);
    for (uint16_t w = 0; w < dpc.workers; ++w) {
        rte_ring* r = rte_ring_create(fmt::format("svcgate_rm{}", w).c_str(), 1u << 16, SOCKET_ID_ANY,
                                      RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (!r) return fail("flow removal rings: out of memory");
        shared.remove_rings.push_back(r);
    }

    // Queues to workers: port p's queue q goes to worker (p + q) % workers; transmit queues are
    // per worker where the device has enough, shared under a lock where it has not.
    const uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (uint16_t w = 0; w < dpc.workers; ++w)
        st.workers.push_back(std::make_unique<Worker>(shared, w, dpc.workers, *st.flows, seed));
    std::vector<std::unique_ptr<rte_spinlock_t[]>> locks;
    for (uint32_t p = 0; p < nports; ++p) {
        for (uint16_t q = 0; q < st.ports[p].rxq; ++q)
            st.workers[(p + q) % dpc.workers]->add_rx({static_cast<uint16_t>(p), q});
        if (st.ports[p].txq < dpc.workers) {
            locks.push_back(std::make_unique<rte_spinlock_t[]>(st.ports[p].txq));
            for (uint16_t q = 0; q < st.ports[p].txq; ++q) rte_spinlock_init(&locks.back()[q]);
        }
    }
    for (uint16_t w = 0; w < dpc.workers; ++w) {
        std::vector<TxQueue> tx(nports);
        size_t li = 0;
        for (uint32_t p = 0; p < nports; ++p) {
            tx[p].queue = static_cast<uint16_t>(w % st.ports[p].txq);
            if (st.ports[p].txq < dpc.workers) tx[p].lock = &locks[li++][tx[p].queue];
        }
        st.workers[w]->set_tx(std::move(tx));
    }

    // The operator's endpoints: a failure to open one is logged, the gateway still runs.
    ControlServer server;
    if (std::string e = server.open_socket(st.cfg.control.socket, st.cfg.control.socket_mode); !e.empty()) log(e);
    if (std::string e = server.open_metrics(st.cfg.control.metrics); !e.empty()) log(e);
    Watcher watch;
    if (st.cfg.control.watch) {
        watch.reset(st.cfg, st.config_path);
        server.watch_fd(watch.fd, [&] { watch.drain(); });
    }

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGHUP, on_signal);
    std::signal(SIGPIPE, SIG_IGN);  // a svcgatectl that hangs up early
    unsigned lcore = 0, w = 0;
    RTE_LCORE_FOREACH_WORKER(lcore) {
        if (w == dpc.workers) break;
        rte_eal_remote_launch(&Worker::main, st.workers[w].get(), lcore);
        ++w;
    }
    g_state = &st;
    rte_telemetry_register_cmd("/svcgate/stats", tel_stats, "svcgate: verdicts, drops by reason, flows, reloads");
    rte_telemetry_register_cmd("/svcgate/services", tel_services, "svcgate: packets per service port");
    log(fmt::format("running: {} ports, {} workers, {} service ports, flow table {} flows; control socket {}, "
                    "metrics {}",
                    nports, dpc.workers, st.snap->services.size(), st.flows->capacity(),
                    st.cfg.control.socket.empty() ? "off" : st.cfg.control.socket,
                    st.cfg.control.metrics.empty() ? "off" : "http://" + st.cfg.control.metrics + "/metrics"));

    auto do_reload = [&](const std::string& trigger) {
        std::string r = reload(st, trigger);
        if (st.cfg.control.watch) {
            watch.reset(st.cfg, st.config_path);  // the manifests may have changed
            server.watch_fd(watch.fd, [&] { watch.drain(); });
        }
        return r;
    };
    for (;;) {
        const int sig = g_signal.exchange(0);
        if (sig == SIGINT || sig == SIGTERM) break;
        if (sig == SIGHUP) do_reload("SIGHUP");
        if (watch.pending && std::chrono::steady_clock::now() >= watch.due) {
            watch.pending = false;
            do_reload("file change");
        }
        server.poll_once(
            50, [&](const std::string& line) { return handle_command(st, line, [&] { return do_reload("svcgatectl"); }); },
            [&] { return render_metrics(st); });
    }
    log("stopping");
    shared.stop.store(true);
    rte_eal_mp_wait_lcore();
    {
        std::lock_guard lk(st.mu);
        g_state = nullptr;
    }
    print_summary(st);
    for (const PortSetup& p : st.ports) {
        rte_eth_dev_stop(p.id);
        rte_eth_dev_close(p.id);
    }
    st.workers.clear();
    st.flows.reset();
    st.snap.reset();
    rte_free(shared.qsbr);
    for (rte_ring* r : shared.remove_rings) rte_ring_free(r);
    rte_pdump_uninit();
    rte_eal_cleanup();
    return 0;
}

}  // namespace svcgate::ctl
