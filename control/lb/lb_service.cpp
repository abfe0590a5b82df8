#include "control/lb/lb_service.h"

#include <algorithm>

#include <fmt/format.h>

#include "control/config/yaml_config.h"
#include "control/kube/kubeconfig.h"

namespace svcgate::ctl::lb {

namespace {

std::string scalar(const ytree::Node& n) { return n && n.IsScalar() ? n.Scalar() : std::string(); }

// The first of `keys` an annotation has, "" when none.
std::string annotation(const ytree::Node& ann, std::initializer_list<const char*> keys) {
    if (!ann.IsMap()) return {};
    for (const char* k : keys)
        if (const ytree::Node v = ann[k]; v && v.IsScalar()) return v.Scalar();
    return {};
}

std::string trim(std::string_view t) {
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    return std::string(t);
}

// "a,b": one or two addresses (of two families, at most one each), as MetalLB reads them.
std::vector<IpAddr> address_list(const std::string& text, std::string& error) {
    std::vector<IpAddr> out;
    size_t at = 0;
    while (at <= text.size()) {
        const size_t comma = std::min(text.find(',', at), text.size());
        const std::string one = trim(std::string_view(text).substr(at, comma - at));
        at = comma + 1;
        if (one.empty()) continue;
        const auto a = parse_ip(one);
        if (!a) {
            error = fmt::format("\"{}\" is not an address", one);
            return {};
        }
        out.push_back(*a);
    }
    if (out.size() > 2 || (out.size() == 2 && out[0].family() == out[1].family())) {
        error = fmt::format("\"{}\": at most one address of each family", text);
        return {};
    }
    return out;
}

}  // namespace

std::map<std::string, std::string> object_labels(const ytree::Node& obj) {
    std::map<std::string, std::string> out;
    const ytree::Node l = obj["metadata"]["labels"];
    if (l.IsMap())
        for (const auto& kv : l)
            if (kv.second.IsScalar()) out.emplace(kv.first.Scalar(), kv.second.Scalar());
    return out;
}

namespace {

// MetalLB's rule: the families of spec.clusterIPs (else clusterIP), the primary first as
// spec.ipFamilies names it; without cluster IPs, spec.ipFamilies itself.
void read_families(const ytree::Node& spec, LbService& s) {
    const std::string policy = scalar(spec["ipFamilyPolicy"]);
    s.policy = policy == "RequireDualStack" ? LbService::Policy::require_dual
        : policy == "PreferDualStack"       ? LbService::Policy::prefer_dual
                                            : LbService::Policy::single;
    auto add = [&](Family fam) {
        if (std::find(s.families.begin(), s.families.end(), fam) == s.families.end()) s.families.push_back(fam);
    };
    if (const ytree::Node ips = spec["clusterIPs"]; ips.IsSequence())
        for (size_t i = 0; i < ips.size(); ++i)
            if (const auto a = parse_ip(scalar(ips[i]))) add(a->family());
    if (s.families.empty())
        if (const auto a = parse_ip(scalar(spec["clusterIP"]))) add(a->family());
    const ytree::Node f = spec["ipFamilies"];
    const std::string primary = f.IsSequence() && f.size() > 0 ? scalar(f[0]) : "";
    if (s.families.empty() && f.IsSequence())
        for (size_t i = 0; i < f.size(); ++i) {
            const std::string v = scalar(f[i]);
            if (v == "IPv4" || v == "IPv6") add(v == "IPv6" ? Family::v6 : Family::v4);
        }
    if (s.families.empty()) s.families.push_back(Family::v4);
    if (s.families.size() == 2 && (primary == "IPv6") != (s.families[0] == Family::v6))
        std::swap(s.families[0], s.families[1]);
}

// The addresses asked for: the annotation (svcgate's, else MetalLB's) or spec.loadBalancerIP;
// both set and disagreeing is an error.
void read_request(const ytree::Node& ann, const ytree::Node& spec, LbService& s) {
    const std::string ips = annotation(
        ann, {"svcgate.io/load-balancer-ips", "metallb.io/loadBalancerIPs", "metallb.universe.tf/loadBalancerIPs"});
    const std::string spec_ip = scalar(spec["loadBalancerIP"]);
    if (!ips.empty()) s.requested = address_list(ips, s.request_error);
    if (!spec_ip.empty() && s.request_error.empty()) {
        std::string err;
        const std::vector<IpAddr> one = address_list(spec_ip, err);
        if (!err.empty() || one.size() != 1)
            s.request_error = fmt::format("spec.loadBalancerIP \"{}\" is not an address", spec_ip);
        else if (ips.empty())
            s.requested = one;
        else if (s.requested.size() != 1 || s.requested[0] != one[0])
            s.request_error = fmt::format("spec.loadBalancerIP {} and the annotation's \"{}\" disagree", spec_ip, ips);
    }
    if (!s.request_error.empty()) s.requested.clear();
}

// (protocol, port) of each port, and the backend sharing compares.
void read_ports(const ytree::Node& spec, LbService& s) {
    if (const ytree::Node ports = spec["ports"]; ports.IsSequence())
        for (size_t i = 0; i < ports.size(); ++i) {
            const std::string p = scalar(ports[i]["protocol"]);
            const auto proto = parse_proto(p.empty() ? "TCP" : p);
            const auto port = parse_number(scalar(ports[i]["port"]), 1, 65535);
            if (proto && port) s.ports.emplace_back(static_cast<uint8_t>(*proto), static_cast<uint16_t>(*port));
        }
    // MetalLB's key: labels.Set(selector).String(), "" for Cluster and for Local without a selector.
    if (scalar(spec["externalTrafficPolicy"]) != "Local") return;
    std::map<std::string, std::string> m;
    if (const ytree::Node sel = spec["selector"]; sel.IsMap())
        for (const auto& kv : sel) m.emplace(kv.first.Scalar(), scalar(kv.second));
    for (const auto& [k, v] : m) s.backend_key += (s.backend_key.empty() ? "" : ",") + k + "=" + v;
}

}  // namespace

LbService read_lb_service(const ytree::Node& svc) {
    LbService s;
    const ytree::Node meta = svc["metadata"], spec = svc["spec"], ann = meta["annotations"];
    s.name = scalar(meta["name"]);
    s.ns = scalar(meta["namespace"]);
    if (s.ns.empty()) s.ns = "default";
    s.key = s.ns + "/" + s.name;
    s.uid = scalar(meta["uid"]);
    s.resource_version = scalar(meta["resourceVersion"]);
    if (const std::string c = scalar(meta["creationTimestamp"]); !c.empty())
        if (const double t = kube::parse_rfc3339(c); t > 0) s.created = t;
    s.labels = object_labels(svc);
    s.load_balancer = scalar(spec["type"]) == "LoadBalancer";
    if (const ytree::Node c = spec["loadBalancerClass"]; c && c.IsScalar()) s.has_class = true, s.lb_class = c.Scalar();
    read_families(spec, s);
    read_request(ann, spec, s);
    s.pool =
        annotation(ann, {"svcgate.io/address-pool", "metallb.io/address-pool", "metallb.universe.tf/address-pool"});
    s.sharing_key = annotation(
        ann, {"svcgate.io/allow-shared-ip", "metallb.io/allow-shared-ip", "metallb.universe.tf/allow-shared-ip"});
    read_ports(spec, s);
    if (const ytree::Node ing = svc["status"]["loadBalancer"]["ingress"]; ing.IsSequence())
        for (size_t i = 0; i < ing.size(); ++i)
            if (const auto a = parse_ip(scalar(ing[i]["ip"]))) s.status_ips.push_back(*a);
    s.status_pool = annotation(ann, {kPoolAnnotation});
    return s;
}

bool same_ask(const LbService& a, const LbService& b) {
    return a.key == b.key && a.uid == b.uid && a.created == b.created && a.load_balancer == b.load_balancer &&
        a.has_class == b.has_class && a.lb_class == b.lb_class && a.policy == b.policy && a.families == b.families &&
        a.requested == b.requested && a.request_error == b.request_error && a.pool == b.pool &&
        a.sharing_key == b.sharing_key && a.ports == b.ports && a.backend_key == b.backend_key && a.labels == b.labels;
}

bool older(const LbService& a, const LbService& b) {
    if (a.created != b.created) return a.created < b.created;
    return a.key < b.key;
}

}  // namespace svcgate::ctl::lb
