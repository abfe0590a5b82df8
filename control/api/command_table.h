// svcgatectl's commands, declared once: name, options and help. The table drives the daemon's
// control socket (which options a request may carry, and a handler per remote command:
// control/api/commands.cpp checks at compile time that it has exactly these), svcgatectl's
// usage text, its list of remote commands and the bash completion it writes (`svcgatectl
// completion`, installed by the package).
//
// The protocol: one request line, "COMMAND [OPTION [VALUE]]...", and one reply line, a JSON
// object: {"ok": true, "result": ...} or {"ok": false, "error": "...", "bad_request": bool} (a
// refused request) or {"ok": false, "result": ...} (a command that ran and failed: a refused
// reload). svcgatectl renders the result as text, or prints it with --json, and takes its exit
// status from "ok" and "bad_request".
//
// Runs on: any thread (constant data and pure functions).
#pragma once

#include <array>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace svcgate::ctl {

struct CommandOption {
    std::string_view flag;   // "--limit"
    std::string_view value;  // "N", or empty for a switch
    std::string_view help;
};

struct CommandSpec {
    std::string_view name;
    std::span<const CommandOption> options;
    std::string_view help;
    bool remote = true;              // answered by the daemon over its socket (else run by svcgatectl itself)
    std::string_view operands = {};  // after the options, in the synopsis: "[PACKET...]"
};

namespace command_options {
inline constexpr CommandOption kJson{"--json", "", "print the daemon's JSON answer instead of a table"};
inline constexpr std::array kJsonOnly{kJson};
inline constexpr std::array kFlows{
    CommandOption{"--service", "NS/NAME[:PORT]", "only the flows of this Service (a prefix of its name)"},
    CommandOption{"--limit", "N", "at most N flows (default 100)"},
    CommandOption{"--top", "N", "instead of the flows, the N sources (services, endpoints) with the most"},
    CommandOption{"--by", "source|service|endpoint", "what --top counts by (default source)"}, kJson};
inline constexpr std::array kDrain{
    CommandOption{"--timeout", "SECONDS", "leave after this long at the latest (default control.drain_timeout)"},
    kJson};
inline constexpr std::array kTrace{
    CommandOption{"--config", "FILE", "the config to run the packets against (required)"}, kJson,
    CommandOption{"--seed", "N", "the random number generator's seed (default 1)"},
    CommandOption{"--pcap", "IN", "read the packets from a pcap file"},
    CommandOption{"--out", "OUT", "write the packets that leave to a pcap file"}};
}  // namespace command_options

inline constexpr std::array<CommandSpec, 10> kCommands{{
    {"status", command_options::kJsonOnly, "the gateway: ports, Services, flows, health, HA, reloads"},
    {"services", command_options::kJsonOnly, "each Service port with its endpoints and counters"},
    {"endpoints", command_options::kJsonOnly, "each endpoint with its conditions, flows and counters"},
    {"flows", command_options::kFlows, "the NAT flows in the tables"},
    {"stats", command_options::kJsonOnly, "ports, verdicts, drops and rejects by reason, flows, fragments"},
    {"reload", command_options::kJsonOnly, "read the config again and publish it (the old one stays on error)"},
    {"drain", command_options::kDrain, "withdraw the announcements, serve the connections here, then leave"},
    {"undrain", command_options::kJsonOnly, "stop draining: announce again once healthy"},
    {"trace", command_options::kTrace, "run packets through the real pipeline against a config, offline", false,
     "[PACKET...]"},
    {"completion", {}, "print the bash completion script of svcgatectl and svcgate", false},
}};

const CommandSpec* find_command(std::string_view name) noexcept;

// A request parsed against its command's options: the options given, with their values ("" for
// a switch). An unknown command, an unknown option or a missing value is an error message.
struct CommandRequest {
    const CommandSpec* spec = nullptr;
    std::map<std::string, std::string, std::less<>> options;
    std::string error;
    bool has(std::string_view flag) const { return options.find(flag) != options.end(); }
};
CommandRequest parse_request(const std::vector<std::string>& words);

// svcgatectl's usage text and its bash completion script (for svcgatectl and svcgate).
std::string usage_text();
std::string completion_script();

}  // namespace svcgate::ctl
