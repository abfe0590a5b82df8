#include "control/routing/announce.h"

#include <algorithm>
#include <cstring>

namespace svcgate::ctl {

namespace {
IpCidr host(const IpAddr& a) { return IpCidr{a, static_cast<uint8_t>(a.is_v4() ? 32 : 128)}; }

bool less(const IpCidr& a, const IpCidr& b) {
    if (a.addr.is_v4() != b.addr.is_v4()) return a.addr.is_v4();
    const int c = std::memcmp(a.addr.v6().b, b.addr.v6().b, 16);
    return c != 0 ? c < 0 : a.len < b.len;
}
}  // namespace

unsigned local_ready_endpoints(const ServiceConfig& s, const std::string& node_name) {
    // Per family, as each of kube-proxy's proxiers counts (a dual-stack pod is one endpoint).
    std::vector<IpAddr> seen;
    unsigned v4 = 0, v6 = 0;
    for (const EndpointGroup& g : s.groups)
        for (const EndpointConfig& e : g.endpoints)
            if (e.ready && !node_name.empty() && e.node == node_name &&
                std::find(seen.begin(), seen.end(), e.ip) == seen.end()) {
                seen.push_back(e.ip);
                ++(e.ip.is_v4() ? v4 : v6);
            }
    return std::max(v4, v6);
}

std::vector<IpCidr> announce_set(const Config& cfg) {
    const RoutingConfig& r = cfg.routing;
    std::vector<IpCidr> out;
    for (const ServiceConfig& s : cfg.services) {
        if (s.type == ServiceType::external_name || s.cluster_ips.empty()) continue;
        // A family the Service has no ClusterIP of is not served (config_model.h).
        auto served = [&](const IpAddr& a) {
            return std::any_of(s.cluster_ips.begin(), s.cluster_ips.end(),
                               [&](const IpAddr& c) { return c.family() == a.family(); });
        };
        const bool external_ok = !s.external_local || local_ready_endpoints(s, cfg.cluster.node_name) > 0;
        if (r.cluster_ips)
            for (const IpAddr& a : s.cluster_ips) out.push_back(host(a));
        if (r.external_ips && external_ok)
            for (const IpAddr& a : s.external_ips)
                if (served(a)) out.push_back(host(a));
        if (r.load_balancer_ips && external_ok && s.type == ServiceType::load_balancer)
            for (const IpAddr& a : s.lb_ips)
                if (served(a)) out.push_back(host(a));
    }
    if (r.node_ips)
        for (const IpAddr& a : cfg.cluster.node_ips) out.push_back(host(a));
    if (r.service_cidrs)
        for (const IpCidr& c : cfg.cluster.service_cidrs) out.push_back(c);
    std::sort(out.begin(), out.end(), less);
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<std::vector<IpCidr>> host_interface_addresses(const Config& cfg) {
    const auto& ports = cfg.dataplane.ports;
    std::vector<std::vector<IpCidr>> out(ports.size());
    for (size_t p = 0; p < ports.size(); ++p)
        if (!ports[p].host_interface.empty()) out[p] = ports[p].addresses;
    for (const IpAddr& a : cfg.cluster.node_ips) {
        size_t first = ports.size(), first_of_family = ports.size();
        bool on_a_host = false;
        for (size_t p = 0; p < ports.size(); ++p) {
            if (ports[p].host_interface.empty()) continue;
            for (const IpCidr& c : ports[p].addresses) on_a_host = on_a_host || c.addr == a;
            if (first == ports.size()) first = p;
            if (first_of_family == ports.size() &&
                std::any_of(ports[p].addresses.begin(), ports[p].addresses.end(),
                            [&](const IpCidr& c) { return c.addr.family() == a.family(); }))
                first_of_family = p;
        }
        const size_t to = first_of_family != ports.size() ? first_of_family : first;
        if (!on_a_host && to != ports.size() && std::find(out[to].begin(), out[to].end(), host(a)) == out[to].end())
            out[to].push_back(host(a));
    }
    return out;
}

Announcer::~Announcer() {
    if (table_) (void)sync({});
}

Status Announcer::sync(const std::vector<IpCidr>& want) {
    if (!table_) return {};
    Status first;
    std::vector<IpCidr> now;
    if (Status s = nl_.routes(table_, now); !s) return s;
    for (const IpCidr& c : now)
        if (std::find(want.begin(), want.end(), c) == want.end())
            if (Status s = nl_.del_route(table_, c); !s && first) first = s;
    for (const IpCidr& c : want)
        if (std::find(now.begin(), now.end(), c) == now.end())
            if (Status s = nl_.add_route(table_, c, ifindex_); !s && first) first = s;
    have_ = want;
    return first;
}

}  // namespace svcgate::ctl
