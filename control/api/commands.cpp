#include "control/api/commands.h"

#include "control/ha/sync.h"

#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <rte_ethdev.h>

#include "control/config/kube_objects.h"
#include "control/trace/packet_spec.h"
#include "dataplane/lb/scheduler.h"
#include "control/ha/sync.h"
#include "control/config/yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;
using Json = nlohmann::ordered_json;

WorkerCounters sum_counters(const DaemonState& st) {
    WorkerCounters t{};
    for (const Worker* w : st.workers) t += w->counters();
    return t;
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
    return s.empty() ? "-" : s;
}

bool link_up(uint16_t port) {
    rte_eth_link link{};
    rte_eth_link_get_nowait(port, &link);
    return link.link_status;
}

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Json health_json(const DaemonState& st) {
    const HealthState& h = st.health;
    Json j{{"live", h.live}, {"ports_up", h.ports_up}, {"healthy", h.healthy}, {"draining", h.draining},
           {"announced", h.announced}, {"announce_table", st.cfg.routing.table}};
    if (h.draining) {
        j["connections_left"] = h.connections_left;
        j["drain_seconds_left"] = std::max(0.0, h.drain_deadline_unix - unix_now());
    }
    if (!h.announce_error.empty()) j["announce_error"] = h.announce_error;
    return j;
}

// Drain: withdraw the announcements and answer /healthz 503 (the control loop applies it within
// one turn), serve the flows already here, exit once none is left or at the deadline.
std::string drain(DaemonState& st, long timeout, bool json) {
    HealthState& h = st.health;
    const double now = unix_now();
    const long secs = timeout > 0 ? timeout : static_cast<long>(st.cfg.control.drain_timeout);
    if (!h.draining) h.drain_started_unix = now;
    h.draining = true;
    h.healthy = false;
    h.drain_deadline_unix = now + static_cast<double>(secs);
    if (json) return Json{{"ok", true}, {"draining", true}, {"timeout_seconds", secs}}.dump() + "\n";
    return fmt::format("draining: announcements withdrawn, /healthz 503; svcgate exits once its connections are "
                       "gone or in {} s (svcgatectl undrain to stop)\n", secs);
}

std::string undrain(DaemonState& st, bool json) {
    const bool was = st.health.draining;
    st.health.draining = false;
    if (json) return Json{{"ok", true}, {"draining", false}, {"was_draining", was}}.dump() + "\n";
    return was ? "undrained: announcing again once healthy\n" : "not draining\n";
}

// Flow replication (sync.h) as status --json shows it; null when off.
Json sync_json(const DaemonState& st, const WorkerCounters& t) {
    if (!st.sync) return nullptr;
    const SyncStatus y = st.sync->status();
    Json peers = Json::array();
    for (const SyncPeerStatus& p : y.peers)
        peers.push_back({{"address", p.address}, {"alive", p.alive},
                         {"last_heard_seconds", p.last_heard_seconds < 0 ? Json(nullptr) : Json(p.last_heard_seconds)},
                         {"copied", p.copied}, {"flows_sent", p.flows_sent}, {"flows_received", p.flows_received},
                         {"datagrams_sent", p.datagrams_sent}, {"datagrams_received", p.datagrams_received},
                         {"flows_held", p.flows_owned}, {"addresses", p.addresses}, {"adopted", p.adopted}});
    Json drops = Json::object();
    for (unsigned d = 0; d < sync::kDrops; ++d) drops[sync::drop_name(static_cast<sync::Drop>(d))] = y.drops[d];
    for (unsigned d = 0; d < kRecordDrops; ++d)
        drops[fmt::format("record_{}", record_drop_name(static_cast<RecordDrop>(d)))] = y.record_drops[d];
    return Json{{"listen", y.listen}, {"ready", y.ready}, {"peers", peers}, {"replicas", y.replicas},
                {"takeovers", t.takeovers}, {"events", t.sync_events}, {"events_ring_full", t.sync_ring_full},
                {"refreshed", y.refreshed}, {"queued", y.queued}, {"send_errors", y.send_errors}, {"drops", drops}};
}

std::string status(DaemonState& st, bool json) {
    const ServiceSnapshot& s = st.snap();
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - st.started);
    const WorkerCounters t = sum_counters(st);
    const KubeStats& k = st.cfg.kube;
    if (json) {
        Json ports = Json::array();
        for (const PortView& p : st.ports)
            ports.push_back({{"name", p.name}, {"device", p.device}, {"link", link_up(p.id)},
                             {"rx_queues", p.rxq}, {"tx_queues", p.txq}});
        const Json j{{"config", st.config_path},
                     {"generation", st.generation()},
                     {"uptime_seconds", up.count()},
                     {"workers", st.workers.size()},
                     {"ports", ports},
                     {"service_ports", s.services.size()},
                     {"endpoints", s.endpoints.size()},
                     {"flows", st.flows_live()},
                     {"flow_capacity", st.flows_capacity()},
                     {"rx_packets", t.rx_packets},
                     {"reloads", st.reload.ok},
                     {"reload_failures", st.reload.failed},
                     {"last_reload_ok", st.reload.last_ok},
                     {"last_reload_seconds", st.reload.last_seconds},
                     {"last_reload_error", st.reload.last_ok ? Json(nullptr) : Json(st.reload.last_error)},
                     {"health", health_json(st)},
                     {"ha", sync_json(st, t)},
                     {"kubernetes",
                      {{"services", k.services}, {"endpoint_slices", k.slices}, {"headless", k.headless},
                       {"external_name", k.external_name},
                       {"ignored_objects", k.ignored_objects}}}};
        return j.dump() + "\n";
    }
    std::string o = fmt::format("config      {} (generation {})\nuptime      {} s\nworkers     {}\n", st.config_path,
                                st.generation(), up.count(), st.workers.size());
    for (const PortView& p : st.ports)
        o += fmt::format("port        {} {} link {} queues {}/{}\n", p.name, p.device, link_up(p.id) ? "up" : "down",
                         p.rxq, p.txq);
    o += fmt::format("services    {} service ports, {} endpoints\nflows       {} of {}\npackets     {} in\n",
                     s.services.size(), s.endpoints.size(), st.flows_live(), st.flows_capacity(), t.rx_packets);
    if (!st.cfg.manifests.empty()) {
        o += "kubernetes  " + kube_summary(k) + "\n";
        for (const ServiceConfig& sc : st.cfg.services)
            if (sc.type == ServiceType::external_name || sc.cluster_ips.empty())
                o += fmt::format("            {} {}\n", sc.full_name(),
                                 sc.type == ServiceType::external_name ? "ExternalName" : "headless / no clusterIP");
    }
    const HealthState& h = st.health;
    o += fmt::format("health      {}{}\n", h.healthy ? "healthy" : "UNHEALTHY",
                     h.healthy ? "" : fmt::format(" (live {}, ports up {}, draining {})", h.live, h.ports_up, h.draining));
    if (h.draining)
        o += fmt::format("draining    {} connections left; exits by itself when none is, or in {:.0f} s\n",
                         h.connections_left, std::max(0.0, h.drain_deadline_unix - unix_now()));
    if (st.cfg.routing.table) {
        o += fmt::format("announcing  {} prefixes in kernel table {}", h.announced.size(), st.cfg.routing.table);
        for (const std::string& a : h.announced) o += " " + a;
        o += "\n";
        if (!h.announce_error.empty()) o += "            last error: " + h.announce_error + "\n";
    }
    if (st.sync) {
        const SyncStatus y = st.sync->status();
        o += fmt::format("ha          listening on {}, {}; {} replicas held, {} taken over, {} flows handed by the "
                         "workers ({} refused by a full ring, {} waiting to be sent), {} refreshed\n",
                         y.listen, y.ready ? "ready" : "WAITING for the peers' flows", y.replicas, t.takeovers,
                         t.sync_events, t.sync_ring_full, y.queued, y.refreshed);
        for (const SyncPeerStatus& p : y.peers)
            o += fmt::format("  peer      {} {}, last heard {}, flows sent {} received {}, holds {}{}\n", p.address,
                             p.alive ? "alive" : "DEAD",
                             p.last_heard_seconds < 0 ? "never" : fmt::format("{:.1f} s ago", p.last_heard_seconds),
                             p.flows_sent, p.flows_received, p.flows_owned, p.copied ? ", has sent us its copy" : "");
        for (const SyncPeerStatus& p : y.peers)
            if (p.adopted) o += fmt::format("  adopted   {}'s addresses:{}\n", p.address, fmt::format(" {}", fmt::join(p.addresses, " ")));
        std::string drops;
        for (unsigned d = 0; d < sync::kDrops; ++d)
            if (y.drops[d]) drops += fmt::format(" {} {}", sync::drop_name(static_cast<sync::Drop>(d)), y.drops[d]);
        for (unsigned d = 0; d < kRecordDrops; ++d)
            if (y.record_drops[d])
                drops += fmt::format(" record_{} {}", record_drop_name(static_cast<RecordDrop>(d)), y.record_drops[d]);
        if (!drops.empty()) o += "  dropped  " + drops + "\n";
    }
    o += fmt::format("reloads     {} ok, {} failed", st.reload.ok, st.reload.failed);
    if (st.reload.ok) o += fmt::format("; last took {:.1f} ms ({})", st.reload.last_seconds * 1e3, st.reload.last_trigger);
    o += "\n";
    if (!st.reload.last_ok) o += "last reload REFUSED, the running config stays:\n" + st.reload.last_error + "\n";
    return o;
}

Json services_json(const DaemonState& st) {
    const ServiceSnapshot& s = st.snap();
    Json a = Json::array();
    for (size_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        const ServiceInfo& info = s.info(static_cast<uint32_t>(i));
        const PacketCounter c = st.slots().service_total(sp.slot);
        uint32_t ready = 0;
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) ready += (s.endpoints[e].cond & kReady) != 0;
        Json ext = Json::array(), lb = Json::array();
        for (const IpAddr& x : info.external_ips) ext.push_back(format_ip(x));
        for (const IpAddr& x : info.lb_ips) lb.push_back(format_ip(x));
        a.push_back({{"name", info.name}, {"protocol", proto_name(sp.proto)},
                     {"family", info.family == Family::v6 ? "IPv6" : "IPv4"}, {"cluster_ip", format_ip(info.cluster_ip)},
                     {"port", rte_be_to_cpu_16(info.port)}, {"node_port", info.node_port}, {"external_ips", ext},
                     {"load_balancer_ips", lb}, {"endpoints", sp.ep_count}, {"ready", ready},
                     {"scheduler", scheduler_name(sp.scheduler)}, {"packets", c.packets}, {"bytes", c.bytes}});
    }
    return a;
}

std::string services(DaemonState& st, bool json) {
    if (json) return services_json(st).dump() + "\n";
    std::string o = fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:>10} {:>12}\n", "SERVICE PORT", "PROTO",
                                "CLUSTER-IP:PORT", "NODEPORT", "ENDPOINTS", "SCHED", "PACKETS", "BYTES");
    for (const Json& j : services_json(st))
        o += fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:>10} {:>12}\n", j["name"].get<std::string>(),
                         j["protocol"].get<std::string>(),
                         format_endpoint(*parse_ip(j["cluster_ip"].get<std::string>()), j["port"].get<uint16_t>()),
                         j["node_port"].get<int>() ? std::to_string(j["node_port"].get<int>()) : "-",
                         fmt::format("{}/{}", j["ready"].get<uint32_t>(), j["endpoints"].get<uint32_t>()),
                         j["scheduler"].get<std::string>(), j["packets"].get<uint64_t>(), j["bytes"].get<uint64_t>());
    return o;
}

Json endpoints_json(const DaemonState& st) {
    const ServiceSnapshot& s = st.snap();
    Json a = Json::array();
    for (size_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const Endpoint& ep = s.endpoints[e];
            const PacketCounter c = st.slots().endpoint_total(ep.slot);
            a.push_back({{"service", s.info(static_cast<uint32_t>(i)).name}, {"endpoint", ep_str(ep)},
                         {"conditions", cond_str(ep.cond)}, {"node", s.catalogue.endpoints[e].node},
                         {"flows", st.slots().active(ep.slot)}, {"packets", c.packets}, {"bytes", c.bytes}});
        }
    }
    return a;
}

std::string endpoints(DaemonState& st, bool json) {
    if (json) return endpoints_json(st).dump() + "\n";
    std::string o = fmt::format("{:<40} {:<21} {:<28} {:<14} {:>6} {:>10} {:>12}\n", "SERVICE PORT", "ENDPOINT",
                                "CONDITIONS", "NODE", "FLOWS", "PACKETS", "BYTES");
    for (const Json& j : endpoints_json(st)) {
        const std::string node = j["node"].get<std::string>();
        o += fmt::format("{:<40} {:<21} {:<28} {:<14} {:>6} {:>10} {:>12}\n", j["service"].get<std::string>(),
                         j["endpoint"].get<std::string>(), j["conditions"].get<std::string>(), node.empty() ? "-" : node,
                         j["flows"].get<int32_t>(), j["packets"].get<uint64_t>(), j["bytes"].get<uint64_t>());
    }
    return o;
}

namespace {
// One table's NAT flows into the listing (json: `a`, text: `o`), up to `limit` in all.
template <typename K>
void list_flows(const DaemonState& st, const BasicFlowTable<K>& table, const std::string& service, size_t limit,
                bool json, uint32_t now, Json& a, std::string& o, size_t& n) {
    const typename BasicFlowTable<K>::ScanGuard reading(table);  // no record is reused while we read it
    for (uint32_t id = 0; id < table.capacity() && n < limit; ++id) {
        const auto& f = table.flow(id);
        if (!f.live.load(std::memory_order_acquire) || f.kind != FlowKind::nat) continue;
        // The flow's service slot names its service port for as long as the flow lives.
        std::string name = st.slots().service_name(f.nat().service);
        if (name.empty()) name = "(removed service)";
        if (!service.empty() && name.rfind(service, 0) != 0) continue;
        const uint8_t sv = f.state.load(std::memory_order_relaxed);
        std::string state = static_cast<Proto>(f.key[0].proto) == Proto::tcp
                                ? tcp_state_name(static_cast<TcpState>(sv & kStateMask))
                                : (sv & 1 ? "replied" : "unreplied");
        if (sv & kStateGone) state += ",gone";
        // A replica (sync.h) names the peer it came from (ha.peers, from 1).
        const uint8_t origin = f.origin.load(std::memory_order_relaxed);
        if (origin && !json) state += fmt::format(",replica:{}", origin);
        const std::string ep = format_endpoint(IpAddr::of(f.key[1].src), rte_be_to_cpu_16(f.key[1].sport));
        const bool masq = f.flags & kFlowMasq;
        const std::string snat = format_endpoint(IpAddr::of(f.key[1].dst), rte_be_to_cpu_16(f.key[1].dport));
        const uint32_t idle = now - f.last_seen.load(std::memory_order_relaxed);
        if (json)
            a.push_back({{"original", format_tuple(f.key[0])}, {"endpoint", ep}, {"snat", masq ? Json(snat) : Json(nullptr)},
                         {"state", state}, {"idle", idle}, {"service", name},
                         {"replica_of", origin ? Json(origin) : Json(nullptr)}});
        else
            o += fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", format_tuple(f.key[0]), ep, masq ? snat : "-",
                             state, idle, name);
        ++n;
    }
}
}  // namespace

std::string flows(DaemonState& st, const std::string& service, size_t limit, bool json) {
    const uint32_t now = flow_clock_now();
    Json a = Json::array();
    std::string o = fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", "ORIGINAL (CLIENT > VIP)", "ENDPOINT", "SNAT",
                                "STATE", "IDLE", "SERVICE");
    size_t n = 0;
    list_flows(st, *st.flows, service, limit, json, now, a, o, n);
    if (st.flows6) list_flows(st, *st.flows6, service, limit, json, now, a, o, n);
    if (json) return a.dump() + "\n";
    const uint32_t live = st.flows_live();
    return o + fmt::format("{} flows shown (limit {}), {} live in the tables\n", n, limit, live);
}

Json by_reason(const uint64_t (&v)[kDropReasons]) {
    Json j = Json::object();
    for (unsigned r = 1; r < kDropReasons; ++r) j[std::string(drop_reason_name(static_cast<DropReason>(r)))] = v[r];
    return j;
}

std::string stats(DaemonState& st, bool json) {
    const WorkerCounters t = sum_counters(st);
    if (json) {
        Json ports = Json::object(), verdicts = Json::object(), workers = Json::array();
        for (const PortView& p : st.ports) {
            rte_eth_stats e{};
            rte_eth_stats_get(p.id, &e);
            ports[p.name] = {{"rx_packets", e.ipackets}, {"tx_packets", e.opackets}, {"rx_bytes", e.ibytes},
                             {"tx_bytes", e.obytes}, {"rx_missed", e.imissed}, {"rx_errors", e.ierrors},
                             {"tx_errors", e.oerrors}};
        }
        for (unsigned v = 0; v < kVerdicts; ++v) verdicts[std::string(verdict_name(static_cast<Verdict>(v)))] = t.verdicts[v];
        for (const Worker* w : st.workers) {
            const WorkerCounters& c = w->counters();
            workers.push_back({{"rx", c.rx_packets}, {"tx", c.tx_packets}, {"generated", c.generated},
                               {"dropped", c.dropped()}, {"rejected", c.rejected()}, {"held", c.held},
                               {"frag_stored", c.frag_stored}, {"frag_taken", c.frag_taken},
                               {"unaccounted", c.unaccounted()}});
        }
        const Json j{{"ports", ports},
                     {"verdicts", verdicts},
                     {"drops", by_reason(t.drops)},
                     {"rejects", by_reason(t.rejects)},
                     {"flows",
                      {{"live", st.flows_live()}, {"created", t.flows_created}, {"expired", t.flows_expired},
                       {"joined", t.flows_joined}, {"early_dropped", t.flows_early_dropped}}},
                     {"fragments",
                      {{"held", st.frags ? st.frags->held() : 0}, {"datagrams", st.frags ? st.frags->datagrams() : 0},
                       {"stored", t.frag_stored}, {"released", t.frag_released},
                       {"fragmented", t.frag_out_packets}, {"fragments_out", t.frag_out_fragments}}},
                     {"workers", workers},
                     {"mempool", {{"size", st.pool->size}, {"in_use", rte_mempool_in_use_count(st.pool)}}},
                     {"services", services_json(st)},
                     {"endpoints", endpoints_json(st)}};
        return j.dump() + "\n";
    }
    std::string o = fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", "PORT", "RX-PACKETS", "TX-PACKETS",
                                "RX-BYTES", "TX-BYTES", "MISSED", "ERRORS");
    for (const PortView& p : st.ports) {
        rte_eth_stats e{};
        rte_eth_stats_get(p.id, &e);
        o += fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", p.name, e.ipackets, e.opackets, e.ibytes,
                         e.obytes, e.imissed, e.ierrors + e.oerrors);
    }
    o += "\nVERDICT     PACKETS\n";
    for (unsigned v = 0; v < kVerdicts; ++v)
        o += fmt::format("{:<10} {:>8}\n", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
    o += "\nREFUSED BY REASON            DROPPED REJECTED  WHAT\n";
    for (unsigned r = 1; r < kDropReasons; ++r)
        if (t.drops[r] || t.rejects[r])
            o += fmt::format("{:<28} {:>7} {:>8}  {}\n", drop_reason_name(static_cast<DropReason>(r)), t.drops[r],
                             t.rejects[r], drop_reason_description(static_cast<DropReason>(r)));
    o += fmt::format("\nflows: {} live, {} created, {} expired, {} early-dropped\n", st.flows_live(),
                     t.flows_created, t.flows_expired, t.flows_early_dropped);
    o += fmt::format("fragments: {} held now, {} held in all, {} released; {} packets fragmented into {}\n\n",
                     st.frags ? st.frags->held() : 0, t.frag_stored, t.frag_released, t.frag_out_packets,
                     t.frag_out_fragments);
    return o + services(st, false) + "\n" + endpoints(st, false);
}

}  // namespace

std::string handle_command(DaemonState& st, const std::string& line, const std::function<std::string()>& reload) {
    std::istringstream is(line);
    std::vector<std::string> words;
    for (std::string w; is >> w;) words.push_back(w);
    if (words.empty()) return "error: empty request\n";
    bool json = false;
    std::string service;
    size_t limit = 100;
    long timeout = -1;
    for (size_t i = 1; i < words.size(); ++i) {
        if (words[i] == "--json") {
            json = true;
        } else if (words[i] == "--timeout" && i + 1 < words.size()) {
            try {
                size_t used = 0;
                timeout = std::stol(words[++i], &used);
                if (used != words[i].size() || timeout < 1 || timeout > 86400) throw std::out_of_range("timeout");
            } catch (const std::exception&) {
                return fmt::format("error: --timeout \"{}\" is not a number of seconds (1 to 86400)\n", words[i]);
            }
        } else if (words[i] == "--service" && i + 1 < words.size()) {
            service = words[++i];
        } else if (words[i] == "--limit" && i + 1 < words.size()) {
            try {
                limit = std::stoul(words[++i]);
            } catch (const std::exception&) {
                return fmt::format("error: --limit \"{}\" is not a number\n", words[i]);
            }
        } else {
            return fmt::format("error: unexpected \"{}\"\n", words[i]);
        }
    }
    const std::string& cmd = words[0];
    if (timeout >= 0 && cmd != "drain") return fmt::format("error: --timeout is for drain, not {}\n", cmd);
    if (cmd == "reload") {
        std::string r = reload();
        if (!json) return r;
        std::lock_guard lk(st.mu);
        return Json{{"ok", st.reload.last_ok}, {"generation", st.generation()}, {"message", r}}.dump() + "\n";
    }
    std::lock_guard lk(st.mu);
    if (cmd == "status") return status(st, json);
    if (cmd == "services") return services(st, json);
    if (cmd == "endpoints") return endpoints(st, json);
    if (cmd == "flows") return flows(st, service, limit, json);
    if (cmd == "stats") return stats(st, json);
    if (cmd == "drain") return drain(st, timeout, json);
    if (cmd == "undrain") return undrain(st, json);
    return fmt::format("error: unknown command \"{}\" (status, services, endpoints, flows, stats, reload, drain, "
                       "undrain)\n", cmd);
}

}  // namespace svcgate::ctl
