#include "control/state/reload_metrics.h"

#include <fmt/format.h>

namespace svcgate::ctl {

using namespace svcgate::dp;

void collect_reload(MetricsText& m, const ReloadStatus& r, uint64_t generation, std::string_view version,
                    std::string_view dpdk) {
    m.family("svcgate_reloads_total", "counter", "Config reloads by result.");
    m.sample("svcgate_reloads_total", "result=\"ok\"", r.ok);
    m.sample("svcgate_reloads_total", "result=\"failed\"", r.failed);
    m.family("svcgate_last_reload_duration_seconds", "gauge",
             "The last successful reload: file read to published snapshot.");
    m.str() += fmt::format("svcgate_last_reload_duration_seconds {}\n", r.last_seconds);
    // kube-proxy's sync_proxy_rules_duration_seconds and sync_proxy_rules_last_timestamp_seconds,
    // under svcgate's names (docs/operations.md).
    m.histogram("svcgate_reload_duration_seconds", "Successful reloads: file read to published snapshot.", r.durations);
    m.gauge("svcgate_reload_last_success_timestamp_seconds",
            "When the config in service was published (start or last successful reload), Unix time.", r.last_ok_unix,
            3);
    m.family("svcgate_build_info", "gauge", "Always 1: the version of svcgate and of the DPDK it runs on.");
    m.sample("svcgate_build_info", fmt::format("version=\"{}\",dpdk=\"{}\"", version, dpdk), uint64_t{1});
    m.gauge("svcgate_config_generation", "Generation of the config in service.", generation);
}

}  // namespace svcgate::ctl
