#include "control/daemon/notify.h"

#include <fmt/format.h>
#include <rte_rcu_qsbr.h>
#include <systemd/sd-daemon.h>

#include "control/base/log.h"

namespace svcgate::ctl {

SystemdNotifier::SystemdNotifier(rte_rcu_qsbr* workers) : workers_(workers) {
    uint64_t usec = 0;
    // > 0: WATCHDOG_USEC is set (and WATCHDOG_PID, if set, is this process).
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) watchdog_ = std::chrono::microseconds(usec);
    if (workers_) token_ = rte_rcu_qsbr_start(workers_);
}

void SystemdNotifier::ready(const std::string& status) {
    sd_notify(0, fmt::format("READY=1\nSTATUS={}", status).c_str());
    next_status_ = std::chrono::steady_clock::now() + std::chrono::seconds(5);
}

void SystemdNotifier::reloading() {
    // MONOTONIC_USEC: what systemd 253's Type=notify-reload matches the reload by; older ones ignore it.
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sd_notify(0,
              fmt::format("RELOADING=1\nMONOTONIC_USEC={}", uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000)
                  .c_str());
}

void SystemdNotifier::send_status(const std::string& status) { sd_notify(0, fmt::format("STATUS={}", status).c_str()); }

void SystemdNotifier::keepalive() {
    // 1: every worker online when the token was taken has passed a quiescent state since.
    if (workers_ && rte_rcu_qsbr_check(workers_, token_, false) != 1) {
        if (!stuck_logged_)
            log_err(fmt::format("a worker has made no progress for {} ms: the systemd watchdog is not fed",
                                watchdog_.count() / 2000));
        stuck_logged_ = true;
        return;
    }
    stuck_logged_ = false;
    sd_notify(0, "WATCHDOG=1");
    if (workers_) token_ = rte_rcu_qsbr_start(workers_);
}

}  // namespace svcgate::ctl
