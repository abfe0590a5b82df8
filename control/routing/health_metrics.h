// The host path's and health's metrics: punted packets, the kernel's frames out, healthy, draining,
// the prefixes announced.
//
// Runs on: any thread (a pure function; metrics.cpp calls it under the daemon's lock).
#pragma once

#include "control/base/metrics_text.h"
#include "control/routing/health.h"
#include "dataplane/packet/counters.h"

namespace svcgate::ctl {

// The host path and health: punted packets, the kernel's frames out, healthy, draining, the
// prefixes announced.
void collect_host_path(MetricsText& m, const dp::WorkerCounters& t, const HealthState& h);

}  // namespace svcgate::ctl
