// What the daemon reports, typed once. Each remote command's answer (command_table.h) is one of
// these structs: the daemon fills it under its lock (commands.cpp) and writes it to the control
// socket as JSON; svcgatectl reads the JSON back into the same struct and renders it as text
// (control/cli/render.cpp). Each struct's JSON keys are spelled once, in its `members` list,
// which both the writer (to_json) and the reader (from_json) walk, in the order written
// (control/base/report_json.h).
//
// Runs on: any thread (plain data). Depends on nothing of the daemon: svcgatectl includes it.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "control/base/report_json.h"
#include "control/base/report_members.h"
#include "control/ha/ha_report.h"
#include "control/kube/kube_report.h"
#include "control/lb/lb_report.h"

namespace svcgate::ctl::report {

// ---- status ----------------------------------------------------------------------------------

struct NoReturn {
    std::string service, family;
    uint64_t resent_syns = 0;
};
void members(Of<NoReturn> auto& r, auto&& f) {
    f("service", r.service), f("family", r.family), f("resent_syns", r.resent_syns);
}

struct ClientIp {
    std::string default_mode;
    uint64_t preserve_service_ports = 0;
    std::vector<NoReturn> no_return;
};
void members(Of<ClientIp> auto& r, auto&& f) {
    f("default", r.default_mode), f("preserve_service_ports", r.preserve_service_ports), f("no_return", r.no_return);
}

// A bond's member link (BondMemberView): LACP's states as the flags set, in 802.1AX's order.
struct BondMember {
    std::string device;
    bool link = false, active = false;
    std::optional<std::vector<std::string>> actor, partner;  // 802.3ad only
};
void members(Of<BondMember> auto& r, auto&& f) {
    f("device", r.device), f("link", r.link), f("active", r.active), f("actor", r.actor), f("partner", r.partner);
}

struct Port {
    std::string name, device;
    unsigned vlan = 0;  // 0: untagged
    bool link = false;
    unsigned rx_queues = 1, tx_queues = 1;
    std::string rss_steering;
    std::vector<BondMember> bond;  // its device's members, when it is a bond
};
void members(Of<Port> auto& r, auto&& f) {
    f("name", r.name), f("device", r.device), f("vlan", r.vlan), f("link", r.link), f("rx_queues", r.rx_queues),
        f("tx_queues", r.tx_queues), f("rss_steering", r.rss_steering), f("bond", r.bond);
}

struct Handover {
    bool done = false;
    unsigned peers = 0;
    uint64_t flows = 0;
};
void members(Of<Handover> auto& r, auto&& f) { f("done", r.done), f("peers", r.peers), f("flows", r.flows); }

struct Health {
    bool live = false, ports_up = false, healthy = false, draining = false;
    std::vector<std::string> announced;
    uint32_t announce_table = 0;
    // While draining:
    std::optional<uint32_t> connections_left;
    std::optional<double> drain_seconds_left;
    std::optional<Handover> handover;
    std::optional<std::string> announce_error;
};
void members(Of<Health> auto& r, auto&& f) {
    f("live", r.live), f("ports_up", r.ports_up), f("healthy", r.healthy), f("draining", r.draining),
        f("announced", r.announced), f("announce_table", r.announce_table);
    f("connections_left", r.connections_left, omit), f("drain_seconds_left", r.drain_seconds_left, omit),
        f("handover", r.handover, omit), f("announce_error", r.announce_error, omit);
}

struct NoRule {
    std::string service, why;
};
void members(Of<NoRule> auto& r, auto&& f) { f("service", r.service), f("why", r.why); }

struct ObjectIssue {
    std::string object, reason, message;
    bool left_out = false;
};
void members(Of<ObjectIssue> auto& r, auto&& f) {
    f("object", r.object), f("reason", r.reason), f("message", r.message), f("left_out", r.left_out);
}

struct Kubernetes {
    uint64_t manifests = 0;
    unsigned services = 0, endpoint_slices = 0, headless = 0, external_name = 0, ignored_objects = 0, other_proxy = 0,
             service_cidrs = 0;
    std::vector<NoRule> no_rule;
    std::vector<ObjectIssue> object_issues;
    std::optional<KubeApi> api;  // null: not following an API server
    LoadBalancer load_balancer;  // role "off" without kubernetes.load_balancer
};
void members(Of<Kubernetes> auto& r, auto&& f) {
    f("manifests", r.manifests), f("services", r.services), f("endpoint_slices", r.endpoint_slices),
        f("headless", r.headless), f("external_name", r.external_name), f("ignored_objects", r.ignored_objects),
        f("other_proxy", r.other_proxy), f("service_cidrs", r.service_cidrs), f("no_rule", r.no_rule),
        f("object_issues", r.object_issues), f("api", r.api), f("load_balancer", r.load_balancer);
}

// svcgatectl status.
struct Status {
    std::string config;
    uint64_t generation = 0;
    ClientIp client_ip;
    int64_t uptime_seconds = 0;
    uint64_t workers = 0;
    std::vector<Port> ports;
    uint64_t service_ports = 0, endpoints = 0, flows = 0, flow_capacity = 0, rx_packets = 0;
    // Each family's table: its live flows and capacity (flows and flow_capacity are their sums).
    uint64_t flows_v4 = 0, flow_capacity_v4 = 0, flows_v6 = 0, flow_capacity_v6 = 0;
    uint64_t reloads = 0, reload_failures = 0;
    bool last_reload_ok = true;
    double last_reload_seconds = 0;
    std::string last_reload_trigger;
    std::optional<std::string> last_reload_error;  // null when the last reload was published
    Health health;
    std::optional<Ha> ha;  // null: not replicating
    Kubernetes kubernetes;
};
void members(Of<Status> auto& r, auto&& f) {
    f("config", r.config), f("generation", r.generation), f("client_ip", r.client_ip),
        f("uptime_seconds", r.uptime_seconds), f("workers", r.workers), f("ports", r.ports),
        f("service_ports", r.service_ports), f("endpoints", r.endpoints), f("flows", r.flows),
        f("flow_capacity", r.flow_capacity), f("flows_v4", r.flows_v4), f("flow_capacity_v4", r.flow_capacity_v4),
        f("flows_v6", r.flows_v6), f("flow_capacity_v6", r.flow_capacity_v6), f("rx_packets", r.rx_packets),
        f("reloads", r.reloads), f("reload_failures", r.reload_failures), f("last_reload_ok", r.last_reload_ok),
        f("last_reload_seconds", r.last_reload_seconds), f("last_reload_trigger", r.last_reload_trigger),
        f("last_reload_error", r.last_reload_error), f("health", r.health), f("ha", r.ha),
        f("kubernetes", r.kubernetes);
}

// ---- services, endpoints, flows --------------------------------------------------------------

// svcgatectl services: one row per service port.
struct Service {
    std::string name, protocol, family, cluster_ip;
    uint16_t port = 0, node_port = 0;
    std::vector<std::string> external_ips, load_balancer_ips;
    uint32_t endpoints = 0, ready = 0;
    std::string scheduler, topology;
    // How external traffic reaches the endpoints: masquerade, preserve, kept; null: none reaches it.
    std::optional<std::string> external_source;
    uint64_t packets = 0, bytes = 0;
};
void members(Of<Service> auto& r, auto&& f) {
    f("name", r.name), f("protocol", r.protocol), f("family", r.family), f("cluster_ip", r.cluster_ip),
        f("port", r.port), f("node_port", r.node_port), f("external_ips", r.external_ips),
        f("load_balancer_ips", r.load_balancer_ips), f("endpoints", r.endpoints), f("ready", r.ready),
        f("scheduler", r.scheduler), f("topology", r.topology), f("external_source", r.external_source),
        f("packets", r.packets), f("bytes", r.bytes);
}

// svcgatectl endpoints: one row per endpoint of a service port.
struct Endpoint {
    std::string service, endpoint, conditions, node, zone;
    std::vector<std::string> zone_hints, node_hints;
    // The rule by which internal / external traffic uses it ("all", "zone hints", "local"); null: unused.
    std::optional<std::string> internal, external;
    std::optional<std::string> external_source;
    int32_t flows = 0;
    uint64_t packets = 0, bytes = 0;
    // Its Service's health checks (control/probe/): up, down or unchecked, since when (Unix
    // seconds), the check, the last failure and when; null: its Service has none.
    std::optional<std::string> health;
    double health_since = 0, last_failure_at = 0;
    std::string health_check, last_failure;
};
void members(Of<Endpoint> auto& r, auto&& f) {
    f("service", r.service), f("endpoint", r.endpoint), f("conditions", r.conditions), f("node", r.node),
        f("zone", r.zone), f("zone_hints", r.zone_hints), f("node_hints", r.node_hints), f("internal", r.internal),
        f("external", r.external), f("external_source", r.external_source), f("flows", r.flows),
        f("packets", r.packets), f("bytes", r.bytes), f("health", r.health), f("health_since", r.health_since),
        f("health_check", r.health_check), f("last_failure", r.last_failure), f("last_failure_at", r.last_failure_at);
}

// svcgatectl flows: one row per NAT flow.
struct Flow {
    std::string original, endpoint;
    std::optional<std::string> snat;  // null: not masqueraded
    std::string state;
    uint32_t idle = 0;
    std::string service;
    std::optional<unsigned> replica_of;  // the peer (ha.peers, from 1) it came from; null: made here
};
void members(Of<Flow> auto& r, auto&& f) {
    f("original", r.original), f("endpoint", r.endpoint), f("snat", r.snat), f("state", r.state), f("idle", r.idle),
        f("service", r.service), f("replica_of", r.replica_of);
}

// svcgatectl flows --top N --by source|service|endpoint: the live NAT flows counted by one key,
// the largest first.
struct Talker {
    std::string key;  // the client's address, the service port, or the endpoint's ADDRESS:PORT
    uint64_t flows = 0;
    uint64_t tcp_open = 0;  // of them, TCP connections not yet closing (a SYN flood's are not)
};
void members(Of<Talker> auto& r, auto&& f) { f("key", r.key), f("flows", r.flows), f("tcp_open", r.tcp_open); }

// ---- stats -----------------------------------------------------------------------------------

// A port's NIC counters (rte_eth_stats).
struct PortCounters {
    uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0, rx_missed = 0, rx_errors = 0, tx_errors = 0;
};
void members(Of<PortCounters> auto& r, auto&& f) {
    f("rx_packets", r.rx_packets), f("tx_packets", r.tx_packets), f("rx_bytes", r.rx_bytes), f("tx_bytes", r.tx_bytes),
        f("rx_missed", r.rx_missed), f("rx_errors", r.rx_errors), f("tx_errors", r.tx_errors);
}

struct FlowCounts {
    uint64_t live = 0, created = 0, expired = 0, joined = 0, early_dropped = 0, port_remapped = 0,
             masquerade_ports_steered = 0, masquerade_ports_unsteered = 0, reopened = 0;
};
void members(Of<FlowCounts> auto& r, auto&& f) {
    f("live", r.live), f("created", r.created), f("expired", r.expired), f("joined", r.joined),
        f("early_dropped", r.early_dropped), f("port_remapped", r.port_remapped),
        f("masquerade_ports_steered", r.masquerade_ports_steered),
        f("masquerade_ports_unsteered", r.masquerade_ports_unsteered), f("reopened", r.reopened);
}

struct Fragments {
    uint64_t held = 0, datagrams = 0, stored = 0, released = 0, fragmented = 0, fragments_out = 0;
};
void members(Of<Fragments> auto& r, auto&& f) {
    f("held", r.held), f("datagrams", r.datagrams), f("stored", r.stored), f("released", r.released),
        f("fragmented", r.fragmented), f("fragments_out", r.fragments_out);
}

struct WorkerCounts {
    uint64_t rx = 0, tx = 0, generated = 0, dropped = 0, rejected = 0, held = 0, frag_stored = 0, frag_taken = 0;
    int64_t unaccounted = 0;  // received less sent, dropped and held: 0 unless a packet was lost
};
void members(Of<WorkerCounts> auto& r, auto&& f) {
    f("rx", r.rx), f("tx", r.tx), f("generated", r.generated), f("dropped", r.dropped), f("rejected", r.rejected),
        f("held", r.held), f("frag_stored", r.frag_stored), f("frag_taken", r.frag_taken),
        f("unaccounted", r.unaccounted);
}

struct Mempool {
    uint64_t size = 0, in_use = 0;
};
void members(Of<Mempool> auto& r, auto&& f) { f("size", r.size), f("in_use", r.in_use); }

// dataplane.latency_sampling: the sampled packets' time inside the gateway, microseconds.
struct Latency {
    uint64_t samples = 0;
    double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};
void members(Of<Latency> auto& r, auto&& f) {
    f("samples", r.samples), f("p50_us", r.p50_us), f("p99_us", r.p99_us), f("p999_us", r.p999_us),
        f("max_us", r.max_us);
}

// svcgatectl stats.
struct Stats {
    Keyed<PortCounters> ports;  // by port name
    Keyed<uint64_t> verdicts, drops, rejects;
    FlowCounts flows;
    Fragments fragments;
    std::vector<WorkerCounts> workers;
    Mempool mempool;
    std::vector<Service> services;
    std::vector<Endpoint> endpoints;
    std::optional<Latency> latency;  // null: dataplane.latency_sampling is off
};
void members(Of<Stats> auto& r, auto&& f) {
    f("ports", r.ports), f("verdicts", r.verdicts), f("drops", r.drops), f("rejects", r.rejects), f("flows", r.flows),
        f("fragments", r.fragments), f("workers", r.workers), f("mempool", r.mempool), f("services", r.services),
        f("endpoints", r.endpoints), f("latency", r.latency);
}

// ---- reload, drain, undrain ------------------------------------------------------------------

struct Reload {
    bool ok = false;
    uint64_t generation = 0;
    std::string message;  // the line the daemon logged
};
void members(Of<Reload> auto& r, auto&& f) { f("ok", r.ok), f("generation", r.generation), f("message", r.message); }

struct Drain {
    bool ok = true, draining = true;
    long timeout_seconds = 0;
};
void members(Of<Drain> auto& r, auto&& f) {
    f("ok", r.ok), f("draining", r.draining), f("timeout_seconds", r.timeout_seconds);
}

struct Undrain {
    bool ok = true, draining = false, was_draining = false;
};
void members(Of<Undrain> auto& r, auto&& f) {
    f("ok", r.ok), f("draining", r.draining), f("was_draining", r.was_draining);
}

}  // namespace svcgate::ctl::report
