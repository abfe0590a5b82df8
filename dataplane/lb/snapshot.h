// The service snapshot: everything workers need to classify, select and translate, built by the
// control plane from one config and never modified after it is published — except the rr cursors,
// which workers update. Hot tables first (plain structs indexed by the fast path); the catalogue
// beside them holds what only the control plane reads, indexed alike. Counters and active-flow
// counts live in a StatsTable of their own (WorkerCtx::stats), by stable slot, so they survive
// reloads; the slots in ServicePort and Endpoint are set by the publisher before publication.
//
// Runs on: built by the control thread; published with one atomic pointer store and retired
// after an RCU grace period (rte_rcu_qsbr). Workers read it for the duration of one burst.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/flow/conntrack.h"
#include "dataplane/packet/counters.h"
#include "dataplane/base/enum_names.h"
#include "dataplane/base/fixed_array.h"
#include "dataplane/route/route.h"
#include "dataplane/base/static_hash.h"
#include "dataplane/base/types.h"

namespace svcgate::dp {

// The scheduler of a Service (chosen per Service, a switch per new flow: no virtual call).
#define SVCGATE_SCHEDULERS(X) \
    X(random, "random") X(maglev, "maglev") X(rr, "rr") X(lc, "lc") X(sh, "sh") X(dh, "dh") X(sed, "sed") X(nq, "nq")
enum class Scheduler : uint8_t { SVCGATE_SCHEDULERS(SVCGATE_ENUM_ID) };
inline constexpr std::array kSchedulerNames{SVCGATE_SCHEDULERS(SVCGATE_ENUM_NAME)};
inline const char* scheduler_name(Scheduler s) noexcept { return enum_name(s, kSchedulerNames); }
inline std::optional<Scheduler> scheduler_from_name(std::string_view s) noexcept {
    return enum_from_name<Scheduler>(s, kSchedulerNames);
}
inline bool scheduler_uses_ring(Scheduler s) noexcept {
    return s == Scheduler::maglev || s == Scheduler::sh || s == Scheduler::dh;
}

// How a packet reached the Service: kube-proxy treats cluster IPs as internal traffic and the
// other three as external traffic (externalTrafficPolicy).
#define SVCGATE_ADDR_ROLES(X) \
    X(cluster_ip, "cluster-ip") X(external_ip, "external-ip") X(lb_ip, "load-balancer-ip") X(node_port, "node-port")
enum class AddrRole : uint8_t { SVCGATE_ADDR_ROLES(SVCGATE_ENUM_ID) };
inline constexpr std::array kAddrRoleNames{SVCGATE_ADDR_ROLES(SVCGATE_ENUM_NAME)};
inline const char* addr_role_name(AddrRole r) noexcept { return enum_name(r, kAddrRoleNames); }

enum class NoEndpoints : uint8_t { reject, drop };

// kUnhealthy: it fails its Service's health checks (control/probe/), so it is neither ready nor
// serving whatever its slice says; kEvicted: and its connections are ended (on_failure: reset).
enum EndpointCond : uint8_t {
    kReady = 0x1,
    kServing = 0x2,
    kTerminating = 0x4,
    kLocal = 0x8,
    kUnhealthy = 0x10,
    kEvicted = 0x20
};

// An endpoint of one service port, as workers read it; its node name is in the catalogue.
struct Endpoint {
    IpAddr ip;  // of the service port's family
    rte_be16_t port = 0;
    uint8_t cond = kReady | kServing;
    uint32_t slot = 0;  // StatsTable endpoint slot: stable across reloads

    EndpointKey key() const noexcept { return EndpointKey{ip, port}; }
};

// A list of endpoints (indices into ServiceSnapshot::endpoints) one traffic class may use, with
// its Maglev table when the Service's scheduler hashes.
struct EndpointSet {
    uint32_t first = 0;  // into ServiceSnapshot::members
    uint32_t count = 0;
    uint32_t ring_off = 0;  // into ServiceSnapshot::rings
    uint32_t ring_len = 0;
};

// Prefixes of the snapshot's shared CIDR table (ServiceSnapshot::cidrs).
struct CidrRange {
    uint32_t first = 0;
    uint32_t count = 0;
    bool empty() const noexcept { return count == 0; }
};

// Where one of a port's endpoint sets keeps its members (EndpointSet's first two fields): in the
// ServicePort, so that a new connection finds its members without the set's own line.
struct SetSpan {
    uint32_t first = 0;  // into ServiceSnapshot::members
    uint32_t count = 0;
};

// A service port as a new connection reads it: one cache line, no pointers to chase but the
// snapshot's own tables. Names and addresses for people are in the catalogue, indexed alike.
// With many Services this line is far from the cache, and so is everything it leads to: what it
// holds lets a new connection prefetch the rest (members, endpoints, counters) at once, instead
// of one table's line waiting for the one before (select_new_flows).
struct alignas(64) ServicePort {
    uint32_t id = 0;    // stable hash of name and protocol: survives reloads
    uint32_t slot = 0;  // StatsTable service slot: stable across reloads
    Proto proto = Proto::tcp;
    Family family = Family::v4;  // of its addresses and endpoints: a dual-stack Service has one per family
    Scheduler scheduler = Scheduler::random;
    bool external_local : 1 = false;  // externalTrafficPolicy Local (and externally reachable)
    bool internal_local : 1 = false;  // internalTrafficPolicy Local
    // client_ip preserve, in effect: externally reachable, policy Cluster, masquerade_all off.
    // Its external traffic keeps the client's address (DNAT only) where kube-proxy would
    // masquerade it; hairpin and one-armed paths still masquerade.
    bool preserve_client : 1 = false;
    // When the set a packet may use is empty: drop if the Service has usable endpoints that the
    // traffic policy rules out (kube-proxy's "no local endpoints"), reject if it has none at all.
    // The short-circuit Cluster sets are empty only in the second case, so one value serves all.
    NoEndpoints no_endpoints : 1 = NoEndpoints::reject;
    uint32_t affinity_timeout = 0;         // seconds; 0 = sessionAffinity None
    uint32_t internal_set = 0;             // cluster-IP traffic
    uint32_t external_set = 0;             // NodePort / external IP / LB IP traffic
    uint32_t cluster_set = 0;              // the Cluster-policy set (short-circuits of policy Local)
    uint32_t ep_first = 0, ep_count = 0;   // all endpoints of this port, into endpoints
    CidrRange lb_source_ranges;            // into cidrs (cidrs6 for IPv6); empty = any source
    SetSpan internal_span, external_span;  // sets[internal_set] and sets[external_set]'s members
    // The StatsTable slot of endpoints[ep_first] (a port's endpoints get neighbouring slots), set
    // with the slots: the active counts and counters a new connection adds to, prefetched with
    // this line's other leads.
    uint32_t ep_slot_first = 0;
};
static_assert(sizeof(ServicePort) == 64, "what selection reads is one cache line");

// What people read about a service port (svcgatectl, metrics, trace), by service index.
// Which endpoints a service port's Cluster traffic uses (kube-proxy's topology mode): all of them,
// those hinted for the gateway's zone, or those hinted for its node.
enum class TopologyMode : uint8_t { all, zone, node };
constexpr const char* topology_mode_name(TopologyMode m) noexcept {
    return m == TopologyMode::zone ? "zone hints" : m == TopologyMode::node ? "node hints" : "all";
}

struct ServiceInfo {
    std::string name;  // "namespace/name:port-name" (port name may be empty)
    Family family = Family::v4;
    IpAddr cluster_ip;
    rte_be16_t port = 0;
    uint16_t node_port = 0;  // host order; 0 = none
    std::vector<IpAddr> external_ips;
    std::vector<IpAddr> lb_ips;
    TopologyMode topology = TopologyMode::all;
};

struct EndpointInfo {
    std::string node;
    std::string zone;
    std::vector<std::string> zone_hints, node_hints;
};

// How a packet reached a service port: the VIP table's value, a service index and an AddrRole in
// one 32-bit word.
class VipEntry {
public:
    static constexpr uint32_t kNoneRaw = StaticHash::kNone;
    constexpr VipEntry() noexcept = default;
    static constexpr VipEntry make(uint32_t service, AddrRole role) noexcept {
        return VipEntry{service << 2 | static_cast<uint32_t>(role)};
    }
    static constexpr VipEntry from_raw(uint32_t raw) noexcept { return VipEntry{raw}; }
    constexpr bool hit() const noexcept { return raw_ != kNoneRaw; }
    constexpr uint32_t service() const noexcept { return raw_ >> 2; }
    constexpr AddrRole role() const noexcept { return static_cast<AddrRole>(raw_ & 3); }
    constexpr uint32_t raw() const noexcept { return raw_; }

private:
    constexpr explicit VipEntry(uint32_t raw) noexcept : raw_(raw) {}
    uint32_t raw_ = kNoneRaw;
};

// (VIP, port, protocol) → VipEntry; NodePorts under the address 0.
class VipTable {
public:
    static constexpr uint64_t key(Ip4 ip, rte_be16_t port, uint8_t proto) noexcept {
        return (uint64_t{ip.be} << 32) | (uint64_t{port} << 8) | proto;
    }
    bool insert(uint64_t k, VipEntry e) { return table_.insert(k, e.raw()); }
    VipEntry find(uint64_t k) const noexcept { return VipEntry::from_raw(table_.find(k)); }
    void prefetch(uint64_t k) const noexcept { table_.prefetch(k); }
    size_t size() const noexcept { return table_.size(); }

private:
    StaticHash table_;
};

// The same for IPv6: (VIP, port, protocol) → VipEntry; NodePorts under the address ::.
class VipTable6 {
public:
    static StaticHash6::Key key(const Ip6& ip, rte_be16_t port, uint8_t proto) noexcept {
        return StaticHash6::Key{ip, uint32_t{port} << 8 | proto};
    }
    bool insert(const StaticHash6::Key& k, VipEntry e) { return table_.insert(k, e.raw()); }
    VipEntry find(const StaticHash6::Key& k) const noexcept { return VipEntry::from_raw(table_.find(k)); }
    void prefetch(const StaticHash6::Key& k) const noexcept { table_.prefetch(k); }
    size_t size() const noexcept { return table_.size(); }

private:
    StaticHash6 table_;
};

// Flags of an address the gateway must know about, in local_addrs.
enum LocalAddr : uint32_t {
    kNodeAddr = 0x1,      // the node's own address: traffic from it is "from the node"
    kNodePortAddr = 0x2,  // NodePorts are served on it
    kClusterIp = 0x4,     // a ClusterIP: a port no Service uses is rejected
    kPortAddr = 0x8,      // an address of a gateway port (ARP/ND, echo, SNAT source)
    kServiceAddr = 0x10,  // an external or load-balancer IP (the gateway answers ARP/ND for it)
};

struct PortInfo {
    std::string name;
    std::vector<IpCidr> addrs;  // host address and prefix length, both families
};

struct ClusterSettings {
    // Into the snapshot's cidrs (IPv4) and cidrs6 (IPv6): each family has its own detector, as each
    // of kube-proxy's proxiers has.
    CidrRange cluster_cidrs, cluster_cidrs6;  // local-traffic detector; empty = none (kube-proxy NoOp)
    CidrRange service_cidrs, service_cidrs6;
    bool masquerade_all = false;
    bool reject_unknown_port = true;  // nftables: known ClusterIP, unknown port → REJECT
    bool one_arm_masquerade = true;   // masquerade when client and endpoint share a next hop
    uint16_t snat_port_min = 1024;
    uint16_t snat_port_max = 65535;
    uint32_t maglev_seed = 0;  // mixed into the hashing schedulers' tuple hash (and their tables)
};

// What only the control plane reads, indexed like the hot tables: names, addresses for people,
// and the owner of the route table (shared with the next snapshot when a reload leaves the routes
// as they were: an rte_lpm is a 64 MB table to build).
// A Kubernetes object's entry the builder could not serve as written: a VIP:port another Service
// holds (left out), a nodePort outside the range (served). One object never fails the snapshot.
#define SVCGATE_OBJECT_ISSUES(X)                                                                 \
    X(invalid_object, "invalid_object")               /* a manifest object that does not read */ \
    X(nodeport_out_of_range, "nodeport_out_of_range") /* served, without its nodePort */         \
    X(vip_conflict, "vip_conflict")                   /* a VIP:port another Service holds: left out */
enum class IssueReason : uint8_t { SVCGATE_OBJECT_ISSUES(SVCGATE_ENUM_ID) };
inline constexpr std::array kIssueReasonNames{SVCGATE_OBJECT_ISSUES(SVCGATE_ENUM_NAME)};
inline const char* issue_reason_name(IssueReason r) noexcept { return enum_name(r, kIssueReasonNames); }

struct ObjectIssue {
    std::string object;  // "Service default/web"
    IssueReason reason = IssueReason::invalid_object;
    std::string message;
    bool left_out = false;  // the entry is not served
};

struct Catalogue {
    std::vector<ServiceInfo> services;          // by service index
    std::vector<ObjectIssue> object_issues;     // in the order the builder met them
    std::vector<EndpointInfo> endpoints;        // by endpoint index
    std::vector<PortInfo> ports;                // by port index
    std::vector<RouteTable::Route> route_list;  // as configured, connected routes first
    std::vector<RouteTable6::Route> route_list6;
    std::shared_ptr<const RouteTable> routes;
    std::shared_ptr<const RouteTable6> routes6;
};

// The tables workers index are FixedArrays: built by the builder, never resized afterwards.
struct ServiceSnapshot {
    uint32_t generation = 0;
    uint16_t workers = 1;
    ClusterSettings cluster;
    FixedArray<ServicePort> services;
    FixedArray<Endpoint> endpoints;
    FixedArray<uint32_t> members;  // EndpointSet contents
    FixedArray<EndpointSet> sets;
    FixedArray<uint16_t> rings;  // Maglev tables, concatenated
    FixedArray<Cidr4> cidrs;     // CidrRange contents, IPv4
    FixedArray<Cidr6> cidrs6;    // and IPv6
    VipTable vips;
    VipTable6 vips6;
    // (address, port, protocol) of every endpoint of a service port that preserves the client's
    // address (client_ip preserve, masquerade_all off): its replies with no flow wait for their
    // replica on a replicating gateway (replica_hold.h).
    VipTable preserved_eps;
    VipTable6 preserved_eps6;
    StaticHash local_addrs;  // ip → LocalAddr flags
    StaticHash6 local_addrs6;
    const RouteTable* routes = nullptr;  // null: no routing configured (owner: catalogue)
    const RouteTable6* routes6 = nullptr;
    // Mutable by workers (atomics): the rr cursors, per set.
    std::unique_ptr<std::atomic<uint32_t>[]> rr_cursor;
    Catalogue catalogue;

    bool preserved_endpoint(Ip4 ip, rte_be16_t port, uint8_t proto) const noexcept {
        return preserved_eps.size() && preserved_eps.find(VipTable::key(ip, port, proto)).hit();
    }
    bool preserved_endpoint(const Ip6& ip, rte_be16_t port, uint8_t proto) const noexcept {
        return preserved_eps6.size() && preserved_eps6.find(VipTable6::key(ip, port, proto)).hit();
    }
    uint32_t local_flags(Ip4 ip) const noexcept {
        uint32_t v = local_addrs.find(ip.be);
        return v == StaticHash::kNone ? 0 : v;
    }
    uint32_t local_flags(const Ip6& ip) const noexcept {
        uint32_t v = local_addrs6.find(StaticHash6::Key{ip, 0});
        return v == StaticHash::kNone ? 0 : v;
    }
    bool in(CidrRange r, Ip4 a) const noexcept {
        for (uint32_t i = r.first; i < r.first + r.count; ++i)
            if (cidrs[i].contains(a)) return true;
        return false;
    }
    bool in(CidrRange r, const Ip6& a) const noexcept {
        for (uint32_t i = r.first; i < r.first + r.count; ++i)
            if (cidrs6[i].contains(a)) return true;
        return false;
    }
    const NextHop* route(Ip4 dst) const noexcept { return routes ? routes->lookup(dst) : nullptr; }
    const NextHop6* route(const Ip6& dst) const noexcept { return routes6 ? routes6->lookup(dst) : nullptr; }
    const ServiceInfo& info(uint32_t service) const noexcept { return catalogue.services[service]; }
};

}  // namespace svcgate::dp
