// The svcgate daemon: EAL, ports, mempool, flow table, workers, and the control loop that
// owns the configuration (reload on SIGHUP) and prints the counters on exit.
//
// Runs on: the main lcore (control thread); workers on the other lcores.
#pragma once

#include <string>
#include <vector>

namespace svcgate::ctl {

struct DaemonOptions {
    std::string config;
    std::vector<std::string> eal_extra;  // after `--` on the command line
};

// Returns the process exit status.
int run_daemon(const DaemonOptions& opts);

// `svcgate --check`: load and build; report every error and warning. Returns the exit status.
int check_config(const std::string& path);

}  // namespace svcgate::ctl
