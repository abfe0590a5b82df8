#include "trace.h"

#include "flow_sweep.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "packet_spec.h"
#include "snapshot_builder.h"
#include "tool_eal.h"
#include "yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

std::string json_str(const std::optional<std::string>& s) {
    if (!s) return "null";
    std::string o = "\"";
    for (char c : *s) {
        if (c == '"' || c == '\\') o += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            o += fmt::format("\\u{:04x}", c);
            continue;
        }
        o += c;
    }
    return o + "\"";
}

}  // namespace

std::string TraceRecord::json() const {
    const bool refused = verdict == Verdict::drop || verdict == Verdict::reject;
    return fmt::format(
        "{{\"in\":{},\"verdict\":\"{}\",\"service\":{},\"endpoint\":{},\"role\":{},\"masquerade\":{},"
        "\"new_flow\":{},\"out\":{},\"out_flags\":{},\"port\":{},\"reason\":{}}}",
        json_str(input), verdict_name(verdict), json_str(service), json_str(endpoint), json_str(role),
        masquerade ? "true" : "false", new_flow ? "true" : "false", json_str(out), json_str(out_flags),
        json_str(port), refused ? json_str(std::string(drop_reason_name(reason))) : "null");
}

std::string TraceRecord::text() const {
    std::string s = fmt::format("{}\n  -> {}", input, verdict_name(verdict));
    if (service) s += fmt::format(" {} ({})", *service, role.value_or("?"));
    if (endpoint) s += fmt::format(" endpoint {}", *endpoint);
    if (verdict == Verdict::dnat) s += masquerade ? " masquerade" : " no-masquerade";
    if (verdict == Verdict::drop || verdict == Verdict::reject)
        s += fmt::format(" reason {} ({})", drop_reason_name(reason), drop_reason_description(reason));
    if (out) s += fmt::format("\n  out {}{}", *out, out_flags ? " [" + *out_flags + "]" : "");
    if (port) s += fmt::format(" via port {}", *port);
    return s;
}

Tracer::Tracer(const Config& cfg, TraceOptions opts) {
    snap_ = build_snapshot(cfg, 1);
    FlowTable::Params p{.capacity = std::min<uint32_t>(cfg.dataplane.flow_capacity, 1u << 18),
                        .owners = 1,
                        .qsbr = nullptr,
                        .timeouts = cfg.dataplane.timeouts,
                        .new_flows_per_source = cfg.dataplane.new_flows_per_source};
    flows_ = FlowTable::create(p);
    if (!flows_) throw std::runtime_error("cannot allocate the flow table");
    ctx_.worker = 0;
    ctx_.n_workers = 1;
    ctx_.flows = flows_.get();
    ctx_.snap = snap_.get();
    ctx_.now = opts.now;
    ctx_.rng = Rng(opts.seed);
    ctx_.snat_cursor = 0;
}

Tracer::~Tracer() = default;

SweepResult Tracer::reload(const Config& cfg) {
    auto fresh = build_snapshot(cfg, snap_->generation + 1, snap_.get());
    snap_ = std::move(fresh);
    ctx_.snap = snap_.get();
    // One thread, no readers in flight: datagram flows go at once.
    return sweep_removed_endpoints(*flows_, *snap_, [&](uint32_t id, uint8_t) { flows_->remove(id); });
}

void Tracer::advance(uint32_t seconds) {
    ctx_.now += seconds;
    while (worker_housekeeping(ctx_, 1u << 16) > 0) {
    }
}

TraceRecord Tracer::run_spec(const std::string& spec) {
    std::istringstream is(spec);
    std::string first;
    is >> first;
    if (first == "reply") {
        // "reply N [FLAGS]": the answer to packet N's output, as its receiver would send it.
        size_t n = 0;
        if (!(is >> n) || n == 0 || n > history_.size() || !history_[n - 1].out)
            throw std::invalid_argument(fmt::format("\"{}\": no packet {} with an output to reply to", spec, n));
        std::string rest;
        std::getline(is, rest);
        const FlowKey k = history_[n - 1].out_key.reversed();
        return run_spec(format_tuple(k) + rest);
    }
    PacketSpec p = parse_packet_spec(spec);
    return run_frame(build_frame(p), spec);
}

TraceRecord Tracer::run_frame(const Frame& frame, std::string input) {
    rte_mbuf* m = rte_pktmbuf_alloc(tool_mempool());
    if (!m) throw std::runtime_error("mbuf pool exhausted");
    if (frame.size() > rte_pktmbuf_tailroom(m)) {
        rte_pktmbuf_free(m);
        throw std::invalid_argument("frame larger than an mbuf");
    }
    char* room = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
    if (!frame.empty()) std::memcpy(room, frame.data(), frame.size());

    // The port the packet arrives on: where the gateway's routes say its source lives.
    PacketMeta in{};
    uint16_t in_port = 0;
    if (parse_packet(frame.data(), static_cast<uint32_t>(frame.size()), in) == DropReason::none && in.l3 == L3Kind::ipv4)
        if (const NextHop* h = snap_->route(in.key.src)) in_port = h->port;

    PacketResult res;
    PacketTrace tr;
    rte_mbuf* burst[1] = {m};
    process_burst(burst, 1, in_port, ctx_, &res, &tr);

    TraceRecord r;
    r.input = std::move(input);
    r.verdict = res.verdict;
    r.reason = res.reason;
    const ServiceSnapshot& s = *snap_;
    if (tr.svc != PacketTrace::kNone) {
        r.service = s.services[tr.svc].name;
        if (tr.role) r.role = addr_role_name(*tr.role);
    }
    if (tr.endpoint != PacketTrace::kNone)
        r.endpoint = fmt::format("{}:{}", format_ip4(s.endpoints[tr.endpoint].ip), rte_be_to_cpu_16(s.endpoints[tr.endpoint].port));
    r.masquerade = tr.masquerade;
    r.new_flow = tr.new_flow;
    if (res.verdict != Verdict::drop) {
        const auto* data = rte_pktmbuf_mtod(m, const uint8_t*);
        r.frame.assign(data, data + rte_pktmbuf_data_len(m));
        PacketMeta out{};
        if (parse_packet(r.frame.data(), static_cast<uint32_t>(r.frame.size()), out) == DropReason::none &&
            out.l3 == L3Kind::ipv4) {
            r.out_key = out.key;
            r.out = format_tuple(out.key);
            if (out.key.proto == static_cast<uint8_t>(Proto::tcp)) r.out_flags = format_tcp_flags(out.tcp_flags);
        }
        if (res.verdict != Verdict::local && res.out_port < s.ports.size()) r.port = s.ports[res.out_port].name;
    }
    rte_pktmbuf_free(m);
    history_.push_back(r);
    return r;
}

}  // namespace svcgate::ctl
