#include "control/config/lb_config.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "control/config/config_fields.h"

namespace svcgate::ctl {

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
    for (const auto& [k, v] : match_labels) {
        const auto it = labels.find(k);
        if (it == labels.end() || it->second != v) return false;
    }
    for (const Requirement& q : match_expressions) {
        const auto it = labels.find(q.key);
        const bool has = it != labels.end();
        const bool in = has && std::find(q.values.begin(), q.values.end(), it->second) != q.values.end();
        switch (q.op) {
            case Op::in:
                if (!in) return false;
                break;
            case Op::not_in:  // as Kubernetes: a missing key is not in the set
                if (in) return false;
                break;
            case Op::exists:
                if (!has) return false;
                break;
            case Op::does_not_exist:
                if (has) return false;
                break;
        }
    }
    return true;
}

std::optional<AddressRange> parse_address_range(std::string_view s, std::string& why) {
    auto trim = [](std::string_view t) {
        while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
        while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
        return t;
    };
    s = trim(s);
    if (s.find('/') != std::string_view::npos) {
        const auto c = parse_cidr(s, true);
        if (!c) {
            why = fmt::format("\"{}\" is not a CIDR", s);
            return std::nullopt;
        }
        const IpCidr net = mask_cidr(*c);
        if (net.addr != c->addr) {
            why = fmt::format("\"{}\" has host bits set (the network is {})", s, format_cidr(net));
            return std::nullopt;
        }
        AddressRange r{net.addr, net.addr, {}};
        const unsigned bits = (net.addr.is_v4() ? 96u : 0u) + net.len;  // over the mapped form's 128 bits
        for (unsigned i = 0; i < 16; ++i) {
            const unsigned keep = bits > i * 8 ? std::min(8u, bits - i * 8) : 0u;
            r.last.a.b[i] |= static_cast<uint8_t>(0xffu >> keep);
        }
        return r;
    }
    if (const size_t dash = s.find('-'); dash != std::string_view::npos) {
        const auto a = parse_ip(trim(s.substr(0, dash))), b = parse_ip(trim(s.substr(dash + 1)));
        if (!a || !b) {
            why = fmt::format("\"{}\" is not a range of two addresses (a-b)", s);
            return std::nullopt;
        }
        if (a->family() != b->family()) {
            why = fmt::format("\"{}\" mixes IPv4 and IPv6", s);
            return std::nullopt;
        }
        if (*b < *a) {
            why = fmt::format("\"{}\" is reversed: its first address is after its last", s);
            return std::nullopt;
        }
        return AddressRange{*a, *b, {}};
    }
    if (const auto a = parse_ip(s)) return AddressRange{*a, *a, {}};
    why = fmt::format("\"{}\" is not a CIDR, a range a-b or an address", s);
    return std::nullopt;
}

namespace {

// A DNS-1123 label (a namespace's name): lower-case letters, digits and '-', alphanumeric at both
// ends, at most 63; `subdomain`: such labels joined by '.', at most 253 (an object's name). Names
// go into URLs, JSON and metric labels as they are.
bool dns_name(std::string_view s, bool subdomain) {
    if (s.empty() || s.size() > (subdomain ? 253u : 63u)) return false;
    size_t label = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '.' && subdomain) {
            if (label == 0 || s[i - 1] == '-') return false;
            label = 0;
            continue;
        }
        const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && label > 0)) return false;
        if (++label > 63) return false;
    }
    return label > 0 && s.back() != '-';
}

std::string where(const Mark& m) { return fmt::format("{}:{}:{}", m.file.str(), m.line, m.column); }

// {matchLabels: {k: v}, matchExpressions: [{key, operator, values}]}, as metav1.LabelSelector.
std::optional<LabelSelector> read_selector(Reader& r, const ytree::Node& n, const Path& path) {
    if (!r.map(n, path, {"matchLabels", "matchExpressions"})) return std::nullopt;
    LabelSelector sel;
    bool ok = true;
    if (const ytree::Node ml = n["matchLabels"]; ml && !ml.IsNull()) {
        if (!r.open_map(ml, {path, ".matchLabels"})) return std::nullopt;
        for (const auto& kv : ml) {
            if (!kv.second.IsScalar()) {
                r.error(kv.second, Path(path, ".matchLabels").str() + "." + kv.first.Scalar(), "expected a string");
                ok = false;
                continue;
            }
            sel.match_labels[kv.first.Scalar()] = kv.second.Scalar();
        }
    }
    if (const ytree::Node me = n["matchExpressions"]; me && !me.IsNull() && r.seq(me, {path, ".matchExpressions"})) {
        const Path mp(path, ".matchExpressions");
        for (size_t i = 0; i < me.size(); ++i) {
            const ytree::Node e = me[i];
            const Path ep(mp, i);
            if (!r.map(e, ep, {"key", "operator", "values"})) {
                ok = false;
                continue;
            }
            LabelSelector::Requirement q;
            q.key = r.str_or_empty(e, "key", ep);
            const std::string op = r.str_or_empty(e, "operator", ep);
            static const std::map<std::string, LabelSelector::Op> kOps{
                {"In", LabelSelector::Op::in},
                {"NotIn", LabelSelector::Op::not_in},
                {"Exists", LabelSelector::Op::exists},
                {"DoesNotExist", LabelSelector::Op::does_not_exist}};
            const auto it = kOps.find(op);
            if (q.key.empty() || it == kOps.end()) {
                r.error(e, ep, "an expression needs a key and an operator In, NotIn, Exists or DoesNotExist");
                ok = false;
                continue;
            }
            q.op = it->second;
            if (const ytree::Node v = e["values"]; v && !v.IsNull() && r.seq(v, {ep, ".values"}))
                for (size_t j = 0; j < v.size(); ++j)
                    if (auto t = r.str(v[j], Path(Path(ep, ".values"), j))) q.values.push_back(*t);
            const bool set_op = q.op == LabelSelector::Op::in || q.op == LabelSelector::Op::not_in;
            if (set_op == q.values.empty()) {
                r.error(e, ep, set_op ? fmt::format("{} needs values", op) : fmt::format("{} takes no values", op));
                ok = false;
                continue;
            }
            sel.match_expressions.push_back(std::move(q));
        }
    }
    if (!ok) return std::nullopt;
    return sel;
}

void read_allocate_to(Reader& r, const ytree::Node& n, const Path& path, LbPoolConfig& p) {
    if (!r.map(n, path, keys_under("kubernetes", "load_balancer.pools[].allocate_to"))) return;
    p.allocate_to = true;
    if (const ytree::Node v = n["priority"])
        p.priority = r.uint<uint32_t>(v, {path, ".priority"}, 0, UINT32_MAX).value_or(0);
    p.namespaces = r.list<std::string>(n["namespaces"], {path, ".namespaces"},
                                       [&](const ytree::Node& x, const Path& xp) { return r.str(x, xp); });
    auto selectors = [&](const char* key, const char* field, std::vector<LabelSelector>& out) {
        out = r.list<LabelSelector>(n[key], {path, field},
                                    [&](const ytree::Node& x, const Path& xp) { return read_selector(r, x, xp); });
    };
    selectors("namespace_selectors", ".namespace_selectors", p.namespace_selectors);
    selectors("service_selectors", ".service_selectors", p.service_selectors);
}

std::optional<LbPoolConfig> read_pool(Reader& r, const ytree::Node& n, const Path& path) {
    if (!r.map(n, path, keys_under("kubernetes", "load_balancer.pools[]"))) return std::nullopt;
    LbPoolConfig p{.mark = r.mark(n)};
    p.name = r.str_or_empty(n, "name", path);
    if (p.name.empty())
        r.error(n, path, "a pool needs a name");
    else if (!dns_name(p.name, true))
        r.error(n["name"], {path, ".name"},
                fmt::format("\"{}\" is not a name Kubernetes takes (lower-case letters, digits, '-' and '.')", p.name));
    if (const ytree::Node v = n["auto_assign"]) p.auto_assign = r.boolean(v, {path, ".auto_assign"}).value_or(true);
    if (const ytree::Node v = n["avoid_buggy_ips"])
        p.avoid_buggy_ips = r.boolean(v, {path, ".avoid_buggy_ips"}).value_or(false);
    const ytree::Node a = n["addresses"];
    if (a && !a.IsNull() && r.seq(a, {path, ".addresses"})) {
        const Path ap(path, ".addresses");
        for (size_t i = 0; i < a.size(); ++i) {
            const Path ip(ap, i);
            const auto text = r.view(a[i], ip);
            if (!text) continue;
            std::string why;
            if (auto range = parse_address_range(*text, why)) {
                range->mark = r.mark(a[i]);
                p.ranges.push_back(*range);
            } else {
                r.error(a[i], ip, why);
            }
        }
    }
    if (!a || a.IsNull() || (a.IsSequence() && a.size() == 0))
        r.error(n, path, fmt::format("pool \"{}\" is empty: it needs addresses", p.name));
    if (const ytree::Node t = n["allocate_to"]; t && !t.IsNull()) read_allocate_to(r, t, {path, ".allocate_to"}, p);
    return p;
}

// Two pools (or two entries of one) that share an address would give it twice: sorted by family
// and first address, each entry is held against the one reaching furthest before it.
void check_overlaps(Reader& r, const std::vector<LbPoolConfig>& pools) {
    struct At {
        const AddressRange* range;
        size_t pool;
    };
    std::vector<At> all;
    for (size_t p = 0; p < pools.size(); ++p)
        for (const AddressRange& x : pools[p].ranges) all.push_back({&x, p});
    std::sort(all.begin(), all.end(), [](const At& a, const At& b) {
        if (a.range->first.family() != b.range->first.family())
            return a.range->first.family() < b.range->first.family();
        return a.range->first < b.range->first;
    });
    for (size_t i = 1, reach = 0; i < all.size(); ++i) {
        const At &a = all[reach], &b = all[i];
        if (a.range->first.family() != b.range->first.family()) {
            reach = i;
            continue;
        }
        if (b.range->first <= a.range->last)
            r.error_at(
                b.range->mark, fmt::format("kubernetes.load_balancer.pools[{}]", b.pool),
                fmt::format("{} of pool \"{}\" overlaps {} of pool \"{}\" (at {})", format_ip(b.range->first),
                            pools[b.pool].name, format_ip(a.range->first), pools[a.pool].name, where(a.range->mark)));
        if (a.range->last < b.range->last) reach = i;
    }
}

}  // namespace

void read_load_balancer(Reader& r, const ytree::Node& n, Config& cfg) {
    LoadBalancerConfig& lb = cfg.load_balancer;
    if (!read_fields(r, n, "kubernetes", "load_balancer", cfg)) return;
    lb.enabled = true;
    if (!cfg.kube_api.enabled)
        r.error(n, "kubernetes.load_balancer",
                "needs kubernetes.api: the addresses it gives are written to the API server");
    if (lb.lb_class.empty()) r.error(n, "kubernetes.load_balancer.class", "the class cannot be empty");
    if (const ytree::Node e = n["election"]; e && read_fields(r, e, "kubernetes", "load_balancer.election", cfg)) {
        const auto& el = lb.election;
        if (!dns_name(el.ns, false) || !dns_name(el.name, true))
            r.error(e, "kubernetes.load_balancer.election",
                    fmt::format("the Lease's namespace \"{}\" and name \"{}\" must be names Kubernetes takes "
                                "(lower-case letters, digits, '-'; '.' in the name)",
                                el.ns, el.name));
        // client-go's own checks (leaderelection.NewLeaderElector).
        if (el.renew_deadline_s >= el.lease_duration_s)
            r.error(e, "kubernetes.load_balancer.election", "renew_deadline_s must be shorter than lease_duration_s");
        if (el.retry_period_s * 12 >= el.renew_deadline_s * 10)
            r.error(e, "kubernetes.load_balancer.election",
                    "renew_deadline_s must be longer than 1.2 × retry_period_s (client-go's jitter)");
    }
    const ytree::Node pools = n["pools"];
    if (!pools || pools.IsNull()) return;  // no pools: nothing assigned, nothing written
    lb.pools.emplace();
    if (!r.seq(pools, "kubernetes.load_balancer.pools")) return;
    const Path pp("kubernetes.load_balancer.pools");
    std::map<std::string, Mark> names;
    for (size_t i = 0; i < pools.size(); ++i) {
        auto p = read_pool(r, pools[i], Path(pp, i));
        if (!p) continue;
        if (!p->name.empty()) {
            const auto [it, fresh] = names.emplace(p->name, p->mark);
            if (!fresh)
                r.error(pools[i], Path(pp, i),
                        fmt::format("pool \"{}\" is defined twice (first at {})", p->name, where(it->second)));
        }
        lb.pools->push_back(std::move(*p));
    }
    check_overlaps(r, *lb.pools);
}

}  // namespace svcgate::ctl
