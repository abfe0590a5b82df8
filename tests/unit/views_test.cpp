// control/api/views.h: each report's JSON keys are its member list's, written and read alike;
// an empty optional is null or left out as the list says; a reader takes what is there.
#include <gtest/gtest.h>

#include "control/api/views.h"

using namespace svcgate::ctl;
using Json = nlohmann::ordered_json;

namespace {

// A status with every member set, the optional ones too.
report::Status full_status() {
    report::Status s{.config = "/etc/svcgate/gw.yaml", .generation = 7, .uptime_seconds = 12, .workers = 2};
    s.client_ip = {.default_mode = "preserve", .preserve_service_ports = 3};
    s.client_ip.no_return.push_back({.service = "a/b:80", .family = "IPv6", .resent_syns = 4});
    s.ports.push_back({.name = "ext", .device = "net_null0", .link = true, .rx_queues = 2, .rss_steering = "on"});
    s.last_reload_error = "bad: line 3";
    s.last_reload_ok = false;
    s.last_reload_seconds = 0.25;
    s.health = {.live = true, .announced = {"10.0.0.1/32"}, .announce_table = 101};
    s.health.connections_left = 5;
    s.health.drain_seconds_left = 12.5;
    s.health.handover = report::Handover{.done = true, .peers = 1, .flows = 9};
    s.health.announce_error = "EPERM";
    report::Ha ha{.listen = "10.0.0.1:7400", .ready = true, .replicas = 2};
    ha.peers.push_back({.address = "10.0.0.2:7400", .last_heard_seconds = 0.5, .addresses = {"192.0.2.1"}});
    ha.drops.add("bad_mac", 1);
    s.ha = ha;
    report::KubeApi api{.server = "https://k:6443", .synced = true, .first_sync_ms = 12.5};
    api.requests.add("GET", {});
    api.requests.items.back().second.add("200", 3);
    report::KubeKind kind{.synced = true, .objects = 4};
    kind.events.add("ADDED", 4);
    api.kinds.add("services", kind);
    api.programming = {.samples = 2, .p50_ms = 1.5, .p99_ms = 2.5, .max_ms = 2.5};
    api.rejected.push_back({.object = "a/b", .reason = "r", .message = "m"});
    s.kubernetes.api = api;
    s.kubernetes.no_rule.push_back({.service = "a/h", .why = "headless / no clusterIP"});
    s.kubernetes.object_issues.push_back({.object = "o", .reason = "r", .message = "m", .left_out = true});
    return s;
}

}  // namespace

TEST(Views, AReportReadBackIsWrittenAgainAsItWas) {
    const Json j = full_status();
    const Json again = j.get<report::Status>();
    EXPECT_EQ(again.dump(), j.dump());
    report::Stats st;
    st.ports.add("ext", {.rx_packets = 1, .tx_errors = 2});
    st.verdicts.add("tx", 3);
    st.workers.push_back({.rx = 4, .unaccounted = -1});
    st.services.push_back({.name = "a/b:80", .external_ips = {"192.0.2.9"}, .external_source = "kept"});
    st.endpoints.push_back({.service = "a/b:80", .internal = "all", .flows = -2});
    const Json s = st;
    EXPECT_EQ(Json(s.get<report::Stats>()).dump(), s.dump());
    const std::vector<report::Flow> flows{{.original = "x", .snat = "10.0.0.1:1024", .replica_of = 2}, {}};
    const Json f = flows;
    EXPECT_EQ(Json(f.get<std::vector<report::Flow>>()).dump(), f.dump());
}

TEST(Views, KeysInTheOrderOfTheMemberList) {
    const Json j = report::Reload{.ok = true, .generation = 3, .message = "published"};
    EXPECT_EQ(j.dump(), R"({"ok":true,"generation":3,"message":"published"})");
    const Json k = report::Drain{.timeout_seconds = 30};
    EXPECT_EQ(k.dump(), R"({"ok":true,"draining":true,"timeout_seconds":30})");
}

TEST(Views, AnEmptyOptionalIsNullOrLeftOutAsItsListSays) {
    // Nullable: written as null.
    const Json f = report::Flow{.original = "x"};
    ASSERT_TRUE(f.contains("snat"));
    EXPECT_TRUE(f["snat"].is_null());
    EXPECT_TRUE(f["replica_of"].is_null());
    const Json st = report::Status{};
    EXPECT_TRUE(st["ha"].is_null());
    EXPECT_TRUE(st["last_reload_error"].is_null());
    EXPECT_TRUE(st["kubernetes"]["api"].is_null());
    // Omitted: not written at all (health while not draining; programming with no samples).
    const Json h = report::Health{.live = true};
    EXPECT_FALSE(h.contains("connections_left"));
    EXPECT_FALSE(h.contains("handover"));
    EXPECT_FALSE(h.contains("announce_error"));
    const Json p = report::Programming{};
    EXPECT_EQ(p.dump(), R"({"samples":0})");
    // And read back as empty.
    EXPECT_FALSE(f.get<report::Flow>().snat);
    EXPECT_FALSE(h.get<report::Health>().connections_left);
}

TEST(Views, AReaderTakesWhatIsThere) {
    // An older or newer daemon: keys missing, null or unknown leave the defaults.
    const Json j = Json::parse(R"({"name": "a/b:80", "node_port": null, "unknown": 5})");
    const report::Service s = j.get<report::Service>();
    EXPECT_EQ(s.name, "a/b:80");
    EXPECT_EQ(s.node_port, 0);
    EXPECT_FALSE(s.external_source);
    // A value of another type is an error, not a guess.
    EXPECT_THROW((void)Json::parse(R"({"packets": "many"})").get<report::Service>(), nlohmann::json::type_error);
}
