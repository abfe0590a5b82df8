// The control loop: the control thread's duties once the workers run, one method each: the
// operator's endpoints (control socket, metrics, telemetry), reloads (SIGHUP, a changed file,
// svcgatectl), health and announcements, HA takeovers, drain, and systemd's status and watchdog;
// until SIGINT or SIGTERM, or a drain that is over.
//
// Runs on: the control thread.
#pragma once

#include <vector>

#include "control/state/daemon_state.h"
#include "control/daemon/runtime.h"
#include "control/snapshot/publisher.h"

namespace svcgate::ctl {

// Launches the workers and runs the loop; returns when the gateway is to stop.
void serve(DaemonState& st, Publisher& pub, Runtime& rt);

// This gateway's addresses on ha.takeover_ports: what a survivor takes over when it dies.
std::vector<IpAddr> takeover_addresses(const Config& cfg);

}  // namespace svcgate::ctl
