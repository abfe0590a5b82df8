#include "dataplane/pipeline/forward.h"

#include "dataplane/pipeline/family.h"
#include "dataplane/lb/nat.h"
#include "dataplane/l3/mtu.h"
#include "dataplane/l3/reject.h"

namespace svcgate::dp {

namespace {

// A routed packet larger than `mtu`, before it is rewritten: true when it will be fragmented on
// output (IPv4 without DF). Otherwise it has become an ICMP error to its sender (verdict reject,
// frag_needed / packet_too_big, leaving by in_port; RFC 1191, RFC 8201), or a drop
// (icmp_rate_limited, no route back).
[[gnu::cold, gnu::noinline]] bool too_big(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t mtu,
                                          uint16_t in_port) noexcept {
    const PacketMeta& m = p.meta;
    if (!m.is_v6() && !m.dont_fragment) return true;  // the output stage fragments it
    // The error goes back to the sender, from the gateway's address on the sender's side.
    IpAddr from;
    if (m.is_v6()) {
        if (const NextHop6* h = ctx.snap->route(m.key6.src)) from = IpAddr::of(h->source);
    } else {
        if (const NextHop* h = ctx.snap->route(m.key.src)) from = IpAddr::of(h->source);
    }
    if (from.is_zero()) return p.set(Verdict::drop, DropReason::no_route), false;
    if (!ctx.icmp.allow(ctx.now_ms)) return p.set(Verdict::drop, DropReason::icmp_rate_limited), false;
    if (!build_too_big(mb, m, mtu, from)) return p.set(Verdict::drop, DropReason::reject_failed), false;
    p.set(Verdict::reject, m.is_v6() ? DropReason::packet_too_big : DropReason::frag_needed);
    p.out_port = in_port;
    p.attributed = false;
    return false;
}

// Whether a routed packet may leave by `port` as it is (too_big), asked before it is
// rewritten, so that an ICMP error quotes the packet as its sender sent it.
inline bool fits_egress(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t port, uint16_t in_port) noexcept {
    const uint16_t mtu = ctx.out.mtu(port);
    if (!mtu || p.meta.ip_len <= mtu) [[likely]]
        return true;
    p.out_port = port;
    return too_big(ctx, mb, p, mtu, in_port);
}

// Route, TTL (hop limit) and rewrite for a packet that leaves by a route. Inlined into the
// stage's loop, as every per-packet function of the established path is (route_one, exit_one,
// send_routed, output_one, the parser, the rewrite, the flow hash): as calls, their register
// saves, restores and argument moves were about a tenth of a packet's instructions (callgrind).
template <typename F>
[[gnu::always_inline]] inline void route_one(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t in_port) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    const PacketMeta& m = p.meta;
    uint8_t* frame = rte_pktmbuf_mtod(mb, uint8_t*);
    const typename F::Key& out = p.verdict == Verdict::forward ? F::key(m) : F::out(p);
    // The route and, once resolved, the next hop's MAC, from this worker's cache (hop_cache.h).
    const typename F::Hop* hop = nullptr;
    if constexpr (F::family == Family::v4) {
        if (s.routes) hop = ctx.hops.lookup(*s.routes, *ctx.out.neighbors(), out.dst, ctx.now, p.next_mac);
    } else {
        if (s.routes6) hop = ctx.hops6.lookup(*s.routes6, *ctx.out.neighbors6(), out.dst, ctx.now, p.next_mac);
    }
    if (!hop) return p.set(Verdict::drop, DropReason::no_route);
    if (!fits_egress(ctx, mb, p, hop->port, in_port)) return;
    // TTL (hop limit) first: a packet that cannot be forwarded is dropped untouched.
    if (p.verdict != Verdict::forward && !m.inner_off && !(out == F::key(m))) [[likely]] {
        if (!route_translate(frame, m, out)) return p.set(Verdict::drop, DropReason::ip_ttl_exceeded);
    } else if (!(F::family == Family::v4 ? decrement_ttl(frame, m) : decrement_hop_limit(frame, m))) {
        return p.set(Verdict::drop, DropReason::ip_ttl_exceeded);
    } else if (m.inner_off && p.ref.hit()) {
        // nf_nat_icmp_reply_translation: the outer source follows the flow's source rewrite (the
        // VIP towards the client; the masquerade address towards a pod).
        const bool outer_src = p.ref.dir == Direction::reply || (F::table(ctx)->flow(p.ref.id).flags & kFlowMasq);
        rewrite_icmp_error(frame, m, out, outer_src);
    }
    p.out_port = hop->port;
    F::next_hop(p) = hop->gateway.is_zero() ? out.dst : hop->gateway;
}

// IPv6's route_one, a call of its own: with the hop cache's lookup always inlined (as a call it
// held 9% of an IPv6 worker's samples through the port), IPv6's route would otherwise be inlined
// beside IPv4's into the loop every IPv4 packet runs.
[[gnu::noinline]] void route_one6(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t in_port) noexcept {
    route_one<V6>(ctx, mb, p, in_port);
}

// A later fragment (frag_stage.h): where its first fragment went (p.out_port, next hop), with the
// addresses it left with (p.out); no L4 header to rewrite.
template <typename F>
[[gnu::cold]] void follow_one(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t in_port) noexcept {
    if (!fits_egress(ctx, mb, p, p.out_port, in_port)) return;
    uint8_t* frame = rte_pktmbuf_mtod(mb, uint8_t*);
    const bool alive = F::family == Family::v4 ? decrement_ttl(frame, p.meta) : decrement_hop_limit(frame, p.meta);
    if (!alive) return p.set(Verdict::drop, DropReason::ip_ttl_exceeded);
    rewrite_addresses(frame, p.meta, F::out(p));
}

[[gnu::always_inline]] inline void exit_one(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t in_port,
                                            PacketCounter* svc_row, PacketCounter* ep_row) noexcept {
    switch (p.verdict) {
        case Verdict::dnat:
        case Verdict::reply:
        case Verdict::forward:
            if (p.frag == FragRole::follow) [[unlikely]] {
                if (p.meta.is_v6())
                    follow_one<V6>(ctx, mb, p, in_port);
                else
                    follow_one<V4>(ctx, mb, p, in_port);
            } else if (p.meta.is_v6()) [[unlikely]]
                route_one6(ctx, mb, p, in_port);
            else
                route_one<V4>(ctx, mb, p, in_port);
            break;
        case Verdict::reject:
            if (build_reject(mb, p.meta))
                p.out_port = in_port;
            else
                p.set(Verdict::drop, DropReason::reject_failed);
            break;
        case Verdict::local:
            // A first fragment for the gateway itself: it answers whole packets only (no reassembly
            // for itself), and the rest of the datagram follows this drop.
            if (p.frag == FragRole::first) [[unlikely]]
                p.set(Verdict::drop, DropReason::to_gateway);
            p.out_port = in_port;
            break;
        case Verdict::drop:
            break;
    }
    WorkerCounters& c = ctx.counters;
    c.verdicts[static_cast<unsigned>(p.verdict)]++;
    if (p.verdict == Verdict::reject) c.rejects[static_cast<unsigned>(p.reason)]++;
    // Packets of a Service's flows, both directions, under the flow's stable slots.
    if (p.attributed && (p.verdict == Verdict::dnat || p.verdict == Verdict::reply)) {
        svc_row[p.attr.service].add(mb->pkt_len);
        ep_row[p.attr.endpoint].add(mb->pkt_len);
    }
}

}  // namespace

void forward_exit(Burst& b, WorkerCtx& ctx) noexcept {
    const StatsTable& st = *ctx.stats;
    PacketCounter* const svc_row = st.services.row(ctx.worker);
    PacketCounter* const ep_row = st.endpoints.row(ctx.worker);
    const unsigned n = b.n;  // read once: the stores in exit_one may alias it
    for (unsigned i = 0; i < n; ++i)
        if (b.mbufs[i]) [[likely]]  // null: in the fragment hold or the replica hold
            exit_one(ctx, b.mbufs[i], b.pkt[i], b.in_port, svc_row, ep_row);
}

void forward_packet(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t in_port) noexcept {
    const StatsTable& st = *ctx.stats;
    exit_one(ctx, mb, p, in_port, st.services.row(ctx.worker), st.endpoints.row(ctx.worker));
}

}  // namespace svcgate::dp
