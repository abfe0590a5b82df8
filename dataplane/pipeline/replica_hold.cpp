#include "dataplane/pipeline/replica_hold.h"

#include "dataplane/pipeline/output.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

bool replica_hold_park(WorkerCtx& ctx, rte_mbuf* m, uint16_t port, const PacketMeta& meta) noexcept {
    ReplicaHold& h = ctx.replica_hold;
    if (h.n_ == ReplicaHold::kSize) return false;
    ReplicaHold::Entry& e = h.at_[h.n_++];
    e = ReplicaHold::Entry{.m = m,
                           .until_ms = ctx.now_ms + ReplicaHold::kBoundMs,
                           .port = port,
                           .v6 = meta.is_v6(),
                           .key = meta.key,
                           .key6 = meta.key6};
    ++ctx.counters.replica_parked;
    ctx.counters.replica_held = h.n_;
    return true;
}

namespace {

bool flow_there(const WorkerCtx& ctx, const ReplicaHold::Entry& e) noexcept {
    if (e.v6) return ctx.flows6 && ctx.flows6->lookup(e.key6).hit();
    return ctx.flows->lookup(e.key).hit();
}

// The ready packets of one port (taken out of `ready`, at most a burst) through the pipeline.
void replay(WorkerCtx& ctx, Burst& b, rte_mbuf** ready, uint16_t* ports, unsigned& n) noexcept {
    const uint16_t port = ports[0];
    uint16_t k = 0;
    unsigned keep = 0;
    uint64_t bytes = 0;
    for (unsigned i = 0; i < n; ++i) {
        if (ports[i] == port && k < kBurst) {
            b.mbufs[k++] = ready[i];
            bytes += ready[i]->pkt_len;
        } else {
            ready[keep] = ready[i];
            ports[keep++] = ports[i];
        }
    }
    n = keep;
    // Received once, when they arrived: the parse stage counts them again.
    ctx.counters.rx_packets -= k;
    ctx.counters.rx_bytes -= bytes;
    ctx.counters.replica_released += k;
    b.start(k, port);
    process_burst(b, ctx);
}

}  // namespace

void replica_hold_release(WorkerCtx& ctx, Burst& scratch) noexcept {
    ReplicaHold& h = ctx.replica_hold;
    rte_mbuf* ready[ReplicaHold::kSize];
    uint16_t ports[ReplicaHold::kSize];
    unsigned n = 0, keep = 0;
    for (unsigned i = 0; i < h.n_; ++i) {
        const ReplicaHold::Entry& e = h.at_[i];
        if (flow_there(ctx, e)) {
            ready[n] = e.m;
            ports[n++] = e.port;
        } else if (ctx.now_ms >= e.until_ms) {
            output_drop(ctx, e.m, DropReason::replica_late);
        } else {
            h.at_[keep++] = e;
        }
    }
    h.n_ = keep;
    ctx.counters.replica_held = keep;
    while (n) replay(ctx, scratch, ready, ports, n);
}

void replica_hold_free(WorkerCtx& ctx) noexcept {
    ReplicaHold& h = ctx.replica_hold;
    for (unsigned i = 0; i < h.n_; ++i) output_drop(ctx, h.at_[i].m, DropReason::replica_late);
    h.n_ = 0;
    ctx.counters.replica_held = 0;
}

}  // namespace svcgate::dp
