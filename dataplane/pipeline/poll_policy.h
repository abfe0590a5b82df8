#pragma once
// When a worker's loop sleeps (dataplane.poll), apart from the loop: what it found in each loop in,
// how long to sleep (or not) out.
//
// - Idle: kSpinPolls empty polls more, then sleeps that double from kMinSleepUs up to kMaxSleepUs
//   (l3fwd-power's idea without its interrupts): a gateway with nothing to do leaves its core to
//   others (a lab on a 2-core box still has to run). kMaxSleepUs is the most a first packet after
//   a quiet spell waits; the port's ring holds it meanwhile.
// - Light load (adaptive, the default): after a loop that found fewer than kLightBurst packets,
//   the sleeps start at the first empty poll, so a gateway carrying tens of thousands of packets
//   a second in small bursts uses part of its core, not all of it, and its next poll finds a
//   fuller burst. `busy` spins through light load as DPDK applications do.
// - Loaded: a worker whose last whole millisecond brought kLoadedPerMs packets or more never
//   sleeps, in either mode, whatever its polls find. From there on a sleep costs more latency than
//   the core is worth: adaptive polling added about 20 us to the round trip at 10% and 50% of the
//   gateway's rate before (bench/HISTORY.md, round twenty-eight).
//
// The worker's loop: tick() with its millisecond, then after() with what its polls found.
#include <algorithm>
#include <cstdint>

namespace svcgate::dp {

class PollPolicy {
public:
    static constexpr unsigned kSpinPolls = 64;
    static constexpr unsigned kMinSleepUs = 16, kMaxSleepUs = 1024;
    static constexpr unsigned kLightBurst = 8;
    static constexpr uint32_t kLoadedPerMs = 100;

    explicit PollPolicy(bool busy_poll) noexcept : busy_poll_(busy_poll) {}

    // At the top of each loop: the loop's millisecond (any monotonic count of them). A millisecond
    // that ended makes the worker loaded or not; one that did not follow its predecessor (the
    // loop slept through some) never does.
    void tick(uint64_t now_ms) noexcept {
        if (now_ms == ms_) return;
        loaded_ = packets_ >= kLoadedPerMs && now_ms == ms_ + 1;
        packets_ = 0;
        ms_ = now_ms;
    }

    // After the loop's polls: `busy` when anything was received (the host path too), `got` the
    // packets its receive queues gave. The microseconds to sleep now; 0 to poll again at once.
    unsigned after(bool busy, unsigned got) noexcept {
        if (busy) {
            idle_ = 0;
            sleep_us_ = 0;
            light_ = got < kLightBurst;
            packets_ += got;
            return 0;
        }
        if (loaded_ || (++idle_ <= kSpinPolls && !(light_ && !busy_poll_))) return 0;
        sleep_us_ = std::clamp(sleep_us_ * 2, kMinSleepUs, kMaxSleepUs);
        return sleep_us_;
    }

    bool loaded() const noexcept { return loaded_; }

private:
    bool busy_poll_;
    bool light_ = false;   // the last loop that found packets found few
    bool loaded_ = false;  // the last whole millisecond brought kLoadedPerMs or more
    unsigned idle_ = 0, sleep_us_ = 0;
    uint32_t packets_ = 0;  // received in the millisecond ms_ so far
    uint64_t ms_ = 0;
};

}  // namespace svcgate::dp
