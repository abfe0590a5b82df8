#include "control/config/kube_objects.h"

#include <algorithm>

#include <map>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "control/base/file.h"
#include "control/config/health_check.h"
#include "control/config/yaml_reader.h"

namespace svcgate::ctl {

namespace {

constexpr const char* kServiceNameLabel = "kubernetes.io/service-name";
constexpr const char* kProxyNameLabel = "service.kubernetes.io/service-proxy-name";
constexpr const char* kHeadlessLabel = "service.kubernetes.io/headless";
constexpr const char* kSchedulerAnnotation = "svcgate.io/scheduler";
constexpr const char* kClientIpAnnotation = "svcgate.io/client-ip";

// kube-proxy's service-proxy-name rule (cluster.proxy_name): true, and counted, when `s` is
// another proxy's Service; it is left out with its slices.
bool another_proxys(const ServiceConfig& s, Config& cfg) {
    if (cfg.cluster.serves_proxy(s.proxy_label)) return false;
    ++cfg.kube.other_proxy;
    return true;
}

// A ServiceCIDR's CIDRs join cluster.service_cidrs, once each.
void join_service_cidrs(Config& cfg, const std::vector<IpCidr>& cidrs) {
    std::vector<IpCidr>& have = cfg.cluster.service_cidrs;
    for (const IpCidr& c : cidrs)
        if (std::find(have.begin(), have.end(), c) == have.end()) have.push_back(c);
}

struct PendingSlice {
    std::string ns, service, name;
    Family family = Family::v4;  // addressType
    EndpointGroup group;
    Mark mark;
};

struct KubeLoader {
    Config& cfg;
    std::vector<ConfigIssue>& errors;
    std::vector<PendingSlice> slices;
    std::vector<std::string> other_proxy;  // Services left out as another proxy's: their slices too
    bool leave_out = false;                // an object's errors leave it out (load_kube_manifests)

    // One object, all or nothing when leave_out: what it added is taken back, its first error kept.
    template <typename Read>
    void whole(Read&& read) {
        const size_t e0 = errors.size(), s0 = cfg.services.size(), sl0 = slices.size();
        const KubeStats k0 = cfg.kube;
        const std::vector<IpCidr> cidrs0 = cfg.cluster.service_cidrs;
        read();
        if (!leave_out || errors.size() == e0) return;
        cfg.left_out.push_back(errors[e0]);
        errors.resize(e0);
        cfg.services.resize(s0);
        slices.resize(sl0);
        cfg.kube = k0;
        cfg.cluster.service_cidrs = cidrs0;
    }

    std::vector<IpAddr> addrs(Reader& r, const ytree::Node& n, const Path& path) { return r.ips(n, path); }

    // metadata.name / metadata.namespace (default "default").
    bool meta(Reader& r, const ytree::Node& obj, const std::string& path, std::string& ns, std::string& name) {
        const ytree::Node m = obj["metadata"];
        if (!m || !r.open_map(m, {path, ".metadata"})) {
            if (!m) r.error(obj, path, "an object needs metadata.name");
            return false;
        }
        name = r.str_or_empty(m, "name", {path, ".metadata"});
        ns = r.str_or_empty(m, "namespace", {path, ".metadata"});
        if (ns.empty()) ns = "default";
        if (name.empty()) {
            r.error(m, path + ".metadata", "an object needs metadata.name");
            return false;
        }
        return true;
    }

    void service(Reader& r, const ytree::Node& obj, const std::string& path) {
        ServiceConfig s{.kube_object = true, .mark = r.mark(obj)};
        if (!meta(r, obj, path, s.ns, s.name)) return;
        if (const ytree::Node c = obj["metadata"]["creationTimestamp"]; c && c.IsScalar()) s.created = c.Scalar();
        ++cfg.kube.services;
        const ytree::Node spec = obj["spec"];
        if (!spec || !r.open_map(spec, {path, ".spec"})) {
            if (!spec) r.error(obj, path, "a Service needs a spec");
            return;
        }
        const std::string sp = path + ".spec";
        service_type(r, spec, sp, s);
        if (s.type == ServiceType::external_name)
            ++cfg.kube.external_name;
        else
            cluster_ips(r, spec, sp, s);
        s.external_ips = addrs(r, spec["externalIPs"], {sp, ".externalIPs"});
        lb_ingress(r, obj, path, s);
        policies(r, spec, sp, s);
        if (const ytree::Node labels = obj["metadata"]["labels"]; labels && labels.IsMap() && labels[kProxyNameLabel])
            s.proxy_label = r.str(labels[kProxyNameLabel], {path, ".metadata.labels"}).value_or("");
        s.traffic_distribution = r.str_or_empty(spec, "trafficDistribution", sp);
        // svcgate's own knob, as an annotation so that kubectl output can carry it.
        s.scheduler = r.scheduler(obj["metadata"]["annotations"][kSchedulerAnnotation],
                                  fmt::format("{}.metadata.annotations.{}", path, kSchedulerAnnotation))
                          .value_or(dp::Scheduler::random);
        s.client_ip = r.client_ip(obj["metadata"]["annotations"][kClientIpAnnotation],
                                  fmt::format("{}.metadata.annotations.{}", path, kClientIpAnnotation));
        health_check(r, obj["metadata"]["annotations"][kHealthCheckAnnotation], path, s);
        if (const ytree::Node ports = spec["ports"]; ports && r.seq(ports, {sp, ".ports"}))
            service_ports(r, ports, sp, s);
        cfg.services.push_back(std::move(s));
    }

    // svcgate.io/health-check: "TYPE[:PATH] [KEY=VALUE ...]" (health_check.h).
    static void health_check(Reader& r, const ytree::Node& a, const std::string& path, ServiceConfig& s) {
        if (!a) return;
        const std::string where = fmt::format("{}.metadata.annotations.{}", path, kHealthCheckAnnotation);
        std::string error;
        if (!a.IsScalar()) {
            r.error(a, where, "expected a string");
        } else if (auto hc = parse_health_check(a.Scalar(), error)) {
            s.health_check = std::move(hc);
            s.health_check->mark = r.mark(a);
        } else {
            r.error(a, where, error);
        }
    }

    static void service_type(Reader& r, const ytree::Node& spec, const std::string& sp, ServiceConfig& s) {
        const std::string type = r.str_or_empty(spec, "type", sp);
        if (type.empty() || type == "ClusterIP")
            s.type = ServiceType::cluster_ip;
        else if (type == "NodePort")
            s.type = ServiceType::node_port;
        else if (type == "LoadBalancer")
            s.type = ServiceType::load_balancer;
        else if (type == "ExternalName")
            s.type = ServiceType::external_name;
        else
            r.error(spec["type"], sp + ".type",
                    fmt::format("\"{}\" is not ClusterIP, NodePort, LoadBalancer or ExternalName", type));
    }

    // Families: clusterIPs holds one ClusterIP per family (spec.ipFamilies, in its order;
    // clusterIP is its first). Each family is served as kube-proxy's proxier of that family
    // serves it: its ClusterIP, its external and LB IPs, its EndpointSlices.
    void cluster_ips(Reader& r, const ytree::Node& spec, const std::string& sp, ServiceConfig& s) {
        const std::string cip = r.str_or_empty(spec, "clusterIP", sp);
        if (cip == "None") {
            ++cfg.kube.headless;
            return;
        }
        if (cip.empty()) {
            r.warn(spec, sp, "no clusterIP (not allocated yet?): the Service gets no dataplane rule");
            return;
        }
        if (auto a = r.ip(spec["clusterIP"], {sp, ".clusterIP"})) s.cluster_ips.push_back(*a);  // on error: go on
        if (const ytree::Node ips = spec["clusterIPs"]; ips && !ips.IsNull())
            for (const IpAddr& a : r.ips(ips, {sp, ".clusterIPs"})) {
                bool have = false;
                for (const IpAddr& b : s.cluster_ips) have = have || b.family() == a.family();
                if (!have)
                    s.cluster_ips.push_back(a);
                else if (std::find(s.cluster_ips.begin(), s.cluster_ips.end(), a) == s.cluster_ips.end())
                    r.error(ips, sp + ".clusterIPs", fmt::format("two ClusterIPs of one family ({})", format_ip(a)));
            }
    }

    // status.loadBalancer.ingress[].ip, but not those of ipMode Proxy: that load balancer
    // proxies, and its traffic arrives for the node.
    static void lb_ingress(Reader& r, const ytree::Node& obj, const std::string& path, ServiceConfig& s) {
        const ytree::Node st = obj["status"];
        if (!st || !st.IsMap()) return;
        const ytree::Node lb = st["loadBalancer"];
        if (!lb || !lb.IsMap()) return;
        const ytree::Node ing = lb["ingress"];
        if (!ing || !r.seq(ing, {path, ".status.loadBalancer.ingress"})) return;
        for (size_t i = 0; i < ing.size(); ++i) {
            const std::string ip = fmt::format("{}.status.loadBalancer.ingress[{}]", path, i);
            if (!r.open_map(ing[i], ip) || !ing[i]["ip"]) continue;  // hostname-only
            if (r.str_or_empty(ing[i], "ipMode", ip) == "Proxy") continue;
            if (auto a = r.ip(ing[i]["ip"], {ip, ".ip"})) s.lb_ips.push_back(*a);
        }
    }

    // Source ranges, session affinity, the traffic policies, the health check port.
    static void policies(Reader& r, const ytree::Node& spec, const std::string& sp, ServiceConfig& s) {
        s.lb_source_ranges =
            r.cidrs(spec["loadBalancerSourceRanges"], sp + ".loadBalancerSourceRanges");  // trims, as kube-proxy does
        if (r.client_ip_affinity(spec["sessionAffinity"], {sp, ".sessionAffinity"})) {
            s.affinity_timeout = kDefaultAffinityTimeout;
            if (const ytree::Node t = spec["sessionAffinityConfig"];
                t && t.IsMap() && t["clientIP"] && t["clientIP"].IsMap() && t["clientIP"]["timeoutSeconds"])
                if (auto v = r.uint<uint32_t>(t["clientIP"]["timeoutSeconds"],
                                              sp + ".sessionAffinityConfig.clientIP.timeoutSeconds", 1, 86400))
                    s.affinity_timeout = *v;
        }
        s.external_local = r.local_policy(spec["externalTrafficPolicy"], {sp, ".externalTrafficPolicy"});
        s.internal_local = r.local_policy(spec["internalTrafficPolicy"], {sp, ".internalTrafficPolicy"});
        if (const ytree::Node h = spec["healthCheckNodePort"])
            s.health_check_node_port = r.uint<uint16_t>(h, {sp, ".healthCheckNodePort"}, 1, 65535).value_or(0);
    }

    static void service_ports(Reader& r, const ytree::Node& ports, const std::string& sp, ServiceConfig& s) {
        for (size_t i = 0; i < ports.size(); ++i) {
            const ytree::Node p = ports[i];
            const std::string pp = fmt::format("{}.ports[{}]", sp, i);
            if (!r.open_map(p, pp)) continue;
            ServicePortConfig pc{.mark = r.mark(p), .path = pp};
            pc.name = r.str_or_empty(p, "name", pp);
            auto pr = r.l4_proto(p["protocol"], {pp, ".protocol"});
            if (!p["port"]) {
                r.error(p, pp, "a Service port needs port");
                continue;
            }
            auto port = r.uint<uint16_t>(p["port"], pp + ".port", 1, 65535);
            if (p["nodePort"] && !p["nodePort"].IsNull())
                pc.node_port = r.uint<uint16_t>(p["nodePort"], pp + ".nodePort", 0, 65535).value_or(0);
            if (!pr || !port) continue;
            pc.proto = *pr;
            pc.port = *port;
            s.ports.push_back(std::move(pc));
        }
    }

    void endpoint_slice(Reader& r, const ytree::Node& obj, const std::string& path) {
        PendingSlice ps{.mark = r.mark(obj)};
        if (!meta(r, obj, path, ps.ns, ps.name)) return;
        const std::string at = r.str_or_empty(obj, "addressType", path);
        if (at != "IPv4" && at != "IPv6") {
            r.warn(obj, path,
                   fmt::format("EndpointSlice {}/{}: addressType \"{}\" is neither IPv4 nor IPv6: ignored", ps.ns,
                               ps.name, at));
            return;
        }
        ps.family = at == "IPv6" ? Family::v6 : Family::v4;
        const ytree::Node labels = obj["metadata"]["labels"];
        if (labels && labels.IsMap() && labels[kHeadlessLabel]) return;  // kube-proxy's selector: not ours
        if (labels && labels.IsMap() && labels[kServiceNameLabel])
            ps.service = r.str(labels[kServiceNameLabel], {path, ".metadata.labels"}).value_or("");
        if (ps.service.empty()) {
            r.warn(obj, path,
                   fmt::format("EndpointSlice {}/{} has no {} label: no Service uses it", ps.ns, ps.name,
                               kServiceNameLabel));
            return;
        }
        if (const ytree::Node ports = obj["ports"]; ports && !ports.IsNull() && r.seq(ports, {path, ".ports"})) {
            for (size_t i = 0; i < ports.size(); ++i) {
                const ytree::Node p = ports[i];
                const std::string pp = fmt::format("{}.ports[{}]", path, i);
                if (!r.open_map(p, pp)) continue;
                EndpointGroup::Port gp{.name = r.str_or_empty(p, "name", pp)};
                auto pr = r.l4_proto(p["protocol"], {pp, ".protocol"});
                if (!p["port"] || p["port"].IsNull()) continue;  // "all ports": not a Service's
                auto port = r.uint<uint16_t>(p["port"], pp + ".port", 1, 65535);
                if (!pr || !port) continue;
                gp.proto = *pr;
                gp.port = *port;
                ps.group.ports.push_back(std::move(gp));
            }
        }
        const Path eps_path(path, ".endpoints");
        if (const ytree::Node eps = obj["endpoints"]; eps && !eps.IsNull() && r.seq(eps, eps_path)) {
            for (size_t i = 0; i < eps.size(); ++i) {
                const ytree::Node e = eps[i];
                const Path ep(eps_path, i);
                if (!r.open_map(e, ep)) continue;
                const ytree::Node a = e["addresses"];
                if (!a || !a.IsSequence() || a.size() == 0) {
                    r.error(e, ep, "an endpoint needs addresses");
                    continue;
                }
                EndpointConfig ec{.mark = r.mark(e)};
                auto ip = r.ip(a[0], {ep, ".addresses[0]"});
                if (ip && ip->family() != ps.family) {
                    r.error(a[0], {ep, ".addresses[0]"},
                            fmt::format("{} is not of the slice's addressType", format_ip(*ip)));
                    ip.reset();
                }
                ec.node = r.str_or_empty(e, "nodeName", ep);
                if (const ytree::Node c = e["conditions"]; c && c.IsMap()) {
                    const Path cp(ep, ".conditions.");
                    auto cond = [&](const char* key, bool dflt) {
                        const ytree::Node v = c[key];
                        if (!v || v.IsNull()) return dflt;
                        return r.boolean(v, Path(cp, key)).value_or(dflt);
                    };
                    ec.ready = cond("ready", true);
                    ec.serving = cond("serving", true);
                    ec.terminating = cond("terminating", false);
                }
                ec.zone = r.str_or_empty(e, "zone", ep);
                if (const ytree::Node h = e["hints"]; h && !h.IsNull() && r.open_map(h, {ep, ".hints"})) {
                    hint_names(r, h["forZones"], Path(ep, ".hints.forZones"), ec.zone_hints);
                    hint_names(r, h["forNodes"], Path(ep, ".hints.forNodes"), ec.node_hints);
                }
                if (ip) ec.ip = *ip, ps.group.endpoints.push_back(std::move(ec));
            }
        }
        slices.push_back(std::move(ps));
    }

    // hints.forZones / forNodes: a list of {name: ...}.
    static void hint_names(Reader& r, const ytree::Node& list, const Path& path, std::vector<std::string>& out) {
        if (!list || list.IsNull() || !r.seq(list, path)) return;
        for (size_t i = 0; i < list.size(); ++i)
            if (r.open_map(list[i], Path(path, i)))
                if (std::string name = r.str_or_empty(list[i], "name", Path(path, i)); !name.empty())
                    out.push_back(std::move(name));
    }

    // networking.k8s.io ServiceCIDR (KEP-1880): its spec.cidrs join cluster.service_cidrs.
    void service_cidr(Reader& r, const ytree::Node& obj, const std::string& path) {
        const ytree::Node spec = obj["spec"];
        if (!spec || !r.open_map(spec, {path, ".spec"})) {
            if (!spec) r.error(obj, path, "a ServiceCIDR needs a spec");
            return;
        }
        join_service_cidrs(cfg, r.cidrs(spec["cidrs"], path + ".spec.cidrs"));
        ++cfg.kube.service_cidrs;
    }

    // `typed`: the kind and apiVersion of a typed list's items (a ServiceList's, as the API
    // server answers a LIST), which carry none of their own.
    void object(Reader& r, const ytree::Node& obj, const std::string& path,
                const std::pair<std::string, std::string>& typed = {}) {
        if (!obj || obj.IsNull()) return;  // an empty document
        // Its shape is the object's own: a document that is no map, or a kind that is no word, is
        // one object left out, as a bad field is (whole()).
        std::string kind, api;
        const size_t issues = errors.size() + cfg.left_out.size();
        whole([&] {
            if (!r.open_map(obj, path)) return;
            kind = r.str_or_empty(obj, "kind", path);
            api = r.str_or_empty(obj, "apiVersion", path);
        });
        if (errors.size() + cfg.left_out.size() != issues) return;
        if (kind.empty() && api.empty()) kind = typed.first, api = typed.second;
        const std::string prefix = path.empty() ? "" : path + ".";
        if (const ytree::Node items = obj["items"]; items && kind.ends_with("List")) {
            // A typed list's items are of its kind; a `kind: List`'s name their own.
            const std::pair<std::string, std::string> item = kind == "List"
                ? std::pair<std::string, std::string>{}
                : std::pair{kind.substr(0, kind.size() - 4), api};
            bool listed = false;
            whole([&] { listed = !items.IsNull() && r.seq(items, prefix + "items"); });
            if (listed)
                for (size_t i = 0; i < items.size(); ++i)
                    object(r, items[i], fmt::format("{}items[{}]", prefix, i), item);
            return;
        }
        const std::string where = path.empty() ? kind : path;
        if (kind == "Service" && api == "v1") {
            whole([&] { service(r, obj, where); });
        } else if (kind == "EndpointSlice" && api.starts_with("discovery.k8s.io/")) {
            whole([&] { endpoint_slice(r, obj, where); });
        } else if (kind == "ServiceCIDR" && api.starts_with("networking.k8s.io/")) {
            whole([&] { service_cidr(r, obj, where); });
        } else if (kind.empty()) {
            whole([&] { r.error(obj, path, "not a Kubernetes object (no kind)"); });
        } else {
            ++cfg.kube.ignored_objects;
            r.warn(obj, where,
                   fmt::format("{} {}: not a Service or an EndpointSlice: ignored", api.empty() ? "?" : api, kind));
        }
    }

    void stream(const std::string& text, const std::string& name) {
        Reader r(name, errors, cfg.warnings);
        try {
            const ytree::Stream stream = ytree::Stream::parse(text);
            const std::vector<ytree::Node> docs = stream.documents();
            for (size_t d = 0; d < docs.size(); ++d)
                object(r, docs[d], docs.size() == 1 ? std::string{} : fmt::format("document[{}]", d));
        } catch (const ytree::ParseError& e) {
            errors.push_back(ConfigIssue{
                Mark{name, e.mark.is_null() ? 0 : e.mark.line + 1, e.mark.is_null() ? 0 : e.mark.column + 1}, "",
                e.msg});
        }
    }

    // Every slice joins its Service; all slices of one Service are merged by the builder. Another
    // proxy's Services leave first (with their slices), as kube-proxy's label selector leaves them.
    void attach(size_t first_service) {
        drop_other_proxies(first_service);
        std::map<std::string, ServiceConfig*> by_name;
        for (ServiceConfig& s : cfg.services) by_name.emplace(s.full_name(), &s);
        std::sort(other_proxy.begin(), other_proxy.end());
        for (PendingSlice& ps : slices) {
            auto it = by_name.find(ps.ns + "/" + ps.service);
            if (it == by_name.end() &&
                std::binary_search(other_proxy.begin(), other_proxy.end(), ps.ns + "/" + ps.service))
                continue;
            if (it == by_name.end()) {
                (leave_out ? cfg.left_out : errors)
                    .push_back(
                        ConfigIssue{ps.mark, "",
                                    fmt::format("EndpointSlice {}/{} names Service {}/{}, which is not in the config",
                                                ps.ns, ps.name, ps.ns, ps.service)});
                continue;
            }
            it->second->groups.push_back(std::move(ps.group));
            ++cfg.kube.slices;
        }
        slices.clear();
    }

    void drop_other_proxies(size_t first) {
        auto other = [&](const ServiceConfig& s) {
            if (!another_proxys(s, cfg)) return false;
            other_proxy.push_back(s.full_name());
            return true;
        };
        cfg.services.erase(
            std::remove_if(cfg.services.begin() + static_cast<std::ptrdiff_t>(first), cfg.services.end(), other),
            cfg.services.end());
    }
};

}  // namespace

void load_kube_manifests(const std::vector<ManifestRef>& files, Config& cfg, std::vector<ConfigIssue>& errors,
                         bool leave_out) {
    const size_t first = cfg.services.size();  // the compact services: not subject to proxy names
    KubeLoader l{cfg, errors, {}, {}, leave_out};
    for (const ManifestRef& f : files) {
        const auto text = read_file(f.path);
        if (!text) {
            errors.push_back(ConfigIssue{f.from, "kubernetes.manifests", fmt::format("cannot open \"{}\"", f.path)});
            continue;
        }
        cfg.manifests.push_back(f.path);
        l.stream(*text, f.path);
    }
    l.attach(first);
}

std::string kube_summary(const KubeStats& k) {
    return fmt::format(
        "{} Services, {} EndpointSlices, {} ServiceCIDRs; no rule for {} headless and {} ExternalName Services; "
        "{} of another proxy (service-proxy-name); {} other objects ignored",
        k.services, k.slices, k.service_cidrs, k.headless, k.external_name, k.other_proxy, k.ignored_objects);
}

void load_kube_string(const std::string& yaml, const std::string& name, Config& cfg, std::vector<ConfigIssue>& errors) {
    const size_t first = cfg.services.size();
    KubeLoader l{cfg, errors, {}, {}};
    l.stream(yaml, name);
    l.attach(first);
}

KubeObjectRead read_kube_object(const ytree::Node& obj, const std::string& name) {
    KubeObjectRead out{.name = name};
    Config scratch;
    std::vector<ConfigIssue> errors, warnings;
    KubeLoader l{scratch, errors, {}, {}};
    Reader r(name, errors, warnings);
    l.object(r, obj, "");
    out.stats = scratch.kube;
    if (!errors.empty()) {
        out.reason = RejectReason::invalid_object;
        out.message = errors[0].path.empty() ? errors[0].message : errors[0].path + ": " + errors[0].message;
        out.stats = {};
        return out;
    }
    if (!scratch.services.empty()) out.service = std::move(scratch.services[0]);
    out.service_cidrs = std::move(scratch.cluster.service_cidrs);
    if (!l.slices.empty())
        out.slice = KubeObjectRead::Slice{std::move(l.slices[0].ns), std::move(l.slices[0].service),
                                          std::move(l.slices[0].group)};
    return out;
}

void add_kube_objects(const std::vector<const KubeObjectRead*>& objects, Config& cfg,
                      std::vector<RejectedObject>& rejected, unsigned& orphan_slices) {
    std::unordered_map<std::string, size_t> by_name;  // Service -> its index in cfg.services
    std::unordered_set<std::string> other;            // another proxy's Services (service-proxy-name)
    by_name.reserve(cfg.services.size() + objects.size());
    cfg.services.reserve(cfg.services.size() + objects.size() / 2);
    for (size_t i = 0; i < cfg.services.size(); ++i) by_name.emplace(cfg.services[i].full_name(), i);
    const size_t file_services = cfg.services.size();
    for (size_t i = 0; i < objects.size(); ++i) {
        const KubeObjectRead& o = *objects[i];
        if (o.reason) {
            rejected.push_back(RejectedObject{o.name, *o.reason, o.message});
            continue;
        }
        join_service_cidrs(cfg, o.service_cidrs);
        cfg.kube.service_cidrs += o.stats.service_cidrs;
        if (!o.service) continue;
        if (another_proxys(*o.service, cfg)) {
            other.insert(o.service->full_name());
            continue;
        }
        if (!by_name.emplace(o.service->full_name(), cfg.services.size()).second) {
            rejected.push_back(RejectedObject{o.name, RejectReason::duplicate_service,
                                              "a Service of that name is in the config file"});
            continue;
        }
        cfg.services.push_back(*o.service);
        cfg.kube.services += o.stats.services;
        cfg.kube.headless += o.stats.headless;
        cfg.kube.external_name += o.stats.external_name;
    }
    for (size_t i = 0; i < objects.size(); ++i) {
        const KubeObjectRead& o = *objects[i];
        if (o.reason || !o.slice) continue;
        const auto it = by_name.find(o.slice->ns + "/" + o.slice->service);
        if (it == by_name.end() && other.contains(o.slice->ns + "/" + o.slice->service)) continue;
        if (it == by_name.end() || it->second < file_services) {  // a file Service takes no API slice
            ++orphan_slices;
            continue;
        }
        cfg.services[it->second].groups.push_back(o.slice->group);
        ++cfg.kube.slices;
    }
}

}  // namespace svcgate::ctl
