// The daemon's log: one line per event on stderr, with a level. Under systemd (JOURNAL_STREAM
// set: stderr is a journal stream) each line starts with its syslog priority, "<3>" ... "<7>"
// (sd-daemon(3)), so journald files it at that priority; on a terminal a line reads
// "svcgate: warning: ...". Lines below the level set by --log-level are not written. A message
// that can repeat under load or from outside (per packet, per flow, per request) goes through a
// RateLimit, which lets a burst through and then counts what it held back.
//
// Runs on: any thread (one write(2) per line). Owns: the level.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace svcgate::ctl {

enum class LogLevel { err = 3, warning = 4, notice = 5, info = 6, debug = 7 };

std::optional<LogLevel> parse_log_level(std::string_view s);  // err, warning, notice, info, debug
void set_log_level(LogLevel l);
void log_at(LogLevel l, std::string_view msg);
inline void log_err(std::string_view m) { log_at(LogLevel::err, m); }
inline void log_warning(std::string_view m) { log_at(LogLevel::warning, m); }
inline void log_info(std::string_view m) { log_at(LogLevel::info, m); }

// At most `burst` messages per `window`; the first message after a held-back stretch says how
// many were held back. One per call site (it is not shared between threads).
class RateLimit {
public:
    RateLimit(unsigned burst, std::chrono::seconds window) : burst_(burst), window_(window) {}
    void log(LogLevel l, std::string_view msg);
    unsigned suppressed() const { return suppressed_; }

private:
    unsigned burst_;
    std::chrono::seconds window_;
    std::chrono::steady_clock::time_point start_{};
    unsigned sent_ = 0, suppressed_ = 0;
};

}  // namespace svcgate::ctl
