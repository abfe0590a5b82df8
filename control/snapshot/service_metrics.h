// The Services' metrics: packets and bytes per Service port and endpoint, live flows per endpoint.
//
// Runs on: any thread (a pure function; metrics.cpp calls it under the daemon's lock).
#pragma once

#include "control/base/metrics_text.h"
#include "control/snapshot/slot_registry.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

// Service ports and endpoints: packets, bytes, live flows per endpoint.
void collect_services(MetricsText& m, const dp::ServiceSnapshot& s, const SlotRegistry& slots);

}  // namespace svcgate::ctl
