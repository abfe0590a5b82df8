// Flow replication's metrics (ha:): readiness, peers, records, lag, replicas, takeovers, drops by
// reason.
//
// Runs on: any thread (a pure function; metrics.cpp calls it under the daemon's lock).
#pragma once

#include "control/base/metrics_text.h"
#include "control/ha/ha_report.h"

namespace svcgate::ctl {

// Flow replication (ha:): readiness, peers, records, lag, replicas, takeovers, drops by reason.
void collect_sync(MetricsText& m, const report::Ha& r);

}  // namespace svcgate::ctl
