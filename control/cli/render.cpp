#include "control/cli/render.h"

#include <algorithm>

#include <fmt/format.h>

#include "control/base/address.h"
#include "dataplane/pipeline/verdict.h"

namespace svcgate::ctl {

namespace {

using Json = nlohmann::ordered_json;

// A member as text, "-" when it is missing or null.
std::string str(const Json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "-";
    return it->is_string() ? it->get<std::string>() : it->dump();
}

template <typename T>
T num(const Json& j, const char* key) {
    const auto it = j.find(key);
    return it == j.end() || !it->is_number() ? T{} : it->get<T>();
}

std::string join(const Json& a) {
    std::string s;
    if (a.is_array())
        for (const Json& x : a) s += " " + (x.is_string() ? x.get<std::string>() : x.dump());
    return s;
}

std::string render_services(const Json& a) {
    std::string o = fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:<10} {:>10} {:>12}\n", "SERVICE PORT", "PROTO",
                                "CLUSTER-IP:PORT", "NODEPORT", "ENDPOINTS", "SCHED", "TOPOLOGY", "PACKETS", "BYTES");
    for (const Json& j : a) {
        const auto ip = parse_ip(str(j, "cluster_ip"));
        const auto node_port = num<int>(j, "node_port");
        o += fmt::format("{:<40} {:<5} {:<21} {:<9} {:<9} {:<8} {:<10} {:>10} {:>12}\n", str(j, "name"),
                         str(j, "protocol"), ip ? format_endpoint(*ip, num<uint16_t>(j, "port")) : str(j, "cluster_ip"),
                         node_port ? std::to_string(node_port) : "-",
                         fmt::format("{}/{}", num<uint32_t>(j, "ready"), num<uint32_t>(j, "endpoints")),
                         str(j, "scheduler"), str(j, "topology"), num<uint64_t>(j, "packets"),
                         num<uint64_t>(j, "bytes"));
    }
    return o;
}

// Which traffic uses an endpoint and by which rule: "all", "zone hints", "internal: node hints,
// external: local", "no".
std::string endpoint_use(const Json& j) {
    const std::string in = str(j, "internal"), ex = str(j, "external");
    if (in == ex) return in == "-" ? "no" : in;
    return fmt::format("internal: {}, external: {}", in == "-" ? "no" : in, ex == "-" ? "no" : ex);
}

std::string render_endpoints(const Json& a) {
    std::string o =
        fmt::format("{:<40} {:<21} {:<28} {:<14} {:<10} {:<12} {:<10} {:>6} {:>10} {:>12}\n", "SERVICE PORT",
                    "ENDPOINT", "CONDITIONS", "NODE", "ZONE", "IN USE", "EXT SOURCE", "FLOWS", "PACKETS", "BYTES");
    for (const Json& j : a) {
        const std::string node = str(j, "node"), zone = str(j, "zone");
        o += fmt::format("{:<40} {:<21} {:<28} {:<14} {:<10} {:<12} {:<10} {:>6} {:>10} {:>12}\n", str(j, "service"),
                         str(j, "endpoint"), str(j, "conditions"), node.empty() ? "-" : node, zone.empty() ? "-" : zone,
                         endpoint_use(j), str(j, "external_source"), num<int32_t>(j, "flows"),
                         num<uint64_t>(j, "packets"), num<uint64_t>(j, "bytes"));
    }
    return o;
}

std::string render_flows(const Json& a, const CommandRequest& req) {
    std::string o = fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", "ORIGINAL (CLIENT > VIP)", "ENDPOINT",
                                "SNAT", "STATE", "IDLE", "SERVICE");
    for (const Json& f : a) {
        std::string state = str(f, "state");
        if (f.contains("replica_of") && !f["replica_of"].is_null()) state += ",replica:" + f["replica_of"].dump();
        o += fmt::format("{:<44} {:<21} {:<21} {:<12} {:>5}  {}\n", str(f, "original"), str(f, "endpoint"),
                         str(f, "snat"), state, num<uint32_t>(f, "idle"), str(f, "service"));
    }
    const auto limit = req.options.find("--limit");
    return o + fmt::format("{} flows shown (limit {})\n", a.size(), limit == req.options.end() ? "100" : limit->second);
}

std::string render_ha(const Json& y) {
    std::string o = fmt::format(
        "ha          listening on {}, {}; {} replicas held, {} taken over, {} flows handed by the workers ({} "
        "refused by a full ring, {} waiting to be sent), {} refreshed\n",
        str(y, "listen"), y.value("ready", false) ? "ready" : "WAITING for the peers' flows",
        num<uint64_t>(y, "replicas"), num<uint64_t>(y, "takeovers"), num<uint64_t>(y, "events"),
        num<uint64_t>(y, "events_ring_full"), num<uint64_t>(y, "queued"), num<uint64_t>(y, "refreshed"));
    if (const Json h = y.value("replica_hold", Json::object()); num<uint64_t>(h, "parked"))
        o += fmt::format(
            "  held      {} replies to preserved clients waited for their replica ({} sent on, {} waiting)\n",
            num<uint64_t>(h, "parked"), num<uint64_t>(h, "released"), num<uint64_t>(h, "held"));
    for (const Json& p : y.value("peers", Json::array())) {
        const Json& heard = p["last_heard_seconds"];
        o += fmt::format("  peer      {} {}, last heard {}, flows sent {} received {}, holds {}{}\n", str(p, "address"),
                         p.value("alive", false) ? "alive" : "DEAD",
                         heard.is_null() ? "never" : fmt::format("{:.1f} s ago", heard.get<double>()),
                         num<uint64_t>(p, "flows_sent"), num<uint64_t>(p, "flows_received"),
                         num<uint64_t>(p, "flows_held"), p.value("copied", false) ? ", has sent us its copy" : "");
    }
    for (const Json& p : y.value("peers", Json::array()))
        if (p.value("adopted", false))
            o += fmt::format("  adopted   {}'s addresses:{}\n", str(p, "address"), join(p["addresses"]));
    std::string drops;
    const Json dropped = y.value("drops", Json::object());  // items() keeps no temporary alive
    for (const auto& [name, n] : dropped.items())
        if (n.is_number() && n.get<uint64_t>()) drops += fmt::format(" {} {}", name, n.get<uint64_t>());
    if (!drops.empty()) o += "  dropped  " + drops + "\n";
    return o;
}

std::string render_status(const Json& j) {
    std::string o =
        fmt::format("config      {} (generation {})\nuptime      {} s\nworkers     {}\n", str(j, "config"),
                    num<uint64_t>(j, "generation"), num<uint64_t>(j, "uptime_seconds"), num<uint64_t>(j, "workers"));
    // With several receive queues, whether masquerade ports steer replies to their worker's queue.
    for (const Json& p : j.value("ports", Json::array()))
        o += fmt::format("port        {} {} link {} queues {}/{}{}\n", str(p, "name"), str(p, "device"),
                         p.value("link", false) ? "up" : "down", num<unsigned>(p, "rx_queues"),
                         num<unsigned>(p, "tx_queues"),
                         num<unsigned>(p, "rx_queues") > 1 ? "; rss steering " + str(p, "rss_steering") : "");
    o += fmt::format("services    {} service ports, {} endpoints\nflows       {} of {}\npackets     {} in\n",
                     num<uint64_t>(j, "service_ports"), num<uint64_t>(j, "endpoints"), num<uint64_t>(j, "flows"),
                     num<uint64_t>(j, "flow_capacity"), num<uint64_t>(j, "rx_packets"));
    // client_ip: shown when a service port preserves the client's address.
    if (const Json c = j.value("client_ip", Json::object()); num<uint64_t>(c, "preserve_service_ports")) {
        o += fmt::format("client ip   {} by default; {} service ports preserve it\n", str(c, "default"),
                         num<uint64_t>(c, "preserve_service_ports"));
        for (const Json& n : c.value("no_return", Json::array()))
            o += fmt::format("            NO RETURN: {} ({}): {} SYNs resent with no reply through the gateway\n",
                             str(n, "service"), str(n, "family"), num<uint64_t>(n, "resent_syns"));
    }
    if (const Json k = j.value("kubernetes", Json::object()); num<uint64_t>(k, "manifests")) {
        o += fmt::format(
            "kubernetes  {} Services, {} EndpointSlices, {} ServiceCIDRs; no rule for {} headless and {} "
            "ExternalName Services; {} of another proxy; {} other objects ignored\n",
            num<unsigned>(k, "services"), num<unsigned>(k, "endpoint_slices"), num<unsigned>(k, "service_cidrs"),
            num<unsigned>(k, "headless"), num<unsigned>(k, "external_name"), num<unsigned>(k, "other_proxy"),
            num<unsigned>(k, "ignored_objects"));
        for (const Json& n : k.value("no_rule", Json::array()))
            o += fmt::format("            {} {}\n", str(n, "service"), str(n, "why"));
    }
    if (const Json a = j.value("kubernetes", Json::object()).value("api", Json()); a.is_object()) {
        o += fmt::format("kube API    {} ({}): {}, {} publishes, {} changes pending{}\n", str(a, "server"),
                         str(a, "source"), a.value("synced", false) ? "synced" : "NOT SYNCED (not ready)",
                         num<uint64_t>(a, "publishes"), num<uint64_t>(a, "pending_changes"),
                         str(a, "credentials_error").empty() ? "" : "; credentials: " + str(a, "credentials_error"));
        const Json kinds = a.value("kinds", Json::object());
        for (const auto& [name, kd] : kinds.items())
            o += fmt::format("            {}: {}, {} objects, resourceVersion {}, {} relists, {} reconnects{}\n", name,
                             kd.value("synced", false) ? "synced" : "not synced", num<uint64_t>(kd, "objects"),
                             str(kd, "resource_version"), num<uint64_t>(kd, "relists"), num<uint64_t>(kd, "reconnects"),
                             str(kd, "last_error").empty() ? "" : "; last error: " + str(kd, "last_error"));
        for (const Json& r : a.value("rejected", Json::array()))
            o += fmt::format("            left out: {} ({}): {}\n", str(r, "object"), str(r, "reason"),
                             str(r, "message"));
        if (a.value("stale", false))
            o += fmt::format(
                "            STALE: changes unpublished for {:.0f} s (over {:.0f} s): /healthz answers 503\n",
                a.value("pending_seconds", 0.0), a.value("stale_after_seconds", 0.0));
    }
    // Kubernetes objects' entries the snapshot serves otherwise than written (files and API alike).
    for (const Json& i : j.value("kubernetes", Json::object()).value("object_issues", Json::array()))
        o += fmt::format("object      {} ({}, {}): {}\n", str(i, "object"), str(i, "reason"),
                         i.value("left_out", false) ? "left out" : "served", str(i, "message"));
    const Json h = j.value("health", Json::object());
    const bool healthy = h.value("healthy", false);
    o += fmt::format("health      {}{}\n", healthy ? "healthy" : "UNHEALTHY",
                     healthy ? ""
                             : fmt::format(" (live {}, ports up {}, draining {})", h.value("live", false),
                                           h.value("ports_up", false), h.value("draining", false)));
    if (h.value("draining", false))
        o += fmt::format("draining    {} connections left; exits by itself when none is, or in {:.0f} s\n",
                         num<uint64_t>(h, "connections_left"), num<double>(h, "drain_seconds_left"));
    if (const auto table = num<uint32_t>(h, "announce_table")) {
        const Json announced = h.value("announced", Json::array());
        o += fmt::format("announcing  {} prefixes in kernel table {}{}\n", announced.size(), table, join(announced));
        if (h.contains("announce_error")) o += "            last error: " + str(h, "announce_error") + "\n";
    }
    if (j.contains("ha") && j["ha"].is_object()) o += render_ha(j["ha"]);
    o += fmt::format("reloads     {} ok, {} failed", num<uint64_t>(j, "reloads"), num<uint64_t>(j, "reload_failures"));
    if (num<uint64_t>(j, "reloads"))
        o += fmt::format("; last took {:.1f} ms ({})", num<double>(j, "last_reload_seconds") * 1e3,
                         str(j, "last_reload_trigger"));
    o += "\n";
    if (!j.value("last_reload_ok", true))
        o += "last reload REFUSED, the running config stays:\n" + str(j, "last_reload_error") + "\n";
    return o;
}

std::string render_stats(const Json& j) {
    std::string o = fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", "PORT", "RX-PACKETS", "TX-PACKETS",
                                "RX-BYTES", "TX-BYTES", "MISSED", "ERRORS");
    const Json ports = j.value("ports", Json::object()), verdicts = j.value("verdicts", Json::object());
    for (const auto& [name, p] : ports.items())
        o += fmt::format("{:<10} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}\n", name, num<uint64_t>(p, "rx_packets"),
                         num<uint64_t>(p, "tx_packets"), num<uint64_t>(p, "rx_bytes"), num<uint64_t>(p, "tx_bytes"),
                         num<uint64_t>(p, "rx_missed"), num<uint64_t>(p, "rx_errors") + num<uint64_t>(p, "tx_errors"));
    o += "\nVERDICT     PACKETS\n";
    for (const auto& [name, n] : verdicts.items()) o += fmt::format("{:<10} {:>8}\n", name, n.get<uint64_t>());
    o += "\nREFUSED BY REASON            DROPPED REJECTED  WHAT\n";
    const Json drops = j.value("drops", Json::object()), rejects = j.value("rejects", Json::object());
    for (unsigned r = 1; r < dp::kDropReasons; ++r) {
        const auto reason = static_cast<dp::DropReason>(r);
        const std::string key(dp::drop_reason_name(reason));
        const auto d = num<uint64_t>(drops, key.c_str()), rj = num<uint64_t>(rejects, key.c_str());
        if (d || rj) o += fmt::format("{:<28} {:>7} {:>8}  {}\n", key, d, rj, dp::drop_reason_description(reason));
    }
    const Json f = j.value("flows", Json::object()), fr = j.value("fragments", Json::object());
    o += fmt::format(
        "\nflows: {} live, {} created, {} expired, {} early-dropped, {} source ports remapped, {} reopened\n",
        num<uint64_t>(f, "live"), num<uint64_t>(f, "created"), num<uint64_t>(f, "expired"),
        num<uint64_t>(f, "early_dropped"), num<uint64_t>(f, "port_remapped"), num<uint64_t>(f, "reopened"));
    o += fmt::format("fragments: {} held now, {} held in all, {} released; {} packets fragmented into {}\n\n",
                     num<uint64_t>(fr, "held"), num<uint64_t>(fr, "stored"), num<uint64_t>(fr, "released"),
                     num<uint64_t>(fr, "fragmented"), num<uint64_t>(fr, "fragments_out"));
    return o + render_services(j.value("services", Json::array())) + "\n" +
        render_endpoints(j.value("endpoints", Json::array()));
}

}  // namespace

std::string render_answer(const CommandRequest& req, const Json& result) {
    const std::string_view cmd = req.spec ? req.spec->name : "";
    if (cmd == "status") return render_status(result);
    if (cmd == "services") return render_services(result);
    if (cmd == "endpoints") return render_endpoints(result);
    if (cmd == "flows") return render_flows(result, req);
    if (cmd == "stats") return render_stats(result);
    if (cmd == "reload") {
        const std::string m = str(result, "message");
        return m.ends_with('\n') ? m : m + "\n";
    }
    if (cmd == "drain")
        return fmt::format(
            "draining: announcements withdrawn, /healthz 503; svcgate exits once its connections are "
            "gone or in {} s (svcgatectl undrain to stop)\n",
            num<long>(result, "timeout_seconds"));
    if (cmd == "undrain")
        return result.value("was_draining", false) ? "undrained: announcing again once healthy\n" : "not draining\n";
    return result.dump() + "\n";
}

}  // namespace svcgate::ctl
