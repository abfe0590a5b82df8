// Wall-clock time for what operators read (status, metrics, logs): Unix seconds as a double.
//
// Runs on: any thread.
#pragma once

#include <chrono>

namespace svcgate::ctl {

inline double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace svcgate::ctl
