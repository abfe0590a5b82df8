// One test per parse exit: each malformed class ends in its named DropReason.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "dataplane/base/checksum.h"
#include "control/trace/packet_spec.h"
#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/parse.h"
#include "dataplane/pipeline/parse_stage.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {
std::vector<uint8_t> frame(const std::string& spec) { return ctl::build_frame(test::packet(spec)); }
DropReason parse(const std::vector<uint8_t>& f, PacketMeta* out = nullptr) {
    PacketMeta m;
    DropReason r = parse_packet(f.data(), static_cast<uint32_t>(f.size()), m);
    if (out) *out = m;
    return r;
}
void fix_ip_csum(std::vector<uint8_t>& f, size_t l3 = 14) {
    f[l3 + 10] = f[l3 + 11] = 0;
    uint16_t c = inet_csum(f.data() + l3, (f[l3] & 0xf) * 4u);
    std::memcpy(&f[l3 + 10], &c, 2);
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

// The parser sees a port's frames untagged (vlan.h takes a VLAN port's tag off before): a
// priority tag (VLAN ID 0) is parsed through, any other ID is one no port has.
TEST(Parse, PriorityTagParsedVlanIdUnknownTwoTagsRefused) {
    auto f = frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [S]");
    std::vector<uint8_t> tagged(f.begin(), f.begin() + 12);
    tagged.insert(tagged.end(), {0x81, 0x00, 0xa0, 0x00});  // PCP 5, VLAN ID 0
    tagged.insert(tagged.end(), f.begin() + 12, f.end());
    PacketMeta m;
    ASSERT_EQ(parse(tagged, &m), DropReason::none);
    EXPECT_EQ(m.l3_off, 18);
    EXPECT_EQ(rte_be_to_cpu_16(m.key.dport), 80);
    auto with_id = tagged;
    with_id[15] = 0x05;
    EXPECT_EQ(parse(with_id), DropReason::vlan_unknown);
    std::vector<uint8_t> twice(tagged.begin(), tagged.begin() + 16);
    twice.insert(twice.end(), {0x81, 0x00, 0x00, 0x06});
    twice.insert(twice.end(), tagged.begin() + 16, tagged.end());
    EXPECT_EQ(parse(twice), DropReason::vlan_stacked);
    tagged.resize(16);
    EXPECT_EQ(parse(tagged), DropReason::vlan_truncated);
}

TEST(PacketSpec, BadNumbersAreReadableErrors) {
    for (const char* bad : {"tcp 1.1.1.1:1 > 2.2.2.2:2 [S] ttl=300", "tcp 1.1.1.1:1 > 2.2.2.2:2 len=99999999999999",
                            "tcp 1.1.1.1:1 > 2.2.2.2:70000", "tcp 1.1.1.1:x > 2.2.2.2:2", "gre 1.1.1.1 > 2.2.2.2"}) {
        ctl::PacketSpec p;
        const ctl::Status s = ctl::parse_packet_spec(bad, p);
        EXPECT_FALSE(s.ok()) << bad;
        EXPECT_NE(s.error().find(bad), std::string::npos) << "names the spec: " << s.error();
    }
    EXPECT_EQ(test::packet("tcp 1.1.1.1:1 > 2.2.2.2:2 ttl=255").ttl, 255);
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

// The parse stage (parse_burst) decides the common frame (IPv4 or IPv6, untagged or with a tag the
// dispatch checked, TCP or UDP, no options, no fragment) on a fast path of its own and sends every
// other frame to the full parser. The two must agree: for frames with random bytes of their
// headers changed (half of them with the IPv4 checksum made good again, so that the change
// reaches the checks behind it), cut short or padded, tagged or not, and with every checksum
// offload flag, the stage's meta and reason are parse_packet's.
TEST(ParseBurst, FastPathAgreesWithTheFullParserOnMutatedFrames) {
    test::ensure_eal();
    auto t = test::tracer(test::gateway_config("  []"));
    std::mt19937 rng(7);
    const std::vector<std::vector<uint8_t>> bases = {
        frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [.]"),
        frame("tcp 10.0.0.1:1000 > 10.0.0.2:80 [S] len=20"),
        frame("tcp 192.168.1.7:40000 > 10.96.0.10:443 [P.] len=100"),
        frame("udp 10.0.0.1:53 > 10.0.0.2:53 len=30"),
        frame("udp 172.16.0.1:5000 > 10.96.0.20:53"),
        frame("icmp 10.0.0.1 > 10.0.0.2"),
        frame("sctp 10.0.0.1:1 > 10.0.0.2:2"),
        frame("tcp [fd00:67::100]:40000 > [fd00:96::10]:443 [.]"),
        frame("tcp [2001:db8::7]:1000 > [fd00::2]:80 [S] len=20"),
        frame("udp [fd00:67::100]:5353 > [fd00:96::20]:53 len=30"),
    };
    // Addresses of the classes the parser refuses or keeps to the link, by family.
    const std::vector<std::vector<uint8_t>> special4 = {
        {0, 1, 2, 3}, {224, 0, 0, 1}, {255, 255, 255, 255}, {127, 0, 0, 1}};
    const std::vector<std::vector<uint8_t>> special6 = {std::vector<uint8_t>(16, 0),
                                                        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                                                        {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                                                        {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                                                        {0xfe, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
    constexpr uint64_t kCsumFlags[] = {RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN, RTE_MBUF_F_RX_IP_CKSUM_GOOD,
                                       RTE_MBUF_F_RX_IP_CKSUM_BAD, RTE_MBUF_F_RX_IP_CKSUM_NONE};
    auto hex = [](const std::vector<uint8_t>& f) {
        std::string h;
        for (const uint8_t x : f) h += fmt::format("{:02x}", x);
        return h;
    };
    auto b = std::make_unique<Burst>();
    unsigned agreed_forward = 0, agreed_drop = 0;
    for (unsigned round = 0; round < 2000; ++round) {
        // Every other round's frames carry an 802.1Q tag (a VLAN port's, priority or not, or a
        // priority tag alone); every fourth round's tags are checked by the dispatch (vlan.h).
        const bool tagged = round % 2, checked = round % 4 == 1;
        const unsigned o = tagged ? 4 : 0;  // the tag's bytes before the IP header
        std::vector<std::vector<uint8_t>> frames(kBurst);
        uint64_t flags[kBurst];
        for (auto& f : frames) {
            f = bases[rng() % bases.size()];
            if (f.size() < 60) f.resize(60);  // a minimum Ethernet frame, zero-padded
            if (tagged) {
                constexpr uint16_t kTci[] = {10, 0, 0xa00a, 0x2000, 4095};
                const uint16_t tci = kTci[rng() % 5];
                const uint8_t tag[4] = {0x81, 0x00, uint8_t(tci >> 8), uint8_t(tci)};
                f.insert(f.begin() + 12, tag, tag + 4);
            }
            for (unsigned n = rng() % 4; n; --n) {
                const unsigned what = rng() % 8;
                if (what == 0) {
                    f.resize(rng() % (f.size() + 8));  // cut short, or padded past the IP length
                } else if (what == 1 && f.size() >= 60 + o) {
                    // A length (IPv4 total length or IPv6 payload length, UDP length) a few bytes
                    // off: the bounds' edges.
                    const bool v6 = f[12 + o] == 0x86 && f[13 + o] == 0xdd;
                    const unsigned at = o + (rng() % 2 ? (v6 ? 18 : 16) : (v6 ? 58 : 38));
                    const int v = (f[at] << 8 | f[at + 1]) + static_cast<int>(rng() % 17) - 8;
                    f[at] = static_cast<uint8_t>(v >> 8);
                    f[at + 1] = static_cast<uint8_t>(v);
                } else if (what == 2 && f.size() >= 54 + o) {
                    const bool v6 = f[12 + o] == 0x86 && f[13 + o] == 0xdd;
                    const auto& a = v6 ? special6[rng() % special6.size()] : special4[rng() % special4.size()];
                    std::copy(a.begin(), a.end(), f.begin() + o + (v6 ? (rng() % 2 ? 22 : 38) : (rng() % 2 ? 26 : 30)));
                } else if (!f.empty()) {
                    f[rng() % std::min<size_t>(f.size(), 80)] = static_cast<uint8_t>(rng());
                }
            }
            if (f.size() >= 34 + o && (f[14 + o] & 0x0f) == 5 && rng() % 2) fix_ip_csum(f, 14 + o);
        }
        for (unsigned i = 0; i < kBurst; ++i) {
            b->mbufs[i] = rte_pktmbuf_alloc(ctl::tool_mempool());
            ASSERT_NE(b->mbufs[i], nullptr);
            std::memcpy(rte_pktmbuf_append(b->mbufs[i], static_cast<uint16_t>(frames[i].size())), frames[i].data(),
                        frames[i].size());
            b->mbufs[i]->ol_flags = flags[i] = kCsumFlags[rng() % 4];
        }
        b->start(kBurst, 0);
        b->tags_checked = checked;
        parse_burst(*b, t->ctx());
        for (unsigned i = 0; i < kBurst; ++i) {
            const uint64_t csum = flags[i];
            PacketMeta want;
            DropReason r =
                parse_packet(frames[i].data(), static_cast<uint32_t>(frames[i].size()), want,
                             {.ip_csum_verified = csum == RTE_MBUF_F_RX_IP_CKSUM_GOOD, .tags_checked = checked});
            if (csum == RTE_MBUF_F_RX_IP_CKSUM_BAD && r == DropReason::none) r = DropReason::ip_bad_checksum;
            const PacketState& p = b->pkt[i];
            if (r != DropReason::none) {
                ASSERT_EQ(p.verdict, Verdict::drop)
                    << "round " << round << " packet " << i << ": " << drop_reason_name(r) << ", offload flags " << csum
                    << ", frame " << hex(frames[i]);
                ASSERT_EQ(drop_reason_name(p.reason), drop_reason_name(r)) << "round " << round << " packet " << i;
                ++agreed_drop;
                continue;
            }
            ASSERT_EQ(std::memcmp(&p.meta, &want, sizeof want), 0)
                << "round " << round << " packet " << i << ", frame " << hex(frames[i]);
            if (!want.is_fragment() && want.l3 != L3Kind::arp && !want.is_nd()) {
                ASSERT_EQ(p.verdict, Verdict::forward);
                ++agreed_forward;
            }
        }
        for (unsigned i = 0; i < kBurst; ++i)
            if (b->mbufs[i]) rte_pktmbuf_free(b->mbufs[i]);  // null: held by the fragment stage
    }
    // Both paths were taken many times: the fast one by frames left whole, the full one by drops.
    EXPECT_GT(agreed_forward, 5000u);
    EXPECT_GT(agreed_drop, 5000u);
    EXPECT_EQ(t->ctx().counters.rx_packets, 2000u * kBurst);
}

// The fast path writes the byte PacketMeta's bit-fields share whole: dont_fragment must be the
// bit it sets.
TEST(ParseBurst, FlagsByteLayout) {
    PacketMeta m;
    // The byte's other six bits are padding, unspecified in a constructed object: zeroed, as the
    // fast path's zero object has them (at -O1 under ASan they held 0x3c here).
    std::memset(static_cast<void*>(&m), 0, sizeof m);
    m.dont_fragment = true;
    uint8_t byte;
    std::memcpy(&byte, reinterpret_cast<const uint8_t*>(&m) + offsetof(PacketMeta, l3) + 1, 1);
    EXPECT_EQ(byte, kDontFragmentBit);
    m.dont_fragment = false;
    m.more_fragments = true;
    std::memcpy(&byte, reinterpret_cast<const uint8_t*>(&m) + offsetof(PacketMeta, l3) + 1, 1);
    EXPECT_NE(byte, 0);
    EXPECT_EQ(byte & kDontFragmentBit, 0);
}
