#include "dataplane/pipeline/output.h"

#include <cstring>

#include "dataplane/pipeline/burst.h"
#include "dataplane/l3/host_path.h"
#include "dataplane/l3/local.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

void Output::init(NeighborTable& neighbors, NeighborTable6& neighbors6, rte_mempool* pool, const rte_ether_addr* macs,
                  uint16_t ports, TxSink sink) {
    neighbors_ = &neighbors;
    neighbors6_ = &neighbors6;
    pool_ = pool;
    macs_ = macs;
    n_ports_ = ports;
    n_outputs_ = ports;
    sink_ = sink;
    batches_ = std::make_unique<TxBatch[]>(ports ? ports : 1);
}

namespace {

// Per packet: internal, so that every caller in this file inlines it (the exported
// output_queue() was a call per packet, 3% of BM_PipelineEstablished). The frame as it is.
void enqueue(WorkerCtx& ctx, uint16_t port, rte_mbuf* m) noexcept {
    Output::TxBatch& tb = ctx.out.batch(port);
    if (tb.n == Output::kBatch) output_flush(ctx);
    tb.pkts[tb.n++] = m;
}

// A frame for a port on a trunk (`tag`: Output::vlan): its port's tag on, its bytes counted. A
// frame answered in place keeps the tag it came with (vlan.h), set to the port's, or taken off on
// the trunk's untagged port. One that cannot take the tag (vlan_can_push) is dropped as the
// queue's refusal is, under tx_full.
[[gnu::noinline]] void queue_on_trunk(WorkerCtx& ctx, uint16_t port, rte_mbuf* m, uint16_t tag) noexcept {
    const uint16_t vid = tag & kPortVlanId;
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    if (rte_pktmbuf_data_len(m) >= sizeof(rte_ether_hdr) && vlan_tagged(f)) {
        if (vid)
            vlan_store_tag(f + 12, vid);
        else
            vlan_strip(m);
    } else if (vid && !vlan_insert(m, vid)) {
        return output_drop(ctx, m, DropReason::tx_full);
    }
    ctx.out.trunk_counters(port).tx_bytes += m->pkt_len;
    enqueue(ctx, port, m);
}

// A frame for the port (or host interface) `port`, with its Ethernet header set.
void queue(WorkerCtx& ctx, uint16_t port, rte_mbuf* m) noexcept {
    if (const uint16_t tag = ctx.out.vlan(port)) [[unlikely]]
        return queue_on_trunk(ctx, port, m, tag);
    enqueue(ctx, port, m);
}

// Asks for `hop`'s MAC on `port` (ARP, or an IPv6 neighbor solicitation), from the port's
// address on the hop's subnet.
template <typename A>
bool request(WorkerCtx& ctx, rte_mempool* pool, const rte_ether_addr& mac, uint16_t port, const A& hop) noexcept {
    const auto* nh = ctx.snap ? ctx.snap->route(hop) : nullptr;
    if (!nh || !pool) return false;
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (!m) return false;
    bool built;
    if constexpr (std::is_same_v<A, Ip4>)
        built = build_arp_request(m, mac, nh->source, hop);
    else
        built = build_nd_solicit(m, mac, nh->source, hop);
    if (!built) {
        rte_pktmbuf_free(m);
        return false;
    }
    ++ctx.counters.generated;
    queue(ctx, port, m);
    return true;
}

void set_macs(rte_mbuf* m, const rte_ether_addr& dst, const rte_ether_addr& src) noexcept {
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    eth->dst_addr = dst;
    eth->src_addr = src;
}

// An IPv4 packet without DF larger than the port's MTU (mtu_check let it through): its fragments
// go out instead (the extra ones count as generated).
[[gnu::cold]] void queue_fragmented(WorkerCtx& ctx, uint16_t port, rte_mbuf* m, uint16_t mtu) noexcept {
    const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
    const uint16_t l2 = f[12] == 0x81 && f[13] == 0x00 ? 18 : 14;
    if (m->pkt_len <= l2 + mtu) return queue(ctx, port, m);
    rte_mbuf* frags[FragTable::kMaxPerDatagram];
    const unsigned n = fragment_ipv4(m, l2, mtu, ctx.out.pool(), frags, FragTable::kMaxPerDatagram);
    if (n == 0) return output_drop(ctx, m, DropReason::frag_out_failed);
    rte_pktmbuf_free(m);
    ctx.counters.generated += n - 1;
    ctx.counters.frag_out_packets++;
    ctx.counters.frag_out_fragments += n;
    for (unsigned k = 0; k < n; ++k) queue(ctx, port, frags[k]);
}

// A routed packet that came in tagged or leaves by a port on a trunk (`tag`: Output::vlan, 0 for
// a port alone on its device), as queue_routed, but for the usual case of a trunk, tagged in and
// out, which queue_routed handles itself. Tagged in only: its tag taken off first; tagged out
// only: its header written once, MACs and tag pushed in front (vlan_push_header); too large for
// the port: fragmented untagged, each fragment tagged as it is queued. A call of its own, so that
// queue_routed stays small enough to be inlined into the output stage's loop.
[[gnu::noinline]] void queue_routed_vlan(WorkerCtx& ctx, uint16_t port, rte_mbuf* m, const rte_ether_addr& dst,
                                         const rte_ether_addr& src, uint16_t tag) noexcept {
    const uint16_t vid = tag & kPortVlanId;
    const uint16_t mtu = ctx.out.mtu(port);
    if (vlan_tagged(rte_pktmbuf_mtod(m, const uint8_t*))) vlan_strip(m);
    if (mtu && m->pkt_len > 14u + mtu) [[unlikely]] {
        set_macs(m, dst, src);
        return queue_fragmented(ctx, port, m, mtu);
    }
    if (!tag) {
        set_macs(m, dst, src);
        return enqueue(ctx, port, m);
    }
    if (!vid || !vlan_push_header(m, dst, src, vid)) {
        set_macs(m, dst, src);
        return queue_on_trunk(ctx, port, m, tag);
    }
    ctx.out.trunk_counters(port).tx_bytes += m->pkt_len;
    enqueue(ctx, port, m);
}

// A routed packet: to `dst` from `src`, queued, or fragmented first. One that came in tagged and
// leaves by a VLAN port within its MTU: its header rewritten in place, MACs and tag
// (vlan_set_header), nothing moved. Any other that came in tagged or leaves by a port on a trunk:
// queue_routed_vlan.
[[gnu::always_inline]] inline void queue_routed(WorkerCtx& ctx, uint16_t port, rte_mbuf* m, const rte_ether_addr& dst,
                                                const rte_ether_addr& src) noexcept {
    const uint16_t tag = ctx.out.vlan(port);
    const uint16_t mtu = ctx.out.mtu(port);
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    if (tag || vlan_tagged(f)) [[unlikely]] {
        if ((tag & kPortVlanId) && vlan_tagged(f) && (!mtu || m->pkt_len <= 18u + mtu)) {
            vlan_set_header(f, dst, src, tag & kPortVlanId);
            ctx.out.trunk_counters(port).tx_bytes += m->pkt_len;
            return enqueue(ctx, port, m);
        }
        return queue_routed_vlan(ctx, port, m, dst, src, tag);
    }
    if (mtu && m->pkt_len > 14u + mtu) [[unlikely]] {
        set_macs(m, dst, src);
        return queue_fragmented(ctx, port, m, mtu);
    }
    set_macs(m, dst, src);
    enqueue(ctx, port, m);
}

}  // namespace

void output_drop(WorkerCtx& ctx, rte_mbuf* m, DropReason why) noexcept {
    ctx.counters.drops[static_cast<unsigned>(why)]++;
    rte_pktmbuf_free(m);
}

// The host interfaces first (indices from n_ports_ on): what goes to the kernel is BFD, BGP, ARP and
// ND for the routing daemon, a few packets, and it should not wait behind a burst of bulk traffic
// going out of the ports (a routing session on a busy host).
void output_flush(WorkerCtx& ctx) noexcept {
    Output& o = ctx.out;
    for (uint16_t i = 0; i < o.n_outputs_; ++i) {
        const uint16_t p = static_cast<uint16_t>((i + o.n_ports_) % o.n_outputs_);
        Output::TxBatch& tb = o.batches_[p];
        if (!tb.n) continue;
        const uint16_t sent = o.sink_.send(o.sink_.arg, p, tb.pkts, tb.n);
        ctx.counters.tx_packets += sent;
        for (uint16_t i = sent; i < tb.n; ++i) output_drop(ctx, tb.pkts[i], DropReason::tx_full);
        tb.n = 0;
    }
}

// Puts a packet in the hold queue; false when it is full.
bool hold(WorkerCtx& ctx, const Output::Held& h) noexcept {
    Output& o = ctx.out;
    if (o.n_held_ == Output::kHold) return false;
    o.held_[o.n_held_++] = h;
    ctx.counters.held = o.n_held_;
    return true;
}

namespace {

// A routed packet: to its next hop's MAC, or into the hold queue while an ARP request (a neighbor
// solicitation) asks for it.
template <typename A>
[[gnu::always_inline]] inline void send_routed(WorkerCtx& ctx, rte_mbuf* m, PacketState& p, BasicNeighborTable<A>& nt,
                                               const A& hop, PacketTrace* t) noexcept {
    Output& o = ctx.out;
    const rte_ether_addr& src = o.mac(p.out_port);
    using State = typename BasicNeighborTable<A>::State;
    rte_ether_addr mac;
    State ns;
    if (p.next_mac) [[likely]] {  // resolved, fresh, when routed (hop_cache.h)
        std::memcpy(mac.addr_bytes, &p.next_mac, RTE_ETHER_ADDR_LEN);
        ns = State::fresh;
    } else {
        ns = o.last_neighbor<A>().lookup(nt, hop, ctx.now, mac);
    }
    bool asked = false;
    if (ns != State::unknown) {
        queue_routed(ctx, p.out_port, m, mac, src);
        p.l2 = L2Outcome::sent;
        // A stale entry still forwards; one request refreshes it.
        if (ns == State::stale && nt.want_request(hop, ctx.now)) asked = request(ctx, o.pool(), src, p.out_port, hop);
    } else {
        if (nt.want_request(hop, ctx.now)) asked = request(ctx, o.pool(), src, p.out_port, hop);
        if (hold(ctx, Output::Held{m, IpAddr::of(hop), p.out_port, ctx.now})) {
            p.l2 = L2Outcome::held;
        } else {
            output_drop(ctx, m, DropReason::neighbor_hold_full);
            p.l2 = L2Outcome::dropped;
            p.reason = DropReason::neighbor_hold_full;
        }
    }
    if (t) {
        t->next_hop = IpAddr::of(hop);
        if (ns != State::unknown) t->mac = mac;
        t->arp_requested = asked;
    }
}

// A packet the dataplane did not answer for the gateway itself goes to the in-port's host
// interface when it is the kernel's (host_path.h), within its class's budget per worker.
// False: not for the host (the caller drops it under its reason).
[[gnu::cold]] bool punt(WorkerCtx& ctx, rte_mbuf* m, PacketState& p, uint16_t in_port) noexcept {
    const HostClass c =
        host_class(*ctx.snap, ctx.out.mac(in_port), p.meta, rte_pktmbuf_mtod(m, const uint8_t*), p.reason);
    if (c == HostClass::none) return false;
    if (!(c == HostClass::control ? ctx.punt_control : ctx.punt_other).allow(ctx.now_ms)) {
        p.reason = DropReason::punt_limited;
        output_drop(ctx, m, DropReason::punt_limited);
        p.l2 = L2Outcome::dropped;
        return true;
    }
    ++ctx.counters.punted;
    p.reason = DropReason::none;
    p.l2 = L2Outcome::punted;
    // The kernel sees a VLAN port's frames untagged on its TAP (vlan.h).
    if (ctx.out.vlan(in_port) && vlan_tagged(rte_pktmbuf_mtod(m, const uint8_t*))) vlan_strip(m);
    queue(ctx, ctx.out.host_of(in_port), m);
    return true;
}

[[gnu::always_inline]] inline void output_one(WorkerCtx& ctx, rte_mbuf* m, PacketState& p, uint16_t in_port,
                                              PacketTrace* t) noexcept {
    switch (p.verdict) {
        case Verdict::drop:
            output_drop(ctx, m, p.reason);
            break;
        case Verdict::reject:  // built in place, MACs swapped
            queue(ctx, in_port, m);
            p.l2 = L2Outcome::sent;
            break;
        case Verdict::local:
            p.reason = answer_local(m, p.meta, ctx.out.mac(in_port), *ctx.snap, *ctx.out.neighbors(),
                                    *ctx.out.neighbors6(), ctx.now);
            if (p.reason == DropReason::none) {
                queue(ctx, in_port, m);
                p.l2 = L2Outcome::sent;
            } else if (ctx.out.host_of(in_port) != Output::kNoHost && punt(ctx, m, p, in_port)) [[unlikely]] {
                // handed to the kernel, or counted as over its budget
            } else {
                output_drop(ctx, m, p.reason);
                p.l2 = L2Outcome::dropped;
            }
            break;
        case Verdict::dnat:
        case Verdict::reply:
        case Verdict::forward:
            if (p.meta.is_v6()) [[unlikely]]
                send_routed(ctx, m, p, *ctx.out.neighbors6(), p.next_hop6, t);
            else
                send_routed(ctx, m, p, *ctx.out.neighbors(), p.next_hop, t);
            break;
    }
}

}  // namespace

void output_packet(WorkerCtx& ctx, rte_mbuf* m, PacketState& p, uint16_t in_port, PacketTrace* t) noexcept {
    output_one(ctx, m, p, in_port, t);
}

void output_burst(Burst& b, WorkerCtx& ctx) noexcept {
    for (uint16_t i = 0; i < b.n; ++i)
        if (b.mbufs[i]) [[likely]]  // null: in the fragment hold or the replica hold
            output_one(ctx, b.mbufs[i], b.pkt[i], b.in_port, b.trace_of(i));
    output_flush(ctx);
}

void output_retry_held(WorkerCtx& ctx) noexcept {
    Output& o = ctx.out;
    unsigned keep = 0;
    for (unsigned i = 0; i < o.n_held_; ++i) {
        const Output::Held h = o.held_[i];
        rte_ether_addr mac;
        const bool v4 = h.hop.is_v4();
        const bool known = v4 ? o.neighbors_->lookup(h.hop.v4(), ctx.now, mac) != NeighborTable::State::unknown
                              : o.neighbors6_->lookup(h.hop.v6(), ctx.now, mac) != NeighborTable6::State::unknown;
        if (known) {
            queue_routed(ctx, h.port, h.m, mac, o.macs_[h.port]);
        } else if (ctx.now - h.since >= Output::kHoldSeconds) {
            output_drop(ctx, h.m, DropReason::neighbor_unresolved);
        } else {
            if (v4 ? o.neighbors_->want_request(h.hop.v4(), ctx.now)
                   : o.neighbors6_->want_request(h.hop.v6(), ctx.now)) {
                if (v4)
                    request(ctx, o.pool_, o.macs_[h.port], h.port, h.hop.v4());
                else
                    request(ctx, o.pool_, o.macs_[h.port], h.port, h.hop.v6());
            }
            o.held_[keep++] = h;
        }
    }
    o.n_held_ = keep;
    ctx.counters.held = keep;
    output_flush(ctx);
}

void output_release_held(WorkerCtx& ctx, DropReason why) noexcept {
    Output& o = ctx.out;
    for (unsigned i = 0; i < o.n_held_; ++i) output_drop(ctx, o.held_[i].m, why);
    o.n_held_ = 0;
    ctx.counters.held = 0;
}

}  // namespace svcgate::dp
