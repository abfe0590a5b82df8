// What the gateway announces, and the kernel table it is published in.
//
// svcgate speaks no routing protocol. It writes the addresses it serves as routes into a kernel
// table of its own (routing.table); the box's routing daemon reads that table (BIRD's kernel
// protocol with `learn`, FRR's `ip import-table`) and announces the routes over BGP through the
// host path. The set follows reloads, and is empty while the gateway is unhealthy or draining,
// which withdraws every announcement: the routers then stop sending new traffic here.
//
// What is in the set (routing.announce): LoadBalancer ingress IPs and external IPs (a Service
// under externalTrafficPolicy Local only while it has a ready endpoint on this node, as MetalLB
// does), node IPs, and on request ClusterIPs and service CIDRs. Host routes (/32, /128), except
// the service CIDRs.
//
// Runs on: the control thread.
#pragma once

#include <string>
#include <vector>

#include "control/config/config_model.h"
#include "control/base/netlink.h"

namespace svcgate::ctl {

// The prefixes to announce under `cfg`, sorted, no duplicates.
std::vector<IpCidr> announce_set(const Config& cfg);

// Ready endpoints of `s` on this node (cluster.node_name): each address once, the larger of the
// two families' counts.
unsigned local_ready_endpoints(const ServiceConfig& s, const std::string& node_name);

// The addresses of each port's host interface, by port (none for a port without one): the port's
// own, and each node IP no host interface has that way, as a host address (/32, /128) on the first host interface
// whose port has an address of its family (else the first host interface): the kernel owns every
// address the dataplane hands it traffic for.
std::vector<std::vector<IpCidr>> host_interface_addresses(const Config& cfg);

// The routes of one kernel table, kept equal to a set.
class Announcer {
public:
    // `table` 0: does nothing. `ifindex`: the interface the routes point at (a host interface).
    Announcer(uint32_t table, int ifindex) : table_(table), ifindex_(ifindex) {}
    ~Announcer();  // withdraws everything (the daemon stops)
    // Adds what is missing, removes what is extra, from what the table holds now (someone else
    // may have flushed it). The first failure, if any (the rest is still tried).
    Status sync(const std::vector<IpCidr>& want);
    const std::vector<IpCidr>& announced() const { return have_; }
    uint32_t table() const { return table_; }

private:
    uint32_t table_;
    int ifindex_;
    Netlink nl_;
    std::vector<IpCidr> have_;
};

}  // namespace svcgate::ctl
