#include "control/snapshot/service_metrics.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "control/base/address.h"
#include "control/config/yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

// A service port's labels. A dual-stack Service's two families share its name; `family` tells
// them apart.
std::string service_labels(const ServiceSnapshot& s, uint32_t i) {
    const std::string& name = s.info(i).name;
    const auto colon = name.rfind(':');
    return fmt::format("service=\"{}\",port=\"{}\",protocol=\"{}\",family=\"{}\"", name.substr(0, colon),
                       name.substr(colon + 1), proto_name(s.services[i].proto),
                       s.services[i].family == Family::v6 ? "IPv6" : "IPv4");
}

}  // namespace

void collect_services(MetricsText& m, const ServiceSnapshot& s, const SlotRegistry& slots) {
    m.family("svcgate_object_issues", "gauge",
             "Kubernetes objects' entries the snapshot serves otherwise than written, by reason (status lists them).");
    uint64_t issues[kIssueReasonNames.size()] = {};
    for (const ObjectIssue& i : s.catalogue.object_issues) ++issues[static_cast<size_t>(i.reason)];
    for (size_t r = 0; r < kIssueReasonNames.size(); ++r)
        m.sample("svcgate_object_issues", fmt::format("reason=\"{}\"", kIssueReasonNames[r]), issues[r]);
    m.family("svcgate_service_packets_total", "counter", "Packets of a Service port's flows, both directions.");
    for (uint32_t i = 0; i < s.services.size(); ++i)
        m.sample("svcgate_service_packets_total", service_labels(s, i),
                 slots.service_total(s.services[i].slot).packets);
    m.family("svcgate_service_bytes_total", "counter", "Bytes of a Service port's flows, both directions.");
    for (uint32_t i = 0; i < s.services.size(); ++i)
        m.sample("svcgate_service_bytes_total", service_labels(s, i), slots.service_total(s.services[i].slot).bytes);
    m.family("svcgate_client_ip_no_return_total", "counter",
             "SYNs a client resent to a Service port with client_ip preserve before any reply came back through the "
             "gateway: the nodes route replies another way.");
    for (uint32_t i = 0; i < s.services.size(); ++i)
        if (s.services[i].preserve_client)
            m.sample("svcgate_client_ip_no_return_total", service_labels(s, i),
                     slots.no_return_total(s.services[i].slot));
    struct Row {
        std::string labels;
        PacketCounter c;
        int32_t active;
    };
    std::vector<Row> rows;
    for (uint32_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const Endpoint& ep = s.endpoints[e];
            rows.push_back({fmt::format("{},endpoint=\"{}\"", service_labels(s, i),
                                        format_endpoint(ep.ip, rte_be_to_cpu_16(ep.port))),
                            slots.endpoint_total(ep.slot), slots.active(ep.slot)});
        }
    }
    m.family("svcgate_endpoint_packets_total", "counter", "Packets of flows to an endpoint, both directions.");
    for (const Row& r : rows) m.sample("svcgate_endpoint_packets_total", r.labels, r.c.packets);
    m.family("svcgate_endpoint_bytes_total", "counter", "Bytes of flows to an endpoint, both directions.");
    for (const Row& r : rows) m.sample("svcgate_endpoint_bytes_total", r.labels, r.c.bytes);
    m.family("svcgate_endpoint_flows", "gauge", "Live flows to an endpoint (what lc, sed and nq read).");
    for (const Row& r : rows) m.sample("svcgate_endpoint_flows", r.labels, int64_t{r.active});
}

}  // namespace svcgate::ctl
