// The replication protocol between gateways (issue 19): datagrams sealed with the shared key,
// opened only when the MAC verifies and the sequence number is new; everything else a counted drop
// that moves nothing.
#include <fstream>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "dataplane/flow/flow_record.h"
#include "control/ha/state_file.h"
#include "control/ha/sync_proto.h"
#include "control/config/yaml_config.h"
#include "../fuzz/sync_fuzz_config.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::ctl::sync;

namespace {

constexpr uint32_t kSender = 0x11223344;  // the peer id the tests' datagrams come from

Key key_of(uint8_t b) {
    Key k;
    k.fill(b);
    return k;
}

struct Opened {
    bool ok;
    Drop why;
    Header h;
    std::span<const uint8_t> body;
};

Opened open_dgram(const std::vector<uint8_t>& d, const Key& k, ReplayWindow& w) {
    Opened o{};
    o.ok = open(d.data(), d.size(), k, kSender, w, o.h, o.body, o.why);
    return o;
}

std::vector<uint8_t> seal_dgram(Sealer& s, Type t, uint16_t n, const std::vector<uint8_t>& body) {
    std::vector<uint8_t> out(kMaxDatagram);
    out.resize(s.seal(t, n, body, out.data()));
    return out;
}

std::vector<uint8_t> hello_body(uint8_t n_addrs = 0) {
    Hello h{.flags = 0, .flows = 1, .n_addrs = n_addrs};
    std::vector<uint8_t> b(kHelloMax);
    b.resize(encode_hello(h, b.data()));
    return b;
}

// Flow records of a few real flows (a tracer's), concatenated.
std::vector<uint8_t> some_records(unsigned& count) {
    auto t = test::tracer(test::gateway_config(R"(
  - name: default/web
    type: NodePort
    cluster_ip: 10.107.169.79
    ports: [{name: http, protocol: TCP, port: 80, node_port: 30001}]
    endpoints: [{ip: 10.244.2.4}, {ip: 10.244.3.6}]
)"),
                          3);
    for (int port = 40000; port < 40010; ++port) {
        t->run_spec(fmt::format("tcp 192.168.67.100:{} > 192.168.67.8:30001 [S]", port));
        t->run_spec("reply 1 [S.]");
        t->forget_history();
    }
    std::vector<uint8_t> out;
    count = 0;
    for (uint32_t id = 0; id < t->flows().capacity(); ++id) {
        const auto& f = t->flows().flow(id);
        if (!f.live.load()) continue;
        uint8_t rec[dp::kFlowRecordV4];
        dp::encode_flow(f, t->ctx().now, rec);
        out.insert(out.end(), rec, rec + sizeof rec);
        ++count;
    }
    return out;
}

}  // namespace

TEST(Sync, FlowsGoThroughWhole) {
    test::ensure_eal();
    unsigned n = 0;
    const auto body = some_records(n);
    ASSERT_EQ(n, 10u);
    Sealer s(key_of(7), kSender, 1000);
    const auto d = seal_dgram(s, Type::flows, static_cast<uint16_t>(n), body);
    ASSERT_EQ(d.size(), kHeaderBytes + body.size() + kMacBytes);
    ReplayWindow w;
    const Opened o = open_dgram(d, key_of(7), w);
    ASSERT_TRUE(o.ok) << drop_name(o.why);
    EXPECT_EQ(o.h.type, Type::flows);
    EXPECT_EQ(o.h.epoch, 1000u);
    EXPECT_EQ(o.h.seq, 1u);
    unsigned seen = 0;
    for_each_flow(o.body, [&](const dp::FlowRecord& r) {
        // The record as it was sent.
        dp::FlowRecord sent;
        ASSERT_EQ(dp::decode_flow(body.data() + seen * dp::kFlowRecordV4, dp::kFlowRecordV4, sent), dp::kFlowRecordV4);
        EXPECT_EQ(r.family, dp::Family::v4);
        EXPECT_TRUE(r.v4.key[0] == sent.v4.key[0]);
        EXPECT_TRUE(r.v4.key[1] == sent.v4.key[1]);
        EXPECT_EQ(r.v4.state, sent.v4.state);
        EXPECT_EQ(r.v4.svc_id, sent.v4.svc_id);
        ++seen;
    });
    EXPECT_EQ(seen, n);
}

TEST(Sync, AWrongKeyOrAnyChangedByteIsRefusedBeforeAnythingIsRead) {
    test::ensure_eal();
    unsigned n = 0;
    const auto body = some_records(n);
    Sealer s(key_of(7), kSender, 1000);
    const auto d = seal_dgram(s, Type::flows, static_cast<uint16_t>(n), body);
    ReplayWindow w;
    EXPECT_EQ(open_dgram(d, key_of(8), w).why, Drop::bad_mac);
    for (size_t i = 0; i < d.size(); ++i) {
        auto x = d;
        x[i] ^= 0x40;
        const Opened o = open_dgram(x, key_of(7), w);
        EXPECT_FALSE(o.ok) << "byte " << i;
        const Drop want = i < 4 ? Drop::bad_magic : i == 4 ? Drop::bad_version : Drop::bad_mac;
        EXPECT_EQ(o.why, want) << "byte " << i;
    }
    for (size_t len = 0; len < d.size(); ++len) {
        std::vector<uint8_t> x(d.begin(), d.begin() + static_cast<long>(len));
        const Opened o = open_dgram(x, key_of(7), w);
        EXPECT_FALSE(o.ok) << len;
        EXPECT_TRUE(o.why == Drop::truncated || o.why == Drop::bad_mac) << len << ": " << drop_name(o.why);
    }
    EXPECT_EQ(w.epoch(), 0u) << "nothing refused moved the window";
    EXPECT_TRUE(open_dgram(d, key_of(7), w).ok) << "and the untouched datagram still goes through";
}

TEST(Sync, ReplayedDatagramsAreRefusedAndForgedOnesCannotMoveTheWindow) {
    test::ensure_eal();
    const Key k = key_of(1);
    Sealer s(k, kSender, 5000);
    std::vector<std::vector<uint8_t>> d;
    for (int i = 0; i < 100; ++i) d.push_back(seal_dgram(s, Type::hello, 0, hello_body()));
    ReplayWindow w;
    EXPECT_TRUE(open_dgram(d[9], k, w).ok);
    EXPECT_EQ(open_dgram(d[9], k, w).why, Drop::replayed) << "the same datagram again";
    EXPECT_TRUE(open_dgram(d[3], k, w).ok) << "late, within the window: taken once";
    EXPECT_EQ(open_dgram(d[3], k, w).why, Drop::replayed);
    EXPECT_TRUE(open_dgram(d[90], k, w).ok);
    EXPECT_EQ(open_dgram(d[20], k, w).why, Drop::replayed) << "older than the window (seq 21 against 91)";
    EXPECT_TRUE(open_dgram(d[40], k, w).ok) << "seq 41 is within 64 of 91";
    // A forged datagram claiming a far higher sequence number (and a later epoch) fails its MAC
    // and leaves the window where it was.
    Sealer forger(key_of(2), kSender, 9000);
    for (int i = 0; i < 500; ++i) seal_dgram(forger, Type::hello, 0, hello_body());
    EXPECT_EQ(open_dgram(seal_dgram(forger, Type::hello, 0, hello_body()), k, w).why, Drop::bad_mac);
    EXPECT_TRUE(open_dgram(d[91], k, w).ok) << "the real sender goes on";
    // The sender restarts: a new, later epoch starts a new window; the old epoch is over.
    Sealer again(k, kSender, 6000);
    const auto fresh = seal_dgram(again, Type::hello, 0, hello_body());
    EXPECT_TRUE(open_dgram(fresh, k, w).ok);
    EXPECT_EQ(w.epoch(), 6000u);
    EXPECT_EQ(open_dgram(d[99], k, w).why, Drop::replayed) << "a datagram of the previous epoch";
    // Another gateway of the group (same key) whose datagram is replayed from this peer's address:
    // its sender id is not this peer's, and even a later epoch moves nothing.
    Sealer other(k, kSender + 1, 99000);
    EXPECT_EQ(open_dgram(seal_dgram(other, Type::hello, 0, hello_body()), k, w).why, Drop::wrong_peer);
    EXPECT_EQ(w.epoch(), 6000u) << "the window did not move";
    EXPECT_NE(peer_id(ctl::parse_ip("10.193.0.11")->a.b, 7400), peer_id(ctl::parse_ip("10.193.0.12")->a.b, 7400));
    EXPECT_NE(peer_id(ctl::parse_ip("10.193.0.11")->a.b, 7400), peer_id(ctl::parse_ip("10.193.0.11")->a.b, 7401));
}

TEST(Sync, ABodyThatDoesNotDecodeIsMalformedEvenWithAGoodMac) {
    test::ensure_eal();
    unsigned n = 0;
    auto body = some_records(n);
    const Key k = key_of(3);
    Sealer s(k, kSender, 1);
    ReplayWindow w;
    EXPECT_EQ(open_dgram(seal_dgram(s, Type::flows, static_cast<uint16_t>(n + 1), body), k, w).why, Drop::malformed)
        << "a count the body does not hold";
    auto bad = body;
    bad[dp::kFlowRecordV4 * 3] = 9;  // the fourth record's family
    EXPECT_EQ(open_dgram(seal_dgram(s, Type::flows, static_cast<uint16_t>(n), bad), k, w).why, Drop::malformed);
    body.pop_back();
    EXPECT_EQ(open_dgram(seal_dgram(s, Type::flows, static_cast<uint16_t>(n), body), k, w).why, Drop::malformed)
        << "a record cut short";
    EXPECT_EQ(open_dgram(seal_dgram(s, static_cast<Type>(9), 0, {}), k, w).why, Drop::malformed) << "an unknown type";
    EXPECT_EQ(open_dgram(seal_dgram(s, Type::hello, 0, {1, 2}), k, w).why, Drop::malformed) << "a short hello";
    EXPECT_EQ(w.epoch(), 0u) << "refused: the window did not move";
}

TEST(Sync, HelloRoundTrips) {
    uint8_t b[kHelloMax];
    Hello in{
        .flags = kHelloStarting, .flows = 123456, .copied_for = 0x0102030405060708, .to = 0xa1b2c3d4, .n_addrs = 2};
    in.addrs[0] = *ctl::parse_ip("10.192.0.12");
    in.addrs[1] = *ctl::parse_ip("fd00:192::12");
    const size_t n = encode_hello(in, b);
    EXPECT_EQ(n, hello_size(2));
    Hello h;
    ASSERT_TRUE(decode_hello(std::span<const uint8_t>(b, n), h));
    EXPECT_EQ(h.flags, kHelloStarting);
    EXPECT_EQ(h.flows, 123456u);
    EXPECT_EQ(h.copied_for, 0x0102030405060708u);
    EXPECT_EQ(h.to, 0xa1b2c3d4u);
    ASSERT_EQ(h.n_addrs, 2);
    EXPECT_EQ(ctl::format_ip(h.addrs[0]), "10.192.0.12");
    EXPECT_EQ(ctl::format_ip(h.addrs[1]), "fd00:192::12");
    EXPECT_FALSE(decode_hello(std::span<const uint8_t>(b, n - 1), h)) << "cut short";
    b[kHelloFixed - 1] = kHelloAddresses + 1;
    EXPECT_FALSE(decode_hello(std::span<const uint8_t>(b, hello_size(kHelloAddresses + 1)), h)) << "too many addresses";
}

// The fuzzer's seeds are sealed in Python (tests/fuzz/make_corpus.py: HMAC-SHA-512 cut to 256
// bits): libsodium's crypto_auth must agree, and the records must import into the fuzzer's
// Service (their svc_id computed there as the snapshot builder does).
TEST(Sync, ADatagramSealedElsewhereOpensAndItsFlowsImport) {
    test::ensure_eal();
    std::ifstream f(std::string(SVCGATE_SOURCE_DIR) + "/tests/fuzz/corpus/sync/dgram-flows", std::ios::binary);
    std::vector<uint8_t> d{std::istreambuf_iterator<char>(f), {}};
    ASSERT_GT(d.size(), 1u);
    d.erase(d.begin());  // the fuzzer's mode byte
    ReplayWindow w;
    Opened o{};
    o.ok = open(d.data(), d.size(), key_of(test::kSyncFuzzKeyByte), test::kSyncFuzzSender, w, o.h, o.body, o.why);
    ASSERT_TRUE(o.ok) << drop_name(o.why);
    EXPECT_EQ(o.h.records, 6u);
    auto t = test::tracer(test::kSyncFuzzConfig);
    ctl::FlowImporter imp(t->snapshot(), t->slots().table(), t->flows(), &t->flows6(), t->flows().owners());
    unsigned inserted = 0;
    uint32_t turn = 0;
    for_each_flow(o.body, [&](const dp::FlowRecord& r) {
        dp::FlowRecord c = r;
        inserted += imp.import(c, turn++, t->ctx().now, 0) == ctl::FlowImporter::Outcome::inserted;
    });
    EXPECT_EQ(inserted, 6u);
    auto mid = t->run_spec("tcp 192.168.67.100:40001 > 192.168.67.8:30001 [.]");
    EXPECT_FALSE(mid.new_flow) << mid.text();
    EXPECT_EQ(mid.out.value_or(""), "tcp 10.192.0.2:1025 > 10.244.2.4:80") << "the replica's endpoint and port";
}
