#include "control/daemon/control_loop.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <rte_ethdev.h>

#include "control/api/commands.h"
#include "control/api/control_server.h"
#include "control/api/metrics.h"
#include "control/api/telemetry.h"
#include "control/base/clock.h"
#include "control/snapshot/flow_scan.h"
#include "control/base/log.h"
#include "control/config/config_fields.h"
#include "control/config/yaml_config.h"
#include "control/daemon/host_interface.h"
#include "control/daemon/notify.h"
#include "control/daemon/watcher.h"
#include "control/kube/kube_api.h"
#include "control/lb/controller.h"
#include "control/probe/prober.h"
#include "control/routing/announce.h"
#include "control/routing/health.h"
#include "control/state/table_watch.h"
#include "control/trace/trace.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) { g_signal.store(sig); }

// The ports as published: the addresses taken over from dead peers (sync.h) added to the ports
// whose subnets hold them, as host routes (/32, /128): answered (ARP, ND), their flows served,
// but never a connected route or a masquerade source of their own.
void add_adopted(std::vector<PortConfig>& ports, const std::vector<IpAddr>& adopted) {
    for (const IpAddr& a : adopted) {
        for (PortConfig& p : ports) {
            const bool on_link = std::any_of(p.addresses.begin(), p.addresses.end(),
                                             [&](const IpCidr& c) { return c.contains(a) && c.addr != a; });
            if (!on_link) continue;
            const IpCidr host{a, static_cast<uint8_t>(a.is_v4() ? 32 : 128)};
            if (std::find(p.addresses.begin(), p.addresses.end(), host) == p.addresses.end())
                p.addresses.push_back(host);
            break;
        }
    }
}

// `cfg` as published (a copy: the running config keeps its own ports).
Config with_adopted(const Config& cfg, const std::vector<IpAddr>& adopted) {
    Config out = cfg;
    add_adopted(out.dataplane.ports, adopted);
    return out;
}

// Reload: read, keep what takes a restart, publish.
ReloadOutcome reload(DaemonState& st, Publisher& pub, WorkerShared& shared, const std::string& trigger,
                     const std::vector<IpAddr>& adopted) {
    // A config that keeps failing (a file saved over and over) or a neighbor list far larger than
    // the cache must not flood the journal.
    static RateLimit full(8, std::chrono::seconds(60)), refused(5, std::chrono::seconds(60));
    const auto t0 = std::chrono::steady_clock::now();
    PublishResult r;
    bool api = false;
    try {
        Config next = load_config_file(st.config_path, ObjectErrors::leave_out);
        for (const ConfigIssue& i : next.left_out)  // listed in status, counted; logged as they come
            full.log(LogLevel::warning, fmt::format("reload: a manifest's object is left out: {}", i.str()));
        const std::string restart = keep_restart_fields(next, st.cfg);
        api = st.kube && st.kube->apply(next);  // the API's objects beside the file's
        // Published with the adopted addresses; kept as running without them. `next` is not
        // copied (10,000 Services take tens of ms to copy): its ports are, and swapped back.
        std::vector<PortConfig> own_ports;
        if (!adopted.empty()) {
            own_ports = next.dataplane.ports;
            add_adopted(next.dataplane.ports, adopted);
        }
        Config retired;                     // the config this one replaces: freed after the publish, not during it
        r = pub.publish(next, [&] {         // called once the snapshot is built and live; `next` unused after
            if (api) st.kube->published();  // programmed: what the latency metric measures
            for (const IpAddr& a : pin_neighbors(shared.neighbors, shared.neighbors6, next.dataplane.neighbors,
                                                 st.cfg.dataplane.neighbors))
                full.log(LogLevel::warning, fmt::format("neighbor {}: the neighbor cache has no room", format_ip(a)));
            if (!adopted.empty()) next.dataplane.ports = std::move(own_ports);
            retired = std::exchange(st.cfg, std::move(next));
            if (st.lb) st.lb->set_config(st.cfg.load_balancer);  // pools, class, write rates
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++st.reload.ok;
            st.reload.last_ok = true;
            st.reload.last_error.clear();
            st.reload.last_seconds = secs;
            st.reload.last_trigger = trigger;
            st.reload.observe(secs, unix_now());
        });
        if (!restart.empty())
            log_warning(fmt::format("reload: {} changed; that takes a restart (the rest is applied)", restart));
    } catch (const std::exception& e) {
        // A file that does not load fails before apply(): the API's changes wait all the same,
        // or the loop would read the file again at once, and again (a core's worth of CPU).
        if (st.kube) st.kube->publish_failed(t0);
        std::lock_guard lk(st.mu);
        ++st.reload.failed;
        st.reload.last_ok = false;
        st.reload.last_error = e.what();
        std::string m = fmt::format("reload failed ({}), the running config stays:\n{}", trigger, e.what());
        refused.log(LogLevel::err, m);
        return {false, m + "\n"};
    }
    std::string m = fmt::format(
        "reloaded {} ({}): generation {}, {} service ports, published in {:.1f} ms; flows to "
        "removed endpoints: {} TCP closed, {} datagram removed (of {} earlier flows)",
        st.config_path, trigger, r.generation, r.service_ports, st.reload.last_seconds * 1e3, r.sweep.tcp_closed,
        r.sweep.dgram_removed, r.sweep.scanned);
    log_info(m);
    return {true, m + "\n"};
}

// This gateway's TCP connections not yet closing, and its datagram flows that carried a packet in
// the last 10 s: what a drain waits for (replicas of the peers' flows are theirs to wait for).
// Replicating (`replicated`), a TCP connection counts only while it too carried a packet in the
// last 10 s: its peers hold it, and once the drain withdrew this gateway its packets go to them
// (each gateway then sees part of its close, so its state here may never reach the end).
template <typename K>
uint32_t open_connections(const BasicFlowTable<K>& table, uint32_t now, bool replicated) {
    uint32_t n = 0;
    scan_live_flows(table, [&](uint32_t, const BasicFlow<K>& f) {
        const FlowState sv = FlowState::load(f.state);
        if (f.origin.load(std::memory_order_relaxed) != 0 || sv.gone()) return true;
        const uint32_t seen = f.last_seen.load(std::memory_order_relaxed);
        const bool recent = seen >= now || now - seen < 10;  // another worker's clock may be ahead of ours
        if (static_cast<Proto>(f.key[0].proto) == Proto::tcp) {
            n += sv.tcp_open() && (!replicated || recent);
        } else {
            n += recent;
        }
        return true;
    });
    return n;
}

// The control loop's health duties (health.h, announce.h): every 100 ms the state; the
// announcement table when its set changes (and every 10 s, should someone have flushed it); the
// healthCheckNodePort listeners after each reload; while draining, the connections left once a
// second. done() turns true when a drain is over.
class HealthKeeper {
public:
    HealthKeeper(DaemonState& st, Runtime& rt, const Publisher& pub)
        : st_(st),
          rt_(rt),
          pub_(pub),
          checks_(st.mu, st.health),
          announcer_(st.cfg.routing.table, first_host_interface(rt)) {
        token_ = rte_rcu_qsbr_start(rt.qsbr.get());
        last_progress_ = std::chrono::steady_clock::now();
        reconfigured();
    }
    // After a reload: the set to announce and the health-check listeners.
    void reconfigured() {
        set_ = announce_set(st_.cfg);
        if (Status s = checks_.update(health_check_ports(st_.cfg)); !s) log_err(s.error());
        next_sync_ = {};
    }
    void tick() {
        const auto now = std::chrono::steady_clock::now();
        if (now < next_tick_) return;
        next_tick_ = now + std::chrono::milliseconds(100);
        // Progress: every worker online when the token was taken has passed a quiescent state.
        if (rte_rcu_qsbr_check(rt_.qsbr.get(), token_, false) == 1) {
            last_progress_ = now;
            token_ = rte_rcu_qsbr_start(rt_.qsbr.get());
        }
        bool up = true;
        for (const Port& p : rt_.ports) up = up && link_up(p.id());
        uint32_t left = 0;
        bool counted = false;
        const bool draining = [&] {
            std::lock_guard lk(st_.mu);
            return st_.health.draining;
        }();
        if (draining && now >= next_count_) {
            next_count_ = now + std::chrono::seconds(1);
            const uint32_t t = flow_clock_now();
            const bool replicated = rt_.sync != nullptr;
            left = open_connections(*rt_.flows, t, replicated) + open_connections(*rt_.flows6, t, replicated);
            counted = true;
        }
        std::vector<IpCidr> want;
        {
            std::lock_guard lk(st_.mu);
            HealthState& h = st_.health;
            h.live = pub_.generation() > 0 &&
                std::chrono::duration<double>(now - last_progress_).count() < HealthState::kLiveSeconds;
            h.ports_up = up;
            h.synced = !st_.sync || st_.sync->ready();
            // kube-proxy's "has synced": no announcement of a half-known cluster.
            h.api_synced = !st_.kube || st_.kube->synced();
            // A gateway whose publishes keep failing serves a cluster that has moved on: behind
            // ECMP, its peers (publishing fine) should take its traffic. The API being down is
            // not this: nothing is pending then, and the last good state serves on.
            h.api_fresh = !st_.kube || !st_.kube->stale(unix_now());
            h.healthy = h.live && up && !h.draining && h.synced && h.api_synced && h.api_fresh;
            h.last_update_unix = st_.reload.last_ok_unix;
            if (h.draining && counted) h.connections_left = left, drain_seen_ = true;
            if (!h.draining) drain_seen_ = false;
            if (h.healthy && announcer_.table() != 0) want = set_;
            if (h.healthy != was_healthy_)
                log_info(fmt::format(
                    "health: {}{}", h.healthy ? "healthy" : "unhealthy",
                    h.healthy ? ", announcing"
                              : fmt::format(" (live {}, ports up {}, draining {}, flows synced {}, API synced "
                                            "{}, API changes published {}), withdrawing",
                                            h.live, up, h.draining, h.synced, h.api_synced, h.api_fresh)));
            was_healthy_ = h.healthy;
        }
        if (want != announced_ || now >= next_sync_) {
            const Status s = announcer_.sync(want);
            announced_ = want;
            next_sync_ = now + std::chrono::seconds(10);
            std::vector<std::string> names;
            for (const IpCidr& c : want) names.push_back(format_cidr(c));
            std::lock_guard lk(st_.mu);
            if (!s && s.error() != st_.health.announce_error) log_err("announcing: " + s.error());
            st_.health.announce_error = s.error();
            st_.health.announced = std::move(names);
        }
    }
    // A drain is over: no connection left (counted after the drain began), but not before the
    // withdrawal has had kDrainMinSeconds to reach the routers (new connections may still arrive
    // until then); with replication, once its flows are handed over; or its deadline.
    bool done() {
        std::lock_guard lk(st_.mu);
        const HealthState& h = st_.health;
        if (!h.draining || !drain_seen_) {
            handing_over_ = false;
            return false;
        }
        const double now = unix_now();
        const bool withdrawn = now - h.drain_started_unix >= HealthState::kDrainMinSeconds;
        if (h.connections_left == 0 && withdrawn) {
            log_info(fmt::format("drained: no connection left after {:.1f} s", now - h.drain_started_unix));
            return true;
        }
        // Replicating, the connections' replies keep coming (to its masquerade addresses) and the
        // drain would last its whole timeout: every flow goes to the live peers once more, and
        // then the gateway stops in order - its peers take its addresses at once and carry on.
        if (rt_.sync && withdrawn) {
            if (!handing_over_) rt_.sync->hand_over();
            handing_over_ = true;
            if (const Syncer::Handover ho = rt_.sync->handover(); ho.done && ho.peers > 0) {
                log_info(fmt::format("drained: handed over {} flows ({} connections open) to {} peers after {:.1f} s",
                                     ho.flows, h.connections_left, ho.peers, now - h.drain_started_unix));
                return true;
            }
        }
        if (now >= h.drain_deadline_unix) {
            log_warning(fmt::format("drain timeout: {} connections left", h.connections_left));
            return true;
        }
        return false;
    }

private:
    DaemonState& st_;
    Runtime& rt_;
    const Publisher& pub_;
    HealthCheckServers checks_;
    Announcer announcer_;
    std::vector<IpCidr> set_, announced_;
    uint64_t token_ = 0;
    bool was_healthy_ = false, drain_seen_ = false, handing_over_ = false;
    std::chrono::steady_clock::time_point last_progress_, next_tick_{}, next_sync_{}, next_count_{};
};

// The control loop's own duties, one method each (control_loop.h).
class ControlLoop {
public:
    ControlLoop(DaemonState& st, Publisher& pub, Runtime& rt)
        : st_(st), pub_(pub), rt_(rt), shared_(*rt.shared), notify_(rt.qsbr.get()) {}

    void run() {
        open_endpoints();
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        std::signal(SIGHUP, on_signal);
        std::signal(SIGPIPE, SIG_IGN);  // a svcgatectl that hangs up early
        follow_export();                // the Service names before the first event
        launch_workers(rt_);
        log_running();
        // systemd: ready now that the ports are up, the workers run and the first config is published.
        last_status_ = std::chrono::steady_clock::now();
        notify_.ready(status_line());
        if (notify_.watchdog().count())
            log_info(fmt::format("systemd watchdog: a keepalive every {} ms while the workers make progress",
                                 notify_.watchdog().count() / 2000));
        health_.emplace(st_, rt_, pub_);  // after the workers run: it watches their progress
        st_.prober = &prober_;
        reprobe();
        auto last_tick = std::chrono::steady_clock::now();
        for (;;) {
            const int sig = g_signal.exchange(0);
            if (sig == SIGINT || sig == SIGTERM) break;
            if (sig == SIGHUP) reload_now("SIGHUP");
            if (watch_.due()) reload_now("file change");
            if (st_.kube && st_.kube->due(std::chrono::steady_clock::now())) reload_now("kubernetes API");
            server_.poll_once(wait_ms(), [&](const std::string& line) {
                return handle_command(st_, line, [&] { return reload_now("svcgatectl"); });
            });
            notify_.tick([&] { return status_line(); });
            health_->tick();
            follow_sync();
            follow_checks();
            follow_export();
            watch_table();
            if (health_->done()) break;
            test_stall();
            // Slots that flows stopped holding since the last reload go back, once a second.
            if (const auto now = std::chrono::steady_clock::now(); now - last_tick >= std::chrono::seconds(1)) {
                pub_.tick();
                last_tick = now;
            }
        }
        health_.reset();  // its announcements withdrawn before the endpoints close
        std::lock_guard lk(st_.mu);
        st_.prober = nullptr;
    }

private:
    // How long one turn waits for a command or a file change: 50 ms, or less when the API's
    // changes fall due sooner (a publish is not late by a turn: programming latency).
    int wait_ms() const {
        int ms = 50;
        if (st_.kube)
            if (const auto due = st_.kube->until_due(std::chrono::steady_clock::now()))
                ms = static_cast<int>(std::min<int64_t>(ms, due->count()));
        return ms;
    }

    // The operator's endpoints: a failure to open one is logged, the gateway still runs.
    void open_endpoints() {
        if (Status s = server_.open_socket(st_.cfg.control.socket, st_.cfg.control.socket_mode); !s) log_err(s.error());
        register_telemetry(st_);
        if (Status s = metrics_.start(st_.cfg.control.metrics, st_); !s) log_err(s.error());
        rewatch();
    }

    void rewatch() {
        if (!st_.cfg.control.watch) return;
        watch_.reset(st_.cfg, st_.config_path);  // the manifests may have changed
        server_.watch_fd(watch_.fd(), [this] { watch_.drain(); });
    }

    void log_running() {
        log_info(fmt::format(
            "running: {} ports, {} workers, {} service ports, flow table {} flows; control socket {}, "
            "metrics {}",
            rt_.ports.size(), rt_.workers.size(), pub_.current()->services.size(), rt_.flows->capacity(),
            st_.cfg.control.socket.empty() ? "off" : st_.cfg.control.socket,
            st_.cfg.control.metrics ? "http://" + format_host_port(*st_.cfg.control.metrics) + "/metrics" : "off"));
    }

    // systemd's STATUS= line: the generation, the Services, the flows and, over the time since the
    // last line once there is a second of it, the packet rate.
    std::string status_line() {
        uint64_t rx = 0;
        for (const Worker* w : st_.workers) rx += w->counters().rx_packets;
        const auto now = std::chrono::steady_clock::now();
        const double secs = std::chrono::duration<double>(now - last_status_).count();
        std::string rate;
        if (secs >= 1) {
            rate = fmt::format(", {:.0f} packets/s in", static_cast<double>(rx - last_rx_) / secs);
            last_rx_ = rx, last_status_ = now;
        }
        return fmt::format("generation {}, {} service ports, {} flows{}", pub_.generation(),
                           pub_.current()->services.size(), st_.flows_live(), rate);
    }

    // Replicating (sync.h): announce once the peers' flows are here; publish the dead peers'
    // addresses this gateway takes over, with the config.
    void follow_sync() {
        if (!rt_.sync) return;
        if (!sync_ready_ && rt_.sync->ready()) {
            sync_ready_ = true;
            shared_.announce.fetch_add(1);  // its own addresses back from whoever held them
        }
        const uint64_t g = rt_.sync->adopted_generation();
        if (g == adopted_gen_) return;
        adopted_gen_ = g;
        adopted_ = rt_.sync->adopted();
        try {
            pub_.publish(with_adopted(st_.cfg, adopted_));
            shared_.announce.fetch_add(1);
            std::string list;
            for (const IpAddr& a : adopted_) list += " " + format_ip(a);
            log_info(fmt::format("ha: serving {} addresses of dead peers:{}", adopted_.size(),
                                 list.empty() ? " none" : list));
        } catch (const std::exception& e) {
            log_err(fmt::format("ha: cannot publish the addresses taken over: {}", e.what()));
        }
    }

    // After a start or a reload: what the health checks check, and the routes their probes take.
    void reprobe() {
        std::vector<ProbeTarget> targets = probe_targets(st_.cfg);
        size_t unchecked = 0;
        for (const ProbeTarget& t : targets) unchecked += !t.unchecked.empty();
        if (unchecked) {
            const auto first =
                std::find_if(targets.begin(), targets.end(), [](const ProbeTarget& t) { return !t.unchecked.empty(); });
            log_warning(
                fmt::format("health checks: {} of {} endpoints cannot be checked and count as up (the "
                            "first, {} {}: {})",
                            unchecked, targets.size(), first->service, format_ip(first->ip), first->unchecked));
        }
        prober_.set_targets(std::move(targets));
        if (Status s = host_routes_.sync(host_routes(st_.cfg)); !s) log_err(s.error());
    }

    // An endpoint went up or down by its checks (prober.h): published at once, as a reload is.
    void follow_checks() {
        const auto [checked, down] = prober_.checked_down();
        {
            std::lock_guard lk(st_.mu);
            st_.health.endpoints_checked = checked;
            st_.health.endpoints_down = down;
        }
        const uint64_t c = prober_.changes();
        if (c == probe_changes_) return;
        probe_changes_ = c;
        EndpointHealthPtr v = prober_.view();
        static const EndpointHealthView none;
        if (!v || (pub_health_ ? *pub_health_ : none).down == v->down) return;  // nothing new to publish
        pub_health_ = v;
        pub_.set_health(std::move(v));
        try {
            const PublishResult r = pub_.publish(with_adopted(st_.cfg, adopted_));
            log_info(
                fmt::format("health checks: generation {} published, {} endpoints failing; flows ended: {} "
                            "TCP, {} datagram",
                            r.generation, pub_health_->down.size(), r.sweep.tcp_closed, r.sweep.dgram_removed));
        } catch (const std::exception& e) {
            log_err(fmt::format("health checks: cannot publish: {}", e.what()));
        }
    }

    // A flow table that refused or evicted new flows in the last minute (full, or early drop
    // under pressure): the sources that hold it, named in the log once a minute (table_watch.h).
    void watch_table() {
        const auto now = std::chrono::steady_clock::now();
        if (!table_watch_.due(now)) return;
        const WorkerCounters t = sum_counters(st_);
        const uint64_t pressure = t.flows_early_dropped + t.drops[static_cast<unsigned>(DropReason::flow_table_full)];
        std::lock_guard lk(st_.mu);
        auto top = [&] {
            TablePressureWatch::Talkers v;
            for (const report::Talker& x : top_talkers(st_, "source", 5)) v.emplace_back(x.key, x.flows);
            return v;
        };
        if (auto line = table_watch_.look(now, pressure, st_.flows_live(), st_.flows_capacity(), top))
            log_warning(*line);
    }

    // The IPFIX exporter names each event's Service: its names after each publish.
    void follow_export() {
        if (!rt_.ipfix || pub_.generation() == export_gen_) return;
        export_gen_ = pub_.generation();
        const ServiceSnapshot& s = *pub_.current();
        std::unordered_map<uint32_t, std::string> names;
        for (size_t i = 0; i < s.services.size(); ++i)
            names.emplace(s.services[i].id, s.info(static_cast<uint32_t>(i)).name);
        rt_.ipfix->set_services(std::move(names));
    }

    ReloadOutcome reload_now(const std::string& trigger) {
        notify_.reloading();
        ReloadOutcome r = reload(st_, pub_, shared_, trigger, adopted_);
        if (Status s = sync_host_addresses(rt_, st_.cfg); !s) log_err(s.error());
        rewatch();
        if (health_) health_->reconfigured();
        if (health_) reprobe();
        notify_.ready(status_line());
        return r;
    }

    // A test hook (tests/cli/notify_test.py): the workers stop making progress this many seconds
    // after start, as a stuck worker would.
    void test_stall() {
        static const char* stall = std::getenv("SVCGATE_TEST_STALL_AFTER");
        if (!stall) return;
        if (std::chrono::steady_clock::now() >= started_ + std::chrono::seconds(std::atoi(stall)) &&
            !shared_.test_stall.exchange(true))
            log_warning("test hook: the workers stall (SVCGATE_TEST_STALL_AFTER)");
    }

    struct Unregister {
        ~Unregister() { unregister_telemetry(); }
    };

    DaemonState& st_;
    Publisher& pub_;
    Runtime& rt_;
    WorkerShared& shared_;
    ControlServer server_;
    Unregister unregister_;
    MetricsServer metrics_;
    Watcher watch_;
    SystemdNotifier notify_;
    std::optional<HealthKeeper> health_;  // from the workers' launch to the loop's end
    // Active health checks: the prober's thread, its routes, the view last published.
    Prober prober_;
    HostRouteMirror host_routes_;
    uint64_t probe_changes_ = 0;
    EndpointHealthPtr pub_health_;
    uint32_t export_gen_ = 0;  // the generation whose Service names the exporter has
    TablePressureWatch table_watch_{std::chrono::steady_clock::now()};
    const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point last_status_{};
    uint64_t last_rx_ = 0;
    // Replicating: the dead peers' addresses this gateway holds, published with the config.
    std::vector<IpAddr> adopted_;
    uint64_t adopted_gen_ = 0;
    bool sync_ready_ = false;
};

}  // namespace

void serve(DaemonState& st, Publisher& pub, Runtime& rt) {
    ControlLoop loop(st, pub, rt);
    loop.run();
}

// This gateway's addresses on ha.takeover_ports: what a survivor takes over when it dies.
std::vector<IpAddr> takeover_addresses(const Config& cfg) {
    std::vector<IpAddr> out;
    for (const std::string& name : cfg.ha.takeover_ports)
        for (const PortConfig& p : cfg.dataplane.ports)
            if (p.name == name)
                for (const IpCidr& c : p.addresses) out.push_back(c.addr);
    return out;
}

}  // namespace svcgate::ctl
