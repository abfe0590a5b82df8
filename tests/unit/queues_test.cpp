// control/daemon/queues.h: every receive queue polled by exactly one worker, one-queue ports
// spread over the workers, transmit queues per worker where there are enough, shared where not.
#include <gtest/gtest.h>

#include <set>

#include "control/daemon/queues.h"

using namespace svcgate::ctl;

namespace {

// Every (port, queue) is polled once, by one worker.
void expect_each_rx_queue_once(const QueuePlan& plan, const std::vector<uint16_t>& rxq) {
    std::set<std::pair<uint16_t, uint16_t>> seen;
    size_t total = 0;
    for (const auto& w : plan.rx)
        for (const auto& q : w) {
            EXPECT_TRUE(seen.insert({q.port, q.queue}).second) << "port " << q.port << " queue " << q.queue;
            EXPECT_LT(q.queue, rxq[q.port]);
            ++total;
        }
    size_t want = 0;
    for (uint16_t n : rxq) want += n;
    EXPECT_EQ(total, want);
}

}  // namespace

TEST(Queues, OneWorkerPollsEverything) {
    const std::vector<uint16_t> rxq{1, 1}, txq{1, 1};
    const QueuePlan plan = plan_queues(rxq, txq, 1);
    ASSERT_EQ(plan.rx.size(), 1u);
    EXPECT_EQ(plan.rx[0], (std::vector<QueuePlan::Rx>{{0, 0}, {1, 0}}));
    EXPECT_EQ(plan.tx[0], (std::vector<uint16_t>{0, 0}));
    EXPECT_EQ(plan.tx_shared, (std::vector<bool>{false, false}));
}

TEST(Queues, OneQueuePortsSpreadOverWorkers) {
    // Two ports of one queue each and two workers: each worker polls one port, not both worker 0.
    const std::vector<uint16_t> rxq{1, 1}, txq{1, 1};
    const QueuePlan plan = plan_queues(rxq, txq, 2);
    EXPECT_EQ(plan.rx[0], (std::vector<QueuePlan::Rx>{{0, 0}}));
    EXPECT_EQ(plan.rx[1], (std::vector<QueuePlan::Rx>{{1, 0}}));
    // One transmit queue for two workers: shared, under a lock.
    EXPECT_EQ(plan.tx_shared, (std::vector<bool>{true, true}));
    EXPECT_EQ(plan.tx[1], (std::vector<uint16_t>{0, 0}));
}

TEST(Queues, RssQueuesEachOnceAndTxPerWorker) {
    const std::vector<uint16_t> rxq{4, 4, 1}, txq{4, 4, 2};
    const QueuePlan plan = plan_queues(rxq, txq, 4);
    expect_each_rx_queue_once(plan, rxq);
    for (const auto& w : plan.rx) EXPECT_GE(w.size(), 2u);  // 9 queues over 4 workers
    EXPECT_EQ(plan.tx_shared, (std::vector<bool>{false, false, true}));
    for (uint16_t w = 0; w < 4; ++w) {
        EXPECT_EQ(plan.tx[w][0], w);  // a queue of its own
        EXPECT_EQ(plan.tx[w][2], w % 2);
    }
}

TEST(Queues, NoWorkersNoPlan) {
    const std::vector<uint16_t> rxq{1}, txq{1};
    EXPECT_TRUE(plan_queues(rxq, txq, 0).rx.empty());
}
