// libFuzzer target: any bytes as a svcgate config (compact form and the control sections) through
// the YAML reader, validation and the snapshot builder, as `svcgate --check` and a reload run
// them. A ConfigError is the expected answer to a bad config; anything else escaping, a crash or a
// sanitizer report is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "control/snapshot/snapshot_builder.h"
#include "control/base/tool_eal.h"
#include "control/config/yaml_config.h"

using namespace svcgate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 64 * 1024) return -1;
    static const bool eal = (ctl::init_tool_eal_or_abort("svcgate-fuzz"), true);  // routes live in rte_lpm
    (void)eal;
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        ctl::Config cfg = ctl::load_config_string(text, "fuzz.yaml");
        (void)ctl::build_snapshot(cfg, 1);
    } catch (const ctl::ConfigError&) {
        // The answer to a bad config: file:line:col messages, checked by the unit tests.
    }
    return 0;
}
