// svcgatectl status's ha: flow replication as the sync thread sees it, with the workers' part of
// it. Syncer::status(workers' counters) fills it all (sync.h); views.h carries it in the status
// report, the metrics collector (sync_metrics.h) and svcgatectl read it.
//
// Runs on: any thread (plain data).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/base/report_members.h"

namespace svcgate::ctl::report {

// One peer of ha.peers.
struct Peer {
    std::string address;  // ADDRESS:PORT
    bool alive = false;
    std::optional<double> last_heard_seconds;  // null: never
    bool copied = false;                       // it has sent this gateway its bulk copy (since this start)
    uint64_t flows_sent = 0, flows_received = 0, datagrams_sent = 0, datagrams_received = 0;
    uint32_t flows_held = 0;             // as its last hello said
    std::vector<std::string> addresses;  // its takeover addresses, as its last hello said
    bool adopted = false;                // this gateway holds them now
};
void members(Of<Peer> auto& r, auto&& f) {
    f("address", r.address), f("alive", r.alive), f("last_heard_seconds", r.last_heard_seconds), f("copied", r.copied),
        f("flows_sent", r.flows_sent), f("flows_received", r.flows_received), f("datagrams_sent", r.datagrams_sent),
        f("datagrams_received", r.datagrams_received), f("flows_held", r.flows_held), f("addresses", r.addresses),
        f("adopted", r.adopted);
}

struct ReplicaHold {
    uint64_t held = 0, parked = 0, released = 0;
};
void members(Of<ReplicaHold> auto& r, auto&& f) { f("held", r.held), f("parked", r.parked), f("released", r.released); }

struct Ha {
    std::string listen;
    bool ready = false;
    std::vector<Peer> peers;
    uint32_t replicas = 0;
    uint64_t takeovers = 0;
    ReplicaHold replica_hold;
    uint64_t events = 0, events_ring_full = 0, refreshed = 0;
    uint32_t queued = 0;
    uint64_t send_errors = 0;
    Keyed<uint64_t> drops;
};
void members(Of<Ha> auto& r, auto&& f) {
    f("listen", r.listen), f("ready", r.ready), f("peers", r.peers), f("replicas", r.replicas),
        f("takeovers", r.takeovers), f("replica_hold", r.replica_hold), f("events", r.events),
        f("events_ring_full", r.events_ring_full), f("refreshed", r.refreshed), f("queued", r.queued),
        f("send_errors", r.send_errors), f("drops", r.drops);
}

}  // namespace svcgate::ctl::report
