// `svcgatectl trace`: packets through the real pipeline (process_burst, as the workers call it,
// output stage included) against a config, in order, sharing flow state — so stickiness,
// affinity, reply translation and what happens at L2 can be traced. One worker, a seeded RNG
// and a fixed clock: deterministic. Configs reach it through the same Publisher as the daemon's.
//
// L2 offline: the ports have the MACs 02:00:00:00:00:01, :02, ... (port order); next hops are
// known only from `dataplane.neighbors` (trace answers no ARP). A packet whose next hop is not
// known is shown as it would leave, with `held` and the ARP request it made, then released (and
// counted as neighbor_unresolved) so the next packet starts from an empty hold queue. The
// fragment hold is kept from packet to packet (a pcap's fragments in any order); what it still
// holds at the end is freed.
//
// Runs on: the calling thread (needs init_tool_eal()). Throws ConfigError for a bad config.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/config/config_model.h"
#include "control/snapshot/flow_sweep.h"
#include "dataplane/flow/flow_table.h"
#include "control/trace/pcap_io.h"
#include "dataplane/pipeline/pipeline.h"
#include "control/snapshot/publisher.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

struct TraceOptions {
    uint64_t seed = 1;
    uint32_t now = 1000;  // seconds on the flow table's clock
    uint16_t owners =
        1;  // the tables' owners and stats rows: the tracer's worker is owner 0 (a replicating gateway has 2)
    // Told each trace that fails (TraceRecord::traced), beside the record: the tests fail on it.
    std::function<void(const Status&)> on_refused;
};

struct TraceRecord {
    // Failed: nothing was traced (a spec that does not read, no packet to reply to, a frame no mbuf
    // holds); the members below but `input` are empty.
    Status traced;
    std::string input;  // the packet as given (or decoded from the pcap)
    dp::Verdict verdict = dp::Verdict::drop;
    dp::DropReason reason = dp::DropReason::none;
    std::optional<std::string> service;   // namespace/name:port
    std::optional<std::string> endpoint;  // ip:port
    std::optional<std::string> role;
    bool masquerade = false;
    std::optional<std::string> masquerade_rule;  // a new connection's: why masqueraded, or not
    bool new_flow = false;
    std::optional<std::string> out;        // the packet as it leaves
    std::optional<std::string> out_flags;  // TCP flags as it leaves
    dp::FlowKey out_key;                   // the tuple as it leaves: IPv4 ...
    dp::FlowKey6 out_key6;                 // ... or IPv6 (out_v6)
    bool out_v6 = false;
    std::optional<std::string> port;  // egress port name
    std::optional<unsigned> vlan;     // the egress port's VLAN: the tag the frame leaves with
    // L2, from the output stage.
    dp::L2Outcome l2 = dp::L2Outcome::none;
    dp::DropReason l2_reason = dp::DropReason::none;  // why the output stage freed it
    std::optional<std::string> next_hop;
    std::optional<std::string> mac;  // the frame's destination MAC as it leaves
    bool arp_request = false;        // it made the worker ask for its next hop
    std::vector<uint8_t> frame;      // the packet as it leaves (empty for drops)
    // What else left because of this packet: the fragments it released from the hold, or the
    // fragments it became on a port with a smaller MTU.
    std::vector<std::vector<uint8_t>> also;

    std::string json() const;
    std::string text() const;
};

class Tracer {
public:
    // Failed (status()) when its tables cannot be allocated: every trace then fails alike.
    Tracer(const Config& cfg, TraceOptions opts = {});
    ~Tracer();
    const Status& status() const noexcept { return status_; }

    TraceRecord run_spec(const std::string& spec);  // also "reply N [FLAGS]"
    TraceRecord run_frame(const Frame& frame, std::string input);
    // One burst of up to kBurst frames, as a worker receives it from one queue.
    std::vector<TraceRecord> run_burst(const std::vector<Frame>& frames, std::vector<std::string> inputs);
    const dp::ServiceSnapshot& snapshot() const { return *publisher_->current(); }
    const SlotRegistry& slots() const { return publisher_->slots(); }
    dp::WorkerCtx& ctx() { return ctx_; }
    dp::FlowTable& flows() { return *flows_; }
    dp::FlowTable6& flows6() { return *flows6_; }
    void advance(uint32_t seconds);
    // Frees what the fragment hold keeps (counted as frag_timeout), as if its datagrams timed out.
    void flush_fragments();
    // The replica hold's turn (replica_hold.h), as the worker loop takes it: what left, as tuples.
    std::vector<std::string> release_replica_hold();
    // Drops the records "reply N" refers to (a long run of frames, as the fuzzer's, keeps none).
    void forget_history() { history_.clear(); }
    // Publishes `cfg` as the next generation and sweeps the flows, as the daemon's reload does.
    SweepResult reload(const Config& cfg);
    // The endpoints failing their health checks from the next reload on (endpoint_health.h).
    void set_health(EndpointHealthPtr health) { publisher_->set_health(std::move(health)); }

private:
    // The packets the output stage has handed to the transmit side and not yet collected, as
    // (port index, mbuf); the caller frees what it takes.
    std::vector<std::pair<uint16_t, rte_mbuf*>> take_sent() { return std::exchange(sent_, {}); }
    static uint16_t capture(void* self, uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept;
    // One packet's record; `leaving`: the frame as it leaves (null when it was freed).
    TraceRecord record(const dp::PacketState& p, const dp::PacketTrace& t, const rte_mbuf* leaving,
                       std::string input) const;

    Status status_;
    std::function<void(const Status&)> on_refused_;
    TraceRecord refused(std::string input, Status why) const;
    std::unique_ptr<dp::FlowTable> flows_;
    std::unique_ptr<dp::FlowTable6> flows6_;
    std::unique_ptr<dp::FragTable> frags_;
    std::vector<uint16_t> mtus_;
    struct Device {
        std::string device;
        uint16_t vlan = 0;
    };
    std::vector<Device> ports_;  // by port index: its device and VLAN
    uint16_t arrival_port(const std::vector<Frame>& frames);
    dp::NeighborTable neighbors_;
    dp::NeighborTable6 neighbors6_;
    std::vector<rte_ether_addr> macs_;
    std::vector<uint16_t> host_of_;        // by port: its host interface's output index
    std::vector<std::string> host_names_;  // by port: its host interface ("" none)
    dp::WorkerCtx ctx_;
    std::unique_ptr<Publisher> publisher_;

    std::unique_ptr<dp::Burst> burst_;
    std::vector<std::pair<uint16_t, rte_mbuf*>> sent_;
    std::vector<TraceRecord> history_;
};

// The configured neighbors into a neighbor cache (dataplane.neighbors); those `old` had and
// `next` has not become ordinary entries again. Returns the addresses that found no room.
std::vector<IpAddr> pin_neighbors(dp::NeighborTable& nt, dp::NeighborTable6& nt6,
                                  const std::vector<NeighborConfig>& next, const std::vector<NeighborConfig>& old);

std::string format_mac(const rte_ether_addr& mac);

}  // namespace svcgate::ctl
