// After a reload: the flows whose endpoint left its Service. kube-proxy deletes such conntrack
// entries for UDP (the stale-entry bug it had to learn to fix) and lets TCP die; svcgate marks
// them gone (FlowState), so TCP packets are answered with RST (on each side's next packet, so the RST
// carries a sequence number the peer accepts) and datagram flows are removed by their owner
// (the next datagram selects a live endpoint). Flows to endpoints still listed - terminating
// ones included - keep their endpoint, except an endpoint its health checks evict (kEvicted:
// on_failure reset), whose flows go as if it had left.
//
// Runs on: the control thread, after the new snapshot is published and a grace period has
// passed. Reads every record once (a 64 MB scan for a 1M table); workers keep running.
#pragma once

#include <cstdint>
#include <functional>

#include "dataplane/flow/flow_table.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

struct SweepResult {
    uint32_t scanned = 0;        // live service flows from earlier generations
    uint32_t tcp_closed = 0;     // marked: RST on their next packets
    uint32_t dgram_removed = 0;  // handed to their owner for removal
};

// `remove_dgram(id, owner)` is called for each datagram flow to remove.
// Both tables (flows6 may be null); an IPv6 flow's id reaches remove_dgram with dp::kFlowIdV6 set.
SweepResult sweep_removed_endpoints(dp::FlowTable& flows, dp::FlowTable6* flows6, const dp::ServiceSnapshot& fresh,
                                    const std::function<void(uint32_t id, uint8_t owner)>& remove_dgram);

}  // namespace svcgate::ctl
