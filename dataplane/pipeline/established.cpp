#include "dataplane/pipeline/established.h"

#include "dataplane/pipeline/family.h"

namespace svcgate::dp {

namespace {

// What a packet did to its flow's conntrack state; `resent`: a SYN again before any reply.
enum class Track : uint8_t { invalid, same, changed, resent };

// conntrack for a packet of a known flow.
template <typename K>
Track track(BasicFlow<K>& f, Direction dir, const PacketMeta& m, uint8_t proto, uint32_t now) noexcept {
    if (f.last_seen.load(std::memory_order_relaxed) != now) f.last_seen.store(now, std::memory_order_relaxed);
    if (static_cast<Proto>(proto) != Proto::tcp) {
        if (dir == Direction::reply && FlowState::load(f.state) == FlowState::of(DgramState::unreplied)) {
            f.state.store(FlowState::of(DgramState::replied).bits, std::memory_order_relaxed);
            return Track::changed;
        }
        return Track::same;
    }
    FlowState cur = FlowState::load(f.state);
    // Nearly every packet: an ACK (no SYN, FIN or RST) on an established connection, in a
    // direction conntrack has seen. The transition leaves it as it is (kTable: ES, ack -> ES).
    constexpr FlowState kEstablished = FlowState::of(TcpState::established);
    if ((m.tcp_flags & (kSyn | kFin | kRst | kAck)) == kAck &&
        (cur == kEstablished.with_replied(true) || (cur == kEstablished && dir == Direction::original))) [[likely]]
        return Track::same;
    TcpFlagClass c = tcp_flag_class(m.tcp_flags);
    for (;;) {
        if (cur.gone()) return Track::same;  // marked by a reload meanwhile: the next packet sees it
        const TcpState nx = tcp_transition(cur.tcp(), dir, c);
        if (nx == TcpState::invalid) return Track::invalid;
        const FlowState want = (nx == TcpState::ignore ? cur : cur.with_tcp(nx)).with_replied(dir == Direction::reply);
        if (want == cur)
            return c == TcpFlagClass::syn && dir == Direction::original && cur.tcp() == TcpState::syn_sent
                ? Track::resent
                : Track::same;
        // Both directions may update the state from different workers: CAS, retry on change.
        if (f.state.compare_exchange_weak(cur.bits, want.bits, std::memory_order_relaxed)) return Track::changed;
    }
}

// Hands flow `id` to the sync thread at the burst's end (process_burst).
inline void sync_push(WorkerCtx& ctx, uint32_t id) noexcept {
    if (ctx.n_sync < kBurst) ctx.sync_ids[ctx.n_sync++] = id;
}

template <typename F>
void established_one(WorkerCtx& ctx, PacketState& p, PacketTrace* t) noexcept {
    const PacketMeta& m = p.meta;
    auto& f = F::table(ctx)->flow(p.ref.id);
    const Direction dir = p.ref.dir;
    const uint8_t proto = F::key(m).proto;
    if (FlowState::load(f.state).gone()) [[unlikely]] {
        // A reload removed the endpoint: TCP gets an RST (each side, on its next packet: the RST
        // takes its sequence number from that packet); datagrams are dropped until the owner
        // removes the entry, and then select again.
        const bool tcp = static_cast<Proto>(proto) == Proto::tcp;
        if (tcp && !(m.tcp_flags & kRst))
            p.set(Verdict::reject, DropReason::reject_endpoint_gone);
        else
            p.set(Verdict::drop, DropReason::endpoint_gone);
    } else if (const Track tr = m.inner_off ? Track::same : track(f, dir, m, proto, ctx.now); tr == Track::invalid) {
        p.set(Verdict::drop, DropReason::conntrack_invalid);
    } else {
        // A client resending its SYN to a preserved address: the pod's SYN-ACK went another way.
        if (tr == Track::resent && (f.flags & kFlowPreserved)) [[unlikely]]
            ++ctx.stats->no_return.row(ctx.worker)[f.nat().service].packets;
        if (ctx.sync) {
            // A replica that carries a packet here is ours from now on (its owner is gone, or
            // ECMP moved the connection): counted, and replicated in turn.
            const bool taken =
                f.origin.load(std::memory_order_relaxed) != 0 && f.origin.exchange(0, std::memory_order_relaxed) != 0;
            if (taken) {
                ++ctx.counters.takeovers;
                if (f.kind == FlowKind::nat) ctx.stats->active.add(ctx.worker, f.nat().endpoint, 1);
                nat_event(ctx, f, NatEventType::create, FlowEnd::none);  // logged here from now on
            }
            if ((taken || tr == Track::changed) && F::Table::proven(f)) sync_push(ctx, p.ref.id | F::kIdBit);
        }
        // Translated by the other tuple; an ICMP error (RELATED) likewise, its flow's state
        // untouched.
        F::out(p) = f.key[dir == Direction::original ? 1 : 0].reversed();
        p.set(dir == Direction::original ? Verdict::dnat : Verdict::reply);
        F::hops(ctx).prefetch(F::out(p).dst);
    }
    if (f.kind == FlowKind::nat) attribute(p, f, t);
}

// Per-flow counts (FlowCounters), for the NAT events' ends, where an exporter asked the table to
// count: a pass of its own, so that the path without one pays a test per burst, not per packet.
// The flow's own packets that go on, not the ICMP errors about it.
template <typename F>
void count_established(Burst& b, WorkerCtx& ctx) noexcept {
    FlowCounters* const counters = F::table(ctx)->counters(0);  // the array, once a burst
    for (const uint16_t i : F::flows(b)) {
        const PacketState& p = b.pkt[i];
        if (p.ref.hit() && !p.meta.inner_off && (p.verdict == Verdict::dnat || p.verdict == Verdict::reply))
            counters[p.ref.id].add(p.ref.dir, p.meta.ip_len);
    }
}

}  // namespace

template <typename F>
void track_established(Burst& b, WorkerCtx& ctx) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    for (const uint16_t i : F::flows(b)) {
        PacketState& p = b.pkt[i];
        if (p.ref.hit()) {
            established_one<F>(ctx, p, b.trace_of(i));
        } else if (p.meta.inner_off) {
            // An error about no flow of ours: routed as it is, never a new connection.
            if (s.local_flags(F::key(p.meta).dst) & (kPortAddr | kNodeAddr)) p.set(Verdict::local);
        }
    }
    if (F::table(ctx)->counting()) [[unlikely]]
        count_established<F>(b, ctx);
}

template void track_established<V4>(Burst&, WorkerCtx&) noexcept;
template void track_established<V6>(Burst&, WorkerCtx&) noexcept;

}  // namespace svcgate::dp
