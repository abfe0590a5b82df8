#include "control/cli/render.h"

#include <algorithm>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

#include "control/base/address.h"
#include "control/base/clock.h"
#include "control/api/views.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::ctl {

namespace {

using Json = nlohmann::ordered_json;

// A text as a table shows it: "-" when there is none (or, for the node and zone, when empty).
std::string or_dash(const std::optional<std::string>& s) { return s ? *s : "-"; }
std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string join(const std::vector<std::string>& a) {
    std::string s;
    for (const std::string& x : a) s += " " + x;
    return s;
}

std::string render_services(const std::vector<report::Service>& a) {
    std::string o = fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:<10} {:>10} {:>12}\n", "SERVICE PORT", "PROTO",
                                "CLUSTER-IP:PORT", "NODEPORT", "ENDPOINTS", "SCHED", "TOPOLOGY", "PACKETS", "BYTES");
    for (const report::Service& r : a) {
        const auto ip = parse_ip(r.cluster_ip);
        o += fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:<10} {:>10} {:>12}\n", r.name, r.protocol,
                         ip ? format_endpoint(*ip, r.port) : r.cluster_ip,
                         r.node_port ? std::to_string(r.node_port) : "-", fmt::format("{}/{}", r.ready, r.endpoints),
                         r.scheduler, r.topology, r.packets, r.bytes);
    }
    return o;
}

// Which traffic uses an endpoint and by which rule: "all", "zone hints", "internal: node hints,
// external: local", "no".
std::string endpoint_use(const report::Endpoint& r) {
    const std::string in = r.internal.value_or("no"), ex = r.external.value_or("no");
    if (in == ex) return in;
    return fmt::format("internal: {}, external: {}", in, ex);
}

// "up", "down 12s (refused)", "unchecked": its health checks' verdict, for how long.
std::string endpoint_health(const report::Endpoint& r) {
    if (!r.health) return "-";
    if (*r.health == "unchecked") return *r.health;
    const double age = std::max(0.0, unix_now() - r.health_since);
    std::string s = fmt::format("{} {:.0f}s", *r.health, age);
    if (*r.health == "down" && !r.last_failure.empty()) s += " (" + r.last_failure + ")";
    return s;
}

std::string render_endpoints(const std::vector<report::Endpoint>& a) {
    std::string o = fmt::format("{:<40} {:<21} {:<28} {:<14} {:<10} {:<12} {:<10} {:>6} {:>10} {:>12}  {}\n",
                                "SERVICE PORT", "ENDPOINT", "CONDITIONS", "NODE", "ZONE", "IN USE", "EXT SOURCE",
                                "FLOWS", "PACKETS", "BYTES", "HEALTH");
    for (const report::Endpoint& r : a)
        o += fmt::format("{:<40} {:<21} {:<28} {:<14} {:<10} {:<12} {:<10} {:>6} {:>10} {:>12}  {}\n", r.service,
                         r.endpoint, r.conditions, or_dash(r.node), or_dash(r.zone), endpoint_use(r),
                         or_dash(r.external_source), r.flows, r.packets, r.bytes, endpoint_health(r));
    return o;
}

std::string render_flows(const std::vector<report::Flow>& a, const CommandRequest& req) {
    std::string o = fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", "ORIGINAL (CLIENT > VIP)", "ENDPOINT",
                                "SNAT", "STATE", "IDLE", "SERVICE");
    for (const report::Flow& f : a) {
        std::string state = f.state;
        if (f.replica_of) state += fmt::format(",replica:{}", *f.replica_of);
        o += fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", f.original, f.endpoint, or_dash(f.snat), state,
                         f.idle, f.service);
    }
    const auto limit = req.options.find("--limit");
    return o + fmt::format("{} flows shown (limit {})\n", a.size(), limit == req.options.end() ? "100" : limit->second);
}

std::string render_top(const std::vector<report::Talker>& a, const CommandRequest& req) {
    const auto by = req.options.find("--by");
    const std::string what = by == req.options.end() ? "source" : by->second;
    std::string o = fmt::format("{:<48} {:>10} {:>10}\n",
                                what == "source"        ? "SOURCE"
                                    : what == "service" ? "SERVICE PORT"
                                                        : "ENDPOINT",
                                "FLOWS", "TCP OPEN");
    for (const report::Talker& t : a) o += fmt::format("{:<48} {:>10} {:>10}\n", t.key, t.flows, t.tcp_open);
    return o;
}

std::string render_ha(const report::Ha& y) {
    std::string o = fmt::format(
        "ha          listening on {}, {}; {} replicas held, {} taken over, {} flows handed by the workers ({} "
        "refused by a full ring, {} waiting to be sent), {} refreshed\n",
        y.listen, y.ready ? "ready" : "WAITING for the peers' flows", y.replicas, y.takeovers, y.events,
        y.events_ring_full, y.queued, y.refreshed);
    if (const report::ReplicaHold& h = y.replica_hold; h.parked)
        o += fmt::format(
            "  held      {} replies to preserved clients waited for their replica ({} sent on, {} waiting)\n", h.parked,
            h.released, h.held);
    for (const report::Peer& p : y.peers)
        o += fmt::format("  peer      {} {}, last heard {}, flows sent {} received {}, holds {}{}\n", p.address,
                         p.alive ? "alive" : "DEAD",
                         p.last_heard_seconds ? fmt::format("{:.1f} s ago", *p.last_heard_seconds) : "never",
                         p.flows_sent, p.flows_received, p.flows_held, p.copied ? ", has sent us its copy" : "");
    for (const report::Peer& p : y.peers)
        if (p.adopted) o += fmt::format("  adopted   {}'s addresses:{}\n", p.address, join(p.addresses));
    std::string drops;
    for (const auto& [name, n] : y.drops.items)
        if (n) drops += fmt::format(" {} {}", name, n);
    if (!drops.empty()) o += "  dropped  " + drops + "\n";
    return o;
}

// client_ip: shown when a service port preserves the client's address.
std::string render_client_ip(const report::ClientIp& c) {
    if (!c.preserve_service_ports) return "";
    std::string o = fmt::format("client ip   {} by default; {} service ports preserve it\n", c.default_mode,
                                c.preserve_service_ports);
    for (const report::NoReturn& n : c.no_return)
        o += fmt::format("            NO RETURN: {} ({}): {} SYNs resent with no reply through the gateway\n",
                         n.service, n.family, n.resent_syns);
    return o;
}

std::string render_kube_api(const report::KubeApi& a) {
    std::string o = fmt::format("kube API    {} ({}): {}, {} publishes, {} changes pending{}\n", a.server, a.source,
                                a.synced ? "synced" : "NOT SYNCED (not ready)", a.publishes, a.pending_changes,
                                a.credentials_error.empty() ? "" : "; credentials: " + a.credentials_error);
    for (const auto& [name, kd] : a.kinds.items)
        o += fmt::format("            {}: {}, {} objects, resourceVersion {}, {} relists, {} reconnects{}\n", name,
                         kd.synced ? "synced" : "not synced", kd.objects, kd.resource_version, kd.relists,
                         kd.reconnects, kd.last_error.empty() ? "" : "; last error: " + kd.last_error);
    for (const report::LeftOut& r : a.rejected)
        o += fmt::format("            left out: {} ({}): {}\n", r.object, r.reason, r.message);
    if (a.stale)
        o += fmt::format("            STALE: changes unpublished for {:.0f} s (over {:.0f} s): /healthz answers 503\n",
                         a.pending_seconds, a.stale_after_seconds);
    return o;
}

// The load balancer: this gateway's role, the Lease, each pool's addresses per family.
std::string render_load_balancer(const report::LoadBalancer& l) {
    if (l.role == "off") return {};
    std::string o = fmt::format("lb          {} (class {}{}); Lease {}/{} held by {} (renewed {})\n", l.role,
                                l.lb_class, l.default_class ? " and none" : "", l.lease.ns, l.lease.name,
                                l.lease.holder.empty() ? "nobody" : l.lease.holder,
                                l.lease.renewed.empty() ? "never" : l.lease.renewed);
    if (!l.pools_configured) return o + "            no pools: nothing assigned, nothing written\n";
    o += fmt::format(
        "            {} Services: {} assigned, {} pending; {} writes ({} conflicts, {} errors), {} queued\n",
        l.services, l.assigned, l.pending, l.writes, l.conflicts, l.write_errors, l.queued_writes);
    for (const report::LbPool& p : l.pools) {
        std::string fams;
        for (const auto& [name, f] : {std::pair{"IPv4", p.ipv4}, std::pair{"IPv6", p.ipv6}})
            if (f)
                fams += fmt::format("{}{} {} assigned, {} available", fams.empty() ? "" : "; ", name, f->assigned,
                                    f->available);
        o += fmt::format("pool        {}: {}\n", p.name, fams.empty() ? "no addresses" : fams);
    }
    if (!l.last_error.empty()) o += "            last error: " + l.last_error + "\n";
    return o;
}

std::string render_kubernetes(const report::Kubernetes& k) {
    std::string o;
    if (k.manifests) {
        o += fmt::format(
            "kubernetes  {} Services, {} EndpointSlices, {} ServiceCIDRs; no rule for {} headless and {} "
            "ExternalName Services; {} of another proxy; {} other objects ignored\n",
            k.services, k.endpoint_slices, k.service_cidrs, k.headless, k.external_name, k.other_proxy,
            k.ignored_objects);
        for (const report::NoRule& n : k.no_rule) o += fmt::format("            {} {}\n", n.service, n.why);
    }
    if (k.api) o += render_kube_api(*k.api);
    o += render_load_balancer(k.load_balancer);
    // Kubernetes objects' entries the snapshot serves otherwise than written (files and API alike).
    for (const report::ObjectIssue& i : k.object_issues)
        o += fmt::format("object      {} ({}, {}): {}\n", i.object, i.reason, i.left_out ? "left out" : "served",
                         i.message);
    return o;
}

std::string render_health(const report::Health& h) {
    std::string o = fmt::format(
        "health      {}{}\n", h.healthy ? "healthy" : "UNHEALTHY",
        h.healthy ? "" : fmt::format(" (live {}, ports up {}, draining {})", h.live, h.ports_up, h.draining));
    if (h.draining)
        o += fmt::format("draining    {} connections left; exits by itself when none is, or in {:.0f} s\n",
                         h.connections_left.value_or(0), h.drain_seconds_left.value_or(0));
    if (h.announce_table) {
        o += fmt::format("announcing  {} prefixes in kernel table {}{}\n", h.announced.size(), h.announce_table,
                         join(h.announced));
        if (h.announce_error) o += "            last error: " + *h.announce_error + "\n";
    }
    return o;
}

std::string render_status(const report::Status& j) {
    std::string o = fmt::format("config      {} (generation {})\nuptime      {} s\nworkers     {}\n", j.config,
                                j.generation, j.uptime_seconds, j.workers);
    // With several receive queues, whether masquerade ports steer replies to their worker's queue.
    for (const report::Port& p : j.ports)
        o += fmt::format("port        {} {}{} link {} queues {}/{}{}\n", p.name, p.device,
                         p.vlan ? fmt::format(" VLAN {}", p.vlan) : "", p.link ? "up" : "down", p.rx_queues,
                         p.tx_queues, p.rx_queues > 1 ? "; rss steering " + p.rss_steering : "");
    std::vector<std::string_view> bonds;  // a bond's members: shown once, under its first port
    for (const report::Port& p : j.ports) {
        if (p.bond.empty() || std::find(bonds.begin(), bonds.end(), p.device) != bonds.end()) continue;
        bonds.push_back(p.device);
        for (const report::BondMember& m : p.bond)
            o += fmt::format("  member    {} of {}: link {}, {}{}\n", m.device, p.device, m.link ? "up" : "down",
                             m.active ? "active" : "not active",
                             m.actor
                                 ? fmt::format("; LACP actor {}, partner {}", fmt::join(*m.actor, ","),
                                               m.partner->empty() ? "-" : fmt::format("{}", fmt::join(*m.partner, ",")))
                                 : "");
    }
    auto pct = [](uint64_t n, uint64_t of) {
        return of ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0;
    };
    o += fmt::format(
        "services    {} service ports, {} endpoints\nflows       {} of {} (IPv4 {} of {}, {:.1f}% full; IPv6 {} of {}, "
        "{:.1f}% full)\npackets     {} in\n",
        j.service_ports, j.endpoints, j.flows, j.flow_capacity, j.flows_v4, j.flow_capacity_v4,
        pct(j.flows_v4, j.flow_capacity_v4), j.flows_v6, j.flow_capacity_v6, pct(j.flows_v6, j.flow_capacity_v6),
        j.rx_packets);
    o += render_client_ip(j.client_ip) + render_kubernetes(j.kubernetes) + render_health(j.health);
    if (j.ha) o += render_ha(*j.ha);
    o += fmt::format("reloads     {} ok, {} failed", j.reloads, j.reload_failures);
    if (j.reloads) o += fmt::format("; last took {:.1f} ms ({})", j.last_reload_seconds * 1e3, j.last_reload_trigger);
    o += "\n";
    if (!j.last_reload_ok)
        o += "last reload REFUSED, the running config stays:\n" + or_dash(j.last_reload_error) + "\n";
    return o;
}

std::string render_stats(const report::Stats& j) {
    std::string o = fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", "PORT", "RX-PACKETS", "TX-PACKETS",
                                "RX-BYTES", "TX-BYTES", "MISSED", "ERRORS");
    for (const auto& [name, p] : j.ports.items)
        o += fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", name, p.rx_packets, p.tx_packets,
                         p.rx_bytes, p.tx_bytes, p.rx_missed, p.rx_errors + p.tx_errors);
    o += "\nVERDICT     PACKETS\n";
    for (const auto& [name, n] : j.verdicts.items) o += fmt::format("{:<10} {:>8}\n", name, n);
    o += "\nREFUSED BY REASON            DROPPED REJECTED  WHAT\n";
    auto count = [](const report::Keyed<uint64_t>& k, std::string_view name) -> uint64_t {
        for (const auto& [n, v] : k.items)
            if (n == name) return v;
        return 0;
    };
    for (unsigned r = 1; r < dp::kDropReasons; ++r) {
        const auto reason = static_cast<dp::DropReason>(r);
        const std::string_view key = dp::drop_reason_name(reason);
        const uint64_t d = count(j.drops, key), rj = count(j.rejects, key);
        if (d || rj) o += fmt::format("{:<28} {:>7} {:>8}  {}\n", key, d, rj, dp::drop_reason_description(reason));
    }
    const report::FlowCounts& f = j.flows;
    const report::Fragments& fr = j.fragments;
    o += fmt::format(
        "\nflows: {} live, {} created, {} expired, {} early-dropped, {} source ports remapped, {} reopened\n", f.live,
        f.created, f.expired, f.early_dropped, f.port_remapped, f.reopened);
    o += fmt::format("fragments: {} held now, {} held in all, {} released; {} packets fragmented into {}\n", fr.held,
                     fr.stored, fr.released, fr.fragmented, fr.fragments_out);
    if (const auto& l = j.latency)
        o += fmt::format(
            "latency inside the gateway: p50 {:.2f} us, p99 {:.2f}, p99.9 {:.2f}, max {:.2f} ({} packets sampled)\n",
            l->p50_us, l->p99_us, l->p999_us, l->max_us, l->samples);
    o += "\n";
    return o + render_services(j.services) + "\n" + render_endpoints(j.endpoints);
}

std::string render_reload(const report::Reload& r) { return r.message.ends_with('\n') ? r.message : r.message + "\n"; }

std::string render_drain(const report::Drain& r) {
    return fmt::format(
        "draining: announcements withdrawn, /healthz 503; svcgate exits once its connections are "
        "gone or in {} s (svcgatectl undrain to stop)\n",
        r.timeout_seconds);
}

std::string render_undrain(const report::Undrain& r) {
    return r.was_draining ? "undrained: announcing again once healthy\n" : "not draining\n";
}

// A renderer of a command's report, from the JSON the daemon wrote.
// (nlohmann's reader throws; what it throws ends here.)
template <typename T, auto F>
Status as(const Json& result, const CommandRequest& req, std::string& text) {
    T r{};
    try {
        result.get_to(r);
    } catch (const nlohmann::json::exception& e) {
        return Status::fail(
            fmt::format("svcgate's answer to {} is not what this svcgatectl reads ({}); --json "
                        "shows it as it came",
                        req.spec->name, e.what()));
    }
    if constexpr (std::is_invocable_v<decltype(F), const T&, const CommandRequest&>)
        text = F(r, req);
    else
        text = F(r);
    return {};
}

// flows: the listing, or with --top the talkers.
Status flows_or_top(const Json& result, const CommandRequest& req, std::string& text) {
    if (req.options.count("--top")) return as<std::vector<report::Talker>, render_top>(result, req, text);
    return as<std::vector<report::Flow>, render_flows>(result, req, text);
}

// A renderer for each remote command of kCommands, in its order (checked below at compile time).
struct Renderer {
    std::string_view name;
    Status (*render)(const Json&, const CommandRequest&, std::string&);
};
constexpr Renderer kRenderers[] = {
    {"status", as<report::Status, render_status>},
    {"services", as<std::vector<report::Service>, render_services>},
    {"endpoints", as<std::vector<report::Endpoint>, render_endpoints>},
    {"flows", flows_or_top},
    {"stats", as<report::Stats, render_stats>},
    {"reload", as<report::Reload, render_reload>},
    {"drain", as<report::Drain, render_drain>},
    {"undrain", as<report::Undrain, render_undrain>},
};

constexpr bool renderers_match_table() {
    size_t i = 0;
    for (const CommandSpec& c : kCommands) {
        if (!c.remote) continue;
        if (i == std::size(kRenderers) || kRenderers[i].name != c.name) return false;
        ++i;
    }
    return i == std::size(kRenderers);
}
static_assert(renderers_match_table(), "kRenderers must render exactly kCommands' remote commands, in order");

}  // namespace

Status render_answer(const CommandRequest& req, const Json& result, std::string& text) {
    for (const Renderer& r : kRenderers)
        if (req.spec && r.name == req.spec->name) return r.render(result, req, text);
    return Status::fail("no renderer for this command");  // none: kRenderers is checked against kCommands
}

}  // namespace svcgate::ctl
