#include "control/config/config_fields.h"

#include <algorithm>
#include <concepts>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <utility>

#include "dataplane/flow/source_limit.h"
#include "dataplane/fragment/frag_table.h"
#include "dataplane/lb/maglev.h"

namespace svcgate::ctl {

namespace {

constexpr uint64_t k24 = 1u << 24, k20 = 1u << 20, k30 = 1u << 30, kDay = 86400;
constexpr bool kRestart = true, kReload = false;

// The member `At` reaches (a generic lambda: `c.dataplane.workers` of a Config or a const one),
// as a row's value. Own: read by its section's code, whatever its type.
template <auto At, bool Own>
constexpr ConfigMember member() {
    using T = std::remove_cvref_t<decltype(At(std::declval<Config&>()))>;
    ConfigMember m;
    if constexpr (std::equality_comparable<T>)  // a restart row's must be (the reload test checks)
        m.keep = [](Config& next, const Config& running) {
            if (At(next) == At(running)) return false;
            At(next) = At(running);
            return true;
        };
    if constexpr (Own) {
        m.kind = ConfigMember::Kind::own;
    } else if constexpr (std::is_same_v<T, bool>) {
        m.kind = ConfigMember::Kind::boolean;
        m.get = [](const Config& c) -> uint64_t { return At(c); };
        m.set = [](Config& c, uint64_t v) { At(c) = v != 0; };
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
        m.kind = ConfigMember::Kind::number;
        m.get = [](const Config& c) -> uint64_t { return At(c); };
        m.set = [](Config& c, uint64_t v) { At(c) = static_cast<T>(v); };
        m.max = std::numeric_limits<T>::max();
    } else {
        static_assert(std::is_same_v<T, std::string>, "a member the table reads: a number, a switch or a word");
        m.kind = ConfigMember::Kind::text;
        m.text = [](Config& c) { return &At(c); };
    }
    return m;
}
#define AT(path) \
    [](auto& c) -> auto& { return c.path; }
#define READ(path) member<AT(path), false>()  // read by the table's loop
#define OWN(path) member<AT(path), true>()    // read by its section's code
// A conntrack timeout: seconds, 1 s to 30 days, set when the flow table is made.
#define TIMEOUT(key, default_text, path) \
    { "dataplane", "flow_table.timeouts." key, default_text, READ(dataplane.timeouts.path), kRestart, 1, 30 * kDay }

// The key file's path goes with the key read from it: one key, two members.
bool keep_key(Config& n, const Config& r) {
    const bool changed = n.ha.key != r.ha.key;
    n.ha.key = r.ha.key;
    n.ha.key_file = r.ha.key_file;
    return changed;
}
constexpr ConfigMember kHaKey{.keep = keep_key};

// A key with no one member of its own: a port's field (the port list is kept whole), a key read
// into several members (nodeport_range) or into the Services (manifests), a list of objects
// (routes[]).
constexpr ConfigMember kNoMember{};

}  // namespace

// dataplane.ports[].mtu's upper bound is kMaxMtu (config_model.h): jumbo frames, one mbuf each.
const std::vector<ConfigField> kConfigFields = {
    {"dataplane", "eal", "`[]`", OWN(dataplane.eal), kRestart},
    {"dataplane", "workers", "`1`", READ(dataplane.workers), kRestart, 1, 128},
    {"dataplane", "ports[].name", "—", kNoMember, kRestart},
    {"dataplane", "ports[].device", "—", kNoMember, kRestart},
    {"dataplane", "ports[].mtu", "`1500`", kNoMember, kRestart, 1280, kMaxMtu},
    {"dataplane", "ports[].vlan", "untagged", kNoMember, kRestart, 1, 4094},
    {"dataplane", "ports[].addresses", "`[]`", kNoMember, kReload},
    {"dataplane", "ports[].host_interface", "none", kNoMember, kRestart},
    {"dataplane", "ports[].mac", "the device's", kNoMember, kRestart},
    {"dataplane", "bonds[].name", "—", kNoMember, kRestart},
    {"dataplane", "bonds[].mode", "`802.3ad`", kNoMember, kRestart},
    {"dataplane", "bonds[].members", "—", kNoMember, kRestart},
    {"dataplane", "bonds[].transmit_hash", "`layer3+4`", kNoMember, kRestart},
    {"dataplane", "routes[]", "`[]`", kNoMember, kReload},
    {"dataplane", "neighbors[]", "`[]`", kNoMember, kReload},
    {"dataplane", "mbufs", "what the ports need", READ(dataplane.mbufs), kRestart, 1024, 1u << 26},
    {"dataplane", "poll", "`adaptive`", OWN(dataplane.busy_poll), kRestart},
    {"dataplane", "latency_sampling", "`0` (off)", READ(dataplane.latency_sampling), kRestart, 0, 65536},
    {"dataplane", "flow_table.capacity", "`1048576`", READ(dataplane.flow_capacity), kRestart, 1024, k30},
    {"dataplane", "flow_table.capacity_v6", "a quarter of `capacity`, at least 1024", READ(dataplane.flow_capacity_v6),
     kRestart, 1024, k30},
    // The conntrack timeouts, seconds: TCP's in TcpState order, then the datagrams' and the rest.
    TIMEOUT("tcp_none", "`10`", tcp[0]),
    TIMEOUT("tcp_syn_sent", "`120`", tcp[1]),
    TIMEOUT("tcp_syn_recv", "`60`", tcp[2]),
    TIMEOUT("tcp_established", "`86400`", tcp[3]),
    TIMEOUT("tcp_fin_wait", "`120`", tcp[4]),
    TIMEOUT("tcp_close_wait", "`3600`", tcp[5]),
    TIMEOUT("tcp_last_ack", "`30`", tcp[6]),
    TIMEOUT("tcp_time_wait", "`120`", tcp[7]),
    TIMEOUT("tcp_close", "`10`", tcp[8]),
    TIMEOUT("tcp_syn_sent2", "`120`", tcp[9]),
    TIMEOUT("udp_unreplied", "`30`", udp_unreplied),
    TIMEOUT("udp_replied", "`120`", udp_replied),
    TIMEOUT("icmp", "`30`", icmp),
    TIMEOUT("other", "`600`", other),
    {"dataplane", "flow_table.new_flows_per_source", "`0` (no cap)", READ(dataplane.new_flows_per_source), kRestart, 0,
     dp::SourceLimiter::kMaxLimit},
    {"dataplane", "flow_table.state_file", "none", OWN(dataplane.state_file), kReload},
    {"dataplane", "flow_table.state_max_age", "`600`", READ(dataplane.state_max_age), kReload, 1, 30 * kDay},
    {"dataplane", "fragments.timeout_ms", "`2000`", READ(dataplane.fragments.timeout_ms), kRestart, 100, 60000},
    {"dataplane", "fragments.max_datagrams", "`4096`", READ(dataplane.fragments.max_datagrams), kRestart, 8, k20},
    {"dataplane", "fragments.max_held", "`1024`", READ(dataplane.fragments.max_held), kRestart, 0, k20},
    {"dataplane", "fragments.max_per_datagram", "`64`", READ(dataplane.fragments.max_per_datagram), kRestart, 2,
     dp::FragTable::kMaxPerDatagram},
    {"dataplane", "icmp_errors_per_second", "`1000`", READ(dataplane.icmp_errors_per_second), kRestart, 0, k24},
    {"dataplane", "host_path.control_per_second", "`2000`", READ(dataplane.punt_control_per_second), kRestart, 0, k24},
    {"dataplane", "host_path.other_per_second", "`1000`", READ(dataplane.punt_other_per_second), kRestart, 0, k24},
    {"dataplane", "one_arm_masquerade", "`true`", READ(dataplane.one_arm_masquerade), kReload},
    {"control", "socket", "`/run/svcgate.sock`", OWN(control.socket), kRestart},
    {"control", "socket_mode", "`0600`", OWN(control.socket_mode), kReload},
    {"control", "metrics", "`127.0.0.1:9477`", OWN(control.metrics), kRestart},
    {"control", "watch", "`true`", READ(control.watch), kReload},
    {"control", "drain_timeout", "`300`", READ(control.drain_timeout), kReload, 1, kDay},
    {"kubernetes", "manifests", "none", kNoMember, kReload},
    {"kubernetes", "api.kubeconfig", "— (or `in_cluster`)", OWN(kube_api.kubeconfig), kRestart},
    {"kubernetes", "api.context", "its `current-context`", READ(kube_api.context), kRestart},
    {"kubernetes", "api.in_cluster", "`false`", READ(kube_api.in_cluster), kRestart},
    {"kubernetes", "api.min_sync_period_ms", "`1000`", READ(kube_api.min_sync_ms), kRestart, 0, 60000},
    {"kubernetes", "api.watch_timeout_seconds", "`300`", READ(kube_api.watch_timeout_s), kRestart, 1, 3600},
    {"kubernetes", "api.list_page_size", "`500`", READ(kube_api.list_page_size), kRestart, 1, 10000},
    {"kubernetes", "load_balancer.class", "`svcgate.io/lb`", READ(load_balancer.lb_class), kReload},
    {"kubernetes", "load_balancer.default_class", "`true`", READ(load_balancer.default_class), kReload},
    {"kubernetes", "load_balancer.election.namespace", "`svcgate-system`", READ(load_balancer.election.ns), kRestart},
    {"kubernetes", "load_balancer.election.name", "`svcgate-lb`", READ(load_balancer.election.name), kRestart},
    {"kubernetes", "load_balancer.election.lease_duration_s", "`15`", READ(load_balancer.election.lease_duration_s),
     kRestart, 2, 3600},
    {"kubernetes", "load_balancer.election.renew_deadline_s", "`10`", READ(load_balancer.election.renew_deadline_s),
     kRestart, 1, 3600},
    {"kubernetes", "load_balancer.election.retry_period_s", "`2`", READ(load_balancer.election.retry_period_s),
     kRestart, 1, 3600},
    {"kubernetes", "load_balancer.write_qps", "`20`", READ(load_balancer.write_qps), kReload, 1, 100000},
    {"kubernetes", "load_balancer.write_burst", "`30`", READ(load_balancer.write_burst), kReload, 1, 100000},
    {"kubernetes", "load_balancer.pools[].name", "—", kNoMember, kReload},
    {"kubernetes", "load_balancer.pools[].addresses", "—", kNoMember, kReload},
    {"kubernetes", "load_balancer.pools[].auto_assign", "`true`", kNoMember, kReload},
    {"kubernetes", "load_balancer.pools[].avoid_buggy_ips", "`false`", kNoMember, kReload},
    {"kubernetes", "load_balancer.pools[].allocate_to.priority", "`0` (last)", kNoMember, kReload},
    {"kubernetes", "load_balancer.pools[].allocate_to.namespaces", "`[]` (all)", kNoMember, kReload},
    {"kubernetes", "load_balancer.pools[].allocate_to.namespace_selectors", "`[]` (all)", kNoMember, kReload},
    {"kubernetes", "load_balancer.pools[].allocate_to.service_selectors", "`[]` (all)", kNoMember, kReload},
    {"routing", "table", "— (required)", READ(routing.table), kRestart, 1, 4294967294u},
    {"routing", "announce", "`[load_balancer_ips, external_ips, node_ips]`", kNoMember, kReload},
    {"ha", "listen", "— (required)", OWN(ha.listen), kRestart},
    {"ha", "peers", "— (required)", OWN(ha.peers), kRestart},
    {"ha", "key_file", "— (required)", kHaKey, kRestart},
    {"ha", "takeover_ports", "none", OWN(ha.takeover_ports), kRestart},
    {"ha", "refresh_seconds", "`10`", READ(ha.refresh_seconds), kRestart, 1, 3600},
    {"ha", "hello_ms", "`100`", READ(ha.hello_ms), kRestart, 10, 10000},
    {"ha", "dead_after_ms", "`1000`", READ(ha.dead_after_ms), kRestart, 30, 60000},
    {"export", "ipfix.collectors", "— (required)", OWN(ipfix.collectors), kRestart},
    {"export", "ipfix.transport", "`udp`", OWN(ipfix.tcp), kRestart},
    {"export", "ipfix.observation_domain", "`1`", READ(ipfix.observation_domain), kRestart, 0, UINT32_MAX},
    {"export", "ipfix.template_refresh_s", "`60`", READ(ipfix.template_refresh_s), kRestart, 1, 86400},
    {"export", "ipfix.events", "`[create, delete]`", kNoMember, kRestart},
    {"export", "ipfix.ring", "`65536`", READ(ipfix.ring), kRestart, 1024, 1u << 22},
    {"cluster", "node_name", "`\"\"`", READ(cluster.node_name), kReload},
    {"cluster", "node_ips", "`[]`", OWN(cluster.node_ips), kReload},
    {"cluster", "nodeport_addresses", "`[]`", OWN(cluster.nodeport_addresses), kReload},
    {"cluster", "cluster_cidrs", "`[]`", OWN(cluster.cluster_cidrs), kReload},
    {"cluster", "service_cidrs", "`[]`", OWN(cluster.service_cidrs), kReload},
    {"cluster", "masquerade_all", "`false`", READ(cluster.masquerade_all), kReload},
    {"cluster", "client_ip", "`masquerade`", OWN(cluster.client_ip), kReload},
    {"cluster", "reject_unknown_port", "`true`", READ(cluster.reject_unknown_port), kReload},
    {"cluster", "nodeport_range", "`30000-32767`", kNoMember, kReload},
    {"cluster", "masquerade_ports", "`1024-65535`", kNoMember, kReload},
    {"cluster", "maglev_seed", "`0`", READ(cluster.maglev_seed), kReload, 0, UINT32_MAX},
    {"cluster", "maglev_table_size", "by endpoint count", READ(cluster.maglev_table_size), kReload, dp::kMaglevMinTable,
     dp::kMaglevMaxTable},
    {"cluster", "node_labels", "`{}`", OWN(cluster.node_labels), kReload},
    {"cluster", "proxy_name", "none", READ(cluster.proxy_name), kReload},
    {"cluster", "proxy_name_only", "`false`", READ(cluster.proxy_name_only), kReload},
};

#undef TIMEOUT
#undef OWN
#undef READ
#undef AT

const ConfigField& config_field(std::string_view section, std::string_view key) {
    for (const ConfigField& f : kConfigFields)
        if (f.section == section && f.key == key) return f;
    std::fprintf(stderr, "svcgate: bug: no config field %.*s.%.*s\n", static_cast<int>(section.size()), section.data(),
                 static_cast<int>(key.size()), key.data());
    std::abort();
}

std::string_view key_under(std::string_view key, std::string_view prefix) {
    if (prefix.empty()) return key;
    if (!key.starts_with(prefix) || key.size() <= prefix.size() || key[prefix.size()] != '.') return {};
    return key.substr(prefix.size() + 1);
}

std::vector<std::string_view> keys_under(std::string_view section, std::string_view prefix) {
    std::vector<std::string_view> out;
    for (const ConfigField& f : kConfigFields) {
        if (f.section != section) continue;
        std::string_view k = key_under(f.key, prefix);
        k = k.substr(0, k.find_first_of(".["));  // "ports[].mtu" -> "ports", "flow_table.capacity" -> "flow_table"
        if (!k.empty() && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
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
    if (next.load_balancer.enabled != running.load_balancer.enabled) {  // the election starts with the daemon
        next.load_balancer = running.load_balancer;
        report("kubernetes.load_balancer");
    }
    // The exporter and the workers' rings start with the daemon: turning it on or off is one
    // change, its fields (the rows below, the events here) the others.
    if (next.ipfix.enabled != running.ipfix.enabled) {
        next.ipfix = running.ipfix;
        report("export.ipfix");
    }
    if (next.ipfix.create != running.ipfix.create || next.ipfix.end != running.ipfix.end) {
        next.ipfix.create = running.ipfix.create, next.ipfix.end = running.ipfix.end;
        report("export.ipfix.events");
    }
    // The timeouts are named as one setting, as the log has always said.
    bool timeouts = false;
    for (const ConfigField& f : kConfigFields) {
        if (!f.restart || !f.value.keep || !f.value.keep(next, running)) continue;
        if (key_under(f.key, "flow_table.timeouts").empty())
            report(std::string(f.section) + "." + std::string(f.key));
        else if (!std::exchange(timeouts, true))
            report("dataplane.flow_table.timeouts");
    }
    // A port's addresses may change; the list of ports (names, devices, and what is set on the
    // device) may not: a change to any takes them all from the running config.
    DataplaneConfig& d = next.dataplane;
    const DataplaneConfig& r = running.dataplane;
    bool same = d.ports.size() == r.ports.size();
    for (size_t i = 0; same && i < d.ports.size(); ++i) {
        const PortConfig &a = d.ports[i], &b = r.ports[i];
        same = a.name == b.name && a.device == b.device && a.vlan == b.vlan && a.mtu == b.mtu &&
            a.host_interface == b.host_interface && a.mac == b.mac;
    }
    if (!same) {
        d.ports = r.ports;
        report("dataplane.ports");
    }
    // The bonds are devices: their members, mode and hash are the running ones until a restart.
    same = d.bonds.size() == r.bonds.size();
    for (size_t i = 0; same && i < d.bonds.size(); ++i) {
        const BondConfig &a = d.bonds[i], &b = r.bonds[i];
        same = a.name == b.name && a.mode == b.mode && a.members == b.members && a.transmit_hash == b.transmit_hash;
    }
    if (!same) {
        d.bonds = r.bonds;
        report("dataplane.bonds");
    }
    return changed;
}

}  // namespace svcgate::ctl
