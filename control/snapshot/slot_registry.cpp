#include "control/snapshot/slot_registry.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/base/rcu.h"
#include "control/config/yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {
constexpr uint32_t kMinSlots = 64;

// A slot from the free list, or a new one at the end.
template <typename Slot>
uint32_t take_slot(std::vector<Slot>& slots, std::vector<uint32_t>& free) {
    if (free.empty()) {
        slots.emplace_back();
        return static_cast<uint32_t>(slots.size() - 1);
    }
    const uint32_t slot = free.back();
    free.pop_back();
    return slot;
}
}  // namespace

SlotRegistry::SlotRegistry(uint16_t workers)
    : workers_(workers),
      table_(std::make_unique<StatsTable>(workers, kMinSlots, kMinSlots)),
      svc_capacity_(kMinSlots),
      ep_capacity_(kMinSlots) {}

SlotRegistry::~SlotRegistry() = default;

uint32_t SlotRegistry::service_slot(uint32_t id, const std::string& name, Proto proto, Family family) {
    for (auto [it, end] = svc_index_.equal_range(id); it != end; ++it)
        if (svc_[it->second].proto == proto && svc_[it->second].family == family && svc_[it->second].name == name)
            return it->second;
    const std::string key = fmt::format("{}/{}{}", name, proto_name(proto), family == Family::v6 ? "/v6" : "");
    const uint32_t slot = take_slot(svc_, svc_free_);
    SvcSlot& s = svc_[slot];
    s = SvcSlot{.key = key, .name = name, .id = id, .proto = proto, .family = family, .live = true};
    if (auto c = carried_.find(key); c != carried_.end()) {
        s.base = c->second;  // the same service port again: its counters go on
        carried_.erase(c);
    }
    svc_index_.emplace(id, slot);
    return slot;
}

uint32_t SlotRegistry::endpoint_slot(uint32_t service, EndpointKey ep) {
    const EpKey k{service, ep.word()};
    if (auto it = ep_index_.find(k); it != ep_index_.end()) return it->second;
    const uint32_t slot = take_slot(ep_, ep_free_);
    ep_[slot] = EpSlot{.service = service, .ep = ep, .live = true};
    ++svc_[service].endpoints;
    ep_index_.emplace(k, slot);
    return slot;
}

StatsTable* SlotRegistry::reserve(const ServiceSnapshot& s) {
    // At most every service port and endpoint of `s` is new, and a new slot comes from the free
    // list or from the end: the table must reach the end plus that many.
    const size_t svc_need = svc_.size() + s.services.size(), ep_need = ep_.size() + s.endpoints.size();
    if (svc_need <= svc_capacity_ && ep_need <= ep_capacity_) return nullptr;
    while (svc_capacity_ < svc_need) svc_capacity_ *= 2;
    while (ep_capacity_ < ep_need) ep_capacity_ *= 2;
    if (replaced_) published();  // reserved twice without a publish: nothing reads `replaced_`
    replaced_ = std::move(table_);
    table_ = std::make_unique<StatsTable>(workers_, svc_capacity_, ep_capacity_);
    // The live flows' active counts come along now, so least-connection sees them from the first
    // burst on the new table; what changes on the old one until the grace period ends is added
    // in published().
    const ActiveCounts& was = replaced_->active;
    copied_.assign(was.slots(), 0);
    for (uint32_t i = 0; i < was.slots(); ++i) {
        // Each row read once: the workers still count on the old table, and published() adds what
        // changed since exactly the values copied here.
        for (uint16_t r = 0; r < was.rows(); ++r) {
            const int32_t v = was.at(r, i);
            table_->active.set(r, i, v);
            copied_[i] += v;
        }
    }
    return table_.get();
}

void SlotRegistry::published() {
    if (!replaced_) return;
    const StatsTable& old = *replaced_;
    for (uint32_t i = 0; i < old.services.slots() && i < svc_.size(); ++i) {
        svc_[i].base += old.services.total(i);
        svc_[i].no_return_base += old.no_return.total(i).packets;
    }
    for (uint32_t i = 0; i < old.endpoints.slots(); ++i) {
        if (i < ep_.size()) ep_[i].base += old.endpoints.total(i);
        // Flows that started or ended on the old table after the copy: the control thread's row.
        const int32_t moved = old.active.total(i) - copied_[i];
        if (moved) table_->active.add(table_->active.control_row(), i, moved);
    }
    replaced_.reset();
    copied_.clear();
}

void SlotRegistry::assign(ServiceSnapshot& s) {
    generation_ = s.generation;
    for (size_t i = 0; i < s.services.size(); ++i) {
        ServicePort& sp = s.services[i];
        const ServiceInfo& info = s.info(static_cast<uint32_t>(i));
        sp.slot = service_slot(sp.id, info.name, sp.proto, sp.family);
        svc_[sp.slot].named = generation_;
        for (uint32_t e = sp.ep_first; e < sp.ep_first + sp.ep_count; ++e) {
            Endpoint& ep = s.endpoints[e];
            ep.slot = endpoint_slot(sp.slot, ep.key());
            ep_[ep.slot].named = generation_;
        }
        sp.ep_slot_first = sp.ep_count ? s.endpoints[sp.ep_first].slot : 0;
    }
    if (svc_.size() > svc_capacity_ || ep_.size() > ep_capacity_)
        throw std::logic_error("SlotRegistry::assign without reserve: the table has no room");
}

void SlotRegistry::free_service(uint32_t slot) {
    SvcSlot& s = svc_[slot];
    carried_[s.key] += service_total(slot);
    table_->services.clear(slot);
    table_->no_return.clear(slot);
    for (auto [it, end] = svc_index_.equal_range(s.id); it != end; ++it)
        if (it->second == slot) {
            svc_index_.erase(it);
            break;
        }
    s = SvcSlot{};
    svc_free_.push_back(slot);
}

void SlotRegistry::free_endpoint(uint32_t slot) {
    EpSlot& e = ep_[slot];
    table_->endpoints.clear(slot);
    ep_index_.erase(EpKey{e.service, e.ep.word()});
    --svc_[e.service].endpoints;
    e = EpSlot{};
    ep_free_.push_back(slot);
}

void SlotRegistry::reclaim(rte_rcu_qsbr* qsbr) {
    // Without readers a slot seen unused can go at once: three rounds put the unused slots in
    // limbo, free the endpoints, then the services those left without endpoints.
    for (int round = 0; round < (qsbr ? 1 : 3); ++round) reclaim_round(qsbr);
}

void SlotRegistry::reclaim_round(rte_rcu_qsbr* qsbr) {
    const uint64_t acked = qsbr ? rcu_acknowledged(qsbr) : UINT64_MAX;
    // Slots seen unused a grace period ago and unused still: no worker can count into them now.
    std::vector<Limbo> waiting;
    for (const Limbo& l : limbo_) {
        if (l.token > acked) {
            waiting.push_back(l);
            continue;
        }
        if (l.endpoint) {
            EpSlot& e = ep_[l.slot];
            e.limbo = false;
            if (e.named != generation_ && table_->active.total(l.slot) == 0) free_endpoint(l.slot);
        } else {
            SvcSlot& s = svc_[l.slot];
            s.limbo = false;
            if (s.named != generation_ && s.endpoints == 0) free_service(l.slot);
        }
    }
    limbo_ = std::move(waiting);
    // Slots unused now wait for a grace period that starts after they were seen unused: a packet
    // of a flow removed a moment ago may still be counting, and the owner decrements a flow's
    // active count just before it unlinks the flow.
    const size_t first = limbo_.size();
    for (uint32_t i = 0; i < ep_.size(); ++i) {
        EpSlot& e = ep_[i];
        if (!e.live || e.limbo || e.named == generation_ || table_->active.total(i) != 0) continue;
        e.limbo = true;
        limbo_.push_back(Limbo{true, i, 0});
    }
    for (uint32_t i = 0; i < svc_.size(); ++i) {
        SvcSlot& s = svc_[i];
        if (!s.live || s.limbo || s.named == generation_ || s.endpoints != 0) continue;
        s.limbo = true;
        limbo_.push_back(Limbo{false, i, 0});
    }
    const uint64_t token = qsbr ? rte_rcu_qsbr_start(qsbr) : 0;
    for (size_t i = first; i < limbo_.size(); ++i) limbo_[i].token = token;
}

PacketCounter SlotRegistry::service_total(uint32_t slot) const {
    PacketCounter c = svc_[slot].base;
    c += table_->services.total(slot);
    return c;
}

PacketCounter SlotRegistry::endpoint_total(uint32_t slot) const {
    PacketCounter c = ep_[slot].base;
    c += table_->endpoints.total(slot);
    return c;
}

uint64_t SlotRegistry::no_return_total(uint32_t slot) const {
    return svc_[slot].no_return_base + table_->no_return.total(slot).packets;
}

bool SlotRegistry::no_return_first_seen(uint32_t slot) {
    SvcSlot& s = svc_[slot];
    if (s.no_return_warned || no_return_total(slot) == 0) return false;
    s.no_return_warned = true;
    return true;
}

int32_t SlotRegistry::active(uint32_t endpoint_slot) const { return table_->active.total(endpoint_slot); }

const std::string& SlotRegistry::service_name(uint32_t slot) const {
    static const std::string none;
    return slot < svc_.size() ? svc_[slot].name : none;
}

}  // namespace svcgate::ctl
