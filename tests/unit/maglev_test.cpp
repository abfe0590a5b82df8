#include <map>

#include <gtest/gtest.h>
#include <rte_hash_crc.h>

#include "dataplane/lb/maglev.h"

using namespace svcgate::dp;

TEST(Maglev, TableSizeIsPrimeAndAtLeast100PerEndpoint) {
    for (uint32_t n : {1u, 3u, 10u, 100u}) {
        uint32_t m = maglev_table_size(n);
        EXPECT_GE(m, 100 * n);
        EXPECT_EQ(next_prime(m), m);
    }
    EXPECT_EQ(next_prime(1000), 1009u);
}

TEST(Maglev, BalancedAndRemovingOneOfTenRemapsAboutOneTenth) {
    const uint32_t n = 10;
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < n; ++i) ids.push_back(0x0a000000 + i * 7919);
    const uint32_t m = maglev_table_size(n);
    auto full = maglev_build(ids, m);
    ASSERT_EQ(full.size(), m);
    std::map<uint16_t, int> share;
    for (uint16_t e : full) share[e]++;
    for (auto [e, c] : share) EXPECT_NEAR(c, double(m) / n, double(m) / n * 0.05) << "endpoint " << e;

    std::vector<uint64_t> fewer(ids);
    fewer.erase(fewer.begin() + 4);  // endpoint 4 goes
    auto after = maglev_build(fewer, m);
    const int keys = 100000;
    int moved = 0;
    for (int k = 0; k < keys; ++k) {
        uint32_t h = rte_hash_crc_4byte(static_cast<uint32_t>(k), 99) % m;
        uint64_t before_id = ids[full[h]];
        uint64_t after_id = fewer[after[h]];
        if (before_id != after_id) ++moved;
    }
    // Keys of the removed endpoint (≈1/N) must move; Maglev keeps the rest mostly in place.
    EXPECT_LE(moved, keys * 1.5 / n);
    EXPECT_GE(moved, keys * 0.9 / n);
}

TEST(Maglev, TheTableSizeStaysWhenAnEndpointComesOrGoes) {
    // The sizes the snapshot builder uses: a ladder, so 9, 10 and 11 endpoints share one.
    EXPECT_EQ(maglev_table_size(9), maglev_table_size(10));
    EXPECT_EQ(maglev_table_size(1), 251u);
    EXPECT_EQ(maglev_table_size(100000), kMaglevMaxTable);
    // Removing one of ten with the sizes the builder picks moves about a tenth of the keys.
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < 10; ++i) ids.push_back(0x0a000000 + i * 7919);
    std::vector<uint64_t> fewer(ids);
    fewer.erase(fewer.begin() + 4);
    const auto full = maglev_build(ids, maglev_table_size(10));
    const auto after = maglev_build(fewer, maglev_table_size(9));
    ASSERT_EQ(full.size(), after.size());
    int moved = 0;
    const int keys = 100000;
    for (int k = 0; k < keys; ++k) {
        const uint32_t h = rte_hash_crc_4byte(static_cast<uint32_t>(k), 99) % full.size();
        moved += ids[full[h]] != fewer[after[h]];
    }
    EXPECT_LE(moved, keys * 1.5 / 10);
}

TEST(Maglev, TheSameEndpointsInAnyOrderBuildTheSameTableAndTheSeedPicksIt) {
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < 7; ++i) ids.push_back(0x0a000000 + i * 104729);
    std::vector<uint64_t> shuffled = {ids[3], ids[0], ids[6], ids[1], ids[5], ids[2], ids[4]};
    const uint32_t m = maglev_table_size(7);
    const auto a = maglev_build(ids, m, 42);
    const auto b = maglev_build(shuffled, m, 42);
    for (uint32_t i = 0; i < m; ++i) ASSERT_EQ(ids[a[i]], shuffled[b[i]]) << "entry " << i;
    const auto c = maglev_build(ids, m, 43);
    uint32_t differ = 0;
    for (uint32_t i = 0; i < m; ++i) differ += a[i] != c[i];
    EXPECT_GT(differ, m / 2) << "another seed, another table";
}
