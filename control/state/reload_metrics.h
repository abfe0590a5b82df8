// The reloads' metrics (kube-proxy's sync_proxy_rules_* under svcgate's names), the generation in
// service and the build.
//
// Runs on: any thread (a pure function; metrics.cpp calls it under the daemon's lock).
#pragma once

#include <cstdint>
#include <string_view>

#include "control/base/metrics_text.h"
#include "control/state/daemon_state.h"

namespace svcgate::ctl {

// Reloads (kube-proxy's sync_proxy_rules_* under svcgate's names), the generation in service and
// the build.
void collect_reload(MetricsText& m, const ReloadStatus& r, uint64_t generation, std::string_view version,
                    std::string_view dpdk);

}  // namespace svcgate::ctl
