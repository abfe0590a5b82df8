#include "dataplane/fragment/frag_table.h"

#include <cstring>

#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_random.h>

#include "dataplane/packet/meta.h"

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
        if (off < e->to[r] && e->from[r] < end) return poison(*e, a, DropReason::frag_overlap);     // RFC 5722
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

}  // namespace svcgate::dp
