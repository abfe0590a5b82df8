// control/state/reload_metrics.h: the reloads' metrics text; the histogram is cumulative.
#include <gtest/gtest.h>

#include "control/state/reload_metrics.h"
#include "metrics_check.h"

using namespace svcgate;
using namespace svcgate::ctl;

TEST(ReloadMetrics, HistogramIsCumulative) {
    MetricsText m;
    ReloadStatus r;
    r.ok = 2, r.failed = 1;
    r.observe(0.0005, 1000.5);  // in every bucket
    r.observe(0.003, 2000.25);  // from le=0.004
    collect_reload(m, r, 3, "1.2.3", "DPDK 22.11.0");
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "svcgate_reloads_total{result=\"ok\"} 2"));
    EXPECT_TRUE(has_line(s, "svcgate_reloads_total{result=\"failed\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_reload_duration_seconds_bucket{le=\"0.001\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_reload_duration_seconds_bucket{le=\"0.002\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_reload_duration_seconds_bucket{le=\"0.004\"} 2"));
    EXPECT_TRUE(has_line(s, "svcgate_reload_duration_seconds_bucket{le=\"+Inf\"} 2"));
    EXPECT_TRUE(has_line(s, "svcgate_reload_duration_seconds_count 2"));
    EXPECT_TRUE(has_line(s, "svcgate_reload_last_success_timestamp_seconds 2000.250"));
    EXPECT_TRUE(has_line(s, "svcgate_build_info{version=\"1.2.3\",dpdk=\"DPDK 22.11.0\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_config_generation 3"));
    expect_declared(s);
}
