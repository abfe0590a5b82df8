// The flow table: per-connection sticky state shared by all workers (conntrack's job).
//
// Layout. A flow is one record holding both tuples (original and reply) and its state: one cache
// line for IPv4 (FlowTable), two for IPv6 (FlowTable6: 40-byte tuples), each family a table of
// its own so IPv4 keeps its size and speed (VPP's bihash 16_8 / 48_8, Katran's v4 and v6 maps);
// records live in one array whose id space is split evenly between owners (workers).
//
// The index: 64-byte buckets of seven 8-byte slots (record id, direction, 31-bit signature) and
// a spill count. Every tuple has two candidate buckets, its first and its second, and lives in
// its first whenever that has room (Cuckoo++'s placement): a lookup reads one line, the first
// bucket, before the record. Only when the first bucket is full does a tuple go to its second,
// and the first counts it in its spill; a lookup that finds no match in a bucket whose spill is
// zero is a miss without reading a second line. When both are full, one of the owner's entries
// in either moves to its own other bucket to make room (a cuckoo step, two at most: an entry
// whose other bucket is full may first move one of that bucket's). The index is at most
// 50% loaded (4 tuples a bucket, with every record used): simulated with churn, 90% of the
// records used put 3.1% of tuples in their second bucket and make 6.5% of buckets spill (100%:
// 4.9% and 10.8%), and no insert failed (FlowTable tests count them). Per flow: 64 B record +
// 2 slots at 50% load (36.6 B: 4/7 bucket) + the owner's free-id stack (4 B) and RCU limbo FIFO
// (4 B: one token a batch of ids) = 109 B for IPv4, 173 B for IPv6 (bench/micro/memory.cpp
// BM_BytesPerFlow measures both).
//
// Concurrency contract.
// - lookup / lookup_bulk: any thread, lock-free. A slot is loaded with acquire; the record it
//   names was fully written before the slot was published (release CAS), and it is not reused
//   until every reader has passed a quiescent state (rte_rcu_qsbr), so the key compare that
//   follows reads a stable record.
// - insert(owner, ...): the owning worker only (it allocates from its own id range). Inserts of
//   the same tuple from different workers serialise on the lock word of the tuple's first bucket
//   (the line its lookup has just read, in a word slot compares leave out), so two
//   workers that race on the first packets of one new flow (the DNS A/AAAA race) converge on one
//   record: the loser gets the winner's id. Slot claims are CAS, so unrelated inserts never
//   clash. A table of one owner (one worker, no flow replication) has a single writer: no
//   bucket locks, and slots are claimed by plain release stores.
// - remove / expire_step: the owning worker only. A slot naming a record changes only by its
//   owner, so it is cleared by a plain release store; the id goes to a
//   limbo FIFO and is reused only after a grace period. The FIFO's ids are tagged in batches: a
//   batch closes after kBatchIds ids, or when the owner next reclaims (each housekeeping step,
//   or an insert that finds no free id), under an RCU token taken then, after every one of its
//   ids was unlinked; it is reused once that token is acknowledged. Without a QSBR variable
//   (single-threaded tools and tests) ids are reused at once.
// - Moves (the cuckoo step): an inserting writer moves an entry by claiming a slot in the
//   entry's other bucket first (the entry is then in both places), counting the move in moves_,
//   and clearing the old slot last (release). A reader that saw the old slot empty and missed
//   sees moves_ changed and looks again, so a lookup never misses a flow that is in the table
//   while it looks (a spill count read in the same line as a slot may be older than the slot).
//   Writers that share the index may move each other's entries (a worker that fell behind would
//   otherwise find two buckets full of another's), so there every slot change is a CAS of the
//   exact value: the old slot's clear fails when its owner removed the flow meanwhile, and the
//   mover takes its new copy back; an owner's remove clears whichever copy it finds first, and
//   the mover's clear of the other then either completes the move or fails and takes it back.
//   Ids are not reused within a grace period, and a writer is not quiescent inside an insert, so
//   a slot's value names one record throughout.
// - Flow::last_seen and Flow::state are atomics any worker may update; everything else in a
//   record is immutable while the record is published.
// - Scans by id (the reload sweep, `svcgatectl flows`): the control thread reads records that a
//   worker may remove and reuse meanwhile. It does so inside a ScanGuard, which puts its own
//   QSBR thread id (Params::scanner) online: no id is reused while it reads. Flow::live is
//   stored with release after the record's fields, so a scan that loads it with acquire sees
//   them whole.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>

#include "dataplane/flow/conntrack.h"
#include "dataplane/flow/flow_state.h"
#include "dataplane/base/types.h"

namespace svcgate::dp {

enum class FlowKind : uint8_t { nat = 0, affinity = 1 };
// conntrack's protocol number for session-affinity records in the flow table (never on a wire:
// IANA reserved 255 would be read as "raw").
inline constexpr uint8_t kAffinityProto = 0xfe;

enum FlowFlag : uint8_t {
    kFlowMasq = 0x01,    // the source was masqueraded (SNAT)
    kFlowOneKey = 0x02,  // only key[0] is indexed (affinity records)
    // The client's address kept where kube-proxy would masquerade it (client_ip preserve): a SYN
    // resent before any reply counts as the way back missing (StatsTable::no_return).
    kFlowPreserved = 0x04,
};

// What a NAT flow counts under: the stable slots of its service port and endpoint (StatsTable),
// which survive reloads, so the flow keeps its attribution and its place in the active counts for
// as long as its endpoint exists.
struct NatTarget {
    uint32_t service = 0;
    uint32_t endpoint = 0;

    constexpr uint64_t encode() const noexcept { return uint64_t{service} << 32 | endpoint; }
    static constexpr NatTarget decode(uint64_t v) noexcept {
        return NatTarget{static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
    }
};

template <typename K>
struct alignas(64) BasicFlow {
    using Key = K;
    K key[2];  // [0] original (client → VIP), [1] reply (endpoint → client/SNAT)
    // One word whose meaning is the kind's: a NatTarget (immutable) for nat records, the pinned
    // EndpointKey for affinity records (updated in place when that endpoint has left the
    // Service). Read it through nat() / pinned().
    std::atomic<uint64_t> target{0};
    uint32_t svc_id = 0;                 // ServicePort::id: stable across reloads
    uint32_t gen = 0;                    // snapshot generation the flow was created under
    uint32_t aux = 0;                    // affinity: timeout in seconds
    std::atomic<uint32_t> last_seen{0};  // seconds, the table's clock
    std::atomic<uint8_t> state{0};       // TcpState or DgramState
    FlowKind kind = FlowKind::nat;
    uint8_t flags = 0;
    uint8_t owner = 0;
    std::atomic<uint8_t> live{0};  // 1 while published; written by the owner only
    // Flow replication (control/ha/sync.h): 0 for a flow of this gateway, k for a replica that came
    // from ha.peers[k - 1]. A worker that serves a packet of a replica makes it this gateway's
    // (stores 0: a takeover) and replicates it in turn.
    std::atomic<uint8_t> origin{0};

    NatTarget nat() const noexcept { return NatTarget::decode(target.load(std::memory_order_relaxed)); }
    // EndpointKey::word() of the pinned endpoint.
    uint64_t pinned() const noexcept { return target.load(std::memory_order_relaxed); }
    void pin(const EndpointKey& e) noexcept { target.store(e.word(), std::memory_order_relaxed); }
};
using Flow = BasicFlow<FlowKey>;
using Flow6 = BasicFlow<FlowKey6>;
static_assert(sizeof(Flow) == 64, "an IPv4 flow record is one cache line");
static_assert(sizeof(Flow6) == 128, "an IPv6 flow record is two cache lines");

// A flow's packets and octets (IP header and payload) in each direction, [0] original and [1]
// reply, kept beside the records when the table is asked to count (FlowTableParams::count, for
// the NAT events' ends: nat_event.h). Each direction has one writer, the worker its queue's RSS
// hash gives it (or the creating worker for the first packet), so an add is a relaxed load and
// store, not a locked instruction; readers may see a count one burst old. insert() zeroes them.
struct alignas(32) FlowCounters {
    std::atomic<uint64_t> packets[2];
    std::atomic<uint64_t> octets[2];

    void add(Direction d, uint32_t bytes) noexcept {
        const unsigned i = d == Direction::original ? 0 : 1;
        packets[i].store(packets[i].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        octets[i].store(octets[i].load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
    }
};
static_assert(sizeof(FlowCounters) == 32, "two flows' counters to a cache line");

// What a new flow starts with (a plain value: Flow itself holds atomics).
template <typename K>
struct BasicFlowInit {
    K key[2];
    uint64_t target = 0;  // NatTarget or EndpointKey, encoded
    uint32_t svc_id = 0;
    uint32_t gen = 0;
    uint32_t aux = 0;
    uint8_t state = 0;
    FlowKind kind = FlowKind::nat;
    uint8_t flags = 0;
    uint8_t origin = 0;  // 0: this gateway's; k: a replica from ha.peers[k - 1]
};
using FlowInit = BasicFlowInit<FlowKey>;
using FlowInit6 = BasicFlowInit<FlowKey6>;

struct FlowRef {
    static constexpr uint32_t kMiss = UINT32_MAX;
    uint32_t id = kMiss;
    Direction dir = Direction::original;
    bool hit() const noexcept { return id != kMiss; }
};

enum class InsertStatus : uint8_t { inserted, exists, reply_clash, full };
struct InsertResult {
    InsertStatus status;
    uint32_t id;  // inserted or existing record
};

// Where a key lives in the index: its two candidate buckets and its signature.
struct KeyHash {
    uint32_t b1, b2, sig;
};

// A flow's hashes, computed ahead of insert() by prepare_insert(), which also prefetches what the
// insert will touch: a burst's inserts then overlap their cache misses instead of taking them
// one after another.
struct InsertHint {
    KeyHash h0, h1;
};

// Sizes and policies of a flow table (both families take the same).
struct FlowTableParams {
    static constexpr uint32_t kNoScanner = UINT32_MAX;
    uint32_t capacity = 1u << 20;  // flow records (each holds both directions)
    uint16_t owners = 1;           // workers that insert; ids are split evenly
    rte_rcu_qsbr* qsbr = nullptr;  // grace periods for id reuse; null = reuse at once
    Timeouts timeouts{};
    uint32_t scanner = kNoScanner;      // QSBR thread id of the control thread's scans
    uint32_t new_flows_per_source = 0;  // per worker and second; 0 = no cap (source_limit.h)
    // Index buckets; 0: derived from capacity (at most 50% of the slots used). Set only where an
    // index more crowded than that is wanted (tests of the cuckoo step).
    uint32_t index_buckets = 0;
    // Packets and octets per flow and direction (FlowCounters): 32 bytes more per flow, and a
    // second line written by each packet of a known flow. Only for NAT events' ends.
    bool count = false;
};

template <typename K>
class BasicFlowTable {
public:
    using Key = K;
    using Flow = BasicFlow<K>;
    using FlowInit = BasicFlowInit<K>;

    using Params = FlowTableParams;
    static constexpr uint32_t kNoScanner = FlowTableParams::kNoScanner;

    // RAII: the calling thread reads records by id (not through a lookup) for its lifetime.
    class ScanGuard {
    public:
        explicit ScanGuard(const BasicFlowTable& t) noexcept : t_(t) {
            if (t_.qsbr_ && t_.scanner_ != kNoScanner) rte_rcu_qsbr_thread_online(t_.qsbr_, t_.scanner_);
        }
        ~ScanGuard() {
            if (t_.qsbr_ && t_.scanner_ != kNoScanner) rte_rcu_qsbr_thread_offline(t_.qsbr_, t_.scanner_);
        }
        ScanGuard(const ScanGuard&) = delete;
        ScanGuard& operator=(const ScanGuard&) = delete;

    private:
        const BasicFlowTable& t_;
    };

    // nullptr when memory for `capacity` flows cannot be had.
    static std::unique_ptr<BasicFlowTable> create(const Params& p) noexcept;
    ~BasicFlowTable();
    BasicFlowTable(const BasicFlowTable&) = delete;
    BasicFlowTable& operator=(const BasicFlowTable&) = delete;

    [[nodiscard]] FlowRef lookup(const K& k) const noexcept;
    // Bulk lookup in three passes (hash and prefetch the buckets; match signatures and prefetch
    // the records; compare keys), so a burst's misses overlap. Returns the number of misses.
    // `hashes` (optional): each key's hash, for prepare_insert() of a key that missed.
    // `ahead` (optional): the caller's own work, run once the burst's buckets are asked for and
    // before the first is read, so that its misses and theirs are in flight together.
    struct Ahead {
        void (*fn)(void* arg) noexcept;
        void* arg;
    };
    unsigned lookup_bulk(const K* const* keys, unsigned n, FlowRef* out, KeyHash* hashes = nullptr,
                         const Ahead* ahead = nullptr) const noexcept;

    // Publishes a new flow owned by `owner`. Indexes key[1] too unless kFlowOneKey is set.
    // `hint`: from prepare_insert() for this very init (its keys unchanged since).
    [[nodiscard]] InsertResult insert(uint16_t owner, const FlowInit& init, uint32_t now,
                                      const InsertHint* hint = nullptr) noexcept;
    // Hashes `init` into `hint` and prefetches its reply key's buckets (for writing, where writers
    // share the table: the insert locks them)
    // and the record the owner's `nth` next insert will take. Reads only, but the owner's free
    // stack among them: the owning worker only, as insert(). `h0`: key[0]'s hash when the lookup
    // that missed has it.
    void prepare_insert(uint16_t owner, const FlowInit& init, unsigned nth, InsertHint& hint,
                        const KeyHash* h0 = nullptr) const noexcept;
    void remove(uint32_t id) noexcept;

    // Owner's incremental ageing: visits up to `budget` of its records and removes the expired
    // ones, calling on_remove(const Flow&) first. Never blocks.
    template <typename OnRemove>
    unsigned expire_step(uint16_t owner, uint32_t now, unsigned budget, OnRemove&& on_remove) noexcept;

    // Early drop (conntrack's early_drop, for floods of new connections). An owner whose live
    // records leave fewer than its reserve of ids (1/64 of its range, at least 256, at most a
    // quarter) is under pressure; then each new flow first evicts one embryonic record of the
    // same owner, looking at `probes` live records from its own cursor: a TCP connection never
    // established (SYN_SENT, SYN_RECV, SYN_SENT2) or never answered (picked up from a stray ACK),
    // or a datagram flow never answered. An established or answered flow is never evicted: a
    // SYN flood from random sources fills the table only up to the reserve, and a legitimate new
    // connection still finds an id.
    bool under_pressure(uint16_t owner) const noexcept {
        const Owner& o = owners_[owner];
        return o.live.load(std::memory_order_relaxed) + reserve_ > o.hi - o.lo;
    }
    static bool embryonic(const Flow& f) noexcept;
    // Is the flow worth replicating as it now is (control/ha/sync.h)? A connection that has proven
    // itself: TCP answered and past the handshake (its later states too: a replica must learn
    // that it closes), a datagram flow answered; an affinity pin (as long-lived as its flows).
    // Never one a reload marked gone. A SYN flood or a scan proves nothing.
    static bool proven(const Flow& f) noexcept;
    template <typename OnRemove>
    bool early_drop(uint16_t owner, unsigned probes, OnRemove&& on_remove) noexcept;

    // Flow `id`'s counters; null when the table does not count (Params::count).
    bool counting() const noexcept { return counters_ != nullptr; }
    FlowCounters* counters(uint32_t id) const noexcept { return counters_ ? &counters_[id] : nullptr; }
    const FlowCounters* counters_of(const Flow& f) const noexcept {
        return counters_ ? &counters_[static_cast<uint32_t>(&f - flows_)] : nullptr;
    }
    Flow& flow(uint32_t id) noexcept { return flows_[id]; }
    const Flow& flow(uint32_t id) const noexcept { return flows_[id]; }
    uint32_t timeout_of(const Flow& f) const noexcept;

    uint32_t capacity() const noexcept { return capacity_; }
    uint16_t owners() const noexcept { return n_owners_; }
    uint32_t new_flows_per_source() const noexcept { return new_flows_per_source_; }
    uint32_t live_total() const noexcept;
    // Owner `owner`'s ids, [first, second).
    std::pair<uint32_t, uint32_t> owner_ids(uint16_t owner) const noexcept {
        return {owners_[owner].lo, owners_[owner].hi};
    }
    uint32_t owner_live(uint16_t owner) const noexcept { return owners_[owner].live.load(std::memory_order_relaxed); }

    // How the index is used, by a scan of every bucket (tests; too slow for every scrape).
    struct IndexStats {
        uint64_t entries = 0;           // slots in use
        uint64_t in_second = 0;         // of them, tuples in their second bucket (sum of spills)
        uint64_t spilling_buckets = 0;  // buckets with a spill count
        uint64_t buckets = 0;
        uint64_t moves = 0;  // entries moved to their other bucket, ever
    };
    IndexStats index_stats() const noexcept;
    // Entries moved to their other bucket so far (no scan): rising steadily, the index is crowded.
    uint64_t index_moves() const noexcept { return moves_.load(std::memory_order_relaxed); }

private:
    explicit BasicFlowTable(const Params& p) noexcept;
    bool init() noexcept;

    static constexpr unsigned kSlots = 7;
    static constexpr unsigned kSlotMask = (1u << kSlots) - 1;
    static constexpr uint32_t kAgePrefetch = 8;  // records the expiry scan prefetches ahead
    static constexpr uint32_t kBatchIds = 32;    // retired ids a limbo batch closes at
    static constexpr uint32_t kBatches = 64;     // limbo batches an owner keeps apart
    struct alignas(64) Bucket {
        std::atomic<uint64_t> slot[kSlots];
        // Word 7 of the line, which the slots' vector compare reads too and masks off. `spill`:
        // tuples whose first bucket this is, living in their second. `lock`: held by a writer
        // inserting a tuple whose first bucket this is (where writers share the table).
        std::atomic<uint32_t> spill;
        std::atomic<uint32_t> lock;
    };
    static_assert(sizeof(Bucket) == 64, "one bucket per cache line");

    using Hash = KeyHash;
    struct alignas(64) Owner {
        uint32_t lo = 0, hi = 0;   // id range [lo, hi)
        uint32_t* free = nullptr;  // stack of free ids
        uint32_t n_free = 0;
        uint32_t* limbo = nullptr;  // FIFO ring of retired ids waiting for a grace period
        uint32_t limbo_head = 0, limbo_len = 0;
        uint32_t open = 0;  // the FIFO's newest ids, in no batch yet
        // The rest of the FIFO, oldest first: `count` ids under one token. A ring of kBatches;
        // when it is full the newest batch takes the new ids and the newer token (which only
        // makes its older ids wait longer).
        struct Batch {
            uint64_t token;
            uint32_t count;
        };
        Batch batches[kBatches];
        uint32_t batch_head = 0, batch_len = 0;
        uint32_t cursor = 0;            // expiry scan position
        uint32_t drop_cursor = 0;       // early-drop scan position
        std::atomic<uint32_t> live{0};  // written by the owner only; read by the control thread
    };

    Hash hash(const K& k) const noexcept;
    static uint64_t encode(uint32_t id, Direction d, uint32_t sig) noexcept {
        return (uint64_t{id + 1} << 32) | (uint64_t{static_cast<uint8_t>(d)} << 31) | sig;
    }
    // The record of `k`, looking again while entries move (see Moves above).
    FlowRef probe(const K& k, const Hash& h) const noexcept;
    FlowRef probe_bucket(const K& k, uint32_t bucket, uint32_t sig) const noexcept;
    bool spills(uint32_t bucket) const noexcept { return buckets_[bucket].spill.load(std::memory_order_relaxed) != 0; }
    void add_spill(uint32_t bucket, int delta) noexcept;
    // Bucket `bucket`'s slots whose signature is `sig`, as a bit mask (bit i: slot i).
    unsigned matches(uint32_t bucket, uint32_t sig) const noexcept;
    // The first of them (0: none).
    uint64_t candidate(uint32_t bucket, uint32_t sig) const noexcept;
    // Bucket `bucket`'s slots whose bits under `keep` equal `want`, as a bit mask (bit i: slot i).
    unsigned slots_where(uint32_t bucket, uint64_t keep, uint64_t want) const noexcept;
    // Places an entry: its first bucket, else its second, else after a move (make_room).
    bool claim_slot(const Hash& h, uint64_t value) noexcept;
    // The slot of `bucket` it claimed (kSlots: none).
    unsigned claim_in(uint32_t bucket, uint64_t value) noexcept;
    bool make_room(uint32_t bucket, unsigned depth) noexcept;
    static constexpr unsigned kMoveDepth = 1;  // a move may first make room for itself, once
    void clear_slot(const Hash& h, uint64_t value) noexcept;
    // The first buckets of an insert's two keys, in one order (two writers never deadlock).
    void lock_buckets(uint32_t a, uint32_t b) noexcept;
    void unlock_buckets(uint32_t a, uint32_t b) noexcept;
    uint32_t alloc_id(Owner& o) noexcept;
    void retire_id(Owner& o, uint32_t id) noexcept;
    void reclaim(Owner& o) noexcept;
    // The limbo's open ids become a batch under a token taken now.
    void close_batch(Owner& o) noexcept;

    uint32_t capacity_;
    uint16_t n_owners_;
    bool single_writer_;  // one owner: no one to race with on slots and bucket locks
    uint32_t n_buckets_;
    uint32_t reserve_ = 0;  // ids per owner kept free for new flows under pressure
    rte_rcu_qsbr* qsbr_;
    uint32_t scanner_;
    Timeouts timeouts_;
    uint32_t new_flows_per_source_ = 0;
    bool count_ = false;
    Flow* flows_ = nullptr;
    Bucket* buckets_ = nullptr;
    Owner* owners_ = nullptr;
    uint32_t* free_mem_ = nullptr;
    uint32_t* limbo_mem_ = nullptr;
    FlowCounters* counters_ = nullptr;            // Params::count
    alignas(64) std::atomic<uint64_t> moves_{0};  // entries moved so far (cuckoo steps)
};
using FlowTable = BasicFlowTable<FlowKey>;
using FlowTable6 = BasicFlowTable<FlowKey6>;
extern template class BasicFlowTable<FlowKey>;
extern template class BasicFlowTable<FlowKey6>;

template <typename K>
inline uint32_t BasicFlowTable<K>::timeout_of(const Flow& f) const noexcept {
    if (f.kind == FlowKind::affinity) return f.aux;
    const FlowState st = FlowState::load(f.state);
    if (st.gone()) return timeouts_.tcp[static_cast<unsigned>(TcpState::close)];
    switch (static_cast<Proto>(f.key[0].proto)) {
        case Proto::tcp:
            return st.conntrack() < kTcpStates ? timeouts_.tcp[st.conntrack()] : timeouts_.tcp[0];
        case Proto::udp:
        case Proto::sctp:
            return st.dgram_replied() ? timeouts_.udp_replied : timeouts_.udp_unreplied;
        case Proto::icmp:
        case Proto::icmp6:
            return timeouts_.icmp;
    }
    return timeouts_.other;
}

template <typename K>
template <typename OnRemove>
unsigned BasicFlowTable<K>::expire_step(uint16_t owner, uint32_t now, unsigned budget, OnRemove&& on_remove) noexcept {
    Owner& o = owners_[owner];
    reclaim(o);
    unsigned removed = 0;
    uint32_t span = o.hi - o.lo;
    if (span == 0) return 0;
    for (unsigned i = 0; i < budget && o.live.load(std::memory_order_relaxed) > 0; ++i) {
        uint32_t id = o.lo + o.cursor;
        o.cursor = (o.cursor + 1 == span) ? 0 : o.cursor + 1;
        // The line holding `live` of a record some steps ahead: a scan of a table larger than
        // the caches otherwise waits on every record (an IPv6 record's is its second line).
        rte_prefetch0(&flows_[o.lo + (o.cursor + kAgePrefetch) % span].live);
        Flow& f = flows_[id];
        if (!f.live.load(std::memory_order_relaxed)) continue;
        uint32_t seen = f.last_seen.load(std::memory_order_relaxed);
        // Unsigned difference: a record touched "after" now by another worker's clock is young.
        if (static_cast<int32_t>(now - seen) > static_cast<int32_t>(timeout_of(f))) {
            on_remove(static_cast<const Flow&>(f));
            remove(id);
            ++removed;
        }
    }
    return removed;
}

template <typename K>
inline bool BasicFlowTable<K>::embryonic(const Flow& f) noexcept {
    if (f.kind != FlowKind::nat) return false;
    const FlowState st = FlowState::load(f.state);
    switch (static_cast<Proto>(f.key[0].proto)) {
        case Proto::tcp:
            return !st.replied() || st.tcp_handshaking();
        case Proto::udp:
        case Proto::sctp:
            return st == FlowState::of(DgramState::unreplied);
        default:
            return false;
    }
}

template <typename K>
inline bool BasicFlowTable<K>::proven(const Flow& f) noexcept {
    if (f.kind != FlowKind::nat) return true;
    const FlowState st = FlowState::load(f.state);
    if (st.gone()) return false;
    if (static_cast<Proto>(f.key[0].proto) != Proto::tcp) return st.dgram_replied();
    return st.replied() && st.tcp_past_handshake();
}

template <typename K>
template <typename OnRemove>
bool BasicFlowTable<K>::early_drop(uint16_t owner, unsigned probes, OnRemove&& on_remove) noexcept {
    Owner& o = owners_[owner];
    const uint32_t span = o.hi - o.lo;
    // `probes` live records at most, and four times as many visits: free ids (the reserve) are
    // passed over without using up the probes, but never at unbounded cost.
    for (unsigned visits = 0, live = 0; live < probes && visits < 4 * probes && span; ++visits) {
        const uint32_t id = o.lo + o.drop_cursor;
        o.drop_cursor = (o.drop_cursor + 1 == span) ? 0 : o.drop_cursor + 1;
        const Flow& f = flows_[id];
        if (!f.live.load(std::memory_order_relaxed)) continue;
        ++live;
        if (embryonic(f)) {
            on_remove(f);
            remove(id);
            return true;
        }
    }
    return false;
}

}  // namespace svcgate::dp
