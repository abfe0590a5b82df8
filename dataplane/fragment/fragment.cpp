#include "dataplane/fragment/fragment.h"

#include <cstring>

#include <rte_ip.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_random.h>

#include "dataplane/pipeline/burst.h"
#include "dataplane/base/checksum.h"
#include "dataplane/pipeline/forward.h"
#include "dataplane/lb/nat.h"
#include "dataplane/pipeline/output.h"
#include "dataplane/pipeline/pipeline.h"
#include "dataplane/l3/reject.h"

namespace svcgate::dp {

FragKey FragKey::of(const PacketMeta& m) noexcept {
    FragKey k;
    if (m.is_v6()) {
        k.src = m.key6.src;
        k.dst = m.key6.dst;
        k.v6 = 1;
    } else {
        std::memcpy(k.src.b, &m.key.src.be, 4);
        std::memcpy(k.dst.b, &m.key.dst.be, 4);
        k.proto = m.key.proto;
    }
    k.id = m.frag.id;
    return k;
}

// ---- the table ----------------------------------------------------------------------------

namespace {

uint32_t g_seed = 0;  // one per process: the bucket a datagram lands in is not the sender's to pick

// A bucket's lock for a scope.
struct Locked {
    explicit Locked(rte_spinlock_t& l) noexcept : l_(l) { rte_spinlock_lock(&l_); }
    ~Locked() { rte_spinlock_unlock(&l_); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    rte_spinlock_t& l_;
};

// The verdicts a later fragment can follow: the first fragment was routed.
bool routed(Verdict v) noexcept { return v == Verdict::dnat || v == Verdict::reply || v == Verdict::forward; }

}  // namespace

std::unique_ptr<FragTable> FragTable::create(const FragParams& p) noexcept {
    std::unique_ptr<FragTable> t(new (std::nothrow) FragTable());
    if (!t) return nullptr;
    t->p_ = p;
    t->p_.max_per_datagram = std::clamp<uint16_t>(p.max_per_datagram, 2, kMaxPerDatagram);
    uint32_t n = 1;
    while (n * kWays < p.max_datagrams) n <<= 1;
    t->buckets_ = static_cast<Bucket*>(rte_zmalloc("svcgate_frags", sizeof(Bucket) * n, 64));
    if (!t->buckets_) return nullptr;
    t->n_buckets_ = n;
    for (uint32_t i = 0; i < n; ++i) rte_spinlock_init(&t->buckets_[i].lock);
    if (g_seed == 0) g_seed = static_cast<uint32_t>(rte_rand()) | 1;
    return t;
}

FragTable::~FragTable() {
    // Held mbufs go back to their pool (the owner flushes first to count them).
    if (buckets_) flush([](rte_mbuf* m) { rte_pktmbuf_free(m); });
    rte_free(buckets_);
}

FragTable::Bucket& FragTable::bucket(const FragKey& k) noexcept {
    return buckets_[rte_jhash(&k, sizeof k, g_seed) & (n_buckets_ - 1)];
}

void FragTable::free_entry(Entry& e) noexcept {
    held_.fetch_sub(e.n_held, std::memory_order_relaxed);
    e.n_held = 0;
    e.state = kFree;
    used_.fetch_sub(1, std::memory_order_relaxed);
}

void FragTable::poison(Entry& e, Arrival& a, DropReason why) noexcept {
    std::memcpy(a.freed, e.held, e.n_held * sizeof(rte_mbuf*));
    a.n_freed = e.n_held;
    held_.fetch_sub(e.n_held, std::memory_order_relaxed);
    e.n_held = 0;
    e.state = kPoisoned;  // until it expires: the rest of the datagram is refused too
    a.what = Outcome::drop;
    a.why = why;
}

void FragTable::arrive(const FragKey& k, uint32_t off, uint32_t len, bool last, rte_mbuf* m, uint64_t now_ms,
                       Arrival& a) noexcept {
    a.n_freed = 0;
    a.what = Outcome::drop;
    Bucket& b = bucket(k);
    Locked lock(b.lock);
    Entry* e = nullptr;
    Entry* room = nullptr;
    for (Entry& x : b.e) {
        if (x.state == kFree) {
            if (!room) room = &x;
        } else if (x.key == k) {
            e = &x;
            break;
        }
    }
    const bool fresh = !e;
    if (fresh) {
        if (!room) return void(a.why = DropReason::frag_table_full);
        e = room;
        e->start(k, now_ms + p_.timeout_ms);
        used_.fetch_add(1, std::memory_order_relaxed);
    }
    if (e->state == kPoisoned) return void(a.why = DropReason::frag_overlap);
    const uint32_t end = off + len;
    for (unsigned r = 0; r < e->n_ranges; ++r) {
        if (e->from[r] == off && e->to[r] == end) return void(a.why = DropReason::frag_duplicate);  // only it goes
        if (off < e->to[r] && e->from[r] < end) return poison(*e, a, DropReason::frag_overlap);    // RFC 5722
    }
    // The last fragment fixes the length: nothing may end past it, and it may come only once.
    bool inconsistent = e->got_last && (last || end > e->total);
    for (unsigned r = 0; last && r < e->n_ranges; ++r) inconsistent = inconsistent || e->to[r] > end;
    if (inconsistent) return poison(*e, a, DropReason::frag_overlap);
    if (e->n_ranges == p_.max_per_datagram) return poison(*e, a, DropReason::frag_too_many);
    if (off != 0 && e->state == kWaiting) {  // before its first fragment: into the hold
        if (held_.load(std::memory_order_relaxed) >= p_.max_held) {
            if (fresh) free_entry(*e);  // the range is not taken (a retransmission may still come), nor the room
            return void(a.why = DropReason::frag_hold_full);
        }
        e->held[e->n_held++] = m;
        held_.fetch_add(1, std::memory_order_relaxed);
        a.what = Outcome::held;
    } else if (off != 0) {
        a.what = Outcome::follow;
        a.result = e->result;
    } else {
        a.what = Outcome::first;
    }
    e->from[e->n_ranges] = static_cast<uint16_t>(off);
    e->to[e->n_ranges] = end;
    e->n_ranges++;
    e->seen += len;
    if (last) {
        e->got_last = true;
        e->total = end;
    }
    if (e->state == kResolved && e->got_last && e->seen == e->total) free_entry(*e);  // complete
}

unsigned FragTable::resolve(const FragKey& k, const FragResult& r, rte_mbuf** released) noexcept {
    Bucket& b = bucket(k);
    Locked lock(b.lock);
    for (Entry& e : b.e) {
        if (e.state != kWaiting || !(e.key == k)) continue;
        e.result = r;
        e.state = kResolved;
        const unsigned n = e.n_held;
        std::memcpy(released, e.held, n * sizeof(rte_mbuf*));
        held_.fetch_sub(n, std::memory_order_relaxed);
        e.n_held = 0;
        if (e.got_last && e.seen == e.total) free_entry(e);
        return n;
    }
    return 0;
}

// ---- the stages ---------------------------------------------------------------------------

namespace {

// What a later fragment takes from its first's result.
void follow_result(PacketState& p, const FragResult& r) noexcept {
    if (!routed(r.verdict))
        return p.set(Verdict::drop, DropReason::frag_first_dropped);
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
// sent as a packet of the burst would be. It came in by mb->port (a port index, set on arrival).
void release(WorkerCtx& ctx, rte_mbuf* mb, const FragResult& r) noexcept {
    ctx.counters.frag_taken++;
    PacketState p;
    const DropReason pr = parse_packet(rte_pktmbuf_mtod(mb, const uint8_t*), rte_pktmbuf_data_len(mb), p.meta);
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
        if (m.is_v6()) b.flows6.push(i);
        else b.flows.push(i);
    };
    if (!ctx.frags) {  // no table (a harness without one): first fragments alone, as a plain packet
        if (m.later_fragment()) p.set(Verdict::drop, DropReason::frag_table_full);
        else go_on();
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

// ---- the egress MTU -----------------------------------------------------------------------

bool too_big(WorkerCtx& ctx, rte_mbuf* mb, PacketState& p, uint16_t mtu, uint16_t in_port) noexcept {
    const PacketMeta& m = p.meta;
    if (!m.is_v6()) {
        const uint8_t* ip = rte_pktmbuf_mtod(mb, const uint8_t*) + m.l3_off;
        if (!(ip[6] & 0x40)) return true;  // no DF: the output stage fragments it
    }
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

unsigned fragment_ipv4(const rte_mbuf* m, uint16_t l2, uint16_t mtu, rte_mempool* pool, rte_mbuf** out,
                       unsigned max) noexcept {
    if (!pool || m->nb_segs != 1 || rte_pktmbuf_data_len(m) < l2 + 20u) return 0;
    const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
    const uint8_t* ip = f + l2;
    const uint16_t ihl = (ip[0] & 0x0f) * 4;
    uint16_t total, field;
    std::memcpy(&total, ip + 2, 2);
    std::memcpy(&field, ip + 6, 2);
    total = rte_be_to_cpu_16(total);
    field = rte_be_to_cpu_16(field);
    if (field & RTE_IPV4_HDR_DF_FLAG || ihl < 20 || total < ihl || l2 + total > rte_pktmbuf_data_len(m)) return 0;
    // RFC 791 3.1: only options with the copy flag go into the fragments after the first.
    uint8_t opts[40];
    uint16_t olen = 0;
    for (uint16_t o = 20; o < ihl;) {
        const uint8_t type = ip[o];
        if (type == 0) break;                 // end of options
        if (type == 1) { ++o; continue; }     // no-operation
        const uint8_t len = o + 1 < ihl ? ip[o + 1] : 0;
        if (len < 2 || o + len > ihl) break;  // malformed: copy no more of them
        if (type & 0x80) {
            std::memcpy(opts + olen, ip + o, len);
            olen += len;
        }
        o += len;
    }
    while (olen % 4) opts[olen++] = 0;
    const uint16_t later_hl = 20 + olen;
    const uint16_t base = (field & RTE_IPV4_HDR_OFFSET_MASK) * 8;
    const bool base_mf = field & RTE_IPV4_HDR_MF_FLAG;
    const uint16_t payload = total - ihl;
    unsigned n = 0;
    for (uint32_t pos = 0; pos < payload; ++n) {
        const uint16_t hl = n == 0 ? ihl : later_hl;
        const uint32_t room = mtu > hl ? (mtu - hl) & ~7u : 0;
        rte_mbuf* fm = n < max && room ? rte_pktmbuf_alloc(pool) : nullptr;
        const uint32_t len = std::min<uint32_t>(room, payload - pos);
        uint8_t* d = fm ? reinterpret_cast<uint8_t*>(rte_pktmbuf_append(fm, static_cast<uint16_t>(l2 + hl + len))) : nullptr;
        if (!d) {
            if (fm) rte_pktmbuf_free(fm);
            for (unsigned k = 0; k < n; ++k) rte_pktmbuf_free(out[k]);
            return 0;
        }
        std::memcpy(d, f, l2 + 20u);
        uint8_t* h = d + l2;
        if (n == 0) std::memcpy(h + 20, ip + 20, ihl - 20u);
        else std::memcpy(h + 20, opts, olen);
        h[0] = static_cast<uint8_t>(0x40 | hl / 4);
        const bool more = pos + len < payload || base_mf;
        const rte_be16_t tl = rte_cpu_to_be_16(static_cast<uint16_t>(hl + len));
        const rte_be16_t fo = rte_cpu_to_be_16(static_cast<uint16_t>(((base + pos) / 8) | (more ? RTE_IPV4_HDR_MF_FLAG : 0)));
        std::memcpy(h + 2, &tl, 2);
        std::memcpy(h + 6, &fo, 2);
        h[10] = h[11] = 0;
        const uint16_t c = inet_csum(h, hl);
        std::memcpy(h + 10, &c, 2);
        std::memcpy(h + hl, ip + ihl + pos, len);
        out[n] = fm;
        pos += len;
    }
    return n;
}

}  // namespace svcgate::dp
