// The LoadBalancer address allocator, on MetalLB's model (its internal/allocator): pools in
// priority order, one address per family of the Service from one pool, requested addresses and
// pools, sharing by key, families. Pure bookkeeping, no I/O: the controller (controller.h) decides
// which Service is asked in which order and writes the results.
//
// Runs on: the load balancer's controller thread (and the tests). Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/config/config_model.h"
#include "control/lb/lb_service.h"
#include "dataplane/base/enum_names.h"

namespace svcgate::ctl::lb {

__extension__ typedef unsigned __int128 U128;  // an address as a number (IPv4 in its mapped form)
U128 to_u128(const IpAddr& a);
IpAddr from_u128(U128 v);
// The same addresses, in any order.
bool same_addresses(std::vector<IpAddr> a, std::vector<IpAddr> b);

// Why a Service got no address (svcgate_lb_allocation_failures_total{reason}, the event's reason).
#define SVCGATE_LB_FAILURE(X)                                                                             \
    X(bad_request, "bad_request")               /* requested addresses that cannot be read or disagree */ \
    X(unknown_pool, "unknown_pool")             /* the pool asked for does not exist */                   \
    X(pool_not_allowed, "pool_not_allowed")     /* the pool asked for does not admit the Service */       \
    X(not_in_pool, "not_in_pool")               /* a requested address is in no pool admitting it */      \
    X(requested_in_use, "requested_in_use")     /* a requested address is another Service's */            \
    X(sharing_refused, "sharing_refused")       /* held by Services it cannot share with */               \
    X(family_unavailable, "family_unavailable") /* no admitting pool has the Service's families */        \
    X(no_pool, "no_pool")                       /* no pool admits the Service */                          \
    X(exhausted, "exhausted")                   /* the admitting pools are full */
enum class Failure : uint8_t { SVCGATE_LB_FAILURE(SVCGATE_ENUM_ID) none };
inline constexpr std::array kFailureNames{SVCGATE_LB_FAILURE(SVCGATE_ENUM_NAME)};
inline const char* failure_name(Failure f) { return enum_name(f, kFailureNames); }

struct Result {
    std::vector<IpAddr> ips;  // in the Service's family order
    std::string pool;
    Failure failure = Failure::none;
    std::string message;  // why, for the event and the log
    std::string cleared;  // the status's addresses were given up, and why (MetalLB's ClearAssignment)
    explicit operator bool() const { return failure == Failure::none; }
};

// Per pool and family: addresses given (a shared one once) and left to give.
struct FamilyCount {
    uint64_t assigned = 0, available = 0;  // saturating at 2^63 - 1
    bool present = false;                  // the pool has addresses of this family
};
struct PoolCount {
    std::string name;
    FamilyCount v4, v6;
};

// The labels of each namespace (the Namespace objects), for namespace_selectors.
using NamespaceLabels = std::map<std::string, std::map<std::string, std::string>>;

class Allocator {
public:
    Allocator() = default;
    // The pools (a reload): assignments stay as they are, even those no pool holds any more; the
    // controller asks again for each Service (assign) and releases what no longer fits.
    void set_pools(const std::vector<LbPoolConfig>& pools);

    // `s` gets exactly `ips` (as it requests them): each in one pool that admits it, all in one
    // pool, each free or shareable. Replaces what `s` held on success.
    Result assign(const LbService& s, const std::vector<IpAddr>& ips, const NamespaceLabels& ns);
    // The decision for `s`, a pure function of the Service and of what the others hold (MetalLB's
    // converge): its status's addresses where they still fit (in one pool admitting it, what it
    // asks for, of its families, free or shareable) are re-learned, so a restart or a pool edit
    // moves nothing; else they are given up (Result::cleared says why) and it gets its requested
    // addresses, else the first free address of each family from its requested pool or the first
    // admitting pool by priority. A Service with no status starts from a clean slate, as
    // MetalLB's does: what it held is given back first, so the same lowest address comes again.
    // A PreferDualStack Service holding one family gets the other from the same pool when it can.
    // On failure it holds nothing, but for a request it cannot read (it keeps what it has).
    Result allocate(const LbService& s, const NamespaceLabels& ns);
    // `s` holds its status's addresses where they fit, else nothing; no new address is given: a
    // reader's whole step, and the writer's first of a pass (every status re-learnt before any
    // Service gets a new address). True when it holds them.
    bool learn(const LbService& s, const NamespaceLabels& ns);
    void release(const std::string& key);
    std::vector<std::string> holders() const;  // the Services holding addresses

    // What `key` holds now; null: nothing.
    const Result* held(const std::string& key) const;
    std::vector<PoolCount> counts() const;
    size_t services() const { return held_.size(); }

private:
    struct Range {
        U128 first, last;
        mutable U128 cursor;  // every address of the range below it is in use or skipped
    };
    struct Pool {
        LbPoolConfig cfg;
        std::vector<Range> ranges;  // by first address
    };

    const Pool* pool_named(const std::string& name) const;
    const Pool* pool_of(const IpAddr& a) const;
    bool admits(const Pool& p, const LbService& s, const NamespaceLabels& ns) const;
    std::vector<const Pool*> candidates(const LbService& s, const NamespaceLabels& ns) const;
    // Why `s` cannot have `a` as things stand (Failure::none: it can).
    Failure shareable(const IpAddr& a, const LbService& s, std::string& why) const;
    // The lowest address of `family` in `p` that `s` may have; nullopt when none.
    std::optional<IpAddr> first_free(const Pool& p, Family family, const LbService& s) const;
    bool skipped(const Pool& p, U128 v) const;  // avoid_buggy_ips
    Result take(const LbService& s, std::vector<IpAddr> ips, const std::string& pool);
    // `r` (a fitting hold), completed for a PreferDualStack Service from its pool, taken.
    Result keep(const LbService& s, Result r);
    // New addresses: requested ones, else from the requested pool or the candidates.
    Result fresh(const LbService& s, const NamespaceLabels& ns, const std::vector<Family>& fams);
    Result from_pool(const Pool& p, const LbService& s, const std::vector<Family>& families,
                     const std::vector<IpAddr>& keep) const;
    // `ips` as s's addresses: in one pool that admits s, what s asks for, each shareable; the
    // pool's name, or why not. `partial`: a PreferDualStack Service may hold one family.
    Result check(const LbService& s, const std::vector<IpAddr>& ips, const NamespaceLabels& ns, bool partial) const;

    struct Held {
        Result r;
        LbService s;  // what it asked for when it got it: its ports and keys leave with it
    };

    std::vector<Pool> pools_;
    std::map<IpAddr, std::set<std::string>> used_;  // the Services on each address given
    std::map<std::string, Held> held_;
};

}  // namespace svcgate::ctl::lb
