// svcgatectl: the operator's command line, driven by control/api/command_table.h. The remote
// commands talk to a running svcgate over its control socket; `trace` runs packets through the
// real pipeline offline; `completion` writes the bash completion.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "control/api/command_table.h"
#include "control/base/address.h"
#include "control/base/tool_eal.h"
#include "control/cli/render.h"
#include "control/config/yaml_config.h"
#include "control/trace/packet_spec.h"
#include "control/trace/pcap_io.h"
#include "control/trace/trace.h"

namespace po = boost::program_options;
using namespace svcgate::ctl;

namespace {

int cmd_trace(const std::vector<std::string>& args) {
    // The options of kCommands' trace entry, as Boost.Program_options reads them.
    po::options_description opts("trace options");
    opts.add_options()("help,h", "this help");
    for (const CommandOption& o : find_command("trace")->options) {
        const std::string name(o.flag.substr(2));
        if (o.value.empty())
            opts.add_options()(name.c_str(), std::string(o.help).c_str());
        else
            opts.add_options()(name.c_str(), po::value<std::string>(), std::string(o.help).c_str());
    }
    opts.add_options()("packet", po::value<std::vector<std::string>>()->composing(), "packets");
    po::positional_options_description pos;
    pos.add("packet", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << usage_text() << "\n" << opts;
        return 0;
    }
    if (!vm.count("config")) throw po::error("--config is required");
    const bool json = vm.count("json");
    std::vector<std::string> packets;
    if (vm.count("packet")) packets = vm["packet"].as<std::vector<std::string>>();
    if (packets.empty() && !vm.count("pcap")) throw po::error("give packets or --pcap");

    uint64_t seed = 1;
    if (vm.count("seed")) {
        const std::string& s = vm["seed"].as<std::string>();
        const auto v = parse_number(s);
        if (!v) throw po::error("--seed \"" + s + "\" is not a number");
        seed = *v;
    }
    Config cfg = load_config_file(vm["config"].as<std::string>());
    for (const auto& w : cfg.warnings) fmt::print(stderr, "warning: {}\n", w.str());
    auto fail = [](const Status& s) {
        fmt::print(stderr, "svcgatectl: trace: {}\n", s.error());
        return 1;
    };
    if (Status s = init_tool_eal("svcgatectl"); !s) return fail(s);
    // Never freed: at exit DPDK's free would zero every byte the tracer's tables hold (both route
    // tables' 64 MB first levels, most of them never touched): 63% of a one-packet trace's 0.84 s
    // of CPU (perf). The process ends here and the kernel takes the memory back at once; clang's
    // -disable-free does the same. Reachable through a static, so not a leak to LeakSanitizer.
    static Tracer& tracer = *new Tracer(cfg, TraceOptions{.seed = seed});
    if (!tracer.status()) return fail(tracer.status());

    std::vector<Frame> out_frames;
    int failures = 0;
    // A packet that cannot be traced is reported and counted; the others still run.
    auto emit = [&](const TraceRecord& r) {
        if (!r.traced) {
            fail(r.traced);
            ++failures;
            return;
        }
        std::cout << (json ? r.json() : r.text()) << "\n" << std::flush;
        if (!r.frame.empty()) out_frames.push_back(r.frame);
        out_frames.insert(out_frames.end(), r.also.begin(), r.also.end());
    };
    auto run = [&](const std::string& spec) { emit(tracer.run_spec(spec)); };
    if (vm.count("pcap")) {
        std::vector<Frame> frames;
        if (Status s = read_pcap(vm["pcap"].as<std::string>(), frames); !s) return fail(s);
        for (size_t i = 0; i < frames.size(); ++i) emit(tracer.run_frame(frames[i], fmt::format("pcap #{}", i + 1)));
    }
    for (const auto& p : packets) {
        if (p == "-") {
            for (std::string line; std::getline(std::cin, line);)
                if (!line.empty() && line[0] != '#') run(line);
        } else {
            run(p);
        }
    }
    if (vm.count("out"))
        if (Status s = write_pcap(vm["out"].as<std::string>(), out_frames); !s) return fail(s);
    return failures ? 1 : 0;
}

// One request to the daemon's control socket (command_table.h's protocol); its answer rendered as
// a table, or as the daemon's JSON with --json. The exit status is the answer's: 0 done, 1 the
// command failed, 2 a refused request.
int cmd_remote(const std::string& socket_path, const std::vector<std::string>& words) {
    const CommandRequest req = parse_request(words);
    if (!req.error.empty()) {
        fmt::print(stderr, "svcgatectl: error: {}\n", req.error);
        return 2;
    }
    std::string line;  // --json is ours: the daemon always answers in JSON
    for (const auto& w : words)
        if (w != "--json") line += (line.empty() ? "" : " ") + w;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof a.sun_path) {
        fmt::print(stderr, "svcgatectl: --socket {}: longer than a socket path can be\n", socket_path);
        return 1;
    }
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
        fmt::print(stderr, "svcgatectl: cannot send the request to {}: {}\n", socket_path, std::strerror(errno));
        close(fd);
        return 1;
    }
    std::string reply;
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(n));
    close(fd);
    const auto j = nlohmann::ordered_json::parse(reply, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("ok")) {
        fmt::print(stderr, "svcgatectl: svcgate answered what is not its protocol: {:.200}\n", reply);
        return 1;
    }
    if (j.value("bad_request", false)) {
        fmt::print(stderr, "svcgatectl: error: {}\n", j.value("error", std::string("refused")));
        return 2;
    }
    const auto& result = j.contains("result") ? j["result"] : nlohmann::ordered_json(nullptr);
    std::string out = result.dump() + "\n";
    if (!req.has("--json"))
        if (Status s = render_answer(req, result, out); !s) {
            fmt::print(stderr, "svcgatectl: {}\n", s.error());
            return 1;
        }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return j["ok"].get<bool>() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    // A daemon that hangs up before the request is written: an error below, not a silent death.
    std::signal(SIGPIPE, SIG_IGN);
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        std::fputs(usage_text().c_str(), argc < 2 ? stderr : stdout);
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
        std::fputs(usage_text().c_str(), stderr);
        return 2;
    }
    const std::string cmd = all[0];
    const std::vector<std::string> args(all.begin() + 1, all.end());
    const CommandSpec* spec = find_command(cmd);
    try {
        if (!spec) {
            fmt::print(stderr, "svcgatectl: unknown command \"{}\"\n{}", cmd, usage_text());
            return 2;
        }
        if (spec->remote) return cmd_remote(socket_path, all);
        if (cmd == "trace") return cmd_trace(args);
        if (cmd == "completion") {
            std::fputs(completion_script().c_str(), stdout);
            return 0;
        }
        fmt::print(stderr, "svcgatectl: {} has no implementation here\n", cmd);
        return 2;
    } catch (const ConfigError& e) {
        fmt::print(stderr, "{}\n", e.what());
        return 1;
    } catch (const po::error& e) {
        fmt::print(stderr, "svcgatectl: {}\n{}", e.what(), usage_text());
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "svcgatectl: {}\n", e.what());
        return 1;
    }
}
