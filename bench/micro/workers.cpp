// New flows on several workers at once into one shared table (bench/README.md): how new flows
// scale with workers, and what the table's sharing costs one worker alone.
#include "bench/micro/fixture.h"

namespace svcgate::bench {
namespace {

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
BENCHMARK(BM_PipelineNewFlowsWorkers)->Apply(worker_counts)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PipelineNewFlowsTwoOwners)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace svcgate::bench
