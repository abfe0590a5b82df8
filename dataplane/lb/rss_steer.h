// A port's RSS as the masquerade sees it: which receive queue the replies of a flow reach, and
// the masquerade port that brings them to a given queue. With RSS a NIC hashes a packet's
// addresses and ports (Toeplitz, the port's key) and indexes its redirection table (RETA) with
// the hash's low bits. A masqueraded flow's reply is (endpoint, masquerade address, endpoint
// port, masquerade port): the masquerade port is ours to choose, and its contribution to the hash
// is its own (toeplitz.h), so a worker can pick one whose reply lands on its own queue, and both
// directions of the connection stay on one core.
//
// Built by the control thread from what the driver reports (rte_eth_dev_rss_hash_conf_get,
// rte_eth_dev_rss_reta_query); read by the workers. Runs on: any thread. Owns: plain tables.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/base/toeplitz.h"
#include "dataplane/base/types.h"

namespace svcgate::dp {

struct RssSteer {
    static constexpr uint32_t kRetaMax = 2048;  // the largest RETA a DPDK 22.11 driver has (ice)

    ToeplitzTable4 t4;
    ToeplitzTable6 t6;
    uint16_t reta[kRetaMax] = {};
    uint32_t reta_mask = 0;  // RETA size - 1 (sizes are powers of two)
    // Which flows the port hashes with their ports (RTE_ETH_RSS_NONFRAG_IPV4_TCP and kin): only
    // those can be steered.
    bool tcp4 = false, udp4 = false, tcp6 = false, udp6 = false;

    uint16_t queue(uint32_t hash) const noexcept { return reta[hash & reta_mask]; }

    // A port as DPDK sets one up by default: `key`, a RETA of `size` entries (a power of two)
    // spread round robin over `queues`, TCP and UDP hashed with their ports in both families.
    // False when the key is too short for IPv6 or the size is not one.
    bool set_default(std::span<const uint8_t> key, uint32_t size, uint16_t queues) noexcept {
        if (size == 0 || size > kRetaMax || (size & (size - 1)) || queues == 0 || !t4.init(key) || !t6.init(key))
            return false;
        reta_mask = size - 1;
        for (uint32_t i = 0; i < size; ++i) reta[i] = static_cast<uint16_t>(i % queues);
        tcp4 = udp4 = tcp6 = udp6 = true;
        return true;
    }

    // The reply's hash with destination port 0, and a destination port's contribution: the hash
    // of the reply with port p is base ^ port(p). Proto: IPPROTO_TCP or IPPROTO_UDP.
    bool hashes(Family f, uint8_t proto) const noexcept {
        if (proto == 6) return f == Family::v4 ? tcp4 : tcp6;
        if (proto == 17) return f == Family::v4 ? udp4 : udp6;
        return false;
    }
    uint32_t base(const Ip4& src, const Ip4& dst, uint16_t sport_be) const noexcept {
        uint8_t in[kRssInput4] = {};
        std::memcpy(in, &src.be, 4);
        std::memcpy(in + 4, &dst.be, 4);
        std::memcpy(in + 8, &sport_be, 2);
        return t4.hash(in);
    }
    uint32_t base(const Ip6& src, const Ip6& dst, uint16_t sport_be) const noexcept {
        uint8_t in[kRssInput6] = {};
        std::memcpy(in, src.b, 16);
        std::memcpy(in + 16, dst.b, 16);
        std::memcpy(in + 32, &sport_be, 2);
        return t6.hash(in);
    }
    uint32_t port(Family f, uint16_t host_port) const noexcept {
        return f == Family::v4 ? t4.field16(10, host_port) : t6.field16(34, host_port);
    }

    // The first port of [min, max] from `cursor` on (wrapping; the cursor moves past each port
    // tried) whose reply, hashed base ^ port(p), lands on `q`; 0 when none within `tries`.
    uint16_t find_port(Family f, uint32_t base, uint16_t q, uint16_t min, uint16_t max, uint32_t& cursor,
                       unsigned tries) const noexcept {
        const uint32_t span = uint32_t{max} - min + 1;
        for (unsigned i = 0; i < tries; ++i) {
            const auto p = static_cast<uint16_t>(min + cursor++ % span);
            if (queue(base ^ port(f, p)) == q) return p;
        }
        return 0;
    }
};

}  // namespace svcgate::dp
