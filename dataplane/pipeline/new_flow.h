// New connections (the cold path): what kube-proxy's KUBE-SVC-*, KUBE-SEP-* and KUBE-MARK-MASQ
// chains decide for the first packet of a connection, and the flow-table insert that makes the
// decision stick (conntrack). In two halves over the burst, so that the inserts' cache misses
// overlap: select_new_flows() for every packet that hit a VIP, then insert_new_flows() in
// packet order.
//
// Where a packet to a VIP goes, in order:
//   - loadBalancerSourceRanges on an LB IP: DROP (lb_source_range);
//   - the endpoint set its traffic class may use (internal / external traffic policy) is empty:
//     REJECT when the Service has no usable endpoint at all (reject_no_endpoints, TCP RST or
//     ICMP port unreachable), DROP when a Local policy rules out the ones it has
//     (no_local_endpoints);
//   - conntrack cannot start a connection with it (a TCP packet that is no opening): DROP
//     (conntrack_invalid);
//   - its source is over the per-source new-flow cap: DROP (source_new_flow_limit);
//   - otherwise an endpoint is selected (scheduler, or the ClientIP affinity record), the
//     masquerade decided (kube-proxy's rules, hairpin, one-armed paths) with an SNAT port from the
//     worker's share, and the flow inserted: DNAT, or DROP when the table is full, the SNAT ports
//     towards that endpoint are exhausted or the reply tuple clashes.
// An endpoint counts as active from its selection, so a least-connection pick later in the same
// burst sees it; a pick that ends in no new flow (a refusal, or a second packet of the same new
// flow joining the first one's record) is given back.
//
// Runs on: worker lcores. Reads: the snapshot. Writes: the flow table (inserts, early drops),
// the StatsTable's active counts, the rr cursors, the worker's SNAT cursor and source limiter.
#pragma once

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

// For b.vip_hits: refusals get their verdict; new connections are selected into b.fresh /
// b.new_flow, their inserts prefetched.
template <typename F>
void select_new_flows(Burst& b, WorkerCtx& ctx) noexcept;

// For b.fresh, in packet order: each flow inserted (or joined), the packet's verdict, out tuple
// and attribution set.
template <typename F>
void insert_new_flows(Burst& b, WorkerCtx& ctx) noexcept;

}  // namespace svcgate::dp
