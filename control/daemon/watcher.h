// The config watcher: inotify on the directories of the config file and its manifests (editors
// replace files by renaming), so a change to one of those files schedules a reload 200 ms later
// (editors write in several steps).
//
// Runs on: the control thread (its descriptor is polled with the control socket's).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "control/config/config_model.h"

namespace svcgate::ctl {

class Watcher {
public:
    Watcher() = default;
    ~Watcher();
    Watcher(const Watcher&) = delete;
    Watcher& operator=(const Watcher&) = delete;

    // Watches `config_path` and the manifests `cfg` names (again: they may have changed).
    void reset(const Config& cfg, const std::string& config_path);
    int fd() const { return fd_; }
    // Reads what arrived; a change to a watched file makes due() true 200 ms later.
    void drain();
    // True once, when a change has settled.
    bool due();

private:
    int fd_ = -1;
    std::map<int, std::string> dirs_;  // watch descriptor → directory
    std::set<std::string> files_;      // absolute paths that matter
    std::chrono::steady_clock::time_point at_{};
    bool pending_ = false;
};

}  // namespace svcgate::ctl
