#include "maglev.h"

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

std::vector<uint16_t> maglev_build(std::span<const uint64_t> ids, uint32_t m) {
    const size_t n = ids.size();
    std::vector<uint16_t> table;
    if (n == 0 || m == 0) return table;
    constexpr uint16_t kEmpty = UINT16_MAX;
    table.assign(m, kEmpty);
    std::vector<uint32_t> offset(n), skip(n), next(n, 0);
    for (size_t i = 0; i < n; ++i) {
        offset[i] = rte_hash_crc_8byte(ids[i], 0xcafef00d) % m;
        skip[i] = rte_hash_crc_8byte(ids[i], 0x0badc0de) % (m - 1) + 1;
    }
    for (uint32_t filled = 0;;) {
        for (size_t i = 0; i < n; ++i) {
            // The next free slot in endpoint i's permutation (offset + j * skip) mod m.
            uint32_t c;
            do {
                c = static_cast<uint32_t>((offset[i] + uint64_t{next[i]} * skip[i]) % m);
                ++next[i];
            } while (table[c] != kEmpty);
            table[c] = static_cast<uint16_t>(i);
            if (++filled == m) return table;
        }
    }
}

}  // namespace svcgate::dp
