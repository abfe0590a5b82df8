#include "control/api/metrics.h"

#include <arpa/inet.h>

#include <chrono>

#include <fmt/format.h>
#include <httplib.h>
#include <rte_ethdev.h>
#include <rte_version.h>

#include "control/api/commands.h"
#include "control/api/metrics_collectors.h"
#include "control/state/reload_metrics.h"
#include "control/ha/sync_metrics.h"
#include "control/routing/health_metrics.h"
#include "control/snapshot/service_metrics.h"
#include "control/config/yaml_config.h"
#include "control/ha/sync.h"
#include "control/kube/kube_api.h"
#include "control/lb/controller.h"
#include "control/export/ipfix.h"
#include "control/probe/prober.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

// Every feature's collector (metrics_collectors.h), fed from the running daemon.
std::string render_metrics(const DaemonState& st) {
    const WorkerCounters t = sum_counters(st);
    MetricsText m;
    collect_services(m, st.snap(), st.slots());
    collect_flows(m,
                  FlowGauges{.live4 = st.flows->live_total(),
                             .capacity4 = st.flows->capacity(),
                             .has_v6 = st.flows6 != nullptr,
                             .live6 = st.flows6 ? st.flows6->live_total() : 0u,
                             .capacity6 = st.flows6 ? st.flows6->capacity() : 0u,
                             .index_moves4 = st.flows->index_moves(),
                             .index_moves6 = st.flows6 ? st.flows6->index_moves() : 0u},
                  t);
    collect_fragments(m, t, st.frags ? st.frags->held() : 0, st.frags ? st.frags->datagrams() : 0);
    collect_host_path(m, t, st.health);
    if (st.sync) collect_sync(m, st.sync->status(t));
    if (st.kube) st.kube->metrics(m);
    if (st.lb) st.lb->metrics(m);
    if (st.prober) st.prober->metrics(m);
    if (st.ipfix) st.ipfix->metrics(m, t.nat_events_dropped);
    collect_verdicts(m, t, rte_mempool_in_use_count(st.pool));
    if (st.cfg.dataplane.latency_sampling) collect_latency(m, sum_latency(st));
    std::vector<PortSample> ports;
    for (const PortView& p : st.ports) {
        const report::PortCounters c = port_counters(st, p);
        ports.push_back({p.name, c.rx_packets, c.tx_packets, link_up(p.id)});
        if (p.bond && st.bond_members) ports.back().members = st.bond_members(p.id);
    }
    collect_ports(m, ports);
    collect_reload(m, st.reload, st.generation(), SVCGATE_VERSION, rte_version());
    return std::move(m.str());
}

MetricsServer::MetricsServer() = default;

MetricsServer::~MetricsServer() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
}

Status MetricsServer::start(const std::optional<HostPort>& at, DaemonState& st) {
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
                a = healthz_answer(
                    st.health,
                    std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(), livez);
            }
            res.status = a.first;
            res.set_content(a.second, "application/json");
        });
    // httplib resolves the host with getaddrinfo: "::1" binds an IPv6 socket, "127.0.0.1" an IPv4 one.
    if (!server_->bind_to_port(format_ip(at->addr), at->port)) {
        server_.reset();
        return Status::fail(fmt::format("metrics listener {}: cannot bind", format_host_port(*at)));
    }
    thread_ = std::thread([s = server_.get()] { s->listen_after_bind(); });
    // httplib's stop() does nothing until the listening thread runs: wait for it (bounded), so a
    // shutdown right after the start cannot leave the join hanging.
    for (int i = 0; i < 200 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return {};
}

}  // namespace svcgate::ctl
