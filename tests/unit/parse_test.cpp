// One test per parse exit: each malformed class ends in its named DropReason.
#include <functional>
#include <stdexcept>

#include <gtest/gtest.h>
#include <rte_ip.h>

#include "dataplane/base/checksum.h"
#include "control/trace/packet_spec.h"
#include "dataplane/pipeline/parse.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {
std::vector<uint8_t> frame(const std::string& spec) { return ctl::build_frame(ctl::parse_packet_spec(spec)); }
DropReason parse(const std::vector<uint8_t>& f, PacketMeta* out = nullptr) {
    PacketMeta m;
    DropReason r = parse_packet(f.data(), static_cast<uint32_t>(f.size()), m);
    if (out) *out = m;
    return r;
}
void fix_ip_csum(std::vector<uint8_t>& f) {
    f[24] = f[25] = 0;
    uint16_t c = inet_csum(f.data() + 14, (f[14] & 0xf) * 4u);
    std::memcpy(&f[24], &c, 2);
}
}  // namespace

TEST(Parse, ValidTcpUdpIcmpSctp) {
    PacketMeta m;
    ASSERT_EQ(parse(frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [S]"), &m), DropReason::none);
    EXPECT_EQ(m.key.proto, 6);
    EXPECT_EQ(rte_be_to_cpu_16(m.key.sport), 1000);
    EXPECT_EQ(rte_be_to_cpu_16(m.key.dport), 80);
    EXPECT_EQ(m.tcp_flags, kSyn);
    EXPECT_EQ(m.key.src.host(), 0x0a000001u);
    EXPECT_EQ(parse(frame("udp 10.0.0.1:53 > 10.0.0.2:53")), DropReason::none);
    EXPECT_EQ(parse(frame("icmp 10.0.0.1 > 10.0.0.2")), DropReason::none);
    EXPECT_EQ(parse(frame("sctp 10.0.0.1:1 > 10.0.0.2:2")), DropReason::none);
}

// Every combination of the six flags (and the two reserved bits above them, which parse ignores):
// refused exactly when no stack would send it, whatever the parser's form of the rule.
TEST(Parse, TcpFlagCombinationsNoStackSendsAreRefused) {
    const auto tcp = frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [S]");
    for (unsigned byte = 0; byte < 256; ++byte) {
        auto f = tcp;
        f[14 + 20 + 13] = static_cast<uint8_t>(byte);
        const unsigned fl = byte & 0x3f;
        const bool bad = fl == 0 || (fl & (kSyn | kFin)) == (kSyn | kFin) || (fl & (kSyn | kRst)) == (kSyn | kRst) ||
            (fl & (kFin | kPsh | kUrg)) == (kFin | kPsh | kUrg);
        PacketMeta m;
        EXPECT_EQ(parse(f, &m), bad ? DropReason::tcp_bad_flags : DropReason::none) << "flags byte " << byte;
        EXPECT_EQ(m.tcp_flags, fl) << "flags byte " << byte;
    }
}

TEST(Parse, EachMalformedClassHasItsReason) {
    auto tcp = frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [S]");
    auto udp = frame("udp 10.0.0.1:1000 > 10.0.0.2:53");
    auto icmp = frame("icmp 10.0.0.1 > 10.0.0.2");
    struct Case {
        const char* name;
        std::vector<uint8_t> f;
        std::function<void(std::vector<uint8_t>&)> mutate;
        DropReason want;
    };
    std::vector<Case> cases = {
        {"eth truncated", tcp, [](auto& f) { f.resize(13); }, DropReason::eth_truncated},
        {"ip truncated", tcp, [](auto& f) { f.resize(14 + 19); }, DropReason::ip_truncated},
        {"version 6 in an IPv4 frame", tcp, [](auto& f) { f[14] = 0x65; }, DropReason::ip_bad_version},
        {"ihl < 5", tcp, [](auto& f) { f[14] = 0x44; }, DropReason::ip_bad_ihl},
        {"ihl past frame", tcp,
         [](auto& f) {
             f[14] = 0x4f;
             f.resize(14 + 40);
         },
         DropReason::ip_bad_ihl},
        {"total length past frame", tcp,
         [](auto& f) {
             f[16] = 0x05;
             fix_ip_csum(f);
         },
         DropReason::ip_bad_total_length},
        {"total length below header", tcp,
         [](auto& f) {
             f[16] = 0;
             f[17] = 10;
             fix_ip_csum(f);
         },
         DropReason::ip_bad_total_length},
        {"bad ip checksum", tcp, [](auto& f) { f[24] ^= 0xff; }, DropReason::ip_bad_checksum},
        {"TCP fragment at offset 8 (RFC 1858)", tcp,
         [](auto& f) {
             f[21] = 0x01;
             fix_ip_csum(f);
         },
         DropReason::frag_tiny},
        {"first fragment without the whole TCP header", tcp,
         [](auto& f) {
             f[20] = 0x20;
             f[16] = 0;
             f[17] = 36;
             fix_ip_csum(f);
         },
         DropReason::frag_tiny},
        {"fragment past 65,535 bytes", tcp,
         [](auto& f) {
             f[20] = 0x1f;
             f[21] = 0xff;
             fix_ip_csum(f);
         },
         DropReason::frag_oversize},
        {"multicast source", tcp,
         [](auto& f) {
             f[26] = 224;
             fix_ip_csum(f);
         },
         DropReason::ip_bad_source},
        {"broadcast frame", tcp, [](auto& f) { f[0] = 0xff; }, DropReason::l2_not_for_us},
        {"tcp truncated", tcp,
         [](auto& f) {
             f.resize(14 + 20 + 19);
             f[17] = 39;
             fix_ip_csum(f);
         },
         DropReason::tcp_truncated},
        {"tcp doff < 5", tcp, [](auto& f) { f[14 + 20 + 12] = 0x40; }, DropReason::tcp_bad_doff},
        {"tcp doff past payload", tcp, [](auto& f) { f[14 + 20 + 12] = 0xf0; }, DropReason::tcp_bad_doff},
        {"syn+fin", tcp, [](auto& f) { f[14 + 20 + 13] = kSyn | kFin; }, DropReason::tcp_bad_flags},
        {"null flags", tcp, [](auto& f) { f[14 + 20 + 13] = 0; }, DropReason::tcp_bad_flags},
        {"xmas flags", tcp, [](auto& f) { f[14 + 20 + 13] = kFin | kPsh | kUrg; }, DropReason::tcp_bad_flags},
        {"udp truncated", udp,
         [](auto& f) {
             f.resize(14 + 20 + 7);
             f[17] = 27;
             fix_ip_csum(f);
         },
         DropReason::udp_truncated},
        {"udp length zero", udp,
         [](auto& f) {
             f[14 + 20 + 4] = 0;
             f[14 + 20 + 5] = 0;
         },
         DropReason::udp_bad_length},
        {"udp length past payload", udp, [](auto& f) { f[14 + 20 + 5] = 200; }, DropReason::udp_bad_length},
        {"icmp truncated", icmp,
         [](auto& f) {
             f.resize(14 + 20 + 7);
             f[17] = 27;
             fix_ip_csum(f);
         },
         DropReason::icmp_truncated},
        {"IPv4 bytes under the IPv6 EtherType", tcp,
         [](auto& f) {
             f[12] = 0x86;
             f[13] = 0xdd;
         },
         DropReason::ip6_bad_version},
        {"unknown ethertype", tcp,
         [](auto& f) {
             f[12] = 0x88;
             f[13] = 0xb5;
         },
         DropReason::ethertype_unknown},
        {"arp truncated", tcp,
         [](auto& f) {
             f[12] = 0x08;
             f[13] = 0x06;
             f.resize(14 + 27);
         },
         DropReason::arp_truncated},
        {"qinq outer tag", tcp,
         [](auto& f) {
             f[12] = 0x88;
             f[13] = 0xa8;
         },
         DropReason::vlan_stacked},
    };
    for (auto& c : cases) {
        auto f = c.f;
        c.mutate(f);
        EXPECT_EQ(parse(f), c.want) << c.name << ": got " << drop_reason_name(parse(f));
    }
}

TEST(Parse, OneVlanTagAllowedTwoRefused) {
    auto f = frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [S]");
    std::vector<uint8_t> tagged(f.begin(), f.begin() + 12);
    tagged.insert(tagged.end(), {0x81, 0x00, 0x00, 0x05});
    tagged.insert(tagged.end(), f.begin() + 12, f.end());
    PacketMeta m;
    ASSERT_EQ(parse(tagged, &m), DropReason::none);
    EXPECT_EQ(m.l3_off, 18);
    EXPECT_EQ(rte_be_to_cpu_16(m.key.dport), 80);
    std::vector<uint8_t> twice(tagged.begin(), tagged.begin() + 16);
    twice.insert(twice.end(), {0x81, 0x00, 0x00, 0x06});
    twice.insert(twice.end(), tagged.begin() + 16, tagged.end());
    EXPECT_EQ(parse(twice), DropReason::vlan_stacked);
    tagged.resize(16);
    EXPECT_EQ(parse(tagged), DropReason::vlan_truncated);
}

TEST(PacketSpec, BadNumbersAreReadableErrors) {
    for (const char* bad : {"tcp 1.1.1.1:1 > 2.2.2.2:2 [S] ttl=300", "tcp 1.1.1.1:1 > 2.2.2.2:2 len=99999999999999",
                            "tcp 1.1.1.1:1 > 2.2.2.2:70000", "tcp 1.1.1.1:x > 2.2.2.2:2", "gre 1.1.1.1 > 2.2.2.2"})
        EXPECT_THROW(ctl::parse_packet_spec(bad), std::invalid_argument) << bad;
    EXPECT_EQ(ctl::parse_packet_spec("tcp 1.1.1.1:1 > 2.2.2.2:2 ttl=255").ttl, 255);
}

TEST(Parse, EveryPrefixOfAFrameIsHandled) {
    // Truncation anywhere ends in a reason. (Out-of-bounds reads would need ASan to be seen;
    // tools/test does not build with sanitizers yet.)
    auto f = frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [S] len=20");
    for (size_t n = 0; n < f.size(); ++n) {
        std::vector<uint8_t> cut(f.begin(), f.begin() + n);
        EXPECT_NE(parse(cut), DropReason::none) << "prefix of " << n << " bytes";
    }
}
