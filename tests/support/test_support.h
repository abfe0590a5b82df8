// Shared test helpers: the tool EAL (once per binary), configs from YAML strings, frames from
// packet specs, and full checksum verification of a frame.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "control/config/config_model.h"
#include "control/trace/packet_spec.h"
#include "dataplane/pipeline/parse.h"
#include "control/base/tool_eal.h"
#include "control/trace/trace.h"
#include "control/config/yaml_config.h"

namespace svcgate::test {

// The tool EAL; a test binary that cannot start it stops at once, saying why.
inline void ensure_eal() { ctl::init_tool_eal_or_abort("svcgate-test"); }

// A packet spec a test writes, parsed; one that does not read fails the test.
inline ctl::PacketSpec packet(const std::string& spec) {
    ctl::PacketSpec p;
    if (const ctl::Status s = ctl::parse_packet_spec(spec, p); !s) ADD_FAILURE() << s.error();
    return p;
}

// True when the IPv4 header and the TCP/UDP checksums of `frame` verify by full recomputation.
bool checksums_verify(const std::vector<uint8_t>& frame);

// An ICMP error (type, code; `rest` is the second word, e.g. the MTU of fragmentation-needed)
// from `src` to `dst`, quoting the IPv4 header of `about` and `quote` bytes of its payload, as a
// router would (RFC 1812 4.3.2.3). Checksums filled in.
std::vector<uint8_t> icmp_error_frame(uint8_t type, uint8_t code, const std::string& src, const std::string& dst,
                                      const std::vector<uint8_t>& about, size_t quote = 8, uint32_t rest = 0);

// An ARP message of `op` (RTE_ARP_OP_REQUEST or _REPLY) from `sender_mac`, `sender` asking for
// (or telling) `target`: a request is broadcast, a reply goes to `target_mac`, which it also
// names as the target hardware address.
std::vector<uint8_t> arp_frame(uint16_t op, const uint8_t (&sender_mac)[6], const std::string& sender,
                               const std::string& target, const uint8_t (&target_mac)[6]);

// An output stage for a test's own WorkerCtx (the stress tests run their own workers): the next
// hop of every route of the snapshot is known (pinned), and what the stage transmits is kept in
// `sent` for the test to read and free.
struct TestOutput {
    dp::NeighborTable neighbors;
    dp::NeighborTable6 neighbors6;
    std::vector<rte_ether_addr> macs;
    std::vector<rte_mbuf*> sent;

    void attach(dp::WorkerCtx& ctx, const dp::ServiceSnapshot& s);
    // Frees what was sent.
    void free_sent();
};

// A Tracer over a YAML config string.
std::unique_ptr<ctl::Tracer> tracer(const std::string& yaml, uint64_t seed = 1);
// A tracer on the config `yaml` with `opts`, for a test: a trace that fails (a spec that does not
// read, no packet to reply to) fails the test; a tracer that cannot start stops the binary.
std::unique_ptr<ctl::Tracer> tracer_of(const std::string& yaml, ctl::TraceOptions opts);

// The gateway most unit tests run: ext 192.168.67.8/24 (the node IP) towards the clients, cluster
// 10.192.0.2/24 towards kube-node-1 (pods 10.244.2.0/24 via .3) and kube-node-2 (10.244.3.0/24 via
// .4); pod CIDR 10.244.0.0/16, service CIDR 10.96.0.0/12. `extra_cluster` goes on under cluster:.
inline std::string gateway_config(const std::string& services, const std::string& extra_cluster = "") {
    return std::string(R"(
dataplane:
  ports:
    - {name: ext, addresses: [192.168.67.8/24]}
    - {name: cluster, addresses: [10.192.0.2/24]}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
    - {prefix: 10.244.3.0/24, via: 10.192.0.4}
cluster:
  node_name: svcgate
  node_ips: [192.168.67.8]
  cluster_cidrs: [10.244.0.0/16]
  service_cidrs: [10.96.0.0/12]
)") + extra_cluster +
        "services:\n" + services;
}

// The same gateway dual-stack, every IPv4 address beside its ULA mirror (fd00:67::/64 clients,
// fd00:192::/64 nodes, fd00:244:N::/64 pods, fd00:96::/108 services). `dataplane_extra` goes on
// under dataplane: (two spaces in), `cluster_port` inside the cluster port's map (", mtu: 1280").
inline std::string dual_stack_config(const std::string& services, const std::string& dataplane_extra = "",
                                     const std::string& cluster_port = "") {
    return R"(
dataplane:
  ports:
    - {name: ext, addresses: [192.168.67.8/24, 'fd00:67::8/64']}
    - {name: cluster, addresses: [10.192.0.2/24, 'fd00:192::2/64'])" +
        cluster_port + R"(}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
    - {prefix: 10.244.3.0/24, via: 10.192.0.4}
    - {prefix: 'fd00:244:2::/64', via: 'fd00:192::3'}
    - {prefix: 'fd00:244:3::/64', via: 'fd00:192::4'}
)" + dataplane_extra +
        R"(cluster:
  node_name: svcgate
  node_ips: [192.168.67.8, 'fd00:67::8']
  cluster_cidrs: [10.244.0.0/16, 'fd00:244::/32']
  service_cidrs: [10.96.0.0/12, 'fd00:96::/108']
services:
)" + services;
}

}  // namespace svcgate::test
