// The poll-mode worker: the loop around the pipeline. Receive a burst from each of its queues, run
// process_burst() on it (which answers, forwards, holds or frees every packet and transmits), then
// the loop's chores: held packets, flows a reload handed over, ageing, the quiescent report.
// Never locks on the packet path (a transmit queue shared because the device has fewer queues
// than workers takes a spin lock around rte_eth_tx_burst only).
//
// Runs on: a worker lcore (Worker::main). Reads the current snapshot through an RCU-published
// pointer and reports a quiescent state once per loop, so the control thread can free old
// snapshots and the flow table can reuse ids.
#pragma once

#include <atomic>
#include <cstdint>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "dataplane/base/fixed_array.h"
#include "dataplane/l3/neighbor.h"
#include "dataplane/pipeline/latency.h"
#include "dataplane/pipeline/pipeline.h"
#include "dataplane/pipeline/vlan.h"

namespace svcgate::dp {

// The flow table's clock (WorkerCtx::now): whole seconds of the TSC, never 0. The control thread
// reads it too, to show how long a flow has been idle.
inline uint32_t flow_clock_now() noexcept { return static_cast<uint32_t>(rte_get_tsc_cycles() / rte_get_tsc_hz()) + 1; }

// What all workers share, set up by the daemon before they start.
struct WorkerShared {
    std::atomic<const ServiceSnapshot*> snapshot{nullptr};
    // Published before any snapshot whose slots need it (Publisher), so a worker that loads it
    // after the snapshot sees a table large enough for that snapshot.
    std::atomic<StatsTable*> stats{nullptr};
    std::atomic<bool> stop{false};
    // Changed by the control thread when the ports' addresses should be announced (ha: addresses
    // taken over, or this gateway's own back): worker 0 then sends a gratuitous ARP or an
    // unsolicited NA for every port address, three times a second apart.
    std::atomic<uint32_t> announce{0};
    // A test hook: set, the workers stop reporting quiescent states (they wait for `stop` only),
    // as a stuck worker would. Never set outside the watchdog's test.
    std::atomic<bool> test_stall{false};
    NeighborTable neighbors;
    NeighborTable6 neighbors6;
    rte_rcu_qsbr* qsbr = nullptr;
    rte_mempool* pool = nullptr;
    FixedArray<rte_ether_addr> port_macs;    // by port index (config order)
    FixedArray<uint16_t> port_ids;           // DPDK port id by port index
    FixedArray<rte_ring*> remove_rings;      // per worker: flow ids the control thread wants gone
    FixedArray<uint16_t> port_mtus;          // by port index
    FragTable* frags = nullptr;              // the fragment hold, shared
    uint32_t icmp_errors_per_second = 1000;  // per worker
    // The host path: port_ids and each worker's transmit queues go on past the ports with one
    // entry per host interface (output index ports + k; port_macs and port_mtus do not: a host
    // interface is sent to as it is, never routed to); host_of maps a port
    // index to its host interface's output index (Output::kNoHost: none). Worker 0 polls each
    // host interface's single receive queue and sends what the kernel wrote out of its port.
    FixedArray<uint16_t> host_of;  // by port index
    struct Host {
        uint16_t output;  // its output index (ports + k)
        uint16_t port;    // the port index it belongs to
    };
    FixedArray<Host> hosts;
    // VLAN ports (vlan.h). By port index: the tag its frames leave with (kPortVlanId bits) and
    // kPortOnTrunk when its device has VLAN ports (the port's packets are then counted by the
    // workers, PortSoftCounters, not by the device); 0 for a port alone on its device. And by
    // port index, the dispatch of the device whose queues it polls (its first port), or null.
    static constexpr uint16_t kPortVlanId = dp::kPortVlanId, kPortOnTrunk = dp::kPortOnTrunk;
    FixedArray<uint16_t> port_vlans;
    FixedArray<const VlanMap*> vlan_maps;
    // The ports (indices) of 802.3ad bonds, one per bond: LACP's frames leave in a transmit call
    // and arrive in a receive call, and the driver wants both at least every 100 ms. Idle workers
    // still poll their receive queues every PollPolicy::kMaxSleepUs; each calls its transmit queue of these
    // ports with nothing every kKickMs.
    FixedArray<uint16_t> kick_ports;
    static constexpr uint64_t kKickMs = 50;
    uint32_t punt_control_per_second = 2000;  // per worker (DataplaneConfig)
    uint32_t punt_other_per_second = 1000;
    bool busy_poll = false;         // dataplane.poll: busy (never a light-load sleep) or adaptive
    uint32_t latency_sampling = 0;  // dataplane.latency_sampling: one receive burst in N timed (latency.h)
};

struct RxQueue {
    uint16_t port;  // port index
    uint16_t queue;
};

struct TxQueue {
    uint16_t queue = 0;
    rte_spinlock_t* lock = nullptr;  // set when other workers use the same queue
};

class Worker {
public:
    Worker(WorkerShared& shared, uint16_t index, uint16_t n_workers, FlowTable& flows, FlowTable6& flows6,
           uint64_t seed);
    // The receive queues it polls; the transmit queue it uses on each port (by port index).
    void set_queues(std::vector<RxQueue> rx, std::vector<TxQueue> tx) {
        rx_ = FixedArray<RxQueue>(std::move(rx));
        tx_ = FixedArray<TxQueue>(std::move(tx));
    }

    // The loop; returns when shared.stop is set. For rte_eal_remote_launch.
    static int main(void* self);
    // Where its masquerade port cursor starts (new_flow.cpp's next_snat_port): past the ports that
    // flows restored at start hold, so that new connections do not walk through them. Before run().
    // Steered ports (rss_steer.h) walk the whole range: from the same point, as ports restored
    // flows hold are spread over every worker's share.
    void set_snat_cursor(uint32_t c) noexcept { ctx_.snat_cursor = c, ctx_.steer_cursor = c * ctx_.n_workers; }
    // Flow replication on: the worker's ring to the sync thread (single producer, single consumer,
    // 4-byte elements). Before the worker runs.
    void set_sync_ring(rte_ring* r) noexcept { ctx_.sync = r; }
    // NAT event export on (nat_event.h): the worker's ring to the exporter (single producer, single
    // consumer, NatEvent elements) and the events it takes (bit 1 << NatEventType: an event no one
    // exports is not written). Before the worker runs.
    void set_nat_ring(rte_ring* r, uint8_t types) noexcept {
        ctx_.nat_ring = r, ctx_.events = r ? &events_ : nullptr, ctx_.nat_event_types = types;
    }
    // By port index, its RSS steering or null (WorkerCtx::rss); alive as long as the worker.
    void set_rss(const RssSteer* const* by_port, uint16_t n) noexcept { ctx_.rss = by_port, ctx_.n_rss = n; }
    // Read by the control thread while the worker runs (see WorkerCounters).
    const WorkerCounters& counters() const noexcept { return ctx_.counters; }
    // By port index, what it received and sent of the ports on a trunk (WorkerShared::port_vlans);
    // read by the control thread as counters() is.
    const PortSoftCounters& port_counters(uint16_t port) const noexcept { return port_soft_[port]; }
    // The sampled time inside the gateway (latency.h); read by the control thread as counters() is.
    const LatencyHistogram& latency() const noexcept { return latency_; }

private:
    void run() noexcept;
    void remove_requested() noexcept;
    bool from_hosts() noexcept;
    void announce_addresses() noexcept;
    static uint16_t transmit(void* self, uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept;
    uint16_t on_trunk(uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept;
    void kick_bonds() noexcept;

    WorkerShared& shared_;
    WorkerCtx ctx_;
    Burst burst_;
    FixedArray<RxQueue> rx_;
    FixedArray<TxQueue> tx_;
    FixedArray<PortSoftCounters> port_soft_;  // by port index
    uint64_t rx_tsc_ = 0;                     // the sampled burst's receive time, 0 when the burst is not sampled
    uint32_t latency_countdown_ = 0;
    uint64_t ns_per_tsc_q16_ = 0;  // nanoseconds per TSC cycle, fixed point (16 fraction bits)
    void sample_burst() noexcept;
    uint64_t tsc_per_ms_ = 1;
    // Sleeps as short as PollPolicy's need a timer slack below nanosleep's default 50 us.
    static constexpr unsigned long kTimerSlackNs = 5000;
    static constexpr uint32_t kAgePassMs = 2000;  // under load, each record is looked at this often
    uint32_t age_budget_ = 64;                    // records a millisecond under load
    uint32_t announce_seen_ = 0;                  // WorkerShared::announce as last acted on
    uint64_t kicked_ms_ = 0;                      // WorkerShared::kick_ports last called
    unsigned announce_left_ = 0;                  // rounds still to send
    uint64_t announce_at_ms_ = 0;
    // Last, out of the way of the members the loop reads: 6 KB and 800 bytes touched only when
    // exporting NAT events or sampling latency.
    NatEventBuffer events_;  // ctx_.events when exporting
    LatencyHistogram latency_;
};

}  // namespace svcgate::dp
