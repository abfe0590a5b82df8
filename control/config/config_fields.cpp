#include "control/config/config_fields.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "dataplane/flow/source_limit.h"
#include "dataplane/fragment/frag_table.h"
#include "dataplane/lb/maglev.h"

namespace svcgate::ctl {

namespace {

constexpr uint64_t k24 = 1u << 24, k20 = 1u << 20, k30 = 1u << 30, kDay = 86400;

}  // namespace

// dataplane.ports[].mtu's upper bound is kMaxMtu (config_model.h): a frame must fit one mbuf.
const std::vector<ConfigField> kConfigFields = {
    {"dataplane", "eal", "`[]`", true},
    {"dataplane", "workers", "`1`", true, 1, 128, [](const Config& c) -> uint64_t { return c.dataplane.workers; }},
    {"dataplane", "ports[].name", "—", true},
    {"dataplane", "ports[].device", "—", true},
    {"dataplane", "ports[].mtu", "`1500`", true, 1280, kMaxMtu},
    {"dataplane", "ports[].addresses", "`[]`"},
    {"dataplane", "ports[].host_interface", "none", true},
    {"dataplane", "ports[].mac", "the device's", true},
    {"dataplane", "routes[]", "`[]`"},
    {"dataplane", "neighbors[]", "`[]`"},
    {"dataplane", "mbufs", "what the ports need", true, 1024, 1u << 26},
    {"dataplane", "poll", "`adaptive`", true},
    {"dataplane", "flow_table.capacity", "`1048576`", true, 1024, k30,
     [](const Config& c) -> uint64_t { return c.dataplane.flow_capacity; }},
    {"dataplane", "flow_table.capacity_v6", "`capacity / 4`", true, 1024, k30},
    {"dataplane", "flow_table.timeouts", "conntrack's", true, 1, 30 * kDay},
    {"dataplane", "flow_table.new_flows_per_source", "`0` (no cap)", true, 0, dp::SourceLimiter::kMaxLimit,
     [](const Config& c) -> uint64_t { return c.dataplane.new_flows_per_source; }},
    {"dataplane", "flow_table.state_file", "none"},
    {"dataplane", "flow_table.state_max_age", "`600`", false, 1, 30 * kDay,
     [](const Config& c) -> uint64_t { return c.dataplane.state_max_age; }},
    {"dataplane", "fragments.timeout_ms", "`2000`", true, 100, 60000,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.timeout_ms; }},
    {"dataplane", "fragments.max_datagrams", "`4096`", true, 8, k20,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.max_datagrams; }},
    {"dataplane", "fragments.max_held", "`1024`", true, 0, k20,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.max_held; }},
    {"dataplane", "fragments.max_per_datagram", "`64`", true, 2, dp::FragTable::kMaxPerDatagram,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.max_per_datagram; }},
    {"dataplane", "icmp_errors_per_second", "`1000`", true, 0, k24,
     [](const Config& c) -> uint64_t { return c.dataplane.icmp_errors_per_second; }},
    {"dataplane", "host_path.control_per_second", "`2000`", true, 0, k24,
     [](const Config& c) -> uint64_t { return c.dataplane.punt_control_per_second; }},
    {"dataplane", "host_path.other_per_second", "`1000`", true, 0, k24,
     [](const Config& c) -> uint64_t { return c.dataplane.punt_other_per_second; }},
    {"dataplane", "one_arm_masquerade", "`true`", false, 0, 0,
     [](const Config& c) -> uint64_t { return c.dataplane.one_arm_masquerade; }},
    {"control", "socket", "`/run/svcgate.sock`", true},
    {"control", "socket_mode", "`0600`"},
    {"control", "metrics", "`127.0.0.1:9477`", true},
    {"control", "watch", "`true`", false, 0, 0, [](const Config& c) -> uint64_t { return c.control.watch; }},
    {"control", "drain_timeout", "`300`", false, 1, kDay,
     [](const Config& c) -> uint64_t { return c.control.drain_timeout; }},
    {"kubernetes", "manifests", "none"},
    {"kubernetes", "api.kubeconfig", "— (or `in_cluster`)", true},
    {"kubernetes", "api.context", "its `current-context`", true},
    {"kubernetes", "api.in_cluster", "`false`", true, 0, 0,
     [](const Config& c) -> uint64_t { return c.kube_api.in_cluster; }},
    {"kubernetes", "api.min_sync_period_ms", "`1000`", true, 0, 60000,
     [](const Config& c) -> uint64_t { return c.kube_api.min_sync_ms; }},
    {"kubernetes", "api.watch_timeout_seconds", "`300`", true, 1, 3600,
     [](const Config& c) -> uint64_t { return c.kube_api.watch_timeout_s; }},
    {"kubernetes", "api.list_page_size", "`500`", true, 1, 10000,
     [](const Config& c) -> uint64_t { return c.kube_api.list_page_size; }},
    {"routing", "table", "— (required)", true, 1, 4294967294u},
    {"routing", "announce", "`[load_balancer_ips, external_ips, node_ips]`"},
    {"ha", "listen", "— (required)", true},
    {"ha", "peers", "— (required)", true},
    {"ha", "key_file", "— (required)", true},
    {"ha", "takeover_ports", "none", true},
    {"ha", "refresh_seconds", "`10`", true, 1, 3600, [](const Config& c) -> uint64_t { return c.ha.refresh_seconds; }},
    {"ha", "hello_ms", "`100`", true, 10, 10000, [](const Config& c) -> uint64_t { return c.ha.hello_ms; }},
    {"ha", "dead_after_ms", "`1000`", true, 30, 60000, [](const Config& c) -> uint64_t { return c.ha.dead_after_ms; }},
    {"cluster", "node_name", "`\"\"`"},
    {"cluster", "node_ips", "`[]`"},
    {"cluster", "nodeport_addresses", "`[]`"},
    {"cluster", "cluster_cidrs", "`[]`"},
    {"cluster", "service_cidrs", "`[]`"},
    {"cluster", "masquerade_all", "`false`", false, 0, 0,
     [](const Config& c) -> uint64_t { return c.cluster.masquerade_all; }},
    {"cluster", "client_ip", "`masquerade`"},
    {"cluster", "reject_unknown_port", "`true`", false, 0, 0,
     [](const Config& c) -> uint64_t { return c.cluster.reject_unknown_port; }},
    {"cluster", "nodeport_range", "`30000-32767`"},
    {"cluster", "masquerade_ports", "`1024-65535`"},
    {"cluster", "maglev_seed", "`0`", false, 0, UINT32_MAX,
     [](const Config& c) -> uint64_t { return c.cluster.maglev_seed; }},
    {"cluster", "maglev_table_size", "by endpoint count", false, dp::kMaglevMinTable, dp::kMaglevMaxTable},
    {"cluster", "node_labels", "`{}`"},
    {"cluster", "proxy_name", "none"},
    {"cluster", "proxy_name_only", "`false`", false, 0, 0,
     [](const Config& c) -> uint64_t { return c.cluster.proxy_name_only; }},
};

const ConfigField& config_field(std::string_view section, std::string_view key) {
    for (const ConfigField& f : kConfigFields)
        if (f.section == section && f.key == key) return f;
    std::fprintf(stderr, "svcgate: bug: no config field %.*s.%.*s\n", static_cast<int>(section.size()), section.data(),
                 static_cast<int>(key.size()), key.data());
    std::abort();
}

std::vector<std::string_view> keys_under(std::string_view section, std::string_view prefix) {
    std::vector<std::string_view> out;
    for (const ConfigField& f : kConfigFields) {
        if (f.section != section) continue;
        std::string_view k = f.key;
        if (!prefix.empty()) {
            if (!k.starts_with(prefix) || k.size() <= prefix.size() || k[prefix.size()] != '.') continue;
            k.remove_prefix(prefix.size() + 1);
        }
        k = k.substr(0, k.find_first_of(".["));  // "ports[].mtu" -> "ports", "flow_table.capacity" -> "flow_table"
        if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
    }
    return out;
}

std::string keep_restart_fields(Config& next, const Config& running) {
    std::string changed;
    auto keep = [&](auto& field, const auto& value, std::string_view section, std::string_view key) {
        if (!config_field(section, key).restart) std::abort();  // a kept field must be marked so
        if (field == value) return;
        field = value;
        changed += (changed.empty() ? "" : ", ") + std::string(section) + "." + std::string(key);
    };
    DataplaneConfig& d = next.dataplane;
    const DataplaneConfig& r = running.dataplane;
    keep(d.eal, r.eal, "dataplane", "eal");
    keep(d.workers, r.workers, "dataplane", "workers");
    keep(d.mbufs, r.mbufs, "dataplane", "mbufs");
    keep(d.busy_poll, r.busy_poll, "dataplane", "poll");
    keep(d.flow_capacity, r.flow_capacity, "dataplane", "flow_table.capacity");
    keep(d.flow_capacity_v6, r.flow_capacity_v6, "dataplane", "flow_table.capacity_v6");
    keep(d.timeouts, r.timeouts, "dataplane", "flow_table.timeouts");  // the flow table holds them
    keep(d.new_flows_per_source, r.new_flows_per_source, "dataplane", "flow_table.new_flows_per_source");
    keep(d.fragments.timeout_ms, r.fragments.timeout_ms, "dataplane", "fragments.timeout_ms");
    keep(d.fragments.max_datagrams, r.fragments.max_datagrams, "dataplane", "fragments.max_datagrams");
    keep(d.fragments.max_held, r.fragments.max_held, "dataplane", "fragments.max_held");
    keep(d.fragments.max_per_datagram, r.fragments.max_per_datagram, "dataplane", "fragments.max_per_datagram");
    keep(d.icmp_errors_per_second, r.icmp_errors_per_second, "dataplane", "icmp_errors_per_second");
    keep(d.punt_control_per_second, r.punt_control_per_second, "dataplane", "host_path.control_per_second");
    keep(d.punt_other_per_second, r.punt_other_per_second, "dataplane", "host_path.other_per_second");
    keep(next.routing.table, running.routing.table, "routing", "table");  // the announcer writes the running one
    keep(next.ha.listen, running.ha.listen, "ha", "listen");              // the sync thread, the tables' owners
    keep(next.ha.peers, running.ha.peers, "ha", "peers");
    keep(next.ha.key, running.ha.key, "ha", "key_file");
    next.ha.key_file = running.ha.key_file;
    keep(next.ha.takeover_ports, running.ha.takeover_ports, "ha", "takeover_ports");
    keep(next.ha.refresh_seconds, running.ha.refresh_seconds, "ha", "refresh_seconds");
    keep(next.ha.hello_ms, running.ha.hello_ms, "ha", "hello_ms");
    keep(next.ha.dead_after_ms, running.ha.dead_after_ms, "ha", "dead_after_ms");
    // A port's addresses may change; the list of ports (names, devices, and what is set on the
    // device) may not: a change to any takes them all from the running config.
    bool same = d.ports.size() == r.ports.size();
    for (size_t i = 0; same && i < d.ports.size(); ++i) {
        const PortConfig &a = d.ports[i], &b = r.ports[i];
        same = a.name == b.name && a.device == b.device && a.mtu == b.mtu && a.host_interface == b.host_interface &&
            a.mac == b.mac;
    }
    if (!same) {
        d.ports = r.ports;
        changed += std::string(changed.empty() ? "" : ", ") + "dataplane.ports";
    }
    keep(next.control.socket, running.control.socket, "control", "socket");
    keep(next.control.metrics, running.control.metrics, "control", "metrics");
    // The API's connection and its watchers are set up at start (control/kube/).
    KubeApiConfig& ka = next.kube_api;
    const KubeApiConfig& kr = running.kube_api;
    if (ka.enabled != kr.enabled) {
        ka = kr;
        changed += std::string(changed.empty() ? "" : ", ") + "kubernetes.api";
    }
    keep(ka.kubeconfig, kr.kubeconfig, "kubernetes", "api.kubeconfig");
    keep(ka.context, kr.context, "kubernetes", "api.context");
    keep(ka.in_cluster, kr.in_cluster, "kubernetes", "api.in_cluster");
    keep(ka.min_sync_ms, kr.min_sync_ms, "kubernetes", "api.min_sync_period_ms");
    keep(ka.watch_timeout_s, kr.watch_timeout_s, "kubernetes", "api.watch_timeout_seconds");
    keep(ka.list_page_size, kr.list_page_size, "kubernetes", "api.list_page_size");
    return changed;
}

}  // namespace svcgate::ctl
