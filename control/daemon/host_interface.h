// A port's host interface (dataplane.ports[].host_interface): a TAP device the dataplane hands
// what it does not answer itself (BGP, BFD, SSH, health checks), with the port's MAC, MTU and the
// addresses the config gives it, so that the kernel of this namespace serves them.
//
// Runs on: the control thread.
#pragma once

#include <string>
#include <vector>

#include <rte_ether.h>

#include "control/config/config_model.h"
#include "control/daemon/runtime.h"

namespace svcgate::ctl {

// Creates port p's host interface.
Status open_host_interface(Runtime& rt, const PortConfig& pc, const rte_ether_addr& mac, size_t p);
// The host interfaces' addresses from what they carry to what `cfg` gives them; a failure lists
// every address that failed, one line each.
Status sync_host_addresses(Runtime& rt, const Config& cfg);
// What would keep a host interface from being created, found before starting (and by --check).
std::vector<std::string> host_interface_problems(const Config& cfg);

}  // namespace svcgate::ctl
