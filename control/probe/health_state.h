// One endpoint's health as its checks decide it: HAProxy's rise and fall. An endpoint starts up
// (it is trusted until it fails `fall` checks in a row: a restarted gateway serves at once, as its
// state file's flows do); up, `fall` failures in a row take it down; down, `rise` successes in a
// row bring it back. A result that agrees with the state resets the other run.
//
// Runs on: the prober's thread (prober.h), under its lock; a plain value.
#pragma once

#include <cstdint>
#include <string>

namespace svcgate::ctl {

struct EndpointCheck {
    bool up = true;
    uint32_t streak = 0;       // results in a row that disagree with `up`
    double since = 0;          // Unix seconds: its last transition, or when it was first checked
    std::string last_failure;  // refused, timeout, status 503, unreachable, ...; "" before any
    double last_failure_at = 0;
    uint64_t transitions = 0;
    double last_seconds = 0;  // the last check's duration

    // One check's result; true when the state changed.
    bool observe(bool ok, uint32_t rise, uint32_t fall, double now, const std::string& failure = {}) {
        if (!ok) last_failure = failure, last_failure_at = now;
        if (ok == up) {
            streak = 0;
            return false;
        }
        if (++streak < (up ? fall : rise)) return false;
        up = ok;
        streak = 0;
        since = now;
        ++transitions;
        return true;
    }
};

}  // namespace svcgate::ctl
