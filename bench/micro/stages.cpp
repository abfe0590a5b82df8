// The fast path's stages one by one (bench/README.md): parse, classify (KUBE-SERVICES' lookup),
// flow lookup hit and miss, flow insert, translate, Maglev build.
#include "bench/micro/fixture.h"

namespace svcgate::bench {
namespace {

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

}  // namespace
}  // namespace svcgate::bench
