// The hashing schedulers: Maglev over the whole 5-tuple, IPVS sh/dh over one address. All three
// index the set's Maglev table, so adding or removing an endpoint moves only ~1/N of the keys.
#include <cstring>

#include <rte_hash_crc.h>

#include "scheduler.h"

namespace svcgate::dp {

uint32_t MaglevScheduler::pick(const SelectCtx& c) noexcept {
    uint64_t a, b;
    std::memcpy(&a, &c.key, 8);
    std::memcpy(&b, reinterpret_cast<const uint8_t*>(&c.key) + 8, 8);
    return ring_pick(c, rte_hash_crc_8byte(b, rte_hash_crc_8byte(a, 0x1234567)));
}

uint32_t SourceHashScheduler::pick(const SelectCtx& c) noexcept {
    return ring_pick(c, rte_hash_crc_4byte(c.key.src.be, 0x1234567));
}

uint32_t DestinationHashScheduler::pick(const SelectCtx& c) noexcept {
    return ring_pick(c, rte_hash_crc_4byte(c.key.dst.be, 0x1234567));
}

}  // namespace svcgate::dp
