// A Service as the load balancer sees it: what it asks for (type, class, families, requested
// addresses and pool, sharing key, ports, backend) and what its status holds, read from the
// object the API server sent. svcgate's annotations (svcgate.io/...) first, then MetalLB's
// (metallb.io/..., then the older metallb.universe.tf/...) as aliases, so that a cluster moves
// over without editing its Services.
//
// Runs on: the load balancer's controller thread (and the tests).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "control/config/config_model.h"
#include "control/config/yaml_tree.h"

namespace svcgate::ctl::lb {

inline constexpr const char* kPoolAnnotation = "svcgate.io/ip-allocated-from-pool";

struct LbService {
    std::string key;  // namespace/name
    std::string ns, name, uid, resource_version;
    double created = std::numeric_limits<double>::infinity();  // creationTimestamp; none: last
    bool load_balancer = false;                                // spec.type LoadBalancer
    bool has_class = false;
    std::string lb_class;  // spec.loadBalancerClass
    enum class Policy : uint8_t { single, prefer_dual, require_dual };
    Policy policy = Policy::single;
    std::vector<Family> families;                     // of spec.clusterIPs, the primary first (at least one)
    std::vector<IpAddr> requested;                    // spec.loadBalancerIP or the annotation
    std::string request_error;                        // why the request cannot be read ("": none)
    std::string pool;                                 // the pool asked for by annotation ("": any)
    std::string sharing_key;                          // allow-shared-ip ("": none)
    std::vector<std::pair<uint8_t, uint16_t>> ports;  // (IP protocol, port)
    std::string backend_key;  // MetalLB's: "" for policy Cluster, else the selector as "k=v,k2=v2"
    std::map<std::string, std::string> labels;
    std::vector<IpAddr> status_ips;  // status.loadBalancer.ingress[].ip
    std::string status_pool;         // svcgate.io/ip-allocated-from-pool

    // Ours to assign: type LoadBalancer and `cfg.lb_class`, or no class with default_class.
    bool managed(const LoadBalancerConfig& cfg) const {
        return load_balancer && (has_class ? lb_class == cfg.lb_class : cfg.default_class);
    }
    // Dual-stack: two cluster IPs (MetalLB's rule; the API server gives two only to a Service
    // that is not SingleStack). A PreferDualStack one may fall back to one family (allocator.h).
    bool dual() const { return families.size() > 1; }
};

// `svc`: a v1 Service object. Never throws on a malformed one: what cannot be read is left empty
// (a request that cannot be read sets request_error).
LbService read_lb_service(const ytree::Node& svc);

// The labels of an object (a Namespace's), as a map.
std::map<std::string, std::string> object_labels(const ytree::Node& obj);

// Whether two views of one Service ask for the same (everything but their version and status).
bool same_ask(const LbService& a, const LbService& b);

// Oldest first (creationTimestamp), then by namespace/name: the order every decision takes.
bool older(const LbService& a, const LbService& b);

}  // namespace svcgate::ctl::lb
