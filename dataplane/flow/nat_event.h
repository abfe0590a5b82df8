// A NAT flow's beginning and end, as the IPFIX exporter (control/export/) logs them (RFC 8158's
// NAT events): the workers write one record per event into a per-worker ring (single producer,
// single consumer), batched per burst and per housekeeping step, never waiting: a full ring drops
// the event, counted (WorkerCounters::nat_events_dropped).
//
// Runs on: workers (written), the exporter's thread (read). A plain value.
#pragma once

#include <cstdint>

#include "dataplane/base/types.h"

namespace svcgate::dp {

enum class NatEventType : uint8_t { create = 1, end = 2 };

// IPFIX flowEndReason (IANA): why a flow ended.
enum class FlowEnd : uint8_t {
    none = 0,
    idle_timeout = 1,       // its conntrack timeout passed
    end_detected = 3,       // TCP closed (FIN or RST) and reopened by a new SYN
    forced_end = 4,         // removed by a reload (its endpoint left), a purge
    lack_of_resources = 5,  // evicted to make room (the table under pressure)
};

struct NatEvent {
    uint64_t tsc = 0;     // rte_get_tsc_cycles() at the start of the worker's loop iteration it happened in
    uint32_t svc_id = 0;  // ServicePort::id
    NatEventType type = NatEventType::create;
    FlowEnd reason = FlowEnd::none;
    uint8_t v6 = 0;  // keys are FlowKey6
    // [0] original (client → VIP), [1] reply (endpoint → client or masquerade address).
    union {
        FlowKey k4[2];
        FlowKey6 k6[2];
    };
    // An end's packets and octets (IP header and payload), [0] client to endpoint, [1] back; 0
    // in a creation. Counted from the flow's creation on this gateway, or from its takeover.
    uint64_t packets[2] = {};
    uint64_t octets[2] = {};
    NatEvent() : k6{} {}
};
static_assert(sizeof(NatEvent) == 128, "a NAT event is a ring element of two cache lines");

// A worker's events not yet in its ring.
struct NatEventBuffer {
    static constexpr unsigned kSize = 64;
    NatEvent ev[kSize];
    unsigned n = 0;
};

}  // namespace svcgate::dp
