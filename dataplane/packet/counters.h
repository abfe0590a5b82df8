// Counters: per worker (WorkerCounters), and per service port and endpoint (StatsTable), the
// latter indexed by slots that stay the same across reloads, so a long-lived flow keeps counting
// for its own service and endpoint whatever the number of reloads since it started.
//
// Runs on: workers write their own WorkerCounters and their own row of each CounterMatrix (plain
// stores: one writer per cell); the control thread sums them (relaxed reads; a 64-bit counter is
// never torn on the 64-bit targets DPDK supports). StatsTable::active is shared by all workers
// (atomics). A StatsTable is owned by the control plane's SlotRegistry, named by every snapshot
// built while it is current, and freed only after a grace period once a larger one replaced it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "dataplane/base/table_memory.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

struct alignas(64) WorkerCounters {
    uint64_t rx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t tx_packets = 0;  // taken by a transmit queue
    uint64_t generated = 0;   // built here: ARP requests
    uint64_t held = 0;        // now waiting for a next hop's MAC (a gauge)
    uint64_t verdicts[kVerdicts] = {};
    uint64_t drops[kDropReasons] = {};    // packets freed, by reason
    uint64_t rejects[kDropReasons] = {};  // packets answered with RST / port unreachable, by reason
    uint64_t flows_created = 0;
    uint64_t flows_joined = 0;  // a racing worker (or packet) created the same flow first
    uint64_t flows_expired = 0;
    uint64_t flows_early_dropped = 0;  // embryonic flows evicted to make room (SYN floods)
    uint64_t flows_port_remapped = 0;  // new flows whose source port was changed: reply tuple taken
    uint64_t flows_reopened = 0;       // closed TCP flows a client's SYN replaced with a new one
    // Masquerade ports chosen so the replies reach this worker's queue (rss_steer.h), and those
    // for which no such port was found within the tries (this worker's share of the range then).
    uint64_t snat_steered = 0;
    uint64_t snat_unsteered = 0;
    uint64_t affinity_hits = 0;
    // Flow replication (control/ha/sync.h): flows this worker handed to the sync thread (proven, or a
    // state change that matters), those its full ring refused (the periodic refresh sends them),
    // and replicas it served and so took over.
    uint64_t sync_events = 0;
    uint64_t sync_ring_full = 0;
    uint64_t takeovers = 0;
    // Replies to preserved clients that waited for their flow's replica (replica_hold.h).
    uint64_t replica_held = 0;      // waiting now (a gauge)
    uint64_t replica_parked = 0;    // put in the hold
    uint64_t replica_released = 0;  // went on once their flow was there
    // Fragments (frag_table.h, frag_stage.h). The hold is shared: a fragment one worker stores may be taken out
    // (released, timed out, dropped with its datagram) by another, so each counts its side.
    uint64_t frag_stored = 0;         // later fragments this worker put in the hold
    uint64_t frag_taken = 0;          // fragments this worker took out of the hold
    uint64_t frag_released = 0;       // of those, sent on translated once their first fragment came
    uint64_t frag_out_packets = 0;    // IPv4 packets fragmented to the egress MTU
    uint64_t frag_out_fragments = 0;  // the fragments they became (the extra ones count as generated)
    // The host path (output.cpp, worker.cpp): packets handed to the ports' host interfaces (also
    // in tx_packets; counted when queued for it, so one its full queue then refuses is counted
    // here and as a tx_full drop), and frames the kernel sent out through the ports (outside the balance:
    // they never were received) and those a full queue refused.
    uint64_t punted = 0;
    uint64_t host_out = 0;
    uint64_t host_out_dropped = 0;
    // NAT events for the IPFIX exporter (nat_event.h): handed to the worker's ring, and refused by
    // it when full (dropped, never waited for).
    uint64_t nat_events = 0;
    uint64_t nat_events_dropped = 0;

    WorkerCounters& operator+=(const WorkerCounters& o) noexcept;
    uint64_t dropped() const noexcept;
    uint64_t rejected() const noexcept;
    // The balance every packet keeps (README, Reliability): what came in, was made here or was
    // taken from the fragment hold has left, was freed under a reason, waits for a next hop or
    // a replica, or was put in the fragment hold. 0 when the worker is idle; read while it runs, it is off by
    // the packets of the burst in hand.
    int64_t unaccounted() const noexcept {
        return static_cast<int64_t>(rx_packets + generated + frag_taken) -
            static_cast<int64_t>(tx_packets + dropped() + held + replica_held + frag_stored);
    }
};

inline WorkerCounters& WorkerCounters::operator+=(const WorkerCounters& o) noexcept {
    rx_packets += o.rx_packets;
    rx_bytes += o.rx_bytes;
    tx_packets += o.tx_packets;
    generated += o.generated;
    held += o.held;
    for (unsigned i = 0; i < kVerdicts; ++i) verdicts[i] += o.verdicts[i];
    for (unsigned i = 0; i < kDropReasons; ++i) drops[i] += o.drops[i], rejects[i] += o.rejects[i];
    flows_created += o.flows_created;
    flows_joined += o.flows_joined;
    flows_expired += o.flows_expired;
    flows_early_dropped += o.flows_early_dropped;
    flows_port_remapped += o.flows_port_remapped;
    flows_reopened += o.flows_reopened;
    snat_steered += o.snat_steered;
    snat_unsteered += o.snat_unsteered;
    affinity_hits += o.affinity_hits;
    sync_events += o.sync_events;
    sync_ring_full += o.sync_ring_full;
    takeovers += o.takeovers;
    replica_held += o.replica_held;
    replica_parked += o.replica_parked;
    replica_released += o.replica_released;
    frag_stored += o.frag_stored;
    frag_taken += o.frag_taken;
    frag_released += o.frag_released;
    frag_out_packets += o.frag_out_packets;
    frag_out_fragments += o.frag_out_fragments;
    punted += o.punted;
    host_out += o.host_out;
    host_out_dropped += o.host_out_dropped;
    nat_events += o.nat_events;
    nat_events_dropped += o.nat_events_dropped;
    return *this;
}

inline uint64_t WorkerCounters::dropped() const noexcept {
    uint64_t n = 0;
    for (unsigned i = 1; i < kDropReasons; ++i) n += drops[i];
    return n;
}

inline uint64_t WorkerCounters::rejected() const noexcept {
    uint64_t n = 0;
    for (unsigned i = 1; i < kDropReasons; ++i) n += rejects[i];
    return n;
}

struct alignas(16) PacketCounter {
    uint64_t packets = 0;
    uint64_t bytes = 0;

    void add(uint32_t len) noexcept {
        ++packets;
        bytes += len;
    }
    PacketCounter& operator+=(const PacketCounter& o) noexcept {
        packets += o.packets;
        bytes += o.bytes;
        return *this;
    }
};

// One PacketCounter per (worker, slot): each worker writes its own row only, the control thread
// sums a slot's column.
class CounterMatrix {
public:
    CounterMatrix() = default;
    CounterMatrix(uint16_t workers, uint32_t slots)
        : cells_(make_table<PacketCounter>(size_t{workers} * slots)), slots_(slots), workers_(workers) {}

    PacketCounter* row(uint16_t worker) const noexcept { return &cells_[size_t{worker} * slots_]; }
    PacketCounter total(uint32_t slot) const noexcept {
        PacketCounter t;
        for (uint16_t w = 0; w < workers_; ++w) t += cells_[size_t{w} * slots_ + slot];
        return t;
    }
    // Control thread, for a slot no worker can write any more (after a grace period).
    void clear(uint32_t slot) noexcept {
        for (uint16_t w = 0; w < workers_; ++w) cells_[size_t{w} * slots_ + slot] = PacketCounter{};
    }
    uint32_t slots() const noexcept { return slots_; }

private:
    TablePtr<PacketCounter> cells_;
    uint32_t slots_ = 0;
    uint16_t workers_ = 0;
};

// Live flows per endpoint slot (what lc, sed and nq read, and what `svcgatectl endpoints` shows),
// one row per writer: worker w writes row w, the sync thread row `workers` (its table owner,
// control/ha/sync.h), the control thread the last row. A flow adds 1 to the row of the writer that
// creates it (or takes it over) and takes 1 from the row of the one that removes it, so a row may
// go negative; a count is its column's sum. One shared atomic per endpoint put every new flow's
// increment on a line every other worker creating flows for the same Service writes too (true
// sharing, a line moved between cores per new flow). The price: lc, sed and nq read a line per
// row for each candidate endpoint. Not measured apart: the one comparison made here
// (BM_PipelineNewFlowsWorkers/2) ran while that benchmark still put both threads on one CPU.
class ActiveCounts {
public:
    ActiveCounts() = default;
    ActiveCounts(uint16_t workers, uint32_t slots)
        : rows_(static_cast<uint16_t>(workers + 2)),
          lines_per_row_((slots + kPerLine - 1) / kPerLine),
          lines_(make_table<Line>(size_t{rows_} * lines_per_row_)),
          slots_(slots) {}

    // The row's own writer only: a plain load and store (one writer per cell).
    void add(uint16_t row, uint32_t slot, int32_t delta) const noexcept {
        std::atomic<int32_t>& c = cell(row, slot);
        c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    }
    int32_t total(uint32_t slot) const noexcept {
        int32_t n = 0;
        for (uint16_t r = 0; r < rows_; ++r) n += cell(r, slot).load(std::memory_order_relaxed);
        return n;
    }
    int32_t at(uint16_t row, uint32_t slot) const noexcept { return cell(row, slot).load(std::memory_order_relaxed); }
    // Before the table is published (a new table's copy of the old one's counts).
    void set(uint16_t row, uint32_t slot, int32_t v) noexcept { cell(row, slot).store(v, std::memory_order_relaxed); }
    // The line a writer's add() will touch.
    const void* line_of(uint16_t row, uint32_t slot) const noexcept { return &cell(row, slot); }
    uint16_t rows() const noexcept { return rows_; }
    uint16_t control_row() const noexcept { return static_cast<uint16_t>(rows_ - 1); }
    uint32_t slots() const noexcept { return slots_; }

private:
    static constexpr uint32_t kPerLine = 16;
    struct alignas(64) Line {
        std::atomic<int32_t> c[kPerLine];
    };
    std::atomic<int32_t>& cell(uint16_t row, uint32_t slot) const noexcept {
        return lines_[size_t{row} * lines_per_row_ + slot / kPerLine].c[slot % kPerLine];
    }

    uint16_t rows_ = 0;
    uint32_t lines_per_row_ = 0;
    TablePtr<Line> lines_;
    uint32_t slots_ = 0;
};

// What a flow is attributed to, by stable slot: packets and bytes per service port and per
// endpoint, and the live flows per endpoint (what lc, sed and nq read). A flow record names its
// two slots (NatTarget), so neither a reload nor a reordering of the Services changes where it
// counts; a slot is reused only once no snapshot names it and no flow holds it (SlotRegistry).
struct StatsTable {
    StatsTable(uint16_t workers, uint32_t service_slots, uint32_t endpoint_slots)
        : services(workers, service_slots),
          endpoints(workers, endpoint_slots),
          active(workers, endpoint_slots),
          no_return(workers, service_slots) {}

    CounterMatrix services;   // [worker][service slot]
    CounterMatrix endpoints;  // [worker][endpoint slot]
    ActiveCounts active;      // [writer][endpoint slot]: live flows
    // [worker][service slot], packets only: SYNs a client sent again on a connection whose
    // address was preserved (kFlowPreserved) before any reply came through the gateway, the sign
    // that the pods answer by another way (docs/client-ip.md).
    CounterMatrix no_return;
};

}  // namespace svcgate::dp
