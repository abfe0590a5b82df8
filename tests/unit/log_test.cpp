// The daemon's log (control/base/log.h): levels filter, and a rate limit lets a burst through and
// counts the rest.
#include <algorithm>

#include <gtest/gtest.h>

#include "control/base/log.h"

using namespace svcgate::ctl;

namespace {

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(Log, LinesBelowTheLevelAreNotWritten) {
    set_log_level(LogLevel::warning);
    testing::internal::CaptureStderr();
    log_info("an info line");
    log_warning("a warning line");
    log_err("an error line");
    const std::string out = testing::internal::GetCapturedStderr();
    set_log_level(LogLevel::info);
    EXPECT_EQ(out.find("an info line"), std::string::npos) << out;
    EXPECT_NE(out.find("svcgate: warning: a warning line\n"), std::string::npos) << out;
    EXPECT_NE(out.find("svcgate: error: an error line\n"), std::string::npos) << out;
}

TEST(Log, ARateLimitLetsABurstThroughAndCountsTheRest) {
    RateLimit limit(3, std::chrono::seconds(3600));
    testing::internal::CaptureStderr();
    for (int i = 0; i < 10; ++i) limit.log(LogLevel::warning, "the same complaint");
    const std::string out = testing::internal::GetCapturedStderr();
    EXPECT_EQ(lines(out), 3u) << out;
    EXPECT_EQ(limit.suppressed(), 7u);
}

TEST(Log, AMultiLineMessageKeepsItsPrefixOnEveryLine) {
    testing::internal::CaptureStderr();
    log_err("first\nsecond");
    const std::string out = testing::internal::GetCapturedStderr();
    EXPECT_EQ(out, "svcgate: error: first\nsvcgate: error: second\n");
}

TEST(Log, LevelsByName) {
    EXPECT_EQ(parse_log_level("err"), LogLevel::err);
    EXPECT_EQ(parse_log_level("debug"), LogLevel::debug);
    EXPECT_EQ(parse_log_level("loud"), std::nullopt);
}

}  // namespace
