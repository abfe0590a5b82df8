// The replica hold: a reply to a preserved client (client_ip preserve, docs/client-ip.md) that
// reaches a replicating gateway before the replica of its flow does. Behind ECMP the pods' SYN-ACK
// may come back through another gateway than the one that saw the SYN; routed as it is, the
// client would see the pod's own address and answer RST. Such a packet (no flow; from an
// endpoint address and port of a Service that preserves; the gateway replicating) waits here for
// at most kBoundMs, then goes through the pipeline again once its flow is in the table, or is
// freed as replica_late. The sync thread flushes within its longest idle wait (32 ms) and the
// peer inserts what it receives at once, so the bound leaves three times that.
//
// Runs on: one worker, its own hold. Owns: the held mbufs.
#pragma once

#include <cstdint>

#include <rte_mbuf.h>

#include "dataplane/base/types.h"

namespace svcgate::dp {

struct Burst;
struct PacketMeta;
struct WorkerCtx;

class ReplicaHold {
public:
    static constexpr unsigned kSize = 256;
    static constexpr uint64_t kBoundMs = 100;

    unsigned size() const noexcept { return n_; }

    struct Entry {
        rte_mbuf* m;
        uint64_t until_ms;
        uint16_t port;
        bool v6;
        FlowKey key;
        FlowKey6 key6;
    };

private:
    Entry at_[kSize];
    unsigned n_ = 0;

    friend bool replica_hold_park(WorkerCtx&, rte_mbuf*, uint16_t, const PacketMeta&) noexcept;
    friend void replica_hold_release(WorkerCtx&, Burst&) noexcept;
    friend void replica_hold_free(WorkerCtx&) noexcept;
};

// Keeps `m` (its packet `meta`, arrived on `port`) until its flow is there; false when full.
bool replica_hold_park(WorkerCtx& ctx, rte_mbuf* m, uint16_t port, const PacketMeta& meta) noexcept;
// Held packets whose flow is there now go through the pipeline again, in `scratch` (counted once
// as received); those held past the bound are freed as replica_late. Once per worker loop while
// anything is held.
void replica_hold_release(WorkerCtx& ctx, Burst& scratch) noexcept;
// Frees every held packet as replica_late (shutdown).
void replica_hold_free(WorkerCtx& ctx) noexcept;

}  // namespace svcgate::dp
