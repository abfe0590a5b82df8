// Memory (bench/README.md): bytes per flow at 10M flows in both families, and the host's cost
// of a random cache line, one at a time, 32 at a time, and on several threads at once.
#include "bench/micro/fixture.h"

namespace svcgate::bench {
namespace {

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
    // last-level cache (65,536 lines, 4 MiB, before bench/HISTORY.md's round twenty-three) made
    // the batches L3 hits.
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

}  // namespace
}  // namespace svcgate::bench
