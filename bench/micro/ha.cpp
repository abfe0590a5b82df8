// Flow replication (control/ha/): flows that prove themselves with replication off and on, and
// the flow state file's write and read at 1M flows.
#include "bench/micro/fixture.h"

namespace svcgate::bench {
namespace {

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
}  // namespace svcgate::bench
