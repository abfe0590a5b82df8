// The hashing schedulers: Maglev over the whole 5-tuple, IPVS sh/dh over one address. All three
// index the set's Maglev table, so adding or removing an endpoint moves only ~1/N of the keys.
#include <cstring>

#include <rte_hash_crc.h>

#include "dataplane/lb/scheduler.h"
#include "dataplane/base/static_hash.h"

namespace svcgate::dp {

namespace {
constexpr uint32_t kSeed = 0x1234567;

// The tuple hash's seed: ours, and the cluster's (cluster.maglev_seed), the same on every gateway.
uint32_t seed(const SelectCtx& c) noexcept { return kSeed ^ c.snap.cluster.maglev_seed; }
}  // namespace

uint32_t MaglevScheduler::pick(const SelectCtx& c) noexcept {
    if (c.key6) return ring_pick(c, crc32c_bytes(c.key6, sizeof(FlowKey6), seed(c)));
    uint64_t a, b;
    std::memcpy(&a, c.key, 8);
    std::memcpy(&b, reinterpret_cast<const uint8_t*>(c.key) + 8, 8);
    return ring_pick(c, rte_hash_crc_8byte(b, rte_hash_crc_8byte(a, seed(c))));
}

uint32_t SourceHashScheduler::pick(const SelectCtx& c) noexcept {
    if (c.key6) return ring_pick(c, crc32c_bytes(c.key6->src.b, 16, seed(c)));
    return ring_pick(c, rte_hash_crc_4byte(c.key->src.be, seed(c)));
}

uint32_t DestinationHashScheduler::pick(const SelectCtx& c) noexcept {
    if (c.key6) return ring_pick(c, crc32c_bytes(c.key6->dst.b, 16, seed(c)));
    return ring_pick(c, rte_hash_crc_4byte(c.key->dst.be, seed(c)));
}

}  // namespace svcgate::dp
