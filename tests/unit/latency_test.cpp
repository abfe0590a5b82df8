// The sampled latency histogram (dataplane/pipeline/latency.h): its buckets, four an octave and
// linear within it, and the quantiles read from them.
#include <gtest/gtest.h>

#include "dataplane/pipeline/latency.h"

using svcgate::dp::LatencyHistogram;

TEST(Latency, BucketsAreQuartersOfOctaves) {
    EXPECT_EQ(LatencyHistogram::bucket(0), 0u);
    EXPECT_EQ(LatencyHistogram::bucket(3), 3u);
    EXPECT_EQ(LatencyHistogram::bucket(4), 8u);
    EXPECT_EQ(LatencyHistogram::bucket(7), 11u);
    EXPECT_EQ(LatencyHistogram::bucket(1000), 4 * 9 + 3u);  // 2^9 · 1.75 = 896 <= 1000 < 1024
    EXPECT_EQ(LatencyHistogram::bucket(1024), 40u);
    EXPECT_EQ(LatencyHistogram::bucket(uint64_t{1} << 40), LatencyHistogram::kBuckets - 1);
    for (unsigned b = 8; b < LatencyHistogram::kBuckets - 1;
         ++b) {  // each bucket holds its lower bound, not the next one's
        const auto lo = static_cast<uint64_t>(LatencyHistogram::lower(b));
        EXPECT_EQ(LatencyHistogram::bucket(lo), b) << b;
        EXPECT_EQ(LatencyHistogram::bucket(static_cast<uint64_t>(LatencyHistogram::lower(b + 1)) - 1), b) << b;
    }
}

TEST(Latency, QuantilesAreTheUpperEndsOfTheirBuckets) {
    LatencyHistogram h;
    h.add(100, 98);    // bucket [96, 112)
    h.add(5000, 1);    // [4096, 5120)
    h.add(200000, 1);  // the tail
    EXPECT_EQ(h.samples, 100u);
    EXPECT_EQ(h.quantile(0.5), 112);
    EXPECT_EQ(h.quantile(0.98), 112);
    EXPECT_EQ(h.quantile(0.99), 5120);
    EXPECT_EQ(h.quantile(1.0), 200000);  // never above the largest sample
    EXPECT_EQ(h.max_ns, 200000u);
    EXPECT_EQ(h.sum_ns, 98u * 100 + 5000 + 200000);
    LatencyHistogram g;
    g.add(100, 2);
    g += h;
    EXPECT_EQ(g.samples, 102u);
    EXPECT_EQ(LatencyHistogram().quantile(0.5), 0);
}
