// control/routing/health_metrics.h: the host path's and health's metrics text.
#include <gtest/gtest.h>

#include "control/routing/health_metrics.h"
#include "metrics_check.h"

using namespace svcgate;
using namespace svcgate::ctl;

TEST(HealthMetrics, HostPathAndHealth) {
    MetricsText m;
    dp::WorkerCounters t{};
    t.punted = 5, t.host_out = 6, t.host_out_dropped = 1;
    HealthState h;
    h.healthy = true;
    h.announced = {"192.168.100.10/32", "fd00:100::10/128"};
    collect_host_path(m, t, h);
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "svcgate_host_path_packets_total{direction=\"punted\"} 5"));
    EXPECT_TRUE(has_line(s, "svcgate_host_path_packets_total{direction=\"out_dropped\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_healthy 1"));
    EXPECT_TRUE(has_line(s, "svcgate_draining 0"));
    EXPECT_TRUE(has_line(s, "svcgate_announced_prefixes 2"));
    expect_declared(s);
}
