// When a worker's loop sleeps (dataplane/pipeline/poll_policy.h): idle, after a light poll, and
// never while loaded.
#include <gtest/gtest.h>

#include "dataplane/pipeline/poll_policy.h"

using svcgate::dp::PollPolicy;

namespace {

// Empty loops in millisecond `ms` until the first sleep: how many spun, and the sleep.
std::pair<unsigned, unsigned> empty_until_sleep(PollPolicy& p, uint64_t ms, unsigned at_most = 10000) {
    for (unsigned i = 0; i < at_most; ++i) {
        p.tick(ms);
        if (const unsigned us = p.after(false, 0)) return {i, us};
    }
    return {at_most, 0};
}

// One millisecond's loops that bring `packets` in bursts of `burst`.
void carry(PollPolicy& p, uint64_t ms, unsigned packets, unsigned burst) {
    for (unsigned left = packets; left;) {
        const unsigned n = std::min(left, burst);
        p.tick(ms);
        EXPECT_EQ(p.after(true, n), 0u) << "a loop that found packets goes on";
        left -= n;
    }
}

}  // namespace

TEST(PollPolicy, IdleSpinsThenSleepsDoublingToTheCap) {
    for (bool busy_poll : {false, true}) {
        PollPolicy p(busy_poll);
        auto [spun, us] = empty_until_sleep(p, 1);
        EXPECT_EQ(spun, PollPolicy::kSpinPolls) << busy_poll;
        EXPECT_EQ(us, PollPolicy::kMinSleepUs);
        unsigned last = us;
        for (unsigned i = 0; i < 10; ++i) {
            const unsigned next = p.after(false, 0);
            EXPECT_EQ(next, std::min(2 * last, PollPolicy::kMaxSleepUs));
            last = next;
        }
        EXPECT_EQ(last, PollPolicy::kMaxSleepUs);
    }
}

TEST(PollPolicy, ALightPollSleepsAtOnceUnlessBusy) {
    PollPolicy adaptive(false), busy(true);
    for (PollPolicy* p : {&adaptive, &busy}) {
        p->tick(1);
        EXPECT_EQ(p->after(true, PollPolicy::kLightBurst - 1), 0u);
    }
    EXPECT_EQ(empty_until_sleep(adaptive, 1), std::make_pair(0u, PollPolicy::kMinSleepUs));
    EXPECT_EQ(empty_until_sleep(busy, 1).first, PollPolicy::kSpinPolls);
}

TEST(PollPolicy, AHeavyPollSpinsFirst) {
    PollPolicy p(false);
    p.tick(1);
    EXPECT_EQ(p.after(true, PollPolicy::kLightBurst), 0u);
    EXPECT_EQ(empty_until_sleep(p, 1).first, PollPolicy::kSpinPolls);
}

TEST(PollPolicy, ALoadedWorkerNeverSleeps) {
    for (bool busy_poll : {false, true}) {
        PollPolicy p(busy_poll);
        carry(p, 1, PollPolicy::kLoadedPerMs, 2);  // light polls, enough of them
        EXPECT_FALSE(p.loaded()) << "not before its millisecond ends";
        p.tick(2);
        EXPECT_TRUE(p.loaded());
        EXPECT_EQ(p.after(true, 1), 0u);  // a light poll
        EXPECT_EQ(empty_until_sleep(p, 2).second, 0u) << "no sleep in a loaded millisecond";
        // Millisecond 2 brought one packet: from millisecond 3 on, idle again.
        EXPECT_EQ(empty_until_sleep(p, 3).first, busy_poll ? PollPolicy::kSpinPolls : 0u) << "after a light poll";
        EXPECT_FALSE(p.loaded());
    }
}

TEST(PollPolicy, FewerPacketsOrAGapIsNotLoaded) {
    PollPolicy p(false);
    carry(p, 1, PollPolicy::kLoadedPerMs - 1, 16);
    p.tick(2);
    EXPECT_FALSE(p.loaded()) << "one packet short";

    carry(p, 2, 10 * PollPolicy::kLoadedPerMs, 32);
    p.tick(5);  // the loop slept through milliseconds 3 and 4
    EXPECT_FALSE(p.loaded()) << "the last whole millisecond was not millisecond 2";
    EXPECT_EQ(empty_until_sleep(p, 5).first, PollPolicy::kSpinPolls);
}
