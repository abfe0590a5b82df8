// Per-worker pseudo-random numbers (xorshift64*): seeded, so `svcgatectl trace --seed` and the
// tests are deterministic; never shared between threads.
#pragma once

#include <cstdint>

namespace svcgate::dp {

struct Rng {
    uint64_t s = 0x9e3779b97f4a7c15ull;

    explicit Rng(uint64_t seed = 1) noexcept : s(seed ? seed * 0x9e3779b97f4a7c15ull : 1) {}
    uint64_t next() noexcept {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545f4914f6cdd1dull;
    }
    // Uniform in [0, n) without modulo bias worth measuring (Lemire's multiply-shift).
    uint32_t below(uint32_t n) noexcept {
        return static_cast<uint32_t>((uint64_t{static_cast<uint32_t>(next() >> 32)} * n) >> 32);
    }
};

}  // namespace svcgate::dp
