// svcgatectl: the operator's command line. status/services/endpoints/flows/stats/reload talk to a
// running svcgate over its control socket; `trace` runs packets through the real pipeline offline.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "control/trace/packet_spec.h"
#include "control/trace/pcap_io.h"
#include "control/base/tool_eal.h"
#include "control/trace/trace.h"
#include "control/config/yaml_config.h"

namespace po = boost::program_options;
using namespace svcgate::ctl;

namespace {

constexpr const char* kUsage =
    "usage: svcgatectl [--socket PATH] status|services|endpoints|stats|reload [--json]\n"
    "       svcgatectl [--socket PATH] flows [--service NS/NAME[:PORT]] [--limit N] [--json]\n"
    "       svcgatectl [--socket PATH] drain [--timeout SECONDS] | undrain\n"
    "       svcgatectl trace --config FILE [--json] [--seed N] PACKET...\n"
    "       svcgatectl trace --config FILE [--json] --pcap IN [--out OUT]\n"
    "\n"
    "The first form talks to a running svcgate over its control socket (control.socket in its\n"
    "config; default /run/svcgate.sock, or $SVCGATE_SOCKET).\n"
    "\n"
    "PACKET is written as tcpdump prints it, e.g.\n"
    "  'tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]'\n"
    "  'udp 10.244.3.5:34361 > 10.96.0.10:53'\n"
    "  'tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [S]'   IPv6, [addr]:port\n"
    "  'IP6 fd00:67::100.40000 > fd00:67::8.30001: Flags [S], seq 1, length 0'\n"
    "                      a line of tcpdump -n, whole (IP or IP6; TCP, UDP, SCTP, echo request)\n"
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
        out_frames.insert(out_frames.end(), r.also.begin(), r.also.end());
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

// One request line to the daemon's control socket; its reply to stdout.
int cmd_remote(const std::string& socket_path, const std::vector<std::string>& words) {
    std::string line;
    for (const auto& w : words) line += (line.empty() ? "" : " ") + w;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof a.sun_path) throw std::runtime_error("socket path too long");
    std::memcpy(a.sun_path, socket_path.c_str(), socket_path.size() + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        fmt::print(stderr, "svcgatectl: cannot reach svcgate at {}: {} (is it running? --socket?)\n", socket_path,
                   std::strerror(errno));
        if (fd >= 0) close(fd);
        return 1;
    }
    line += "\n";
    if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        close(fd);
        throw std::runtime_error("cannot send the request");
    }
    std::string reply;
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
    close(fd);
    std::fwrite(reply.data(), 1, reply.size(), stdout);
    const bool failed = reply.rfind("error:", 0) == 0 || reply.rfind("reload failed", 0) == 0 ||
                        reply.rfind("{\"ok\":false", 0) == 0;
    if (reply.rfind("error:", 0) == 0) return 2;
    return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    std::vector<std::string> all(argv + 1, argv + argc);
    std::string socket_path = std::getenv("SVCGATE_SOCKET") ? std::getenv("SVCGATE_SOCKET") : "/run/svcgate.sock";
    while (!all.empty() && (all[0] == "--socket" || all[0].rfind("--socket=", 0) == 0)) {
        if (all[0] == "--socket") {
            if (all.size() < 2) {
                fmt::print(stderr, "svcgatectl: --socket needs a path\n");
                return 2;
            }
            socket_path = all[1];
            all.erase(all.begin(), all.begin() + 2);
        } else {
            socket_path = all[0].substr(9);
            all.erase(all.begin());
        }
    }
    if (all.empty()) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    std::string cmd = all[0];
    std::vector<std::string> args(all.begin() + 1, all.end());
    static const std::set<std::string> kRemote = {"status", "services", "endpoints", "flows", "stats", "reload",
                                                "drain", "undrain"};
    try {
        if (kRemote.count(cmd)) return cmd_remote(socket_path, all);
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
