#include "dataplane/pipeline/classify.h"

#include <rte_prefetch.h>

#include "dataplane/pipeline/family.h"

namespace svcgate::dp {

namespace {

// What a packet of no flow is when it hit no VIP.
template <typename F>
void classify_other(const ServiceSnapshot& s, PacketState& p) noexcept {
    if ((p.local & kClusterIp) && s.cluster.reject_unknown_port)
        p.set(Verdict::reject, DropReason::reject_unknown_port);
    else if (p.local & (kPortAddr | kNodeAddr))
        p.set(Verdict::local);
    else if (s.in(F::service_cidrs(s.cluster), F::key(p.meta).dst))
        p.set(Verdict::drop, DropReason::service_cidr_unallocated);
    else
        p.set(Verdict::forward);
}

}  // namespace

template <typename F>
void classify_burst(Burst& b, WorkerCtx& ctx) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    const auto& vips = F::vips(s);
    // With many Services the VIP and local-address tables are far larger than the cache, and every
    // line a new flow touches there takes from the misses a burst can overlap: the burst's VIP
    // slots first; the local addresses only for what hit no VIP (a ClusterIP's own flags matter
    // only when its port is not served), in a pass of their own.
    for (const uint16_t i : b.misses) {
        const auto& k = F::key(b.pkt[i].meta);
        vips.prefetch(F::vip_key(k.dst, k.dport, k.proto));
    }
    IndexList other;
    auto hit = [&](uint16_t i, PacketState& p) {
        // RFC 1812 5.3.1 / RFC 8200 3 before conntrack: a packet that cannot be forwarded starts no flow.
        if (F::hop_limit(rte_pktmbuf_mtod(b.mbufs[i], const uint8_t*) + p.meta.l3_off) <= 1)
            return p.set(Verdict::drop, DropReason::ip_ttl_exceeded);
        b.vip_hits.push(i);
        rte_prefetch0(&s.services[p.vip.service()]);
    };
    for (const uint16_t i : b.misses) {
        PacketState& p = b.pkt[i];
        const auto& k = F::key(p.meta);
        // KUBE-SERVICES: (VIP, port, proto); then, on the NodePort addresses, KUBE-NODEPORTS.
        p.vip = vips.find(F::vip_key(k.dst, k.dport, k.proto));
        p.local = 0;
        if (p.vip.hit()) {
            hit(i, p);
        } else {
            F::prefetch_local(s, k.dst);
            other.push(i);
        }
    }
    for (const uint16_t i : other) {
        PacketState& p = b.pkt[i];
        const auto& k = F::key(p.meta);
        p.local = s.local_flags(k.dst);
        if (p.local & kNodePortAddr) p.vip = vips.find(F::vip_key({}, k.dport, k.proto));
        if (p.vip.hit()) {
            hit(i, p);
            continue;
        }
        classify_other<F>(s, p);
        // A reply to a preserved client before its flow's replica: held (replica_hold.h), the
        // later stages skip it; dropped under its reason when the hold is full. Not a fragment:
        // the ones after it would follow its verdict.
        if (p.verdict == Verdict::forward && ctx.sync && !p.meta.is_fragment() &&
            s.preserved_endpoint(k.src, k.sport, k.proto)) [[unlikely]] {
            p.set(Verdict::drop, DropReason::reply_awaits_replica);  // counted only when not held
            if (replica_hold_park(ctx, b.mbufs[i], b.in_port, p.meta)) b.mbufs[i] = nullptr;
        }
    }
}

template <typename F>
void prefetch_service_ports(const ServiceSnapshot& s, const typename F::Key* const* keys, unsigned n) noexcept {
    const auto& vips = F::vips(s);
    for (unsigned j = 0; j < n; ++j) {
        const VipEntry e = vips.find(F::vip_key(keys[j]->dst, keys[j]->dport, keys[j]->proto));
        if (e.hit()) rte_prefetch0(&s.services[e.service()]);
    }
}

template void prefetch_service_ports<V4>(const ServiceSnapshot&, const FlowKey* const*, unsigned) noexcept;
template void prefetch_service_ports<V6>(const ServiceSnapshot&, const FlowKey6* const*, unsigned) noexcept;
template void classify_burst<V4>(Burst&, WorkerCtx&) noexcept;
template void classify_burst<V6>(Burst&, WorkerCtx&) noexcept;

}  // namespace svcgate::dp
