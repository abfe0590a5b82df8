// Bonds (dataplane.bonds[]): what DPDK's bonding driver says of a bond's members, for status and
// metrics (DaemonState::bond_members). Here, not under api/, because only the daemon links the
// driver (meson.build: dpdk_daemon).
//
// Runs on: the control, telemetry and metrics threads; the driver's calls read its state as it is.
#pragma once

#include <cstdint>
#include <vector>

#include "control/state/daemon_state.h"

namespace svcgate::ctl {

// The members of the bond whose DPDK port id is `bond`, in the driver's order; none when it is
// not a bond.
std::vector<BondMemberView> bond_members(uint16_t bond);

}  // namespace svcgate::ctl
