// The forward exit: one exit per packet, where its verdict becomes final and is counted.
// dnat/reply/forward packets get their route (LPM; no route: DROP no_route), their TTL decremented
// (RFC 1812 5.3.1; expiring: DROP ip_ttl_exceeded) and their headers rewritten to the out tuple
// (ICMP errors: outer and embedded, nf_nat_icmp_reply_translation); REJECTs are built in place
// (TCP RST / ICMP port unreachable) to leave by the port they came in on. Then, here and nowhere
// else: the verdict counters, the rejects by reason, and the packets and bytes of the service
// port and endpoint a dnat or reply packet belongs to (by stable slot, whatever reloads happened
// since its flow began).
//
// Runs on: worker lcores. Reads: the snapshot (routes). Writes: packets, the worker's counters
// and its rows of the StatsTable.
#pragma once

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

void forward_exit(Burst& b, WorkerCtx& ctx) noexcept;
// One packet out of any burst (a fragment released from the hold), as forward_exit would.
void forward_packet(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t in_port) noexcept;

}  // namespace svcgate::dp
