// control/lb/allocator.h: LoadBalancer addresses on MetalLB's model. The rows of MetalLB's own
// allocator and controller tests (internal/allocator/allocator_test.go: TestAssignment,
// TestBuggyIPs, TestConfigReload, TestAutoAssign; controller/service_test.go's mutation table)
// transcribed, then svcgate's own: families, sharing, exhaustion, release, pool edits, restarts,
// priorities and selectors; and, as MetalLB's controller test does, the decision rows run again
// in shuffled order against one allocator with the same result.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "control/config/lb_config.h"
#include "control/config/yaml_config.h"
#include "control/lb/allocator.h"

using namespace svcgate;
using namespace svcgate::ctl;
using namespace svcgate::ctl::lb;

namespace {

// A Service as the API server would hold it, from the parts a row names.
struct S {
    std::string ns = "default", name = "test";
    std::string cluster_ips = "10.96.0.1";  // "10.96.0.1,fd00::1": dual-stack
    std::string policy;                     // ipFamilyPolicy
    std::string lb_ip;                      // spec.loadBalancerIP
    std::map<std::string, std::string> ann, labels;
    std::vector<std::string> ports{"TCP/80"};
    bool local = false;  // externalTrafficPolicy Local
    std::map<std::string, std::string> selector{{"app", "web"}};
    std::string status;  // "1.2.3.0,1000::"
    std::string type = "LoadBalancer";
    std::string created = "2026-01-01T00:00:00Z";
};

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at < s.size()) {
        const size_t c = std::min(s.find(',', at), s.size());
        out.push_back(s.substr(at, c - at));
        at = c + 1;
    }
    return out;
}

LbService svc(const S& x) {
    nlohmann::json j = {{"apiVersion", "v1"}, {"kind", "Service"}};
    j["metadata"] = {{"name", x.name}, {"namespace", x.ns}, {"creationTimestamp", x.created}, {"resourceVersion", "1"}};
    if (!x.ann.empty()) j["metadata"]["annotations"] = x.ann;
    if (!x.labels.empty()) j["metadata"]["labels"] = x.labels;
    nlohmann::json spec = {{"type", x.type}, {"selector", x.selector}};
    const auto ips = split(x.cluster_ips);
    spec["clusterIP"] = ips[0];
    spec["clusterIPs"] = ips;
    nlohmann::json fams = nlohmann::json::array();
    for (const auto& ip : ips) fams.push_back(ip.find(':') != std::string::npos ? "IPv6" : "IPv4");
    spec["ipFamilies"] = fams;
    if (!x.policy.empty()) spec["ipFamilyPolicy"] = x.policy;
    if (!x.lb_ip.empty()) spec["loadBalancerIP"] = x.lb_ip;
    if (x.local) spec["externalTrafficPolicy"] = "Local";
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& p : x.ports) {
        const size_t slash = p.find('/');
        ports.push_back({{"protocol", p.substr(0, slash)}, {"port", std::stoi(p.substr(slash + 1))}});
    }
    spec["ports"] = ports;
    j["spec"] = spec;
    if (!x.status.empty()) {
        nlohmann::json ing = nlohmann::json::array();
        for (const auto& ip : split(x.status)) ing.push_back({{"ip", ip}});
        j["status"] = {{"loadBalancer", {{"ingress", ing}}}};
    }
    const ytree::Stream st = ytree::Stream::parse(j.dump());
    return read_lb_service(st.documents()[0]);
}

struct P {
    std::string name;
    std::vector<std::string> addresses;
    bool auto_assign = true, avoid_buggy = false;
    bool allocate_to = false;
    uint32_t priority = 0;
    std::vector<std::string> namespaces;
    std::map<std::string, std::string> ns_labels, svc_labels;  // one matchLabels selector each
};

LbPoolConfig pool(const P& p) {
    LbPoolConfig c;
    c.name = p.name;
    for (const auto& a : p.addresses) {
        std::string why;
        const auto r = parse_address_range(a, why);
        EXPECT_TRUE(r) << a << ": " << why;
        if (r) c.ranges.push_back(*r);
    }
    c.auto_assign = p.auto_assign;
    c.avoid_buggy_ips = p.avoid_buggy;
    c.allocate_to =
        p.allocate_to || p.priority || !p.namespaces.empty() || !p.ns_labels.empty() || !p.svc_labels.empty();
    c.priority = p.priority;
    c.namespaces = p.namespaces;
    if (!p.ns_labels.empty()) c.namespace_selectors.push_back(LabelSelector{.match_labels = p.ns_labels});
    if (!p.svc_labels.empty()) c.service_selectors.push_back(LabelSelector{.match_labels = p.svc_labels});
    return c;
}

std::vector<LbPoolConfig> pools(std::initializer_list<P> ps) {
    std::vector<LbPoolConfig> out;
    for (const P& p : ps) out.push_back(pool(p));
    return out;
}

std::string ips(const Result& r) {
    std::string t;
    for (const IpAddr& a : r.ips) t += (t.empty() ? "" : ",") + format_ip(a);
    return t;
}

std::vector<IpAddr> addrs(const std::string& s) {
    std::vector<IpAddr> out;
    for (const auto& t : split(s)) out.push_back(*parse_ip(t));
    return out;
}

const NamespaceLabels kNoNs;

}  // namespace

// ---- MetalLB's TestAssignment, row by row (each depends on the ones before) --------------------

TEST(Allocator, MetalLBAssignmentRows) {
    Allocator a;
    a.set_pools(pools({
        {.name = "test", .addresses = {"1.2.3.4/31", "1000::4/127"}},
        {.name = "test2", .addresses = {"1.2.4.0/24", "1000::4:0/120"}, .avoid_buggy = true},
        {.name = "test3", .addresses = {"1.2.5.0/24"}, .avoid_buggy = true, .namespaces = {"test-ns1"}},
        {.name = "test4", .addresses = {"1.2.6.0/24"}, .svc_labels = {{"team", "metallb"}}},
        {.name = "test5",
         .addresses = {"1.2.7.0/24"},
         .priority = 20,
         .namespaces = {"test-ns1"},
         .svc_labels = {{"team", "metallb"}}},
        {.name = "test6",
         .addresses = {"1.2.8.0/24"},
         .priority = 20,
         .namespaces = {"test-ns2"},
         .svc_labels = {{"foo", "bar"}}},
    }));
    auto as = [&](const S& x, const std::string& want) { return a.assign(svc(x), addrs(want), kNoNs); };
    const S s1{.name = "s1"}, s2{.name = "s2"};
    EXPECT_TRUE(as(s1, "1.2.3.4"));
    EXPECT_TRUE(as(s1, "1.2.3.4")) << "assigning again is the same";
    EXPECT_EQ(as(s2, "1.2.3.4").failure, Failure::requested_in_use);
    EXPECT_TRUE(as(s2, "1.2.3.5"));
    a.release("default/s1");
    EXPECT_TRUE(as(s2, "1.2.3.4"));
    EXPECT_TRUE(as(s1, "1.2.3.5"));
    // avoid_buggy_ips: .0 and .255 are in no pool.
    const S s3{.name = "s3"};
    EXPECT_EQ(as(s3, "1.2.4.0").failure, Failure::not_in_pool);
    EXPECT_EQ(as(s3, "1.2.4.255").failure, Failure::not_in_pool);
    EXPECT_TRUE(as(s3, "1.2.4.254"));
    // Sharing: a Service alone on its address may change its key.
    S s4{.name = "s4", .ann = {{"svcgate.io/allow-shared-ip", "sharing"}}};
    EXPECT_TRUE(as(s4, "1.2.4.3"));
    s4.ann["svcgate.io/allow-shared-ip"] = "share";
    EXPECT_TRUE(as(s4, "1.2.4.3"));
    S s3s{.name = "s3", .ann = {{"svcgate.io/allow-shared-ip", "share"}}};
    EXPECT_EQ(as(s3s, "1.2.4.3").failure, Failure::sharing_refused) << "port TCP/80 twice";
    s3s.ports = {"TCP/443"};
    S other = s3s;
    other.ann["svcgate.io/allow-shared-ip"] = "othershare";
    EXPECT_EQ(as(other, "1.2.4.3").failure, Failure::sharing_refused) << "another key";
    S local = s3s;
    local.local = true;
    EXPECT_EQ(as(local, "1.2.4.3").failure, Failure::sharing_refused) << "another backend";
    EXPECT_TRUE(as(s3s, "1.2.4.3"));
    s3s.ports = {"UDP/53"};
    EXPECT_TRUE(as(s3s, "1.2.4.3"));
    EXPECT_EQ(as(other, "1.2.4.3").failure, Failure::sharing_refused) << "s3 cannot change the key of a shared one";
    EXPECT_TRUE(as(s4, "1.2.4.254")) << "s3 left it";
    // Dual-stack: both from one pool.
    const S d1{.name = "s1", .cluster_ips = "10.96.0.1,fd00::1", .policy = "RequireDualStack"};
    a.release("default/s1");
    EXPECT_EQ(ips(as(d1, "1.2.3.5,1000::4")), "1.2.3.5,1000::4");
    EXPECT_EQ(as(d1, "1.2.4.5,1000::4").failure, Failure::not_in_pool) << "two pools";
    // allocate_to.
    EXPECT_TRUE(as(S{.ns = "test-ns1", .name = "n1"}, "1.2.5.10"));
    EXPECT_EQ(as(S{.ns = "other", .name = "n2"}, "1.2.5.11").failure, Failure::pool_not_allowed);
    EXPECT_TRUE(as(S{.name = "l1", .labels = {{"team", "metallb"}}}, "1.2.6.10"));
    EXPECT_EQ(as(S{.name = "l2", .labels = {{"team", "red"}}}, "1.2.6.11").failure, Failure::pool_not_allowed);
    EXPECT_TRUE(as(S{.ns = "test-ns1", .name = "b1", .labels = {{"team", "metallb"}}}, "1.2.7.10"));
    EXPECT_EQ(as(S{.ns = "test-ns2", .name = "b2", .labels = {{"team", "metallb"}}}, "1.2.8.10").failure,
              Failure::pool_not_allowed);
    EXPECT_EQ(as(S{.ns = "test-ns1", .name = "b3", .labels = {{"foo", "bar"}}}, "1.2.8.10").failure,
              Failure::pool_not_allowed);
}

// TestBuggyIPs: .0 and .255 are skipped only where the pool says so.
TEST(Allocator, MetalLBBuggyIPs) {
    Allocator a;
    a.set_pools(pools({{.name = "a", .addresses = {"1.2.3.0/31"}},
                       {.name = "b", .addresses = {"1.2.3.254/31"}},
                       {.name = "c", .addresses = {"1.2.4.0/31"}, .avoid_buggy = true},
                       {.name = "d", .addresses = {"1.2.4.254/31"}, .avoid_buggy = true}}));
    std::set<std::string> got;
    for (int i = 0; i < 6; ++i) {
        const Result r = a.allocate(svc(S{.name = "s" + std::to_string(i)}), kNoNs);
        ASSERT_TRUE(r) << i << ": " << r.message;
        got.insert(ips(r));
    }
    EXPECT_EQ(got, (std::set<std::string>{"1.2.3.0", "1.2.3.1", "1.2.3.254", "1.2.3.255", "1.2.4.1", "1.2.4.254"}));
    EXPECT_EQ(a.allocate(svc(S{.name = "s6"}), kNoNs).failure, Failure::exhausted);
}

// poolCount: avoid_buggy_ips counted exactly; IPv6 beside IPv4; a /64 saturates.
TEST(Allocator, Counts) {
    Allocator a;
    a.set_pools(pools({{.name = "b", .addresses = {"1.2.3.0/24", "2.3.4.128/25"}, .avoid_buggy = true},
                       {.name = "m", .addresses = {"1.2.5.0/31", "1000::/127"}},
                       {.name = "big", .addresses = {"fd00::/64", "8000::/1"}}}));
    ASSERT_TRUE(a.allocate(svc(S{.name = "x", .ann = {{"svcgate.io/address-pool", "m"}}}), kNoNs));
    const auto c = a.counts();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[0].v4.available, 381u);
    EXPECT_FALSE(c[0].v6.present);
    EXPECT_EQ(c[1].v4.assigned, 1u);
    EXPECT_EQ(c[1].v4.available, 1u);
    EXPECT_EQ(c[1].v6.available, 2u);
    EXPECT_EQ(c[2].v6.available, (uint64_t{1} << 63) - 1);
}

// TestConfigReload: a pool edit re-homes what still fits (renamed, split pools) and gives up the rest.
TEST(Allocator, MetalLBConfigReload) {
    Allocator a;
    a.set_pools(pools({{.name = "test", .addresses = {"1.2.3.0/30", "1000::/126"}}}));
    const S s1{.name = "s1"}, s2{.name = "s2", .cluster_ips = "fd00::1"};
    ASSERT_EQ(ips(a.assign(svc(s1), addrs("1.2.3.0"), kNoNs)), "1.2.3.0");
    ASSERT_EQ(ips(a.assign(svc(s2), addrs("1000::"), kNoNs)), "1000::");
    auto reload = [&](std::vector<LbPoolConfig> ps) {
        a.set_pools(ps);
        std::string out;
        for (const S* s : {&s1, &s2}) {
            S x = *s;
            x.status = ips(*a.held("default/" + s->name));
            const Result r = a.allocate(svc(x), kNoNs);
            out += std::string(s == &s1 ? "" : " ") + (r && r.cleared.empty() && ips(r) == x.status ? r.pool : "");
        }
        return out;
    };
    EXPECT_EQ(reload(pools({{.name = "test", .addresses = {"1.2.3.2/31", "1000::/126"}}})), " test");
    ASSERT_TRUE(a.assign(svc(s1), addrs("1.2.3.2"), kNoNs));
    EXPECT_EQ(reload(pools({{.name = "test2", .addresses = {"1.2.3.2/31", "1000::/126"}}})), "test2 test2");
    EXPECT_EQ(reload(pools({{.name = "test", .addresses = {"1.2.3.2/31", "1000::2/127"}},
                            {.name = "test2", .addresses = {"1.2.3.0/31", "1000::/127"}}})),
              "test test2");
}

// TestAutoAssign: a pool without auto_assign is never picked on its own.
TEST(Allocator, MetalLBAutoAssign) {
    Allocator a;
    a.set_pools(pools({{.name = "test1", .addresses = {"1.2.3.4/31"}, .auto_assign = false},
                       {.name = "test2", .addresses = {"1.2.3.10/31"}}}));
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "s1"}), kNoNs)), "1.2.3.10");
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "s2"}), kNoNs)), "1.2.3.11");
    EXPECT_EQ(a.allocate(svc(S{.name = "s3"}), kNoNs).failure, Failure::exhausted);
    EXPECT_EQ(a.allocate(svc(S{.name = "s4", .cluster_ips = "fd00::1"}), kNoNs).failure, Failure::family_unavailable);
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "s5", .ann = {{"svcgate.io/address-pool", "test1"}}}), kNoNs)), "1.2.3.4")
        << "by its name";
}

// ---- MetalLB's controller mutation table: each row a pure function of the Service --------------

namespace {

struct Row {
    const char* what;
    S s;
    std::string want;  // the addresses, "" for none
    Failure failure = Failure::none;
    bool cleared = false;  // the status's addresses given up
};

std::vector<LbPoolConfig> mutation_pools() {
    const std::map<std::string, std::string> team{{"team", "metallb"}};
    return pools({
        {.name = "pool1", .addresses = {"1.2.3.0/31"}},
        {.name = "pool2", .addresses = {"3.4.5.6/32"}, .auto_assign = false},
        {.name = "pool3", .addresses = {"1000::/127"}},
        {.name = "pool5", .addresses = {"1.2.4.0/31", "1001::/127"}},
        {.name = "pool6", .addresses = {"7.8.9.0/31"}, .priority = 10, .namespaces = {"test-ns1"}},
        {.name = "pool7", .addresses = {"10.11.12.0/31"}, .priority = 11, .namespaces = {"test-ns1"}},
        {.name = "pool8", .addresses = {"13.14.15.0/31"}, .priority = 9, .svc_labels = team},
        {.name = "pool9", .addresses = {"16.17.18.0/31"}, .namespaces = {"test-ns2"}},
        {.name = "pool10", .addresses = {"19.20.21.0/31"}, .priority = 8, .svc_labels = team},
        {.name = "pool11",
         .addresses = {"22.23.24.0/31"},
         .priority = 8,
         .namespaces = {"test-ns1"},
         .svc_labels = team},
        {.name = "pool12",
         .addresses = {"25.26.27.0/31"},
         .priority = 5,
         .namespaces = {"test-ns1"},
         .svc_labels = team},
    });
}

const std::map<std::string, std::string> kTeam{{"team", "metallb"}};

std::vector<Row> mutation_rows() {
    return {
        {"namespace: the pinned pool of lowest priority", S{.ns = "test-ns1", .name = "t1"}, "7.8.9.0"},
        {"namespace: a pinned pool without priority before the others", S{.ns = "test-ns2", .name = "t2"},
         "16.17.18.0"},
        {"service selector: priority 8 before 9", S{.name = "t3", .labels = kTeam}, "19.20.21.0"},
        {"namespace and selector: priority 5", S{.ns = "test-ns1", .name = "t4", .labels = kTeam}, "25.26.27.0"},
        {"a pool by name, not the status's",
         S{.name = "t5", .ann = {{"metallb.io/address-pool", "pool2"}}, .status = "1.2.3.0"}, "3.4.5.6", Failure::none,
         true},
        {"a requested address outside the requested pool",
         S{.name = "t6", .ann = {{"metallb.io/loadBalancerIPs", "1.2.3.1"}, {"metallb.io/address-pool", "pool2"}}}, "",
         Failure::pool_not_allowed},
        {"a requested address in no pool", S{.name = "t7", .lb_ip = "1.2.3.4", .status = "1.2.3.1"}, "",
         Failure::not_in_pool, true},
        {"a status outside every pool", S{.name = "t8", .status = "2.3.4.5"}, "1.2.3.0", Failure::none, true},
        {"a status of three addresses", S{.name = "t9", .status = "1.2.3.0,1.2.3.1,1000::"}, "1.2.3.0", Failure::none,
         true},
        {"PreferDualStack from a pool of one family",
         S{.name = "t10",
           .cluster_ips = "10.96.0.1,fd00::1",
           .policy = "PreferDualStack",
           .ann = {{"svcgate.io/address-pool", "pool1"}}},
         "1.2.3.0"},
        {"RequireDualStack with one cluster IP", S{.name = "t11", .policy = "RequireDualStack"}, "",
         Failure::family_unavailable},
        {"dual-stack asking for one address",
         S{.name = "t12", .cluster_ips = "10.96.0.1,fd00::1", .policy = "RequireDualStack", .lb_ip = "1.2.3.1"}, "",
         Failure::bad_request},
        {"two addresses of one family", S{.name = "t13", .ann = {{"metallb.io/loadBalancerIPs", "1.2.3.1,1.2.3.0"}}},
         "", Failure::bad_request},
        {"annotation and loadBalancerIP disagree",
         S{.name = "t14", .lb_ip = "1.2.3.0", .ann = {{"svcgate.io/load-balancer-ips", "1.2.3.1"}}}, "",
         Failure::bad_request},
        {"dual-stack from the first pool with both families",
         S{.name = "t15", .cluster_ips = "fd00::1,10.96.0.1", .policy = "RequireDualStack"}, "1.2.4.0,1001::"},
        {"a status in a pool is taken over", S{.name = "t16", .status = "1.2.4.1"}, "1.2.4.1"},
    };
}

// Each row alone on the key test/test against an allocator where only it asks: its result.
void check_row(Allocator& a, const Row& r) {
    S s = r.s;
    s.name = "test";  // one key for every row, as MetalLB's table runs them
    const Result got = a.allocate(svc(s), kNoNs);
    EXPECT_EQ(ips(got), r.want) << r.what << ": " << got.message;
    EXPECT_EQ(got.failure, r.failure) << r.what << ": " << got.message;
    EXPECT_EQ(!got.cleared.empty(), r.cleared) << r.what << ": " << got.cleared;
}

}  // namespace

TEST(Allocator, MetalLBMutationRowsInOrderAndShuffled) {
    Allocator a;
    a.set_pools(mutation_pools());
    std::vector<Row> rows = mutation_rows();
    for (const Row& r : rows) check_row(a, r);
    std::mt19937 rng(12345);
    for (int round = 0; round < 20; ++round) {
        std::shuffle(rows.begin(), rows.end(), rng);
        for (const Row& r : rows) check_row(a, r);
    }
}

// ---- svcgate's own rows ----------------------------------------------------------------------

TEST(Allocator, FamiliesOnePoolPerService) {
    Allocator a;
    a.set_pools(pools({{.name = "v4", .addresses = {"192.168.100.0/30"}},
                       {.name = "dual", .addresses = {"192.168.100.8-192.168.100.9", "fd00:100::/127"}}}));
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "a"}), kNoNs)), "192.168.100.0");
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "b", .cluster_ips = "fd00::b"}), kNoNs)), "fd00:100::");
    EXPECT_EQ(
        ips(a.allocate(svc(S{.name = "c", .cluster_ips = "fd00::c,10.96.0.3", .policy = "RequireDualStack"}), kNoNs)),
        "192.168.100.8,fd00:100::1")
        << "IPv4 first in status, whatever the primary";
    // No IPv6 left: RequireDualStack waits, PreferDualStack falls back to its primary family.
    EXPECT_EQ(a.allocate(svc(S{.name = "d", .cluster_ips = "10.96.0.4,fd00::d", .policy = "RequireDualStack"}), kNoNs)
                  .failure,
              Failure::exhausted);
    S e{.name = "e", .cluster_ips = "10.96.0.5,fd00::e", .policy = "PreferDualStack"};
    EXPECT_EQ(ips(a.allocate(svc(e), kNoNs)), "192.168.100.1");
    // An IPv6 address frees: the PreferDualStack Service on one family gets the other only from
    // its own pool (v4 has none), so it stays as its status says.
    a.release("default/b");
    e.status = "192.168.100.1";
    EXPECT_EQ(ips(a.allocate(svc(e), kNoNs)), "192.168.100.1");
}

TEST(Allocator, PreferDualStackCompletedFromItsPool) {
    Allocator a;
    a.set_pools(pools({{.name = "dual", .addresses = {"10.0.0.1-10.0.0.2", "fd00::1-fd00::1"}}}));
    ASSERT_EQ(ips(a.allocate(svc(S{.name = "x", .cluster_ips = "fd00::9"}), kNoNs)), "fd00::1");
    S p{.name = "p", .cluster_ips = "10.96.0.1,fd00::2", .policy = "PreferDualStack"};
    EXPECT_EQ(ips(a.allocate(svc(p), kNoNs)), "10.0.0.1");
    a.release("default/x");
    p.status = "10.0.0.1";
    EXPECT_EQ(ips(a.allocate(svc(p), kNoNs)), "10.0.0.1,fd00::1") << "the address it had stays";
}

TEST(Allocator, SharingByKey) {
    Allocator a;
    a.set_pools(pools({{.name = "p", .addresses = {"10.0.0.0/30"}}}));
    const std::map<std::string, std::string> key{{"svcgate.io/allow-shared-ip", "dns"}};
    const Result tcp = a.allocate(svc(S{.name = "dns-tcp", .ann = key, .ports = {"TCP/53"}}), kNoNs);
    const Result udp = a.allocate(svc(S{.name = "dns-udp", .ann = key, .ports = {"UDP/53"}}), kNoNs);
    EXPECT_EQ(ips(tcp), "10.0.0.0");
    EXPECT_EQ(ips(udp), "10.0.0.0") << "TCP and UDP on port 53 share";
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "again", .ann = key, .ports = {"UDP/53"}}), kNoNs)), "10.0.0.1")
        << "the port is taken: the next address";
    // MetalLB's alias, a key of another name, and a Local backend never share with Cluster ones.
    EXPECT_EQ(
        ips(a.allocate(
            svc(S{.name = "alias", .ann = {{"metallb.universe.tf/allow-shared-ip", "dns"}}, .ports = {"TCP/853"}}),
            kNoNs)),
        "10.0.0.0");
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "local", .ann = key, .ports = {"TCP/5353"}, .local = true}), kNoNs)),
              "10.0.0.2");
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "local2", .ann = key, .ports = {"UDP/5353"}, .local = true}), kNoNs)),
              "10.0.0.2")
        << "Local with the same selector";
    EXPECT_EQ(
        ips(a.allocate(
            svc(S{.name = "local3", .ann = key, .ports = {"TCP/1"}, .local = true, .selector = {{"app", "other"}}}),
            kNoNs)),
        "10.0.0.3")
        << "Local with another selector";
    // A request for a shared address: refused with the reason.
    const Result r =
        a.allocate(svc(S{.name = "req",
                         .ann = {{"svcgate.io/allow-shared-ip", "other"}, {"svcgate.io/load-balancer-ips", "10.0.0.0"}},
                         .ports = {"TCP/1"}}),
                   kNoNs);
    EXPECT_EQ(r.failure, Failure::sharing_refused);
    EXPECT_NE(r.message.find("another key"), std::string::npos) << r.message;
}

TEST(Allocator, ExhaustionAndReleaseOldestFirst) {
    Allocator a;
    a.set_pools(pools({{.name = "p", .addresses = {"10.0.0.1-10.0.0.2"}}}));
    EXPECT_TRUE(a.allocate(svc(S{.name = "a"}), kNoNs));
    EXPECT_TRUE(a.allocate(svc(S{.name = "b"}), kNoNs));
    EXPECT_EQ(a.allocate(svc(S{.name = "c"}), kNoNs).failure, Failure::exhausted);
    a.release("default/a");
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "c"}), kNoNs)), "10.0.0.1") << "the freed address";
    EXPECT_EQ(a.services(), 2u);
}

TEST(Allocator, PoolEditMovesOnlyWhatLeftThePool) {
    Allocator a;
    a.set_pools(pools({{.name = "p", .addresses = {"10.0.0.0/29"}}}));
    std::vector<S> ss;
    for (int i = 0; i < 8; ++i) {
        ss.push_back(S{.name = "s" + std::to_string(i)});
        ss.back().status = ips(a.allocate(svc(ss.back()), kNoNs));
    }
    a.set_pools(pools({{.name = "p", .addresses = {"10.0.0.0/30", "10.0.1.0/30"}}}));
    for (S& s : ss) {
        const Result r = a.allocate(svc(s), kNoNs);
        ASSERT_TRUE(r) << r.message;
        const auto old = *parse_ip(s.status);
        if (old.v4().host() < Ip4::from_host(0x0a000004).host())
            EXPECT_EQ(ips(r), s.status) << s.name << " stays";
        else
            EXPECT_EQ(ips(r).substr(0, 7), "10.0.1.") << s.name << " moves";
    }
}

TEST(Allocator, RestartRelearnsInAnyOrder) {
    // Services with their status, as a restarted writer lists them: whatever the order, each keeps
    // its addresses, a MetalLB-written status included; then a new one gets the next free one.
    const auto ps = pools({{.name = "p", .addresses = {"10.0.0.0/29", "fd00::/125"}}});
    std::vector<S> ss{
        S{.name = "a", .status = "10.0.0.3"},
        S{.name = "b", .cluster_ips = "10.96.0.2,fd00::2", .policy = "RequireDualStack", .status = "10.0.0.1,fd00::5"},
        S{.name = "c", .ann = {{"metallb.io/ip-allocated-from-pool", "old"}}, .status = "10.0.0.0"},
        S{.name = "d", .ann = {{"svcgate.io/allow-shared-ip", "k"}}, .status = "10.0.0.5"},
        S{.name = "e", .ann = {{"svcgate.io/allow-shared-ip", "k"}}, .ports = {"UDP/80"}, .status = "10.0.0.5"},
    };
    std::mt19937 rng(7);
    for (int round = 0; round < 10; ++round) {
        std::shuffle(ss.begin(), ss.end(), rng);
        Allocator a;
        a.set_pools(ps);
        for (const S& s : ss) {
            const Result r = a.allocate(svc(s), kNoNs);
            EXPECT_EQ(ips(r), s.status) << s.name;
            EXPECT_TRUE(r.cleared.empty()) << s.name << ": " << r.cleared;
        }
        EXPECT_EQ(ips(a.allocate(svc(S{.name = "new"}), kNoNs)), "10.0.0.2");
    }
}

TEST(Allocator, NamespaceSelectorsAndPriorities) {
    Allocator a;
    a.set_pools(pools({{.name = "web", .addresses = {"10.1.0.0/30"}, .priority = 2, .ns_labels = {{"tier", "web"}}},
                       {.name = "teams", .addresses = {"10.2.0.0/30"}, .priority = 1, .namespaces = {"team-a"}},
                       {.name = "any", .addresses = {"10.3.0.0/30"}}}));
    const NamespaceLabels ns{{"shop", {{"tier", "web"}}}, {"team-a", {{"tier", "web"}}}};
    EXPECT_EQ(ips(a.allocate(svc(S{.ns = "shop", .name = "x"}), ns)), "10.1.0.0");
    EXPECT_EQ(ips(a.allocate(svc(S{.ns = "team-a", .name = "x"}), ns)), "10.2.0.0") << "priority 1 first";
    EXPECT_EQ(ips(a.allocate(svc(S{.ns = "misc", .name = "x"}), ns)), "10.3.0.0") << "no pinned pool: the fallback";
    // The namespace's labels change: its Service no longer fits the pool it is in.
    const NamespaceLabels relabelled{{"shop", {{"tier", "db"}}}};
    const Result moved = a.allocate(svc(S{.ns = "shop", .name = "x", .status = "10.1.0.0"}), relabelled);
    EXPECT_EQ(ips(moved), "10.3.0.1");
    EXPECT_FALSE(moved.cleared.empty());
}

TEST(Allocator, UnknownPoolAndNoPool) {
    Allocator a;
    a.set_pools(pools({{.name = "only-a", .addresses = {"10.1.0.0/30"}, .namespaces = {"a"}}}));
    EXPECT_EQ(a.allocate(svc(S{.name = "x", .ann = {{"svcgate.io/address-pool", "nope"}}}), kNoNs).failure,
              Failure::unknown_pool);
    EXPECT_EQ(a.allocate(svc(S{.name = "x"}), kNoNs).failure, Failure::no_pool);
    EXPECT_EQ(a.allocate(svc(S{.name = "x", .ann = {{"svcgate.io/address-pool", "only-a"}}}), kNoNs).failure,
              Failure::pool_not_allowed);
    a.set_pools({});
    EXPECT_EQ(a.allocate(svc(S{.ns = "a", .name = "x"}), kNoNs).failure, Failure::no_pool) << "pools: []";
}

TEST(Allocator, SvcgateAnnotationsWinOverMetalLBs) {
    Allocator a;
    a.set_pools(pools({{.name = "p1", .addresses = {"10.1.0.0/30"}, .auto_assign = false},
                       {.name = "p2", .addresses = {"10.2.0.0/30"}, .auto_assign = false}}));
    const S s{.name = "x", .ann = {{"svcgate.io/address-pool", "p2"}, {"metallb.io/address-pool", "p1"}}};
    EXPECT_EQ(ips(a.allocate(svc(s), kNoNs)), "10.2.0.0");
    const S r{
        .name = "y",
        .ann = {{"svcgate.io/load-balancer-ips", "10.1.0.2"}, {"metallb.universe.tf/loadBalancerIPs", "10.2.0.2"}}};
    EXPECT_EQ(ips(a.allocate(svc(r), kNoNs)), "10.1.0.2");
    const S agree{.name = "z", .lb_ip = "10.1.0.3", .ann = {{"svcgate.io/load-balancer-ips", "10.1.0.3"}}};
    EXPECT_EQ(ips(a.allocate(svc(agree), kNoNs)), "10.1.0.3") << "both set and agreeing";
}

// ---- the config: kubernetes.load_balancer -----------------------------------------------------

namespace {

std::string config(const std::string& lb) {
    return "dataplane:\n  ports: [{name: a}]\nkubernetes:\n  api: {in_cluster: true}\n  load_balancer:\n" + lb;
}

std::string errors_of(const std::string& yaml) {
    try {
        load_config_string(yaml, "c.yaml");
    } catch (const ConfigError& e) {
        std::string out;
        for (const auto& i : e.issues) out += i.str() + "\n";
        return out;
    }
    return "";
}

}  // namespace

TEST(LoadBalancerConfig, ReadsThePoolsAndDefaults) {
    const Config c = load_config_string(config(R"(    pools:
      - name: public
        addresses: ["192.168.100.0/28", "192.168.100.32-192.168.100.40", "fd00:100::/124", "10.9.9.9"]
        avoid_buggy_ips: true
        allocate_to:
          priority: 10
          namespaces: [team-a]
          namespace_selectors: [{matchLabels: {tier: web}}]
          service_selectors: [{matchExpressions: [{key: app, operator: In, values: [shop]}]}]
      - name: private
        addresses: ["10.100.0.0/24"]
        auto_assign: false
)"));
    const LoadBalancerConfig& lb = c.load_balancer;
    EXPECT_TRUE(lb.enabled);
    EXPECT_EQ(lb.lb_class, "svcgate.io/lb");
    EXPECT_TRUE(lb.default_class);
    EXPECT_EQ(lb.election.lease_duration_s, 15u);
    ASSERT_TRUE(lb.pools);
    ASSERT_EQ(lb.pools->size(), 2u);
    const LbPoolConfig& p = (*lb.pools)[0];
    ASSERT_EQ(p.ranges.size(), 4u);
    EXPECT_EQ(format_ip(p.ranges[0].last), "192.168.100.15");
    EXPECT_EQ(format_ip(p.ranges[2].last), "fd00:100::f");
    EXPECT_EQ(format_ip(p.ranges[3].first), "10.9.9.9");
    EXPECT_TRUE(p.avoid_buggy_ips);
    EXPECT_TRUE(p.allocate_to);
    EXPECT_EQ(p.priority, 10u);
    ASSERT_EQ(p.service_selectors.size(), 1u);
    EXPECT_TRUE(p.service_selectors[0].matches({{"app", "shop"}}));
    EXPECT_FALSE(p.service_selectors[0].matches({{"app", "blog"}}));
    EXPECT_FALSE((*lb.pools)[1].auto_assign);
    EXPECT_FALSE(load_config_string(config("    class: x\n")).load_balancer.pools) << "no pools key: none";
    EXPECT_TRUE(load_config_string(config("    pools: []\n")).load_balancer.pools->empty());
}

TEST(LoadBalancerConfig, RefusesWhatWouldGiveAnAddressTwiceWithItsPosition) {
    const std::string overlap = errors_of(config(R"(    pools:
      - {name: a, addresses: ["10.0.0.0/24"]}
      - {name: b, addresses: ["10.0.1.0/24", "10.0.0.200-10.0.0.210"]}
)"));
    EXPECT_NE(overlap.find("c.yaml:8:46: kubernetes.load_balancer.pools[1]: 10.0.0.200 of pool \"b\" overlaps "
                           "10.0.0.0 of pool \"a\" (at c.yaml:7:31)"),
              std::string::npos)
        << overlap;
    EXPECT_NE(
        errors_of(config("    pools: [{name: a, addresses: [\"10.0.0.0/24\", \"10.0.0.7\"]}]\n")).find("overlaps"),
        std::string::npos)
        << "within one pool too";
    EXPECT_NE(errors_of(config("    pools: [{name: a, addresses: [\"10.0.0.9-10.0.0.1\"]}]\n")).find("is reversed"),
              std::string::npos);
    EXPECT_NE(errors_of(config("    pools: [{name: a, addresses: []}]\n"))
                  .find("c.yaml:6:13: kubernetes.load_balancer."
                        "pools[0]: pool \"a\" is empty"),
              std::string::npos);
    EXPECT_NE(
        errors_of(config("    pools: [{name: a, addresses: [10.0.0.0/31]}, {name: a, addresses: [10.1.0.0/31]}]\n"))
            .find("pool \"a\" is defined twice (first at c.yaml:6:13)"),
        std::string::npos);
    EXPECT_NE(errors_of(config("    pools: [{name: a, addresses: [10.0.0.1/24]}]\n")).find("host bits set"),
              std::string::npos);
    EXPECT_NE(errors_of(config("    pools: [{name: a, addresses: [10.0.0.1-fd00::1]}]\n")).find("mixes IPv4 and IPv6"),
              std::string::npos);
    EXPECT_NE(errors_of(config("    pools: [{name: a, addresses: [10.0.0.0/31], allocate_to: {service_selectors: "
                               "[{matchExpressions: [{key: a, operator: In}]}]}}]\n"))
                  .find("In needs values"),
              std::string::npos);
    EXPECT_NE(errors_of(config("    pools: [{name: a, adresses: [10.0.0.0/31]}]\n")).find("did you mean \"addresses\""),
              std::string::npos);
    EXPECT_NE(errors_of(config("    pools: [{name: 'Public \"x\"', addresses: [10.0.0.0/31]}]\n"))
                  .find("is not a name Kubernetes takes"),
              std::string::npos);
    EXPECT_NE(errors_of(config("    election: {namespace: Kube_System}\n")).find("must be names Kubernetes takes"),
              std::string::npos);
    EXPECT_NE(errors_of(config("    election: {lease_duration_s: 10, renew_deadline_s: 10}\n"))
                  .find("renew_deadline_s must be shorter"),
              std::string::npos);
    EXPECT_NE(errors_of("kubernetes:\n  load_balancer: {pools: []}\n").find("needs kubernetes.api"), std::string::npos);
}

TEST(LoadBalancerConfig, LabelSelectorsAsKubernetes) {
    using Op = LabelSelector::Op;
    const LabelSelector s{
        .match_labels = {{"tier", "web"}},
        .match_expressions = {
            {"env", Op::not_in, {"dev"}}, {"team", Op::exists, {}}, {"legacy", Op::does_not_exist, {}}}};
    EXPECT_TRUE(s.matches({{"tier", "web"}, {"team", "a"}}));
    EXPECT_TRUE(s.matches({{"tier", "web"}, {"team", "a"}, {"env", "prod"}}));
    EXPECT_FALSE(s.matches({{"tier", "web"}, {"team", "a"}, {"env", "dev"}}));
    EXPECT_FALSE(s.matches({{"tier", "web"}}));
    EXPECT_FALSE(s.matches({{"tier", "web"}, {"team", "a"}, {"legacy", ""}}));
    EXPECT_TRUE(LabelSelector{}.matches({})) << "an empty selector matches everything";
}

// The review's cases: MetalLB's backend key for Local without a selector is Cluster's; a namespace
// not seen matches no namespace selector (NotIn would match its missing labels); a Service that
// requests its addresses is never completed with another family.
TEST(Allocator, BackendKeysUnseenNamespacesAndRequestsAsAsked) {
    Allocator a;
    a.set_pools(pools({{.name = "p", .addresses = {"10.0.0.0/30", "fd00::/126"}}}));
    const std::map<std::string, std::string> key{{"svcgate.io/allow-shared-ip", "k"}};
    EXPECT_EQ(ips(a.allocate(svc(S{.name = "cluster", .ann = key, .ports = {"TCP/1"}}), kNoNs)), "10.0.0.0");
    EXPECT_EQ(
        ips(a.allocate(svc(S{.name = "local", .ann = key, .ports = {"TCP/2"}, .local = true, .selector = {}}), kNoNs)),
        "10.0.0.0")
        << "Local without a selector shares with Cluster, as MetalLB's key is \"\" for both";

    Allocator b;
    LbPoolConfig notin = pool({.name = "not-dev", .addresses = {"10.1.0.0/30"}});
    notin.allocate_to = true;
    notin.namespace_selectors.push_back(
        LabelSelector{.match_expressions = {{"env", LabelSelector::Op::not_in, {"dev"}}}});
    b.set_pools({notin});
    EXPECT_EQ(b.allocate(svc(S{.ns = "unseen", .name = "x"}), kNoNs).failure, Failure::no_pool);
    EXPECT_EQ(ips(b.allocate(svc(S{.ns = "prod", .name = "x"}), NamespaceLabels{{"prod", {{"env", "prod"}}}})),
              "10.1.0.0");

    // A PreferDualStack Service that got IPv4 alone, then pinned to it by the annotation: kept
    // as it is, pass after pass, never completed (the request is what it gets).
    S pinned{.name = "pinned",
             .cluster_ips = "10.96.0.9,fd00::9",
             .policy = "PreferDualStack",
             .ann = {{"svcgate.io/load-balancer-ips", "10.0.0.1"}},
             .status = "10.0.0.1"};
    EXPECT_EQ(ips(a.allocate(svc(pinned), kNoNs)), "10.0.0.1");
    EXPECT_EQ(ips(a.allocate(svc(pinned), kNoNs)), "10.0.0.1");
    pinned.status.clear();
    EXPECT_EQ(a.allocate(svc(pinned), kNoNs).failure, Failure::bad_request)
        << "asked afresh, one address for two families is refused, as MetalLB does";
}
