// Flow replication between gateways (issue 19): what the workers hand to the sync thread, how a
// replica is taken over, and two sync threads (control/ha/sync.h) over loopback: events, the bulk
// copy of a gateway that starts, the periodic refresh, and forged, replayed and unknown datagrams
// as counted drops that create nothing.
#include <chrono>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include <gtest/gtest.h>

#include "dataplane/flow/flow_record.h"
#include "control/ha/state_file.h"
#include "control/ha/sync.h"
#include "control/ha/sync_proto.h"
#include "dataplane/pipeline/worker.h"
#include "control/config/yaml_config.h"
#include "../fuzz/sync_fuzz_config.h"
#include "test_support.h"

using namespace svcgate;
using namespace std::chrono_literals;

namespace {

struct Ring {
    rte_ring* r;
    explicit Ring(const char* name)
        : r(rte_ring_create_elem(name, sizeof(uint32_t), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ)) {}
    ~Ring() { rte_ring_free(r); }
    std::vector<uint32_t> drain() {
        std::vector<uint32_t> out(1024);
        out.resize(rte_ring_sc_dequeue_burst_elem(r, out.data(), sizeof(uint32_t), 1024, nullptr));
        return out;
    }
};

const std::string kClient = "tcp 192.168.67.100:41000 > 192.168.67.8:30001";

std::unique_ptr<ctl::Tracer> gateway(uint16_t owners = 1) {
    test::ensure_eal();  // the flow clock reads the EAL's TSC rate
    return test::tracer_of(test::kSyncFuzzConfig, ctl::TraceOptions{.now = dp::flow_clock_now(), .owners = owners});
}

// The flow of `spec`'s tuple as the gateway holds it (original direction), or null.
const dp::Flow* find(ctl::Tracer& t, const std::string& spec) {
    const ctl::PacketSpec s = test::packet(spec);
    const dp::FlowRef r = t.flows().lookup(s.key);
    return r.hit() && r.dir == dp::Direction::original ? &t.flows().flow(r.id) : nullptr;
}

uint32_t id_of(ctl::Tracer& t, const std::string& spec) { return t.flows().lookup(test::packet(spec).key).id; }

// A TCP connection through the gateway, up to its first ACK: proven from then on.
void handshake(ctl::Tracer& t, const std::string& client) {
    t.forget_history();
    ASSERT_TRUE(t.run_spec(client + " [S]").new_flow);
    t.run_spec("reply 1 [S.]");
    t.run_spec(client + " [.]");
}

}  // namespace

TEST(SyncEvents, OnlyFlowsThatProvedThemselvesAreHandedOn) {
    auto t = gateway();
    Ring ring("sg_test_ev");
    t->ctx().sync = ring.r;
    for (int i = 1; i <= 50; ++i) t->run_spec(fmt::format("tcp 198.51.100.{}:40000 > 192.168.67.8:30001 [S]", i));
    EXPECT_EQ(ring.drain().size(), 0u) << "a SYN flood proves nothing";
    t->forget_history();
    t->run_spec(kClient + " [S]");
    t->run_spec("reply 1 [S.]");
    EXPECT_EQ(ring.drain().size(), 0u) << "half open";
    t->run_spec(kClient + " [.]");
    EXPECT_EQ(ring.drain(), std::vector<uint32_t>{id_of(*t, kClient)}) << "established: handed on once";
    t->run_spec(kClient + " [P.]");
    t->run_spec("reply 1 [.]");
    EXPECT_EQ(ring.drain().size(), 0u) << "data changes nothing that matters";
    t->run_spec(kClient + " [F.]");
    EXPECT_EQ(ring.drain(), std::vector<uint32_t>{id_of(*t, kClient)}) << "a FIN: the replica must learn it";
    // A datagram flow once answered.
    t->forget_history();
    const std::string dns = "udp 192.168.67.100:5353 > 10.107.169.79:53";
    t->run_spec(dns);
    EXPECT_EQ(ring.drain().size(), 0u) << "unanswered";
    t->run_spec("reply 1");
    EXPECT_EQ(ring.drain(), std::vector<uint32_t>{id_of(*t, dns)});
    t->run_spec(dns);
    EXPECT_EQ(ring.drain().size(), 0u) << "answered already";
    const dp::WorkerCounters& c = t->ctx().counters;
    EXPECT_EQ(c.sync_events, 3u);
    EXPECT_EQ(c.sync_ring_full, 0u);
    EXPECT_EQ(c.takeovers, 0u);
}

TEST(SyncEvents, AReplicaThatCarriesAPacketIsServedAndTakenOver) {
    auto a = gateway(2), b = gateway(2);
    handshake(*a, kClient);
    const auto before = a->run_spec(kClient + " [P.]");
    ASSERT_TRUE(before.out);
    // a's flow as b receives it: a replica from peer 1, owned by b's sync thread (owner 1).
    const dp::Flow* f = find(*a, kClient);
    ASSERT_NE(f, nullptr);
    uint8_t rec[dp::kFlowRecordV4];
    dp::encode_flow(*f, a->ctx().now, rec);
    dp::FlowRecord r;
    ASSERT_EQ(dp::decode_flow(rec, sizeof rec, r), sizeof rec);
    ctl::FlowImporter imp(b->snapshot(), b->slots().table(), b->flows(), &b->flows6(), 1);
    ASSERT_EQ(imp.import_to(r, 1, 1, b->ctx().now, 0), ctl::FlowImporter::Outcome::inserted);
    ASSERT_NE(find(*b, kClient), nullptr);
    EXPECT_EQ(find(*b, kClient)->origin.load(), 1);
    Ring ring("sg_test_take");
    b->ctx().sync = ring.r;
    const auto mid = b->run_spec(kClient + " [P.]");
    EXPECT_FALSE(mid.new_flow);
    EXPECT_EQ(mid.out, before.out) << "the same endpoint, masquerade address and port";
    EXPECT_EQ(find(*b, kClient)->origin.load(), 0) << "b's own from now on";
    EXPECT_EQ(b->ctx().counters.takeovers, 1u);
    EXPECT_EQ(ring.drain(), std::vector<uint32_t>{id_of(*b, kClient)}) << "and b replicates it in turn";
    b->run_spec(kClient + " [P.]");
    EXPECT_EQ(b->ctx().counters.takeovers, 1u) << "taken over once";
    // The pod's reply to a's masquerade address and port goes back to the client from the NodePort.
    const auto reply = b->run_spec("reply 1 [.]");
    EXPECT_EQ(reply.out.value_or(""), "tcp 192.168.67.8:30001 > 192.168.67.100:41000") << reply.text();
}

// ECMP moves a connection to a gateway before its replica arrives: the masqueraded packet is not
// picked up with a masquerade port of this gateway's (the endpoint would answer RST), but dropped;
// the client's retransmission finds the replica. Without replication, conntrack's pickup.
TEST(SyncEvents, AMasqueradedConnectionSeenMidStreamWaitsForItsReplica) {
    auto a = gateway(2), b = gateway(2);
    Ring ring("sg_test_pickup");
    b->ctx().sync = ring.r;
    const auto early = b->run_spec(kClient + " [P.]");
    EXPECT_EQ(early.verdict, dp::Verdict::drop) << early.text();
    EXPECT_EQ(b->ctx().counters.drops[static_cast<unsigned>(dp::DropReason::pickup_awaits_replica)], 1u);
    EXPECT_EQ(find(*b, kClient), nullptr) << "no flow made";
    // The replica arrives (a carried the connection); the retransmission is served as a served it.
    handshake(*a, kClient);
    const auto on_a = a->run_spec(kClient + " [P.]");
    uint8_t rec[dp::kFlowRecordV4];
    dp::encode_flow(*find(*a, kClient), a->ctx().now, rec);
    dp::FlowRecord r;
    ASSERT_EQ(dp::decode_flow(rec, sizeof rec, r), sizeof rec);
    ctl::FlowImporter imp(b->snapshot(), b->slots().table(), b->flows(), &b->flows6(), 1);
    ASSERT_EQ(imp.import_to(r, 1, 1, b->ctx().now, 0), ctl::FlowImporter::Outcome::inserted);
    const auto again = b->run_spec(kClient + " [P.]");
    EXPECT_EQ(again.out, on_a.out) << "the same endpoint, masquerade address and port";
    // A single gateway picks it up, as conntrack does (nf_conntrack_tcp_loose).
    auto c = gateway();
    const auto lone = c->run_spec(kClient + " [P.]");
    EXPECT_EQ(lone.verdict, dp::Verdict::dnat) << lone.text();
    EXPECT_TRUE(lone.new_flow);
}

// client_ip preserve behind ECMP: the pod's reply reaches gateway b before the replica of the
// flow gateway a made for the client's SYN. b holds it (not routed with the pod's address, not
// freed) and sends it on translated once the replica is in; one whose replica never comes is
// freed after the bound. Every packet stays accounted for. Without replication, routed as it is.
// A replicating gateway (2 owners) with a NodePort Service that preserves the client's address,
// its endpoint 10.244.2.6:8080.
namespace {
std::unique_ptr<ctl::Tracer> preserving_gateway() {
    const std::string cfg = std::string(test::kSyncFuzzConfig) + R"(
  - name: default/kept
    type: NodePort
    cluster_ip: 10.107.169.80
    client_ip: preserve
    ports: [{name: http, protocol: TCP, port: 80, target_port: 8080, node_port: 30002}]
    endpoints: [{ip: 10.244.2.6}]
)";
    test::ensure_eal();  // the flow clock reads the EAL's TSC rate
    return test::tracer_of(cfg, ctl::TraceOptions{.now = dp::flow_clock_now(), .owners = 2});
}
}  // namespace

TEST(SyncEvents, AReplyToAPreservedClientWaitsForItsReplicaThenGoesOnTranslated) {
    auto make = preserving_gateway;
    auto a = make(), b = make();
    const std::string client = "tcp 192.168.67.100:41000 > 192.168.67.8:30002";
    const std::string pod = "tcp 10.244.2.6:8080 > 192.168.67.100:41000";
    const auto syn = a->run_spec(client + " [S]");
    ASSERT_EQ(syn.verdict, dp::Verdict::dnat);
    ASSERT_EQ(syn.out.value_or(""), "tcp 192.168.67.100:41000 > 10.244.2.6:8080") << "the client's address kept";
    Ring ring("sg_test_hold");
    b->ctx().sync = ring.r;
    b->ctx().now_ms = 5000;
    const auto early = b->run_spec(pod + " [S.]");
    EXPECT_EQ(early.reason, dp::DropReason::reply_awaits_replica) << early.text();
    EXPECT_EQ(b->ctx().replica_hold.size(), 1u) << "held, not routed with the pod's address";
    EXPECT_EQ(b->ctx().counters.replica_parked, 1u);
    EXPECT_EQ(b->ctx().counters.dropped(), 0u);
    EXPECT_EQ(b->ctx().counters.unaccounted(), 0);
    EXPECT_TRUE(b->release_replica_hold().empty());
    EXPECT_EQ(b->ctx().replica_hold.size(), 1u) << "no replica yet: still held";

    // a's flow arrives at b.
    uint8_t rec[dp::kFlowRecordV4];
    dp::encode_flow(*find(*a, client), a->ctx().now, rec);
    dp::FlowRecord r;
    ASSERT_EQ(dp::decode_flow(rec, sizeof rec, r), sizeof rec);
    ctl::FlowImporter imp(b->snapshot(), b->slots().table(), b->flows(), &b->flows6(), 1);
    ASSERT_EQ(imp.import_to(r, 1, 1, b->ctx().now, 0), ctl::FlowImporter::Outcome::inserted);
    b->ctx().now_ms += 20;
    EXPECT_EQ(b->release_replica_hold(), std::vector<std::string>{"tcp 192.168.67.8:30002 > 192.168.67.100:41000"})
        << "sent on as the NodePort's";
    EXPECT_EQ(b->ctx().replica_hold.size(), 0u);
    EXPECT_EQ(b->ctx().counters.replica_released, 1u);
    EXPECT_EQ(b->ctx().counters.rx_packets, 1u) << "received once";
    EXPECT_EQ(b->ctx().counters.unaccounted(), 0);

    // A reply whose replica never comes: freed once the bound has passed, not before.
    b->run_spec("tcp 10.244.2.6:8080 > 192.168.67.100:41001 [S.]");
    ASSERT_EQ(b->ctx().replica_hold.size(), 1u);
    b->ctx().now_ms += dp::ReplicaHold::kBoundMs - 1;
    b->release_replica_hold();
    EXPECT_EQ(b->ctx().replica_hold.size(), 1u);
    b->ctx().now_ms += 1;
    EXPECT_TRUE(b->release_replica_hold().empty());
    EXPECT_EQ(b->ctx().replica_hold.size(), 0u);
    EXPECT_EQ(b->ctx().counters.drops[static_cast<unsigned>(dp::DropReason::replica_late)], 1u);
    EXPECT_EQ(b->ctx().counters.unaccounted(), 0);
    // The client's side seen mid-stream waits for its replica too: a pick here could be another pod.
    const auto mid = b->run_spec("tcp 192.168.67.100:41005 > 192.168.67.8:30002 [.]");
    EXPECT_EQ(mid.reason, dp::DropReason::pickup_awaits_replica) << mid.text();
    // Another Service's endpoint, or no replication: routed as any packet without a flow.
    EXPECT_EQ(b->run_spec("tcp 10.244.2.4:80 > 192.168.67.100:41002 [S.]").verdict, dp::Verdict::forward);
    auto c = make();
    EXPECT_EQ(c->run_spec("tcp 10.244.2.6:8080 > 192.168.67.100:41003 [S.]").verdict, dp::Verdict::forward);
}

// The hold is full (ReplicaHold::kSize replies waiting): the next reply is dropped, counted as
// reply_awaits_replica, and the held ones stay; past the bound all of them go as replica_late.
// Nothing is routed with the pod's address, and every packet stays accounted for.
TEST(SyncEvents, AFullReplicaHoldDropsTheNextReplyCounted) {
    auto b = preserving_gateway();
    Ring ring("sg_test_full_hold");
    b->ctx().sync = ring.r;
    b->ctx().now_ms = 5000;
    const dp::WorkerCounters& c = b->ctx().counters;
    for (unsigned i = 0; i < dp::ReplicaHold::kSize; ++i)
        b->run_spec(fmt::format("tcp 10.244.2.6:8080 > 192.168.67.100:{} [S.]", 42000 + i));
    ASSERT_EQ(b->ctx().replica_hold.size(), dp::ReplicaHold::kSize);
    EXPECT_EQ(c.replica_parked, dp::ReplicaHold::kSize);
    EXPECT_EQ(c.dropped(), 0u);
    const auto over = b->run_spec("tcp 10.244.2.6:8080 > 192.168.67.100:43000 [S.]");
    EXPECT_EQ(over.verdict, dp::Verdict::drop) << over.text();
    EXPECT_EQ(over.reason, dp::DropReason::reply_awaits_replica);
    EXPECT_FALSE(over.out) << "not routed with the pod's address";
    EXPECT_EQ(b->ctx().replica_hold.size(), dp::ReplicaHold::kSize) << "the held ones stay";
    EXPECT_EQ(c.replica_parked, dp::ReplicaHold::kSize);
    EXPECT_EQ(c.drops[static_cast<unsigned>(dp::DropReason::reply_awaits_replica)], 1u);
    EXPECT_EQ(c.unaccounted(), 0);
    b->ctx().now_ms += dp::ReplicaHold::kBoundMs;
    EXPECT_TRUE(b->release_replica_hold().empty());
    EXPECT_EQ(b->ctx().replica_hold.size(), 0u);
    EXPECT_EQ(c.drops[static_cast<unsigned>(dp::DropReason::replica_late)], dp::ReplicaHold::kSize);
    EXPECT_EQ(c.unaccounted(), 0);
    // Room again: the next early reply is held.
    b->run_spec("tcp 10.244.2.6:8080 > 192.168.67.100:43001 [S.]");
    EXPECT_EQ(b->ctx().replica_hold.size(), 1u);
}

namespace {

uint16_t free_udp_port() {
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
}

ctl::HaConfig::Endpoint lo(uint16_t port, bool v6 = false) { return {*ctl::parse_ip(v6 ? "::1" : "127.0.0.1"), port}; }

ctl::HaConfig ha(uint16_t listen, std::vector<uint16_t> peers, uint32_t refresh_seconds, bool v6 = false) {
    ctl::HaConfig c;
    c.listen = lo(listen, v6);
    for (uint16_t p : peers) c.peers.push_back(lo(p, v6));
    c.key.fill(0x11);
    c.refresh_seconds = refresh_seconds;
    c.hello_ms = 10;
    c.dead_after_ms = 100;
    return c;
}

// A gateway with its sync thread: a tracer whose tables have the sync thread's owner (1).
struct Node {
    std::unique_ptr<ctl::Tracer> t = gateway(2);
    Ring ring;
    std::atomic<const dp::ServiceSnapshot*> snap{&t->snapshot()};
    std::atomic<dp::StatsTable*> stats{const_cast<dp::StatsTable*>(&t->slots().table())};
    std::unique_ptr<ctl::Syncer> sync;

    Node(const char* ring_name, const ctl::HaConfig& cfg, bool events = true) : ring(ring_name) {
        if (events) t->ctx().sync = ring.r;
        sync = std::make_unique<ctl::Syncer>(cfg,
                                             ctl::Syncer::Wiring{.flows = &t->flows(),
                                                                 .flows6 = &t->flows6(),
                                                                 .owner = 1,
                                                                 .workers = 1,
                                                                 .rings = {ring.r},
                                                                 .qsbr = nullptr,
                                                                 .qsbr_id = 0,
                                                                 .snapshot = &snap,
                                                                 .stats = &stats});
    }
    ~Node() { sync->stop(); }
};

// How long the tests below wait for what the sync threads do in their own time: generous, as a
// busy host (parallel builds, a sanitizer) may hold them back for seconds and a wait ends once its
// condition holds; below Syncer::kStartWaitSeconds, after which a gateway is ready whatever its
// peers did. (The refresh keeps its own bound: its period is the product's promise.)
constexpr auto kPatience = 20000ms;
static_assert(kPatience.count() < ctl::Syncer::kStartWaitSeconds * 1000);

// A drop counter of status's ha.drops by its name.
uint64_t dropped(const ctl::report::Ha& s, ctl::sync::Drop d) {
    const std::string_view name = ctl::sync::drop_name(d);
    for (const auto& [n, v] : s.drops.items)
        if (n == name) return v;
    ADD_FAILURE() << "no drop counter " << name;
    return 0;
}

template <typename F>
bool within(std::chrono::milliseconds limit, F&& f) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        if (f()) return true;
        std::this_thread::sleep_for(5ms);
    }
    return f();
}

}  // namespace

TEST(Syncer, AStartingGatewayGetsItsPeersFlowsBeforeItIsReadyThenEveryNewOne) {
    const uint16_t pa = free_udp_port(), pb = free_udp_port();
    Node a("sg_test_a", ha(pa, {pb}, 3600));
    ASSERT_TRUE(a.sync->start().ok());
    handshake(*a.t, kClient);  // before b runs: b gets it by the bulk copy
    ASSERT_TRUE(within(kPatience, [&] { return a.sync->ready(); })) << "alone: ready once no peer is heard";
    Node b("sg_test_b", ha(pb, {pa}, 3600));
    ASSERT_TRUE(b.sync->start().ok());
    ASSERT_TRUE(within(kPatience, [&] { return b.sync->ready(); }));
    const dp::Flow* f = find(*b.t, kClient);
    ASSERT_NE(f, nullptr) << "b was ready without a's flow";
    EXPECT_EQ(f->origin.load(), 1) << "a replica, from ha.peers[0]";
    const auto s = b.sync->status(b.t->ctx().counters);
    ASSERT_EQ(s.peers.size(), 1u);
    EXPECT_TRUE(s.peers[0].alive);
    EXPECT_TRUE(s.peers[0].copied);
    // A flow proven on a now reaches b by the workers' ring (the refresh takes an hour here).
    const std::string c2 = "tcp 192.168.67.101:42000 > 192.168.67.8:30001";
    handshake(*a.t, c2);
    EXPECT_TRUE(within(kPatience, [&] { return find(*b.t, c2) != nullptr; }));
    const auto on = a.sync->status(a.t->ctx().counters);
    EXPECT_GE(on.events, 1u) << "handed on by a's worker";
    EXPECT_EQ(on.queued, 0u) << "and taken by a's sync thread";
    // Served by b as a would: the same endpoint and masquerade port.
    const auto on_a = a.t->run_spec(c2 + " [P.]"), on_b = b.t->run_spec(c2 + " [P.]");
    EXPECT_EQ(on_b.out, on_a.out);
    EXPECT_FALSE(on_b.new_flow);
    EXPECT_EQ(b.t->ctx().counters.takeovers, 1u);
}

// The same over IPv6 (ha.listen [::1]:PORT): the sockets, the peers' addresses and their ids.
TEST(Syncer, ReplicatesOverIpv6) {
    const uint16_t pa = free_udp_port(), pb = free_udp_port();
    Node a("sg_test_6a", ha(pa, {pb}, 3600, true));
    Node b("sg_test_6b", ha(pb, {pa}, 3600, true));
    ASSERT_TRUE(a.sync->start().ok());
    ASSERT_TRUE(b.sync->start().ok());
    ASSERT_TRUE(within(kPatience, [&] { return a.sync->ready() && b.sync->ready(); }));
    handshake(*a.t, kClient);
    ASSERT_TRUE(within(kPatience, [&] { return find(*b.t, kClient) != nullptr; }));
    const auto s = b.sync->status(b.t->ctx().counters);
    EXPECT_EQ(s.listen, fmt::format("[::1]:{}", pb));
    ASSERT_EQ(s.peers.size(), 1u);
    EXPECT_EQ(s.peers[0].address, fmt::format("[::1]:{}", pa));
    EXPECT_TRUE(s.peers[0].alive);
    EXPECT_GE(s.peers[0].flows_received, 1u);
    // The workers' part of replication, from the counters given, each in its own member.
    dp::WorkerCounters w{};
    w.takeovers = 1, w.replica_held = 2, w.replica_parked = 3, w.replica_released = 4, w.sync_events = 5,
    w.sync_ring_full = 6;
    const auto r = b.sync->status(w);
    EXPECT_EQ(r.takeovers, 1u);
    EXPECT_EQ(r.replica_hold.held, 2u);
    EXPECT_EQ(r.replica_hold.parked, 3u);
    EXPECT_EQ(r.replica_hold.released, 4u);
    EXPECT_EQ(r.events, 5u);
    EXPECT_EQ(r.events_ring_full, 6u);
}

TEST(Syncer, TheRefreshSendsWhatNoEventDid) {
    const uint16_t pa = free_udp_port(), pb = free_udp_port();
    Node a("sg_test_ra", ha(pa, {pb}, 1), /*events=*/false);  // every event lost
    Node b("sg_test_rb", ha(pb, {pa}, 1));
    ASSERT_TRUE(a.sync->start().ok());
    ASSERT_TRUE(b.sync->start().ok());
    ASSERT_TRUE(within(kPatience, [&] { return a.sync->ready() && b.sync->ready(); }));
    handshake(*a.t, kClient);
    EXPECT_TRUE(within(2500ms, [&] { return find(*b.t, kClient) != nullptr; })) << "healed within a refresh period";
    EXPECT_GE(a.sync->status(a.t->ctx().counters).refreshed, 1u);
    EXPECT_EQ(a.t->ctx().counters.sync_events, 0u);
}

// A client's new connection on the tuple of one that is over: its gateway reopens the flow
// (another masquerade port here), and the peer's replica of the closed one gives way to it, so the
// peer would carry the new connection as its gateway does.
TEST(Syncer, ANewConnectionOnAClosedTupleReplacesItsReplica) {
    const uint16_t pa = free_udp_port(), pb = free_udp_port();
    Node a("sg_test_oa", ha(pa, {pb}, 3600));
    Node b("sg_test_ob", ha(pb, {pa}, 3600));
    ASSERT_TRUE(a.sync->start().ok());
    ASSERT_TRUE(b.sync->start().ok());
    ASSERT_TRUE(within(kPatience, [&] { return a.sync->ready() && b.sync->ready(); }));
    handshake(*a.t, kClient);
    const auto old_out = a.t->run_spec(kClient + " [.]").out;
    a.t->run_spec(kClient + " [F.]");
    a.t->run_spec("reply 4 [F.]");
    a.t->run_spec(kClient + " [.]");
    auto state_on_b = [&] {
        const dp::Flow* f = find(*b.t, kClient);
        return f ? dp::FlowState::load(f->state).tcp() : dp::TcpState::none;
    };
    ASSERT_TRUE(within(kPatience, [&] { return state_on_b() == dp::TcpState::time_wait; }))
        << "b holds the closed connection: " << dp::tcp_state_name(state_on_b());
    handshake(*a.t, kClient);  // asserts a new flow: the reopen
    const auto new_out = a.t->run_spec(kClient + " [.]").out;
    ASSERT_NE(new_out, old_out) << "the new connection has a masquerade port of its own";
    const auto same_tuple = [&] {
        const dp::Flow *fa = find(*a.t, kClient), *fb = find(*b.t, kClient);
        return fa && fb && fa->key[1] == fb->key[1];
    };
    EXPECT_TRUE(within(kPatience, same_tuple)) << "b's replica is the new connection";
    EXPECT_EQ(b.t->run_spec(kClient + " [.]").out, new_out);
    EXPECT_EQ(a.t->ctx().counters.flows_reopened, 1u);
}

TEST(Syncer, ForgedReplayedAndUnknownDatagramsAreCountedAndCreateNothing) {
    const uint16_t pb = free_udp_port(), px = free_udp_port();
    Node b("sg_test_fb", ha(pb, {px}, 3600));
    ASSERT_TRUE(b.sync->start().ok());
    // x: a peer of b's config, played by this test.
    const int x = socket(AF_INET, SOCK_DGRAM, 0), stranger = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in xa{}, ba{};
    xa.sin_family = ba.sin_family = AF_INET;
    xa.sin_addr.s_addr = ba.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    xa.sin_port = htons(px);
    ba.sin_port = htons(pb);
    ASSERT_EQ(bind(x, reinterpret_cast<sockaddr*>(&xa), sizeof xa), 0);
    auto send = [&](int fd, const std::vector<uint8_t>& d) {
        sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&ba), sizeof ba);
    };
    // Records of a real flow, made on another gateway.
    auto other = gateway();
    handshake(*other, kClient);
    uint8_t rec[dp::kFlowRecordV4];
    dp::encode_flow(*find(*other, kClient), other->ctx().now, rec);
    const std::vector<uint8_t> body(rec, rec + sizeof rec);
    auto seal = [&](ctl::sync::Sealer& s) {
        std::vector<uint8_t> d(ctl::sync::kMaxDatagram);
        d.resize(s.seal(ctl::sync::Type::flows, 1, body, d.data()));
        return d;
    };
    ctl::sync::Key wrong;
    wrong.fill(0x22);
    const uint32_t x_id = ctl::sync::peer_id(lo(px).addr.a.b, px), b_id = ctl::sync::peer_id(lo(pb).addr.a.b, pb);
    ctl::sync::Sealer forger(wrong, x_id, 5), right(ha(0, {}, 1).key, x_id, 5), as_b(ha(0, {}, 1).key, b_id, 50);
    send(x, seal(forger));
    send(stranger, seal(right));
    send(x, seal(as_b));  // b's own datagram (right key) sent back to it from x's address
    ASSERT_TRUE(within(kPatience, [&] {
        const auto s = b.sync->status(b.t->ctx().counters);
        return dropped(s, ctl::sync::Drop::bad_mac) == 1 && dropped(s, ctl::sync::Drop::unknown_peer) == 1 &&
            dropped(s, ctl::sync::Drop::wrong_peer) == 1;
    }));
    EXPECT_EQ(find(*b.t, kClient), nullptr) << "nothing forged or foreign made a flow";
    // Authentic, then the same datagram again.
    const std::vector<uint8_t> good = seal(right);
    send(x, good);
    ASSERT_TRUE(within(kPatience, [&] { return find(*b.t, kClient) != nullptr; }));
    send(x, good);
    EXPECT_TRUE(within(kPatience,
                       [&] { return dropped(b.sync->status(b.t->ctx().counters), ctl::sync::Drop::replayed) == 1; }));
    const auto s = b.sync->status(b.t->ctx().counters);
    EXPECT_EQ(s.peers[0].datagrams_received, 1u) << "only the authentic one";
    EXPECT_EQ(s.peers[0].flows_received, 1u);
    close(x);
    close(stranger);
}
