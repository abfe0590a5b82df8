#include "control/api/control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace svcgate::ctl {

namespace {

std::string err(const std::string& what) { return fmt::format("{}: {}", what, std::strerror(errno)); }

// Reads up to the first '\n' (or `limit` bytes); "" on timeout or error.
std::string read_line(int fd, size_t limit) {
    timeval tv{0, 500000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string s;
    char buf[512];
    while (s.size() < limit && s.find('\n') == std::string::npos) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        s.append(buf, static_cast<size_t>(n));
    }
    return s;
}

void write_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = write(fd, s.data() + off, s.size() - off);
        if (n <= 0) return;  // the client went away
        off += static_cast<size_t>(n);
    }
}

}  // namespace

ControlServer::~ControlServer() {
    if (unix_fd_ >= 0) {
        close(unix_fd_);
        unlink(unix_path_.c_str());
    }
}

Status ControlServer::open_socket(const std::string& path, unsigned mode) {
    if (path.empty()) return {};
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) return Status::fail(fmt::format("control socket path too long: {}", path));
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    unlink(path.c_str());  // a stale socket from an earlier run
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::fail(err("socket"));
    // Created with the final mode: no window in which another user could connect.
    const mode_t old = umask(static_cast<mode_t>(~mode & 0777));
    const int rc = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    umask(old);
    if (rc != 0 || listen(fd, 16) != 0) {
        std::string e = err(fmt::format("control socket {}", path));
        close(fd);
        return Status::fail(e);
    }
    chmod(path.c_str(), mode);
    unix_fd_ = fd;
    unix_path_ = path;
    return {};
}

void ControlServer::watch_fd(int fd, std::function<void()> on_ready) {
    extra_fd_ = fd;
    on_extra_ = std::move(on_ready);
}

void ControlServer::poll_once(int timeout_ms, const CommandHandler& cmd) {
    pollfd p[2];
    nfds_t n = 0;
    const int fds[2] = {unix_fd_, extra_fd_};
    for (int fd : fds)
        if (fd >= 0) p[n++] = pollfd{fd, POLLIN, 0};
    if (n == 0 || ::poll(p, n, timeout_ms) <= 0) {
        if (n == 0) usleep(static_cast<useconds_t>(timeout_ms) * 1000);
        return;
    }
    for (nfds_t i = 0; i < n; ++i) {
        if (!(p[i].revents & POLLIN)) continue;
        if (p[i].fd == extra_fd_) {
            on_extra_();
            continue;
        }
        int c = accept4(p[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        serve_command(c, cmd);
        close(c);
    }
}

void ControlServer::serve_command(int fd, const CommandHandler& cmd) {
    std::string line = read_line(fd, 4096);
    if (auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
    write_all(fd, cmd(line));
}

}  // namespace svcgate::ctl
