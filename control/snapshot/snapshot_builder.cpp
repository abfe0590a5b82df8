#include "control/snapshot/snapshot_builder.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "dataplane/flow/flow_table.h"
#include "dataplane/lb/maglev.h"
#include "control/config/yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

struct Builder {
    const Config& cfg;
    ServiceSnapshot& s;
    const ServiceSnapshot* prev;
    BuildMode mode;
    const EndpointHealthView* health;
    // The tables workers index, while they grow; moved into the snapshot's FixedArrays at the end.
    struct Tables {
        std::vector<ServicePort> services;
        std::vector<Endpoint> endpoints;
        std::vector<uint32_t> members;
        std::vector<EndpointSet> sets;
        std::vector<uint16_t> rings;
        std::vector<Cidr4> cidrs;
        std::vector<Cidr6> cidrs6;
    } t;
    std::vector<ConfigIssue> errors;
    // Where each snapshot service port came from, (service, port) indices into cfg.services: a
    // duplicate VIP names the port that took it first.
    std::vector<std::pair<uint32_t, uint32_t>> origin;
    // Scratch reused for every service port.
    std::vector<uint64_t> seen, ids;
    std::vector<uint32_t> cluster, local;
    // The config of each endpoint of the service port being built, t.endpoints[ep_first + i].
    std::vector<const EndpointConfig*> ep_cfg;

    void error(const Mark& m, std::string path, std::string msg) {
        errors.push_back(ConfigIssue{m, std::move(path), std::move(msg)});
    }

    uint32_t add_set(const std::vector<uint32_t>& eps, Scheduler sch) {
        EndpointSet set{.first = static_cast<uint32_t>(t.members.size()), .count = static_cast<uint32_t>(eps.size())};
        t.members.insert(t.members.end(), eps.begin(), eps.end());
        if (scheduler_uses_ring(sch) && !eps.empty()) {
            ids.clear();
            for (uint32_t e : eps) ids.push_back(t.endpoints[e].key().word());
            const uint32_t m = cfg.cluster.maglev_table_size ? cfg.cluster.maglev_table_size
                                                             : maglev_table_size(static_cast<uint32_t>(eps.size()));
            auto ring = maglev_build(ids, m, cfg.cluster.maglev_seed);
            set.ring_off = static_cast<uint32_t>(t.rings.size());
            set.ring_len = static_cast<uint32_t>(ring.size());
            t.rings.insert(t.rings.end(), ring.begin(), ring.end());
        }
        t.sets.push_back(set);
        return static_cast<uint32_t>(t.sets.size() - 1);
    }

    // Where a service port stands in the config, for its error messages.
    static std::string port_path(const ServicePortConfig& pc, size_t si, size_t pi) {
        return pc.path.empty() ? fmt::format("services[{}].ports[{}]", si, pi) : pc.path;
    }
    std::string owner_name(std::pair<uint32_t, uint32_t> o) const {
        const ServiceConfig& sc = cfg.services[o.first];
        const ServicePortConfig& pc = sc.ports[o.second];
        return fmt::format("{} port {}", sc.full_name(), pc.name.empty() ? std::to_string(pc.port) : pc.name);
    }

    // `what()` describes the key ("ClusterIP 10.0.0.1:80/TCP"); it runs only for an error.
    // A key another service port holds: between two of the config file's own Services, an error;
    // where a Kubernetes object is one of them, the first holder keeps it (Services are built
    // oldest first, build_snapshot) and only this entry is left out, as kube-proxy serves the
    // older of two Services that claim one externalIP:port.
    template <typename Table, typename Key, typename What>
    void add_vip(Table& table, const Key& key, VipEntry value, size_t si, size_t pi, const char* field, What&& what) {
        if (table.insert(key, value)) return;
        const ServiceConfig& sc = cfg.services[si];
        const ServicePortConfig& pc = sc.ports[pi];
        const uint32_t held = table.find(key).service();
        const auto owner = held < origin.size() ? origin[held] : std::pair{uint32_t(si), uint32_t(pi)};
        const std::string msg = fmt::format("{} is already used by {}", what(), owner_name(owner));
        if (sc.kube_object || cfg.services[owner.first].kube_object)
            issue(sc, IssueReason::vip_conflict,
                  ConfigIssue{pc.mark, port_path(pc, si, pi) + field, msg + "; left out"}, true);
        else
            error(pc.mark, port_path(pc, si, pi) + field, msg);
    }

    void issue(const ServiceConfig& sc, IssueReason reason, const ConfigIssue& where, bool left_out) {
        s.catalogue.object_issues.push_back(ObjectIssue{"Service " + sc.full_name(), reason, where.str(), left_out});
    }

    // The CIDRs of family `f` among `v`, into that family's CIDR table.
    CidrRange add_cidrs(const std::vector<IpCidr>& v, Family f) {
        if (f == Family::v4) {
            CidrRange r{.first = static_cast<uint32_t>(t.cidrs.size())};
            for (const IpCidr& c : v)
                if (c.family() == f) t.cidrs.push_back(c.v4());
            r.count = static_cast<uint32_t>(t.cidrs.size()) - r.first;
            return r;
        }
        CidrRange r{.first = static_cast<uint32_t>(t.cidrs6.size())};
        for (const IpCidr& c : v)
            if (c.family() == f) t.cidrs6.push_back(c.v6());
        r.count = static_cast<uint32_t>(t.cidrs6.size()) - r.first;
        return r;
    }

    // The family's primary node IP: the first of cluster.node_ips of that family.
    std::optional<IpAddr> primary_node_ip(Family f) const {
        for (const IpAddr& a : cfg.cluster.node_ips)
            if (a.family() == f) return a;
        return std::nullopt;
    }

    static std::vector<IpAddr> of_family(const std::vector<IpAddr>& v, Family f) {
        std::vector<IpAddr> out;
        for (const IpAddr& a : v)
            if (a.family() == f) out.push_back(a);
        return out;
    }

    // One service port of one family (the family of `cluster_ip`): its addresses and policies,
    // its endpoints, the sets each traffic class chooses from, and its VIP table entries.
    void service_port(const ServiceConfig& sc, size_t si, const ServicePortConfig& pc, size_t pi,
                      const IpAddr& cluster_ip) {
        ServicePort sp;
        ServiceInfo info = describe(sc, pc, cluster_ip, sp);
        collect_endpoints(sc, pc, info.family, sp);
        info.topology = endpoint_sets(sp);
        add_vips(info, si, pc, pi);
        t.services.push_back(sp);
        s.catalogue.services.push_back(std::move(info));
        origin.emplace_back(static_cast<uint32_t>(si), static_cast<uint32_t>(pi));
    }

    // The port's addresses (this family's), LB source ranges, scheduler and traffic policies.
    ServiceInfo describe(const ServiceConfig& sc, const ServicePortConfig& pc, const IpAddr& cluster_ip,
                         ServicePort& sp) {
        const Family fam = cluster_ip.family();
        ServiceInfo info;
        info.name = fmt::format("{}:{}", sc.full_name(), pc.name);
        info.family = fam;
        sp.id = service_port_id(info.name, pc.proto, fam);
        sp.proto = pc.proto;
        sp.family = fam;
        info.cluster_ip = cluster_ip;
        info.port = rte_cpu_to_be_16(pc.port);
        const bool np_type = sc.type == ServiceType::node_port || sc.type == ServiceType::load_balancer;
        info.node_port = np_type ? pc.node_port : 0;
        info.external_ips = of_family(sc.external_ips, fam);
        if (sc.type == ServiceType::load_balancer) info.lb_ips = of_family(sc.lb_ips, fam);
        std::vector<IpCidr> ranges = sc.lb_source_ranges;
        // kube-proxy: when a range holds the primary node IP, the node may reach its own load
        // balancer, whose traffic can loop back with the LB IP as source: allow the LB IPs too.
        const std::optional<IpAddr> primary = primary_node_ip(fam);
        bool from_node = false;
        for (const IpCidr& c : sc.lb_source_ranges) from_node = from_node || (primary && c.contains(*primary));
        if (from_node)
            for (const IpAddr& a : info.lb_ips)
                ranges.push_back(IpCidr{a, static_cast<uint8_t>(fam == Family::v4 ? 32 : 128)});
        // This family's ranges only: as in kube-proxy's service change tracker, the other family's
        // are ignored, and a family left with none is not restricted.
        sp.lb_source_ranges = add_cidrs(ranges, fam);
        sp.scheduler = sc.scheduler;
        sp.affinity_timeout = sc.affinity_timeout;
        const bool external = np_type || !info.external_ips.empty();
        sp.external_local = external && sc.external_local;
        sp.internal_local = sc.internal_local;
        // Decided here once: the pipeline, the replica hold and the reports read the bit.
        sp.preserve_client = external && !sp.external_local && !cfg.cluster.masquerade_all &&
            sc.client_ip.value_or(cfg.cluster.client_ip) == ClientIp::preserve;
        return info;
    }

    // Endpoints: every group (EndpointSlice) port with this port's name and protocol, of family
    // `fam`; duplicates across slices count once (kube-proxy keys endpoints by ip:port). Their
    // configs stay in ep_cfg for endpoint_sets.
    void collect_endpoints(const ServiceConfig& sc, const ServicePortConfig& pc, Family fam, ServicePort& sp) {
        sp.ep_first = static_cast<uint32_t>(t.endpoints.size());
        seen.clear();
        ep_cfg.clear();
        // Health checks: a failing endpoint is neither ready nor serving (endpoint_health.h).
        const bool failing = sc.health_check && health && !health->down.empty();
        const std::string name = failing ? sc.full_name() : std::string();
        for (const EndpointGroup& g : sc.groups) {
            for (const EndpointGroup::Port& gp : g.ports) {
                if (gp.name != pc.name || gp.proto != pc.proto || gp.port == 0) continue;
                for (const EndpointConfig& e : g.endpoints) {
                    if (e.ip.family() != fam) continue;  // the other family's slice
                    Endpoint ep{.ip = e.ip, .port = rte_cpu_to_be_16(gp.port), .cond = 0};
                    seen.push_back(ep.key().word());
                    ep.cond = (e.ready ? kReady : 0) | (e.serving ? kServing : 0) | (e.terminating ? kTerminating : 0) |
                        (!e.node.empty() && e.node == cfg.cluster.node_name ? kLocal : 0);
                    t.endpoints.push_back(ep);
                    s.catalogue.endpoints.push_back(EndpointInfo{e.node, e.zone, e.zone_hints, e.node_hints});
                    ep_cfg.push_back(&e);
                }
            }
        }
        drop_duplicate_endpoints(sp.ep_first);
        sp.ep_count = static_cast<uint32_t>(t.endpoints.size()) - sp.ep_first;
        if (failing) apply_health(*sc.health_check, name, sp);
    }

    // The endpoints failing their checks: neither ready nor serving (kUnhealthy), their flows
    // ended too under on_failure: reset (kEvicted); all of the port's failing, under all_down:
    // panic, none is (Envoy's panic threshold). Decided here, from the config being published,
    // so a reload that changes on_failure or all_down takes effect with it.
    void apply_health(const HealthCheckConfig& hc, const std::string& name, const ServicePort& sp) {
        uint32_t down = 0;
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i)
            down += health->failing(name, t.endpoints[i].ip);
        if (down == 0 || (hc.panic && down == sp.ep_count)) return;
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i) {
            Endpoint& ep = t.endpoints[i];
            if (health->failing(name, ep.ip))
                ep.cond = (ep.cond & (kTerminating | kLocal)) | kUnhealthy | (hc.reset ? kEvicted : 0);
        }
    }

    // CategorizeEndpoints (kube-proxy's pkg/proxy/topology.go): Cluster endpoints are the ready
    // ones the topology mode allows, else the serving-terminating ones (of any topology: the mode
    // already fell back if no ready endpoint fitted it); Local policies ignore hints and have
    // their own ready, then serving-terminating, fallback. Returns the Cluster set's mode.
    TopologyMode endpoint_sets(ServicePort& sp) {
        auto pick = [&](std::vector<uint32_t>& v, auto&& pred) {
            v.clear();
            for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i)
                if (pred(t.endpoints[i].cond, *ep_cfg[i - sp.ep_first])) v.push_back(i);
        };
        auto ready = [](uint8_t c) { return (c & kReady) != 0; };
        auto serving_term = [](uint8_t c) { return (c & kServing) && (c & kTerminating); };
        const TopologyMode mode = topology_mode(sp.ep_first, sp.ep_count);
        pick(cluster, [&](uint8_t c, const EndpointConfig& e) { return ready(c) && fits(e, mode); });
        if (cluster.empty()) pick(cluster, [&](uint8_t c, const EndpointConfig&) { return serving_term(c); });
        bool has_any = false;
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i)
            has_any = has_any || ready(t.endpoints[i].cond) || serving_term(t.endpoints[i].cond);

        sp.cluster_set = add_set(cluster, sp.scheduler);
        // Most Services use no Local policy: skip the set (and its Maglev table) for them.
        const bool uses_local = sp.internal_local || sp.external_local;
        if (uses_local) {
            pick(local, [&](uint8_t c, const EndpointConfig&) { return ready(c) && (c & kLocal); });
            if (local.empty())
                pick(local, [&](uint8_t c, const EndpointConfig&) { return serving_term(c) && (c & kLocal); });
        }
        const uint32_t local_set = uses_local ? add_set(local, sp.scheduler) : sp.cluster_set;
        sp.internal_set = sp.internal_local ? local_set : sp.cluster_set;
        sp.external_set = sp.external_local ? local_set : sp.cluster_set;
        auto span = [&](uint32_t set) { return SetSpan{.first = t.sets[set].first, .count = t.sets[set].count}; };
        sp.internal_span = span(sp.internal_set);
        sp.external_span = span(sp.external_set);
        sp.no_endpoints = has_any ? NoEndpoints::drop : NoEndpoints::reject;
        return mode;
    }

    // The port's entries in its family's VIP table: ClusterIP, external and LB IPs, the nodePort.
    void add_vips(const ServiceInfo& info, size_t si, const ServicePortConfig& pc, size_t pi) {
        const uint32_t idx = static_cast<uint32_t>(t.services.size());
        const uint8_t proto = static_cast<uint8_t>(pc.proto);
        const Family fam = info.family;
        auto add = [&](const IpAddr& ip, rte_be16_t port, AddrRole role, const char* field, auto&& what) {
            if (fam == Family::v4)
                add_vip(s.vips, VipTable::key(ip.v4(), port, proto), VipEntry::make(idx, role), si, pi, field, what);
            else
                add_vip(s.vips6, VipTable6::key(ip.v6(), port, proto), VipEntry::make(idx, role), si, pi, field, what);
        };
        auto vip = [&](const IpAddr& ip, AddrRole role, const char* what) {
            add(ip, info.port, role, "",
                [&] { return fmt::format("{} {}/{}", what, format_endpoint(ip, pc.port), proto_name(pc.proto)); });
        };
        vip(info.cluster_ip, AddrRole::cluster_ip, "ClusterIP");
        for (const IpAddr& a : info.external_ips) vip(a, AddrRole::external_ip, "external IP");
        for (const IpAddr& a : info.lb_ips) vip(a, AddrRole::lb_ip, "load-balancer IP");
        if (!info.node_port) return;
        const char* np_key = pc.path.empty() ? ".node_port" : ".nodePort";
        if (info.node_port < cfg.cluster.nodeport_min || info.node_port > cfg.cluster.nodeport_max) {
            // The API server checks the range when a Service is written, kube-proxy never: an
            // object from before a range change is served. The config file's own is an error.
            std::string msg = fmt::format("nodePort {} is outside nodeport_range {}-{}", info.node_port,
                                          cfg.cluster.nodeport_min, cfg.cluster.nodeport_max);
            if (cfg.services[si].kube_object)
                issue(cfg.services[si], IssueReason::nodeport_out_of_range,
                      ConfigIssue{pc.mark, port_path(pc, si, pi) + np_key, msg + "; served"}, false);
            else
                error(pc.mark, port_path(pc, si, pi) + np_key, std::move(msg));
        }
        add(fam == Family::v4 ? IpAddr::of(Ip4{}) : IpAddr::of(Ip6{}), rte_cpu_to_be_16(info.node_port),
            AddrRole::node_port, np_key,
            [&] { return fmt::format("nodePort {}/{}", info.node_port, proto_name(pc.proto)); });
    }

    // kube-proxy's topologyModeFromHints over the endpoints [first, first + count): same-node when
    // every ready endpoint has node hints and one names this node, else same-zone when every
    // ready endpoint has zone hints and one names this zone, else none.
    TopologyMode topology_mode(uint32_t first, uint32_t count) const {
        bool any_ready = false, all_node = true, for_node = false, all_zone = true, for_zone = false;
        for (uint32_t i = first; i < first + count; ++i) {
            if (!(t.endpoints[i].cond & kReady)) continue;
            any_ready = true;
            const EndpointConfig& e = *ep_cfg[i - first];
            if (e.node_hints.empty())
                all_node = false;
            else
                for_node = for_node || has(e.node_hints, cfg.cluster.node_name);
            if (e.zone_hints.empty())
                all_zone = false;
            else
                for_zone = for_zone || has(e.zone_hints, cfg.cluster.zone());
        }
        if (!any_ready) return TopologyMode::all;
        if (all_node && for_node) return TopologyMode::node;
        if (all_zone && for_zone) return TopologyMode::zone;
        return TopologyMode::all;
    }
    // kube-proxy's availableForTopology.
    bool fits(const EndpointConfig& e, TopologyMode mode) const {
        switch (mode) {
            case TopologyMode::all:
                return true;
            case TopologyMode::node:
                return has(e.node_hints, cfg.cluster.node_name);
            case TopologyMode::zone:
                return has(e.zone_hints, cfg.cluster.zone());
        }
        return false;
    }
    static bool has(const std::vector<std::string>& v, const std::string& x) {
        return std::find(v.begin(), v.end(), x) != v.end();
    }

    // How much an endpoint serves: ready, then serving (terminating), then neither.
    static int serving_rank(uint8_t cond) { return (cond & kReady) ? 2 : (cond & kServing) ? 1 : 0; }

    // Endpoints from t.endpoints[first] on, keyed by seen[]: one per ip:port (kube-proxy keys
    // endpoints by ip:port). Of two with one address, the one that serves more wins whatever the
    // slice order (kube-proxy 1.36, kubernetes#135593): a Pod moving between slices is the same
    // Pod in both; a ghost stuck Terminating must not shadow the new Ready Pod that got its IP.
    // Among equals the first occurrence stays, at the place of the first.
    void drop_duplicate_endpoints(uint32_t first) {
        if (seen.size() < 2) return;
        ids.assign(seen.begin(), seen.end());
        std::sort(ids.begin(), ids.end());
        if (std::adjacent_find(ids.begin(), ids.end()) == ids.end()) return;  // the usual case
        std::unordered_map<uint64_t, size_t> best;                            // key -> index (into seen) of the winner
        for (size_t i = 0; i < seen.size(); ++i) {
            const auto [it, fresh] = best.emplace(seen[i], i);
            if (!fresh &&
                serving_rank(t.endpoints[first + i].cond) > serving_rank(t.endpoints[first + it->second].cond))
                it->second = i;
        }
        std::unordered_set<uint64_t> placed;
        size_t out = first;
        for (size_t i = 0; i < seen.size(); ++i) {
            if (!placed.insert(seen[i]).second) continue;
            const size_t w = best[seen[i]];
            ep_cfg[out - first] = ep_cfg[w];
            t.endpoints[out] = t.endpoints[first + w];
            s.catalogue.endpoints[out++] = s.catalogue.endpoints[first + w];
        }
        t.endpoints.resize(out);
        ep_cfg.resize(out - first);
        s.catalogue.endpoints.resize(out);
    }

    void ports_and_routes() {
        std::vector<RouteTable::Route> routes;
        std::vector<RouteTable6::Route> routes6;
        for (size_t i = 0; i < cfg.dataplane.ports.size(); ++i) {
            const PortConfig& p = cfg.dataplane.ports[i];
            s.catalogue.ports.push_back(PortInfo{p.name, p.addresses});
            const auto port = static_cast<uint16_t>(i);
            for (const IpCidr& a : p.addresses) {
                // A host address on the subnet of another of the port's addresses (one taken over
                // from a dead peer, sync.h) is answered for, but adds no route of its own.
                const bool host = a.len == (a.family() == Family::v4 ? 32 : 128);
                if (host && std::any_of(p.addresses.begin(), p.addresses.end(), [&](const IpCidr& o) {
                        return o.len < a.len && o.contains(a.addr);
                    }))
                    continue;
                const IpCidr net = mask_cidr(a);
                if (a.family() == Family::v4)
                    routes.push_back({net.v4(), NextHop{.gateway = Ip4{}, .port = port, .source = a.addr.v4()}});
                else
                    routes6.push_back({net.v6(), NextHop6{.gateway = Ip6{}, .port = port, .source = a.addr.v6()}});
            }
        }
        // The connected route (the port's subnet) that reaches `a`: next hops and neighbors must
        // have one.
        const size_t connected = routes.size(), connected6 = routes6.size();
        auto on_link = [&](const IpAddr& a) -> std::optional<std::pair<uint16_t, IpAddr>> {  // port, source
            if (a.is_v4()) {
                for (size_t c = 0; c < connected; ++c)
                    if (routes[c].prefix.contains(a.v4()))
                        return std::pair{routes[c].hop.port, IpAddr::of(routes[c].hop.source)};
            } else {
                for (size_t c = 0; c < connected6; ++c)
                    if (routes6[c].prefix.contains(a.v6()))
                        return std::pair{routes6[c].hop.port, IpAddr::of(routes6[c].hop.source)};
            }
            return std::nullopt;
        };
        auto off_link = [&](const Mark& m, std::string path, const IpAddr& a) {
            error(m, std::move(path), fmt::format("{} is not on the subnet of any port", format_ip(a)));
        };
        for (size_t i = 0; i < cfg.dataplane.routes.size(); ++i) {
            const RouteConfig& rc = cfg.dataplane.routes[i];
            if (const auto c = on_link(rc.via)) {
                if (rc.via.is_v4())
                    routes.push_back(
                        {rc.prefix.v4(), NextHop{.gateway = rc.via.v4(), .port = c->first, .source = c->second.v4()}});
                else
                    routes6.push_back(
                        {rc.prefix.v6(), NextHop6{.gateway = rc.via.v6(), .port = c->first, .source = c->second.v6()}});
            } else {
                off_link(rc.mark, fmt::format("dataplane.routes[{}].via", i), rc.via);
            }
        }
        for (size_t i = 0; i < cfg.dataplane.neighbors.size(); ++i)
            if (!on_link(cfg.dataplane.neighbors[i].ip))
                off_link(cfg.dataplane.neighbors[i].mark, fmt::format("dataplane.neighbors[{}].ip", i),
                         cfg.dataplane.neighbors[i].ip);
        build_routes(routes, s.catalogue.route_list, s.catalogue.routes, prev ? &prev->catalogue.route_list : nullptr,
                     prev ? prev->catalogue.routes : nullptr);
        build_routes(routes6, s.catalogue.route_list6, s.catalogue.routes6,
                     prev ? &prev->catalogue.route_list6 : nullptr, prev ? prev->catalogue.routes6 : nullptr);
        s.routes = s.catalogue.routes.get();
        s.routes6 = s.catalogue.routes6.get();
    }

    // One family's LPM: the previous snapshot's when the routes are the same (an LPM is large to
    // build), none without an EAL (validate: the routes were checked above).
    template <typename Route, typename Table>
    void build_routes(const std::vector<Route>& routes, std::vector<Route>& list, std::shared_ptr<const Table>& out,
                      const std::vector<Route>* prev_list, const std::shared_ptr<const Table>& prev_table) {
        if (routes.empty()) return;
        list = routes;
        if (prev_table && *prev_list == routes) {
            out = prev_table;
        } else if (mode != BuildMode::validate) {
            std::string err;
            out = Table::create(routes, err);
            if (!out) error(Mark{cfg.file, 0, 0}, "dataplane.routes", "cannot build the route table: " + err);
        }
    }

    void local_addresses() {
        std::map<IpAddr, uint32_t> flags;  // LocalAddr bits, both families
        for (const PortInfo& p : s.catalogue.ports)
            for (const IpCidr& c : p.addrs) flags[c.addr] |= kPortAddr;
        for (const IpAddr& a : cfg.cluster.node_ips) {
            // --nodeport-addresses per family: a family none of whose CIDRs is listed serves
            // NodePorts on every node IP of that family.
            bool listed = false, np = false;
            for (const IpCidr& c : cfg.cluster.nodeport_addresses) {
                listed = listed || c.family() == a.family();
                np = np || c.contains(a);
            }
            flags[a] |= kNodeAddr | (np || !listed ? uint32_t{kNodePortAddr} : 0u);
        }
        for (const ServiceInfo& sp : s.catalogue.services) {
            flags[sp.cluster_ip] |= kClusterIp;
            for (const IpAddr& a : sp.external_ips) flags[a] |= kServiceAddr;
            for (const IpAddr& a : sp.lb_ips) flags[a] |= kServiceAddr;
        }
        s.local_addrs.reserve(flags.size());
        s.local_addrs6.reserve(flags.size());
        for (const auto& [ip, f] : flags) {
            if (ip.is_v4())
                s.local_addrs.insert(ip.v4().be, f);
            else
                s.local_addrs6.insert(StaticHash6::Key{ip.v6(), 0}, f);
        }
    }
};

// Where replies to preserved clients come from (ServiceSnapshot::preserved_eps): every endpoint
// of a service port that keeps the client's address.
void preserved_endpoints(ServiceSnapshot& s) {
    for (uint32_t i = 0; i < s.services.size(); ++i) {
        const ServicePort& sp = s.services[i];
        if (!sp.preserve_client) continue;
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            const Endpoint& ep = s.endpoints[e];
            const auto proto = static_cast<uint8_t>(sp.proto);
            const VipEntry v = VipEntry::make(i, AddrRole::cluster_ip);
            if (ep.ip.is_v4())
                s.preserved_eps.insert(VipTable::key(ep.ip.v4(), ep.port, proto), v);
            else
                s.preserved_eps6.insert(VipTable6::key(ep.ip.v6(), ep.port, proto), v);
        }
    }
}

}  // namespace

uint32_t service_port_id(const std::string& name, Proto proto, Family family) {
    uint32_t h = 2166136261u;
    auto mix = [&](unsigned char c) { h = (h ^ c) * 16777619u; };
    for (unsigned char c : name) mix(c);
    mix('/');
    mix(static_cast<unsigned char>(proto));
    if (family == Family::v6) mix('6');
    return h;
}

std::unique_ptr<ServiceSnapshot> build_snapshot(const Config& cfg, uint32_t generation, const ServiceSnapshot* prev,
                                                BuildMode mode, const EndpointHealthView* health) {
    auto snap = std::make_unique<ServiceSnapshot>();
    ServiceSnapshot& s = *snap;
    s.generation = generation;
    s.workers = cfg.dataplane.workers;
    Builder b{cfg, s, prev, mode, health, {}, {}, {}};
    s.cluster = ClusterSettings{.cluster_cidrs = b.add_cidrs(cfg.cluster.cluster_cidrs, Family::v4),
                                .cluster_cidrs6 = b.add_cidrs(cfg.cluster.cluster_cidrs, Family::v6),
                                .service_cidrs = b.add_cidrs(cfg.cluster.service_cidrs, Family::v4),
                                .service_cidrs6 = b.add_cidrs(cfg.cluster.service_cidrs, Family::v6),
                                .masquerade_all = cfg.cluster.masquerade_all,
                                .reject_unknown_port = cfg.cluster.reject_unknown_port,
                                .one_arm_masquerade = cfg.dataplane.one_arm_masquerade,
                                .snat_port_min = cfg.cluster.masquerade_port_min,
                                .snat_port_max = cfg.cluster.masquerade_port_max,
                                .maglev_seed = cfg.cluster.maglev_seed};
    for (const ConfigIssue& i : cfg.left_out)  // the manifests' objects the loader left out
        s.catalogue.object_issues.push_back(ObjectIssue{"manifest object", IssueReason::invalid_object, i.str(), true});
    b.ports_and_routes();
    // The config file's Services first, then Kubernetes objects oldest first (by
    // creationTimestamp; those without one last, in the order read): where one VIP:port is
    // claimed twice, the first built keeps it.
    std::vector<uint32_t> order(cfg.services.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        const ServiceConfig &x = cfg.services[a], &y = cfg.services[b];
        return std::tuple(x.kube_object, x.created.empty(), std::string_view(x.created)) <
            std::tuple(y.kube_object, y.created.empty(), std::string_view(y.created));
    });
    for (const uint32_t si : order) {
        const ServiceConfig& sc = cfg.services[si];
        // Headless and ExternalName Services get no dataplane rule, as in kube-proxy.
        if (sc.cluster_ips.empty() || sc.type == ServiceType::external_name) continue;
        for (const IpAddr& cip : sc.cluster_ips)
            for (size_t pi = 0; pi < sc.ports.size(); ++pi) b.service_port(sc, si, sc.ports[pi], pi, cip);
    }
    b.local_addresses();
    if (!b.errors.empty()) throw ConfigError(std::move(b.errors));
    s.services = FixedArray<ServicePort>(std::move(b.t.services));
    s.endpoints = FixedArray<Endpoint>(std::move(b.t.endpoints));
    s.members = FixedArray<uint32_t>(std::move(b.t.members));
    s.sets = FixedArray<EndpointSet>(std::move(b.t.sets));
    s.rings = FixedArray<uint16_t>(std::move(b.t.rings));
    s.cidrs = FixedArray<Cidr4>(std::move(b.t.cidrs));
    s.cidrs6 = FixedArray<Cidr6>(std::move(b.t.cidrs6));
    preserved_endpoints(s);

    const size_t nsets = s.sets.size();
    s.rr_cursor = std::make_unique<std::atomic<uint32_t>[]>(nsets ? nsets : 1);
    return snap;
}

}  // namespace svcgate::ctl
