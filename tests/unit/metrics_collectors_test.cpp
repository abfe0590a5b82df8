// control/api/metrics_collectors.h: each collector's text on its own, as Prometheus reads it:
// HELP and TYPE before the samples, the names and labels that dashboards and alerts use.
#include <gtest/gtest.h>

#include "control/api/metrics_collectors.h"
#include <cstring>
#include <set>
#include <sstream>

#include "test_support.h"

using namespace svcgate;
using namespace svcgate::ctl;

namespace {

bool has_line(const std::string& text, const std::string& line) {
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

// Every sample's family was declared (HELP and TYPE) before it.
void expect_declared(const std::string& text) {
    std::set<std::string> declared;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# TYPE ", 0) == 0) {
            declared.insert(line.substr(7, line.find(' ', 7) - 7));
        } else if (!line.empty() && line[0] != '#') {
            std::string name = line.substr(0, line.find_first_of("{ "));
            for (const char* suffix : {"_bucket", "_sum", "_count"})
                if (name.ends_with(suffix) && !declared.count(name)) name.resize(name.size() - std::strlen(suffix));
            EXPECT_TRUE(declared.count(name)) << "undeclared: " << line;
        }
    }
}

}  // namespace

TEST(MetricsCollectors, Flows) {
    MetricsText m;
    dp::WorkerCounters t{};
    t.flows_created = 7, t.flows_early_dropped = 2, t.flows_port_remapped = 5, t.flows_reopened = 4;
    collect_flows(m, FlowGauges{.live4 = 3, .capacity4 = 1024, .has_v6 = true, .live6 = 1, .capacity6 = 256}, t);
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "# TYPE svcgate_flows gauge"));
    EXPECT_TRUE(has_line(s, "svcgate_flows{family=\"IPv4\"} 3"));
    EXPECT_TRUE(has_line(s, "svcgate_flows{family=\"IPv6\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_flow_capacity{family=\"IPv6\"} 256"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_created_total 7"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_early_dropped_total 2"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_port_remapped_total 5"));
    EXPECT_TRUE(has_line(s, "svcgate_flows_reopened_total 4"));
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

TEST(MetricsCollectors, PortsAndHostPath) {
    MetricsText m;
    const std::vector<PortSample> ports{{"ext", 10, 20, true}, {"cluster", 30, 40, false}};
    collect_ports(m, ports);
    dp::WorkerCounters t{};
    t.punted = 5, t.host_out = 6, t.host_out_dropped = 1;
    HealthState h;
    h.healthy = true;
    h.announced = {"192.168.100.10/32", "fd00:100::10/128"};
    collect_host_path(m, t, h);
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "svcgate_port_packets_total{port=\"ext\",direction=\"rx\"} 10"));
    EXPECT_TRUE(has_line(s, "svcgate_port_packets_total{port=\"cluster\",direction=\"tx\"} 40"));
    EXPECT_TRUE(has_line(s, "svcgate_port_link_up{port=\"ext\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_port_link_up{port=\"cluster\"} 0"));
    EXPECT_TRUE(has_line(s, "svcgate_host_path_packets_total{direction=\"punted\"} 5"));
    EXPECT_TRUE(has_line(s, "svcgate_host_path_packets_total{direction=\"out_dropped\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_healthy 1"));
    EXPECT_TRUE(has_line(s, "svcgate_draining 0"));
    EXPECT_TRUE(has_line(s, "svcgate_announced_prefixes 2"));
    expect_declared(s);
}

TEST(MetricsCollectors, Sync) {
    MetricsText m;
    SyncStatus y;
    y.ready = true;
    y.queued = 3;
    y.replicas = 12;
    y.peers.push_back(SyncPeerStatus{.address = "10.0.9.2:7400",
                                     .alive = true,
                                     .last_heard_seconds = 0.25,
                                     .flows_sent = 100,
                                     .flows_received = 90});
    y.peers.push_back(SyncPeerStatus{.address = "[fd00:9::3]:7400"});
    y.drops[static_cast<unsigned>(sync::Drop::bad_mac)] = 4;
    dp::WorkerCounters t{};
    t.takeovers = 2, t.sync_events = 50, t.sync_ring_full = 1;
    collect_sync(m, y, t);
    const std::string& s = m.str();
    EXPECT_TRUE(has_line(s, "svcgate_sync_ready 1"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_peer_up{peer=\"10.0.9.2:7400\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_peer_up{peer=\"[fd00:9::3]:7400\"} 0"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_peer_last_heard_seconds{peer=\"10.0.9.2:7400\"} 0.250"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_peer_last_heard_seconds{peer=\"[fd00:9::3]:7400\"} -1.000"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_flows_total{peer=\"10.0.9.2:7400\",direction=\"received\"} 90"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_queued 3"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_replicas 12"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_takeovers_total 2"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_events_total{outcome=\"ring_full\"} 1"));
    EXPECT_TRUE(has_line(s, "svcgate_sync_drops_total{reason=\"bad_mac\"} 4"));
    EXPECT_NE(s.find("svcgate_sync_drops_total{reason=\"record_full\"} 0"), std::string::npos);
    expect_declared(s);
}

TEST(MetricsCollectors, ReloadHistogramIsCumulative) {
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

TEST(MetricsCollectors, ServicesAndEndpoints) {
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
