// The packet pipeline: the one per-burst function that serves the DPDK workers, `svcgatectl
// trace`, the tests, the fuzzers and the benchmarks. Each stage runs over the whole burst before
// the next begins, so that cache misses overlap across packets instead of following each other,
// and each has a name and a file:
//
//   parse        parse.h        frame → PacketMeta, or a drop; IPv4 and IPv6 tuples collected
//                               for lookup (the stages up to insert run once per family);
//                               fragments to frag_stage.h: a first goes on, a later one follows
//                               its first's result or waits in the shared hold (frag_table.h)
//   lookup       pipeline.cpp   bulk flow lookup; the counters of found flows prefetched
//   classify     classify.h     packets of no flow: VIP table, NodePorts, the gateway's own
//                               addresses, unknown ports of a ClusterIP, the service CIDR
//   select       new_flow.h     (cold) new connections: source ranges, traffic policy, no
//                               endpoints → REJECT/DROP, conntrack's first packet, per-source cap,
//                               scheduler or affinity, masquerade; inserts prefetched
//   established  established.h  packets of known flows: conntrack, endpoints a reload removed,
//                               ICMP errors about a flow (RELATED), the NAT reversal
//   insert       new_flow.h     (cold) the selected connections into the flow table, in packet order
//   forward      forward.h      the exit: route, egress MTU (l3/mtu.h), TTL, rewrite, REJECT built; verdicts,
//                               rejects and per-service / per-endpoint counters counted here and
//                               nowhere else
//   fragments    frag_stage.h   (cold) first fragments' results recorded; what waited for them
//                               re-enters here, after the forward exit: each released fragment
//                               goes through forward's and output's per-packet functions, never
//                               through the stages before (its first fragment's result is its fate)
//   output       output.h       ARP/echo answers, next hop's MAC or the ARP hold queue, IPv4
//                               fragmented to the egress MTU, transmit batches; the only place a
//                               packet is freed, counted by reason (and the fragment hold's timeouts)
//
// Burst state (burst.h) is one struct per packet, and the stages pass index lists of packet
// positions to each other: one index space.
//
// Runs on: one worker lcore per WorkerCtx. Reads: the snapshot (RCU, held for the burst), the
// flow table (lock-free). Writes: packets, the flow table (its own records), the worker's
// counters, the StatsTable's rows and active counts, the rr cursors, the neighbor cache.
#pragma once

#include <cstdint>

#include <rte_cycles.h>

#include "dataplane/pipeline/burst.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/fragment/frag_table.h"
#include "dataplane/pipeline/replica_hold.h"
#include "dataplane/l3/mtu.h"
#include "dataplane/l3/hop_cache.h"
#include "dataplane/pipeline/output.h"
#include "dataplane/base/rng.h"
#include "dataplane/lb/snapshot.h"
#include "dataplane/flow/nat_event.h"
#include "dataplane/flow/source_limit.h"

struct rte_ring;

namespace svcgate::dp {

struct RssSteer;

// One worker's state: everything a stage may touch besides the burst. Never shared.
struct WorkerCtx {
    uint16_t worker = 0;
    uint16_t n_workers = 1;
    FlowTable* flows = nullptr;
    FlowTable6* flows6 = nullptr;           // IPv6 flows: a table of their own (flow_table.h)
    const ServiceSnapshot* snap = nullptr;  // set by the worker for each burst
    // Where flows count (by stable slot), set by the worker for each burst after `snap`: never
    // smaller than the slots of any snapshot the worker can see (SlotRegistry::reserve).
    StatsTable* stats = nullptr;
    uint32_t now = 0;      // seconds, the flow table's clock
    uint64_t now_ms = 0;   // milliseconds: fragment timeouts, the ICMP rate limit
    uint64_t now_tsc = 0;  // the TSC when the loop's iteration began: NAT events' times
    Rng rng{1};
    uint32_t snat_cursor = 0;   // the next slot of this worker's share of the SNAT range
    uint32_t steer_cursor = 0;  // the next offset in the whole range (RSS-steered masquerade ports)
    SourceLimiter sources;      // new flows per source this second
    WorkerCounters counters{};
    Output out;
    HopCache<Ip4> hops;  // this worker's route and next-hop MAC answers (hop_cache.h)
    HopCache<Ip6> hops6;
    FragTable* frags = nullptr;  // shared by all workers; null: later fragments are dropped
    uint32_t frag_cursor = 0;    // where this worker's timeout sweep goes on
    TokenBucket icmp;            // the ICMP errors this worker originates (too big)
    TokenBucket punt_control;    // to the host interfaces: ARP, ND, on-link senders (output.cpp)
    TokenBucket punt_other;      // to the host interfaces: the rest
    // Flow replication (control/ha/sync.h): null when off. The flows (ids, kFlowIdV6 for IPv6) this
    // burst proved or changed in a way that matters, handed to the sync thread's ring at its end.
    rte_ring* sync = nullptr;
    ReplicaHold replica_hold;  // replies to preserved clients waiting for their replica
    // By port index: its RSS where masquerade ports can steer replies to this worker's queue
    // (rss_steer.h); null (or beyond n_rss): that port's replies are not steered.
    const RssSteer* const* rss = nullptr;
    uint16_t n_rss = 0;
    // The last lookup (the last burst's, of its last family) was mostly misses (new
    // connections): the next one prefetches its VIP slots with its flow buckets (pipeline.cpp,
    // lookup_burst).
    bool mostly_new = false;
    uint16_t n_sync = 0;
    uint32_t sync_ids[kBurst];
    // NAT events (nat_event.h): null when no exporter is configured. The ring is the worker's
    // own (single producer); `events` holds what is not in it yet (flush_nat_events).
    rte_ring* nat_ring = nullptr;
    NatEventBuffer* events = nullptr;
    uint8_t nat_event_types = 0;  // which are exported: bit 1 << NatEventType
};

// The burst's mbufs (b.mbufs, after b.start()) all leave through the output stage: sent to the
// sink, held for ARP, or freed; results stay in b.pkt.
void process_burst(Burst& b, WorkerCtx& ctx) noexcept;

// Ageing and id reclamation; call once per loop iteration. Never blocks.
unsigned worker_housekeeping(WorkerCtx& ctx, unsigned budget) noexcept;

// A flow leaves the table (expiry, early drop, a reload's removal): its endpoint's active count
// goes down, in the remover's row (`row`: a worker's index, or the sync thread's owner). Every
// removal of a NAT flow goes through here. A replica of a peer's flow (Flow::origin,
// control/ha/sync.h) is not counted: it counts once a worker takes it over.
template <typename K>
void release_flow(const StatsTable& st, uint16_t row, const BasicFlow<K>& f) noexcept {
    if (f.kind == FlowKind::nat && f.origin.load(std::memory_order_relaxed) == 0)
        st.active.add(row, f.nat().endpoint, -1);
}

// Hands the buffered NAT events to the ring; what it refuses is counted, never waited for.
void flush_nat_events(WorkerCtx& ctx) noexcept;

// A NAT flow of this gateway began (`why` none) or ended: one event for the exporter, when there
// is one. Replicas (Flow::origin) are their owner's to log; a worker that takes one over logs its
// creation then.
template <typename K>
inline void nat_event(WorkerCtx& ctx, const BasicFlow<K>& f, NatEventType type, FlowEnd why) noexcept {
    if (!ctx.events || !(ctx.nat_event_types & (1u << static_cast<unsigned>(type))) || f.kind != FlowKind::nat ||
        f.origin.load(std::memory_order_relaxed) != 0)
        return;
    if (ctx.events->n == NatEventBuffer::kSize) flush_nat_events(ctx);
    NatEvent& e = ctx.events->ev[ctx.events->n++];
    e.tsc = ctx.now_tsc;
    e.svc_id = f.svc_id;
    e.type = type;
    e.reason = why;
    if constexpr (sizeof(K) == sizeof(FlowKey6)) {
        e.v6 = 1;
        e.k6[0] = f.key[0], e.k6[1] = f.key[1];
    } else {
        e.v6 = 0;
        e.k4[0] = f.key[0], e.k4[1] = f.key[1];
    }
    const FlowCounters* c = nullptr;
    if (type == NatEventType::end) {
        if constexpr (sizeof(K) == sizeof(FlowKey6))
            c = ctx.flows6->counters_of(f);
        else
            c = ctx.flows->counters_of(f);
    }
    for (unsigned d = 0; d < 2; ++d) {
        e.packets[d] = c ? c->packets[d].load(std::memory_order_relaxed) : 0;
        e.octets[d] = c ? c->octets[d].load(std::memory_order_relaxed) : 0;
    }
}

// Why an expired flow ended: a TCP connection closed (FIN, RST) is an end detected, a flow a
// reload marked gone a forced end, the rest idle.
template <typename K>
inline FlowEnd expiry_reason(const BasicFlow<K>& f) noexcept {
    const FlowState s = FlowState::load(f.state);
    if (s.gone()) return FlowEnd::forced_end;
    if (static_cast<Proto>(f.key[0].proto) == Proto::tcp &&
        (s.tcp() == TcpState::time_wait || s.tcp() == TcpState::close))
        return FlowEnd::end_detected;
    return FlowEnd::idle_timeout;
}

// A flow id with its family, as the control thread hands it to a worker (one 32-bit word in a
// ring): bit 31 set for the IPv6 table.
inline constexpr uint32_t kFlowIdV6 = 0x80000000u;

// Removes the worker's own flow `id` (kFlowIdV6 set: of the IPv6 table) when it is still live and
// marked gone by a reload (the datagram flows the reload sweep hands over). True when it removed it.
bool remove_gone_flow(WorkerCtx& ctx, uint32_t id) noexcept;

}  // namespace svcgate::dp
