#include "dataplane/pipeline/pipeline.h"
#include "dataplane/pipeline/frag_stage.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <cstring>

#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <rte_ring_peek_zc.h>

#include "dataplane/pipeline/classify.h"
#include "dataplane/pipeline/established.h"
#include "dataplane/pipeline/family.h"
#include "dataplane/pipeline/forward.h"
#include "dataplane/pipeline/new_flow.h"
#include "dataplane/pipeline/parse_stage.h"

namespace svcgate::dp {

namespace {

// A client's SYN on a connection of its own that is over (TIME_WAIT or CLOSE, the endpoint
// perhaps removed since): a new connection, as conntrack reopens it (nf_conntrack_tcp_packet:
// the old entry is killed and the packet looked up again, so it is balanced and NATed anew).
// The flow is removed when this worker owns it; refs[j] and the burst's later packets of the
// same flow become misses. A flow another thread owns (a replica) keeps today's course: the SYN
// follows it.
template <typename F>
[[gnu::cold]] void reopen_closed(WorkerCtx& ctx, const PacketMeta& m, FlowRef* refs, uint16_t j, uint16_t n) noexcept {
    if ((m.tcp_flags & (kSyn | kAck | kRst)) != kSyn || refs[j].dir != Direction::original || m.inner_off) return;
    auto* table = F::table(ctx);
    const auto& f = table->flow(refs[j].id);
    const TcpState s = FlowState::load(f.state).tcp();
    if (static_cast<Proto>(f.key[0].proto) != Proto::tcp || (s != TcpState::time_wait && s != TcpState::close) ||
        f.owner != ctx.worker || !f.live.load(std::memory_order_relaxed))
        return;
    const uint32_t id = refs[j].id;
    nat_event(ctx, f, NatEventType::end, FlowEnd::end_detected);
    release_flow(*ctx.stats, ctx.worker, f);
    table->remove(id);
    ++ctx.counters.flows_reopened;
    for (uint16_t k = j; k < n; ++k)
        if (refs[k].hit() && refs[k].id == id) refs[k] = FlowRef{};
}

// VIP entries beyond which the VIP table is taken as far from the cache (its slots: 32 bytes an
// entry at half load, 512 KiB).
constexpr size_t kLargeVipTable = 16384;

// What lookup_bulk's `ahead` call needs to ask for a burst's service ports (lookup_burst).
template <typename F>
struct ServicePortsAhead {
    const ServiceSnapshot* snap;
    const typename F::Key* const* keys;
    unsigned n;
};
template <typename F>
void ask_service_ports(void* arg) noexcept {
    const auto& a = *static_cast<const ServicePortsAhead<F>*>(arg);
    prefetch_service_ports<F>(*a.snap, a.keys, a.n);
}

// Lookup: one bulk lookup for the family's tuples; what found no flow goes on to classify.
template <typename F>
void lookup_burst(Burst& b, WorkerCtx& ctx) noexcept {
    const IndexList& flows = F::flows(b);
    const typename F::Key* keys[kBurst];
    FlowRef refs[kBurst];
    KeyHash hashes[kBurst];
    b.misses.n = 0;
    for (uint16_t j = 0; j < flows.n; ++j) {
        const PacketMeta& m = b.pkt[flows.at[j]].meta;
        keys[j] = m.inner_off ? &F::err_key(m) : &F::key(m);
    }
    const auto* table = F::table(ctx);
    // A flood of new connections with a VIP table far larger than the caches: each new flow's
    // VIP slot is a miss of its own, its service port another that waits for the slot, and
    // classify_burst could only ask for them once the lookup had answered. While the bursts are
    // mostly misses, the slots are asked for now, and read (their service ports asked for) once
    // the flow buckets are asked for: three rounds of misses a burst become two. Established
    // traffic (few misses) never pays the hashes.
    const auto& vips = F::vips(*ctx.snap);
    ServicePortsAhead<F> ahead{ctx.snap, keys, flows.n};
    const typename F::Table::Ahead service_ports{&ask_service_ports<F>, &ahead};
    const bool early = ctx.mostly_new && vips.size() > kLargeVipTable;
    if (early) {
        for (uint16_t j = 0; j < flows.n; ++j) vips.prefetch(F::vip_key(keys[j]->dst, keys[j]->dport, keys[j]->proto));
    }
    const unsigned misses = table->lookup_bulk(keys, flows.n, refs, hashes, early ? &service_ports : nullptr);
    ctx.mostly_new = 2 * misses > flows.n;
    const StatsTable& st = *ctx.stats;
    // The counters each packet of a flow is added to: with many Services (over 16k counters,
    // 256 KiB per worker) they are far from the cache, so the burst's are prefetched at once (the
    // records are there: the lookup has just compared their keys). With few, pure overhead.
    const bool prefetch = misses < flows.n && st.services.slots() + st.endpoints.slots() > 16384;
    for (uint16_t j = 0; j < flows.n; ++j) {
        const uint16_t i = flows.at[j];
        if (refs[j].hit() && (b.pkt[i].meta.tcp_flags & kSyn)) [[unlikely]]
            reopen_closed<F>(ctx, b.pkt[i].meta, refs, j, flows.n);
        b.pkt[i].ref = refs[j];
        if (!refs[j].hit()) {
            if (!b.pkt[i].meta.inner_off) b.misses.push(i), b.miss_hash[i] = hashes[j];
            continue;
        }
        if (!prefetch) continue;
        const auto& f = table->flow(refs[j].id);
        if (f.kind != FlowKind::nat) continue;
        const NatTarget t = f.nat();
        rte_prefetch0(&st.services.row(ctx.worker)[t.service]);
        rte_prefetch0(&st.endpoints.row(ctx.worker)[t.endpoint]);
    }
}

// The stages that depend on the family, over that family's packets.
template <typename F>
void family_stages(Burst& b, WorkerCtx& ctx) noexcept {
    lookup_burst<F>(b, ctx);
    b.vip_hits.n = b.fresh.n = 0;
    if (b.misses.n) {
        classify_burst<F>(b, ctx);
        select_new_flows<F>(b, ctx);
    }
    track_established<F>(b, ctx);
    if (b.fresh.n) insert_new_flows<F>(b, ctx);
}

template <typename F>
bool remove_gone(WorkerCtx& ctx, uint32_t id) noexcept {
    auto* table = F::table(ctx);
    if (!table || id >= table->capacity()) return false;
    const auto& f = table->flow(id);
    if (!f.live.load(std::memory_order_relaxed) || f.owner != ctx.worker || !FlowState::load(f.state).gone())
        return false;
    nat_event(ctx, f, NatEventType::end, FlowEnd::forced_end);
    release_flow(*ctx.stats, ctx.worker, f);
    table->remove(id);
    ctx.counters.flows_expired++;
    return true;
}

}  // namespace

void process_burst(Burst& b, WorkerCtx& ctx) noexcept {
    parse_burst(b, ctx);
    if (b.flows.n) family_stages<V4>(b, ctx);
    if (b.flows6.n) [[unlikely]]
        family_stages<V6>(b, ctx);
    forward_exit(b, ctx);
    if (b.frags.n) [[unlikely]]
        frag_resolve(b, ctx);
    output_burst(b, ctx);
    if (ctx.n_sync) {
        // One enqueue per burst; what a full ring refuses is sent by the periodic refresh.
        const unsigned n =
            rte_ring_sp_enqueue_burst_elem(ctx.sync, ctx.sync_ids, sizeof(uint32_t), ctx.n_sync, nullptr);
        ctx.counters.sync_events += n;
        ctx.counters.sync_ring_full += ctx.n_sync - n;
        ctx.n_sync = 0;
    }
    if (ctx.events && ctx.events->n) flush_nat_events(ctx);
}

namespace {
// Events into ring slots with streaming stores: whole lines written without reading them first
// (the exporter's core read them last), which an ordinary copy's read-for-ownership would. On a
// worker making new flows at full rate, NAT events on ÷ off went from 0.81-0.85 to 0.90-0.93
// (bench/HISTORY.md, round twenty-six). The caller fences before it publishes them.
void stream_events(void* to, const NatEvent* from, unsigned n) noexcept {
#if defined(__SSE2__)
    auto* d = static_cast<__m128i*>(to);
    const auto* f = reinterpret_cast<const __m128i*>(from);
    for (size_t i = 0; i < size_t{n} * sizeof(NatEvent) / sizeof(__m128i); ++i)
        _mm_stream_si128(d + i, _mm_loadu_si128(f + i));
#else
    std::memcpy(to, from, size_t{n} * sizeof(NatEvent));
#endif
}
}  // namespace

void flush_nat_events(WorkerCtx& ctx) noexcept {
    NatEventBuffer& b = *ctx.events;
    rte_ring_zc_data zc;
    const unsigned n = rte_ring_enqueue_zc_burst_elem_start(ctx.nat_ring, sizeof(NatEvent), b.n, &zc, nullptr);
    if (n) {
        const unsigned n1 = std::min(n, zc.n1);
        stream_events(zc.ptr1, b.ev, n1);
        if (n > n1) stream_events(zc.ptr2, b.ev + n1, n - n1);
#if defined(__SSE2__)
        _mm_sfence();  // the streaming stores visible before the ring's tail says they are there
#endif
        rte_ring_enqueue_zc_elem_finish(ctx.nat_ring, n);
    }
    ctx.counters.nat_events += n;
    ctx.counters.nat_events_dropped += b.n - n;
    b.n = 0;
}

unsigned worker_housekeeping(WorkerCtx& ctx, unsigned budget) noexcept {
    const StatsTable& st = *ctx.stats;
    // The end's reason is read only when exporting (nat_event does nothing otherwise).
    unsigned n = ctx.flows->expire_step(ctx.worker, ctx.now, budget, [&st, &ctx](const Flow& f) {
        if (ctx.events) nat_event(ctx, f, NatEventType::end, expiry_reason(f));
        release_flow(st, ctx.worker, f);
    });
    if (ctx.flows6)
        n += ctx.flows6->expire_step(ctx.worker, ctx.now, budget, [&st, &ctx](const Flow6& f) {
            if (ctx.events) nat_event(ctx, f, NatEventType::end, expiry_reason(f));
            release_flow(st, ctx.worker, f);
        });
    ctx.counters.flows_expired += n;
    if (ctx.events && ctx.events->n) flush_nat_events(ctx);
    frag_housekeeping(ctx);
    return n;
}

bool remove_gone_flow(WorkerCtx& ctx, uint32_t id) noexcept {
    return id & kFlowIdV6 ? remove_gone<V6>(ctx, id & ~kFlowIdV6) : remove_gone<V4>(ctx, id);
}

}  // namespace svcgate::dp
