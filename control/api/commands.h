// svcgatectl's remote commands (command_table.h), as the daemon answers them on its control
// socket: one JSON object per request (nlohmann-json); svcgatectl renders it.
//
// Runs on: the control thread (the socket is served there); reads the daemon's state under its
// lock, except `reload`, which runs the daemon's reload.
#pragma once

#include <functional>
#include <string>

#include "control/api/views.h"
#include "control/state/daemon_state.h"

namespace svcgate::ctl {

// The request line in, the reply line out (command_table.h's protocol). `reload` is how the
// `reload` command reaches the control loop.
std::string handle_command(DaemonState& st, const std::string& line, const std::function<ReloadOutcome()>& reload);

// A port's link, up only when the driver answers and says so (status, the metrics, /healthz).
bool link_up(uint16_t port);
// A port's NIC counters (stats, the metrics, the exit summary).
report::PortCounters port_counters(const DaemonState& st, const PortView& p);

// The live NAT flows of both tables counted by "source", "service" or "endpoint": the `n` with the
// most (svcgatectl flows --top). Call with st.mu held.
std::vector<report::Talker> top_talkers(const DaemonState& st, const std::string& by, size_t n);

}  // namespace svcgate::ctl
