// control/kube/: the kubeconfig as kubectl reads it, RFC 3339 times, kube-proxy's label selector,
// and the API's JSON objects read exactly as the same objects in YAML (one reader for both), with
// a bad object left out instead of refusing the lot.
#include <gtest/gtest.h>

#include <sodium.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "control/config/kube_objects.h"
#include "control/config/yaml_config.h"
#include "control/kube/json_tree.h"
#include "control/kube/kube_api.h"
#include "control/kube/api_client.h"
#include "control/kube/backoff.h"
#include "control/kube/kubeconfig.h"
#include "test_support.h"

using namespace svcgate::ctl;
using namespace svcgate::ctl::kube;

namespace {

std::string b64(const std::string& s) {
    std::string out(sodium_base64_ENCODED_LEN(s.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
    sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(s.data()), s.size(),
                      sodium_base64_VARIANT_ORIGINAL);
    out.resize(out.find('\0'));
    return out;
}

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/kube_api_test.XXXXXX";
        path = mkdtemp(t);
    }
    ~TempDir() { std::system(("rm -rf " + path).c_str()); }
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(path + "/" + name) << text;
        return path + "/" + name;
    }
};

const char* kCa = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string kubeconfig(const std::string& cluster_extra, const std::string& user) {
    return "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
           "contexts:\n- name: a\n  context: {cluster: c1, user: u1}\n- name: b\n  context: {cluster: c2, user: u2}\n"
           "clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443\n" +
        cluster_extra +
        "- name: c2\n  cluster:\n    server: 'https://[fd00::1]'\n    certificate-authority-data: " + b64(kCa) +
        "\nusers:\n- name: u1\n  user:\n" + user + "- name: u2\n  user: {token: two}\n";
}

// The objects as the API sends them, read and added to `cfg` as control/kube/ does.
void add_json(const std::vector<nlohmann::json>& objs, Config& cfg, std::vector<RejectedObject>& rejected,
              unsigned& orphans) {
    std::vector<KubeObjectRead> reads;
    for (const nlohmann::json& o : objs) {
        const auto tree = json_tree(o);
        const std::string name = o.value("kind", "?") + " " + o["metadata"].value("name", "?");
        reads.push_back(read_kube_object(ytree::Node(tree.get(), 0), name));
    }
    std::vector<const KubeObjectRead*> ptrs;
    for (const KubeObjectRead& r : reads) ptrs.push_back(&r);
    add_kube_objects(ptrs, cfg, rejected, orphans);
}

nlohmann::json service(const char* name, const char* ip, int port) {
    return {{"kind", "Service"},
            {"apiVersion", "v1"},
            {"metadata", {{"name", name}, {"namespace", "default"}}},
            {"spec", {{"clusterIP", ip}, {"ports", {{{"port", port}}}}}}};
}

nlohmann::json slice(const char* name, const char* service, const char* address) {
    return {
        {"kind", "EndpointSlice"},
        {"apiVersion", "discovery.k8s.io/v1"},
        {"addressType", "IPv4"},
        {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", {{"kubernetes.io/service-name", service}}}}},
        {"ports", {{{"port", 8080}, {"protocol", "TCP"}}}},
        {"endpoints", {{{"addresses", {address}}}}}};
}

}  // namespace

TEST(Kubeconfig, CurrentContextCaFileAndToken) {
    TempDir d;
    d.write("ca.crt", kCa);
    const std::string p =
        d.write("kc", kubeconfig("    certificate-authority: ca.crt\n", "    token: abc\n    tokenFile: tok\n"));
    const ApiServer s = load_kubeconfig(p, "");
    EXPECT_EQ(s.host, "10.0.0.1");
    EXPECT_EQ(s.port, 6443);
    EXPECT_EQ(s.ca_pem, kCa);  // relative to the kubeconfig's directory
    EXPECT_EQ(s.token, "abc");
    EXPECT_EQ(s.token_file, d.path + "/tok");
    EXPECT_NE(s.source.find("context a"), std::string::npos);
}

TEST(Kubeconfig, NamedContextDataAndIpv6Server) {
    TempDir d;
    const std::string p =
        d.write("kc", kubeconfig("    certificate-authority-data: " + b64(kCa) + "\n", "    token: x\n"));
    const ApiServer s = load_kubeconfig(p, "b");
    EXPECT_EQ(s.host, "fd00::1");
    EXPECT_EQ(s.port, 443);
    EXPECT_EQ(s.ca_pem, kCa);
    EXPECT_EQ(s.token, "two");
}

TEST(Kubeconfig, ClientCertificateAndExec) {
    TempDir d;
    const std::string p =
        d.write("kc",
                kubeconfig("    certificate-authority-data: " + b64(kCa) + "\n",
                           "    client-certificate-data: " + b64("CERT") + "\n    client-key-data: " + b64("KEY") +
                               "\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                               "      command: ./plugin\n      args: [get-token, --x]\n"
                               "      env: [{name: A, value: '1'}]\n"));
    const ApiServer s = load_kubeconfig(p, "");
    EXPECT_EQ(s.cert_pem, "CERT");
    EXPECT_EQ(s.key_pem, "KEY");
    EXPECT_EQ(s.exec.command, d.path + "/./plugin");
    EXPECT_EQ(s.exec.args, (std::vector<std::string>{"get-token", "--x"}));
    ASSERT_EQ(s.exec.env.size(), 1u);
    EXPECT_EQ(s.exec.env[0].first, "A");
    EXPECT_EQ(s.exec.api_version, "client.authentication.k8s.io/v1beta1");
}

TEST(Kubeconfig, RefusesWhatIsNotVerified) {
    TempDir d;
    auto refused = [&](const std::string& text, const std::string& context, const std::string& want) {
        const std::string p = d.write("kc", text);
        try {
            (void)load_kubeconfig(p, context);
            ADD_FAILURE() << "taken: " << want;
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
    };
    refused(kubeconfig("    insecure-skip-tls-verify: true\n    certificate-authority-data: " + b64(kCa) + "\n",
                       "    token: x\n"),
            "", "insecure-skip-tls-verify is refused");
    refused(kubeconfig("", "    token: x\n"), "", "no certificate-authority");
    refused(kubeconfig("    certificate-authority-data: " + b64(kCa) + "\n", "    token: x\n"), "nosuch",
            "no contexts \"nosuch\"");
    refused("apiVersion: v1\nclusters: []\n", "", "no current-context");
    refused(kubeconfig("    certificate-authority-data: '!!notbase64'\n", "    token: x\n"), "", "not base64");
    refused(kubeconfig("    certificate-authority-data: " + b64(kCa) + "\n",
                       "    client-certificate-data: " + b64("C") + "\n"),
            "", "needs its key");
    refused("- [unclosed\n", "", "kubeconfig");
    std::string host, prefix;
    int port = 0;
    EXPECT_THROW(split_server("http://10.0.0.1:8080", host, port, prefix), std::runtime_error);
    EXPECT_THROW(split_server("https://10.0.0.1:99999", host, port, prefix), std::runtime_error);
    EXPECT_THROW(split_server("https://:443", host, port, prefix), std::runtime_error);
    EXPECT_THROW(split_server("https://h/x?y=1", host, port, prefix), std::runtime_error);
}

// A Rancher or Teleport URL: its path is the prefix of every request, not cut off.
TEST(Kubeconfig, ServerPathIsKept) {
    std::string host, prefix;
    int port = 0;
    split_server("https://rancher.example/k8s/clusters/c-1/", host, port, prefix);
    EXPECT_EQ(host, "rancher.example");
    EXPECT_EQ(port, 443);
    EXPECT_EQ(prefix, "/k8s/clusters/c-1");
    split_server("https://[fd00::1]:6443", host, port, prefix);
    EXPECT_EQ(host, "fd00::1");
    EXPECT_EQ(port, 6443);
    EXPECT_EQ(prefix, "");
}

// Go's http.ProxyFromEnvironment: HTTPS_PROXY unless NO_PROXY names the host, never for loopback;
// the kubeconfig's proxy-url before both.
TEST(ApiClient, ProxyAsKubectlChoosesIt) {
    ApiServer s;
    s.host = "api.example.com";
    s.port = 6443;
    unsetenv("https_proxy");
    unsetenv("no_proxy");
    setenv("HTTPS_PROXY", "http://proxy:3128", 1);
    setenv("NO_PROXY", "", 1);
    EXPECT_EQ(proxy_for(s), "http://proxy:3128");
    for (const char* np :
         {"example.com", ".example.com", "*.example.com", "api.example.com:6443", "*", "a, example.com"}) {
        setenv("NO_PROXY", np, 1);
        EXPECT_EQ(proxy_for(s), "") << np;
    }
    for (const char* np : {"other.com", "api.example.com:443", "xample.com"}) {
        setenv("NO_PROXY", np, 1);
        EXPECT_EQ(proxy_for(s), "http://proxy:3128") << np;
    }
    s.host = "10.1.2.3";
    setenv("NO_PROXY", "10.0.0.0/8", 1);
    EXPECT_EQ(proxy_for(s), "");
    setenv("NO_PROXY", "", 1);
    EXPECT_EQ(proxy_for(s), "http://proxy:3128");
    for (const char* h : {"127.0.0.1", "::1", "localhost"}) {
        s.host = h;
        EXPECT_EQ(proxy_for(s), "") << h;
    }
    s.proxy_url = "socks5://kube-proxy:1080";
    EXPECT_EQ(proxy_for(s), "socks5://kube-proxy:1080");  // proxy-url: even for loopback
    unsetenv("HTTPS_PROXY");
    unsetenv("NO_PROXY");
    s.proxy_url.clear();
    EXPECT_EQ(proxy_for(s), "");
}

TEST(Kubeconfig, InCluster) {
    TempDir d;
    d.write("ca.crt", kCa);
    d.write("token", "tok-1\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    const ApiServer s = in_cluster(d.path);
    EXPECT_EQ(s.server, "https://10.96.0.1:443");
    EXPECT_EQ(s.ca_pem, kCa);
    Credentials c(s);
    EXPECT_EQ(c.bearer(), "tok-1");  // the file's, trimmed
    // A rotated token (a projected service account token) is read again.
    usleep(20000);
    d.write("token", "tok-2\n");
    EXPECT_EQ(c.bearer(), "tok-2");
    unsetenv("KUBERNETES_SERVICE_HOST");
    EXPECT_THROW(in_cluster(d.path), std::runtime_error);
}

TEST(Kubeconfig, ExecPluginRunsUntilExpiry) {
    TempDir d;
    // Each run prints a new token; the first expires in the past, the second far ahead.
    const std::string plugin =
        d.write("plugin",
                "#!/bin/sh\nn=$(cat " + d.path + "/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + d.path +
                    "/n\n"
                    "test -n \"$KUBERNETES_EXEC_INFO\" || exit 3\n"
                    "if [ $n = 1 ]; then exp=2000-01-01T00:00:00Z; else exp=2999-01-01T00:00:00.5+01:00; fi\n"
                    "echo \"{\\\"kind\\\":\\\"ExecCredential\\\",\\\"status\\\":{\\\"token\\\":\\\"t$n\\\","
                    "\\\"expirationTimestamp\\\":\\\"$exp\\\"}}\"\n");
    chmod(plugin.c_str(), 0755);
    ApiServer s;
    s.exec.command = plugin;
    Credentials c(s);
    EXPECT_EQ(c.bearer(), "t1");
    EXPECT_EQ(c.bearer(), "t2");  // t1 had expired
    EXPECT_EQ(c.bearer(), "t2");  // kept until 2999
    EXPECT_EQ(c.exec_runs(), 2u);
    c.invalidate();  // a 401
    EXPECT_EQ(c.bearer(), "t3");
    EXPECT_EQ(c.error(), "");
    ApiServer bad;
    bad.exec.command = d.path + "/nosuch";
    Credentials cb(bad);
    EXPECT_EQ(cb.bearer(), "");
    EXPECT_NE(cb.error().find("exited with 127"), std::string::npos) << cb.error();
}

TEST(Kubeconfig, Rfc3339) {
    EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:10Z"), 10);
    EXPECT_EQ(parse_rfc3339("1970-01-01T01:00:10+01:00"), 10);
    EXPECT_DOUBLE_EQ(parse_rfc3339("1970-01-01T00:00:10.123456789Z"), 10.123456789);  // RFC3339Nano
    EXPECT_EQ(parse_rfc3339("2026-11-25T21:00:00-00:30"), parse_rfc3339("2026-11-25T21:30:00Z"));
    EXPECT_EQ(parse_rfc3339("yesterday"), -1);
    EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:10"), -1);  // no zone
    EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:10Zjunk"), -1);
}

// Both kinds leave headless Services' slices out, at the server and again here; the proxy name is
// the object reader's (KubeObjects.ServiceProxyName), so that a reload can change it.
TEST(KubeSelector, AsKubeProxys) {
    EXPECT_EQ(label_selector(), "%21service.kubernetes.io%2Fheadless");
    auto obj = [](const nlohmann::json& labels) { return nlohmann::json{{"metadata", {{"labels", labels}}}}; };
    EXPECT_TRUE(selected(obj(nlohmann::json::object())));
    EXPECT_TRUE(selected(nlohmann::json{{"metadata", nlohmann::json::object()}}));
    EXPECT_FALSE(selected(obj({{"service.kubernetes.io/headless", ""}})));
    EXPECT_TRUE(selected(obj({{"service.kubernetes.io/service-proxy-name", "other"}})));
}

// The fixtures (kubectl's YAML) and the same objects as the API sends them (JSON) give the same
// Services with the same endpoints.
TEST(KubeObjects, JsonReadAsTheSameYaml) {
    const std::string src = std::string(SVCGATE_SOURCE_DIR) + "/config/";
    const Config from_yaml = load_config_string("kubernetes:\n  manifests: [" + src + "k8s-objects.yaml]\n", "k.yaml");
    // The same file through yaml-cpp into JSON, item by item, as the API would send each.
    const std::string cmd =
        "/usr/bin/python3 -c 'import json,sys,yaml; d=yaml.safe_load(open(sys.argv[1]));"
        " print(\"\\n\".join(json.dumps(i) for i in d[\"items\"]))' " +
        src + "k8s-objects.yaml";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_TRUE(f);
    std::string text;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    ASSERT_EQ(pclose(f), 0);
    std::vector<nlohmann::json> objs;
    for (size_t a = 0, b; a < text.size(); a = b + 1) {
        b = text.find('\n', a);
        if (b == std::string::npos) b = text.size();
        if (b > a) objs.push_back(nlohmann::json::parse(text.substr(a, b - a)));
    }
    Config from_json;
    std::vector<RejectedObject> rejected;
    unsigned orphans = 0;
    add_json(objs, from_json, rejected, orphans);
    EXPECT_TRUE(rejected.empty());
    EXPECT_EQ(orphans, 0u);
    ASSERT_EQ(from_json.services.size(), from_yaml.services.size());
    for (size_t i = 0; i < from_yaml.services.size(); ++i) {
        const ServiceConfig &a = from_yaml.services[i], &b = from_json.services[i];
        EXPECT_EQ(a.full_name(), b.full_name());
        EXPECT_EQ(a.cluster_ips, b.cluster_ips);
        EXPECT_EQ(a.type, b.type);
        ASSERT_EQ(a.ports.size(), b.ports.size());
        for (size_t p = 0; p < a.ports.size(); ++p) {
            EXPECT_EQ(a.ports[p].port, b.ports[p].port);
            EXPECT_EQ(a.ports[p].node_port, b.ports[p].node_port);
        }
        ASSERT_EQ(a.groups.size(), b.groups.size());
        for (size_t g = 0; g < a.groups.size(); ++g) {
            ASSERT_EQ(a.groups[g].endpoints.size(), b.groups[g].endpoints.size());
            for (size_t e = 0; e < a.groups[g].endpoints.size(); ++e) {
                EXPECT_EQ(a.groups[g].endpoints[e].ip, b.groups[g].endpoints[e].ip);
                EXPECT_EQ(a.groups[g].endpoints[e].ready, b.groups[g].endpoints[e].ready);
            }
        }
    }
    EXPECT_EQ(from_json.kube.services, from_yaml.kube.services);
    EXPECT_EQ(from_json.kube.slices, from_yaml.kube.slices);
}

// One bad object is left out with its reason; a duplicate of a file Service too; an orphan slice
// is counted; the good ones stay.
TEST(KubeObjects, BadObjectsLeftOutNotTheLot) {
    Config cfg = load_config_string(
        "services:\n  - {name: default/file, cluster_ip: 10.96.0.9, ports: [{port: 80}], endpoints: [10.9.0.2]}\n");
    const std::vector<nlohmann::json> objs{service("good", "10.96.0.1", 80),     service("bad", "10.96.0.2", 99999),
                                           service("file", "10.96.0.3", 80),     slice("good-1", "good", "10.244.0.5"),
                                           slice("x-1", "nosuch", "10.244.0.6"), slice("good-2", "good", "not-an-ip")};
    std::vector<RejectedObject> rejected;
    unsigned orphans = 0;
    add_json(objs, cfg, rejected, orphans);
    ASSERT_EQ(rejected.size(), 3u);
    EXPECT_EQ(rejected[0].name, "Service bad");
    EXPECT_EQ(rejected[0].reason, RejectReason::invalid_object);
    EXPECT_NE(rejected[0].message.find("99999"), std::string::npos) << rejected[0].message;
    EXPECT_EQ(rejected[1].name, "Service file");
    EXPECT_EQ(rejected[1].reason, RejectReason::duplicate_service);
    EXPECT_EQ(rejected[2].name, "EndpointSlice good-2");
    EXPECT_EQ(orphans, 1u);
    ASSERT_EQ(cfg.services.size(), 2u);
    EXPECT_EQ(cfg.services[0].full_name(), "default/file");
    EXPECT_EQ(cfg.services[0].cluster_ips[0], IpAddr::of(Ip4::from_host(0x0a600009)));  // the file's, not the API's
    EXPECT_EQ(cfg.services[1].full_name(), "default/good");
    ASSERT_EQ(cfg.services[1].groups.size(), 1u);
    EXPECT_EQ(cfg.services[1].groups[0].endpoints.size(), 1u);
}

// kubernetes.api in the config: its fields, its defaults, and what it refuses.
TEST(KubeConfigFields, ReadAndChecked) {
    TempDir d;
    const std::string cfg = d.write("c.yaml",
                                    "kubernetes:\n  api: {kubeconfig: kc, context: x, "
                                    "min_sync_period_ms: 250, watch_timeout_seconds: 60, list_page_size: 50}\n");
    const Config c = load_config_file(cfg);
    EXPECT_TRUE(c.kube_api.enabled);
    EXPECT_EQ(c.kube_api.kubeconfig, d.path + "/kc");  // beside the config
    EXPECT_EQ(c.kube_api.context, "x");
    EXPECT_EQ(c.kube_api.min_sync_ms, 250u);
    EXPECT_EQ(c.kube_api.watch_timeout_s, 60u);
    EXPECT_EQ(c.kube_api.list_page_size, 50u);
    EXPECT_FALSE(load_config_string("dataplane: {ports: [{name: a}]}\n").kube_api.enabled);
    for (const char* bad : {"kubernetes:\n  api: {}\n", "kubernetes:\n  api: {kubeconfig: k, in_cluster: true}\n",
                            "kubernetes:\n  api: {kubeconfig: k, min_sync_period_ms: 70000}\n",
                            "kubernetes:\n  api: {kubeconfig: k, nosuch: 1}\n"})
        EXPECT_THROW(load_config_string(bad), ConfigError) << bad;
}

// The gateway's Node (kube-proxy reads its topology labels): its labels join the file's, and a
// label the file sets stays the file's.
TEST(KubeObjects, NodeLabelsJoinTheFilesOwn) {
    const auto tree = json_tree(nlohmann::json{
        {"kind", "Node"},
        {"metadata",
         {{"name", "gw"}, {"labels", {{"topology.kubernetes.io/zone", "zone-b"}, {"kubernetes.io/hostname", "gw"}}}}}});
    std::map<std::string, std::string> labels;
    node_labels(ytree::Node(tree.get(), tree->roots[0]), labels);
    EXPECT_EQ(labels.at("topology.kubernetes.io/zone"), "zone-b");
    EXPECT_EQ(labels.at("kubernetes.io/hostname"), "gw");
    std::map<std::string, std::string> file{{"topology.kubernetes.io/zone", "zone-a"}};
    node_labels(ytree::Node(tree.get(), tree->roots[0]), file);
    EXPECT_EQ(file.at("topology.kubernetes.io/zone"), "zone-a") << "the file's label stays";
    EXPECT_EQ(file.size(), 2u);
}

// ServiceCIDR objects from the API join cluster.service_cidrs, once each, beside the file's.
TEST(KubeObjects, ApiServiceCidrsJoinTheFilesOwn) {
    Config cfg;
    cfg.cluster.service_cidrs.push_back(*parse_cidr("10.96.0.0/12"));
    std::vector<RejectedObject> rejected;
    unsigned orphans = 0;
    auto cidr = [](const char* name, std::vector<std::string> cidrs) {
        return nlohmann::json{{"apiVersion", "networking.k8s.io/v1"},
                              {"kind", "ServiceCIDR"},
                              {"metadata", {{"name", name}}},
                              {"spec", {{"cidrs", cidrs}}}};
    };
    add_json({cidr("a", {"10.96.0.0/12", "fd00:96::/108"}), cidr("b", {"10.200.0.0/16"}), cidr("bad", {"x"})}, cfg,
             rejected, orphans);
    ASSERT_EQ(cfg.cluster.service_cidrs.size(), 3u);
    EXPECT_EQ(format_cidr(cfg.cluster.service_cidrs[2]), "10.200.0.0/16");
    ASSERT_EQ(rejected.size(), 1u) << "a bad CIDR leaves that object out, not the others";
    EXPECT_EQ(rejected[0].reason, RejectReason::invalid_object);
    EXPECT_EQ(cfg.kube.service_cidrs, 2u);
}

// client-go's reflector backoff: doubling from 0.8 s, steps capped at 30 s (a wait jittered up to
// twice its step), Retry-After honoured; it starts again only once 2 minutes passed since the
// last backoff, not after a watch that lived: errors every 30 s keep it at the cap.
TEST(Backoff, DoublesToTheCapAndResetsAfterTwoMinutesWithoutOne) {
    using std::chrono::milliseconds;
    using std::chrono::seconds;
    Backoff b(1);
    auto t = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
    std::vector<int64_t> steps;
    for (int i = 0; i < 8; ++i) {
        const milliseconds d = b.next(t);
        steps.push_back(d.count());
        t += seconds(20);  // an error every 20 s: never 2 minutes without a backoff
    }
    const int64_t base[] = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000};
    for (size_t i = 0; i < steps.size(); ++i) {
        EXPECT_GE(steps[i], base[i]) << i;
        EXPECT_LE(steps[i], 2 * base[i]) << i;
    }
    t += seconds(99);  // 20 s + 99 s since the last: not yet
    EXPECT_GE(b.next(t).count(), 30000);
    t += seconds(121);  // over 2 minutes without a backoff: from the start
    const milliseconds again = b.next(t);
    EXPECT_GE(again.count(), 800);
    EXPECT_LE(again.count(), 1600);
    EXPECT_GE(b.next(t, 7).count(), 7000) << "Retry-After is waited at least";
    EXPECT_LE(b.next(t, 900).count(), 300000) << "up to 5 minutes";
}
