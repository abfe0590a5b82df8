#include "dataplane/pipeline/vlan.h"

#include <algorithm>
#include <cstring>

#include <rte_byteorder.h>
#include <rte_ether.h>

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::dp {

namespace {

inline uint16_t be16_at(const uint8_t* p) noexcept { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// A received frame's bytes as its port counts them: without its tag, as the kernel counts a VLAN
// device's.
inline uint32_t port_bytes(const rte_mbuf* m) noexcept {
    return m->pkt_len - (vlan_tagged(rte_pktmbuf_mtod(m, const uint8_t*)) ? sizeof(rte_vlan_hdr) : 0);
}

}  // namespace

uint16_t vlan_receive(const VlanMap& map, rte_mbuf* m, DropReason& why) noexcept {
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    const uint32_t len = rte_pktmbuf_data_len(m);
    if (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) {  // a NIC that took the tag off already
        m->ol_flags &= ~(RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_VLAN);
        if (len >= sizeof(rte_ether_hdr) &&
            (be16_at(f + 12) == RTE_ETHER_TYPE_VLAN || be16_at(f + 12) == RTE_ETHER_TYPE_QINQ)) {
            why = DropReason::vlan_stacked;  // a second tag under the one taken: not ours to pass
            return kNoPort;
        }
        const uint16_t p = map.port[m->vlan_tci & 0xfff];
        if (p == kNoPort) why = DropReason::vlan_unknown;
        return p;
    }
    if (len < sizeof(rte_ether_hdr)) {
        why = DropReason::eth_truncated;
        return kNoPort;
    }
    const uint16_t type = be16_at(f + 12);
    if (type == RTE_ETHER_TYPE_QINQ) {
        why = DropReason::vlan_stacked;
        return kNoPort;
    }
    if (type != RTE_ETHER_TYPE_VLAN) {
        if (map.port[0] == kNoPort) why = DropReason::vlan_unknown;
        return map.port[0];
    }
    if (len < sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr)) {
        why = DropReason::vlan_truncated;
        return kNoPort;
    }
    const uint16_t inner = be16_at(f + 16);
    if (inner == RTE_ETHER_TYPE_VLAN || inner == RTE_ETHER_TYPE_QINQ) {
        why = DropReason::vlan_stacked;
        return kNoPort;
    }
    const uint16_t p = map.port[be16_at(f + 14) & 0xfff];
    if (p == kNoPort) why = DropReason::vlan_unknown;
    return p;  // the tag stays on: the parser reads past it (vlan.h)
}

namespace {

// The usual burst of a trunk: every frame tagged alike (the first frame's TPID and TCI, in one
// 4-byte word), none by a NIC that took its tag off. Its port, and the frames' bytes, or kNoPort
// for any other burst (vlan_burst then takes frame by frame). A stacked tag under the first is
// the parser's to refuse (vlan_stacked).
[[gnu::always_inline]] inline uint16_t one_vlan(const Burst& b, const VlanMap& map, uint16_t n,
                                                uint64_t& bytes) noexcept {
    uint32_t tag0;
    if (rte_pktmbuf_data_len(b.mbufs[0]) < sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr)) return kNoPort;
    std::memcpy(&tag0, rte_pktmbuf_mtod(b.mbufs[0], const uint8_t*) + 12, 4);
    bool alike = true;
    uint64_t flags = 0, sum = 0;
    for (uint16_t i = 0; i < n; ++i) {
        const rte_mbuf* m = b.mbufs[i];
        uint32_t tag;
        std::memcpy(&tag, rte_pktmbuf_mtod(m, const uint8_t*) + 12, 4);
        alike &= tag == tag0 && rte_pktmbuf_data_len(m) >= sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr);
        flags |= m->ol_flags;
        sum += m->pkt_len;
    }
    if (!alike || (flags & RTE_MBUF_F_RX_VLAN_STRIPPED) || (tag0 & 0xffff) != RTE_BE16(RTE_ETHER_TYPE_VLAN))
        return kNoPort;
    bytes = sum - uint64_t{n} * sizeof(rte_vlan_hdr);
    return map.port[rte_be_to_cpu_16(static_cast<uint16_t>(tag0 >> 16)) & 0xfff];
}

}  // namespace

void vlan_burst(Burst& b, WorkerCtx& ctx, const VlanMap& map, uint16_t n, PortSoftCounters* ports) noexcept {
    if (n == 0) return;
    uint64_t one_bytes = 0;
    if (const uint16_t p = one_vlan(b, map, n, one_bytes); p != kNoPort) [[likely]] {
        if (ports) ports[p].rx_packets += n, ports[p].rx_bytes += one_bytes;
        b.start(n, p, b.trace);
        b.tags_checked = true;
        process_burst(b, ctx);
        return;
    }
    uint16_t port[kBurst];
    uint16_t kept = 0;
    bool one_port = true;
    uint64_t bytes = 0;  // of the frames kept: the ports' counts, once a burst when it is one port's
    for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf* m = b.mbufs[i];
        DropReason why = DropReason::none;
        const uint16_t p = vlan_receive(map, m, why);
        if (p == kNoPort) {
            ++ctx.counters.rx_packets;
            ctx.counters.rx_bytes += m->pkt_len;
            ++ctx.counters.drops[static_cast<unsigned>(why)];
            rte_pktmbuf_free(m);
            continue;
        }
        bytes += port_bytes(m);
        one_port &= kept == 0 || p == port[0];
        b.mbufs[kept] = m;  // kept <= i: compacted in place
        port[kept++] = p;
    }
    if (one_port) {  // the usual burst: one VLAN's frames, as they are
        if (kept) {
            if (ports) ports[port[0]].rx_packets += kept, ports[port[0]].rx_bytes += bytes;
            b.start(kept, port[0], b.trace);
            b.tags_checked = true;
            process_burst(b, ctx);
        }
        return;
    }
    if (ports)
        for (uint16_t i = 0; i < kept; ++i)
            ++ports[port[i]].rx_packets, ports[port[i]].rx_bytes += port_bytes(b.mbufs[i]);
    // One sub-burst per port, in the order of their first frames; each frame in its arrival order.
    rte_mbuf* in[kBurst];
    std::copy(b.mbufs, b.mbufs + kept, in);
    for (uint16_t first = 0; first < kept;) {
        const uint16_t p = port[first];
        uint16_t k = 0, next = kept;
        for (uint16_t i = first; i < kept; ++i) {
            if (port[i] == p) {
                b.mbufs[k++] = in[i];
                port[i] = kNoPort;
            } else if (port[i] != kNoPort && next == kept) {
                next = i;
            }
        }
        b.start(k, p, b.trace);
        b.tags_checked = true;
        process_burst(b, ctx);
        first = next;
    }
}

}  // namespace svcgate::dp
