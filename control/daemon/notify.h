// systemd integration through libsystemd's sd_notify(3): READY=1 once the ports are up and the
// first config is published, RELOADING=1 / READY=1 around each reload, a STATUS= line with flows
// and rates, and WATCHDOG=1 only while every worker makes progress. Progress is read from the RCU
// state the workers already report each loop (rte_rcu_qsbr): a token is started, and the next
// keepalive goes out only once every online worker has passed a quiescent state since, so a stuck
// worker stops the keepalives and systemd restarts the service (WatchdogSec=). Without
// NOTIFY_SOCKET every call does nothing.
//
// Runs on: the control thread. Owns: nothing but its timers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

struct rte_rcu_qsbr;

namespace svcgate::ctl {

class SystemdNotifier {
public:
    explicit SystemdNotifier(rte_rcu_qsbr* workers);
    void ready(const std::string& status);
    void reloading();
    // Call from the control loop (it turns every 50 ms at most): the keepalive and the status
    // line when they are due. `status` is only called when a STATUS= line is due.
    template <typename Status>
    void tick(Status&& status) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= next_status_) {
            send_status(status());
            next_status_ = now + std::chrono::seconds(5);
        }
        if (watchdog_.count() && now >= next_watchdog_) {
            keepalive();
            next_watchdog_ = now + watchdog_ / 2;
        }
    }
    // The keepalive interval systemd asked for (zero: no watchdog).
    std::chrono::microseconds watchdog() const { return watchdog_; }

private:
    void send_status(const std::string& status);
    void keepalive();

    rte_rcu_qsbr* workers_;
    uint64_t token_ = 0;
    bool stuck_logged_ = false;
    std::chrono::microseconds watchdog_{0};
    std::chrono::steady_clock::time_point next_status_{}, next_watchdog_{};
};

}  // namespace svcgate::ctl
