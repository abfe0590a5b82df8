#include "control/routing/health_metrics.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

void collect_host_path(MetricsText& m, const WorkerCounters& t, const HealthState& h) {
    m.family(
        "svcgate_host_path_packets_total", "counter",
        "The host path: packets handed to the ports' host interfaces (punted) and frames the kernel sent out "
        "through the ports (out, out_dropped); over the punt budget: svcgate_drops_total{reason=\"punt_limited\"}.");
    m.sample("svcgate_host_path_packets_total", "direction=\"punted\"", t.punted);
    m.sample("svcgate_host_path_packets_total", "direction=\"out\"", t.host_out);
    m.sample("svcgate_host_path_packets_total", "direction=\"out_dropped\"", t.host_out_dropped);
    m.gauge("svcgate_healthy", "1 while /healthz answers 200 (live, ports up, not draining).",
            h.healthy ? uint64_t{1} : uint64_t{0});
    m.gauge("svcgate_draining", "1 while draining (svcgatectl drain).", h.draining ? uint64_t{1} : uint64_t{0});
    m.gauge("svcgate_announced_prefixes", "Prefixes in the announcement table (routing.table).",
            static_cast<uint64_t>(h.announced.size()));
}

}  // namespace svcgate::ctl
