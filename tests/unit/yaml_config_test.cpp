// Config errors read like compiler errors: file:line:column, path, what is wrong; all of them.
#include <gtest/gtest.h>

#include "control/snapshot/snapshot_builder.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::ctl;

namespace {
std::vector<ConfigIssue> errors_of(const std::string& yaml, bool build = false) {
    try {
        Config c = load_config_string(yaml, "t.yaml");
        if (build) {
            test::ensure_eal();
            build_snapshot(c);
        }
    } catch (const ConfigError& e) {
        return e.issues;
    }
    return {};
}
}  // namespace

TEST(Config, BadAddressHasLineAndColumn) {
    auto e = errors_of("cluster:\n  node_ips: [192.168.1.300]\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].mark.line, 2);
    EXPECT_EQ(e[0].mark.column, 14);
    EXPECT_EQ(e[0].path, "cluster.node_ips[0]");
    EXPECT_EQ(e[0].str(), "t.yaml:2:14: cluster.node_ips[0]: \"192.168.1.300\" is not an IPv4 or IPv6 address");
}

TEST(Config, EveryErrorIsReportedNotOnlyTheFirst) {
    auto e = errors_of(R"(cluster:
  cluster_cidrs: [10.0.0.0/33]
  nodeport_range: 40000-30000
services:
  - name: nons
    cluster_ip: 10.0.0.1
    ports: [{port: 70000}]
)");
    ASSERT_EQ(e.size(), 4u);
    EXPECT_EQ(e[0].mark.line, 2);
    EXPECT_EQ(e[1].mark.line, 3);
    EXPECT_EQ(e[2].mark.line, 5);
    EXPECT_EQ(e[3].path, "services[0].ports[0].port");
    EXPECT_EQ(e[3].mark.line, 7);
}

TEST(Config, DuplicateVipAndNodePortOutOfRange) {
    auto e = errors_of(R"(services:
  - name: a/one
    cluster_ip: 10.0.0.1
    ports: [{name: p, port: 80}]
  - name: a/two
    type: NodePort
    cluster_ip: 10.0.0.1
    ports: [{name: p, port: 80, node_port: 80}]
)",
                       true);
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(e[0].mark.line, 8);
    EXPECT_NE(e[0].message.find("already used by a/one"), std::string::npos) << e[0].str();
    EXPECT_NE(e[1].message.find("outside nodeport_range"), std::string::npos) << e[1].str();
}

TEST(Config, RouteViaUnreachableAddress) {
    auto e = errors_of(R"(dataplane:
  ports: [{name: a, addresses: [10.0.0.1/24]}]
  routes: [{prefix: 10.1.0.0/16, via: 10.9.9.9}]
)",
                       true);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].mark.line, 3);
    EXPECT_NE(e[0].message.find("not on the subnet of any port"), std::string::npos);
}

TEST(Config, StaticNeighborsAndMbufs) {
    Config c = load_config_string(R"(dataplane:
  mbufs: 200000
  ports: [{name: a, addresses: [10.0.0.1/24]}]
  neighbors: [{ip: 10.0.0.9, mac: "02:00:5e:0a:0B:ff"}]
)",
                                  "t.yaml");
    EXPECT_EQ(c.dataplane.mbufs, 200000u);
    ASSERT_EQ(c.dataplane.neighbors.size(), 1u);
    EXPECT_EQ(c.dataplane.neighbors[0].ip, *parse_ip("10.0.0.9"));
    EXPECT_EQ(c.dataplane.neighbors[0].mac, (std::array<uint8_t, 6>{0x02, 0x00, 0x5e, 0x0a, 0x0b, 0xff}));
    auto e = errors_of(R"(dataplane:
  ports: [{name: a, addresses: [10.0.0.1/24]}]
  neighbors:
    - {ip: 10.0.0.9, mac: 02:00:5e:0a:0b}
    - {ip: 10.7.0.9, mac: 02:00:5e:0a:0b:01}
)",
                       true);
    ASSERT_EQ(e.size(), 1u) << "the MAC error stops the load before the build";
    EXPECT_EQ(e[0].str(),
              "t.yaml:4:27: dataplane.neighbors[0].mac: \"02:00:5e:0a:0b\" is not a MAC address (02:00:00:00:00:01)");
    e = errors_of(R"(dataplane:
  ports: [{name: a, addresses: [10.0.0.1/24]}]
  neighbors:
    - {ip: 10.7.0.9, mac: 02:00:5e:0a:0b:01}
)",
                  true);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].str(), "t.yaml:4:7: dataplane.neighbors[0].ip: 10.7.0.9 is not on the subnet of any port");
}

TEST(Config, PollIsAdaptiveOrBusy) {
    EXPECT_FALSE(load_config_string("dataplane: {}\n", "t.yaml").dataplane.busy_poll) << "adaptive by default";
    EXPECT_TRUE(load_config_string("dataplane: {poll: busy}\n", "t.yaml").dataplane.busy_poll);
    EXPECT_FALSE(load_config_string("dataplane: {poll: adaptive}\n", "t.yaml").dataplane.busy_poll);
    auto e = errors_of("dataplane:\n  poll: spin\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].str(), "t.yaml:2:9: dataplane.poll: \"spin\" is not adaptive or busy");
}

TEST(Config, UnknownFieldsAreErrorsAndSyntaxErrorsArePositioned) {
    auto u = errors_of("cluster:\n  node_ipz: []\n");
    ASSERT_EQ(u.size(), 1u);
    EXPECT_EQ(u[0].mark.line, 2);
    EXPECT_EQ(u[0].mark.column, 3);
    EXPECT_NE(u[0].message.find("did you mean \"node_ips\"?"), std::string::npos) << u[0].str();
    // Far from every known key: no suggestion, the known keys all the same.
    u = errors_of("cluster:\n  zzzzzzzzzzzz: []\n");
    ASSERT_EQ(u.size(), 1u);
    EXPECT_EQ(u[0].message.find("did you mean"), std::string::npos) << u[0].str();
    EXPECT_NE(u[0].message.find("known here: node_name, node_ips"), std::string::npos) << u[0].str();
    auto e = errors_of("services: [\n  {name: a/b,\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_GT(e[0].mark.line, 0);
}

TEST(Config, FlowTableTimeoutsAreRead) {
    Config c = load_config_string(R"(dataplane:
  flow_table:
    timeouts: {tcp_established: 7200, tcp_syn_sent2: 5, udp_replied: 60, other: 9}
)",
                                  "t.yaml");
    EXPECT_EQ(c.dataplane.timeouts.tcp[static_cast<unsigned>(dp::TcpState::established)], 7200u);
    EXPECT_EQ(c.dataplane.timeouts.tcp[static_cast<unsigned>(dp::TcpState::syn_sent2)], 5u);
    EXPECT_EQ(c.dataplane.timeouts.udp_replied, 60u);
    EXPECT_EQ(c.dataplane.timeouts.other, 9u);
    EXPECT_EQ(c.dataplane.timeouts.tcp[static_cast<unsigned>(dp::TcpState::close_wait)], 3600u) << "untouched";
    EXPECT_TRUE(c.warnings.empty());
    const auto e = errors_of("dataplane:\n  flow_table:\n    timeouts: {tcp_bogus: 1}\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].path, "dataplane.flow_table.timeouts.tcp_bogus");
}

TEST(Config, LabConfigLoads) {
    Config c = load_config_file(SVCGATE_SOURCE_DIR "/config/lab.yaml");
    EXPECT_TRUE(c.warnings.empty());
    test::ensure_eal();
    auto s = build_snapshot(c);
    ASSERT_EQ(s->services.size(), 8u) << "test-svc's and kube-dns's four ports, in both families";
    unsigned v6 = 0;
    for (const dp::ServicePort& sp : s->services) v6 += sp.family == dp::Family::v6;
    EXPECT_EQ(v6, 4u);
}

TEST(Config, DuplicateNodePortIsPositioned) {
    auto e = errors_of(R"(services:
  - name: a/one
    type: NodePort
    cluster_ip: 10.0.0.1
    ports: [{name: p, port: 80, node_port: 30080}]
  - name: a/two
    type: NodePort
    cluster_ip: 10.0.0.2
    ports: [{name: p, port: 81, node_port: 30080}]
)",
                       true);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].mark.line, 9);
    EXPECT_EQ(e[0].mark.column, 13);
    EXPECT_EQ(e[0].path, "services[1].ports[0].node_port");
    EXPECT_NE(e[0].message.find("nodePort 30080/TCP is already used by a/one"), std::string::npos) << e[0].str();
}

TEST(Config, ControlSectionIsValidated) {
    Config c = load_config_string("control: {socket: /tmp/x.sock, socket_mode: '0660', metrics: off, watch: false}\n",
                                  "t.yaml");
    EXPECT_EQ(c.control.socket, "/tmp/x.sock");
    EXPECT_EQ(c.control.socket_mode, 0660u);
    EXPECT_FALSE(c.control.metrics);
    EXPECT_FALSE(c.control.watch);
    auto e = errors_of("control:\n  socket_mode: '999'\n  metrics: localhost:99999\n");
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(e[0].str(), "t.yaml:2:16: control.socket_mode: \"999\" is not an octal mode such as 0600");
    EXPECT_EQ(e[1].mark.line, 3);
}

TEST(Config, KubernetesExampleMatchesTheLab) {
    test::ensure_eal();
    auto lab = build_snapshot(load_config_file(SVCGATE_SOURCE_DIR "/config/lab.yaml"));
    Config k = load_config_file(SVCGATE_SOURCE_DIR "/config/kubernetes.yaml");
    EXPECT_TRUE(k.warnings.empty());
    EXPECT_EQ(k.kube.services, 2u);
    EXPECT_EQ(k.kube.slices, 4u) << "one EndpointSlice per family";
    auto ks = build_snapshot(k);
    ASSERT_EQ(ks->services.size(), lab->services.size());
    for (size_t i = 0; i < ks->services.size(); ++i) {
        EXPECT_EQ(ks->info(i).name, lab->info(i).name);
        EXPECT_EQ(ks->services[i].ep_count, lab->services[i].ep_count);
        EXPECT_EQ(ks->info(i).node_port, lab->info(i).node_port);
        EXPECT_EQ(ks->info(i).cluster_ip, lab->info(i).cluster_ip);
    }
}

// ha.key_file's text (control/config/yaml_config.h).
TEST(Config, TheHaKeyIs64HexDigits) {
    std::array<uint8_t, 32> k{};
    EXPECT_TRUE(parse_ha_key(std::string(64, 'a') + "\n", k).ok());
    EXPECT_EQ(k[0], 0xaa);
    EXPECT_FALSE(parse_ha_key(std::string(62, 'a'), k).ok());
    EXPECT_FALSE(parse_ha_key(std::string(63, 'a') + "g", k).ok());
    EXPECT_FALSE(parse_ha_key("", k).ok());
}

// dataplane.bonds[] (config_model.h: BondConfig): ports name a bond as their device; a member is in
// one bond and is no port's device.
TEST(Config, BondsAreDevicesOfTheirPorts) {
    const Config c = load_config_string(R"(
dataplane:
  bonds:
    - {name: uplink, members: ['0000:3b:00.0', '0000:3b:00.1']}
    - {name: backup, mode: active-backup, members: [net_af_packet0], transmit_hash: layer2+3}
  ports:
    - {name: ext, device: uplink, vlan: 10}
    - {name: cluster, device: uplink, vlan: 20}
)",
                                        "t.yaml");
    ASSERT_EQ(c.dataplane.bonds.size(), 2u);
    EXPECT_EQ(c.dataplane.bonds[0].mode, BondConfig::Mode::lacp);
    EXPECT_EQ(c.dataplane.bonds[0].transmit_hash, "layer3+4");
    EXPECT_EQ(c.dataplane.bonds[0].members, (std::vector<std::string>{"0000:3b:00.0", "0000:3b:00.1"}));
    EXPECT_EQ(c.dataplane.bonds[1].mode, BondConfig::Mode::active_backup);
    EXPECT_EQ(c.dataplane.ports[1].device, "uplink");

    auto e = errors_of(R"(
dataplane:
  bonds:
    - {name: a, members: [m0, m1]}
    - {name: a, mode: balance-rr, members: [m1], transmit_hash: layer4}
    - {name: 'x,y', members: []}
  ports:
    - {name: p, device: m0}
)");
    std::vector<std::string> got;
    for (const ConfigIssue& i : e) got.push_back(i.path + ": " + i.message);
    const std::vector<std::string> want = {
        "dataplane.bonds[1].name: bond a is defined already",
        "dataplane.bonds[1].mode: \"balance-rr\" is not 802.3ad or active-backup",
        "dataplane.bonds[1].transmit_hash: \"layer4\" is not layer2, layer2+3 or layer3+4",
        "dataplane.bonds[1].members[0]: m1 is a member of bond a already",
        "dataplane.bonds[2].name: \"x,y\" is not a bond name (letters, digits, - and _)",
        "dataplane.bonds[2].members: a bond needs at least one member",
        "dataplane.ports[0].device: m0 is a member of bond a: name the bond as the device",
    };
    EXPECT_EQ(got, want);
}
