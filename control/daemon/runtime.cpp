#include "control/daemon/runtime.h"

#include <net/if.h>

#include <chrono>

#include <fmt/format.h>
#include <rte_lcore.h>

#include "control/base/file.h"
#include "control/base/log.h"
#include "control/daemon/host_interface.h"
#include "control/daemon/queues.h"
#include "control/trace/trace.h"
#include "dataplane/base/table_memory.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

// What the device of port `p` (its first port) is opened with: the largest MTU of its ports, the
// MAC one of them sets (--check refuses two), and a bond's driver arguments for its name.
PortConfig device_config(const DataplaneConfig& dpc, size_t p) {
    PortConfig pc = dpc.ports[p];
    for (const PortConfig& o : dpc.ports) {
        if (o.device != pc.device) continue;
        pc.mtu = std::max(pc.mtu, o.mtu);
        if (o.mac) pc.mac = o.mac;
    }
    if (const BondConfig* b = bond_of(dpc, pc.device)) pc.device = bond_device(*b);
    return pc;
}

// VLAN ports (dataplane/pipeline/vlan.h): each device with a tagged port gets its map of VLAN IDs
// to ports, polled under its first port, and each of its ports its tag. And the 802.3ad bonds'
// first ports, whose transmit queues the workers call when idle (worker.h: kick_ports).
void share_devices(Runtime& rt, const DataplaneConfig& dpc) {
    WorkerShared& shared = *rt.shared;
    std::vector<uint16_t> tags(dpc.ports.size(), 0);
    std::vector<VlanMap*> maps(dpc.ports.size(), nullptr);  // by the device's first port
    for (size_t p = 0; p < dpc.ports.size(); ++p) {
        const PortConfig& pc = dpc.ports[p];
        const bool trunk = std::any_of(dpc.ports.begin(), dpc.ports.end(),
                                       [&](const PortConfig& o) { return o.device == pc.device && o.vlan != 0; });
        if (!trunk) continue;
        VlanMap*& map = maps[rt.device_of[p]];
        if (!map) map = rt.vlan_maps.emplace_back(std::make_unique<VlanMap>()).get();
        map->port[pc.vlan] = static_cast<uint16_t>(p);
        tags[p] = static_cast<uint16_t>(WorkerShared::kPortOnTrunk | pc.vlan);
        log_info(fmt::format("port {}: {} on device {}", pc.name,
                             pc.vlan ? fmt::format("VLAN {}", pc.vlan) : std::string("untagged"), pc.device));
    }
    shared.port_vlans = FixedArray<uint16_t>(std::move(tags));
    // An 802.3ad bond's first port: the workers call its transmit queues when idle (LACP).
    std::vector<uint16_t> kick;
    for (size_t p = 0; p < dpc.ports.size(); ++p)
        if (const BondConfig* b = bond_of(dpc, dpc.ports[p].device);
            b && b->mode == BondConfig::Mode::lacp && rt.device_of[p] == p)
            kick.push_back(static_cast<uint16_t>(p));
    shared.kick_ports = FixedArray<uint16_t>(std::move(kick));
    shared.vlan_maps = FixedArray<const VlanMap*>(std::vector<const VlanMap*>(maps.begin(), maps.end()));
}

// The ports, and their host interfaces where they have one (host_interface.h): opened, their ids,
// MACs and host interface indices handed to the workers' shared state.
Status open_ports(Runtime& rt, const DataplaneConfig& dpc) {
    WorkerShared& shared = *rt.shared;
    rt.ports.reserve(dpc.ports.size());
    std::vector<uint16_t> ids;  // the ports', then the host interfaces' (WorkerShared)
    shared.port_macs = FixedArray<rte_ether_addr>(dpc.ports.size());
    rt.device_of.assign(dpc.ports.size(), 0);
    for (size_t p = 0; p < dpc.ports.size(); ++p) {
        size_t first = 0;  // the first port on the same device: it opened the device
        while (dpc.ports[first].device != dpc.ports[p].device) ++first;
        rt.device_of[p] = first;
        rt.ports.emplace_back();
        if (first != p) {
            rt.ports.back().share(rt.ports[first]);
        } else {
            const PortConfig dc = device_config(dpc, p);
            if (Status s = rt.ports.back().open(dc, dpc.workers, rt.rx_pool(dc.mtu)); !s) return s;
        }
        ids.push_back(rt.ports.back().id());
        shared.port_macs[p] = rt.ports.back().mac();
    }
    share_devices(rt, dpc);
    std::vector<uint16_t> host_of(dpc.ports.size(), Output::kNoHost);
    rt.host_ifindex.assign(dpc.ports.size(), 0);
    rt.host_addresses.assign(dpc.ports.size(), {});
    std::vector<WorkerShared::Host> hosts;
    for (size_t p = 0; p < dpc.ports.size(); ++p) {
        if (dpc.ports[p].host_interface.empty()) continue;
        if (Status s = open_host_interface(rt, dpc.ports[p], shared.port_macs[p], p); !s) return s;
        host_of[p] = static_cast<uint16_t>(ids.size());
        hosts.push_back({static_cast<uint16_t>(ids.size()), static_cast<uint16_t>(p)});
        ids.push_back(rt.hosts.back().id());
    }
    shared.port_ids = FixedArray<uint16_t>(std::move(ids));
    shared.host_of = FixedArray<uint16_t>(std::move(host_of));
    shared.hosts = FixedArray<WorkerShared::Host>(std::move(hosts));
    shared.punt_control_per_second = dpc.punt_control_per_second;
    shared.punt_other_per_second = dpc.punt_other_per_second;
    return {};
}

// The RCU state, the flow tables of both families, the fragment table and the flow-removal rings.
// `count`: per-flow packets and octets, for the NAT events' ends.
Status create_tables(Runtime& rt, const DataplaneConfig& dpc, const HaConfig& ha, bool count) {
    WorkerShared& shared = *rt.shared;
    // The large tables ask for transparent huge pages (table_memory.h); a host that refuses them
    // runs, slower, and says so once.
    if (const auto thp = read_file("/sys/kernel/mm/transparent_hugepage/enabled"); thp && thp_selected(*thp) == "never")
        log_warning(
            "transparent huge pages are off (/sys/kernel/mm/transparent_hugepage/enabled: never): the flow "
            "tables, the Services' tables and the counters stay on 4 KiB pages, and lookups in them pay TLB "
            "misses; set it to madvise");
    // QSBR threads: the workers (0..workers-1), the control thread's record scans (workers) and,
    // replicating, the sync thread (sync_qsbr_id). The tables' owners: the workers and, replicating,
    // the sync thread (sync_owner), which inserts the replicas.
    if (!(rt.qsbr = create_qsbr(dpc.workers + (ha.enabled() ? 2u : 1u))))
        return Status::fail("RCU state: out of memory");
    shared.qsbr = rt.qsbr.get();
    const uint16_t owners = static_cast<uint16_t>(dpc.workers + (ha.enabled() ? 1 : 0));
    rt.flows = FlowTable::create({.capacity = dpc.flow_capacity,
                                  .owners = owners,
                                  .qsbr = rt.qsbr.get(),
                                  .timeouts = dpc.timeouts,
                                  .scanner = dpc.workers,
                                  .new_flows_per_source = dpc.new_flows_per_source,
                                  .count = count});
    if (!rt.flows) return Status::fail(fmt::format("flow table of {} flows: out of memory", dpc.flow_capacity));
    rt.flows6 = FlowTable6::create({.capacity = dpc.flow_capacity_v6,
                                    .owners = owners,
                                    .qsbr = rt.qsbr.get(),
                                    .timeouts = dpc.timeouts,
                                    .scanner = dpc.workers,
                                    .new_flows_per_source = dpc.new_flows_per_source,
                                    .count = count});
    if (!rt.flows6)
        return Status::fail(fmt::format("IPv6 flow table of {} flows: out of memory", dpc.flow_capacity_v6));
    rt.frags = FragTable::create(dpc.fragments);
    if (!rt.frags)
        return Status::fail(fmt::format("fragment table of {} datagrams: out of memory", dpc.fragments.max_datagrams));
    shared.frags = rt.frags.get();
    shared.icmp_errors_per_second = dpc.icmp_errors_per_second;
    shared.busy_poll = dpc.busy_poll;
    shared.latency_sampling = dpc.latency_sampling;
    shared.port_mtus = FixedArray<uint16_t>(dpc.ports.size());
    for (size_t p = 0; p < dpc.ports.size(); ++p) shared.port_mtus[p] = dpc.ports[p].mtu;
    shared.remove_rings = FixedArray<rte_ring*>(dpc.workers);
    for (uint16_t w = 0; w < dpc.workers; ++w) {
        RingPtr r(rte_ring_create(fmt::format("svcgate_rm{}", w).c_str(), 1u << 16, SOCKET_ID_ANY,
                                  RING_F_SP_ENQ | RING_F_SC_DEQ));
        if (!r) return Status::fail("flow removal rings: out of memory");
        shared.remove_rings[w] = r.get();
        rt.remove_rings.push_back(std::move(r));
    }
    return {};
}

// The workers (not yet launched), their replication rings and their queues.
Status create_workers(Runtime& rt, const DataplaneConfig& dpc, const HaConfig& ha) {
    WorkerShared& shared = *rt.shared;
    const uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (const Port& p : rt.ports) rt.rss.push_back(p.steering());
    for (uint16_t w = 0; w < dpc.workers; ++w) {
        rt.workers.push_back(std::make_unique<Worker>(shared, w, dpc.workers, *rt.flows, *rt.flows6, seed));
        rt.workers.back()->set_rss(rt.rss.data(), static_cast<uint16_t>(rt.rss.size()));
    }
    if (ha.enabled()) {
        for (uint16_t w = 0; w < dpc.workers; ++w) {
            RingPtr r(rte_ring_create_elem(fmt::format("svcgate_sync{}", w).c_str(), sizeof(uint32_t),
                                           Syncer::kEventRing, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ));
            if (!r) return Status::fail("flow replication rings: out of memory");
            rt.workers[w]->set_sync_ring(r.get());
            rt.sync_rings.push_back(std::move(r));
        }
    }
    // Queues to workers (queues.h); a transmit queue that workers share gets a lock.
    std::vector<uint16_t> rxq, txq;
    for (const Port& p : rt.ports) rxq.push_back(p.polls() ? p.rx_queues() : 0), txq.push_back(p.tx_queues());
    const QueuePlan plan = plan_queues(rxq, txq, dpc.workers);
    std::vector<rte_spinlock_t*> locks(rt.ports.size(), nullptr);
    for (size_t p = 0; p < rt.ports.size(); ++p) {
        if (!plan.tx_shared[p]) continue;
        if (rt.device_of[p] != p) {  // a VLAN port sends on its device's queues, under their locks
            locks[p] = locks[rt.device_of[p]];
            continue;
        }
        rt.tx_locks.push_back(std::make_unique<rte_spinlock_t[]>(rt.ports[p].tx_queues()));
        locks[p] = rt.tx_locks.back().get();
        for (uint16_t q = 0; q < rt.ports[p].tx_queues(); ++q) rte_spinlock_init(&locks[p][q]);
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
        std::vector<RxQueue> rx;
        for (const QueuePlan::Rx& q : plan.rx[w]) rx.push_back({q.port, q.queue});
        std::vector<TxQueue> tx(rt.ports.size() + rt.hosts.size());
        for (size_t p = 0; p < rt.ports.size(); ++p) {
            tx[p].queue = plan.tx[w][p];
            if (locks[p]) tx[p].lock = &locks[p][tx[p].queue];
        }
        for (size_t h = 0; h < rt.hosts.size(); ++h) tx[rt.ports.size() + h] = TxQueue{0, &host_locks[h]};
        rt.workers[w]->set_queues(std::move(rx), std::move(tx));
    }
    return {};
}

}  // namespace

// EAL, pool, ports, RCU, flow table, rings, workers (not yet launched); what was built is given
// back by the Runtime either way.
// export.ipfix on: each worker's ring of NAT events and the exporter that drains them. Single
// producer: the worker writes into the ring's slots in place (rte_ring_peek_zc.h), which needs it.
Status start_export(Runtime& rt, const IpfixConfig& ipfix) {
    if (!ipfix.enabled) return {};
    std::vector<rte_ring*> rings;
    for (size_t w = 0; w < rt.workers.size(); ++w) {
        RingPtr r(rte_ring_create_elem(fmt::format("svcgate_nat{}", w).c_str(), sizeof(dp::NatEvent),
                                       rte_align32pow2(ipfix.ring), SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ));
        if (!r) return Status::fail("NAT event rings: out of memory");
        rt.workers[w]->set_nat_ring(
            r.get(),
            static_cast<uint8_t>((ipfix.create ? 1u << static_cast<unsigned>(dp::NatEventType::create) : 0) |
                                 (ipfix.end ? 1u << static_cast<unsigned>(dp::NatEventType::end) : 0)));
        rings.push_back(r.get());
        rt.nat_rings.push_back(std::move(r));
    }
    rt.ipfix = std::make_unique<IpfixExporter>(ipfix, std::move(rings));
    return {};
}

Status build_runtime(Runtime& rt, const DataplaneConfig& dpc, const HaConfig& ha, const IpfixConfig& ipfix,
                     const std::vector<std::string>& eal_extra) {
    if (dpc.ports.empty()) return Status::fail("the config has no dataplane.ports");
    std::vector<std::string> args;
    if (Status s = eal_args(dpc, eal_extra, args); !s) return s;
    if (Status s = rt.eal.init(std::move(args)); !s) return s;
    if (rte_lcore_count() < 1u + dpc.workers)
        return Status::fail(fmt::format("{} workers need {} lcores (main + workers); EAL has {}", dpc.workers,
                                        dpc.workers + 1, rte_lcore_count()));
    if (Status s = create_packet_pools(dpc, rt.pool, rt.jumbo_pool); !s) return s;
    rt.shared = std::make_unique<WorkerShared>();
    WorkerShared& shared = *rt.shared;
    shared.pool = rt.pool.get();
    (void)pin_neighbors(shared.neighbors, shared.neighbors6, dpc.neighbors, {});
    if (Status s = open_ports(rt, dpc); !s) return s;
    if (Status s = create_tables(rt, dpc, ha, ipfix.enabled && ipfix.end); !s) return s;
    if (Status s = create_workers(rt, dpc, ha); !s) return s;
    return start_export(rt, ipfix);
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

// The interface the announcement routes point at: the first host interface, else lo.
int first_host_interface(const Runtime& rt) {
    for (const int i : rt.host_ifindex)
        if (i != 0) return i;
    return static_cast<int>(if_nametoindex("lo"));
}

}  // namespace svcgate::ctl
