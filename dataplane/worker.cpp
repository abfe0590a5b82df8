#include "worker.h"

#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "local.h"

namespace svcgate::dp {

Worker::Worker(WorkerShared& shared, uint16_t index, uint16_t n_workers, FlowTable& flows, uint64_t seed)
    : shared_(shared), out_(shared.port_ids.size()) {
    ctx_.worker = index;
    ctx_.n_workers = n_workers;
    ctx_.flows = &flows;
    ctx_.rng = Rng(seed + index);
}

int Worker::main(void* self) {
    static_cast<Worker*>(self)->run();
    return 0;
}

void Worker::run() noexcept {
    rte_rcu_qsbr_thread_register(shared_.qsbr, ctx_.worker);
    rte_rcu_qsbr_thread_online(shared_.qsbr, ctx_.worker);
    rte_mbuf* pkts[kBurst];
    PacketResult res[kBurst];
    unsigned idle = 0, loops = 0;
    while (!shared_.stop.load(std::memory_order_relaxed)) {
        ctx_.snap = shared_.snapshot.load(std::memory_order_acquire);
        ctx_.now = flow_clock_now();
        bool busy = false;
        for (const RxQueue& q : rx_) {
            const uint16_t n = rte_eth_rx_burst(shared_.port_ids[q.port], q.queue, pkts, kBurst);
            if (n == 0) continue;
            busy = true;
            process_burst(pkts, n, q.port, ctx_, res);
            for (uint16_t i = 0; i < n; ++i) dispatch(pkts[i], q.port, res[i]);
            flush();
        }
        if (n_held_) retry_held();
        remove_requested();
        // Ageing works in seconds: under load every 64th loop is often enough.
        if (!busy || (++loops & 63) == 0) worker_housekeeping(ctx_, busy ? 1024 : 256);
        rte_rcu_qsbr_quiescent(shared_.qsbr, ctx_.worker);
        // Idle: pause instead of spinning flat out (a lab on a 2-core box still has to run).
        if (busy) idle = 0;
        else if (++idle > 1024) rte_delay_us_sleep(50);
        else rte_pause();
    }
    flush();
    for (unsigned i = 0; i < n_held_; ++i) drop(held_[i].m, DropReason::neighbor_unresolved);
    n_held_ = 0;
    held_now_.store(0, std::memory_order_relaxed);
    rte_rcu_qsbr_thread_offline(shared_.qsbr, ctx_.worker);
    rte_rcu_qsbr_thread_unregister(shared_.qsbr, ctx_.worker);
}

void Worker::dispatch(rte_mbuf* m, uint16_t in_port, const PacketResult& r) noexcept {
    switch (r.verdict) {
    case Verdict::dnat:
    case Verdict::reply:
    case Verdict::forward:
        send_l3(m, r.out_port, r.next_hop);
        return;
    case Verdict::reject:
        queue(in_port, m);  // built in place, MACs swapped
        return;
    case Verdict::local: {
        DropReason d = handle_local(m, shared_.port_macs[in_port], *ctx_.snap, shared_.neighbors, ctx_.now);
        if (d == DropReason::none) queue(in_port, m);
        else drop(m, d);
        return;
    }
    case Verdict::drop:
        rte_pktmbuf_free(m);  // counted by process_burst
        return;
    }
}

void Worker::send_l3(rte_mbuf* m, uint16_t port, Ip4 hop) noexcept {
    rte_ether_addr mac;
    const NeighborTable::State ns = shared_.neighbors.lookup(hop, ctx_.now, mac);
    if (ns == NeighborTable::State::unknown) {
        hold(m, port, hop);
        return;
    }
    send_to(m, port, mac);
    if (ns == NeighborTable::State::stale && shared_.neighbors.want_request(hop, ctx_.now)) request(port, hop);
}

void Worker::send_to(rte_mbuf* m, uint16_t port, const rte_ether_addr& mac) noexcept {
    auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
    eth->dst_addr = mac;
    eth->src_addr = shared_.port_macs[port];
    queue(port, m);
}

void Worker::queue(uint16_t port, rte_mbuf* m) noexcept {
    Out& o = out_[port];
    if (o.n == std::size(o.pkts)) flush();
    o.pkts[o.n++] = m;
}

void Worker::flush() noexcept {
    for (uint16_t p = 0; p < out_.size(); ++p) {
        Out& o = out_[p];
        if (!o.n) continue;
        const TxQueue& tq = tx_[p];
        if (tq.lock) rte_spinlock_lock(tq.lock);
        uint16_t sent = rte_eth_tx_burst(shared_.port_ids[p], tq.queue, o.pkts, o.n);
        if (tq.lock) rte_spinlock_unlock(tq.lock);
        tx_packets_ += sent;
        for (uint16_t i = sent; i < o.n; ++i) drop(o.pkts[i], DropReason::tx_full);
        o.n = 0;
    }
}

void Worker::hold(rte_mbuf* m, uint16_t port, Ip4 hop) noexcept {
    if (shared_.neighbors.want_request(hop, ctx_.now)) request(port, hop);
    if (n_held_ == kHold) {
        drop(m, DropReason::neighbor_hold_full);
        return;
    }
    held_[n_held_++] = Held{m, hop, port, ctx_.now};
    held_now_.store(n_held_, std::memory_order_relaxed);
}

void Worker::retry_held() noexcept {
    unsigned keep = 0;
    for (unsigned i = 0; i < n_held_; ++i) {
        Held h = held_[i];
        rte_ether_addr mac;
        if (shared_.neighbors.lookup(h.hop, ctx_.now, mac) != NeighborTable::State::unknown) {
            send_to(h.m, h.port, mac);
        } else if (ctx_.now - h.since >= kHoldSeconds) {
            drop(h.m, DropReason::neighbor_unresolved);
        } else {
            if (shared_.neighbors.want_request(h.hop, ctx_.now)) request(h.port, h.hop);
            held_[keep++] = h;
        }
    }
    n_held_ = keep;
    held_now_.store(n_held_, std::memory_order_relaxed);
    flush();
}

void Worker::request(uint16_t port, Ip4 hop) noexcept {
    const NextHop* nh = ctx_.snap ? ctx_.snap->route(hop) : nullptr;
    if (!nh) return;
    rte_mbuf* m = rte_pktmbuf_alloc(shared_.pool);
    if (!m) return;
    if (!build_arp_request(m, shared_.port_macs[port], nh->source, hop)) {
        rte_pktmbuf_free(m);
        return;
    }
    ++generated_;
    queue(port, m);
}

// Datagram flows whose endpoint a reload removed: the owner takes them out of the table, so the
// next datagram of the same tuple selects again.
void Worker::remove_requested() noexcept {
    rte_ring* ring = ctx_.worker < shared_.remove_rings.size() ? shared_.remove_rings[ctx_.worker] : nullptr;
    if (!ring) return;
    void* ids[64];
    const unsigned n = rte_ring_sc_dequeue_burst(ring, ids, std::size(ids), nullptr);
    for (unsigned i = 0; i < n; ++i) {
        const auto id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(ids[i]));
        const Flow& f = ctx_.flows->flow(id);
        if (f.live.load(std::memory_order_relaxed) && f.owner == ctx_.worker &&
            (f.state.load(std::memory_order_relaxed) & kStateGone)) {
            ctx_.flows->remove(id);
            ctx_.counters.flows_expired++;
        }
    }
}

int64_t Worker::unaccounted() const noexcept {
    const WorkerCounters& c = ctx_.counters;
    int64_t dropped = 0;
    for (unsigned r = 1; r < kDropReasons; ++r) dropped += static_cast<int64_t>(c.drops[r]);
    dropped -= static_cast<int64_t>(c.verdicts[static_cast<unsigned>(Verdict::reject)]);
    return static_cast<int64_t>(c.rx_packets + generated_) - static_cast<int64_t>(tx_packets_) - dropped -
           static_cast<int64_t>(held());
}

void Worker::drop(rte_mbuf* m, DropReason r) noexcept {
    ctx_.counters.drops[static_cast<unsigned>(r)]++;
    rte_pktmbuf_free(m);
}

}  // namespace svcgate::dp
