// The flow table under pressure, told once a minute: when new flows were refused (table full) or
// evicted early since the last look, the control loop logs how many, the table's fill and the
// sources that hold most of it (issue 69: cilium#20955's table-full events named no one).
//
// Runs on: the control thread (a plain value it owns).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace svcgate::ctl {

class TablePressureWatch {
public:
    using Clock = std::chrono::steady_clock;
    static constexpr std::chrono::seconds kPeriod{60};
    // A source and the live flows it holds, the most first.
    using Talkers = std::vector<std::pair<std::string, uint64_t>>;

    explicit TablePressureWatch(Clock::time_point start) : next_(start + kPeriod) {}

    bool due(Clock::time_point now) const noexcept { return now >= next_; }
    // At `now`, with `pressure` the new flows refused or evicted since start (the workers'
    // counters summed): the line to log, once a period has passed and some were refused or
    // evicted in it. `top` is asked only then.
    std::optional<std::string> look(Clock::time_point now, uint64_t pressure, uint32_t live, uint32_t capacity,
                                    const std::function<Talkers()>& top) {
        if (now < next_) return std::nullopt;
        next_ = now + kPeriod;
        const uint64_t fresh = pressure - seen_;
        seen_ = pressure;
        if (fresh == 0) return std::nullopt;
        std::string who;
        for (const auto& [source, flows] : top())
            who += fmt::format("{}{} ({} flows)", who.empty() ? "" : ", ", source, flows);
        return fmt::format(
            "flow table: {} new flows refused or evicted in the last minute, {} of {} flows live; "
            "the sources holding most: {}",
            fresh, live, capacity, who.empty() ? "none" : who);
    }

private:
    Clock::time_point next_;
    uint64_t seen_ = 0;  // the pressure counted at the last look
};

}  // namespace svcgate::ctl
