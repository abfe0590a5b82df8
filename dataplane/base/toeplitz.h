// The Toeplitz hash NICs compute for RSS (Microsoft's "RSS hashing" specification, the one
// DPDK's rte_softrss and every RSS-capable NIC implement), and the tables that make it a few
// lookups. The hash is linear over XOR: hash(a ^ b) = hash(a) ^ hash(b), so it is the XOR of each
// input byte's contribution at its position, and changing one field changes the hash by that
// field's contribution alone (what a NAT needs to choose a port whose reply lands on a queue:
// "predictable RSS", rte_thash's idea).
//
// Runs on: any thread. Owns: its tables (plain values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace svcgate::dp {

// The longest key a DPDK 22.11 driver reports (ice, i40e: 52 bytes; most: 40).
inline constexpr size_t kRssKeyMax = 52;

// The reference definition, bit by bit: for every set bit i of `data` (most significant first),
// the key's 32 bits starting at bit i. The key must be at least data.size() + 4 bytes long.
uint32_t toeplitz_hash(std::span<const uint8_t> key, std::span<const uint8_t> data) noexcept;

// One byte's contribution at each of N positions under one key: hash(data) is N lookups.
template <size_t N>
struct ToeplitzTable {
    uint32_t t[N][256];

    // False (the table unset) when the key is shorter than N + 4 bytes.
    bool init(std::span<const uint8_t> key) noexcept {
        if (key.size() < N + 4) return false;
        for (size_t pos = 0; pos < N; ++pos)
            for (unsigned bit = 0; bit < 8; ++bit) {
                const uint32_t w = key_word(key, pos * 8 + bit);
                for (unsigned v = 0; v < 256; ++v)
                    if (bit == 0)
                        t[pos][v] = (v & 0x80) ? w : 0;
                    else if (v & (0x80u >> bit))
                        t[pos][v] ^= w;
            }
        return true;
    }
    uint32_t hash(const uint8_t* data) const noexcept {
        uint32_t h = 0;
        for (size_t i = 0; i < N; ++i) h ^= t[i][data[i]];
        return h;
    }
    // The contribution of a big-endian 16-bit field at byte `pos` with host value v.
    uint32_t field16(size_t pos, uint16_t v) const noexcept { return t[pos][v >> 8] ^ t[pos + 1][v & 0xff]; }

    // The key's 32 bits from bit `bit` (most significant bit of byte 0 is bit 0).
    static uint32_t key_word(std::span<const uint8_t> key, size_t bit) noexcept {
        const size_t byte = bit / 8, shift = bit % 8;
        uint64_t w = 0;
        for (size_t i = 0; i < 5; ++i) w = w << 8 | (byte + i < key.size() ? key[byte + i] : 0);
        return static_cast<uint32_t>(w >> (8 - shift));
    }
};

// Microsoft's RSS verification key: the one its verification suite's vectors use, and DPDK's and
// most NICs' default.
inline constexpr uint8_t kRssVerificationKey[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
                                                    0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
                                                    0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
                                                    0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

// RSS's input for a TCP or UDP packet, as the NIC reads it: source address, destination address,
// source port, destination port, in network byte order.
inline constexpr size_t kRssInput4 = 12, kRssInput6 = 36;
using ToeplitzTable4 = ToeplitzTable<kRssInput4>;
using ToeplitzTable6 = ToeplitzTable<kRssInput6>;

}  // namespace svcgate::dp
