#include "control/api/metrics_collectors.h"

#include <fmt/format.h>

#include "control/base/address.h"
#include "control/config/yaml_config.h"
#include "dataplane/pipeline/verdict.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

void MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void MetricsText::sample(std::string_view name, std::string_view labels, uint64_t value) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, value) : fmt::format("{}{{{}}} {}\n", name, labels, value);
}

void MetricsText::sample(std::string_view name, std::string_view labels, int64_t value) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, value) : fmt::format("{}{{{}}} {}\n", name, labels, value);
}

void MetricsText::histogram(std::string_view name, std::string_view help, const Histogram& h) {
    family(name, "histogram", help);
    for (size_t i = 0; i < h.bounds().size(); ++i)
        out_ += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds()[i], h.buckets()[i]);
    out_ += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, h.count(), name, h.sum(), name,
                        h.count());
}

void MetricsText::sample(std::string_view name, std::string_view labels, double value, int decimals) {
    out_ += labels.empty() ? fmt::format("{} {:.{}f}\n", name, value, decimals)
                           : fmt::format("{}{{{}}} {:.{}f}\n", name, labels, value, decimals);
}

namespace {

// A service port's labels. A dual-stack Service's two families share its name; `family` tells
// them apart.
std::string service_labels(const ServiceSnapshot& s, uint32_t i) {
    const std::string& name = s.info(i).name;
    const auto colon = name.rfind(':');
    return fmt::format("service=\"{}\",port=\"{}\",protocol=\"{}\",family=\"{}\"", name.substr(0, colon),
                       name.substr(colon + 1), proto_name(s.services[i].proto),
                       s.services[i].family == Family::v6 ? "IPv6" : "IPv4");
}

}  // namespace

void collect_services(MetricsText& m, const ServiceSnapshot& s, const SlotRegistry& slots) {
    m.family("svcgate_service_packets_total", "counter", "Packets of a Service port's flows, both directions.");
    for (uint32_t i = 0; i < s.services.size(); ++i)
        m.sample("svcgate_service_packets_total", service_labels(s, i),
                 slots.service_total(s.services[i].slot).packets);
    m.family("svcgate_service_bytes_total", "counter", "Bytes of a Service port's flows, both directions.");
    for (uint32_t i = 0; i < s.services.size(); ++i)
        m.sample("svcgate_service_bytes_total", service_labels(s, i), slots.service_total(s.services[i].slot).bytes);
    struct Row {
        std::string labels;
        PacketCounter c;
        int32_t active;
    };
    std::vector<Row> rows;
    for (uint32_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const Endpoint& ep = s.endpoints[e];
            rows.push_back({fmt::format("{},endpoint=\"{}\"", service_labels(s, i),
                                        format_endpoint(ep.ip, rte_be_to_cpu_16(ep.port))),
                            slots.endpoint_total(ep.slot), slots.active(ep.slot)});
        }
    }
    m.family("svcgate_endpoint_packets_total", "counter", "Packets of flows to an endpoint, both directions.");
    for (const Row& r : rows) m.sample("svcgate_endpoint_packets_total", r.labels, r.c.packets);
    m.family("svcgate_endpoint_bytes_total", "counter", "Bytes of flows to an endpoint, both directions.");
    for (const Row& r : rows) m.sample("svcgate_endpoint_bytes_total", r.labels, r.c.bytes);
    m.family("svcgate_endpoint_flows", "gauge", "Live flows to an endpoint (what lc, sed and nq read).");
    for (const Row& r : rows) m.sample("svcgate_endpoint_flows", r.labels, int64_t{r.active});
}

void collect_flows(MetricsText& m, const FlowGauges& g, const WorkerCounters& t) {
    m.family("svcgate_flows", "gauge", "Flows in the flow table.");
    m.sample("svcgate_flows", "family=\"IPv4\"", g.live4);
    if (g.has_v6) m.sample("svcgate_flows", "family=\"IPv6\"", g.live6);
    m.family("svcgate_flow_capacity", "gauge", "Flows the flow table can hold.");
    m.sample("svcgate_flow_capacity", "family=\"IPv4\"", g.capacity4);
    if (g.has_v6) m.sample("svcgate_flow_capacity", "family=\"IPv6\"", g.capacity6);
    m.family("svcgate_flows_created_total", "counter", "Flows created.");
    m.sample("svcgate_flows_created_total", "", t.flows_created);
    m.family("svcgate_flows_early_dropped_total", "counter", "Embryonic flows evicted to make room for new ones.");
    m.sample("svcgate_flows_early_dropped_total", "", t.flows_early_dropped);
    m.family("svcgate_flows_port_remapped_total", "counter",
             "New flows whose client source port was remapped because their reply tuple was in use.");
    m.sample("svcgate_flows_port_remapped_total", "", t.flows_port_remapped);
    m.family("svcgate_flows_reopened_total", "counter",
             "Closed TCP connections (TIME_WAIT, CLOSE) a client's SYN on the same tuple replaced with a new one.");
    m.sample("svcgate_flows_reopened_total", "", t.flows_reopened);
}

void collect_fragments(MetricsText& m, const WorkerCounters& t, uint64_t held, uint64_t datagrams) {
    m.family("svcgate_fragments_total", "counter",
             "Fragments by what became of them: held (a later fragment before its first), released (sent on "
             "once its first came), fragmented (IPv4 packets split to the egress MTU) and fragments_out (what they "
             "became); the drops are svcgate_drops_total{reason=~\"frag_.*\"}.");
    m.sample("svcgate_fragments_total", "outcome=\"held\"", t.frag_stored);
    m.sample("svcgate_fragments_total", "outcome=\"released\"", t.frag_released);
    m.sample("svcgate_fragments_total", "outcome=\"fragmented\"", t.frag_out_packets);
    m.sample("svcgate_fragments_total", "outcome=\"fragments_out\"", t.frag_out_fragments);
    m.family("svcgate_fragments_held", "gauge", "Later fragments waiting for their first fragment.");
    m.sample("svcgate_fragments_held", "", held);
    m.family("svcgate_fragment_datagrams", "gauge", "Fragmented datagrams being tracked.");
    m.sample("svcgate_fragment_datagrams", "", datagrams);
}

void collect_verdicts(MetricsText& m, const WorkerCounters& t, uint64_t mbufs_in_use) {
    m.family("svcgate_packets_total", "counter", "Packets by verdict.");
    for (unsigned v = 0; v < kVerdicts; ++v)
        m.sample("svcgate_packets_total", fmt::format("verdict=\"{}\"", verdict_name(static_cast<Verdict>(v))),
                 t.verdicts[v]);
    m.family("svcgate_drops_total", "counter", "Packets dropped (freed), by reason.");
    for (unsigned r = 1; r < kDropReasons; ++r)
        m.sample("svcgate_drops_total", fmt::format("reason=\"{}\"", drop_reason_name(static_cast<DropReason>(r))),
                 t.drops[r]);
    m.family("svcgate_rejects_total", "counter", "Packets refused with a TCP RST or ICMP port unreachable, by reason.");
    for (unsigned r = 1; r < kDropReasons; ++r) {
        const std::string_view name = drop_reason_name(static_cast<DropReason>(r));
        if (name.starts_with("reject_") && r != static_cast<unsigned>(DropReason::reject_failed))
            m.sample("svcgate_rejects_total", fmt::format("reason=\"{}\"", name), t.rejects[r]);
    }
    m.family("svcgate_mbufs_in_use", "gauge", "Packet buffers taken from the pool (rings, bursts, held, caches).");
    m.sample("svcgate_mbufs_in_use", "", mbufs_in_use);
}

void collect_ports(MetricsText& m, std::span<const PortSample> ports) {
    m.family("svcgate_port_packets_total", "counter", "Packets per port and direction (the NIC's counters).");
    for (const PortSample& p : ports) {
        m.sample("svcgate_port_packets_total", fmt::format("port=\"{}\",direction=\"rx\"", p.name), p.rx);
        m.sample("svcgate_port_packets_total", fmt::format("port=\"{}\",direction=\"tx\"", p.name), p.tx);
    }
    m.family("svcgate_port_link_up", "gauge", "1 when the port's link is up.");
    for (const PortSample& p : ports)
        m.sample("svcgate_port_link_up", fmt::format("port=\"{}\"", p.name), p.link_up ? uint64_t{1} : uint64_t{0});
}

void collect_host_path(MetricsText& m, const WorkerCounters& t, const HealthState& h) {
    m.family(
        "svcgate_host_path_packets_total", "counter",
        "The host path: packets handed to the ports' host interfaces (punted) and frames the kernel sent out "
        "through the ports (out, out_dropped); over the punt budget: svcgate_drops_total{reason=\"punt_limited\"}.");
    m.sample("svcgate_host_path_packets_total", "direction=\"punted\"", t.punted);
    m.sample("svcgate_host_path_packets_total", "direction=\"out\"", t.host_out);
    m.sample("svcgate_host_path_packets_total", "direction=\"out_dropped\"", t.host_out_dropped);
    m.family("svcgate_healthy", "gauge", "1 while /healthz answers 200 (live, ports up, not draining).");
    m.sample("svcgate_healthy", "", h.healthy ? uint64_t{1} : uint64_t{0});
    m.family("svcgate_draining", "gauge", "1 while draining (svcgatectl drain).");
    m.sample("svcgate_draining", "", h.draining ? uint64_t{1} : uint64_t{0});
    m.family("svcgate_announced_prefixes", "gauge", "Prefixes in the announcement table (routing.table).");
    m.sample("svcgate_announced_prefixes", "", static_cast<uint64_t>(h.announced.size()));
}

void collect_sync(MetricsText& m, const SyncStatus& y, const WorkerCounters& t) {
    m.family("svcgate_sync_ready", "gauge", "1 once the live peers have sent this gateway their flows (ha).");
    m.sample("svcgate_sync_ready", "", y.ready ? uint64_t{1} : uint64_t{0});
    m.family("svcgate_sync_peer_up", "gauge", "1 while a peer is heard from (ha.peers).");
    for (const SyncPeerStatus& p : y.peers)
        m.sample("svcgate_sync_peer_up", fmt::format("peer=\"{}\"", p.address), p.alive ? uint64_t{1} : uint64_t{0});
    m.family("svcgate_sync_peer_last_heard_seconds", "gauge",
             "Seconds since a peer's last authentic datagram (-1: never).");
    for (const SyncPeerStatus& p : y.peers)
        m.sample("svcgate_sync_peer_last_heard_seconds", fmt::format("peer=\"{}\"", p.address), p.last_heard_seconds,
                 3);
    m.family("svcgate_sync_flows_total", "counter", "Flow records sent to and received from each peer.");
    for (const SyncPeerStatus& p : y.peers) {
        m.sample("svcgate_sync_flows_total", fmt::format("peer=\"{}\",direction=\"sent\"", p.address), p.flows_sent);
        m.sample("svcgate_sync_flows_total", fmt::format("peer=\"{}\",direction=\"received\"", p.address),
                 p.flows_received);
    }
    m.family("svcgate_sync_queued", "gauge", "The replication lag: flows the workers handed on, not yet sent.");
    m.sample("svcgate_sync_queued", "", uint64_t{y.queued});
    m.family("svcgate_sync_replicas", "gauge", "Replicas of the peers' flows held here (not taken over).");
    m.sample("svcgate_sync_replicas", "", uint64_t{y.replicas});
    m.family("svcgate_sync_takeovers_total", "counter",
             "Replicas that carried a packet here and so became this gateway's.");
    m.sample("svcgate_sync_takeovers_total", "", t.takeovers);
    m.family("svcgate_sync_events_total", "counter",
             "Flows the workers handed to the sync thread (refused: ring full).");
    m.sample("svcgate_sync_events_total", "outcome=\"taken\"", t.sync_events);
    m.sample("svcgate_sync_events_total", "outcome=\"ring_full\"", t.sync_ring_full);
    m.family("svcgate_sync_drops_total", "counter", "Replication datagrams (and records) dropped, by reason.");
    for (unsigned d = 0; d < sync::kDrops; ++d)
        m.sample("svcgate_sync_drops_total", fmt::format("reason=\"{}\"", sync::drop_name(static_cast<sync::Drop>(d))),
                 y.drops[d]);
    for (unsigned d = 0; d < kRecordDrops; ++d)
        m.sample("svcgate_sync_drops_total",
                 fmt::format("reason=\"record_{}\"", record_drop_name(static_cast<RecordDrop>(d))), y.record_drops[d]);
}

void collect_reload(MetricsText& m, const ReloadStatus& r, uint64_t generation, std::string_view version,
                    std::string_view dpdk) {
    m.family("svcgate_reloads_total", "counter", "Config reloads by result.");
    m.sample("svcgate_reloads_total", "result=\"ok\"", r.ok);
    m.sample("svcgate_reloads_total", "result=\"failed\"", r.failed);
    m.family("svcgate_last_reload_duration_seconds", "gauge",
             "The last successful reload: file read to published snapshot.");
    m.str() += fmt::format("svcgate_last_reload_duration_seconds {}\n", r.last_seconds);
    // kube-proxy's sync_proxy_rules_duration_seconds and sync_proxy_rules_last_timestamp_seconds,
    // under svcgate's names (docs/operations.md).
    m.histogram("svcgate_reload_duration_seconds", "Successful reloads: file read to published snapshot.", r.durations);
    m.family("svcgate_reload_last_success_timestamp_seconds", "gauge",
             "When the config in service was published (start or last successful reload), Unix time.");
    m.sample("svcgate_reload_last_success_timestamp_seconds", "", r.last_ok_unix, 3);
    m.family("svcgate_build_info", "gauge", "Always 1: the version of svcgate and of the DPDK it runs on.");
    m.sample("svcgate_build_info", fmt::format("version=\"{}\",dpdk=\"{}\"", version, dpdk), uint64_t{1});
    m.family("svcgate_config_generation", "gauge", "Generation of the config in service.");
    m.sample("svcgate_config_generation", "", generation);
}

}  // namespace svcgate::ctl
