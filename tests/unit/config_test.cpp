// Config errors read like compiler errors: file:line:column, path, what is wrong; all of them.
#include <gtest/gtest.h>

#include "snapshot_builder.h"
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
    EXPECT_EQ(e[0].str(), "t.yaml:2:14: cluster.node_ips[0]: \"192.168.1.300\" is not an IPv4 address");
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
)", true);
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(e[0].mark.line, 8);
    EXPECT_NE(e[0].message.find("already used by a/one"), std::string::npos) << e[0].str();
    EXPECT_NE(e[1].message.find("outside nodeport_range"), std::string::npos) << e[1].str();
}

TEST(Config, RouteViaUnreachableAddress) {
    auto e = errors_of(R"(dataplane:
  ports: [{name: a, addresses: [10.0.0.1/24]}]
  routes: [{prefix: 10.1.0.0/16, via: 10.9.9.9}]
)", true);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].mark.line, 3);
    EXPECT_NE(e[0].message.find("not on the subnet of any port"), std::string::npos);
}

TEST(Config, UnknownFieldsAreWarningsAndSyntaxErrorsArePositioned) {
    Config c = load_config_string("cluster:\n  node_ipz: []\n", "t.yaml");
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_EQ(c.warnings[0].mark.line, 2);
    auto e = errors_of("services: [\n  {name: a/b,\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_GT(e[0].mark.line, 0);
}

TEST(Config, FlowTableTimeoutsAreRead) {
    Config c = load_config_string(R"(dataplane:
  flow_table:
    timeouts: {tcp_established: 7200, tcp_syn_sent2: 5, udp_replied: 60, other: 9, tcp_bogus: 1}
)", "t.yaml");
    EXPECT_EQ(c.dataplane.timeouts.tcp[static_cast<unsigned>(dp::TcpState::established)], 7200u);
    EXPECT_EQ(c.dataplane.timeouts.tcp[static_cast<unsigned>(dp::TcpState::syn_sent2)], 5u);
    EXPECT_EQ(c.dataplane.timeouts.udp_replied, 60u);
    EXPECT_EQ(c.dataplane.timeouts.other, 9u);
    EXPECT_EQ(c.dataplane.timeouts.tcp[static_cast<unsigned>(dp::TcpState::close_wait)], 3600u) << "untouched";
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_EQ(c.warnings[0].path, "dataplane.flow_table.timeouts.tcp_bogus");
}

TEST(Config, LabConfigLoads) {
    Config c = load_config_file(SVCGATE_SOURCE_DIR "/config/lab.yaml");
    EXPECT_TRUE(c.warnings.empty());
    test::ensure_eal();
    auto s = build_snapshot(c);
    EXPECT_EQ(s->services.size(), 4u);
}
