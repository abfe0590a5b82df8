#include "dataplane/l3/neighbor.h"

#include "dataplane/base/static_hash.h"

#include <cstring>

#include <rte_hash_crc.h>
#include <rte_pause.h>

namespace svcgate::dp {

namespace {
constexpr uint64_t kValid = uint64_t{1} << 63;
constexpr uint64_t kPinned = uint64_t{1} << 62;

uint64_t pack(const rte_ether_addr& m) noexcept {
    uint64_t v = 0;
    std::memcpy(&v, m.addr_bytes, RTE_ETHER_ADDR_LEN);
    return v | kValid;
}

rte_ether_addr unpack(uint64_t v) noexcept {
    rte_ether_addr m;
    std::memcpy(m.addr_bytes, &v, RTE_ETHER_ADDR_LEN);
    return m;
}

constexpr uint32_t kMask = NeighborTable::kCapacity - 1;
uint32_t home(Ip4 ip) noexcept { return rte_hash_crc_4byte(ip.be, 0) & kMask; }
uint32_t home(const Ip6& ip) noexcept { return crc32c_bytes(ip.b, 16, 0) & kMask; }

// Slot keys. match: the slot holds `ip`; empty: the slot is free (the probe sequence ends);
// try_claim: takes a free slot for `ip`, or reports that it holds `ip` already.
enum class Claim { taken, ours, other };

bool match(const NeighborKey<Ip4>& k, Ip4 ip) noexcept { return k.ip.load(std::memory_order_acquire) == ip.be; }
bool empty(const NeighborKey<Ip4>& k) noexcept { return k.ip.load(std::memory_order_acquire) == 0; }
Claim try_claim(NeighborKey<Ip4>& k, Ip4 ip) noexcept {
    uint32_t cur = k.ip.load(std::memory_order_acquire);
    if (cur == 0 && k.ip.compare_exchange_strong(cur, ip.be, std::memory_order_acq_rel)) return Claim::taken;
    return cur == ip.be ? Claim::ours : Claim::other;  // ours: another worker claimed it for the same address
}

bool match(const NeighborKey<Ip6>& k, const Ip6& ip) noexcept {
    return k.state.load(std::memory_order_acquire) == 2 && k.ip == ip;
}
bool empty(const NeighborKey<Ip6>& k) noexcept { return k.state.load(std::memory_order_acquire) == 0; }
Claim try_claim(NeighborKey<Ip6>& k, const Ip6& ip) noexcept {
    uint32_t cur = k.state.load(std::memory_order_acquire);
    if (cur == 0 && k.state.compare_exchange_strong(cur, 1, std::memory_order_acq_rel)) {
        k.ip = ip;
        k.state.store(2, std::memory_order_release);
        return Claim::taken;
    }
    while (cur == 1) {  // another worker is writing the address: a few stores away
        rte_pause();
        cur = k.state.load(std::memory_order_acquire);
    }
    return k.ip == ip ? Claim::ours : Claim::other;
}
}  // namespace

template <typename A>
BasicNeighborTable<A>::BasicNeighborTable() : slots_(std::make_unique<Slot[]>(kCapacity)) {}

template <typename A>
typename BasicNeighborTable<A>::Slot* BasicNeighborTable<A>::find(const A& ip) const noexcept {
    if (ip.is_zero()) return nullptr;
    for (uint32_t i = 0, h = home(ip); i < kProbe; ++i) {
        Slot& s = slots_[(h + i) & (kCapacity - 1)];
        if (match(s.key, ip)) return &s;
        if (empty(s.key)) return nullptr;
    }
    return nullptr;
}

template <typename A>
typename BasicNeighborTable<A>::Slot* BasicNeighborTable<A>::claim(const A& ip) noexcept {
    if (ip.is_zero()) return nullptr;
    for (uint32_t i = 0, h = home(ip); i < kProbe; ++i) {
        Slot& s = slots_[(h + i) & (kCapacity - 1)];
        if (try_claim(s.key, ip) != Claim::other) return &s;
    }
    return nullptr;  // neighbourhood full: the caller counts a drop
}

template <typename A>
bool BasicNeighborTable<A>::resolve(const A& ip, Resolved& r) const noexcept {
    const Slot* s = find(ip);
    if (!s) return false;
    const uint64_t v = s->mac.load(std::memory_order_acquire);
    if (!(v & kValid)) return false;
    r.mac = unpack(v);
    r.pinned = v & kPinned;
    r.learned = s->learned.load(std::memory_order_relaxed);
    return true;
}

template <typename A>
typename BasicNeighborTable<A>::State BasicNeighborTable<A>::lookup(const A& ip, uint32_t now,
                                                                    rte_ether_addr& mac) const noexcept {
    Resolved r;
    if (!resolve(ip, r)) return State::unknown;
    mac = r.mac;
    return fresh(r, now) ? State::fresh : State::stale;
}

template <typename A>
void BasicNeighborTable<A>::learn(const A& ip, const rte_ether_addr& mac, uint32_t now, bool create) noexcept {
    Slot* s = create ? claim(ip) : find(ip);
    if (!s) return;
    const uint64_t v = pack(mac);
    const uint64_t old = s->mac.load(std::memory_order_relaxed);
    if (old & kPinned) return;
    if (old != v) {
        s->mac.store(v, std::memory_order_release);
        version_.fetch_add(1, std::memory_order_release);
    }
    if (s->learned.load(std::memory_order_relaxed) != now) s->learned.store(now, std::memory_order_relaxed);
}

template <typename A>
bool BasicNeighborTable<A>::want_request(const A& ip, uint32_t now) noexcept {
    Slot* s = claim(ip);
    if (!s) return false;
    const uint64_t v = s->mac.load(std::memory_order_acquire);
    if (v & kPinned) return false;
    const bool valid = v & kValid;
    if (valid && now - s->learned.load(std::memory_order_relaxed) < kStaleAfter) return false;
    uint32_t last = s->requested.load(std::memory_order_relaxed);
    if (last != 0 && now - last < kRequestEvery) return false;
    return s->requested.compare_exchange_strong(last, now ? now : 1, std::memory_order_relaxed);
}

template <typename A>
bool BasicNeighborTable<A>::pin(const A& ip, const rte_ether_addr& mac) noexcept {
    Slot* s = claim(ip);
    if (!s) return false;
    s->mac.store(pack(mac) | kPinned, std::memory_order_release);
    version_.fetch_add(1, std::memory_order_release);
    return true;
}

template <typename A>
void BasicNeighborTable<A>::unpin(const A& ip) noexcept {
    Slot* s = find(ip);
    if (!s) return;
    const uint64_t v = s->mac.load(std::memory_order_relaxed);
    if (v & kPinned) {
        s->learned.store(0, std::memory_order_relaxed);  // stale at once: the next packet asks
        s->mac.store(v & ~kPinned, std::memory_order_release);
        version_.fetch_add(1, std::memory_order_release);
    }
}

template class BasicNeighborTable<Ip4>;
template class BasicNeighborTable<Ip6>;

}  // namespace svcgate::dp
