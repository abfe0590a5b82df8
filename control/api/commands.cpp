#include "control/api/commands.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <rte_ethdev.h>

#include "control/api/command_table.h"
#include "control/api/views.h"
#include "control/probe/prober.h"
#include "control/base/address.h"
#include "control/base/clock.h"
#include "control/snapshot/flow_scan.h"
#include "control/config/config_fields.h"
#include "control/config/yaml_config.h"
#include "control/ha/sync.h"
#include "control/kube/kube_api.h"
#include "control/lb/controller.h"
#include "control/trace/packet_spec.h"
#include "dataplane/lb/scheduler.h"

namespace svcgate::ctl {

using namespace svcgate::dp;
using Json = nlohmann::ordered_json;

bool link_up(uint16_t port) {
    rte_eth_link link{};
    return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

report::PortCounters port_counters(const DaemonState& st, const PortView& p) {
    if (p.on_trunk) {  // the device's counters are its VLANs' together: the workers count each port
        report::PortCounters c;
        for (const Worker* w : st.workers) {
            const PortSoftCounters& s = w->port_counters(p.index);
            c.rx_packets += s.rx_packets, c.tx_packets += s.tx_packets;
            c.rx_bytes += s.rx_bytes, c.tx_bytes += s.tx_bytes;
        }
        return c;
    }
    rte_eth_stats e{};
    rte_eth_stats_get(p.id, &e);
    return {.rx_packets = e.ipackets,
            .tx_packets = e.opackets,
            .rx_bytes = e.ibytes,
            .tx_bytes = e.obytes,
            .rx_missed = e.imissed,
            .rx_errors = e.ierrors,
            .tx_errors = e.oerrors};
}

namespace {

std::string ep_str(const Endpoint& e) { return format_endpoint(e.ip, rte_be_to_cpu_16(e.port)); }

std::string cond_str(uint8_t c) {
    std::string s;
    auto add = [&](const char* w) { s += s.empty() ? w : std::string(",") + w; };
    if (c & kReady) add("ready");
    if (c & kServing) add("serving");
    if (c & kTerminating) add("terminating");
    if (c & kLocal) add("local");
    if (c & kUnhealthy) add("unhealthy");
    if (c & kEvicted) add("evicted");
    return s.empty() ? "-" : s;
}

std::string family_name(Family f) { return f == Family::v6 ? "IPv6" : "IPv4"; }

report::Health health_report(const DaemonState& st) {
    const HealthState& h = st.health;
    report::Health r{.live = h.live,
                     .ports_up = h.ports_up,
                     .healthy = h.healthy,
                     .draining = h.draining,
                     .announced = h.announced,
                     .announce_table = st.cfg.routing.table};
    if (h.draining) {
        r.connections_left = h.connections_left;
        r.drain_seconds_left = std::max(0.0, h.drain_deadline_unix - unix_now());
        if (st.sync)
            if (const Syncer::Handover ho = st.sync->handover(); ho.started)
                r.handover = report::Handover{.done = ho.done, .peers = ho.peers, .flows = ho.flows};
    }
    if (!h.announce_error.empty()) r.announce_error = h.announce_error;
    return r;
}

// Drain: withdraw the announcements and answer /healthz 503 (the control loop applies it within
// one turn), serve the flows already here, exit once none is left or at the deadline.
report::Drain drain(DaemonState& st, long timeout) {
    HealthState& h = st.health;
    const double now = unix_now();
    const long secs = timeout > 0 ? timeout : static_cast<long>(st.cfg.control.drain_timeout);
    if (!h.draining) h.drain_started_unix = now;
    h.draining = true;
    h.healthy = false;
    h.drain_deadline_unix = now + static_cast<double>(secs);
    return {.timeout_seconds = secs};
}

report::Undrain undrain(DaemonState& st) {
    const bool was = st.health.draining;
    st.health.draining = false;
    return {.was_draining = was};
}

// client_ip (docs/client-ip.md): the gateway's default, the service ports that preserve, and
// those whose clients resent SYNs no reply came back for.
report::ClientIp client_ip_report(const DaemonState& st) {
    const ServiceSnapshot& s = st.snap();
    report::ClientIp r{.default_mode = client_ip_name(st.cfg.cluster.client_ip)};
    for (size_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        if (!sp.preserve_client) continue;
        ++r.preserve_service_ports;
        if (const uint64_t n = st.slots().no_return_total(sp.slot))
            r.no_return.push_back(
                {.service = s.info(static_cast<uint32_t>(i)).name, .family = family_name(sp.family), .resent_syns = n});
    }
    return r;
}

// How external traffic to `sp` reaches its endpoints: "masquerade" (policy Cluster, or
// masquerade_all), "preserve" (client_ip preserve), "kept" (policy Local); none when nothing
// outside reaches it (ClusterIP only). Hairpin and one-armed paths are per connection: trace.
std::optional<std::string> external_source(const ServicePort& sp, const ServiceInfo& info) {
    if (!info.node_port && info.external_ips.empty() && info.lb_ips.empty()) return std::nullopt;
    if (sp.external_local) return "kept";
    return sp.preserve_client ? "preserve" : "masquerade";
}

report::Kubernetes kubernetes_report(const DaemonState& st) {
    const KubeStats& k = st.cfg.kube;
    report::Kubernetes r{.manifests = st.cfg.manifests.size(),
                         .services = k.services,
                         .endpoint_slices = k.slices,
                         .headless = k.headless,
                         .external_name = k.external_name,
                         .ignored_objects = k.ignored_objects,
                         .other_proxy = k.other_proxy,
                         .service_cidrs = k.service_cidrs};
    // Services read from the manifests that get no dataplane rule, and why.
    for (const ServiceConfig& sc : st.cfg.services)
        if (!st.cfg.manifests.empty() && (sc.type == ServiceType::external_name || sc.cluster_ips.empty()))
            r.no_rule.push_back(
                {.service = sc.full_name(),
                 .why = sc.type == ServiceType::external_name ? "ExternalName" : "headless / no clusterIP"});
    // Kubernetes objects' entries the last build could not serve as written (snapshot.h).
    for (const ObjectIssue& i : st.snap().catalogue.object_issues)
        r.object_issues.push_back(
            {.object = i.object, .reason = issue_reason_name(i.reason), .message = i.message, .left_out = i.left_out});
    if (st.kube) r.api = st.kube->status();
    if (st.lb) r.load_balancer = st.lb->status();
    return r;
}

// LACP's state bits by name, in 802.1AX's order.
std::vector<std::string> lacp_state_names(uint8_t state) {
    static constexpr const char* kBits[] = {"active",     "short_timeout", "aggregatable", "in_sync",
                                            "collecting", "distributing",  "defaulted",    "expired"};
    std::vector<std::string> v;
    for (unsigned b = 0; b < 8; ++b)
        if (state & (1u << b)) v.emplace_back(kBits[b]);
    return v;
}

// A bond port's members (DaemonState::bond_members); none for another port.
std::vector<report::BondMember> bond_report(const DaemonState& st, const PortView& p) {
    std::vector<report::BondMember> v;
    if (!p.bond || !st.bond_members) return v;
    for (const BondMemberView& m : st.bond_members(p.id))
        v.push_back({.device = m.device,
                     .link = m.link,
                     .active = m.active,
                     .actor = m.lacp ? std::optional(lacp_state_names(m.actor_state)) : std::nullopt,
                     .partner = m.lacp ? std::optional(lacp_state_names(m.partner_state)) : std::nullopt});
    return v;
}

report::Status status(const DaemonState& st) {
    const ServiceSnapshot& s = st.snap();
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - st.started);
    const WorkerCounters t = sum_counters(st);
    report::Status r{.config = st.config_path,
                     .generation = st.generation(),
                     .client_ip = client_ip_report(st),
                     .uptime_seconds = up.count(),
                     .workers = st.workers.size(),
                     .service_ports = s.services.size(),
                     .endpoints = s.endpoints.size(),
                     .flows = st.flows_live(),
                     .flow_capacity = st.flows_capacity(),
                     .rx_packets = t.rx_packets,
                     .flows_v4 = st.flows->live_total(),
                     .flow_capacity_v4 = st.flows->capacity(),
                     .flows_v6 = st.flows6 ? st.flows6->live_total() : 0u,
                     .flow_capacity_v6 = st.flows6 ? st.flows6->capacity() : 0u,
                     .reloads = st.reload.ok,
                     .reload_failures = st.reload.failed,
                     .last_reload_ok = st.reload.last_ok,
                     .last_reload_seconds = st.reload.last_seconds,
                     .last_reload_trigger = st.reload.last_trigger,
                     .last_reload_error = st.reload.last_ok ? std::nullopt : std::optional(st.reload.last_error),
                     .health = health_report(st),
                     .ha = st.sync ? std::optional(st.sync->status(t)) : std::nullopt,
                     .kubernetes = kubernetes_report(st)};
    for (const PortView& p : st.ports)
        r.ports.push_back({.name = p.name,
                           .device = p.device,
                           .vlan = p.vlan,
                           .link = link_up(p.id),
                           .rx_queues = p.rxq,
                           .tx_queues = p.txq,
                           .rss_steering = p.rss_steering,
                           .bond = bond_report(st, p)});
    return r;
}

std::vector<report::Service> services(const DaemonState& st) {
    const ServiceSnapshot& s = st.snap();
    std::vector<report::Service> a;
    for (size_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        const ServiceInfo& info = s.info(static_cast<uint32_t>(i));
        const PacketCounter c = st.slots().service_total(sp.slot);
        report::Service r{.name = info.name,
                          .protocol = proto_name(sp.proto),
                          .family = family_name(info.family),
                          .cluster_ip = format_ip(info.cluster_ip),
                          .port = rte_be_to_cpu_16(info.port),
                          .node_port = info.node_port,
                          .endpoints = sp.ep_count,
                          .scheduler = std::string(scheduler_name(sp.scheduler)),
                          .topology = topology_mode_name(info.topology),
                          .external_source = external_source(sp, info),
                          .packets = c.packets,
                          .bytes = c.bytes};
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e)
            r.ready += (s.endpoints[e].cond & kReady) != 0;
        for (const IpAddr& x : info.external_ips) r.external_ips.push_back(format_ip(x));
        for (const IpAddr& x : info.lb_ips) r.load_balancer_ips.push_back(format_ip(x));
        a.push_back(std::move(r));
    }
    return a;
}

// Why a traffic class of service port `sp` uses endpoint `e`: its set's rule ("all", "zone hints",
// "node hints" for the Cluster set, "local" for a Local policy's), none when it does not use it.
std::optional<std::string> endpoint_use(const ServiceSnapshot& s, const ServicePort& sp, const ServiceInfo& info,
                                        uint32_t set, uint32_t e) {
    const EndpointSet& x = s.sets[set];
    for (uint32_t k = x.first; k < x.first + x.count; ++k)
        if (s.members[k] == e) return set == sp.cluster_set ? topology_mode_name(info.topology) : "local";
    return std::nullopt;
}

std::vector<report::Endpoint> endpoints(const DaemonState& st) {
    const ServiceSnapshot& s = st.snap();
    std::vector<report::Endpoint> a;
    for (size_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        const ServiceInfo& info = s.info(static_cast<uint32_t>(i));
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const Endpoint& ep = s.endpoints[e];
            const EndpointInfo& ei = s.catalogue.endpoints[e];
            const PacketCounter c = st.slots().endpoint_total(ep.slot);
            a.push_back({.service = info.name,
                         .endpoint = ep_str(ep),
                         .conditions = cond_str(ep.cond),
                         .node = ei.node,
                         .zone = ei.zone,
                         .zone_hints = ei.zone_hints,
                         .node_hints = ei.node_hints,
                         .internal = endpoint_use(s, sp, info, sp.internal_set, e),
                         .external = endpoint_use(s, sp, info, sp.external_set, e),
                         .external_source = external_source(sp, info),
                         .flows = st.slots().active(ep.slot),
                         .packets = c.packets,
                         .bytes = c.bytes});
            if (st.prober)
                if (auto h =
                        st.prober->row(EndpointHealthView::key(info.name.substr(0, info.name.rfind(':')), ep.ip))) {
                    report::Endpoint& r = a.back();
                    r.health = h->state;
                    r.health_since = h->since;
                    r.health_check = h->check;
                    r.last_failure = h->last_failure;
                    r.last_failure_at = h->last_failure_at;
                }
        }
    }
    return a;
}

// One table's NAT flows into the listing, up to `limit` in all.
template <typename K>
void list_flows(const DaemonState& st, const BasicFlowTable<K>& table, const std::string& service, size_t limit,
                uint32_t now, std::vector<report::Flow>& a) {
    scan_live_flows(table, [&](uint32_t, const BasicFlow<K>& f) {
        if (a.size() >= limit) return false;
        if (f.kind != FlowKind::nat) return true;
        // The flow's service slot names its service port for as long as the flow lives.
        std::string name = st.slots().service_name(f.nat().service);
        if (name.empty()) name = "(removed service)";
        if (!service.empty() && name.rfind(service, 0) != 0) return true;
        const FlowState sv = FlowState::load(f.state);
        std::string state = static_cast<Proto>(f.key[0].proto) == Proto::tcp ? tcp_state_name(sv.tcp())
            : sv.dgram_replied()                                             ? "replied"
                                                                             : "unreplied";
        if (sv.gone()) state += ",gone";
        // A replica (sync.h) names the peer it came from (ha.peers, from 1).
        const uint8_t origin = f.origin.load(std::memory_order_relaxed);
        a.push_back({.original = format_tuple(f.key[0]),
                     .endpoint = format_endpoint(IpAddr::of(f.key[1].src), rte_be_to_cpu_16(f.key[1].sport)),
                     .snat = f.flags & kFlowMasq
                         ? std::optional(format_endpoint(IpAddr::of(f.key[1].dst), rte_be_to_cpu_16(f.key[1].dport)))
                         : std::nullopt,
                     .state = state,
                     .idle = now - f.last_seen.load(std::memory_order_relaxed),
                     .service = name,
                     .replica_of = origin ? std::optional<unsigned>(origin) : std::nullopt});
        return a.size() < limit;
    });
}

std::vector<report::Flow> flows(DaemonState& st, const std::string& service, size_t limit) {
    const uint32_t now = flow_clock_now();
    std::vector<report::Flow> a;
    list_flows(st, *st.flows, service, limit, now, a);
    if (st.flows6) list_flows(st, *st.flows6, service, limit, now, a);
    return a;
}

report::Keyed<uint64_t> by_reason(const uint64_t (&v)[kDropReasons]) {
    report::Keyed<uint64_t> k;
    for (unsigned r = 1; r < kDropReasons; ++r) k.add(std::string(drop_reason_name(static_cast<DropReason>(r))), v[r]);
    return k;
}

report::Stats stats(const DaemonState& st) {
    const WorkerCounters t = sum_counters(st);
    report::Stats r{.drops = by_reason(t.drops),
                    .rejects = by_reason(t.rejects),
                    .flows = {.live = st.flows_live(),
                              .created = t.flows_created,
                              .expired = t.flows_expired,
                              .joined = t.flows_joined,
                              .early_dropped = t.flows_early_dropped,
                              .port_remapped = t.flows_port_remapped,
                              .masquerade_ports_steered = t.snat_steered,
                              .masquerade_ports_unsteered = t.snat_unsteered,
                              .reopened = t.flows_reopened},
                    .fragments = {.held = st.frags ? st.frags->held() : 0,
                                  .datagrams = st.frags ? st.frags->datagrams() : 0,
                                  .stored = t.frag_stored,
                                  .released = t.frag_released,
                                  .fragmented = t.frag_out_packets,
                                  .fragments_out = t.frag_out_fragments},
                    .mempool = {.size = st.pool->size, .in_use = rte_mempool_in_use_count(st.pool)},
                    .services = services(st),
                    .endpoints = endpoints(st)};
    for (const PortView& p : st.ports) r.ports.add(p.name, port_counters(st, p));
    for (unsigned v = 0; v < kVerdicts; ++v)
        r.verdicts.add(std::string(verdict_name(static_cast<Verdict>(v))), t.verdicts[v]);
    for (const Worker* w : st.workers) {
        const WorkerCounters& c = w->counters();
        r.workers.push_back({.rx = c.rx_packets,
                             .tx = c.tx_packets,
                             .generated = c.generated,
                             .dropped = c.dropped(),
                             .rejected = c.rejected(),
                             .held = c.held,
                             .frag_stored = c.frag_stored,
                             .frag_taken = c.frag_taken,
                             .unaccounted = c.unaccounted()});
    }
    if (st.cfg.dataplane.latency_sampling) {
        const LatencyHistogram h = sum_latency(st);
        r.latency = report::Latency{.samples = h.samples,
                                    .p50_us = h.quantile(0.5) / 1e3,
                                    .p99_us = h.quantile(0.99) / 1e3,
                                    .p999_us = h.quantile(0.999) / 1e3,
                                    .max_us = static_cast<double>(h.max_ns) / 1e3};
    }
    return r;
}

// What a command answers: its result, whether it did what was asked, or why the request was
// refused before anything ran.
struct Answer {
    Json result;
    bool ok = true;
    std::string refused;  // a bad request: nothing ran
};

struct Request {
    DaemonState& st;
    const CommandRequest& req;
    const std::function<ReloadOutcome()>& reload;
};

Answer refuse(std::string why) { return Answer{.result = nullptr, .ok = false, .refused = std::move(why)}; }

Answer run_reload(const Request& r) {
    const ReloadOutcome o = r.reload();
    std::lock_guard lk(r.st.mu);
    return Answer{.result = report::Reload{.ok = o.ok, .generation = r.st.generation(), .message = o.message},
                  .ok = o.ok};
}

// The value of option `flag` as a whole number in [lo, hi]: `absent` when not given, nullopt
// (with `why` set) when it is not such a number.
std::optional<uint64_t> number_option(const Request& r, std::string_view flag, uint64_t lo, uint64_t hi,
                                      uint64_t absent, std::string_view what, std::string& why) {
    const auto it = r.req.options.find(flag);
    if (it == r.req.options.end()) return absent;
    if (const auto v = parse_number(it->second, lo, hi)) return v;
    why = fmt::format("{} \"{}\" is not {} ({} to {})", flag, it->second, what, lo, hi);
    return std::nullopt;
}

Answer run_flows(const Request& r) {
    std::string why;
    if (r.req.options.count("--top")) {
        const auto n = number_option(r, "--top", 1, 100000, 10, "a number from 1 to 100000", why);
        if (!n) return refuse(why);
        const auto by = r.req.options.find("--by");
        const std::string key = by == r.req.options.end() ? "source" : by->second;
        if (key != "source" && key != "service" && key != "endpoint")
            return refuse(fmt::format("--by {}: count by source, service or endpoint", key));
        std::lock_guard lk(r.st.mu);
        return Answer{.result = top_talkers(r.st, key, *n)};
    }
    if (r.req.options.count("--by")) return refuse("--by goes with --top");
    const auto limit = number_option(r, "--limit", 0, UINT32_MAX, 100, "a number", why);
    if (!limit) return refuse(why);
    const auto service = r.req.options.find("--service");
    std::lock_guard lk(r.st.mu);
    return Answer{.result = flows(r.st, service == r.req.options.end() ? "" : service->second, *limit)};
}

// --timeout takes what control.drain_timeout takes (config_fields.h).
Answer run_drain(const Request& r) {
    const ConfigField& f = config_field("control", "drain_timeout");
    std::string why;
    const auto timeout = number_option(r, "--timeout", f.lo, f.hi, 0, "a number of seconds", why);
    if (!timeout) return refuse(why);
    std::lock_guard lk(r.st.mu);
    return Answer{.result = drain(r.st, static_cast<long>(*timeout))};
}

// A command that reads or changes the daemon's state under its lock.
template <auto F>
Answer locked(const Request& r) {
    std::lock_guard lk(r.st.mu);
    return Answer{.result = F(r.st)};
}

// A handler for each remote command of kCommands, in its order (checked below at compile time).
struct Handler {
    std::string_view name;
    Answer (*run)(const Request&);
};
constexpr Handler kHandlers[] = {
    {"status", locked<status>}, {"services", locked<services>}, {"endpoints", locked<endpoints>},
    {"flows", run_flows},       {"stats", locked<stats>},       {"reload", run_reload},
    {"drain", run_drain},       {"undrain", locked<undrain>},
};

constexpr bool handlers_match_table() {
    size_t h = 0;
    for (const CommandSpec& c : kCommands) {
        if (!c.remote) continue;
        if (h == std::size(kHandlers) || kHandlers[h].name != c.name) return false;
        ++h;
    }
    return h == std::size(kHandlers);
}
static_assert(handlers_match_table(), "kHandlers must answer exactly kCommands' remote commands, in order");

}  // namespace

// The live NAT flows of both tables counted by source, service port or endpoint; the `n` largest,
// ties by key. Read as the listing is, the workers running.
std::vector<report::Talker> top_talkers(const DaemonState& st, const std::string& by, size_t n) {
    std::unordered_map<std::string, report::Talker> count;
    auto tally = [&](const auto& table) {
        scan_live_flows(table, [&](uint32_t, const auto& f) {
            if (f.kind != FlowKind::nat) return true;
            std::string key = by == "service" ? st.slots().service_name(f.nat().service)
                : by == "endpoint" ? format_endpoint(IpAddr::of(f.key[1].src), rte_be_to_cpu_16(f.key[1].sport))
                                   : format_ip(IpAddr::of(f.key[0].src));
            report::Talker& t = count[key];
            ++t.flows;
            const FlowState sv = FlowState::load(f.state);
            t.tcp_open += static_cast<Proto>(f.key[0].proto) == Proto::tcp && sv.tcp() == TcpState::established;
            return true;
        });
    };
    tally(*st.flows);
    if (st.flows6) tally(*st.flows6);
    std::vector<report::Talker> a;
    a.reserve(count.size());
    for (auto& [k, t] : count) t.key = k, a.push_back(t);
    const size_t keep = std::min(n, a.size());
    std::partial_sort(a.begin(), a.begin() + static_cast<ptrdiff_t>(keep), a.end(), [](const auto& x, const auto& y) {
        return x.flows != y.flows ? x.flows > y.flows : x.key < y.key;
    });
    a.resize(keep);
    return a;
}

std::string handle_command(DaemonState& st, const std::string& line, const std::function<ReloadOutcome()>& reload) {
    std::istringstream is(line);
    std::vector<std::string> words;
    for (std::string w; is >> w;) words.push_back(w);
    const CommandRequest req = parse_request(words);
    Answer a;
    if (!req.error.empty()) {
        a = refuse(req.error);
    } else {
        for (const Handler& h : kHandlers)
            if (h.name == req.spec->name) a = h.run(Request{st, req, reload});
    }
    Json j{{"ok", a.ok}};
    if (!a.refused.empty())
        j["error"] = a.refused, j["bad_request"] = true;
    else
        j["result"] = std::move(a.result);
    return j.dump() + "\n";
}

}  // namespace svcgate::ctl
