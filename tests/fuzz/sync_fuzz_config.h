// The gateway fuzz_sync imports into, and the key it seals with: the seeds that make_corpus.py
// writes (their svc_ids, their MAC) are made for these, and sync_test opens and imports one of
// them to show that Python's HMAC and libsodium's agree.
#pragma once

#include <cstdint>

namespace svcgate::test {

inline constexpr uint8_t kSyncFuzzKeyByte = 0x5a;        // every byte of the 32-byte key
inline constexpr uint32_t kSyncFuzzSender = 0x01020304;  // the peer id the seeds are sealed as

inline constexpr const char* kSyncFuzzConfig = R"(
dataplane:
  ports:
    - {name: ext, addresses: [192.168.67.8/24, 'fd00:67::8/64']}
    - {name: cluster, addresses: [10.192.0.2/24, 'fd00:192::2/64']}
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
    - {prefix: 'fd00:244:2::/64', via: 'fd00:192::3'}
  flow_table: {capacity: 4096, capacity_v6: 4096}
cluster:
  node_ips: [192.168.67.8, 'fd00:67::8']
  cluster_cidrs: [10.244.0.0/16, 'fd00:244::/32']
services:
  - name: default/web
    type: NodePort
    cluster_ips: [10.107.169.79, 'fd00:96::79']
    session_affinity: ClientIP
    ports: [{name: http, protocol: TCP, port: 80, node_port: 30001}, {name: dns, protocol: UDP, port: 53}]
    endpoints: [{ip: 10.244.2.4}, {ip: 'fd00:244:2::4'}]
)";

}  // namespace svcgate::test
