// libFuzzer target: any bytes as a watch stream from the API server, through what the daemon runs
// on each line: decode_event (bounded parse, event shape), then, for an event carrying an object,
// json_tree and read_kube_object (kube_objects.h), the objects added to a config as
// KubeApi::apply does, and the snapshot built. A crash, a sanitizer report or an exception
// escaping is a finding: a hostile server must not take the gateway down (issue 53).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "control/base/tool_eal.h"
#include "control/config/kube_objects.h"
#include "control/config/yaml_config.h"
#include "control/kube/json_tree.h"
#include "control/kube/kube_api.h"
#include "control/snapshot/snapshot_builder.h"

using namespace svcgate;
using namespace svcgate::ctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 256 * 1024) return -1;
    static const bool eal = (init_tool_eal_or_abort("svcgate-fuzz-watch"), true);  // the builder's routes
    (void)eal;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::vector<KubeObjectRead> reads;
    for (size_t pos = 0; pos < text.size() && reads.size() < 64;) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) nl = text.size();
        const std::string_view line = text.substr(pos, nl - pos);
        pos = nl + 1;
        kube::DecodedEvent d = kube::decode_event(line);
        if (d.bad != kube::Bad::count || !d.event["object"].is_object()) continue;
        const auto tree = kube::json_tree(d.event["object"]);
        reads.push_back(read_kube_object(ytree::Node(tree.get(), tree->roots[0]), "fuzz object"));
    }
    Config cfg = load_config_string("dataplane:\n  ports: [{name: a, addresses: [10.0.0.1/24]}]\n", "fuzz.yaml");
    std::vector<const KubeObjectRead*> ptrs;
    for (const KubeObjectRead& r : reads) ptrs.push_back(&r);
    std::vector<RejectedObject> rejected;
    unsigned orphans = 0;
    add_kube_objects(ptrs, cfg, rejected, orphans);
    try {
        (void)build_snapshot(cfg, 1);
    } catch (const ConfigError&) {
        // A config the file's own rules refuse (none here): the expected answer, not a finding.
    }
    return 0;
}
