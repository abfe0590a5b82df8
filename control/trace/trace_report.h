// svcgatectl trace --json: one line per packet traced (TraceRecord::json, trace.h). The
// conformance runner (tests/conformance/run) and users' scripts read these keys.
//
// Runs on: any thread (plain data).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "control/base/report_members.h"

namespace svcgate::ctl::report {

// What the output stage did with the frame.
struct TraceL2 {
    std::string outcome;
    std::optional<std::string> next_hop, mac;
    bool arp_request = false;
    std::optional<std::string> reason;  // why the output stage freed it
};
void members(Of<TraceL2> auto& r, auto&& f) {
    f("outcome", r.outcome), f("next_hop", r.next_hop), f("mac", r.mac), f("arp_request", r.arp_request),
        f("reason", r.reason);
}

struct Trace {
    std::string in, verdict;
    std::optional<std::string> service, endpoint, role;
    bool masquerade = false;
    std::optional<std::string> masquerade_rule;
    bool new_flow = false;
    std::optional<std::string> out, out_flags, port;
    std::optional<unsigned> vlan;
    std::optional<std::string> reason;  // drops and rejects
    std::optional<TraceL2> l2;          // null: it did not reach the output stage
    std::vector<std::string> also;      // the tuples of what else left
};
void members(Of<Trace> auto& r, auto&& f) {
    f("in", r.in), f("verdict", r.verdict), f("service", r.service), f("endpoint", r.endpoint), f("role", r.role),
        f("masquerade", r.masquerade), f("masquerade_rule", r.masquerade_rule), f("new_flow", r.new_flow),
        f("out", r.out), f("out_flags", r.out_flags), f("port", r.port), f("vlan", r.vlan), f("reason", r.reason),
        f("l2", r.l2), f("also", r.also);
}

}  // namespace svcgate::ctl::report
