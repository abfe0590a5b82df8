// The time packets spend inside the gateway: from the return of their receive burst to the
// transmit call that hands them to a port, sampled one receive burst in N
// (dataplane.latency_sampling; 0: never, and nothing is read or written). Each packet a sampled
// burst sends counts once, at its own transmit call; a packet held (for a next hop's MAC, a
// replica, a later fragment's first) leaves outside its burst and is not counted.
//
// Buckets: four per octave of nanoseconds, linear within the octave (bucket 4e + q holds
// [2^e (1 + q/4), 2^e (1 + (q+1)/4)) ns), up to 2^24 ns (16.8 ms), the last one open.
//
// Runs on: a worker (add), the control thread (read while the worker writes: counts may be one
// sample apart, as the counters are).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace svcgate::dp {

struct LatencyHistogram {
    static constexpr unsigned kBuckets = 96;
    uint64_t count[kBuckets] = {};
    uint64_t samples = 0;
    uint64_t max_ns = 0;
    uint64_t sum_ns = 0;

    static unsigned bucket(uint64_t ns) noexcept {
        if (ns < 4) return static_cast<unsigned>(ns);  // 0-3 ns: one bucket each (4e + q below 8)
        const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(ns));
        const unsigned q = static_cast<unsigned>((ns >> (e - 2)) & 3);
        return std::min(kBuckets - 1, 4 * e + q);
    }
    // The smallest value of bucket b, ns.
    static double lower(unsigned b) noexcept {
        if (b < 8) return b < 4 ? b : 4;  // 0-3 ns exactly; 4-7 unused (4 ns is bucket 8)
        const unsigned e = b / 4, q = b % 4;
        return static_cast<double>(uint64_t{1} << e) * (1.0 + q / 4.0);
    }
    void add(uint64_t ns, uint32_t n) noexcept {
        count[bucket(ns)] += n;
        samples += n;
        sum_ns += ns * n;
        max_ns = std::max(max_ns, ns);
    }
    LatencyHistogram& operator+=(const LatencyHistogram& o) noexcept {
        for (unsigned b = 0; b < kBuckets; ++b) count[b] += o.count[b];
        samples += o.samples;
        sum_ns += o.sum_ns;
        max_ns = std::max(max_ns, o.max_ns);
        return *this;
    }
    // The q-quantile (0 < q <= 1), ns: the upper end of the bucket it falls in (at most max_ns).
    double quantile(double q) const noexcept {
        if (!samples) return 0;
        const double want = q * static_cast<double>(samples);
        uint64_t seen = 0;
        for (unsigned b = 0; b < kBuckets; ++b) {
            seen += count[b];
            if (static_cast<double>(seen) >= want)
                return std::min(b + 1 < kBuckets ? lower(b + 1) : static_cast<double>(max_ns),
                                static_cast<double>(max_ns));
        }
        return static_cast<double>(max_ns);
    }
};

}  // namespace svcgate::dp
