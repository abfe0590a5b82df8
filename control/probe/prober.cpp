#include "control/probe/prober.h"

#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <queue>

#include <fmt/format.h>

#include "control/base/address.h"
#include "control/base/clock.h"
#include "control/base/log.h"
#include "control/config/health_check.h"

namespace svcgate::ctl {

using Clock = std::chrono::steady_clock;
using Type = HealthCheckConfig::Type;

namespace {

// What a check ended with, as the metric's `result` label says it.
enum Result : uint8_t { r_ok, r_refused, r_timeout, r_unreachable, r_status, r_bad_reply, r_error, r_count };
constexpr const char* kResultNames[r_count] = {"ok",     "refused",   "timeout", "unreachable",
                                               "status", "bad_reply", "error"};

// The port whose subnet holds `a`, and its address there; none if no port's does.
const PortConfig* on_link(const Config& cfg, const IpAddr& a, IpAddr& source) {
    const PortConfig* best = nullptr;
    int len = -1;
    for (const PortConfig& p : cfg.dataplane.ports)
        for (const IpCidr& c : p.addresses)
            if (c.family() == a.family() && c.contains(a) && c.len > len) best = &p, len = c.len, source = c.addr;
    return best;
}

// The next hop the dataplane's routes give for `a` (a connected route first, as its LPM has it
// when it is the longest): the address itself on a port's subnet, else the longest route's via.
std::optional<IpAddr> next_hop(const Config& cfg, const IpAddr& a) {
    int connected = -1;
    for (const PortConfig& p : cfg.dataplane.ports)
        for (const IpCidr& c : p.addresses)
            if (c.family() == a.family() && c.contains(a)) connected = std::max<int>(connected, c.len);
    const RouteConfig* best = nullptr;
    for (const RouteConfig& r : cfg.dataplane.routes)
        if (r.prefix.family() == a.family() && r.prefix.contains(a) && (!best || r.prefix.len > best->prefix.len))
            best = &r;
    if (best && best->prefix.len > connected) return best->via;
    if (connected >= 0) return a;
    return std::nullopt;
}

// The check's port for an endpoint: given, else the endpoint's target port of the check's
// protocol (the first such port of the group that lists it).
uint16_t check_port(const ServiceConfig& s, const HealthCheckConfig& hc, const IpAddr& ip) {
    if (hc.port) return hc.port;
    const Proto want = hc.type == Type::udp ? Proto::udp : Proto::tcp;
    for (const EndpointGroup& g : s.groups) {
        bool listed = false;
        for (const EndpointConfig& e : g.endpoints) listed = listed || e.ip == ip;
        if (!listed) continue;
        for (const EndpointGroup::Port& p : g.ports)
            if (p.proto == want && p.port) return p.port;
    }
    return 0;
}

uint64_t fnv(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

sockaddr_storage sockaddr_of(const IpAddr& a, uint16_t port, socklen_t& len) {
    sockaddr_storage ss{};
    if (a.is_v4()) {
        auto* s = reinterpret_cast<sockaddr_in*>(&ss);
        s->sin_family = AF_INET;
        s->sin_port = htons(port);
        s->sin_addr.s_addr = a.v4().be;
        len = sizeof(sockaddr_in);
    } else {
        auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(port);
        std::memcpy(&s->sin6_addr, a.v6().b, 16);
        len = sizeof(sockaddr_in6);
    }
    return ss;
}

Result errno_result(int e) {
    if (e == ECONNREFUSED) return r_refused;
    if (e == EHOSTUNREACH || e == ENETUNREACH || e == EHOSTDOWN || e == ENETDOWN) return r_unreachable;
    if (e == ETIMEDOUT) return r_timeout;
    return r_error;
}

// "HTTP/1.1 503 ..." → 503; 0 until a whole status line is there, -1 if it is not one.
int http_status(const std::string& buf) {
    const size_t eol = buf.find('\n');
    if (eol == std::string::npos) return buf.size() > 1024 ? -1 : 0;
    if (buf.compare(0, 5, "HTTP/") != 0) return -1;
    const size_t sp = buf.find(' ');
    if (sp == std::string::npos || sp + 4 > eol) return -1;
    int code = 0;
    for (size_t i = sp + 1; i < sp + 4; ++i) {
        if (buf[i] < '0' || buf[i] > '9') return -1;
        code = code * 10 + (buf[i] - '0');
    }
    return code;
}

}  // namespace

std::vector<ProbeTarget> probe_targets(const Config& cfg) {
    std::vector<ProbeTarget> out;
    for (const ServiceConfig& s : cfg.services) {
        if (!s.health_check) continue;
        std::vector<IpAddr> seen;
        for (const EndpointGroup& g : s.groups)
            for (const EndpointConfig& e : g.endpoints) {
                if (std::find(seen.begin(), seen.end(), e.ip) != seen.end()) continue;
                seen.push_back(e.ip);
                ProbeTarget t{.service = s.full_name(), .ip = e.ip, .check = *s.health_check};
                t.port = check_port(s, t.check, e.ip);
                const std::optional<IpAddr> hop = next_hop(cfg, e.ip);
                const PortConfig* p = hop ? on_link(cfg, *hop, t.source) : nullptr;
                if (t.port == 0)
                    t.unchecked = fmt::format("no {} port to check", t.check.type == Type::udp ? "UDP" : "TCP");
                else if (!p)
                    t.unchecked = "no route to it";
                else if (p->host_interface.empty())
                    t.unchecked = fmt::format("port {} has no host interface", p->name);
                else
                    t.device = p->host_interface;
                out.push_back(std::move(t));
            }
    }
    return out;
}

std::vector<HostRoute> host_routes(const Config& cfg) {
    std::vector<HostRoute> out;
    const bool checks = std::any_of(cfg.services.begin(), cfg.services.end(),
                                    [](const ServiceConfig& s) { return s.health_check.has_value(); });
    if (!checks) return out;
    for (const RouteConfig& r : cfg.dataplane.routes) {
        IpAddr src;
        const PortConfig* p = on_link(cfg, r.via, src);
        if (p && !p->host_interface.empty()) out.push_back({r.prefix, r.via, p->host_interface});
    }
    return out;
}

HostRouteMirror::~HostRouteMirror() { (void)sync({}); }

Status HostRouteMirror::sync(const std::vector<HostRoute>& want) {
    std::string errors;
    auto fail = [&](const Status& s, const HostRoute& r) {
        if (!s)
            errors += fmt::format("{}{} via {}: {}", errors.empty() ? "" : "\n", format_cidr(r.prefix),
                                  format_ip(r.via), s.error());
    };
    for (const HostRoute& r : have_)
        if (std::find(want.begin(), want.end(), r) == want.end())
            fail(nl_.del_route_via(RT_TABLE_MAIN, r.prefix, kHostRouteMetric), r);
    for (const HostRoute& r : want) {
        const int ifindex = static_cast<int>(if_nametoindex(r.device.c_str()));
        if (ifindex == 0) {
            fail(Status::fail(fmt::format("no interface {}", r.device)), r);
            continue;
        }
        fail(nl_.add_route_via(RT_TABLE_MAIN, r.prefix, r.via, ifindex, kHostRouteMetric), r);
    }
    have_ = want;
    return errors.empty() ? Status() : Status::fail("health checks' routes: " + errors);
}

struct Prober::Slot {
    ProbeTarget t;
    EndpointCheck state;
    Clock::time_point due{};
};

struct Prober::Probe {
    int fd = -1;
    size_t slot = 0;
    uint64_t epoch = 0;
    uint16_t sport = 0;
    Type type = Type::tcp;
    bool connected = false;  // tcp/http: the handshake is done
    bool expect_reply = false;
    std::vector<HealthCheckConfig::Range> expect;
    std::string request, reply;
    Clock::time_point started, deadline;
};

Prober::Prober() : thread_([this] { run(); }) {}

Prober::~Prober() {
    stop_.store(true);
    thread_.join();
}

void Prober::set_targets(std::vector<ProbeTarget> targets) {
    std::lock_guard lk(mu_);
    std::map<std::string, EndpointCheck> kept;
    for (Slot& s : slots_) kept.emplace(s.t.key(), std::move(s.state));
    std::vector<Slot> next;
    next.reserve(targets.size());
    const auto now = Clock::now();
    const double unix = unix_now();
    for (ProbeTarget& t : targets) {
        Slot s{.t = std::move(t)};
        if (auto it = kept.find(s.t.key()); it != kept.end())
            s.state = std::move(it->second);
        else
            s.state.since = unix;
        if (!s.t.unchecked.empty() && !s.state.up) {  // no longer checkable: left up, as unchecked ones are
            s.state.up = true;
            s.state.since = unix;
        }
        // Its own phase in the interval: checks spread evenly, the same for an endpoint at every reload.
        const uint64_t phase = fnv(s.t.key()) % (uint64_t{s.t.check.interval_ms} * 1000);
        s.due = now + std::chrono::microseconds(phase);
        next.push_back(std::move(s));
    }
    slots_ = std::move(next);
    index_.clear();
    for (size_t i = 0; i < slots_.size(); ++i) index_.emplace(slots_[i].t.key(), i);
    ++epoch_;
    view_dirty_ = true;
    changes_.fetch_add(1, std::memory_order_release);
}

EndpointHealthPtr Prober::view() const {
    std::lock_guard lk(mu_);
    if (view_dirty_) rebuild_view();
    return view_;
}

std::optional<EndpointHealthRow> Prober::row(const std::string& key) const {
    std::lock_guard lk(mu_);
    const auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    const Slot& s = slots_[it->second];
    return EndpointHealthRow{.state = !s.t.unchecked.empty() ? "unchecked"
                                 : s.state.up                ? "up"
                                                             : "down",
                             .check = s.t.unchecked.empty() ? describe(s.t.check) : s.t.unchecked,
                             .since = s.state.since,
                             .last_failure = s.state.last_failure,
                             .last_failure_at = s.state.last_failure_at};
}

std::pair<size_t, size_t> Prober::checked_down() const {
    std::lock_guard lk(mu_);
    size_t checked = 0, down = 0;
    for (const Slot& s : slots_) {
        if (!s.t.unchecked.empty()) continue;
        ++checked;
        down += !s.state.up;
    }
    return {checked, down};
}

// The failing endpoints (what they get is the snapshot builder's to decide: endpoint_health.h).
void Prober::rebuild_view() const {
    auto v = std::make_shared<EndpointHealthView>();
    for (const Slot& s : slots_)
        if (!s.state.up && s.t.unchecked.empty()) v->down.insert(s.t.key());
    view_ = std::move(v);
    view_dirty_ = false;
}

void Prober::finish(Probe& p, bool ok, const std::string& failure) {
    if (p.fd >= 0) {
        const linger lg{.l_onoff = 1, .l_linger = 0};  // RST: no TIME_WAIT holding the port
        if (p.type != Type::udp) setsockopt(p.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(p.fd);
        p.fd = -1;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - p.started).count();
    std::lock_guard lk(mu_);
    Result r = r_ok;
    if (!ok) {
        r = failure == "refused"            ? r_refused
            : failure == "timeout"          ? r_timeout
            : failure == "unreachable"      ? r_unreachable
            : failure.starts_with("status") ? r_status
            : failure == "bad reply"        ? r_bad_reply
                                            : r_error;
    }
    ++results_[r];
    if (p.epoch != epoch_ || p.slot >= slots_.size()) return;  // its targets were replaced
    Slot& s = slots_[p.slot];
    s.state.last_seconds = secs;
    if (ok) latency_.observe(secs);
    if (!s.state.observe(ok, s.t.check.rise, s.t.check.fall, unix_now(), failure)) return;
    (s.state.up ? to_up_ : to_down_) += 1;
    log_info(s.state.up ? fmt::format("health check: {} {} is up again ({} checks passed)", s.t.service,
                                      format_endpoint(s.t.ip, s.t.port), s.t.check.rise)
                        : fmt::format("health check: {} {} is down ({} checks failed, the last: {})", s.t.service,
                                      format_endpoint(s.t.ip, s.t.port), s.t.check.fall, failure));
    view_dirty_ = true;  // rebuilt when asked for: a thousand transitions at once cost one rebuild
    changes_.fetch_add(1, std::memory_order_release);
}

namespace {

// A socket bound to the port's address and port `sport` on its host interface, connecting to
// the endpoint; -1 with `err` set if that fails at once.
int open_probe(const ProbeTarget& t, uint16_t sport, int& err) {
    const bool udp = t.check.type == Type::udp;
    const int fd =
        socket(t.ip.is_v4() ? AF_INET : AF_INET6, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return err = errno, -1;
    const int one = 1;
    socklen_t len = 0;
    const sockaddr_storage src = sockaddr_of(t.source, sport, len);
    socklen_t dlen = 0;
    const sockaddr_storage dst = sockaddr_of(t.ip, t.port, dlen);
    if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, t.device.c_str(), static_cast<socklen_t>(t.device.size())) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, reinterpret_cast<const sockaddr*>(&src), len) < 0 ||
        (connect(fd, reinterpret_cast<const sockaddr*>(&dst), dlen) < 0 && errno != EINPROGRESS)) {
        err = errno;
        close(fd);
        return -1;
    }
    return fd;
}

constexpr char kUdpPayload[] = "svcgate health check\n";

}  // namespace

void Prober::start_due(std::vector<Probe>& flying) {
    const auto now = Clock::now();
    std::vector<Probe> starting;
    {
        std::lock_guard lk(mu_);
        auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
        if (heap_epoch_ != epoch_) {
            heap_.clear();
            for (size_t i = 0; i < slots_.size(); ++i)
                if (slots_[i].t.unchecked.empty()) heap_.emplace_back(slots_[i].due, i);
            std::make_heap(heap_.begin(), heap_.end(), later);
            heap_epoch_ = epoch_;
        }
        while (!heap_.empty() && heap_.front().first <= now && flying.size() + starting.size() < kMaxInFlight) {
            std::pop_heap(heap_.begin(), heap_.end(), later);
            const size_t i = heap_.back().second;
            Slot& s = slots_[i];
            const auto every = std::chrono::milliseconds(s.t.check.interval_ms);
            s.due += every;
            if (s.due <= now) s.due = now + every;  // it waited for room: the next one an interval on
            heap_.back().first = s.due;
            std::push_heap(heap_.begin(), heap_.end(), later);
            Probe p{.slot = i,
                    .epoch = epoch_,
                    .type = s.t.check.type,
                    .expect_reply = s.t.check.expect_reply,
                    .expect = s.t.check.expect,
                    .started = now,
                    .deadline = now + std::chrono::milliseconds(s.t.check.timeout_ms)};
            if (p.type == Type::http)
                p.request = fmt::format(
                    "GET {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: svcgate-health-check\r\nConnection: close\r\n\r\n",
                    s.t.check.path,
                    s.t.check.host.empty() ? (s.t.ip.is_v4() ? format_ip(s.t.ip) : "[" + format_ip(s.t.ip) + "]")
                                           : s.t.check.host);
            // The target, copied: the socket is opened outside the lock.
            starting.push_back(std::move(p));
            targets_starting_.push_back(s.t);
        }
    }
    for (size_t k = 0; k < starting.size(); ++k) {
        Probe& p = starting[k];
        const ProbeTarget& t = targets_starting_[k];
        // A free source port: every in-flight probe holds one, and there are twice as many.
        for (unsigned n = 0; n <= kLastPort - kFirstPort && ports_in_use_[port_cursor_]; ++n)
            port_cursor_ = static_cast<uint16_t>((port_cursor_ + 1) % (kLastPort - kFirstPort + 1));
        p.sport = static_cast<uint16_t>(kFirstPort + port_cursor_);
        port_cursor_ = static_cast<uint16_t>((port_cursor_ + 1) % (kLastPort - kFirstPort + 1));
        int err = 0;
        p.fd = open_probe(t, p.sport, err);
        if (p.fd < 0) {
            finish(p, false,
                   errno_result(err) == r_error ? fmt::format("error: {}", std::strerror(err))
                                                : kResultNames[errno_result(err)]);
            continue;
        }
        ports_in_use_[p.sport - kFirstPort] = true;
        if (p.type == Type::udp && send(p.fd, kUdpPayload, sizeof kUdpPayload - 1, 0) < 0) {
            const int e = errno;
            ports_in_use_[p.sport - kFirstPort] = false;
            finish(p, false, kResultNames[errno_result(e)]);
            continue;
        }
        flying.push_back(std::move(p));
    }
    targets_starting_.clear();
}

// One probe's socket is ready (`revents`), or its time is up: false while it goes on.
bool Prober::advance(Probe& p, short revents, bool expired) {
    auto fail = [&](const std::string& why) {
        finish(p, false, why);
        return true;
    };
    if (p.type == Type::udp) {
        if (revents) {
            char buf[512];
            if (recv(p.fd, buf, sizeof buf, 0) >= 0) return finish(p, true, {}), true;
            if (errno == EAGAIN) return false;
            return fail(kResultNames[errno_result(errno)]);  // an ICMP error: refused, unreachable
        }
        if (!expired) return false;
        if (p.expect_reply) return fail("timeout");
        return finish(p, true, {}), true;  // silence: nothing said it is closed
    }
    if (!p.connected) {
        if (!revents) return expired ? fail("timeout") : false;
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) return fail(kResultNames[errno_result(err)]);
        if (p.type == Type::tcp) return finish(p, true, {}), true;
        p.connected = true;
        if (send(p.fd, p.request.data(), p.request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(p.request.size()))
            return fail("error: the request was not sent");
        return false;
    }
    if (revents) {
        char buf[2048];
        const ssize_t n = recv(p.fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EAGAIN) return expired ? fail("timeout") : false;
        if (n < 0) return fail(kResultNames[errno_result(errno)]);
        p.reply.append(buf, static_cast<size_t>(n));
        const int code = http_status(p.reply);
        if (code < 0 || (code == 0 && n == 0)) return fail("bad reply");
        if (code > 0) {
            for (const auto& r : p.expect)
                if (code >= r.lo && code <= r.hi) return finish(p, true, {}), true;
            return fail(fmt::format("status {}", code));
        }
    }
    return expired ? fail("timeout") : false;
}

void Prober::run() {
    std::vector<Probe> flying;
    std::vector<pollfd> pfds;
    while (!stop_.load(std::memory_order_relaxed)) {
        start_due(flying);
        auto now = Clock::now();
        auto wake = now + std::chrono::milliseconds(100);  // stop_ and new targets are seen this often
        {
            std::lock_guard lk(mu_);
            if (!heap_.empty()) wake = std::min(wake, heap_.front().first);
        }
        pfds.clear();
        for (const Probe& p : flying) {
            wake = std::min(wake, p.deadline);
            const short ev = p.type != Type::udp && !p.connected ? POLLOUT : POLLIN;
            pfds.push_back({.fd = p.fd, .events = ev, .revents = 0});
        }
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
        poll(pfds.data(), pfds.size(), static_cast<int>(std::clamp<int64_t>(ms, 0, 100)));
        now = Clock::now();
        for (size_t i = 0; i < flying.size(); ++i) {
            Probe& p = flying[i];
            const uint16_t sport = p.sport;
            if (advance(p, pfds[i].revents, now >= p.deadline)) ports_in_use_[sport - kFirstPort] = false;
        }
        std::erase_if(flying, [](const Probe& p) { return p.fd < 0; });
    }
    for (Probe& p : flying) close(p.fd);
}

void Prober::metrics(MetricsText& m) const {
    std::lock_guard lk(mu_);
    m.family("svcgate_endpoint_health_up", "gauge",
             "1 while an endpoint passes its Service's health checks, 0 while it fails them");
    for (const Slot& s : slots_)
        if (s.t.unchecked.empty())
            m.sample("svcgate_endpoint_health_up",
                     fmt::format("service=\"{}\",endpoint=\"{}\"", s.t.service, format_endpoint(s.t.ip, s.t.port)),
                     uint64_t{s.state.up});
    m.family("svcgate_health_checks_total", "counter", "Health checks done, by result");
    for (int r = 0; r < r_count; ++r)
        m.sample("svcgate_health_checks_total", fmt::format("result=\"{}\"", kResultNames[r]), results_[r]);
    m.family("svcgate_health_transitions_total", "counter", "Endpoints that went up or down by their health checks");
    m.sample("svcgate_health_transitions_total", "to=\"up\"", to_up_);
    m.sample("svcgate_health_transitions_total", "to=\"down\"", to_down_);
    m.histogram("svcgate_health_check_seconds", "How long a passing health check took", latency_);
}

}  // namespace svcgate::ctl
