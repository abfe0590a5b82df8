// The configuration as plain structs: what the YAML says, already typed, with the position of
// every item so later checks can report file:line:column. No DPDK here.
//
// Runs on: the control thread, `svcgatectl`, `svcgate --check`.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "control/base/address.h"
#include "dataplane/base/enum_names.h"
#include "dataplane/fragment/frag_table.h"
#include "dataplane/lb/snapshot.h"
#include "dataplane/base/types.h"

namespace svcgate::ctl {

using dp::Cidr4;
using dp::Cidr6;
using dp::Family;
using dp::Ip4;
using dp::Ip6;
using dp::IpAddr;
using dp::IpCidr;
using dp::Proto;

// A file name that every Mark of one file shares (a config has tens of thousands of marks).
class FileName {
public:
    FileName() : p_(std::make_shared<const std::string>()) {}
    FileName(std::string s) : p_(std::make_shared<const std::string>(std::move(s))) {}
    FileName(const char* s) : FileName(std::string(s)) {}
    operator const std::string&() const { return *p_; }
    const std::string& str() const { return *p_; }
    friend bool operator==(const FileName& a, const std::string& b) { return *a.p_ == b; }
    friend bool operator==(const FileName& a, const char* b) { return *a.p_ == b; }

private:
    std::shared_ptr<const std::string> p_;
};

struct Mark {
    FileName file;
    int line = 0;    // 1-based; 0 = unknown
    int column = 0;  // 1-based
};

struct ConfigIssue {
    Mark mark;
    std::string path;  // e.g. services[3].ports[0].targetPort
    std::string message;
    std::string str() const;  // "file:line:col: path: message"
};

// Thrown by the loaders and the builder with every error found (up to a cap), not only the first.
struct ConfigError : std::runtime_error {
    std::vector<ConfigIssue> issues;
    std::vector<ConfigIssue> warnings;  // found on the way; shown with the errors
    explicit ConfigError(std::vector<ConfigIssue> v, std::vector<ConfigIssue> w = {});
};

// The largest port MTU whose frames fit the packet pool's 2 KB mbufs (RTE_MBUF_DEFAULT_DATAROOM,
// 2048 bytes, less an Ethernet header and a VLAN tag), and the largest port MTU: a device with a
// port over kMaxStdMtu receives into a second pool, of mbufs as large as its largest frame
// (control/daemon/resources.h), so that every frame still fits one mbuf.
inline constexpr uint16_t kMaxStdMtu = 2030;
inline constexpr uint16_t kMaxMtu = 9000;

struct PortConfig {
    std::string name;
    std::string device;  // DPDK device arguments
    // The 802.1Q VLAN it is on (1-4094), 0 = untagged: ports sharing a device are told apart by
    // it (dataplane/pipeline/vlan.h).
    uint16_t vlan = 0;
    std::vector<IpCidr> addresses;  // host address + prefix length, IPv4 and IPv6
    uint16_t mtu = 1500;            // the largest IP packet it sends (dataplane/l3/mtu.h)
    // The port's kernel interface (a TAP device with the port's MAC and addresses): what the
    // dataplane does not answer for the gateway's own addresses goes there, what the kernel
    // sends on it leaves through the port. "" = none (host_path.h).
    std::string host_interface;
    // The port's MAC, set on the device; none: the device's own (gateways on one LAN whose
    // virtual devices all start with the same MAC).
    std::optional<std::array<uint8_t, 6>> mac;
    Mark mark;
};

// A link aggregate (dataplane.bonds[]): member devices as one device, DPDK's bonding driver,
// that ports name as their `device` (several, each on its VLAN). 802.3ad runs LACP with the
// switch (the driver's mode 4); active-backup sends on one member until its link goes (mode 1).
struct BondConfig {
    enum class Mode : uint8_t { lacp, active_backup };
    std::string name;
    Mode mode = Mode::lacp;
    std::vector<std::string> members;  // DPDK device arguments, as ports[].device
    // How a flow picks its member (Linux's xmit_hash_policy names): layer2, layer2+3, layer3+4.
    std::string transmit_hash = "layer3+4";
    Mark mark;
};

struct RouteConfig {
    IpCidr prefix;
    IpAddr via;  // of the prefix's family
    Mark mark;
};

// A neighbor whose MAC is configured, not learned (a next hop that does not answer ARP; a
// benchmark port with nothing behind it).
struct NeighborConfig {
    IpAddr ip;
    std::array<uint8_t, 6> mac{};
    Mark mark;
};

struct DataplaneConfig {
    std::vector<std::string> eal;
    uint16_t workers = 1;
    std::vector<PortConfig> ports;
    std::vector<BondConfig> bonds;
    std::vector<RouteConfig> routes;
    std::vector<NeighborConfig> neighbors;
    uint32_t mbufs = 0;  // the packet pool; 0 = what the ports and workers need
    uint32_t flow_capacity = 1u << 20;
    uint32_t flow_capacity_v6 = 1u << 18;  // the IPv6 table (flow_table.capacity_v6)
    // Masquerade when client and endpoint are reached through the same next hop, so that the
    // reply comes back through the gateway. Off where the network already sends such replies
    // through it (kube-proxy's own node, with br_netfilter; policy routing).
    bool one_arm_masquerade = true;
    dp::Timeouts timeouts{};
    uint32_t new_flows_per_source = 0;  // per worker and second; 0 = no cap
    // Where the flows are written on an orderly stop and read back at the next start (control/ha/state_file.h);
    // "" = off. A file older than state_max_age seconds is refused.
    std::string state_file;
    uint32_t state_max_age = 600;
    dp::FragParams fragments{};              // the fragment hold (dataplane.fragments)
    uint32_t icmp_errors_per_second = 1000;  // per worker: too-big errors; 0 = no limit
    // Packets per second and worker handed to the host interfaces (dataplane.host_path): ARP,
    // ND and packets from on-link senders (TTL or hop limit 255: BGP with GTSM, BFD) have their
    // own budget, so a flood of anything else cannot starve the routing daemon.
    uint32_t punt_control_per_second = 2000;
    uint32_t punt_other_per_second = 1000;
    // dataplane.poll: busy spins through light load as DPDK applications do on dedicated cores;
    // adaptive (false) sleeps briefly after an empty poll that follows a light one, unless the
    // worker carries 100,000 packets a second or more (dataplane/pipeline/poll_policy.h).
    bool busy_poll = false;
    // dataplane.latency_sampling: one receive burst in this many has its packets' time inside
    // the gateway measured (dataplane/pipeline/latency.h); 0 = off.
    uint32_t latency_sampling = 0;
};

// What the box announces and how (routing:, announce.h). svcgate writes the addresses to
// announce as routes into a kernel table of its own, which a routing daemon (BIRD, FRR) exports.
struct RoutingConfig {
    uint32_t table = 0;  // 0 = off
    bool load_balancer_ips = true;
    bool external_ips = true;
    bool node_ips = true;
    bool cluster_ips = false;
    bool service_cidrs = false;
    Mark mark;
};

// Flow replication between gateways (ha:, sync.h): where this gateway listens, its peers, the
// shared key (ha.key_file, read at load), and the protocol's periods.
struct HaConfig {
    using Endpoint = HostPort;
    Endpoint listen;              // listen: ADDRESS:PORT (UDP)
    std::vector<Endpoint> peers;  // peers: [ADDRESS or ADDRESS:PORT] (the listen port by default)
    std::string key_file;
    std::array<uint8_t, 32> key{};
    // Ports whose addresses a survivor takes over when this gateway dies (its masquerade
    // addresses, where the pods' replies come back): usually the cluster-facing ones.
    std::vector<std::string> takeover_ports;
    uint32_t refresh_seconds = 10;  // every flow sent again this often (heals lost datagrams)
    uint32_t hello_ms = 100;        // liveness
    uint32_t dead_after_ms = 1000;  // a peer not heard from this long is dead
    bool enabled() const noexcept { return !peers.empty(); }
    bool operator==(const HaConfig&) const = default;
};

// export.ipfix: every NAT flow's creation and end as IPFIX NAT events (RFC 7011, RFC 8158) to
// collectors (control/export/). Every field takes a restart.
struct IpfixConfig {
    bool enabled = false;  // export.ipfix is there
    std::vector<HostPort> collectors;
    bool tcp = false;  // transport: udp (default) or tcp
    uint32_t observation_domain = 1;
    uint32_t template_refresh_s = 60;  // UDP: the templates again this often
    bool create = true, end = true;    // events: [create, delete]
    uint32_t ring = 65536;             // per worker, events waiting for the exporter
    bool operator==(const IpfixConfig&) const = default;
};

// The daemon's operator endpoints.
struct ControlConfig {
    std::string socket = "/run/svcgate.sock";  // "" = off
    unsigned socket_mode = 0600;
    // Prometheus and the health answers; nullopt = off.
    std::optional<HostPort> metrics = HostPort{IpAddr::of(Ip4::from_host(0x7f000001)), 9477};
    bool watch = true;             // reload when the config or a manifest changes
    uint32_t drain_timeout = 300;  // seconds: svcgatectl drain without --timeout
};

// What external traffic under externalTrafficPolicy Cluster does to the client's address
// (cluster.client_ip, the svcgate.io/client-ip annotation): kube-proxy masquerades it; `preserve`
// DNATs only, for a gateway that is also the pods' way back to the clients (docs/client-ip.md).
#define SVCGATE_CLIENT_IPS(X) X(masquerade, "masquerade") X(preserve, "preserve")
enum class ClientIp : uint8_t { SVCGATE_CLIENT_IPS(SVCGATE_ENUM_ID) };
inline constexpr std::array kClientIpNames{SVCGATE_CLIENT_IPS(SVCGATE_ENUM_NAME)};
constexpr const char* client_ip_name(ClientIp c) noexcept { return enum_name(c, kClientIpNames); }

struct ClusterConfig {
    std::string node_name;
    // Both families in each list. The first of a family is that family's primary node IP (LB
    // source ranges); each family's detector is its own CIDRs (empty = none), as each of
    // kube-proxy's two proxiers has.
    std::vector<IpAddr> node_ips;
    std::vector<IpCidr> nodeport_addresses;  // empty = every node IP
    std::vector<IpCidr> cluster_cidrs;
    std::vector<IpCidr> service_cidrs;
    bool masquerade_all = false;
    ClientIp client_ip = ClientIp::masquerade;  // a Service's own (ServiceConfig::client_ip) wins
    bool reject_unknown_port = true;
    uint16_t nodeport_min = 30000;
    uint16_t nodeport_max = 32767;
    // The source ports masquerade hands out (cluster.masquerade_ports): gateways behind one ECMP
    // group take ranges that do not overlap, so a flow taken over from another keeps a port that no
    // local flow holds.
    uint16_t masquerade_port_min = 1024;
    uint16_t masquerade_port_max = 65535;
    // Maglev's seed and table size (cluster.maglev_seed, maglev_table_size; 0 = by endpoint count):
    // gateways that share them choose alike for a connection none of them has seen.
    uint32_t maglev_seed = 0;
    uint32_t maglev_table_size = 0;
    // The gateway's Node labels (cluster.node_labels), as kube-proxy reads its Node's: the zone
    // (topology.kubernetes.io/zone) chooses among endpoints with topology hints.
    std::map<std::string, std::string> node_labels;
    // service.kubernetes.io/service-proxy-name (KEP-2447): a Service with the label is served only
    // when it names proxy_name; one without it unless proxy_name_only. Kubernetes objects only:
    // the compact `services:` are this gateway's own.
    std::string proxy_name;
    bool proxy_name_only = false;
    // The zone of node_labels ("" = none).
    const std::string& zone() const {
        static const std::string none;
        const auto it = node_labels.find("topology.kubernetes.io/zone");
        return it == node_labels.end() ? none : it->second;
    }
    // Whether a Service whose service-proxy-name label is `label` (none: no label) is this gateway's.
    bool serves_proxy(const std::optional<std::string>& label) const {
        return label ? !proxy_name.empty() && *label == proxy_name : !proxy_name_only;
    }
};

struct ServicePortConfig {
    std::string name;
    Proto proto = Proto::tcp;
    uint16_t port = 0;
    std::optional<uint16_t> target_port;  // compact form: the endpoints' port
    uint16_t node_port = 0;
    Mark mark;
    std::string path;  // where the loader found it, e.g. items[3].spec.ports[0]
};

struct EndpointConfig {
    IpAddr ip;
    std::string node;
    std::string zone;  // informational: kube-proxy chooses by hints, not by zone
    bool ready = true;
    bool serving = true;
    bool terminating = false;
    // Topology hints (EndpointSlice hints.forZones / forNodes, KEP-2433 and KEP-3015): written by
    // the EndpointSlice controller from a Service's trafficDistribution or topology-mode.
    std::vector<std::string> zone_hints, node_hints;
    Mark mark;
};

// Endpoints that share a port list (one EndpointSlice; or the compact form's single group).
struct EndpointGroup {
    struct Port {
        std::string name;
        Proto proto = Proto::tcp;
        uint16_t port = 0;
    };
    std::vector<Port> ports;
    std::vector<EndpointConfig> endpoints;
};

// A Service's active health checks (health_check in the compact form, the annotation
// svcgate.io/health-check on a Kubernetes Service; control/probe/): the gateway checks each
// endpoint address itself, from its own cluster-side address, and an endpoint that fails `fall`
// checks in a row takes no new connection until it passes `rise`.
struct HealthCheckConfig {
    enum class Type : uint8_t { tcp, http, udp };
    struct Range {
        uint16_t lo = 200, hi = 399;
    };
    Type type = Type::tcp;
    uint16_t port = 0;  // 0: the endpoint's target port (the Service's first port of the check's protocol)
    std::string path = "/";
    std::string host;                    // http's Host header; "" = the endpoint's address
    std::vector<Range> expect{Range{}};  // http: the statuses that pass
    uint32_t interval_ms = 2000, timeout_ms = 1000;
    uint32_t rise = 2, fall = 3;
    bool expect_reply = false;  // udp: silence until the timeout fails too (else only an ICMP error fails)
    bool reset = false;         // on_failure: reset - a failing endpoint's connections end (RST), flows removed
    bool panic = false;         // all_down: panic - every endpoint failing: spread over all (else REJECT)
    Mark mark;
};

enum class ServiceType : uint8_t { cluster_ip, node_port, load_balancer, external_name };

// sessionAffinity ClientIP's timeout when none is given (the Kubernetes API default).
inline constexpr uint32_t kDefaultAffinityTimeout = 10800;

struct ServiceConfig {
    std::string ns, name;
    ServiceType type = ServiceType::cluster_ip;
    // One ClusterIP per family (clusterIPs); none: headless. A family the Service has a ClusterIP
    // of is served with that family's external IPs, LB IPs, endpoints and node IPs, as
    // kube-proxy's proxier of that family does.
    std::vector<IpAddr> cluster_ips;
    std::vector<IpAddr> external_ips;
    std::vector<IpAddr> lb_ips;
    std::vector<IpCidr> lb_source_ranges;
    std::vector<ServicePortConfig> ports;
    dp::Scheduler scheduler = dp::Scheduler::random;
    uint32_t affinity_timeout = 0;  // 0 = None
    bool external_local = false;
    bool internal_local = false;
    std::optional<ClientIp> client_ip;  // none: cluster.client_ip
    // kube-proxy's per-Service health check for policy Local LoadBalancers (health.h); 0 = none.
    uint16_t health_check_node_port = 0;
    std::optional<HealthCheckConfig> health_check;  // none: the endpoints are not checked
    // spec.trafficDistribution, shown only: kube-proxy (and svcgate) follow the slices' hints.
    std::string traffic_distribution;
    // metadata.labels' service.kubernetes.io/service-proxy-name (ClusterConfig::serves_proxy).
    std::optional<std::string> proxy_label;
    std::vector<EndpointGroup> groups;
    // A Kubernetes object (a manifest's or the API server's), not the config file's compact form:
    // a conflict it causes leaves out only its own entry (snapshot_builder.h). `created` is its
    // metadata.creationTimestamp (RFC 3339, "" if none): the older of two wins a shared VIP.
    bool kube_object = false;
    std::string created;
    Mark mark;
    std::string full_name() const { return ns + "/" + name; }
};

// What the Kubernetes-object loader read and what it set aside, as kube-proxy would.
struct KubeStats {
    unsigned services = 0;         // v1 Service objects read
    unsigned slices = 0;           // EndpointSlices attached to a Service
    unsigned headless = 0;         // clusterIP None: no dataplane rule
    unsigned external_name = 0;    // type ExternalName: no dataplane rule
    unsigned ignored_objects = 0;  // other kinds
    unsigned other_proxy = 0;      // another proxy's Services (service-proxy-name), with their slices
    unsigned service_cidrs = 0;    // networking.k8s.io ServiceCIDR objects (added to cluster.service_cidrs)
};

// kubernetes.api: follow a cluster's API server (control/kube/). Every field takes a restart.
struct KubeApiConfig {
    bool enabled = false;            // kubernetes.api is there
    std::string kubeconfig;          // a kubeconfig file (resolved); "" with in_cluster
    std::string context;             // "" = its current-context
    bool in_cluster = false;         // the pod's service account and KUBERNETES_SERVICE_HOST/PORT
    uint32_t min_sync_ms = 1000;     // kube-proxy's --min-sync-period: at most one publish per this
    uint32_t watch_timeout_s = 300;  // a WATCH's timeoutSeconds; silence longer than this + 30 s: reconnect
    uint32_t list_page_size = 500;   // LIST ?limit= (client-go's pager: 500)
};

// A Kubernetes label selector (metav1.LabelSelector): every matchLabels pair and every
// matchExpressions requirement must hold; an empty selector matches everything.
struct LabelSelector {
    enum class Op : uint8_t { in, not_in, exists, does_not_exist };
    struct Requirement {
        std::string key;
        Op op = Op::exists;
        std::vector<std::string> values;
    };
    std::map<std::string, std::string> match_labels;
    std::vector<Requirement> match_expressions;
    bool matches(const std::map<std::string, std::string>& labels) const;
};

// One run of a pool's addresses, both ends included and of one family: a CIDR, `a-b`, or one
// address.
struct AddressRange {
    IpAddr first, last;
    Mark mark;
};

// kubernetes.load_balancer.pools[]: MetalLB's IPAddressPool (control/lb/).
struct LbPoolConfig {
    std::string name;
    std::vector<AddressRange> ranges;
    bool auto_assign = true;       // false: only a Service that asks for the pool or one of its addresses
    bool avoid_buggy_ips = false;  // IPv4 addresses ending in .0 or .255 are never given
    // allocate_to (MetalLB's spec.allocateTo): priority (lower first; 0 or none after every
    // other), and which Services it may serve: in `namespaces` or a namespace matching one of
    // `namespace_selectors` (when either is given), and matching one of `service_selectors`.
    bool allocate_to = false;  // allocate_to is given (even empty): the pool is pinned, never a fallback
    uint32_t priority = 0;
    std::vector<std::string> namespaces;
    std::vector<LabelSelector> namespace_selectors, service_selectors;
    Mark mark;
};

// kubernetes.load_balancer: the gateway hands out LoadBalancer addresses (control/lb/).
struct LoadBalancerConfig {
    bool enabled = false;  // kubernetes.load_balancer is there
    std::string lb_class = "svcgate.io/lb";
    bool default_class = true;  // also Services with no spec.loadBalancerClass
    struct Election {
        std::string ns = "svcgate-system", name = "svcgate-lb";
        uint32_t lease_duration_s = 15, renew_deadline_s = 10, retry_period_s = 2;  // client-go's
    } election;
    // No pools key: nothing is assigned and nothing written; an empty list: nothing to give.
    std::optional<std::vector<LbPoolConfig>> pools;
    uint32_t write_qps = 20, write_burst = 30;  // status writes (controller-runtime's client defaults)
};

struct Config {
    std::string file;
    DataplaneConfig dataplane;
    ClusterConfig cluster;
    ControlConfig control;
    RoutingConfig routing;
    HaConfig ha;
    IpfixConfig ipfix;
    std::vector<ServiceConfig> services;
    std::vector<std::string> manifests;  // Kubernetes object files, as resolved
    KubeApiConfig kube_api;
    LoadBalancerConfig load_balancer;
    KubeStats kube;
    std::vector<ConfigIssue> warnings;  // ignored objects and the like
    // Manifest objects left out at start or reload (ObjectErrors::leave_out), each with its first
    // error; --check refuses them instead.
    std::vector<ConfigIssue> left_out;
};

}  // namespace svcgate::ctl
