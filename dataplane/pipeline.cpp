#include "pipeline.h"

#include <rte_prefetch.h>

#include "classify.h"
#include "established.h"
#include "forward.h"
#include "new_flow.h"

namespace svcgate::dp {

namespace {

// Parse: every packet gets its meta or a drop reason; IPv4 packets go on to the flow lookup
// (an ICMP error by the tuple of the flow it is about: conntrack's RELATED), ARP to the output
// stage as `local`.
void parse_burst(Burst& b, WorkerCtx& ctx) noexcept {
    for (uint16_t i = 0; i < b.n; ++i) {
        if (i + 1 < b.n) rte_prefetch0(rte_pktmbuf_mtod(b.mbufs[i + 1], void*));
        rte_mbuf* mb = b.mbufs[i];
        PacketState& p = b.pkt[i];
        ctx.counters.rx_packets++;
        ctx.counters.rx_bytes += mb->pkt_len;
        ParseOptions po{.ip_csum_verified = (mb->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) ==
                                            RTE_MBUF_F_RX_IP_CKSUM_GOOD};
        // A frame larger than one mbuf arrives chained; headers split over segments are not
        // parsed (the data room is sized for an MTU: a jumbo frame here is a misconfiguration).
        DropReason r = mb->nb_segs > 1 ? DropReason::mbuf_chained
                                       : parse_packet(rte_pktmbuf_mtod(mb, const uint8_t*), rte_pktmbuf_data_len(mb),
                                                      p.meta, po);
        if ((mb->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD && r == DropReason::none)
            r = DropReason::ip_bad_checksum;
        p.ref = FlowRef{};
        p.attributed = false;
        p.l2 = L2Outcome::none;
        p.next_hop = Ip4{};
        if (b.trace) b.trace[i] = PacketTrace{};
        if (r != DropReason::none) {
            p.set(Verdict::drop, r);
        } else if (p.meta.l3 == L3Kind::ipv4) {
            // No copy of the tuple into `out` here: parse has just written it field by field, and
            // a 16-byte load of it now would stall on store forwarding (4% of process_burst in
            // BM_PipelineEstablished). A forwarded packet leaves with meta.key.
            p.set(Verdict::forward);
            b.flows.push(i);
        } else {
            p.set(Verdict::local);  // ARP: answered or learned from by the output stage
        }
    }
}

// Lookup: one bulk lookup for the burst's tuples; what found no flow goes on to classify.
void lookup_burst(Burst& b, WorkerCtx& ctx) noexcept {
    const FlowKey* keys[kBurst];
    FlowRef refs[kBurst];
    for (uint16_t j = 0; j < b.flows.n; ++j) {
        const PacketMeta& m = b.pkt[b.flows.at[j]].meta;
        keys[j] = m.inner_off ? &m.err_key : &m.key;
    }
    const unsigned misses = ctx.flows->lookup_bulk(keys, b.flows.n, refs);
    const StatsTable& st = *ctx.stats;
    // The counters each packet of a flow is added to: with many Services (over 16k counters,
    // 256 KiB per worker) they are far from the cache, so the burst's are prefetched at once (the
    // records are there: the lookup has just compared their keys). With few, pure overhead.
    const bool prefetch = misses < b.flows.n && st.services.slots() + st.endpoints.slots() > 16384;
    for (uint16_t j = 0; j < b.flows.n; ++j) {
        const uint16_t i = b.flows.at[j];
        b.pkt[i].ref = refs[j];
        if (!refs[j].hit()) {
            if (!b.pkt[i].meta.inner_off) b.misses.push(i);
            continue;
        }
        if (!prefetch) continue;
        const Flow& f = ctx.flows->flow(refs[j].id);
        if (f.kind != FlowKind::nat) continue;
        const NatTarget t = f.nat();
        rte_prefetch0(&st.services.row(ctx.worker)[t.service]);
        rte_prefetch0(&st.endpoints.row(ctx.worker)[t.endpoint]);
    }
}

}  // namespace

void process_burst(Burst& b, WorkerCtx& ctx) noexcept {
    parse_burst(b, ctx);
    lookup_burst(b, ctx);
    if (b.misses.n) {
        classify_burst(b, ctx);
        select_new_flows(b, ctx);
    }
    track_established(b, ctx);
    if (b.fresh.n) insert_new_flows(b, ctx);
    forward_exit(b, ctx);
    output_burst(b, ctx);
}

void release_flow(const StatsTable& st, const Flow& f) noexcept {
    if (f.kind == FlowKind::nat) st.active[f.nat().endpoint].fetch_sub(1, std::memory_order_relaxed);
}

unsigned worker_housekeeping(WorkerCtx& ctx, unsigned budget) noexcept {
    const StatsTable& st = *ctx.stats;
    unsigned n = ctx.flows->expire_step(ctx.worker, ctx.now, budget, [&st](const Flow& f) { release_flow(st, f); });
    ctx.counters.flows_expired += n;
    return n;
}

bool remove_gone_flow(WorkerCtx& ctx, uint32_t id) noexcept {
    const Flow& f = ctx.flows->flow(id);
    if (!f.live.load(std::memory_order_relaxed) || f.owner != ctx.worker ||
        !(f.state.load(std::memory_order_relaxed) & kStateGone))
        return false;
    release_flow(*ctx.stats, f);
    ctx.flows->remove(id);
    ctx.counters.flows_expired++;
    return true;
}

}  // namespace svcgate::dp
