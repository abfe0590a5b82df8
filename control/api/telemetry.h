// svcgate's commands in DPDK telemetry (dpdk-telemetry.py): /svcgate/stats (verdicts, drops and
// rejects by reason, flows, reloads) and /svcgate/services (packets per service port).
//
// Runs on: DPDK's telemetry thread; reads the daemon's state under its lock.
#pragma once

#include "control/state/daemon_state.h"

namespace svcgate::ctl {

// Registers the commands over `st` (once per process: DPDK keeps them until the EAL goes).
void register_telemetry(DaemonState& st);
// Detaches them from `st` before it goes away; they answer with an error from then on.
void unregister_telemetry();

}  // namespace svcgate::ctl
