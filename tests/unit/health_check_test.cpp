// Active health checks (issue 68): the rise/fall state machine, the config's two forms with their
// positions, the schedulers leaving a failing endpoint out (Maglev's table rebuilt, rr and lc
// skipping it) while its connections stay or end (on_failure: reset), every endpoint failing
// (REJECT or panic), and the prober's real checks over loopback (tcp, http, udp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "control/config/health_check.h"
#include "control/config/kube_objects.h"
#include "control/config/yaml_config.h"
#include "control/probe/prober.h"
#include "control/snapshot/snapshot_builder.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::ctl;
using namespace std::chrono_literals;

namespace {

std::vector<ConfigIssue> errors_of(const std::string& yaml) {
    try {
        load_config_string(yaml, "t.yaml");
    } catch (const ConfigError& e) {
        return e.issues;
    }
    return {};
}

// ---- the state machine ------------------------------------------------------------------------

TEST(HealthState, FallFailuresInARowTakeItDownAndRiseBringItBack) {
    EndpointCheck c;
    EXPECT_TRUE(c.up);
    EXPECT_FALSE(c.observe(false, 2, 3, 1, "refused"));
    EXPECT_FALSE(c.observe(false, 2, 3, 2, "refused"));
    EXPECT_TRUE(c.up);
    EXPECT_TRUE(c.observe(false, 2, 3, 3, "timeout"));
    EXPECT_FALSE(c.up);
    EXPECT_EQ(c.since, 3);
    EXPECT_EQ(c.last_failure, "timeout");
    EXPECT_FALSE(c.observe(true, 2, 3, 4));
    EXPECT_TRUE(c.observe(true, 2, 3, 5));
    EXPECT_TRUE(c.up);
    EXPECT_EQ(c.transitions, 2u);
    EXPECT_EQ(c.last_failure, "timeout");  // kept: the last failure, whenever it was
}

TEST(HealthState, AFlappingEndpointNeedsItsRunsUnbroken) {
    EndpointCheck c;
    // Up: failures broken by a success never add up to fall.
    for (int i = 0; i < 20; ++i) EXPECT_FALSE(c.observe(i % 3 == 2, 2, 3, i));
    EXPECT_TRUE(c.up);
    for (int i = 0; i < 3; ++i) c.observe(false, 2, 3, 100 + i);
    ASSERT_FALSE(c.up);
    // Down: successes broken by a failure never add up to rise.
    for (int i = 0; i < 20; ++i) EXPECT_FALSE(c.observe(i % 2 == 0, 2, 3, 200 + i));
    EXPECT_FALSE(c.up);
    EXPECT_EQ(c.transitions, 1u);
}

TEST(HealthState, RiseAndFallOfOneFollowEachResult) {
    EndpointCheck c;
    EXPECT_TRUE(c.observe(false, 1, 1, 1, "refused"));
    EXPECT_TRUE(c.observe(true, 1, 1, 2));
    EXPECT_TRUE(c.observe(false, 1, 1, 3, "refused"));
    EXPECT_EQ(c.transitions, 3u);
}

// ---- the config -------------------------------------------------------------------------------

const char* const kService = R"(services:
  - name: default/web
    cluster_ip: 10.96.0.50
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080}]
    endpoints: [10.244.2.4]
)";

TEST(HealthCheckConfig, TheCompactFormTakesEveryKeyWithDefaults) {
    Config c = load_config_string(std::string(kService) + "    health_check: {type: http}\n", "t.yaml");
    ASSERT_TRUE(c.services[0].health_check);
    const HealthCheckConfig& h = *c.services[0].health_check;
    EXPECT_EQ(h.type, HealthCheckConfig::Type::http);
    EXPECT_EQ(h.path, "/");
    EXPECT_EQ(h.interval_ms, 2000u);
    EXPECT_EQ(h.timeout_ms, 1000u);
    EXPECT_EQ(h.rise, 2u);
    EXPECT_EQ(h.fall, 3u);
    ASSERT_EQ(h.expect.size(), 1u);
    EXPECT_EQ(h.expect[0].lo, 200);
    EXPECT_EQ(h.expect[0].hi, 399);
    EXPECT_FALSE(h.reset);
    EXPECT_FALSE(h.panic);

    c = load_config_string(std::string(kService) +
                               "    health_check: {type: http, port: 9000, path: /healthz, host: web.local, expect: "
                               "[200, 204-205], interval_ms: 500, timeout_ms: 200, rise: 1, fall: 2, on_failure: "
                               "reset, all_down: panic}\n",
                           "t.yaml");
    const HealthCheckConfig& g = *c.services[0].health_check;
    EXPECT_EQ(g.port, 9000);
    EXPECT_EQ(g.path, "/healthz");
    EXPECT_EQ(g.host, "web.local");
    ASSERT_EQ(g.expect.size(), 2u);
    EXPECT_EQ(g.expect[1].lo, 204);
    EXPECT_EQ(g.expect[1].hi, 205);
    EXPECT_EQ(g.interval_ms, 500u);
    EXPECT_EQ(g.timeout_ms, 200u);
    EXPECT_EQ(g.rise, 1u);
    EXPECT_EQ(g.fall, 2u);
    EXPECT_TRUE(g.reset);
    EXPECT_TRUE(g.panic);
}

TEST(HealthCheckConfig, EveryErrorHasItsPosition) {
    auto e = errors_of(std::string(kService) + "    health_check: {type: http, rise: 0, fall: x, expect: 99}\n");
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[0].str(), "t.yaml:6:38: services[0].health_check.rise: \"0\" is not a number from 1 to 100");
    EXPECT_EQ(e[1].path, "services[0].health_check.fall");
    EXPECT_EQ(e[2].path, "services[0].health_check.expect");
    EXPECT_NE(e[2].message.find("HTTP statuses"), std::string::npos);

    e = errors_of(std::string(kService) + "    health_check: {type: tcp, path: /x}\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].str(), "t.yaml:6:19: services[0].health_check: path, host and expect are for http checks");

    e = errors_of(std::string(kService) + "    health_check: {type: icmp, interval_ms: 100, timeout_ms: 500}\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].message, "\"icmp\" is not tcp, http or udp");

    e = errors_of(std::string(kService) + "    health_check: {type: tcp, interval_ms: 100, timeout_ms: 500}\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].message, "timeout_ms (500) is longer than interval_ms (100)");

    e = errors_of(std::string(kService) + "    health_check: {type: tcp, intervall_ms: 100}\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_NE(e[0].message.find("did you mean \"interval_ms\""), std::string::npos) << e[0].message;

    e = errors_of(std::string(kService) + "    health_check: {port: 80}\n");
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].message, "a health check needs type (tcp, http or udp)");
}

TEST(HealthCheckConfig, TheAnnotationSaysTheSameInOneLine) {
    std::string err;
    auto h = parse_health_check("http:/healthz interval_ms=500 fall=2 expect=200-204 on_failure=reset", err);
    ASSERT_TRUE(h) << err;
    EXPECT_EQ(h->type, HealthCheckConfig::Type::http);
    EXPECT_EQ(h->path, "/healthz");
    EXPECT_EQ(h->interval_ms, 500u);
    EXPECT_EQ(h->fall, 2u);
    EXPECT_EQ(h->expect[0].hi, 204);
    EXPECT_TRUE(h->reset);
    h = parse_health_check("udp expect_reply=true port=53", err);
    ASSERT_TRUE(h) << err;
    EXPECT_TRUE(h->expect_reply);
    EXPECT_EQ(h->port, 53);

    EXPECT_FALSE(parse_health_check("", err));
    EXPECT_FALSE(parse_health_check("tcp:/x", err));
    EXPECT_EQ(err, "path, host and expect are for http checks");
    EXPECT_FALSE(parse_health_check("tcp rise", err));
    EXPECT_EQ(err, "\"rise\" is not KEY=VALUE");
    EXPECT_FALSE(parse_health_check("tcp rise=1000", err));
    EXPECT_EQ(err, "rise: \"1000\" is not a number from 1 to 100");
    EXPECT_FALSE(parse_health_check("tcp expect_reply=true", err));
}

TEST(HealthCheckConfig, AKubernetesServiceTakesItsAnnotationWithAPosition) {
    const std::string svc = R"(apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
  annotations:
    svcgate.io/health-check: "%s"
spec:
  clusterIP: 10.96.0.50
  ports: [{name: http, port: 80, protocol: TCP}]
)";
    auto with = [&](const std::string& a) {
        return svc.substr(0, svc.find("%s")) + a + svc.substr(svc.find("%s") + 2);
    };
    Config c;
    std::vector<ConfigIssue> errors;
    load_kube_string(with("http:/ready rise=3"), "m.yaml", c, errors);
    ASSERT_TRUE(errors.empty()) << errors[0].str();
    ASSERT_TRUE(c.services[0].health_check);
    EXPECT_EQ(c.services[0].health_check->path, "/ready");
    EXPECT_EQ(c.services[0].health_check->rise, 3u);

    Config d;
    load_kube_string(with("http:/ready rise=0"), "m.yaml", d, errors);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(
        errors[0].str(),
        "m.yaml:7:30: Service.metadata.annotations.svcgate.io/health-check: rise: \"0\" is not a number from 1 to 100");
}

// ---- the schedulers ---------------------------------------------------------------------------

std::string web(const std::string& scheduler, const std::string& check = "{type: tcp}") {
    return test::gateway_config(fmt::format(R"(  - name: default/web
    cluster_ip: 10.96.0.50
    ports: [{{name: http, protocol: TCP, port: 80}}, {{name: dns, protocol: UDP, port: 53}}]
    scheduler: {}
    health_check: {}
    endpoints: [10.244.2.4, 10.244.2.6, 10.244.3.6]
)",
                                            scheduler, check));
}

EndpointHealthPtr failing(std::initializer_list<const char*> ips) {
    auto v = std::make_shared<EndpointHealthView>();
    for (const char* ip : ips) v->down.insert(EndpointHealthView::key("default/web", *parse_ip(ip)));
    return v;
}

// The endpoints new connections from clients 40000.. reach.
std::set<std::string> chosen(Tracer& t, int first, int n = 60) {
    std::set<std::string> seen;
    for (int port = first; port < first + n; ++port) {
        // Clients of many addresses, so that sh (source hashing) spreads them too.
        auto r = t.run_spec(fmt::format("tcp 192.168.67.{}:{} > 10.96.0.50:80 [S]", 10 + port % 200, port));
        if (r.verdict == dp::Verdict::dnat)
            seen.insert(r.endpoint->substr(0, r.endpoint->find(':')));
        else
            seen.insert(std::string(dp::kVerdictNames[static_cast<int>(r.verdict)]));
    }
    return seen;
}

TEST(HealthScheduling, EverySchedulerLeavesAFailingEndpointOutAndTakesItBack) {
    for (const char* sch : {"random", "rr", "lc", "maglev", "sh", "sed", "nq"}) {
        SCOPED_TRACE(sch);
        auto t = test::tracer(web(sch));
        const Config cfg = load_config_string(web(sch), "t.yaml");
        EXPECT_EQ(chosen(*t, 40000).size(), 3u);
        t->set_health(failing({"10.244.2.6"}));
        t->reload(cfg);
        const auto down = chosen(*t, 41000, 90);
        EXPECT_EQ(down.count("10.244.2.6"), 0u);
        EXPECT_EQ(down.size(), 2u);
        t->set_health(failing({}));
        t->reload(cfg);
        EXPECT_EQ(chosen(*t, 42000, 90).size(), 3u);
    }
}

TEST(HealthScheduling, MaglevsTableIsRebuiltWithoutTheEndpoint) {
    auto t = test::tracer(web("maglev"));
    t->set_health(failing({"10.244.3.6"}));
    t->reload(load_config_string(web("maglev"), "t.yaml"));
    const dp::ServiceSnapshot& s = t->snapshot();
    const dp::ServicePort& sp = s.services[0];
    const dp::EndpointSet& set = s.sets[sp.cluster_set];
    ASSERT_EQ(set.count, 2u);
    ASSERT_GT(set.ring_len, 0u);
    for (uint32_t i = 0; i < set.ring_len; ++i) {
        const uint32_t e = s.members[set.first + s.rings[set.ring_off + i]];
        EXPECT_NE(format_ip(s.endpoints[e].ip), "10.244.3.6");
    }
    bool listed = false;  // still listed, as unhealthy
    for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e)
        if (format_ip(s.endpoints[e].ip) == "10.244.3.6") listed = (s.endpoints[e].cond & dp::kUnhealthy) != 0;
    EXPECT_TRUE(listed);
}

// The client port of a connection (a pod's: no masquerade) established with `ip`.
int connect_to(Tracer& t, const std::string& ip) {
    for (int port = 43000; port < 43200; ++port) {
        auto r = t.run_spec(fmt::format("tcp 10.244.3.9:{} > 10.96.0.50:80 [S]", port));
        if (r.verdict != dp::Verdict::dnat || !r.endpoint->starts_with(ip + ":")) continue;
        EXPECT_EQ(t.run_spec(fmt::format("tcp {} > 10.244.3.9:{} [S.]", *r.endpoint, port)).verdict,
                  dp::Verdict::reply);
        EXPECT_EQ(t.run_spec(fmt::format("tcp 10.244.3.9:{} > 10.96.0.50:80 [.]", port)).verdict, dp::Verdict::dnat);
        return port;
    }
    return 0;
}

TEST(HealthScheduling, AConnectionOpenBeforeStaysUnlessResetIsAsked) {
    for (bool reset : {false, true}) {
        SCOPED_TRACE(reset ? "on_failure: reset" : "keep");
        const std::string yaml = web("random", reset ? "{type: tcp, on_failure: reset}" : "{type: tcp}");
        auto t = test::tracer(yaml);
        const int port = connect_to(*t, "10.244.2.4");
        ASSERT_NE(port, 0);
        t->set_health(failing({"10.244.2.4"}));
        const SweepResult sw = t->reload(load_config_string(yaml, "t.yaml"));
        EXPECT_EQ(sw.tcp_closed, reset ? 1u : 0u);
        auto r = t->run_spec(fmt::format("tcp 10.244.3.9:{} > 10.96.0.50:80 [.]", port));
        if (reset) {
            EXPECT_EQ(r.verdict, dp::Verdict::reject) << r.text();
        } else {
            EXPECT_EQ(r.verdict, dp::Verdict::dnat);
            EXPECT_EQ(*r.endpoint, "10.244.2.4:80");
        }
    }
}

TEST(HealthScheduling, EveryEndpointFailingIsRejectedAsIfThereWereNone) {
    auto t = test::tracer(web("random"));
    t->set_health(failing({"10.244.2.4", "10.244.2.6", "10.244.3.6"}));
    t->reload(load_config_string(web("random"), "t.yaml"));
    EXPECT_EQ(chosen(*t, 44000, 10), std::set<std::string>{"reject"});
}

TEST(HealthScheduling, AllDownPanicSpreadsOverThemAllAndAReloadSwitchesIt) {
    const std::string panic = web("random", "{type: tcp, all_down: panic}");
    auto t = test::tracer(panic);
    t->set_health(failing({"10.244.2.4", "10.244.2.6"}));  // two of three: left out, panic or not
    t->reload(load_config_string(panic, "t.yaml"));
    EXPECT_EQ(chosen(*t, 45000, 30), std::set<std::string>{"10.244.3.6"});
    t->set_health(failing({"10.244.2.4", "10.244.2.6", "10.244.3.6"}));  // every one: panic
    t->reload(load_config_string(panic, "t.yaml"));
    EXPECT_EQ(chosen(*t, 46000, 90).size(), 3u);
    t->reload(load_config_string(web("random"), "t.yaml"));  // all_down: reject again, the same view
    EXPECT_EQ(chosen(*t, 47000, 10), std::set<std::string>{"reject"});
}

// ---- the prober, over loopback ----------------------------------------------------------------

// A TCP listener on `addr` (127.0.0.1); answers each connection with `reply` (none: accepts only).
class Listener {
public:
    explicit Listener(std::string reply = {}, uint32_t addr = INADDR_LOOPBACK) : reply_(std::move(reply)) {
        fd_ = socket(AF_INET, SOCK_STREAM, 0);
        const int one = 1;
        setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(addr)}, .sin_zero = {}};
        EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        socklen_t len = sizeof a;
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        listen(fd_, 64);
        thread_ = std::thread([this] {
            for (;;) {
                const int c = accept(fd_, nullptr, nullptr);
                if (c < 0) return;
                if (!reply_.empty()) {
                    char buf[1024];
                    (void)!recv(c, buf, sizeof buf, 0);
                    (void)!send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
                }
                close(c);
            }
        });
    }
    ~Listener() {
        shutdown(fd_, SHUT_RDWR);
        close(fd_);
        thread_.join();
    }
    uint16_t port() const { return port_; }

private:
    std::string reply_;
    int fd_ = -1;
    uint16_t port_ = 0;
    std::thread thread_;
};

// A port nothing listens on (TCP and UDP): bound, then closed.
uint16_t closed_port(int type) {
    const int fd = socket(AF_INET, type, 0);
    sockaddr_in a{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
}

ProbeTarget loopback(const std::string& service, uint16_t port, const std::string& check) {
    std::string err;
    auto hc = parse_health_check(check, err);
    EXPECT_TRUE(hc) << err;
    return ProbeTarget{.service = service,
                       .ip = *parse_ip("127.0.0.1"),
                       .port = port,
                       .check = *hc,
                       .source = *parse_ip("127.0.0.1"),
                       .device = "lo"};
}

// Waits (at most 5 s) until `key`'s state is `want`.
bool becomes(const Prober& p, const std::string& key, const std::string& want) {
    for (int i = 0; i < 500; ++i) {
        if (auto r = p.row(key); r && r->state == want) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

TEST(Prober, TcpAndHttpChecksAgainstOpenAndClosedPorts) {
    Listener open;
    Listener ok("HTTP/1.1 204 No Content\r\n\r\n");
    Listener sick("HTTP/1.0 503 Service Unavailable\r\n\r\n");
    const uint16_t closed = closed_port(SOCK_STREAM);
    Prober p;
    std::vector<ProbeTarget> targets{
        loopback("t/open", open.port(), "tcp interval_ms=100 timeout_ms=100 fall=2"),
        loopback("t/closed", closed, "tcp interval_ms=100 timeout_ms=100 fall=2"),
        loopback("t/ok", ok.port(), "http:/healthz interval_ms=100 timeout_ms=100 fall=2"),
        loopback("t/sick", sick.port(), "http:/healthz interval_ms=100 timeout_ms=100 fall=2")};
    const auto key = [&](int i) { return targets[i].key(); };
    p.set_targets(targets);
    EXPECT_TRUE(becomes(p, key(1), "down"));
    EXPECT_TRUE(becomes(p, key(3), "down"));
    EXPECT_EQ(p.row(key(1))->last_failure, "refused");
    EXPECT_EQ(p.row(key(3))->last_failure, "status 503");
    EXPECT_EQ(p.row(key(0))->state, "up");
    EXPECT_EQ(p.row(key(2))->state, "up");
    EXPECT_EQ(p.row(key(2))->last_failure, "");
    const EndpointHealthPtr v = p.view();
    EXPECT_EQ(v->down.size(), 2u);
    EXPECT_EQ(p.checked_down(), std::make_pair(size_t{4}, size_t{2}));
    MetricsText m;
    p.metrics(m);
    EXPECT_NE(m.str().find("svcgate_endpoint_health_up{service=\"t/closed\",endpoint=\"127.0.0.1:"), std::string::npos);
    EXPECT_NE(m.str().find("svcgate_health_checks_total{result=\"refused\"}"), std::string::npos);
    EXPECT_NE(m.str().find("svcgate_health_transitions_total{to=\"down\"} 2"), std::string::npos) << m.str();
}

TEST(Prober, ADownEndpointComesBackAfterRiseAndAReloadKeepsItsState) {
    const uint16_t port = closed_port(SOCK_STREAM);
    Prober p;
    ProbeTarget t = loopback("t/web", port, "tcp interval_ms=100 timeout_ms=100 rise=2 fall=2");
    p.set_targets({t});
    ASSERT_TRUE(becomes(p, t.key(), "down"));
    const double since = p.row(t.key())->since;
    p.set_targets({t, loopback("t/other", port, "tcp interval_ms=100 timeout_ms=100")});  // a reload
    EXPECT_EQ(p.row(t.key())->state, "down");
    EXPECT_EQ(p.row(t.key())->since, since);
    // Listen on that port: up after two checks.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    listen(fd, 64);
    EXPECT_TRUE(becomes(p, t.key(), "up"));
    close(fd);
}

TEST(Prober, UdpChecksCountAnIcmpErrorAndSilenceOnlyWhenAReplyIsExpected) {
    const uint16_t closed = closed_port(SOCK_DGRAM);
    const int quiet = socket(AF_INET, SOCK_DGRAM, 0);  // open, never answers
    sockaddr_in a{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
    bind(quiet, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(quiet, reinterpret_cast<sockaddr*>(&a), &len);
    Prober p;
    std::vector<ProbeTarget> targets{
        loopback("u/closed", closed, "udp interval_ms=100 timeout_ms=50 fall=2"),
        loopback("u/quiet", ntohs(a.sin_port), "udp interval_ms=100 timeout_ms=50 fall=2"),
        loopback("u/quiet-expecting", ntohs(a.sin_port), "udp interval_ms=100 timeout_ms=50 fall=2 expect_reply=true")};
    p.set_targets(targets);
    EXPECT_TRUE(becomes(p, targets[0].key(), "down"));
    EXPECT_EQ(p.row(targets[0].key())->last_failure, "refused");
    EXPECT_TRUE(becomes(p, targets[2].key(), "down"));
    EXPECT_EQ(p.row(targets[2].key())->last_failure, "timeout");
    EXPECT_EQ(p.row(targets[1].key())->state, "up");
    close(quiet);
}

TEST(Prober, TargetsComeFromTheConfigWithTheirPortSourceAndWay) {
    const std::string yaml = R"(
dataplane:
  ports:
    - {name: ext, addresses: [192.168.67.8/24]}
    - {name: cluster, addresses: [10.192.0.2/24, 'fd00:192::2/64'], host_interface: sg-cl}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
    - {prefix: 'fd00:244:2::/64', via: 'fd00:192::3'}
    - {prefix: 10.250.0.0/16, via: 192.168.67.1}
cluster:
  cluster_cidrs: [10.244.0.0/16]
services:
  - name: default/web
    cluster_ips: [10.96.0.50, 'fd00:96::50']
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080}, {name: dns, protocol: UDP, port: 53}]
    health_check: {type: http}
    endpoints: [10.244.2.4, 'fd00:244:2::4', 10.250.0.9, 10.99.0.1]
  - name: default/plain
    cluster_ip: 10.96.0.51
    ports: [{name: http, protocol: TCP, port: 80}]
    endpoints: [10.244.2.9]
)";
    const Config c = load_config_string(yaml, "t.yaml");
    const auto t = probe_targets(c);
    ASSERT_EQ(t.size(), 4u);
    EXPECT_EQ(t[0].port, 8080);
    EXPECT_EQ(format_ip(t[0].source), "10.192.0.2");
    EXPECT_EQ(t[0].device, "sg-cl");
    EXPECT_EQ(format_ip(t[1].source), "fd00:192::2");
    EXPECT_EQ(t[2].unchecked, "port ext has no host interface");
    EXPECT_EQ(t[3].unchecked, "no route to it");
    const auto routes = host_routes(c);
    ASSERT_EQ(routes.size(), 2u);  // the routes over sg-cl only
    EXPECT_EQ(format_cidr(routes[0].prefix), "10.244.2.0/24");
    EXPECT_EQ(routes[1].device, "sg-cl");
}

}  // namespace
