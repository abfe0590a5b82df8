// The pipeline on real packet bytes, through Tracer (process_burst with real mbufs): selection
// spread, stickiness, reply translation, kube-proxy's masquerade cases, refusals, checksums.
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "dataplane/base/checksum.h"
#include "dataplane/pipeline/pipeline.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

std::string with_services(const std::string& services, const std::string& extra_cluster = "") {
    return test::gateway_config(services, extra_cluster);
}

const std::string kTestSvc = R"(
  - name: default/test-svc
    type: NodePort
    cluster_ip: 10.107.169.79
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080, node_port: 30001}]
    endpoints: [{ip: 10.244.2.4, node: n1}, {ip: 10.244.2.6, node: n1}, {ip: 10.244.3.6, node: n2}]
)";

// default/s (10.107.0.7:80) with three endpoints, picked by `scheduler`.
std::string three_endpoints(const std::string& scheduler) {
    return fmt::format(R"(
  - name: default/s
    cluster_ip: 10.107.0.7
    scheduler: {}
    ports: [{{name: p, protocol: TCP, port: 80}}]
    endpoints: [{{ip: 10.244.2.4}}, {{ip: 10.244.2.6}}, {{ip: 10.244.3.6}}]
)",
                       scheduler);
}

}  // namespace

TEST(Pipeline, ThirtyThousandNewFlowsSpreadWithinThreeSigma) {
    auto t = test::tracer(with_services(kTestSvc), 42);
    std::map<std::string, int> per;
    const int n = 30000;
    for (int i = 0; i < n; ++i) {
        auto r = t->run_spec(fmt::format("tcp 192.168.{}.{}:{} > 192.168.67.8:30001 [S]", 67, 100 + i % 100, 1024 + i));
        ASSERT_EQ(r.verdict, Verdict::dnat) << r.text();
        per[*r.endpoint]++;
        ASSERT_TRUE(test::checksums_verify(r.frame));
    }
    ASSERT_EQ(per.size(), 3u);
    const double p = 1.0 / 3, mean = n * p, sigma = std::sqrt(n * p * (1 - p));
    for (auto& [ep, c] : per) EXPECT_NEAR(c, mean, 3 * sigma) << ep;
}

TEST(Pipeline, OneFlowStaysOnOneEndpointAndRepliesAreTranslatedBack) {
    auto t = test::tracer(with_services(kTestSvc), 3);
    auto first = t->run_spec("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]");
    ASSERT_EQ(first.verdict, Verdict::dnat);
    EXPECT_TRUE(first.masquerade);  // NodePort, policy Cluster: KUBE-MARK-MASQ
    EXPECT_EQ(first.port, "cluster");
    auto syn_ack = t->run_spec("reply 1 [S.]");
    ASSERT_EQ(syn_ack.verdict, Verdict::reply);
    EXPECT_EQ(*syn_ack.out, "tcp 192.168.67.8:30001 > 192.168.67.100:40000");
    EXPECT_EQ(syn_ack.port, "ext");
    EXPECT_TRUE(test::checksums_verify(syn_ack.frame));
    for (int i = 0; i < 1000; ++i) {
        auto r = t->run_spec("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [.]");
        ASSERT_EQ(r.verdict, Verdict::dnat);
        ASSERT_EQ(r.endpoint, first.endpoint);
        ASSERT_EQ(r.out, first.out);
        ASSERT_FALSE(r.new_flow);
    }
    EXPECT_NE(first.out->find(":8080"), std::string::npos) << "DNAT to the target port";
}

// Linux reuses a source port for another destination: one pod port reaching one endpoint through
// two Services would give the second flow the first one's reply tuple. nf_nat remaps the source
// port of the second (get_unique_tuple); so does the gateway, and both connections are answered.
TEST(Pipeline, TwoServicesOneEndpointOneSourcePortBothConnect) {
    auto t = test::tracer(with_services(R"(
  - name: default/a
    cluster_ip: 10.107.0.1
    ports: [{name: p, protocol: TCP, port: 80}]
    endpoints: [{ip: 10.244.2.4}]
  - name: default/b
    cluster_ip: 10.107.0.2
    ports: [{name: p, protocol: TCP, port: 80}]
    endpoints: [{ip: 10.244.2.4}]
)"));
    auto a = t->run_spec("tcp 10.244.3.5:1000 > 10.107.0.1:80 [S]");
    ASSERT_EQ(a.verdict, Verdict::dnat) << a.text();
    EXPECT_EQ(*a.out, "tcp 10.244.3.5:1000 > 10.244.2.4:80");
    auto b = t->run_spec("tcp 10.244.3.5:1000 > 10.107.0.2:80 [S]");
    ASSERT_EQ(b.verdict, Verdict::dnat) << b.text();
    EXPECT_FALSE(b.masquerade);
    ASSERT_EQ(b.out->substr(0, 15), "tcp 10.244.3.5:") << "the source address is kept: " << *b.out;
    EXPECT_NE(*b.out, *a.out) << "the source port is remapped";
    EXPECT_TRUE(test::checksums_verify(b.frame));
    EXPECT_EQ(t->ctx().counters.flows_port_remapped, 1u);
    EXPECT_EQ(t->ctx().counters.drops[static_cast<unsigned>(DropReason::flow_reply_clash)], 0u);
    // Each answer goes back to the client's own port, from the Service it asked.
    auto rb = t->run_spec("reply 2 [S.]");
    ASSERT_EQ(rb.verdict, Verdict::reply) << rb.text();
    EXPECT_EQ(*rb.out, "tcp 10.107.0.2:80 > 10.244.3.5:1000");
    EXPECT_TRUE(test::checksums_verify(rb.frame));
    auto ra = t->run_spec("reply 1 [S.]");
    ASSERT_EQ(ra.verdict, Verdict::reply) << ra.text();
    EXPECT_EQ(*ra.out, "tcp 10.107.0.1:80 > 10.244.3.5:1000");
    // Later packets of the second connection keep its remapped port.
    auto again = t->run_spec("tcp 10.244.3.5:1000 > 10.107.0.2:80 [.]");
    EXPECT_EQ(again.out, b.out);
    EXPECT_FALSE(again.new_flow);
}

TEST(Pipeline, MasqueradeInEachKubeProxyCase) {
    struct Case {
        const char* name;
        std::string cluster_extra;
        std::string packet;
        bool masq;
    };
    const std::string hairpin_svc = R"(
  - name: default/one
    cluster_ip: 10.107.0.1
    ports: [{name: p, protocol: TCP, port: 80}]
    endpoints: [{ip: 10.244.2.4, node: n1}]
)";
    std::vector<Case> cases = {
        {"pod to ClusterIP", "", "tcp 10.244.3.5:1000 > 10.107.169.79:80 [S]", false},
        {"off-cluster source to ClusterIP", "", "tcp 192.168.67.100:1000 > 10.107.169.79:80 [S]", true},
        {"NodePort, externalTrafficPolicy Cluster", "", "tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]", true},
        {"pod to ClusterIP with masquerade_all", "  masquerade_all: true\n",
         "tcp 10.244.3.5:1000 > 10.107.169.79:80 [S]", true},
    };
    for (const auto& c : cases) {
        auto t = test::tracer(with_services(kTestSvc, c.cluster_extra));
        auto r = t->run_spec(c.packet);
        ASSERT_EQ(r.verdict, Verdict::dnat) << c.name;
        EXPECT_EQ(r.masquerade, c.masq) << c.name;
        EXPECT_EQ(r.out->find("10.192.0.2") != std::string::npos, c.masq) << c.name << ": " << *r.out;
    }
    // Hairpin: the only endpoint reaches its own Service.
    auto t = test::tracer(with_services(hairpin_svc));
    auto r = t->run_spec("tcp 10.244.2.4:1000 > 10.107.0.1:80 [S]");
    ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_TRUE(r.masquerade);
    EXPECT_EQ(r.out->substr(0, 20), "tcp 10.192.0.2:1024 ");
}

// client_ip preserve, per traffic class: only external traffic under policy Cluster keeps the
// client's address; every other masquerade rule still applies, and trace names the rule.
TEST(Pipeline, ClientIpPreserveKeepsTheClientOnlyWhereKubeProxyMasqueradesExternalTraffic) {
    struct Case {
        const char* name;
        std::string cluster_extra, service_extra;
        std::string packet;
        bool masq;
        const char* rule;
    };
    const std::string preserve = "  client_ip: preserve\n";
    const std::vector<Case> cases = {
        {"NodePort, policy Cluster, preserve", preserve, "", "tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]", false,
         "client_ip preserve: the client's address kept"},
        {"NodePort, policy Cluster, default", "", "", "tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]", true,
         "external traffic, policy Cluster"},
        {"NodePort, the Service preserves", "", "    client_ip: preserve\n",
         "tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]", false, "client_ip preserve: the client's address kept"},
        {"NodePort, the Service masquerades", preserve, "    client_ip: masquerade\n",
         "tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]", true, "external traffic, policy Cluster"},
        {"NodePort, preserve with masquerade_all", preserve + "  masquerade_all: true\n", "",
         "tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]", true, "external traffic, policy Cluster"},
        {"ClusterIP from outside cluster_cidrs, preserve", preserve, "",
         "tcp 192.168.67.100:1000 > 10.107.169.79:80 [S]", true, "ClusterIP from outside cluster_cidrs"},
        {"pod to ClusterIP, preserve", preserve, "", "tcp 10.244.3.5:1000 > 10.107.169.79:80 [S]", false,
         "source kept (kube-proxy)"},
    };
    for (const auto& c : cases) {
        std::string svc = kTestSvc;
        svc.insert(svc.find("    ports:"), c.service_extra);
        auto t = test::tracer(with_services(svc, c.cluster_extra));
        auto r = t->run_spec(c.packet);
        ASSERT_EQ(r.verdict, Verdict::dnat) << c.name;
        EXPECT_EQ(r.masquerade, c.masq) << c.name;
        EXPECT_EQ(r.masquerade_rule.value_or("none"), c.rule) << c.name;
        const std::string src = c.packet.substr(4, c.packet.find(' ', 4) - 4);
        EXPECT_EQ(r.out->starts_with("tcp " + src + " "), !c.masq) << c.name << ": " << *r.out;
    }
    // Hairpin: the only endpoint reaches its own NodePort; preserved or not, it is masqueraded.
    auto t = test::tracer(with_services(R"(
  - name: default/one
    type: NodePort
    cluster_ip: 10.107.0.1
    client_ip: preserve
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30009}]
    endpoints: [{ip: 10.244.2.4, node: n1}]
)"));
    auto h = t->run_spec("tcp 10.244.2.4:1000 > 192.168.67.8:30009 [S]");
    ASSERT_EQ(h.verdict, Verdict::dnat);
    EXPECT_TRUE(h.masquerade);
    EXPECT_EQ(h.masquerade_rule.value_or(""), "hairpin: the endpoint reaches its own Service");
}

// A preserved connection's reply comes back through the gateway and is translated to the NodePort;
// a SYN resent before any reply counts once per resent SYN under its service port, a masqueraded
// one's never.
TEST(Pipeline, ClientIpPreserveRepliesAreTranslatedAndResentSynsCounted) {
    std::string svc = kTestSvc;
    svc.insert(svc.find("    ports:"), "    client_ip: preserve\n");
    svc += R"(
  - name: default/masq
    type: NodePort
    cluster_ip: 10.107.0.5
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30005}]
    endpoints: [{ip: 10.244.2.4, node: n1}]
)";
    auto t = test::tracer(with_services(svc));
    auto no_return = [&](uint32_t service) {
        const ServiceSnapshot& s = t->snapshot();
        return t->slots().no_return_total(s.services[service].slot);
    };
    auto syn = t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]");
    ASSERT_EQ(syn.verdict, Verdict::dnat);
    ASSERT_FALSE(syn.masquerade);
    EXPECT_EQ(t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]").verdict, Verdict::dnat);
    EXPECT_EQ(t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30001 [S]").verdict, Verdict::dnat);
    EXPECT_EQ(no_return(0), 2u) << "two SYNs resent";
    // The reply, from the pod to the client's own address, goes back as the NodePort's.
    const std::string ep = syn.endpoint->substr(0, syn.endpoint->find(':'));
    auto synack = t->run_spec(fmt::format("tcp {}:8080 > 192.168.67.100:1000 [S.]", ep));
    ASSERT_EQ(synack.verdict, Verdict::reply);
    EXPECT_EQ(*synack.out, "tcp 192.168.67.8:30001 > 192.168.67.100:1000");
    EXPECT_EQ(t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30001 [.]").verdict, Verdict::dnat);
    EXPECT_EQ(no_return(0), 2u) << "answered: nothing more";
    // Masqueraded: a resent SYN is the pod's business, not a missing route.
    ASSERT_TRUE(t->run_spec("tcp 192.168.67.100:1001 > 192.168.67.8:30005 [S]").masquerade);
    t->run_spec("tcp 192.168.67.100:1001 > 192.168.67.8:30005 [S]");
    EXPECT_EQ(no_return(1), 0u);
}

TEST(Pipeline, MasqueradeSourceIsThePortAddressOnTheNextHopsSubnet) {
    // The cluster port has two subnets; pods behind 10.193.0.9 must see the 10.193.0.2 address.
    auto t = test::tracer(R"(
dataplane:
  ports:
    - {name: ext, addresses: [192.168.67.8/24]}
    - {name: cluster, addresses: [10.192.0.2/24, 10.193.0.2/24]}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
    - {prefix: 10.245.0.0/16, via: 10.193.0.9}
cluster:
  node_ips: [192.168.67.8]
services:
  - name: default/a
    type: NodePort
    cluster_ip: 10.107.0.8
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30003}]
    endpoints: [{ip: 10.245.1.1}]
  - name: default/b
    type: NodePort
    cluster_ip: 10.107.0.9
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30004}]
    endpoints: [{ip: 10.244.2.1}]
)");
    auto a = t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30003 [S]");
    ASSERT_EQ(a.verdict, Verdict::dnat);
    EXPECT_EQ(*a.out, "tcp 10.193.0.2:1024 > 10.245.1.1:80");
    auto b = t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30004 [S]");
    ASSERT_EQ(b.verdict, Verdict::dnat);
    EXPECT_EQ(b.out->substr(0, 15), "tcp 10.192.0.2:");
}

TEST(Pipeline, NoDetectorMeansNoClusterIpMasquerade) {
    std::string cfg = with_services(kTestSvc);
    cfg.replace(cfg.find("  cluster_cidrs: [10.244.0.0/16]\n"), 33, "");
    auto t = test::tracer(cfg);
    auto r = t->run_spec("tcp 192.168.67.100:1000 > 10.107.169.79:80 [S]");
    ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_FALSE(r.masquerade);
}

TEST(Pipeline, SameNextHopIsMasqueradedSoRepliesCrossTheGateway) {
    // lab-sleeper (node 2) to the test-pod on node 2: beyond kube-proxy, the gateway masquerades.
    auto t = test::tracer(with_services(R"(
  - name: default/local
    cluster_ip: 10.107.0.2
    ports: [{name: p, protocol: TCP, port: 80}]
    endpoints: [{ip: 10.244.3.6, node: n2}]
)"));
    auto r = t->run_spec("tcp 10.244.3.5:1000 > 10.107.0.2:80 [S]");
    ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_TRUE(r.masquerade);
}

TEST(Pipeline, ExternalTrafficPolicyLocal) {
    auto etp_local = [](const std::string& endpoints) {
        return with_services(R"(
  - name: default/etp
    type: NodePort
    cluster_ip: 10.107.0.3
    external_traffic_policy: Local
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30002}]
    endpoints: )" + endpoints +
                             "\n");
    };
    auto t = test::tracer(etp_local("[{ip: 10.244.2.4, node: svcgate}, {ip: 10.244.3.6, node: other}]"));
    for (int i = 0; i < 50; ++i) {
        auto r = t->run_spec(fmt::format("tcp 192.168.67.100:{} > 192.168.67.8:30002 [S]", 2000 + i));
        ASSERT_EQ(r.verdict, Verdict::dnat);
        EXPECT_EQ(*r.endpoint, "10.244.2.4:80") << "only the local endpoint";
        EXPECT_FALSE(r.masquerade) << "source kept";
    }
    auto t2 = test::tracer(etp_local("[{ip: 10.244.3.6, node: other}]"));
    auto d = t2->run_spec("tcp 192.168.67.100:2000 > 192.168.67.8:30002 [S]");
    EXPECT_EQ(d.verdict, Verdict::drop);
    EXPECT_EQ(d.reason, DropReason::no_local_endpoints);
    EXPECT_EQ(t2->ctx().counters.drops[static_cast<unsigned>(DropReason::no_local_endpoints)], 1u);
}

// What select_new_flows prefetches from a service port's own line (its sets' members, its first
// endpoint's counter slot) is what the sets and endpoints say, whatever the traffic policies,
// across a reload that moves the slots.
TEST(Pipeline, AServicePortLeadsToItsSetsAndItsFirstEndpointsSlot) {
    // Both traffic policies Local, two ports, and a Service without endpoints; `endpoints` as
    // the YAML list.
    auto services = [](const std::string& endpoints) {
        return R"(
  - name: default/local
    type: NodePort
    cluster_ip: 10.107.0.3
    external_traffic_policy: Local
    internal_traffic_policy: Local
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30002}, {name: q, protocol: UDP, port: 53}]
    endpoints: )" +
            endpoints +
            R"(
  - name: default/empty
    cluster_ip: 10.107.0.4
    ports: [{name: t, protocol: TCP, port: 80}]
)";
    };
    const std::string first = with_services(
        kTestSvc +
        services("[{ip: 10.244.2.4, node: svcgate}, {ip: 10.244.3.6, node: other}, {ip: 10.244.3.7, node: svcgate}]"));
    auto t = test::tracer(first);
    auto check = [&](const char* when) {
        const dp::ServiceSnapshot& s = t->snapshot();
        ASSERT_EQ(s.services.size(), 4u) << when;
        unsigned local = 0, slots = 0;
        for (const dp::ServicePort& sp : s.services) {
            EXPECT_EQ(sp.internal_span.first, s.sets[sp.internal_set].first) << when;
            EXPECT_EQ(sp.internal_span.count, s.sets[sp.internal_set].count) << when;
            EXPECT_EQ(sp.external_span.first, s.sets[sp.external_set].first) << when;
            EXPECT_EQ(sp.external_span.count, s.sets[sp.external_set].count) << when;
            local += sp.internal_span.count != s.sets[sp.cluster_set].count;
            if (sp.ep_count == 0) continue;
            EXPECT_EQ(sp.ep_slot_first, s.endpoints[sp.ep_first].slot) << when;
            slots += sp.ep_slot_first != 0;
        }
        EXPECT_EQ(local, 2u) << when << ": both ports of default/local use fewer endpoints internally";
        EXPECT_GE(slots, 1u) << when << ": endpoint slots past the first are in use";
    };
    check("first config");
    // Endpoints go and come: slots are freed, reused and assigned anew.
    t->reload(ctl::load_config_string(
        with_services(
            services(
                "[{ip: 10.244.3.8, node: svcgate}, {ip: 10.244.3.6, node: other}, {ip: 10.244.2.9, node: svcgate}]") +
            kTestSvc),
        "r.yaml"));
    check("after a reload");
}

TEST(Pipeline, NoEndpointsRejectsWithRstOrPortUnreachable) {
    auto t = test::tracer(with_services(R"(
  - name: default/empty
    cluster_ip: 10.107.0.4
    ports: [{name: t, protocol: TCP, port: 80}, {name: u, protocol: UDP, port: 53}]
)"));
    auto rst = t->run_spec("tcp 10.244.3.5:1000 > 10.107.0.4:80 [S]");
    ASSERT_EQ(rst.verdict, Verdict::reject);
    EXPECT_EQ(rst.reason, DropReason::reject_no_endpoints);
    EXPECT_EQ(*rst.out, "tcp 10.107.0.4:80 > 10.244.3.5:1000");
    EXPECT_EQ(*rst.out_flags, "R.");
    EXPECT_TRUE(test::checksums_verify(rst.frame));
    auto unreach = t->run_spec("udp 10.244.3.5:1000 > 10.107.0.4:53");
    ASSERT_EQ(unreach.verdict, Verdict::reject);
    EXPECT_EQ(*unreach.out, "icmp 10.107.0.4 > 10.244.3.5");
    EXPECT_EQ(unreach.frame[14 + 20], 3);      // destination unreachable
    EXPECT_EQ(unreach.frame[14 + 20 + 1], 3);  // port unreachable
    EXPECT_TRUE(test::checksums_verify(unreach.frame));
    EXPECT_EQ(t->ctx().counters.rejects[static_cast<unsigned>(DropReason::reject_no_endpoints)], 2u);
}

TEST(Pipeline, TerminatingEndpointsAreTheFallback) {
    auto t = test::tracer(with_services(R"(
  - name: default/term
    cluster_ip: 10.107.0.5
    ports: [{name: p, protocol: TCP, port: 80}]
    endpoints:
      - {ip: 10.244.2.4, ready: false, serving: true, terminating: true}
      - {ip: 10.244.2.6, ready: false, serving: false, terminating: true}
)"));
    for (int i = 0; i < 20; ++i) {
        auto r = t->run_spec(fmt::format("tcp 10.244.3.5:{} > 10.107.0.5:80 [S]", 3000 + i));
        ASSERT_EQ(r.verdict, Verdict::dnat);
        EXPECT_EQ(*r.endpoint, "10.244.2.4:80");
    }
}

TEST(Pipeline, SessionAffinityClientIpPinsTheClient) {
    auto t = test::tracer(with_services(R"(
  - name: default/sticky
    cluster_ip: 10.107.0.6
    session_affinity: ClientIP
    ports: [{name: p, protocol: TCP, port: 80}]
    endpoints: [{ip: 10.244.2.4}, {ip: 10.244.2.6}, {ip: 10.244.3.6}]
)"));
    auto first = t->run_spec("tcp 10.244.3.5:4000 > 10.107.0.6:80 [S]");
    for (int i = 1; i < 100; ++i)
        EXPECT_EQ(t->run_spec(fmt::format("tcp 10.244.3.5:{} > 10.107.0.6:80 [S]", 4000 + i)).endpoint, first.endpoint);
    std::set<std::string> others;
    for (int i = 0; i < 100; ++i)
        others.insert(
            *t->run_spec(fmt::format("tcp 10.244.{}.{}:5000 > 10.107.0.6:80 [S]", 2 + i % 2, 10 + i)).endpoint);
    EXPECT_EQ(others.size(), 3u) << "other clients still spread";
    t->advance(10801);  // past the default 10800 s timeout: the pin goes
    EXPECT_EQ(t->flows().live_total(), 0u);
}

TEST(Pipeline, RefusalsOfAddressesNoServiceServes) {
    auto t = test::tracer(with_services(kTestSvc));
    auto unknown_port = t->run_spec("tcp 10.244.3.5:1000 > 10.107.169.79:81 [S]");
    EXPECT_EQ(unknown_port.verdict, Verdict::reject);
    EXPECT_EQ(unknown_port.reason, DropReason::reject_unknown_port);
    auto unallocated = t->run_spec("udp 10.244.3.5:1000 > 10.96.0.99:53");
    EXPECT_EQ(unallocated.verdict, Verdict::drop);
    EXPECT_EQ(unallocated.reason, DropReason::service_cidr_unallocated);
    auto routed = t->run_spec("tcp 10.244.3.5:1000 > 10.244.2.9:22 [S]");
    EXPECT_EQ(routed.verdict, Verdict::forward);
    EXPECT_EQ(*routed.out, "tcp 10.244.3.5:1000 > 10.244.2.9:22");
    auto ttl = t->run_spec("tcp 10.244.3.5:1000 > 10.244.2.9:22 [S] ttl=1");
    EXPECT_EQ(ttl.reason, DropReason::ip_ttl_exceeded);
    auto nowhere = t->run_spec("tcp 10.244.3.5:1000 > 8.8.8.8:53 [S]");
    EXPECT_EQ(nowhere.reason, DropReason::no_route);
    auto invalid = t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:30001 [F.]");
    EXPECT_EQ(invalid.reason, DropReason::conntrack_invalid);
}

// The TTL step and the translation share one pass and one header checksum update (nat.h
// route_translate): a packet of a translated flow at TTL 1 is dropped, at TTL 2 it leaves at
// TTL 1, translated, its checksums right; both directions.
TEST(Pipeline, TranslatedPacketsTakeTheTtlStepWithTheirRewrite) {
    auto t = test::tracer(with_services(kTestSvc));
    auto syn = t->run_spec("tcp 10.244.3.5:1000 > 10.107.169.79:80 [S] ttl=2");
    ASSERT_EQ(syn.verdict, Verdict::dnat);
    ASSERT_TRUE(syn.endpoint);
    EXPECT_EQ(syn.frame[14 + 8], 1) << "TTL";
    EXPECT_TRUE(test::checksums_verify(syn.frame));
    const std::string ep = *syn.endpoint;
    auto reply_low = t->run_spec(fmt::format("tcp {} > 10.244.3.5:1000 [S.] ttl=1", ep));
    EXPECT_EQ(reply_low.verdict, Verdict::drop);
    EXPECT_EQ(reply_low.reason, DropReason::ip_ttl_exceeded);
    auto reply = t->run_spec(fmt::format("tcp {} > 10.244.3.5:1000 [S.] ttl=2", ep));
    ASSERT_EQ(reply.verdict, Verdict::reply);
    EXPECT_EQ(*reply.out, "tcp 10.107.169.79:80 > 10.244.3.5:1000");
    EXPECT_EQ(reply.frame[14 + 8], 1) << "TTL";
    EXPECT_TRUE(test::checksums_verify(reply.frame));
    auto low = t->run_spec("tcp 10.244.3.5:1000 > 10.107.169.79:80 [.] ttl=1");
    EXPECT_EQ(low.verdict, Verdict::drop);
    EXPECT_EQ(low.reason, DropReason::ip_ttl_exceeded);
    auto ack = t->run_spec("tcp 10.244.3.5:1000 > 10.107.169.79:80 [.] ttl=64");
    ASSERT_EQ(ack.verdict, Verdict::dnat);
    EXPECT_EQ(ack.frame[14 + 8], 63) << "TTL";
    EXPECT_TRUE(test::checksums_verify(ack.frame));
}

TEST(Pipeline, SchedulersEachPickFromTheSet) {
    for (const char* sch : {"random", "maglev", "rr", "lc", "sh", "dh", "sed", "nq"}) {
        auto t = test::tracer(with_services(three_endpoints(sch)));
        std::map<std::string, int> per;
        for (int i = 0; i < 300; ++i)
            per[*t->run_spec(fmt::format("tcp 10.244.3.{}:{} > 10.107.0.7:80 [S]", 10 + i % 50, 6000 + i)).endpoint]++;
        const std::string s = sch;
        if (s == "dh") {
            EXPECT_EQ(per.size(), 1u) << "dh hashes the one VIP";
        } else {
            EXPECT_EQ(per.size(), 3u) << sch;
        }
        if (s == "rr" || s == "lc" || s == "sed" || s == "nq") {
            for (auto& [e, c] : per) EXPECT_EQ(c, 100) << sch << " " << e;
        }
    }
}

namespace {

// An ICMP error as it leaves: outer addresses, the embedded tuple, and each checksum checked.
struct ErrorView {
    std::string outer;  // "src > dst"
    std::string inner;  // the embedded packet's tuple
    uint32_t rest = 0;  // the second word (the MTU of fragmentation-needed)
    bool inner_ip_ok = false;
};

ErrorView view_error(const std::vector<uint8_t>& f) {
    PacketMeta m;
    EXPECT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m), DropReason::none);
    EXPECT_NE(m.inner_off, 0) << "not an ICMP error about a TCP/UDP packet";
    EXPECT_TRUE(test::checksums_verify(f)) << "outer IPv4 or ICMP checksum";
    ErrorView v;
    v.outer = ctl::format_ip4(m.key.src) + " > " + ctl::format_ip4(m.key.dst);
    v.inner = ctl::format_tuple(m.err_key.reversed());
    v.rest = uint32_t{f[m.l4_off + 4]} << 24 | uint32_t{f[m.l4_off + 5]} << 16 | f[m.l4_off + 6] << 8 | f[m.l4_off + 7];
    const uint8_t* in = f.data() + m.inner_off;
    v.inner_ip_ok = inet_csum(in, (in[0] & 0x0f) * 4u) == 0;
    return v;
}

}  // namespace

// Path-MTU discovery through the gateway: a router behind it answers the translated SYN with
// fragmentation-needed; the client must get it about the packet it sent (VIP, its own port).
TEST(IcmpError, FragNeededFromThePodSideReachesTheClientAboutItsOwnPacket) {
    auto t = test::tracer(with_services(kTestSvc), 7);
    auto syn = t->run_spec("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]");
    ASSERT_EQ(syn.verdict, Verdict::dnat);
    ASSERT_TRUE(syn.masquerade);
    // The whole TCP header quoted, so its checksum is carried too.
    auto err = t->run_frame(
        test::icmp_error_frame(kIcmpDestUnreach, 4, "10.192.0.3", "10.192.0.2", syn.frame, 20, 1400), "frag-needed");
    ASSERT_EQ(err.verdict, Verdict::reply) << err.text();
    EXPECT_EQ(*err.port, "ext");
    EXPECT_EQ(*err.service, "default/test-svc:http");
    ErrorView v = view_error(err.frame);
    EXPECT_EQ(v.outer, "192.168.67.8 > 192.168.67.100");
    EXPECT_EQ(v.inner, "tcp 192.168.67.100:40000 > 192.168.67.8:30001");
    EXPECT_EQ(v.rest, 1400u) << "the MTU travels unchanged";
    EXPECT_TRUE(v.inner_ip_ok);
    PacketMeta m;
    ASSERT_EQ(parse_packet(err.frame.data(), static_cast<uint32_t>(err.frame.size()), m), DropReason::none);
    const uint8_t* in = err.frame.data() + m.inner_off;
    EXPECT_EQ(ipv4_l4_csum(in, in + 20, 20), 0) << "the quoted SYN's TCP checksum follows its tuple";
    // RELATED leaves the connection's state alone: the handshake goes on.
    EXPECT_EQ(t->run_spec("reply 1 [S.]").verdict, Verdict::reply);
}

TEST(IcmpError, UnreachableFromTheClientSideReachesThePodAboutItsReply) {
    auto t = test::tracer(with_services(kTestSvc), 7);
    auto syn = t->run_spec("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]");
    auto synack = t->run_spec("reply 1 [S.]");
    ASSERT_EQ(*synack.out, "tcp 192.168.67.8:30001 > 192.168.67.100:40000");
    auto err = t->run_frame(test::icmp_error_frame(kIcmpDestUnreach, 1, "192.168.67.1", "192.168.67.8", synack.frame),
                            "host-unreachable");
    ASSERT_EQ(err.verdict, Verdict::dnat) << err.text();
    EXPECT_EQ(*err.port, "cluster");
    ErrorView v = view_error(err.frame);
    // Masqueraded flow: the pod hears from the address it talked to.
    const FlowKey to_pod = syn.out_key;
    EXPECT_EQ(v.outer, ctl::format_ip4(to_pod.src) + " > " + ctl::format_ip4(to_pod.dst));
    EXPECT_EQ(v.inner, ctl::format_tuple(to_pod.reversed()));
    EXPECT_TRUE(v.inner_ip_ok);
}

TEST(IcmpError, TimeExceededKeepsTheRouterAsSourceWhenNothingWasMasqueraded) {
    std::string cfg = with_services(R"(
  - name: default/dns
    cluster_ip: 10.96.0.10
    ports: [{name: dns, protocol: UDP, port: 53}]
    endpoints: [{ip: 10.244.2.2}]
)");
    cfg.replace(cfg.find("dataplane:\n"), 11, "dataplane:\n  one_arm_masquerade: false\n");
    auto t = test::tracer(cfg);
    auto q = t->run_spec("udp 10.244.3.5:34361 > 10.96.0.10:53");
    ASSERT_EQ(q.verdict, Verdict::dnat);
    ASSERT_FALSE(q.masquerade);
    auto a = t->run_spec("reply 1");
    ASSERT_EQ(*a.out, "udp 10.96.0.10:53 > 10.244.3.5:34361");
    // The answer expired on its way to the client pod; a router there says so to the VIP.
    auto err = t->run_frame(test::icmp_error_frame(kIcmpTimeExceeded, 0, "10.192.0.4", "10.96.0.10", a.frame), "ttl");
    ASSERT_EQ(err.verdict, Verdict::dnat) << err.text();
    ErrorView v = view_error(err.frame);
    EXPECT_EQ(v.outer, "10.192.0.4 > 10.244.2.2");
    EXPECT_EQ(v.inner, "udp 10.244.2.2:53 > 10.244.3.5:34361");
    PacketMeta m;
    ASSERT_EQ(parse_packet(err.frame.data(), static_cast<uint32_t>(err.frame.size()), m), DropReason::none);
    const uint8_t* in = err.frame.data() + m.inner_off;
    // The quoted UDP header is whole (8 bytes): its checksum must be back to the one the pod
    // computed for its answer, so the pod's stack can match the quote to its socket.
    const auto sent = ctl::build_frame(test::packet("udp 10.244.2.2:53 > 10.244.3.5:34361"));
    EXPECT_EQ(std::memcmp(in + 20, sent.data() + 14 + 20, 8), 0) << "ports, length and checksum";
    EXPECT_TRUE(v.inner_ip_ok);
}

TEST(IcmpError, ErrorsAboutNoFlowAreRoutedAndBrokenOnesCounted) {
    auto t = test::tracer(with_services(kTestSvc));
    auto other = t->run_spec("tcp 10.244.3.5:1000 > 10.244.2.9:22 [S]");
    auto routed =
        t->run_frame(test::icmp_error_frame(kIcmpDestUnreach, 3, "10.244.2.9", "10.244.3.5", other.frame), "unrelated");
    EXPECT_EQ(routed.verdict, Verdict::forward) << "routed untouched";
    EXPECT_FALSE(routed.new_flow);
    EXPECT_EQ(t->flows().live_total(), 0u) << "an error never starts a connection";
    // The NodePort address is the gateway's own: an unrelated error to it is the gateway's.
    const std::string spec = "tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]";
    auto syn = t->run_spec(spec);
    const auto as_sent = ctl::build_frame(test::packet(spec));
    auto mine =
        t->run_frame(test::icmp_error_frame(kIcmpDestUnreach, 3, "192.168.67.1", "192.168.67.8", as_sent), "to-gw");
    EXPECT_EQ(mine.verdict, Verdict::local);
    // Fewer than 8 bytes of the quoted L4 header: malformed, counted.
    auto err = test::icmp_error_frame(kIcmpDestUnreach, 4, "10.192.0.3", "10.192.0.2", syn.frame, 4);
    auto bad = t->run_frame(err, "short");
    EXPECT_EQ(bad.verdict, Verdict::drop);
    EXPECT_EQ(bad.reason, DropReason::icmp_error_bad_inner);
    EXPECT_EQ(t->ctx().counters.drops[static_cast<unsigned>(DropReason::icmp_error_bad_inner)], 1u);
}

namespace {

std::string with_capacity(std::string cfg, unsigned capacity) {
    return cfg.replace(cfg.find("dataplane:\n"), 11,
                       fmt::format("dataplane:\n  flow_table: {{capacity: {}}}\n", capacity));
}

// A small table (1024 flows) and a default route, so that random sources are routable.
std::string flood_config() {
    std::string cfg = with_capacity(with_services(kTestSvc), 1024);
    return cfg.replace(cfg.find("  routes:\n"), 10, "  routes:\n    - {prefix: 0.0.0.0/0, via: 192.168.67.1}\n");
}

uint64_t drops(ctl::Tracer& t, DropReason r) { return t.ctx().counters.drops[static_cast<unsigned>(r)]; }

}  // namespace

// conntrack's early_drop: a SYN flood from random sources fills the table only up to its
// reserve; established connections are never evicted and new legitimate ones still get in.
TEST(SynFlood, EstablishedFlowsSurviveAndNewConnectionsGetIn) {
    const std::string cfg = flood_config();
    auto t = test::tracer(cfg, 3);
    const std::string est = "tcp 192.168.67.100:40000 > 192.168.67.8:30001";
    auto syn = t->run_spec(est + " [S]");
    ASSERT_EQ(t->run_spec("reply 1 [S.]").verdict, Verdict::reply);
    ASSERT_EQ(t->run_spec(est + " [.]").verdict, Verdict::dnat);
    Rng rng(99);
    unsigned answered = 0, runs = 3;
    for (int i = 0; i < 20000; ++i) {
        const uint32_t a = rng.next();
        auto r = t->run_spec(fmt::format("tcp {}.{}.{}.{}:{} > 192.168.67.8:30001 [S]", 1 + (a >> 24) % 200,
                                         (a >> 16) & 255, (a >> 8) & 255, 1 + (a & 253), 1024 + i % 60000));
        ++runs;
        ASSERT_EQ(r.verdict, Verdict::dnat) << "flood SYN " << i << ": " << r.text();
        // Pods answer some of them: half-open connections in SYN_RECV are embryonic too.
        if (i % 3 == 0) {
            answered += t->run_spec(fmt::format("reply {} [S.]", runs)).verdict == Verdict::reply;
            ++runs;
        }
    }
    EXPECT_GT(answered, 6000u);
    EXPECT_GT(t->ctx().counters.flows_early_dropped, 15000u);
    EXPECT_EQ(drops(*t, DropReason::flow_table_full), 0u);
    EXPECT_LE(t->flows().live_total(), 1024u - 128u) << "most of the reserve stays free";
    auto still = t->run_spec(est + " [P.]");
    EXPECT_EQ(still.verdict, Verdict::dnat);
    EXPECT_EQ(still.endpoint, syn.endpoint) << "the established connection kept its pod";
    EXPECT_EQ(still.out_key, syn.out_key);
    auto fresh = t->run_spec("tcp 192.168.67.100:40001 > 192.168.67.8:30001 [S]");
    EXPECT_EQ(fresh.verdict, Verdict::dnat);
    EXPECT_TRUE(fresh.new_flow);
}

TEST(SynFlood, ATableOfEstablishedFlowsRefusesNewOnesInsteadOfEvicting) {
    auto t = test::tracer(with_capacity(with_services(kTestSvc), 1024), 3);
    unsigned n = 0, runs = 0;
    for (;; ++n) {
        const std::string c = fmt::format("tcp 192.168.{}.{}:{} > 192.168.67.8:30001", 67, 100 + n % 100, 2000 + n);
        auto r = t->run_spec(c + " [S]");
        ++runs;
        if (r.verdict != Verdict::dnat) {
            EXPECT_EQ(r.reason, DropReason::flow_table_full);
            break;
        }
        ASSERT_LT(n, 2000u);
        t->run_spec(fmt::format("reply {} [S.]", runs));
        t->run_spec(c + " [.]");
        runs += 2;
    }
    EXPECT_EQ(n, 1024u) << "every record holds an established flow";
    EXPECT_EQ(t->ctx().counters.flows_early_dropped, 0u);
    for (unsigned i = 0; i < n; i += 97)
        EXPECT_EQ(
            t->run_spec(fmt::format("tcp 192.168.67.{}:{} > 192.168.67.8:30001 [.]", 100 + i % 100, 2000 + i)).verdict,
            Verdict::dnat)
            << i;
}

// conntrack picks a connection up from a mid-stream ACK (loose mode) as ESTABLISHED, but it is
// not assured until the other side answers: an ACK flood is evicted like a SYN flood.
TEST(SynFlood, AckFloodPickupsAreEvictableUntilAnswered) {
    const std::string cfg = flood_config();
    auto t = test::tracer(cfg, 5);
    const std::string est = "tcp 192.168.67.100:40000 > 192.168.67.8:30001";
    auto first = t->run_spec(est + " [.]");
    ASSERT_EQ(first.verdict, Verdict::dnat) << "picked up mid-stream";
    ASSERT_EQ(t->run_spec("reply 1 [.]").verdict, Verdict::reply);
    for (int i = 0; i < 5000; ++i) {
        auto r =
            t->run_spec(fmt::format("tcp 203.0.{}.{}:{} > 192.168.67.8:30001 [.]", i / 250, 1 + i % 250, 1024 + i));
        ASSERT_EQ(r.verdict, Verdict::dnat) << i;
    }
    EXPECT_GT(t->ctx().counters.flows_early_dropped, 3000u);
    EXPECT_EQ(drops(*t, DropReason::flow_table_full), 0u);
    auto still = t->run_spec(est + " [P.]");
    EXPECT_EQ(still.verdict, Verdict::dnat);
    EXPECT_EQ(still.out_key, first.out_key) << "the answered pickup was never evicted";
}

// flow_table.new_flows_per_source: one source flooding new connections is capped per second;
// the others, and its own established connection, are not affected.
TEST(SynFlood, OneSourceIsCappedPerSecondOthersGetIn) {
    std::string cfg = with_services(kTestSvc);
    cfg.replace(cfg.find("dataplane:\n"), 11, "dataplane:\n  flow_table: {new_flows_per_source: 100}\n");
    auto t = test::tracer(cfg, 3);
    const std::string est = "tcp 192.168.67.100:40000 > 192.168.67.8:30001";
    ASSERT_EQ(t->run_spec(est + " [S]").verdict, Verdict::dnat);
    ASSERT_EQ(t->run_spec("reply 1 [S.]").verdict, Verdict::reply);
    unsigned in = 0;
    for (int i = 0; i < 300; ++i)
        in += t->run_spec(fmt::format("tcp 192.168.67.100:{} > 192.168.67.8:30001 [S]", 1024 + i)).verdict ==
            Verdict::dnat;
    EXPECT_EQ(in, 99u) << "the cap counts the established connection's SYN too";
    EXPECT_EQ(drops(*t, DropReason::source_new_flow_limit), 201u);
    EXPECT_EQ(t->run_spec(est + " [.]").verdict, Verdict::dnat) << "its established flow is not new";
    EXPECT_EQ(t->run_spec("tcp 192.168.67.101:1024 > 192.168.67.8:30001 [S]").verdict, Verdict::dnat)
        << "another source gets in";
    t->advance(1);
    EXPECT_EQ(t->run_spec("tcp 192.168.67.100:2000 > 192.168.67.8:30001 [S]").verdict, Verdict::dnat)
        << "a new second, a new allowance";
}

namespace {

// One burst through process_burst as a worker runs it (Tracer::run_burst): each spec's frame in
// an mbuf; the packets' records (verdict, out tuple).
std::vector<ctl::TraceRecord> run_burst(ctl::Tracer& t, const std::vector<std::string>& specs) {
    std::vector<ctl::Frame> frames;
    for (const auto& sp : specs) frames.push_back(ctl::build_frame(test::packet(sp)));
    return t.run_burst(frames, specs);
}

// What an out tuple's destination is.
std::string dest(const ctl::TraceRecord& r) { return r.out->substr(r.out->find('>') + 2); }

// The active-flow counts of all endpoints (what least-connection reads).
int64_t total_active(const ctl::Tracer& t) {
    int64_t n = 0;
    for (const Endpoint& e : t.snapshot().endpoints) n += t.slots().active(e.slot);
    return n;
}

}  // namespace

// New connections are selected for the whole burst before they are inserted (so the inserts'
// cache misses overlap): a least-connection pick must still see the picks before it in the burst.
TEST(PipelineBurst, LeastConnectionSpreadsTheNewFlowsOfOneBurst) {
    auto t = test::tracer(with_services(three_endpoints("lc")));
    std::vector<std::string> specs;
    for (int i = 0; i < 30; ++i)
        specs.push_back(fmt::format("tcp 10.244.3.{}:{} > 10.107.0.7:80 [S]", 10 + i, 6000 + i));
    const auto b = run_burst(*t, specs);
    std::map<std::string, int> per;
    for (size_t i = 0; i < specs.size(); ++i) {
        ASSERT_EQ(b[i].verdict, Verdict::dnat) << i;
        per[dest(b[i])]++;
    }
    EXPECT_EQ(per, (std::map<std::string, int>{{"10.244.2.4:80", 10}, {"10.244.2.6:80", 10}, {"10.244.3.6:80", 10}}));
    EXPECT_EQ(total_active(*t), 30) << "one active count per flow created";
    EXPECT_EQ(t->flows().live_total(), 30u);
}

// A burst of mostly new connections turns on the VIP-slot prefetch for the next burst's lookups
// (lookup_burst; it acts only with a VIP table far larger than the caches); a burst of
// established packets turns it off again. Semantics stay: each burst is translated alike.
TEST(PipelineBurst, MostlyNewBurstsTurnTheVipPrefetchOnAndEstablishedOnesOff) {
    auto t = test::tracer(with_services(three_endpoints("random")));
    EXPECT_FALSE(t->ctx().mostly_new);
    std::vector<std::string> syns, acks;
    for (int i = 0; i < 8; ++i) {
        syns.push_back(fmt::format("tcp 10.244.3.{}:{} > 10.107.0.7:80 [S]", 10 + i, 6000 + i));
        acks.push_back(fmt::format("tcp 10.244.3.{}:{} > 10.107.0.7:80 [.]", 10 + i, 6000 + i));
    }
    for (const auto& r : run_burst(*t, syns)) ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_TRUE(t->ctx().mostly_new) << "8 misses of 8";
    // Half new, half known: not mostly new (more than half must miss).
    std::vector<std::string> half(syns.begin(), syns.begin() + 4);
    for (int i = 0; i < 4; ++i) half.push_back(fmt::format("tcp 10.244.3.{}:{} > 10.107.0.7:80 [S]", 40 + i, 7000 + i));
    for (const auto& r : run_burst(*t, half)) ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_FALSE(t->ctx().mostly_new) << "4 misses of 8";
    for (const auto& r : run_burst(*t, syns)) ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_FALSE(t->ctx().mostly_new) << "all known";
}

// With a VIP table far larger than the caches (over 16,384 VIPs of a family: pipeline.cpp's
// kLargeVipTable), a burst of mostly new connections reads its VIP slots and asks for their
// service ports while the flow lookup's misses are in flight (lookup_burst, then classify_burst
// as for any burst). Each connection to one of 20,000 dual-stack Services, in bursts of 32 to
// Services at random, goes to its own Service's endpoint, in both families.
TEST(PipelineBurst, AVipTableFarLargerThanTheCachesSelectsAsAnyOther) {
    constexpr uint32_t kServices = 20000;
    std::string svcs;
    for (uint32_t i = 0; i < kServices; ++i)
        svcs += fmt::format(
            "  - {{name: d/s{}, cluster_ips: [10.96.{}.{}, 'fd00:96::{:x}'], ports: [{{name: p, port: 80, "
            "target_port: {}}}], endpoints: [10.244.2.{}, 'fd00:244:2::{:x}']}}\n",
            i, (i + 1) >> 8, (i + 1) & 255, i + 1, 20000 + i, 1 + i % 250, 1 + i % 250);
    auto t = test::tracer(test::dual_stack_config(svcs));
    ASSERT_EQ(t->snapshot().vips.size(), kServices);
    ASSERT_EQ(t->snapshot().vips6.size(), kServices);
    std::mt19937 rng(7);
    uint32_t port = 10000;
    for (int family : {4, 6}) {
        for (int burst = 0; burst < 8; ++burst) {
            std::vector<std::string> specs, want;
            for (int k = 0; k < 32; ++k, ++port) {
                const uint32_t i = rng() % kServices;
                if (family == 4) {
                    specs.push_back(
                        fmt::format("tcp 192.168.67.100:{} > 10.96.{}.{}:80 [S]", port, (i + 1) >> 8, (i + 1) & 255));
                    want.push_back(fmt::format("10.244.2.{}:{}", 1 + i % 250, 20000 + i));
                } else {
                    specs.push_back(fmt::format("tcp [fd00:67::100]:{} > [fd00:96::{:x}]:80 [S]", port, i + 1));
                    want.push_back(fmt::format("[fd00:244:2::{:x}]:{}", 1 + i % 250, 20000 + i));
                }
            }
            const auto b = run_burst(*t, specs);
            for (size_t k = 0; k < specs.size(); ++k) {
                ASSERT_EQ(b[k].verdict, Verdict::dnat) << specs[k];
                EXPECT_EQ(dest(b[k]), want[k]) << specs[k];
            }
            EXPECT_TRUE(t->ctx().mostly_new);
        }
    }
    EXPECT_EQ(t->ctx().counters.flows_created, 2u * 8 * 32);
}

// A SYN and its retransmission in one burst: both are selected, the second insert finds the
// first's record and follows it; the endpoint it had picked is given back.
TEST(PipelineBurst, TwoPacketsOfOneNewFlowInOneBurstShareOneFlow) {
    auto t = test::tracer(with_services(three_endpoints("rr")));
    const std::string syn = "tcp 10.244.3.9:7000 > 10.107.0.7:80 [S]";
    const auto b = run_burst(*t, {syn, "tcp 10.244.3.9:7001 > 10.107.0.7:80 [S]", syn});
    for (const auto& r : b) ASSERT_EQ(r.verdict, Verdict::dnat);
    EXPECT_EQ(b[0].out, b[2].out) << "the retransmission goes where the first SYN went";
    EXPECT_NE(b[0].out, b[1].out);
    EXPECT_EQ(t->ctx().counters.flows_created, 2u);
    EXPECT_EQ(t->ctx().counters.flows_joined, 1u);
    EXPECT_EQ(total_active(*t), 2) << "the joined packet's pick is given back";
    EXPECT_EQ(t->flows().live_total(), 2u);
}

// Every packet a worker receives or builds is transmitted, freed under a reason, or held:
// rx + generated = tx + drops + held, with no other term (a REJECT is transmitted, counted under
// its reason among the rejects, not the drops). One of each outcome passes through here.
TEST(Output, EveryPacketIsSentFreedOrHeldAndNothingElse) {
    auto t = test::tracer(with_services(kTestSvc + R"(
  - name: default/empty
    cluster_ip: 10.107.0.9
    ports: [{name: p, protocol: TCP, port: 80}]
)"));
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    // Routed to a next hop nobody has answered for: held, an ARP request built (generated), and
    // trace releases it afterwards (freed as neighbor_unresolved).
    auto held = t->run_spec("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]");
    ASSERT_EQ(held.l2, L2Outcome::held);
    EXPECT_TRUE(held.arp_request);
    EXPECT_EQ(held.next_hop.value_or(""), "10.192.0.3");
    // Rejected: answered back on the port it came in on.
    auto rej = t->run_spec("tcp 10.244.2.9:1000 > 10.107.0.9:80 [S]");
    ASSERT_EQ(rej.verdict, Verdict::reject);
    EXPECT_EQ(rej.l2, L2Outcome::sent);
    // Ping of the gateway: answered.
    auto ping = t->run_spec("icmp 192.168.67.100 > 192.168.67.8");
    ASSERT_EQ(ping.verdict, Verdict::local);
    EXPECT_EQ(ping.l2, L2Outcome::sent);
    // For the gateway, not answered: freed at L2.
    auto ssh = t->run_spec("tcp 192.168.67.100:1000 > 192.168.67.8:22 [S]");
    EXPECT_EQ(ssh.l2, L2Outcome::dropped);
    EXPECT_EQ(ssh.l2_reason, DropReason::to_gateway);
    // Dropped by the pipeline.
    EXPECT_EQ(t->run_spec("tcp 192.168.67.100:40001 > 192.168.67.8:30001 [F.]").verdict, Verdict::drop);

    const WorkerCounters& c = t->ctx().counters;
    EXPECT_EQ(c.rx_packets, 5u);
    EXPECT_EQ(c.generated, 1u) << "the ARP request";
    EXPECT_EQ(c.tx_packets, 3u) << "the ARP request, the RST, the echo reply";
    EXPECT_EQ(c.rejects[static_cast<unsigned>(DropReason::reject_no_endpoints)], 1u);
    EXPECT_EQ(c.drops[static_cast<unsigned>(DropReason::reject_no_endpoints)], 0u) << "a reject is not a drop";
    EXPECT_EQ(c.dropped(), 3u) << "the released hold, to_gateway, conntrack_invalid";
    EXPECT_EQ(c.held, 0u);
    EXPECT_EQ(c.rx_packets + c.generated, c.tx_packets + c.dropped() + c.held);
    EXPECT_EQ(c.unaccounted(), 0);
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use) << "nothing kept";
}

// trace shows what happens at L2: the next hop and its MAC when the neighbor is known (here,
// configured), or that the packet waits for ARP.
TEST(Output, TraceShowsTheNextHopAndItsMacOrTheWaitForArp) {
    std::string cfg = with_services(kTestSvc);
    cfg.replace(cfg.find("dataplane:\n"), 11,
                "dataplane:\n  neighbors: [{ip: 10.192.0.3, mac: '02:aa:00:00:00:03'}]\n");
    auto t = test::tracer(cfg, 3);
    bool saw_sent = false, saw_held = false;
    for (int port = 40000; port < 40040 && !(saw_sent && saw_held); ++port) {
        auto r = t->run_spec(fmt::format("tcp 192.168.67.100:{} > 192.168.67.8:30001 [S]", port));
        ASSERT_EQ(r.verdict, Verdict::dnat);
        EXPECT_EQ(r.port, "cluster");
        if (r.endpoint->starts_with("10.244.2.")) {  // behind kube-node-1, whose MAC is configured
            EXPECT_EQ(r.l2, L2Outcome::sent) << r.json();
            EXPECT_EQ(r.next_hop.value_or(""), "10.192.0.3");
            EXPECT_EQ(r.mac.value_or(""), "02:aa:00:00:00:03");
            EXPECT_FALSE(r.arp_request);
            ASSERT_GE(r.frame.size(), 12u);
            EXPECT_EQ(r.frame[11], 0x02) << "from the cluster port's MAC (02:00:00:00:00:02)";
            saw_sent = true;
        } else {  // behind kube-node-2: nobody answered for 10.192.0.4
            EXPECT_EQ(r.l2, L2Outcome::held) << r.json();
            EXPECT_EQ(r.next_hop.value_or(""), "10.192.0.4");
            EXPECT_FALSE(r.mac.has_value());
            saw_held = true;
        }
    }
    EXPECT_TRUE(saw_sent && saw_held);
}

// Each enum's names come from its one list (dataplane/base/enum_names.h): every value has its
// own name, a value outside the list reads "?", and a name reads back as its value.
TEST(EnumNames, OneListPerEnum) {
    EXPECT_EQ(verdict_name(Verdict::dnat), "dnat");
    EXPECT_EQ(verdict_name(Verdict::drop), "drop");
    EXPECT_EQ(verdict_name(static_cast<Verdict>(kVerdicts)), "?");
    EXPECT_STREQ(l2_outcome_name(L2Outcome::frag_held), "fragment held");
    EXPECT_STREQ(l2_outcome_name(L2Outcome::punted), "to host interface");
    EXPECT_STREQ(addr_role_name(AddrRole::lb_ip), "load-balancer-ip");
    EXPECT_STREQ(addr_role_name(AddrRole::node_port), "node-port");
    std::set<std::string> names;
    for (size_t i = 0; i < kSchedulerNames.size(); ++i) {
        const auto s = static_cast<Scheduler>(i);
        names.insert(scheduler_name(s));
        EXPECT_EQ(scheduler_from_name(scheduler_name(s)), s);
    }
    EXPECT_EQ(names.size(), kSchedulerNames.size());
    EXPECT_EQ(scheduler_from_name("maglev"), Scheduler::maglev);
    EXPECT_EQ(scheduler_from_name("wrr"), std::nullopt);
    EXPECT_STREQ(scheduler_name(static_cast<Scheduler>(200)), "?");
}

// Live flows per endpoint have a row per writer (counters.h): two workers, the sync thread and the
// control thread. A count is its column's sum, whichever rows its flows came and went through, and
// no two writers' rows share a cache line.
TEST(ActiveCounts, ARowPerWriterAndTheCountIsTheColumnsSum) {
    ActiveCounts a(2, 40);
    EXPECT_EQ(a.rows(), 4);
    EXPECT_EQ(a.control_row(), 3);
    a.add(0, 7, 1);
    a.add(0, 7, 1);
    a.add(1, 7, 1);
    a.add(2, 7, -1);  // a replica worker 0 took over, expired by the sync thread (its owner)
    a.add(a.control_row(), 39, 5);
    EXPECT_EQ(a.total(7), 2);
    EXPECT_EQ(a.at(2, 7), -1);
    EXPECT_EQ(a.total(39), 5);
    EXPECT_EQ(a.total(8), 0);
    for (uint16_t r = 0; r + 1 < a.rows(); ++r) {
        const auto line = [&](uint16_t row, uint32_t slot) {
            return reinterpret_cast<uintptr_t>(a.line_of(row, slot)) / 64;
        };
        EXPECT_LT(line(r, 39), line(r + 1, 0)) << "row " << r << " ends on a line before the next row's";
    }
}

// NAT events (nat_event.h): a worker writes only the types its exporter takes (export.ipfix.events),
// and an end carries its flow's packets and octets each way from the counting table.
TEST(NatEvents, OnlyTheExportedTypesAreWrittenAndAnEndCarriesItsCounts) {
    auto table = FlowTable::create({.capacity = 64, .owners = 1, .count = true});
    ASSERT_TRUE(table);
    const FlowKey k0{Ip4::from_host(0xc0a84364), Ip4::from_host(0xc0a84308), 0x1234, 0x3175, 6};
    const FlowKey k1{Ip4::from_host(0x0af40204), Ip4::from_host(0x0ac00002), 0x5000, 0x0004, 6};
    const InsertResult r = table->insert(0, FlowInit{.key = {k0, k1}}, 1);
    ASSERT_EQ(r.status, InsertStatus::inserted);
    table->counters(r.id)->add(Direction::original, 60);
    table->counters(r.id)->add(Direction::reply, 1500);
    table->counters(r.id)->add(Direction::original, 52);
    WorkerCtx ctx;
    NatEventBuffer buf;
    ctx.flows = table.get();
    ctx.events = &buf;
    const Flow& f = table->flow(r.id);
    ctx.nat_event_types = 1u << static_cast<unsigned>(NatEventType::create);
    nat_event(ctx, f, NatEventType::create, FlowEnd::none);
    nat_event(ctx, f, NatEventType::end, FlowEnd::idle_timeout);
    ASSERT_EQ(buf.n, 1u) << "events: [create] writes no end";
    EXPECT_EQ(buf.ev[0].type, NatEventType::create);
    EXPECT_EQ(buf.ev[0].packets[0], 0u) << "a creation carries no counts";
    ctx.nat_event_types = 1u << static_cast<unsigned>(NatEventType::end);
    nat_event(ctx, f, NatEventType::create, FlowEnd::none);
    nat_event(ctx, f, NatEventType::end, FlowEnd::idle_timeout);
    ASSERT_EQ(buf.n, 2u) << "events: [delete] writes no creation";
    const NatEvent& e = buf.ev[1];
    EXPECT_EQ(e.type, NatEventType::end);
    EXPECT_EQ(e.reason, FlowEnd::idle_timeout);
    EXPECT_TRUE(e.k4[0] == k0 && e.k4[1] == k1);
    EXPECT_EQ(e.packets[0], 2u);
    EXPECT_EQ(e.octets[0], 112u);
    EXPECT_EQ(e.packets[1], 1u);
    EXPECT_EQ(e.octets[1], 1500u);
}
