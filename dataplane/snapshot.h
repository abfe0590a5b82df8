// The service snapshot: everything workers need to classify, select and translate, built by the
// control plane from one config and never modified after it is published — except the atomics
// documented below (scheduler cursors, active-flow counts, counters), which workers update.
//
// Runs on: built by the control thread; published with one atomic pointer store and retired
// after an RCU grace period (rte_rcu_qsbr). Workers read it for the duration of one burst.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conntrack.h"
#include "route.h"
#include "static_hash.h"
#include "types.h"

namespace svcgate::dp {

// The scheduler of a Service (chosen per Service, a switch per new flow: no virtual call).
enum class Scheduler : uint8_t { random, maglev, rr, lc, sh, dh, sed, nq };
const char* scheduler_name(Scheduler s) noexcept;
std::optional<Scheduler> scheduler_from_name(std::string_view s) noexcept;
inline bool scheduler_uses_ring(Scheduler s) noexcept {
    return s == Scheduler::maglev || s == Scheduler::sh || s == Scheduler::dh;
}

// How a packet reached the Service: kube-proxy treats cluster IPs as internal traffic and the
// other three as external traffic (externalTrafficPolicy).
enum class AddrRole : uint8_t { cluster_ip = 0, external_ip = 1, lb_ip = 2, node_port = 3 };
const char* addr_role_name(AddrRole r) noexcept;

enum class NoEndpoints : uint8_t { reject, drop };

enum EndpointCond : uint8_t { kReady = 0x1, kServing = 0x2, kTerminating = 0x4, kLocal = 0x8 };

struct Endpoint {
    Ip4 ip;
    rte_be16_t port = 0;
    uint8_t cond = kReady | kServing;
    std::string node;
};

// A list of endpoints (indices into ServiceSnapshot::endpoints) one traffic class may use, with
// its Maglev table when the Service's scheduler hashes.
struct EndpointSet {
    uint32_t first = 0;     // into ServiceSnapshot::members
    uint32_t count = 0;
    uint32_t ring_off = 0;  // into ServiceSnapshot::rings
    uint32_t ring_len = 0;
};

// What a new connection reads comes first, in the first cache line (one prefetch before
// selection covers it); names and addresses for the control plane after.
struct alignas(64) ServicePort {
    uint32_t id = 0;              // stable hash of name and protocol: survives reloads
    Proto proto = Proto::tcp;
    Scheduler scheduler = Scheduler::random;
    bool external_local = false;    // externalTrafficPolicy Local (and externally reachable)
    bool internal_local = false;    // internalTrafficPolicy Local
    // When the set a packet may use is empty: drop if the Service has usable endpoints that the
    // traffic policy rules out (kube-proxy's "no local endpoints"), reject if it has none at all.
    // The short-circuit Cluster sets are empty only in the second case, so one value serves all.
    NoEndpoints no_endpoints = NoEndpoints::reject;
    uint32_t affinity_timeout = 0;  // seconds; 0 = sessionAffinity None
    uint32_t internal_set = 0;   // cluster-IP traffic
    uint32_t external_set = 0;   // NodePort / external IP / LB IP traffic
    uint32_t cluster_set = 0;    // the Cluster-policy set (short-circuits of policy Local)
    uint32_t ep_first = 0, ep_count = 0;  // all endpoints of this port, into endpoints
    std::vector<Cidr4> lb_source_ranges;
    // Cold.
    std::string name;             // "namespace/name:port-name" (port name may be empty)
    Ip4 cluster_ip;
    rte_be16_t port = 0;
    uint16_t node_port = 0;       // host order; 0 = none
    std::vector<Ip4> external_ips;
    std::vector<Ip4> lb_ips;
};
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // not standard-layout (strings), fine on GCC and clang
static_assert(offsetof(ServicePort, lb_source_ranges) + sizeof(ServicePort::lb_source_ranges) <= 64,
              "what selection reads fits the first cache line");
#pragma GCC diagnostic pop

// Flags of an address the gateway must know about, in local_addrs.
enum LocalAddr : uint32_t {
    kNodeAddr = 0x1,      // the node's own address: traffic from it is "from the node"
    kNodePortAddr = 0x2,  // NodePorts are served on it
    kClusterIp = 0x4,     // a ClusterIP: a port no Service uses is rejected
    kPortAddr = 0x8,      // an address of a gateway port (ARP, ICMP echo, SNAT source)
    kServiceAddr = 0x10,  // an external or load-balancer IP (the gateway answers ARP for it)
};

struct PortInfo {
    std::string name;
    std::vector<Cidr4> addrs;  // host address and prefix length
};

struct ClusterSettings {
    std::vector<Cidr4> cluster_cidrs;   // local-traffic detector; empty = none (kube-proxy NoOp)
    std::vector<Cidr4> service_cidrs;
    bool masquerade_all = false;
    bool reject_unknown_port = true;     // nftables: known ClusterIP, unknown port → REJECT
    bool one_arm_masquerade = true;      // masquerade when client and endpoint share a next hop
    uint16_t snat_port_min = 1024;
    uint16_t snat_port_max = 65535;
};

// Per-worker, per-service-port packet counters: written by one worker, summed by the control
// thread (relaxed loads; a torn read cannot happen on 64-bit x86).
struct alignas(16) SvcCounters {
    uint64_t packets = 0;
    uint64_t bytes = 0;
};

struct ServiceSnapshot {
    uint32_t generation = 0;
    uint16_t workers = 1;
    ClusterSettings cluster;
    std::vector<ServicePort> services;
    std::vector<Endpoint> endpoints;
    std::vector<uint32_t> members;       // EndpointSet contents
    std::vector<EndpointSet> sets;
    std::vector<uint16_t> rings;         // Maglev tables, concatenated
    StaticHash vips;                     // (ip, port, proto) → service << 2 | role
    StaticHash local_addrs;              // ip → LocalAddr flags
    std::vector<PortInfo> ports;
    // null: no routing configured. Shared with the next snapshot when a reload leaves the routes
    // as they were (an rte_lpm is a 64 MB table to build).
    std::shared_ptr<const RouteTable> routes;

    // Mutable by workers (atomics): scheduler state and counters.
    std::unique_ptr<std::atomic<uint32_t>[]> rr_cursor;  // per set
    std::unique_ptr<std::atomic<int32_t>[]> active;      // per endpoint: live flows (lc/sed/nq)
    std::unique_ptr<SvcCounters[]> svc_counters;         // [worker * services.size() + svc]
    std::unique_ptr<SvcCounters[]> ep_counters;          // [worker * endpoints.size() + endpoint]

    static constexpr uint64_t vip_key(Ip4 ip, rte_be16_t port, uint8_t proto) noexcept {
        return (uint64_t{ip.be} << 32) | (uint64_t{port} << 8) | proto;
    }
    uint32_t local_flags(Ip4 ip) const noexcept {
        uint32_t v = local_addrs.find(ip.be);
        return v == StaticHash::kNone ? 0 : v;
    }
    const NextHop* route(Ip4 dst) const noexcept { return routes ? routes->lookup(dst) : nullptr; }
};

}  // namespace svcgate::dp
