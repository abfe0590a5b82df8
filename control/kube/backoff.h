// client-go's reflector backoff (wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)):
// 0.8 s doubling, each wait jittered up to +100%, no step over 30 s (so that a change is seen
// within a minute whatever fails); it starts again from 0.8 s once 2 minutes have passed since
// the last backoff, so that a stream every watch of which ends in an error (a load balancer that
// cuts streams every few minutes, a proxy that mangles a line) does not wait longer and longer.
// A server's Retry-After (429, 503, a 504 for a too large version) is waited at least, up to 5
// minutes.
//
// Runs on: one API watcher thread each (control/kube/kube_api.h); not thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace svcgate::ctl::kube {

class Backoff {
public:
    static constexpr std::chrono::milliseconds kFirst{800}, kCap{30000};
    static constexpr std::chrono::minutes kResetAfter{2};

    explicit Backoff(uint32_t seed = std::random_device{}()) : rng_(seed) {}
    std::chrono::milliseconds next(std::chrono::steady_clock::time_point now, int retry_after_s = 0) {
        if (now - last_ > kResetAfter) step_ = kFirst;
        last_ = now;
        std::uniform_int_distribution<int64_t> j(0, step_.count());
        const std::chrono::milliseconds d{step_.count() + j(rng_)};
        step_ = std::min(step_ * 2, kCap);
        return std::max<std::chrono::milliseconds>(d, std::chrono::seconds(std::min(retry_after_s, 300)));
    }

private:
    std::chrono::milliseconds step_ = kFirst;
    std::chrono::steady_clock::time_point last_{};
    std::mt19937 rng_;
};

}  // namespace svcgate::ctl::kube
