// libFuzzer target: any bytes as a received frame (or, behind "SGSQ", a sequence of frames, each
// a 16-bit big-endian length and its bytes: fragments of one datagram in any order), through
// process_burst exactly as a worker runs it (Tracer::run_frame), against a dual-stack config with every kind of Service
// address in both families. Flow state is kept across inputs, so later inputs meet flows earlier ones created; the
// table is small, so its full and early-drop paths are reached too. Each input is also replayed as the frame's answer
// (addresses and ports swapped), so reply translation and ICMP-error translation get exercised.
// A crash, a sanitizer report or a leaked mbuf is a finding; the fragment hold is emptied after
// each input, so a fragment it lost would be one.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <memory>

#include <rte_mempool.h>

#include "control/trace/packet_spec.h"
#include "control/base/tool_eal.h"
#include "control/trace/trace.h"
#include "control/config/yaml_config.h"

using namespace svcgate;

namespace {

const char* const kConfig = R"(
dataplane:
  flow_table: {capacity: 1024}
  ports:
    - {name: ext, addresses: [192.168.67.8/24, 'fd00:67::8/64']}
    - {name: cluster, addresses: [10.192.0.2/24, 'fd00:192::2/64'], mtu: 1280}
  routes:
    - {prefix: 0.0.0.0/0, via: 192.168.67.1}
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
    - {prefix: '::/0', via: 'fd00:67::1'}
    - {prefix: 'fd00:244:2::/64', via: 'fd00:192::3'}
cluster:
  node_ips: [192.168.67.8, 'fd00:67::8']
  cluster_cidrs: [10.244.0.0/16, 'fd00:244::/32']
  service_cidrs: [10.96.0.0/12, 'fd00:96::/108']
services:
  - name: default/web
    type: LoadBalancer
    cluster_ips: [10.96.0.20, 'fd00:96::20']
    external_ips: [198.51.100.9, '2001:db8:100::9']
    load_balancer_ips: [198.51.100.7, '2001:db8:100::7']
    load_balancer_source_ranges: [192.168.0.0/16, 'fd00:1::/32']
    session_affinity: ClientIP
    ports:
      - {name: http, protocol: TCP, port: 80, node_port: 30001}
      - {name: dns, protocol: UDP, port: 53, node_port: 30053}
      - {name: sctp, protocol: SCTP, port: 9000}
    endpoints: [10.244.2.4, 10.244.2.6, 'fd00:244:2::4', 'fd00:244:2::6']
  - name: default/local
    type: NodePort
    cluster_ips: [10.96.0.21, 'fd00:96::21']
    external_traffic_policy: Local
    ports: [{name: p, protocol: TCP, port: 80, node_port: 30002}]
    endpoints: [{ip: 10.244.2.5, node: elsewhere}, {ip: 'fd00:244:2::5', node: elsewhere}]
  - name: default/empty
    cluster_ips: [10.96.0.22, 'fd00:96::22']
    ports: [{name: p, protocol: TCP, port: 80}]
)";

ctl::Tracer* tracer() {
    static std::unique_ptr<ctl::Tracer> t = [] {
        ctl::init_tool_eal_or_abort("svcgate-fuzz");
        auto made = std::make_unique<ctl::Tracer>(ctl::load_config_string(kConfig, "fuzz.yaml"));
        if (!made->status()) std::abort();  // no tables: nothing to fuzz
        return made;
    }();
    return t.get();
}

// The frame's answer: MACs, IP addresses and the first two 16-bit words after the IP header
// (IPv4: its IHL; IPv6: the fixed 40 bytes, the L4 header when no extension header is in between)
// swapped.
ctl::Frame answer(const ctl::Frame& f) {
    ctl::Frame r = f;
    if (r.size() < 14 + 20 + 4) return r;
    for (int i = 0; i < 6; ++i) std::swap(r[i], r[6 + i]);
    size_t l4 = 0;
    if (r[12] == 0x86 && r[13] == 0xdd) {
        if (r.size() < 14 + 40 + 4) return r;
        for (int i = 0; i < 16; ++i) std::swap(r[14 + 8 + i], r[14 + 24 + i]);
        l4 = 14 + 40;
    } else {
        const size_t ihl = (r[14] & 0x0f) * 4u;
        for (int i = 0; i < 4; ++i) std::swap(r[14 + 12 + i], r[14 + 16 + i]);
        if (ihl >= 20) l4 = 14 + ihl;
    }
    if (l4 && l4 + 4 <= r.size())
        for (int i = 0; i < 2; ++i) std::swap(r[l4 + i], r[l4 + 2 + i]);
    return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<ctl::Frame> frames;
    if (size >= 4 && std::memcmp(data, "SGSQ", 4) == 0) {
        for (size_t at = 4; at + 2 <= size && frames.size() < 16;) {
            const size_t n = size_t{data[at]} << 8 | data[at + 1];
            at += 2;
            if (n > 2000 || at + n > size) break;  // an mbuf's data room: larger ones are not frames
            frames.emplace_back(data + at, data + at + n);
            at += n;
        }
    } else {
        if (size > 2000) return -1;
        frames.emplace_back(data, data + size);
    }
    ctl::Tracer* t = tracer();
    rte_mempool* pool = ctl::tool_mempool();
    const unsigned in_use = rte_mempool_in_use_count(pool);
    for (const ctl::Frame& f : frames) t->run_frame(f, "fuzz");
    for (const ctl::Frame& f : frames) t->run_frame(answer(f), "fuzz-answer");
    t->flush_fragments();
    t->advance(1);  // the clock moves: ageing runs
    t->forget_history();
    if (rte_mempool_in_use_count(pool) != in_use) {
        std::fprintf(stderr, "mbuf leak: %u in use before, %u after\n", in_use, rte_mempool_in_use_count(pool));
        std::abort();
    }
    return 0;
}
