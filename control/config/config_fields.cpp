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

// A restart field's keep: the running value into the next config; true when they differed.
template <typename T>
bool take(T& next, const T& running) {
    if (next == running) return false;
    next = running;
    return true;
}
#define KEEP(member) [](Config& n, const Config& r) { return take(n.member, r.member); }

// A port's fields are kept as the whole port list (keep_restart_fields).
bool port_list(Config&, const Config&) { return false; }
constexpr ConfigField::Keep kPortList = &port_list;

// The key file's path goes with the key read from it.
bool keep_key(Config& n, const Config& r) {
    n.ha.key_file = r.ha.key_file;
    return take(n.ha.key, r.ha.key);
}

}  // namespace

// dataplane.ports[].mtu's upper bound is kMaxMtu (config_model.h): a frame must fit one mbuf.
const std::vector<ConfigField> kConfigFields = {
    {"dataplane", "eal", "`[]`", KEEP(dataplane.eal)},
    {"dataplane", "workers", "`1`", KEEP(dataplane.workers), 1, 128,
     [](const Config& c) -> uint64_t { return c.dataplane.workers; }},
    {"dataplane", "ports[].name", "—", kPortList},
    {"dataplane", "ports[].device", "—", kPortList},
    {"dataplane", "ports[].mtu", "`1500`", kPortList, 1280, kMaxMtu},
    {"dataplane", "ports[].addresses", "`[]`"},
    {"dataplane", "ports[].host_interface", "none", kPortList},
    {"dataplane", "ports[].mac", "the device's", kPortList},
    {"dataplane", "routes[]", "`[]`"},
    {"dataplane", "neighbors[]", "`[]`"},
    {"dataplane", "mbufs", "what the ports need", KEEP(dataplane.mbufs), 1024, 1u << 26},
    {"dataplane", "poll", "`adaptive`", KEEP(dataplane.busy_poll)},
    {"dataplane", "flow_table.capacity", "`1048576`", KEEP(dataplane.flow_capacity), 1024, k30,
     [](const Config& c) -> uint64_t { return c.dataplane.flow_capacity; }},
    {"dataplane", "flow_table.capacity_v6", "`capacity / 4`", KEEP(dataplane.flow_capacity_v6), 1024, k30},
    {"dataplane", "flow_table.timeouts", "conntrack's", KEEP(dataplane.timeouts), 1, 30 * kDay},
    {"dataplane", "flow_table.new_flows_per_source", "`0` (no cap)", KEEP(dataplane.new_flows_per_source), 0,
     dp::SourceLimiter::kMaxLimit, [](const Config& c) -> uint64_t { return c.dataplane.new_flows_per_source; }},
    {"dataplane", "flow_table.state_file", "none"},
    {"dataplane", "flow_table.state_max_age", "`600`", nullptr, 1, 30 * kDay,
     [](const Config& c) -> uint64_t { return c.dataplane.state_max_age; }},
    {"dataplane", "fragments.timeout_ms", "`2000`", KEEP(dataplane.fragments.timeout_ms), 100, 60000,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.timeout_ms; }},
    {"dataplane", "fragments.max_datagrams", "`4096`", KEEP(dataplane.fragments.max_datagrams), 8, k20,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.max_datagrams; }},
    {"dataplane", "fragments.max_held", "`1024`", KEEP(dataplane.fragments.max_held), 0, k20,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.max_held; }},
    {"dataplane", "fragments.max_per_datagram", "`64`", KEEP(dataplane.fragments.max_per_datagram), 2,
     dp::FragTable::kMaxPerDatagram,
     [](const Config& c) -> uint64_t { return c.dataplane.fragments.max_per_datagram; }},
    {"dataplane", "icmp_errors_per_second", "`1000`", KEEP(dataplane.icmp_errors_per_second), 0, k24,
     [](const Config& c) -> uint64_t { return c.dataplane.icmp_errors_per_second; }},
    {"dataplane", "host_path.control_per_second", "`2000`", KEEP(dataplane.punt_control_per_second), 0, k24,
     [](const Config& c) -> uint64_t { return c.dataplane.punt_control_per_second; }},
    {"dataplane", "host_path.other_per_second", "`1000`", KEEP(dataplane.punt_other_per_second), 0, k24,
     [](const Config& c) -> uint64_t { return c.dataplane.punt_other_per_second; }},
    {"dataplane", "one_arm_masquerade", "`true`", nullptr, 0, 0,
     [](const Config& c) -> uint64_t { return c.dataplane.one_arm_masquerade; }},
    {"control", "socket", "`/run/svcgate.sock`", KEEP(control.socket)},
    {"control", "socket_mode", "`0600`"},
    {"control", "metrics", "`127.0.0.1:9477`", KEEP(control.metrics)},
    {"control", "watch", "`true`", nullptr, 0, 0, [](const Config& c) -> uint64_t { return c.control.watch; }},
    {"control", "drain_timeout", "`300`", nullptr, 1, kDay,
     [](const Config& c) -> uint64_t { return c.control.drain_timeout; }},
    {"kubernetes", "manifests", "none"},
    {"kubernetes", "api.kubeconfig", "— (or `in_cluster`)", KEEP(kube_api.kubeconfig)},
    {"kubernetes", "api.context", "its `current-context`", KEEP(kube_api.context)},
    {"kubernetes", "api.in_cluster", "`false`", KEEP(kube_api.in_cluster), 0, 0,
     [](const Config& c) -> uint64_t { return c.kube_api.in_cluster; }},
    {"kubernetes", "api.min_sync_period_ms", "`1000`", KEEP(kube_api.min_sync_ms), 0, 60000,
     [](const Config& c) -> uint64_t { return c.kube_api.min_sync_ms; }},
    {"kubernetes", "api.watch_timeout_seconds", "`300`", KEEP(kube_api.watch_timeout_s), 1, 3600,
     [](const Config& c) -> uint64_t { return c.kube_api.watch_timeout_s; }},
    {"kubernetes", "api.list_page_size", "`500`", KEEP(kube_api.list_page_size), 1, 10000,
     [](const Config& c) -> uint64_t { return c.kube_api.list_page_size; }},
    {"routing", "table", "— (required)", KEEP(routing.table), 1, 4294967294u},
    {"routing", "announce", "`[load_balancer_ips, external_ips, node_ips]`"},
    {"ha", "listen", "— (required)", KEEP(ha.listen)},
    {"ha", "peers", "— (required)", KEEP(ha.peers)},
    {"ha", "key_file", "— (required)", keep_key},
    {"ha", "takeover_ports", "none", KEEP(ha.takeover_ports)},
    {"ha", "refresh_seconds", "`10`", KEEP(ha.refresh_seconds), 1, 3600,
     [](const Config& c) -> uint64_t { return c.ha.refresh_seconds; }},
    {"ha", "hello_ms", "`100`", KEEP(ha.hello_ms), 10, 10000,
     [](const Config& c) -> uint64_t { return c.ha.hello_ms; }},
    {"ha", "dead_after_ms", "`1000`", KEEP(ha.dead_after_ms), 30, 60000,
     [](const Config& c) -> uint64_t { return c.ha.dead_after_ms; }},
    {"cluster", "node_name", "`\"\"`"},
    {"cluster", "node_ips", "`[]`"},
    {"cluster", "nodeport_addresses", "`[]`"},
    {"cluster", "cluster_cidrs", "`[]`"},
    {"cluster", "service_cidrs", "`[]`"},
    {"cluster", "masquerade_all", "`false`", nullptr, 0, 0,
     [](const Config& c) -> uint64_t { return c.cluster.masquerade_all; }},
    {"cluster", "client_ip", "`masquerade`"},
    {"cluster", "reject_unknown_port", "`true`", nullptr, 0, 0,
     [](const Config& c) -> uint64_t { return c.cluster.reject_unknown_port; }},
    {"cluster", "nodeport_range", "`30000-32767`"},
    {"cluster", "masquerade_ports", "`1024-65535`"},
    {"cluster", "maglev_seed", "`0`", nullptr, 0, UINT32_MAX,
     [](const Config& c) -> uint64_t { return c.cluster.maglev_seed; }},
    {"cluster", "maglev_table_size", "by endpoint count", nullptr, dp::kMaglevMinTable, dp::kMaglevMaxTable},
    {"cluster", "node_labels", "`{}`"},
    {"cluster", "proxy_name", "none"},
    {"cluster", "proxy_name_only", "`false`", nullptr, 0, 0,
     [](const Config& c) -> uint64_t { return c.cluster.proxy_name_only; }},
};

#undef KEEP

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
    auto report = [&](std::string_view name) { changed += (changed.empty() ? "" : ", ") + std::string(name); };
    // The API's connection and its watchers are set up at start (control/kube/): turning it on
    // or off is one change, its fields the others.
    if (next.kube_api.enabled != running.kube_api.enabled) {
        next.kube_api = running.kube_api;
        report("kubernetes.api");
    }
    for (const ConfigField& f : kConfigFields)
        if (f.restart && f.restart(next, running)) report(std::string(f.section) + "." + std::string(f.key));
    // A port's addresses may change; the list of ports (names, devices, and what is set on the
    // device) may not: a change to any takes them all from the running config.
    DataplaneConfig& d = next.dataplane;
    const DataplaneConfig& r = running.dataplane;
    bool same = d.ports.size() == r.ports.size();
    for (size_t i = 0; same && i < d.ports.size(); ++i) {
        const PortConfig &a = d.ports[i], &b = r.ports[i];
        same = a.name == b.name && a.device == b.device && a.mtu == b.mtu && a.host_interface == b.host_interface &&
            a.mac == b.mac;
    }
    if (!same) {
        d.ports = r.ports;
        report("dataplane.ports");
    }
    return changed;
}

}  // namespace svcgate::ctl
