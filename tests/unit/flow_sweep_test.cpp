// Reloads and live flows (issue #4): established flows keep their endpoint while it exists; TCP
// flows to a removed endpoint are answered with RST both ways; UDP flows to a removed endpoint
// go, so the next datagram selects again; terminating endpoints keep their flows, get no new ones.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

// The gateway of these tests, up to its services: list.
const char* const kGateway = R"(
dataplane:
  one_arm_masquerade: false   # client and pods share a next hop here; keep the tuples plain
  ports:
    - {name: ext, addresses: [192.168.67.8/24]}
    - {name: cluster, addresses: [10.192.0.2/24]}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
cluster:
  node_ips: [192.168.67.8]
  cluster_cidrs: [10.244.0.0/16]
services:)";

std::string config(const std::string& endpoints) {
    return std::string(kGateway) + R"(
  - name: default/web
    cluster_ip: 10.96.0.50
    ports: [{name: http, protocol: TCP, port: 80}, {name: dns, protocol: UDP, port: 53}]
    endpoints: )" +
        endpoints + "\n";
}

const std::string kAB = "[{ip: 10.244.2.4}, {ip: 10.244.2.6}]";
const std::string kB = "[{ip: 10.244.2.6}]";

// Opens TCP connections (SYN, SYN-ACK, ACK) from lab-sleeper-like clients until one lands on
// each endpoint; returns client port → endpoint.
std::map<int, std::string> connect_both(ctl::Tracer& t) {
    std::map<int, std::string> by_port;
    std::set<std::string> seen;
    for (int port = 40000; seen.size() < 2 && port < 40100; ++port) {
        auto syn = t.run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port));
        EXPECT_EQ(syn.verdict, Verdict::dnat);
        auto synack = t.run_spec(fmt::format("tcp {} > 10.244.2.9:{} [S.]", *syn.endpoint, port));
        EXPECT_EQ(synack.verdict, Verdict::reply) << synack.text();
        EXPECT_EQ(t.run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [.]", port)).verdict, Verdict::dnat);
        by_port[port] = *syn.endpoint;
        seen.insert(*syn.endpoint);
    }
    return by_port;
}

}  // namespace

TEST(Reload, TcpFlowsKeepSurvivingEndpointsAndGetRstForRemovedOnes) {
    test::ensure_eal();
    auto t = test::tracer(config(kAB), 7);
    auto flows = connect_both(*t);
    std::set<std::string> eps;
    for (auto& [port, ep] : flows) eps.insert(ep);
    ASSERT_EQ(eps, std::set<std::string>({"10.244.2.4:80", "10.244.2.6:80"}));
    // Reload without 10.244.2.4.
    auto sw = t->reload(ctl::load_config_string(config(kB), "r.yaml"));
    EXPECT_GE(sw.tcp_closed, 1u);
    EXPECT_EQ(sw.dgram_removed, 0u);
    for (auto& [port, ep] : flows) {
        auto r = t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [.]", port));
        if (ep == "10.244.2.6:80") {
            EXPECT_EQ(r.verdict, Verdict::dnat) << "a surviving endpoint keeps its flow: " << r.text();
            EXPECT_EQ(r.endpoint.value_or(""), "10.244.2.6:80") << "the flow keeps its endpoint across the reload";
            EXPECT_EQ(r.service.value_or(""), "default/web:http") << "and its service";
            EXPECT_EQ(r.out.value_or(""), fmt::format("tcp 10.244.2.9:{} > 10.244.2.6:80", port));
        } else {
            EXPECT_EQ(r.verdict, Verdict::reject) << r.text();
            EXPECT_EQ(r.reason, DropReason::reject_endpoint_gone);
            EXPECT_EQ(r.out_flags.value_or(""), "R") << "the client gets an RST";
            // The other way: a late packet from the removed pod is answered with RST too.
            auto back = t->run_spec(fmt::format("tcp 10.244.2.4:80 > 10.244.2.9:{} [.]", port));
            EXPECT_EQ(back.verdict, Verdict::reject) << back.text();
            // An RST itself is never answered.
            auto rst = t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [R]", port));
            EXPECT_EQ(rst.verdict, Verdict::drop);
            EXPECT_EQ(rst.reason, DropReason::endpoint_gone);
        }
    }
    // New connections only reach the endpoint that is left.
    for (int port = 50000; port < 50020; ++port)
        EXPECT_EQ(t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port)).endpoint.value_or(""),
                  "10.244.2.6:80");
}

TEST(Reload, UdpFlowToRemovedEndpointGoesAndTheNextDatagramSelectsAgain) {
    test::ensure_eal();
    auto t = test::tracer(config(kAB), 3);
    int port = 30000;
    std::string first;
    for (; port < 30100; ++port) {  // a UDP flow on the endpoint that will go
        first = t->run_spec(fmt::format("udp 10.244.2.9:{} > 10.96.0.50:53", port)).endpoint.value_or("");
        if (first == "10.244.2.4:53") break;
    }
    ASSERT_EQ(first, "10.244.2.4:53");
    auto again = t->run_spec(fmt::format("udp 10.244.2.9:{} > 10.96.0.50:53", port));
    ASSERT_TRUE(again.out.has_value());
    EXPECT_EQ(*again.out, fmt::format("udp 10.244.2.9:{} > 10.244.2.4:53", port)) << "sticky before the reload";
    auto sw = t->reload(ctl::load_config_string(config(kB), "r.yaml"));
    EXPECT_GE(sw.dgram_removed, 1u);
    auto after = t->run_spec(fmt::format("udp 10.244.2.9:{} > 10.96.0.50:53", port));
    EXPECT_EQ(after.verdict, Verdict::dnat) << after.text();
    EXPECT_TRUE(after.new_flow) << "the stale entry is gone: a new flow";
    EXPECT_EQ(after.endpoint.value_or(""), "10.244.2.6:53");
}

TEST(Reload, TerminatingEndpointKeepsItsFlowsButGetsNoNewOnes) {
    test::ensure_eal();
    auto t = test::tracer(config(kAB), 11);
    auto flows = connect_both(*t);
    auto sw = t->reload(ctl::load_config_string(
        config("[{ip: 10.244.2.4, ready: false, serving: true, terminating: true}, {ip: 10.244.2.6}]"), "r.yaml"));
    EXPECT_EQ(sw.tcp_closed, 0u);
    for (auto& [port, ep] : flows) {
        auto r = t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [.]", port));
        EXPECT_EQ(r.verdict, Verdict::dnat) << r.text();
        EXPECT_EQ(r.out.value_or(""), fmt::format("tcp 10.244.2.9:{} > {}", port, ep));
    }
    for (int port = 50000; port < 50030; ++port)
        EXPECT_EQ(t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port)).endpoint.value_or(""),
                  "10.244.2.6:80");
}

namespace {

// Two Services with endpoints of their own, in the order given; `extra` adds a third in front.
std::string two_services(bool reversed, const std::string& extra = "") {
    const std::string web = R"(
  - name: default/web
    cluster_ip: 10.96.0.50
    ports: [{name: http, protocol: TCP, port: 80}]
    endpoints: [10.244.2.4, 10.244.2.5]
)";
    const std::string api = R"(
  - name: default/api
    cluster_ip: 10.96.0.60
    ports: [{name: http, protocol: TCP, port: 80}]
    endpoints: [10.244.2.14, 10.244.2.15]
)";
    return kGateway + extra + (reversed ? api + web : web + api);
}

// The packets a service port and an endpoint have counted, by name, in the current snapshot.
uint64_t service_packets(const ctl::Tracer& t, const std::string& name) {
    const ServiceSnapshot& s = t.snapshot();
    for (uint32_t i = 0; i < s.services.size(); ++i)
        if (s.info(i).name == name) return t.slots().service_total(s.services[i].slot).packets;
    ADD_FAILURE() << "no service port " << name;
    return 0;
}
uint64_t endpoint_packets(const ctl::Tracer& t, const std::string& ip) {
    const ServiceSnapshot& s = t.snapshot();
    for (const Endpoint& e : s.endpoints)
        if (ctl::format_ip(e.ip) == ip) return t.slots().endpoint_total(e.slot).packets;
    ADD_FAILURE() << "no endpoint " << ip;
    return 0;
}

}  // namespace

// A long-lived flow counts for its own service and endpoint after any number of reloads, the
// Services reordered or not; no other service or endpoint gains a packet from it.
TEST(Reload, FlowKeepsCountingForItsOwnServiceAndEndpointAcrossReloads) {
    test::ensure_eal();
    auto t = test::tracer(two_services(false), 5);
    auto syn = t->run_spec("tcp 10.244.2.9:41000 > 10.96.0.50:80 [S]");
    ASSERT_EQ(syn.verdict, Verdict::dnat);
    const std::string ep = syn.endpoint->substr(0, syn.endpoint->find(':'));
    const std::string other_ep = ep == "10.244.2.4" ? "10.244.2.5" : "10.244.2.4";
    ASSERT_EQ(t->run_spec("reply 1 [S.]").verdict, Verdict::reply);
    ASSERT_EQ(service_packets(*t, "default/web:http"), 2u);
    const std::vector<std::string> reloads = {
        two_services(true),   // the Services reordered: every snapshot index changes
        two_services(true, R"(
  - name: default/first
    cluster_ip: 10.96.0.70
    ports: [{name: p, protocol: TCP, port: 80}]
    endpoints: [10.244.2.24]
)"),                          // a Service in front of both
        two_services(false),  // back, that one gone again
        two_services(true,
                     [] {  // 150 Services in front: the StatsTable grows under the flow
                         std::string many;
                         for (int i = 0; i < 150; ++i)
                             many += fmt::format(
                                 "\n  - {{name: default/m{}, cluster_ip: 10.96.1.{}, ports: [{{name: p, protocol: TCP, "
                                 "port: 80}}], "
                                 "endpoints: [10.244.2.{}]}}\n",
                                 i, i + 1, 100 + i % 100);
                         return many;
                     }()),
    };
    uint64_t web = 2, mine = endpoint_packets(*t, ep);
    for (size_t n = 0; n < reloads.size(); ++n) {
        t->reload(ctl::load_config_string(reloads[n], "r.yaml"));
        const uint64_t api = service_packets(*t, "default/api:http"), other = endpoint_packets(*t, other_ep);
        for (int i = 0; i < 5; ++i) {
            auto r = t->run_spec("tcp 10.244.2.9:41000 > 10.96.0.50:80 [.]");
            ASSERT_EQ(r.verdict, Verdict::dnat) << r.text();
            EXPECT_EQ(r.service.value_or(""), "default/web:http");
            EXPECT_EQ(r.endpoint.value_or(""), *syn.endpoint);
        }
        web += 5;
        mine += 5;
        EXPECT_EQ(service_packets(*t, "default/web:http"), web) << "after reload " << n + 1;
        EXPECT_EQ(endpoint_packets(*t, ep), mine) << "after reload " << n + 1;
        EXPECT_EQ(service_packets(*t, "default/api:http"), api) << "another service gained nothing";
        EXPECT_EQ(endpoint_packets(*t, other_ep), other) << "another endpoint gained nothing";
    }
}

// Least-connection after a reload still sees the flows that started before it: the endpoint
// added by the reload gets the new connections until it has as many as the old one.
TEST(Reload, LeastConnectionSeesLongLivedFlowsAfterAReload) {
    test::ensure_eal();
    auto lc = [](const std::string& endpoints) { return config(endpoints) + "    scheduler: lc\n"; };
    auto t = test::tracer(lc("[{ip: 10.244.2.4}]"), 9);
    for (int port = 42000; port < 42010; ++port)
        ASSERT_EQ(t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port)).endpoint.value_or(""),
                  "10.244.2.4:80");
    // Two reloads: the new endpoint added first in the list, then an unrelated change.
    t->reload(ctl::load_config_string(lc("[{ip: 10.244.2.6}, {ip: 10.244.2.4}]"), "r1.yaml"));
    t->reload(ctl::load_config_string(lc("[{ip: 10.244.2.4}, {ip: 10.244.2.6}]"), "r2.yaml"));
    std::map<std::string, int> picks;
    for (int port = 43000; port < 43010; ++port)
        picks[t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port)).endpoint.value_or("")]++;
    EXPECT_EQ(picks, (std::map<std::string, int>{{"10.244.2.6:80", 10}})) << "lc counts the 10 older flows";
    for (const Endpoint& e : t->snapshot().endpoints)
        if (e.port == rte_cpu_to_be_16(80)) {
            EXPECT_EQ(t->slots().active(e.slot), 10);
        }
}

// Two service ports whose stable ids (a 32-bit hash of name and protocol) collide still get
// slots of their own: each counts only its own packets.
TEST(Reload, ServicePortsWithCollidingIdsCountApart) {
    test::ensure_eal();
    auto t = test::tracer(std::string(kGateway) + R"(
  - {name: d/7e78b, cluster_ip: 10.96.0.51, ports: [{name: p, protocol: TCP, port: 80}], endpoints: [10.244.2.4]}
  - {name: d/85c38, cluster_ip: 10.96.0.52, ports: [{name: p, protocol: TCP, port: 80}], endpoints: [10.244.2.5]}
)");
    const ServiceSnapshot& s = t->snapshot();
    ASSERT_EQ(s.services.size(), 2u);
    ASSERT_EQ(s.services[0].id, s.services[1].id) << "the two names must collide for this test to mean anything";
    EXPECT_NE(s.services[0].slot, s.services[1].slot);
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.51:80 [S]", 45000 + i)).verdict, Verdict::dnat);
    ASSERT_EQ(t->run_spec("tcp 10.244.2.9:46000 > 10.96.0.52:80 [S]").verdict, Verdict::dnat);
    t->reload(ctl::load_config_string(std::string(kGateway) + R"(
  - {name: d/85c38, cluster_ip: 10.96.0.52, ports: [{name: p, protocol: TCP, port: 80}], endpoints: [10.244.2.5]}
  - {name: d/7e78b, cluster_ip: 10.96.0.51, ports: [{name: p, protocol: TCP, port: 80}], endpoints: [10.244.2.4]}
)",
                                      "r.yaml"));
    EXPECT_EQ(service_packets(*t, "d/7e78b:p"), 3u);
    EXPECT_EQ(service_packets(*t, "d/85c38:p"), 1u);
}

// A slot is given back once no config names it and no flow holds it: a removed Service keeps its
// slots while a flow to it lives, loses them when the flow expires; when it comes back its
// counters go on by name, its endpoint's restart from zero.
TEST(Reload, SlotsAreGivenBackOnceNoConfigNamesThemAndNoFlowHoldsThem) {
    test::ensure_eal();
    const std::string a =
        "\n  - {name: d/a, cluster_ip: 10.96.0.61, ports: [{name: p, protocol: TCP, port: 80}], endpoints: "
        "[10.244.2.4]}";
    const std::string b =
        "\n  - {name: d/b, cluster_ip: 10.96.0.62, ports: [{name: p, protocol: TCP, port: 80}], endpoints: "
        "[10.244.2.5]}";
    auto t = test::tracer(kGateway + a + b + "\n");
    ASSERT_EQ(t->run_spec("tcp 10.244.2.9:47000 > 10.96.0.62:80 [S]").verdict, Verdict::dnat);
    ASSERT_EQ(t->run_spec("tcp 10.244.2.9:47000 > 10.96.0.62:80 [S]").verdict, Verdict::dnat);
    EXPECT_EQ(t->slots().service_slots_in_use(), 2u);
    EXPECT_EQ(t->slots().endpoint_slots_in_use(), 2u);
    t->reload(ctl::load_config_string(kGateway + a + "\n", "r1.yaml"));
    EXPECT_EQ(t->slots().endpoint_slots_in_use(), 2u) << "the flow to d/b's endpoint still holds its slot";
    EXPECT_EQ(t->slots().service_slots_in_use(), 2u);
    t->advance(200);  // the flow (RST-marked, closing) expires
    EXPECT_EQ(t->flows().live_total(), 0u);
    EXPECT_EQ(t->slots().endpoint_slots_in_use(), 1u) << "nothing holds d/b's endpoint any more";
    EXPECT_EQ(t->slots().service_slots_in_use(), 1u);
    t->reload(ctl::load_config_string(kGateway + a + b + "\n", "r2.yaml"));
    EXPECT_EQ(service_packets(*t, "d/b:p"), 2u) << "a Service's counters go on by name";
    EXPECT_EQ(endpoint_packets(*t, "10.244.2.5"), 0u) << "an endpoint's restart";
}

// Closes the connection from `port` in the client's and the endpoint's order (FIN, FIN, ACK):
// the flow is then in TIME_WAIT.
void close_connection(ctl::Tracer& t, int port, const std::string& ep) {
    auto fin = t.run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [F.]", port));
    EXPECT_EQ(fin.verdict, Verdict::dnat) << fin.text();
    auto fin2 = t.run_spec(fmt::format("tcp {} > 10.244.2.9:{} [F.]", ep, port));
    EXPECT_EQ(fin2.verdict, Verdict::reply) << fin2.text();
    auto ack = t.run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [.]", port));
    EXPECT_EQ(ack.verdict, Verdict::dnat) << ack.text();
}

// A SYN from `port` on the tuple of its closed connection, and the rest of the handshake: the
// SYN's record (new_flow, endpoint).
ctl::TraceRecord reopen(ctl::Tracer& t, int port) {
    auto syn = t.run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port));
    EXPECT_EQ(syn.verdict, Verdict::dnat) << syn.text();
    t.run_spec(fmt::format("tcp {} > 10.244.2.9:{} [S.]", syn.endpoint.value_or(""), port));
    t.run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [.]", port));
    return syn;
}

// A client's SYN on the tuple of a connection that is over (TIME_WAIT) is a new connection, as
// conntrack reopens it: balanced and NATed anew, even when a reload removed its endpoint
// meanwhile, where the removed endpoint's RST would answer it otherwise.
TEST(Reload, ASynOnAClosedConnectionOpensANewOne) {
    test::ensure_eal();
    auto t = test::tracer(config(kAB), 5);
    auto flows = connect_both(*t);
    for (auto& [port, ep] : flows) close_connection(*t, port, ep);
    const int port = flows.begin()->first;
    // Still there, in TIME_WAIT: a late ACK follows the flow.
    auto late = t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [.]", port));
    EXPECT_FALSE(late.new_flow);
    EXPECT_EQ(late.endpoint, flows.begin()->second);
    // SYNs on the closed tuple: new flows, selected again (30 reach both endpoints).
    const uint64_t created = t->ctx().counters.flows_created;
    std::set<std::string> picked;
    for (int i = 0; i < 30; ++i) {
        auto syn = reopen(*t, port);
        ASSERT_TRUE(syn.new_flow) << syn.text();
        picked.insert(syn.endpoint.value_or(""));
        close_connection(*t, port, syn.endpoint.value_or(""));
    }
    EXPECT_EQ(picked, std::set<std::string>({"10.244.2.4:80", "10.244.2.6:80"}));
    EXPECT_EQ(t->ctx().counters.flows_reopened, 30u);
    EXPECT_EQ(t->ctx().counters.flows_created, created + 30);
    // The endpoint is removed while the connection to it is in TIME_WAIT: a SYN on its tuple
    // reaches the remaining endpoint.
    uint64_t reopens = 31;
    for (int i = 0; i < 100 && reopen(*t, port).endpoint != "10.244.2.4:80"; ++i, ++reopens)
        close_connection(*t, port, "10.244.2.6:80");
    close_connection(*t, port, "10.244.2.4:80");
    t->reload(ctl::load_config_string(config(kB), "r.yaml"));
    auto after = t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port));
    EXPECT_EQ(after.verdict, Verdict::dnat) << after.text();
    EXPECT_TRUE(after.new_flow);
    EXPECT_EQ(after.endpoint.value_or(""), "10.244.2.6:80");
    // A SYN on an open connection is no reopen: it follows the flow (conntrack ignores it).
    t->run_spec(fmt::format("tcp 10.244.2.6:80 > 10.244.2.9:{} [S.]", port));
    t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [.]", port));
    auto open = t->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.96.0.50:80 [S]", port));
    EXPECT_FALSE(open.new_flow);
    EXPECT_EQ(open.endpoint.value_or(""), "10.244.2.6:80");
    EXPECT_EQ(t->ctx().counters.flows_reopened, reopens + 1) << "only closed connections reopen";
}
