// One writer among N gateways: a coordination.k8s.io/v1 Lease with client-go's leader-election
// semantics (tools/leaderelection): a gateway takes the Lease when nobody holds it or the
// holder's record has not changed for its leaseDurationSeconds as this gateway observed it (its
// own clock, never the Lease's renewTime, so clocks may differ); the holder renews every
// retry_period and, when it could not renew for renew_deadline (shorter than the lease), stops
// leading before anyone else may take over; an orderly stop releases the Lease (holder "",
// leaseDurationSeconds 1) so that another takes it at its next try.
//
// Runs on: a thread of its own (start/stop from the control thread); leading() and status() from
// any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "control/config/config_model.h"
#include "control/kube/api_client.h"
#include "control/lb/lb_report.h"

namespace svcgate::ctl::lb {

class Elector {
public:
    Elector(const LoadBalancerConfig::Election& cfg, std::string identity, const kube::ApiServer& server,
            kube::Credentials& creds);
    ~Elector();
    Elector(const Elector&) = delete;
    Elector& operator=(const Elector&) = delete;

    void start();
    void stop();  // releases the Lease if held

    // This gateway holds the Lease and renewed it within renew_deadline: it may write. Checked
    // against the clock, not only the thread's last word, so that a write is never begun after
    // the deadline, whenever the thread next wakes.
    bool leading() const;
    // How long this gateway may still write: until the renew deadline (0 when not leading).
    std::chrono::nanoseconds time_left() const;
    // Whether this gateway may hold the Lease (it can write: its lists loaded, pools configured).
    // A gateway not eligible does not try to take it and releases it if it holds it.
    void set_eligible(bool eligible) { eligible_ = eligible; }
    const std::string& identity() const { return id_; }
    report::LbLease status() const;
    uint64_t lost() const { return lost_.load(); }  // leadership lost (renew deadline passed)

    // One try (client-go's tryAcquireOrRenew): true when this gateway holds the Lease after it.
    // Public for the tests; the thread calls it.
    bool try_acquire_or_renew();
    bool release();

private:
    void run();
    bool sleep_for(std::chrono::milliseconds d);  // false when stopping
    std::string path(bool collection) const;
    // The Lease as answered: its record becomes the observed one (and its time, when it changed).
    void observe(const nlohmann::json& lease);
    nlohmann::json lease_with(const std::string& holder, const std::string& acquire, uint64_t transitions,
                              uint32_t duration) const;

    const LoadBalancerConfig::Election cfg_;
    const std::string id_;
    kube::ApiClient client_;
    mutable std::mutex mu_;
    nlohmann::json observed_;  // the Lease last read or written (metadata and spec)
    std::string observed_spec_;
    std::chrono::steady_clock::time_point observed_time_{};
    std::atomic<bool> leading_{false};
    std::atomic<bool> eligible_{false};
    std::atomic<uint64_t> lost_{0};
    std::atomic<int64_t> renewed_ns_{0};  // the last renewal, steady clock
    std::atomic<bool> stopping_{false};
    std::mutex wait_mu_;
    std::condition_variable wait_cv_;
    std::thread thread_;
};

// client-go's MicroTime: "2006-01-02T15:04:05.000000Z", UTC.
std::string micro_time(std::chrono::system_clock::time_point t);

}  // namespace svcgate::ctl::lb
