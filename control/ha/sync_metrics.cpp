#include "control/ha/sync_metrics.h"

#include <fmt/format.h>

namespace svcgate::ctl {

void collect_sync(MetricsText& m, const report::Ha& r) {
    m.gauge("svcgate_sync_ready", "1 once the live peers have sent this gateway their flows (ha).",
            r.ready ? uint64_t{1} : uint64_t{0});
    m.family("svcgate_sync_peer_up", "gauge", "1 while a peer is heard from (ha.peers).");
    for (const report::Peer& p : r.peers)
        m.sample("svcgate_sync_peer_up", fmt::format("peer=\"{}\"", p.address), p.alive ? uint64_t{1} : uint64_t{0});
    m.family("svcgate_sync_peer_last_heard_seconds", "gauge",
             "Seconds since a peer's last authentic datagram (-1: never).");
    for (const report::Peer& p : r.peers)
        m.sample("svcgate_sync_peer_last_heard_seconds", fmt::format("peer=\"{}\"", p.address),
                 p.last_heard_seconds.value_or(-1), 3);
    m.family("svcgate_sync_flows_total", "counter", "Flow records sent to and received from each peer.");
    for (const report::Peer& p : r.peers) {
        m.sample("svcgate_sync_flows_total", fmt::format("peer=\"{}\",direction=\"sent\"", p.address), p.flows_sent);
        m.sample("svcgate_sync_flows_total", fmt::format("peer=\"{}\",direction=\"received\"", p.address),
                 p.flows_received);
    }
    m.gauge("svcgate_sync_queued", "The replication lag: flows the workers handed on, not yet sent.",
            uint64_t{r.queued});
    m.gauge("svcgate_sync_replicas", "Replicas of the peers' flows held here (not taken over).", uint64_t{r.replicas});
    m.counter("svcgate_sync_takeovers_total", "Replicas that carried a packet here and so became this gateway's.",
              r.takeovers);
    m.family("svcgate_sync_replica_hold_total", "counter",
             "Replies to preserved clients that reached this gateway before their flow's replica: held, and sent on "
             "once it came (the rest: drops replica_late, reply_awaits_replica).");
    m.sample("svcgate_sync_replica_hold_total", "outcome=\"held\"", r.replica_hold.parked);
    m.sample("svcgate_sync_replica_hold_total", "outcome=\"released\"", r.replica_hold.released);
    m.family("svcgate_sync_events_total", "counter",
             "Flows the workers handed to the sync thread (refused: ring full).");
    m.sample("svcgate_sync_events_total", "outcome=\"taken\"", r.events);
    m.sample("svcgate_sync_events_total", "outcome=\"ring_full\"", r.events_ring_full);
    m.family("svcgate_sync_drops_total", "counter", "Replication datagrams (and records) dropped, by reason.");
    for (const auto& [name, n] : r.drops.items)
        m.sample("svcgate_sync_drops_total", fmt::format("reason=\"{}\"", name), n);
}

}  // namespace svcgate::ctl
