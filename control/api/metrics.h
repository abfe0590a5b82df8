// Prometheus: the text exposition of the daemon's counters, served over HTTP by cpp-httplib on
// its own threads (control.metrics, 127.0.0.1:9477 by default). A slow or silent client holds one
// of the server's threads until its read timeout, never the control thread and never a worker;
// rendering takes the daemon's lock only while it reads the counters.
//
// Runs on: the metrics server's threads; render_metrics() on any thread holding the daemon's lock.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "control/base/status.h"
#include "control/state/daemon_state.h"

namespace httplib {
class Server;
}

namespace svcgate::ctl {

// The Prometheus text exposition format (caller holds st.mu).
std::string render_metrics(const DaemonState& st);

class MetricsServer {
public:
    MetricsServer();
    ~MetricsServer();  // stops the server and joins its thread
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    // Listens on `at` and serves GET /metrics from `st`; no address: off. On failure the gateway
    // runs on without metrics.
    Status start(const std::optional<HostPort>& at, DaemonState& st);

private:
    std::unique_ptr<httplib::Server> server_;
    std::thread thread_;
};

}  // namespace svcgate::ctl
