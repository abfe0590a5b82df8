// control/state/table_watch.h: the flow table under pressure, told once a minute with the sources
// that hold it; nothing when nothing was refused or evicted, or before the minute is up.
#include <gtest/gtest.h>

#include "control/state/table_watch.h"

using namespace svcgate::ctl;
using namespace std::chrono_literals;

TEST(TablePressureWatch, NamesTheTopSourcesOnceAMinuteWhenFlowsWereRefused) {
    const auto t0 = TablePressureWatch::Clock::now();
    TablePressureWatch w(t0);
    int asked = 0;
    auto top = [&] {
        ++asked;
        return TablePressureWatch::Talkers{{"192.168.67.201", 450}, {"192.168.67.202", 300}, {"192.168.67.203", 150}};
    };
    EXPECT_FALSE(w.due(t0 + 59s));
    EXPECT_FALSE(w.look(t0 + 59s, 700, 1000, 1024, top)) << "not before the first minute is up";
    const auto line = w.look(t0 + 60s, 700, 1000, 1024, top);
    ASSERT_TRUE(line);
    EXPECT_EQ(*line,
              "flow table: 700 new flows refused or evicted in the last minute, 1000 of 1024 flows live; the "
              "sources holding most: 192.168.67.201 (450 flows), 192.168.67.202 (300 flows), 192.168.67.203 (150 "
              "flows)");
    EXPECT_FALSE(w.look(t0 + 61s, 900, 1000, 1024, top)) << "once a minute, however many more";
    const auto next = w.look(t0 + 120s, 900, 1000, 1024, top);
    ASSERT_TRUE(next);
    EXPECT_NE(next->find("200 new flows refused or evicted"), std::string::npos)
        << "only those since the last: " << *next;
    EXPECT_FALSE(w.look(t0 + 180s, 900, 10, 1024, top)) << "a quiet minute logs nothing";
    EXPECT_EQ(asked, 2) << "the table is counted only for a line";
}

TEST(TablePressureWatch, SaysNoneWhenNoSourceHoldsFlows) {
    const auto t0 = TablePressureWatch::Clock::now();
    TablePressureWatch w(t0);
    const auto line = w.look(t0 + 60s, 5, 0, 1024, [] { return TablePressureWatch::Talkers{}; });
    ASSERT_TRUE(line);
    EXPECT_NE(line->find("the sources holding most: none"), std::string::npos) << *line;
}
