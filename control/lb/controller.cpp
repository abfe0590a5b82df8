#include "control/lb/controller.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "control/base/log.h"
#include "control/base/metrics_text.h"
#include "control/kube/json_tree.h"

namespace svcgate::ctl::lb {

namespace {

constexpr auto kMinPass = std::chrono::milliseconds(100);  // changes closer than this share a pass
constexpr auto kIdle = std::chrono::milliseconds(500);     // a config or role change is seen within it
constexpr size_t kMaxEvents = 1000;                        // events queued; more are dropped, counted
constexpr int kWriteTimeoutS = 3;                          // well within lease_duration - renew_deadline (elector.h)

// MetalLB's messages print the addresses as Go's %q of a []net.IP: ["1.2.3.0" "fd00::"].
std::string quoted(const std::vector<IpAddr>& ips) {
    std::string t = "[";
    for (const IpAddr& a : ips) t += (t.size() > 1 ? " \"" : "\"") + format_ip(a) + "\"";
    return t + "]";
}

}  // namespace

void TokenBucket::set(double qps, double burst) {
    qps_ = qps, burst_ = burst;
    tokens_ = std::min(tokens_, burst_);
    if (last_ == std::chrono::steady_clock::time_point{}) tokens_ = burst_;
}

void TokenBucket::refill(std::chrono::steady_clock::time_point now) {
    if (last_ != std::chrono::steady_clock::time_point{})
        tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * qps_);
    last_ = now;
}

bool TokenBucket::take(std::chrono::steady_clock::time_point now) {
    refill(now);
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
}

std::chrono::milliseconds TokenBucket::wait(std::chrono::steady_clock::time_point now) const {
    double t = tokens_;
    if (last_ != std::chrono::steady_clock::time_point{})
        t = std::min(burst_, t + std::chrono::duration<double>(now - last_).count() * qps_);
    if (t >= 1) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(static_cast<int64_t>((1 - t) / qps_ * 1000) + 1);
}

std::string Controller::identity_for(const std::string& node_name) {
    std::string host = node_name;
    if (host.empty()) {
        char buf[256] = {};
        host = gethostname(buf, sizeof buf - 1) == 0 ? buf : "svcgate";
    }
    std::random_device rd;
    return fmt::format("{}_{:08x}{:08x}", host, rd(), rd());
}

Controller::Controller(const LoadBalancerConfig& cfg, kube::KubeApi& api, std::string identity)
    : api_(api),
      elector_(cfg.election, std::move(identity), api.server(), api.credentials()),
      client_(api.server(), api.credentials()),
      cfg_(cfg) {}

Controller::~Controller() { stop(); }

void Controller::start() {
    elector_.start();
    thread_ = std::thread([this] { run(); });
}

void Controller::stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    elector_.stop();
}

void Controller::set_config(const LoadBalancerConfig& cfg) {
    std::lock_guard lk(mu_);
    cfg_ = cfg;
    ++cfg_generation_;
}

std::vector<const LbService*> Controller::views(std::set<std::string>& changed) {
    kube::KubeApi::Delta d = api_.changes_since(kube::Kind::services, services_seq_);
    services_seq_ = d.seq;
    if (d.full) {  // everything anew: what is not there any more is gone
        std::set<std::string> now;
        for (const kube::KubeApi::ObjectRef& o : d.changed) now.insert(o.key);
        for (const auto& [key, entry] : cache_)
            if (!now.count(key)) d.removed.push_back(key);
    }
    for (const std::string& key : d.removed)
        if (cache_.erase(key)) changed.insert(key);
    for (kube::KubeApi::ObjectRef& o : d.changed) {
        const auto it = cache_.find(o.key);
        if (it != cache_.end() && it->second.first == o.version) continue;
        LbService v = read_lb_service(ytree::Node(o.tree.get(), o.tree->roots[0]));
        // The echo of this gateway's own write (or a change to nothing it reads) decides nothing.
        const Result* held = alloc_.held(o.key);
        const bool echo = held && same_addresses(v.status_ips, held->ips) && v.status_pool == held->pool;
        const bool same_status = it != cache_.end() && same_addresses(v.status_ips, it->second.second.status_ips) &&
            v.status_pool == it->second.second.status_pool;
        if (it == cache_.end() || !same_ask(it->second.second, v) || !(echo || same_status)) changed.insert(o.key);
        cache_[o.key] = std::make_pair(std::move(o.version), std::move(v));
    }
    std::vector<const LbService*> out;
    out.reserve(cache_.size());
    for (const auto& [key, entry] : cache_) out.push_back(&entry.second);
    return out;
}

// The object as the API server answered a write (or a GET after a 409) stands for the version the
// watch still shows: a pass before the watch catches up decides on what the server holds, so a
// Service just written keeps its address (and is not written again) and a refused write is decided
// again on the object as it is now.
void Controller::remember(const std::string& key, const std::string& body) {
    const auto it = cache_.find(key);
    if (it == cache_.end()) return;
    std::string why;
    const nlohmann::json obj = kube::parse_bounded(body, why);
    if (!obj.is_object()) return;
    const auto tree = kube::json_tree(obj);
    it->second.second = read_lb_service(ytree::Node(tree.get(), 0));
}

NamespaceLabels Controller::namespaces() const {
    NamespaceLabels out;
    for (const kube::KubeApi::ObjectRef& o : api_.objects(kube::Kind::namespaces)) {
        const ytree::Node n(o.tree.get(), o.tree->roots[0]);
        const ytree::Node name = n["metadata"]["name"];
        if (name.IsScalar()) out[name.Scalar()] = object_labels(n);
    }
    return out;
}

bool Controller::event(const LbService& s, const char* type, const char* reason, std::string message) {
    std::map<std::string, std::string>& posted = last_event_[s.key];
    if (const auto it = posted.find(reason); it != posted.end() && it->second == message)
        return false;  // posted already for this decision
    posted[reason] = message;
    if (events_.size() >= kMaxEvents) {
        std::lock_guard lk(mu_);
        ++report_.events_dropped;
        return true;
    }
    events_.push_back(Event{s.ns, s.name, s.uid, s.resource_version, type, reason, std::move(message)});
    return true;
}

void Controller::want(const LbService& s, std::vector<IpAddr> ips, std::string pool) {
    if (same_addresses(ips, s.status_ips) && pool == s.status_pool) return;
    queue_.push_back(Want{s.key, s.ns, s.name, s.resource_version, std::move(ips), std::move(pool)});
}

void Controller::decide(const LbService& s, const NamespaceLabels& ns) {
    const Result r = alloc_.allocate(s, ns);
    if (!r.cleared.empty())
        event(s, "Normal", "ClearAssignment",
              fmt::format("current IP for \"{}\" not allowed by config, will attempt for new IP assignment: {}", s.key,
                          r.cleared));
    if (r) {
        last_event_[s.key].erase("AllocationFailed");  // a later failure is told again
        if (!same_addresses(r.ips, s.status_ips) && event(s, "Normal", "IPAllocated", "Assigned IP " + quoted(r.ips))) {
            std::lock_guard lk(mu_);
            ++allocations_[r.pool];
        }
        want(s, r.ips, r.pool);
        return;
    }
    last_event_[s.key].erase("IPAllocated");
    if (event(s, "Warning", "AllocationFailed",
              fmt::format("Failed to allocate IP for \"{}\": {}", s.key, r.message))) {
        std::lock_guard lk(mu_);
        ++failures_[static_cast<size_t>(r.failure)];
    }
    if (!s.request_error.empty()) return;  // MetalLB's LoadBalancerFailed: what it has stays
    want(s, {}, "");
}

void Controller::pass(bool writer) {
    std::set<std::string> changed;
    const std::vector<const LbService*> vs = views(changed);
    NamespaceLabels ns = namespaces();
    const bool full = dirty_ || ns != last_ns_;
    dirty_ = false;
    last_ns_ = ns;
    if (!full && changed.empty()) return;  // only the echoes of this gateway's own writes
    std::vector<const LbService*> managed;
    std::set<std::string> keys;
    for (const LbService* v : vs)
        if (v->managed(running_)) managed.push_back(v), keys.insert(v->key);
    for (const std::string& k : alloc_.holders())
        if (!keys.count(k)) alloc_.release(k);
    std::erase_if(last_event_, [&](const auto& e) { return !keys.count(e.first); });
    uint64_t assigned = 0;
    queue_.clear();
    if (!writer) {
        // A reader only re-learns, and only what changed: each Service's status is its own.
        for (const LbService* v : managed)
            if (full || changed.count(v->key)) alloc_.learn(*v, ns);
        for (const LbService* v : managed) assigned += alloc_.held(v->key) != nullptr;
    } else if (running_.pools) {
        // Services this gateway (or another svcgate) assigned that are no longer LoadBalancers.
        for (const LbService* v : vs)
            if (!v->load_balancer && !v->status_pool.empty()) want(*v, {}, "");
        std::stable_sort(managed.begin(), managed.end(), [](const LbService* a, const LbService* b) {
            if (a->status_ips.empty() != b->status_ips.empty()) return !a->status_ips.empty();
            return older(*a, *b);
        });
        // Every address in status that still fits is held before any Service is given a new one:
        // else, on a fresh allocator (a new writer) after a pool edit, an older Service moved out
        // of the pool would take the lowest address a younger one still holds in status.
        for (const LbService* v : managed) alloc_.learn(*v, ns);
        for (const LbService* v : managed) decide(*v, ns);
        for (const LbService* v : managed) assigned += alloc_.held(v->key) != nullptr;
    }
    const std::vector<PoolCount> counts = alloc_.counts();
    std::lock_guard lk(mu_);
    report_.pools.clear();
    for (const PoolCount& c : counts) {
        report::LbPool p{.name = c.name, .ipv4 = {}, .ipv6 = {}};
        if (c.v4.present) p.ipv4 = report::LbFamily{c.v4.assigned, c.v4.available};
        if (c.v6.present) p.ipv6 = report::LbFamily{c.v6.assigned, c.v6.available};
        report_.pools.push_back(std::move(p));
    }
    report_.services = managed.size();
    report_.assigned = assigned;
    report_.pending = managed.size() - assigned;
    report_.queued_writes = queue_.size();
}

void Controller::refetch(const Want& w) {
    const kube::HttpResult r =
        client_.get(fmt::format("/api/v1/namespaces/{}/services/{}", w.ns, w.name), kWriteTimeoutS);
    if (r.status == 200) remember(w.key, r.body);
}

void Controller::write_one() {
    Want w = std::move(queue_.front());
    queue_.pop_front();
    nlohmann::json patch;
    patch["metadata"]["resourceVersion"] = w.version;
    patch["metadata"]["annotations"][kPoolAnnotation] =
        w.pool.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.pool);
    nlohmann::json ingress = nullptr;
    for (const IpAddr& a : w.ips) ingress.push_back({{"ip", format_ip(a)}, {"ipMode", "VIP"}});
    patch["status"]["loadBalancer"]["ingress"] = ingress;
    // Checked last, and the write bounded by the time left: none runs past the renew deadline,
    // before which no other gateway can take the Lease.
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(elector_.time_left());
    if (left.count() < 1) return;
    const kube::HttpResult r =
        client_.send("PATCH", fmt::format("/api/v1/namespaces/{}/services/{}/status", w.ns, w.name), patch.dump(),
                     "application/merge-patch+json", static_cast<int>(std::min<int64_t>(kWriteTimeoutS, left.count())));
    const WriteResult result = r.status == 200 ? WriteResult::ok
        : r.status == 409                      ? WriteResult::conflict
        : r.status == 404                      ? WriteResult::not_found
                                               : WriteResult::error;
    {
        std::lock_guard lk(mu_);
        ++write_results_[static_cast<size_t>(result)];
        report_.queued_writes = queue_.size();
        if (r.status == 200) ++report_.writes;
        if (r.status == 409) ++report_.conflicts;
        if (r.status != 200 && r.status != 409 && r.status != 404) {
            ++report_.write_errors;
            report_.last_error = fmt::format("PATCH {} status: {}", w.key, r.transport.error());
        }
    }
    if (r.status == 200) {
        backoff_ = std::chrono::milliseconds(0);
        remember(w.key, r.body);
        return;
    }
    if (r.status == 404) return;      // deleted meanwhile
    if (r.status == 409) refetch(w);  // another writer came first: decide again on the object as it is
    // A refusal or a failing API server: back off, then a full pass.
    const auto least = std::chrono::milliseconds(r.status == 409 ? 100 : 500);
    backoff_ = std::min<std::chrono::milliseconds>(std::max(backoff_ * 2, least), std::chrono::seconds(30));
    retry_at_ = std::chrono::steady_clock::now() + backoff_;
    dirty_ = true;
    if (r.status != 409) {
        static RateLimit warn(4, std::chrono::seconds(60));
        warn.log(LogLevel::warning, fmt::format("load balancer: PATCH {} status: {}", w.key, r.transport.error()));
    }
}

void Controller::post_event() {
    Event e = std::move(events_.front());
    events_.pop_front();
    const std::string now = micro_time(std::chrono::system_clock::now());
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const nlohmann::json ev = {{"apiVersion", "v1"},
                               {"kind", "Event"},
                               {"metadata", {{"name", fmt::format("{}.{:x}", e.name, ns)}, {"namespace", e.ns}}},
                               {"involvedObject",
                                {{"apiVersion", "v1"},
                                 {"kind", "Service"},
                                 {"namespace", e.ns},
                                 {"name", e.name},
                                 {"uid", e.uid},
                                 {"resourceVersion", e.version}}},
                               {"reason", e.reason},
                               {"message", e.message},
                               {"type", e.type},
                               {"source", {{"component", "svcgate-lb"}}},
                               {"firstTimestamp", now.substr(0, 19) + "Z"},
                               {"lastTimestamp", now.substr(0, 19) + "Z"},
                               {"count", 1},
                               {"reportingComponent", "svcgate.io/lb"},
                               {"reportingInstance", elector_.identity()}};
    const kube::HttpResult r = client_.send("POST", fmt::format("/api/v1/namespaces/{}/events", e.ns), ev.dump(),
                                            "application/json", kWriteTimeoutS);
    std::lock_guard lk(mu_);
    if (r.status == 201 || r.status == 200) {
        ++report_.events;
        ++events_by_reason_[e.reason];
    } else {
        ++report_.events_dropped;
    }
}

void Controller::run() {
    using clock = std::chrono::steady_clock;
    uint64_t seen = UINT64_MAX, cfg_seen = UINT64_MAX;
    bool was_writer = false;
    clock::time_point last_pass{};
    while (!stopping_) {
        const bool synced = api_.synced(kube::Kind::services) && api_.synced(kube::Kind::namespaces);
        const bool writer = synced && elector_.leading();
        {
            std::lock_guard lk(mu_);
            if (cfg_generation_ != cfg_seen) {
                cfg_seen = cfg_generation_;
                running_ = cfg_;
                writes_.set(running_.write_qps, running_.write_burst);
                event_tokens_.set(running_.write_qps, running_.write_burst);
                dirty_ = true;
            }
        }
        // Only a gateway that can write campaigns for the Lease: one whose lists are not loaded or
        // that has no pools would hold it and write nothing.
        elector_.set_eligible(synced && running_.pools.has_value());
        if (writer != was_writer || dirty_) {
            if (writer != was_writer) {  // a new writer starts from status alone, as a restarted one does
                alloc_ = Allocator();
                queue_.clear(), events_.clear(), last_event_.clear();
                cache_.clear(), services_seq_ = 0;  // the views anew from what the watch holds
                was_writer = writer;
                dirty_ = true;
            }
            alloc_.set_pools(running_.pools ? *running_.pools : std::vector<LbPoolConfig>{});
        }
        const uint64_t gen = api_.generation();
        const auto now = clock::now();
        const bool due = synced && (gen != seen || dirty_);
        if (due && now - last_pass >= kMinPass) {
            seen = gen, last_pass = now;
            pass(writer);
            continue;
        }
        if (writer && !queue_.empty() && now >= retry_at_ && writes_.take(now)) {
            write_one();
            continue;
        }
        if (writer && !events_.empty() && event_tokens_.take(now)) {
            post_event();
            continue;
        }
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kIdle);
        if (writer && !queue_.empty())
            wait = std::min(wait,
                            std::max(writes_.wait(now), std::chrono::ceil<std::chrono::milliseconds>(retry_at_ - now)));
        if (writer && !events_.empty()) wait = std::min(wait, event_tokens_.wait(now));
        wait = std::max(wait, std::chrono::milliseconds(1));
        if (due)  // a pass waits out kMinPass; a change now would not wake us sooner
            std::this_thread::sleep_for(std::min<clock::duration>(wait, kMinPass - (now - last_pass)));
        else
            api_.wait_changed(gen, wait);  // not `seen`: before the lists are loaded, gen != seen
    }
}

report::LoadBalancer Controller::status() const {
    std::lock_guard lk(mu_);
    report::LoadBalancer r = report_;
    r.role = elector_.leading() ? "writer" : "reader";
    r.identity = elector_.identity();
    r.lb_class = cfg_.lb_class;
    r.default_class = cfg_.default_class;
    r.lease = elector_.status();
    r.pools_configured = cfg_.pools.has_value();
    return r;
}

void Controller::metrics(MetricsText& m) const {
    const report::LoadBalancer r = status();
    std::lock_guard lk(mu_);
    m.gauge("svcgate_lb_writer", "1 while this gateway holds the Lease and writes LoadBalancer status",
            uint64_t{r.role == "writer"});
    m.counter("svcgate_lb_leadership_lost_total", "Times the Lease could not be renewed within renew_deadline",
              elector_.lost());
    m.family("svcgate_lb_addresses", "gauge", "Pool addresses by family and state (assigned, available)");
    for (const report::LbPool& p : r.pools)
        for (const auto& [family, f] : {std::pair{"ipv4", p.ipv4}, std::pair{"ipv6", p.ipv6}}) {
            if (!f) continue;
            m.sample("svcgate_lb_addresses",
                     fmt::format("pool=\"{}\",family=\"{}\",state=\"assigned\"", p.name, family), f->assigned);
            m.sample("svcgate_lb_addresses",
                     fmt::format("pool=\"{}\",family=\"{}\",state=\"available\"", p.name, family), f->available);
        }
    m.family("svcgate_lb_services", "gauge", "LoadBalancer Services this gateway assigns for, by state");
    m.sample("svcgate_lb_services", "state=\"assigned\"", r.assigned);
    m.sample("svcgate_lb_services", "state=\"pending\"", r.pending);
    m.family("svcgate_lb_allocations_total", "counter", "Addresses given to a Service, by pool");
    for (const auto& [pool, n] : allocations_)
        m.sample("svcgate_lb_allocations_total", fmt::format("pool=\"{}\"", pool), n);
    m.family("svcgate_lb_allocation_failures_total", "counter", "Services that got no address, by reason");
    for (size_t i = 0; i < failures_.size(); ++i)
        m.sample("svcgate_lb_allocation_failures_total", fmt::format("reason=\"{}\"", kFailureNames[i]), failures_[i]);
    m.family("svcgate_lb_status_writes_total", "counter", "Status writes by result (ok, conflict, not_found, error)");
    for (size_t i = 0; i < write_results_.size(); ++i)
        m.sample("svcgate_lb_status_writes_total", fmt::format("result=\"{}\"", kWriteResultNames[i]),
                 write_results_[i]);
    m.family("svcgate_lb_events_total", "counter", "Events posted on Services, by reason");
    for (const auto& [reason, n] : events_by_reason_)
        m.sample("svcgate_lb_events_total", fmt::format("reason=\"{}\"", reason), n);
    m.counter("svcgate_lb_events_dropped_total", "Events not posted (queue full or refused)", r.events_dropped);
}

}  // namespace svcgate::ctl::lb
