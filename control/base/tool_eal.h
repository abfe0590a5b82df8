// The EAL for tools that run the pipeline without ports (`svcgatectl trace`, `svcgate --check`,
// tests): no hugepages, no PCI, no shared config, no telemetry socket, quiet logs. Once per
// process. Also the mempool those tools build mbufs from.
#pragma once

#include <string>

#include <rte_mempool.h>

#include "control/base/status.h"

namespace svcgate::ctl {

// Fails when the EAL or the mempool cannot start; every later call answers as the first did.
Status init_tool_eal(const std::string& prog);
// The same for tests, fuzz targets and benchmarks, which cannot go on without it: on failure,
// says why on stderr and aborts.
void init_tool_eal_or_abort(const std::string& prog);
rte_mempool* tool_mempool();

}  // namespace svcgate::ctl
