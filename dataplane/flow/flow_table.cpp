#include "dataplane/flow/flow_table.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <rte_hash_crc.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include "dataplane/base/rcu.h"
#include "dataplane/base/table_memory.h"

namespace svcgate::dp {

namespace {

template <typename T>
T* alloc_zeroed(size_t n) noexcept {
    void* p = table_alloc(n * sizeof(T), alignof(T));  // huge pages for the large ones
    if (p) std::memset(p, 0, table_layout(n * sizeof(T), alignof(T)).bytes);
    return static_cast<T*>(p);
}
template <typename T>
void free_table(T* p, size_t n) noexcept {
    table_free(p, n * sizeof(T), alignof(T));
}

constexpr uint32_t kSeed1 = 0x9747b28c;

}  // namespace

template <typename K>
std::unique_ptr<BasicFlowTable<K>> BasicFlowTable<K>::create(const Params& p) noexcept {
    std::unique_ptr<BasicFlowTable> t(new (std::nothrow) BasicFlowTable(p));
    if (!t || !t->init()) return nullptr;
    return t;
}

template <typename K>
BasicFlowTable<K>::BasicFlowTable(const Params& p) noexcept
    : capacity_(std::max<uint32_t>(p.capacity, p.owners)),
      n_owners_(std::max<uint16_t>(p.owners, 1)),
      single_writer_(n_owners_ == 1),
      // Two keys per flow, at most half of the slots used: buckets = capacity * 2 / (7 / 2). Any
      // count, not a power of two: a hash maps onto it by multiply-shift (Lemire's fast range),
      // so 10M flows take 5.7M buckets, not 8M (37 B of index per flow instead of 51).
      n_buckets_(std::max<uint32_t>(
          p.index_buckets ? p.index_buckets : static_cast<uint32_t>((uint64_t{capacity_} * 4 + 6) / 7), 2)),
      qsbr_(p.qsbr),
      scanner_(p.scanner),
      timeouts_(p.timeouts),
      new_flows_per_source_(p.new_flows_per_source),
      count_(p.count) {}

template <typename K>
bool BasicFlowTable<K>::init() noexcept {
    flows_ = alloc_zeroed<Flow>(capacity_);
    buckets_ = alloc_zeroed<Bucket>(n_buckets_);
    owners_ = alloc_zeroed<Owner>(n_owners_);
    free_mem_ = alloc_zeroed<uint32_t>(capacity_);
    limbo_mem_ = alloc_zeroed<uint32_t>(capacity_);
    if (!flows_ || !buckets_ || !owners_ || !free_mem_ || !limbo_mem_) return false;
    if (count_ && !(counters_ = alloc_zeroed<FlowCounters>(capacity_))) return false;
    if (qsbr_ && scanner_ != kNoScanner && rte_rcu_qsbr_thread_register(qsbr_, scanner_) != 0) return false;
    for (uint32_t i = 0; i < capacity_; ++i) new (&flows_[i]) Flow{};
    uint32_t per = capacity_ / n_owners_;
    reserve_ = std::min(std::max(per / 64, 256u), per / 4);
    for (uint16_t w = 0; w < n_owners_; ++w) {
        Owner& o = *new (&owners_[w]) Owner{};
        o.lo = w * per;
        o.hi = (w + 1 == n_owners_) ? capacity_ : o.lo + per;
        o.free = free_mem_ + o.lo;
        o.limbo = limbo_mem_ + o.lo;
        // Stack with the lowest id on top: a fresh table fills from the start of the range.
        for (uint32_t id = o.hi; id > o.lo; --id) o.free[o.n_free++] = id - 1;
    }
    return true;
}

template <typename K>
BasicFlowTable<K>::~BasicFlowTable() {
    free_table(flows_, capacity_);
    free_table(buckets_, n_buckets_);
    free_table(owners_, n_owners_);
    free_table(free_mem_, capacity_);
    free_table(limbo_mem_, capacity_);
    if (counters_) free_table(counters_, capacity_);
}

template <typename K>
uint32_t BasicFlowTable<K>::live_total() const noexcept {
    uint32_t n = 0;
    for (uint16_t w = 0; w < n_owners_; ++w) n += owners_[w].live.load(std::memory_order_relaxed);
    return n;
}

template <typename K>
[[gnu::always_inline]] inline typename BasicFlowTable<K>::Hash BasicFlowTable<K>::hash(const K& k) const noexcept {
    static_assert(sizeof(K) % 8 == 0);
    uint64_t a, b;
    std::memcpy(&a, &k, 8);
    std::memcpy(&b, reinterpret_cast<const uint8_t*>(&k) + 8, 8);
    uint32_t c = rte_hash_crc_8byte(a, kSeed1);
    // Longer keys (IPv6) fold their further words into both: a chain of CRCs for the first
    // bucket, a multiply-xor into `a` for the mix below. A 16-byte key does exactly what it did.
    for (size_t off = 16; off < sizeof(K); off += 8) {
        uint64_t w;
        std::memcpy(&w, reinterpret_cast<const uint8_t*>(&k) + off, 8);
        c = rte_hash_crc_8byte(w, c);
        a = (a ^ w) * 0x9e3779b97f4a7c15ull + off;
    }
    // First bucket: CRC32c. The second bucket and the signature come from a multiplicative mix
    // (a second CRC with another seed differs from the first by a constant, as CRC is affine in
    // its seed: every bucket would have the same partner and two-choice hashing would be lost).
    const uint32_t h1 = rte_hash_crc_8byte(b, c);
    uint64_t x = a ^ (b * 0x9e3779b97f4a7c15ull);
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 29;
    // The signature's bit 0 is set: an empty slot (0) never matches.
    auto range = [this](uint32_t v) { return static_cast<uint32_t>((uint64_t{v} * n_buckets_) >> 32); };
    Hash h{.b1 = range(h1), .b2 = range(static_cast<uint32_t>(x)), .sig = static_cast<uint32_t>(x >> 33) | 1u};
    if (h.b2 == h.b1) h.b2 = h.b1 + 1 == n_buckets_ ? 0 : h.b1 + 1;
    return h;
}

template <typename K>
[[gnu::always_inline]] inline FlowRef BasicFlowTable<K>::probe_bucket(const K& k, uint32_t b,
                                                                      uint32_t sig) const noexcept {
    const Bucket& bk = buckets_[b];
    for (unsigned m = matches(b, sig); m; m &= m - 1) {
        // acquire: pairs with the release store or CAS that published the slot, so the record's
        // keys written before are visible to the compare below. The slot may have changed since
        // matches() read it: checked again.
        const uint64_t v = bk.slot[std::countr_zero(m)].load(std::memory_order_acquire);
        if ((v & 0x7fffffffu) != sig) continue;
        const uint32_t id = static_cast<uint32_t>(v >> 32) - 1;
        const auto d = static_cast<Direction>((v >> 31) & 1);
        if (flows_[id].key[static_cast<unsigned>(d)] == k) return FlowRef{id, d};
    }
    return FlowRef{};
}

template <typename K>
[[gnu::always_inline]] inline FlowRef BasicFlowTable<K>::probe(const K& k, const Hash& h) const noexcept {
    for (;;) {
        const uint64_t moved = moves_.load(std::memory_order_acquire);
        FlowRef r = probe_bucket(k, h.b1, h.sig);
        if (!r.hit() && spills(h.b1)) r = probe_bucket(k, h.b2, h.sig);
        if (r.hit()) return r;
        // A miss while an entry moved may have read its old slot cleared and its new one not
        // yet: the move's count was stored before that clear (release), so it shows here.
        std::atomic_thread_fence(std::memory_order_acquire);
        if (moves_.load(std::memory_order_relaxed) == moved) return r;
    }
}

template <typename K>
FlowRef BasicFlowTable<K>::lookup(const K& k) const noexcept {
    return probe(k, hash(k));
}

template <typename K>
[[gnu::always_inline]] inline unsigned BasicFlowTable<K>::slots_where(uint32_t b, uint64_t keep,
                                                                      uint64_t want) const noexcept {
    const Bucket& bk = buckets_[b];
#if defined(__AVX2__)
    // Eight slots in two loads and compares; no branch per slot. Each aligned 8-byte lane is
    // read whole (relaxed: callers that go on to a record fence or load the slot with acquire).
    const __m256i k = _mm256_set1_epi64x(static_cast<long long>(keep)),
                  w = _mm256_set1_epi64x(static_cast<long long>(want));
    const __m256i s0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(&bk.slot[0]));
    const __m256i s1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(&bk.slot[4]));
    return static_cast<unsigned>(
               _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(s0, k), w))) |
               _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(s1, k), w))) << 4) &
        kSlotMask;  // lane 7 is the spill count and the lock
#else
    unsigned m = 0;
    for (unsigned i = 0; i < kSlots; ++i)
        m |= unsigned{(bk.slot[i].load(std::memory_order_relaxed) & keep) == want} << i;
    return m;
#endif
}

template <typename K>
[[gnu::always_inline]] inline unsigned BasicFlowTable<K>::matches(uint32_t b, uint32_t sig) const noexcept {
    // The record a slot names is checked by key afterwards. (A signature has bit 0 set: an empty
    // slot never matches.)
    const unsigned m = slots_where(b, 0x7fffffff, sig);
    if (m) std::atomic_thread_fence(std::memory_order_acquire);
    return m;
}

template <typename K>
[[gnu::always_inline]] inline uint64_t BasicFlowTable<K>::candidate(uint32_t b, uint32_t sig) const noexcept {
    const unsigned m = matches(b, sig);
    return m ? buckets_[b].slot[std::countr_zero(m)].load(std::memory_order_acquire) : 0;
}

// Every cache line of a record: an IPv4 record is one line, an IPv6 record two (its reply key
// straddles them, and the state the established stage reads is in the second).
template <typename Flow>
inline void prefetch_record(const Flow* f, bool for_write = false) noexcept {
    const auto* p = reinterpret_cast<const char*>(f);
    for (size_t off = 0; off < sizeof(Flow); off += RTE_CACHE_LINE_SIZE) {
        if (for_write)
            __builtin_prefetch(p + off, 1, 3);
        else
            rte_prefetch0(p + off);
    }
}

template <typename K>
unsigned BasicFlowTable<K>::lookup_bulk(const K* const* keys, unsigned n, FlowRef* out, KeyHash* hashes,
                                        const Ahead* ahead) const noexcept {
    // Three passes over the burst so that each one's memory accesses overlap (rte_hash's bulk
    // lookup does the same): hash and prefetch the first bucket; find the candidate slot and
    // prefetch its record (a key not in a bucket that spills: prefetch the second bucket, and
    // look there in a pass of its own); compare keys.
    Hash local[kBurst];
    Hash* const h = hashes ? hashes : local;  // the caller's array, when it wants them
    uint64_t cand[kBurst];
    uint8_t second[kBurst];
    unsigned n_second = 0;
    n = std::min<unsigned>(n, kBurst);
    const uint64_t moved = moves_.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) {
        h[i] = hash(*keys[i]);
        rte_prefetch0(&buckets_[h[i].b1]);
    }
    if (ahead) ahead->fn(ahead->arg);
    for (unsigned i = 0; i < n; ++i) {
        const uint64_t v = candidate(h[i].b1, h[i].sig);
        cand[i] = v;
        if (v) {
            prefetch_record(&flows_[static_cast<uint32_t>(v >> 32) - 1]);
        } else if (spills(h[i].b1)) [[unlikely]] {
            rte_prefetch0(&buckets_[h[i].b2]);
            second[n_second++] = static_cast<uint8_t>(i);
        }
    }
    for (unsigned j = 0; j < n_second; ++j) {
        const unsigned i = second[j];
        if ((cand[i] = candidate(h[i].b2, h[i].sig)))
            prefetch_record(&flows_[static_cast<uint32_t>(cand[i] >> 32) - 1]);
    }
    unsigned misses = 0;
    for (unsigned i = 0; i < n; ++i) {
        const uint64_t v = cand[i];
        if (v == 0) {
            out[i] = FlowRef{};
            ++misses;
            continue;
        }
        const uint32_t id = static_cast<uint32_t>(v >> 32) - 1;
        const auto d = static_cast<Direction>((v >> 31) & 1);
        // A signature collision (or a slot that changed meanwhile): the full probe decides.
        out[i] = flows_[id].key[static_cast<unsigned>(d)] == *keys[i] ? FlowRef{id, d} : probe(*keys[i], h[i]);
        misses += !out[i].hit();
    }
    if (misses) {
        // Entries moved meanwhile (rare: only inserts into two full buckets move one): each miss
        // looks again, as probe() does.
        std::atomic_thread_fence(std::memory_order_acquire);
        if (moves_.load(std::memory_order_relaxed) != moved) {
            misses = 0;
            for (unsigned i = 0; i < n; ++i) {
                if (!out[i].hit()) out[i] = probe(*keys[i], h[i]);
                misses += !out[i].hit();
            }
        }
    }
    return misses;
}

template <typename K>
[[gnu::always_inline]] inline void BasicFlowTable<K>::add_spill(uint32_t b, int delta) noexcept {
    auto& c = buckets_[b].spill;
    if (single_writer_)
        c.store(c.load(std::memory_order_relaxed) + static_cast<uint32_t>(delta), std::memory_order_relaxed);
    else
        c.fetch_add(static_cast<uint32_t>(delta), std::memory_order_relaxed);
}

template <typename K>
[[gnu::always_inline]] inline unsigned BasicFlowTable<K>::claim_in(uint32_t b, uint64_t value) noexcept {
    for (unsigned empty = slots_where(b, ~uint64_t{0}, 0); empty; empty &= empty - 1) {
        const unsigned i = std::countr_zero(empty);
        auto& s = buckets_[b].slot[i];
        // release: the record written before this store is visible to any reader that acquires
        // the slot. A lone writer stores; writers that share the index claim by CAS (another may
        // have taken the slot since it was read empty).
        if (single_writer_) {
            s.store(value, std::memory_order_release);
            return i;
        }
        uint64_t expected = 0;
        if (s.compare_exchange_strong(expected, value, std::memory_order_release, std::memory_order_relaxed)) return i;
    }
    return kSlots;
}

template <typename K>
bool BasicFlowTable<K>::make_room(uint32_t b, unsigned depth) noexcept {
    // A cuckoo step: an entry whose other bucket has room moves there; with `depth`, one whose
    // other bucket is full first makes room there the same way. See "Moves" in the header.
    for (unsigned used = ~slots_where(b, ~uint64_t{0}, 0) & kSlotMask; used; used &= used - 1) {
        auto& from = buckets_[b].slot[std::countr_zero(used)];
        const uint64_t v = from.load(std::memory_order_acquire);
        if (v == 0) continue;
        const Flow& f = flows_[static_cast<uint32_t>(v >> 32) - 1];
        if (!f.live.load(std::memory_order_relaxed)) continue;  // being removed: left to its owner
        const Hash e = hash(f.key[(v >> 31) & 1]);
        const bool in_first = e.b1 == b;
        const uint32_t to = in_first ? e.b2 : e.b1;
        unsigned at = claim_in(to, v);
        if (at == kSlots && depth && make_room(to, depth - 1)) at = claim_in(to, v);
        if (at == kSlots) continue;
        if (in_first) add_spill(b, 1);  // before the old slot is cleared: readers look on
        moves_.fetch_add(1, std::memory_order_relaxed);
        // After the count (see probe).
        uint64_t expected = v;
        if (single_writer_) {
            from.store(0, std::memory_order_release);
        } else if (!from.compare_exchange_strong(expected, 0, std::memory_order_release, std::memory_order_relaxed)) {
            // Its owner removed it meanwhile (or another writer moved it): the new copy goes too.
            expected = v;
            buckets_[to].slot[at].compare_exchange_strong(expected, 0, std::memory_order_release,
                                                          std::memory_order_relaxed);
            if (in_first) add_spill(b, -1);
            continue;
        }
        if (!in_first) add_spill(to, -1);
        return true;
    }
    return false;
}

template <typename K>
[[gnu::always_inline]] inline bool BasicFlowTable<K>::claim_slot(const Hash& h, uint64_t value) noexcept {
    // Another writer may take a slot just emptied for this entry: then again, a few times.
    for (unsigned attempt = 0; attempt < 4; ++attempt) {
        if (claim_in(h.b1, value) != kSlots) return true;
        // The first bucket counts the tuple before it is published in the second: a reader that
        // finds the slot there went there by the count.
        add_spill(h.b1, 1);
        if (claim_in(h.b2, value) != kSlots) return true;
        add_spill(h.b1, -1);
        bool moved = false;
        for (uint32_t b : {h.b1, h.b2}) {
            if (!make_room(b, kMoveDepth)) continue;
            moved = true;
            if (b == h.b2) add_spill(h.b1, 1);
            if (claim_in(b, value) != kSlots) return true;
            if (b == h.b2) add_spill(h.b1, -1);
        }
        if (!moved) return false;
    }
    return false;
}

template <typename K>
void BasicFlowTable<K>::clear_slot(const Hash& h, uint64_t value) noexcept {
    // Only the record's owner removes its entries. A lone writer stores; where writers share the
    // index another may be moving this entry, so the copy found first is cleared by CAS, and the
    // search is made again when it moved away meanwhile (a move claims before it clears: some
    // copy is always there).
    for (;;) {
        for (uint32_t b : {h.b1, h.b2}) {
            for (unsigned m = slots_where(b, ~uint64_t{0}, value); m; m &= m - 1) {
                auto& s = buckets_[b].slot[std::countr_zero(m)];
                uint64_t expected = value;
                if (single_writer_)
                    s.store(0, std::memory_order_release);
                else if (!s.compare_exchange_strong(expected, 0, std::memory_order_release, std::memory_order_relaxed))
                    continue;
                if (b == h.b2) add_spill(h.b1, -1);  // after: readers that see the count look on
                return;
            }
        }
        if (single_writer_) return;  // not there (never with a lone writer)
        rte_pause();
    }
}

template <typename K>
void BasicFlowTable<K>::lock_buckets(uint32_t a, uint32_t b) noexcept {
    auto spin = [this](uint32_t s) {
        uint32_t expected = 0;
        // acquire: the critical section's probes see every insert that released this lock.
        while (!buckets_[s].lock.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                                       std::memory_order_relaxed)) {
            expected = 0;
            rte_pause();
        }
    };
    if (a > b) std::swap(a, b);  // one global order: two inserting workers never deadlock
    spin(a);
    if (b != a) spin(b);
}

template <typename K>
void BasicFlowTable<K>::unlock_buckets(uint32_t a, uint32_t b) noexcept {
    buckets_[a].lock.store(0, std::memory_order_release);
    if (b != a) buckets_[b].lock.store(0, std::memory_order_release);
}

template <typename K>
[[gnu::always_inline]] inline uint32_t BasicFlowTable<K>::alloc_id(Owner& o) noexcept {
    if (o.n_free == 0) reclaim(o);
    if (o.n_free == 0) return FlowRef::kMiss;
    return o.free[--o.n_free];
}

template <typename K>
void BasicFlowTable<K>::retire_id(Owner& o, uint32_t id) noexcept {
    if (!qsbr_) {
        o.free[o.n_free++] = id;
        return;
    }
    const uint32_t span = o.hi - o.lo;
    o.limbo[(o.limbo_head + o.limbo_len) % span] = id;
    ++o.limbo_len;
    if (++o.open == kBatchIds) close_batch(o);
}

template <typename K>
void BasicFlowTable<K>::close_batch(Owner& o) noexcept {
    if (o.open == 0) return;
    // rte_rcu_qsbr_start: readers that may still hold any of the batch's ids (all unlinked
    // before this call) have all passed a quiescent state once the token is reached.
    const uint64_t token = rte_rcu_qsbr_start(qsbr_);
    if (o.batch_len == kBatches) {
        typename Owner::Batch& last = o.batches[(o.batch_head + o.batch_len - 1) % kBatches];
        last.token = token;
        last.count += o.open;
    } else {
        o.batches[(o.batch_head + o.batch_len) % kBatches] = typename Owner::Batch{token, o.open};
        ++o.batch_len;
    }
    o.open = 0;
}

template <typename K>
void BasicFlowTable<K>::reclaim(Owner& o) noexcept {
    if (o.limbo_len == 0) return;
    close_batch(o);
    const uint32_t span = o.hi - o.lo;
    const uint64_t done = rcu_acknowledged(qsbr_);  // one look at the readers for them all
    while (o.batch_len > 0) {
        const typename Owner::Batch& b = o.batches[o.batch_head];
        if (b.token > done) break;  // FIFO: later ones are newer
        for (uint32_t k = 0; k < b.count; ++k) {
            o.free[o.n_free++] = o.limbo[o.limbo_head];
            o.limbo_head = (o.limbo_head + 1) % span;
        }
        o.limbo_len -= b.count;
        o.batch_head = (o.batch_head + 1) % kBatches;
        --o.batch_len;
    }
}

template <typename K>
void BasicFlowTable<K>::prepare_insert(uint16_t owner, const FlowInit& init, unsigned nth, InsertHint& h,
                                       const KeyHash* h0) const noexcept {
    // Written in place: a hint built on the stack and copied was read back whole over its
    // narrower stores (a store-forwarding stall, a seventh of the selection's samples).
    const bool two = !(init.flags & kFlowOneKey);
    h.h0 = h0 ? *h0 : hash(init.key[0]);
    h.h1 = two ? hash(init.key[1]) : h.h0;
    // key[0]'s bucket: the lookup that missed has just read it. key[1]'s first: where it goes
    // unless that is full, and (where writers share the table) the lock the insert takes.
    if (two && single_writer_)
        rte_prefetch0(&buckets_[h.h1.b1]);
    else if (two)
        __builtin_prefetch(&buckets_[h.h1.b1], 1, 3);
    // The free stack pops from its top; ids reclaimed meanwhile only make this a wasted prefetch.
    const Owner& o = owners_[owner];
    if (nth < o.n_free) {
        const uint32_t id = o.free[o.n_free - 1 - nth];
        prefetch_record(&flows_[id], true);
        if (counters_) __builtin_prefetch(&counters_[id], 1, 3);  // zeroed by the insert
    }
}

template <typename K>
InsertResult BasicFlowTable<K>::insert(uint16_t owner, const FlowInit& init, uint32_t now,
                                       const InsertHint* hint) noexcept {
    const bool two = !(init.flags & kFlowOneKey);
    const Hash h0 = hint ? hint->h0 : hash(init.key[0]);
    const Hash h1 = hint ? hint->h1 : two ? hash(init.key[1]) : h0;
    // Inserts of one tuple by two writers serialise on its first bucket's lock; a lone writer has
    // no one to serialise with (rte_hash takes its writer lock only with
    // RTE_HASH_EXTRA_FLAGS_MULTI_WRITER_ADD).
    if (!single_writer_) lock_buckets(h0.b1, h1.b1);

    InsertResult r{InsertStatus::inserted, FlowRef::kMiss};
    if (FlowRef e = probe(init.key[0], h0); e.hit()) {
        r = {InsertStatus::exists, e.id};
    } else if (two && probe(init.key[1], h1).hit()) {
        r = {InsertStatus::reply_clash, FlowRef::kMiss};
    } else if (Owner& o = owners_[owner]; (r.id = alloc_id(o)) == FlowRef::kMiss) {
        r.status = InsertStatus::full;
    } else {
        Flow& f = flows_[r.id];
        f.key[0] = init.key[0];
        f.key[1] = init.key[1];
        f.target.store(init.target, std::memory_order_relaxed);
        f.svc_id = init.svc_id;
        f.gen = init.gen;
        f.aux = init.aux;
        f.kind = init.kind;
        f.flags = init.flags;
        f.owner = static_cast<uint8_t>(owner);
        f.origin.store(init.origin, std::memory_order_relaxed);
        f.state.store(init.state, std::memory_order_relaxed);
        f.last_seen.store(now, std::memory_order_relaxed);
        if (counters_) {
            FlowCounters& c = counters_[r.id];
            for (unsigned d = 0; d < 2; ++d)
                c.packets[d].store(0, std::memory_order_relaxed), c.octets[d].store(0, std::memory_order_relaxed);
        }
        // release: a scan by id that sees live == 1 (acquire) sees the fields above.
        f.live.store(1, std::memory_order_release);
        bool ok = claim_slot(h0, encode(r.id, Direction::original, h0.sig));
        const bool published = ok;
        if (ok && two && !claim_slot(h1, encode(r.id, Direction::reply, h1.sig))) {
            clear_slot(h0, encode(r.id, Direction::original, h0.sig));
            ok = false;
        }
        if (ok) {
            o.live.store(o.live.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        } else {
            f.live.store(0, std::memory_order_relaxed);
            // key[0] was in the index for a moment: a reader, or a writer moving the entry, may
            // still hold the id, so it waits for a grace period. Never published: free at once.
            if (published)
                retire_id(o, r.id);
            else
                o.free[o.n_free++] = r.id;
            r = {InsertStatus::full, FlowRef::kMiss};
        }
    }
    if (!single_writer_) unlock_buckets(h0.b1, h1.b1);
    return r;
}

template <typename K>
void BasicFlowTable<K>::remove(uint32_t id) noexcept {
    Flow& f = flows_[id];
    if (!f.live.load(std::memory_order_relaxed)) return;
    const Hash h0 = hash(f.key[0]);
    clear_slot(h0, encode(id, Direction::original, h0.sig));
    if (!(f.flags & kFlowOneKey)) {
        const Hash h1 = hash(f.key[1]);
        clear_slot(h1, encode(id, Direction::reply, h1.sig));
    }
    f.live.store(0, std::memory_order_relaxed);
    Owner& o = owners_[f.owner];
    o.live.store(o.live.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    retire_id(o, id);
}

template <typename K>
typename BasicFlowTable<K>::IndexStats BasicFlowTable<K>::index_stats() const noexcept {
    IndexStats st{.buckets = n_buckets_, .moves = moves_.load(std::memory_order_relaxed)};
    for (uint32_t b = 0; b < n_buckets_; ++b) {
        st.entries += static_cast<uint64_t>(std::popcount(~slots_where(b, ~uint64_t{0}, 0) & kSlotMask));
        const uint64_t spill = buckets_[b].spill.load(std::memory_order_relaxed);
        st.in_second += spill;
        st.spilling_buckets += spill != 0;
    }
    return st;
}

template class BasicFlowTable<FlowKey>;
template class BasicFlowTable<FlowKey6>;

}  // namespace svcgate::dp
