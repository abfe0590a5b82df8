// `svcgatectl trace`: packets through the real pipeline (process_burst, as the workers call it)
// against a config, in order, sharing flow state — so stickiness, affinity and reply
// translation can be traced. One worker, a seeded RNG and a fixed clock: deterministic.
//
// Runs on: the calling thread (needs init_tool_eal()). Throws ConfigError for a bad config.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config_model.h"
#include "flow_sweep.h"
#include "flow_table.h"
#include "pcap_io.h"
#include "pipeline.h"
#include "snapshot.h"

namespace svcgate::ctl {

struct TraceOptions {
    uint64_t seed = 1;
    uint32_t now = 1000;  // seconds on the flow table's clock
};

struct TraceRecord {
    std::string input;                  // the packet as given (or decoded from the pcap)
    dp::Verdict verdict = dp::Verdict::drop;
    dp::DropReason reason = dp::DropReason::none;
    std::optional<std::string> service;   // namespace/name:port
    std::optional<std::string> endpoint;  // ip:port
    std::optional<std::string> role;
    bool masquerade = false;
    bool new_flow = false;
    std::optional<std::string> out;       // the packet as it leaves
    std::optional<std::string> out_flags; // TCP flags as it leaves
    dp::FlowKey out_key;
    std::optional<std::string> port;      // egress port name
    std::vector<uint8_t> frame;           // the packet as it leaves (empty for drops)

    std::string json() const;
    std::string text() const;
};

class Tracer {
public:
    Tracer(const Config& cfg, TraceOptions opts = {});
    ~Tracer();

    TraceRecord run_spec(const std::string& spec);        // also "reply N [FLAGS]"
    TraceRecord run_frame(const Frame& frame, std::string input);
    const dp::ServiceSnapshot& snapshot() const { return *snap_; }
    dp::WorkerCtx& ctx() { return ctx_; }
    dp::FlowTable& flows() { return *flows_; }
    void advance(uint32_t seconds);
    // Drops the records "reply N" refers to (a long run of frames, as the fuzzer's, keeps none).
    void forget_history() { history_.clear(); }
    // Publishes `cfg` as the next generation and sweeps the flows, as the daemon's reload does.
    SweepResult reload(const Config& cfg);

private:
    std::unique_ptr<dp::ServiceSnapshot> snap_;
    std::unique_ptr<dp::FlowTable> flows_;
    dp::WorkerCtx ctx_;
    std::vector<TraceRecord> history_;
};

}  // namespace svcgate::ctl
