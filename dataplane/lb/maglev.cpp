#include "dataplane/lb/maglev.h"

#include <algorithm>

#include <rte_hash_crc.h>

namespace svcgate::dp {

uint32_t next_prime(uint32_t n) noexcept {
    auto is_prime = [](uint32_t v) {
        if (v < 2) return false;
        for (uint32_t d = 2; uint64_t{d} * d <= v; ++d)
            if (v % d == 0) return false;
        return true;
    };
    if (n < 2) n = 2;
    while (!is_prime(n)) ++n;
    return n;
}

uint32_t maglev_table_size(uint32_t n) noexcept {
    const uint64_t want = uint64_t{n} * 100;
    for (const uint32_t p : kMaglevSizes)
        if (p >= want) return p;
    return kMaglevMaxTable;
}

std::vector<uint16_t> maglev_build(std::span<const uint64_t> ids, uint32_t m, uint32_t seed) {
    const size_t n = ids.size();
    std::vector<uint16_t> table;
    if (n == 0 || m == 0) return table;
    constexpr uint16_t kEmpty = UINT16_MAX;
    table.assign(m, kEmpty);
    // Filled in the order of the ids' values, not of the list: every gateway builds the same
    // table from the same endpoints, however its config happens to list them.
    std::vector<uint32_t> order(n);
    for (uint32_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return ids[a] < ids[b]; });
    std::vector<uint32_t> offset(n), skip(n), next(n, 0);
    for (size_t i = 0; i < n; ++i) {
        offset[i] = rte_hash_crc_8byte(ids[order[i]], 0xcafef00d ^ seed) % m;
        skip[i] = rte_hash_crc_8byte(ids[order[i]], 0x0badc0de ^ seed) % (m - 1) + 1;
    }
    for (uint32_t filled = 0;;) {
        for (size_t i = 0; i < n; ++i) {
            // The next free slot in endpoint i's permutation (offset + j * skip) mod m.
            uint32_t c;
            do {
                c = static_cast<uint32_t>((offset[i] + uint64_t{next[i]} * skip[i]) % m);
                ++next[i];
            } while (table[c] != kEmpty);
            table[c] = static_cast<uint16_t>(order[i]);
            if (++filled == m) return table;
        }
    }
}

}  // namespace svcgate::dp
