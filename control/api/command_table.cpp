#include "control/api/command_table.h"

#include <algorithm>

#include <fmt/format.h>

namespace svcgate::ctl {

const CommandSpec* find_command(std::string_view name) noexcept {
    for (const CommandSpec& c : kCommands)
        if (c.name == name) return &c;
    return nullptr;
}

CommandRequest parse_request(const std::vector<std::string>& words) {
    CommandRequest r;
    if (words.empty()) {
        r.error = "empty request";
        return r;
    }
    r.spec = find_command(words[0]);
    if (!r.spec || !r.spec->remote) {
        std::string names;
        for (const CommandSpec& c : kCommands)
            if (c.remote) names += (names.empty() ? "" : ", ") + std::string(c.name);
        r.error = fmt::format("unknown command \"{}\" ({})", words[0], names);
        r.spec = nullptr;
        return r;
    }
    for (size_t i = 1; i < words.size(); ++i) {
        const CommandOption* o = nullptr;
        for (const CommandOption& c : r.spec->options)
            if (c.flag == words[i]) o = &c;
        if (!o) {
            // An option another command takes reads better as such.
            const auto takes = [&](const CommandSpec& c) {
                return c.remote && std::any_of(c.options.begin(), c.options.end(), [&](const CommandOption& x) {
                           return x.flag == words[i];
                       });
            };
            const auto other = std::find_if(kCommands.begin(), kCommands.end(), takes);
            r.error = other != kCommands.end()
                ? fmt::format("{} is for {}, not {}", words[i], other->name, r.spec->name)
                : fmt::format("unexpected \"{}\"", words[i]);
            return r;
        }
        std::string value;
        if (!o->value.empty()) {
            if (i + 1 >= words.size()) {
                r.error = fmt::format("{} needs a value ({})", o->flag, o->value);
                return r;
            }
            value = words[++i];
        }
        r.options[std::string(o->flag)] = value;
    }
    return r;
}

namespace {

std::string synopsis(const CommandSpec& c) {
    std::string s(c.name);
    for (const CommandOption& o : c.options)
        s += o.value.empty() ? fmt::format(" [{}]", o.flag) : fmt::format(" [{} {}]", o.flag, o.value);
    if (!c.operands.empty()) s += " " + std::string(c.operands);
    return s;
}

}  // namespace

std::string usage_text() {
    std::string o =
        "usage: svcgatectl [--socket PATH] COMMAND [OPTION...]\n\n"
        "Commands a running svcgate answers over its control socket (control.socket in its\n"
        "config; default /run/svcgate.sock, or $SVCGATE_SOCKET):\n";
    auto list = [&](bool remote) {
        for (const CommandSpec& c : kCommands) {
            if (c.remote != remote) continue;
            const std::string syn = synopsis(c);
            o += syn.size() <= 30 ? fmt::format("  {:<30} {}\n", syn, c.help)
                                  : fmt::format("  {}\n  {:<30} {}\n", syn, "", c.help);
        }
    };
    list(true);
    o += "\nCommands svcgatectl runs itself:\n";
    list(false);
    o += "\nOptions:\n";
    std::vector<std::string_view> seen;
    for (const CommandSpec& c : kCommands)
        for (const CommandOption& opt : c.options) {
            if (std::find(seen.begin(), seen.end(), opt.flag) != seen.end()) continue;
            seen.push_back(opt.flag);
            const std::string f = opt.value.empty() ? std::string(opt.flag) : fmt::format("{} {}", opt.flag, opt.value);
            o += fmt::format("  {:<30} {}\n", f, opt.help);
        }
    o += "\n"
         "A trace PACKET is written as tcpdump prints it, e.g.\n"
         "  'tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]'\n"
         "  'udp 10.244.3.5:34361 > 10.96.0.10:53'\n"
         "  'tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [S]'   IPv6, [addr]:port\n"
         "  'IP6 fd00:67::100.40000 > fd00:67::8.30001: Flags [S], seq 1, length 0'\n"
         "                      a line of tcpdump -n, whole (IP or IP6; TCP, UDP, SCTP, echo request)\n"
         "  'reply 1 [S.]'      the answer to packet 1's output\n"
         "  -                   read packets from standard input, one per line\n"
         "\n"
         "Exit status: 0 done, 1 the command failed (a refused reload, an unreachable daemon, a\n"
         "packet that could not be traced), 2 a bad request.\n";
    return o;
}

std::string completion_script() {
    std::string names, option_cases;
    for (const CommandSpec& c : kCommands) {
        names += (names.empty() ? "" : " ") + std::string(c.name);
        std::string flags;
        for (const CommandOption& o : c.options) flags += (flags.empty() ? "" : " ") + std::string(o.flag);
        if (c.name == "trace") flags += " --help";
        option_cases += fmt::format("        {}) COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")) ;;\n", c.name, flags);
    }
    std::string file_flags = "--socket", value_flags;
    for (const CommandSpec& c : kCommands)
        for (const CommandOption& o : c.options) {
            if (o.value.empty()) continue;
            const bool file = o.value == "FILE" || o.value == "IN" || o.value == "OUT";
            std::string& list = file ? file_flags : value_flags;
            if (list.find(std::string(o.flag)) == std::string::npos) list += "|" + std::string(o.flag);
        }
    if (!value_flags.empty()) value_flags.erase(0, 1);
    std::string pipe_names = names;
    std::replace(pipe_names.begin(), pipe_names.end(), ' ', '|');
    return fmt::format(
        "# bash completion for svcgatectl and svcgate, written by `svcgatectl completion` from its\n"
        "# command table (installed as both names' completion: bash-completion looks a command up by name).\n"
        "_svcgatectl() {{\n"
        "    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}\n"
        "    case $prev in\n"
        "        {}) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
        "        {}) return ;;\n"
        "    esac\n"
        "    local cmd=\"\" w\n"
        "    for w in \"${{COMP_WORDS[@]:1:COMP_CWORD-1}}\"; do\n"
        "        case $w in {}) cmd=$w ;; esac\n"
        "    done\n"
        "    case $cmd in\n"
        "        \"\") COMPREPLY=($(compgen -W \"{} --socket --help\" -- \"$cur\")) ;;\n"
        "{}"
        "    esac\n"
        "}}\n"
        "_svcgate() {{\n"
        "    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}\n"
        "    case $prev in\n"
        "        --config|-c) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
        "        --log-level) COMPREPLY=($(compgen -W \"err warning notice info debug\" -- \"$cur\")); return ;;\n"
        "    esac\n"
        "    COMPREPLY=($(compgen -W \"--config --check --log-level --help\" -- \"$cur\"))\n"
        "}}\n"
        "complete -F _svcgatectl svcgatectl\n"
        "complete -F _svcgate svcgate\n",
        file_flags, value_flags, pipe_names, names, option_cases);
}

}  // namespace svcgate::ctl
