// The Toeplitz hash against the RSS verification suite (Microsoft's "Verifying the RSS Hash
// Calculation", the vectors DPDK's test_thash.c and Intel's 82599 datasheet 7.1.2.8.3 use) and
// DPDK's own rte_softrss; and masquerade ports chosen so that the replies land on the worker's
// own queue (rss_steer.h), through the pipeline, in both families.
#include <array>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <rte_thash.h>

#include <gtest/gtest.h>

#include "dataplane/base/toeplitz.h"
#include "dataplane/lb/rss_steer.h"
#include "dataplane/pipeline/pipeline.h"
#include "control/config/yaml_config.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

// The verification suite's key.
const std::span<const uint8_t> kKey(kRssVerificationKey);

struct V4 {
    std::array<uint8_t, 4> dst, src;
    uint16_t dport, sport;
    uint32_t l3, l3l4;
};
constexpr V4 kV4[] = {
    {{161, 142, 100, 80}, {66, 9, 149, 187}, 1766, 2794, 0x323e8fc2, 0x51ccc178},
    {{65, 69, 140, 83}, {199, 92, 111, 2}, 4739, 14230, 0xd718262a, 0xc626b0ea},
    {{12, 22, 207, 184}, {24, 19, 198, 95}, 38024, 12898, 0xd2d0a5de, 0x5c2b394a},
    {{209, 142, 163, 6}, {38, 27, 205, 30}, 2217, 48228, 0x82989176, 0xafc7327f},
    {{202, 188, 127, 2}, {153, 39, 163, 191}, 1303, 44251, 0x5d1809c5, 0x10e828a2},
};

struct V6 {
    std::array<uint8_t, 16> dst, src;
    uint16_t dport, sport;
    uint32_t l3, l3l4;
};
constexpr V6 kV6[] = {
    {{0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x01},  // 3ffe:2501:200:3::1
     {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x07},  // 3ffe:2501:200:1fff::7
     1766,
     2794,
     0x2cc18cd5,
     0x40207d3d},
    {{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01},  // ff02::1
     {0x3f, 0xfe, 0x05, 0x01, 0x00, 0x08, 0, 0, 0x02, 0x60, 0x97, 0xff, 0xfe, 0x40, 0xef, 0xab},
     4739,
     14230,
     0x0f0c461c,
     0xdde51bbf},
    {{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67, 0xcf},  // fe80::200:f8ff:fe21:67cf
     {0x3f, 0xfe, 0x19, 0x00, 0x45, 0x45, 0x00, 0x03, 0x02, 0x00, 0xf8, 0xff, 0xfe, 0x21, 0x67, 0xcf},
     38024,
     44251,
     0x4b61e985,
     0x02d1feef},
};

// RSS's input: source address, destination address, source port, destination port.
template <size_t A>
std::vector<uint8_t> input(const std::array<uint8_t, A>& src, const std::array<uint8_t, A>& dst, uint16_t sport,
                           uint16_t dport, bool l4) {
    std::vector<uint8_t> in(src.begin(), src.end());
    in.insert(in.end(), dst.begin(), dst.end());
    if (l4) in.insert(in.end(), {uint8_t(sport >> 8), uint8_t(sport), uint8_t(dport >> 8), uint8_t(dport)});
    return in;
}

std::unique_ptr<RssSteer> steer(unsigned queues, unsigned reta_size = 128) {
    auto r = std::make_unique<RssSteer>();
    EXPECT_TRUE(r->set_default(kKey, reta_size, static_cast<uint16_t>(queues)));
    return r;
}

// The RSS input of the replies to masqueraded connection `rec`: from the endpoint to the masquerade
// address and port.
std::vector<uint8_t> reply_input(const ctl::TraceRecord& rec) {
    std::vector<uint8_t> in;
    if (rec.out_v6) {
        const FlowKey6& k = rec.out_key6;
        in.insert(in.end(), k.dst.b, k.dst.b + 16);
        in.insert(in.end(), k.src.b, k.src.b + 16);
    } else {
        const auto* d = reinterpret_cast<const uint8_t*>(&rec.out_key.dst.be);
        const auto* s = reinterpret_cast<const uint8_t*>(&rec.out_key.src.be);
        in.insert(in.end(), d, d + 4);
        in.insert(in.end(), s, s + 4);
    }
    const uint16_t endpoint_port = rec.out_v6 ? rec.out_key6.dport : rec.out_key.dport;
    const uint16_t masq_port = rec.out_v6 ? rec.out_key6.sport : rec.out_key.sport;
    for (uint16_t p : {endpoint_port, masq_port}) in.insert(in.end(), {uint8_t(p), uint8_t(p >> 8)});
    return in;
}

// A tracer whose tables have `workers` owners, so that its worker can act as any of them.
std::unique_ptr<ctl::Tracer> tracer(const std::string& yaml, uint16_t workers) {
    return test::tracer_of(yaml, ctl::TraceOptions{.seed = 5, .owners = workers});
}

}  // namespace

TEST(Toeplitz, MatchesTheVerificationSuiteInBothFamilies) {
    ToeplitzTable4 t4;
    ToeplitzTable6 t6;
    ASSERT_TRUE(t4.init(kKey));
    ASSERT_TRUE(t6.init(kKey));
    for (const V4& v : kV4) {
        EXPECT_EQ(toeplitz_hash(kKey, input(v.src, v.dst, 0, 0, false)), v.l3);
        const auto in = input(v.src, v.dst, v.sport, v.dport, true);
        EXPECT_EQ(toeplitz_hash(kKey, in), v.l3l4);
        EXPECT_EQ(t4.hash(in.data()), v.l3l4);
    }
    for (const V6& v : kV6) {
        EXPECT_EQ(toeplitz_hash(kKey, input(v.src, v.dst, 0, 0, false)), v.l3);
        const auto in = input(v.src, v.dst, v.sport, v.dport, true);
        EXPECT_EQ(toeplitz_hash(kKey, in), v.l3l4);
        EXPECT_EQ(t6.hash(in.data()), v.l3l4);
    }
}

TEST(Toeplitz, AgreesWithDpdkSoftRssOnRandomInputsAndKeys) {
    std::mt19937 rng(7);
    for (int k = 0; k < 20; ++k) {
        std::array<uint8_t, 52> key;
        for (auto& b : key) b = static_cast<uint8_t>(rng());
        ToeplitzTable6 t6;
        ASSERT_TRUE(t6.init(key));
        for (int i = 0; i < 200; ++i) {
            std::array<uint8_t, kRssInput6> in;
            for (auto& b : in) b = static_cast<uint8_t>(rng());
            uint32_t words[kRssInput6 / 4];  // rte_softrss takes host-order words
            for (size_t w = 0; w < kRssInput6 / 4; ++w)
                words[w] = uint32_t(in[4 * w]) << 24 | in[4 * w + 1] << 16 | in[4 * w + 2] << 8 | in[4 * w + 3];
            const uint32_t want = rte_softrss(words, kRssInput6 / 4, key.data());
            ASSERT_EQ(toeplitz_hash(key, in), want);
            ASSERT_EQ(t6.hash(in.data()), want);
            // The port field's contribution is its own: what steering relies on.
            std::array<uint8_t, kRssInput6> zero = in;
            zero[34] = zero[35] = 0;
            ASSERT_EQ(t6.hash(zero.data()) ^ t6.field16(34, uint16_t(in[34] << 8 | in[35])), want);
        }
    }
}

TEST(Toeplitz, RefusesAKeyTooShortForTheInput) {
    ToeplitzTable6 t6;
    EXPECT_FALSE(t6.init(kKey.first(39)));
}

// Four workers, each with its queue of a port whose RETA spreads over four: every masquerade port
// a worker picks brings the reply (endpoint → masquerade address) to that worker's queue.
TEST(RssSteer, MasqueradedRepliesLandOnTheWorkersQueueInBothFamilies) {
    const std::string svc = R"(
  - name: default/web
    type: NodePort
    cluster_ips: [10.107.0.9, 'fd00:96::9']
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080, node_port: 30009},
            {name: dns, protocol: UDP, port: 53, target_port: 5353, node_port: 30053}]
    endpoints: [{ip: 10.244.2.4}, {ip: 10.244.3.6}, {ip: 'fd00:244:2::4'}, {ip: 'fd00:244:3::6'}]
)";
    const unsigned workers = 4;
    auto t = tracer(test::dual_stack_config(svc), workers);
    auto r = steer(workers);
    const RssSteer* by_port[2] = {nullptr, r.get()};  // the cluster port (index 1) steers
    WorkerCtx& ctx = t->ctx();
    ctx.rss = by_port;
    ctx.n_rss = 2;
    ctx.n_workers = workers;
    unsigned checked = 0;
    for (uint16_t w = 0; w < workers; ++w) {
        ctx.worker = w;
        for (int i = 0; i < 40; ++i) {
            const bool v6 = i % 2, udp = i % 4 >= 2;
            const std::string spec = fmt::format("{} {} > {} [{}]", udp ? "udp" : "tcp",
                                                 v6 ? fmt::format("[fd00:66::{:x}]:{}", 100 + i, 20000 + 50 * w + i)
                                                    : fmt::format("192.168.66.{}:{}", 100 + i, 20000 + 50 * w + i),
                                                 v6 ? fmt::format("[fd00:67::8]:{}", udp ? 30053 : 30009)
                                                    : fmt::format("192.168.67.8:{}", udp ? 30053 : 30009),
                                                 udp ? "" : "S");
            auto rec = t->run_spec(spec);
            ASSERT_EQ(rec.verdict, Verdict::dnat) << spec << ": " << rec.text();
            ASSERT_TRUE(rec.masquerade) << spec;
            ASSERT_EQ(rec.out_v6, v6) << spec;
            const uint32_t h = toeplitz_hash(kKey, reply_input(rec));
            EXPECT_EQ((h & 127) % workers, w) << spec << ": " << rec.text();  // DPDK's default RETA
            EXPECT_EQ(r->queue(h), w) << spec << ": " << rec.text();
            ++checked;
        }
    }
    EXPECT_EQ(checked, 4u * 40);
    EXPECT_EQ(ctx.counters.snat_steered, 4u * 40);
    EXPECT_EQ(ctx.counters.snat_unsteered, 0u);
}

// A port without steering (none known, or a protocol it does not hash by port): each worker's own
// share of the range, as before.
TEST(RssSteer, WithoutItTheWorkersShareOfTheRangeServes) {
    auto t = tracer(test::dual_stack_config(R"(
  - name: default/web
    type: NodePort
    cluster_ip: 10.107.0.9
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080, node_port: 30009}]
    endpoints: [{ip: 10.244.2.4}]
)"),
                    4);
    auto r = steer(4);
    r->tcp4 = false;  // hashes TCP by address only: no port can steer
    const RssSteer* by_port[2] = {nullptr, r.get()};
    WorkerCtx& ctx = t->ctx();
    ctx.rss = by_port;
    ctx.n_rss = 2;
    ctx.n_workers = 4;
    ctx.worker = 3;
    const uint16_t min = t->snapshot().cluster.snat_port_min;
    for (int i = 0; i < 20; ++i) {
        auto rec = t->run_spec(fmt::format("tcp 192.168.66.{}:{} > 192.168.67.8:30009 [S]", 100 + i, 30000 + i));
        ASSERT_EQ(rec.verdict, Verdict::dnat) << rec.text();
        EXPECT_EQ((rte_be_to_cpu_16(rec.out_key.sport) - min) % 4, 3) << rec.text();  // ≡ worker (mod workers)
    }
    EXPECT_EQ(ctx.counters.snat_steered, 0u);
}

// Where no port the worker tries brings the replies to its queue, the connection takes a port of
// the worker's own share of the range, as without steering, and the fallback is counted. Worker 1
// of 2 on a RETA of 2,048 entries: first with its queue in none of them (no port can reach it),
// then in one entry of 64 (a port lands there with chance 1/64, and a worker of two tries 16 ports
// of the smallest range the config takes: some connections find one, most fall back). Each
// connection's flow is removed after it, so each asks for a port once and takes none from the next.
TEST(RssSteer, WhereNoTriedPortReachesTheQueueTheWorkersShareServesCounted) {
    const uint16_t workers = 2, me = 1;
    constexpr uint16_t kMin = 1024, kMax = 1279;  // the smallest range the config takes
    std::string yaml = test::dual_stack_config(R"(
  - name: default/web
    type: NodePort
    cluster_ips: [10.107.0.9, 'fd00:96::9']
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080, node_port: 30009}]
    endpoints: [{ip: 10.244.2.4}, {ip: 10.244.3.6}, {ip: 'fd00:244:2::4'}, {ip: 'fd00:244:3::6'}]
)");
    yaml.insert(yaml.find("\ncluster:\n") + 10, "  masquerade_ports: 1024-1279\n");
    auto t = tracer(yaml, workers);
    auto r = steer(workers, RssSteer::kRetaMax);
    const RssSteer* by_port[2] = {nullptr, r.get()};
    WorkerCtx& ctx = t->ctx();
    ctx.rss = by_port;
    ctx.n_rss = 2;
    ctx.n_workers = workers;
    ctx.worker = me;
    auto forget = [&ctx](auto& table, const auto& reply) {
        const FlowRef ref = table.lookup(reply);
        ASSERT_TRUE(ref.hit());
        release_flow(*ctx.stats, ctx.worker, table.flow(ref.id));
        table.remove(ref.id);
    };
    // One connection of each family from each of 64 clients, each checked by what it was counted
    // as; how many fell back.
    auto connect_all = [&] {
        unsigned unsteered = 0;
        for (int c = 0; c < 64; ++c) {
            for (const bool v6 : {false, true}) {
                const std::string spec = v6
                    ? fmt::format("tcp [fd00:66::{:x}]:{} > [fd00:67::8]:30009 [S]", 100 + c, 20000 + c)
                    : fmt::format("tcp 192.168.66.{}:{} > 192.168.67.8:30009 [S]", 100 + c, 20000 + c);
                const uint64_t s0 = ctx.counters.snat_steered, u0 = ctx.counters.snat_unsteered;
                const auto rec = t->run_spec(spec);
                EXPECT_EQ(rec.verdict, Verdict::dnat) << spec << ": " << rec.text();
                EXPECT_TRUE(rec.masquerade) << spec;
                EXPECT_EQ(rec.out_v6, v6) << spec;
                if (rec.verdict != Verdict::dnat || !rec.masquerade || rec.out_v6 != v6) continue;
                const uint16_t port = rte_be_to_cpu_16(v6 ? rec.out_key6.sport : rec.out_key.sport);
                EXPECT_GE(port, kMin) << spec;
                EXPECT_LE(port, kMax) << spec;
                const uint64_t ds = ctx.counters.snat_steered - s0, du = ctx.counters.snat_unsteered - u0;
                EXPECT_EQ(ds + du, 1u) << spec << ": one port asked for, counted once";
                if (ds) {
                    EXPECT_EQ(r->queue(toeplitz_hash(kKey, reply_input(rec))), me) << spec << ": " << rec.text();
                } else {
                    ++unsteered;
                    EXPECT_EQ((port - kMin) % workers, me) << spec << ": the worker's own share";
                }
                if (v6)
                    forget(*ctx.flows6, rec.out_key6.reversed());
                else
                    forget(*ctx.flows, rec.out_key.reversed());
            }
        }
        return unsteered;
    };

    std::fill_n(r->reta, RssSteer::kRetaMax, uint16_t{0});  // queue 1 in no entry
    EXPECT_EQ(connect_all(), 128u);

    for (uint32_t i = 5; i < RssSteer::kRetaMax; i += 64) r->reta[i] = me;  // in 32 entries of 2,048
    const unsigned unsteered = connect_all();
    EXPECT_GT(unsteered, 0u) << "every connection found a port: the case this test is for";
    EXPECT_LT(unsteered, 128u) << "no connection found a port: the RETA's entries are not reached";
}
