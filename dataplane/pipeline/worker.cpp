#include "dataplane/pipeline/worker.h"
#include "dataplane/pipeline/frag_stage.h"
#include "dataplane/pipeline/poll_policy.h"

#include "dataplane/l3/local.h"

#include <algorithm>

#include <sys/prctl.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>

namespace svcgate::dp {

Worker::Worker(WorkerShared& shared, uint16_t index, uint16_t n_workers, FlowTable& flows, FlowTable6& flows6,
               uint64_t seed)
    : shared_(shared) {
    ctx_.worker = index;
    ctx_.n_workers = n_workers;
    ctx_.flows = &flows;
    ctx_.flows6 = &flows6;
    ctx_.rng = Rng(seed + index);
    ctx_.out.init(shared.neighbors, shared.neighbors6, shared.pool, shared.port_macs.data(),
                  static_cast<uint16_t>(shared.port_macs.size()), TxSink{.send = &Worker::transmit, .arg = this});
    if (shared.port_mtus.size() == shared.port_macs.size()) ctx_.out.set_mtus(shared.port_mtus.data());
    ctx_.frags = shared.frags;
    ctx_.icmp.per_second = shared.icmp_errors_per_second;
    ctx_.punt_control.per_second = shared.punt_control_per_second;
    ctx_.punt_other.per_second = shared.punt_other_per_second;
    if (shared.hosts.size() && shared.host_of.size() == shared.port_macs.size())
        ctx_.out.set_host_path(shared.host_of.data(), static_cast<uint16_t>(shared.port_ids.size()));
    tsc_per_ms_ = std::max<uint64_t>(rte_get_tsc_hz() / 1000, 1);
    port_soft_ = FixedArray<PortSoftCounters>(shared.port_macs.size());
    if (shared.port_vlans.size() == shared.port_macs.size() &&
        std::any_of(shared.port_vlans.begin(), shared.port_vlans.end(), [](uint16_t v) { return v != 0; }))
        ctx_.out.set_trunks(shared.port_vlans.data(), port_soft_.data());
    const auto [lo4, hi4] = flows.owner_ids(index);
    const auto [lo6, hi6] = flows6.owner_ids(index);
    age_budget_ = std::max<uint32_t>(64, std::max(hi4 - lo4, hi6 - lo6) / kAgePassMs + 1);
}

int Worker::main(void* self) {
    static_cast<Worker*>(self)->run();
    return 0;
}

// The sink of the worker's Output: a port on a trunk gets its frames tagged and their bytes
// counted (Output::set_trunks); transmit counts them sent, and takes back the bytes of those
// the queue refuses.
uint16_t Worker::transmit(void* self, uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept {
    auto* w = static_cast<Worker*>(self);
    const TxQueue& tq = w->tx_[port];
    const bool trunk = w->ctx_.out.vlan(port) != 0;
    if (tq.lock) rte_spinlock_lock(tq.lock);
    const uint16_t sent = rte_eth_tx_burst(w->shared_.port_ids[port], tq.queue, pkts, n);
    if (tq.lock) rte_spinlock_unlock(tq.lock);
    if (w->rx_tsc_) [[unlikely]] {  // a sampled burst's packets: their time inside the gateway
        const uint64_t cycles = rte_get_tsc_cycles() - w->rx_tsc_;
        w->latency_.add((std::min<uint64_t>(cycles, uint64_t{1} << 44) * w->ns_per_tsc_q16_) >> 16, sent);
    }
    if (trunk) [[unlikely]] {
        PortSoftCounters& c = w->port_soft_[port];
        c.tx_packets += sent;
        for (uint16_t i = sent; i < n; ++i) c.tx_bytes -= pkts[i]->pkt_len;  // added when tagged
    }
    return sent;
}

// What the kernel wrote for a port on a trunk gets its VLAN's tag (vlan.h), and its bytes are
// counted (transmit takes back those of the packets the queue refuses), as the Output does for
// the rest. A packet the tag does not fit (no headroom) goes last, past the count returned, for
// the caller to free.
uint16_t Worker::on_trunk(uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept {
    const uint16_t vid = ctx_.out.vlan(port) & WorkerShared::kPortVlanId;
    uint16_t k = 0;
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf* m = pkts[i];
        if (vid && !vlan_insert(m, vid)) continue;
        bytes += m->pkt_len;
        pkts[i] = pkts[k];
        pkts[k++] = m;
    }
    port_soft_[port].tx_bytes += bytes;
    return k;
}

// An empty transmit call on each bond's queue of this worker: the bonding driver sends the LACP
// frames its state machine queued (WorkerShared::kick_ports).
void Worker::kick_bonds() noexcept {
    kicked_ms_ = ctx_.now_ms;
    for (const uint16_t port : shared_.kick_ports) {
        const TxQueue& tq = tx_[port];
        if (tq.lock) rte_spinlock_lock(tq.lock);
        (void)rte_eth_tx_burst(shared_.port_ids[port], tq.queue, nullptr, 0);
        if (tq.lock) rte_spinlock_unlock(tq.lock);
    }
}

// One receive burst in dataplane.latency_sampling is timed: its receive time, for transmit().
void Worker::sample_burst() noexcept {
    if (latency_countdown_ == 0) {
        latency_countdown_ = shared_.latency_sampling;
        ns_per_tsc_q16_ = (uint64_t{1000000000} << 16) / rte_get_tsc_hz();
    }
    if (--latency_countdown_ == 0) rx_tsc_ = rte_get_tsc_cycles();
}

void Worker::run() noexcept {
    rte_rcu_qsbr_thread_register(shared_.qsbr, ctx_.worker);
    rte_rcu_qsbr_thread_online(shared_.qsbr, ctx_.worker);
    PollPolicy poll(shared_.busy_poll);
    uint64_t aged_ms = 0;
    // nanosleep's default slack (50 us) would make every short sleep below about 70 us.
    prctl(PR_SET_TIMERSLACK, kTimerSlackNs, 0, 0, 0);
    while (!shared_.stop.load(std::memory_order_relaxed)) {
        if (shared_.test_stall.load(std::memory_order_relaxed)) [[unlikely]] {
            rte_delay_us_sleep(1000);
            continue;
        }
        ctx_.snap = shared_.snapshot.load(std::memory_order_acquire);
        ctx_.stats = shared_.stats.load(std::memory_order_acquire);  // after the snapshot: see WorkerShared
        ctx_.now = flow_clock_now();
        ctx_.now_tsc = rte_get_tsc_cycles();
        ctx_.now_ms = ctx_.now_tsc / tsc_per_ms_;
        poll.tick(ctx_.now_ms);
        bool busy = false;
        unsigned got = 0;
        for (const RxQueue& q : rx_) {
            const uint16_t n = rte_eth_rx_burst(shared_.port_ids[q.port], q.queue, burst_.mbufs, kBurst);
            if (n == 0) continue;
            busy = true;
            got += n;
            if (shared_.latency_sampling) [[unlikely]]
                sample_burst();
            if (const VlanMap* v = shared_.vlan_maps.size() ? shared_.vlan_maps[q.port] : nullptr) [[unlikely]] {
                vlan_burst(burst_, ctx_, *v, n, port_soft_.data());
                rx_tsc_ = 0;
                continue;
            }
            burst_.start(n, q.port);
            process_burst(burst_, ctx_);
            rx_tsc_ = 0;
        }
        if (ctx_.worker == 0 && shared_.hosts.size() && from_hosts()) busy = true;
        if (ctx_.worker == 0) [[unlikely]]
            announce_addresses();
        if (ctx_.out.held()) output_retry_held(ctx_);
        if (shared_.kick_ports.size() && ctx_.now_ms - kicked_ms_ >= WorkerShared::kKickMs) [[unlikely]]
            kick_bonds();
        if (ctx_.replica_hold.size()) [[unlikely]]
            replica_hold_release(ctx_, burst_);
        remove_requested();
        // Ageing works in seconds: idle, a step every loop; under load, one a millisecond sized
        // to pass over the worker's records every kAgePassMs (a scan of a table larger than the
        // caches costs a miss a record, and evicts the flows in use).
        if (!busy) {
            worker_housekeeping(ctx_, 256);
        } else if (ctx_.now_ms != aged_ms) {
            aged_ms = ctx_.now_ms;
            worker_housekeeping(ctx_, age_budget_);
        }
        rte_rcu_qsbr_quiescent(shared_.qsbr, ctx_.worker);
        // Idle, light load and loaded: poll_policy.h.
        if (const unsigned us = poll.after(busy, got))
            rte_delay_us_sleep(us);
        else if (!busy)
            rte_pause();
    }
    // Packets still waiting for a next hop at shutdown are counted drops.
    replica_hold_free(ctx_);
    output_release_held(ctx_, DropReason::neighbor_unresolved);
    if (ctx_.worker == 0) frag_flush(ctx_, DropReason::frag_timeout);  // the hold is shared: one empties it
    rte_rcu_qsbr_thread_offline(shared_.qsbr, ctx_.worker);
    rte_rcu_qsbr_thread_unregister(shared_.qsbr, ctx_.worker);
}

// What the kernel wrote on the host interfaces (its routing daemon, health answers, its own ARP
// and ND) leaves through their ports as it is. True when there was any.
bool Worker::from_hosts() noexcept {
    bool any = false;
    rte_mbuf* pkts[32];
    for (const WorkerShared::Host& h : shared_.hosts) {
        const uint16_t n = rte_eth_rx_burst(shared_.port_ids[h.output], 0, pkts, std::size(pkts));
        if (!n) continue;
        any = true;
        const uint16_t sent = transmit(this, h.port, pkts, ctx_.out.vlan(h.port) ? on_trunk(h.port, pkts, n) : n);
        ctx_.counters.host_out += sent;
        ctx_.counters.host_out_dropped += n - sent;
        for (uint16_t i = sent; i < n; ++i) rte_pktmbuf_free(pkts[i]);
    }
    return any;
}

// The ports' addresses announced to their links (WorkerShared::announce), counted as generated
// packets.
void Worker::announce_addresses() noexcept {
    const uint32_t a = shared_.announce.load(std::memory_order_relaxed);
    if (a != announce_seen_) {
        announce_seen_ = a;
        announce_left_ = 3;
        announce_at_ms_ = ctx_.now_ms;
    }
    if (!announce_left_ || ctx_.now_ms < announce_at_ms_ || !ctx_.snap) return;
    --announce_left_;
    announce_at_ms_ = ctx_.now_ms + 1000;
    const auto& ports = ctx_.snap->catalogue.ports;
    for (size_t p = 0; p < ports.size() && p < shared_.port_macs.size(); ++p) {
        for (const IpCidr& c : ports[p].addrs) {
            rte_mbuf* m = rte_pktmbuf_alloc(shared_.pool);
            if (!m) return;
            const bool built = c.family() == Family::v4
                ? build_arp_request(m, shared_.port_macs[p], c.addr.v4(), c.addr.v4())
                : build_unsolicited_na(m, shared_.port_macs[p], c.addr.v6());
            if (!built) {
                rte_pktmbuf_free(m);
                continue;
            }
            ++ctx_.counters.generated;
            if (transmit(this, static_cast<uint16_t>(p), &m, 1) == 1) {
                ++ctx_.counters.tx_packets;
            } else {
                ++ctx_.counters.drops[static_cast<unsigned>(DropReason::tx_full)];
                rte_pktmbuf_free(m);
            }
        }
    }
}

// Datagram flows whose endpoint a reload removed: the owner takes them out of the table, so the
// next datagram of the same tuple selects again.
void Worker::remove_requested() noexcept {
    rte_ring* ring = ctx_.worker < shared_.remove_rings.size() ? shared_.remove_rings[ctx_.worker] : nullptr;
    if (!ring) return;
    void* ids[64];
    const unsigned n = rte_ring_sc_dequeue_burst(ring, ids, std::size(ids), nullptr);
    for (unsigned i = 0; i < n; ++i) remove_gone_flow(ctx_, static_cast<uint32_t>(reinterpret_cast<uintptr_t>(ids[i])));
}

}  // namespace svcgate::dp
