// Follows a cluster's API server as kube-proxy's informers do (client-go's reflector): for each
// kind, Services (core/v1), EndpointSlices (discovery.k8s.io/v1), the gateway's own Node (core/v1,
// fieldSelector metadata.name=cluster.node_name: its labels, for topology) and ServiceCIDRs
// (networking.k8s.io/v1, KEP-1880), a paginated LIST (limit +
// continue), then a WATCH from the list's resourceVersion with allowWatchBookmarks and
// timeoutSeconds, resumed from the last event's or bookmark's version. 410 Gone (as a status or
// an ERROR event) relists; a stream that cannot be trusted (a malformed event, an event cut
// mid-object, an unknown event type) relists; any other failure reconnects after a jittered
// exponential backoff (0.8 s doubling to 30 s, as client-go's). Both kinds are listed without
// `service.kubernetes.io/headless` (kube-proxy's selector; checked again here, should a server
// ignore it). kube-proxy's other requirement, no `service.kubernetes.io/service-proxy-name`, is
// applied when the objects are added (add_kube_objects, cluster.proxy_name), so that a reload
// can change it and files and API follow one rule. The list and watch loop is reflector.cpp's; the
// store's reads, the publish gate, status and metrics are kube_api.cpp's.
//
// Publishing: nothing from the API until every kind has listed once (synced()); after that, due()
// says when the objects changed and the last publish is at least min_sync_period old, and
// apply() adds them to a config loaded from the file (the reload path: one reader for files and
// API, control/config/kube_objects.h). An object the reader refuses is left out and counted; the
// rest are served. A lost connection keeps the last good state. The Node and ServiceCIDRs are
// optional: without cluster.node_name no Node is followed, and a server that does not serve a kind
// or does not let this client read it (404, 403: an older cluster, a service account without
// node access) leaves that kind synced and empty, tried again every minute.
//
// Runs on: one thread per kind (list and watch), plus the control thread (due, apply, published,
// status, metrics). The objects and counters are under one mutex.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/base/status.h"
#include "control/base/histogram.h"
#include "control/base/log.h"
#include "control/config/config_model.h"
#include "control/config/kube_objects.h"
#include "control/kube/api_client.h"
#include "control/kube/kube_report.h"
#include "control/kube/kubeconfig.h"
#include "dataplane/base/enum_names.h"

namespace svcgate::ctl {
class MetricsText;
}

namespace svcgate::ctl::kube {

enum class Kind : uint8_t { services, slices, nodes, service_cidrs, namespaces };
inline constexpr size_t kKinds = 5;

struct KindInfo {
    const char* name;         // "services": status and metrics
    const char* path;         // "/api/v1/services"
    const char* kind;         // "Service"
    const char* api_version;  // "v1"
    bool optional;            // 403 or 404: none of them (KubeApi's header)
};
const KindInfo& kind_info(Kind k);

// A watch stream silent this long is dead: the API server sends a BOOKMARK every minute to a
// watch that asked for them (allowWatchBookmarks), so 75 s of nothing is a connection that no
// longer carries bytes (a load balancer's idle timeout, a failover, a conntrack flush). With the
// socket's keepalive (api_client.h), a dead connection is noticed within 75 s, not timeoutSeconds.
inline constexpr int kWatchIdleSeconds = 75;
// Changes unpublished this long at least (or two min_sync_periods) make the gateway unhealthy.
inline constexpr double kStaleMinSeconds = 60;

// The labels of a Node object join `labels`; those already there (the file's) stay.
void node_labels(const ytree::Node& node, std::map<std::string, std::string>& labels);
// The label selector of Services and EndpointSlices (no headless Services' slices), as a query value.
std::string label_selector();
// The same test on an object's labels.
bool selected(const nlohmann::json& obj);

// Stream-level problems, counted by reason (svcgate_kube_bad_input_total).
#define SVCGATE_KUBE_BAD(X)                                                                            \
    X(malformed_event, "malformed_event")       /* not JSON, or not {type, object} */                  \
    X(invalid_object, "invalid_object")         /* no metadata.name / resourceVersion, or no object */ \
    X(unexpected_kind, "unexpected_kind")       /* a kind this watch did not ask for */                \
    X(unknown_event_type, "unknown_event_type") /* not ADDED, MODIFIED, DELETED, BOOKMARK or ERROR */  \
    X(truncated, "truncated")                   /* the body ended inside an event or a list */         \
    X(malformed_list, "malformed_list")         /* a LIST answer that is not a list */                 \
    X(over_limits, "over_limits")               /* deeper than kMaxJsonDepth, or over kMaxEventBytes (json_tree.h) */
enum class Bad : uint8_t { SVCGATE_KUBE_BAD(SVCGATE_ENUM_ID) count };
inline constexpr std::array kBadNames{SVCGATE_KUBE_BAD(SVCGATE_ENUM_NAME)};
inline const char* bad_name(Bad b) { return enum_name(b, kBadNames); }

// The watch event types, in KindStatus::events' order.
inline constexpr std::array<const char*, 5> kEventTypes{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

// One line of a watch stream, decoded within json_tree.h's bounds: {type, object} with a known
// type, or why not (bad != Bad::count). The object is not checked here (KubeApi::accept).
struct DecodedEvent {
    nlohmann::json event;
    size_t type = 0;  // into kEventTypes
    Bad bad = Bad::count;
    std::string detail;  // what was wrong, for the log
};
DecodedEvent decode_event(std::string_view line);

struct KindStatus {
    bool synced = false;
    std::string resource_version;
    double last_event_unix = 0;
    uint64_t lists = 0, relists = 0, reconnects = 0;
    uint64_t unpaged_lists = 0;  // an expired continue token: the LIST again, unpaged
    std::array<uint64_t, kEventTypes.size()> events{};
    std::string last_error;
};

class KubeApi {
public:
    // Reads the kubeconfig (or the pod's service account); throws ConfigError. `node_name`
    // (cluster.node_name at start; "" = none) is the Node whose labels are followed.
    // `follow_namespaces`: also the Namespaces (their labels, for the load balancer's
    // namespace_selectors), which feed no publish.
    KubeApi(const KubeApiConfig& cfg, std::string node_name, bool follow_namespaces = false);
    ~KubeApi();
    KubeApi(const KubeApi&) = delete;
    KubeApi& operator=(const KubeApi&) = delete;

    void start();
    void stop();

    bool synced() const;  // every kind has listed once
    // A publish is due: synced, something changed, and the last publish is min_sync_period old.
    bool due(std::chrono::steady_clock::time_point now) const;
    // How long until due() holds with the changes held now; nullopt while there is nothing to
    // publish. The control loop waits no longer than this, so a change is not late by its tick.
    std::optional<std::chrono::milliseconds> until_due(std::chrono::steady_clock::time_point now) const;
    // Adds the objects held now to `cfg` (loaded from the file): what the next publish serves.
    bool apply(Config& cfg);  // false (nothing added) until synced
    // The publish of the last apply() went out: its changes are programmed.
    void published();
    // A reload that began at `started` failed (the file's config is broken: unreadable, or its
    // publish refused), before or after apply(): the changes stay due, and the next try waits
    // min_sync_period as a publish would, instead of retrying at once.
    void publish_failed(std::chrono::steady_clock::time_point started);

    report::KubeApi status() const;  // svcgatectl status's kubernetes.api
    void metrics(MetricsText& m) const;
    const ApiServer& server() const { return server_; }
    Credentials& credentials() { return creds_; }

    // The objects of kind `k` held now, by namespace/name (the load balancer's input).
    struct ObjectRef {
        std::string key, version;
        std::shared_ptr<const ytree::Tree> tree;
    };
    std::vector<ObjectRef> objects(Kind k) const;
    // What changed in kind `k` since `since` (a Delta's seq; 0: everything): the objects stored
    // since, the keys removed since; `full` when that cannot be told (since 0, or older than the
    // removals kept), and then `changed` holds every object. Cheap when little changed: no copy of
    // what did not.
    struct Delta {
        std::vector<ObjectRef> changed;
        std::vector<std::string> removed;
        bool full = false;
        uint64_t seq = 0;
    };
    Delta changes_since(Kind k, uint64_t since) const;
    bool synced(Kind k) const;
    // Counts every change to the Services and Namespaces held (the load balancer's input);
    // wait_changed returns once it is past `seen`, or after `timeout`, or at stop().
    uint64_t generation() const;
    uint64_t wait_changed(uint64_t seen, std::chrono::milliseconds timeout);
    // Changes from the API have waited unpublished longer than stale_after_seconds(): the
    // gateway's own publish is failing (/healthz turns 503, control_loop.cpp).
    bool stale(double now_unix) const;
    double stale_after_seconds() const;

private:
    struct Stored {
        std::shared_ptr<const ytree::Tree> tree;
        std::string name;                            // "Service default/web": the reader's messages
        std::string version;                         // metadata.resourceVersion
        double trigger = -1;                         // a slice's last-change-trigger-time (Unix seconds); -1: none
        std::shared_ptr<const KubeObjectRead> read;  // filled by the first apply() that takes it
        uint64_t seq = 0;                            // when it was stored (KindState::seq)
    };
    struct KindState {
        std::map<std::string, Stored> objects;  // by namespace/name: one order on every gateway
        KindStatus st;
        uint64_t seq = 0;                                      // counts the objects stored and removed
        std::deque<std::pair<uint64_t, std::string>> removed;  // (seq, key), the last kRemovedKept
        uint64_t pruned = 0;                                   // the last removal no longer kept
    };
    static constexpr size_t kRemovedKept = 65536;
    void remove(KindState& ks, const std::string& key);  // called with mu_ held
    enum class WatchEnd { closed, gone, untrusted, failed };

    void run(Kind k);  // the list/watch loop of one kind, on its thread
    // LIST of kind k, page by page, into its store. `served` false: an optional kind the server
    // does not serve or let us read, held as none (no failure).
    Status list(Kind k, ApiClient& c, bool& served, int& retry_after);
    std::string selector(Kind k) const;  // the LIST and WATCH query's selector, "&...Selector=..."
    bool followed(Kind k) const {
        return k == Kind::nodes ? !node_name_.empty() : k == Kind::namespaces ? follow_namespaces_ : true;
    }
    // A kind whose objects go into the config (a publish); the Namespaces do not.
    static bool feeds(Kind k) { return k != Kind::namespaces; }
    void touched(Kind k);  // an object of kind k changed; called with mu_ held
    WatchEnd watch(Kind k, ApiClient& c, int& retry_after);
    uint64_t events_seen(Kind k) const;
    void changed();  // called with mu_ held
    void count_request(const char* verb, int code);
    // One watch event line; false when the stream cannot be trusted any more (relist).
    bool event(Kind k, std::string_view line, WatchEnd& end);
    // An object of kind k checked and made into what the store holds; false (counted) if bad.
    bool accept(Kind k, nlohmann::json& obj, std::string& key, Stored& out);
    void bad(Bad b, const std::string& detail);
    // `s` becomes what `ks` holds under `key`, unless the same version is there already; a new
    // version's trigger time is queued for the programming latency. Called with mu_ held.
    void store(KindState& ks, const std::string& key, Stored&& s);
    bool all_synced() const;                      // called with mu_ held
    bool sleep_for(std::chrono::milliseconds d);  // false when stopping

    KubeApiConfig cfg_;
    const std::string node_name_;
    const bool follow_namespaces_;
    uint64_t generation_ = 0;
    std::condition_variable generation_cv_;  // with mu_
    ApiServer server_;
    Credentials creds_;
    mutable std::mutex mu_;
    std::array<KindState, kKinds> kinds_;
    std::array<uint64_t, static_cast<size_t>(Bad::count)> bad_{};
    std::array<std::unique_ptr<RateLimit>, static_cast<size_t>(Bad::count)> bad_log_;
    std::array<std::unique_ptr<RateLimit>, kKinds> warn_log_;              // failed LISTs and WATCHes, per kind
    uint64_t changes_ = 0, published_changes_ = 0, applying_changes_ = 0;  // object changes, counted
    // When the last publish began: min_sync_period runs between publish starts, as kube-proxy's
    // BoundedFrequencyRunner's minInterval runs between runs.
    std::chrono::steady_clock::time_point last_publish_{}, publish_started_{};
    double last_queued_unix_ = 0;    // kube-proxy's sync_proxy_rules_last_queued_timestamp_seconds
    double last_publish_unix_ = 0;   // kube-proxy's sync_proxy_rules_last_timestamp_seconds
    double pending_since_unix_ = 0;  // the oldest change not yet published
    std::map<std::pair<std::string, int>, uint64_t> requests_;  // (verb, HTTP code; 0: no answer) -> count
    std::vector<double> triggers_;  // last-change-trigger-times not yet programmed, oldest first
    size_t applying_ = 0;           // how many of them the last apply() took
    const double started_unix_;
    uint64_t publishes_ = 0;
    uint64_t attempts_ = 0;  // publishes and refused ones: min_sync_period runs from the last
    std::vector<RejectedObject> rejected_;
    unsigned orphan_slices_ = 0;
    std::map<std::string, std::string> rejected_logged_;  // those left out now -> the message logged
    Histogram programming_;                               // network_programming_duration_seconds
    std::array<double, 16384> recent_{};                  // the last programming_.count() durations, for quantiles
    std::optional<std::chrono::steady_clock::time_point> first_synced_;  // every kind listed, first time
    double first_sync_ms_ = -1;  // from then to the first publish done; -1: not yet
    report::Programming programming() const;

    std::atomic<bool> stopping_{false};
    std::atomic<int> running_{0};  // list/watch threads not yet out of run()
    std::mutex wait_mu_;
    std::condition_variable wait_cv_;
    std::array<ApiClient*, kKinds> clients_{};
    std::vector<std::thread> threads_;
};

// kube-proxy's network_programming_duration_seconds buckets (pkg/proxy/metrics).
const std::vector<double>& programming_buckets();

}  // namespace svcgate::ctl::kube
