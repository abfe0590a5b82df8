// An immutable open-addressing hash (u64 key → u32 value) built by the control plane and read by
// workers: linear probing at ≤ 50% load, so a lookup is one hash and, almost always, one cache
// line. Used for the VIP, NodePort and local-address tables of a snapshot: O(1) whatever the
// number of services.
//
// Runs on: built by the control thread; read-only afterwards, shared by workers via the snapshot.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>

#include <rte_hash_crc.h>
#include <rte_prefetch.h>

#include "dataplane/base/table_memory.h"
#include "dataplane/base/types.h"

namespace svcgate::dp {

// CRC32c of `n` bytes at any alignment: rte_hash_crc() loads 8-byte words through a cast
// pointer, which an Ip6 inside a packet or a key (4-byte aligned) does not allow. Every byte counts
// (the flow state file's length and a peer id's 18 bytes are no multiple of 4).
inline uint32_t crc32c_bytes(const void* p, size_t n, uint32_t seed) noexcept {
    const auto* b = static_cast<const uint8_t*>(p);
    for (; n >= 8; b += 8, n -= 8) {
        uint64_t w;
        std::memcpy(&w, b, 8);
        seed = rte_hash_crc_8byte(w, seed);
    }
    if (n >= 4) {
        uint32_t w;
        std::memcpy(&w, b, 4);
        seed = rte_hash_crc_4byte(w, seed);
        b += 4, n -= 4;
    }
    if (n >= 2) {
        uint16_t w;
        std::memcpy(&w, b, 2);
        seed = rte_hash_crc_2byte(w, seed);
        b += 2, n -= 2;
    }
    if (n) seed = rte_hash_crc_1byte(*b, seed);
    return seed;
}

class StaticHash {
public:
    static constexpr uint32_t kNone = UINT32_MAX;
    static constexpr uint64_t kEmpty = ~uint64_t{0};

    explicit StaticHash(size_t expected = 0) { reserve(expected); }

    void reserve(size_t n) {
        cap_ = std::bit_ceil(std::max<size_t>(16, n * 2));
        slots_ = make_table<Slot>(cap_);
        for (size_t i = 0; i < cap_; ++i) slots_[i] = Slot{kEmpty, kNone};
        mask_ = cap_ - 1;
        size_ = 0;
    }
    // Control plane: false when the key is present already (the caller reports the duplicate).
    bool insert(uint64_t key, uint32_t value) {
        if ((size_ + 1) * 2 > cap_) grow();
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return false;
            if (slots_[i].key == kEmpty) {
                slots_[i] = Slot{key, value};
                ++size_;
                return true;
            }
        }
    }
    uint32_t find(uint64_t key) const noexcept {
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return slots_[i].value;
            if (slots_[i].key == kEmpty) return kNone;
        }
    }
    // Brings the key's first slot into cache ahead of find() (a burst's lookups then overlap).
    void prefetch(uint64_t key) const noexcept { rte_prefetch0(&slots_[index(key)]); }
    size_t size() const noexcept { return size_; }

private:
    struct Slot {
        uint64_t key;
        uint32_t value;
    };
    size_t index(uint64_t key) const noexcept { return rte_hash_crc_8byte(key, 0x5bd1e995) & mask_; }
    void grow() {
        TablePtr<Slot> old = std::move(slots_);
        const size_t n = cap_;
        reserve(n);
        for (size_t i = 0; i < n; ++i)
            if (old[i].key != kEmpty) insert(old[i].key, old[i].value);
    }

    TablePtr<Slot> slots_;  // a fixed array: workers only read it
    size_t cap_ = 0;
    size_t mask_ = 0;
    size_t size_ = 0;
};

// The same for IPv6: (address, 32 bits of port and protocol) → u32, linear probing at ≤ 50% load,
// a slot empty while its value is kNone (never stored). 24-byte slots: a lookup is one or two
// cache lines.
class StaticHash6 {
public:
    static constexpr uint32_t kNone = StaticHash::kNone;
    struct Key {
        Ip6 addr;
        uint32_t rest = 0;
        friend bool operator==(const Key& a, const Key& b) noexcept { return a.rest == b.rest && a.addr == b.addr; }
    };

    explicit StaticHash6(size_t expected = 0) { reserve(expected); }

    void reserve(size_t n) {
        cap_ = std::bit_ceil(std::max<size_t>(16, n * 2));
        slots_ = make_table<Slot>(cap_);
        mask_ = cap_ - 1;
        size_ = 0;
    }
    bool insert(const Key& key, uint32_t value) {
        if ((size_ + 1) * 2 > cap_) grow();
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            if (slots_[i].value == kNone) {
                slots_[i] = Slot{key, value};
                ++size_;
                return true;
            }
            if (slots_[i].key == key) return false;
        }
    }
    uint32_t find(const Key& key) const noexcept {
        for (size_t i = index(key);; i = (i + 1) & mask_) {
            if (slots_[i].value == kNone) return kNone;
            if (slots_[i].key == key) return slots_[i].value;
        }
    }
    void prefetch(const Key& key) const noexcept { rte_prefetch0(&slots_[index(key)]); }
    size_t size() const noexcept { return size_; }

private:
    struct Slot {
        Key key;
        uint32_t value = kNone;
    };
    size_t index(const Key& key) const noexcept {
        uint64_t a, b;
        std::memcpy(&a, key.addr.b, 8);
        std::memcpy(&b, key.addr.b + 8, 8);
        return rte_hash_crc_4byte(key.rest, rte_hash_crc_8byte(b, rte_hash_crc_8byte(a, 0x5bd1e995))) & mask_;
    }
    void grow() {
        TablePtr<Slot> old = std::move(slots_);
        const size_t n = cap_;
        reserve(n);
        for (size_t i = 0; i < n; ++i)
            if (old[i].value != kNone) insert(old[i].key, old[i].value);
    }

    TablePtr<Slot> slots_;
    size_t cap_ = 0;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace svcgate::dp
