// Flows across a restart (issue 19, item 4): the flow record codec, the state file written and
// read back into another process's tables (here: another Tracer), and every reason a file is
// refused.
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "dataplane/flow/flow_record.h"
#include "control/ha/state_file.h"
#include "dataplane/base/static_hash.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;
using O = ctl::FlowImporter::Outcome;

namespace {

std::string config(const std::string& endpoints4 = "{ip: 10.244.2.4}, {ip: 10.244.2.6}, {ip: 10.244.3.6}") {
    return test::dual_stack_config(R"(
  - name: default/web
    type: NodePort
    cluster_ips: [10.107.169.79, 'fd00:96::79']
    ports: [{name: http, protocol: TCP, port: 80, node_port: 30001}, {name: dns, protocol: UDP, port: 53, node_port: 30053}]
    endpoints: [)" + endpoints4 + R"(, {ip: 'fd00:244:2::4'}, {ip: 'fd00:244:3::6'}]
  - name: default/sticky
    cluster_ips: [10.96.100.1]
    session_affinity: ClientIP
    ports: [{name: http, protocol: TCP, port: 80}]
    endpoints: [{ip: 10.244.2.4}, {ip: 10.244.3.6}]
)");
}

struct TempFile {
    std::string path;
    TempFile() {
        char t[] = "/tmp/svcgate-flows-XXXXXX";
        const int fd = mkstemp(t);
        close(fd);
        path = t;
        unlink(t);  // the tests decide whether it exists
    }
    ~TempFile() {
        unlink(path.c_str());
        unlink((path + ".tmp").c_str());
    }
    bool exists() const { return access(path.c_str(), F_OK) == 0; }
    std::vector<uint8_t> read() const {
        std::ifstream f(path, std::ios::binary);
        return {std::istreambuf_iterator<char>(f), {}};
    }
    void write(const std::vector<uint8_t>& b) const {
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
};

// A file changed in place, its checksum made right again (what a forger or a bug would do).
void reseal(std::vector<uint8_t>& b) {
    store_le(b.data() + b.size() - 4, crc32c_bytes(b.data(), b.size() - 4, 0xffffffff), 4);
}

constexpr uint64_t kUnix = 1'800'000'000;

// A client's connection through the NodePort (masqueraded), to its end of the handshake.
struct Conn {
    int port;
    std::string endpoint;  // ip:port
    std::string out;       // the SYN as it left (masquerade source and port)
};

std::vector<Conn> open_connections(ctl::Tracer& t, int n, const std::string& client = "192.168.67.100",
                                   const std::string& vip = "192.168.67.8:30001") {
    std::vector<Conn> out;
    for (int port = 41000; port < 41000 + n; ++port) {
        auto syn = t.run_spec(fmt::format("tcp {}:{} > {} [S]", client, port, vip));
        EXPECT_EQ(syn.verdict, Verdict::dnat) << syn.text();
        auto synack = t.run_spec("reply 1 [S.]");
        EXPECT_EQ(synack.verdict, Verdict::reply) << synack.text();
        EXPECT_EQ(t.run_spec(fmt::format("tcp {}:{} > {} [.]", client, port, vip)).verdict, Verdict::dnat);
        out.push_back({port, syn.endpoint.value_or(""), syn.out.value_or("")});
        t.forget_history();
    }
    return out;
}

uint32_t restore(ctl::Tracer& t, const TempFile& f, const std::string& identity, ctl::RestoreResult& r,
                 uint64_t now_unix = kUnix, uint32_t max_age = 600, std::string* err = nullptr) {
    ctl::FlowImporter imp(t.snapshot(), t.slots().table(), t.flows(), &t.flows6(), t.flows().owners());
    const ctl::Status s = ctl::restore_flow_state(f.path, identity, max_age, imp, t.ctx().now, now_unix, r);
    t.ctx().snat_cursor = imp.snat_cursor(0);  // as the daemon sets its workers' (one here)
    if (err)
        *err = s.error();
    else
        EXPECT_TRUE(s.ok()) << s.error();
    return r.outcome[static_cast<unsigned>(O::inserted)];
}

ctl::Status save(ctl::Tracer& t, const TempFile& f, const std::string& identity, uint32_t& written) {
    return ctl::save_flow_state(f.path, identity, t.flows(), &t.flows6(), t.ctx().now, kUnix, written);
}

}  // namespace

// The state file's checksum (and a sync peer id) covers every byte, whatever the length: a
// file's identity makes its length any number.
TEST(FlowState, TheChecksumCoversEveryByteOfAnyLength) {
    for (size_t n = 1; n <= 19; ++n) {
        std::vector<uint8_t> b(n, 0x5a);
        const uint32_t before = crc32c_bytes(b.data(), n, 0xffffffff);
        for (size_t i = 0; i < n; ++i) {
            b[i] ^= 1;
            EXPECT_NE(crc32c_bytes(b.data(), n, 0xffffffff), before) << "byte " << i << " of " << n;
            b[i] ^= 1;
        }
    }
}

TEST(FlowRecord, EveryKindOfFlowRoundTrips) {
    test::ensure_eal();
    const auto cfg = ctl::load_config_string(config(), "a.yaml");
    auto t = test::tracer(config(), 3);
    open_connections(*t, 3);
    t->run_spec("udp 192.168.67.100:5353 > 192.168.67.8:30053");
    t->run_spec("reply 1");
    t->run_spec("tcp [fd00:67::100]:42000 > [fd00:96::79]:80 [S]");
    t->run_spec("tcp 10.244.2.9:43000 > 10.96.100.1:80 [S]");  // an affinity record and its flow
    t->advance(7);
    unsigned seen = 0, kinds_affinity = 0, v6 = 0, masq = 0;
    auto check_table = [&](auto& table) {
        using K = typename std::remove_reference_t<decltype(table)>::Key;
        for (uint32_t id = 0; id < table.capacity(); ++id) {
            const auto& f = table.flow(id);
            if (!f.live.load()) continue;
            uint8_t buf[kFlowRecordMax];
            encode_flow(f, t->ctx().now, buf);
            FlowRecord r;
            ASSERT_EQ(decode_flow(buf, sizeof buf, r), flow_record_size<K>());
            const auto& in = [&]() -> const BasicFlowInit<K>& {
                if constexpr (sizeof(K) == sizeof(FlowKey))
                    return r.v4;
                else
                    return r.v6;
            }();
            EXPECT_EQ(r.family, sizeof(K) == sizeof(FlowKey) ? Family::v4 : Family::v6);
            EXPECT_TRUE(in.key[0] == f.key[0]);
            EXPECT_TRUE(in.key[1] == f.key[1]);
            EXPECT_EQ(in.kind, f.kind);
            EXPECT_EQ(in.flags, f.flags);
            EXPECT_EQ(in.state, f.state.load());
            EXPECT_EQ(in.svc_id, f.svc_id);
            EXPECT_EQ(r.idle, 7u);
            if (f.kind == FlowKind::affinity) {
                EXPECT_EQ(in.target, f.pinned());
                EXPECT_EQ(in.aux, f.aux);
                ++kinds_affinity;
            } else {
                EXPECT_EQ(in.target, 0u) << "slots are this process's: not carried";
            }
            v6 += r.family == Family::v6;
            masq += (f.flags & kFlowMasq) != 0;
            ++seen;
        }
    };
    check_table(t->flows());
    check_table(t->flows6());
    EXPECT_EQ(seen, 7u);  // 3 TCP + UDP + IPv6 + affinity's flow and record
    EXPECT_EQ(kinds_affinity, 1u);
    EXPECT_EQ(v6, 1u);
    EXPECT_EQ(masq, 6u);  // the NodePort ones, the off-cluster IPv6 client, the pod one-armed to its endpoint
}

TEST(FlowRecord, TheDecoderRefusesWhatTheTableCouldNotHold) {
    test::ensure_eal();
    auto t = test::tracer(config(), 3);
    open_connections(*t, 1);
    uint8_t good[kFlowRecordV4];
    uint32_t id = 0;
    while (!t->flows().flow(id).live.load()) ++id;
    encode_flow(t->flows().flow(id), t->ctx().now, good);
    FlowRecord r;
    ASSERT_EQ(decode_flow(good, sizeof good, r), kFlowRecordV4);
    for (size_t n = 0; n < sizeof good; ++n) EXPECT_EQ(decode_flow(good, n, r), 0u) << "cut to " << n << " bytes";
    auto bad = [&](size_t at, uint8_t v, const char* what) {
        uint8_t b[kFlowRecordV4];
        std::memcpy(b, good, sizeof b);
        b[at] = v;
        EXPECT_EQ(decode_flow(b, sizeof b, r), 0u) << what;
    };
    bad(0, 5, "family 5");
    bad(0, 0, "family 0");
    bad(1, 2, "kind 2");
    bad(1, 1, "an affinity record with two tuples");
    bad(2, 0x08, "an unknown flag");
    bad(2, kFlowMasq | kFlowPreserved, "masqueraded and preserved at once");
    {
        uint8_t b[kFlowRecordV4];
        std::memcpy(b, good, sizeof b);
        b[2] = kFlowPreserved;  // client_ip preserve's flows travel too
        EXPECT_EQ(decode_flow(b, sizeof b, r), kFlowRecordV4);
        EXPECT_EQ(r.v4.flags, kFlowPreserved);
    }
    bad(3, FlowState::kGone | 3, "a flow marked gone");
    bad(3, 0x3f, "a TCP state past the last");
    bad(8, 1, "aux set on a NAT flow");
    bad(16, 1, "a pinned endpoint on a NAT flow");
    bad(kFlowRecordHead + 12, 17, "key[0] UDP, key[1] TCP");
    {
        uint8_t b[kFlowRecordV4];
        std::memcpy(b, good, sizeof b);
        b[3] = 0;
        b[kFlowRecordHead + 12] = b[kFlowRecordHead + 16 + 12] = 58;
        EXPECT_EQ(decode_flow(b, sizeof b, r), 0u) << "ICMPv6 in an IPv4 record";
        b[kFlowRecordHead + 12] = b[kFlowRecordHead + 16 + 12] = 17;
        EXPECT_EQ(decode_flow(b, sizeof b, r), kFlowRecordV4)
            << "the same bytes as UDP decode (so the case above can fail)";
    }
    bad(kFlowRecordHead + 13, 1, "key[0]'s padding");
    bad(kFlowRecordHead + 16 + 15, 1, "key[1]'s padding");
    // A family byte that says IPv6 makes the IPv4 record too short for it.
    bad(0, 6, "an IPv4 record read as IPv6");
}

TEST(FlowState, ARestartKeepsEveryConnectionOnItsEndpointAndMasqueradePort) {
    test::ensure_eal();
    const auto cfg = ctl::load_config_string(config(), "a.yaml");
    const std::string id = ctl::gateway_identity(cfg);
    TempFile file;
    auto a = test::tracer(config(), 3);
    const auto conns = open_connections(*a, 24);
    std::set<std::string> endpoints;
    for (const Conn& c : conns) endpoints.insert(c.endpoint);
    ASSERT_EQ(endpoints.size(), 3u) << "the connections spread over the endpoints";
    a->run_spec("udp 192.168.67.100:5353 > 192.168.67.8:30053");
    const auto udp_reply = a->run_spec("reply 1");
    ASSERT_EQ(udp_reply.verdict, Verdict::reply);
    a->forget_history();
    const auto v6 = a->run_spec("tcp [fd00:67::100]:42000 > [fd00:96::79]:80 [S]");
    ASSERT_EQ(a->run_spec("reply 1 [S.]").verdict, Verdict::reply);
    a->forget_history();
    uint32_t written = 0;
    ASSERT_TRUE(save(*a, file, id, written).ok());
    EXPECT_EQ(written, 26u);
    EXPECT_FALSE(access((file.path + ".tmp").c_str(), F_OK) == 0) << "written through a temporary, renamed";

    // The next process: another seed, so a fresh choice would differ.
    auto b = test::tracer(config(), 99);
    ctl::RestoreResult r;
    EXPECT_EQ(restore(*b, file, id, r), 26u);
    EXPECT_EQ(r.records, 26u);
    EXPECT_FALSE(file.exists()) << "a state file is good for one start";
    for (const Conn& c : conns) {
        auto mid = b->run_spec(fmt::format("tcp 192.168.67.100:{} > 192.168.67.8:30001 [.]", c.port));
        EXPECT_EQ(mid.verdict, Verdict::dnat) << mid.text();
        EXPECT_FALSE(mid.new_flow) << "found, not picked up again";
        EXPECT_EQ(mid.endpoint.value_or(""), c.endpoint);
        EXPECT_EQ(mid.out.value_or(""), c.out) << "same masquerade address and port";
        EXPECT_EQ(mid.service.value_or(""), "default/web:http");
        auto back = b->run_spec("reply 1 [.]");
        EXPECT_EQ(back.verdict, Verdict::reply) << back.text();
        EXPECT_EQ(back.out.value_or(""), fmt::format("tcp 192.168.67.8:30001 > 192.168.67.100:{}", c.port));
        b->forget_history();
    }
    auto udp = b->run_spec("udp 192.168.67.100:5353 > 192.168.67.8:30053");
    EXPECT_FALSE(udp.new_flow);
    auto mid6 = b->run_spec("tcp [fd00:67::100]:42000 > [fd00:96::79]:80 [.]");
    EXPECT_EQ(mid6.endpoint, v6.endpoint);
    EXPECT_FALSE(mid6.new_flow);
    // Each endpoint's active flows count the restored ones, as least-connection needs.
    for (const ServicePort& sp : b->snapshot().services)
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i) {
            const uint32_t slot = b->snapshot().endpoints[i].slot;
            const auto& as = a->snapshot();
            int32_t want = 0;
            for (const ServicePort& spa : as.services)
                for (uint32_t j = spa.ep_first; j < spa.ep_first + spa.ep_count; ++j)
                    if (spa.id == sp.id && as.endpoints[j].key() == b->snapshot().endpoints[i].key())
                        want = a->slots().active(as.endpoints[j].slot);
            EXPECT_EQ(b->slots().active(slot), want) << b->snapshot().info(&sp - &b->snapshot().services[0]).name;
        }
    // New connections take masquerade ports past the restored ones (the cursor the importer
    // found), not walking through them.
    int highest = 0;
    for (const Conn& c : conns) highest = std::max(highest, std::stoi(c.out.substr(c.out.find(':') + 1)));
    ASSERT_GE(highest, 1024 + 23);
    for (int port = 50000; port < 50040; ++port) {
        auto n = b->run_spec(fmt::format("tcp 192.168.67.100:{} > 192.168.67.8:30001 [S]", port));
        EXPECT_EQ(n.verdict, Verdict::dnat) << n.text();
        EXPECT_TRUE(n.new_flow);
        const std::string out = n.out.value_or("");
        EXPECT_GT(std::stoi(out.substr(out.find(':') + 1)), highest) << out;
        b->forget_history();
    }
}

TEST(FlowState, FlowsWhoseEndpointLeftOrWhoseTimeoutPassedAreLeftOut) {
    test::ensure_eal();
    const std::string id = ctl::gateway_identity(ctl::load_config_string(config(), "a.yaml"));
    TempFile file;
    auto a = test::tracer(config(), 3);
    const auto conns = open_connections(*a, 24);
    a->run_spec("udp 192.168.67.100:5353 > 192.168.67.8:30053");
    a->run_spec("reply 1");
    a->forget_history();
    uint32_t written = 0;
    ASSERT_TRUE(save(*a, file, id, written).ok());
    unsigned to_removed = 0;
    for (const Conn& c : conns) to_removed += c.endpoint == "10.244.2.4:80";
    ASSERT_GT(to_removed, 0u);
    // Without 10.244.2.4, and 200 s later: past UDP's replied timeout (120 s), not TCP's.
    auto b = test::tracer(config("{ip: 10.244.2.6}, {ip: 10.244.3.6}"), 5);
    ctl::RestoreResult r;
    restore(*b, file, id, r, kUnix + 200);
    EXPECT_EQ(r.age, 200u);
    EXPECT_EQ(r.outcome[static_cast<unsigned>(O::gone)], to_removed);
    EXPECT_EQ(r.outcome[static_cast<unsigned>(O::expired)], 1u) << "the UDP flow";
    EXPECT_EQ(r.outcome[static_cast<unsigned>(O::inserted)], 24u - to_removed);
    EXPECT_EQ(b->flows().live_total(), 24u - to_removed);
}

TEST(FlowState, AFileThatIsNotThisGatewaysFreshOneIsRefusedAndLeftWhereItIs) {
    test::ensure_eal();
    const std::string id = ctl::gateway_identity(ctl::load_config_string(config(), "a.yaml"));
    TempFile file;
    auto a = test::tracer(config(), 3);
    open_connections(*a, 4);
    uint32_t written = 0;
    ASSERT_TRUE(save(*a, file, id, written).ok());
    const std::vector<uint8_t> good = file.read();

    struct Case {
        const char* what;
        std::function<void(std::vector<uint8_t>&)> change;
        std::string identity;
        uint64_t now_unix;
        std::string expect;  // in the error
    };
    const std::string other = ctl::gateway_identity(ctl::load_config_string(
        std::string(config()).replace(config().find("10.192.0.2/24"), 13, "10.192.0.9/24"), "b.yaml"));
    ASSERT_NE(other, id);
    const std::vector<Case> cases = {
        {"another gateway's", nullptr, other, kUnix, "written by another gateway"},
        {"stale", nullptr, id, kUnix + 601, "stale: written 601 s ago"},
        {"from the future", nullptr, id, kUnix - 3600, "in the future"},
        {"a changed byte", [](auto& b) { b[b.size() / 2] ^= 1; }, id, kUnix, "checksum mismatch"},
        {"cut short", [](auto& b) { b.resize(b.size() - 30); }, id, kUnix, "checksum mismatch"},
        {"tiny", [](auto& b) { b.resize(10); }, id, kUnix, "not a svcgate flow state file"},
        {"not one", [](auto& b) { b.assign(100, 'x'); }, id, kUnix, "not a svcgate flow state file"},
        {"another version",
         [](auto& b) {
             b[8] = 2;
             reseal(b);
         },
         id, kUnix, "format version 2"},
        {"a header that overstates its identity",
         [](auto& b) {
             b[14] = 0x7f;
             reseal(b);
         },
         id, kUnix, "cut short"},
        {"a malformed flow",
         [&](auto& b) {
             b[32 + id.size() + 1] = 9;
             reseal(b);
         },
         id, kUnix, "flow 1 (at byte"},
        {"a wrong count",
         [](auto& b) {
             b[24] += 1;
             reseal(b);
         },
         id, kUnix, "the header counts 5 flows, the file holds 4"},
        {"a count of four billion",
         [](auto& b) {
             b[24] = b[25] = b[26] = b[27] = 0xff;
             reseal(b);
         },
         id, kUnix, "the header counts 4294967295 flows, the file holds 4"},
    };
    for (const Case& c : cases) {
        std::vector<uint8_t> b = good;
        if (c.change) c.change(b);
        file.write(b);
        auto t = test::tracer(config(), 4);
        ctl::RestoreResult r;
        std::string err;
        restore(*t, file, c.identity, r, c.now_unix, 600, &err);
        EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": " << err;
        EXPECT_EQ(t->flows().live_total(), 0u) << c.what << ": nothing of a refused file is taken";
        EXPECT_TRUE(file.exists()) << c.what << ": left for the operator";
    }
    // The untouched file is taken.
    file.write(good);
    auto t = test::tracer(config(), 4);
    ctl::RestoreResult r;
    EXPECT_EQ(restore(*t, file, id, r), 4u);
}

TEST(FlowState, NoFileIsNoError) {
    test::ensure_eal();
    TempFile file;
    auto t = test::tracer(config(), 4);
    ctl::RestoreResult r;
    EXPECT_EQ(restore(*t, file, "x", r), 0u);
    EXPECT_FALSE(r.found);
}

TEST(FlowState, AnUnwritableDirectoryIsAClearError) {
    test::ensure_eal();
    auto t = test::tracer(config(), 4);
    uint32_t written = 0;
    const ctl::Status s =
        ctl::save_flow_state("/nonexistent-dir/flows", "x", t->flows(), &t->flows6(), 1, kUnix, written);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.error().find("/nonexistent-dir/flows.tmp: cannot create"), std::string::npos) << s.error();
}

// Consistent choice between gateways (issue 19, item 3): with Maglev, a shared seed and table
// size, two gateways - whatever their random state - send a new connection, and one picked up
// mid-flow, to the same endpoint. (Their configs list the endpoints in different orders; that the
// order does not matter is Maglev.TheSameEndpointsInAnyOrder*'s to show: at 5 endpoints in a
// 65,521 table an order-dependent fill differs in too few entries for 400 connections to see.)
namespace {
std::string maglev_config(const std::string& endpoints, const std::string& cluster_extra) {
    return test::gateway_config(R"(
  - name: default/web
    cluster_ip: 10.107.169.79
    scheduler: maglev
    ports: [{name: http, protocol: TCP, port: 80}]
    endpoints: )" + endpoints + "\n",
                                cluster_extra);
}
// On kube-node-2; the client pod is on kube-node-1 (so not one-armed: no masquerade).
const std::string kEps = "[{ip: 10.244.3.4}, {ip: 10.244.3.5}, {ip: 10.244.3.6}, {ip: 10.244.3.7}, {ip: 10.244.3.8}]";
const std::string kEpsReordered =
    "[{ip: 10.244.3.8}, {ip: 10.244.3.5}, {ip: 10.244.3.7}, {ip: 10.244.3.4}, {ip: 10.244.3.6}]";
}  // namespace

TEST(ConsistentChoice, GatewaysSharingMaglevsSeedChooseAlikeForNewAndPickedUpConnections) {
    test::ensure_eal();
    const std::string shared = "  maglev_seed: 7\n  maglev_table_size: 65521\n";
    auto a = test::tracer(maglev_config(kEps, shared), 1);
    auto b = test::tracer(maglev_config(kEpsReordered, shared), 2);
    auto other_seed = test::tracer(maglev_config(kEps, "  maglev_seed: 8\n  maglev_table_size: 65521\n"), 1);
    std::set<std::string> used;
    unsigned differ_with_other_seed = 0;
    for (int port = 30000; port < 30200; ++port) {
        // A pod's connection to the ClusterIP: not masqueraded.
        const std::string syn = fmt::format("tcp 10.244.2.9:{} > 10.107.169.79:80 [S]", port);
        const auto ra = a->run_spec(syn);
        ASSERT_EQ(ra.verdict, Verdict::dnat) << ra.text();
        ASSERT_FALSE(ra.masquerade);
        EXPECT_EQ(b->run_spec(syn).endpoint, ra.endpoint) << "a new connection, port " << port;
        // Picked up mid-flow by a gateway that never saw its SYN.
        auto mid = b->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.107.169.79:80 [.]", port + 1000));
        EXPECT_EQ(mid.endpoint,
                  a->run_spec(fmt::format("tcp 10.244.2.9:{} > 10.107.169.79:80 [S]", port + 1000)).endpoint)
            << "picked up mid-flow, port " << port + 1000;
        differ_with_other_seed += other_seed->run_spec(syn).endpoint != ra.endpoint;
        used.insert(ra.endpoint.value_or(""));
        a->forget_history(), b->forget_history(), other_seed->forget_history();
    }
    EXPECT_EQ(used.size(), 5u) << "spread over every endpoint";
    EXPECT_GT(differ_with_other_seed, 100u) << "another seed chooses otherwise (so the check above can fail)";
}

TEST(ConsistentChoice, MasqueradePortsStayInTheGatewaysRange) {
    test::ensure_eal();
    auto t = test::tracer(test::gateway_config(R"(
  - name: default/web
    type: NodePort
    cluster_ip: 10.107.169.79
    ports: [{name: http, protocol: TCP, port: 80, node_port: 30001}]
    endpoints: [{ip: 10.244.2.4}]
)",
                                               "  masquerade_ports: 20000-20299\n"),
                          1);
    std::set<int> ports;
    for (int port = 40000; port < 40400; ++port) {
        const auto r = t->run_spec(fmt::format("tcp 192.168.67.100:{} > 192.168.67.8:30001 [S]", port));
        if (r.verdict != Verdict::dnat) {
            EXPECT_EQ(r.reason, DropReason::snat_ports_exhausted) << r.text();
            continue;
        }
        ASSERT_TRUE(r.masquerade);
        const std::string out = r.out.value_or("");
        const int p = std::stoi(out.substr(out.find(':') + 1));
        EXPECT_GE(p, 20000) << out;
        EXPECT_LE(p, 20299) << out;
        ports.insert(p);
        t->forget_history();
    }
    EXPECT_EQ(ports.size(), 300u) << "every port of the range used once, then exhausted";
}
