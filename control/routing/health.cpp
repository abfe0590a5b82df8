#include "control/routing/health.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "control/routing/announce.h"

namespace svcgate::ctl {

namespace {
// RFC 3339 in UTC with milliseconds, as Go's time.Time marshals in kube-proxy's body.
std::string rfc3339(double unix) {
    const auto secs = static_cast<std::time_t>(unix);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                       tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>((unix - static_cast<double>(secs)) * 1000));
}
}  // namespace

std::pair<int, std::string> healthz_answer(const HealthState& h, double now_unix, bool livez) {
    const bool ok = livez ? h.live : h.healthy;
    nlohmann::json j = {{"lastUpdated", rfc3339(h.last_update_unix)}, {"currentTime", rfc3339(now_unix)}};
    if (!livez) {
        j["nodeEligible"] = !h.draining;  // kube-proxy: false while its node is being deleted
        j["draining"] = h.draining;
        j["portsUp"] = h.ports_up;
        j["apiSynced"] = h.api_synced;
        j["apiFresh"] = h.api_fresh;
        if (h.endpoints_checked) {
            j["endpointsChecked"] = h.endpoints_checked;
            j["endpointsDown"] = h.endpoints_down;
            j["allEndpointsDown"] = h.endpoints_down == h.endpoints_checked;
        }
    }
    j["live"] = h.live;
    return {ok ? 200 : 503, j.dump() + "\n"};
}

std::vector<HealthCheckPort> health_check_ports(const Config& cfg) {
    std::vector<HealthCheckPort> out;
    for (const ServiceConfig& s : cfg.services)
        if (s.health_check_node_port && s.type == ServiceType::load_balancer && s.external_local)
            out.push_back({s.health_check_node_port, s.ns, s.name, local_ready_endpoints(s, cfg.cluster.node_name)});
    return out;
}

std::pair<int, std::string> health_check_answer(const HealthCheckPort& p, bool healthy) {
    const nlohmann::json j = {{"service", {{"namespace", p.ns}, {"name", p.name}}},
                              {"localEndpoints", p.local_endpoints},
                              {"serviceProxyHealthy", healthy}};
    return {p.local_endpoints > 0 && healthy ? 200 : 503, j.dump() + "\n"};
}

HealthCheckServers::HealthCheckServers(std::mutex& mu, const HealthState& health) : mu_(mu), health_(health) {}

HealthCheckServers::~HealthCheckServers() {
    for (auto& [port, l] : listeners_) stop(l);
}

void HealthCheckServers::stop(Listener& l) {
    if (l.server) l.server->stop();
    if (l.thread.joinable()) l.thread.join();
}

Status HealthCheckServers::update(const std::vector<HealthCheckPort>& ports) {
    std::string errors;
    {
        std::lock_guard lk(mu_);
        ports_.clear();
        for (const HealthCheckPort& p : ports) ports_[p.port] = p;
    }
    for (auto it = listeners_.begin(); it != listeners_.end();) {
        if (ports_.count(it->first)) {
            ++it;
            continue;
        }
        stop(it->second);
        it = listeners_.erase(it);
    }
    for (const auto& [port, p] : ports_) {
        if (listeners_.count(port)) continue;
        Listener l;
        l.server = std::make_unique<httplib::Server>();
        // Probes are short: one request per connection and two threads, so a client that holds a
        // connection open does not stop the next probe (it has 2 s to send its request).
        l.server->new_task_queue = [] { return new httplib::ThreadPool(2); };
        l.server->set_keep_alive_max_count(1).set_read_timeout(2, 0).set_write_timeout(2, 0).set_payload_max_length(
            1024);
        const uint16_t hp = port;
        l.server->Get(".*", [this, hp](const httplib::Request&, httplib::Response& res) {
            std::pair<int, std::string> a{503, "{}\n"};
            {
                std::lock_guard lk(mu_);
                if (auto f = ports_.find(hp); f != ports_.end()) a = health_check_answer(f->second, health_.healthy);
            }
            res.status = a.first;
            res.set_content(a.second, "application/json");
        });
        // Every address of the namespace, both families (the node IPs sit on the host interfaces).
        if (!l.server->bind_to_port("::", port) && !l.server->bind_to_port("0.0.0.0", port)) {
            errors += fmt::format("healthCheckNodePort {} ({}/{}): cannot listen\n", port, p.ns, p.name);
            continue;
        }
        l.thread = std::thread([s = l.server.get()] { s->listen_after_bind(); });
        for (int i = 0; i < 200 && !l.server->is_running(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        listeners_.emplace(port, std::move(l));
    }
    if (!errors.empty()) errors.pop_back();  // the last line's newline
    return errors.empty() ? Status() : Status::fail(errors);
}

}  // namespace svcgate::ctl
