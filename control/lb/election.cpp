#include "control/lb/election.h"

#include <random>

#include <fmt/format.h>

#include "control/base/log.h"

namespace svcgate::ctl::lb {

namespace {

constexpr const char* kJson = "application/json";
constexpr int kTimeoutS = 5;  // a request is answered, or given up, well within the lease

const nlohmann::json* at(const nlohmann::json& o, const char* a, const char* b) {
    if (!o.is_object() || !o.contains(a) || !o[a].is_object() || !o[a].contains(b)) return nullptr;
    return &o[a][b];
}

std::string text_at(const nlohmann::json& o, const char* a, const char* b) {
    const nlohmann::json* v = at(o, a, b);
    return v && v->is_string() ? v->get<std::string>() : std::string();
}

uint64_t number_at(const nlohmann::json& o, const char* a, const char* b) {
    const nlohmann::json* v = at(o, a, b);
    return v && v->is_number_unsigned()                        ? v->get<uint64_t>()
        : v && v->is_number_integer() && v->get<int64_t>() > 0 ? static_cast<uint64_t>(v->get<int64_t>())
                                                               : 0;
}

}  // namespace

std::string micro_time(std::chrono::system_clock::time_point t) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    const std::time_t s = static_cast<std::time_t>(us / 1000000);
    std::tm tm{};
    gmtime_r(&s, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                       tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1000000);
}

Elector::Elector(const LoadBalancerConfig::Election& cfg, std::string identity, const kube::ApiServer& server,
                 kube::Credentials& creds)
    : cfg_(cfg), id_(std::move(identity)), client_(server, creds) {}

Elector::~Elector() { stop(); }

namespace {
int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

bool Elector::leading() const { return time_left().count() > 0; }

std::chrono::nanoseconds Elector::time_left() const {
    if (!leading_.load()) return std::chrono::nanoseconds(0);
    const int64_t left = int64_t{cfg_.renew_deadline_s} * 1000000000 - (steady_ns() - renewed_ns_.load());
    return std::chrono::nanoseconds(std::max<int64_t>(left, 0));
}

void Elector::start() {
    thread_ = std::thread([this] { run(); });
}

void Elector::stop() {
    if (!thread_.joinable()) return;
    stopping_ = true;
    {
        std::lock_guard lk(wait_mu_);
        wait_cv_.notify_all();
    }
    thread_.join();
    if (leading_.exchange(false)) {
        log_info(fmt::format("load balancer: releasing the Lease {}/{}", cfg_.ns, cfg_.name));
        if (!release()) log_warning("load balancer: the Lease could not be released; it expires by itself");
    }
}

bool Elector::sleep_for(std::chrono::milliseconds d) {
    std::unique_lock lk(wait_mu_);
    wait_cv_.wait_for(lk, d, [&] { return stopping_.load(); });
    return !stopping_;
}

std::string Elector::path(bool collection) const {
    return collection ? fmt::format("/apis/coordination.k8s.io/v1/namespaces/{}/leases", cfg_.ns)
                      : fmt::format("/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}", cfg_.ns, cfg_.name);
}

void Elector::observe(const nlohmann::json& lease) {
    const std::string spec = lease.contains("spec") ? lease["spec"].dump() : "{}";
    std::lock_guard lk(mu_);
    observed_ = lease;
    if (spec != observed_spec_) {  // client-go: the record changed, as seen now on this clock
        observed_spec_ = spec;
        observed_time_ = std::chrono::steady_clock::now();
    }
}

nlohmann::json Elector::lease_with(const std::string& holder, const std::string& acquire, uint64_t transitions,
                                   uint32_t duration) const {
    nlohmann::json l = {{"apiVersion", "coordination.k8s.io/v1"},
                        {"kind", "Lease"},
                        {"metadata", {{"name", cfg_.name}, {"namespace", cfg_.ns}}}};
    {
        std::lock_guard lk(mu_);
        if (const std::string rv = text_at(observed_, "metadata", "resourceVersion"); !rv.empty())
            l["metadata"]["resourceVersion"] = rv;
    }
    l["spec"] = {{"holderIdentity", holder},
                 {"leaseDurationSeconds", duration},
                 {"acquireTime", acquire},
                 {"renewTime", micro_time(std::chrono::system_clock::now())},
                 {"leaseTransitions", transitions}};
    return l;
}

bool Elector::try_acquire_or_renew() {
    const std::string now = micro_time(std::chrono::system_clock::now());
    kube::HttpResult r = client_.get(path(false), kTimeoutS);
    if (r.status == 404) {  // nobody yet: create it
        const nlohmann::json l = lease_with(id_, now, 0, cfg_.lease_duration_s);
        nlohmann::json body = l;
        body["metadata"].erase("resourceVersion");
        r = client_.send("POST", path(true), body.dump(), kJson, kTimeoutS);
        if (r.status != 201 && r.status != 200) return false;
        const nlohmann::json created = nlohmann::json::parse(r.body, nullptr, false);
        observe(created.is_object() ? created : l);
        return true;
    }
    if (r.status != 200) return false;
    const nlohmann::json current = nlohmann::json::parse(r.body, nullptr, false);
    if (!current.is_object()) return false;
    observe(current);
    const std::string holder = text_at(current, "spec", "holderIdentity");
    // leaseDurationSeconds is an int32 in the API; a larger one (a forged or broken Lease) is
    // held to that, not left to overflow the clock's arithmetic.
    const uint64_t duration = std::min<uint64_t>(number_at(current, "spec", "leaseDurationSeconds"), INT32_MAX);
    uint64_t transitions = number_at(current, "spec", "leaseTransitions");
    std::string acquire = text_at(current, "spec", "acquireTime");
    if (!holder.empty() && holder != id_) {
        std::lock_guard lk(mu_);
        if (observed_time_ + std::chrono::seconds(duration) > std::chrono::steady_clock::now()) return false;
    }
    if (holder != id_) {
        ++transitions;
        acquire = now;
    }
    r = client_.send("PUT", path(false), lease_with(id_, acquire, transitions, cfg_.lease_duration_s).dump(), kJson,
                     kTimeoutS);
    if (r.status != 200) return false;  // 409: another took or renewed it first
    const nlohmann::json updated = nlohmann::json::parse(r.body, nullptr, false);
    if (updated.is_object()) observe(updated);
    return true;
}

bool Elector::release() {
    kube::HttpResult r = client_.get(path(false), kTimeoutS);
    if (r.status != 200) return false;
    const nlohmann::json current = nlohmann::json::parse(r.body, nullptr, false);
    if (!current.is_object()) return false;
    observe(current);
    if (text_at(current, "spec", "holderIdentity") != id_) return true;
    const nlohmann::json l =
        lease_with("", micro_time(std::chrono::system_clock::now()), number_at(current, "spec", "leaseTransitions"), 1);
    r = client_.send("PUT", path(false), l.dump(), kJson, kTimeoutS);
    return r.status == 200;
}

// client-go's loop: acquire (every retry period, jittered up to +20%), then renew every retry
// period; leadership is given up once renew_deadline passes without a renewal.
void Elector::run() {
    std::mt19937 rng{std::random_device{}()};
    const auto retry = std::chrono::milliseconds(cfg_.retry_period_s * 1000);
    while (!stopping_) {
        if (!eligible_) {  // it could not write: another gateway should
            if (leading_.exchange(false)) {
                log_info(fmt::format("load balancer: releasing the Lease {}/{}: this gateway cannot write now", cfg_.ns,
                                     cfg_.name));
                release();
            }
            if (!sleep_for(retry)) break;
            continue;
        }
        // The renewal counts from before its request: the server may have taken it any time after.
        const int64_t attempt = steady_ns();
        if (try_acquire_or_renew()) {
            renewed_ns_ = attempt;
            if (!leading_.exchange(true))
                log_info(fmt::format("load balancer: {} holds the Lease {}/{}: writing", id_, cfg_.ns, cfg_.name));
        } else if (leading_ && !leading()) {
            leading_ = false;
            ++lost_;
            log_warning(fmt::format("load balancer: the Lease {}/{} not renewed for {} s: no longer writing", cfg_.ns,
                                    cfg_.name, cfg_.renew_deadline_s));
        }
        auto wait = retry;
        if (!leading_)
            wait += std::chrono::milliseconds(std::uniform_int_distribution<int>(0, cfg_.retry_period_s * 200)(rng));
        if (!sleep_for(wait)) break;
    }
}

report::LbLease Elector::status() const {
    std::lock_guard lk(mu_);
    return report::LbLease{.ns = cfg_.ns,
                           .name = cfg_.name,
                           .holder = text_at(observed_, "spec", "holderIdentity"),
                           .renewed = text_at(observed_, "spec", "renewTime"),
                           .transitions = number_at(observed_, "spec", "leaseTransitions")};
}

}  // namespace svcgate::ctl::lb
