// Reload cost (issue #4): 10,000 Services × 3 endpoints, from file read to a published snapshot
// (YAML parse → Config → snapshot build: VIP tables, endpoint sets, routes). Target < 50 ms.
// Both config forms: the compact services: list, and Kubernetes objects (Service +
// EndpointSlice, as kubectl prints them) through kubernetes.manifests.
#include <cstdio>
#include <fstream>
#include <string>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "control/snapshot/slot_registry.h"
#include "control/snapshot/snapshot_builder.h"
#include "control/base/tool_eal.h"
#include "control/config/yaml_config.h"

using namespace svcgate;

namespace {

constexpr const char* kHead = R"(dataplane:
  ports:
    - {name: ext, addresses: [192.168.67.8/24]}
    - {name: cluster, addresses: [10.192.0.2/24]}
  routes:
    - {prefix: 10.244.0.0/16, via: 10.192.0.3}
cluster:
  node_name: n1
  node_ips: [192.168.67.8]
  cluster_cidrs: [10.244.0.0/16]
  service_cidrs: [10.96.0.0/12]
)";

std::string ip(uint32_t base, uint32_t i) {
    uint32_t a = base + i;
    return fmt::format("{}.{}.{}.{}", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

std::string compact(int services) {
    std::string s = kHead;
    s += "services:\n";
    for (int i = 0; i < services; ++i) {
        s += fmt::format(
            "  - name: ns{}/svc{}\n    cluster_ip: {}\n    ports: [{{name: http, port: 80, target_port: 8080}}]\n"
            "    endpoints: [{}, {}, {}]\n",
            i % 50, i, ip(0x0a600000, i + 1), ip(0x0af40000, 3 * i + 1), ip(0x0af40000, 3 * i + 2),
            ip(0x0af40000, 3 * i + 3));
    }
    return s;
}

std::string kube(int services) {
    std::string s = "apiVersion: v1\nkind: List\nitems:\n";
    for (int i = 0; i < services; ++i) {
        s += fmt::format(R"(- apiVersion: v1
  kind: Service
  metadata: {{name: svc{0}, namespace: ns{1}}}
  spec:
    clusterIP: {2}
    ports: [{{name: http, port: 80, protocol: TCP, targetPort: 8080}}]
    type: ClusterIP
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  addressType: IPv4
  metadata: {{name: svc{0}-a, namespace: ns{1}, labels: {{kubernetes.io/service-name: svc{0}}}}}
  endpoints:
  - {{addresses: [{3}], conditions: {{ready: true}}, nodeName: n1}}
  - {{addresses: [{4}], conditions: {{ready: true}}, nodeName: n2}}
  - {{addresses: [{5}], conditions: {{ready: true}}, nodeName: n3}}
  ports: [{{name: http, port: 8080, protocol: TCP}}]
)",
                         i, i % 50, ip(0x0a600000, i + 1), ip(0x0af40000, 3 * i + 1), ip(0x0af40000, 3 * i + 2),
                         ip(0x0af40000, 3 * i + 3));
    }
    return s;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

void reload(benchmark::State& st, const std::string& cfg_path) {
    ctl::init_tool_eal_or_abort("svcgate-bench");
    uint32_t gen = 1;
    size_t services = 0;
    // As the daemon reloads: the snapshot in service lends its unchanged route table, and every
    // service port and endpoint gets its stable slot (the publisher's SlotRegistry).
    ctl::SlotRegistry slots(1);
    auto current = ctl::build_snapshot(ctl::load_config_file(cfg_path), gen);
    if (slots.reserve(*current)) slots.published();
    slots.assign(*current);
    ctl::Config running;
    for (auto _ : st) {
        ctl::Config c = ctl::load_config_file(cfg_path);
        auto snap = ctl::build_snapshot(c, ++gen, current.get());
        if (slots.reserve(*snap)) slots.published();
        slots.assign(*snap);
        services = snap->services.size();
        benchmark::DoNotOptimize(snap.get());
        // Published. Freeing the previous generation comes after (the daemon does it once
        // readers are past it): outside the measured span.
        st.PauseTiming();
        current = std::move(snap);
        running = std::move(c);
        st.ResumeTiming();
    }
    st.counters["service_ports"] = static_cast<double>(services);
}

void BM_ReloadCompact(benchmark::State& st) {
    const std::string path = "/tmp/svcgate-bench-compact.yaml";
    write(path, compact(static_cast<int>(st.range(0))));
    reload(st, path);
    std::remove(path.c_str());
}

void BM_ReloadKubernetes(benchmark::State& st) {
    const std::string objs = "/tmp/svcgate-bench-objs.yaml", path = "/tmp/svcgate-bench-kube.yaml";
    write(objs, kube(static_cast<int>(st.range(0))));
    write(path, std::string(kHead) + "kubernetes:\n  manifests: [" + objs + "]\n");
    reload(st, path);
    std::remove(objs.c_str());
    std::remove(path.c_str());
}

// The parts: the YAML load alone, and the snapshot build alone.
void BM_LoadOnly(benchmark::State& st) {
    const std::string path = "/tmp/svcgate-bench-load.yaml";
    write(path, compact(static_cast<int>(st.range(0))));
    for (auto _ : st) benchmark::DoNotOptimize(ctl::load_config_file(path).services.size());
    std::remove(path.c_str());
}

void BM_BuildOnly(benchmark::State& st) {
    ctl::init_tool_eal_or_abort("svcgate-bench");
    ctl::Config c = ctl::load_config_string(compact(static_cast<int>(st.range(0))), "bench.yaml");
    uint32_t gen = 1;
    auto current = ctl::build_snapshot(c, gen);
    for (auto _ : st) benchmark::DoNotOptimize(ctl::build_snapshot(c, ++gen, current.get()).get());
}

}  // namespace

BENCHMARK(BM_LoadOnly)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildOnly)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReloadCompact)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReloadKubernetes)->Arg(10000)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_MAIN();
