// control/lb/controller.h's token bucket (client-go's flowcontrol token bucket): the status writes'
// and the events' rate. The controller and the elector themselves are tested end to end against
// the tests' API server (tests/kube/lb_e2e.py, tests/e2e/ha_e2e.py).
#include <gtest/gtest.h>

#include "control/lb/controller.h"

using namespace svcgate::ctl::lb;
using std::chrono::milliseconds;

TEST(TokenBucket, BurstThenQps) {
    TokenBucket b(2, 3);  // 2 a second after a burst of 3
    auto t = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.take(t)) << i;
    EXPECT_FALSE(b.take(t)) << "the burst is spent";
    EXPECT_EQ(b.wait(t), milliseconds(501)) << "half a second for the next token, rounded up";
    EXPECT_FALSE(b.take(t + milliseconds(400)));
    EXPECT_TRUE(b.take(t + milliseconds(500)));
    EXPECT_FALSE(b.take(t + milliseconds(500)));
    // Idle a long while: no more than the burst is saved up.
    t += std::chrono::hours(1);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.take(t)) << i;
    EXPECT_FALSE(b.take(t));
    // A reload lowers the burst: what is saved beyond it goes.
    t += std::chrono::hours(1);
    b.set(2, 1);
    EXPECT_TRUE(b.take(t));
    EXPECT_FALSE(b.take(t));
}
