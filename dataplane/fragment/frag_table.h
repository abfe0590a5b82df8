// IP fragments: virtual reassembly, as VPP's shallow reassembly does. A fragmented datagram is
// forwarded fragment by fragment, never rebuilt: the first fragment (the one with the L4 header)
// runs through the pipeline like any packet of its flow; its fate (verdict, the addresses it
// leaves with, egress port, next hop, the flow it counts under) is recorded under the datagram's
// key (source, destination, protocol and IP id; IPv6: source, destination and the Fragment
// header's identification, RFC 8200 4.5), and every later fragment gets the same. A later
// fragment that arrives first waits in the hold, bounded per datagram and in all, until its
// first fragment comes (it is then released translated) or its datagram times out (freed,
// counted). The table is shared by all workers, so fragments of one datagram may arrive on any.
//
// Each datagram's fragments are tracked by range: an overlap drops the whole datagram (RFC 5722),
// an exact repeat only itself, and too many fragments, a full hold or a full table are counted
// drops. Established flows live elsewhere (the flow table): nothing here can evict them, and the
// hold never takes more mbufs than max_held.
//
// Runs on: worker lcores, trace, tests. The table: shared by all workers, one spin lock per
// bucket of 8 datagrams (a cold path: only fragments take it). Owns: held mbufs.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include <rte_mbuf.h>
#include <rte_spinlock.h>

#include "dataplane/base/types.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

struct Burst;
struct WorkerCtx;
struct PacketMeta;
struct PacketState;

// A datagram's identity. IPv4 addresses sit in the first 4 bytes of src and dst.
struct FragKey {
    Ip6 src, dst;
    uint32_t id = 0;
    uint8_t proto = 0;  // IPv4 only (RFC 791); IPv6 fragments are identified without it
    uint8_t v6 = 0;
    uint16_t pad = 0;

    friend bool operator==(const FragKey& a, const FragKey& b) noexcept {
        return a.src == b.src && a.dst == b.dst && a.id == b.id && a.proto == b.proto && a.v6 == b.v6;
    }
    static FragKey of(const PacketMeta& m) noexcept;
};

// The first fragment's fate: what each later fragment gets.
struct FragResult {
    Verdict verdict = Verdict::drop;  // dnat, reply or forward: routed as below; anything else: dropped
    bool attributed = false;
    uint16_t out_port = 0;
    NatTarget attr{};
    Ip6 src, dst;  // the addresses it leaves with (IPv4: first 4 bytes)
    Ip6 next_hop;  // (IPv4: first 4 bytes)
};

struct FragParams {
    uint32_t max_datagrams = 4096;   // datagrams tracked at once (rounded up to buckets of 8)
    uint32_t max_held = 1024;        // fragments held, in all, waiting for their first
    uint16_t max_per_datagram = 64;  // fragments one datagram may have (at most kMaxPerDatagram)
    uint32_t timeout_ms = 2000;      // from a datagram's first-seen fragment

    friend bool operator==(const FragParams&, const FragParams&) = default;
};

class FragTable {
public:
    static constexpr unsigned kWays = 8;
    static constexpr unsigned kMaxPerDatagram = 64;

    // Null when the memory cannot be had (rte_zmalloc).
    static std::unique_ptr<FragTable> create(const FragParams& p) noexcept;
    ~FragTable();

    enum class Outcome : uint8_t {
        first,   // a first fragment, registered: it goes through the pipeline, then resolve()
        follow,  // a later fragment whose first has been: `result` says what to do with it
        held,    // a later fragment that waits for its first (the table owns the mbuf now)
        drop,    // `why`
    };
    struct Arrival {
        Outcome what = Outcome::drop;
        DropReason why = DropReason::none;
        FragResult result;
        // Held fragments of the datagram freed with it (an overlap, too many fragments): the
        // caller frees and counts them under `why`.
        unsigned n_freed = 0;
        rte_mbuf* freed[kMaxPerDatagram];
    };
    // A fragment of `k` covering bytes [off, off + len) of its datagram; `last`: M clear.
    void arrive(const FragKey& k, uint32_t off, uint32_t len, bool last, rte_mbuf* m, uint64_t now_ms,
                Arrival& a) noexcept;
    // The first fragment of `k` went through the pipeline with result `r`: the fragments held for
    // it are handed back (up to kMaxPerDatagram, into `released`) for the caller to send as `r`
    // says. Returns how many.
    unsigned resolve(const FragKey& k, const FragResult& r, rte_mbuf** released) noexcept;
    // Datagrams past their timeout, in up to `buckets` buckets from `cursor` (which moves on):
    // their held fragments go to on_timeout(mbuf). Returns how many were freed.
    template <typename Fn>
    unsigned expire(uint64_t now_ms, unsigned buckets, uint32_t& cursor, Fn&& on_timeout) noexcept;
    // Everything goes (shutdown, end of a trace); held fragments to on_free(mbuf).
    template <typename Fn>
    unsigned flush(Fn&& on_free) noexcept;

    uint32_t datagrams() const noexcept { return used_.load(std::memory_order_relaxed); }
    uint32_t held() const noexcept { return held_.load(std::memory_order_relaxed); }
    uint32_t capacity() const noexcept { return n_buckets_ * kWays; }

private:
    enum State : uint8_t { kFree, kWaiting, kResolved, kPoisoned };
    struct Entry {
        FragKey key;
        uint64_t expires_ms;
        State state;
        uint8_t n_ranges, n_held;
        bool got_last;
        uint32_t total;  // the datagram's length once its last fragment is known
        uint32_t seen;   // bytes of it seen so far
        FragResult result;

        void start(const FragKey& k, uint64_t expires) noexcept {
            key = k;
            expires_ms = expires;
            state = kWaiting;
            n_ranges = n_held = 0;
            got_last = false;
            total = seen = 0;
        }
        uint16_t from[kMaxPerDatagram];
        uint32_t to[kMaxPerDatagram];
        rte_mbuf* held[kMaxPerDatagram];
    };
    struct alignas(64) Bucket {
        rte_spinlock_t lock;
        Entry e[kWays];
    };
    FragTable() = default;
    Bucket& bucket(const FragKey& k) noexcept;
    void free_entry(Entry& e) noexcept;
    // Drops the datagram: its held fragments into `a.freed`, later fragments refused until it expires.
    void poison(Entry& e, Arrival& a, DropReason why) noexcept;

    FragParams p_;
    Bucket* buckets_ = nullptr;
    uint32_t n_buckets_ = 0;  // a power of two
    std::atomic<uint32_t> used_{0};
    std::atomic<uint32_t> held_{0};
};

template <typename Fn>
unsigned FragTable::expire(uint64_t now_ms, unsigned buckets, uint32_t& cursor, Fn&& on_timeout) noexcept {
    if (used_.load(std::memory_order_relaxed) == 0) return 0;
    unsigned freed = 0;
    for (unsigned i = 0; i < buckets && i < n_buckets_; ++i) {
        Bucket& b = buckets_[cursor++ & (n_buckets_ - 1)];
        rte_spinlock_lock(&b.lock);
        for (Entry& e : b.e) {
            if (e.state == kFree || e.expires_ms > now_ms) continue;
            for (unsigned h = 0; h < e.n_held; ++h) on_timeout(e.held[h]);
            freed += e.n_held;
            free_entry(e);
        }
        rte_spinlock_unlock(&b.lock);
    }
    return freed;
}

template <typename Fn>
unsigned FragTable::flush(Fn&& on_free) noexcept {
    unsigned freed = 0;
    uint32_t cursor = 0;
    for (uint32_t i = 0; i < n_buckets_; ++i) {
        Bucket& b = buckets_[cursor++];
        rte_spinlock_lock(&b.lock);
        for (Entry& e : b.e) {
            if (e.state == kFree) continue;
            for (unsigned h = 0; h < e.n_held; ++h) on_free(e.held[h]);
            freed += e.n_held;
            free_entry(e);
        }
        rte_spinlock_unlock(&b.lock);
    }
    return freed;
}

}  // namespace svcgate::dp
