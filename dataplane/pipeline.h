// The packet pipeline: parse → flow lookup (bulk) → classify → select → translate → route, one
// verdict per packet. The same process_burst() serves the DPDK workers, `svcgatectl trace` and
// the fixture tests.
//
// A burst goes through in phases, each over all its packets, so that cache misses overlap across
// packets instead of following each other: (1) parse; bulk flow lookup; (2) packets of no flow:
// VIP lookup and new-connection selection, one pass per link of the snapshot's chain (VIP slot →
// service port → endpoint sets → members), each prefetching the next, and each new flow's insert
// prefetched (its reply buckets, lock stripes, record); (3) in packet order: conntrack, the
// prepared inserts, translation and routing. Selection for the whole burst before its inserts is
// visible in two ways only: an endpoint counts as active from its selection (so least-connection
// spreads one burst's picks), and packets of one new flow in one burst are each selected, the
// later ones joining the first one's record (as two workers racing on one flow do).
//
// Runs on: one worker lcore per WorkerCtx. Reads: the snapshot (RCU, held for the burst), the
// flow table (lock-free). Writes: packets, the flow table (its own records), per-worker
// counters, the snapshot's atomics (scheduler cursors, active counts, per-service counters).
#pragma once

#include <cstdint>
#include <optional>

#include <rte_mbuf.h>

#include "flow_table.h"
#include "parse.h"
#include "rng.h"
#include "snapshot.h"
#include "source_limit.h"
#include "verdict.h"

namespace svcgate::dp {

// conntrack's protocol number for session-affinity records in the flow table (never on a wire:
// IANA reserved 255 would be read as "raw").
inline constexpr uint8_t kAffinityProto = 0xfe;

struct alignas(64) WorkerCounters {
    uint64_t rx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t verdicts[6] = {};
    uint64_t drops[kDropReasons] = {};
    uint64_t flows_created = 0;
    uint64_t flows_joined = 0;       // a racing worker created the same flow first
    uint64_t flows_expired = 0;
    uint64_t flows_early_dropped = 0;  // embryonic flows evicted to make room (SYN floods)
    uint64_t affinity_hits = 0;
};

struct WorkerCtx {
    uint16_t worker = 0;
    uint16_t n_workers = 1;
    FlowTable* flows = nullptr;
    const ServiceSnapshot* snap = nullptr;  // set by the worker for each burst
    uint32_t now = 0;                       // seconds, the flow table's clock
    Rng rng{1};
    uint32_t snat_cursor = 0;
    SourceLimiter sources;  // new flows per source this second
    WorkerCounters counters{};
};

struct PacketResult {
    Verdict verdict = Verdict::drop;
    DropReason reason = DropReason::none;
    uint16_t out_port = 0;
    Ip4 next_hop;  // forward/dnat/reply: where to resolve L2 (zero for reject: L2 already set)
};

// Optional per-packet record for trace and tests (null in the workers' loop).
struct PacketTrace {
    static constexpr uint32_t kNone = UINT32_MAX;
    uint32_t svc = kNone;       // index into snapshot services
    uint32_t endpoint = kNone;  // index into snapshot endpoints
    std::optional<AddrRole> role;  // set when the packet was classified as a new connection
    bool masquerade = false;
    bool new_flow = false;
};

void process_burst(rte_mbuf* const* pkts, uint16_t n, uint16_t in_port, WorkerCtx& ctx,
                   PacketResult* res, PacketTrace* trace = nullptr) noexcept;

// Ageing and id reclamation; call once per loop iteration. Never blocks.
unsigned worker_housekeeping(WorkerCtx& ctx, unsigned budget) noexcept;

}  // namespace svcgate::dp
