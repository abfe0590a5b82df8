// svcgatectl: the operator's command line. `trace` runs packets through the real pipeline
// offline; the commands that talk to a running svcgate arrive with the daemon.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "packet_spec.h"
#include "pcap_io.h"
#include "tool_eal.h"
#include "trace.h"
#include "yaml_config.h"

namespace po = boost::program_options;
using namespace svcgate::ctl;

namespace {

constexpr const char* kUsage =
    "usage: svcgatectl trace --config FILE [--json] [--seed N] PACKET...\n"
    "       svcgatectl trace --config FILE [--json] --pcap IN [--out OUT]\n"
    "\n"
    "PACKET is written as tcpdump prints it, e.g.\n"
    "  'tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]'\n"
    "  'udp 10.244.3.5:34361 > 10.96.0.10:53'\n"
    "  'reply 1 [S.]'      the answer to packet 1's output\n"
    "  -                   read packets from standard input, one per line\n";

int cmd_trace(const std::vector<std::string>& args) {
    po::options_description opts("trace options");
    opts.add_options()("help,h", "this help")("config", po::value<std::string>(), "config file")(
        "json", "one JSON object per packet")("seed", po::value<uint64_t>()->default_value(1), "RNG seed")(
        "pcap", po::value<std::string>(), "read packets from a pcap file")(
        "out", po::value<std::string>(), "write the packets that leave to a pcap file")(
        "packet", po::value<std::vector<std::string>>()->composing(), "packets");
    po::positional_options_description pos;
    pos.add("packet", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << kUsage << "\n" << opts;
        return 0;
    }
    if (!vm.count("config")) throw po::error("--config is required");
    const bool json = vm.count("json");
    std::vector<std::string> packets;
    if (vm.count("packet")) packets = vm["packet"].as<std::vector<std::string>>();
    if (packets.empty() && !vm.count("pcap")) throw po::error("give packets or --pcap");

    Config cfg = load_config_file(vm["config"].as<std::string>());
    for (const auto& w : cfg.warnings) fmt::print(stderr, "warning: {}\n", w.str());
    init_tool_eal("svcgatectl");
    Tracer tracer(cfg, TraceOptions{.seed = vm["seed"].as<uint64_t>()});

    std::vector<Frame> out_frames;
    int failures = 0;
    auto emit = [&](const TraceRecord& r) {
        std::cout << (json ? r.json() : r.text()) << "\n" << std::flush;
        if (!r.frame.empty()) out_frames.push_back(r.frame);
    };
    // A packet that cannot be traced is reported and counted; the others still run.
    auto guarded = [&](auto&& trace_one) {
        try {
            emit(trace_one());
        } catch (const std::invalid_argument& e) {
            fmt::print(stderr, "svcgatectl: trace: {}\n", e.what());
            ++failures;
        }
    };
    auto run = [&](const std::string& spec) { guarded([&] { return tracer.run_spec(spec); }); };
    if (vm.count("pcap")) {
        auto frames = read_pcap(vm["pcap"].as<std::string>());
        for (size_t i = 0; i < frames.size(); ++i)
            guarded([&] { return tracer.run_frame(frames[i], fmt::format("pcap #{}", i + 1)); });
    }
    for (const auto& p : packets) {
        if (p == "-") {
            for (std::string line; std::getline(std::cin, line);)
                if (!line.empty() && line[0] != '#') run(line);
        } else {
            run(p);
        }
    }
    if (vm.count("out")) write_pcap(vm["out"].as<std::string>(), out_frames);
    return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    std::string cmd = argv[1];
    std::vector<std::string> args(argv + 2, argv + argc);
    try {
        if (cmd == "trace") return cmd_trace(args);
        fmt::print(stderr, "svcgatectl: unknown command \"{}\"\n{}", cmd, kUsage);
        return 2;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "{}\n", e.what());
        return 1;
    } catch (const po::error& e) {
        fmt::print(stderr, "svcgatectl: {}\n{}", e.what(), kUsage);
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "svcgatectl: {}\n", e.what());
        return 1;
    }
}
