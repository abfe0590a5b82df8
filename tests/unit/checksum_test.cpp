// RFC 1624 incremental updates against full recomputation, on random headers.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <rte_ip.h>

#include "dataplane/base/checksum.h"
#include "dataplane/lb/nat.h"
#include "control/trace/packet_spec.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

TEST(Checksum, AddressDeltaMatchesFullRecompute) {
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; ++i) {
        uint8_t hdr[20];
        for (auto& b : hdr) b = static_cast<uint8_t>(rng());
        hdr[10] = hdr[11] = 0;
        uint16_t c = inet_csum(hdr, 20);
        std::memcpy(hdr + 10, &c, 2);
        ASSERT_EQ(inet_csum(hdr, 20), 0);
        rte_be32_t from, to = static_cast<rte_be32_t>(rng());
        std::memcpy(&from, hdr + 12, 4);
        std::memcpy(hdr + 12, &to, 4);
        rte_be16_t inc;
        std::memcpy(&inc, hdr + 10, 2);
        inc = csum_apply(inc, csum_delta32(from, to));
        std::memcpy(hdr + 10, &inc, 2);
        ASSERT_EQ(inet_csum(hdr, 20), 0) << "iteration " << i;
    }
}

// The word-wise sum against RFC 1071's 16-bit loop, every length and alignment.
TEST(Checksum, PartialSumMatchesSixteenBitReference) {
    std::mt19937 rng(3);
    std::vector<uint8_t> buf(80);
    for (int round = 0; round < 200; ++round) {
        for (auto& b : buf) b = static_cast<uint8_t>(rng());
        if (round % 7 == 0) std::fill(buf.begin(), buf.end(), 0xff);  // carries everywhere
        const uint32_t seed = round % 3 == 0 ? 0 : rng() & 0xffffff;
        for (size_t off = 0; off < 4; ++off) {
            for (size_t len = 0; len + off <= buf.size(); ++len) {
                uint64_t ref = seed;
                for (size_t i = 0; i + 1 < len; i += 2) {
                    uint16_t w;
                    std::memcpy(&w, &buf[off + i], 2);
                    ref += w;
                }
                if (len & 1) {
                    uint16_t w = 0;
                    std::memcpy(&w, &buf[off + len - 1], 1);
                    ref += w;
                }
                while (ref >> 16) ref = (ref & 0xffff) + (ref >> 16);
                ASSERT_EQ(csum_fold(csum_partial(buf.data() + off, len, seed)), ref)
                    << "length " << len << ", offset " << off;
            }
        }
    }
}

// The parser's header check against inet_csum, at every header length (20 to 60 bytes): every
// value of the checksum field of random headers (so both of one's complement's zeros, 0x0000 and
// 0xffff, wherever they verify), all-ones and all-zero headers.
TEST(Checksum, Ipv4HeaderCheckMatchesInetCsum) {
    std::mt19937 rng(11);
    for (size_t len = 20; len <= 60; len += 4) {
        std::vector<std::vector<uint8_t>> headers(len == 20 ? 48 : 8, std::vector<uint8_t>(len));
        for (auto& h : headers)
            for (auto& b : h) b = static_cast<uint8_t>(rng());
        std::fill(headers[0].begin(), headers[0].end(), 0xff);
        std::fill(headers[1].begin(), headers[1].end(), 0);
        std::fill(headers[2].begin(), headers[2].end(), 0);
        headers[2][0] = 0x45;  // one non-zero byte: its checksum alone makes the sum 0xffff
        unsigned valid = 0;
        for (auto& h : headers) {
            for (uint32_t v = 0; v <= 0xffff; ++v) {
                h[10] = static_cast<uint8_t>(v >> 8);
                h[11] = static_cast<uint8_t>(v);
                const bool want = inet_csum(h.data(), len) == 0;
                valid += want;
                ASSERT_EQ(ipv4_header_csum_ok(h.data(), len), want) << len << " bytes, checksum field " << v;
            }
        }
        // Every header verifies for some value of its checksum field (the all-zero one at 0xffff).
        EXPECT_GE(valid, headers.size()) << len << " bytes";
    }
}

// A datagram sent without a checksum is translated without one.
TEST(Checksum, UdpZeroChecksumStaysZero) {
    auto f = ctl::build_frame(test::packet("udp 192.168.67.100:5000 > 10.96.0.10:53 len=20"));
    PacketMeta m;
    ASSERT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m), DropReason::none);
    f[m.l4_off + 6] = f[m.l4_off + 7] = 0;
    rewrite_tuple(f.data(), m,
                  FlowKey{.src = m.key.src,
                          .dst = Ip4::from_host(0x0af40202u),
                          .sport = m.key.sport,
                          .dport = rte_cpu_to_be_16(5353),
                          .proto = m.key.proto});
    EXPECT_EQ(f[m.l4_off + 6], 0);
    EXPECT_EQ(f[m.l4_off + 7], 0);
    EXPECT_EQ(inet_csum(f.data() + m.l3_off, 20), 0) << "the IP header checksum still follows";
}

TEST(Checksum, RewriteTupleKeepsEveryChecksumValid) {
    std::mt19937 rng(11);
    for (const char* proto : {"tcp", "udp", "sctp"}) {
        for (int i = 0; i < 2000; ++i) {
            auto addr = [&] {
                return fmt::format("{}.{}.{}.{}", rng() % 223 + 1, rng() % 256, rng() % 256, rng() % 256);
            };
            std::string spec = fmt::format("{} {}:{} > {}:{} len={}", proto, addr(), rng() % 65535 + 1, addr(),
                                           rng() % 65535 + 1, rng() % 200);
            auto p = test::packet(spec);
            auto f = ctl::build_frame(p);
            ASSERT_TRUE(test::checksums_verify(f)) << spec;
            PacketMeta m;
            ASSERT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m), DropReason::none);
            // Unicast addresses (1.0.0.0 - 223.255.255.255): the parser refuses martian sources.
            auto unicast = [&] { return Ip4::from_host((rng() % 223 + 1) << 24 | (rng() & 0xffffff)); };
            FlowKey to{.src = unicast(),
                       .dst = unicast(),
                       .sport = static_cast<rte_be16_t>(rng()),
                       .dport = static_cast<rte_be16_t>(rng()),
                       .proto = m.key.proto};
            rewrite_tuple(f.data(), m, to);
            const uint8_t ttl = f[m.l3_off + 8], proto = f[m.l3_off + 9];
            ASSERT_TRUE(decrement_ttl(f.data(), m));
            EXPECT_EQ(f[m.l3_off + 8], ttl - 1);
            EXPECT_EQ(f[m.l3_off + 9], proto);
            ASSERT_TRUE(test::checksums_verify(f)) << spec;
            PacketMeta after;
            ASSERT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), after), DropReason::none);
            EXPECT_EQ(after.key, to);
        }
    }
}

// route_translate folds the TTL's change into the same header checksum update as the addresses';
// the general rewrite (decrement_ttl, then rewrite_tuple) updates it twice. Both must leave the
// same bytes: on random packets, each field of the new tuple the old one's or a new value,
// checksums valid or random, a UDP checksum of zero (none) among them.
TEST(Checksum, RouteTranslateMatchesTheGeneralRewrite) {
    std::mt19937 rng(5);
    unsigned verified = 0;
    for (int i = 0; i < 20000; ++i) {
        const bool udp = rng() % 2;
        auto addr = [&] { return fmt::format("{}.{}.{}.{}", rng() % 223 + 1, rng() % 256, rng() % 256, rng() % 256); };
        const std::string spec = fmt::format("{} {}:{} > {}:{} len={}", udp ? "udp" : "tcp", addr(), rng() % 65535 + 1,
                                             addr(), rng() % 65535 + 1, rng() % 100);
        auto f = ctl::build_frame(test::packet(spec));
        PacketMeta m;
        ASSERT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m), DropReason::none) << spec;
        const unsigned csum_at = m.l4_off + (udp ? 6 : 16);
        const unsigned kind = rng() % 4;  // 0, 1: valid checksums; 2: random ones; 3: UDP none
        if (kind == 2) {
            for (unsigned at : {m.l3_off + 10u, csum_at})
                f[at] = static_cast<uint8_t>(rng()), f[at + 1] = static_cast<uint8_t>(rng());
        } else if (kind == 3 && udp) {
            f[csum_at] = f[csum_at + 1] = 0;
        }
        auto pick = [&](auto old, auto fresh) { return rng() % 2 ? old : fresh; };
        // Unicast addresses (1.0.0.0 - 223.255.255.255): checksums_verify parses the frame, and the
        // parser refuses martian sources.
        auto unicast = [&] { return Ip4::from_host((rng() % 223 + 1) << 24 | (rng() & 0xffffff)); };
        const FlowKey to{.src = pick(m.key.src, unicast()),
                         .dst = pick(m.key.dst, unicast()),
                         .sport = pick(m.key.sport, static_cast<rte_be16_t>(rng())),
                         .dport = pick(m.key.dport, static_cast<rte_be16_t>(rng())),
                         .proto = m.key.proto};
        auto general = f;
        ASSERT_TRUE(decrement_ttl(general.data(), m));
        rewrite_tuple(general.data(), m, to);
        ASSERT_TRUE(route_translate(f.data(), m, to));
        ASSERT_EQ(f, general) << spec << ", checksums of kind " << kind;
        if (kind < 2) {
            ASSERT_TRUE(test::checksums_verify(f)) << spec;
            ++verified;
        }
    }
    EXPECT_GT(verified, 8000u);
    // Every value of one port: among them the one whose translated UDP checksum computes to zero,
    // sent as 0xffff (RFC 768), which random packets meet once in 65,536.
    for (const char* spec : {"udp 10.1.2.3:5353 > 10.96.0.10:53 len=20", "tcp 10.1.2.3:40000 > 10.96.0.10:80 len=20"}) {
        const auto f = ctl::build_frame(test::packet(spec));
        PacketMeta m;
        ASSERT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m), DropReason::none);
        for (uint32_t port = 0; port < 65536; ++port) {
            FlowKey to = m.key;
            to.dst = Ip4::from_host(0x0af40204u);
            to.dport = static_cast<rte_be16_t>(port);
            auto fast = f, general = f;
            ASSERT_TRUE(decrement_ttl(general.data(), m));
            rewrite_tuple(general.data(), m, to);
            ASSERT_TRUE(route_translate(fast.data(), m, to));
            ASSERT_EQ(fast, general) << spec << ", port " << port;
        }
    }
}
