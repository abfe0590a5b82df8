// Races: two workers running the real pipeline on one shared flow table while the control thread
// reloads and sweeps, as the daemon does (snapshot published through an atomic pointer and
// rte_rcu_qsbr, flow ids reclaimed after grace periods). Every connection's two directions are
// handled by different workers. Built also with ThreadSanitizer by tools/test (build-tsan).
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include <gtest/gtest.h>

#include "control/snapshot/flow_sweep.h"
#include "control/snapshot/publisher.h"
#include "dataplane/base/rcu.h"
#include "control/snapshot/snapshot_builder.h"
#include "test_support.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

std::string config(bool third_endpoint) {
    return fmt::format(R"(
dataplane:
  workers: 2
  ports:
    - {{name: ext, addresses: [192.168.67.8/24]}}
    - {{name: cluster, addresses: [10.192.0.2/24]}}
  routes:
    - {{prefix: 0.0.0.0/0, via: 192.168.67.1}}
    - {{prefix: 10.244.2.0/24, via: 10.192.0.3}}
cluster:
  node_ips: [192.168.67.8]
  cluster_cidrs: [10.244.0.0/16]
services:
  - name: default/web
    type: NodePort
    cluster_ip: 10.96.0.20
    ports: [{{name: http, protocol: TCP, port: 80, node_port: 30001}}, {{name: dns, protocol: UDP, port: 53, node_port: 30053}}]
    endpoints: [10.244.2.4, 10.244.2.5{}]
)",
                       third_endpoint ? ", 10.244.2.6" : "");
}

rte_mbuf* mbuf_of(const std::vector<uint8_t>& f) {
    rte_mbuf* m = rte_pktmbuf_alloc(ctl::tool_mempool());
    if (m) std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
    return m;
}

std::vector<uint8_t> frame(const FlowKey& k, const char* flags) {
    return ctl::build_frame(test::packet(ctl::format_tuple(k) + flags));
}

// Single-producer single-consumer hand-off between the test's threads, ordered with C11 atomics
// (so ThreadSanitizer sees it; DPDK 22.11's rte_ring orders with fences TSan does not model).
template <class T, size_t N>
class Spsc {
public:
    bool push(const T& v) {
        const size_t t = tail_.load(std::memory_order_relaxed);
        if (t - head_.load(std::memory_order_acquire) == N) return false;
        buf_[t % N] = v;
        tail_.store(t + 1, std::memory_order_release);
        return true;
    }
    bool pop(T& v) {
        const size_t h = head_.load(std::memory_order_relaxed);
        if (h == tail_.load(std::memory_order_acquire)) return false;
        v = buf_[h % N];
        head_.store(h + 1, std::memory_order_release);
        return true;
    }
    bool empty() const { return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire); }
    size_t size() const { return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire); }

private:
    std::array<T, N> buf_{};
    alignas(64) std::atomic<size_t> head_{0};
    alignas(64) std::atomic<size_t> tail_{0};
};

// rte_eal_init pins the main thread to its first lcore and std::thread inherits that mask: without
// this, both "workers" would share one CPU and take turns by scheduler tick, never overlapping.
void own_cpu(unsigned w) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w % std::max(1u, std::thread::hardware_concurrency()), &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// How long a run may go on to show what its checks need before it fails with what it reached:
// many times what it takes (on 2 cores, idle: 1.2 s at -O2, 2 to 4 s with ASan, 7 s with TSan;
// 11 s with ASan beside 8 busy processes).
constexpr auto kPatience = std::chrono::seconds(120);

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct RcuState {
    rte_rcu_qsbr* qsbr;
    explicit RcuState(unsigned threads) {
        const size_t sz = rte_rcu_qsbr_get_memsize(threads);
        qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("stress_qsbr", sz, RTE_CACHE_LINE_SIZE));
        EXPECT_EQ(rte_rcu_qsbr_init(qsbr, threads), 0);
    }
    ~RcuState() { rte_free(qsbr); }
};

}  // namespace

TEST(Stress, TwoWorkersAndReloadsKeepEveryFlowConsistent) {
    test::ensure_eal();
    const ctl::Config cfg_a = ctl::load_config_string(config(true), "a.yaml");
    const ctl::Config cfg_b = ctl::load_config_string(config(false), "b.yaml");
    RcuState rcu(3);  // two workers and the control thread's sweep
    auto flows = FlowTable::create({.capacity = 1u << 14, .owners = 2, .qsbr = rcu.qsbr, .scanner = 2});
    ASSERT_TRUE(flows);
    std::atomic<const ServiceSnapshot*> published{nullptr};
    std::atomic<StatsTable*> stats{nullptr};
    std::atomic<bool> stop{false};
    std::atomic<uint32_t> clock{1000};
    std::atomic<int> running{0};  // workers past their first quiescent report
    // Cross-worker hand-off of the packets' answers, and the sweep's removals per owner.
    using Answers = Spsc<FlowKey, 4096>;
    using Removals = Spsc<uint32_t, 1 << 15>;
    std::unique_ptr<Answers> answers[2] = {std::make_unique<Answers>(), std::make_unique<Answers>()};
    std::unique_ptr<Removals> removals[2] = {std::make_unique<Removals>(), std::make_unique<Removals>()};
    const unsigned in_use = rte_mempool_in_use_count(ctl::tool_mempool());
    constexpr uint32_t kConnections = 30000;
    constexpr size_t kAhead = 256;  // a worker's answers waiting for the other: 16 of its bursts' worth
    WorkerCtx ctx[2];
    std::set<uint32_t> generations[2];
    // What each worker has done so far, for the control thread to see when the run is long enough.
    struct Progress {
        std::atomic<uint64_t> replies{0}, created{0};
        std::atomic<size_t> generations{0};
    } progress[2];
    // The daemon's publisher: build, stable slots, publish, grace period, sweep, give back.
    ctl::Publisher pub(
        2,
        ctl::PublishTarget{.store = [&](const ServiceSnapshot* s) { published.store(s, std::memory_order_release); },
                           .store_stats = [&](StatsTable* t) { stats.store(t, std::memory_order_release); },
                           .qsbr = rcu.qsbr,
                           .flows = flows.get(),
                           .remove_dgram = [&](uint32_t id, uint8_t owner) { (void)removals[owner]->push(id); }});
    pub.publish(cfg_a);
    test::TestOutput outputs[2];
    for (int w = 0; w < 2; ++w) outputs[w].attach(ctx[w], *pub.current());

    auto worker = [&](uint16_t w) {
        own_cpu(w);
        WorkerCtx& c = ctx[w];
        c.worker = w;
        c.n_workers = 2;
        c.flows = flows.get();
        c.rng = Rng(7 + w);
        rte_rcu_qsbr_thread_register(rcu.qsbr, w);
        rte_rcu_qsbr_thread_online(rcu.qsbr, w);
        Answers& mine = *answers[w];  // answers this worker's packets produced: the other handles them
        Answers& theirs = *answers[1 - w];
        auto b = std::make_unique<Burst>();
        uint32_t next = 0;
        bool started = false;
        while (!stop.load(std::memory_order_relaxed) || !theirs.empty()) {
            c.snap = published.load(std::memory_order_acquire);
            c.stats = stats.load(std::memory_order_acquire);
            c.now = clock.load(std::memory_order_relaxed);
            generations[w].insert(c.snap->generation);
            rte_mbuf** pkts = b->mbufs;
            uint16_t n = 0;
            // The other worker's answers first (SYN-ACKs and DNS replies from the pods) ...
            FlowKey k;
            for (unsigned i = 0; i < 16 && theirs.pop(k); ++i)
                if (rte_mbuf* m = mbuf_of(frame(k, k.proto == 6 ? " [S.]" : ""))) pkts[n++] = m;
            // ... then new connections and datagrams of its own, as many as the other worker keeps up
            // with: at most kAhead answers wait for it. (On a busy host one worker may get far less
            // CPU than the other: answers piled up for it were dropped once its queue was full, and
            // the rest reached it after their flows had aged out with the reloads' clock.)
            const size_t room = kAhead - std::min(kAhead, mine.size());
            const auto full = static_cast<uint16_t>(std::min<size_t>(kBurst, n + room));
            while (n < full && next < kConnections && !stop.load(std::memory_order_relaxed)) {
                const uint32_t i = next++;
                const FlowKey k{.src = Ip4::from_host(0xcb000000u | (uint32_t{w} << 20) | (i >> 8)),
                                .dst = Ip4::from_host(0xc0a84308u),
                                .sport = rte_cpu_to_be_16(static_cast<uint16_t>(1024 + (i & 0xff))),
                                .dport = rte_cpu_to_be_16(i % 3 ? 30001 : 30053),
                                .proto = static_cast<uint8_t>(i % 3 ? 6 : 17)};
                if (rte_mbuf* m = mbuf_of(frame(k, k.proto == 6 ? " [S]" : ""))) pkts[n++] = m;
            }
            b->start(n, 0);
            if (n) process_burst(*b, c);
            for (uint16_t i = 0; i < b->n; ++i) {
                if (b->pkt[i].verdict == Verdict::dnat && b->pkt[i].l2 == L2Outcome::sent) {
                    PacketMeta m;
                    const auto* d = rte_pktmbuf_mtod(b->mbufs[i], const uint8_t*);
                    if (parse_packet(d, rte_pktmbuf_data_len(b->mbufs[i]), m) == DropReason::none &&
                        !(m.tcp_flags & kAck)) {
                        (void)mine.push(m.key.reversed());
                    }
                }
            }
            outputs[w].free_sent();
            // Datagram flows the sweep hands back, as Worker::remove_requested does.
            uint32_t id;
            for (unsigned i = 0; i < 64 && removals[w]->pop(id); ++i) (void)remove_gone_flow(c, id);
            worker_housekeeping(c, 256);
            progress[w].replies.store(c.counters.verdicts[static_cast<unsigned>(Verdict::reply)],
                                      std::memory_order_relaxed);
            progress[w].created.store(c.counters.flows_created, std::memory_order_relaxed);
            progress[w].generations.store(generations[w].size(), std::memory_order_relaxed);
            rte_rcu_qsbr_quiescent(rcu.qsbr, w);
            if (!started) started = true, running.fetch_add(1);
            if (!n) std::this_thread::yield();
        }
        rte_rcu_qsbr_thread_offline(rcu.qsbr, w);
        rte_rcu_qsbr_thread_unregister(rcu.qsbr, w);
    };

    std::thread w0(worker, 0), w1(worker, 1);
    // rte_rcu_qsbr_thread_online orders itself with a standalone fence, which ThreadSanitizer
    // does not model: reload only once both workers are in their loop, as the daemon does.
    while (running.load() < 2) std::this_thread::yield();
    // The control thread: reload back and forth (an endpoint removed, then added), publish, wait
    // a grace period, free the old snapshot, sweep; the clock moves on so flows age. At least 200
    // reloads, then on until the run has shown what is checked below, for at most kPatience: how
    // much work the time of 200 reloads leaves the workers depends on the host (a busy one under
    // ASan once saw 822 answers cross to a worker, not 1,000).
    constexpr uint64_t kReplies = 1000, kCreated = 10000;
    constexpr size_t kGenerations = 20;
    unsigned reloads = 0;
    ctl::SweepResult swept{};
    auto shown = [&] {
        uint64_t created = 0;
        for (const auto& p : progress) {
            if (p.replies.load(std::memory_order_relaxed) <= kReplies ||
                p.generations.load(std::memory_order_relaxed) <= kGenerations)
                return false;
            created += p.created.load(std::memory_order_relaxed);
        }
        return created > kCreated && swept.tcp_closed + swept.dgram_removed > 0;
    };
    const auto t0 = std::chrono::steady_clock::now();
    for (; reloads < 200 || (!shown() && std::chrono::steady_clock::now() - t0 < kPatience); ++reloads) {
        const auto sw = pub.publish(reloads % 2 ? cfg_a : cfg_b).sweep;
        swept.tcp_closed += sw.tcp_closed;
        swept.dgram_removed += sw.dgram_removed;
        if (reloads % 20 == 0) clock.fetch_add(31, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    stop = true;
    w0.join();
    w1.join();
    const std::string run = fmt::format(" ({} reloads in {:.1f} s)", reloads, seconds_since(t0));

    // Every packet got exactly one verdict; none was lost to a clash of tuples.
    uint64_t created = 0;
    for (int w = 0; w < 2; ++w) {
        const WorkerCounters& k = ctx[w].counters;
        uint64_t verdicts = 0;
        for (uint64_t v : k.verdicts) verdicts += v;
        EXPECT_EQ(verdicts, k.rx_packets) << "worker " << w;
        EXPECT_EQ(k.drops[static_cast<unsigned>(DropReason::flow_reply_clash)], 0u);
        EXPECT_EQ(k.drops[static_cast<unsigned>(DropReason::snat_ports_exhausted)], 0u);
        EXPECT_GT(k.verdicts[static_cast<unsigned>(Verdict::reply)], kReplies)
            << "answers crossed workers, to worker " << w << run;
        EXPECT_GT(generations[w].size(), kGenerations) << "worker " << w << " saw the reloads" << run;
        created += k.flows_created;
    }
    EXPECT_GT(created, kCreated) << "flows created" << run;
    EXPECT_GT(swept.tcp_closed + swept.dgram_removed, 0u) << "reloads removed endpoints under live flows" << run;
    // Every live flow is found by both its tuples; reply tuples (SNAT ports) are unique and each
    // SNAT port lies in its owner's partition of the range.
    std::set<std::pair<uint64_t, uint64_t>> replies;
    unsigned live = 0;
    for (uint32_t id = 0; id < flows->capacity(); ++id) {
        const Flow& f = flows->flow(id);
        if (!f.live.load(std::memory_order_relaxed) || f.kind != FlowKind::nat) continue;
        ++live;
        const FlowRef a = flows->lookup(f.key[0]), b = flows->lookup(f.key[1]);
        EXPECT_EQ(a.id, id);
        EXPECT_EQ(b.id, id);
        EXPECT_EQ(b.dir, Direction::reply);
        uint64_t lo, hi;
        std::memcpy(&lo, &f.key[1], 8);
        std::memcpy(&hi, reinterpret_cast<const uint8_t*>(&f.key[1]) + 8, 8);
        EXPECT_TRUE(replies.insert({lo, hi}).second) << "reply tuple used twice: " << ctl::format_tuple(f.key[1]);
        if (f.flags & kFlowMasq) {
            EXPECT_EQ((rte_be_to_cpu_16(f.key[1].dport) - pub.current()->cluster.snat_port_min) % 2, f.owner);
        }
    }
    EXPECT_EQ(live, flows->live_total());
    EXPECT_EQ(rte_mempool_in_use_count(ctl::tool_mempool()), in_use) << "no mbuf kept";
}

// The DNS A/AAAA race (kube-proxy #56903): the first two datagrams of one new UDP flow reach two
// workers at the same moment. Both must go to the same endpoint, and both answers come back.
namespace {

// Two workers on one flow table of `capacity` flows and one published snapshot of config(true),
// each with its own output stage; run by the test's own threads.
struct TwoWorkers {
    std::unique_ptr<FlowTable> flows;
    WorkerCtx ctx[2];
    ctl::Publisher pub;
    test::TestOutput outputs[2];

    explicit TwoWorkers(uint32_t capacity)
        : flows((test::ensure_eal(), FlowTable::create({.capacity = capacity, .owners = 2}))),
          pub(2,
              ctl::PublishTarget{.store = [this](const ServiceSnapshot* s) { ctx[0].snap = ctx[1].snap = s; },
                                 .store_stats = [this](StatsTable* t) { ctx[0].stats = ctx[1].stats = t; }}) {
        pub.publish(ctl::load_config_string(config(true), "a.yaml"));
        for (uint16_t w = 0; w < 2; ++w) {
            outputs[w].attach(ctx[w], *pub.current());
            ctx[w].worker = w;
            ctx[w].n_workers = 2;
            ctx[w].flows = flows.get();
            ctx[w].now = 1000;
        }
    }
};

// One batch of rounds, on a gateway of its own; adds how often the two inserts raced to `races`.
void race_datagrams(uint64_t& races) {
    TwoWorkers g(1u << 14);
    auto& ctx = g.ctx;
    auto& outputs = g.outputs;
    for (uint16_t w = 0; w < 2; ++w)
        ctx[w].rng = Rng(100 + w);  // different draws: without the bucket lock they would differ
    // Each round, both workers get the same burst of kBurst first datagrams (one per query) and
    // run it at the same moment: both look every query up (a miss), then both insert, so most
    // queries really race on the insert.
    // 768 queries whatever the burst's size: each leaves two mbufs and two answers in the tool's
    // pool (4,095) until the end.
    constexpr unsigned kRounds = 768 / kBurst, kQueries = kRounds * kBurst;
    std::vector<FlowKey> queries(kQueries);
    std::vector<std::array<rte_mbuf*, 2>> m(kQueries);
    for (unsigned q = 0; q < kQueries; ++q) {
        queries[q] = FlowKey{.src = Ip4::from_host(0x0af40305u + (q >> 14)),
                             .dst = Ip4::from_host(0x0a600014u),
                             .sport = rte_cpu_to_be_16(static_cast<uint16_t>(20000 + (q & 0x3fff))),
                             .dport = rte_cpu_to_be_16(53),
                             .proto = 17};
        for (int w = 0; w < 2; ++w) {
            m[q][w] = mbuf_of(frame(queries[q], ""));
            ASSERT_NE(m[q][w], nullptr);
        }
    }
    std::vector<std::array<Verdict, 2>> res(kQueries);
    std::vector<std::atomic<unsigned>> arrived(kRounds);
    auto run = [&](int w) {
        own_cpu(static_cast<unsigned>(w));
        for (unsigned round = 0; round < kRounds; ++round) {
            arrived[round].fetch_add(1);
            while (arrived[round].load() < 2) {}
            auto b = std::make_unique<Burst>();
            for (unsigned i = 0; i < kBurst; ++i) b->mbufs[i] = m[round * kBurst + i][w];
            b->start(kBurst, 0);
            process_burst(*b, ctx[w]);
            for (unsigned i = 0; i < kBurst; ++i) res[round * kBurst + i][w] = b->pkt[i].verdict;
        }
    };
    std::thread a(run, 0), b(run, 1);
    a.join();
    b.join();
    unsigned differing = 0, answered = 0;
    for (unsigned q = 0; q < kQueries; ++q) {
        FlowKey out[2];
        for (int w = 0; w < 2; ++w) {
            ASSERT_EQ(res[q][w], Verdict::dnat);
            PacketMeta pm;  // sent: still in outputs[w].sent until freed below
            (void)parse_packet(rte_pktmbuf_mtod(m[q][w], const uint8_t*), rte_pktmbuf_data_len(m[q][w]), pm);
            out[w] = pm.key;
        }
        differing += !(out[0] == out[1]);
        // Each answer, on the other worker than its query.
        for (int w = 0; w < 2; ++w) {
            auto b = std::make_unique<Burst>();
            rte_mbuf* r = b->mbufs[0] = mbuf_of(frame(out[w].reversed(), ""));
            b->start(1, 1);
            process_burst(*b, ctx[1 - w]);
            PacketMeta pm;
            (void)parse_packet(rte_pktmbuf_mtod(r, const uint8_t*), rte_pktmbuf_data_len(r), pm);
            answered += b->pkt[0].verdict == Verdict::reply && b->pkt[0].l2 == L2Outcome::sent &&
                pm.key == queries[q].reversed();
        }
    }
    for (auto& o : outputs) o.free_sent();
    EXPECT_EQ(differing, 0u) << "both datagrams of a flow reach one endpoint through one SNAT tuple";
    EXPECT_EQ(answered, 2 * kQueries) << "both answers reach the client, from the VIP";
    EXPECT_EQ(ctx[0].counters.flows_created + ctx[1].counters.flows_created, kQueries) << "one flow per query";
    // How often the two inserts really raced (the rest: the second found the first's flow).
    const uint64_t raced = ctx[0].counters.flows_joined + ctx[1].counters.flows_joined;
    races += raced;
    std::printf("queries whose two inserts raced: %llu of %u (flows created by worker 0: %llu, 1: %llu)\n",
                static_cast<unsigned long long>(raced), kQueries, (unsigned long long)ctx[0].counters.flows_created,
                (unsigned long long)ctx[1].counters.flows_created);
}

}  // namespace

TEST(Stress, TwoDatagramsOfOneNewFlowOnTwoWorkersReachOneEndpoint) {
    // In how many rounds the two workers overlap depends on the host: on one busy with other work
    // perhaps in none of a batch. With two CPUs, batches until they did, for at most kPatience;
    // each batch is checked in full.
    const bool overlap = std::thread::hardware_concurrency() >= 2;
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t raced = 0;
    unsigned batches = 0;
    do {
        race_datagrams(raced);
        ++batches;
        if (HasFailure()) return;
    } while (overlap && raced == 0 && std::chrono::steady_clock::now() - t0 < kPatience);
    RecordProperty("raced_inserts", static_cast<int>(raced));
    if (overlap) {
        EXPECT_GT(raced, 0u) << fmt::format("the two workers never overlapped, in {} batches ({:.1f} s)", batches,
                                            seconds_since(t0));
    }
}

// One connection's two directions on two workers at once (issue 54): worker 0 carries the clients'
// packets of 64 established connections while worker 1 carries the pods' answers to them, round
// after round, both updating the same flow records (state, last seen) and counting into rows of
// their own. Afterwards every packet is counted exactly once: each worker's verdicts, the service
// port's and each endpoint's packets and bytes, the live flows per endpoint (one per connection),
// and every connection is still established. A NodePort from outside (masqueraded) and the
// ClusterIP from a pod (DNAT only).
namespace {

struct Conn {
    FlowKey client;  // client → VIP
    FlowKey reply;   // endpoint → the gateway (or the client): what the pod answers to
};

// Runs `frames` through worker `ctx` in bursts; the out tuple of each packet it sent, in order.
std::vector<FlowKey> run_frames(WorkerCtx& ctx, test::TestOutput& out, const std::vector<std::vector<uint8_t>>& frames,
                                Verdict want, uint64_t& bytes) {
    std::vector<FlowKey> sent;
    auto b = std::make_unique<Burst>();
    for (size_t first = 0; first < frames.size(); first += kBurst) {
        const auto n = static_cast<uint16_t>(std::min<size_t>(kBurst, frames.size() - first));
        for (uint16_t i = 0; i < n; ++i) b->mbufs[i] = mbuf_of(frames[first + i]);
        b->start(n, 0);
        process_burst(*b, ctx);
        for (uint16_t i = 0; i < n; ++i) {
            PacketMeta m;
            rte_mbuf* mb = b->mbufs[i];
            EXPECT_EQ(b->pkt[i].verdict, want);
            if (b->pkt[i].verdict != want || b->pkt[i].l2 != L2Outcome::sent) continue;
            bytes += mb->pkt_len;
            (void)parse_packet(rte_pktmbuf_mtod(mb, const uint8_t*), rte_pktmbuf_data_len(mb), m);
            sent.push_back(m.key);
        }
        out.free_sent();
    }
    return sent;
}

std::vector<std::vector<uint8_t>> frames_of(const std::vector<FlowKey>& keys, const char* flags) {
    std::vector<std::vector<uint8_t>> f;
    for (const FlowKey& k : keys) f.push_back(frame(k, flags));
    return f;
}

void two_directions_at_once(bool masq) {
    TwoWorkers g(1u << 12);
    auto& ctx = g.ctx;
    auto& outputs = g.outputs;
    const auto& flows = g.flows;
    const ctl::Publisher& pub = g.pub;
    constexpr unsigned kConns = 64, kRounds = 500;
    std::vector<FlowKey> clients(kConns);
    for (unsigned c = 0; c < kConns; ++c)
        clients[c] = masq ? FlowKey{.src = Ip4::from_host(0xcb007100u + c),  // 203.0.113.c → node IP:30001
                                    .dst = Ip4::from_host(0xc0a84308u),
                                    .sport = rte_cpu_to_be_16(static_cast<uint16_t>(40000 + c)),
                                    .dport = rte_cpu_to_be_16(30001),
                                    .proto = 6}
                          : FlowKey{.src = Ip4::from_host(0x0af40300u + 10 + c),  // a pod → 10.96.0.20:80
                                    .dst = Ip4::from_host(0x0a600014u),
                                    .sport = rte_cpu_to_be_16(static_cast<uint16_t>(40000 + c)),
                                    .dport = rte_cpu_to_be_16(80),
                                    .proto = 6};
    // The handshake, one worker at a time: SYN on worker 0, SYN-ACK on worker 1, ACK on worker 0.
    uint64_t bytes = 0;
    const std::vector<FlowKey> out = run_frames(ctx[0], outputs[0], frames_of(clients, " [S]"), Verdict::dnat, bytes);
    ASSERT_EQ(out.size(), kConns);
    std::vector<FlowKey> replies;
    for (const FlowKey& k : out) replies.push_back(k.reversed());
    ASSERT_EQ(run_frames(ctx[1], outputs[1], frames_of(replies, " [S.]"), Verdict::reply, bytes).size(), kConns);
    ASSERT_EQ(run_frames(ctx[0], outputs[0], frames_of(clients, " [.]"), Verdict::dnat, bytes).size(), kConns);
    EXPECT_EQ(out[0].src == clients[0].src, !masq) << "the NodePort is masqueraded, the pod's ClusterIP is not";

    // Both directions at once: 500 rounds of one data packet per connection on each worker.
    const auto ahead = frames_of(clients, " [.] len=100"), back = frames_of(replies, " [.] len=1000");
    std::atomic<int> started{0};
    std::atomic<unsigned> rounds_done[2] = {0, 0};
    unsigned overlapped[2] = {0, 0};  // rounds a worker began while the other was still running
    uint64_t data_bytes[2] = {0, 0};
    auto run = [&](int w) {
        own_cpu(static_cast<unsigned>(w));
        started.fetch_add(1);
        while (started.load() < 2) {}
        for (unsigned r = 0; r < kRounds; ++r) {
            overlapped[w] += rounds_done[1 - w].load() < kRounds;
            (void)run_frames(ctx[w], outputs[w], w == 0 ? ahead : back, w == 0 ? Verdict::dnat : Verdict::reply,
                             data_bytes[w]);
            rounds_done[w].store(r + 1);
        }
    };
    std::thread a(run, 0), b(run, 1);
    a.join();
    b.join();
    EXPECT_GT(overlapped[0] + overlapped[1], 0u) << "the two directions ran at the same time";

    // Each worker's verdicts: every packet it received, translated, none dropped.
    const uint64_t ahead_packets = uint64_t{kConns} * (2 + kRounds), back_packets = uint64_t{kConns} * (1 + kRounds);
    EXPECT_EQ(ctx[0].counters.verdicts[static_cast<unsigned>(Verdict::dnat)], ahead_packets);
    EXPECT_EQ(ctx[1].counters.verdicts[static_cast<unsigned>(Verdict::reply)], back_packets);
    for (const WorkerCtx& c : ctx) {
        EXPECT_EQ(c.counters.rx_packets, c.counters.tx_packets);
        EXPECT_EQ(c.counters.dropped(), 0u);
        EXPECT_EQ(c.counters.flows_created + c.counters.flows_joined, &c == &ctx[0] ? kConns : 0u);
    }
    // The service port's and its endpoints' counters: both directions, every packet and byte once.
    const ServiceSnapshot& s = *pub.current();
    const ServicePort* sp = nullptr;
    for (const ServicePort& p : s.services)
        if (p.proto == Proto::tcp && p.family == Family::v4) sp = &p;  // default/web:http
    ASSERT_NE(sp, nullptr);
    const uint64_t packets = ahead_packets + back_packets, all_bytes = bytes + data_bytes[0] + data_bytes[1];
    const PacketCounter svc = pub.slots().service_total(sp->slot);
    EXPECT_EQ(svc.packets, packets);
    EXPECT_EQ(svc.bytes, all_bytes);
    PacketCounter eps;
    int32_t active = 0;
    for (uint32_t e = sp->ep_first; e < sp->ep_first + sp->ep_count; ++e) {
        eps += pub.slots().endpoint_total(s.endpoints[e].slot);
        active += pub.slots().active(s.endpoints[e].slot);
    }
    EXPECT_EQ(eps.packets, packets);
    EXPECT_EQ(eps.bytes, all_bytes);
    EXPECT_EQ(active, static_cast<int32_t>(kConns)) << "one live flow per connection";
    // Every connection: one record, found by both tuples, established.
    for (unsigned c = 0; c < kConns; ++c) {
        const FlowRef a = flows->lookup(clients[c]), r = flows->lookup(replies[c]);
        ASSERT_TRUE(a.hit());
        EXPECT_EQ(r.id, a.id);
        EXPECT_EQ(FlowState::load(flows->flow(a.id).state).tcp(), TcpState::established);
    }
    EXPECT_EQ(flows->live_total(), kConns);
}

}  // namespace

TEST(Stress, OneConnectionsTwoDirectionsOnTwoWorkersAtOnceCountExactly) {
    two_directions_at_once(true);
    two_directions_at_once(false);
}
