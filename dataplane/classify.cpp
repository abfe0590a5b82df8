#include "classify.h"

#include <rte_prefetch.h>

namespace svcgate::dp {

namespace {

// What a packet of no flow is when it hit no VIP.
void classify_other(const ServiceSnapshot& s, PacketState& p) noexcept {
    if ((p.local & kClusterIp) && s.cluster.reject_unknown_port)
        p.set(Verdict::reject, DropReason::reject_unknown_port);
    else if (p.local & (kPortAddr | kNodeAddr))
        p.set(Verdict::local);
    else if (s.in(s.cluster.service_cidrs, p.meta.key.dst))
        p.set(Verdict::drop, DropReason::service_cidr_unallocated);
    else
        p.set(Verdict::forward);
}

}  // namespace

void classify_burst(Burst& b, WorkerCtx& ctx) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    // With many Services the VIP table is far larger than the cache: the burst's slots first.
    for (const uint16_t i : b.misses) {
        const FlowKey& k = b.pkt[i].meta.key;
        s.vips.prefetch(VipTable::key(k.dst, k.dport, k.proto));
        s.local_addrs.prefetch(k.dst.be);
    }
    for (const uint16_t i : b.misses) {
        PacketState& p = b.pkt[i];
        const FlowKey& k = p.meta.key;
        // KUBE-SERVICES: (VIP, port, proto), then KUBE-NODEPORTS on the NodePort addresses.
        p.vip = s.vips.find(VipTable::key(k.dst, k.dport, k.proto));
        p.local = s.local_flags(k.dst);
        if (!p.vip.hit() && (p.local & kNodePortAddr)) p.vip = s.vips.find(VipTable::key(Ip4{}, k.dport, k.proto));
        if (!p.vip.hit()) {
            classify_other(s, p);
            continue;
        }
        // RFC 1812 5.3.1 before conntrack: a packet that cannot be forwarded starts no flow.
        if (rte_pktmbuf_mtod(b.mbufs[i], const uint8_t*)[p.meta.l3_off + 8] <= 1) {
            p.set(Verdict::drop, DropReason::ip_ttl_exceeded);
            continue;
        }
        b.vip_hits.push(i);
        rte_prefetch0(&s.services[p.vip.service()]);
    }
}

}  // namespace svcgate::dp
