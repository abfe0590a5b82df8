// Classify: what a packet of no flow is (kube-proxy's KUBE-SERVICES, KUBE-NODEPORTS and the
// filter chains in front of them). A service address, port and protocol hit the VIP table (one
// open-addressing lookup whatever the number of Services); a NodePort is looked up under address
// 0 when the destination is one of the node's NodePort addresses. What hits a VIP goes on to
// selection (new_flow.h), unless its TTL ends here. What does not:
//   - a ClusterIP on a port no Service uses: REJECT (reject_unknown_port), as nftables mode;
//   - the gateway's own addresses (ports, node IPs): local (ARP and ping answered, the rest
//     dropped as to_gateway by the output stage);
//   - an unallocated address of a service CIDR: DROP (service_cidr_unallocated);
//   - anything else: forwarded untouched.
// The table lookups of the whole burst are prefetched before the first is made.
//
// Runs on: worker lcores. Reads: the snapshot. Writes: the burst.
#pragma once

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

// For b.misses: sets each packet's vip and local flags and, where no VIP was hit, its verdict;
// fills b.vip_hits.
template <typename F>
void classify_burst(Burst& b, WorkerCtx& ctx) noexcept;

// Before the flow lookup has answered, for a burst of mostly new connections: reads the VIP slots
// of `keys` (asked for already) and asks for the service port of each that hits, so that its
// miss is in flight with the flow buckets' instead of after them (lookup_burst).
template <typename F>
void prefetch_service_ports(const ServiceSnapshot& s, const typename F::Key* const* keys, unsigned n) noexcept;

}  // namespace svcgate::dp
