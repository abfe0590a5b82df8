// control/ha/sync_metrics.h: replication's metrics text, every peer and drop reason.
#include <gtest/gtest.h>

#include "control/ha/sync.h"
#include "control/ha/sync_metrics.h"
#include "metrics_check.h"

using namespace svcgate;
using namespace svcgate::ctl;

TEST(SyncMetrics, PeersLagTakeoversAndDrops) {
    MetricsText m;
    report::Ha r{.ready = true, .replicas = 12, .takeovers = 2, .events = 50, .events_ring_full = 1, .queued = 3};
    r.peers.push_back(report::Peer{.address = "10.0.9.2:7400",
                                   .alive = true,
                                   .last_heard_seconds = 0.25,
                                   .flows_sent = 100,
                                   .flows_received = 90});
    r.peers.push_back(report::Peer{.address = "[fd00:9::3]:7400"});
    uint64_t drops[sync::kDrops] = {}, record_drops[kRecordDrops] = {};
    drops[static_cast<unsigned>(sync::Drop::bad_mac)] = 4;
    r.drops = drops_by_name(drops, record_drops);
    collect_sync(m, r);
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
