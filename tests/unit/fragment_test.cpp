// IP fragments and the egress MTU on real packet bytes, through Tracer (process_burst with real
// mbufs), IPv4 and IPv6: a fragmented datagram to a NodePort arrives translated in every order of
// 2 and 3 fragments (one frame a burst, and all in one burst), replies fragmented come back
// translated, two workers share one datagram, the hold times out, every hostile class is its
// counted drop, and packets too big for a port get fragmentation needed / Packet Too Big (rate
// limited) or, IPv4 without DF, are fragmented.
#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <rte_mempool.h>

#include <gtest/gtest.h>

#include "dataplane/base/checksum.h"
#include "control/trace/packet_spec.h"
#include "test_support.h"
#include "control/config/yaml_config.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

using Frame = std::vector<uint8_t>;
constexpr size_t kL3 = 14;

// The dual-stack gateway (test_support.h), the cluster port's MTU `cluster_mtu`; next hops known
// (trace answers no ARP), a UDP and a TCP NodePort to one pod per family.
std::string config(unsigned cluster_mtu = 1500, const std::string& extra = "") {
    return test::dual_stack_config(R"(  - name: default/echo
    type: NodePort
    cluster_ips: [10.96.0.90, 'fd00:96::90']
    ports: [{name: u, protocol: UDP, port: 9000, target_port: 7, node_port: 30090},
            {name: t, protocol: TCP, port: 9000, target_port: 7, node_port: 30090}]
    endpoints: [{ip: 10.244.2.4, node: n1}, {ip: 'fd00:244:2::4', node: n1}]
)",
                                   R"(  neighbors:
    - {ip: 10.192.0.3, mac: '02:00:00:00:01:03'}
    - {ip: 'fd00:192::3', mac: '02:00:00:00:01:03'}
    - {ip: 192.168.67.100, mac: '02:00:00:00:01:64'}
    - {ip: 'fd00:67::100', mac: '02:00:00:00:01:64'}
)" + extra,
                                   fmt::format(", mtu: {}", cluster_mtu));
}

struct Fam {
    const char* name;
    bool v6;
    std::string client, node, pod;
};
const Fam kV4{"IPv4", false, "192.168.67.100", "192.168.67.8", "10.244.2.4"};
const Fam kV6{"IPv6", true, "fd00:67::100", "fd00:67::8", "fd00:244:2::4"};

std::string ep(const Fam& f, const std::string& a, unsigned port) {
    return f.v6 ? fmt::format("[{}]:{}", a, port) : fmt::format("{}:{}", a, port);
}

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
void put16(uint8_t* p, uint16_t v) { p[0] = static_cast<uint8_t>(v >> 8), p[1] = static_cast<uint8_t>(v); }

// A whole UDP (or TCP) datagram `spec` with `len` bytes of a counting payload; checksums right.
Frame datagram(const std::string& spec, size_t len, bool df = false) {
    Frame f = ctl::build_frame(test::packet(spec));
    const bool v6 = f[12] == 0x86;
    const size_t l4 = kL3 + (v6 ? 40 : 20);
    const bool udp = f[v6 ? kL3 + 6 : kL3 + 9] == 17;
    for (size_t i = 0; i < len; ++i) f.push_back(static_cast<uint8_t>(i * 7 + 3));
    const size_t l4_len = f.size() - l4;
    if (v6) {
        put16(&f[kL3 + 4], static_cast<uint16_t>(l4_len));
    } else {
        put16(&f[kL3 + 2], static_cast<uint16_t>(f.size() - kL3));
        f[kL3 + 6] = df ? 0x40 : 0;
        f[kL3 + 10] = f[kL3 + 11] = 0;
        const uint16_t c = inet_csum(&f[kL3], 20);
        std::memcpy(&f[kL3 + 10], &c, 2);
    }
    const size_t at = l4 + (udp ? 6 : 16);
    if (udp) put16(&f[l4 + 4], static_cast<uint16_t>(l4_len));
    f[at] = f[at + 1] = 0;
    const uint16_t c = v6 ? ipv6_l4_csum(&f[kL3], &f[l4], static_cast<uint32_t>(l4_len), udp ? 17 : 6)
                          : ipv4_l4_csum(&f[kL3], &f[l4], l4_len);
    std::memcpy(&f[at], &c, 2);
    return f;
}

// The datagram cut into fragments of at most `data` bytes each (a multiple of 8), as a sender's
// stack would: IPv4 offset and MF; IPv6 a Fragment header after the fixed header, id `id`.
std::vector<Frame> fragments(const Frame& whole, size_t data, uint32_t id = 0x4242) {
    const bool v6 = whole[12] == 0x86;
    const size_t hl = v6 ? 40 : 20;
    const size_t payload = whole.size() - kL3 - hl;
    std::vector<Frame> out;
    for (size_t off = 0; off < payload; off += data) {
        const size_t len = std::min(data, payload - off);
        const bool more = off + len < payload;
        Frame f(whole.begin(), whole.begin() + static_cast<long>(kL3 + hl));
        if (v6) {
            const uint8_t fh[8] = {whole[kL3 + 6],
                                   0,
                                   static_cast<uint8_t>(off >> 8),
                                   static_cast<uint8_t>((off & 0xf8) | (more ? 1 : 0)),
                                   static_cast<uint8_t>(id >> 24),
                                   static_cast<uint8_t>(id >> 16),
                                   static_cast<uint8_t>(id >> 8),
                                   static_cast<uint8_t>(id)};
            f[kL3 + 6] = 44;
            f.insert(f.end(), fh, fh + 8);
            put16(&f[kL3 + 4], static_cast<uint16_t>(8 + len));
        } else {
            put16(&f[kL3 + 2], static_cast<uint16_t>(hl + len));
            put16(&f[kL3 + 4], static_cast<uint16_t>(id));
            put16(&f[kL3 + 6], static_cast<uint16_t>((off / 8) | (more ? 0x2000 : 0)));
            f[kL3 + 10] = f[kL3 + 11] = 0;
            const uint16_t c = inet_csum(&f[kL3], 20);
            std::memcpy(&f[kL3 + 10], &c, 2);
        }
        f.insert(f.end(), whole.begin() + static_cast<long>(kL3 + hl + off),
                 whole.begin() + static_cast<long>(kL3 + hl + off + len));
        out.push_back(std::move(f));
    }
    return out;
}

// Frames that left (in any order) put back together into one datagram: the fragments' data by
// offset, under the first fragment's headers. Empty when they do not make one whole datagram.
Frame reassemble(const std::vector<Frame>& frames) {
    struct Piece {
        size_t off;
        Frame data;
        bool more;
    };
    std::vector<Piece> pieces;
    Frame head;
    for (const Frame& f : frames) {
        PacketMeta m;
        if (parse_packet(f.data(), static_cast<uint32_t>(f.size()), m) != DropReason::none || !m.is_fragment())
            return {};
        const size_t end = m.l3_off + m.ip_len;
        pieces.push_back(
            {m.frag_off, Frame(f.begin() + m.frag.data, f.begin() + static_cast<long>(end)), m.more_fragments});
        if (m.frag_off == 0) head = Frame(f.begin(), f.begin() + m.frag.data);
    }
    std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.off < b.off; });
    if (head.empty() || pieces.back().more) return {};
    Frame whole = head;
    for (const Piece& p : pieces) {
        if (p.off != whole.size() - head.size()) return {};  // a gap or an overlap
        whole.insert(whole.end(), p.data.begin(), p.data.end());
    }
    const size_t data = whole.size() - head.size();
    if (whole[12] == 0x86) {  // drop the Fragment header: the datagram as it was sent
        const size_t fh = head.size() - 8;
        whole[kL3 + 6] = whole[fh];
        whole.erase(whole.begin() + static_cast<long>(fh), whole.begin() + static_cast<long>(fh + 8));
        put16(&whole[kL3 + 4], static_cast<uint16_t>(data + (fh - kL3 - 40)));
    } else {
        put16(&whole[kL3 + 2], static_cast<uint16_t>(whole.size() - kL3));
        put16(&whole[kL3 + 6], 0);
        whole[kL3 + 10] = whole[kL3 + 11] = 0;
        const uint16_t c = inet_csum(&whole[kL3], (whole[kL3] & 0x0f) * 4u);
        std::memcpy(&whole[kL3 + 10], &c, 2);
    }
    return whole;
}

// What left, in the order it left: each record's frame and what it released or became.
std::vector<Frame> left(const std::vector<ctl::TraceRecord>& recs) {
    std::vector<Frame> out;
    for (const auto& r : recs) {
        if (!r.frame.empty()) out.push_back(r.frame);
        out.insert(out.end(), r.also.begin(), r.also.end());
    }
    return out;
}

PacketMeta meta_of(const Frame& f) {
    PacketMeta m;
    EXPECT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m), DropReason::none);
    return m;
}

std::vector<uint8_t> payload_of(const Frame& f) {
    const PacketMeta m = meta_of(f);
    return Frame(f.begin() + m.l4_off + 8, f.begin() + m.l3_off + m.ip_len);
}

class Fragments : public ::testing::TestWithParam<Fam> {
protected:
    void SetUp() override { test::ensure_eal(); }
    const Fam& f() const { return GetParam(); }
    std::string to_nodeport(unsigned sport = 40000) const {
        return fmt::format("udp {} > {}", ep(f(), f().client, sport), ep(f(), f().node, 30090));
    }
};

// The counters of a run balance: nothing lost, nothing kept (once the hold is empty).
void expect_balanced(ctl::Tracer& t, unsigned in_use) {
    EXPECT_EQ(t.ctx().counters.unaccounted(), 0);
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use) << "no mbuf kept";
}

TEST_P(Fragments, EveryOrderOfTwoAndThreeArrivesTranslated) {
    for (size_t n : {2, 3}) {
        const Frame whole = datagram(to_nodeport(), n == 2 ? 1800 : 2600);
        const auto frags = fragments(whole, 1200);
        ASSERT_EQ(frags.size(), n);
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        do {
            for (bool one_burst : {false, true}) {
                SCOPED_TRACE(fmt::format("{} fragments, order {}, {}", n, fmt::join(order, ","),
                                         one_burst ? "one burst" : "a burst each"));
                const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
                {
                    auto t = test::tracer(config());
                    std::vector<ctl::TraceRecord> recs;
                    if (one_burst) {
                        std::vector<Frame> b;
                        std::vector<std::string> in;
                        for (size_t k : order) b.push_back(frags[k]), in.push_back(fmt::format("frag {}", k));
                        recs = t->run_burst(b, in);
                    } else {
                        for (size_t k : order) recs.push_back(t->run_frame(frags[k], fmt::format("frag {}", k)));
                    }
                    const auto out = left(recs);
                    ASSERT_EQ(out.size(), n);
                    for (const Frame& o : out) {
                        const PacketMeta m = meta_of(o);
                        EXPECT_EQ(f().v6 ? IpAddr::of(m.key6.dst) : IpAddr::of(m.key.dst), *ctl::parse_ip(f().pod))
                            << "every fragment to the pod";
                    }
                    const Frame got = reassemble(out);
                    ASSERT_FALSE(got.empty());
                    EXPECT_TRUE(test::checksums_verify(got)) << "the first fragment's L4 checksum covers the datagram";
                    const PacketMeta gm = meta_of(got);
                    EXPECT_EQ(rte_be_to_cpu_16(f().v6 ? gm.key6.dport : gm.key.dport), 7);
                    EXPECT_EQ(payload_of(got), payload_of(whole));
                    const WorkerCounters& c = t->ctx().counters;
                    // Held: what came before the first, in its own burst; in one burst, every later
                    // fragment (the first's result is known only at the burst's end).
                    const size_t held =
                        one_burst ? n - 1 : std::find(order.begin(), order.end(), size_t{0}) - order.begin();
                    EXPECT_EQ(c.frag_stored, held);
                    EXPECT_EQ(c.frag_released, held);
                    EXPECT_EQ(c.verdicts[static_cast<unsigned>(Verdict::dnat)], n);
                    EXPECT_EQ(t->ctx().frags->datagrams(), 0u) << "a complete datagram leaves the table";
                    expect_balanced(*t, in_use + 0);
                }
            }
        } while (std::next_permutation(order.begin(), order.end()));
    }
}

TEST_P(Fragments, RepliesFragmentedComeBackTranslated) {
    auto t = test::tracer(config());
    const auto req = t->run_frame(datagram(to_nodeport(), 10), "request");
    ASSERT_EQ(req.verdict, Verdict::dnat);
    // The pod answers 4000 bytes (to the masquerade address: a NodePort), its fragments last first.
    const std::string back =
        f().v6 ? ctl::format_tuple(req.out_key6.reversed()) : ctl::format_tuple(req.out_key.reversed());
    const Frame reply = datagram(back, 4000);
    auto frags = fragments(reply, 1232);
    std::reverse(frags.begin(), frags.end());
    std::vector<ctl::TraceRecord> recs;
    for (const Frame& x : frags) recs.push_back(t->run_frame(x, "reply fragment"));
    const auto out = left(recs);
    ASSERT_EQ(out.size(), frags.size());
    const Frame got = reassemble(out);
    ASSERT_FALSE(got.empty());
    EXPECT_TRUE(test::checksums_verify(got));
    const PacketMeta m = meta_of(got);
    EXPECT_EQ(f().v6 ? IpAddr::of(m.key6.src) : IpAddr::of(m.key.src), *ctl::parse_ip(f().node)) << "from the NodePort";
    EXPECT_EQ(rte_be_to_cpu_16(f().v6 ? m.key6.sport : m.key.sport), 30090);
    EXPECT_EQ(payload_of(got), payload_of(reply));
    EXPECT_EQ(t->ctx().counters.verdicts[static_cast<unsigned>(Verdict::reply)], frags.size());
}

TEST_P(Fragments, TwoWorkersShareOneDatagram) {
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    {
        auto a = test::tracer(config());
        auto b = test::tracer(config(), 2);
        b->ctx().frags = a->ctx().frags;  // one hold for both, as the daemon's workers share it
        const auto frags = fragments(datagram(to_nodeport(), 2600), 1200);
        const auto r2 = b->run_frame(frags[2], "last, on worker b");
        EXPECT_EQ(r2.l2, L2Outcome::frag_held);
        const auto r0 = a->run_frame(frags[0], "first, on worker a");
        EXPECT_EQ(r0.verdict, Verdict::dnat);
        ASSERT_EQ(r0.also.size(), 1u) << "worker a sends what worker b held";
        const auto r1 = b->run_frame(frags[1], "middle, on worker b");
        EXPECT_EQ(r1.verdict, Verdict::dnat) << "worker b follows the result worker a recorded";
        const Frame got = reassemble({r0.frame, r0.also[0], r1.frame});
        ASSERT_FALSE(got.empty());
        EXPECT_TRUE(test::checksums_verify(got));
        EXPECT_EQ(b->ctx().counters.frag_stored, 1u);
        EXPECT_EQ(a->ctx().counters.frag_taken, 1u);
        WorkerCounters sum = a->ctx().counters;
        sum += b->ctx().counters;
        EXPECT_EQ(sum.unaccounted(), 0) << "each worker counts its side of the hold";
        b->ctx().frags = nullptr;
    }
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use);
}

TEST_P(Fragments, HeldFragmentsTimeOutCounted) {
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    auto t = test::tracer(config());
    const auto frags = fragments(datagram(to_nodeport(), 2600), 1200);
    EXPECT_EQ(t->run_frame(frags[1], "middle").l2, L2Outcome::frag_held);
    EXPECT_EQ(t->run_frame(frags[2], "last").l2, L2Outcome::frag_held);
    EXPECT_EQ(t->ctx().frags->held(), 2u);
    t->advance(1);  // 1 s: still within the default 2 s
    EXPECT_EQ(t->ctx().frags->held(), 2u);
    t->advance(2);
    EXPECT_EQ(t->ctx().frags->held(), 0u);
    EXPECT_EQ(t->ctx().counters.drops[static_cast<unsigned>(DropReason::frag_timeout)], 2u);
    // The first fragment, late: it goes alone (nothing waits for it any more).
    const auto r0 = t->run_frame(frags[0], "first, late");
    EXPECT_EQ(r0.verdict, Verdict::dnat);
    EXPECT_TRUE(r0.also.empty());
    t->advance(3);
    expect_balanced(*t, in_use + 0);
}

TEST_P(Fragments, HostileFragmentsAreCountedDrops) {
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    auto t = test::tracer(config(1500, "  fragments: {max_held: 4, max_per_datagram: 4, max_datagrams: 8}\n"));
    auto drops = [&](DropReason r) { return t->ctx().counters.drops[static_cast<unsigned>(r)]; };
    // An established TCP flow, to see it untouched by all that follows.
    const std::string syn = fmt::format("tcp {} > {} [S]", ep(f(), f().client, 50000), ep(f(), f().node, 30090));
    ASSERT_EQ(t->run_spec(syn).verdict, Verdict::dnat);
    ASSERT_EQ(t->run_spec("reply 1 [S.]").verdict, Verdict::reply);

    // Overlap: a fragment over another drops it and the rest of its datagram (RFC 5722).
    auto a = fragments(datagram(to_nodeport(40001), 2600), 1200, 1);
    Frame over = a[1];  // fragment 1 again, shifted back by 8 bytes into fragment 0's range
    if (f().v6)
        put16(&over[kL3 + 42], static_cast<uint16_t>(be16(&over[kL3 + 42]) - 8));
    else {
        put16(&over[kL3 + 6], static_cast<uint16_t>(be16(&over[kL3 + 6]) - 1));
        over[kL3 + 10] = over[kL3 + 11] = 0;
        const uint16_t c = inet_csum(&over[kL3], 20);
        std::memcpy(&over[kL3 + 10], &c, 2);
    }
    EXPECT_EQ(t->run_frame(a[1], "a1").l2, L2Outcome::frag_held);
    EXPECT_EQ(t->run_frame(over, "a1 shifted").reason, DropReason::frag_overlap);
    EXPECT_EQ(drops(DropReason::frag_overlap), 2u) << "the overlapping one and the one it overlapped";
    EXPECT_EQ(t->run_frame(a[0], "a0").reason, DropReason::frag_overlap) << "the rest of the datagram too";

    // A duplicate: only itself.
    auto b = fragments(datagram(to_nodeport(40002), 2600), 1200, 2);
    EXPECT_EQ(t->run_frame(b[0], "b0").verdict, Verdict::dnat);
    EXPECT_EQ(t->run_frame(b[0], "b0 again").reason, DropReason::frag_duplicate);
    EXPECT_EQ(t->run_frame(b[1], "b1").verdict, Verdict::dnat);

    // Too many fragments for one datagram (max_per_datagram 4).
    auto c = fragments(datagram(to_nodeport(40003), 800), 128, 3);
    ASSERT_GT(c.size(), 4u);
    for (size_t k = 0; k < 4; ++k) EXPECT_NE(t->run_frame(c[k], "c").verdict, Verdict::drop);
    EXPECT_EQ(t->run_frame(c[4], "c4").reason, DropReason::frag_too_many);

    // A flood of later fragments: the hold takes 4 (max_held), the rest are counted drops.
    unsigned full = 0;
    for (uint32_t id = 100; id < 106; ++id) {
        auto d = fragments(datagram(to_nodeport(41000 + id), 2600), 1200, id);
        const auto r = t->run_frame(d[1], "flood");
        full += r.reason == DropReason::frag_hold_full;
    }
    EXPECT_EQ(full, 2u);
    EXPECT_EQ(t->ctx().frags->held(), 4u);
    // And of datagrams: 8 tracked at most; the rest are table_full.
    unsigned table_full = 0;
    for (uint32_t id = 200; id < 210; ++id) {
        auto d = fragments(datagram(to_nodeport(42000 + id), 2600), 1200, id);
        table_full += t->run_frame(d[0], "first of many").reason == DropReason::frag_table_full;
    }
    EXPECT_GT(table_full, 0u);
    // The established flow still goes to its pod, past all of it.
    const auto ack = t->run_spec(fmt::format("tcp {} > {} [.]", ep(f(), f().client, 50000), ep(f(), f().node, 30090)));
    EXPECT_EQ(ack.verdict, Verdict::dnat);
    EXPECT_FALSE(ack.new_flow);

    // A first fragment with 16 bytes of its 20-byte TCP header (RFC 3128): a tiny fragment.
    const auto tcp = fragments(
        datagram(fmt::format("tcp {} > {} [S]", ep(f(), f().client, 50001), ep(f(), f().node, 30090)), 100), 16, 5);
    EXPECT_EQ(t->run_frame(tcp[0], "tiny").reason, DropReason::frag_tiny);
    t->advance(3);
    EXPECT_EQ(t->ctx().frags->held(), 0u);
    expect_balanced(*t, in_use + 0);
}

TEST_P(Fragments, ToTheGatewayAreDroppedWholeDatagram) {
    auto t = test::tracer(config());
    const auto frags = fragments(
        datagram(fmt::format("udp {} > {}", ep(f(), f().client, 40000), ep(f(), f().node, 9999)), 2600), 1200);
    const auto r0 = t->run_frame(frags[0], "first, to the gateway");
    EXPECT_EQ(r0.verdict, Verdict::drop);
    EXPECT_EQ(r0.reason, DropReason::to_gateway) << "the gateway answers whole packets only";
    EXPECT_EQ(t->ctx().counters.verdicts[static_cast<unsigned>(Verdict::local)], 0u)
        << "counted once, as the drop it is";
    EXPECT_EQ(t->run_frame(frags[1], "later").reason, DropReason::frag_first_dropped);
    EXPECT_EQ(t->run_frame(frags[2], "last").reason, DropReason::frag_first_dropped);
    EXPECT_EQ(t->ctx().frags->datagrams(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Both, Fragments, ::testing::Values(kV4, kV6),
                         [](const auto& i) { return std::string(i.param.name); });

// ---- the egress MTU -------------------------------------------------------------------------

class Mtu : public Fragments {};

TEST_P(Mtu, TooBigWithDfOrIpv6GetsTheErrorQuotingWhatWasSent) {
    auto t = test::tracer(config(1280));
    const Frame big = datagram(to_nodeport(), 1300, /*df=*/true);
    const auto r = t->run_frame(big, "too big");
    EXPECT_EQ(r.verdict, Verdict::reject);
    EXPECT_EQ(r.reason, f().v6 ? DropReason::packet_too_big : DropReason::frag_needed);
    ASSERT_FALSE(r.frame.empty());
    const PacketMeta m = meta_of(r.frame);
    const uint8_t* icmp = r.frame.data() + m.l4_off;
    EXPECT_TRUE(test::checksums_verify(r.frame));
    if (f().v6) {
        EXPECT_EQ(icmp[0], kIcmp6PacketTooBig);
        EXPECT_EQ(be16(icmp + 6), 1280);
        EXPECT_EQ(IpAddr::of(m.key6.dst), *ctl::parse_ip(f().client));
        EXPECT_EQ(IpAddr::of(m.key6.src), *ctl::parse_ip(f().node))
            << "from the gateway's address on the client's side";
        EXPECT_EQ(IpAddr::of(m.err_key6.src), *ctl::parse_ip(f().node))
            << "quoting the packet as sent: to the NodePort";
    } else {
        EXPECT_EQ(icmp[0], kIcmpDestUnreach);
        EXPECT_EQ(icmp[1], 4);
        EXPECT_EQ(be16(icmp + 6), 1280);
        EXPECT_EQ(IpAddr::of(m.key.dst), *ctl::parse_ip(f().client));
        EXPECT_EQ(IpAddr::of(m.err_key.src), *ctl::parse_ip(f().node));
        EXPECT_EQ(rte_be_to_cpu_16(m.err_key.sport), 30090);
    }
    EXPECT_EQ(t->ctx().counters.rejects[static_cast<unsigned>(r.reason)], 1u);
}

TEST_P(Mtu, ErrorsAreRateLimited) {
    auto t = test::tracer(config(1280, "  icmp_errors_per_second: 3\n"));
    unsigned sent = 0, limited = 0;
    for (unsigned k = 0; k < 5; ++k) {
        const auto r = t->run_frame(datagram(to_nodeport(40000 + k), 1300, true), "too big");
        sent += r.verdict == Verdict::reject;
        limited += r.reason == DropReason::icmp_rate_limited;
    }
    EXPECT_EQ(sent, 3u);
    EXPECT_EQ(limited, 2u);
    t->advance(1);  // a second later the bucket has refilled
    EXPECT_EQ(t->run_frame(datagram(to_nodeport(40010), 1300, true), "too big").verdict, Verdict::reject);
}

TEST(MtuV4, WithoutDfIsFragmentedToTheEgressMtu) {
    test::ensure_eal();
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    {
        auto t = test::tracer(config(1280));
        const Frame big = datagram("udp 192.168.67.100:40000 > 192.168.67.8:30090", 1460);
        const auto r = t->run_frame(big, "1488 bytes, no DF");
        EXPECT_EQ(r.verdict, Verdict::dnat);
        const auto out = left({r});
        ASSERT_EQ(out.size(), 2u);
        for (const Frame& o : out) {
            const PacketMeta m = meta_of(o);
            EXPECT_LE(m.ip_len, 1280);
            EXPECT_EQ(IpAddr::of(m.key.dst), *ctl::parse_ip("10.244.2.4"));
        }
        const Frame got = reassemble(out);
        ASSERT_FALSE(got.empty());
        EXPECT_TRUE(test::checksums_verify(got));
        EXPECT_EQ(payload_of(got), payload_of(big));
        EXPECT_EQ(t->ctx().counters.frag_out_packets, 1u);
        EXPECT_EQ(t->ctx().counters.frag_out_fragments, 2u);
        EXPECT_EQ(t->ctx().counters.unaccounted(), 0);
    }
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use);
}

INSTANTIATE_TEST_SUITE_P(Both, Mtu, ::testing::Values(kV4, kV6),
                         [](const auto& i) { return std::string(i.param.name); });

// RFC 791 3.1: options with the copy flag go into every fragment, the others into the first only.
TEST(FragmentIpv4, CopiesOnlyCopiedOptionsIntoLaterFragments) {
    test::ensure_eal();
    Frame f = datagram("udp 192.168.67.100:40000 > 10.244.2.4:7", 1400);
    // Router alert (0x94, copied, 4 bytes), record route (0x07, not copied, 7 bytes), end of list.
    const uint8_t opts[12] = {0x94, 4, 0, 0, 0x07, 7, 4, 0, 0, 0, 0, 0};
    f.insert(f.begin() + kL3 + 20, opts, opts + 12);
    f[kL3] = 0x48;
    put16(&f[kL3 + 2], static_cast<uint16_t>(f.size() - kL3));
    f[kL3 + 10] = f[kL3 + 11] = 0;
    const uint16_t c = inet_csum(&f[kL3], 32);
    std::memcpy(&f[kL3 + 10], &c, 2);
    rte_mempool* pool = ctl::tool_mempool();
    const unsigned in_use = rte_mempool_in_use_count(pool);
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    ASSERT_NE(m, nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
    rte_mbuf* out[FragTable::kMaxPerDatagram];
    const unsigned n = fragment_ipv4(m, kL3, 600, pool, out, FragTable::kMaxPerDatagram);
    ASSERT_EQ(n, 3u);
    std::vector<Frame> frames;
    for (unsigned k = 0; k < n; ++k) {
        const auto* d = rte_pktmbuf_mtod(out[k], const uint8_t*);
        frames.emplace_back(d, d + rte_pktmbuf_data_len(out[k]));
        rte_pktmbuf_free(out[k]);
    }
    rte_pktmbuf_free(m);
    EXPECT_EQ(rte_mempool_in_use_count(pool), in_use);
    for (unsigned k = 0; k < n; ++k) {
        const Frame& x = frames[k];
        const unsigned ihl = (x[kL3] & 0x0f) * 4u;
        EXPECT_EQ(inet_csum(&x[kL3], ihl), 0) << "fragment " << k << ": header checksum";
        EXPECT_LE(x.size() - kL3, 600u);
        EXPECT_EQ(x[kL3 + 20], 0x94) << "fragment " << k << ": router alert copied";
        if (k == 0) {
            EXPECT_EQ(ihl, 32u);
            EXPECT_EQ(x[kL3 + 24], 0x07) << "record route in the first";
        } else {
            EXPECT_EQ(ihl, 24u) << "fragment " << k << ": record route left out";
        }
    }
    // The fragments' data put back is the datagram's payload (options aside).
    Frame data;
    for (const Frame& x : frames) {
        const unsigned ihl = (x[kL3] & 0x0f) * 4u;
        data.insert(data.end(), x.begin() + kL3 + ihl, x.end());
    }
    EXPECT_EQ(data, Frame(f.begin() + kL3 + 32, f.end()));
}

// A jumbo datagram (received into the jumbo pool's mbufs, control/daemon/resources.h) leaving by
// a 1500-byte port, and by a 4000-byte one: every fragment fits the port's MTU and one 2 KB mbuf
// of the packet pool the fragments come from, and the fragments put back are the datagram.
TEST(FragmentIpv4, JumboDatagramIntoFragmentsThatFitTheMtuAndAnMbuf) {
    test::ensure_eal();
    static rte_mempool* jumbo =
        rte_pktmbuf_pool_create("frag_jumbo", 63, 0, 0, RTE_PKTMBUF_HEADROOM + 9216, SOCKET_ID_ANY);
    ASSERT_NE(jumbo, nullptr);
    const Frame f = datagram("udp 10.244.2.4:7 > 192.168.67.100:40000", 9000 - 28);
    rte_mbuf* m = rte_pktmbuf_alloc(jumbo);
    ASSERT_NE(m, nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
    rte_mempool* pool = ctl::tool_mempool();
    const unsigned in_use = rte_mempool_in_use_count(pool);
    for (auto [mtu, want] : {std::pair<uint16_t, unsigned>{1500, 7}, {4000, 5}}) {
        rte_mbuf* out[FragTable::kMaxPerDatagram];
        const unsigned n = fragment_ipv4(m, kL3, mtu, pool, out, FragTable::kMaxPerDatagram);
        ASSERT_EQ(n, want) << "MTU " << mtu;
        std::vector<Frame> frames;
        for (unsigned k = 0; k < n; ++k) {
            const auto* d = rte_pktmbuf_mtod(out[k], const uint8_t*);
            frames.emplace_back(d, d + rte_pktmbuf_data_len(out[k]));
            EXPECT_LE(frames.back().size() - kL3, std::min<size_t>(mtu, RTE_MBUF_DEFAULT_DATAROOM - kL3)) << k;
            rte_pktmbuf_free(out[k]);
        }
        const Frame got = reassemble(frames);
        EXPECT_EQ(payload_of(got), payload_of(f)) << "MTU " << mtu;
    }
    rte_pktmbuf_free(m);
    EXPECT_EQ(rte_mempool_in_use_count(pool), in_use);
}

}  // namespace
