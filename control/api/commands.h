// svcgatectl's remote commands (command_table.h), as the daemon answers them on its control
// socket: one JSON object per request (nlohmann-json); svcgatectl renders it.
//
// Runs on: the control thread (the socket is served there); reads the daemon's state under its
// lock, except `reload`, which runs the daemon's reload.
#pragma once

#include <functional>
#include <string>

#include "control/daemon/daemon_state.h"

namespace svcgate::ctl {

// The request line in, the reply line out (command_table.h's protocol). `reload` is how the
// `reload` command reaches the control loop.
std::string handle_command(DaemonState& st, const std::string& line, const std::function<ReloadOutcome()>& reload);

}  // namespace svcgate::ctl
