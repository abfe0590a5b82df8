// The two address families as types: what a stage needs to know to run the same code over IPv4
// or IPv6 packets (the tuple, the flow table, the snapshot's tables, the header's offsets). The
// stages from lookup to insert are templates over V4 and V6, instantiated once each: IPv4 pays
// nothing for IPv6 being there, and the two cannot drift apart (VPP writes ip4 and ip6 nodes
// from one template for the same reason).
//
// Runs on: any thread. Owns: nothing.
#pragma once

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

struct V4 {
    static constexpr Family family = Family::v4;
    using Addr = Ip4;
    using Key = FlowKey;
    using Table = FlowTable;
    using Init = FlowInit;
    using Hop = NextHop;
    static constexpr uint32_t kIdBit = 0;  // remove_gone_flow's family bit

    static Key& key(PacketMeta& m) noexcept { return m.key; }
    static const Key& key(const PacketMeta& m) noexcept { return m.key; }
    static const Key& err_key(const PacketMeta& m) noexcept { return m.err_key; }
    static Key& out(PacketState& p) noexcept { return p.out; }
    static const Key& out(const PacketState& p) noexcept { return p.out; }
    static Addr& next_hop(PacketState& p) noexcept { return p.next_hop; }
    static Table* table(const WorkerCtx& c) noexcept { return c.flows; }
    static HopCache<Ip4>& hops(WorkerCtx& c) noexcept { return c.hops; }
    static IndexList& flows(Burst& b) noexcept { return b.flows; }
    static BasicNewFlow<Key>* new_flows(Burst& b) noexcept { return b.new_flow; }
    static const VipTable& vips(const ServiceSnapshot& s) noexcept { return s.vips; }
    static auto vip_key(const Addr& a, rte_be16_t port, uint8_t proto) noexcept {
        return VipTable::key(a, port, proto);
    }
    static void prefetch_local(const ServiceSnapshot& s, const Addr& a) noexcept { s.local_addrs.prefetch(a.be); }
    static CidrRange cluster_cidrs(const ClusterSettings& c) noexcept { return c.cluster_cidrs; }
    static CidrRange service_cidrs(const ClusterSettings& c) noexcept { return c.service_cidrs; }
    static Addr addr(const IpAddr& a) noexcept { return a.v4(); }
    static uint8_t hop_limit(const uint8_t* ip) noexcept { return ip[8]; }  // the TTL
    // Affinity records: (client, service port id) under a protocol no wire carries.
    static Key affinity_key(const Addr& client, uint32_t svc_id, uint8_t proto) noexcept {
        return Key{.src = client, .dst = Ip4{svc_id}, .proto = proto};
    }
};

struct V6 {
    static constexpr Family family = Family::v6;
    using Addr = Ip6;
    using Key = FlowKey6;
    using Table = FlowTable6;
    using Init = FlowInit6;
    using Hop = NextHop6;
    static constexpr uint32_t kIdBit = kFlowIdV6;

    static Key& key(PacketMeta& m) noexcept { return m.key6; }
    static const Key& key(const PacketMeta& m) noexcept { return m.key6; }
    static const Key& err_key(const PacketMeta& m) noexcept { return m.err_key6; }
    static Key& out(PacketState& p) noexcept { return p.out6; }
    static const Key& out(const PacketState& p) noexcept { return p.out6; }
    static Addr& next_hop(PacketState& p) noexcept { return p.next_hop6; }
    static Table* table(const WorkerCtx& c) noexcept { return c.flows6; }
    static HopCache<Ip6>& hops(WorkerCtx& c) noexcept { return c.hops6; }
    static IndexList& flows(Burst& b) noexcept { return b.flows6; }
    static BasicNewFlow<Key>* new_flows(Burst& b) noexcept { return b.new_flow6; }
    static const VipTable6& vips(const ServiceSnapshot& s) noexcept { return s.vips6; }
    static auto vip_key(const Addr& a, rte_be16_t port, uint8_t proto) noexcept {
        return VipTable6::key(a, port, proto);
    }
    static void prefetch_local(const ServiceSnapshot& s, const Addr& a) noexcept {
        s.local_addrs6.prefetch(StaticHash6::Key{a, 0});
    }
    static CidrRange cluster_cidrs(const ClusterSettings& c) noexcept { return c.cluster_cidrs6; }
    static CidrRange service_cidrs(const ClusterSettings& c) noexcept { return c.service_cidrs6; }
    static Addr addr(const IpAddr& a) noexcept { return a.v6(); }
    static uint8_t hop_limit(const uint8_t* ip) noexcept { return ip[7]; }
    static Key affinity_key(const Addr& client, uint32_t svc_id, uint8_t proto) noexcept {
        Key k{.src = client, .dst = {}, .proto = proto};
        std::memcpy(k.dst.b, &svc_id, 4);
        return k;
    }
};

}  // namespace svcgate::dp
