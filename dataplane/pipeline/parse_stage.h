// Parse, the pipeline's first stage: every packet of a burst gets its meta (parse.h) or a drop
// reason; IPv4 and IPv6 packets go on to their family's flow lookup (an ICMP error by the tuple of
// the flow it is about: conntrack's RELATED), first fragments through the fragment stage, ARP and
// Neighbor Discovery to the output stage as `local`.
//
// Runs on: worker lcores. Writes: the burst's packet state and the worker's receive counters.
#pragma once

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

void parse_burst(Burst& b, WorkerCtx& ctx) noexcept;

}  // namespace svcgate::dp
