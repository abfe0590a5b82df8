// The whole pipeline on one worker (bench/README.md): established flows at 10 to 100,000
// Services and over IPv6, the established path's floor in layers, new flows (table 10% or 90%
// full) in both families and masqueraded, and both beside the control plane's threads: active
// health checks and IPFIX export.
#include "bench/micro/fixture.h"

namespace svcgate::bench {
namespace {

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

// The established path with the port on VLAN 10 of its device (dataplane.ports[].vlan), as
// bench/run's VLAN figure: each burst sorted by VLAN ID and its tags taken off before the stages
// (vlan_burst), the tag put back on as the output stage queues each frame (Output::set_trunks).
// 4,096 flows over `services` Services, 78-byte tagged frames. Also in tools/pgo-build's training
// run, as the Debian package's trunks run it.
void BM_PipelineVlan(benchmark::State& st) {
    const int services = static_cast<int>(st.range(0));
    World w(services, 1u << 16, 4);
    auto map = std::make_unique<VlanMap>();
    map->port[10] = 0;
    const uint16_t vlans[1]{kPortOnTrunk | 10};
    PortSoftCounters soft[1];
    w.ctx.out.set_trunks(vlans, soft);
    auto frames = frames_for(0, 4096, static_cast<uint32_t>(services), 4);
    const uint8_t tag[4] = {0x81, 0x00, 0x00, 10};
    for (auto& f : frames) f.insert(f.begin() + 12, tag, tag + 4);
    rte_mbuf* m[kBurst];
    if (rte_pktmbuf_alloc_bulk(w.pool, m, kBurst) != 0) st.SkipWithError("mbufs");
    auto run = [&](size_t first) {
        World::copy_in(frames, first, kBurst, m);
        std::copy_n(m, kBurst, w.b->mbufs);
        w.ctx.now_tsc = rte_get_tsc_cycles();
        vlan_burst(*w.b, w.ctx, *map, kBurst, soft);
    };
    for (size_t i = 0; i < frames.size(); i += kBurst) run(i);  // pick up
    size_t at = 0;
    for (auto _ : st) {
        run(at);
        at = (at + kBurst) % frames.size();
    }
    const auto* out = rte_pktmbuf_mtod(m[0], const uint8_t*);
    if (w.verdict(0) != Verdict::dnat || out[12] != 0x81 || out[15] != 10)
        st.SkipWithError("not translated and tagged");
    rte_pktmbuf_free_bulk(m, kBurst);
    st.SetItemsProcessed(int64_t(st.iterations()) * kBurst);
}
BENCHMARK(BM_PipelineVlan)->Arg(10);

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
// Empty tables again, counting each flow's packets and octets as the daemon's do when it exports
// (FlowTableParams::count).
inline void counting_tables(World& w) {
    w.flows = FlowTable::create({.capacity = w.flows->capacity(), .owners = w.flows->owners(), .count = true});
    w.flows6 = FlowTable6::create({.capacity = w.flows6->capacity(), .owners = w.flows6->owners(), .count = true});
    w.ctx.flows = w.flows.get(), w.ctx.flows6 = w.flows6.get();
}

class ExporterLoad {
public:
    explicit ExporterLoad(World& w) {
        counting_tables(w);
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

// New flows (table 90% full, 10 Services) with NAT event export off (0) and on (1), and (2) off
// with the tables counting as export's do: what the counters alone cost, apart from the events.
void BM_NewFlowsIpfix(benchmark::State& st) {
    std::optional<ExporterLoad> load;
    pipeline_new_flows(
        st, 4, &table4, flow_key, flow_init, "",
        [&](World& w) {
            if (st.range(2) == 1) load.emplace(w);
            if (st.range(2) == 2) counting_tables(w);
        },
        [&] {
            if (load) load->report(st);
        });
}
BENCHMARK(BM_NewFlowsIpfix)->Args({10, 90, 0})->Args({10, 90, 1})->Args({10, 90, 2})->UseManualTime();

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

}  // namespace
}  // namespace svcgate::bench
