// What an operation off the fast path did: done, or failed with a reason a person can read.
//
// Config loading throws ConfigError (every issue at once, with its position); everything else
// that can fail at run time (EAL, ports, sockets, netlink, the state file, the API server's lists)
// returns a Status, which a caller cannot drop unread ([[nodiscard]]). An empty reason is no
// longer how success is spelled: a failure always carries one.
//
// Runs on: any thread; a plain value.
#pragma once

#include <string>
#include <utility>

namespace svcgate::ctl {

class [[nodiscard]] Status {
public:
    Status() = default;  // done
    static Status fail(std::string why) {
        Status s;
        s.failed_ = true;
        s.why_ = why.empty() ? std::string("failed (no reason given)") : std::move(why);
        return s;
    }

    bool ok() const noexcept { return !failed_; }
    explicit operator bool() const noexcept { return !failed_; }
    // Why it failed; "" when it did not.
    const std::string& error() const noexcept { return why_; }

private:
    bool failed_ = false;
    std::string why_;
};

}  // namespace svcgate::ctl
