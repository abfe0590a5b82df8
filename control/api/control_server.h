// The daemon's control socket, served by the control thread between its other duties: a Unix
// socket (mode 0600 by default) for svcgatectl, one request line, one reply, close. No threads:
// poll() with a timeout is the control loop's sleep. A client gets 500 ms to send its request
// line; a slow or silent local client costs the control thread that much, never a worker.
// (Prometheus is served apart, on threads of its own: metrics.h.)
//
// Runs on: the control thread.
#pragma once

#include <functional>
#include <string>

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

private:
    void serve_command(int fd, const CommandHandler& cmd);
    int unix_fd_ = -1;
    int extra_fd_ = -1;
    std::function<void()> on_extra_;
    std::string unix_path_;
};

}  // namespace svcgate::ctl
