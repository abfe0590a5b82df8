// Kubernetes objects as kubectl prints them, read with kube-proxy's semantics; errors positioned
// in the manifest.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "control/config/kube_objects.h"
#include "control/config/yaml_config.h"
#include "control/snapshot/snapshot_builder.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::ctl;

namespace {

Config load(const std::string& yaml, std::vector<ConfigIssue>& errors) {
    Config c;
    c.file = "m.yaml";
    load_kube_string(yaml, "m.yaml", c, errors);
    return c;
}

const ServiceConfig* find(const Config& c, const std::string& name) {
    for (const auto& s : c.services)
        if (s.full_name() == name) return &s;
    return nullptr;
}

// A Service with two ports and two EndpointSlices in a kind: List, the way kubectl prints it.
constexpr const char* kList = R"(apiVersion: v1
items:
- apiVersion: v1
  kind: Service
  metadata:
    annotations:
      svcgate.io/scheduler: maglev
    name: web
    namespace: shop
    resourceVersion: "123"
    uid: 0c5b
  spec:
    clusterIP: 10.96.1.1
    clusterIPs: [10.96.1.1]
    externalIPs: [192.0.2.10, 2001:db8::10]
    externalTrafficPolicy: Local
    ipFamilies: [IPv4]
    ports:
    - name: http
      nodePort: 30080
      port: 80
      protocol: TCP
      targetPort: web
    - name: dns
      port: 53
      protocol: UDP
      targetPort: 5353
    selector: {app: web}
    sessionAffinity: ClientIP
    sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}
    type: LoadBalancer
  status:
    loadBalancer:
      ingress:
      - ip: 198.51.100.7
      - hostname: lb.example.com
      - ip: 198.51.100.8
        ipMode: Proxy
- addressType: IPv4
  apiVersion: discovery.k8s.io/v1
  endpoints:
  - addresses: [10.244.1.5]
    conditions: {ready: true, serving: true, terminating: false}
    nodeName: node-a
  - addresses: [10.244.2.5]
    conditions: {ready: false, serving: true, terminating: true}
    nodeName: node-b
  kind: EndpointSlice
  metadata:
    labels: {kubernetes.io/service-name: web}
    name: web-abc
    namespace: shop
  ports:
  - {name: http, port: 8080, protocol: TCP}
  - {name: dns, port: 5353, protocol: UDP}
- addressType: IPv4
  apiVersion: discovery.k8s.io/v1
  endpoints:
  - addresses: [10.244.3.5]
    conditions: {}
  kind: EndpointSlice
  metadata:
    labels: {kubernetes.io/service-name: web}
    name: web-def
    namespace: shop
  ports:
  - {name: http, port: 8080, protocol: TCP}
- addressType: IPv6
  apiVersion: discovery.k8s.io/v1
  endpoints: [{addresses: ['fd00::5']}]
  kind: EndpointSlice
  metadata: {labels: {kubernetes.io/service-name: web}, name: web-v6, namespace: shop}
  ports: [{name: http, port: 8080}]
- apiVersion: v1
  kind: Service
  metadata: {name: db, namespace: shop}
  spec: {clusterIP: None, ports: [{port: 5432}]}
- apiVersion: v1
  kind: Service
  metadata: {name: ext, namespace: shop}
  spec: {type: ExternalName, externalName: db.example.com}
- apiVersion: v1
  kind: Service
  metadata: {name: v6only, namespace: shop}
  spec: {clusterIP: 'fd00::1', ipFamilies: [IPv6], ports: [{port: 80}]}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cm, namespace: shop}
kind: List
metadata: {resourceVersion: ""}
)";

}  // namespace

TEST(KubeObjects, ServiceAndSlicesAsKubeProxyReadsThem) {
    std::vector<ConfigIssue> errors;
    Config c = load(kList, errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    const ServiceConfig* web = find(c, "shop/web");
    ASSERT_NE(web, nullptr);
    EXPECT_EQ(web->type, ServiceType::load_balancer);
    ASSERT_EQ(web->cluster_ips.size(), 1u);
    EXPECT_EQ(web->cluster_ips[0], *parse_ip("10.96.1.1"));
    // Read, both families; the builder serves each family the Service has a ClusterIP of.
    ASSERT_EQ(web->external_ips.size(), 2u);
    EXPECT_EQ(web->external_ips[1], *parse_ip("2001:db8::10"));
    ASSERT_EQ(web->lb_ips.size(), 1u) << "hostname-only and ipMode Proxy ingresses get no rule";
    EXPECT_EQ(web->lb_ips[0], *parse_ip("198.51.100.7"));
    EXPECT_EQ(web->affinity_timeout, 600u);
    EXPECT_TRUE(web->external_local);
    EXPECT_FALSE(web->internal_local);
    EXPECT_EQ(web->scheduler, dp::Scheduler::maglev);
    ASSERT_EQ(web->ports.size(), 2u);
    EXPECT_EQ(web->ports[0].node_port, 30080);
    EXPECT_EQ(web->ports[1].proto, dp::Proto::udp);
    ASSERT_EQ(web->groups.size(), 3u) << "both IPv4 slices and the IPv6 one";
    ASSERT_EQ(web->groups[2].endpoints.size(), 1u);
    EXPECT_EQ(web->groups[2].endpoints[0].ip, *parse_ip("fd00::5"));
    const ServiceConfig* v6only = find(c, "shop/v6only");
    ASSERT_NE(v6only, nullptr) << "an IPv6-only Service is served";
    ASSERT_EQ(v6only->cluster_ips.size(), 1u);
    EXPECT_EQ(v6only->cluster_ips[0], *parse_ip("fd00::1"));
    const EndpointConfig& term = web->groups[0].endpoints[1];
    EXPECT_FALSE(term.ready);
    EXPECT_TRUE(term.serving);
    EXPECT_TRUE(term.terminating);
    const EndpointConfig& bare = web->groups[1].endpoints[0];
    EXPECT_TRUE(bare.ready) << "conditions: {} means ready";
    EXPECT_TRUE(bare.serving);
    EXPECT_FALSE(bare.terminating);

    EXPECT_EQ(c.kube.services, 4u);
    EXPECT_EQ(c.kube.slices, 3u);
    EXPECT_EQ(c.kube.headless, 1u);
    EXPECT_EQ(c.kube.external_name, 1u);
    EXPECT_EQ(c.kube.ignored_objects, 1u);
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_NE(c.warnings[0].message.find("ConfigMap"), std::string::npos);
    EXPECT_EQ(c.warnings[0].mark.line, 86);
}

TEST(KubeObjects, SnapshotMatchesSlicePortsByNameAndProtocol) {
    std::vector<ConfigIssue> errors;
    Config c = load(kList, errors);
    c.cluster.node_name = "node-a";
    test::ensure_eal();
    auto s = build_snapshot(c);
    ASSERT_EQ(s->services.size(), 3u)
        << "web's two IPv4 ports and v6only's IPv6 one; headless and ExternalName get none";
    EXPECT_EQ(s->services[2].family, dp::Family::v6);
    EXPECT_EQ(s->info(2).name, "shop/v6only:");
    const dp::ServicePort& http = s->services[0];
    const dp::ServicePort& dns = s->services[1];
    EXPECT_EQ(s->info(0).name, "shop/web:http");
    ASSERT_EQ(http.ep_count, 3u) << "the IPv6 slice's endpoint serves no IPv4 port";
    for (uint32_t i = 0; i < http.ep_count; ++i)
        EXPECT_EQ(rte_be_to_cpu_16(s->endpoints[http.ep_first + i].port), 8080);
    ASSERT_EQ(dns.ep_count, 2u) << "only web-abc has the dns port";
    EXPECT_EQ(rte_be_to_cpu_16(s->endpoints[dns.ep_first].port), 5353);
    EXPECT_EQ(s->sets[http.cluster_set].count, 2u) << "ready ones; the terminating one is fallback only";
    EXPECT_EQ(s->sets[http.external_set].count, 1u) << "ETP Local: node-a's endpoint";
    EXPECT_EQ(s->endpoints[http.ep_first].cond & dp::kLocal, dp::kLocal);
}

TEST(KubeObjects, MultiDocumentStreamWorksLikeAList) {
    std::vector<ConfigIssue> errors;
    Config c = load(R"(apiVersion: v1
kind: Service
metadata: {name: a}
spec: {clusterIP: 10.96.0.5, ports: [{name: '', port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata: {name: a-1, labels: {kubernetes.io/service-name: a}}
endpoints: [{addresses: [10.1.1.1]}]
ports: [{name: '', port: 8080}]
---
)",
                    errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    const ServiceConfig* a = find(c, "default/a");
    ASSERT_NE(a, nullptr) << "no namespace = default";
    ASSERT_EQ(a->groups.size(), 1u);
    EXPECT_EQ(a->groups[0].ports[0].proto, dp::Proto::tcp) << "protocol defaults to TCP";
}

// kube-proxy keys endpoints by ip:port: one address in two slices (as during a slice split) is one
// endpoint, with the conditions of the first slice that lists it.
TEST(KubeObjects, AnEndpointInTwoSlicesCountsOnce) {
    std::vector<ConfigIssue> errors;
    Config c = load(R"(apiVersion: v1
kind: Service
metadata: {name: a}
spec: {clusterIP: 10.96.0.5, ports: [{name: '', port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata: {name: a-1, labels: {kubernetes.io/service-name: a}}
endpoints: [{addresses: [10.1.1.1]}, {addresses: [10.1.1.2], conditions: {ready: false}}]
ports: [{name: '', port: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata: {name: a-2, labels: {kubernetes.io/service-name: a}}
endpoints: [{addresses: [10.1.1.2]}, {addresses: [10.1.1.3]}, {addresses: [10.1.1.1]}]
ports: [{name: '', port: 8080}]
)",
                    errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    test::ensure_eal();
    auto s = build_snapshot(c);
    ASSERT_EQ(s->services.size(), 1u);
    const dp::ServicePort& sp = s->services[0];
    ASSERT_EQ(sp.ep_count, 3u);
    EXPECT_EQ(s->endpoints[sp.ep_first].ip, *parse_ip("10.1.1.1"));
    EXPECT_EQ(s->endpoints[sp.ep_first + 1].ip, *parse_ip("10.1.1.2"));
    // kube-proxy 1.36 (kubernetes#135593): of the two 10.1.1.2, the ready one (second slice) wins.
    EXPECT_NE(s->endpoints[sp.ep_first + 1].cond & dp::kReady, 0) << "the serving copy, whatever the slice order";
    EXPECT_EQ(s->endpoints[sp.ep_first + 2].ip, *parse_ip("10.1.1.3"));
    EXPECT_EQ(s->sets[sp.cluster_set].count, 3u);
}

// The same with the copies' order reversed: the not-ready one comes second and still loses; of two
// copies that serve alike, the first one stays.
TEST(KubeObjects, AServingDuplicateWinsInAnyOrder) {
    std::vector<ConfigIssue> errors;
    Config c = load(R"(apiVersion: v1
kind: Service
metadata: {name: a}
spec: {clusterIP: 10.96.0.5, ports: [{name: '', port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata: {name: a-1, labels: {kubernetes.io/service-name: a}}
endpoints: [{addresses: [10.1.1.2], nodeName: new}, {addresses: [10.1.1.4], nodeName: first}]
ports: [{name: '', port: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
addressType: IPv4
metadata: {name: a-2, labels: {kubernetes.io/service-name: a}}
endpoints: [{addresses: [10.1.1.2], conditions: {ready: false, serving: false, terminating: true}},
            {addresses: [10.1.1.4], nodeName: second}]
ports: [{name: '', port: 8080}]
)",
                    errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    test::ensure_eal();
    auto s = build_snapshot(c);
    const dp::ServicePort& sp = s->services[0];
    ASSERT_EQ(sp.ep_count, 2u);
    EXPECT_NE(s->endpoints[sp.ep_first].cond & dp::kReady, 0);
    EXPECT_EQ(s->catalogue.endpoints[sp.ep_first].node, "new");
    EXPECT_EQ(s->catalogue.endpoints[sp.ep_first + 1].node, "first");
}

// One object never fails the build: two Services claiming one externalIP:port, the older keeps
// it and the newer's entry is left out (listed); an object's nodePort outside the range is served.
TEST(KubeObjects, AConflictLeavesOutOnlyTheNewerEntry) {
    std::vector<ConfigIssue> errors;
    Config c = load(R"(apiVersion: v1
kind: Service
metadata: {name: newer, namespace: b, creationTimestamp: '2026-01-01T00:00:00Z'}
spec: {clusterIP: 10.96.0.6, externalIPs: [192.0.2.1], ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: older, namespace: a, creationTimestamp: '2025-01-01T00:00:00Z'}
spec: {clusterIP: 10.96.0.5, externalIPs: [192.0.2.1], ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: np, namespace: c}
spec: {type: NodePort, clusterIP: 10.96.0.7, ports: [{port: 80, nodePort: 80}]}
)",
                    errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    test::ensure_eal();
    auto s = build_snapshot(c);
    ASSERT_EQ(s->services.size(), 3u);
    const auto owner = s->vips.find(dp::VipTable::key(parse_ip("192.0.2.1")->v4(), rte_cpu_to_be_16(80), 6));
    ASSERT_TRUE(owner.hit());
    EXPECT_EQ(s->info(owner.service()).name, "a/older:");
    ASSERT_EQ(s->catalogue.object_issues.size(), 2u);
    EXPECT_EQ(s->catalogue.object_issues[0].object, "Service b/newer");
    EXPECT_EQ(s->catalogue.object_issues[0].reason, dp::IssueReason::vip_conflict);
    EXPECT_TRUE(s->catalogue.object_issues[0].left_out);
    EXPECT_EQ(s->catalogue.object_issues[1].object, "Service c/np");
    EXPECT_EQ(s->catalogue.object_issues[1].reason, dp::IssueReason::nodeport_out_of_range);
    EXPECT_FALSE(s->catalogue.object_issues[1].left_out);
    EXPECT_TRUE(s->vips.find(dp::VipTable::key(parse_ip("10.96.0.6")->v4(), rte_cpu_to_be_16(80), 6)).hit())
        << "the newer Service's ClusterIP is still served";
    // The config file's own Services still refuse a conflict between them (yaml_config_test).
}

// svcgate.io/client-ip: a Service's own choice over cluster.client_ip; absent, the gateway's.
TEST(KubeObjects, TheClientIpAnnotationIsTheServicesOwnChoice) {
    auto service = [](const char* name, const char* annotation) {
        return fmt::format(R"(- apiVersion: v1
  kind: Service
  metadata:
    name: {}
    namespace: n{}
  spec:
    clusterIP: 10.96.0.{}
    ports: [{{port: 80}}]
    type: NodePort
)",
                           name, annotation,
                           name[0] == 'p'       ? 1
                               : name[0] == 'm' ? 2
                                                : 3);
    };
    std::vector<ConfigIssue> errors;
    Config c = load("kind: List\napiVersion: v1\nitems:\n" +
                        service("preserved", "\n    annotations: {svcgate.io/client-ip: preserve}") +
                        service("masqueraded", "\n    annotations: {svcgate.io/client-ip: masquerade}") +
                        service("unsaid", ""),
                    errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    EXPECT_EQ(find(c, "n/preserved")->client_ip, ClientIp::preserve);
    EXPECT_EQ(find(c, "n/masqueraded")->client_ip, ClientIp::masquerade);
    EXPECT_FALSE(find(c, "n/unsaid")->client_ip.has_value()) << "cluster.client_ip decides";
    // Anything else is the object's error, positioned.
    load("kind: List\napiVersion: v1\nitems:\n" +
             service("preserved", "\n    annotations: {svcgate.io/client-ip: keep}"),
         errors);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].str().find("svcgate.io/client-ip: \"keep\" is not masquerade or preserve"), std::string::npos)
        << errors[0].str();
}

TEST(KubeObjects, ErrorsNameTheManifestLineAndColumn) {
    std::vector<ConfigIssue> errors;
    load(R"(kind: List
apiVersion: v1
items:
- apiVersion: v1
  kind: Service
  metadata: {name: a, namespace: n}
  spec:
    clusterIP: 10.96.0.300
    ports: [{port: 99999, protocol: ICMP}]
    type: Balancer
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  addressType: IPv4
  metadata: {name: lost, namespace: n, labels: {kubernetes.io/service-name: gone}}
  endpoints: [{addresses: [10.1.1.1], conditions: {ready: maybe}}]
)",
         errors);
    // Every error, not only the first: each one positioned in the manifest.
    ASSERT_EQ(errors.size(), 6u);
    EXPECT_EQ(
        errors[0].str(),
        "m.yaml:10:11: items[0].spec.type: \"Balancer\" is not ClusterIP, NodePort, LoadBalancer or ExternalName");
    EXPECT_EQ(errors[1].str(), "m.yaml:8:16: items[0].spec.clusterIP: \"10.96.0.300\" is not an IPv4 or IPv6 address");
    EXPECT_EQ(errors[2].str(), "m.yaml:9:37: items[0].spec.ports[0].protocol: \"ICMP\" is not TCP, UDP or SCTP");
    EXPECT_EQ(errors[3].str(), "m.yaml:9:20: items[0].spec.ports[0].port: 99999 is out of range 1-65535");
    EXPECT_EQ(errors[4].str(), "m.yaml:15:59: items[1].endpoints[0].conditions.ready: expected true or false");
    EXPECT_EQ(errors[5].mark.line, 11);
    EXPECT_EQ(errors[5].mark.column, 3);
    EXPECT_NE(errors[5].message.find("EndpointSlice n/lost names Service n/gone, which is not in the config"),
              std::string::npos);
}

TEST(KubeObjects, BrokenYamlAndNonObjectsAreErrorsNotCrashes) {
    const char* bad[] = {
        "items: [",
        "- 1\n- 2\n",
        "kind: List\nitems: 7\n",
        "kind: Service\napiVersion: v1\n",
        "kind: Service\napiVersion: v1\nmetadata: {name: x}\nspec: [1]\n",
        ("kind: EndpointSlice\napiVersion: discovery.k8s.io/v1\naddressType: IPv4\n"
         "metadata: {name: s, labels: {kubernetes.io/service-name: x}}\nendpoints: [{addresses: []}]\n"),
        "\x01\x02"};
    for (const char* y : bad) {
        std::vector<ConfigIssue> errors;
        load(y, errors);
        EXPECT_FALSE(errors.empty()) << "accepted: " << y;
        for (const auto& e : errors) EXPECT_EQ(e.mark.file, "m.yaml");
    }
}

TEST(KubeObjects, ConfigLoadsManifestsRelativeToItself) {
    const std::string dir = testing::TempDir();
    {
        std::ofstream m(dir + "/objs.yaml");
        m << "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.96.0.5, ports: [{port: 80}]}\n";
        std::ofstream c(dir + "/gw.yaml");
        c << "services:\n  - {name: default/a, cluster_ip: 10.96.0.6, ports: [{port: 81}]}\n"
             "kubernetes:\n  manifests: [objs.yaml, missing.yaml]\n";
    }
    try {
        load_config_file(dir + "/gw.yaml");
        FAIL() << "missing manifest and the duplicate Service must be errors";
    } catch (const ConfigError& e) {
        ASSERT_EQ(e.issues.size(), 2u) << e.what();
        EXPECT_EQ(e.issues[0].mark.line, 4);
        EXPECT_NE(e.issues[0].message.find("cannot open"), std::string::npos);
        EXPECT_NE(e.issues[1].message.find("defined twice"), std::string::npos);
    }
    std::remove((dir + "/objs.yaml").c_str());
    std::remove((dir + "/gw.yaml").c_str());
}

// The API server's own LIST answers (curl .../api/v1/services > file): a typed list whose items
// carry no kind or apiVersion of their own; the list's name them.
TEST(KubeObjects, TypedListsNameTheirItemsKind) {
    std::vector<ConfigIssue> errors;
    Config c = load(R"(apiVersion: v1
kind: ServiceList
items:
- metadata: {name: a, namespace: web}
  spec: {clusterIP: 10.96.0.5, ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSliceList
items:
- metadata: {name: a-1, namespace: web, labels: {kubernetes.io/service-name: a}}
  addressType: IPv4
  endpoints: [{addresses: [10.1.1.1]}]
  ports: [{name: http, port: 8080}]
)",
                    errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    const ServiceConfig* a = find(c, "web/a");
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->groups.size(), 1u) << "the slice read as an EndpointSlice";
    EXPECT_EQ(c.kube.services, 1u);
    EXPECT_EQ(c.kube.slices, 1u);
}

namespace {
// A manifest NAME.yaml of `yaml` and a config gw-NAME.yaml that loads it, in the test's temporary
// folder; both removed when it goes.
struct ManifestFiles {
    std::string dir = testing::TempDir(), manifest, config;
    ManifestFiles(const std::string& name, const std::string& yaml)
        : manifest(dir + "/" + name + ".yaml"), config(dir + "/gw-" + name + ".yaml") {
        std::ofstream(manifest) << yaml;
        std::ofstream(config) << "kubernetes:\n  manifests: [" << name << ".yaml]\n";
    }
    ~ManifestFiles() {
        std::remove(manifest.c_str());
        std::remove(config.c_str());
    }
};
}  // namespace

// A document that is no Kubernetes object (no kind, a kind that is no word, no map at all, a list
// whose items are no list) is one object that cannot be read: an error under --check, left out at
// start and reload like any other.
TEST(KubeObjects, ADocumentWithoutAKindIsLeftOutAtReload) {
    const ManifestFiles f("objs3",
                          "metadata: {name: nokind}\n"
                          "---\n42\n"
                          "---\nkind: {a: 1}\n"
                          "---\nkind: List\nitems: 5\n"
                          "---\napiVersion: v1\nkind: Service\nmetadata: {name: good}\n"
                          "spec: {clusterIP: 10.96.0.5, ports: [{port: 80}]}\n");
    EXPECT_THROW(load_config_file(f.config), ConfigError) << "--check refuses it";
    const Config c = load_config_file(f.config, ObjectErrors::leave_out);
    ASSERT_EQ(c.services.size(), 1u) << "the other object is served";
    EXPECT_EQ(c.services[0].full_name(), "default/good");
    ASSERT_EQ(c.left_out.size(), 4u);
    EXPECT_NE(c.left_out[0].message.find("no kind"), std::string::npos) << c.left_out[0].str();
}

// A manifest's object that cannot be read: --check refuses the file (every error, positioned);
// start and reload leave out that object alone (and a slice of a Service not there), listed.
TEST(KubeObjects, ABrokenManifestObjectIsLeftOutAtReload) {
    const ManifestFiles f(
        "objs2",
        "apiVersion: v1\nkind: Service\nmetadata: {name: good}\nspec: {clusterIP: 10.96.0.5, ports: [{port: 80}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {clusterIP: 10.96.0.300, ports: [{port: "
        "80}]}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\naddressType: IPv4\n"
        "metadata: {name: bad-1, labels: {kubernetes.io/service-name: bad}}\n"
        "endpoints: [{addresses: [10.1.1.1]}]\nports: [{port: 8080}]\n");
    try {
        load_config_file(f.config);
        FAIL() << "--check's reading takes a broken object";
    } catch (const ConfigError& e) {
        ASSERT_EQ(e.issues.size(), 1u) << e.what();
        EXPECT_NE(e.issues[0].message.find("10.96.0.300"), std::string::npos) << e.issues[0].str();
        EXPECT_EQ(e.issues[0].mark.line, 9);
    }
    const Config c = load_config_file(f.config, ObjectErrors::leave_out);
    ASSERT_EQ(c.services.size(), 1u);
    EXPECT_EQ(c.services[0].full_name(), "default/good");
    ASSERT_EQ(c.left_out.size(), 2u);
    EXPECT_NE(c.left_out[0].str().find("objs2.yaml:9:19:"), std::string::npos) << c.left_out[0].str();
    EXPECT_NE(c.left_out[1].message.find("names Service default/bad"), std::string::npos) << c.left_out[1].str();
    EXPECT_EQ(c.kube.services, 1u);
    test::ensure_eal();
    const auto s = build_snapshot(c);
    ASSERT_EQ(s->catalogue.object_issues.size(), 2u);
    EXPECT_EQ(s->catalogue.object_issues[0].reason, dp::IssueReason::invalid_object);
}

namespace {

// A Service with one slice whose endpoints carry `hints` (one entry per endpoint: zone hints,
// node hints, ready), the way the EndpointSlice controller writes them.
struct HintedEndpoint {
    const char* ip;
    const char* zone_hint;  // "" = none
    const char* node_hint;  // "" = none
    bool ready = true;
};
std::string hinted(const std::vector<HintedEndpoint>& eps) {
    std::string y = R"(apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: s, namespace: ns}
  spec: {clusterIP: 10.96.0.9, trafficDistribution: PreferSameZone, ports: [{name: '', port: 80}]}
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  addressType: IPv4
  metadata: {name: s-1, namespace: ns, labels: {kubernetes.io/service-name: s}}
  ports: [{name: '', port: 80}]
  endpoints:
)";
    for (const HintedEndpoint& e : eps) {
        y += fmt::format("  - {{addresses: [{}], zone: z, conditions: {{ready: {}}}", e.ip, e.ready);
        std::string hints;
        if (*e.zone_hint) hints += fmt::format("forZones: [{{name: {}}}]", e.zone_hint);
        if (*e.node_hint) hints += fmt::format("{}forNodes: [{{name: {}}}]", hints.empty() ? "" : ", ", e.node_hint);
        if (!hints.empty()) y += ", hints: {" + hints + "}";
        y += "}\n";
    }
    return y;
}

// The addresses of service port 0's Cluster set, sorted, and its topology rule.
std::pair<std::vector<std::string>, dp::TopologyMode> cluster_set(const std::string& yaml, const char* zone,
                                                                  const char* node = "gw") {
    std::vector<ConfigIssue> errors;
    Config c = load(yaml, errors);
    EXPECT_TRUE(errors.empty()) << errors[0].str();
    c.cluster.node_name = node;
    if (*zone) c.cluster.node_labels["topology.kubernetes.io/zone"] = zone;
    test::ensure_eal();
    auto s = build_snapshot(c);
    const dp::ServicePort& sp = s->services[0];
    std::vector<std::string> out;
    const dp::EndpointSet& set = s->sets[sp.cluster_set];
    for (uint32_t k = set.first; k < set.first + set.count; ++k)
        out.push_back(format_ip(s->endpoints[s->members[k]].ip));
    std::sort(out.begin(), out.end());
    return {out, s->info(0).topology};
}

using Ips = std::vector<std::string>;

}  // namespace

TEST(KubeObjects, HintsZoneAndTrafficDistributionAreRead) {
    std::vector<ConfigIssue> errors;
    const Config c = load(hinted({{"10.0.0.1", "zone-a", "node-1"}, {"10.0.0.2", "", ""}}), errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    const ServiceConfig* s = find(c, "ns/s");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->traffic_distribution, "PreferSameZone");
    const auto& eps = s->groups.at(0).endpoints;
    ASSERT_EQ(eps.size(), 2u);
    EXPECT_EQ(eps[0].zone, "z");
    EXPECT_EQ(eps[0].zone_hints, std::vector<std::string>{"zone-a"});
    EXPECT_EQ(eps[0].node_hints, std::vector<std::string>{"node-1"});
    EXPECT_TRUE(eps[1].zone_hints.empty());
    EXPECT_TRUE(eps[1].node_hints.empty());
}

// kube-proxy's CategorizeEndpoints (pkg/proxy/topology.go) on Cluster traffic.
TEST(KubeObjects, TopologyHintsChooseAsKubeProxy) {
    using M = dp::TopologyMode;
    const std::string zones =
        hinted({{"10.0.0.1", "zone-a", ""}, {"10.0.0.2", "zone-b", ""}, {"10.0.0.3", "zone-a", ""}});
    EXPECT_EQ(cluster_set(zones, "zone-a"), std::pair(Ips{"10.0.0.1", "10.0.0.3"}, M::zone));
    EXPECT_EQ(cluster_set(zones, "zone-b"), std::pair(Ips{"10.0.0.2"}, M::zone));
    EXPECT_EQ(cluster_set(zones, "zone-c"), std::pair(Ips{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, M::all))
        << "no endpoint for this zone: all";
    EXPECT_EQ(cluster_set(zones, ""), std::pair(Ips{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, M::all)) << "no zone label";
    // One ready endpoint without hints: all; an unready one does not count.
    EXPECT_EQ(cluster_set(hinted({{"10.0.0.1", "zone-a", ""}, {"10.0.0.2", "", ""}}), "zone-a").second, M::all);
    EXPECT_EQ(cluster_set(hinted({{"10.0.0.1", "zone-a", ""}, {"10.0.0.2", "", "", false}}), "zone-a"),
              std::pair(Ips{"10.0.0.1"}, M::zone));
    // Only unready endpoints in the zone: the others, whose hints name other zones: all ready ones.
    EXPECT_EQ(cluster_set(hinted({{"10.0.0.1", "zone-a", "", false}, {"10.0.0.2", "zone-b", ""}}), "zone-a"),
              std::pair(Ips{"10.0.0.2"}, M::all));
    // Node hints first, then zone hints, then all.
    const std::string nodes =
        hinted({{"10.0.0.1", "zone-a", "gw"}, {"10.0.0.2", "zone-a", "other"}, {"10.0.0.3", "zone-b", "third"}});
    EXPECT_EQ(cluster_set(nodes, "zone-a"), std::pair(Ips{"10.0.0.1"}, M::node));
    EXPECT_EQ(cluster_set(nodes, "zone-a", "elsewhere"), std::pair(Ips{"10.0.0.1", "10.0.0.2"}, M::zone));
    // The node's hinted endpoint goes not ready: the node rule has nothing for it, zone hints next.
    EXPECT_EQ(cluster_set(hinted({{"10.0.0.1", "zone-a", "gw", false},
                                  {"10.0.0.2", "zone-a", "other"},
                                  {"10.0.0.3", "zone-b", "third"}}),
                          "zone-a"),
              std::pair(Ips{"10.0.0.2"}, M::zone));
}

// service.kubernetes.io/service-proxy-name (KEP-2447) and the headless label, for files.
TEST(KubeObjects, ServiceProxyNameLeavesOtherProxiesServices) {
    const std::string yaml = R"(apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Service, metadata: {name: mine, labels: {service.kubernetes.io/service-proxy-name: gw}},
   spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}}
- {apiVersion: v1, kind: Service, metadata: {name: theirs, labels: {service.kubernetes.io/service-proxy-name: other}},
   spec: {clusterIP: 10.96.0.2, ports: [{port: 80}]}}
- {apiVersion: v1, kind: Service, metadata: {name: plain}, spec: {clusterIP: 10.96.0.3, ports: [{port: 80}]}}
- {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, addressType: IPv4,
   metadata: {name: theirs-1, labels: {kubernetes.io/service-name: theirs}}, endpoints: [{addresses: [10.0.0.2]}],
   ports: [{name: '', port: 80}]}
- {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, addressType: IPv4,
   metadata: {name: gone-1, labels: {kubernetes.io/service-name: gone, service.kubernetes.io/headless: ''}},
   endpoints: [{addresses: [10.0.0.9]}], ports: [{name: '', port: 80}]}
)";
    auto served = [&](const char* name, bool only) {
        Config c;
        c.cluster.proxy_name = name;
        c.cluster.proxy_name_only = only;
        std::vector<ConfigIssue> errors;
        load_kube_string(yaml, "m.yaml", c, errors);
        EXPECT_TRUE(errors.empty()) << "another proxy's slice, a headless slice: no error: " << errors[0].str();
        std::vector<std::string> names;
        for (const ServiceConfig& s : c.services) names.push_back(s.name);
        EXPECT_EQ(c.kube.other_proxy, 3u - names.size());
        return names;
    };
    EXPECT_EQ(served("", false), (std::vector<std::string>{"plain"})) << "kube-proxy's own rule";
    EXPECT_EQ(served("gw", false), (std::vector<std::string>{"mine", "plain"}));
    EXPECT_EQ(served("gw", true), (std::vector<std::string>{"mine"}));
    EXPECT_THROW(load_config_string("cluster: {proxy_name_only: true}\n"), ConfigError) << "only needs a name";
    const Config c = load_config_string(
        "cluster: {proxy_name: gw, proxy_name_only: true, "
        "node_labels: {topology.kubernetes.io/zone: zone-a, x: }}\n");
    EXPECT_EQ(c.cluster.zone(), "zone-a");
    EXPECT_EQ(c.cluster.node_labels.at("x"), "");
}

// networking.k8s.io ServiceCIDR objects (KEP-1880) join cluster.service_cidrs, once each.
TEST(KubeObjects, ServiceCidrObjectsJoinServiceCidrs) {
    Config c;
    c.cluster.service_cidrs.push_back(*parse_cidr("10.96.0.0/12"));
    std::vector<ConfigIssue> errors;
    load_kube_string(R"(apiVersion: v1
kind: List
items:
- {apiVersion: networking.k8s.io/v1, kind: ServiceCIDR, metadata: {name: a}, spec: {cidrs: [10.96.0.0/12, 'fd00:96::/108']}}
- {apiVersion: networking.k8s.io/v1beta1, kind: ServiceCIDR, metadata: {name: b}, spec: {cidrs: [10.100.0.0/16]}}
)",
                     "m.yaml", c, errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    ASSERT_EQ(c.cluster.service_cidrs.size(), 3u);
    EXPECT_EQ(format_cidr(c.cluster.service_cidrs[1]), "fd00:96::/108");
    EXPECT_EQ(format_cidr(c.cluster.service_cidrs[2]), "10.100.0.0/16");
    EXPECT_EQ(c.kube.service_cidrs, 2u);
    errors.clear();
    load_kube_string(
        "{apiVersion: networking.k8s.io/v1, kind: ServiceCIDR, metadata: {name: c}, spec: {cidrs: [nope]}}", "m.yaml",
        c, errors);
    EXPECT_EQ(errors.size(), 1u) << "a bad CIDR is an error, not a crash";
}
