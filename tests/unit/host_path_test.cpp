// The host path and what the HA issue publishes: packets for the gateway that the dataplane does
// not answer go to the port's host interface within two budgets (trace runs the real output
// stage); the set of addresses to announce; kube-proxy's health answers.
#include <cstring>

#include <rte_ip.h>

#include <gtest/gtest.h>

#include "announce.h"
#include "health.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

// ext has a host interface, cluster has none; punt budgets of 3 (the rest) and 4 (control).
std::string config(const std::string& host_path = "  host_path: {control_per_second: 4, other_per_second: 3}\n") {
    return R"(
dataplane:
  ports:
    - {name: ext, addresses: [192.168.67.8/24, 'fd00:67::8/64'], host_interface: sg-ext}
    - {name: cluster, addresses: [10.192.0.2/24]}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
)" + host_path + R"(cluster:
  node_name: svcgate
  node_ips: [192.168.67.8, 'fd00:67::8']
  service_cidrs: [10.96.0.0/12]
services:
  - name: default/lb
    type: LoadBalancer
    cluster_ip: 10.96.0.1
    load_balancer_ips: [198.51.100.7]
    ports: [{port: 80, node_port: 30080}]
    endpoints: [10.244.2.4]
)";
}

// A frame from a packet spec with its IPv4 TTL (or IPv6 hop limit) set.
ctl::Frame with_ttl(const std::string& spec, uint8_t ttl) {
    ctl::Frame f = ctl::build_frame(ctl::parse_packet_spec(spec));
    if (f[12] == 0x08 && f[13] == 0x00) {
        auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
        ip->time_to_live = ttl;
        ip->hdr_checksum = 0;
        ip->hdr_checksum = rte_ipv4_cksum(ip);
    } else {
        f[14 + 7] = ttl;
    }
    return f;
}

TEST(HostPath, WhatTheDataplaneDoesNotAnswerGoesToThePortsHostInterface) {
    auto t = test::tracer(config());
    auto bgp = t->run_spec("tcp 192.168.67.1:40000 > 192.168.67.8:179 [S]");
    EXPECT_EQ(bgp.verdict, Verdict::local);
    EXPECT_EQ(bgp.l2, L2Outcome::punted);
    EXPECT_EQ(bgp.port.value_or(""), "sg-ext");
    EXPECT_NE(bgp.text().find("host interface sg-ext"), std::string::npos) << bgp.text();
    auto v6 = t->run_spec("tcp [fd00:67::1]:40000 > [fd00:67::8]:179 [S]");
    EXPECT_EQ(v6.l2, L2Outcome::punted);
    // Echo is the dataplane's own answer; a service address is nothing for the kernel.
    auto ping = t->run_spec("icmp 192.168.67.1 > 192.168.67.8");
    EXPECT_EQ(ping.l2, L2Outcome::sent);
    auto lb = t->run_spec("tcp 192.168.67.1:40000 > 198.51.100.7:22 [S]");
    EXPECT_NE(lb.l2, L2Outcome::punted);
    // The cluster port has no host interface: refused as before.
    auto cl = t->run_spec("tcp 10.192.0.3:40000 > 10.192.0.2:22 [S]");
    EXPECT_EQ(cl.l2, L2Outcome::dropped);
    EXPECT_EQ(cl.l2_reason, DropReason::to_gateway);
    EXPECT_EQ(t->ctx().counters.punted, 2u);
    EXPECT_EQ(t->ctx().counters.unaccounted(), 0);
}

TEST(HostPath, AFloodCannotStarveOnLinkSendersOrArp) {
    auto t = test::tracer(config());
    unsigned punted = 0, limited = 0;
    for (int i = 0; i < 10; ++i) {  // from off-link (TTL 60): 3 go through, the rest are counted
        auto r = t->run_frame(with_ttl("udp 192.168.66.100:4000 > 192.168.67.8:9999", 60), "flood");
        punted += r.l2 == L2Outcome::punted;
        limited += r.l2 == L2Outcome::dropped && r.l2_reason == DropReason::punt_limited;
    }
    EXPECT_EQ(punted, 3u);
    EXPECT_EQ(limited, 7u);
    // BFD and BGP with TTL security arrive with TTL 255: their own budget is untouched.
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(t->run_frame(with_ttl("udp 192.168.67.1:49152 > 192.168.67.8:3784", 255), "bfd").l2, L2Outcome::punted);
    EXPECT_EQ(t->ctx().counters.drops[static_cast<unsigned>(DropReason::punt_limited)], 7u);
    EXPECT_EQ(t->ctx().counters.unaccounted(), 0);
}

TEST(HostPath, NoBudgetMeansNoLimit) {
    auto t = test::tracer(config("  host_path: {control_per_second: 0, other_per_second: 0}\n"));
    for (int i = 0; i < 50; ++i)
        ASSERT_EQ(t->run_spec("udp 192.168.66.100:4000 > 192.168.67.8:9999").l2, L2Outcome::punted);
}

ctl::Config load(const std::string& services, const std::string& routing = "routing: {table: 101}\n") {
    return ctl::load_config_string(test::dual_stack_config(services) + routing, "t.yaml");
}

std::vector<std::string> names(const std::vector<ctl::IpCidr>& v) {
    std::vector<std::string> out;
    for (const auto& c : v) out.push_back(ctl::format_cidr(c));
    return out;
}

using Strings = std::vector<std::string>;

TEST(Announce, LoadBalancerAndExternalIpsOfServedFamiliesAndNodeIps) {
    const std::string svc = R"(
  - name: a/lb
    type: LoadBalancer
    cluster_ips: [10.96.0.1]
    load_balancer_ips: [198.51.100.7, '2001:db8::7']
    external_ips: [203.0.113.9]
    ports: [{port: 80, node_port: 30080}]
    endpoints: [{ip: 10.244.2.4, node: kube-node-1}]
  - name: a/np
    type: NodePort
    cluster_ips: [10.96.0.2]
    load_balancer_ips: [198.51.100.8]
    ports: [{port: 80, node_port: 30081}]
    endpoints: [10.244.2.4]
)";
    // The IPv6 LB IP: the Service has no IPv6 ClusterIP, so that family is not served. A
    // NodePort Service's LB IPs are no LoadBalancer's.
    EXPECT_EQ(names(ctl::announce_set(load(svc))),
              (Strings{"192.168.67.8/32", "198.51.100.7/32", "203.0.113.9/32", "fd00:67::8/128"}));
    EXPECT_EQ(names(ctl::announce_set(load(svc, "routing: {table: 101, announce: [cluster_ips, service_cidrs]}\n"))),
              (Strings{"10.96.0.0/12", "10.96.0.1/32", "10.96.0.2/32", "fd00:96::/108"}));
}

TEST(Announce, PolicyLocalOnlyWithAReadyLocalEndpoint) {
    auto svc = [](const std::string& node, bool ready) {
        return R"(
  - name: a/local
    type: LoadBalancer
    cluster_ips: [10.96.0.1, 'fd00:96::1']
    load_balancer_ips: [198.51.100.7, '2001:db8::7']
    external_traffic_policy: Local
    health_check_node_port: 32100
    ports: [{port: 80, node_port: 30080}]
    endpoints:
      - {ip: 10.244.2.4, node: )" + node + ", ready: " + (ready ? "true" : "false") + R"(}
      - {ip: 'fd00:244:2::4', node: )" + node + ", ready: " + (ready ? "true" : "false") + "}\n";
    };
    const Strings node_ips{"192.168.67.8/32", "fd00:67::8/128"};
    EXPECT_EQ(names(ctl::announce_set(load(svc("kube-node-1", true)))), node_ips);
    EXPECT_EQ(names(ctl::announce_set(load(svc("svcgate", false)))), node_ips);
    EXPECT_EQ(names(ctl::announce_set(load(svc("svcgate", true)))),
              (Strings{"192.168.67.8/32", "198.51.100.7/32", "2001:db8::7/128", "fd00:67::8/128"}));
    // kube-proxy's health check: a dual-stack pod is one local endpoint.
    const auto ports = ctl::health_check_ports(load(svc("svcgate", true)));
    ASSERT_EQ(ports.size(), 1u);
    EXPECT_EQ(ports[0].port, 32100);
    EXPECT_EQ(ports[0].local_endpoints, 1u);
    auto [code, body] = ctl::health_check_answer(ports[0], true);
    EXPECT_EQ(code, 200);
    EXPECT_NE(body.find(R"("localEndpoints":1)"), std::string::npos) << body;
    EXPECT_NE(body.find(R"("service":{"name":"local","namespace":"a"})"), std::string::npos) << body;
    EXPECT_EQ(ctl::health_check_answer(ports[0], false).first, 503);  // the gateway itself is not healthy
    EXPECT_EQ(ctl::health_check_answer(ctl::health_check_ports(load(svc("kube-node-1", true)))[0], true).first, 503);
}

TEST(Announce, AHealthCheckNodePortOutsidePolicyLocalIsIgnoredAsKubeProxyDoes) {
    const auto cfg = load(R"(
  - name: a/cluster
    type: LoadBalancer
    cluster_ips: [10.96.0.1]
    load_balancer_ips: [198.51.100.7]
    health_check_node_port: 32100
    ports: [{port: 80, node_port: 30080}]
    endpoints: [{ip: 10.244.2.4, node: svcgate}]
)");
    EXPECT_TRUE(ctl::health_check_ports(cfg).empty());
}

TEST(Health, KubeProxysCodesAndBody) {
    ctl::HealthState h;
    h.live = h.ports_up = h.healthy = true;
    h.last_update_unix = 1700000000.25;
    auto [code, body] = ctl::healthz_answer(h, 1700000001.5, false);
    EXPECT_EQ(code, 200);
    EXPECT_NE(body.find(R"("lastUpdated":"2023-11-14T22:13:20.250Z")"), std::string::npos) << body;
    EXPECT_NE(body.find(R"("nodeEligible":true)"), std::string::npos) << body;
    h.draining = true;
    h.healthy = false;
    std::tie(code, body) = ctl::healthz_answer(h, 1700000001.5, false);
    EXPECT_EQ(code, 503);
    EXPECT_NE(body.find(R"("nodeEligible":false)"), std::string::npos) << body;
    EXPECT_EQ(ctl::healthz_answer(h, 1700000001.5, true).first, 200);  // /livez: draining is alive
    h.live = false;
    EXPECT_EQ(ctl::healthz_answer(h, 1700000001.5, true).first, 503);
}

}  // namespace
