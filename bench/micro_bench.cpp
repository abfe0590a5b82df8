// Micro-benchmarks of the fast path's parts and of the whole pipeline without a NIC (DESIGN.md
// section 6): parse, classify, flow lookup hit and miss, flow insert, translate, Maglev build;
// process_burst on established and on new flows (the table 10% or 90% full) at 10 to 100,000
// services; bytes per flow at 10 million flows. Speeds are reported as items (packets) per second.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_mbuf.h>

#include "flow_table.h"
#include "maglev.h"
#include "nat.h"
#include "parse.h"
#include "pipeline.h"
#include "publisher.h"
#include "snapshot_builder.h"
#include "tool_eal.h"
#include "yaml_config.h"

using namespace svcgate;
using namespace svcgate::dp;

namespace {

constexpr uint32_t kClientBase = 0xc6120001;  // 198.18.0.1
constexpr uint32_t kVipBase = 0x0a600000;     // 10.96.0.0
constexpr uint32_t kPodBase = 0x0a800000;     // 10.128.0.0

// The macro benchmark's world (bench/gen.py config): one port, pods behind 10.0.0.2.
std::string config(int services) {
    std::string s = R"(dataplane:
  ports: [{name: p0, addresses: [10.0.0.1/24]}]
  routes: [{prefix: 0.0.0.0/0, via: 10.0.0.254}, {prefix: 10.128.0.0/10, via: 10.0.0.2}]
cluster: {node_name: bench, node_ips: [10.0.0.1], service_cidrs: [10.96.0.0/12]}
services:
)";
    auto ip = [](uint32_t a) { return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255); };
    for (int i = 0; i < services; ++i)
        s += fmt::format("  - {{name: b/s{}, cluster_ip: {}, ports: [{{name: http, port: 80, target_port: 8080}}], "
                         "endpoints: [{}, {}, {}]}}\n",
                         i, ip(kVipBase + i + 1), ip(kPodBase + 3 * i + 1), ip(kPodBase + 3 * i + 2),
                         ip(kPodBase + 3 * i + 3));
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

// A 60-byte TCP ACK frame for `k`, checksums valid.
std::vector<uint8_t> frame(const FlowKey& k) {
    std::vector<uint8_t> f(60, 0);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(f.data());
    eth->dst_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x01}};
    eth->src_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x02}};
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
    ip->version_ihl = 0x45;
    ip->total_length = rte_cpu_to_be_16(40);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_TCP;
    ip->src_addr = k.src.be;
    ip->dst_addr = k.dst.be;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    auto* tcp = reinterpret_cast<rte_tcp_hdr*>(ip + 1);
    tcp->src_port = k.sport;
    tcp->dst_port = k.dport;
    tcp->sent_seq = rte_cpu_to_be_32(1);
    tcp->recv_ack = rte_cpu_to_be_32(1);
    tcp->data_off = 5 << 4;
    tcp->tcp_flags = RTE_TCP_ACK_FLAG;
    tcp->rx_win = 0xffff;
    tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
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
    std::unique_ptr<Burst> b = std::make_unique<Burst>();
    rte_mempool* pool = nullptr;

    World(int services, uint32_t capacity) {
        ctl::init_tool_eal("svcgate-microbench");
        cfg = ctl::load_config_string(config(services), "bench.yaml");
        flows = FlowTable::create(FlowTable::Params{.capacity = capacity});
        ctx.flows = flows.get();
        flows6 = FlowTable6::create(FlowTableParams{.capacity = std::max<uint32_t>(capacity / 4, 1024)});
        ctx.flows6 = flows6.get();
        ctx.now = 1;
        pool = ctl::tool_mempool();
        pub = std::make_unique<ctl::Publisher>(1, ctl::PublishTarget{
            .store = [this](const ServiceSnapshot* s) { ctx.snap = s; },
            .store_stats = [this](StatsTable* t) { ctx.stats = t; }});
        pub->publish(cfg);
        // The next hops' MACs are known, as bench/gen.py's config pins them for the macro benchmark.
        for (const char* hop : {"10.0.0.2", "10.0.0.254"}) (void)neighbors.pin(*ctl::parse_ip4(hop), mac);
        ctx.out.init(neighbors, neighbors6, pool, &mac, 1, TxSink{.send = &sink});
    }
    const ServiceSnapshot& snap() const { return *ctx.snap; }
    // Copies frames[first..first+n) into mbufs and runs them through the pipeline; the verdicts
    // are in b->pkt.
    void burst(const std::vector<std::vector<uint8_t>>& frames, size_t first, uint16_t n, rte_mbuf** m) {
        for (uint16_t i = 0; i < n; ++i) {
            const auto& f = frames[(first + i) % frames.size()];
            rte_pktmbuf_reset(m[i]);
            std::memcpy(rte_pktmbuf_append(m[i], static_cast<uint16_t>(f.size())), f.data(), f.size());
            b->mbufs[i] = m[i];
        }
        b->start(n, 0);
        process_burst(*b, ctx);
    }
    Verdict verdict(unsigned i) const { return b->pkt[i].verdict; }
};

std::vector<std::vector<uint8_t>> frames_for(uint32_t first, uint32_t n, uint32_t services) {
    std::vector<std::vector<uint8_t>> v;
    v.reserve(n);
    for (uint32_t i = 0; i < n; ++i) v.push_back(frame(flow_key(first + i, services)));
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
    for (uint32_t i = 0; i < n; ++i) ids.push_back(EndpointKey{IpAddr::of(Ip4::from_host(kPodBase + i)), rte_cpu_to_be_16(8080)}.word());
    for (auto _ : st) benchmark::DoNotOptimize(maglev_build(ids, maglev_table_size(n)));
    st.counters["table"] = maglev_table_size(n);
}
BENCHMARK(BM_MaglevBuild)->Arg(3)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

// The whole pipeline on established flows (4,096 flows over `services` services), mbuf copy
// included (what net_pcap's infinite_rx does per packet).
void BM_PipelineEstablished(benchmark::State& st) {
    const int services = static_cast<int>(st.range(0));
    World w(services, 1u << 16);
    auto frames = frames_for(0, 4096, static_cast<uint32_t>(services));
    rte_mbuf* m[kBurst];
    if (rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) != 0) st.SkipWithError("mbufs");
    for (size_t i = 0; i < frames.size(); i += kBurst) w.burst(frames, i, kBurst, m);  // pick up
    size_t at = 0;
    for (auto _ : st) {
        w.burst(frames, at, kBurst, m);
        at = (at + kBurst) % frames.size();
    }
    if (w.verdict(0) != Verdict::dnat) st.SkipWithError("not translated");
    rte_pktmbuf_free_bulk(m, kBurst);
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
BENCHMARK(BM_PipelineEstablished)->Arg(10)->Arg(1000)->Arg(10000)->Arg(100000);

// Every packet a new connection: the table (1M flows) prefilled to range(1) percent; each burst
// of 32 new flows is timed, then removed untimed so the fill stays put.
void BM_PipelineNewFlows(benchmark::State& st) {
    const int services = static_cast<int>(st.range(0));
    const uint32_t capacity = 1u << 20, fill = static_cast<uint32_t>(uint64_t{capacity} * st.range(1) / 100);
    World w(services, capacity);
    rte_mbuf* m[kBurst];
    if (rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) != 0) st.SkipWithError("mbufs");
    for (uint32_t i = 0; i < fill; ++i) (void)w.flows->insert(0, flow_init(i), 1);  // the fill, straight in
    auto frames = frames_for(fill, 1u << 16, static_cast<uint32_t>(services));
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
            FlowRef r = w.flows->lookup(flow_key(fill + static_cast<uint32_t>((at + i) % frames.size()),
                                                 static_cast<uint32_t>(services)));
            if (!r.hit()) continue;
            release_flow(*w.ctx.stats, w.flows->flow(r.id));
            w.flows->remove(r.id);
        }
        at = (at + kBurst) % frames.size();
    }
    rte_pktmbuf_free_bulk(m, kBurst);
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
    st.counters["fill_pct"] = static_cast<double>(st.range(1));
}
BENCHMARK(BM_PipelineNewFlows)
    ->Args({10, 10})->Args({10, 90})->Args({1000, 90})->Args({10000, 90})->Args({100000, 90})
    ->UseManualTime();

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

// The same for IPv6 flows (FlowTable6: 40-byte tuples, 128-byte records), addresses in fd00::/16.
void BM_BytesPerFlow6(benchmark::State& st) {
    const uint32_t n = static_cast<uint32_t>(st.range(0));
    auto key6 = [](const FlowKey& k) {
        FlowKey6 r{.sport = k.sport, .dport = k.dport, .proto = k.proto};
        r.src.b[0] = r.dst.b[0] = 0xfd;
        std::memcpy(r.src.b + 12, &k.src.be, 4);
        std::memcpy(r.dst.b + 12, &k.dst.be, 4);
        return r;
    };
    double per_flow = 0;
    for (auto _ : st) {
        const long before = rss_bytes();
        auto t = FlowTable6::create(FlowTableParams{.capacity = n});
        uint32_t inserted = 0;
        for (uint32_t i = 0; i < n; ++i) {
            const FlowInit v4 = flow_init(i);
            inserted += t->insert(0, FlowInit6{.key = {key6(v4.key[0]), key6(v4.key[1])}}, 1).status == InsertStatus::inserted;
        }
        per_flow = static_cast<double>(rss_bytes() - before) / inserted;
        st.counters["flows"] = inserted;
    }
    st.counters["bytes_per_flow"] = per_flow;
}
BENCHMARK(BM_BytesPerFlow6)->Arg(10000000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
