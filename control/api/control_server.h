// The daemon's control socket, served by the control thread between its other duties: a Unix
// socket (mode 0600 by default) for svcgatectl, one request line, one reply, close. No threads:
// poll() with a timeout is the control loop's sleep. A connection waits among the polled
// descriptors until its request line is complete, so a slow client (a loaded machine can hold a
// just-started svcgatectl off the CPU for longer than any fixed wait) is served when its line
// arrives, and a silent one costs the control thread nothing: it is closed after 10 s, the oldest
// first when 16 are pending. The reply is written with a bound of its own (2 s for a client that
// does not read). (Prometheus is served apart, on threads of its own: metrics.h.)
//
// Runs on: the control thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "control/base/status.h"

namespace svcgate::ctl {

class ControlServer {
public:
    // Returns the reply to a request line.
    using CommandHandler = std::function<std::string(const std::string& line)>;

    ControlServer() = default;
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Empty path: off.
    Status open_socket(const std::string& path, unsigned mode);
    // An extra descriptor to wake poll() for (inotify); `on_ready` runs when it is readable.
    void watch_fd(int fd, std::function<void()> on_ready);

    // Waits up to timeout_ms for a request and serves what arrived.
    void poll_once(int timeout_ms, const CommandHandler& cmd);

    static constexpr size_t kMaxPending = 16;
    static constexpr size_t kMaxRequest = 4096;
    static constexpr std::chrono::seconds kRequestWait{10};

private:
    struct Pending {
        int fd;
        std::string line;
        std::chrono::steady_clock::time_point deadline;
    };
    void accept_client();
    // Reads what arrived; true when the connection is done with (served, or gone).
    bool read_request(Pending& c, const CommandHandler& cmd);
    void expire_pending();
    std::vector<Pending> pending_;
    int unix_fd_ = -1;
    int extra_fd_ = -1;
    std::function<void()> on_extra_;
    std::string unix_path_;
};

}  // namespace svcgate::ctl
