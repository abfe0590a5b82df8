// The neighbor caches: IPv4 address → MAC (ARP, NeighborTable) and IPv6 address → MAC (Neighbor
// Discovery, NeighborTable6), shared by all workers. Lock-free: a fixed array with open
// addressing; a slot's key is claimed once and never freed (IPv4: a CAS of the address; IPv6: a
// CAS of the slot's state to "claiming", the address written, the state set to "ready" with
// release; a claimer that meets a slot being claimed waits the few cycles it takes), the MAC is
// one 64-bit atomic (valid bit + 48-bit address), so a reader sees either the old or the new MAC.
// Entries older than kStaleAfter are re-requested, not dropped: traffic keeps flowing while a
// refresh is pending. version() changes whenever an address's MAC does (learned anew, pinned,
// unpinned): what a worker's HopCache (hop_cache.h) checks its copies against.
//
// Runs on: workers. Owns: its array.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <rte_ether.h>

#include "dataplane/base/types.h"

namespace svcgate::dp {

// How a slot holds its address.
template <typename A>
struct NeighborKey;
template <>
struct NeighborKey<Ip4> {
    std::atomic<uint32_t> ip{0};  // network order; 0 = free
};
template <>
struct NeighborKey<Ip6> {
    std::atomic<uint32_t> state{0};  // 0 free, 1 being claimed, 2 ready
    Ip6 ip;                          // written once, before state 2
};

template <typename A>
class BasicNeighborTable {
public:
    static constexpr uint32_t kCapacity = 4096;   // addresses; a power of two
    static constexpr uint32_t kProbe = 32;        // slots searched per key
    static constexpr uint32_t kStaleAfter = 60;   // seconds before a refresh request
    static constexpr uint32_t kRequestEvery = 1;  // seconds between requests for one address

    BasicNeighborTable();

    enum class State : uint8_t { unknown, fresh, stale };
    // The MAC for `ip` when known (fresh or stale); stale entries still forward while the caller
    // asks want_request() whether to refresh them. One probe per packet.
    State lookup(const A& ip, uint32_t now, rte_ether_addr& mac) const noexcept;
    // An address's MAC with when it was learned (pinned: never stale); false when unknown.
    struct Resolved {
        rte_ether_addr mac;
        uint32_t learned;
        bool pinned;
    };
    bool resolve(const A& ip, Resolved& r) const noexcept;
    static bool fresh(bool pinned, uint32_t learned, uint32_t now) noexcept {
        return pinned || now - learned < kStaleAfter;
    }
    static bool fresh(const Resolved& r, uint32_t now) noexcept { return fresh(r.pinned, r.learned, now); }
    // Changes after any MAC change (release; read with acquire): read it before resolve() to know
    // whether a copy of the answer is still current.
    uint32_t version() const noexcept { return version_.load(std::memory_order_acquire); }
    // Record what an ARP packet told us. Only with `create` may it take a slot for an address the
    // table does not hold yet (slots are never freed): the caller allows it for ARPs addressed to
    // the gateway from an on-link sender, so a storm of ARPs from spoofed senders cannot fill the
    // table and lock real next hops out. Addresses the gateway asked for hold a slot already.
    void learn(const A& ip, const rte_ether_addr& mac, uint32_t now, bool create) noexcept;
    // True when the caller should send an ARP request for `ip` now: the address is unknown or
    // stale and no request went out in the last kRequestEvery seconds (one worker wins).
    bool want_request(const A& ip, uint32_t now) noexcept;
    // Control plane: a configured entry (`ip neigh ... nud permanent`): always fresh, never asked
    // for, not changed by ARP. False when the table has no room for it. unpin() makes it an
    // ordinary entry again, which goes stale and is refreshed.
    bool pin(const A& ip, const rte_ether_addr& mac) noexcept;
    void unpin(const A& ip) noexcept;

private:
    struct alignas(32) Slot {
        NeighborKey<A> key;
        std::atomic<uint32_t> learned{0};
        std::atomic<uint32_t> requested{0};
        std::atomic<uint64_t> mac{0};  // bit 63: valid
    };
    Slot* find(const A& ip) const noexcept;
    Slot* claim(const A& ip) noexcept;
    std::unique_ptr<Slot[]> slots_;
    std::atomic<uint32_t> version_{0};
};
using NeighborTable = BasicNeighborTable<Ip4>;
using NeighborTable6 = BasicNeighborTable<Ip6>;
extern template class BasicNeighborTable<Ip4>;
extern template class BasicNeighborTable<Ip6>;

// One worker's copy of the last neighbor it looked up, per family, for the routed packets whose
// route stage brought no MAC: those of a hop cache turned off by thousands of destinations
// (hop_cache.h). Those destinations sit behind a few next hops, so consecutive packets mostly
// share one, and the copy answers in a few compares instead of the table's hash and probe. It is
// checked as HopCache checks its copies: the table's version unchanged (any MAC change bumps it)
// and the copy fresh by its own learned time (a refresh the copy missed only sends it back to the
// table, which answers with the new time). Answers are the table's lookup() answers.
//
// Runs on: the worker that owns it. Never shared.
template <typename A>
class LastNeighbor {
public:
    using Table = BasicNeighborTable<A>;
    typename Table::State lookup(const Table& nt, const A& ip, uint32_t now, rte_ether_addr& mac) noexcept {
        const uint32_t version = nt.version();  // before the MAC (neighbor.h)
        if (valid_ && ip == ip_ && version == version_ && Table::fresh(copy_, now)) [[likely]] {
            mac = copy_.mac;
            return Table::State::fresh;
        }
        typename Table::Resolved r;
        if (!nt.resolve(ip, r)) {
            valid_ = false;
            return Table::State::unknown;
        }
        mac = r.mac;
        valid_ = Table::fresh(r, now);
        if (!valid_) return Table::State::stale;
        ip_ = ip;
        version_ = version;
        copy_ = r;
        return Table::State::fresh;
    }

private:
    A ip_{};
    uint32_t version_ = 0;
    typename Table::Resolved copy_{};
    bool valid_ = false;
};

}  // namespace svcgate::dp
