#include "control/kube/kube_api.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "control/base/metrics_text.h"
#include "control/base/clock.h"
#include "control/kube/backoff.h"
#include "control/kube/api_client.h"
#include "control/kube/json_tree.h"

namespace svcgate::ctl::kube {

namespace {

constexpr const char* kHeadlessLabel = "service.kubernetes.io/headless";
constexpr const char* kTriggerAnnotation = "endpoints.kubernetes.io/last-change-trigger-time";

const std::array<KindInfo, kKinds> kInfo{{
    {"services", "/api/v1/services", "Service", "v1", false},
    {"endpointslices", "/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice", "discovery.k8s.io/v1", false},
    {"nodes", "/api/v1/nodes", "Node", "v1", true},
    {"servicecidrs", "/apis/networking.k8s.io/v1/servicecidrs", "ServiceCIDR", "networking.k8s.io/v1", true},
    {"namespaces", "/api/v1/namespaces", "Namespace", "v1", true},
}};

}  // namespace

const KindInfo& kind_info(Kind k) { return kInfo[static_cast<size_t>(k)]; }

// The Node's labels join the file's cluster.node_labels; a label the file sets stays as the file
// says (an operator's override).
void node_labels(const ytree::Node& node, std::map<std::string, std::string>& labels) {
    const ytree::Node l = node["metadata"]["labels"];
    if (!l.IsMap()) return;
    for (const auto& kv : l)
        if (kv.second.IsScalar()) labels.emplace(kv.first.Scalar(), kv.second.Scalar());
}

std::string label_selector() { return query_escape(std::string("!") + kHeadlessLabel); }

bool selected(const nlohmann::json& obj) {
    const nlohmann::json* meta = member(obj, "metadata");
    const nlohmann::json* labels = meta ? member(*meta, "labels") : nullptr;
    return !labels || !labels->is_object() || !labels->contains(kHeadlessLabel);
}

const std::vector<double>& programming_buckets() {
    // kube-proxy: 0.25 s ... 300 s, plus finer ones below for a gateway's sub-second programming.
    static const std::vector<double> b{
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,  2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12, 13, 14, 15,
        16,    17,   18,    19,   20,  21,   22,  23, 24,  25,  26,  27,  28,  29,  30,  31,  32,  33,  34, 35, 36, 37,
        38,    39,   40,    41,   42,  43,   44,  45, 46,  47,  48,  49,  50,  51,  52,  53,  54,  55,  56, 57, 58, 59,
        60,    65,   70,    75,   80,  85,   90,  95, 100, 105, 110, 115, 120, 150, 180, 210, 240, 270, 300};
    return b;
}

KubeApi::KubeApi(const KubeApiConfig& cfg, std::string node_name, bool follow_namespaces)
    : cfg_(cfg),
      node_name_(std::move(node_name)),
      follow_namespaces_(follow_namespaces),
      server_(cfg.in_cluster ? in_cluster() : load_kubeconfig(cfg.kubeconfig, cfg.context)),
      creds_(server_),
      started_unix_(unix_now()),
      programming_(programming_buckets()) {
    for (auto& r : bad_log_) r = std::make_unique<RateLimit>(1, std::chrono::seconds(60));
    for (auto& r : warn_log_) r = std::make_unique<RateLimit>(4, std::chrono::seconds(60));
}

KubeApi::~KubeApi() { stop(); }

void KubeApi::start() {
    for (size_t k = 0; k < kKinds; ++k) {
        if (!followed(static_cast<Kind>(k))) {  // nothing to wait for
            std::lock_guard lk(mu_);
            kinds_[k].st.synced = true;
            continue;
        }
        ++running_;
        threads_.emplace_back([this, k] {
            run(static_cast<Kind>(k));
            --running_;
        });
    }
}

void KubeApi::stop() {
    stopping_ = true;
    {
        std::lock_guard lk(mu_);  // a waiter in wait_changed sees stopping_
        generation_cv_.notify_all();
    }
    creds_.cancel();  // an exec plugin running now is killed
    // Again until every thread is out: a request that had not opened its socket when its client
    // was stopped would otherwise wait for its read timeout.
    while (running_ > 0) {
        {
            std::lock_guard lk(wait_mu_);
            for (ApiClient* c : clients_)
                if (c) c->stop();
        }
        wait_cv_.notify_all();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
}

bool KubeApi::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lk(wait_mu_);
    wait_cv_.wait_for(lk, d, [&] { return stopping_.load(); });
    return !stopping_;
}

void KubeApi::bad(Bad b, const std::string& detail) {
    const auto i = static_cast<size_t>(b);
    std::lock_guard lk(mu_);  // the rate limits too: both kinds' threads come here
    ++bad_[i];
    bad_log_[i]->log(LogLevel::warning, fmt::format("kubernetes API: {}: {}", bad_name(b), detail));
}

void KubeApi::store(KindState& ks, const std::string& key, Stored&& s) {
    const auto it = ks.objects.find(key);
    if (it != ks.objects.end() && it->second.version == s.version) return;  // a relist's: kept, read and all
    // As kube-proxy: only changes made after this process started.
    if (s.trigger >= started_unix_) triggers_.push_back(s.trigger);
    s.seq = ++ks.seq;
    if (it == ks.objects.end())
        ks.objects.emplace(key, std::move(s));
    else
        it->second = std::move(s);
}

bool KubeApi::all_synced() const {
    return std::all_of(kinds_.begin(), kinds_.end(), [](const KindState& k) { return k.st.synced; });
}

bool KubeApi::accept(Kind k, nlohmann::json& obj, std::string& key, Stored& out) {
    const KindInfo& info = kind_info(k);
    if (!obj.is_object()) {
        bad(Bad::invalid_object, fmt::format("{}: an object that is not a JSON object", info.name));
        return false;
    }
    // A LIST's items carry no kind; a watch's do. Another kind is not ours to take.
    const std::string kind = obj.contains("kind") && obj["kind"].is_string() ? obj["kind"].get<std::string>() : "";
    if (!kind.empty() && kind != info.kind) {
        bad(Bad::unexpected_kind, fmt::format("{} on the {} watch", kind, info.name));
        return false;
    }
    obj["kind"] = info.kind;
    obj["apiVersion"] = info.api_version;
    const std::string name = string_at(obj, "metadata", "name");
    std::string ns = string_at(obj, "metadata", "namespace");
    out.version = string_at(obj, "metadata", "resourceVersion");
    if (name.empty() || out.version.empty()) {
        bad(Bad::invalid_object, fmt::format("{}: an object without metadata.name or resourceVersion", info.name));
        return false;
    }
    if (ns.empty()) ns = "default";
    key = ns + "/" + name;
    nlohmann::json& meta = obj["metadata"];
    meta.erase("managedFields");
    if (const nlohmann::json* ann = member(meta, "annotations"))
        if (const nlohmann::json* t = member(*ann, kTriggerAnnotation); t && t->is_string())
            out.trigger = parse_rfc3339(t->get<std::string>());
    out.tree = json_tree(obj);
    out.name = fmt::format("{} {}", info.kind, key);
    return true;
}

uint64_t KubeApi::events_seen(Kind k) const {
    std::lock_guard lk(mu_);
    uint64_t n = 0;
    for (const uint64_t e : kinds_[static_cast<size_t>(k)].st.events) n += e;
    return n;
}

// Called with mu_ held: an object changed, a publish is due.
void KubeApi::changed() {
    const double now = unix_now();
    if (changes_ == published_changes_) pending_since_unix_ = now;
    ++changes_;
    last_queued_unix_ = now;
}

void KubeApi::touched(Kind k) {
    if (feeds(k)) changed();
    if (k != Kind::services && k != Kind::namespaces) return;  // what the load balancer reads
    ++generation_;
    generation_cv_.notify_all();
}

void KubeApi::remove(KindState& ks, const std::string& key) {
    if (!ks.objects.erase(key)) return;
    ks.removed.emplace_back(++ks.seq, key);
    if (ks.removed.size() > kRemovedKept) {
        ks.pruned = ks.removed.front().first;
        ks.removed.pop_front();
    }
}

KubeApi::Delta KubeApi::changes_since(Kind k, uint64_t since) const {
    std::lock_guard lk(mu_);
    const KindState& ks = kinds_[static_cast<size_t>(k)];
    Delta d{.changed = {}, .removed = {}, .full = false, .seq = ks.seq};
    // Removals no longer kept cannot be told: everything, as at the start.
    d.full = since == 0 || since < ks.pruned;
    for (const auto& [key, s] : ks.objects)
        if (d.full || s.seq > since) d.changed.push_back(ObjectRef{key, s.version, s.tree});
    if (!d.full)
        for (auto it = ks.removed.rbegin(); it != ks.removed.rend() && it->first > since; ++it)
            d.removed.push_back(it->second);
    return d;
}

std::vector<KubeApi::ObjectRef> KubeApi::objects(Kind k) const {
    std::lock_guard lk(mu_);
    std::vector<ObjectRef> out;
    const KindState& ks = kinds_[static_cast<size_t>(k)];
    out.reserve(ks.objects.size());
    for (const auto& [key, s] : ks.objects) out.push_back(ObjectRef{key, s.version, s.tree});
    return out;
}

bool KubeApi::synced(Kind k) const {
    std::lock_guard lk(mu_);
    return kinds_[static_cast<size_t>(k)].st.synced;
}

uint64_t KubeApi::generation() const {
    std::lock_guard lk(mu_);
    return generation_;
}

uint64_t KubeApi::wait_changed(uint64_t seen, std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu_);
    generation_cv_.wait_for(lk, timeout, [&] { return generation_ != seen || stopping_; });
    return generation_;
}

void KubeApi::count_request(const char* verb, int code) {
    std::lock_guard lk(mu_);
    ++requests_[{verb, code}];
}

double KubeApi::stale_after_seconds() const {
    return std::max(kStaleMinSeconds, 2.0 * static_cast<double>(cfg_.min_sync_ms) / 1e3);
}

bool KubeApi::stale(double now_unix) const {
    std::lock_guard lk(mu_);
    return changes_ != published_changes_ && all_synced() && now_unix - pending_since_unix_ > stale_after_seconds();
}

std::string KubeApi::selector(Kind k) const {
    switch (k) {
        case Kind::services:
        case Kind::slices:
            return "&labelSelector=" + label_selector();
        case Kind::nodes:
            return "&fieldSelector=" + query_escape("metadata.name=" + node_name_);  // kube-proxy's
        case Kind::service_cidrs:
        case Kind::namespaces:
            return {};
    }
    return {};
}

bool KubeApi::synced() const {
    std::lock_guard lk(mu_);
    return all_synced();
}

bool KubeApi::due(std::chrono::steady_clock::time_point now) const {
    const auto left = until_due(now);
    return left && left->count() == 0;
}

std::optional<std::chrono::milliseconds> KubeApi::until_due(std::chrono::steady_clock::time_point now) const {
    std::lock_guard lk(mu_);
    if (changes_ == published_changes_ || !all_synced()) return std::nullopt;
    if (attempts_ == 0) return std::chrono::milliseconds(0);
    const auto left = std::chrono::milliseconds(cfg_.min_sync_ms) - (now - last_publish_);
    return std::max(std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(left));
}

bool KubeApi::apply(Config& cfg) {
    // Each object is read once per version: the result stays beside it until a watch replaces it.
    // The trees and reads are shared and the names copied, so the reading runs unlocked.
    struct Item {
        size_t kind;
        std::string key, name;
        std::shared_ptr<const ytree::Tree> tree;
        std::shared_ptr<const KubeObjectRead> read;
    };
    std::vector<Item> items;
    {
        std::lock_guard lk(mu_);
        if (!all_synced()) return false;
        size_t n = 0;
        for (const KindState& ks : kinds_) n += ks.objects.size();
        items.reserve(n);
        for (size_t k = 0; k < kKinds; ++k)
            for (const auto& [key, s] : kinds_[k].objects) items.push_back(Item{k, key, s.name, s.tree, s.read});
        applying_ = triggers_.size();
        applying_changes_ = changes_;
        publish_started_ = std::chrono::steady_clock::now();
    }
    std::vector<size_t> unread;
    for (size_t i = 0; i < items.size(); ++i)
        if (!items[i].read && items[i].kind != static_cast<size_t>(Kind::nodes) &&
            items[i].kind != static_cast<size_t>(Kind::namespaces)) {
            const ytree::Tree& t = *items[i].tree;
            items[i].read =
                std::make_shared<const KubeObjectRead>(read_kube_object(ytree::Node(&t, t.roots[0]), items[i].name));
            unread.push_back(i);
        }
    {
        std::lock_guard lk(mu_);
        for (const size_t i : unread) {
            const auto it = kinds_[items[i].kind].objects.find(items[i].key);
            if (it != kinds_[items[i].kind].objects.end() && it->second.tree == items[i].tree)
                it->second.read = items[i].read;
        }
    }
    std::vector<const KubeObjectRead*> reads;
    reads.reserve(items.size());
    for (const Item& it : items) {
        if (it.kind == static_cast<size_t>(Kind::nodes))
            node_labels(ytree::Node(it.tree.get(), it.tree->roots[0]), cfg.cluster.node_labels);
        else if (it.kind != static_cast<size_t>(Kind::namespaces))
            reads.push_back(it.read.get());
    }
    std::vector<RejectedObject> rejected;
    unsigned orphans = 0;
    add_kube_objects(reads, cfg, rejected, orphans);
    // Each object left out is logged when it is first left out or its reason changes; the list
    // holds those left out now, no more.
    std::map<std::string, std::string> logged;
    for (const RejectedObject& r : rejected) {
        const auto before = rejected_logged_.find(r.name);
        if (before == rejected_logged_.end() || before->second != r.message) {
            static RateLimit rl(10, std::chrono::seconds(60));
            rl.log(
                LogLevel::warning,
                fmt::format("kubernetes API: {} left out ({}): {}", r.name, reject_reason_name(r.reason), r.message));
        }
        logged.emplace(r.name, r.message);
    }
    rejected_logged_ = std::move(logged);
    std::lock_guard lk(mu_);
    rejected_ = std::move(rejected);
    orphan_slices_ = orphans;
    return true;
}

void KubeApi::publish_failed(std::chrono::steady_clock::time_point started) {
    std::lock_guard lk(mu_);
    applying_ = 0;
    last_publish_ = started;
    ++attempts_;  // min_sync_period runs from it
}

void KubeApi::published() {
    const double now = unix_now();
    std::lock_guard lk(mu_);
    // The changes the applied objects held; what arrived while the publish was built stays due.
    const size_t n = std::min(applying_, triggers_.size());
    for (size_t i = 0; i < n; ++i) {
        const double d = std::max(0.0, now - triggers_[i]);
        recent_[programming_.count() % recent_.size()] = d;
        programming_.observe(d);
    }
    triggers_.erase(triggers_.begin(), triggers_.begin() + static_cast<long>(n));
    applying_ = 0;
    published_changes_ = applying_changes_;
    last_publish_ = publish_started_;
    last_publish_unix_ = now;
    if (changes_ != published_changes_) pending_since_unix_ = last_queued_unix_;  // what came meanwhile
    if (publishes_ == 0 && first_synced_)
        first_sync_ms_ =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - *first_synced_).count();
    ++publishes_;
    ++attempts_;
}

// Quantiles of the last programming durations (the histogram's buckets are kube-proxy's, too
// coarse below a second). Called with mu_ held.
report::Programming KubeApi::programming() const {
    std::vector<double> v(
        recent_.begin(), recent_.begin() + static_cast<long>(std::min<uint64_t>(programming_.count(), recent_.size())));
    if (v.empty()) return {};
    std::sort(v.begin(), v.end());
    auto q = [&](double p) {
        return 1e3 * v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
    };
    return {.samples = v.size(), .p50_ms = q(0.5), .p99_ms = q(0.99), .max_ms = 1e3 * v.back()};
}

report::KubeApi KubeApi::status() const {
    std::lock_guard lk(mu_);
    const double now = unix_now();
    const bool pending = changes_ != published_changes_;
    report::KubeApi r{.server = server_.server,
                      .source = server_.source,
                      .proxy = proxy_for(server_),
                      .synced = true,
                      .last_publish_unix = last_publish_unix_,
                      .stale_after_seconds = stale_after_seconds(),
                      .publishes = publishes_,
                      .pending_changes = changes_ - published_changes_,
                      .min_sync_period_ms = cfg_.min_sync_ms,
                      .credentials_error = creds_.error(),
                      .exec_runs = creds_.exec_runs(),
                      .first_sync_ms = first_sync_ms_,
                      .programming = programming(),
                      .orphan_slices = orphan_slices_};
    for (size_t k = 0; k < kKinds; ++k) {
        const KindStatus& st = kinds_[k].st;
        r.synced = r.synced && st.synced;
        report::KubeKind kind{.synced = st.synced,
                              .objects = kinds_[k].objects.size(),
                              .resource_version = st.resource_version,
                              .last_event_unix = st.last_event_unix,
                              .lists = st.lists,
                              .relists = st.relists,
                              .reconnects = st.reconnects,
                              .unpaged_lists = st.unpaged_lists,
                              .last_error = st.last_error};
        for (size_t t = 0; t < kEventTypes.size(); ++t) kind.events.add(std::string(kEventTypes[t]), st.events[t]);
        r.kinds.add(kInfo[k].name, std::move(kind));
    }
    r.pending_seconds = pending && r.synced ? now - pending_since_unix_ : 0.0;
    r.stale = pending && r.synced && now - pending_since_unix_ > stale_after_seconds();
    // By verb, then code: the map's order (verb, code) is the listing's.
    for (const auto& [key, n] : requests_) {
        if (r.requests.items.empty() || r.requests.items.back().first != key.first) r.requests.add(key.first, {});
        r.requests.items.back().second.add(key.second ? std::to_string(key.second) : "<error>", n);
    }
    for (size_t b = 0; b < bad_.size(); ++b) r.bad_input.add(bad_name(static_cast<Bad>(b)), bad_[b]);
    for (const RejectedObject& x : rejected_)
        r.rejected.push_back({.object = x.name, .reason = reject_reason_name(x.reason), .message = x.message});
    return r;
}

// The metrics read the report status() builds: one walk of the state for both.
void KubeApi::metrics(MetricsText& m) const {
    const report::KubeApi r = status();
    const auto per_kind = [&](const char* name, const char* type, const char* help, auto&& value) {
        m.family(name, type, help);
        for (const auto& [kind, k] : r.kinds.items) m.sample(name, fmt::format("kind=\"{}\"", kind), value(k));
    };
    per_kind("svcgate_kube_synced", "gauge", "1 once the kind has been listed from the API server",
             [](const report::KubeKind& k) { return uint64_t{k.synced}; });
    per_kind("svcgate_kube_objects", "gauge", "Objects held from the API server",
             [](const report::KubeKind& k) { return k.objects; });
    m.family("svcgate_kube_events_total", "counter", "Watch events by kind and type");
    for (const auto& [kind, k] : r.kinds.items)
        for (const auto& [type, n] : k.events.items)
            m.sample("svcgate_kube_events_total", fmt::format("kind=\"{}\",type=\"{}\"", kind, type), n);
    m.family("svcgate_kube_lists_total", "counter", "Complete LISTs (the first, and each relist)");
    m.family("svcgate_kube_relists_total", "counter", "Relists: 410 Gone or a stream that could not be trusted");
    m.family("svcgate_kube_reconnects_total", "counter", "Failed LISTs and WATCHes retried after a backoff");
    for (const auto& [kind, k] : r.kinds.items) {
        const std::string l = fmt::format("kind=\"{}\"", kind);
        m.sample("svcgate_kube_lists_total", l, k.lists);
        m.sample("svcgate_kube_relists_total", l, k.relists);
        m.sample("svcgate_kube_reconnects_total", l, k.reconnects);
    }
    m.family("svcgate_kube_bad_input_total", "counter", "Events and answers from the API server refused, by reason");
    for (const auto& [reason, n] : r.bad_input.items)
        m.sample("svcgate_kube_bad_input_total", fmt::format("reason=\"{}\"", reason), n);
    // What the report carries as names only, the left-out objects' reasons, the queue time and the
    // histogram: read under the lock.
    std::lock_guard lk(mu_);
    m.family("svcgate_kube_rejected_objects", "gauge", "Objects left out of the last publish, by reason");
    uint64_t by_reason[kRejectReasonNames.size()] = {};
    for (const RejectedObject& x : rejected_) ++by_reason[static_cast<size_t>(x.reason)];
    by_reason[static_cast<size_t>(RejectReason::orphan_slice)] = r.orphan_slices;
    for (size_t i = 0; i < kRejectReasonNames.size(); ++i)
        m.sample("svcgate_kube_rejected_objects", fmt::format("reason=\"{}\"", kRejectReasonNames[i]), by_reason[i]);
    m.gauge("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
            "When the last change from the API server was queued for a publish (kube-proxy's name)", last_queued_unix_,
            3);
    m.gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds",
            "When the last publish with the API server's objects went out (kube-proxy's name); 0: none yet",
            r.last_publish_unix, 3);
    m.family("svcgate_kube_rest_client_requests_total", "counter",
             "Requests to the API server by verb and HTTP code (client-go's rest_client_requests_total)");
    for (const auto& [verb, codes] : r.requests.items)
        for (const auto& [code, n] : codes.items)
            m.sample("svcgate_kube_rest_client_requests_total", fmt::format("verb=\"{}\",code=\"{}\"", verb, code), n);
    m.histogram("kubeproxy_network_programming_duration_seconds",
                "From an EndpointSlice's last-change-trigger-time to the publish that applied it (kube-proxy's name)",
                programming_);
}

}  // namespace svcgate::ctl::kube
