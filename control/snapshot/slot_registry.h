// Stable slots for service ports and endpoints: the indices of the StatsTable that a flow's
// counters and its place in the active counts live at. A service port keeps its slot for as long
// as a config names it (by "namespace/name:port/PROTO") or a flow to one of its endpoints lives;
// an endpoint keeps its slot (by service slot, address and port) for as long as a config names
// it or a flow holds it. So a reload, however it reorders the Services, moves no flow's counts;
// and least-connection keeps seeing every long-lived flow.
//
// A slot no snapshot names and no flow holds is given back once a grace period has passed since
// it was seen so. A service port's counts are kept by name and continue when it comes back (its
// exported counters never go backwards); an endpoint's restart from zero when it comes back after
// its slot was given back (a counter reset, which Prometheus' rate() takes in its stride), so
// that pod churn does not grow the registry without bound.
//
// The StatsTable is published to the workers on its own (WorkerCtx::stats), and it grows before
// a slot beyond it is handed out: reserve() makes a table large enough for any slot the next
// snapshot could need; the publisher publishes it and waits a grace period; published() folds the
// old table's counts and active counts into it and frees the old one; only then does assign()
// give out slots. A worker therefore never indexes a table smaller than its flows' slots.
//
// Runs on: the control thread (the publisher). Readers on other threads (views) take the
// publisher's lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <rte_rcu_qsbr.h>

#include "dataplane/packet/counters.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

class SlotRegistry {
public:
    explicit SlotRegistry(uint16_t workers);
    ~SlotRegistry();
    SlotRegistry(const SlotRegistry&) = delete;
    SlotRegistry& operator=(const SlotRegistry&) = delete;

    // A larger StatsTable when the current one could run out of slots for `s` (null otherwise).
    // It holds the current table's active counts already; publish it to the workers, wait a grace
    // period, then call published().
    dp::StatsTable* reserve(const dp::ServiceSnapshot& s);
    // Every worker uses the table reserve() returned: the old one's counts (and the active counts
    // that changed since reserve() copied them) are folded in, and it is freed.
    void published();
    // Gives every service port and endpoint of `s` its slot (the one it had, or a free one), all
    // within the current table (reserve() first).
    void assign(dp::ServiceSnapshot& s);
    // Gives back the slots that no snapshot names and no flow holds, once a grace period has
    // passed since they were seen so (`qsbr` null: no concurrent reader, at once). Call after
    // published(), and now and then: flows expire between reloads too.
    void reclaim(rte_rcu_qsbr* qsbr);

    dp::PacketCounter service_total(uint32_t slot) const;
    dp::PacketCounter endpoint_total(uint32_t slot) const;
    int32_t active(uint32_t endpoint_slot) const;
    // StatsTable::no_return's count for a service slot, this slot's life long.
    uint64_t no_return_total(uint32_t slot) const;
    // True once per slot, the first time its no_return count is not 0: the log warns then.
    bool no_return_first_seen(uint32_t slot);
    const std::string& service_name(uint32_t slot) const;  // "" for a slot not in use
    size_t service_slots_in_use() const { return svc_.size() - svc_free_.size(); }
    size_t endpoint_slots_in_use() const { return ep_.size() - ep_free_.size(); }
    const dp::StatsTable& table() const { return *table_; }
    dp::StatsTable* current() { return table_.get(); }

private:
    struct SvcSlot {
        std::string key;   // "namespace/name:port/PROTO"
        std::string name;  // "namespace/name:port"
        uint32_t id = 0;   // ServicePort::id
        dp::Proto proto = dp::Proto::tcp;
        dp::Family family = dp::Family::v4;
        uint32_t named = 0;      // generation that last named it
        uint32_t endpoints = 0;  // endpoint slots in use under it
        bool live = false;
        bool limbo = false;
        dp::PacketCounter base;       // counted in replaced tables, or before it was given back
        uint64_t no_return_base = 0;  // likewise, StatsTable::no_return
        bool no_return_warned = false;
    };
    struct EpSlot {
        uint32_t service = 0;
        dp::EndpointKey ep;
        uint32_t named = 0;
        bool live = false;
        bool limbo = false;
        dp::PacketCounter base;
    };
    struct EpKey {
        uint32_t service;
        uint64_t ep;
        bool operator==(const EpKey&) const = default;
    };
    struct EpKeyHash {
        size_t operator()(const EpKey& k) const noexcept { return std::hash<uint64_t>()(k.ep * 31 + k.service); }
    };
    struct Limbo {
        bool endpoint;
        uint32_t slot;
        uint64_t token;
    };

    uint32_t service_slot(uint32_t id, const std::string& name, dp::Proto proto, dp::Family family);
    uint32_t endpoint_slot(uint32_t service, dp::EndpointKey ep);
    void reclaim_round(rte_rcu_qsbr* qsbr);
    void free_service(uint32_t slot);
    void free_endpoint(uint32_t slot);

    uint16_t workers_;
    uint32_t generation_ = 0;
    std::vector<SvcSlot> svc_;
    std::vector<EpSlot> ep_;
    std::vector<uint32_t> svc_free_, ep_free_;
    // By ServicePort::id (a hash of name and protocol); name and protocol are compared on a hit,
    // so two service ports whose ids collide still get slots of their own.
    std::unordered_multimap<uint32_t, uint32_t> svc_index_;
    std::unordered_map<EpKey, uint32_t, EpKeyHash> ep_index_;
    std::unordered_map<std::string, dp::PacketCounter> carried_;  // of service slots given back, by key
    std::vector<Limbo> limbo_;
    std::unique_ptr<dp::StatsTable> table_;
    std::unique_ptr<dp::StatsTable> replaced_;
    std::vector<int32_t> copied_;  // replaced_'s active counts as reserve() copied them
    uint32_t svc_capacity_ = 0, ep_capacity_ = 0;
};

}  // namespace svcgate::ctl
