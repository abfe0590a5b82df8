// svcgatectl's commands, as the daemon answers them on its control socket: status, services,
// endpoints, flows, stats, reload; a readable table by default, JSON (nlohmann-json) with --json.
//
// Runs on: the control thread (the socket is served there); reads the daemon's state under its
// lock, except `reload`, which runs the daemon's reload.
#pragma once

#include <functional>
#include <string>

#include "control/daemon/daemon_state.h"

namespace svcgate::ctl {

// The request line in, the reply out ("error: ..." on a bad request). `reload` is how the
// `reload` command reaches the control loop.
std::string handle_command(DaemonState& st, const std::string& line, const std::function<std::string()>& reload);

}  // namespace svcgate::ctl
