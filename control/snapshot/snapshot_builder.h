// Config → ServiceSnapshot: a pure step (no I/O), run off the fast path. It applies kube-proxy's
// endpoint categorisation (CategorizeEndpoints: ready first, serving-and-terminating as the
// fallback, the Local subsets), builds the VIP/NodePort/local-address tables, the Maglev tables
// and the routes, and reports every conflict with its position.
//
// Runs on: the control thread; needs the EAL only when the config has routes or ports (rte_lpm),
// and not at all in BuildMode::validate. Throws ConfigError. The snapshot comes back without a
// StatsTable: the publisher's SlotRegistry gives it one (and its slots) before it is published.
#pragma once

#include <memory>

#include "control/config/config_model.h"
#include "control/snapshot/endpoint_health.h"
#include "dataplane/lb/snapshot.h"

namespace svcgate::ctl {

// run: everything workers need. validate: every check, but no rte_lpm (no EAL needed), so
// the snapshot has no route table: for `svcgate --check` and tests of the config alone.
enum class BuildMode { run, validate };

// `prev`, the snapshot in service, lends what did not change (the route table). `health`: the
// endpoints failing their health checks (endpoint_health.h), none: every endpoint as its config says.
std::unique_ptr<dp::ServiceSnapshot> build_snapshot(const Config& cfg, uint32_t generation = 1,
                                                    const dp::ServiceSnapshot* prev = nullptr,
                                                    BuildMode mode = BuildMode::run,
                                                    const EndpointHealthView* health = nullptr);

// FNV-1a of "namespace/name:port/PROTO": the stable ServicePort id (affinity, flows).
// Stable across reloads: a hash of name and protocol, and of the family for IPv6 (a dual-stack
// Service's two families are two service ports; IPv4's ids are what they were before IPv6).
uint32_t service_port_id(const std::string& name, dp::Proto proto, dp::Family family = dp::Family::v4);

}  // namespace svcgate::ctl
