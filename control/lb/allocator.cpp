#include "control/lb/allocator.h"

#include <algorithm>

#include <fmt/format.h>

#include "control/config/yaml_config.h"

namespace svcgate::ctl::lb {

U128 to_u128(const IpAddr& a) {
    U128 v = 0;
    for (const uint8_t b : a.a.b) v = v << 8 | b;
    return v;
}

IpAddr from_u128(U128 v) {
    IpAddr a;
    for (int i = 15; i >= 0; --i) {
        a.a.b[i] = static_cast<uint8_t>(v & 0xff);
        v >>= 8;
    }
    return a;
}

namespace {

constexpr uint64_t kMaxCount = (uint64_t{1} << 63) - 1;  // MetalLB's counts saturate there too
uint64_t saturate(U128 v) { return v > kMaxCount ? kMaxCount : static_cast<uint64_t>(v); }
bool is_v4(U128 v) { return (v >> 32) == 0xffff; }  // the mapped form ::ffff:a.b.c.d

// How many x in [0, n] end in the byte r.
U128 upto(U128 n, unsigned r) { return n >= r ? (n - r) / 256 + 1 : 0; }
// The IPv4 addresses ending in .0 or .255 in [a, b].
U128 buggy_in(U128 a, U128 b) {
    auto f = [&](unsigned r) { return upto(b, r) - (a == 0 ? 0 : upto(a - 1, r)); };
    return f(0) + f(255);
}

// The families a Service gets addresses of: both (IPv4 first, as MetalLB writes them) for a
// dual-stack one, else its own.
std::vector<Family> needed(const LbService& s) {
    if (s.dual()) return {Family::v4, Family::v6};
    return {s.families.empty() ? Family::v4 : s.families[0]};
}

std::string text(const std::vector<IpAddr>& ips) {
    std::string t;
    for (const IpAddr& a : ips) t += (t.empty() ? "" : ", ") + format_ip(a);
    return t;
}

const char* family_name(Family f) { return f == Family::v4 ? "IPv4" : "IPv6"; }

void v4_first(std::vector<IpAddr>& ips) {
    std::stable_sort(ips.begin(), ips.end(), [](const IpAddr& a, const IpAddr& b) { return a.is_v4() && !b.is_v4(); });
}

Result fail(Failure f, std::string why) {
    return Result{.ips = {}, .pool = {}, .failure = f, .message = std::move(why)};
}

}  // namespace

bool same_addresses(std::vector<IpAddr> a, std::vector<IpAddr> b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
}

void Allocator::set_pools(const std::vector<LbPoolConfig>& pools) {
    pools_.clear();
    for (const LbPoolConfig& c : pools) {
        Pool p{c, {}};
        for (const AddressRange& r : c.ranges) {
            const U128 first = to_u128(r.first);
            p.ranges.push_back(Range{first, to_u128(r.last), first});
        }
        pools_.push_back(std::move(p));
    }
}

bool Allocator::skipped(const Pool& p, U128 v) const {
    if (!p.cfg.avoid_buggy_ips || !is_v4(v)) return false;
    const unsigned low = static_cast<unsigned>(v & 0xff);
    return low == 0 || low == 255;
}

const Allocator::Pool* Allocator::pool_named(const std::string& name) const {
    for (const Pool& p : pools_)
        if (p.cfg.name == name) return &p;
    return nullptr;
}

// An address avoid_buggy_ips skips is in no pool: asking for it fails, holding it is given up.
const Allocator::Pool* Allocator::pool_of(const IpAddr& a) const {
    const U128 v = to_u128(a);
    for (const Pool& p : pools_)
        for (const Range& r : p.ranges)
            if (r.first <= v && v <= r.last && !skipped(p, v)) return &p;
    return nullptr;
}

// allocate_to: the namespace listed or matching a namespace selector (when either is given), and
// a service selector matching (when any is given).
bool Allocator::admits(const Pool& p, const LbService& s, const NamespaceLabels& ns) const {
    const LbPoolConfig& c = p.cfg;
    if (!c.namespaces.empty() || !c.namespace_selectors.empty()) {
        bool in = std::find(c.namespaces.begin(), c.namespaces.end(), s.ns) != c.namespaces.end();
        // A namespace not seen (not yet listed, or Namespaces not readable) matches no selector:
        // NotIn and DoesNotExist would match its missing labels.
        if (const auto it = ns.find(s.ns); !in && it != ns.end())
            in = std::any_of(c.namespace_selectors.begin(), c.namespace_selectors.end(),
                             [&](const LabelSelector& sel) { return sel.matches(it->second); });
        if (!in) return false;
    }
    return c.service_selectors.empty() ||
        std::any_of(c.service_selectors.begin(), c.service_selectors.end(),
                    [&](const LabelSelector& sel) { return sel.matches(s.labels); });
}

// MetalLB's order: the pools whose allocate_to admits the Service, by priority (lower first, 0
// after every other; config order among equals, where MetalLB's is random), then those without
// allocate_to in config order (MetalLB's: random). Only pools with auto_assign.
std::vector<const Allocator::Pool*> Allocator::candidates(const LbService& s, const NamespaceLabels& ns) const {
    std::vector<const Pool*> pinned, rest;
    for (const Pool& p : pools_)
        if (p.cfg.auto_assign && admits(p, s, ns)) (p.cfg.allocate_to ? pinned : rest).push_back(&p);
    std::stable_sort(pinned.begin(), pinned.end(), [](const Pool* a, const Pool* b) {
        auto rank = [](uint32_t prio) { return prio == 0 ? UINT64_MAX : prio; };
        return rank(a->cfg.priority) < rank(b->cfg.priority);
    });
    pinned.insert(pinned.end(), rest.begin(), rest.end());
    return pinned;
}

// MetalLB's sharing rule: an address in use is shared only by Services with the same non-empty
// sharing key, the same backend (both policy Cluster, or both Local with one selector) and no
// (protocol, port) in common. A Service alone on its address may change its key.
Failure Allocator::shareable(const IpAddr& a, const LbService& s, std::string& why) const {
    const auto it = used_.find(a);
    if (it == used_.end()) return Failure::none;
    std::vector<const LbService*> others;
    for (const std::string& k : it->second)
        if (k != s.key) others.push_back(&held_.at(k).s);
    if (others.empty()) return Failure::none;
    const LbService& o = *others.front();
    if (s.sharing_key.empty() || o.sharing_key.empty()) {
        why = fmt::format("{} is in use by {}", format_ip(a), o.key);
        return Failure::requested_in_use;
    }
    if (o.sharing_key != s.sharing_key) {
        why = fmt::format("{} is shared by {} under another key (\"{}\")", format_ip(a), o.key, o.sharing_key);
        return Failure::sharing_refused;
    }
    if (o.backend_key != s.backend_key) {
        why = fmt::format(
            "{} is shared by {}, whose backend differs (both need policy Cluster, or Local with one "
            "selector)",
            format_ip(a), o.key);
        return Failure::sharing_refused;
    }
    for (const LbService* x : others)
        for (const auto& port : s.ports)
            if (std::find(x->ports.begin(), x->ports.end(), port) != x->ports.end()) {
                why = fmt::format("port {}/{} is already in use on {} by {}",
                                  proto_name(static_cast<Proto>(port.first)), port.second, format_ip(a), x->key);
                return Failure::sharing_refused;
            }
    return Failure::none;
}

// The lowest address of the family, in the pool's ranges in their order: a free one (the range's
// cursor skips those taken) or, with a sharing key, one it may share.
std::optional<IpAddr> Allocator::first_free(const Pool& p, Family family, const LbService& s) const {
    for (const Range& r : p.ranges) {
        if (is_v4(r.first) != (family == Family::v4)) continue;
        U128 v = r.cursor;
        bool free = false;
        for (;;) {
            if (!skipped(p, v) && !used_.count(from_u128(v))) {
                free = true;
                break;
            }
            if (v == r.last) break;
            ++v;
        }
        r.cursor = v;
        std::optional<U128> found;
        if (free) found = v;
        if (!s.sharing_key.empty())
            for (auto it = used_.lower_bound(from_u128(r.first)); it != used_.end(); ++it) {
                const U128 x = to_u128(it->first);
                if (x > r.last || (found && x >= *found)) break;
                std::string why;
                if (!skipped(p, x) && shareable(it->first, s, why) == Failure::none) {
                    found = x;
                    break;
                }
            }
        if (found) return from_u128(*found);
    }
    return std::nullopt;
}

Result Allocator::from_pool(const Pool& p, const LbService& s, const std::vector<Family>& families,
                            const std::vector<IpAddr>& keep) const {
    Result r{.ips = {}, .pool = p.cfg.name, .failure = Failure::none, .message = {}};
    for (const Family f : families) {
        const auto kept = std::find_if(keep.begin(), keep.end(), [&](const IpAddr& a) { return a.family() == f; });
        if (kept != keep.end()) {
            r.ips.push_back(*kept);
            continue;
        }
        const auto a = first_free(p, f, s);
        if (!a)
            return fail(Failure::exhausted, fmt::format("no {} address left in pool {}", family_name(f), p.cfg.name));
        r.ips.push_back(*a);
    }
    v4_first(r.ips);
    return r;
}

Result Allocator::check(const LbService& s, const std::vector<IpAddr>& ips, const NamespaceLabels& ns,
                        bool partial) const {
    const std::vector<Family> fams = needed(s);
    std::vector<Family> got;
    for (const IpAddr& a : ips)
        if (std::find(got.begin(), got.end(), a.family()) == got.end()) got.push_back(a.family());
    const bool families_ok = got.size() == ips.size() &&
        std::all_of(got.begin(), got.end(),
                    [&](Family f) { return std::find(fams.begin(), fams.end(), f) != fams.end(); }) &&
        (got.size() == fams.size() || (partial && s.policy == LbService::Policy::prefer_dual && !got.empty()));
    if (ips.empty() || !families_ok)
        return fail(Failure::bad_request,
                    fmt::format("{} does not match the Service's families ({})", text(ips),
                                s.dual() ? "dual-stack" : family_name(fams[0])));
    const Pool* p = pool_of(ips[0]);
    if (!p) return fail(Failure::not_in_pool, fmt::format("{} is in no pool", format_ip(ips[0])));
    for (const IpAddr& a : ips)
        if (pool_of(a) != p)
            return fail(Failure::not_in_pool,
                        fmt::format("{} and {} are not in one pool", format_ip(ips[0]), format_ip(a)));
    if (!s.requested.empty() && !same_addresses(ips, s.requested))
        return fail(Failure::bad_request, fmt::format("{} is not what the Service requests", text(ips)));
    if (!s.pool.empty() && p->cfg.name != s.pool)
        return fail(
            Failure::pool_not_allowed,
            fmt::format("{} is in pool {}, not in the requested pool {}", format_ip(ips[0]), p->cfg.name, s.pool));
    if (!admits(*p, s, ns))
        return fail(Failure::pool_not_allowed,
                    fmt::format("pool {} does not admit {} (allocate_to)", p->cfg.name, s.key));
    for (const IpAddr& a : ips) {
        std::string why;
        if (const Failure f = shareable(a, s, why); f != Failure::none) return fail(f, why);
    }
    Result r{.ips = ips, .pool = p->cfg.name, .failure = Failure::none, .message = {}};
    v4_first(r.ips);
    return r;
}

Result Allocator::take(const LbService& s, std::vector<IpAddr> ips, const std::string& pool) {
    release(s.key);
    for (const IpAddr& a : ips) used_[a].insert(s.key);
    Result r{.ips = std::move(ips), .pool = pool, .failure = Failure::none, .message = {}};
    held_[s.key] = Held{r, s};
    return r;
}

Result Allocator::assign(const LbService& s, const std::vector<IpAddr>& ips, const NamespaceLabels& ns) {
    Result r = check(s, ips, ns, false);
    return r ? take(s, r.ips, r.pool) : r;
}

Result Allocator::keep(const LbService& s, Result r) {
    // Completed only where nothing was asked for: requested addresses are what the Service gets.
    if (r.ips.size() < needed(s).size() && s.requested.empty())
        if (Result more = from_pool(*pool_named(r.pool), s, needed(s), r.ips)) r.ips = more.ips;
    return take(s, r.ips, r.pool);
}

Result Allocator::allocate(const LbService& s, const NamespaceLabels& ns) {
    if (!s.request_error.empty()) return fail(Failure::bad_request, s.request_error);
    const std::vector<Family> fams = needed(s);
    if (s.policy == LbService::Policy::require_dual && !s.dual()) {
        release(s.key);
        return fail(Failure::family_unavailable, "RequireDualStack with a single-stack ClusterIP");
    }
    std::string cleared;
    if (!s.status_ips.empty()) {
        if (Result r = check(s, s.status_ips, ns, true))
            return keep(s, std::move(r));
        else
            cleared = r.message;
    }
    release(s.key);
    Result out = fresh(s, ns, fams);
    out.cleared = cleared;
    return out;
}

Result Allocator::fresh(const LbService& s, const NamespaceLabels& ns, const std::vector<Family>& fams) {
    if (!s.requested.empty()) return assign(s, s.requested, ns);
    std::vector<const Pool*> pools;
    if (!s.pool.empty()) {
        const Pool* p = pool_named(s.pool);
        if (!p) return fail(Failure::unknown_pool, fmt::format("no pool is named {}", s.pool));
        if (!admits(*p, s, ns))
            return fail(Failure::pool_not_allowed,
                        fmt::format("pool {} does not admit {} (allocate_to)", s.pool, s.key));
        pools.push_back(p);
    } else {
        pools = candidates(s, ns);
        if (pools.empty()) return fail(Failure::no_pool, fmt::format("no pool with auto_assign admits {}", s.key));
    }
    // MetalLB's findBestPoolForService: the first pool with every family; for PreferDualStack,
    // failing that, the first with the primary family, then the first with the other.
    std::vector<std::vector<Family>> tries{fams};
    if (s.dual() && s.policy == LbService::Policy::prefer_dual) {
        tries.push_back({s.families[0]});
        tries.push_back({s.families[1]});
    }
    bool any_family = false;
    for (const auto& want : tries)
        for (const Pool* p : pools) {
            const bool has = std::all_of(want.begin(), want.end(), [&](Family f) {
                return std::any_of(p->ranges.begin(), p->ranges.end(),
                                   [&](const Range& r) { return is_v4(r.first) == (f == Family::v4); });
            });
            if (!has) continue;
            any_family = true;
            if (Result r = from_pool(*p, s, want, {})) return take(s, r.ips, r.pool);
        }
    if (!any_family)
        return fail(
            Failure::family_unavailable,
            fmt::format("no pool admitting {} has {}", s.key, s.dual() ? "both families" : family_name(fams[0])));
    return fail(Failure::exhausted,
                fmt::format("no address left for {} in {}", s.key,
                            s.pool.empty() ? std::string("the pools admitting it") : "pool " + s.pool));
}

bool Allocator::learn(const LbService& s, const NamespaceLabels& ns) {
    if (!s.status_ips.empty())
        if (Result r = check(s, s.status_ips, ns, true)) {
            take(s, r.ips, r.pool);
            return true;
        }
    release(s.key);
    return false;
}

std::vector<std::string> Allocator::holders() const {
    std::vector<std::string> out;
    out.reserve(held_.size());
    for (const auto& [k, h] : held_) out.push_back(k);
    return out;
}

void Allocator::release(const std::string& key) {
    const auto it = held_.find(key);
    if (it == held_.end()) return;
    for (const IpAddr& a : it->second.r.ips) {
        const auto u = used_.find(a);
        if (u == used_.end()) continue;
        u->second.erase(key);
        if (!u->second.empty()) continue;
        used_.erase(u);
        const U128 v = to_u128(a);
        for (const Pool& p : pools_)
            for (const Range& r : p.ranges)
                if (r.first <= v && v <= r.last && v < r.cursor) r.cursor = v;
    }
    held_.erase(it);
}

const Result* Allocator::held(const std::string& key) const {
    const auto it = held_.find(key);
    return it == held_.end() ? nullptr : &it->second.r;
}

std::vector<PoolCount> Allocator::counts() const {
    std::vector<PoolCount> out;
    std::map<const Pool*, size_t> index;
    for (const Pool& p : pools_) {
        PoolCount c{.name = p.cfg.name, .v4 = {}, .v6 = {}};
        U128 size4 = 0, size6 = 0;
        for (const Range& r : p.ranges) {
            U128 n = r.last - r.first;
            if (n != ~U128{0}) ++n;  // ::/0's count, one short, as near as it matters
            if (is_v4(r.first)) {
                if (p.cfg.avoid_buggy_ips) n -= buggy_in(r.first, r.last);
                size4 += n;
                c.v4.present = true;
            } else {
                size6 = size6 + n < size6 ? ~U128{0} : size6 + n;
                c.v6.present = true;
            }
        }
        c.v4.available = saturate(size4);
        c.v6.available = saturate(size6);
        index[&p] = out.size();
        out.push_back(c);
    }
    for (const auto& [a, users] : used_) {
        const Pool* p = pool_of(a);
        if (!p) continue;  // held from before a pool edit; released at the next decision
        FamilyCount& f = a.is_v4() ? out[index[p]].v4 : out[index[p]].v6;
        ++f.assigned;
        if (f.available > 0 && f.available < kMaxCount) --f.available;
    }
    return out;
}

}  // namespace svcgate::ctl::lb
