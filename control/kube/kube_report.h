// svcgatectl status's kubernetes.api: the API client's connection per kind, its requests, its
// publishes and what it left out. KubeApi::status() fills it (kube_api.h); views.h carries it in
// the status report, svcgatectl renders it.
//
// Runs on: any thread (plain data).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/base/report_members.h"

namespace svcgate::ctl::report {

// One kind the API client follows (control/kube/kube_api.h).
struct KubeKind {
    bool synced = false;
    uint64_t objects = 0;
    std::string resource_version;
    double last_event_unix = 0;
    uint64_t lists = 0, relists = 0, reconnects = 0, unpaged_lists = 0;
    Keyed<uint64_t> events;
    std::string last_error;
};
void members(Of<KubeKind> auto& r, auto&& f) {
    f("synced", r.synced), f("objects", r.objects), f("resource_version", r.resource_version),
        f("last_event_unix", r.last_event_unix), f("lists", r.lists), f("relists", r.relists),
        f("reconnects", r.reconnects), f("unpaged_lists", r.unpaged_lists), f("events", r.events),
        f("last_error", r.last_error);
}

struct Programming {
    uint64_t samples = 0;
    std::optional<double> p50_ms, p99_ms, max_ms;  // with samples
};
void members(Of<Programming> auto& r, auto&& f) {
    f("samples", r.samples), f("p50_ms", r.p50_ms, omit), f("p99_ms", r.p99_ms, omit), f("max_ms", r.max_ms, omit);
}

struct LeftOut {
    std::string object, reason, message;
};
void members(Of<LeftOut> auto& r, auto&& f) { f("object", r.object), f("reason", r.reason), f("message", r.message); }

// The API client (control/kube/kube_api.h).
struct KubeApi {
    std::string server, source, proxy;
    bool synced = false;
    double last_publish_unix = 0, pending_seconds = 0, stale_after_seconds = 0;
    bool stale = false;
    Keyed<Keyed<uint64_t>> requests;  // by verb, then HTTP code ("<error>": no answer)
    Keyed<KubeKind> kinds;
    uint64_t publishes = 0, pending_changes = 0;
    uint32_t min_sync_period_ms = 0;
    std::string credentials_error;
    uint64_t exec_runs = 0;
    double first_sync_ms = -1;  // -1: not yet
    Programming programming;
    Keyed<uint64_t> bad_input;
    std::vector<LeftOut> rejected;
    unsigned orphan_slices = 0;
};
void members(Of<KubeApi> auto& r, auto&& f) {
    f("server", r.server), f("source", r.source), f("proxy", r.proxy), f("synced", r.synced),
        f("last_publish_unix", r.last_publish_unix), f("pending_seconds", r.pending_seconds),
        f("stale_after_seconds", r.stale_after_seconds), f("stale", r.stale), f("requests", r.requests),
        f("kinds", r.kinds), f("publishes", r.publishes), f("pending_changes", r.pending_changes),
        f("min_sync_period_ms", r.min_sync_period_ms), f("credentials_error", r.credentials_error),
        f("exec_runs", r.exec_runs), f("first_sync_ms", r.first_sync_ms), f("programming", r.programming),
        f("bad_input", r.bad_input), f("rejected", r.rejected), f("orphan_slices", r.orphan_slices);
}

}  // namespace svcgate::ctl::report
