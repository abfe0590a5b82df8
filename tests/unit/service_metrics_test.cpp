// control/snapshot/service_metrics.h: a dual-stack Service's metrics, one series per family.
#include <gtest/gtest.h>

#include "control/snapshot/service_metrics.h"
#include "test_support.h"
#include "metrics_check.h"

using namespace svcgate;
using namespace svcgate::ctl;

TEST(ServiceMetrics, ServicesAndEndpoints) {
    auto t = svcgate::test::tracer(svcgate::test::dual_stack_config(R"(
  - name: default/web
    cluster_ips: [10.96.0.5, 'fd00:96::5']
    ports: [{name: http, port: 80}]
    endpoints: [10.244.2.7, 'fd00:244:2::7']
)"));
    MetricsText m;
    collect_services(m, t->snapshot(), t->slots());
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(
        s, "svcgate_service_packets_total{service=\"default/web\",port=\"http\",protocol=\"TCP\",family=\"IPv4\"} 0"));
    EXPECT_TRUE(has_line(
        s, "svcgate_service_bytes_total{service=\"default/web\",port=\"http\",protocol=\"TCP\",family=\"IPv6\"} 0"));
    EXPECT_TRUE(
        has_line(s,
                 "svcgate_endpoint_flows{service=\"default/web\",port=\"http\",protocol=\"TCP\",family=\"IPv4\","
                 "endpoint=\"10.244.2.7:80\"} 0"));
    EXPECT_TRUE(has_line(s,
                         "svcgate_endpoint_packets_total{service=\"default/web\",port=\"http\",protocol=\"TCP\","
                         "family=\"IPv6\",endpoint=\"[fd00:244:2::7]:80\"} 0"));
    expect_declared(s);
}
