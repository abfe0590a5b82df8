// The daemon's wiring: the DPDK resources (resources.h) in a Runtime that gives them back on every
// exit path, the publisher (publisher.h) for the first config and every reload, and the control
// endpoints, each in its own file: the control socket (control_server.h, commands.h), Prometheus
// (metrics.h), DPDK telemetry (telemetry.h), the config watcher (watcher.h).
#include "control/daemon/daemon.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>

#include <net/if.h>
#include <unistd.h>

#include <fmt/format.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_spinlock.h>

#include "control/routing/announce.h"
#include "control/api/commands.h"
#include "control/api/control_server.h"
#include "control/daemon/daemon_state.h"
#include "control/ha/state_file.h"
#include "control/config/kube_objects.h"
#include "control/base/log.h"
#include "control/routing/health.h"
#include "control/api/metrics.h"
#include "control/base/netlink.h"
#include "control/daemon/notify.h"
#include "control/snapshot/publisher.h"
#include "control/daemon/resources.h"
#include "control/snapshot/snapshot_builder.h"
#include "control/ha/sync.h"
#include "control/api/telemetry.h"
#include "control/trace/trace.h"
#include "control/daemon/watcher.h"
#include "dataplane/pipeline/worker.h"
#include "control/config/yaml_config.h"

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
    std::vector<Port> hosts;  // the ports' host interfaces (TAP devices), closed before the ports
    std::vector<int> host_ifindex;  // by port: its host interface's index, 0 for none
    std::vector<std::vector<IpCidr>> host_addresses;  // by port: what its host interface carries
    QsbrPtr qsbr;
    std::unique_ptr<FlowTable> flows;
    std::unique_ptr<FlowTable6> flows6;
    std::unique_ptr<FragTable> frags;
    std::vector<RingPtr> remove_rings;
    std::unique_ptr<WorkerShared> shared;
    std::vector<std::unique_ptr<rte_spinlock_t[]>> tx_locks;
    std::vector<std::unique_ptr<Worker>> workers;
    std::vector<RingPtr> sync_rings;  // per worker, to the sync thread (ha on)
    std::unique_ptr<Syncer> sync;     // stopped before what it reads goes
    bool launched = false;

    ~Runtime() { stop_workers(); }
    void stop_workers() {
        if (!launched) return;
        shared->stop.store(true);
        rte_eal_mp_wait_lcore();
        launched = false;
    }
};

// Writes `value` to a sysctl file; false when it is not there (IPv6 off) or refuses.
bool write_sysctl(const std::string& path, const char* value) {
    FILE* f = std::fopen(path.c_str(), "we");
    if (!f) return false;
    const bool ok = std::fputs(value, f) >= 0;
    return std::fclose(f) == 0 && ok;
}

// A port's host interface (host_path): a TAP device (DPDK's net_tap) named as configured, with the
// port's MAC and MTU (its addresses: sync_host_addresses), so that the kernel of this namespace
// answers what the dataplane hands it (BGP, BFD, SSH, health checks) and resolves its own
// neighbors on the port's link. It takes no router advertisement (the dataplane does not hand it
// any): its addresses are the config's.
std::string open_host_interface(Runtime& rt, const PortConfig& pc, const rte_ether_addr& mac, size_t p) {
    const std::string vdev = fmt::format("net_tap_sg{}", p);
    const uint8_t* b = mac.addr_bytes;
    const std::string args = fmt::format("iface={},mac={:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", pc.host_interface,
                                         b[0], b[1], b[2], b[3], b[4], b[5]);
    const std::string what = fmt::format("port {}: host interface {}", pc.name, pc.host_interface);
    if (int rc = rte_dev_probe((vdev + "," + args).c_str()); rc != 0)
        return fmt::format("{}: cannot create the TAP device ({}; is /dev/net/tun there, is the name free?)", what,
                           rte_strerror(rc < 0 ? -rc : rc));
    const std::string conf = "/proc/sys/net/ipv6/conf/" + pc.host_interface + "/";
    (void)write_sysctl(conf + "accept_ra", "0");
    (void)write_sysctl(conf + "autoconf", "0");
    rt.hosts.emplace_back();
    const PortConfig hc{.name = pc.name + " host interface " + pc.host_interface, .device = vdev, .mtu = pc.mtu};
    if (std::string err = rt.hosts.back().open(hc, 1, rt.pool.get()); !err.empty()) return err;
    const int ifindex = static_cast<int>(if_nametoindex(pc.host_interface.c_str()));
    if (ifindex == 0) return fmt::format("{}: not found after creating it", what);
    rt.host_ifindex[p] = ifindex;
    return {};
}

// The host interfaces' addresses from what they carry to what `cfg` gives them
// (host_interface_addresses): those gone removed first, then those new added. Returns the
// failures, one line each ("" when none); what succeeded is remembered.
std::string sync_host_addresses(Runtime& rt, const Config& cfg) {
    const auto want = host_interface_addresses(cfg);
    std::string errors;
    Netlink nl;
    for (size_t p = 0; p < rt.host_ifindex.size() && p < want.size(); ++p) {
        const int ifindex = rt.host_ifindex[p];
        if (ifindex == 0) continue;
        auto& have = rt.host_addresses[p];
        const std::string what = fmt::format("port {}: host interface {}", cfg.dataplane.ports[p].name,
                                             cfg.dataplane.ports[p].host_interface);
        for (auto it = have.begin(); it != have.end();) {
            if (std::find(want[p].begin(), want[p].end(), *it) != want[p].end()) {
                ++it;
                continue;
            }
            if (std::string e = nl.del_address(ifindex, *it); !e.empty()) {
                errors += fmt::format("{}: {} {}\n", what, e, format_cidr(*it));
                ++it;
            } else {
                it = have.erase(it);
            }
        }
        for (const IpCidr& a : want[p]) {
            if (std::find(have.begin(), have.end(), a) != have.end()) continue;
            if (std::string e = nl.add_address(ifindex, a); !e.empty())
                errors += fmt::format("{}: {} {}\n", what, e, format_cidr(a));
            else
                have.push_back(a);
        }
    }
    return errors;
}

// EAL, pool, ports, RCU, flow table, rings, workers (not yet launched). "" or what failed; what
// was built is given back by the Runtime either way.
std::string build_runtime(Runtime& rt, const DataplaneConfig& dpc, const HaConfig& ha,
                          const std::vector<std::string>& eal_extra) {
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
    std::vector<uint16_t> ids;  // the ports', then the host interfaces' (WorkerShared)
    shared.port_macs = FixedArray<rte_ether_addr>(dpc.ports.size());
    for (size_t p = 0; p < dpc.ports.size(); ++p) {
        rt.ports.emplace_back();
        if (err = rt.ports.back().open(dpc.ports[p], dpc.workers, rt.pool.get()); !err.empty()) return err;
        ids.push_back(rt.ports.back().id());
        shared.port_macs[p] = rt.ports.back().mac();
    }
    std::vector<uint16_t> host_of(dpc.ports.size(), Output::kNoHost);
    rt.host_ifindex.assign(dpc.ports.size(), 0);
    rt.host_addresses.assign(dpc.ports.size(), {});
    std::vector<WorkerShared::Host> hosts;
    for (size_t p = 0; p < dpc.ports.size(); ++p) {
        if (dpc.ports[p].host_interface.empty()) continue;
        if (err = open_host_interface(rt, dpc.ports[p], shared.port_macs[p], p); !err.empty()) return err;
        host_of[p] = static_cast<uint16_t>(ids.size());
        hosts.push_back({static_cast<uint16_t>(ids.size()), static_cast<uint16_t>(p)});
        ids.push_back(rt.hosts.back().id());
    }
    shared.port_ids = FixedArray<uint16_t>(std::move(ids));
    shared.host_of = FixedArray<uint16_t>(std::move(host_of));
    shared.hosts = FixedArray<WorkerShared::Host>(std::move(hosts));
    shared.punt_control_per_second = dpc.punt_control_per_second;
    shared.punt_other_per_second = dpc.punt_other_per_second;
    // QSBR threads: the workers (0..workers-1), the control thread's record scans (workers) and,
    // replicating, the sync thread (sync_qsbr_id). The tables' owners: the workers and, replicating,
    // the sync thread (sync_owner), which inserts the replicas.
    if (!(rt.qsbr = create_qsbr(dpc.workers + (ha.enabled() ? 2u : 1u)))) return "RCU state: out of memory";
    shared.qsbr = rt.qsbr.get();
    const uint16_t owners = static_cast<uint16_t>(dpc.workers + (ha.enabled() ? 1 : 0));
    rt.flows = FlowTable::create({.capacity = dpc.flow_capacity, .owners = owners, .qsbr = rt.qsbr.get(),
                                  .timeouts = dpc.timeouts, .scanner = dpc.workers,
                                  .new_flows_per_source = dpc.new_flows_per_source});
    if (!rt.flows) return fmt::format("flow table of {} flows: out of memory", dpc.flow_capacity);
    rt.flows6 = FlowTable6::create({.capacity = dpc.flow_capacity_v6, .owners = owners, .qsbr = rt.qsbr.get(),
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
    if (ha.enabled()) {
        for (uint16_t w = 0; w < dpc.workers; ++w) {
            RingPtr r(rte_ring_create_elem(fmt::format("svcgate_sync{}", w).c_str(), sizeof(uint32_t), 1u << 16,
                                           SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ));
            if (!r) return "flow replication rings: out of memory";
            rt.workers[w]->set_sync_ring(r.get());
            rt.sync_rings.push_back(std::move(r));
        }
    }
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
    // A host interface has one transmit queue, shared by the workers under a lock (what goes to
    // the kernel is little, and rate-limited).
    rte_spinlock_t* host_locks = nullptr;
    if (!rt.hosts.empty()) {
        rt.tx_locks.push_back(std::make_unique<rte_spinlock_t[]>(rt.hosts.size()));
        host_locks = rt.tx_locks.back().get();
        for (size_t h = 0; h < rt.hosts.size(); ++h) rte_spinlock_init(&host_locks[h]);
    }
    for (uint16_t w = 0; w < dpc.workers; ++w) {
        std::vector<TxQueue> tx(rt.ports.size() + rt.hosts.size());
        for (size_t p = 0; p < rt.ports.size(); ++p) {
            tx[p].queue = static_cast<uint16_t>(w % rt.ports[p].tx_queues());
            if (locks[p]) tx[p].lock = &locks[p][tx[p].queue];
        }
        for (size_t h = 0; h < rt.hosts.size(); ++h) tx[rt.ports.size() + h] = TxQueue{0, &host_locks[h]};
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
    keep(d.punt_control_per_second, r.punt_control_per_second, "dataplane.host_path.control_per_second");
    keep(d.punt_other_per_second, r.punt_other_per_second, "dataplane.host_path.other_per_second");
    keep(next.routing.table, running.routing.table, "routing.table");  // the announcer writes the running one
    keep(next.ha, running.ha, "ha");  // the sync thread, the tables' owners
    // A port's addresses may change; the list of ports (names, devices) may not.
    bool same_ports = d.ports.size() == r.ports.size();
    for (size_t i = 0; same_ports && i < d.ports.size(); ++i)
        same_ports = d.ports[i].name == r.ports[i].name && d.ports[i].device == r.ports[i].device &&
                     d.ports[i].mtu == r.ports[i].mtu && d.ports[i].host_interface == r.ports[i].host_interface &&
                     d.ports[i].mac == r.ports[i].mac;
    if (!same_ports) {
        d.ports = r.ports;
        changed += std::string(changed.empty() ? "" : ", ") + "dataplane.ports";
    }
    keep(next.control.socket, running.control.socket, "control.socket");
    keep(next.control.metrics, running.control.metrics, "control.metrics");
    return changed;
}

// The config as published: `cfg` with the addresses taken over from dead peers (sync.h) on the
// ports whose subnets hold them, as host routes (/32, /128): answered (ARP, ND), their flows
// served, but never a connected route or a masquerade source of their own.
Config with_adopted(const Config& cfg, const std::vector<IpAddr>& adopted) {
    Config out = cfg;
    for (const IpAddr& a : adopted) {
        for (PortConfig& p : out.dataplane.ports) {
            const bool on_link = std::any_of(p.addresses.begin(), p.addresses.end(), [&](const IpCidr& c) {
                return c.contains(a) && c.addr != a;
            });
            if (!on_link) continue;
            const IpCidr host{a, static_cast<uint8_t>(a.is_v4() ? 32 : 128)};
            if (std::find(p.addresses.begin(), p.addresses.end(), host) == p.addresses.end()) p.addresses.push_back(host);
            break;
        }
    }
    return out;
}

// This gateway's addresses on ha.takeover_ports: what a survivor takes over when it dies.
std::vector<IpAddr> takeover_addresses(const Config& cfg) {
    std::vector<IpAddr> out;
    for (const std::string& name : cfg.ha.takeover_ports)
        for (const PortConfig& p : cfg.dataplane.ports)
            if (p.name == name)
                for (const IpCidr& c : p.addresses) out.push_back(c.addr);
    return out;
}

// Reload: read, keep what takes a restart, publish. Returns the line to log and to tell svcgatectl.
std::string reload(DaemonState& st, Publisher& pub, WorkerShared& shared, const std::string& trigger,
                   const std::vector<IpAddr>& adopted) {
    // A config that keeps failing (a file saved over and over) or a neighbor list far larger than
    // the cache must not flood the journal.
    static RateLimit full(8, std::chrono::seconds(60)), refused(5, std::chrono::seconds(60));
    const auto t0 = std::chrono::steady_clock::now();
    PublishResult r;
    try {
        Config next = load_config_file(st.config_path);
        const std::string restart = keep_running_settings(next, st.cfg);
        r = pub.publish(with_adopted(next, adopted), [&] {
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

// This gateway's TCP connections not yet closing, and its datagram flows that carried a packet in
// the last 10 s: what a drain waits for (replicas of the peers' flows are theirs to wait for).
// Replicating (`replicated`), a TCP connection counts only while it too carried a packet in the
// last 10 s: its peers hold it, and once the drain withdrew this gateway its packets go to them
// (each gateway then sees part of its close, so its state here may never reach the end).
template <typename K>
uint32_t open_connections(const BasicFlowTable<K>& table, uint32_t now, bool replicated) {
    const typename BasicFlowTable<K>::ScanGuard reading(table);
    uint32_t n = 0;
    for (uint32_t id = 0; id < table.capacity(); ++id) {
        const auto& f = table.flow(id);
        if (!f.live.load(std::memory_order_acquire) || f.origin.load(std::memory_order_relaxed) != 0) continue;
        const uint8_t sv = f.state.load(std::memory_order_relaxed);
        if (sv & kStateGone) continue;
        const uint32_t seen = f.last_seen.load(std::memory_order_relaxed);
        const bool recent = seen >= now || now - seen < 10;  // another worker's clock may be ahead of ours
        if (static_cast<Proto>(f.key[0].proto) == Proto::tcp) {
            const auto t = static_cast<TcpState>(sv & kStateMask);
            n += (t == TcpState::syn_sent || t == TcpState::syn_recv || t == TcpState::established ||
                  t == TcpState::syn_sent2 || t == TcpState::close_wait) &&
                 (!replicated || recent);
        } else {
            n += recent;
        }
    }
    return n;
}

// The interface the announcement routes point at: the first host interface, else lo.
int first_host_interface(const Runtime& rt) {
    for (const int i : rt.host_ifindex)
        if (i != 0) return i;
    return static_cast<int>(if_nametoindex("lo"));
}

// The control loop's health duties (health.h, announce.h): every 100 ms the state; the
// announcement table when its set changes (and every 10 s, should someone have flushed it); the
// healthCheckNodePort listeners after each reload; while draining, the connections left once a
// second. done() turns true when a drain is over.
class HealthKeeper {
public:
    HealthKeeper(DaemonState& st, Runtime& rt, const Publisher& pub)
        : st_(st), rt_(rt), pub_(pub), checks_(st),
          announcer_(st.cfg.routing.table, first_host_interface(rt)) {
        token_ = rte_rcu_qsbr_start(rt.qsbr.get());
        last_progress_ = std::chrono::steady_clock::now();
        reconfigured();
    }
    // After a reload: the set to announce and the health-check listeners.
    void reconfigured() {
        set_ = announce_set(st_.cfg);
        if (std::string e = checks_.update(health_check_ports(st_.cfg)); !e.empty()) log_err(e);
        next_sync_ = {};
    }
    void tick() {
        const auto now = std::chrono::steady_clock::now();
        if (now < next_tick_) return;
        next_tick_ = now + std::chrono::milliseconds(100);
        // Progress: every worker online when the token was taken has passed a quiescent state.
        if (rte_rcu_qsbr_check(rt_.qsbr.get(), token_, false) == 1) {
            last_progress_ = now;
            token_ = rte_rcu_qsbr_start(rt_.qsbr.get());
        }
        bool up = true;
        for (const Port& p : rt_.ports) {
            rte_eth_link link{};
            rte_eth_link_get_nowait(p.id(), &link);
            up = up && link.link_status;
        }
        uint32_t left = 0;
        bool counted = false;
        const bool draining = [&] {
            std::lock_guard lk(st_.mu);
            return st_.health.draining;
        }();
        if (draining && now >= next_count_) {
            next_count_ = now + std::chrono::seconds(1);
            const uint32_t t = flow_clock_now();
            const bool replicated = rt_.sync != nullptr;
            left = open_connections(*rt_.flows, t, replicated) + open_connections(*rt_.flows6, t, replicated);
            counted = true;
        }
        std::vector<IpCidr> want;
        {
            std::lock_guard lk(st_.mu);
            HealthState& h = st_.health;
            h.live = pub_.generation() > 0 &&
                     std::chrono::duration<double>(now - last_progress_).count() < HealthState::kLiveSeconds;
            h.ports_up = up;
            h.synced = !st_.sync || st_.sync->ready();
            h.healthy = h.live && up && !h.draining && h.synced;
            h.last_update_unix = st_.reload.last_ok_unix;
            if (h.draining && counted) h.connections_left = left, drain_seen_ = true;
            if (!h.draining) drain_seen_ = false;
            if (h.healthy && announcer_.table() != 0) want = set_;
            if (h.healthy != was_healthy_)
                log(fmt::format("health: {}{}", h.healthy ? "healthy" : "unhealthy",
                                h.healthy ? ", announcing" : fmt::format(" (live {}, ports up {}, draining {}, flows synced {}), "
                                                                         "withdrawing", h.live, up, h.draining, h.synced)));
            was_healthy_ = h.healthy;
        }
        if (want != announced_ || now >= next_sync_) {
            const std::string e = announcer_.sync(want);
            announced_ = want;
            next_sync_ = now + std::chrono::seconds(10);
            std::vector<std::string> names;
            for (const IpCidr& c : want) names.push_back(format_cidr(c));
            std::lock_guard lk(st_.mu);
            if (!e.empty() && e != st_.health.announce_error) log_err("announcing: " + e);
            st_.health.announce_error = e;
            st_.health.announced = std::move(names);
        }
    }
    // A drain is over: no connection left (counted after the drain began), but not before the
    // withdrawal has had kDrainMinSeconds to reach the routers (new connections may still arrive
    // until then); or its deadline.
    bool done() {
        std::lock_guard lk(st_.mu);
        const HealthState& h = st_.health;
        if (!h.draining || !drain_seen_) return false;
        const double now = unix_now();
        if (h.connections_left == 0 && now - h.drain_started_unix >= HealthState::kDrainMinSeconds) {
            log(fmt::format("drained: no connection left after {:.1f} s", now - h.drain_started_unix));
            return true;
        }
        if (now >= h.drain_deadline_unix) {
            log_warning(fmt::format("drain timeout: {} connections left", h.connections_left));
            return true;
        }
        return false;
    }

private:
    DaemonState& st_;
    Runtime& rt_;
    const Publisher& pub_;
    HealthCheckServers checks_;
    Announcer announcer_;
    std::vector<IpCidr> set_, announced_;
    uint64_t token_ = 0;
    bool was_healthy_ = false, drain_seen_ = false;
    std::chrono::steady_clock::time_point last_progress_, next_tick_{}, next_sync_{}, next_count_{};
};

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
                    st.cfg.control.metrics ? "http://" + format_host_port(*st.cfg.control.metrics) + "/metrics" : "off"));

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

    HealthKeeper health(st, rt, pub);
    // Replicating (sync.h): the dead peers' addresses this gateway holds, published with the config.
    std::vector<IpAddr> adopted;
    uint64_t adopted_gen = 0;
    bool sync_ready = false;
    auto follow_sync = [&] {
        if (!rt.sync) return;
        if (!sync_ready && rt.sync->ready()) {
            sync_ready = true;
            shared.announce.fetch_add(1);  // its own addresses back from whoever held them
        }
        const uint64_t g = rt.sync->adopted_generation();
        if (g == adopted_gen) return;
        adopted_gen = g;
        adopted = rt.sync->adopted();
        try {
            pub.publish(with_adopted(st.cfg, adopted));
            shared.announce.fetch_add(1);
            std::string list;
            for (const IpAddr& a : adopted) list += " " + format_ip(a);
            log(fmt::format("ha: serving {} addresses of dead peers:{}", adopted.size(), list.empty() ? " none" : list));
        } catch (const std::exception& e) {
            log_err(fmt::format("ha: cannot publish the addresses taken over: {}", e.what()));
        }
    };
    auto do_reload = [&](const std::string& trigger) {
        notify.reloading();
        std::string r = reload(st, pub, shared, trigger, adopted);
        if (std::string e = sync_host_addresses(rt, st.cfg); !e.empty()) {
            e.pop_back();
            log_err(e);
        }
        rewatch();
        health.reconfigured();
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
        health.tick();
        follow_sync();
        if (health.done()) break;
        if (stall && std::chrono::steady_clock::now() >= stall_at && !shared.test_stall.exchange(true))
            log_warning("test hook: the workers stall (SVCGATE_TEST_STALL_AFTER)");
        // Slots that flows stopped holding since the last reload go back, once a second.
        if (const auto now = std::chrono::steady_clock::now(); now - last_tick >= std::chrono::seconds(1)) {
            pub.tick();
            last_tick = now;
        }
    }
}

// What would keep a host interface from being created, found before starting (and by --check):
// no TUN/TAP driver, or the name taken by an interface that is not a TAP device (one svcgate
// left, or one of a running svcgate, is: net_tap takes it over).
std::vector<std::string> host_interface_problems(const Config& cfg) {
    std::vector<std::string> out;
    for (const PortConfig& p : cfg.dataplane.ports) {
        if (p.host_interface.empty()) continue;
        const std::string what = fmt::format("{}:{}:{}: dataplane.ports {}: host_interface {}", p.mark.file.str(),
                                             p.mark.line, p.mark.column, p.name, p.host_interface);
        if (access("/dev/net/tun", R_OK | W_OK) != 0)
            out.push_back(what + ": cannot be created: /dev/net/tun is missing or not writable (TUN/TAP driver)");
        const std::string sys = "/sys/class/net/" + p.host_interface;
        if (access(sys.c_str(), F_OK) == 0 && access((sys + "/tun_flags").c_str(), F_OK) != 0)
            out.push_back(what + ": cannot be created: an interface of that name exists and is not a TAP device");
    }
    return out;
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
    const std::string err = restore_flow_state(path, gateway_identity(st.cfg), st.cfg.dataplane.state_max_age,
                                               importer, flow_clock_now(),
                                               static_cast<uint64_t>(unix_now()), r);
    if (!err.empty()) {
        log_err(fmt::format("flow state {}: refused, starting without it: {}", path, err));
        return;
    }
    if (!r.found) {
        log(fmt::format("flow state {}: none, starting with an empty flow table", path));
        return;
    }
    using O = FlowImporter::Outcome;
    auto n = [&r](O o) { return r.outcome[static_cast<unsigned>(o)]; };
    log(fmt::format("flow state {}: restored {} of {} flows written {} s ago in {:.0f} ms; left out: {} whose service "
                    "port or endpoint is gone, {} expired, {} already there, {} clashing, {} for want of room",
                    path, n(O::inserted), r.records, r.age,
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                    n(O::gone), n(O::expired), n(O::exists), n(O::clash), n(O::full)));
    for (size_t w = 0; w < rt.workers.size(); ++w) rt.workers[w]->set_snat_cursor(importer.snat_cursor(static_cast<uint16_t>(w)));
    if (!r.unlink_error.empty()) log_warning(fmt::format("flow state {}: cannot remove it after reading: {}", path, r.unlink_error));
}

// Every live flow to the state file, the workers stopped.
void save_flows(const DaemonState& st, const Runtime& rt) {
    const std::string& path = st.cfg.dataplane.state_file;
    const auto t0 = std::chrono::steady_clock::now();
    uint32_t written = 0;
    if (std::string e = save_flow_state(path, gateway_identity(st.cfg), *rt.flows, rt.flows6.get(), flow_clock_now(),
                                        static_cast<uint64_t>(unix_now()), written);
        !e.empty()) {
        log_err(fmt::format("flow state: not written: {}", e));
        return;
    }
    log(fmt::format("flow state {}: wrote {} flows in {:.0f} ms", path, written,
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()));
}

}  // namespace

int check_config(const std::string& path) {
    try {
        Config cfg = load_config_file(path);
        for (const auto& w : cfg.warnings) fmt::print(stderr, "warning: {}\n", w.str());
        auto snap = build_snapshot(cfg, 1, nullptr, BuildMode::validate);  // no DPDK: nothing is started
        auto problems = host_interface_problems(cfg);
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
    auto problems = host_interface_problems(st.cfg);
    for (std::string& m : state_file_problems(st.cfg)) problems.push_back(std::move(m));
    if (!problems.empty()) {
        for (const std::string& m : problems) log_err(m);
        return 1;
    }
    const DataplaneConfig dpc = st.cfg.dataplane;

    Runtime rt;
    std::string err = build_runtime(rt, dpc, st.cfg.ha, opts.eal_extra);
    if (err.empty()) err = sync_host_addresses(rt, st.cfg);
    if (!err.empty()) {
        if (err.back() == '\n') err.pop_back();
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
    if (!dpc.state_file.empty()) {
        try {
            restore_flows(st, rt, shared);
        } catch (const std::exception& e) {  // out of memory reading it: start without it
            log_err(fmt::format("flow state {}: not restored: {}", dpc.state_file, e.what()));
        }
    }
    if (st.cfg.ha.enabled()) {
        Syncer::Wiring w{.flows = rt.flows.get(), .flows6 = rt.flows6.get(), .owner = sync_owner(dpc.workers),
                         .workers = dpc.workers, .rings = {}, .qsbr = rt.qsbr.get(), .qsbr_id = sync_qsbr_id(dpc.workers),
                         .snapshot = &shared.snapshot, .stats = &shared.stats,
                         .takeover = takeover_addresses(st.cfg)};
        for (const RingPtr& r : rt.sync_rings) w.rings.push_back(r.get());
        rt.sync = std::make_unique<Syncer>(st.cfg.ha, std::move(w));
        if (std::string e = rt.sync->start(); !e.empty()) {
            log_err(e);
            log("stopping");
            return 1;
        }
        st.sync = rt.sync.get();
        log(fmt::format("ha: replicating flows with {} peers; announcing once they have sent theirs",
                        st.cfg.ha.peers.size()));
    }
    // From here on workers run: they stop before the publisher's snapshots go, whatever the exit.
    struct StopWorkers {
        Runtime& rt;
        ~StopWorkers() { rt.stop_workers(); }
    } stop_workers{rt};

    serve(st, pub, rt);
    log("stopping");
    if (rt.sync) rt.sync->stop();  // its peers take over this gateway's addresses now
    rt.stop_workers();
    if (!st.cfg.dataplane.state_file.empty()) save_flows(st, rt);
    print_summary(st);
    return 0;
}

}  // namespace svcgate::ctl
