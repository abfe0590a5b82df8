#include "dataplane/l3/mtu.h"

#include <cstring>

#include <rte_ip.h>

#include "dataplane/base/checksum.h"
#include "dataplane/l3/reject.h"

namespace svcgate::dp {

unsigned fragment_ipv4(const rte_mbuf* m, uint16_t l2, uint16_t mtu, rte_mempool* pool, rte_mbuf** out,
                       unsigned max) noexcept {
    if (!pool || m->nb_segs != 1 || rte_pktmbuf_data_len(m) < l2 + 20u) return 0;
    const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
    const uint8_t* ip = f + l2;
    const uint16_t ihl = (ip[0] & 0x0f) * 4;
    uint16_t total, field;
    std::memcpy(&total, ip + 2, 2);
    std::memcpy(&field, ip + 6, 2);
    total = from_be16(total);
    field = from_be16(field);
    if (field & RTE_IPV4_HDR_DF_FLAG || ihl < 20 || total < ihl || l2 + total > rte_pktmbuf_data_len(m)) return 0;
    // RFC 791 3.1: only options with the copy flag go into the fragments after the first.
    uint8_t opts[40];
    uint16_t olen = 0;
    for (uint16_t o = 20; o < ihl;) {
        const uint8_t type = ip[o];
        if (type == 0) break;  // end of options
        if (type == 1) {
            ++o;
            continue;
        }  // no-operation
        const uint8_t len = o + 1 < ihl ? ip[o + 1] : 0;
        if (len < 2 || o + len > ihl) break;  // malformed: copy no more of them
        if (type & 0x80) {
            std::memcpy(opts + olen, ip + o, len);
            olen += len;
        }
        o += len;
    }
    while (olen % 4) opts[olen++] = 0;
    const uint16_t later_hl = 20 + olen;
    const uint16_t base = (field & RTE_IPV4_HDR_OFFSET_MASK) * 8;
    const bool base_mf = field & RTE_IPV4_HDR_MF_FLAG;
    const uint16_t payload = total - ihl;
    unsigned n = 0;
    for (uint32_t pos = 0; pos < payload; ++n) {
        const uint16_t hl = n == 0 ? ihl : later_hl;
        // Each fragment fits the port's MTU and one mbuf of `pool` (a jumbo packet leaving by a
        // port of a larger MTU than a 2 KB mbuf takes is cut to the mbuf).
        rte_mbuf* fm = n < max ? rte_pktmbuf_alloc(pool) : nullptr;
        const uint32_t tail = fm ? rte_pktmbuf_tailroom(fm) : 0;
        const uint32_t fits = tail > l2 ? std::min<uint32_t>(mtu, tail - l2) : 0;
        const uint32_t room = fits > hl ? (fits - hl) & ~7u : 0;
        const uint32_t len = std::min<uint32_t>(room, payload - pos);
        uint8_t* d = fm && room
            ? reinterpret_cast<uint8_t*>(rte_pktmbuf_append(fm, static_cast<uint16_t>(l2 + hl + len)))
            : nullptr;
        if (!d) {
            if (fm) rte_pktmbuf_free(fm);
            for (unsigned k = 0; k < n; ++k) rte_pktmbuf_free(out[k]);
            return 0;
        }
        std::memcpy(d, f, l2 + 20u);
        uint8_t* h = d + l2;
        if (n == 0)
            std::memcpy(h + 20, ip + 20, ihl - 20u);
        else
            std::memcpy(h + 20, opts, olen);
        h[0] = static_cast<uint8_t>(0x40 | hl / 4);
        const bool more = pos + len < payload || base_mf;
        const rte_be16_t tl = to_be16(static_cast<uint16_t>(hl + len));
        const rte_be16_t fo = to_be16(static_cast<uint16_t>(((base + pos) / 8) | (more ? RTE_IPV4_HDR_MF_FLAG : 0)));
        std::memcpy(h + 2, &tl, 2);
        std::memcpy(h + 6, &fo, 2);
        h[10] = h[11] = 0;
        const uint16_t c = inet_csum(h, hl);
        std::memcpy(h + 10, &c, 2);
        std::memcpy(h + hl, ip + ihl + pos, len);
        out[n] = fm;
        pos += len;
    }
    return n;
}

}  // namespace svcgate::dp
