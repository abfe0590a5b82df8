#include "neighbor.h"

#include <cstring>

#include <rte_hash_crc.h>

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

uint32_t home(Ip4 ip) noexcept { return rte_hash_crc_4byte(ip.be, 0) & (NeighborTable::kCapacity - 1); }
}  // namespace

NeighborTable::NeighborTable() : slots_(std::make_unique<Slot[]>(kCapacity)) {}

NeighborTable::Slot* NeighborTable::find(Ip4 ip) const noexcept {
    if (ip.is_zero()) return nullptr;
    for (uint32_t i = 0, h = home(ip); i < kProbe; ++i) {
        Slot& s = slots_[(h + i) & (kCapacity - 1)];
        uint32_t k = s.ip.load(std::memory_order_acquire);
        if (k == ip.be) return &s;
        if (k == 0) return nullptr;
    }
    return nullptr;
}

NeighborTable::Slot* NeighborTable::claim(Ip4 ip) noexcept {
    if (ip.is_zero()) return nullptr;
    for (uint32_t i = 0, h = home(ip); i < kProbe; ++i) {
        Slot& s = slots_[(h + i) & (kCapacity - 1)];
        uint32_t k = s.ip.load(std::memory_order_acquire);
        if (k == 0 && s.ip.compare_exchange_strong(k, ip.be, std::memory_order_acq_rel)) return &s;
        if (k == ip.be) return &s;  // ours, or another worker claimed it for the same address
    }
    return nullptr;  // neighbourhood full: the caller counts a drop
}

NeighborTable::State NeighborTable::lookup(Ip4 ip, uint32_t now, rte_ether_addr& mac) const noexcept {
    const Slot* s = find(ip);
    if (!s) return State::unknown;
    uint64_t v = s->mac.load(std::memory_order_acquire);
    if (!(v & kValid)) return State::unknown;
    mac = unpack(v);
    if (v & kPinned) return State::fresh;
    return now - s->learned.load(std::memory_order_relaxed) < kStaleAfter ? State::fresh : State::stale;
}

void NeighborTable::learn(Ip4 ip, const rte_ether_addr& mac, uint32_t now, bool create) noexcept {
    Slot* s = create ? claim(ip) : find(ip);
    if (!s) return;
    const uint64_t v = pack(mac);
    const uint64_t old = s->mac.load(std::memory_order_relaxed);
    if (old & kPinned) return;
    if (old != v) s->mac.store(v, std::memory_order_release);
    if (s->learned.load(std::memory_order_relaxed) != now) s->learned.store(now, std::memory_order_relaxed);
}

bool NeighborTable::want_request(Ip4 ip, uint32_t now) noexcept {
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

bool NeighborTable::pin(Ip4 ip, const rte_ether_addr& mac) noexcept {
    Slot* s = claim(ip);
    if (!s) return false;
    s->mac.store(pack(mac) | kPinned, std::memory_order_release);
    return true;
}

void NeighborTable::unpin(Ip4 ip) noexcept {
    Slot* s = find(ip);
    if (!s) return;
    const uint64_t v = s->mac.load(std::memory_order_relaxed);
    if (v & kPinned) {
        s->learned.store(0, std::memory_order_relaxed);  // stale at once: the next packet asks
        s->mac.store(v & ~kPinned, std::memory_order_release);
    }
}

}  // namespace svcgate::dp
