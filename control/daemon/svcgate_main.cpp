// svcgate: the gateway daemon.
//   svcgate --config FILE [-- EAL ARGS...]
//   svcgate --config FILE --check
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "control/daemon/daemon.h"
#include "control/base/log.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
    std::vector<std::string> ours, eal;
    bool after = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (!after && a == "--")
            after = true;
        else
            (after ? eal : ours).push_back(a);
    }
    po::options_description opts(
        "usage: svcgate --config FILE [--check] [--log-level LEVEL] [-- EAL ARGS...]\noptions");
    opts.add_options()("help,h", "this help")("config,c", po::value<std::string>(), "config file (YAML)")(
        "check", "validate the config (all errors, with file:line:column) and exit")(
        "log-level", po::value<std::string>()->default_value("info"),
        "err, warning, notice, info or debug: lines below it are not written (under systemd each line "
        "carries its syslog priority for journald)");
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(ours).options(opts).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        fmt::print(stderr, "svcgate: {}\n", e.what());
        std::cerr << opts;
        return 2;
    }
    if (vm.count("help")) {
        std::cout << opts;
        return 0;
    }
    if (!vm.count("config")) {
        fmt::print(stderr, "svcgate: --config is required\n");
        std::cerr << opts;
        return 2;
    }
    const auto level = svcgate::ctl::parse_log_level(vm["log-level"].as<std::string>());
    if (!level) {
        fmt::print(stderr, "svcgate: --log-level: \"{}\" is not err, warning, notice, info or debug\n",
                   vm["log-level"].as<std::string>());
        return 2;
    }
    svcgate::ctl::set_log_level(*level);
    const std::string cfg = vm["config"].as<std::string>();
    if (vm.count("check")) return svcgate::ctl::check_config(cfg);
    return svcgate::ctl::run_daemon({cfg, eal});
}
