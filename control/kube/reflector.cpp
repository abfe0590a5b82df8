// The reflector: each kind's list, then its watch, as client-go's Reflector runs them (one
// thread per kind: KubeApi::run), each event checked and stored, a relist on 410 Gone or a stream
// that cannot be trusted, backoff between failures. The rest of KubeApi (the store's reads, the
// publish gate, status and metrics) is kube_api.cpp's.
//
// Runs on: the API watcher threads.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "control/base/clock.h"
#include "control/kube/api_client.h"
#include "control/kube/backoff.h"
#include "control/kube/json_tree.h"
#include "control/kube/kube_api.h"

namespace svcgate::ctl::kube {

namespace {

// A watch that ended sooner than this with no event did not live: client-go's "very short watch",
// a failure (backoff, relist), not the server's timeout.
constexpr auto kShortWatch = std::chrono::seconds(1);

}  // namespace

Status KubeApi::list(Kind k, ApiClient& c, bool& served, int& retry_after) {
    const KindInfo& info = kind_info(k);
    served = true;
    std::map<std::string, Stored> fresh;
    std::string cont, rv;
    bool unpaged = false;
    for (;;) {
        std::string path = unpaged ? fmt::format("{}?{}", info.path, selector(k).substr(1))
                                   : fmt::format("{}?limit={}{}", info.path, cfg_.list_page_size, selector(k));
        if (!cont.empty()) path += "&continue=" + query_escape(cont);
        HttpResult r = c.get(path, 60);
        count_request("LIST", r.status);
        retry_after = r.retry_after;
        if (r.status == 410 && !cont.empty()) {
            // The continue token expired (a list slower than compaction): client-go's pager falls
            // back to one unpaged LIST, which a server answers from one snapshot.
            fresh.clear(), cont.clear();
            unpaged = true;
            std::lock_guard lk(mu_);
            ++kinds_[static_cast<size_t>(k)].st.unpaged_lists;
            continue;
        }
        if (info.optional && (r.status == 404 || r.status == 403)) {
            std::lock_guard lk(mu_);
            KindState& ks = kinds_[static_cast<size_t>(k)];
            if (!ks.objects.empty() || !ks.st.synced) touched(k);
            while (!ks.objects.empty()) remove(ks, ks.objects.begin()->first);
            ks.st.synced = true;
            ks.st.last_error =
                fmt::format("LIST {}: HTTP {}: none held; tried again every minute", info.name, r.status);
            if (!first_synced_ && all_synced()) first_synced_ = std::chrono::steady_clock::now();
            served = false;
            return {};
        }
        if (r.status != 200)
            return r.transport.ok() ? Status::fail(fmt::format("LIST {}: HTTP {}", info.name, r.status)) : r.transport;
        std::string why;
        nlohmann::json j = parse_bounded(r.body, why);
        if (j.is_discarded() || !j.is_object() || !j.contains("items") || !j["items"].is_array()) {
            const Bad b = !j.is_discarded() ? Bad::malformed_list
                : why == "not JSON"         ? Bad::truncated
                                            : Bad::over_limits;
            bad(b, fmt::format("LIST {}: {}", info.name, why.empty() ? "not a list" : why));
            return Status::fail(fmt::format("LIST {}: the answer is not a {}List", info.name, info.kind));
        }
        for (nlohmann::json& item : j["items"]) {
            if (!selected(item)) continue;
            std::string key;
            Stored s;
            if (accept(k, item, key, s)) fresh[key] = std::move(s);
        }
        rv = string_at(j, "metadata", "resourceVersion");
        cont = string_at(j, "metadata", "continue");
        if (cont.empty()) break;
    }
    std::lock_guard lk(mu_);
    KindState& ks = kinds_[static_cast<size_t>(k)];
    std::vector<std::string> gone;  // meanwhile
    for (const auto& [key, s] : ks.objects)
        if (!fresh.count(key)) gone.push_back(key);
    for (const std::string& key : gone) remove(ks, key);
    for (auto& [key, s] : fresh) store(ks, key, std::move(s));
    ks.st.synced = true;
    ks.st.resource_version = rv;
    ++ks.st.lists;
    ks.st.last_error.clear();
    if (!first_synced_ && all_synced()) first_synced_ = std::chrono::steady_clock::now();
    touched(k);
    return {};
}

DecodedEvent decode_event(std::string_view line) {
    DecodedEvent d;
    std::string why;
    d.event = parse_bounded(line, why);
    if (d.event.is_discarded() && why != "not JSON") {  // nested too deep: never built, never walked
        d.bad = Bad::over_limits;
        d.detail = "an event " + why;
        return d;
    }
    const nlohmann::json& e = d.event;
    if (e.is_discarded() || !e.is_object() || !e.contains("type") || !e["type"].is_string() || !e.contains("object")) {
        d.bad = Bad::malformed_event;
        d.detail = fmt::format("{:.120}", line);
        return d;
    }
    const std::string& type = e["type"].get_ref<const std::string&>();
    d.type = static_cast<size_t>(std::find(kEventTypes.begin(), kEventTypes.end(), type) - kEventTypes.begin());
    if (d.type == kEventTypes.size()) {
        d.bad = Bad::unknown_event_type;
        d.detail = fmt::format("event type \"{:.40}\"", type);
    }
    return d;
}

bool KubeApi::event(Kind k, std::string_view line, WatchEnd& end) {
    const KindInfo& info = kind_info(k);
    DecodedEvent d = decode_event(line);
    if (d.bad != Bad::count) {
        bad(d.bad, fmt::format("{} watch: {}", info.name, d.detail));
        end = WatchEnd::untrusted;
        return false;
    }
    nlohmann::json& e = d.event;
    const size_t t = d.type;
    const std::string type = kEventTypes[t];
    nlohmann::json& obj = e["object"];
    {
        std::lock_guard lk(mu_);
        KindState& ks = kinds_[static_cast<size_t>(k)];
        ++ks.st.events[t];
        ks.st.last_event_unix = unix_now();
    }
    if (type == "ERROR") {  // a Status: 410 relists, anything else reconnects
        const nlohmann::json* code = member(obj, "code");
        const bool gone = code && code->is_number_integer() && code->get<int>() == 410;
        std::lock_guard lk(mu_);
        kinds_[static_cast<size_t>(k)].st.last_error = fmt::format(
            "watch ERROR event: {}", obj.is_object() && obj.contains("message") ? obj["message"].dump() : obj.dump());
        end = gone ? WatchEnd::gone : WatchEnd::failed;
        return false;
    }
    const std::string rv = string_at(obj, "metadata", "resourceVersion");
    if (type == "BOOKMARK") {
        if (rv.empty()) {
            bad(Bad::invalid_object, fmt::format("{} watch: a BOOKMARK without resourceVersion", info.name));
            return true;
        }
        std::lock_guard lk(mu_);
        kinds_[static_cast<size_t>(k)].st.resource_version = rv;
        return true;
    }
    const bool keep = type != "DELETED" && selected(obj);
    std::string key;
    Stored s;
    if (!accept(k, obj, key, s)) return true;  // counted; the next good event's version moves on
    std::lock_guard lk(mu_);
    KindState& ks = kinds_[static_cast<size_t>(k)];
    if (keep)
        store(ks, key, std::move(s));
    else
        remove(ks, key);  // deleted, or no longer selected
    ks.st.resource_version = rv;
    touched(k);
    return true;
}

KubeApi::WatchEnd KubeApi::watch(Kind k, ApiClient& c, int& retry_after) {
    const KindInfo& info = kind_info(k);
    std::string rv;
    {
        std::lock_guard lk(mu_);
        rv = kinds_[static_cast<size_t>(k)].st.resource_version;
    }
    const std::string path = fmt::format("{}?watch=1&allowWatchBookmarks=true&timeoutSeconds={}&resourceVersion={}{}",
                                         info.path, cfg_.watch_timeout_s, query_escape(rv), selector(k));
    WatchEnd end = WatchEnd::closed;
    // A stream silent past the server's own timeout (plus a margin), or past kWatchIdleSeconds
    // (the API server's bookmark period, a minute, plus a margin), is dead.
    const int idle = std::min(static_cast<int>(cfg_.watch_timeout_s) + 5, kWatchIdleSeconds);
    HttpResult r = c.stream(path, idle, [&](std::string_view line) { return event(k, line, end); });
    count_request("WATCH", r.status);
    retry_after = r.retry_after;
    if (end != WatchEnd::closed) return end;
    if (r.status == 410) return WatchEnd::gone;
    if (r.status == 200 && r.transport.ok()) return WatchEnd::closed;  // the server's timeout: watch on
    if (r.status == 200 && r.transport.error() == kCutInsideEvent) {
        bad(Bad::truncated, fmt::format("{} watch: the stream ended inside an event", info.name));
        return WatchEnd::untrusted;
    }
    if (r.status == 200 && r.transport.error() == kEventTooLong) {
        bad(Bad::over_limits, fmt::format("{} watch: {}", info.name, kEventTooLong));
        return WatchEnd::untrusted;
    }
    std::lock_guard lk(mu_);
    kinds_[static_cast<size_t>(k)].st.last_error = fmt::format(
        "WATCH {}: {}", info.name, r.transport.ok() ? fmt::format("HTTP {}", r.status) : r.transport.error());
    return WatchEnd::failed;
}

// client-go's reflector: list, then watch from the list's version; a watch that ends after it
// lived (the server's timeout) is resumed at once from the last version seen; any other end (410,
// a stream that cannot be trusted, an error, a watch that ended at once) relists after the
// backoff (backoff.h), which starts again from 0.8 s once 2 minutes passed without one.
void KubeApi::run(Kind k) {
    const KindInfo& info = kind_info(k);
    ApiClient client(server_, creds_);
    {
        std::lock_guard lk(wait_mu_);
        if (stopping_) return;
        clients_[static_cast<size_t>(k)] = &client;
    }
    RateLimit& warn = *warn_log_[static_cast<size_t>(k)];  // each kind its own: one's noise hides no other's
    Backoff backoff;
    bool need_list = true;
    while (!stopping_) {
        int retry_after = 0;
        if (need_list) {
            bool served = true;
            if (Status s = list(k, client, served, retry_after); s && !served) {
                if (!sleep_for(std::chrono::seconds(60))) break;
                continue;
            } else if (!s) {
                if (stopping_) break;
                {
                    std::lock_guard lk(mu_);  // the rate limit too: one per kind's thread
                    KindState& ks = kinds_[static_cast<size_t>(k)];
                    ks.st.last_error = s.error();
                    ++ks.st.reconnects;
                    warn.log(LogLevel::warning, fmt::format("kubernetes API {}: {}", server_.server, s.error()));
                }
                if (!sleep_for(backoff.next(std::chrono::steady_clock::now(), retry_after))) break;
                continue;
            }
            log_info(fmt::format("kubernetes API: {} listed: {} objects", info.name, [&] {
                std::lock_guard lk(mu_);
                return kinds_[static_cast<size_t>(k)].objects.size();
            }()));
            need_list = false;
        }
        const auto t0 = std::chrono::steady_clock::now();
        const uint64_t events0 = events_seen(k);
        WatchEnd end = watch(k, client, retry_after);
        if (stopping_) break;
        const bool lived = std::chrono::steady_clock::now() - t0 >= kShortWatch || events_seen(k) > events0;
        if (end == WatchEnd::closed && lived) continue;  // the server's timeout: watch on from the last version
        {
            std::lock_guard lk(mu_);
            KindState& ks = kinds_[static_cast<size_t>(k)];
            if (end == WatchEnd::closed) {
                ks.st.last_error = fmt::format("WATCH {}: the server ended the watch at once", info.name);
                end = WatchEnd::failed;
            }
            if (end == WatchEnd::failed) {
                ++ks.st.reconnects;
                warn.log(LogLevel::warning, fmt::format("kubernetes API {}: {}", server_.server, ks.st.last_error));
            }
            ++ks.st.relists;
        }
        need_list = true;
        if (!sleep_for(backoff.next(std::chrono::steady_clock::now(), retry_after))) break;
    }
    std::lock_guard lk(wait_mu_);
    clients_[static_cast<size_t>(k)] = nullptr;
}

}  // namespace svcgate::ctl::kube
