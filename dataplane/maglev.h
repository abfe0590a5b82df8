// Maglev consistent hashing (Eisenbud et al., NSDI 2016, section 3.4): each endpoint fills a
// prime-sized lookup table following its own permutation; removing one of N endpoints remaps
// about 1/N of the keys. The table is built by the control plane (pure function) and workers
// only index it (Katran's MaglevHashV2 split).
//
// Runs on: build: control thread. lookup: any thread, read-only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace svcgate::dp {

// Smallest prime ≥ max(n, 2).
uint32_t next_prime(uint32_t n) noexcept;

// Table size for n endpoints: the smallest prime ≥ 100 × n (at least 101).
inline uint32_t maglev_table_size(uint32_t n) noexcept { return next_prime(n * 100 < 101 ? 101 : n * 100); }

// Builds the table for endpoints identified by `ids` (stable per endpoint, e.g. ip:port packed):
// entry = index into `ids`. An empty `ids` gives an empty table.
std::vector<uint16_t> maglev_build(std::span<const uint64_t> ids, uint32_t table_size);

}  // namespace svcgate::dp
