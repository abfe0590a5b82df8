// The static daemon's mempool handlers (control/daemon/mempool_ops.h), linked as the daemon links
// DPDK (meson option dpdk_link): every slot of the handler table must take and give mbufs on a
// ring-backed pool, since dpdk-dumpcap's capture pool reaches the daemon with an index of the
// capture process's choosing.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "control/daemon/mempool_ops.h"

namespace {

constexpr unsigned kMbufs = 255;

TEST(MempoolOps, EverySlotTakesAndGivesOnACapturePool) {
    ASSERT_TRUE(svcgate::ctl::fill_mempool_ops());
    ASSERT_EQ(rte_mempool_ops_table.num_ops, static_cast<uint32_t>(RTE_MEMPOOL_MAX_OPS_IDX));
    std::array<std::string, 9> args = {"mempool_ops_test", "--no-huge", "--no-pci", "--no-shconf", "-m", "128",
                                       "--no-telemetry",   "-l",        "0"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ASSERT_GE(rte_eal_init(static_cast<int>(argv.size()), argv.data()), 0);
    // As dpdk-dumpcap creates its pool; no per-lcore cache, so every take and give is the handler's.
    rte_mempool* mp =
        rte_pktmbuf_pool_create_by_ops("capture", kMbufs, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY, "ring_mp_sc");
    ASSERT_NE(mp, nullptr);
    for (int32_t slot = 0; slot < RTE_MEMPOOL_MAX_OPS_IDX; ++slot) {
        mp->ops_index = slot;  // the index another process's table gave "ring_mp_sc"
        std::vector<rte_mbuf*> all(kMbufs);
        ASSERT_EQ(rte_pktmbuf_alloc_bulk(mp, all.data(), kMbufs), 0) << "slot " << slot;
        EXPECT_EQ(rte_mempool_avail_count(mp), 0u) << "slot " << slot;
        rte_mbuf* more = rte_pktmbuf_alloc(mp);
        EXPECT_EQ(more, nullptr) << "slot " << slot << ": an empty pool gave an mbuf";
        rte_pktmbuf_free_bulk(all.data(), kMbufs);
        EXPECT_EQ(rte_mempool_avail_count(mp), kMbufs) << "slot " << slot;
    }
    rte_mempool_free(mp);
    rte_eal_cleanup();
}

}  // namespace
