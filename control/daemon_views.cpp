// svcgatectl's replies and the Prometheus text, read from the running daemon's state.
#include <rte_ethdev.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include <fmt/format.h>

#include "daemon_state.h"
#include "kube_objects.h"
#include "packet_spec.h"
#include "scheduler.h"
#include "yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

WorkerCounters sum_counters(const std::vector<std::unique_ptr<Worker>>& workers) {
    WorkerCounters t{};
    for (const auto& w : workers) {
        const WorkerCounters& c = w->counters();
        t.rx_packets += c.rx_packets;
        t.rx_bytes += c.rx_bytes;
        for (unsigned i = 0; i < std::size(t.verdicts); ++i) t.verdicts[i] += c.verdicts[i];
        for (unsigned i = 0; i < kDropReasons; ++i) t.drops[i] += c.drops[i];
        t.flows_created += c.flows_created;
        t.flows_joined += c.flows_joined;
        t.flows_expired += c.flows_expired;
        t.affinity_hits += c.affinity_hits;
        t.flows_early_dropped += c.flows_early_dropped;
    }
    return t;
}

namespace {
std::string svc_key(const ServicePort& sp) { return sp.name + "/" + proto_name(sp.proto); }
std::string ep_str(const Endpoint& e) { return fmt::format("{}:{}", format_ip4(e.ip), rte_be_to_cpu_16(e.port)); }
}  // namespace

// The service port's counters: every worker of this snapshot plus what earlier ones counted.
SvcCounters service_total(const DaemonState& st, size_t i) {
    const ServiceSnapshot& s = *st.snap;
    SvcCounters c{};
    for (uint16_t w = 0; w < s.workers; ++w) {
        c.packets += s.svc_counters[size_t{w} * s.services.size() + i].packets;
        c.bytes += s.svc_counters[size_t{w} * s.services.size() + i].bytes;
    }
    if (auto it = st.carried.find(svc_key(s.services[i])); it != st.carried.end())
        c.packets += it->second.packets, c.bytes += it->second.bytes;
    return c;
}

namespace {

SvcCounters ep_total(const DaemonState& st, const ServicePort& sp, uint32_t e) {
    const ServiceSnapshot& s = *st.snap;
    SvcCounters c{};
    for (uint16_t w = 0; w < s.workers; ++w) {
        c.packets += s.ep_counters[size_t{w} * s.endpoints.size() + e].packets;
        c.bytes += s.ep_counters[size_t{w} * s.endpoints.size() + e].bytes;
    }
    if (auto it = st.carried.find(svc_key(sp) + " " + ep_str(s.endpoints[e])); it != st.carried.end())
        c.packets += it->second.packets, c.bytes += it->second.bytes;
    return c;
}

std::string jstr(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if (static_cast<unsigned char>(c) < 0x20) o += fmt::format("\\u{:04x}", c);
        else o += c;
    }
    return o + "\"";
}

std::string cond_str(uint8_t c) {
    std::string s;
    auto add = [&](const char* w) { s += s.empty() ? w : std::string(",") + w; };
    if (c & kReady) add("ready");
    if (c & kServing) add("serving");
    if (c & kTerminating) add("terminating");
    if (c & kLocal) add("local");
    return s.empty() ? "-" : s;
}

std::string status(DaemonState& st, bool json) {
    const ServiceSnapshot& s = *st.snap;
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - st.started);
    const WorkerCounters t = sum_counters(st.workers);
    if (json) {
        std::string ports;
        for (size_t p = 0; p < st.ports.size(); ++p) {
            rte_eth_link link{};
            rte_eth_link_get_nowait(st.ports[p].id, &link);
            ports += fmt::format("{}{{\"name\":{},\"device\":{},\"link\":{},\"rx_queues\":{},\"tx_queues\":{}}}",
                                 p ? "," : "", jstr(st.cfg.dataplane.ports[p].name),
                                 jstr(st.cfg.dataplane.ports[p].device), link.link_status ? "true" : "false",
                                 st.ports[p].rxq, st.ports[p].txq);
        }
        return fmt::format(
            "{{\"config\":{},\"generation\":{},\"uptime_seconds\":{},\"workers\":{},\"ports\":[{}],"
            "\"service_ports\":{},\"endpoints\":{},\"flows\":{},\"flow_capacity\":{},\"rx_packets\":{},"
            "\"reloads\":{},\"reload_failures\":{},\"last_reload_ok\":{},\"last_reload_seconds\":{},"
            "\"last_reload_error\":{},\"kubernetes\":{{\"services\":{},\"endpoint_slices\":{},\"headless\":{},"
            "\"external_name\":{},\"ipv6_skipped\":{},\"ignored_objects\":{}}}}}\n",
            jstr(st.config_path), st.generation, up.count(), st.workers.size(), ports, s.services.size(),
            s.endpoints.size(), st.flows->live_total(), st.flows->capacity(), t.rx_packets, st.reload.ok,
            st.reload.failed, st.reload.last_ok ? "true" : "false", st.reload.last_seconds,
            st.reload.last_ok ? "null" : jstr(st.reload.last_error), st.cfg.kube.services, st.cfg.kube.slices,
            st.cfg.kube.headless, st.cfg.kube.external_name, st.cfg.kube.ipv6_skipped, st.cfg.kube.ignored_objects);
    }
    std::string o = fmt::format("config      {} (generation {})\nuptime      {} s\nworkers     {}\n", st.config_path,
                                st.generation, up.count(), st.workers.size());
    for (size_t p = 0; p < st.ports.size(); ++p) {
        rte_eth_link link{};
        rte_eth_link_get_nowait(st.ports[p].id, &link);
        o += fmt::format("port        {} {} link {} queues {}/{}\n", st.cfg.dataplane.ports[p].name,
                         st.cfg.dataplane.ports[p].device, link.link_status ? "up" : "down", st.ports[p].rxq,
                         st.ports[p].txq);
    }
    o += fmt::format("services    {} service ports, {} endpoints\nflows       {} of {}\npackets     {} in\n",
                     s.services.size(), s.endpoints.size(), st.flows->live_total(), st.flows->capacity(), t.rx_packets);
    if (!st.cfg.manifests.empty()) {
        o += "kubernetes  " + kube_summary(st.cfg.kube) + "\n";
        for (const ServiceConfig& sc : st.cfg.services)
            if (sc.type == ServiceType::external_name || !sc.cluster_ip)
                o += fmt::format("            {} {}\n", sc.full_name(),
                                 sc.type == ServiceType::external_name ? "ExternalName" : "headless / no clusterIP");
    }
    o += fmt::format("reloads     {} ok, {} failed", st.reload.ok, st.reload.failed);
    if (st.reload.ok) o += fmt::format("; last took {:.1f} ms ({})", st.reload.last_seconds * 1e3, st.reload.last_trigger);
    o += "\n";
    if (!st.reload.last_ok) o += "last reload REFUSED, the running config stays:\n" + st.reload.last_error + "\n";
    return o;
}

std::string services(DaemonState& st, bool json) {
    const ServiceSnapshot& s = *st.snap;
    std::string o = json ? "[" : fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:>10} {:>12}\n", "SERVICE PORT",
                                             "PROTO", "CLUSTER-IP:PORT", "NODEPORT", "ENDPOINTS", "SCHED", "PACKETS",
                                             "BYTES");
    for (size_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        const SvcCounters c = service_total(st, i);
        uint32_t ready = 0;
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) ready += (s.endpoints[e].cond & kReady) != 0;
        const std::string vip = fmt::format("{}:{}", format_ip4(sp.cluster_ip), rte_be_to_cpu_16(sp.port));
        if (json) {
            std::string ext;
            for (Ip4 a : sp.external_ips) ext += (ext.empty() ? "" : ",") + jstr(format_ip4(a));
            std::string lb;
            for (Ip4 a : sp.lb_ips) lb += (lb.empty() ? "" : ",") + jstr(format_ip4(a));
            o += fmt::format("{}{{\"name\":{},\"protocol\":\"{}\",\"cluster_ip\":\"{}\",\"port\":{},\"node_port\":{},"
                             "\"external_ips\":[{}],\"load_balancer_ips\":[{}],\"endpoints\":{},\"ready\":{},"
                             "\"scheduler\":\"{}\",\"packets\":{},\"bytes\":{}}}",
                             i ? "," : "", jstr(sp.name), proto_name(sp.proto), format_ip4(sp.cluster_ip),
                             rte_be_to_cpu_16(sp.port), sp.node_port, ext, lb, sp.ep_count, ready,
                             scheduler_name(sp.scheduler), c.packets, c.bytes);
        } else {
            o += fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:>10} {:>12}\n", sp.name, proto_name(sp.proto), vip,
                             sp.node_port ? std::to_string(sp.node_port) : "-", fmt::format("{}/{}", ready, sp.ep_count),
                             scheduler_name(sp.scheduler), c.packets, c.bytes);
        }
    }
    return json ? o + "]\n" : o;
}

std::string endpoints(DaemonState& st, bool json) {
    const ServiceSnapshot& s = *st.snap;
    std::string o = json ? "[" : fmt::format("{:<40} {:<21} {:<28} {:<14} {:>6} {:>10} {:>12}\n", "SERVICE PORT",
                                             "ENDPOINT", "CONDITIONS", "NODE", "FLOWS", "PACKETS", "BYTES");
    bool first = true;
    for (const ServicePort& sp : s.services) {
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const Endpoint& ep = s.endpoints[e];
            const SvcCounters c = ep_total(st, sp, e);
            const int32_t active = s.active[e].load(std::memory_order_relaxed);
            if (json)
                o += fmt::format("{}{{\"service\":{},\"endpoint\":\"{}\",\"conditions\":\"{}\",\"node\":{},"
                                 "\"flows\":{},\"packets\":{},\"bytes\":{}}}",
                                 first ? "" : ",", jstr(sp.name), ep_str(ep), cond_str(ep.cond), jstr(ep.node),
                                 active, c.packets, c.bytes);
            else
                o += fmt::format("{:<40} {:<21} {:<28} {:<14} {:>6} {:>10} {:>12}\n", sp.name, ep_str(ep),
                                 cond_str(ep.cond), ep.node.empty() ? "-" : ep.node, active, c.packets, c.bytes);
            first = false;
        }
    }
    return json ? o + "]\n" : o;
}

std::string flows(DaemonState& st, const std::string& service, size_t limit, bool json) {
    const ServiceSnapshot& s = *st.snap;
    std::map<uint32_t, std::string> names;  // ServicePort::id → name (ids survive reloads)
    for (const ServicePort& sp : s.services) names[sp.id] = sp.name;
    const uint32_t now = flow_clock_now();
    std::string o = json ? "[" : fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", "ORIGINAL (CLIENT > VIP)",
                                             "ENDPOINT", "SNAT", "STATE", "IDLE", "SERVICE");
    size_t n = 0, matched = 0;
    const FlowTable::ScanGuard reading(*st.flows);  // no record is reused while we read it
    for (uint32_t id = 0; id < st.flows->capacity() && n < limit; ++id) {
        const Flow& f = st.flows->flow(id);
        if (!f.live.load(std::memory_order_acquire) || f.kind != FlowKind::nat) continue;
        auto it = names.find(f.svc_id);
        const std::string name = it == names.end() ? "(removed service)" : it->second;
        if (!service.empty() && name.rfind(service, 0) != 0) continue;
        ++matched;
        const uint8_t sv = f.state.load(std::memory_order_relaxed);
        std::string state = static_cast<Proto>(f.key[0].proto) == Proto::tcp
                                ? tcp_state_name(static_cast<TcpState>(sv & kStateMask))
                                : (sv & 1 ? "replied" : "unreplied");
        if (sv & kStateGone) state += ",gone";
        const std::string ep = fmt::format("{}:{}", format_ip4(f.key[1].src), rte_be_to_cpu_16(f.key[1].sport));
        const std::string snat = (f.flags & kFlowMasq)
                                     ? fmt::format("{}:{}", format_ip4(f.key[1].dst), rte_be_to_cpu_16(f.key[1].dport))
                                     : "-";
        const uint32_t idle = now - f.last_seen.load(std::memory_order_relaxed);
        if (json)
            o += fmt::format("{}{{\"original\":{},\"endpoint\":\"{}\",\"snat\":{},\"state\":\"{}\",\"idle\":{},"
                             "\"service\":{}}}",
                             n ? "," : "", jstr(format_tuple(f.key[0])), ep, snat == "-" ? "null" : jstr(snat), state,
                             idle, jstr(name));
        else
            o += fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", format_tuple(f.key[0]), ep, snat, state, idle,
                             name);
        ++n;
    }
    if (json) return o + "]\n";
    return o + fmt::format("{} flows shown (limit {}), {} live in the table\n", n, limit, st.flows->live_total());
}

std::string stats(DaemonState& st, bool json) {
    const WorkerCounters t = sum_counters(st.workers);
    std::string o;
    if (json) {
        std::string ports, verdicts, drops;
        for (size_t p = 0; p < st.ports.size(); ++p) {
            rte_eth_stats e{};
            rte_eth_stats_get(st.ports[p].id, &e);
            ports += fmt::format("{}{}:{{\"rx_packets\":{},\"tx_packets\":{},\"rx_bytes\":{},\"tx_bytes\":{},"
                                 "\"rx_missed\":{},\"rx_errors\":{},\"tx_errors\":{}}}",
                                 p ? "," : "", jstr(st.cfg.dataplane.ports[p].name), e.ipackets, e.opackets, e.ibytes,
                                 e.obytes, e.imissed, e.ierrors, e.oerrors);
        }
        for (unsigned v = 0; v < std::size(t.verdicts); ++v)
            verdicts += fmt::format("{}\"{}\":{}", v ? "," : "", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
        for (unsigned r = 1; r < kDropReasons; ++r)
            drops += fmt::format("{}\"{}\":{}", r > 1 ? "," : "", drop_reason_name(static_cast<DropReason>(r)), t.drops[r]);
        std::string workers;
        for (size_t w = 0; w < st.workers.size(); ++w) {
            const Worker& wk = *st.workers[w];
            const WorkerCounters& c = wk.counters();
            workers += fmt::format("{}{{\"rx\":{},\"tx\":{},\"generated\":{},\"rejected\":{},\"held\":{},"
                                   "\"unaccounted\":{}}}", w ? "," : "", c.rx_packets, wk.tx_packets(),
                                   wk.generated(), c.verdicts[static_cast<unsigned>(Verdict::reject)], wk.held(),
                                   wk.unaccounted());
        }
        return fmt::format("{{\"ports\":{{{}}},\"verdicts\":{{{}}},\"drops\":{{{}}},\"flows\":{{\"live\":{},"
                           "\"created\":{},\"expired\":{},\"joined\":{},\"early_dropped\":{}}},"
                           "\"workers\":[{}],\"mempool\":{{\"size\":{},\"in_use\":{}}},"
                           "\"services\":{},\"endpoints\":{}}}\n",
                           ports, verdicts, drops, st.flows->live_total(), t.flows_created, t.flows_expired,
                           t.flows_joined, t.flows_early_dropped, workers, st.shared->pool->size,
                           rte_mempool_in_use_count(st.shared->pool), services(st, true),
                           endpoints(st, true));
    }
    o += fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", "PORT", "RX-PACKETS", "TX-PACKETS",
                     "RX-BYTES", "TX-BYTES", "MISSED", "ERRORS");
    for (size_t p = 0; p < st.ports.size(); ++p) {
        rte_eth_stats e{};
        rte_eth_stats_get(st.ports[p].id, &e);
        o += fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", st.cfg.dataplane.ports[p].name,
                         e.ipackets, e.opackets, e.ibytes, e.obytes, e.imissed, e.ierrors + e.oerrors);
    }
    o += "\nVERDICT     PACKETS\n";
    for (unsigned v = 0; v < std::size(t.verdicts); ++v)
        o += fmt::format("{:<10} {:>8}\n", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
    o += "\nDROP REASON                  PACKETS  WHAT\n";
    for (unsigned r = 1; r < kDropReasons; ++r)
        if (t.drops[r])
            o += fmt::format("{:<28} {:>7}  {}\n", drop_reason_name(static_cast<DropReason>(r)), t.drops[r],
                             drop_reason_description(static_cast<DropReason>(r)));
    o += fmt::format("\nflows: {} live, {} created, {} expired, {} early-dropped\n\n", st.flows->live_total(),
                     t.flows_created, t.flows_expired, t.flows_early_dropped);
    return o + services(st, false) + "\n" + endpoints(st, false);
}

}  // namespace

void carry_counters(DaemonState& st) {
    if (!st.snap) return;
    const ServiceSnapshot& s = *st.snap;
    for (size_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        SvcCounters& c = st.carried[svc_key(sp)];
        for (uint16_t w = 0; w < s.workers; ++w) {
            c.packets += s.svc_counters[size_t{w} * s.services.size() + i].packets;
            c.bytes += s.svc_counters[size_t{w} * s.services.size() + i].bytes;
        }
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            SvcCounters& ce = st.carried[svc_key(sp) + " " + ep_str(s.endpoints[e])];
            for (uint16_t w = 0; w < s.workers; ++w) {
                ce.packets += s.ep_counters[size_t{w} * s.endpoints.size() + e].packets;
                ce.bytes += s.ep_counters[size_t{w} * s.endpoints.size() + e].bytes;
            }
        }
    }
}

std::string handle_command(DaemonState& st, const std::string& line, const std::function<std::string()>& reload) {
    std::istringstream is(line);
    std::vector<std::string> words;
    for (std::string w; is >> w;) words.push_back(w);
    if (words.empty()) return "error: empty request\n";
    bool json = false;
    std::string service;
    size_t limit = 100;
    for (size_t i = 1; i < words.size(); ++i) {
        if (words[i] == "--json") {
            json = true;
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
    if (cmd == "status") return status(st, json);
    if (cmd == "services") return services(st, json);
    if (cmd == "endpoints") return endpoints(st, json);
    if (cmd == "flows") return flows(st, service, limit, json);
    if (cmd == "stats") return stats(st, json);
    if (cmd == "reload") {
        std::string r = reload();
        if (json)
            return fmt::format("{{\"ok\":{},\"generation\":{},\"message\":{}}}\n", st.reload.last_ok ? "true" : "false",
                               st.generation, jstr(r));
        return r;
    }
    return fmt::format("error: unknown command \"{}\" (status, services, endpoints, flows, stats, reload)\n", cmd);
}

std::string render_metrics(DaemonState& st) {
    const ServiceSnapshot& s = *st.snap;
    const WorkerCounters t = sum_counters(st.workers);
    std::string o;
    auto head = [&](const char* name, const char* type, const char* help) {
        o += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    };
    auto svc_labels = [](const ServicePort& sp) {
        const auto colon = sp.name.rfind(':');
        return fmt::format("service=\"{}\",port=\"{}\",protocol=\"{}\"", sp.name.substr(0, colon),
                           sp.name.substr(colon + 1), proto_name(sp.proto));
    };
    head("svcgate_service_packets_total", "counter", "Packets of a Service port's flows, both directions.");
    for (size_t i = 0; i < s.services.size(); ++i)
        o += fmt::format("svcgate_service_packets_total{{{}}} {}\n", svc_labels(s.services[i]), service_total(st, i).packets);
    head("svcgate_service_bytes_total", "counter", "Bytes of a Service port's flows, both directions.");
    for (size_t i = 0; i < s.services.size(); ++i)
        o += fmt::format("svcgate_service_bytes_total{{{}}} {}\n", svc_labels(s.services[i]), service_total(st, i).bytes);
    head("svcgate_endpoint_packets_total", "counter", "Packets of flows to an endpoint, both directions.");
    std::string bytes;
    for (const ServicePort& sp : s.services)
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const SvcCounters c = ep_total(st, sp, e);
            const std::string l = fmt::format("{},endpoint=\"{}\"", svc_labels(sp), ep_str(s.endpoints[e]));
            o += fmt::format("svcgate_endpoint_packets_total{{{}}} {}\n", l, c.packets);
            bytes += fmt::format("svcgate_endpoint_bytes_total{{{}}} {}\n", l, c.bytes);
        }
    head("svcgate_endpoint_bytes_total", "counter", "Bytes of flows to an endpoint, both directions.");
    o += bytes;
    head("svcgate_flows", "gauge", "Flows in the flow table.");
    o += fmt::format("svcgate_flows {}\n", st.flows->live_total());
    head("svcgate_flow_capacity", "gauge", "Flows the flow table can hold.");
    o += fmt::format("svcgate_flow_capacity {}\n", st.flows->capacity());
    head("svcgate_flows_created_total", "counter", "Flows created.");
    o += fmt::format("svcgate_flows_created_total {}\n", t.flows_created);
    head("svcgate_flows_early_dropped_total", "counter", "Embryonic flows evicted to make room for new ones.");
    o += fmt::format("svcgate_flows_early_dropped_total {}\n", t.flows_early_dropped);
    head("svcgate_mbufs_in_use", "gauge", "Packet buffers taken from the pool (rings, bursts, held, caches).");
    o += fmt::format("svcgate_mbufs_in_use {}\n", rte_mempool_in_use_count(st.shared->pool));
    head("svcgate_packets_total", "counter", "Packets by verdict.");
    for (unsigned v = 0; v < std::size(t.verdicts); ++v)
        o += fmt::format("svcgate_packets_total{{verdict=\"{}\"}} {}\n", verdict_name(static_cast<Verdict>(v)), t.verdicts[v]);
    head("svcgate_drops_total", "counter", "Packets dropped or refused, by reason.");
    for (unsigned r = 1; r < kDropReasons; ++r)
        o += fmt::format("svcgate_drops_total{{reason=\"{}\"}} {}\n", drop_reason_name(static_cast<DropReason>(r)), t.drops[r]);
    head("svcgate_port_packets_total", "counter", "Packets per port and direction (the NIC's counters).");
    for (size_t p = 0; p < st.ports.size(); ++p) {
        rte_eth_stats e{};
        rte_eth_stats_get(st.ports[p].id, &e);
        o += fmt::format("svcgate_port_packets_total{{port=\"{0}\",direction=\"rx\"}} {1}\n"
                         "svcgate_port_packets_total{{port=\"{0}\",direction=\"tx\"}} {2}\n",
                         st.cfg.dataplane.ports[p].name, e.ipackets, e.opackets);
    }
    head("svcgate_reloads_total", "counter", "Config reloads by result.");
    o += fmt::format("svcgate_reloads_total{{result=\"ok\"}} {}\nsvcgate_reloads_total{{result=\"failed\"}} {}\n",
                     st.reload.ok, st.reload.failed);
    head("svcgate_last_reload_duration_seconds", "gauge", "The last successful reload: file read to published snapshot.");
    o += fmt::format("svcgate_last_reload_duration_seconds {}\n", st.reload.last_seconds);
    head("svcgate_config_generation", "gauge", "Generation of the config in service.");
    o += fmt::format("svcgate_config_generation {}\n", st.generation);
    return o;
}

}  // namespace svcgate::ctl
