#include "control/ha/sync.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "dataplane/flow/flow_record.h"
#include "control/ha/state_file.h"
#include "control/base/log.h"
#include "dataplane/pipeline/pipeline.h"
#include "dataplane/pipeline/worker.h"
#include "control/config/yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

uint64_t steady_ms() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

socklen_t to_sockaddr(const HaConfig::Endpoint& e, sockaddr_storage& ss) {
    std::memset(&ss, 0, sizeof ss);
    if (e.addr.is_v4()) {
        auto* s = reinterpret_cast<sockaddr_in*>(&ss);
        s->sin_family = AF_INET;
        s->sin_port = htons(e.port);
        s->sin_addr.s_addr = e.addr.v4().be;
        return sizeof *s;
    }
    auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(e.port);
    std::memcpy(&s->sin6_addr, e.addr.a.b, 16);
    return sizeof *s;
}

std::string endpoint_name(const HaConfig::Endpoint& e) {
    return e.addr.is_v4() ? fmt::format("{}:{}", format_ip(e.addr), e.port)
                          : fmt::format("[{}]:{}", format_ip(e.addr), e.port);
}

}  // namespace

struct Syncer::Peer {
    HaConfig::Endpoint ep;
    std::string name;
    sockaddr_storage sa{};
    socklen_t salen = 0;
    uint8_t origin = 0;  // Flow::origin of what it sends: its index in ha.peers + 1
    uint32_t id = 0;     // its peer id (sync::peer_id)
    sync::ReplayWindow window;
    uint64_t last_heard_ms = 0;  // 0: never
    bool starting = false;       // its last hello asked for a bulk copy
    bool leaving = false;        // its last hello said it stops
    uint64_t copied_for = 0;     // its epoch this gateway has copied its table to
    uint64_t us_copied = 0;      // this gateway's epoch it has copied to us (its hellos)
    uint32_t flows_held = 0;
    // A bulk copy to it under way: its epoch, the position (IPv4 ids, then IPv6 ones).
    uint64_t copy_epoch = 0;
    uint64_t copy_pos = 0;
    bool copying = false;
    bool handover = false;      // the copy is a drain's hand-over (sync.h)
    uint64_t copy_records = 0;  // records of the copy under way
    std::atomic<uint64_t> flows_sent{0}, flows_received{0}, datagrams_sent{0}, datagrams_received{0};
    std::atomic<uint64_t> heard_ms{0};
    std::atomic<bool> copied_us{false};
    std::atomic<uint32_t> held{0};
    std::vector<IpAddr> addrs;  // its takeover addresses (its last hello); status() reads them under mu_
    bool adopted = false;       // we hold its addresses

    bool alive(uint64_t now_ms, uint32_t dead_after_ms) const noexcept {
        return last_heard_ms != 0 && !leaving && now_ms - last_heard_ms < dead_after_ms;
    }
};

// The FlowImporter of the snapshot and stats table the workers see now.
struct Syncer::Importer {
    const ServiceSnapshot* snap = nullptr;
    uint32_t generation = 0;
    const StatsTable* stats = nullptr;
    std::unique_ptr<FlowImporter> imp;
};

uint32_t endpoint_id(const HaConfig::Endpoint& e) noexcept { return sync::peer_id(e.addr.a.b, e.port); }

Syncer::Syncer(const HaConfig& cfg, Wiring w)
    : cfg_(cfg),
      w_(std::move(w)),
      self_id_(endpoint_id(cfg.listen)),
      sealer_(cfg.key, self_id_,
              static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count())),
      importer_(std::make_unique<Importer>()) {
    listen_ = endpoint_name(cfg.listen);
    for (size_t i = 0; i < cfg.peers.size(); ++i) {
        auto p = std::make_unique<Peer>();
        p->ep = cfg.peers[i];
        p->name = endpoint_name(p->ep);
        p->salen = to_sockaddr(p->ep, p->sa);
        p->origin = static_cast<uint8_t>(i + 1);
        p->id = endpoint_id(p->ep);
        peers_.push_back(std::move(p));
    }
}

Syncer::~Syncer() { stop(); }

Status Syncer::start() {
    if (w_.owner >= w_.flows->owners() || (w_.flows6 && w_.owner >= w_.flows6->owners()))
        return Status::fail("ha: the flow tables have no owner for the sync thread");
    sockaddr_storage ss;
    const socklen_t len = to_sockaddr(cfg_.listen, ss);
    fd_ = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return Status::fail(fmt::format("ha.listen {}: socket: {}", listen_, std::strerror(errno)));
    const int buf = 8 << 20;  // a peer's bulk copy arrives in bursts
    (void)setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    (void)setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    if (bind(fd_, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
        const std::string e = fmt::format("ha.listen {}: cannot bind: {}", listen_, std::strerror(errno));
        close(fd_);
        fd_ = -1;
        return Status::fail(e);
    }
    if (w_.qsbr && rte_rcu_qsbr_thread_register(w_.qsbr, w_.qsbr_id) != 0)
        return Status::fail("ha: cannot register the sync thread with RCU");
    start_ms_ = steady_ms();
    refresh_last_ms_ = start_ms_;
    thread_ = std::thread([this] { run(); });
    return {};
}

void Syncer::stop() {
    if (fd_ < 0) return;  // never started, or stopped
    stop_.store(true);
    if (thread_.joinable()) {
        thread_.join();
        // An orderly stop: the peers take over this gateway's addresses now.
        uint8_t body[sync::kHelloMax], d[sync::kMaxDatagram];
        sync::Hello h{.flags = sync::kHelloLeaving,
                      .n_addrs = static_cast<uint8_t>(std::min(w_.takeover.size(), sync::kHelloAddresses))};
        std::copy_n(w_.takeover.begin(), h.n_addrs, h.addrs.begin());
        for (auto& p : peers_) {
            h.to = p->id;
            const size_t n = sync::encode_hello(h, body);
            send(*p, d, sealer_.seal(sync::Type::hello, 0, std::span<const uint8_t>(body, n), d), 0);
        }
    }
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    if (w_.qsbr) (void)rte_rcu_qsbr_thread_unregister(w_.qsbr, w_.qsbr_id);
}

void Syncer::run() {
    while (!stop_.load(std::memory_order_relaxed)) {
        // A datagram wakes the thread at once; the workers' rings are looked at every
        // millisecond while there is traffic, and less often the longer there is none (an idle
        // gateway's sync thread wakes for its hellos and a few times between them), never later
        // than the next hello; not at all while they hold more than a tick takes.
        const uint64_t before = steady_ms();
        const uint64_t next_hello = hello_last_ms_ + cfg_.hello_ms;
        const uint64_t to_hello = next_hello > before ? next_hello - before : 0;
        const int timeout = backlog_ ? 0 : static_cast<int>(std::min<uint64_t>(wait_ms_, to_hello));
        pollfd pfd{fd_, POLLIN, 0};
        (void)poll(&pfd, 1, timeout);
        const uint64_t now = steady_ms();
        if (w_.qsbr) rte_rcu_qsbr_thread_online(w_.qsbr, w_.qsbr_id);
        active_ = false;
        tick(now);
        if (w_.qsbr) rte_rcu_qsbr_thread_offline(w_.qsbr, w_.qsbr_id);
        wait_ms_ = active_ ? 1 : std::min<uint64_t>(wait_ms_ * 2, kIdleWaitMs);
    }
}

void Syncer::tick(uint64_t now_ms) {
    importer_for_snapshot();
    receive(now_ms);
    take_events();
    refresh_slice(now_ms);
    flush();
    if (handover_req_.exchange(false, std::memory_order_acq_rel)) start_handover(now_ms);
    bulk_copies();
    hellos(now_ms);
    update_ready(now_ms);
    takeovers(now_ms);
    expire(now_ms);
}

// Which dead peers' addresses this gateway holds: those of a peer heard once and silent for
// dead_after_ms, when no live gateway has a lower ha.listen address; kept while their owner,
// heard again, still says it is starting (it has not got its flows back yet).
void Syncer::takeovers(uint64_t now_ms) {
    auto lower = [](const HaConfig::Endpoint& a, const HaConfig::Endpoint& b) {
        const int c = std::memcmp(a.addr.a.b, b.addr.a.b, 16);
        return c < 0 || (c == 0 && a.port < b.port);
    };
    bool lowest = true;
    for (auto& p : peers_)
        if (p->alive(now_ms, cfg_.dead_after_ms) && lower(p->ep, cfg_.listen)) lowest = false;
    std::vector<IpAddr> want;
    bool changed = false;
    std::lock_guard lk(mu_);  // status() reads Peer::adopted
    for (auto& p : peers_) {
        const bool dead = p->last_heard_ms != 0 && !p->alive(now_ms, cfg_.dead_after_ms);
        // Once held, a dead peer's addresses stay here until it is back and ready: a lower peer
        // that returns meanwhile may never have heard of them.
        const bool adopt =
            !p->addrs.empty() && ((dead && (lowest || p->adopted)) || (p->adopted && !dead && p->starting));
        if (adopt != p->adopted) {
            changed = true;
            p->adopted = adopt;
            std::string list;
            for (const IpAddr& a : p->addrs) list += " " + format_ip(a);
            if (adopt)
                log_warning(fmt::format("ha: peer {} is dead: taking over its addresses{}", p->name, list));
            else
                log_info(fmt::format("ha: peer {} is back and ready: giving back its addresses{}", p->name, list));
        }
        if (adopt) want.insert(want.end(), p->addrs.begin(), p->addrs.end());
    }
    if (!changed) return;
    adopted_ = std::move(want);
    adopted_gen_.fetch_add(1, std::memory_order_release);
}

std::vector<IpAddr> Syncer::adopted() const {
    std::lock_guard lk(mu_);
    return adopted_;
}

void Syncer::importer_for_snapshot() {
    const ServiceSnapshot* s = w_.snapshot->load(std::memory_order_acquire);
    const StatsTable* t = w_.stats->load(std::memory_order_acquire);
    Importer& im = *importer_;
    if (s && t && (s != im.snap || s->generation != im.generation || t != im.stats)) {
        im.imp = std::make_unique<FlowImporter>(*s, *t, *w_.flows, w_.flows6, w_.workers);
        im.snap = s, im.generation = s->generation, im.stats = t;
    }
}

void Syncer::receive(uint64_t now_ms) {
    uint8_t d[sync::kMaxDatagram + 1];
    for (unsigned k = 0; k < 256; ++k) {
        sockaddr_storage from{};
        socklen_t fl = sizeof from;
        const ssize_t n = recvfrom(fd_, d, sizeof d, 0, reinterpret_cast<sockaddr*>(&from), &fl);
        if (n < 0) return;  // EAGAIN: nothing more
        Peer* peer = nullptr;
        for (auto& p : peers_) {
            if (from.ss_family != p->sa.ss_family) continue;
            if (from.ss_family == AF_INET) {
                const auto* a = reinterpret_cast<const sockaddr_in*>(&from);
                const auto* b = reinterpret_cast<const sockaddr_in*>(&p->sa);
                if (a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port) peer = p.get();
            } else {
                const auto* a = reinterpret_cast<const sockaddr_in6*>(&from);
                const auto* b = reinterpret_cast<const sockaddr_in6*>(&p->sa);
                if (std::memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0 && a->sin6_port == b->sin6_port) peer = p.get();
            }
            if (peer) break;
        }
        std::lock_guard lk(mu_);
        if (!peer) {
            ++counts_.drops[static_cast<unsigned>(sync::Drop::unknown_peer)];
            continue;
        }
        sync::Header h;
        std::span<const uint8_t> body;
        sync::Drop why{};
        if (!sync::open(d, static_cast<size_t>(n), cfg_.key, peer->id, peer->window, h, body, why)) {
            ++counts_.drops[static_cast<unsigned>(why)];
            continue;
        }
        sync::Hello hello;
        if (h.type == sync::Type::hello) {
            (void)sync::decode_hello(body, hello);  // open() checked its size
            if (hello.to != self_id_) {             // authentic, but meant for another gateway
                ++counts_.drops[static_cast<unsigned>(sync::Drop::wrong_peer)];
                continue;
            }
        }
        peer->last_heard_ms = now_ms;
        peer->heard_ms.store(now_ms, std::memory_order_relaxed);
        peer->datagrams_received.fetch_add(1, std::memory_order_relaxed);
        if (h.type == sync::Type::hello) {
            peer->starting = hello.flags & sync::kHelloStarting;
            peer->leaving = hello.flags & sync::kHelloLeaving;
            peer->us_copied = hello.copied_for;
            peer->copied_us.store(hello.copied_for == sealer_.epoch(), std::memory_order_relaxed);
            peer->held.store(hello.flows, std::memory_order_relaxed);
            peer->addrs.assign(hello.addrs.begin(), hello.addrs.begin() + hello.n_addrs);
            // A peer that starts (a new epoch) gets our whole table once.
            if (peer->starting && peer->copied_for != h.epoch && !(peer->copying && peer->copy_epoch == h.epoch)) {
                peer->copying = true;
                peer->copy_epoch = h.epoch;
                peer->copy_pos = 0;
                peer->copy_records = 0;
                log_info(fmt::format("ha: peer {} started; sending it a copy of {} flows", peer->name,
                                     w_.flows->live_total() + (w_.flows6 ? w_.flows6->live_total() : 0)));
            }
            continue;
        }
        // Authentic flow records: a peer is busy, more may follow. (Hellos, forged or stray
        // datagrams keep an idle thread idle.)
        active_ = true;
        sync::for_each_flow(body, [&](const FlowRecord& r) {
            FlowRecord c = r;
            if (c.family == Family::v4)
                take_record(c.v4, c.idle, *peer);
            else if (w_.flows6)
                take_record(c.v6, c.idle, *peer);
            peer->flows_received.fetch_add(1, std::memory_order_relaxed);
        });
    }
}

namespace {

// A TCP connection past its first FIN (or reset).
template <typename K>
bool closing(const BasicFlow<K>& f, FlowState state) noexcept {
    return static_cast<Proto>(f.key[0].proto) == Proto::tcp && state.tcp_closing();
}

// A TCP connection that is over (TIME_WAIT, CLOSE): a record of the same tuple that is not
// closing is a new connection the client opened on it (the workers' reopen, pipeline.cpp).
template <typename K>
bool over(const BasicFlow<K>& f, FlowState state) noexcept {
    return static_cast<Proto>(f.key[0].proto) == Proto::tcp &&
        (state.tcp() == TcpState::time_wait || state.tcp() == TcpState::close);
}

}  // namespace

template <typename K>
void Syncer::take_record(BasicFlowInit<K>& in, uint32_t idle, Peer& from) {
    auto& table = [this]() -> BasicFlowTable<K>& {
        if constexpr (sizeof(K) == sizeof(FlowKey))
            return *w_.flows;
        else
            return *w_.flows6;
    }();
    const uint32_t now = flow_clock_now();
    FlowRef ref = table.lookup(in.key[0]);
    if (ref.hit() && ref.dir == Direction::original) {
        // A replica of ours of a connection that is over, and the peer's record of a new one on
        // the same tuple (its endpoint chosen anew): the replica goes, the record comes in.
        const auto& f = table.flow(ref.id);
        const StatsTable* st = w_.stats->load(std::memory_order_acquire);
        if (st && f.owner == w_.owner && f.kind == FlowKind::nat && over(f, FlowState::load(f.state)) &&
            !closing(f, FlowState{in.state})) {
            release_flow(*st, w_.owner, f);
            table.remove(ref.id);
            ref = FlowRef{};
        }
    }
    if (ref.hit()) {
        // Known here: a replica being refreshed, or a flow of ours that a peer carries too (ECMP
        // moved it there, or this gateway drains). The view of whoever saw a packet last wins:
        // its state and when (so a drained gateway learns that its connections closed).
        auto& f = table.flow(ref.id);
        if (ref.dir != Direction::original) return;
        // Seconds are coarse: a record of the same second is taken too (a FIN right after the last
        // data), but does not take a closing TCP connection back to an earlier state.
        const uint32_t seen = now > idle ? now - idle : 1;
        const int32_t newer = static_cast<int32_t>(seen - f.last_seen.load(std::memory_order_relaxed));
        if (newer < 0) return;
        // A replica's idle time is its owner's; a flow of ours keeps its own (a drain counts the
        // packets that still reach this gateway).
        if (newer > 0 && f.origin.load(std::memory_order_relaxed) != 0)
            f.last_seen.store(seen, std::memory_order_relaxed);
        if (f.kind != FlowKind::nat) return;
        // A worker may change the state meanwhile (CAS, as conntrack does), and a reload's mark
        // of a removed endpoint stays.
        uint8_t cur = f.state.load(std::memory_order_relaxed);
        while (!FlowState{cur}.gone() &&
               !(newer == 0 && closing(f, FlowState{cur}) && !closing(f, FlowState{in.state})) && cur != in.state &&
               !f.state.compare_exchange_weak(cur, in.state, std::memory_order_relaxed)) {}
        return;
    }
    if (!importer_->imp) return;
    FlowRecord r;
    if constexpr (sizeof(K) == sizeof(FlowKey))
        r.family = Family::v4, r.v4 = in;
    else
        r.family = Family::v6, r.v6 = in;
    r.idle = idle;
    using O = FlowImporter::Outcome;
    switch (importer_->imp->import_to(r, w_.owner, from.origin, now, 0)) {
        case O::inserted:
        case O::exists:
            break;
        case O::gone:
            ++counts_.record_drops[static_cast<unsigned>(RecordDrop::gone)];
            break;
        case O::expired:
            ++counts_.record_drops[static_cast<unsigned>(RecordDrop::expired)];
            break;
        case O::clash:
            ++counts_.record_drops[static_cast<unsigned>(RecordDrop::clash)];
            break;
        case O::full:
            ++counts_.record_drops[static_cast<unsigned>(RecordDrop::full)];
            break;
    }
}

template <typename K>
void Syncer::add(const BasicFlow<K>& f) {
    constexpr size_t n = flow_record_size<K>();
    if (body_len_ + n > sync::kMaxBody) flush();
    encode_flow(f, flow_clock_now(), body_ + body_len_);
    body_len_ += n;
    ++body_records_;
}

void Syncer::flush() {
    if (body_records_ == 0) return;
    uint8_t d[sync::kMaxDatagram];
    const size_t n = sealer_.seal(sync::Type::flows, body_records_, std::span<const uint8_t>(body_, body_len_), d);
    send_to_live(d, n, body_records_);
    body_len_ = 0;
    body_records_ = 0;
}

void Syncer::send_to_live(const uint8_t* d, size_t n, uint16_t records) {
    const uint64_t now = steady_ms();
    for (auto& p : peers_)
        if (p->alive(now, cfg_.dead_after_ms)) send(*p, d, n, records);
}

void Syncer::send(Peer& p, const uint8_t* d, size_t n, uint16_t records) {
    if (sendto(fd_, d, n, 0, reinterpret_cast<const sockaddr*>(&p.sa), p.salen) != static_cast<ssize_t>(n)) {
        std::lock_guard lk(mu_);
        ++counts_.send_errors;
        return;
    }
    p.datagrams_sent.fetch_add(1, std::memory_order_relaxed);
    p.flows_sent.fetch_add(records, std::memory_order_relaxed);
}

namespace {

// A record the sync thread sends: published and proven (FlowTable::proven); with `own`, this
// gateway's, not a replica.
template <typename F>
bool to_send(const F& f, bool own) noexcept {
    return f.live.load(std::memory_order_acquire) && (!own || f.origin.load(std::memory_order_relaxed) == 0) &&
        BasicFlowTable<typename F::Key>::proven(f);
}

}  // namespace

// The flows the workers proved or changed: this gateway's own (a replica a worker has just taken
// over is, by then).
void Syncer::take_events() {
    uint32_t ids[256];
    uint64_t taken = 0;
    bool more = false;
    for (rte_ring* ring : w_.rings) {
        unsigned round = 0;
        for (; round < 16; ++round) {
            const unsigned n = rte_ring_sc_dequeue_burst_elem(ring, ids, sizeof ids[0], 256, nullptr);
            taken += n;
            for (unsigned i = 0; i < n; ++i) {
                const uint32_t id = ids[i] & ~kFlowIdV6;
                if (ids[i] & kFlowIdV6) {
                    if (!w_.flows6 || id >= w_.flows6->capacity()) continue;
                    const Flow6& f = w_.flows6->flow(id);
                    if (to_send(f, true)) add(f);
                } else {
                    if (id >= w_.flows->capacity()) continue;
                    const Flow& f = w_.flows->flow(id);
                    if (to_send(f, true)) add(f);
                }
            }
            if (n < 256) break;
        }
        more = more || round == 16;
    }
    backlog_ = more;
    if (taken) active_ = true;
}

// A slice of the tables each millisecond, so that every proven flow of this gateway is sent once
// per refresh_seconds.
void Syncer::refresh_slice(uint64_t now_ms) {
    const uint64_t cap4 = w_.flows->capacity(), cap6 = w_.flows6 ? w_.flows6->capacity() : 0, total = cap4 + cap6;
    const uint64_t elapsed = now_ms - refresh_last_ms_;
    uint64_t budget = total * elapsed / (uint64_t{cfg_.refresh_seconds} * 1000);
    if (budget == 0) return;
    refresh_last_ms_ = now_ms;
    budget = std::min<uint64_t>(budget, total);
    uint64_t sent = 0;
    for (uint64_t k = 0; k < budget; ++k) {
        const uint64_t pos = refresh_pos_;
        refresh_pos_ = refresh_pos_ + 1 == total ? 0 : refresh_pos_ + 1;
        if (pos < cap4) {
            const Flow& f = w_.flows->flow(static_cast<uint32_t>(pos));
            if (to_send(f, true)) add(f), ++sent;
        } else {
            const Flow6& f = w_.flows6->flow(static_cast<uint32_t>(pos - cap4));
            if (to_send(f, true)) add(f), ++sent;
        }
    }
    if (sent) {
        std::lock_guard lk(mu_);
        counts_.refreshed += sent;
    }
}

// A drain's hand-over: a bulk copy to every live peer (one already copying to a starting peer
// goes on: it sends everything too). The copy keeps the epoch the peer was copied for, so its
// hellos' "copied" stays what it was.
void Syncer::start_handover(uint64_t now_ms) {
    unsigned n = 0;
    for (auto& p : peers_) {
        if (!p->alive(now_ms, cfg_.dead_after_ms)) continue;
        if (!p->copying) {
            p->copying = true;
            p->copy_epoch = p->copied_for;
            p->copy_pos = 0;
            p->copy_records = 0;
        }
        p->handover = true;
        ++n;
    }
    std::lock_guard lk(mu_);
    handover_ = Handover{.started = true, .done = n == 0, .peers = 0, .flows = 0};
    log_info(fmt::format("ha: handing over: a copy of every flow to {} live peers", n));
}

Syncer::Handover Syncer::handover() const {
    std::lock_guard lk(mu_);
    return handover_;
}

// Bulk copies to peers that started: every proven flow held here (this gateway's and its
// replicas), paced at kBulkPerTick datagrams a millisecond; then "copied" in the hellos.
void Syncer::bulk_copies() {
    for (auto& pp : peers_) {
        Peer& p = *pp;
        if (!p.copying) continue;
        active_ = true;
        const uint64_t cap4 = w_.flows->capacity(), cap6 = w_.flows6 ? w_.flows6->capacity() : 0;
        uint8_t body[sync::kMaxBody], d[sync::kMaxDatagram];
        size_t len = 0;
        uint16_t records = 0;
        unsigned datagrams = 0;
        auto out = [&] {
            if (!records) return;
            send(p, d, sealer_.seal(sync::Type::flows, records, std::span<const uint8_t>(body, len), d), records);
            len = 0, records = 0, ++datagrams;
        };
        auto put = [&](const auto& f) {
            constexpr size_t n = flow_record_size<typename std::remove_cvref_t<decltype(f)>::Key>();
            if (len + n > sync::kMaxBody) out();
            encode_flow(f, flow_clock_now(), body + len);
            len += n, ++records, ++p.copy_records;
        };
        for (uint32_t scanned = 0; datagrams < kBulkPerTick && scanned < kBulkScanPerTick && p.copy_pos < cap4 + cap6;
             ++scanned) {
            const uint64_t pos = p.copy_pos++;
            if (pos < cap4) {
                const Flow& f = w_.flows->flow(static_cast<uint32_t>(pos));
                if (to_send(f, false)) put(f);
            } else {
                const Flow6& f = w_.flows6->flow(static_cast<uint32_t>(pos - cap4));
                if (to_send(f, false)) put(f);
            }
        }
        out();
        if (p.copy_pos >= cap4 + cap6) {
            p.copying = false;
            p.copied_for = p.copy_epoch;
            log_info(fmt::format("ha: copy to peer {} done ({} flows)", p.name, p.copy_records));
            if (p.handover) {
                p.handover = false;
                std::lock_guard lk(mu_);
                ++handover_.peers;
                handover_.flows = std::max(handover_.flows, p.copy_records);
                handover_.done = std::none_of(peers_.begin(), peers_.end(), [](const auto& q) { return q->handover; });
            }
            p.copy_records = 0;
        }
    }
}

void Syncer::hellos(uint64_t now_ms) {
    if (now_ms - hello_last_ms_ < cfg_.hello_ms) return;
    hello_last_ms_ = now_ms;
    const uint32_t held = w_.flows->live_total() + (w_.flows6 ? w_.flows6->live_total() : 0);
    for (auto& p : peers_) {
        uint8_t body[sync::kHelloMax], d[sync::kMaxDatagram];
        sync::Hello h{.flags = static_cast<uint8_t>(ready() ? 0 : sync::kHelloStarting),
                      .flows = held,
                      .copied_for = p->copying ? 0 : p->copied_for,
                      .to = p->id,
                      .n_addrs = static_cast<uint8_t>(std::min(w_.takeover.size(), sync::kHelloAddresses))};
        std::copy_n(w_.takeover.begin(), h.n_addrs, h.addrs.begin());
        const size_t n = sync::encode_hello(h, body);
        send(*p, d, sealer_.seal(sync::Type::hello, 0, std::span<const uint8_t>(body, n), d), 0);
    }
}

// Ready (announce) once every live peer has copied its table here, and not before a peer had
// the time to be heard; or after kStartWaitSeconds whatever the peers say.
void Syncer::update_ready(uint64_t now_ms) {
    if (ready()) return;
    const uint64_t since = now_ms - start_ms_;
    if (since < cfg_.dead_after_ms) return;
    bool all = true;
    unsigned live = 0;
    for (auto& p : peers_) {
        if (!p->alive(now_ms, cfg_.dead_after_ms)) continue;
        ++live;
        all = all && p->us_copied == sealer_.epoch();
    }
    if (all) {
        log_info(fmt::format("ha: ready after {:.1f} s ({} of {} peers alive, each has sent its flows)", since / 1e3,
                             live, peers_.size()));
    } else if (since >= kStartWaitSeconds * 1000) {
        log_warning(fmt::format("ha: ready after {:.0f} s without every live peer's copy", kStartWaitSeconds));
    } else {
        return;
    }
    ready_.store(true, std::memory_order_release);
}

// The sync thread's own records (replicas, and those taken over), aged as a worker ages its own;
// once a second the replicas are counted.
void Syncer::expire(uint64_t now_ms) {
    const uint32_t now = flow_clock_now();
    const StatsTable* st = w_.stats->load(std::memory_order_acquire);
    if (!st) return;
    // 64 records a millisecond, however long the thread slept.
    const auto budget = static_cast<uint32_t>(64 * std::clamp<uint64_t>(now_ms - expire_last_ms_, 1, 1000));
    expire_last_ms_ = now_ms;
    (void)w_.flows->expire_step(w_.owner, now, budget, [st, this](const Flow& f) { release_flow(*st, w_.owner, f); });
    if (w_.flows6)
        (void)w_.flows6->expire_step(w_.owner, now, budget,
                                     [st, this](const Flow6& f) { release_flow(*st, w_.owner, f); });
    if (now_ms - count_last_ms_ < 1000) return;
    count_last_ms_ = now_ms;
    uint32_t replicas = 0;
    auto count = [&](const auto& table) {
        const auto [lo, hi] = table.owner_ids(w_.owner);
        for (uint32_t id = lo; id < hi; ++id) {
            const auto& f = table.flow(id);
            replicas += f.live.load(std::memory_order_acquire) && f.origin.load(std::memory_order_relaxed) != 0;
        }
    };
    count(*w_.flows);
    if (w_.flows6) count(*w_.flows6);
    std::lock_guard lk(mu_);
    counts_.replicas = replicas;
}

report::Keyed<uint64_t> drops_by_name(std::span<const uint64_t, sync::kDrops> datagrams,
                                      std::span<const uint64_t, kRecordDrops> records) {
    report::Keyed<uint64_t> k;
    for (unsigned d = 0; d < sync::kDrops; ++d) k.add(sync::drop_name(static_cast<sync::Drop>(d)), datagrams[d]);
    for (unsigned d = 0; d < kRecordDrops; ++d)
        k.add(std::string("record_") + record_drop_name(static_cast<RecordDrop>(d)), records[d]);
    return k;
}

report::Ha Syncer::status(const WorkerCounters& t) const {
    Counts c;
    {
        std::lock_guard lk(mu_);
        c = counts_;
    }
    report::Ha r{.listen = listen_,
                 .ready = ready(),
                 .replicas = c.replicas,
                 .takeovers = t.takeovers,
                 .replica_hold = {.held = t.replica_held, .parked = t.replica_parked, .released = t.replica_released},
                 .events = t.sync_events,
                 .events_ring_full = t.sync_ring_full,
                 .refreshed = c.refreshed,
                 .send_errors = c.send_errors};
    for (rte_ring* q : w_.rings) r.queued += rte_ring_count(q);
    r.drops = drops_by_name(c.drops, c.record_drops);
    const uint64_t now = steady_ms();
    for (const auto& p : peers_) {
        report::Peer ps;
        ps.address = p->name;
        const uint64_t heard = p->heard_ms.load(std::memory_order_relaxed);
        ps.alive = heard != 0 && now - heard < cfg_.dead_after_ms;
        if (heard) ps.last_heard_seconds = (now - heard) / 1e3;
        ps.copied = p->copied_us.load(std::memory_order_relaxed);
        ps.flows_sent = p->flows_sent.load(std::memory_order_relaxed);
        ps.flows_received = p->flows_received.load(std::memory_order_relaxed);
        ps.datagrams_sent = p->datagrams_sent.load(std::memory_order_relaxed);
        ps.datagrams_received = p->datagrams_received.load(std::memory_order_relaxed);
        ps.flows_held = p->held.load(std::memory_order_relaxed);
        {
            std::lock_guard lk(mu_);
            for (const IpAddr& a : p->addrs) ps.addresses.push_back(format_ip(a));
            ps.adopted = p->adopted;
        }
        r.peers.push_back(std::move(ps));
    }
    return r;
}

}  // namespace svcgate::ctl
