// The host path and what the HA issue publishes: packets for the gateway that the dataplane does
// not answer go to the port's host interface within two budgets (trace runs the real output
// stage); the set of addresses to announce; kube-proxy's health answers.
#include <cstring>

#include <rte_arp.h>
#include <rte_ip.h>

#include <gtest/gtest.h>

#include "control/routing/announce.h"
#include "dataplane/base/checksum.h"
#include "control/routing/health.h"
#include "dataplane/pipeline/parse.h"
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
)" + host_path +
        R"(cluster:
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
    ctl::Frame f = ctl::build_frame(test::packet(spec));
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

// The ext port's MAC in trace (trace.h), and a peer's.
const uint8_t kExtMac[6] = {0x02, 0, 0, 0, 0, 0x01};
const uint8_t kPeer[6] = {0x02, 0, 0, 0, 0, 0x42};

// An ARP request or reply from the peer (`sender`) about `target`.
ctl::Frame arp(uint16_t op, const std::string& sender, const std::string& target) {
    return test::arp_frame(op, kPeer, sender, target, kExtMac);
}

// An ICMPv6 message of `type` (Neighbor Discovery: hop limit 255) from the peer: `body` after
// the 4 bytes of type, code and checksum, to `dst` (the destination MAC follows from it).
ctl::Frame icmp6(uint8_t type, const std::string& src, const std::string& dst, std::vector<uint8_t> body) {
    const Ip6 s = *ctl::parse_ip6(src), d = *ctl::parse_ip6(dst);
    std::vector<uint8_t> msg{type, 0, 0, 0};
    msg.insert(msg.end(), body.begin(), body.end());
    ctl::Frame f(14 + 40 + msg.size(), 0);
    if (d.b[0] == 0xff) {
        const uint8_t mc[6] = {0x33, 0x33, d.b[12], d.b[13], d.b[14], d.b[15]};
        std::memcpy(f.data(), mc, 6);
    } else {
        std::memcpy(f.data(), kExtMac, 6);
    }
    std::memcpy(f.data() + 6, kPeer, 6);
    f[12] = 0x86, f[13] = 0xdd;
    uint8_t* ip = f.data() + 14;
    ip[0] = 0x60;
    ip[4] = static_cast<uint8_t>(msg.size() >> 8), ip[5] = static_cast<uint8_t>(msg.size());
    ip[6] = 58;
    ip[7] = 255;
    std::memcpy(ip + 8, s.b, 16);
    std::memcpy(ip + 24, d.b, 16);
    std::memcpy(ip + 40, msg.data(), msg.size());
    const uint16_t c = ipv6_l4_csum(ip, ip + 40, static_cast<uint32_t>(msg.size()), 58);
    std::memcpy(ip + 42, &c, 2);
    return f;
}

// A Neighbor Solicitation (135) or Advertisement (136, flags `flags`) about `target`, with the
// peer's link-layer address option.
ctl::Frame nd(uint8_t type, const std::string& src, const std::string& dst, const std::string& target,
              uint8_t flags = 0) {
    std::vector<uint8_t> body(4 + 16 + 8, 0);
    body[0] = flags;
    std::memcpy(body.data() + 4, ctl::parse_ip6(target)->b, 16);
    body[20] = type == kIcmp6NeighborSolicit ? 1 : 2;
    body[21] = 1;
    std::memcpy(body.data() + 22, kPeer, 6);
    return icmp6(type, src, dst, body);
}

TEST(HostPath, OnlyTheAnswersToTheKernelsOwnNeighborQuestionsGoToIt) {
    auto t = test::tracer(config());
    auto to_host = [&](const ctl::Frame& f, const char* what) {
        auto r = t->run_frame(f, what);
        return r.l2 == L2Outcome::punted;
    };
    // ARP: a reply to a port address is the kernel's; requests for it the dataplane answers.
    EXPECT_TRUE(to_host(arp(RTE_ARP_OP_REPLY, "192.168.67.1", "192.168.67.8"), "arp reply to us"));
    EXPECT_EQ(t->run_frame(arp(RTE_ARP_OP_REQUEST, "192.168.67.1", "192.168.67.8"), "who-has us").l2, L2Outcome::sent);
    EXPECT_FALSE(to_host(arp(RTE_ARP_OP_REQUEST, "192.168.67.1", "192.168.67.50"), "who-has another host"));
    EXPECT_FALSE(to_host(arp(RTE_ARP_OP_REPLY, "192.168.67.1", "192.168.67.50"), "a reply to another host"));
    EXPECT_FALSE(to_host(arp(RTE_ARP_OP_REQUEST, "192.168.67.1", "192.168.67.1"), "gratuitous"));
    // ND: advertisements to its addresses, global or link-local; solicitations for its
    // link-local address (fe80::ff:fe00:1 from 02:00:00:00:00:01).
    EXPECT_TRUE(to_host(nd(kIcmp6NeighborAdvert, "fd00:67::1", "fd00:67::8", "fd00:67::1", 0x60), "na to us"));
    EXPECT_TRUE(to_host(nd(kIcmp6NeighborAdvert, "fe80::1", "fe80::ff:fe00:1", "fd00:67::1", 0x60), "na to our fe80"));
    EXPECT_TRUE(to_host(nd(kIcmp6NeighborSolicit, "fe80::1", "ff02::1:ff00:1", "fe80::ff:fe00:1"), "ns for our fe80"));
    EXPECT_EQ(t->run_frame(nd(kIcmp6NeighborSolicit, "fd00:67::1", "ff02::1:ff00:8", "fd00:67::8"), "ns for us").l2,
              L2Outcome::sent);
    EXPECT_FALSE(to_host(nd(kIcmp6NeighborSolicit, "fd00:67::1", "ff02::1:ff00:50", "fd00:67::50"), "ns for another"));
    EXPECT_FALSE(
        to_host(nd(kIcmp6NeighborSolicit, "fe80::1", "ff02::1:ff00:2", "fe80::ff:fe00:2"), "ns for another fe80"));
    EXPECT_FALSE(to_host(nd(kIcmp6NeighborAdvert, "fd00:67::1", "ff02::1", "fd00:67::1", 0x20), "unsolicited na"));
    // Router advertisements and solicitations: the kernel takes none (its addresses are the config's).
    EXPECT_FALSE(to_host(icmp6(kIcmp6RouterAdvert, "fe80::1", "ff02::1", std::vector<uint8_t>(12, 0)), "ra"));
    EXPECT_FALSE(to_host(icmp6(kIcmp6RouterSolicit, "fe80::1", "ff02::2", std::vector<uint8_t>(4, 0)), "rs"));
    EXPECT_EQ(t->ctx().counters.punted, 4u);
    EXPECT_EQ(t->ctx().counters.unaccounted(), 0);
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
    // Neighbor traffic that is not the kernel's spends nothing of the control budget ...
    for (int i = 0; i < 20; ++i) {
        const std::string other = "192.168.67." + std::to_string(50 + i);
        (void)t->run_frame(arp(RTE_ARP_OP_REQUEST, "192.168.67.1", other), "who-has another host");
        (void)t->run_frame(arp(RTE_ARP_OP_REQUEST, "192.168.67.1", "192.168.67.8"), "who-has us (answered)");
        (void)t->run_frame(nd(kIcmp6NeighborSolicit, "fd00:67::1", "ff02::1:ff00:50", "fd00:67::50"), "ns for another");
        (void)t->run_frame(icmp6(kIcmp6RouterAdvert, "fe80::1", "ff02::1", std::vector<uint8_t>(12, 0)), "ra");
    }
    // ... so BFD and BGP with TTL security (TTL 255) and the kernel's ARP answers have all of it,
    // and past it they too are counted, not queued.
    EXPECT_EQ(t->run_frame(with_ttl("udp 192.168.67.1:49152 > 192.168.67.8:3784", 255), "bfd").l2, L2Outcome::punted);
    EXPECT_EQ(t->run_frame(arp(RTE_ARP_OP_REPLY, "192.168.67.1", "192.168.67.8"), "arp reply").l2, L2Outcome::punted);
    EXPECT_EQ(t->run_frame(nd(kIcmp6NeighborAdvert, "fd00:67::1", "fd00:67::8", "fd00:67::1", 0x60), "na").l2,
              L2Outcome::punted);
    EXPECT_EQ(t->run_frame(with_ttl("udp 192.168.67.1:49152 > 192.168.67.8:3784", 255), "bfd").l2, L2Outcome::punted);
    auto over = t->run_frame(arp(RTE_ARP_OP_REPLY, "192.168.67.1", "192.168.67.8"), "arp reply past the budget");
    EXPECT_EQ(over.l2, L2Outcome::dropped);
    EXPECT_EQ(over.l2_reason, DropReason::punt_limited);
    EXPECT_EQ(t->ctx().counters.punted, 7u);
    EXPECT_EQ(t->ctx().counters.drops[static_cast<unsigned>(DropReason::punt_limited)], 8u);
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
      - {ip: 10.244.2.4, node: )" +
            node + ", ready: " + (ready ? "true" : "false") + R"(}
      - {ip: 'fd00:244:2::4', node: )" +
            node + ", ready: " + (ready ? "true" : "false") + "}\n";
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

TEST(Announce, HostInterfacesCarryThePortAddressesAndEveryNodeIp) {
    const auto cfg = ctl::load_config_string(R"(
dataplane:
  ports:
    - {name: cluster, addresses: [10.192.0.2/24]}
    - {name: v6only, addresses: ['fd00:68::8/64'], host_interface: sg-six}
    - {name: ext, addresses: [192.168.67.8/24, 'fd00:67::8/64'], host_interface: sg-ext}
cluster:
  node_ips: [192.168.67.8, 10.192.0.2, 203.0.113.5, 'fd00:67::8', 'fd00:99::5']
)",
                                             "t.yaml");
    const auto a = ctl::host_interface_addresses(cfg);
    ASSERT_EQ(a.size(), 3u);
    EXPECT_TRUE(a[0].empty());  // no host interface
    // A node IP not on a host interface goes to the first one of its family as a host address.
    EXPECT_EQ(names(a[1]), (Strings{"fd00:68::8/64", "fd00:99::5/128"}));
    EXPECT_EQ(names(a[2]), (Strings{"192.168.67.8/24", "fd00:67::8/64", "10.192.0.2/32", "203.0.113.5/32"}));
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

// A burst's packets for the host interfaces (BFD, BGP, ARP for the routing daemon) are handed on
// before the bulk traffic going out of the ports.
TEST(HostPath, PuntedPacketsLeaveAheadOfBulkTraffic) {
    test::ensure_eal();
    static std::vector<uint16_t> order;
    order.clear();
    TxSink sink{.send = [](void*, uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept -> uint16_t {
                    order.push_back(port);
                    for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(pkts[i]);
                    return n;
                },
                .arg = nullptr};
    static NeighborTable nt;  // large: not on the stack
    static NeighborTable6 nt6;
    const rte_ether_addr macs[2]{};
    const uint16_t host_of[2]{2, Output::kNoHost};  // port 0's host interface is output 2
    WorkerCtx ctx;
    ctx.out.init(nt, nt6, ctl::tool_mempool(), macs, 2, sink);
    ctx.out.set_host_path(host_of, 3);
    for (const uint16_t port : {uint16_t{0}, uint16_t{1}, uint16_t{0}, uint16_t{2}}) {
        Output::TxBatch& b = ctx.out.batch(port);
        b.pkts[b.n++] = rte_pktmbuf_alloc(ctl::tool_mempool());
    }
    output_flush(ctx);
    EXPECT_EQ(order, (std::vector<uint16_t>{2, 0, 1})) << "the host interface first, then the ports";
    EXPECT_EQ(ctx.counters.tx_packets, 4u);
}
