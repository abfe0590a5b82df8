// The output stage: where every packet of a burst leaves the pipeline, and the only place the
// worker frees one. Packets for the gateway itself get their ARP or echo answer (local.h);
// routed packets get their next hop's MAC from the neighbor cache or wait for it in the hold
// queue while an ARP request goes out; answers and rejects go back out of the port they came in
// on; drops are freed and counted under their reason. Transmission is batched per port and
// handed to a TxSink once per port per burst: the workers' sink is rte_eth_tx_burst, trace's
// and the tests' keep the packets to look at.
//
// Every packet the worker received or built ends in exactly one of: transmitted
// (counters.tx_packets), freed under a reason (counters.drops), or held (counters.held), so
// rx + generated = tx + drops + held at every burst boundary (WorkerCounters::unaccounted).
//
// Runs on: the worker that owns the Output. Reads: the snapshot (routes), the neighbor cache.
// Writes: packets, the neighbor cache (ARP learning, request stamps), the worker's counters.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dataplane/l3/neighbor.h"
#include "dataplane/base/types.h"
#include "dataplane/packet/verdict.h"
#include "dataplane/pipeline/vlan.h"

namespace svcgate::dp {

struct Burst;
struct WorkerCtx;
struct PacketState;
struct PacketTrace;

// Where transmitted packets go. send() takes up to n packets for port index `port` and returns
// how many it took; the rest are freed as tx_full. Called once per port per burst, never per
// packet.
struct TxSink {
    uint16_t (*send)(void* arg, uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept = nullptr;
    void* arg = nullptr;
};

class Output {
public:
    static constexpr unsigned kHold = 256;       // packets waiting for ARP, per worker
    static constexpr uint32_t kHoldSeconds = 3;  // then freed as neighbor_unresolved
    static constexpr uint16_t kBatch = 64;       // packets per port between two sends

    struct Held {
        rte_mbuf* m;
        IpAddr hop;  // waits for this address's MAC (ARP or ND, by its family)
        uint16_t port;
        uint32_t since;
    };

    // `macs`: one per port, alive as long as the Output. `pool`: where ARP requests and
    // neighbor solicitations come from.
    void init(NeighborTable& neighbors, NeighborTable6& neighbors6, rte_mempool* pool, const rte_ether_addr* macs,
              uint16_t ports, TxSink sink);

    // The ports' MTUs (IP bytes), alive as long as the Output; null (the default): no limit.
    void set_mtus(const uint16_t* mtus) noexcept { mtus_ = mtus; }
    uint16_t mtu(uint16_t port) const noexcept { return mtus_ ? mtus_[port] : 0; }

    // Host interfaces (host_path): `host_of[port]` is the output index of port's host interface
    // (an index past the ports the sink knows), kNoHost for none; alive as long as the Output.
    static constexpr uint16_t kNoHost = 0xffff;
    void set_host_path(const uint16_t* host_of, uint16_t outputs) {
        host_of_ = host_of;
        if (outputs > n_ports_) {
            auto b = std::make_unique<TxBatch[]>(outputs);
            batches_ = std::move(b);
            n_outputs_ = outputs;
        }
    }
    uint16_t host_of(uint16_t port) const noexcept { return host_of_ ? host_of_[port] : kNoHost; }

    // Ports on trunks (vlan.h): `vlans` by port index (kPortVlanId, kPortOnTrunk), `counters` by
    // port index, where the bytes of what leaves a port on a trunk are added; both alive as long
    // as the Output. Null (the default): no port on a trunk. A frame takes its port's tag as it
    // is queued: a routed one with its MACs, in one write of its header (vlan_push_header).
    void set_trunks(const uint16_t* vlans, PortSoftCounters* counters) noexcept {
        vlans_ = vlans, trunk_counters_ = counters;
    }
    uint16_t vlan(uint16_t port) const noexcept { return vlans_ && port < n_ports_ ? vlans_[port] : 0; }
    PortSoftCounters& trunk_counters(uint16_t port) noexcept { return trunk_counters_[port]; }

    NeighborTable* neighbors() const noexcept { return neighbors_; }
    NeighborTable6* neighbors6() const noexcept { return neighbors6_; }
    rte_mempool* pool() const noexcept { return pool_; }
    const rte_ether_addr& mac(uint16_t port) const noexcept { return macs_[port]; }
    uint16_t ports() const noexcept { return n_ports_; }
    unsigned held() const noexcept { return n_held_; }
    const Held& held_at(unsigned i) const noexcept { return held_[i]; }  // i < held()

    struct TxBatch {
        rte_mbuf* pkts[kBatch];
        uint16_t n = 0;
    };
    TxBatch& batch(uint16_t port) noexcept { return batches_[port]; }

    // The family's last neighbor looked up (neighbor.h): what a routed packet without a MAC from
    // the route stage asks first.
    template <typename A>
    LastNeighbor<A>& last_neighbor() noexcept {
        if constexpr (std::is_same_v<A, Ip4>)
            return last_neighbor4_;
        else
            return last_neighbor6_;
    }

private:
    friend void output_burst(Burst&, WorkerCtx&) noexcept;
    friend void output_retry_held(WorkerCtx&) noexcept;
    friend void output_flush(WorkerCtx&) noexcept;
    friend void output_release_held(WorkerCtx&, DropReason) noexcept;
    friend void output_drop(WorkerCtx&, rte_mbuf*, DropReason) noexcept;
    friend bool hold(WorkerCtx&, const Held&) noexcept;
    NeighborTable* neighbors_ = nullptr;
    NeighborTable6* neighbors6_ = nullptr;
    rte_mempool* pool_ = nullptr;
    const rte_ether_addr* macs_ = nullptr;
    const uint16_t* mtus_ = nullptr;
    const uint16_t* host_of_ = nullptr;
    const uint16_t* vlans_ = nullptr;
    PortSoftCounters* trunk_counters_ = nullptr;
    uint16_t n_ports_ = 0;
    uint16_t n_outputs_ = 0;  // ports and host interfaces
    TxSink sink_;
    std::unique_ptr<TxBatch[]> batches_;
    Held held_[kHold];
    unsigned n_held_ = 0;
    LastNeighbor<Ip4> last_neighbor4_;
    LastNeighbor<Ip6> last_neighbor6_;
};

// Every packet of the burst, by its verdict: answered, sent, held or freed; then the batches go
// out. The last stage of process_burst().
void output_burst(Burst& b, WorkerCtx& ctx) noexcept;
// One packet out of any burst (a fragment released from the hold), as output_burst would; the
// caller flushes (output_burst does at its end).
void output_packet(WorkerCtx& ctx, rte_mbuf* m, PacketState& p, uint16_t in_port, PacketTrace* t) noexcept;
// Held packets whose next hop is known now are sent; those held too long are freed; requests are
// repeated once a second. Once per worker loop while anything is held.
void output_retry_held(WorkerCtx& ctx) noexcept;
// Hands every port's batch to the sink.
void output_flush(WorkerCtx& ctx) noexcept;
// Frees every held packet under `why` (shutdown: neighbor_unresolved).
void output_release_held(WorkerCtx& ctx, DropReason why) noexcept;
// Frees one packet, counted under `why`.
void output_drop(WorkerCtx& ctx, rte_mbuf* m, DropReason why) noexcept;

}  // namespace svcgate::dp
