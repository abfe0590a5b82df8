// Micro-benchmarks of the fast path's parts and of the whole pipeline without a NIC
// (bench/README.md): parse, classify, flow lookup hit and miss, flow insert, translate, Maglev build;
// process_burst on established and on new flows (the table 10% or 90% full) at 10 to 100,000
// services, and the same over IPv6 at one size; bytes per flow at 10 million flows, both
// families. Speeds are reported as items (packets) per second.
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

namespace {

constexpr uint32_t kClientBase = 0xc6120001;  // 198.18.0.1
constexpr uint32_t kVipBase = 0x0a600000;     // 10.96.0.0
constexpr uint32_t kPodBase = 0x0a800000;     // 10.128.0.0

// The macro benchmark's world (bench/gen.py config): one port, pods behind 10.0.0.2 / fd00::2.
// IPv6 Services (family 6) mirror the IPv4 ones: ClusterIP fd00:96:: + i + 1, pods fd00:128:: + n.
// `cluster_extra`: more keys of the cluster map (", masquerade_all: true").
std::string config(int services, int family = 4, const std::string& cluster_extra = "") {
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
FlowKey flow_key(uint32_t i, uint32_t services) {
    return FlowKey{.src = Ip4::from_host(kClientBase + i / 50000),
                   .dst = Ip4::from_host(kVipBase + i % services + 1),
                   .sport = rte_cpu_to_be_16(static_cast<uint16_t>(10000 + i % 50000)),
                   .dport = rte_cpu_to_be_16(80),
                   .proto = static_cast<uint8_t>(Proto::tcp)};
}

// Flow i as a table record: the client's tuple and the reply from a pod of its own.
FlowInit flow_init(uint32_t i) {
    const FlowKey k = flow_key(i, 100000);
    FlowInit fi{.key = {k, k.reversed()}};
    fi.key[1].src = Ip4::from_host(kPodBase + i);
    return fi;
}

// Flow i over IPv6: client 2001:2:: + 1 + i / 50000, VIP fd00:96:: + 1 + i % services (as
// config(services, 6) writes them), ports as for IPv4.
Ip6 six(uint16_t g0, uint16_t g1, uint32_t low) {
    Ip6 a;
    a.b[0] = static_cast<uint8_t>(g0 >> 8), a.b[1] = static_cast<uint8_t>(g0);
    a.b[2] = static_cast<uint8_t>(g1 >> 8), a.b[3] = static_cast<uint8_t>(g1);
    for (int k = 0; k < 4; ++k) a.b[15 - k] = static_cast<uint8_t>(low >> (8 * k));
    return a;
}
FlowKey6 flow_key6(uint32_t i, uint32_t services) {
    return FlowKey6{.src = six(0x2001, 0x2, 1 + i / 50000),
                    .dst = six(0xfd00, 0x96, i % services + 1),
                    .sport = rte_cpu_to_be_16(static_cast<uint16_t>(10000 + i % 50000)),
                    .dport = rte_cpu_to_be_16(80),
                    .proto = static_cast<uint8_t>(Proto::tcp)};
}

// Flow i as an IPv6 table record: the client's tuple and the reply from a pod of its own.
FlowInit6 flow_init6(uint32_t i) {
    const FlowKey6 k = flow_key6(i, 100000);
    FlowInit6 fi{.key = {k, k.reversed()}};
    fi.key[1].src = six(0xfd00, 0x128, i);
    return fi;
}

// A TCP ACK frame for `k` (60 bytes over IPv4, 74 over IPv6), checksums valid.
std::vector<uint8_t> frame_of(size_t len, uint16_t ether_type) {
    std::vector<uint8_t> f(len, 0);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(f.data());
    eth->dst_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x01}};
    eth->src_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x02}};
    eth->ether_type = rte_cpu_to_be_16(ether_type);
    return f;
}
void tcp_ack(rte_tcp_hdr* tcp, rte_be16_t sport, rte_be16_t dport) {
    tcp->src_port = sport;
    tcp->dst_port = dport;
    tcp->sent_seq = rte_cpu_to_be_32(1);
    tcp->recv_ack = rte_cpu_to_be_32(1);
    tcp->data_off = 5 << 4;
    tcp->tcp_flags = RTE_TCP_ACK_FLAG;
    tcp->rx_win = 0xffff;
}
std::vector<uint8_t> frame(const FlowKey& k) {
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
std::vector<uint8_t> frame(const FlowKey6& k) {
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
uint16_t sink(void*, uint16_t, rte_mbuf**, uint16_t n) noexcept { return n; }

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
        ctl::init_tool_eal("svcgate-microbench");
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

std::vector<std::vector<uint8_t>> frames_for(uint32_t first, uint32_t n, uint32_t services, int family = 4) {
    std::vector<std::vector<uint8_t>> v;
    v.reserve(n);
    for (uint32_t i = 0; i < n; ++i)
        v.push_back(family == 4 ? frame(flow_key(first + i, services)) : frame(flow_key6(first + i, services)));
    return v;
}

void BM_Parse(benchmark::State& st) {
    auto frames = frames_for(0, kBurst, 100);
    PacketMeta m;
    for (auto _ : st)
        for (const auto& f : frames) {
            benchmark::DoNotOptimize(parse_packet(f.data(), static_cast<uint32_t>(f.size()), m));
            benchmark::DoNotOptimize(m);
        }
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
BENCHMARK(BM_Parse);

// KUBE-SERVICES: the (VIP, port, protocol) lookup of a new flow, at 10 to 100,000 services.
void BM_Classify(benchmark::State& st) {
    const int services = static_cast<int>(st.range(0));
    World w(services, 1024);
    std::vector<uint64_t> keys;
    std::mt19937 rng(1);
    for (int i = 0; i < 4096; ++i) {
        FlowKey k = flow_key(rng() % 1000000, services);
        keys.push_back(VipTable::key(k.dst, k.dport, k.proto));
    }
    size_t i = 0;
    for (auto _ : st) {
        benchmark::DoNotOptimize(w.snap().vips.find(keys[i]));
        i = (i + 1) & 4095;
    }
    st.SetItemsProcessed(int64_t(st.iterations()));
}
BENCHMARK(BM_Classify)->Arg(10)->Arg(1000)->Arg(100000);

// A table of `flows` flows; bursts of 32 lookups in random order, all hits or all misses.
void flow_lookup(benchmark::State& st, bool hit) {
    const uint32_t n = static_cast<uint32_t>(st.range(0));
    FlowTable::Params p{.capacity = n};
    auto t = FlowTable::create(p);
    for (uint32_t i = 0; i < n; ++i) {
        if (t->insert(0, flow_init(i), 1).status != InsertStatus::inserted) st.SkipWithError("insert failed");
    }
    std::vector<FlowKey> keys(1 << 16);
    std::mt19937 rng(7);
    for (auto& k : keys) k = flow_key(rng() % n + (hit ? 0 : n), 100000);
    const FlowKey* ptr[kBurst];
    FlowRef refs[kBurst];
    size_t at = 0;
    for (auto _ : st) {
        for (unsigned i = 0; i < kBurst; ++i) ptr[i] = &keys[(at + i) & 0xffff];
        t->lookup_bulk(ptr, kBurst, refs);
        benchmark::DoNotOptimize(refs);
        at += kBurst;
    }
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
void BM_FlowLookupHit(benchmark::State& st) { flow_lookup(st, true); }
void BM_FlowLookupMiss(benchmark::State& st) { flow_lookup(st, false); }
BENCHMARK(BM_FlowLookupHit)->Arg(1000)->Arg(1000000)->Arg(10000000);
BENCHMARK(BM_FlowLookupMiss)->Arg(1000)->Arg(1000000);

// Inserts of new flows into a table holding `flows` (its capacity twice that); each batch of 32
// is removed again, untimed, so the fill stays put.
void BM_FlowInsert(benchmark::State& st) {
    const uint32_t n = static_cast<uint32_t>(st.range(0));
    auto t = FlowTable::create(FlowTable::Params{.capacity = 2 * n + 1024});
    for (uint32_t i = 0; i < n; ++i) (void)t->insert(0, flow_init(i), 1);
    uint32_t next = n;
    uint32_t ids[kBurst];
    for (auto _ : st) {
        const auto t0 = std::chrono::steady_clock::now();
        for (unsigned i = 0; i < kBurst; ++i) ids[i] = t->insert(0, flow_init(next + i), 1).id;
        const auto t1 = std::chrono::steady_clock::now();
        st.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
        for (unsigned i = 0; i < kBurst; ++i) t->remove(ids[i]);
        next += kBurst;
        if (next > 50000000) next = n;
    }
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
BENCHMARK(BM_FlowInsert)->Arg(1000)->Arg(1000000)->UseManualTime();

// DNAT of one frame: addresses, ports, IP and TCP checksums (incremental), there and back.
void BM_Translate(benchmark::State& st) {
    auto f = frame(flow_key(1, 100));
    PacketMeta m;
    (void)parse_packet(f.data(), static_cast<uint32_t>(f.size()), m);
    const FlowKey a = m.key;
    FlowKey b = a;
    b.dst = Ip4::from_host(kPodBase + 7);
    b.dport = rte_cpu_to_be_16(8080);
    PacketMeta mb = m;
    mb.key = b;
    for (auto _ : st) {
        rewrite_tuple(f.data(), m, b);
        rewrite_tuple(f.data(), mb, a);
        benchmark::DoNotOptimize(f.data());
    }
    st.SetItemsProcessed(int64_t(st.iterations()) * 2);
}
BENCHMARK(BM_Translate);

void BM_MaglevBuild(benchmark::State& st) {
    const uint32_t n = static_cast<uint32_t>(st.range(0));
    std::vector<uint64_t> ids;
    for (uint32_t i = 0; i < n; ++i)
        ids.push_back(EndpointKey{IpAddr::of(Ip4::from_host(kPodBase + i)), rte_cpu_to_be_16(8080)}.word());
    for (auto _ : st) benchmark::DoNotOptimize(maglev_build(ids, maglev_table_size(n)));
    st.counters["table"] = maglev_table_size(n);
}
BENCHMARK(BM_MaglevBuild)->Arg(3)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

// The whole pipeline on established flows (4,096 flows over `services` services), mbuf copy
// included (what net_pcap's infinite_rx does per packet); IPv4 or IPv6 (74-byte frames).
void pipeline_established(benchmark::State& st, int family, const std::function<void(World&)>& setup = {}) {
    const int services = static_cast<int>(st.range(0));
    World w(services, 1u << 16, family);
    if (setup) setup(w);
    auto frames = frames_for(0, 4096, static_cast<uint32_t>(services), family);
    rte_mbuf* m[kBurst];
    if (rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) != 0) st.SkipWithError("mbufs");
    for (size_t i = 0; i < frames.size(); i += kBurst) w.burst(frames, i, kBurst, m);  // pick up
    size_t at = 0;
    for (auto _ : st) {
        w.burst(frames, at, kBurst, m);
        at = (at + kBurst) % frames.size();
    }
    for (unsigned i = 0; i < kBurst; ++i)
        if (w.verdict(i) != Verdict::dnat) {
            st.SkipWithError("not translated");
            break;
        }
    rte_pktmbuf_free_bulk(m, kBurst);
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
void BM_PipelineEstablished(benchmark::State& st) { pipeline_established(st, 4); }
void BM_PipelineEstablished6(benchmark::State& st) { pipeline_established(st, 6); }
BENCHMARK(BM_PipelineEstablished)->Arg(10)->Arg(1000)->Arg(10000)->Arg(100000);
BENCHMARK(BM_PipelineEstablished6)->Arg(10);

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
uint16_t loopback_port(int type, int* fd = nullptr) {
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

// Active health checks (control/probe/) beside the fast path: the prober checking `n` endpoints
// every 2 s on the cores other than the benchmark's, as the daemon's control thread runs beside
// a worker. Each endpoint is a closed port of 127.0.0.1: a refused connect (socket, bind,
// connect, RST, close), a check's whole cost without a peer's. prober_cpu_pct: its share of a
// core, the process's CPU time less the benchmark thread's.
class ProberLoad {
public:
    explicit ProberLoad(unsigned n) {
        prober_ = start_beside([] { return std::make_unique<ctl::Prober>(); });
        const uint16_t closed = loopback_port(SOCK_STREAM);  // nothing listens there
        std::string err;
        const ctl::HealthCheckConfig hc = *ctl::parse_health_check("tcp interval_ms=2000 timeout_ms=1000", err);
        std::vector<ctl::ProbeTarget> targets;
        for (unsigned i = 0; i < n; ++i)
            targets.push_back({.service = fmt::format("bench/s{}", i),
                               .ip = *ctl::parse_ip("127.0.0.1"),
                               .port = closed,
                               .check = hc,
                               .source = *ctl::parse_ip("127.0.0.1"),
                               .device = "lo"});
        prober_->set_targets(std::move(targets));
        wall0_ = std::chrono::steady_clock::now();
        cpu_ = OthersCpu();
    }
    double cpu_pct() const {
        return 100 * cpu_.seconds() / std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
    }

private:
    std::unique_ptr<ctl::Prober> prober_;
    std::chrono::steady_clock::time_point wall0_;
    OthersCpu cpu_;
};

// The established path at 10 Services with the prober off (0) and on at 10,000 endpoints (1).
void BM_EstablishedChecks(benchmark::State& st) {
    std::optional<ProberLoad> load;
    if (st.range(1)) load.emplace(10000);
    pipeline_established(st, 4);
    if (load) st.counters["prober_cpu_pct"] = load->cpu_pct();
}
BENCHMARK(BM_EstablishedChecks)->Args({10, 0})->Args({10, 1});

// The floor under the established path, built up in layers on one harness, one set of frames,
// one table and its flows (4,096 or 1M of them over 10 Services), so the pipeline's cost splits
// into svcgate's parse, lookup and translation (what every NAT gateway with a flow table does, as
// svcgate does it) and the rest of its path:
// 0 = the frame copy into the mbuf and the sink (the harness itself, as net_pcap's copy);
// 1 = + the parse stage (parse_burst, as the pipeline runs it: its fast path for these frames, every
// check the pipeline makes); 2 = + the bulk flow lookup; 3 = + the
// translation from the flow's other tuple with TTL and checksums (rewrite_tuple), and the MACs;
// 4 = the whole pipeline instead (process_burst: also conntrack, counters, route and next hop,
// verdicts, the transmit queue).
void BM_EstablishedFloor(benchmark::State& st) {
    const int layer = static_cast<int>(st.range(0));
    const auto n_flows = static_cast<uint32_t>(st.range(1));
    World w(10, std::max(1u << 16, 2 * n_flows));  // sized as bench/gen.py config sizes it
    auto frames = frames_for(0, n_flows, 10);
    rte_mbuf* m[kBurst];
    if (rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) != 0) return st.SkipWithError("mbufs");
    for (size_t i = 0; i < frames.size(); i += kBurst) w.burst(frames, i, kBurst, m);  // pick up
    FlowTable& t = *w.flows;
    auto parsed = std::make_unique<Burst>();  // the parse layer's burst state
    Burst& pb = *parsed;
    const FlowKey* keys[kBurst];
    FlowRef refs[kBurst];
    const rte_ether_addr src{{0x02, 0, 0, 0, 0, 0x01}}, dst{{0x02, 0, 0, 0, 0, 0x02}};
    size_t at = 0;
    uint64_t translated = 0, dropped = 0;
    for (auto _ : st) {
        if (layer == 4) {
            w.burst(frames, at, kBurst, m);
            for (uint16_t i = 0; i < kBurst; ++i) translated += w.verdict(i) == Verdict::dnat;
            at = (at + kBurst) % frames.size();
            continue;
        }
        World::copy_in(frames, at, kBurst, m);
        if (layer >= 1) {
            std::copy(m, m + kBurst, pb.mbufs);
            pb.start(kBurst, 0);
            parse_burst(pb, w.ctx);
            dropped += kBurst - pb.flows.n;
            for (uint16_t i = 0; i < kBurst; ++i) keys[i] = &pb.pkt[i].meta.key;
            benchmark::DoNotOptimize(pb.pkt);  // what parse wrote is kept, whichever layers follow
        }
        if (layer >= 2) dropped += t.lookup_bulk(keys, kBurst, refs);  // the misses
        if (layer >= 3) {
            for (uint16_t i = 0; i < kBurst; ++i) {
                if (!refs[i].hit()) continue;
                const Flow& f = t.flow(refs[i].id);
                const FlowKey out = f.key[refs[i].dir == Direction::original ? 1 : 0].reversed();
                uint8_t* frame = rte_pktmbuf_mtod(m[i], uint8_t*);
                if (!decrement_ttl(frame, pb.pkt[i].meta)) continue;
                rewrite_tuple(frame, pb.pkt[i].meta, out);
                auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
                eth->src_addr = src;
                eth->dst_addr = dst;
                ++translated;
            }
        }
        (void)sink(nullptr, 0, m, kBurst);
        benchmark::DoNotOptimize(m[kBurst - 1]->buf_addr);
        at = (at + kBurst) % frames.size();
    }
    // Every packet parsed, found and translated (each layer's work really done).
    if (dropped || (layer >= 3 && translated != uint64_t(st.iterations()) * kBurst)) st.SkipWithError("not translated");
    st.counters["flows"] = n_flows;
    rte_pktmbuf_free_bulk(m, kBurst);
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
BENCHMARK(BM_EstablishedFloor)->ArgsProduct({{0, 1, 2, 3, 4}, {4096, 1 << 20}});

// Every packet a new connection: the table (1M flows) prefilled to range(1) percent; each burst
// of 32 new flows is timed, then removed untimed so the fill stays put. IPv4 or IPv6.
// `cluster_extra`, `setup`: the World's cluster keys and a change to its worker (the masquerade
// benchmark's).
template <class Table, class KeyOf, class InitOf>
void pipeline_new_flows(benchmark::State& st, int family, Table& (*table)(World&), KeyOf key_of, InitOf init_of,
                        const std::string& cluster_extra = "", const std::function<void(World&)>& setup = {},
                        const std::function<void()>& done = {}) {
    const int services = static_cast<int>(st.range(0));
    const uint32_t capacity = 1u << 20, fill = static_cast<uint32_t>(uint64_t{capacity} * st.range(1) / 100);
    World w(services, capacity, family, cluster_extra);
    if (setup) setup(w);
    Table& t = table(w);
    rte_mbuf* m[kBurst];
    if (rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) != 0) st.SkipWithError("mbufs");
    for (uint32_t i = 0; i < fill; ++i) (void)t.insert(0, init_of(i), 1);  // the fill, straight in
    auto frames = frames_for(fill, 1u << 16, static_cast<uint32_t>(services), family);
    size_t at = 0;
    for (auto _ : st) {
        const auto t0 = std::chrono::steady_clock::now();
        w.burst(frames, at, kBurst, m);
        const auto t1 = std::chrono::steady_clock::now();
        st.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
        for (unsigned i = 0; i < kBurst; ++i) {
            if (w.verdict(i) != Verdict::dnat) {
                st.SkipWithError("a new flow was not translated");
                break;
            }
            FlowRef r = t.lookup(
                key_of(fill + static_cast<uint32_t>((at + i) % frames.size()), static_cast<uint32_t>(services)));
            if (!r.hit()) continue;
            nat_event(w.ctx, t.flow(r.id), NatEventType::end, FlowEnd::idle_timeout);  // exporting: its delete
            release_flow(*w.ctx.stats, w.ctx.worker, t.flow(r.id));
            t.remove(r.id);
        }
        if (w.ctx.events && w.ctx.events->n) flush_nat_events(w.ctx);
        at = (at + kBurst) % frames.size();
    }
    rte_pktmbuf_free_bulk(m, kBurst);
    if (done) done();
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
    st.counters["fill_pct"] = static_cast<double>(st.range(1));
    if (!cluster_extra.empty()) {  // the masquerade benchmark: how many of its ports were steered
        const double items = static_cast<double>(st.iterations()) * kBurst;
        st.counters["steered_pct"] = 100.0 * static_cast<double>(w.ctx.counters.snat_steered) / items;
    }
}
FlowTable& table4(World& w) { return *w.flows; }
FlowTable6& table6(World& w) { return *w.flows6; }
void BM_PipelineNewFlows(benchmark::State& st) { pipeline_new_flows(st, 4, &table4, flow_key, flow_init); }
void BM_PipelineNewFlows6(benchmark::State& st) { pipeline_new_flows(st, 6, &table6, flow_key6, flow_init6); }
// New flows (table 90% full, 10 Services) with the prober off (0) and on at 10,000 endpoints (1).
void BM_NewFlowsChecks(benchmark::State& st) {
    std::optional<ProberLoad> load;
    if (st.range(2)) load.emplace(10000);
    pipeline_new_flows(st, 4, &table4, flow_key, flow_init);
    if (load) st.counters["prober_cpu_pct"] = load->cpu_pct();
}
BENCHMARK(BM_NewFlowsChecks)->Args({10, 90, 0})->Args({10, 90, 1})->UseManualTime();

// NAT events exported (control/export/) beside new flows: the worker's ring and the exporter's
// thread on the other cores, sending IPFIX to a UDP socket on loopback nobody reads. A flow's
// create is logged in the timed burst, its delete in the untimed removal (a worker's housekeeping
// would log it). exporter_ns_per_event: the exporter's CPU time per event (the process's less the
// benchmark thread's); events_dropped: what the ring refused.
class ExporterLoad {
public:
    explicit ExporterLoad(World& w) {
        // Empty tables again, counting each flow's packets and octets as the daemon's do when it
        // exports (FlowTableParams::count).
        w.flows = FlowTable::create({.capacity = w.flows->capacity(), .owners = w.flows->owners(), .count = true});
        w.flows6 = FlowTable6::create({.capacity = w.flows6->capacity(), .owners = w.flows6->owners(), .count = true});
        w.ctx.flows = w.flows.get(), w.ctx.flows6 = w.flows6.get();
        static unsigned serial = 0;
        ring_ = rte_ring_create_elem(fmt::format("bench_nat{}", serial++).c_str(), sizeof(NatEvent), 1u << 16,
                                     SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        const uint16_t port = loopback_port(SOCK_DGRAM, &sink_);  // bound, never read
        const ctl::IpfixConfig cfg{.enabled = true, .collectors = {{*ctl::parse_ip("127.0.0.1"), port}}};
        exporter_ =
            start_beside([&] { return std::make_unique<ctl::IpfixExporter>(cfg, std::vector<rte_ring*>{ring_}); });
        w.ctx.nat_ring = ring_;
        w.ctx.events = &buf_;
        w.ctx.nat_event_types =
            1u << static_cast<unsigned>(NatEventType::create) | 1u << static_cast<unsigned>(NatEventType::end);
        ctx_ = &w.ctx;
        cpu_ = OthersCpu();
    }
    ~ExporterLoad() {
        exporter_.reset();
        rte_ring_free(ring_);
        close(sink_);
    }
    // Before the World goes: the counters, then the worker no longer logs.
    void report(benchmark::State& st) {
        const double events = static_cast<double>(ctx_->counters.nat_events);
        st.counters["exporter_ns_per_event"] = events ? 1e9 * cpu_.seconds() / events : 0;
        st.counters["events_dropped"] = static_cast<double>(ctx_->counters.nat_events_dropped);
        ctx_->nat_ring = nullptr, ctx_->events = nullptr;
    }

private:
    rte_ring* ring_ = nullptr;
    int sink_ = -1;
    NatEventBuffer buf_;
    WorkerCtx* ctx_ = nullptr;
    std::unique_ptr<ctl::IpfixExporter> exporter_;
    OthersCpu cpu_;
};

// New flows (table 90% full, 10 Services) with NAT event export off (0) and on (1).
void BM_NewFlowsIpfix(benchmark::State& st) {
    std::optional<ExporterLoad> load;
    pipeline_new_flows(
        st, 4, &table4, flow_key, flow_init, "",
        [&](World& w) {
            if (st.range(2)) load.emplace(w);
        },
        [&] {
            if (load) load->report(st);
        });
}
BENCHMARK(BM_NewFlowsIpfix)->Args({10, 90, 0})->Args({10, 90, 1})->UseManualTime();

// The established path (4,096 flows, 10 Services) with NAT event export off (0) and on (1): on,
// each packet also counts its flow's packets and octets (FlowCounters) for the end's record.
void BM_EstablishedIpfix(benchmark::State& st) {
    std::optional<ExporterLoad> load;
    pipeline_established(st, 4, [&](World& w) {
        if (st.range(1)) load.emplace(w);
    });  // the World is gone here, and its worker with it: nothing to report
}
BENCHMARK(BM_EstablishedIpfix)->Args({10, 0})->Args({10, 1});
BENCHMARK(BM_PipelineNewFlows)
    ->Args({10, 10})
    ->Args({10, 90})
    ->Args({1000, 90})
    ->Args({10000, 90})
    ->Args({100000, 90})
    ->UseManualTime();
BENCHMARK(BM_PipelineNewFlows6)->Args({10, 90})->UseManualTime();

// Masqueraded new connections (masquerade_all; 10 Services, table 90% full), the masquerade port
// steered (range(2) = 1) or not (0): what choosing a port whose reply lands on the worker's queue
// costs a new flow (dataplane/lb/rss_steer.h; here 4 queues under DPDK's default RETA and the RSS
// verification key, the worker owning queue 0).
void BM_PipelineNewFlowsMasq(benchmark::State& st) {
    static auto steer = [] {
        auto r = std::make_unique<RssSteer>();
        r->set_default(kRssVerificationKey, 128, 4);
        return r;
    }();
    static const RssSteer* by_port[1] = {steer.get()};
    const bool steered = st.range(2) == 1;
    pipeline_new_flows(st, 4, &table4, flow_key, flow_init, ", masquerade_all: true", [steered](World& w) {
        w.ctx.n_workers = 4;  // the port's queues; this worker owns queue 0
        if (steered) w.ctx.rss = by_port, w.ctx.n_rss = 1;
    });
    st.counters["steered"] = static_cast<double>(steered);
}
BENCHMARK(BM_PipelineNewFlowsMasq)->Args({10, 90, 0})->Args({10, 90, 1})->UseManualTime();

// One worker of BM_PipelineNewFlowsWorkers: a context, burst and mbufs of its own, as a lcore of
// the daemon, and its own new flows (`kPerWorker` of them from flow `first`).
struct NewFlowWorker {
    static constexpr uint32_t kRounds = 512, kPerWorker = kRounds * kBurst, kServices = 10;
    WorkerCtx ctx;
    std::unique_ptr<Burst> b = std::make_unique<Burst>();
    rte_mbuf* m[kBurst];
    uint32_t first = 0;
    std::vector<std::vector<uint8_t>> frames;
    std::chrono::steady_clock::time_point t0, t1;
    uint64_t untranslated = 0;

    // Worker `i` of `n` on World `w`'s tables, snapshot and stats.
    bool init(World& w, uint16_t i, uint16_t n, uint32_t from) {
        w.attach(ctx);
        ctx.snap = w.ctx.snap, ctx.stats = w.ctx.stats;
        ctx.worker = i, ctx.n_workers = n, ctx.rng = Rng(1 + i);
        first = from + i * kPerWorker;
        frames = frames_for(first, kPerWorker, kServices);
        return rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) == 0;
    }
    void insert() {  // timed
        t0 = std::chrono::steady_clock::now();
        for (uint32_t r = 0; r < kRounds; ++r) {
            World::copy_in(frames, r * kBurst, kBurst, m);
            std::copy_n(m, kBurst, b->mbufs);
            b->start(kBurst, 0);
            process_burst(*b, ctx);
            for (unsigned i = 0; i < kBurst; ++i) untranslated += b->pkt[i].verdict != Verdict::dnat;
        }
        t1 = std::chrono::steady_clock::now();
    }
    void remove() {  // untimed: the fill back where it was
        FlowTable& t = *ctx.flows;
        for (uint32_t i = 0; i < kPerWorker; ++i) {
            FlowRef ref = t.lookup(flow_key(first + i, kServices));
            if (!ref.hit()) continue;
            release_flow(*ctx.stats, ctx.worker, t.flow(ref.id));
            t.remove(ref.id);
        }
    }
};

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

// New connections on `workers` threads at once, all inserting into the one shared table (4M flows,
// 90% full, 10 Services) that `owners` workers own (its fill spread over them): with as many
// owners as workers, what bench/run's scaling section reports as new_flows_mpps_by_workers
// (BM_PipelineNewFlowsWorkers). Each iteration every worker runs its own 512 bursts of new flows,
// started together; its time is from the first worker's start to the last one's end. Once all are
// done the workers remove their flows, untimed, so the fill stays put.
void new_flows_workers(benchmark::State& st, uint16_t workers, uint16_t owners) {
    constexpr uint32_t kCapacity = 1u << 22, kFill = kCapacity / 10 * 9;
    World w(NewFlowWorker::kServices, kCapacity, 4, "", owners);
    for (uint32_t i = 0; i < kFill; ++i) (void)w.flows->insert(static_cast<uint16_t>(i % owners), flow_init(i), 1);
    std::vector<NewFlowWorker> ws(workers);
    for (uint16_t i = 0; i < workers; ++i)
        if (!ws[i].init(w, i, owners, kFill)) st.SkipWithError("mbufs");
    // Phase 2k + 1: iteration k's inserts; 2k + 2: its removals.
    PhaseThreads threads(workers, [&ws](size_t i, uint32_t phase) {
        if (phase % 2)
            ws[i].insert();
        else
            ws[i].remove();
    });
    uint32_t iteration = 0;
    for (auto _ : st) {
        threads.run(2 * iteration + 1);
        time_first_to_last(st, ws);
        threads.run(2 * ++iteration);
    }
    uint64_t untranslated = 0;
    for (NewFlowWorker& me : ws) {
        untranslated += me.untranslated;
        rte_pktmbuf_free_bulk(me.m, kBurst);
    }
    if (untranslated) st.SkipWithError(fmt::format("{} new flows were not translated", untranslated).c_str());
    st.SetItemsProcessed(int64_t(st.iterations()) * workers * NewFlowWorker::kPerWorker);
    st.counters["workers"] = workers;
    st.counters["fill_pct"] = 90;
}
void BM_PipelineNewFlowsWorkers(benchmark::State& st) {
    const auto workers = static_cast<uint16_t>(st.range(0));
    new_flows_workers(st, workers, workers);
}
// One worker alone on a table that two workers own: the multi-writer insert (its bucket locks and
// slot CAS) without a second writer, against BM_PipelineNewFlowsWorkers/1 (a lone writer's plain
// stores): what the table's sharing costs a worker before another writes anything.
void BM_PipelineNewFlowsTwoOwners(benchmark::State& st) { new_flows_workers(st, 1, 2); }
// W = 1, 2, 4, ... up to all but one of the host's cores (2 at least: the two-worker figure).
void worker_counts(benchmark::internal::Benchmark* b) {
    const unsigned most = std::max(2u, std::thread::hardware_concurrency() - 1);
    for (unsigned w = 1; w <= most; w *= 2) b->Arg(w);
}
BENCHMARK(BM_PipelineNewFlowsWorkers)->Apply(worker_counts)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PipelineNewFlowsTwoOwners)->UseManualTime()->Unit(benchmark::kMillisecond);

// Flows that prove themselves, with replication off (0) and on (1): each iteration, a burst of new
// connections (a client's ACK: conntrack picks the connection up) and then the pods' replies,
// which prove them (control/ha/sync.h): both bursts timed, so the figure is connections per second
// through their first two packets. The flows stay (960,000 of them in 2M records, the worker's
// half of the ids: ids are never reused within a run, as a grace period keeps them in the
// daemon). With replication on, a sync thread (control/ha/sync.h, on the other core as in the
// daemon) takes the worker's ring, packs the records into datagrams and sends them over loopback
// to a peer played here, which counts their bytes: sync_bytes_per_flow. A full ring fails the
// run.
constexpr uint32_t kProvenFlows = 960000;
void BM_PipelineProvenFlows(benchmark::State& st) {
    const bool sync_on = st.range(0) == 1;
    constexpr uint32_t kServices = 10, kFlows = 1u << 21;
    static_assert(kProvenFlows <= kFlows / 2, "the worker owns half of the ids");
    World w(static_cast<int>(kServices), 1024);
    // Replicating: the sync thread owns the table's second owner.
    w.flows = FlowTable::create(FlowTable::Params{.capacity = kFlows, .owners = 2});
    w.ctx.flows = w.flows.get();
    rte_mbuf* m[kBurst];
    if (rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) != 0) st.SkipWithError("mbufs");
    // The peer, played here: a socket that takes the datagrams, and a hello now and then so the
    // sync thread counts it alive.
    std::unique_ptr<rte_ring, void (*)(rte_ring*)> ring(
        rte_ring_create_elem("sg_bench_sync", sizeof(uint32_t), ctl::Syncer::kEventRing, SOCKET_ID_ANY,
                             RING_F_SP_ENQ | RING_F_SC_DEQ),
        rte_ring_free);
    std::atomic<const ServiceSnapshot*> snap{w.ctx.snap};
    std::atomic<StatsTable*> stats{w.ctx.stats};
    std::unique_ptr<ctl::Syncer> syncer;
    int peer = -1;
    sockaddr_in pa{}, ga{};
    ctl::sync::Key key;
    key.fill(0x42);
    std::unique_ptr<ctl::sync::Sealer> hello_sealer;
    uint32_t sync_id = 0;  // the sync thread's peer id: its hellos' `to`
    uint64_t bytes = 0, records = 0;
    auto take = [&] {  // what the peer received so far
        uint8_t d[2048];
        for (ssize_t n; (n = recv(peer, d, sizeof d, MSG_DONTWAIT)) > 0;)
            if (n > 8 && d[5] == static_cast<uint8_t>(ctl::sync::Type::flows)) bytes += n, records += d[6] | d[7] << 8;
    };
    auto hello = [&] {
        uint8_t body[ctl::sync::kHelloMax], d[ctl::sync::kMaxDatagram];
        const size_t n = ctl::sync::encode_hello(ctl::sync::Hello{.to = sync_id}, body);
        const size_t len = hello_sealer->seal(ctl::sync::Type::hello, 0, std::span<const uint8_t>(body, n), d);
        sendto(peer, d, len, 0, reinterpret_cast<sockaddr*>(&ga), sizeof ga);
    };
    if (sync_on) {
        peer = socket(AF_INET, SOCK_DGRAM, 0);
        pa.sin_family = ga.sin_family = AF_INET;
        pa.sin_addr.s_addr = ga.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof pa;
        if (bind(peer, reinterpret_cast<sockaddr*>(&pa), sizeof pa) != 0) st.SkipWithError("bind");
        getsockname(peer, reinterpret_cast<sockaddr*>(&pa), &len);
        ctl::HaConfig cfg;
        // The sync thread's port: one free now.
        const int probe = socket(AF_INET, SOCK_DGRAM, 0);
        bind(probe, reinterpret_cast<sockaddr*>(&ga), sizeof ga);
        getsockname(probe, reinterpret_cast<sockaddr*>(&ga), &len);
        close(probe);
        cfg.listen = {*ctl::parse_ip("127.0.0.1"), ntohs(ga.sin_port)};
        cfg.peers.push_back({*ctl::parse_ip("127.0.0.1"), ntohs(pa.sin_port)});
        cfg.key = key;
        cfg.refresh_seconds = 3600;  // events only
        hello_sealer =
            std::make_unique<ctl::sync::Sealer>(key, ctl::sync::peer_id(cfg.peers[0].addr.a.b, cfg.peers[0].port), 1);
        sync_id = ctl::sync::peer_id(cfg.listen.addr.a.b, cfg.listen.port);
        syncer = std::make_unique<ctl::Syncer>(cfg,
                                               ctl::Syncer::Wiring{.flows = w.flows.get(),
                                                                   .flows6 = nullptr,
                                                                   .owner = 1,
                                                                   .workers = 1,
                                                                   .rings = {ring.get()},
                                                                   .qsbr = nullptr,
                                                                   .qsbr_id = 0,
                                                                   .snapshot = &snap,
                                                                   .stats = &stats});
        // The sync thread on a core of its own, as in the daemon (where it shares the control
        // thread's, never a worker's): it inherits the affinity of the thread that starts it.
        cpu_set_t mine, others;
        pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
        CPU_ZERO(&others);
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (!CPU_ISSET(c, &mine) && c < static_cast<int>(std::thread::hardware_concurrency())) CPU_SET(c, &others);
        if (CPU_COUNT(&others)) pthread_setaffinity_np(pthread_self(), sizeof others, &others);
        if (!syncer->start().ok()) st.SkipWithError("sync thread");
        pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
        st.counters["sync_own_core"] = CPU_COUNT(&others) ? 1 : 0;
        hello();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        w.ctx.sync = ring.get();
    }
    std::vector<std::vector<uint8_t>> fwd(kBurst), replies(kBurst);
    uint32_t next = 0;
    for (auto _ : st) {
        if (sync_on && (next & 0x7fff) == 0) hello(), take();
        for (unsigned i = 0; i < kBurst; ++i) fwd[i] = frame(flow_key(next + i, kServices));
        const auto t0 = std::chrono::steady_clock::now();
        w.burst(fwd, 0, kBurst, m);
        const auto t1 = std::chrono::steady_clock::now();
        for (unsigned i = 0; i < kBurst; ++i) {
            const FlowRef r = w.flows->lookup(flow_key(next + i, kServices));
            replies[i] = r.hit() ? frame(w.flows->flow(r.id).key[1]) : fwd[0];
        }
        const auto t2 = std::chrono::steady_clock::now();
        w.burst(replies, 0, kBurst, m);
        const auto t3 = std::chrono::steady_clock::now();
        st.SetIterationTime(std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count());
        if (w.verdict(0) != Verdict::reply) st.SkipWithError("a reply was not translated back");
        next += kBurst;
    }
    if (sync_on) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        syncer->stop();
        take();
        close(peer);
        st.counters["sync_bytes_per_flow"] = records ? static_cast<double>(bytes) / static_cast<double>(records) : 0;
        st.counters["records_received"] = static_cast<double>(records);
        st.counters["events"] = static_cast<double>(w.ctx.counters.sync_events);
        if (w.ctx.counters.sync_ring_full) st.SkipWithError("the sync ring overflowed");
    }
    rte_pktmbuf_free_bulk(m, kBurst);
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
BENCHMARK(BM_PipelineProvenFlows)->Arg(0)->Arg(1)->Iterations(kProvenFlows / kBurst)->UseManualTime();

long rss_bytes() {
    long pages = 0, rss = 0;
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (f) {
        if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
        std::fclose(f);
    }
    return rss * 4096;
}

// Memory: a table sized for and filled with range(0) flows (both directions in one record);
// resident bytes added ÷ flows.
void BM_BytesPerFlow(benchmark::State& st) {
    const uint32_t n = static_cast<uint32_t>(st.range(0));
    double per_flow = 0;
    for (auto _ : st) {
        const long before = rss_bytes();
        auto t = FlowTable::create(FlowTable::Params{.capacity = n});
        uint32_t inserted = 0;
        for (uint32_t i = 0; i < n; ++i) inserted += t->insert(0, flow_init(i), 1).status == InsertStatus::inserted;
        per_flow = static_cast<double>(rss_bytes() - before) / inserted;
        st.counters["flows"] = inserted;
    }
    st.counters["bytes_per_flow"] = per_flow;
}
BENCHMARK(BM_BytesPerFlow)->Arg(10000000)->Iterations(1)->Unit(benchmark::kMillisecond);

// The same for IPv6 flows (FlowTable6: 40-byte tuples, 128-byte records).
void BM_BytesPerFlow6(benchmark::State& st) {
    const uint32_t n = static_cast<uint32_t>(st.range(0));
    double per_flow = 0;
    for (auto _ : st) {
        const long before = rss_bytes();
        auto t = FlowTable6::create(FlowTableParams{.capacity = n});
        uint32_t inserted = 0;
        for (uint32_t i = 0; i < n; ++i) inserted += t->insert(0, flow_init6(i), 1).status == InsertStatus::inserted;
        per_flow = static_cast<double>(rss_bytes() - before) / inserted;
        st.counters["flows"] = inserted;
    }
    st.counters["bytes_per_flow"] = per_flow;
}
BENCHMARK(BM_BytesPerFlow6)->Arg(10000000)->Iterations(1)->Unit(benchmark::kMillisecond);

// The host's own floor for a table larger than the caches: the cost of one random cache line in
// a 1M-flow table's span (128 MiB, advised for huge pages as the flow table is), taken one after
// another (a chain of dependent loads: a lookup that waits on each miss) and in batches of
// range(0) independent loads (a burst's misses overlapping, the most a pass over a burst can
// get). ns_per_line is what each line costs; a new flow touches about five such lines (its
// tuple's two buckets, its reply tuple's two, its record).
void BM_MemoryLine(benchmark::State& st) {
    constexpr size_t kBytes = size_t{128} << 20, kLines = kBytes / 64;
    const unsigned batch = static_cast<unsigned>(st.range(0));
    auto* mem = static_cast<uint64_t*>(std::aligned_alloc(size_t{2} << 20, kBytes));
    if (!mem) return st.SkipWithError("memory");
    madvise(mem, kBytes, MADV_HUGEPAGE);
    std::mt19937_64 rng(7);
    // Each line holds the index of the next one in a random cycle through all of them.
    std::vector<uint32_t> order(kLines);
    for (uint32_t i = 0; i < kLines; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < kLines; ++i) mem[size_t{order[i]} * 8] = order[(i + 1) % kLines];
    // Twice as many random lines as the span has, read in turn: a set of them that fitted in the
    // last-level cache (65,536 lines, 4 MiB, until round twenty-three) made the batches L3 hits.
    std::vector<uint32_t> random(2 * kLines);
    for (auto& r : random) r = static_cast<uint32_t>(rng() % kLines);
    uint64_t at = order[0], sum = 0, lines = 0;
    size_t next = 0;
    for (auto _ : st) {
        if (batch == 1) {
            for (int i = 0; i < 256; ++i) at = mem[at * 8];
            lines += 256;
        } else {
            for (unsigned r = 0; r < 256 / batch; ++r, next = (next + batch) % random.size()) {
                for (unsigned j = 0; j < batch; ++j) sum += mem[size_t{random[next + j]} * 8];
                lines += batch;
            }
        }
    }
    benchmark::DoNotOptimize(at + sum);
    std::free(mem);
    // A rate of lines per nanosecond, inverted: nanoseconds per line.
    st.counters["ns_per_line"] = benchmark::Counter(static_cast<double>(lines) * 1e-9,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MemoryLine)->Arg(1)->Arg(32);

// The host's random-read rate on W cores: W threads (range(0), pinned as the new-flow workers are)
// each reading random cache lines of one 256 MiB span, 32 independent loads at a time
// (BM_MemoryLine/32 on every thread at once), timed from the first thread's start to the last
// one's end. What the misses of many workers share: a new flow takes about five random lines, so
// W workers creating N flows a second each ask for about 5 × W × N of these lines a second.
void BM_MemoryLineWorkers(benchmark::State& st) {
    constexpr size_t kBytes = size_t{256} << 20, kLines = kBytes / 64;
    constexpr unsigned kBatch = 32, kRounds = 1u << 16;  // 2M lines a thread: 4 × the L3 (32 MiB here)
    const auto workers = static_cast<size_t>(st.range(0));
    auto* mem = static_cast<uint64_t*>(std::aligned_alloc(size_t{2} << 20, kBytes));
    if (!mem) return st.SkipWithError("memory");
    madvise(mem, kBytes, MADV_HUGEPAGE);
    std::memset(mem, 1, kBytes);  // faulted in before any timing
    struct Reader {
        std::vector<uint32_t> random;
        std::chrono::steady_clock::time_point t0, t1;
        uint64_t sum = 0;
    };
    std::vector<Reader> rs(workers);
    for (size_t i = 0; i < workers; ++i) {
        std::mt19937_64 rng(11 + i);
        rs[i].random.resize(size_t{kBatch} * kRounds);
        for (auto& r : rs[i].random) r = static_cast<uint32_t>(rng() % kLines);
    }
    PhaseThreads threads(workers, [&rs, mem](size_t i, uint32_t) {
        Reader& me = rs[i];
        me.t0 = std::chrono::steady_clock::now();
        for (size_t at = 0; at < me.random.size(); at += kBatch)
            for (unsigned j = 0; j < kBatch; ++j) me.sum += mem[size_t{me.random[at + j]} * 8];
        me.t1 = std::chrono::steady_clock::now();
    });
    uint32_t phase = 0;
    for (auto _ : st) {
        threads.run(++phase);
        time_first_to_last(st, rs);
    }
    uint64_t sum = 0;
    for (const Reader& me : rs) sum += me.sum;
    benchmark::DoNotOptimize(sum);
    std::free(mem);
    st.SetItemsProcessed(int64_t(st.iterations()) * int64_t(workers) * kBatch * kRounds);
    st.counters["workers"] = static_cast<double>(workers);
}
BENCHMARK(BM_MemoryLineWorkers)->Apply(worker_counts)->UseManualTime()->Unit(benchmark::kMillisecond);

// The state file (control/ha/state_file.h) with n IPv4 flows: the time to write it on a stop, and to
// read, check and decode it at the next start (its flows then go through FlowImporter; the
// inserts themselves are BM_FlowInsert's cost). One iteration: a single run.
void BM_StateFile(benchmark::State& st) {
    const uint32_t n = static_cast<uint32_t>(st.range(0));
    auto t = FlowTable::create(FlowTable::Params{.capacity = n + n / 4});
    for (uint32_t i = 0; i < n; ++i) (void)t->insert(0, flow_init(i), 1);
    const std::string path = "/tmp/svcgate-bench-flows.state";
    ServiceSnapshot empty;
    StatsTable stats(1, 1, 1);
    for (auto _ : st) {
        const auto t0 = std::chrono::steady_clock::now();
        uint32_t written = 0;
        if (ctl::Status s = ctl::save_flow_state(path, "bench", *t, nullptr, 2, 1000, written); !s) {
            st.SkipWithError(s.error().c_str());
            break;
        }
        const auto t1 = std::chrono::steady_clock::now();
        auto other = FlowTable::create(FlowTable::Params{.capacity = 1024});
        ctl::FlowImporter imp(empty, stats, *other, nullptr, other->owners());
        ctl::RestoreResult r;
        if (ctl::Status s = ctl::restore_flow_state(path, "bench", 600, imp, 2, 1000, r); !s) {
            st.SkipWithError(s.error().c_str());
            break;
        }
        const auto t2 = std::chrono::steady_clock::now();
        st.counters["flows"] = written;
        st.counters["save_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
        st.counters["read_ms"] = std::chrono::duration<double, std::milli>(t2 - t1).count();
        st.counters["file_mb"] = (32.0 + 5 + double(written) * kFlowRecordV4 + 8) / 1e6;
    }
    unlink(path.c_str());
}
BENCHMARK(BM_StateFile)->Arg(1000000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
