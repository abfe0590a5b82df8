// Established: packets of a flow the table knows, translated by the flow's other tuple
// (conntrack's NAT reversal): the original direction is DNATed (and masqueraded), the reply
// direction translated back to the VIP and the client. On the way:
//   - conntrack's TCP state table; a packet it calls INVALID is dropped (conntrack_invalid);
//   - a flow whose endpoint a reload removed: TCP is answered with RST on each side's next
//     packet (reject_endpoint_gone), datagrams are dropped (endpoint_gone) until the owner
//     removes the flow and the next one selects again;
//   - an ICMP error about a flow (RELATED) is translated like the flow's packets in its
//     direction, the flow's state untouched; an ICMP error about no flow is routed as it is (or
//     is the gateway's, when addressed to it) and never starts one.
//
// Runs on: worker lcores. Reads: the flow table. Writes: the flows' state and last-seen time.
#pragma once

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

// For the packets of b.flows that found a flow, and the ICMP errors that found none.
template <typename F>
void track_established(Burst& b, WorkerCtx& ctx) noexcept;

}  // namespace svcgate::dp
