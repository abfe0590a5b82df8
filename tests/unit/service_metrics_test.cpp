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
    EXPECT_EQ(s.find("svcgate_client_ip_no_return_total{"), std::string::npos) << "no Service preserves";
    expect_declared(s);
}

TEST(ServiceMetrics, APreservingServicePortHasItsNoReturnCount) {
    auto t = svcgate::test::tracer(svcgate::test::gateway_config(R"(
  - name: default/web
    type: NodePort
    cluster_ip: 10.96.0.5
    client_ip: preserve
    ports: [{name: http, port: 80, node_port: 30080}]
    endpoints: [10.244.2.7]
)"));
    t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30080 [S]");
    t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30080 [S]");
    MetricsText m;
    collect_services(m, t->snapshot(), t->slots());
    EXPECT_TRUE(has_line(m.str(),
                         "svcgate_client_ip_no_return_total{service=\"default/web\",port=\"http\","
                         "protocol=\"TCP\",family=\"IPv4\"} 1"))
        << m.str();
    expect_declared(m.str());
}
