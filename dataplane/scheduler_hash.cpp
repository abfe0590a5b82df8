// The hashing schedulers: Maglev over the whole 5-tuple, IPVS sh/dh over one address. All three
// index the set's Maglev table, so adding or removing an endpoint moves only ~1/N of the keys.
#include <cstring>

#include <rte_hash_crc.h>

#include "scheduler.h"
#include "static_hash.h"

namespace svcgate::dp {

namespace {
constexpr uint32_t kSeed = 0x1234567;
}

uint32_t MaglevScheduler::pick(const SelectCtx& c) noexcept {
    if (c.key6) return ring_pick(c, crc32c_bytes(c.key6, sizeof(FlowKey6), kSeed));
    uint64_t a, b;
    std::memcpy(&a, c.key, 8);
    std::memcpy(&b, reinterpret_cast<const uint8_t*>(c.key) + 8, 8);
    return ring_pick(c, rte_hash_crc_8byte(b, rte_hash_crc_8byte(a, kSeed)));
}

uint32_t SourceHashScheduler::pick(const SelectCtx& c) noexcept {
    if (c.key6) return ring_pick(c, crc32c_bytes(c.key6->src.b, 16, kSeed));
    return ring_pick(c, rte_hash_crc_4byte(c.key->src.be, kSeed));
}

uint32_t DestinationHashScheduler::pick(const SelectCtx& c) noexcept {
    if (c.key6) return ring_pick(c, crc32c_bytes(c.key6->dst.b, 16, kSeed));
    return ring_pick(c, rte_hash_crc_4byte(c.key->dst.be, kSeed));
}

}  // namespace svcgate::dp
