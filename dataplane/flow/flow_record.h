// A flow as it leaves the flow table and comes back: what the state file (control/ha/state_file.h)
// holds, and what replication between gateways carries. A fixed layout with nothing
// process-local in it: the two tuples as the table holds them (network order), the conntrack
// state, how long the flow has been idle, the service port's stable id (ServicePort::id, a hash
// of its name), and for a session-affinity record the pinned endpoint's word. A NAT flow's
// counting slots (NatTarget) are this process's and are not carried: whoever imports the flow
// finds them again from its service port and its endpoint, which is key[1]'s source.
//
//   offset  size  field
//        0     1  family: 4 or 6 (the size of the tuples that follow)
//        1     1  kind (FlowKind)
//        2     1  flags (kFlowMasq or kFlowPreserved, kFlowOneKey)
//        3     1  state (FlowState: TcpState or DgramState, replied; never gone)
//        4     4  svc_id, little-endian
//        8     4  aux (affinity: timeout in seconds), little-endian
//       12     4  idle: seconds since its last packet, little-endian
//       16     8  pinned endpoint word (affinity), 0 for NAT, little-endian
//       24   2×K  key[0], key[1] (K = 16 bytes for IPv4, 40 for IPv6)
//
// decode_flow() takes bytes from anywhere (a file, the network) and refuses what the table could
// not hold as written: an unknown family, kind, flag, protocol or state, a tuple's padding not
// zero, an affinity record that is not one. It never reads past `len`.
//
// Runs on: any thread; no allocation, no exceptions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/flow/flow_table.h"

namespace svcgate::dp {

inline constexpr size_t kFlowRecordHead = 24;
inline constexpr size_t kFlowRecordV4 = kFlowRecordHead + 2 * sizeof(FlowKey);   // 56
inline constexpr size_t kFlowRecordV6 = kFlowRecordHead + 2 * sizeof(FlowKey6);  // 104
inline constexpr size_t kFlowRecordMax = kFlowRecordV6;

template <typename K>
inline constexpr size_t flow_record_size() noexcept {
    return kFlowRecordHead + 2 * sizeof(K);
}

// A decoded record: `family` says which of v4 / v6 holds it.
struct FlowRecord {
    Family family = Family::v4;
    FlowInit v4{};
    FlowInit6 v6{};
    uint32_t idle = 0;
};

// Writes `f` (a live record) as of the table's clock `now` into out[flow_record_size<K>()].
template <typename K>
void encode_flow(const BasicFlow<K>& f, uint32_t now, uint8_t* out) noexcept;

// The record at p[0..len): its size, or 0 when it is malformed (or cut short).
size_t decode_flow(const uint8_t* p, size_t len, FlowRecord& out) noexcept;

// The records p[0..len) holds back to back, each passed to f(const FlowRecord&) in order, up to
// the first malformed one: `ok` false and `bad_at` its offset.
struct DecodedFlows {
    size_t count = 0;
    bool ok = true;
    size_t bad_at = 0;
};
template <typename F>
DecodedFlows decode_flows(const uint8_t* p, size_t len, F&& f) noexcept {
    DecodedFlows d;
    for (size_t off = 0; off < len;) {
        FlowRecord r;
        const size_t used = decode_flow(p + off, len - off, r);
        if (used == 0) return {d.count, false, off};
        f(static_cast<const FlowRecord&>(r));
        off += used;
        ++d.count;
    }
    return d;
}

extern template void encode_flow<FlowKey>(const BasicFlow<FlowKey>&, uint32_t, uint8_t*) noexcept;
extern template void encode_flow<FlowKey6>(const BasicFlow<FlowKey6>&, uint32_t, uint8_t*) noexcept;

}  // namespace svcgate::dp
