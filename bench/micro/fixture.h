// micro_bench's shared fixture (bench/README.md): the macro benchmark's world without a NIC
// (its config, flows, frames, tables, publisher and worker context), and the threads beside a
// benchmark: a control thread on the other cores, workers that run phases together, the CPU time
// of the threads other than the benchmark's. Each role's benchmarks are a file of their own beside
// this one: stages.cpp, pipeline.cpp, workers.cpp, ha.cpp, memory.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "dataplane/flow/flow_record.h"
#include "control/ha/state_file.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/lb/maglev.h"
#include "dataplane/lb/nat.h"
#include "dataplane/lb/rss_steer.h"
#include "dataplane/pipeline/parse.h"
#include "dataplane/pipeline/parse_stage.h"
#include "dataplane/pipeline/pipeline.h"
#include "dataplane/pipeline/vlan.h"
#include "control/snapshot/publisher.h"
#include "control/snapshot/snapshot_builder.h"
#include "control/ha/sync.h"
#include "control/ha/sync_proto.h"
#include "control/config/health_check.h"
#include "control/export/ipfix.h"
#include "control/probe/prober.h"
#include "control/base/tool_eal.h"
#include "control/config/yaml_config.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace svcgate::bench {

using namespace svcgate::dp;

constexpr uint32_t kClientBase = 0xc6120001;  // 198.18.0.1
constexpr uint32_t kVipBase = 0x0a600000;     // 10.96.0.0
constexpr uint32_t kPodBase = 0x0a800000;     // 10.128.0.0

// The macro benchmark's world (bench/gen.py config): one port, pods behind 10.0.0.2 / fd00::2.
// IPv6 Services (family 6) mirror the IPv4 ones: ClusterIP fd00:96:: + i + 1, pods fd00:128:: + n.
// `cluster_extra`: more keys of the cluster map (", masquerade_all: true").
inline std::string config(int services, int family = 4, const std::string& cluster_extra = "") {
    std::string s = R"(dataplane:
  ports: [{name: p0, addresses: [10.0.0.1/24, 'fd00::1/64']}]
  routes: [{prefix: 0.0.0.0/0, via: 10.0.0.254}, {prefix: 10.128.0.0/10, via: 10.0.0.2},
           {prefix: '::/0', via: 'fd00::fe'}, {prefix: 'fd00:128::/64', via: 'fd00::2'}]
cluster: {node_name: bench, node_ips: [10.0.0.1, 'fd00::1'], service_cidrs: [10.96.0.0/12, 'fd00:96::/108']CLUSTER_EXTRA}
services:
)";
    s.replace(s.find("CLUSTER_EXTRA"), 13, cluster_extra);
    auto ip = [family](uint32_t a) {
        if (family == 6) {
            const uint32_t x = a >= kPodBase ? a - kPodBase : a - kVipBase;
            return fmt::format("'fd00:{}::{:x}:{:x}'", a >= kPodBase ? 128 : 96, x >> 16, x & 0xffff);
        }
        return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
    };
    for (int i = 0; i < services; ++i)
        s += fmt::format(
            "  - {{name: b/s{}, cluster_ip: {}, ports: [{{name: http, port: 80, target_port: 8080}}], "
            "endpoints: [{}, {}, {}]}}\n",
            i, ip(kVipBase + i + 1), ip(kPodBase + 3 * i + 1), ip(kPodBase + 3 * i + 2), ip(kPodBase + 3 * i + 3));
    return s;
}

// Flow i: client (198.18.0.1 + i / 50000):(10000 + i % 50000) → VIP of service i % services, 80.
inline FlowKey flow_key(uint32_t i, uint32_t services) {
    return FlowKey{.src = Ip4::from_host(kClientBase + i / 50000),
                   .dst = Ip4::from_host(kVipBase + i % services + 1),
                   .sport = rte_cpu_to_be_16(static_cast<uint16_t>(10000 + i % 50000)),
                   .dport = rte_cpu_to_be_16(80),
                   .proto = static_cast<uint8_t>(Proto::tcp)};
}

// Flow i as a table record: the client's tuple and the reply from a pod of its own.
inline FlowInit flow_init(uint32_t i) {
    const FlowKey k = flow_key(i, 100000);
    FlowInit fi{.key = {k, k.reversed()}};
    fi.key[1].src = Ip4::from_host(kPodBase + i);
    return fi;
}

// Flow i over IPv6: client 2001:2:: + 1 + i / 50000, VIP fd00:96:: + 1 + i % services (as
// config(services, 6) writes them), ports as for IPv4.
inline Ip6 six(uint16_t g0, uint16_t g1, uint32_t low) {
    Ip6 a;
    a.b[0] = static_cast<uint8_t>(g0 >> 8), a.b[1] = static_cast<uint8_t>(g0);
    a.b[2] = static_cast<uint8_t>(g1 >> 8), a.b[3] = static_cast<uint8_t>(g1);
    for (int k = 0; k < 4; ++k) a.b[15 - k] = static_cast<uint8_t>(low >> (8 * k));
    return a;
}
inline FlowKey6 flow_key6(uint32_t i, uint32_t services) {
    return FlowKey6{.src = six(0x2001, 0x2, 1 + i / 50000),
                    .dst = six(0xfd00, 0x96, i % services + 1),
                    .sport = rte_cpu_to_be_16(static_cast<uint16_t>(10000 + i % 50000)),
                    .dport = rte_cpu_to_be_16(80),
                    .proto = static_cast<uint8_t>(Proto::tcp)};
}

// Flow i as an IPv6 table record: the client's tuple and the reply from a pod of its own.
inline FlowInit6 flow_init6(uint32_t i) {
    const FlowKey6 k = flow_key6(i, 100000);
    FlowInit6 fi{.key = {k, k.reversed()}};
    fi.key[1].src = six(0xfd00, 0x128, i);
    return fi;
}

// A TCP ACK frame for `k` (60 bytes over IPv4, 74 over IPv6), checksums valid.
inline std::vector<uint8_t> frame_of(size_t len, uint16_t ether_type) {
    std::vector<uint8_t> f(len, 0);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(f.data());
    eth->dst_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x01}};
    eth->src_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x02}};
    eth->ether_type = rte_cpu_to_be_16(ether_type);
    return f;
}
inline void tcp_ack(rte_tcp_hdr* tcp, rte_be16_t sport, rte_be16_t dport) {
    tcp->src_port = sport;
    tcp->dst_port = dport;
    tcp->sent_seq = rte_cpu_to_be_32(1);
    tcp->recv_ack = rte_cpu_to_be_32(1);
    tcp->data_off = 5 << 4;
    tcp->tcp_flags = RTE_TCP_ACK_FLAG;
    tcp->rx_win = 0xffff;
}
inline std::vector<uint8_t> frame(const FlowKey& k) {
    std::vector<uint8_t> f = frame_of(60, RTE_ETHER_TYPE_IPV4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + sizeof(rte_ether_hdr));
    ip->version_ihl = 0x45;
    ip->total_length = rte_cpu_to_be_16(40);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_TCP;
    ip->src_addr = k.src.be;
    ip->dst_addr = k.dst.be;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    auto* tcp = reinterpret_cast<rte_tcp_hdr*>(ip + 1);
    tcp_ack(tcp, k.sport, k.dport);
    tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
    return f;
}
inline std::vector<uint8_t> frame(const FlowKey6& k) {
    std::vector<uint8_t> f = frame_of(74, RTE_ETHER_TYPE_IPV6);
    auto* ip = reinterpret_cast<rte_ipv6_hdr*>(f.data() + sizeof(rte_ether_hdr));
    ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
    ip->payload_len = rte_cpu_to_be_16(20);
    ip->proto = IPPROTO_TCP;
    ip->hop_limits = 64;
    std::memcpy(ip->src_addr, k.src.b, 16);
    std::memcpy(ip->dst_addr, k.dst.b, 16);
    auto* tcp = reinterpret_cast<rte_tcp_hdr*>(ip + 1);
    tcp_ack(tcp, k.sport, k.dport);
    tcp->cksum = rte_ipv6_udptcp_cksum(ip, tcp);
    return f;
}

// The macro benchmark's transmit side, without a port: the frames stay with the benchmark, which
// reuses its mbufs burst after burst.
inline uint16_t sink(void*, uint16_t, rte_mbuf**, uint16_t n) noexcept { return n; }

struct World {
    ctl::Config cfg;
    std::unique_ptr<FlowTable> flows;
    WorkerCtx ctx;
    std::unique_ptr<ctl::Publisher> pub;
    NeighborTable neighbors;
    NeighborTable6 neighbors6;
    std::unique_ptr<FlowTable6> flows6;
    rte_ether_addr mac{{0x02, 0, 0, 0, 0, 0x01}};
    // The port's MTU, as the daemon always sets one (dataplane.ports[].mtu, 1,500 by default): the
    // routed packet's path then checks it as the daemon's does (and tools/pgo-build's training run
    // follows that path).
    uint16_t mtu = 1500;
    std::unique_ptr<Burst> b = std::make_unique<Burst>();
    rte_mempool* pool = nullptr;

    // `capacity` flows for the family of the Services (4 or 6), the least there is for the other.
    // `owners`: the workers (the threaded benchmark's), each inserting into the tables.
    World(int services, uint32_t capacity, int family = 4, const std::string& cluster_extra = "", uint16_t owners = 1) {
        ctl::init_tool_eal_or_abort("svcgate-microbench");
        cfg = ctl::load_config_string(config(services, family, cluster_extra), "bench.yaml");
        flows = FlowTable::create(FlowTable::Params{.capacity = family == 4 ? capacity : 1024, .owners = owners});
        flows6 = FlowTable6::create(FlowTableParams{.capacity = family == 6 ? capacity : 1024});
        pool = ctl::tool_mempool();
        pub = std::make_unique<ctl::Publisher>(
            owners,  // the stats table has a row per worker
            ctl::PublishTarget{.store = [this](const ServiceSnapshot* s) { ctx.snap = s; },
                               .store_stats = [this](StatsTable* t) { ctx.stats = t; }});
        pub->publish(cfg);
        // The next hops' MACs are known, as bench/gen.py's config pins them for the macro benchmark.
        for (const char* hop : {"10.0.0.2", "10.0.0.254"}) (void)neighbors.pin(*ctl::parse_ip4(hop), mac);
        for (const char* hop : {"fd00::2", "fd00::fe"}) (void)neighbors6.pin(*ctl::parse_ip6(hop), mac);
        attach(ctx);
    }
    // A worker context on this world's tables, next hops and port (the publisher sets `ctx`'s
    // snapshot and stats; another worker's are copied from it).
    void attach(WorkerCtx& c) {
        c.flows = flows.get(), c.flows6 = flows6.get(), c.now = 1;
        c.out.init(neighbors, neighbors6, pool, &mac, 1, TxSink{.send = &sink});
        c.out.set_mtus(&mtu);
    }
    const ServiceSnapshot& snap() const { return *ctx.snap; }
    // Copies frames[first..first+n) into the mbufs m[0..n) (what net_pcap's infinite_rx does per
    // packet).
    static void copy_in(const std::vector<std::vector<uint8_t>>& frames, size_t first, uint16_t n, rte_mbuf** m) {
        for (uint16_t i = 0; i < n; ++i) {
            const auto& f = frames[(first + i) % frames.size()];
            rte_pktmbuf_reset(m[i]);
            std::memcpy(rte_pktmbuf_append(m[i], static_cast<uint16_t>(f.size())), f.data(), f.size());
        }
    }
    // Copies frames[first..first+n) into mbufs and runs them through the pipeline; the verdicts
    // are in b->pkt.
    void burst(const std::vector<std::vector<uint8_t>>& frames, size_t first, uint16_t n, rte_mbuf** m) {
        copy_in(frames, first, n, m);
        std::copy_n(m, n, b->mbufs);
        b->start(n, 0);
        ctx.now_tsc = rte_get_tsc_cycles();  // as the worker's loop reads it, once an iteration
        process_burst(*b, ctx);
    }
    Verdict verdict(unsigned i) const { return b->pkt[i].verdict; }
};

inline std::vector<std::vector<uint8_t>> frames_for(uint32_t first, uint32_t n, uint32_t services, int family = 4) {
    std::vector<std::vector<uint8_t>> v;
    v.reserve(n);
    for (uint32_t i = 0; i < n; ++i)
        v.push_back(family == 4 ? frame(flow_key(first + i, services)) : frame(flow_key6(first + i, services)));
    return v;
}

// A thread of the control plane beside the benchmark: `start` runs with the calling thread's
// affinity set to every core but its own, so a thread it starts runs there (as the daemon's
// control threads beside a worker); the affinity is then put back.
template <typename F>
auto start_beside(F&& start) {
    cpu_set_t mine, others;
    pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
    CPU_ZERO(&others);
    const int here = sched_getcpu();
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c)
        if (c != here) CPU_SET(c, &others);
    if (CPU_COUNT(&others)) pthread_setaffinity_np(pthread_self(), sizeof others, &others);
    auto started = start();
    pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    return started;
}

// The CPU time of the threads other than the caller since this was made: the process's less the
// calling thread's, seconds.
class OthersCpu {
public:
    OthersCpu() : proc0_(cpu(CLOCK_PROCESS_CPUTIME_ID)), thread0_(cpu(CLOCK_THREAD_CPUTIME_ID)) {}
    double seconds() const {
        return (cpu(CLOCK_PROCESS_CPUTIME_ID) - proc0_) - (cpu(CLOCK_THREAD_CPUTIME_ID) - thread0_);
    }

private:
    static double cpu(clockid_t c) {
        timespec t{};
        clock_gettime(c, &t);
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
    }
    double proc0_, thread0_;
};

// A port of 127.0.0.1 of socket type `type`: bound by `fd`, or (fd null) bound and closed again.
inline uint16_t loopback_port(int type, int* fd = nullptr) {
    const int s = socket(AF_INET, type, 0);
    sockaddr_in a{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
    socklen_t len = sizeof a;
    (void)!bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    if (fd)
        *fd = s;
    else
        close(s);
    return ntohs(a.sin_port);
}

// Threads that run phases together, one per worker: the benchmark's thread starts phase p (each
// worker runs job(worker, p)) and waits for all of them; they sleep on a futex in between. Worker
// i runs on CPU i (modulo the host's): a std::thread inherits the EAL's pin of the main thread to
// CPU 0, and every "worker" then took turns on that one CPU (which made two workers look as if they
// did not scale at all: 0.84 to 0.93 x one, issue 54).
class PhaseThreads {
public:
    PhaseThreads(size_t n, std::function<void(size_t, uint32_t)> job) : n_(n), job_(std::move(job)) {
        for (size_t i = 0; i < n; ++i) {
            threads_.emplace_back([this, i] { loop(i); });
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(i % std::max(1u, std::thread::hardware_concurrency()), &one);
            pthread_setaffinity_np(threads_.back().native_handle(), sizeof one, &one);
        }
    }
    ~PhaseThreads() {
        start(kStop);
        for (std::thread& t : threads_) t.join();
    }
    void run(uint32_t phase) {
        start(phase);
        for (uint32_t d = 0; (d = done_.load(std::memory_order_acquire)) < n_;) done_.wait(d);
    }

private:
    static constexpr uint32_t kStop = UINT32_MAX;
    void start(uint32_t phase) {
        done_.store(0, std::memory_order_relaxed);
        go_.store(phase, std::memory_order_release);
        go_.notify_all();
    }
    void loop(size_t i) {
        for (uint32_t seen = 0;;) {
            go_.wait(seen, std::memory_order_acquire);
            seen = go_.load(std::memory_order_acquire);
            if (seen == kStop) return;
            job_(i, seen);
            done_.fetch_add(1, std::memory_order_release);
            done_.notify_one();
        }
    }
    size_t n_;
    std::function<void(size_t, uint32_t)> job_;
    std::atomic<uint32_t> go_{0}, done_{0};
    std::vector<std::thread> threads_;
};

// The iteration's time when threads run it together: from the first one's start to the last one's
// end (each thread's t0 and t1).
template <class Thread>
void time_first_to_last(benchmark::State& st, const std::vector<Thread>& ts) {
    auto first = ts[0].t0, last = ts[0].t1;
    for (const Thread& t : ts) first = std::min(first, t.t0), last = std::max(last, t.t1);
    st.SetIterationTime(std::chrono::duration<double>(last - first).count());
}

// W = 1, 2, 4, ... up to all but one of the host's cores (2 at least: the two-worker figure).
inline void worker_counts(benchmark::internal::Benchmark* b) {
    const unsigned most = std::max(2u, std::thread::hardware_concurrency() - 1);
    for (unsigned w = 1; w <= most; w *= 2) b->Arg(w);
}

}  // namespace svcgate::bench
