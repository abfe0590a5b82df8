// control/api/metrics_collectors.h: the dataplane counters' text, as Prometheus reads it: HELP and
// TYPE before the samples, the names and labels that dashboards and alerts use.
#include <gtest/gtest.h>

#include "control/api/metrics_collectors.h"
#include "metrics_check.h"

using namespace svcgate;
using namespace svcgate::ctl;

TEST(MetricsCollectors, Flows) {
    MetricsText m;
    dp::WorkerCounters t{};
    t.flows_created = 7, t.flows_early_dropped = 2, t.flows_port_remapped = 5, t.flows_reopened = 4;
    collect_flows(m,
                  FlowGauges{.live4 = 3,
                             .capacity4 = 1024,
                             .has_v6 = true,
                             .live6 = 1,
                             .capacity6 = 256,
                             .index_moves4 = 12,
                             .index_moves6 = 8},
                  t);
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "# TYPE svcgate_flows gauge"));
    EXPECT_TRUE(has_line(s, "svcgate_flows{family=\"IPv4\"} 3"));
    EXPECT_TRUE(has_line(s, "svcgate_flows{family=\"IPv6\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_flow_capacity{family=\"IPv6\"} 256"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_created_total 7"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_early_dropped_total 2"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_port_remapped_total 5"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_reopened_total 4"));
    EXPECT_TRUE(has_line(s, "svcgate_flow_index_moves_total{family=\"IPv4\"} 12"));
    EXPECT_TRUE(has_line(s, "svcgate_flow_index_moves_total{family=\"IPv6\"} 8"));
    expect_declared(s);
    MetricsText v4;
    collect_flows(v4, FlowGauges{.live4 = 3, .capacity4 = 1024}, t);
    EXPECT_EQ(v4.str().find("IPv6"), std::string::npos);
}

TEST(MetricsCollectors, FragmentsAndVerdicts) {
    MetricsText m;
    dp::WorkerCounters t{};
    t.frag_stored = 4, t.frag_released = 3, t.frag_out_packets = 2, t.frag_out_fragments = 5;
    t.verdicts[static_cast<unsigned>(dp::Verdict::dnat)] = 11;
    t.drops[static_cast<unsigned>(dp::DropReason::no_route)] = 6;
    t.rejects[static_cast<unsigned>(dp::DropReason::reject_no_endpoints)] = 9;
    collect_fragments(m, t, 1, 2);
    collect_verdicts(m, t, 300);
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "svcgate_fragments_total{outcome=\"held\"} 4"));
    EXPECT_TRUE(has_line(s, "svcgate_fragments_total{outcome=\"fragments_out\"} 5"));
    EXPECT_TRUE(has_line(s, "svcgate_fragments_held 1"));
    EXPECT_TRUE(has_line(s, "svcgate_fragment_datagrams 2"));
    EXPECT_TRUE(has_line(s, "svcgate_packets_total{verdict=\"dnat\"} 11"));
    EXPECT_TRUE(has_line(s, "svcgate_drops_total{reason=\"no_route\"} 6"));
    EXPECT_TRUE(has_line(s, "svcgate_rejects_total{reason=\"reject_no_endpoints\"} 9"));
    // Only reject reasons are reject samples; reject_failed is a drop.
    EXPECT_EQ(s.find("svcgate_rejects_total{reason=\"no_route\"}"), std::string::npos);
    EXPECT_EQ(s.find("svcgate_rejects_total{reason=\"reject_failed\"}"), std::string::npos);
    EXPECT_TRUE(has_line(s, "svcgate_mbufs_in_use 300"));
    expect_declared(s);
}

TEST(MetricsCollectors, Ports) {
    MetricsText m;
    const std::vector<PortSample> ports{{"ext", 10, 20, true}, {"cluster", 30, 40, false}};
    collect_ports(m, ports);
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "svcgate_port_packets_total{port=\"ext\",direction=\"rx\"} 10"));
    EXPECT_TRUE(has_line(s, "svcgate_port_packets_total{port=\"cluster\",direction=\"tx\"} 40"));
    EXPECT_TRUE(has_line(s, "svcgate_port_link_up{port=\"ext\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_port_link_up{port=\"cluster\"} 0"));
    expect_declared(s);
}
