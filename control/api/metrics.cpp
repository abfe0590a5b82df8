#include "control/api/metrics.h"

#include <arpa/inet.h>

#include <chrono>

#include <fmt/format.h>
#include <httplib.h>
#include <rte_ethdev.h>
#include <rte_version.h>

#include "control/api/commands.h"
#include "control/ha/sync.h"
#include "control/config/yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

std::string render_metrics(const DaemonState& st) {
    const ServiceSnapshot& s = st.snap();
    const SlotRegistry& slots = st.slots();
    const WorkerCounters t = sum_counters(st);
    std::string o;
    auto head = [&](const char* name, const char* type, const char* help) {
        o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    };
    auto svc_labels = [&](uint32_t i) {
        const std::string& name = s.info(i).name;
        const auto colon = name.rfind(':');
        // A dual-stack Service's two families share its name; `family` tells them apart.
        return fmt::format("service=\"{}\",port=\"{}\",protocol=\"{}\",family=\"{}\"", name.substr(0, colon),
                           name.substr(colon + 1), proto_name(s.services[i].proto),
                           s.services[i].family == Family::v6 ? "IPv6" : "IPv4");
    };
    head("svcgate_service_packets_total", "counter", "Packets of a Service port's flows, both directions.");
    for (uint32_t i = 0; i < s.services.size(); ++i)
        o += fmt::format("svcgate_service_packets_total{{{}}} {}\n", svc_labels(i),
                         slots.service_total(s.services[i].slot).packets);
    head("svcgate_service_bytes_total", "counter", "Bytes of a Service port's flows, both directions.");
    for (uint32_t i = 0; i < s.services.size(); ++i)
        o += fmt::format("svcgate_service_bytes_total{{{}}} {}\n", svc_labels(i),
                         slots.service_total(s.services[i].slot).bytes);
    head("svcgate_endpoint_packets_total", "counter", "Packets of flows to an endpoint, both directions.");
    std::string bytes, active;
    for (uint32_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const Endpoint& ep = s.endpoints[e];
            const PacketCounter c = slots.endpoint_total(ep.slot);
            const std::string l = fmt::format("{},endpoint=\"{}\"", svc_labels(i),
                                              format_endpoint(ep.ip, rte_be_to_cpu_16(ep.port)));
            o += fmt::format("svcgate_endpoint_packets_total{{{}}} {}\n", l, c.packets);
            bytes += fmt::format("svcgate_endpoint_bytes_total{{{}}} {}\n", l, c.bytes);
            active += fmt::format("svcgate_endpoint_flows{{{}}} {}\n", l, slots.active(ep.slot));
        }
    }
    head("svcgate_endpoint_bytes_total", "counter", "Bytes of flows to an endpoint, both directions.");
    o += bytes;
    head("svcgate_endpoint_flows", "gauge", "Live flows to an endpoint (what lc, sed and nq read).");
    o += active;
    head("svcgate_flows", "gauge", "Flows in the flow table.");
    o += fmt::format("svcgate_flows{{family=\"IPv4\"}} {}\n", st.flows->live_total());
    if (st.flows6) o += fmt::format("svcgate_flows{{family=\"IPv6\"}} {}\n", st.flows6->live_total());
    head("svcgate_flow_capacity", "gauge", "Flows the flow table can hold.");
    o += fmt::format("svcgate_flow_capacity{{family=\"IPv4\"}} {}\n", st.flows->capacity());
    if (st.flows6) o += fmt::format("svcgate_flow_capacity{{family=\"IPv6\"}} {}\n", st.flows6->capacity());
    head("svcgate_flows_created_total", "counter", "Flows created.");
    o += fmt::format("svcgate_flows_created_total {}\n", t.flows_created);
    head("svcgate_flows_early_dropped_total", "counter", "Embryonic flows evicted to make room for new ones.");
    o += fmt::format("svcgate_flows_early_dropped_total {}\n", t.flows_early_dropped);
    head("svcgate_fragments_total", "counter",
         "Fragments by what became of them: held (a later fragment before its first), released (sent on "
         "once its first came), fragmented (IPv4 packets split to the egress MTU) and fragments_out (what they became); "
         "the drops are svcgate_drops_total{reason=~\"frag_.*\"}.");
    o += fmt::format("svcgate_fragments_total{{outcome=\"held\"}} {}\n", t.frag_stored);
    o += fmt::format("svcgate_fragments_total{{outcome=\"released\"}} {}\n", t.frag_released);
    o += fmt::format("svcgate_fragments_total{{outcome=\"fragmented\"}} {}\n", t.frag_out_packets);
    o += fmt::format("svcgate_fragments_total{{outcome=\"fragments_out\"}} {}\n", t.frag_out_fragments);
    head("svcgate_fragments_held", "gauge", "Later fragments waiting for their first fragment.");
    o += fmt::format("svcgate_fragments_held {}\n", st.frags ? st.frags->held() : 0);
    head("svcgate_fragment_datagrams", "gauge", "Fragmented datagrams being tracked.");
    o += fmt::format("svcgate_fragment_datagrams {}\n", st.frags ? st.frags->datagrams() : 0);
    head("svcgate_host_path_packets_total", "counter",
         "The host path: packets handed to the ports' host interfaces (punted) and frames the kernel sent out "
         "through the ports (out, out_dropped); over the punt budget: svcgate_drops_total{reason=\"punt_limited\"}.");
    o += fmt::format("svcgate_host_path_packets_total{{direction=\"punted\"}} {}\n", t.punted);
    o += fmt::format("svcgate_host_path_packets_total{{direction=\"out\"}} {}\n", t.host_out);
    o += fmt::format("svcgate_host_path_packets_total{{direction=\"out_dropped\"}} {}\n", t.host_out_dropped);
    head("svcgate_healthy", "gauge", "1 while /healthz answers 200 (live, ports up, not draining).");
    o += fmt::format("svcgate_healthy {}\n", st.health.healthy ? 1 : 0);
    head("svcgate_draining", "gauge", "1 while draining (svcgatectl drain).");
    o += fmt::format("svcgate_draining {}\n", st.health.draining ? 1 : 0);
    if (st.sync) {
        const SyncStatus y = st.sync->status();
        head("svcgate_sync_ready", "gauge", "1 once the live peers have sent this gateway their flows (ha).");
        o += fmt::format("svcgate_sync_ready {}\n", y.ready ? 1 : 0);
        head("svcgate_sync_peer_up", "gauge", "1 while a peer is heard from (ha.peers).");
        for (const SyncPeerStatus& p : y.peers) o += fmt::format("svcgate_sync_peer_up{{peer=\"{}\"}} {}\n", p.address, p.alive ? 1 : 0);
        head("svcgate_sync_peer_last_heard_seconds", "gauge", "Seconds since a peer's last authentic datagram (-1: never).");
        for (const SyncPeerStatus& p : y.peers)
            o += fmt::format("svcgate_sync_peer_last_heard_seconds{{peer=\"{}\"}} {:.3f}\n", p.address, p.last_heard_seconds);
        head("svcgate_sync_flows_total", "counter", "Flow records sent to and received from each peer.");
        for (const SyncPeerStatus& p : y.peers) {
            o += fmt::format("svcgate_sync_flows_total{{peer=\"{}\",direction=\"sent\"}} {}\n", p.address, p.flows_sent);
            o += fmt::format("svcgate_sync_flows_total{{peer=\"{}\",direction=\"received\"}} {}\n", p.address, p.flows_received);
        }
        head("svcgate_sync_queued", "gauge", "The replication lag: flows the workers handed on, not yet sent.");
        o += fmt::format("svcgate_sync_queued {}\n", y.queued);
        head("svcgate_sync_replicas", "gauge", "Replicas of the peers' flows held here (not taken over).");
        o += fmt::format("svcgate_sync_replicas {}\n", y.replicas);
        head("svcgate_sync_takeovers_total", "counter", "Replicas that carried a packet here and so became this gateway's.");
        o += fmt::format("svcgate_sync_takeovers_total {}\n", t.takeovers);
        head("svcgate_sync_events_total", "counter", "Flows the workers handed to the sync thread (refused: ring full).");
        o += fmt::format("svcgate_sync_events_total{{outcome=\"taken\"}} {}\n", t.sync_events);
        o += fmt::format("svcgate_sync_events_total{{outcome=\"ring_full\"}} {}\n", t.sync_ring_full);
        head("svcgate_sync_drops_total", "counter", "Replication datagrams (and records) dropped, by reason.");
        for (unsigned d = 0; d < sync::kDrops; ++d)
            o += fmt::format("svcgate_sync_drops_total{{reason=\"{}\"}} {}\n", sync::drop_name(static_cast<sync::Drop>(d)), y.drops[d]);
        for (unsigned d = 0; d < kRecordDrops; ++d)
            o += fmt::format("svcgate_sync_drops_total{{reason=\"record_{}\"}} {}\n",
                             record_drop_name(static_cast<RecordDrop>(d)), y.record_drops[d]);
    }
    head("svcgate_announced_prefixes", "gauge", "Prefixes in the announcement table (routing.table).");
    o += fmt::format("svcgate_announced_prefixes {}\n", st.health.announced.size());
    head("svcgate_mbufs_in_use", "gauge", "Packet buffers taken from the pool (rings, bursts, held, caches).");
    o += fmt::format("svcgate_mbufs_in_use {}\n", rte_mempool_in_use_count(st.pool));
    head("svcgate_packets_total", "counter", "Packets by verdict.");
    for (unsigned v = 0; v < kVerdicts; ++v)
        o += fmt::format("svcgate_packets_total{{verdict=\"{}\"}} {}\n", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
    head("svcgate_drops_total", "counter", "Packets dropped (freed), by reason.");
    for (unsigned r = 1; r < kDropReasons; ++r)
        o += fmt::format("svcgate_drops_total{{reason=\"{}\"}} {}\n", drop_reason_name(static_cast<DropReason>(r)), t.drops[r]);
    head("svcgate_rejects_total", "counter", "Packets refused with a TCP RST or ICMP port unreachable, by reason.");
    for (unsigned r = 1; r < kDropReasons; ++r)
        if (drop_reason_name(static_cast<DropReason>(r)).starts_with("reject_") && r != static_cast<unsigned>(DropReason::reject_failed))
            o += fmt::format("svcgate_rejects_total{{reason=\"{}\"}} {}\n", drop_reason_name(static_cast<DropReason>(r)),
                             t.rejects[r]);
    head("svcgate_port_packets_total", "counter", "Packets per port and direction (the NIC's counters).");
    for (const PortView& p : st.ports) {
        rte_eth_stats e{};
        rte_eth_stats_get(p.id, &e);
        o += fmt::format("svcgate_port_packets_total{{port=\"{0}\",direction=\"rx\"}} {1}\n"
                         "svcgate_port_packets_total{{port=\"{0}\",direction=\"tx\"}} {2}\n",
                         p.name, e.ipackets, e.opackets);
    }
    head("svcgate_reloads_total", "counter", "Config reloads by result.");
    o += fmt::format("svcgate_reloads_total{{result=\"ok\"}} {}\nsvcgate_reloads_total{{result=\"failed\"}} {}\n",
                     st.reload.ok, st.reload.failed);
    head("svcgate_last_reload_duration_seconds", "gauge", "The last successful reload: file read to published snapshot.");
    o += fmt::format("svcgate_last_reload_duration_seconds {}\n", st.reload.last_seconds);
    // kube-proxy's sync_proxy_rules_duration_seconds and sync_proxy_rules_last_timestamp_seconds,
    // under svcgate's names (README, Metrics).
    head("svcgate_reload_duration_seconds", "histogram", "Successful reloads: file read to published snapshot.");
    double le = ReloadStatus::kBucket0;
    for (unsigned i = 0; i < ReloadStatus::kBuckets; ++i, le *= 2)
        o += fmt::format("svcgate_reload_duration_seconds_bucket{{le=\"{}\"}} {}\n", le, st.reload.bucket[i]);
    o += fmt::format("svcgate_reload_duration_seconds_bucket{{le=\"+Inf\"}} {0}\nsvcgate_reload_duration_seconds_sum {1}\n"
                     "svcgate_reload_duration_seconds_count {0}\n",
                     st.reload.count, st.reload.sum_seconds);
    head("svcgate_reload_last_success_timestamp_seconds", "gauge",
         "When the config in service was published (start or last successful reload), Unix time.");
    o += fmt::format("svcgate_reload_last_success_timestamp_seconds {:.3f}\n", st.reload.last_ok_unix);
    head("svcgate_port_link_up", "gauge", "1 when the port's link is up.");
    for (const PortView& p : st.ports) {
        rte_eth_link link{};
        const bool up = rte_eth_link_get_nowait(p.id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
        o += fmt::format("svcgate_port_link_up{{port=\"{}\"}} {}\n", p.name, up ? 1 : 0);
    }
    head("svcgate_build_info", "gauge", "Always 1: the version of svcgate and of the DPDK it runs on.");
    o += fmt::format("svcgate_build_info{{version=\"{}\",dpdk=\"{}\"}} 1\n", SVCGATE_VERSION, rte_version());
    head("svcgate_config_generation", "gauge", "Generation of the config in service.");
    o += fmt::format("svcgate_config_generation {}\n", st.generation());
    return o;
}

MetricsServer::MetricsServer() = default;

MetricsServer::~MetricsServer() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
}

std::string MetricsServer::start(const std::optional<HostPort>& at, DaemonState& st) {
    if (!at) return {};
    server_ = std::make_unique<httplib::Server>();
    // Two threads are plenty for a scraper or two; a client that sends nothing is dropped after
    // the read timeout; requests are headers only.
    server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
    server_->set_read_timeout(2, 0).set_write_timeout(2, 0).set_payload_max_length(4096);
    server_->Get("/metrics", [&st](const httplib::Request&, httplib::Response& res) {
        std::string body;
        {
            std::lock_guard lk(st.mu);
            body = render_metrics(st);
        }
        res.set_content(body, "text/plain; version=0.0.4; charset=utf-8");
    });
    // kube-proxy's health endpoints (health.h), on the same address.
    for (const bool livez : {false, true})
        server_->Get(livez ? "/livez" : "/healthz", [&st, livez](const httplib::Request&, httplib::Response& res) {
            std::pair<int, std::string> a;
            {
                std::lock_guard lk(st.mu);
                a = healthz_answer(st.health,
                                   std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(),
                                   livez);
            }
            res.status = a.first;
            res.set_content(a.second, "application/json");
        });
    // httplib resolves the host with getaddrinfo: "::1" binds an IPv6 socket, "127.0.0.1" an IPv4 one.
    if (!server_->bind_to_port(format_ip(at->addr), at->port)) {
        server_.reset();
        return fmt::format("metrics listener {}: cannot bind", format_host_port(*at));
    }
    thread_ = std::thread([s = server_.get()] { s->listen_after_bind(); });
    // httplib's stop() does nothing until the listening thread runs: wait for it (bounded), so a
    // shutdown right after the start cannot leave the join hanging.
    for (int i = 0; i < 200 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return {};
}

}  // namespace svcgate::ctl
