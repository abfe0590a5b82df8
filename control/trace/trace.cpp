#include "control/trace/trace.h"

#include "dataplane/pipeline/frag_stage.h"
#include "dataplane/pipeline/vlan.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "control/base/report_json.h"
#include "control/trace/packet_spec.h"
#include "control/trace/trace_report.h"
#include "control/snapshot/snapshot_builder.h"
#include "control/base/tool_eal.h"
#include "control/config/yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

using Json = nlohmann::ordered_json;

// The tuple as it leaves, tcpdump's "(frag id:size@offset+)" after it for a fragment.
std::string leaving_tuple(const PacketMeta& pm) {
    std::string s = pm.is_v6() ? format_tuple(pm.key6) : format_tuple(pm.key);
    if (pm.is_fragment())
        s += fmt::format(" (frag {}:{}@{}{})", pm.frag.id, pm.frag_len(), pm.frag_off, pm.more_fragments ? "+" : "");
    return s;
}

// The tuples of frames that left beside a packet (TraceRecord::also), for people.
std::vector<std::string> also_out(const std::vector<std::vector<uint8_t>>& frames) {
    std::vector<std::string> out;
    for (const auto& f : frames) {
        PacketMeta pm{};
        if (parse_packet(f.data(), static_cast<uint32_t>(f.size()), pm) == DropReason::none)
            out.push_back(leaving_tuple(pm));
    }
    return out;
}

}  // namespace

std::string format_mac(const rte_ether_addr& m) {
    std::array<uint8_t, 6> b;
    std::copy_n(m.addr_bytes, 6, b.begin());
    return format_mac(b);
}

std::vector<IpAddr> pin_neighbors(NeighborTable& nt, NeighborTable6& nt6, const std::vector<NeighborConfig>& next,
                                  const std::vector<NeighborConfig>& old) {
    for (const NeighborConfig& o : old)
        if (std::none_of(next.begin(), next.end(), [&](const NeighborConfig& n) { return n.ip == o.ip; })) {
            if (o.ip.is_v4())
                nt.unpin(o.ip.v4());
            else
                nt6.unpin(o.ip.v6());
        }
    std::vector<IpAddr> full;
    for (const NeighborConfig& n : next) {
        rte_ether_addr mac;
        std::copy(n.mac.begin(), n.mac.end(), mac.addr_bytes);
        if (!(n.ip.is_v4() ? nt.pin(n.ip.v4(), mac) : nt6.pin(n.ip.v6(), mac))) full.push_back(n.ip);
    }
    return full;
}

std::string TraceRecord::json() const {
    const bool refused = verdict == Verdict::drop || verdict == Verdict::reject;
    report::Trace r{.in = input,
                    .verdict = std::string(verdict_name(verdict)),
                    .service = service,
                    .endpoint = endpoint,
                    .role = role,
                    .masquerade = masquerade,
                    .masquerade_rule = masquerade_rule,
                    .new_flow = new_flow,
                    .out = out,
                    .out_flags = out_flags,
                    .port = port,
                    .vlan = vlan,
                    .also = also_out(also)};
    if (refused) r.reason = drop_reason_name(reason);
    if (l2 != L2Outcome::none)
        r.l2 = report::TraceL2{
            .outcome = l2_outcome_name(l2), .next_hop = next_hop, .mac = mac, .arp_request = arp_request};
    if (r.l2 && l2_reason != DropReason::none) r.l2->reason = drop_reason_name(l2_reason);
    return Json(r).dump();
}

std::string TraceRecord::text() const {
    std::string s = fmt::format("{}\n  -> {}", input, verdict_name(verdict));
    if (service) s += fmt::format(" {} ({})", *service, role.value_or("?"));
    if (endpoint) s += fmt::format(" endpoint {}", *endpoint);
    if (verdict == Verdict::dnat) s += masquerade ? " masquerade" : " no-masquerade";
    if (verdict == Verdict::dnat && masquerade_rule) s += fmt::format(" ({})", *masquerade_rule);
    if (verdict == Verdict::drop || verdict == Verdict::reject)
        s += fmt::format(" reason {} ({})", drop_reason_name(reason), drop_reason_description(reason));
    if (out) s += fmt::format("\n  out {}{}", *out, out_flags ? " [" + *out_flags + "]" : "");
    if (port) s += fmt::format(" via port {}", *port);
    if (vlan) s += fmt::format(" (VLAN {})", *vlan);
    switch (l2) {
        case L2Outcome::none:
            break;
        case L2Outcome::sent:
            s += fmt::format("\n  l2 sent to {}{}", mac.value_or("?"), next_hop ? " (next hop " + *next_hop + ")" : "");
            break;
        case L2Outcome::held:  // a held packet is shown as it would leave: out_v6 is its family
            s += fmt::format("\n  l2 held: waiting for the MAC of {}{}", next_hop.value_or("?"),
                             !arp_request ? ""
                                 : out_v6 ? " (neighbor solicitation sent)"
                                          : " (ARP request sent)");
            break;
        case L2Outcome::dropped:
            s +=
                fmt::format("\n  l2 dropped: {} ({})", drop_reason_name(l2_reason), drop_reason_description(l2_reason));
            break;
        case L2Outcome::frag_held:
            s += "\n  l2 held: a later fragment, waiting for its first fragment";
            break;
        case L2Outcome::punted:
            s += fmt::format("\n  l2 handed to host interface {} (the kernel: its routing daemon, health checks)",
                             port.value_or("?"));
            break;
    }
    for (const std::string& a : also_out(also)) s += fmt::format("\n  also out {}", a);
    return s;
}

Tracer::Tracer(const Config& cfg, TraceOptions opts) : on_refused_(std::move(opts.on_refused)) {
    FlowTable::Params p{.capacity = std::min<uint32_t>(cfg.dataplane.flow_capacity, 1u << 18),
                        .owners = std::max<uint16_t>(opts.owners, 1),
                        .qsbr = nullptr,
                        .timeouts = cfg.dataplane.timeouts,
                        .new_flows_per_source = cfg.dataplane.new_flows_per_source};
    flows_ = FlowTable::create(p);
    p.capacity = std::min<uint32_t>(cfg.dataplane.flow_capacity_v6, 1u << 16);
    flows6_ = FlowTable6::create(p);
    if (!flows_ || !flows6_) {
        status_ = Status::fail("cannot allocate the flow table");
        return;
    }
    FragParams fp = cfg.dataplane.fragments;
    fp.max_datagrams = std::min<uint32_t>(fp.max_datagrams, 1024);
    frags_ = FragTable::create(fp);
    if (!frags_) {
        status_ = Status::fail("cannot allocate the fragment table");
        return;
    }
    for (const PortConfig& pc : cfg.dataplane.ports) mtus_.push_back(pc.mtu), ports_.push_back({pc.device, pc.vlan});
    mtus_.resize(std::max<size_t>(mtus_.size(), 1), 1500);
    // Locally administered MACs in port order: 02:00:00:00:00:01, ...
    macs_.resize(std::max<size_t>(cfg.dataplane.ports.size(), 1));
    for (size_t i = 0; i < macs_.size(); ++i)
        macs_[i] = rte_ether_addr{{0x02, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)}};
    (void)pin_neighbors(neighbors_, neighbors6_, cfg.dataplane.neighbors, {});
    ctx_.worker = 0;
    ctx_.n_workers = 1;
    ctx_.flows = flows_.get();
    ctx_.flows6 = flows6_.get();
    ctx_.now = opts.now;
    ctx_.now_ms = uint64_t{opts.now} * 1000;
    ctx_.frags = frags_.get();
    ctx_.icmp.per_second = cfg.dataplane.icmp_errors_per_second;
    ctx_.rng = Rng(opts.seed);
    ctx_.snat_cursor = 0;
    ctx_.out.init(neighbors_, neighbors6_, tool_mempool(), macs_.data(), static_cast<uint16_t>(macs_.size()),
                  TxSink{.send = &Tracer::capture, .arg = this});
    ctx_.out.set_mtus(mtus_.data());
    // Host interfaces (ports[].host_interface): what the dataplane hands the kernel is shown as
    // such, within the punt budgets (trace's clock stands still: the budget never refills).
    host_of_.assign(macs_.size(), Output::kNoHost);
    host_names_.assign(macs_.size(), "");
    uint16_t outputs = static_cast<uint16_t>(macs_.size());
    for (size_t i = 0; i < cfg.dataplane.ports.size(); ++i)
        if (!cfg.dataplane.ports[i].host_interface.empty()) {
            host_of_[i] = outputs++;
            host_names_[i] = cfg.dataplane.ports[i].host_interface;
        }
    if (outputs > macs_.size()) ctx_.out.set_host_path(host_of_.data(), outputs);
    ctx_.punt_control.per_second = cfg.dataplane.punt_control_per_second;
    ctx_.punt_other.per_second = cfg.dataplane.punt_other_per_second;
    burst_ = std::make_unique<Burst>();
    publisher_ = std::make_unique<Publisher>(
        std::max<uint16_t>(opts.owners, 1),  // a stats row per owner: the worker may act as any
        PublishTarget{.store = [this](const ServiceSnapshot* s) { ctx_.snap = s; },
                      .store_stats = [this](StatsTable* t) { ctx_.stats = t; },
                      .qsbr = nullptr,
                      .flows = flows_.get(),
                      .flows6 = flows6_.get(),
                      // One thread, no readers in flight: datagram flows go at once.
                      .remove_dgram = [this](uint32_t id, uint8_t) { remove_gone_flow(ctx_, id); }});
    publisher_->publish(cfg);
}

// The record of a packet that could not be traced.
TraceRecord Tracer::refused(std::string input, Status why) const {
    if (on_refused_) on_refused_(why);
    TraceRecord r;
    r.traced = std::move(why);
    r.input = std::move(input);
    return r;
}

Tracer::~Tracer() {
    if (!status_) return;  // nothing was set up
    frag_flush(ctx_, DropReason::frag_timeout);
    output_release_held(ctx_, DropReason::neighbor_unresolved);
    for (auto& [port, m] : take_sent()) rte_pktmbuf_free(m);
}

uint16_t Tracer::capture(void* self, uint16_t port, rte_mbuf** pkts, uint16_t n) noexcept {
    auto* t = static_cast<Tracer*>(self);
    for (uint16_t i = 0; i < n; ++i) t->sent_.emplace_back(port, pkts[i]);
    return n;
}

void Tracer::flush_fragments() { frag_flush(ctx_, DropReason::frag_timeout); }

std::vector<std::string> Tracer::release_replica_hold() {
    const unsigned was_held = ctx_.out.held();
    replica_hold_release(ctx_, *burst_);
    // Sent, or waiting for the next hop's MAC; not the ARP requests and solicitations.
    std::vector<std::string> out;
    auto add = [&](const rte_mbuf* mb) {
        PacketMeta pm{};
        if (parse_packet(rte_pktmbuf_mtod(mb, const uint8_t*), rte_pktmbuf_data_len(mb), pm) == DropReason::none &&
            (pm.l3 == L3Kind::ipv4 || pm.l3 == L3Kind::ipv6) && !pm.is_nd())
            out.push_back(leaving_tuple(pm));
    };
    for (const auto& [port, mb] : take_sent()) {
        add(mb);
        rte_pktmbuf_free(mb);
    }
    for (unsigned h = was_held; h < ctx_.out.held(); ++h) add(ctx_.out.held_at(h).m);
    return out;
}

SweepResult Tracer::reload(const Config& cfg) { return publisher_->publish(cfg).sweep; }

void Tracer::advance(uint32_t seconds) {
    ctx_.now += seconds;
    ctx_.now_ms += uint64_t{seconds} * 1000;
    frag_housekeeping(ctx_, UINT32_MAX);
    while (worker_housekeeping(ctx_, 1u << 16) > 0) {}
    publisher_->tick();
}

TraceRecord Tracer::run_spec(const std::string& spec) {
    std::istringstream is(spec);
    std::string first;
    is >> first;
    if (first == "reply") {
        // "reply N [FLAGS]": the answer to packet N's output, as its receiver would send it.
        size_t n = 0;
        if (!(is >> n) || n == 0 || n > history_.size() || !history_[n - 1].out)
            return refused(spec, Status::fail(fmt::format("\"{}\": no packet {} with an output to reply to", spec, n)));
        std::string rest;
        std::getline(is, rest);
        const TraceRecord& h = history_[n - 1];
        return run_spec((h.out_v6 ? format_tuple(h.out_key6.reversed()) : format_tuple(h.out_key.reversed())) + rest);
    }
    PacketSpec p;
    if (Status st = parse_packet_spec(spec, p); !st) return refused(spec, std::move(st));
    return run_frame(build_frame(p), spec);
}

TraceRecord Tracer::record(const PacketState& p, const PacketTrace& t, const rte_mbuf* leaving,
                           std::string input) const {
    const ServiceSnapshot& s = snapshot();
    TraceRecord r;
    r.input = std::move(input);
    r.verdict = p.verdict;
    r.reason = p.reason;
    if (t.service_slot != PacketTrace::kNone) {
        r.service = slots().service_name(t.service_slot);
        if (t.role) r.role = addr_role_name(*t.role);
    }
    if (t.endpoint) r.endpoint = format_endpoint(t.endpoint->ip, rte_be_to_cpu_16(t.endpoint->port));
    r.masquerade = t.masquerade;
    if (t.masq_rule) r.masquerade_rule = masq_rule_name(*t.masq_rule);
    r.new_flow = t.new_flow;
    r.l2 = p.l2;
    r.arp_request = t.arp_requested;
    if (p.l2 == L2Outcome::dropped) r.l2_reason = p.reason;
    if (t.next_hop) r.next_hop = format_ip(*t.next_hop);
    if (!leaving) return r;
    const auto* data = rte_pktmbuf_mtod(leaving, const uint8_t*);
    r.frame.assign(data, data + rte_pktmbuf_data_len(leaving));
    if (p.l2 == L2Outcome::sent) r.mac = format_mac(*reinterpret_cast<const rte_ether_addr*>(data));
    PacketMeta pm{};
    const DropReason pr = parse_packet(r.frame.data(), static_cast<uint32_t>(r.frame.size()), pm);
    if (pr == DropReason::none && pm.l3 == L3Kind::ipv4) {
        r.out_key = pm.key;
        r.out = leaving_tuple(pm);
        if (pm.key.proto == static_cast<uint8_t>(Proto::tcp)) r.out_flags = format_tcp_flags(pm.tcp_flags);
    } else if (pr == DropReason::none && pm.l3 == L3Kind::ipv6) {
        r.out_key6 = pm.key6;
        r.out_v6 = true;
        r.out = leaving_tuple(pm);
        if (pm.key6.proto == static_cast<uint8_t>(Proto::tcp)) r.out_flags = format_tcp_flags(pm.tcp_flags);
    }
    if (p.verdict != Verdict::local && p.out_port < s.catalogue.ports.size()) {
        r.port = s.catalogue.ports[p.out_port].name;
        if (p.out_port < ports_.size() && ports_[p.out_port].vlan) r.vlan = ports_[p.out_port].vlan;
    }
    return r;
}

TraceRecord Tracer::run_frame(const Frame& frame, std::string input) {
    return std::move(run_burst({frame}, {std::move(input)}).front());
}

// The port a burst arrives on: where the gateway's routes say its first packet's source lives;
// or, for a tagged frame, the port of that VLAN (on the routed port's device when several
// devices have it), its tag taken off (the worker's stages take it on or off alike: vlan.h), so
// that a tag no port has, which stays on, is what the parser counts as vlan_unknown.
uint16_t Tracer::arrival_port(const std::vector<Frame>& frames) {
    const uint16_t vid = frames[0].size() >= 18 && frames[0][12] == 0x81 && frames[0][13] == 0
        ? static_cast<uint16_t>((frames[0][14] << 8 | frames[0][15]) & 0xfff)
        : 0;
    const ServiceSnapshot& s = snapshot();
    PacketMeta in{};
    uint16_t in_port = 0;
    Frame first = frames[0];
    if (vid) first.erase(first.begin() + 12, first.begin() + 16);
    if (parse_packet(first.data(), static_cast<uint32_t>(first.size()), in) == DropReason::none) {
        if (in.l3 == L3Kind::ipv4) {
            if (const NextHop* h = s.route(in.key.src)) in_port = h->port;
        } else if (in.l3 == L3Kind::ipv6) {
            if (const NextHop6* h = s.route(in.key6.src)) in_port = h->port;
        }
    }

    if (vid) {
        uint16_t tagged = kNoPort;
        for (size_t p = 0; p < ports_.size(); ++p)
            if (ports_[p].vlan == vid &&
                (tagged == kNoPort || (in_port < ports_.size() && ports_[p].device == ports_[in_port].device)))
                tagged = static_cast<uint16_t>(p);
        if (tagged != kNoPort) {
            in_port = tagged;
            VlanMap map;  // the first frame's VLAN only: a frame of another keeps its tag (vlan_unknown)
            map.port[vid] = tagged;
            DropReason why;
            for (size_t i = 0; i < frames.size(); ++i)
                if (vlan_receive(map, burst_->mbufs[i], why) != kNoPort &&
                    vlan_tagged(rte_pktmbuf_mtod(burst_->mbufs[i], const uint8_t*)))
                    vlan_strip(burst_->mbufs[i]);
        }
    }
    return in_port;
}

std::vector<TraceRecord> Tracer::run_burst(const std::vector<Frame>& frames, std::vector<std::string> inputs) {
    auto refuse_all = [&](const Status& why) {
        std::vector<TraceRecord> out;
        for (size_t i = 0; i < std::max<size_t>(inputs.size(), 1); ++i)
            out.push_back(refused(i < inputs.size() ? inputs[i] : "", why));
        return out;
    };
    if (!status_) return refuse_all(status_);
    if (frames.empty() || frames.size() > kBurst || inputs.size() != frames.size())
        return refuse_all(Status::fail(fmt::format("a burst is 1 to {} frames, each with its input", kBurst)));
    Burst& b = *burst_;
    for (size_t i = 0; i < frames.size(); ++i) {
        rte_mbuf* m = rte_pktmbuf_alloc(tool_mempool());
        if (m && frames[i].size() <= rte_pktmbuf_tailroom(m)) {
            char* room = rte_pktmbuf_append(m, static_cast<uint16_t>(frames[i].size()));
            if (!frames[i].empty()) std::memcpy(room, frames[i].data(), frames[i].size());
            b.mbufs[i] = m;
            continue;
        }
        if (m) rte_pktmbuf_free(m);
        for (size_t j = 0; j < i; ++j) rte_pktmbuf_free(b.mbufs[j]);
        return refuse_all(Status::fail(m ? "frame larger than an mbuf" : "mbuf pool exhausted"));
    }
    const uint16_t in_port = arrival_port(frames);

    PacketTrace tr[kBurst];
    rte_mbuf* sent_as[kBurst];  // the burst's mbufs, to find them again on the transmit side
    std::copy(b.mbufs, b.mbufs + frames.size(), sent_as);
    b.start(static_cast<uint16_t>(frames.size()), in_port, tr);
    process_burst(b, ctx_);
    std::vector<std::pair<uint16_t, rte_mbuf*>> sent = take_sent();

    std::vector<TraceRecord> out;
    for (uint16_t i = 0; i < b.n; ++i) {
        // The packet as it leaves: in the hold queue, or on the transmit side (a freed packet's
        // mbuf may be there again as an ARP request: only a sent packet is looked for).
        const rte_mbuf* leaving = b.pkt[i].l2 == L2Outcome::held ? sent_as[i] : nullptr;
        for (const auto& [port, mb] : sent)
            if (b.pkt[i].l2 == L2Outcome::sent && mb == sent_as[i]) leaving = mb;
        TraceRecord r = record(b.pkt[i], tr[i], leaving, std::move(inputs[i]));
        if (b.pkt[i].l2 == L2Outcome::punted && in_port < host_names_.size()) r.port = host_names_[in_port];
        out.push_back(std::move(r));
    }
    // Sent or waiting for a MAC, and none of the burst's packets as it leaves: fragments released
    // from the hold, or made on output. They belong to the burst's last packet (trace runs one
    // frame a burst).
    std::vector<rte_mbuf*> others;
    for (const auto& [port, mb] : sent) others.push_back(mb);
    for (unsigned h = 0; h < ctx_.out.held(); ++h) others.push_back(ctx_.out.held_at(h).m);
    for (rte_mbuf* mb : others) {
        bool own = false;
        for (uint16_t i = 0; i < b.n && !own; ++i)
            own = (b.pkt[i].l2 == L2Outcome::sent || b.pkt[i].l2 == L2Outcome::held ||
                   b.pkt[i].l2 == L2Outcome::punted) &&
                mb == sent_as[i];
        PacketMeta pm{};
        const auto* data = rte_pktmbuf_mtod(mb, const uint8_t*);
        if (own || parse_packet(data, rte_pktmbuf_data_len(mb), pm) != DropReason::none ||
            (pm.l3 != L3Kind::ipv4 && pm.l3 != L3Kind::ipv6) || pm.is_nd())
            continue;  // ARP requests and neighbor solicitations are not traced
        out.back().also.emplace_back(data, data + rte_pktmbuf_data_len(mb));
    }
    for (const TraceRecord& r : out) history_.push_back(r);
    for (const auto& [port, mb] : sent) rte_pktmbuf_free(mb);
    // Nothing will answer an ARP request here: release what waits, so no packet outlives its trace.
    output_release_held(ctx_, DropReason::neighbor_unresolved);
    return out;
}

}  // namespace svcgate::ctl
