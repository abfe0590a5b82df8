// libFuzzer target: the replication decoder (control/ha/sync_proto.h) and the import of what it
// accepts. The first byte picks the way in:
//   even: the rest is a datagram as it comes off the wire, opened with the shared key (forged,
//         cut, replayed: every one must be a counted drop);
//   odd:  the rest is a body sealed with the right key, as a peer with a bug would send it, so the
//         record decoder and the import into a flow table run on anything that passes the MAC.
// A crash, a sanitizer report, or a refused datagram that moved the replay window is a finding.
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>

#include "control/ha/state_file.h"
#include "sync_fuzz_config.h"
#include "control/ha/sync_proto.h"
#include "control/base/tool_eal.h"
#include "control/trace/trace.h"
#include "control/config/yaml_config.h"

using namespace svcgate;
using namespace svcgate::ctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1 || size > sync::kMaxDatagram + 1) return -1;
    static const bool eal = (init_tool_eal_or_abort("svcgate-fuzz"), true);
    (void)eal;
    static auto tracer = std::make_unique<Tracer>(load_config_string(test::kSyncFuzzConfig, "fuzz.yaml"));
    static sync::Key key = [] {
        sync::Key k;
        k.fill(test::kSyncFuzzKeyByte);
        return k;
    }();
    static uint64_t epoch = 1;
    sync::ReplayWindow window;
    sync::Header h;
    std::span<const uint8_t> body;
    sync::Drop why{};
    uint8_t dgram[sync::kMaxDatagram];
    const uint8_t* p = data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        if (n < 2) return 0;
        sync::Sealer s(key, test::kSyncFuzzSender, ++epoch);
        const uint16_t records = static_cast<uint16_t>(p[0] | p[1] << 8);
        n = s.seal(data[0] & 2 ? sync::Type::hello : sync::Type::flows, records,
                   std::span<const uint8_t>(p + 2, std::min(n - 2, sync::kMaxBody)), dgram);
        p = dgram;
    }
    if (!sync::open(p, n, key, test::kSyncFuzzSender, window, h, body, why)) {
        if (window.epoch() != 0) std::abort();  // a refused datagram moved the window
        return 0;
    }
    if (h.type == sync::Type::hello) {
        sync::Hello hello;
        if (!sync::decode_hello(body, hello) || hello.n_addrs > sync::kHelloAddresses) std::abort();  // open() took it
    }
    if (h.type == sync::Type::flows) {
        FlowImporter imp(tracer->snapshot(), tracer->slots().table(), tracer->flows(), &tracer->flows6(),
                         tracer->flows().owners());
        uint32_t turn = 0;
        sync::for_each_flow(body, [&](const dp::FlowRecord& r) {
            dp::FlowRecord c = r;
            imp.import(c, turn++, tracer->ctx().now, 0);
        });
        // Keep the tables from filling up across inputs: everything imported expires.
        tracer->advance(100000);
    }
    return 0;
}
