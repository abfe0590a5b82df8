#include "control/api/metrics_collectors.h"

#include <fmt/format.h>

#include "control/base/address.h"
#include "control/config/yaml_config.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

void collect_flows(MetricsText& m, const FlowGauges& g, const WorkerCounters& t) {
    m.family("svcgate_flows", "gauge", "Flows in the flow table.");
    m.sample("svcgate_flows", "family=\"IPv4\"", g.live4);
    if (g.has_v6) m.sample("svcgate_flows", "family=\"IPv6\"", g.live6);
    m.family("svcgate_flow_capacity", "gauge", "Flows the flow table can hold.");
    m.sample("svcgate_flow_capacity", "family=\"IPv4\"", g.capacity4);
    if (g.has_v6) m.sample("svcgate_flow_capacity", "family=\"IPv6\"", g.capacity6);
    m.family("svcgate_flow_index_moves_total", "counter",
             "Flow index entries moved to their other bucket to make room for a new one; climbing steadily, the "
             "index is crowded (a table kept nearly full).");
    m.sample("svcgate_flow_index_moves_total", "family=\"IPv4\"", g.index_moves4);
    if (g.has_v6) m.sample("svcgate_flow_index_moves_total", "family=\"IPv6\"", g.index_moves6);
    m.counter("svcgate_flows_created_total", "Flows created.", t.flows_created);
    m.counter("svcgate_flows_early_dropped_total", "Embryonic flows evicted to make room for new ones.",
              t.flows_early_dropped);
    m.counter("svcgate_flows_port_remapped_total",
              "New flows whose client source port was remapped because their reply tuple was in use.",
              t.flows_port_remapped);
    m.counter("svcgate_masquerade_ports_steered_total",
              "Masquerade ports chosen so that the replies reach the receive queue of the worker that chose them "
              "(the port's RSS key and redirection table).",
              t.snat_steered);
    m.counter("svcgate_masquerade_ports_unsteered_total",
              "Masqueraded flows on a port with RSS steering for which no such port was found within the tries.",
              t.snat_unsteered);
    m.counter("svcgate_flows_reopened_total",
              "Closed TCP connections (TIME_WAIT, CLOSE) a client's SYN on the same tuple replaced with a new one.",
              t.flows_reopened);
}

void collect_fragments(MetricsText& m, const WorkerCounters& t, uint64_t held, uint64_t datagrams) {
    m.family("svcgate_fragments_total", "counter",
             "Fragments by what became of them: held (a later fragment before its first), released (sent on "
             "once its first came), fragmented (IPv4 packets split to the egress MTU) and fragments_out (what they "
             "became); the drops are svcgate_drops_total{reason=~\"frag_.*\"}.");
    m.sample("svcgate_fragments_total", "outcome=\"held\"", t.frag_stored);
    m.sample("svcgate_fragments_total", "outcome=\"released\"", t.frag_released);
    m.sample("svcgate_fragments_total", "outcome=\"fragmented\"", t.frag_out_packets);
    m.sample("svcgate_fragments_total", "outcome=\"fragments_out\"", t.frag_out_fragments);
    m.gauge("svcgate_fragments_held", "Later fragments waiting for their first fragment.", held);
    m.gauge("svcgate_fragment_datagrams", "Fragmented datagrams being tracked.", datagrams);
}

void collect_verdicts(MetricsText& m, const WorkerCounters& t, uint64_t mbufs_in_use) {
    m.family("svcgate_packets_total", "counter", "Packets by verdict.");
    for (unsigned v = 0; v < kVerdicts; ++v)
        m.sample("svcgate_packets_total", fmt::format("verdict=\"{}\"", verdict_name(static_cast<Verdict>(v))),
                 t.verdicts[v]);
    m.family("svcgate_drops_total", "counter", "Packets dropped (freed), by reason.");
    for (unsigned r = 1; r < kDropReasons; ++r)
        m.sample("svcgate_drops_total", fmt::format("reason=\"{}\"", drop_reason_name(static_cast<DropReason>(r))),
                 t.drops[r]);
    m.family("svcgate_rejects_total", "counter", "Packets refused with a TCP RST or ICMP port unreachable, by reason.");
    for (unsigned r = 1; r < kDropReasons; ++r) {
        const std::string_view name = drop_reason_name(static_cast<DropReason>(r));
        if (name.starts_with("reject_") && r != static_cast<unsigned>(DropReason::reject_failed))
            m.sample("svcgate_rejects_total", fmt::format("reason=\"{}\"", name), t.rejects[r]);
    }
    m.gauge("svcgate_mbufs_in_use", "Packet buffers taken from the pool (rings, bursts, held, caches).", mbufs_in_use);
}

void collect_ports(MetricsText& m, std::span<const PortSample> ports) {
    m.family("svcgate_port_packets_total", "counter",
             "Packets per port and direction (the NIC's counters; the workers' for a port on a VLAN trunk).");
    for (const PortSample& p : ports) {
        m.sample("svcgate_port_packets_total", fmt::format("port=\"{}\",direction=\"rx\"", p.name), p.rx);
        m.sample("svcgate_port_packets_total", fmt::format("port=\"{}\",direction=\"tx\"", p.name), p.tx);
    }
    m.family("svcgate_port_link_up", "gauge", "1 when the port's link is up.");
    for (const PortSample& p : ports)
        m.sample("svcgate_port_link_up", fmt::format("port=\"{}\"", p.name), p.link_up ? uint64_t{1} : uint64_t{0});
    if (std::none_of(ports.begin(), ports.end(), [](const PortSample& p) { return !p.members.empty(); })) return;
    auto each_member = [&](auto&& f) {
        for (const PortSample& p : ports)
            for (const BondMemberView& b : p.members) f(fmt::format("port=\"{}\",member=\"{}\"", p.name, b.device), b);
    };
    m.family("svcgate_bond_member_link_up", "gauge", "1 when the bond member's link is up.");
    each_member([&](const std::string& l, const BondMemberView& b) {
        m.sample("svcgate_bond_member_link_up", l, uint64_t{b.link});
    });
    m.family("svcgate_bond_member_active", "gauge",
             "1 when the bond member carries traffic: distributing (802.3ad), the active one (active-backup).");
    each_member([&](const std::string& l, const BondMemberView& b) {
        m.sample("svcgate_bond_member_active", l, uint64_t{b.active});
    });
    m.family("svcgate_bond_member_lacp_state", "gauge",
             "The member's LACP state byte, the actor's (svcgate) and the partner's (the switch): 802.1AX bits, "
             "0x01 active, 0x02 short timeout, 0x04 aggregatable, 0x08 in sync, 0x10 collecting, 0x20 "
             "distributing, 0x40 defaulted, 0x80 expired.");
    each_member([&](const std::string& l, const BondMemberView& b) {
        if (!b.lacp) return;
        m.sample("svcgate_bond_member_lacp_state", l + ",side=\"actor\"", uint64_t{b.actor_state});
        m.sample("svcgate_bond_member_lacp_state", l + ",side=\"partner\"", uint64_t{b.partner_state});
    });
}

void collect_latency(MetricsText& m, const dp::LatencyHistogram& h) {
    constexpr std::string_view name = "svcgate_dataplane_latency_seconds";
    m.family(name, "histogram",
             "Sampled packets' time inside the gateway, from their receive burst to their transmit "
             "(dataplane.latency_sampling)");
    uint64_t cumulative = 0;
    for (unsigned b = 0; b < dp::LatencyHistogram::kBuckets - 1; ++b) {
        cumulative += h.count[b];
        if (b % 4 != 3 || b < 11) continue;  // one bucket an octave, from 4 ns
        m.sample(fmt::format("{}_bucket", name), fmt::format("le=\"{:g}\"", dp::LatencyHistogram::lower(b + 1) / 1e9),
                 cumulative);
    }
    m.sample(fmt::format("{}_bucket", name), "le=\"+Inf\"", h.samples);
    m.sample(fmt::format("{}_sum", name), "", static_cast<double>(h.sum_ns) / 1e9, 9);
    m.sample(fmt::format("{}_count", name), "", h.samples);
}

}  // namespace svcgate::ctl
