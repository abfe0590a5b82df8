// The poll-mode worker: receive a burst, run the pipeline, resolve next hops, transmit. One per
// lcore; never locks on the packet path (a transmit queue shared because the device has fewer
// queues than workers takes a spin lock around rte_eth_tx_burst only).
//
// Runs on: a worker lcore (worker_main). Reads the current snapshot through an RCU-published
// pointer and reports a quiescent state once per loop, so the control thread can free old
// snapshots and the flow table can reuse ids.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "neighbor.h"
#include "pipeline.h"

namespace svcgate::dp {

// The flow table's clock (WorkerCtx::now): whole seconds of the TSC, never 0. The control thread
// reads it too, to show how long a flow has been idle.
inline uint32_t flow_clock_now() noexcept {
    return static_cast<uint32_t>(rte_get_tsc_cycles() / rte_get_tsc_hz()) + 1;
}

struct WorkerShared {
    std::atomic<const ServiceSnapshot*> snapshot{nullptr};
    std::atomic<bool> stop{false};
    NeighborTable neighbors;
    rte_rcu_qsbr* qsbr = nullptr;
    rte_mempool* pool = nullptr;
    std::vector<rte_ether_addr> port_macs;  // by port index (config order)
    std::vector<uint16_t> port_ids;         // DPDK port id by port index
    std::vector<rte_ring*> remove_rings;    // per worker: flow ids the control thread wants gone
};

struct RxQueue {
    uint16_t port;   // port index
    uint16_t queue;
};

struct TxQueue {
    uint16_t queue = 0;
    rte_spinlock_t* lock = nullptr;  // set when other workers use the same queue
};

class Worker {
public:
    static constexpr unsigned kHold = 256;         // packets waiting for ARP, per worker
    static constexpr uint32_t kHoldSeconds = 3;    // then dropped as neighbor_unresolved

    Worker(WorkerShared& shared, uint16_t index, uint16_t n_workers, FlowTable& flows, uint64_t seed);
    void add_rx(RxQueue q) { rx_.push_back(q); }
    void set_tx(std::vector<TxQueue> tx) { tx_ = std::move(tx); }

    // The loop; returns when shared.stop is set. For rte_eal_remote_launch.
    static int main(void* self);
    const WorkerCounters& counters() const noexcept { return ctx_.counters; }
    uint64_t tx_packets() const noexcept { return tx_packets_; }
    uint64_t generated() const noexcept { return generated_; }
    uint32_t held() const noexcept { return held_now_.load(std::memory_order_relaxed); }
    // The balance every packet keeps (README, Reliability): what came in or was made here has
    // left, was dropped under a reason, or waits for ARP. A reject is counted under its reason
    // and also leaves, so rejects are taken out of the drops once. Exact once the worker is idle;
    // read while it runs, it is off by the packets of the burst in hand.
    int64_t unaccounted() const noexcept;

private:
    struct Out {
        rte_mbuf* pkts[2 * kBurst];
        uint16_t n = 0;
    };
    struct Held {
        rte_mbuf* m;
        Ip4 hop;
        uint16_t port;
        uint32_t since;
    };
    void run() noexcept;
    void dispatch(rte_mbuf* m, uint16_t in_port, const PacketResult& r) noexcept;
    void send_l3(rte_mbuf* m, uint16_t port, Ip4 hop) noexcept;
    void send_to(rte_mbuf* m, uint16_t port, const rte_ether_addr& mac) noexcept;
    void queue(uint16_t port, rte_mbuf* m) noexcept;
    void flush() noexcept;
    void hold(rte_mbuf* m, uint16_t port, Ip4 hop) noexcept;
    void retry_held() noexcept;
    void request(uint16_t port, Ip4 hop) noexcept;
    void drop(rte_mbuf* m, DropReason r) noexcept;
    void remove_requested() noexcept;

    WorkerShared& shared_;
    WorkerCtx ctx_;
    std::vector<RxQueue> rx_;
    std::vector<TxQueue> tx_;
    std::vector<Out> out_;
    Held held_[kHold];
    unsigned n_held_ = 0;
    std::atomic<uint32_t> held_now_{0};  // n_held_ for the control thread
    uint64_t tx_packets_ = 0;
    uint64_t generated_ = 0;  // packets this worker built itself (ARP requests)
};

}  // namespace svcgate::dp
