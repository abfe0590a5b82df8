#include "dataplane/pipeline/frag_stage.h"

#include <cstring>

#include <rte_ip.h>

#include "dataplane/base/checksum.h"
#include "dataplane/l3/mtu.h"
#include "dataplane/l3/reject.h"
#include "dataplane/lb/nat.h"
#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/forward.h"
#include "dataplane/pipeline/output.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

namespace {

// The verdicts a later fragment can follow: the first fragment was routed.
bool routed(Verdict v) noexcept { return v == Verdict::dnat || v == Verdict::reply || v == Verdict::forward; }

// What a later fragment takes from its first's result.
void follow_result(PacketState& p, const FragResult& r) noexcept {
    if (!routed(r.verdict)) return p.set(Verdict::drop, DropReason::frag_first_dropped);
    p.set(r.verdict);
    p.frag = FragRole::follow;
    p.out_port = r.out_port;
    p.attributed = r.attributed;
    p.attr = r.attr;
    if (p.meta.is_v6()) {
        p.out6 = p.meta.key6;
        p.out6.src = r.src;
        p.out6.dst = r.dst;
        p.next_hop6 = r.next_hop;
    } else {
        p.out = p.meta.key;
        std::memcpy(&p.out.src.be, r.src.b, 4);
        std::memcpy(&p.out.dst.be, r.dst.b, 4);
        std::memcpy(&p.next_hop.be, r.next_hop.b, 4);
    }
}

// A first fragment's fate, from the packet as it leaves the forward exit.
FragResult result_of(const PacketState& p, const rte_mbuf* mb) noexcept {
    FragResult r;
    if (!routed(p.verdict)) return r;  // verdict drop
    r.verdict = p.verdict;
    r.out_port = p.out_port;
    r.attributed = p.attributed;
    r.attr = p.attr;
    const uint8_t* ip = rte_pktmbuf_mtod(mb, const uint8_t*) + p.meta.l3_off;
    if (p.meta.is_v6()) {
        std::memcpy(r.src.b, ip + 8, 16);
        std::memcpy(r.dst.b, ip + 24, 16);
        r.next_hop = p.next_hop6;
    } else {
        std::memcpy(r.src.b, ip + 12, 4);
        std::memcpy(r.dst.b, ip + 16, 4);
        std::memcpy(r.next_hop.b, &p.next_hop.be, 4);
    }
    return r;
}

// A fragment released from the hold: re-read (its meta went with its burst), then forwarded and
// sent as a packet of the burst would be. It came in by mb->port (a port index, set on arrival),
// and passed the parser then: its tag, if it has one, is its port's.
void release(WorkerCtx& ctx, rte_mbuf* mb, const FragResult& r) noexcept {
    ctx.counters.frag_taken++;
    PacketState p;
    const DropReason pr = parse_packet(rte_pktmbuf_mtod(mb, const uint8_t*), rte_pktmbuf_data_len(mb), p.meta,
                                       ParseOptions{.tags_checked = true});
    if (pr != DropReason::none) return output_drop(ctx, mb, pr);
    follow_result(p, r);
    if (p.verdict == Verdict::drop) return output_drop(ctx, mb, p.reason);
    ctx.counters.frag_released++;
    forward_packet(ctx, mb, p, mb->port);
    output_packet(ctx, mb, p, mb->port, nullptr);
}

}  // namespace

void frag_arrive(Burst& b, WorkerCtx& ctx, uint16_t i) noexcept {
    PacketState& p = b.pkt[i];
    rte_mbuf* mb = b.mbufs[i];
    const PacketMeta& m = p.meta;
    auto go_on = [&] {
        if (m.is_v6())
            b.flows6.push(i);
        else
            b.flows.push(i);
    };
    if (!ctx.frags) {  // no table (a harness without one): first fragments alone, as a plain packet
        if (m.later_fragment())
            p.set(Verdict::drop, DropReason::frag_table_full);
        else
            go_on();
        return;
    }
    mb->port = b.in_port;  // a held fragment's ICMP error, if any, leaves by the port it came in on
    FragTable::Arrival a;
    ctx.frags->arrive(FragKey::of(m), m.frag_off, m.frag_len(), !m.more_fragments, mb, ctx.now_ms, a);
    for (unsigned k = 0; k < a.n_freed; ++k) {
        ctx.counters.frag_taken++;
        output_drop(ctx, a.freed[k], a.why);
    }
    switch (a.what) {
        case FragTable::Outcome::first:
            p.frag = FragRole::first;
            b.frags.push(i);
            go_on();
            break;
        case FragTable::Outcome::follow:
            follow_result(p, a.result);
            break;
        case FragTable::Outcome::held:
            ctx.counters.frag_stored++;
            p.l2 = L2Outcome::frag_held;
            b.mbufs[i] = nullptr;  // the hold has it: the later stages skip it
            break;
        case FragTable::Outcome::drop:
            p.set(Verdict::drop, a.why);
            break;
    }
}

void frag_resolve(Burst& b, WorkerCtx& ctx) noexcept {
    if (!ctx.frags) return;
    rte_mbuf* released[FragTable::kMaxPerDatagram];
    for (uint16_t i : b.frags) {
        const PacketState& p = b.pkt[i];
        const FragResult r = result_of(p, b.mbufs[i]);
        const unsigned n = ctx.frags->resolve(FragKey::of(p.meta), r, released);
        for (unsigned k = 0; k < n; ++k) release(ctx, released[k], r);
    }
}

void frag_housekeeping(WorkerCtx& ctx, unsigned buckets) noexcept {
    if (!ctx.frags) return;
    ctx.frags->expire(ctx.now_ms, buckets, ctx.frag_cursor, [&ctx](rte_mbuf* m) {
        ctx.counters.frag_taken++;
        output_drop(ctx, m, DropReason::frag_timeout);
    });
}

void frag_flush(WorkerCtx& ctx, DropReason why) noexcept {
    if (!ctx.frags) return;
    ctx.frags->flush([&ctx, why](rte_mbuf* m) {
        ctx.counters.frag_taken++;
        output_drop(ctx, m, why);
    });
}

}  // namespace svcgate::dp
