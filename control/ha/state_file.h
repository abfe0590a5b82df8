// Flows that outlive the process that made them.
//
// The state file (dataplane.flow_table.state_file): on an orderly stop (SIGTERM, SIGINT, the end
// of a drain) the daemon, its workers stopped, writes every live flow of both tables; the next
// start of a gateway with the same identity reads it back after its first config is published and
// before its workers run, so a restart or an upgrade keeps its connections (TCP retransmits across
// the gap; masqueraded ones keep their address and port). A file is good for one start: it is
// removed once read, so a crash later never brings back flows from before it.
//
// A file is refused, whole and with the reason, when it is not one (magic, version, size), when
// its checksum does not match (cut short, changed), when it was written by another gateway (its
// identity: the ports' names and addresses and the masquerade port range, the addresses a
// masqueraded flow's replies come back to), when it is older than state_max_age or written in the
// future, or when a record in it is malformed. Flows of a file that is accepted are imported one
// by one (FlowImporter): one whose endpoint the config no longer lists, or whose timeout passed
// meanwhile, is left out and counted.
//
// Layout, little-endian: "SGFLOWS\0", u32 version (1), u32 identity length, u64 written (Unix
// seconds), u32 flows, u32 reserved (0); the identity; the flows (dataplane/flow/flow_record.h); u32 CRC32c
// (crc32c_bytes, seed 0xffffffff) of everything before it.
//
// Runs on: the control thread, while no worker runs (restore) or after they stopped (save).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "control/base/status.h"
#include "control/config/config_model.h"
#include "control/snapshot/service_endpoint.h"
#include "dataplane/flow/flow_record.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

// Puts flows made elsewhere (a state file, a peer) into this process's tables: a NAT flow gets
// the counting slots of its service port and endpoint in `snap` (and counts in the endpoint's
// active flows), an affinity record its service port's; a flow whose service port or endpoint
// `snap` does not list is left out.
class FlowImporter {
public:
    enum class Outcome : uint8_t { inserted, exists, gone, expired, clash, full };
    static constexpr unsigned kOutcomes = 6;

    // `workers`: the tables' first owners are the workers (a replicating gateway has one more,
    // the sync thread's).
    FlowImporter(const dp::ServiceSnapshot& snap, const dp::StatsTable& stats, dp::FlowTable& flows,
                 dp::FlowTable6* flows6, uint16_t workers);
    // Owned by worker `turn` modulo the workers (callers spread flows over the workers by
    // counting). `extra_idle`: seconds the record spent in transit (a file's age), added to its
    // idle time. Before the workers run.
    Outcome import(dp::FlowRecord& r, uint32_t turn, uint32_t now, uint32_t extra_idle);
    // Owned by `owner`, marked with `origin` (Flow::origin). By the thread of that owner only.
    Outcome import_to(dp::FlowRecord& r, uint16_t owner, uint8_t origin, uint32_t now, uint32_t extra_idle);
    // Where worker w's masquerade port cursor (new_flow.cpp's next_snat_port) goes on so that it
    // does not walk through the ports the masqueraded flows imported so far hold.
    uint32_t snat_cursor(uint16_t w) const noexcept { return w < snat_cursor_.size() ? snat_cursor_[w] : 0; }

private:
    template <typename K>
    Outcome import_as(dp::BasicFlowInit<K>& in, dp::BasicFlowTable<K>& table, uint16_t owner, uint32_t now,
                      uint32_t idle);
    void hold_snat_port(uint16_t port) noexcept;

    const dp::ServiceSnapshot& snap_;
    const dp::StatsTable& stats_;
    dp::FlowTable& flows_;
    dp::FlowTable6* flows6_;
    std::unordered_map<ServiceEndpoint, dp::NatTarget, ServiceEndpointHash> endpoints_;
    std::unordered_set<uint32_t> services_;  // ServicePort::id
    std::vector<uint32_t> snat_cursor_;      // by worker (the IPv4 table's owners)
};

// Who wrote a state file: the ports (names and addresses) and the masquerade port range.
std::string gateway_identity(const Config& cfg);

// Writes every live flow (through path + ".tmp", renamed over `path`, mode 0600). `now`: the
// tables' clock. `written`: the flows written.
Status save_flow_state(const std::string& path, const std::string& identity, const dp::FlowTable& flows,
                       const dp::FlowTable6* flows6, uint32_t now, uint64_t now_unix, uint32_t& written);

struct RestoreResult {
    bool found = false;    // a file was there
    uint32_t age = 0;      // seconds since it was written
    uint32_t records = 0;  // flows in it
    uint32_t outcome[FlowImporter::kOutcomes] = {};
    std::string unlink_error;  // read and imported, but not removed: why
};

// Reads `path` into the tables through `importer`, the tables' owners taken in turn, and removes it. No
// file is no failure (result.found false); a refused file fails with why, and is left where it
// is, for the operator to look at.
Status restore_flow_state(const std::string& path, const std::string& identity, uint32_t max_age,
                          FlowImporter& importer, uint32_t now, uint64_t now_unix, RestoreResult& result);

}  // namespace svcgate::ctl
