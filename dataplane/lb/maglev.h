// Maglev consistent hashing (Eisenbud et al., NSDI 2016, section 3.4): each endpoint fills a
// prime-sized lookup table following its own permutation; removing one of N endpoints remaps
// about 1/N of the keys. The table is built by the control plane (pure function) and workers
// only index it (Katran's MaglevHashV2 split).
//
// Runs on: build: control thread. lookup: any thread, read-only.
#pragma once

#include <cstdint>
#include <iterator>
#include <span>
#include <vector>

namespace svcgate::dp {

// Smallest prime ≥ max(n, 2).
uint32_t next_prime(uint32_t n) noexcept;

// Table size for n endpoints: the first prime of a ladder (the largest prime below each power of
// two from 2^8: 251, 509, 1021, ... 16777213) that is ≥ 100 × n (or the ladder's last). A rung
// holds a range of endpoint counts, so adding or removing an endpoint keeps the size, and with it
// every other endpoint's permutation: only ~1/N of the keys move (a size that followed n exactly
// would reshuffle nearly all). cluster.maglev_table_size pins one size for every Service.
uint32_t maglev_table_size(uint32_t n) noexcept;
inline constexpr uint32_t kMaglevSizes[] = {251,    509,    1021,   2039,    4093,    8191,    16381,   32749,   65521,
                                            131071, 262139, 524287, 1048573, 2097143, 4194301, 8388593, 16777213};
// A prime the config may pin (cluster.maglev_table_size) lies between the ladder's ends.
inline constexpr uint32_t kMaglevMinTable = kMaglevSizes[0], kMaglevMaxTable = std::end(kMaglevSizes)[-1];

// Builds the table for endpoints identified by `ids` (stable per endpoint, e.g. ip:port packed):
// entry = index into `ids`. The same set of ids gives the same endpoint in every entry whatever
// their order, and `seed` (cluster.maglev_seed) picks the permutations: gateways with the same
// endpoints, size and seed build the same table. An empty `ids` gives an empty table.
std::vector<uint16_t> maglev_build(std::span<const uint64_t> ids, uint32_t table_size, uint32_t seed = 0);

}  // namespace svcgate::dp
