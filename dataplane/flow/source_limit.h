// Per-source admission of new flows: a cap on the flows one source address may start per second
// on one worker (dataplane.flow_table.new_flows_per_source; 0 = no cap), against a flood from few
// sources that would otherwise keep the embryonic reserve churning. Random-source floods are the
// early drop's job (flow_table.h).
//
// A count-min sketch: two rows of 16-bit counters indexed by two halves of one CRC of the
// address, cleared when the second changes; a source is refused once both its counters reach the
// cap. Colliding sources can only make a count larger, never smaller: a source under the cap can
// be refused only when another source on both of its counters is busy too (2^-24 per pair).
//
// Runs on: one worker (its own WorkerCtx). No sharing, no atomics.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include <rte_hash_crc.h>

#include "dataplane/base/types.h"

namespace svcgate::dp {

class SourceLimiter {
public:
    static constexpr uint32_t kMaxLimit = 0xffff;

    // True when `src` may start one more flow in second `now` (and counts it). An IPv6 source
    // counts by its /64: one host holds a whole /64 (SLAAC, privacy addresses), and a cap per
    // address would cap nothing.
    bool admit(Ip4 src, uint32_t now, uint32_t limit) noexcept {
        return limit == 0 || admit_hash(rte_hash_crc_4byte(src.be, 0x5bd1e995u), now, limit);
    }
    bool admit(const Ip6& src, uint32_t now, uint32_t limit) noexcept {
        uint64_t prefix;
        std::memcpy(&prefix, src.b, 8);
        return limit == 0 || admit_hash(rte_hash_crc_8byte(prefix, 0x5bd1e995u), now, limit);
    }

private:
    bool admit_hash(uint32_t h, uint32_t now, uint32_t limit) noexcept {
        if (now != second_) {
            for (auto& row : rows_) row.fill(0);
            second_ = now;
        }
        uint16_t& a = rows_[0][h & kMask];
        uint16_t& b = rows_[1][(h >> kBits) & kMask];
        if (std::min(a, b) >= limit) return false;
        a = static_cast<uint16_t>(a + (a < kMaxLimit));
        b = static_cast<uint16_t>(b + (b < kMaxLimit));
        return true;
    }

    static constexpr unsigned kBits = 12;
    static constexpr uint32_t kMask = (1u << kBits) - 1;
    std::array<std::array<uint16_t, 1u << kBits>, 2> rows_{};
    uint32_t second_ = 0;
};

}  // namespace svcgate::dp
