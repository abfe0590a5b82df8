#include "control/api/control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace svcgate::ctl {

namespace {

std::string err(const std::string& what) { return fmt::format("{}: {}", what, std::strerror(errno)); }

// The reply, on the connection made blocking again, within 2 s of send time in all.
void write_all(int fd, const std::string& s) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = write(fd, s.data() + off, s.size() - off);
        if (n <= 0) return;  // the client went away
        off += static_cast<size_t>(n);
    }
}

}  // namespace

ControlServer::~ControlServer() {
    for (const Pending& c : pending_) close(c.fd);
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
    expire_pending();
    std::vector<pollfd> p;
    p.reserve(2 + pending_.size());
    for (int fd : {unix_fd_, extra_fd_})
        if (fd >= 0) p.push_back(pollfd{fd, POLLIN, 0});
    for (const Pending& c : pending_) p.push_back(pollfd{c.fd, POLLIN, 0});
    if (p.empty()) {
        usleep(static_cast<useconds_t>(timeout_ms) * 1000);
        return;
    }
    if (::poll(p.data(), p.size(), timeout_ms) <= 0) return;
    // The pending connections first (their pollfds follow the fixed ones, in pending_'s order),
    // then new ones: accepting appends to pending_.
    const size_t fixed = p.size() - pending_.size();
    std::vector<int> done;
    for (size_t i = fixed; i < p.size(); ++i)
        if (p[i].revents && read_request(pending_[i - fixed], cmd)) done.push_back(pending_[i - fixed].fd);
    std::erase_if(pending_, [&](const Pending& c) { return std::find(done.begin(), done.end(), c.fd) != done.end(); });
    for (size_t i = 0; i < fixed; ++i) {
        if (!(p[i].revents & POLLIN)) continue;
        if (p[i].fd == extra_fd_)
            on_extra_();
        else
            accept_client();
    }
}

void ControlServer::accept_client() {
    const int c = accept4(unix_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;
    if (pending_.size() >= kMaxPending) {  // the oldest silent one makes room
        close(pending_.front().fd);
        pending_.erase(pending_.begin());
    }
    pending_.push_back(Pending{c, {}, std::chrono::steady_clock::now() + kRequestWait});
}

bool ControlServer::read_request(Pending& c, const CommandHandler& cmd) {
    char buf[512];
    ssize_t n;
    while ((n = read(c.fd, buf, sizeof buf)) > 0) {
        c.line.append(buf, static_cast<size_t>(n));
        if (c.line.find('\n') != std::string::npos || c.line.size() >= kMaxRequest) break;
    }
    const size_t nl = c.line.find('\n');
    if (nl == std::string::npos && c.line.size() < kMaxRequest) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;  // more to come
        if (c.line.empty()) {                                            // hung up without a word
            close(c.fd);
            return true;
        }
    }
    if (nl != std::string::npos) c.line.resize(nl);
    write_all(c.fd, cmd(c.line));
    close(c.fd);
    return true;
}

void ControlServer::expire_pending() {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(pending_, [now](const Pending& c) {
        if (c.deadline > now) return false;
        close(c.fd);
        return true;
    });
}

}  // namespace svcgate::ctl
