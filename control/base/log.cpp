#include "control/base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include <fmt/format.h>

namespace svcgate::ctl {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};

bool to_journal() {
    static const bool j = std::getenv("JOURNAL_STREAM") != nullptr;
    return j;
}

const char* word(LogLevel l) {
    switch (l) {
        case LogLevel::err:
            return "error: ";
        case LogLevel::warning:
            return "warning: ";
        case LogLevel::notice:
            return "";
        case LogLevel::info:
            return "";
        case LogLevel::debug:
            return "debug: ";
    }
    return "";
}
}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view s) {
    if (s == "err" || s == "error") return LogLevel::err;
    if (s == "warning" || s == "warn") return LogLevel::warning;
    if (s == "notice") return LogLevel::notice;
    if (s == "info") return LogLevel::info;
    if (s == "debug") return LogLevel::debug;
    return std::nullopt;
}

void set_log_level(LogLevel l) { g_level.store(static_cast<int>(l), std::memory_order_relaxed); }

void log_at(LogLevel l, std::string_view msg) {
    if (static_cast<int>(l) > g_level.load(std::memory_order_relaxed)) return;
    std::string line;
    // A multi-line message (a refused config's errors) stays one event: each line gets the prefix.
    size_t at = 0;
    do {
        const size_t nl = msg.find('\n', at);
        const std::string_view part = msg.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
        if (to_journal())
            line += fmt::format("<{}>{}\n", static_cast<int>(l), part);
        else
            line += fmt::format("svcgate: {}{}\n", word(l), part);
        at = nl == std::string_view::npos ? msg.size() : nl + 1;
    } while (at < msg.size());
    (void)!::write(STDERR_FILENO, line.data(), line.size());
}

void RateLimit::log(LogLevel l, std::string_view msg) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ >= window_) {
        if (suppressed_)
            log_at(l,
                   fmt::format("({} more like the next were held back in the last {} s)", suppressed_,
                               std::chrono::duration_cast<std::chrono::seconds>(now - start_).count()));
        start_ = now, sent_ = 0, suppressed_ = 0;
    }
    if (sent_ < burst_) {
        ++sent_;
        log_at(l, msg);
    } else {
        ++suppressed_;
    }
}

}  // namespace svcgate::ctl
