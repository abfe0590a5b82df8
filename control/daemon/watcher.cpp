#include "control/daemon/watcher.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

namespace svcgate::ctl {

Watcher::~Watcher() {
    if (fd_ >= 0) close(fd_);
}

void Watcher::reset(const Config& cfg, const std::string& config_path) {
    if (fd_ >= 0) close(fd_);
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    dirs_.clear();
    files_.clear();
    std::vector<std::string> paths = {config_path};
    paths.insert(paths.end(), cfg.manifests.begin(), cfg.manifests.end());
    for (const auto& p : paths) {
        std::error_code ec;
        auto abs = std::filesystem::absolute(p, ec);
        if (ec) continue;
        files_.insert(abs.string());
        const std::string dir = abs.parent_path().string();
        bool have = false;
        for (auto& [w, d] : dirs_) have = have || d == dir;
        if (have) continue;
        int w = inotify_add_watch(fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE);
        if (w >= 0) dirs_[w] = dir;
    }
}

void Watcher::drain() {
    alignas(inotify_event) char buf[4096];
    for (;;) {
        ssize_t n = read(fd_, buf, sizeof buf);
        if (n <= 0) return;
        for (ssize_t off = 0; off < n;) {
            auto* e = reinterpret_cast<inotify_event*>(buf + off);
            off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
            if (!e->len || !dirs_.count(e->wd)) continue;
            if (files_.count(dirs_[e->wd] + "/" + e->name)) {
                pending_ = true;
                at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
            }
        }
    }
}

bool Watcher::due() {
    if (!pending_ || std::chrono::steady_clock::now() < at_) return false;
    pending_ = false;
    return true;
}

}  // namespace svcgate::ctl
