// 802.1Q sub-interfaces (dataplane.ports[].vlan, dataplane/pipeline/vlan.h): a device's frames
// sorted to its ports by VLAN ID with their tag left on, every frame leaving with its port's tag
// and no other, what no port takes counted under its reason; the whole pipeline on tagged
// frames; trace with a tagged frame; the config's refusals.
#include <cstring>

#include <gtest/gtest.h>
#include <rte_arp.h>
#include <rte_mbuf.h>

#include "control/trace/packet_spec.h"
#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/output.h"
#include "dataplane/pipeline/parse.h"
#include "dataplane/pipeline/pipeline.h"
#include "dataplane/pipeline/vlan.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

using Frame = std::vector<uint8_t>;

Frame frame(const std::string& spec) { return ctl::build_frame(test::packet(spec)); }

// `f` with an 802.1Q tag (TPID `tpid`, TCI `tci`) in front of its EtherType.
Frame tagged(Frame f, uint16_t tci, uint16_t tpid = 0x8100) {
    const uint8_t tag[4] = {uint8_t(tpid >> 8), uint8_t(tpid), uint8_t(tci >> 8), uint8_t(tci)};
    f.insert(f.begin() + 12, tag, tag + 4);
    return f;
}

Frame prefix(Frame f, size_t n) {
    f.resize(n);
    return f;
}

rte_mempool* pool() {
    static rte_mempool* p = [] {
        test::ensure_eal();
        return rte_pktmbuf_pool_create("vlan_test", 255, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    }();
    return p;
}

// An mbuf of the test's pool holding `f`.
rte_mbuf* mbuf_of(const Frame& f) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool());
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
    return m;
}

struct Mbuf {
    rte_mbuf* m;
    explicit Mbuf(const Frame& f) : m(mbuf_of(f)) {}
    ~Mbuf() { rte_pktmbuf_free(m); }
    Frame bytes() const {
        const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
        return Frame(p, p + rte_pktmbuf_data_len(m));
    }
};

// Device ports: 3 untagged, 7 on VLAN 10, 9 on VLAN 20.
VlanMap trunk() {
    VlanMap map;
    map.port[0] = 3;
    map.port[10] = 7;
    map.port[20] = 9;
    return map;
}

// A TxSink keeping what the output stage sends, for the test to read; what is left is freed.
struct Capture {
    std::vector<rte_mbuf*> sent;

    Capture() = default;
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;
    ~Capture() { take(); }

    TxSink sink() {
        return {.send = [](void* arg, uint16_t, rte_mbuf** pkts, uint16_t n) noexcept -> uint16_t {
                    auto& sent = *static_cast<std::vector<rte_mbuf*>*>(arg);
                    sent.insert(sent.end(), pkts, pkts + n);
                    return n;
                },
                .arg = &sent};
    }
    // The frames sent, in order, as bytes; their mbufs freed.
    std::vector<Frame> take() {
        std::vector<Frame> out;
        for (rte_mbuf* m : sent) {
            const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
            out.emplace_back(p, p + rte_pktmbuf_data_len(m));
            rte_pktmbuf_free(m);
        }
        sent.clear();
        return out;
    }
};

const rte_ether_addr kPod{{0x02, 0, 0, 0, 0, 0x99}};

// An output stage alone on a worker of three ports, `vlans` their tags (kPortOnTrunk | ID), its
// neighbours unknown, sending into `cap`.
struct TrunkOutput {
    static inline NeighborTable nt;  // large: not on the stack
    static inline NeighborTable6 nt6;
    const rte_ether_addr macs[3]{{{0x02, 0, 0, 0, 0, 0x01}}, {{0x02, 0, 0, 0, 0, 0x02}}, {{0x02, 0, 0, 0, 0, 0x03}}};
    uint16_t vlans[3];
    PortSoftCounters counters[3];
    Capture cap;
    WorkerCtx ctx;

    explicit TrunkOutput(const uint16_t (&v)[3]) : vlans{v[0], v[1], v[2]} {
        ctx.out.init(nt, nt6, pool(), macs, 3, cap.sink());
        ctx.out.set_trunks(vlans, counters);
    }
    // `f` routed out of `port` to the pod's MAC.
    void route(const Frame& f, uint16_t port) {
        PacketState p;
        p.verdict = Verdict::forward;
        p.out_port = port;
        std::memcpy(&p.next_mac, kPod.addr_bytes, 6);
        output_packet(ctx, mbuf_of(f), p, 0, nullptr);
    }
};

}  // namespace

TEST(Vlan, EachFrameGoesToThePortOfItsIdAsItCame) {
    const VlanMap map = trunk();
    const Frame plain = frame("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]");
    for (auto [tci, port] : {std::pair<uint16_t, uint16_t>{10, 7}, {20, 9}, {0xa000 | 20, 9}, {0x5000, 3}}) {
        Mbuf m(tagged(plain, tci));
        DropReason why = DropReason::none;
        EXPECT_EQ(vlan_receive(map, m.m, why), port) << "TCI " << tci;
        EXPECT_EQ(why, DropReason::none);
        EXPECT_EQ(m.bytes(), tagged(plain, tci)) << "TCI " << tci << ": the tag left on, for the parser";
    }
    Mbuf untagged(plain);
    DropReason why = DropReason::none;
    EXPECT_EQ(vlan_receive(map, untagged.m, why), 3);
    EXPECT_EQ(untagged.bytes(), plain);
}

TEST(Vlan, WhatNoPortTakesHasItsReason) {
    const VlanMap map = trunk();
    const Frame plain = frame("udp 192.168.67.100:5000 > 192.168.67.8:53");
    struct Case {
        const char* name;
        Frame f;
        DropReason want;
    } cases[] = {
        {"an ID no port has", tagged(plain, 30), DropReason::vlan_unknown},
        {"two tags", tagged(tagged(plain, 10), 20), DropReason::vlan_stacked},
        {"an 802.1ad outer tag", tagged(tagged(plain, 10), 20, 0x88a8), DropReason::vlan_stacked},
        {"a tag cut short", prefix(tagged(plain, 10), 16), DropReason::vlan_truncated},
        {"shorter than Ethernet", prefix(plain, 10), DropReason::eth_truncated},
    };
    for (const Case& c : cases) {
        Mbuf m(c.f);
        DropReason why = DropReason::none;
        EXPECT_EQ(vlan_receive(map, m.m, why), kNoPort) << c.name;
        EXPECT_EQ(why, c.want) << c.name << ": " << drop_reason_name(why);
        EXPECT_EQ(m.bytes(), c.f) << c.name << ": left as it came";
    }
    VlanMap tagged_only = map;
    tagged_only.port[0] = kNoPort;
    Mbuf m(plain);
    DropReason why = DropReason::none;
    EXPECT_EQ(vlan_receive(tagged_only, m.m, why), kNoPort);
    EXPECT_EQ(why, DropReason::vlan_unknown) << "an untagged frame on a device whose ports are all VLANs";
}

TEST(Vlan, TagStrippedByTheNicIsReadFromTheMbuf) {
    const VlanMap map = trunk();
    const Frame plain = frame("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]");
    Mbuf m(plain);
    m.m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
    m.m->vlan_tci = 0x2000 | 20;
    DropReason why = DropReason::none;
    EXPECT_EQ(vlan_receive(map, m.m, why), 9);
    EXPECT_EQ(m.bytes(), plain);
    EXPECT_FALSE(m.m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) << "taken: the stages after see an untagged frame";
    Mbuf other(plain);
    other.m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
    other.m->vlan_tci = 30;
    EXPECT_EQ(vlan_receive(map, other.m, why), kNoPort);
    EXPECT_EQ(why, DropReason::vlan_unknown);
    Mbuf inner(tagged(plain, 10));  // the NIC took the outer of two tags
    inner.m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
    inner.m->vlan_tci = 20;
    EXPECT_EQ(vlan_receive(map, inner.m, why), kNoPort);
    EXPECT_EQ(why, DropReason::vlan_stacked) << drop_reason_name(why);
}

TEST(Vlan, InsertPutsATagOnAndStripTakesItOff) {
    const Frame plain = frame("tcp 10.192.0.2:61000 > 10.244.2.4:8080 [S]");
    Mbuf m(plain);
    ASSERT_TRUE(vlan_insert(m.m, 20));
    EXPECT_EQ(m.bytes(), tagged(plain, 20)) << "priority 0, VLAN ID 20, before the EtherType";
    EXPECT_TRUE(vlan_tagged(rte_pktmbuf_mtod(m.m, const uint8_t*)));
    vlan_strip(m.m);
    EXPECT_EQ(m.bytes(), plain);
    EXPECT_EQ(m.m->pkt_len, plain.size());
    EXPECT_FALSE(vlan_tagged(rte_pktmbuf_mtod(m.m, const uint8_t*)));
}

TEST(Vlan, PushHeaderWritesMacsAndTagInOne) {
    const Frame plain = frame("tcp 10.192.0.2:61000 > 10.244.2.4:8080 [S]");
    const rte_ether_addr dst{{0x02, 0, 0, 0, 0, 0x99}}, src{{0x02, 0, 0, 0, 0, 0x02}};
    Frame want = plain;
    std::memcpy(want.data(), dst.addr_bytes, 6);
    std::memcpy(want.data() + 6, src.addr_bytes, 6);
    Mbuf m(plain);
    ASSERT_TRUE(vlan_push_header(m.m, dst, src, 20));
    EXPECT_EQ(m.bytes(), tagged(want, 20)) << "the MACs given, then priority 0, VLAN ID 20, the EtherType";
    EXPECT_EQ(m.m->pkt_len, plain.size() + 4);

    Mbuf shared(plain);  // a clone's data is not ours to write
    rte_mbuf_refcnt_update(shared.m, 1);
    EXPECT_FALSE(vlan_push_header(shared.m, dst, src, 20));
    EXPECT_EQ(shared.bytes(), plain) << "nothing written";
    rte_mbuf_refcnt_update(shared.m, -1);
}

// The output stage of a worker whose ports 0 and 1 are VLANs 10 and 20 of a trunk and port 2 its
// untagged port: every frame it sends leaves with its port's tag, and the bytes are counted by port.
TEST(Vlan, OutputTagsWhatLeavesAPortOnATrunk) {
    TrunkOutput o({kPortOnTrunk | 10, kPortOnTrunk | 20, kPortOnTrunk});
    const Frame syn = frame("tcp 10.192.0.2:61000 > 10.244.2.4:8080 [S]");
    o.route(syn, 1);
    o.route(syn, 2);
    {  // a REJECT, built in place: back out of its in port as it is, with the port's tag
        PacketState p;
        p.verdict = Verdict::reject;
        output_packet(o.ctx, mbuf_of(syn), p, 0, nullptr);
    }
    {  // a clone cannot take a tag: dropped as the queue's refusal is
        rte_mbuf* m = mbuf_of(syn);
        rte_mbuf_refcnt_update(m, 1);
        PacketState p;
        p.verdict = Verdict::reject;
        output_packet(o.ctx, m, p, 0, nullptr);
        EXPECT_EQ(rte_mbuf_refcnt_read(m), 1) << "the drop frees the test's second reference only";
        rte_pktmbuf_free(m);
    }
    output_flush(o.ctx);
    const std::vector<Frame> out = o.cap.take();
    ASSERT_EQ(out.size(), 3u);
    Frame to_pod = syn;
    std::memcpy(to_pod.data(), kPod.addr_bytes, 6);
    std::memcpy(to_pod.data() + 6, o.macs[1].addr_bytes, 6);
    // By port, in port order (output_flush).
    EXPECT_EQ(out[0], tagged(syn, 10)) << "the REJECT, tag 10";
    EXPECT_EQ(out[1], tagged(to_pod, 20)) << "routed to VLAN 20: the pod's MAC, port 1's, tag 20";
    std::memcpy(to_pod.data() + 6, o.macs[2].addr_bytes, 6);
    EXPECT_EQ(out[2], to_pod) << "the trunk's untagged port: no tag";
    EXPECT_EQ(o.counters[0].tx_bytes, syn.size() + 4);
    EXPECT_EQ(o.counters[1].tx_bytes, syn.size() + 4);
    EXPECT_EQ(o.counters[2].tx_bytes, syn.size());
    EXPECT_EQ(o.ctx.counters.drops[static_cast<unsigned>(DropReason::tx_full)], 1u);
}

namespace {

// One trunk (device trunk0) carries the client network on VLAN 10 and the node network on VLAN 20.
std::string trunk_config() {
    return R"(
dataplane:
  ports:
    - {name: ext, device: trunk0, vlan: 10, addresses: [192.168.67.8/24]}
    - {name: cluster, device: trunk0, vlan: 20, addresses: [10.192.0.2/24]}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
cluster:
  node_name: svcgate
  node_ips: [192.168.67.8]
  cluster_cidrs: [10.244.0.0/16]
  service_cidrs: [10.96.0.0/12]
services:
  - name: default/web
    type: NodePort
    cluster_ip: 10.96.0.10
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080, node_port: 30001}]
    endpoints: [10.244.2.4]
)";
}

}  // namespace

TEST(Vlan, TraceTakesATaggedFrameAndShowsTheTagItLeavesWith) {
    auto t = test::tracer(trunk_config());
    const Frame syn = frame("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]");
    auto r = t->run_burst({tagged(syn, 10)}, {"syn on VLAN 10"});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].reason, DropReason::none) << drop_reason_name(r[0].reason);
    EXPECT_EQ(r[0].endpoint, "10.244.2.4:8080");
    EXPECT_EQ(r[0].port, "cluster");
    EXPECT_EQ(r[0].vlan, 20u) << "the node network's tag";
    EXPECT_NE(r[0].json().find("\"vlan\":20"), std::string::npos) << r[0].json();
    EXPECT_NE(r[0].text().find("(VLAN 20)"), std::string::npos) << r[0].text();

    auto unknown = t->run_burst({tagged(syn, 30)}, {"syn on VLAN 30"});
    ASSERT_EQ(unknown.size(), 1u);
    EXPECT_EQ(unknown[0].verdict, Verdict::drop);
    EXPECT_EQ(unknown[0].reason, DropReason::vlan_unknown) << drop_reason_name(unknown[0].reason);
}

namespace {

// `f`'s tuple as the parser reads it, its tag (if any) taken as checked.
PacketMeta meta_of(const Frame& f) {
    PacketMeta pm{};
    EXPECT_EQ(parse_packet(f.data(), static_cast<uint32_t>(f.size()), pm, ParseOptions{.tags_checked = true}),
              DropReason::none);
    return pm;
}

}  // namespace

// The worker's path on a trunk: frames dispatched with their tags on (vlan_burst), parsed past
// them, and each frame leaving with its port's tag once: a DNAT from VLAN 10 to VLAN 20 and its
// reply back (header rewritten in place, not moved), a REJECT and an ARP answer back out of the
// VLAN they came in on.
TEST(Vlan, TaggedFramesThroughTheWholePipelineLeaveWithTheirPortsTag) {
    std::string cfg = trunk_config();
    cfg.replace(cfg.find("dataplane:\n") + 11, 0,
                "  neighbors: [{ip: 10.192.0.3, mac: '02:aa:00:00:00:03'}, {ip: 192.168.67.100, mac: "
                "'02:aa:00:00:00:64'}]\n");
    cfg += R"(  - name: default/empty
    type: NodePort
    cluster_ip: 10.96.0.11
    ports: [{name: http, protocol: TCP, port: 80, node_port: 30002}]
    endpoints: []
)";
    Capture cap;  // outlives the tracer, whose output sends into it
    auto t = test::tracer(cfg);
    ASSERT_TRUE(t->status());
    WorkerCtx& ctx = t->ctx();
    const rte_ether_addr macs[2]{{{0x02, 0, 0, 0, 0, 0x01}}, {{0x02, 0, 0, 0, 0, 0x02}}};
    ctx.out.init(*ctx.out.neighbors(), *ctx.out.neighbors6(), pool(), macs, 2, cap.sink());
    const uint16_t vlans[2]{kPortOnTrunk | 10, kPortOnTrunk | 20};
    PortSoftCounters counters[2];
    ctx.out.set_trunks(vlans, counters);
    VlanMap map;
    map.port[10] = 0;
    map.port[20] = 1;
    auto burst = std::make_unique<Burst>();
    // Frames through vlan_burst as one burst: what left, its bytes.
    auto run_burst = [&](const std::vector<Frame>& in) {
        for (size_t i = 0; i < in.size(); ++i) burst->mbufs[i] = mbuf_of(in[i]);
        vlan_burst(*burst, ctx, map, static_cast<uint16_t>(in.size()), counters);
        return cap.take();
    };
    auto run = [&](const Frame& f) { return run_burst({f}); };
    const uint8_t router[6]{0x02, 0xaa, 0, 0, 0, 0x03}, client[6]{0x02, 0xaa, 0, 0, 0, 0x64};

    const Frame syn = tagged(frame("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]"), 10);
    auto out = run(syn);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(burst->pkt[0].verdict, Verdict::dnat) << drop_reason_name(burst->pkt[0].reason);
    const Frame& dnat = out[0];
    ASSERT_EQ(dnat.size(), syn.size()) << "the tag rewritten where it was, nothing moved";
    EXPECT_TRUE(std::equal(router, router + 6, dnat.begin())) << "to the router's MAC";
    EXPECT_TRUE(std::equal(macs[1].addr_bytes, macs[1].addr_bytes + 6, dnat.begin() + 6)) << "from port cluster's";
    EXPECT_EQ(Frame(dnat.begin() + 12, dnat.begin() + 18), (Frame{0x81, 0x00, 0x00, 20, 0x08, 0x00})) << "tag 20, once";
    const PacketMeta to_pod = meta_of(dnat);
    EXPECT_EQ(to_pod.l3_off, 18);
    const std::string to_pod_tuple = ctl::format_tuple(to_pod.key);
    EXPECT_EQ(to_pod_tuple.substr(to_pod_tuple.find('>')), "> 10.244.2.4:8080");
    EXPECT_EQ(counters[0].rx_bytes, syn.size() - 4) << "a VLAN port counts bytes without the tag";
    EXPECT_EQ(counters[1].tx_bytes, dnat.size());

    // The pod's answer, on VLAN 20, back to the client on VLAN 10.
    const Frame synack = tagged(frame(ctl::format_tuple(to_pod.key.reversed()) + " [S.]"), 20);
    out = run(synack);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(burst->pkt[0].verdict, Verdict::reply) << drop_reason_name(burst->pkt[0].reason);
    EXPECT_TRUE(std::equal(client, client + 6, out[0].begin()));
    EXPECT_EQ(Frame(out[0].begin() + 12, out[0].begin() + 18), (Frame{0x81, 0x00, 0x00, 10, 0x08, 0x00}));
    EXPECT_EQ(ctl::format_tuple(meta_of(out[0]).key), "tcp 192.168.67.8:30001 > 192.168.67.100:40000");

    // A Service without endpoints: the REJECT goes back out of VLAN 10, tagged once.
    out = run(tagged(frame("tcp 192.168.67.100:40001 > 192.168.67.8:30002 [S]"), 10));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(burst->pkt[0].verdict, Verdict::reject);
    EXPECT_EQ(Frame(out[0].begin() + 12, out[0].begin() + 16), (Frame{0x81, 0x00, 0x00, 10}));
    EXPECT_FALSE(vlan_tagged(out[0].data() + 4)) << "no second tag";
    EXPECT_EQ(meta_of(out[0]).l3_off, 18);

    // An ARP request for port cluster's address on VLAN 20: answered on VLAN 20.
    const uint8_t any[6]{};
    const Frame who = test::arp_frame(RTE_ARP_OP_REQUEST, router, "10.192.0.3", "10.192.0.2", any);
    out = run(tagged(who, 20));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(std::equal(router, router + 6, out[0].begin()));
    EXPECT_EQ(Frame(out[0].begin() + 12, out[0].begin() + 18), (Frame{0x81, 0x00, 0x00, 20, 0x08, 0x06}));
    const auto* reply = reinterpret_cast<const rte_arp_hdr*>(out[0].data() + 18);
    EXPECT_EQ(rte_be_to_cpu_16(reply->arp_opcode), RTE_ARP_OP_REPLY);
    EXPECT_TRUE(std::equal(macs[1].addr_bytes, macs[1].addr_bytes + 6, reply->arp_data.arp_sha.addr_bytes));

    // A burst of three VLANs: each port's frames on their own, in the order of their first; the
    // unknown ID counted and not forwarded.
    const uint64_t unknown = ctx.counters.drops[static_cast<unsigned>(DropReason::vlan_unknown)];
    out = run_burst({tagged(frame("tcp 192.168.67.100:40000 > 192.168.67.8:30001 [.]"), 10), tagged(who, 20),
                     tagged(frame("tcp 192.168.67.100:40002 > 192.168.67.8:30001 [S]"), 30)});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(Frame(out[0].begin() + 12, out[0].begin() + 18), (Frame{0x81, 0x00, 0x00, 20, 0x08, 0x00}))
        << "the ACK of the connection above, to its pod on VLAN 20";
    EXPECT_EQ(Frame(out[1].begin() + 12, out[1].begin() + 18), (Frame{0x81, 0x00, 0x00, 20, 0x08, 0x06}))
        << "the ARP answer on VLAN 20";
    EXPECT_EQ(ctx.counters.drops[static_cast<unsigned>(DropReason::vlan_unknown)], unknown + 1);
    ctx.out.set_trunks(nullptr, nullptr);
}

// A routed frame that came in tagged leaves a port without a tag (the trunk's untagged port, a
// port alone on its device) untagged: its tag taken off, its MACs written after.
TEST(Vlan, OutputTakesTheTagOffWhereThePortHasNone) {
    TrunkOutput o({kPortOnTrunk | 10, kPortOnTrunk, 0});  // VLAN 10, the trunk's untagged, alone
    const Frame syn = frame("tcp 10.192.0.2:61000 > 10.244.2.4:8080 [S]");
    for (uint16_t port : {1, 2}) o.route(tagged(syn, 10), port);
    output_flush(o.ctx);
    for (rte_mbuf* m : o.cap.sent) EXPECT_EQ(m->pkt_len, syn.size());
    const std::vector<Frame> out = o.cap.take();
    ASSERT_EQ(out.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        Frame want = syn;
        std::memcpy(want.data(), kPod.addr_bytes, 6);
        std::memcpy(want.data() + 6, o.macs[i + 1].addr_bytes, 6);
        EXPECT_EQ(out[i], want) << "port " << i + 1;
    }
    EXPECT_EQ(o.counters[1].tx_bytes, syn.size());
}

namespace {

std::vector<ctl::ConfigIssue> errors_of(const std::string& ports) {
    try {
        (void)ctl::load_config_string("dataplane:\n  ports:\n" + ports, "t.yaml");
    } catch (const ctl::ConfigError& e) {
        return e.issues;
    }
    return {};
}

}  // namespace

TEST(Vlan, ConfigRefusesOneDeviceVlanTwiceAndIdsOutOfRange) {
    EXPECT_TRUE(errors_of("    - {name: a, device: trunk0}\n"
                          "    - {name: b, device: trunk0, vlan: 10}\n"
                          "    - {name: c, device: trunk0, vlan: 4094}\n")
                    .empty());
    auto twice = errors_of(
        "    - {name: a, device: trunk0, vlan: 10}\n"
        "    - {name: b, device: trunk0, vlan: 10}\n");
    ASSERT_EQ(twice.size(), 1u);
    EXPECT_EQ(twice[0].path, "dataplane.ports[1].vlan");
    EXPECT_NE(twice[0].str().find("port a is VLAN 10 of device trunk0 already"), std::string::npos) << twice[0].str();
    auto untagged = errors_of(
        "    - {name: a, device: trunk0}\n"
        "    - {name: b, device: trunk0}\n");
    ASSERT_EQ(untagged.size(), 1u);
    EXPECT_NE(untagged[0].str().find("untagged port of device trunk0 already"), std::string::npos) << untagged[0].str();
    EXPECT_TRUE(errors_of("    - {name: a, device: trunk0, vlan: 10}\n"
                          "    - {name: b, device: trunk1, vlan: 10}\n")
                    .empty())
        << "one VLAN ID on two devices is two networks";
    for (const char* bad : {"0", "4095", "x"}) {
        auto e = errors_of(std::string("    - {name: a, device: trunk0, vlan: ") + bad + "}\n");
        ASSERT_EQ(e.size(), 1u) << bad;
        EXPECT_EQ(e[0].path, "dataplane.ports[0].vlan") << bad;
    }
    auto macs = errors_of(
        "    - {name: a, device: trunk0, mac: '02:00:00:00:00:01'}\n"
        "    - {name: b, device: trunk0, vlan: 10, mac: '02:00:00:00:00:02'}\n");
    ASSERT_EQ(macs.size(), 1u);
    EXPECT_EQ(macs[0].path, "dataplane.ports[1].mac");
}
