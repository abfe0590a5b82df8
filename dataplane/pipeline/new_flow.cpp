#include "dataplane/pipeline/new_flow.h"

#include <rte_prefetch.h>

#include "dataplane/pipeline/family.h"
#include "dataplane/lb/rss_steer.h"
#include "dataplane/lb/scheduler.h"

namespace svcgate::dp {

namespace {

// Which endpoints a new connection may use and whether it is masqueraded: kube-proxy's nftables
// chains for one service port, from the address role the packet hit, and client_ip preserve.
// `span`: the set's members as the service port holds them (null for the Cluster set of a Local
// policy's short-circuits, read from the set).
struct Decision {
    uint32_t set = 0;
    const SetSpan* span = nullptr;
    MasqRule rule = MasqRule::kept;
    bool masq() const noexcept { return masquerades(rule); }
};

template <typename F>
Decision decide(const ServiceSnapshot& s, const ServicePort& sp, AddrRole role, const typename F::Key& k) noexcept {
    const CidrRange cluster_cidrs = F::cluster_cidrs(s.cluster);
    const bool detector = !cluster_cidrs.empty();
    const bool from_pod = detector && s.in(cluster_cidrs, k.src);
    if (role == AddrRole::cluster_ip) {
        // The internal chain's masquerade rule (daddr == ClusterIP): everything with
        // --masquerade-all, otherwise what the local-traffic detector calls off-cluster.
        if (s.cluster.masquerade_all) return {sp.internal_set, &sp.internal_span, MasqRule::masquerade_all};
        if (detector && !from_pod) return {sp.internal_set, &sp.internal_span, MasqRule::off_cluster};
        return {sp.internal_set, &sp.internal_span, MasqRule::kept};
    }
    if (!sp.external_local) {
        // externalTrafficPolicy Cluster: external traffic may cross nodes, so KUBE-MARK-MASQ;
        // with client_ip preserve (masquerade_all off) the gateway is the pods' way back and
        // DNATs only.
        return {sp.external_set, &sp.external_span,
                sp.preserve_client ? MasqRule::client_ip_preserve : MasqRule::external_cluster};
    }
    // externalTrafficPolicy Local. Pods reaching an external address are treated as if they had
    // gone out to the load balancer and come back: the Cluster set, source kept.
    if (from_pod) return {sp.cluster_set, nullptr, MasqRule::kept};
    // The node itself (fib saddr type local): its source is a node address, so masquerade, and
    // use the Cluster set.
    if (s.local_flags(k.src) & kNodeAddr) return {sp.cluster_set, nullptr, MasqRule::node_source};
    return {sp.external_set, &sp.external_span, MasqRule::kept};
}

// The set a decision names. Its members come from the service port's line when it holds them
// and the scheduler needs no Maglev table: the set's own line is then never read.
inline EndpointSet set_of(const ServiceSnapshot& s, const ServicePort& sp, const Decision& d) noexcept {
    if (d.span && !scheduler_uses_ring(sp.scheduler))
        return EndpointSet{.first = d.span->first, .count = d.span->count};
    return s.sets[d.set];
}

uint16_t next_snat_port(WorkerCtx& ctx, const ClusterSettings& c) noexcept {
    // Each worker owns the ports ≡ worker (mod workers) of the range: two workers never hand
    // out the same port, so uniqueness only has to be checked against this worker's flows
    // (the insert does that under its first bucket's lock).
    uint32_t span = uint32_t{c.snat_port_max} - c.snat_port_min + 1;
    uint32_t per = span / ctx.n_workers;
    uint32_t slot = ctx.snat_cursor++ % (per ? per : 1);
    return static_cast<uint16_t>(c.snat_port_min + slot * ctx.n_workers + ctx.worker);
}

// A masquerade port for the reply tuple `r` (its destination port still to choose), whose
// replies come back on port `out`. Where that port's RSS is known (rss_steer.h), a port of the
// range whose reply hash lands on this worker's queue: both directions then stay on this core.
// Ports steered to one queue are that worker's alone for this tuple, so two workers never pick
// the same one; what another worker's share holds is checked by the insert (reply_clash). A port
// lands on this queue with chance 1/workers: 8 × workers tries miss with chance e^-8.
template <typename F>
uint16_t masq_port(WorkerCtx& ctx, const ClusterSettings& c, const typename F::Key& r, uint16_t out) noexcept {
    const RssSteer* steer = out < ctx.n_rss ? ctx.rss[out] : nullptr;
    if (steer && steer->hashes(F::family, r.proto)) {
        const uint16_t p = steer->find_port(F::family, steer->base(r.src, r.dst, r.sport), ctx.worker, c.snat_port_min,
                                            c.snat_port_max, ctx.steer_cursor, std::min(8u * ctx.n_workers, 512u));
        if (p) {
            ++ctx.counters.snat_steered;
            return p;
        }
        ++ctx.counters.snat_unsteered;
    }
    return next_snat_port(ctx, c);
}

int32_t find_in_set(const ServiceSnapshot& s, const EndpointSet& set, uint64_t pinned) noexcept {
    for (uint32_t i = 0; i < set.count; ++i) {
        const uint32_t e = s.members[set.first + i];
        if (s.endpoints[e].key().word() == pinned) return static_cast<int32_t>(e);
    }
    return -1;
}

// sessionAffinity ClientIP: one record per (client address, service port) in the flow table,
// pinning the endpoint by address (so the pin survives reloads).
template <typename F>
uint32_t select_with_affinity(WorkerCtx& ctx, const ServicePort& sp, const SelectCtx& sc,
                              const typename F::Addr& client) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    auto* table = F::table(ctx);
    const typename F::Key ak = F::affinity_key(client, sp.id, kAffinityProto);
    FlowRef ref = table->lookup(ak);
    if (ref.hit()) {
        auto& f = table->flow(ref.id);
        int32_t ep = find_in_set(s, sc.set, f.pinned());
        f.last_seen.store(ctx.now, std::memory_order_relaxed);
        if (ep >= 0) {
            ++ctx.counters.affinity_hits;
            return static_cast<uint32_t>(ep);
        }
        const uint32_t chosen = select_endpoint(sp.scheduler, sc);
        f.pin(s.endpoints[chosen].key());
        return chosen;
    }
    const uint32_t chosen = select_endpoint(sp.scheduler, sc);
    typename F::Init init{.key = {ak, typename F::Key{}},
                          .target = s.endpoints[chosen].key().word(),
                          .svc_id = sp.id,
                          .gen = s.generation,
                          .aux = sp.affinity_timeout,
                          .kind = FlowKind::affinity,
                          .flags = kFlowOneKey};
    InsertResult r = table->insert(ctx.worker, init, ctx.now);
    if (r.status == InsertStatus::exists) {
        // Another worker pinned this client a moment ago: follow it.
        int32_t ep = find_in_set(s, sc.set, table->flow(r.id).pinned());
        if (ep >= 0) return static_cast<uint32_t>(ep);
    }
    return chosen;  // table full: the connection still goes through, unpinned
}

// The reply's path would not cross the gateway when client and endpoint sit behind the same
// next hop (or on the same link): masquerade so that it does. Beyond kube-proxy (a node always
// sees its own replies); needs routes, so it is off when none are configured.
template <typename A>
bool one_armed(const ServiceSnapshot& s, const A& client, const A& ep) noexcept {
    const auto* a = s.route(client);
    const auto* b = s.route(ep);
    if (!a || !b || a->port != b->port) return false;
    return a->gateway == b->gateway;  // same router, or both directly on the same link
}

// One packet to a VIP: its refusal, or its connection selected into `nf`.
template <typename F>
[[gnu::cold]] [[gnu::noinline]] void select_one(WorkerCtx& ctx, PacketState& p, BasicNewFlow<typename F::Key>& nf,
                                                PacketTrace* t) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    const uint32_t svc = p.vip.service();
    const AddrRole role = p.vip.role();
    const ServicePort& sp = s.services[svc];
    const auto& k = F::key(p.meta);
    if (t) t->service_slot = sp.slot, t->role = role;

    // filter-prerouting: loadBalancerSourceRanges guard the LB IPs (the builder adds the LB IPs
    // themselves when the node may reach its own load balancer).
    if (role == AddrRole::lb_ip && !sp.lb_source_ranges.empty() && !s.in(sp.lb_source_ranges, k.src))
        return p.set(Verdict::drop, DropReason::lb_source_range);

    const Decision d = decide<F>(s, sp, role, k);
    const EndpointSet set = set_of(s, sp, d);
    if (set.count == 0) [[unlikely]] {
        if (sp.no_endpoints == NoEndpoints::drop) return p.set(Verdict::drop, DropReason::no_local_endpoints);
        return p.set(Verdict::reject, DropReason::reject_no_endpoints);
    }

    // conntrack: the first packet must be able to start (or pick up) a connection.
    uint8_t state = static_cast<uint8_t>(DgramState::unreplied);
    if (static_cast<Proto>(k.proto) == Proto::tcp) {
        TcpState ts = tcp_transition(TcpState::none, Direction::original, tcp_flag_class(p.meta.tcp_flags));
        if (ts == TcpState::invalid || ts == TcpState::ignore)
            return p.set(Verdict::drop, DropReason::conntrack_invalid);
        state = static_cast<uint8_t>(ts);
        // Picked up mid-stream (no SYN) and masqueraded: the endpoint knows this connection by
        // the masquerade address and port it began with (a peer's, when ECMP moved it here), and
        // would answer any other with RST; preserved, a scheduler's pick here may be another
        // endpoint than the peer's. Replicating, its replica is on its way: the packet is
        // dropped and the client's retransmission finds the replica. Without replication,
        // conntrack's pickup, as a node has.
        if (ts == TcpState::established && (d.masq() || d.rule == MasqRule::client_ip_preserve) && ctx.sync)
            [[unlikely]]
            return p.set(Verdict::drop, DropReason::pickup_awaits_replica);
    }
    // A source over its share of new flows this second (flow_table.new_flows_per_source), refused
    // before selection touches the scheduler's or the affinity's state.
    if (!ctx.sources.admit(k.src, ctx.now, ctx.flows->new_flows_per_source()))
        return p.set(Verdict::drop, DropReason::source_new_flow_limit);

    SelectCtx sc{.snap = s, .stats = *ctx.stats, .set = set, .set_index = d.set, .rng = ctx.rng};
    if constexpr (F::family == Family::v4)
        sc.key = &k;
    else
        sc.key6 = &k;
    const uint32_t e =
        sp.affinity_timeout ? select_with_affinity<F>(ctx, sp, sc, k.src) : select_endpoint(sp.scheduler, sc);
    const Endpoint& ep = s.endpoints[e];
    const typename F::Addr ep_ip = F::addr(ep.ip);

    // Beyond the chain's rule: hairpin (KUBE-SEP-* saddr == endpoint) and one-armed paths.
    MasqRule rule = d.rule;
    if (!masquerades(rule) && ep_ip == k.src)
        rule = MasqRule::hairpin;
    else if (!masquerades(rule) && s.cluster.one_arm_masquerade && one_armed(s, k.src, ep_ip))
        rule = MasqRule::one_arm;
    nf.masq = masquerades(rule);
    if (t) t->masq_rule = rule;
    const uint8_t flags = nf.masq ? kFlowMasq : rule == MasqRule::client_ip_preserve ? kFlowPreserved : 0;
    nf.init = typename F::Init{.key = {k, typename F::Key{}},
                               .target = NatTarget{.service = sp.slot, .endpoint = ep.slot}.encode(),
                               .svc_id = sp.id,
                               .gen = s.generation,
                               .state = state,
                               .flags = flags};
    nf.init.key[1] = typename F::Key{.src = ep_ip, .dst = k.src, .sport = ep.port, .dport = k.sport, .proto = k.proto};
    if (nf.masq) {
        const auto* hop = s.route(ep_ip);
        if (!hop) return p.set(Verdict::drop, DropReason::no_route);
        nf.init.key[1].dst = hop->source;
        nf.out_port = hop->port;
        nf.init.key[1].dport = to_be16(masq_port<F>(ctx, s.cluster, nf.init.key[1], hop->port));
    }
    ctx.stats->active.add(ctx.worker, ep.slot, 1);
    p.set(Verdict::dnat);
}

// Creates the flow select_one() prepared; sets the packet's verdict, out tuple and attribution.
template <typename F>
void insert_one(WorkerCtx& ctx, PacketState& p, BasicNewFlow<typename F::Key>& nf, PacketTrace* t) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    auto* table = F::table(ctx);
    const uint32_t picked = NatTarget::decode(nf.init.target).endpoint;
    // One in, one out under pressure: a flood of new connections evicts its own kind.
    if (table->under_pressure(ctx.worker) && table->early_drop(ctx.worker, 16, [&ctx](const auto& f) {
            nat_event(ctx, f, NatEventType::end, FlowEnd::lack_of_resources);
            release_flow(*ctx.stats, ctx.worker, f);
        }))
        ++ctx.counters.flows_early_dropped;
    InsertResult r = table->insert(ctx.worker, nf.init, ctx.now, &nf.hint);
    // The reply tuple is taken: another port of this worker's share of the SNAT range. With
    // masquerade that is the masquerade port; without, the client's source port is remapped and
    // its address kept, as nf_nat does for any clash (get_unique_tuple, the null binding at
    // POSTROUTING). A client reaching one endpoint through two Services from one source port
    // (Linux reuses a port for another destination) would otherwise be refused.
    unsigned tries = 1;
    for (; tries < 64 && r.status == InsertStatus::reply_clash; ++tries) {
        nf.init.key[1].dport = to_be16(nf.masq ? masq_port<F>(ctx, s.cluster, nf.init.key[1], nf.out_port)
                                               : next_snat_port(ctx, s.cluster));
        r = table->insert(ctx.worker, nf.init, ctx.now);
    }
    if (!nf.masq && tries > 1 && r.status == InsertStatus::inserted) ++ctx.counters.flows_port_remapped;
    if (r.status != InsertStatus::inserted) ctx.stats->active.add(ctx.worker, picked, -1);
    switch (r.status) {
        case InsertStatus::inserted:
            ++ctx.counters.flows_created;
            break;
        case InsertStatus::exists:
            // Two packets (of one burst, or on two workers) raced on this flow: the winner's record.
            ++ctx.counters.flows_joined;
            break;
        case InsertStatus::reply_clash:
            return p.set(Verdict::drop, nf.masq ? DropReason::snat_ports_exhausted : DropReason::flow_reply_clash);
        case InsertStatus::full:
            return p.set(Verdict::drop, DropReason::flow_table_full);
    }
    const auto& f = table->flow(r.id);
    if (r.status == InsertStatus::inserted) nat_event(ctx, f, NatEventType::create, FlowEnd::none);
    if (FlowCounters* c = table->counters(r.id)) c->add(Direction::original, p.meta.ip_len);
    F::out(p) = f.key[1].reversed();
    attribute(p, f, t);
    if (t) t->new_flow = r.status == InsertStatus::inserted;
}

}  // namespace

template <typename F>
void select_new_flows(Burst& b, WorkerCtx& ctx) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    // With many Services the service ports, their endpoint sets' members, the endpoints and their
    // counters are far larger than the cache. classify_burst prefetched the service ports; each
    // holds what leads to the rest (its sets' members, its first endpoint's counter slot), so one
    // pass prefetches every line the selections will read for the whole burst, and their misses
    // overlap instead of each table's waiting for the one before.
    for (const uint16_t i : b.vip_hits) {
        const ServicePort& sp = s.services[b.pkt[i].vip.service()];
        rte_prefetch0(&ctx.stats->services.row(ctx.worker)[sp.slot]);
        if (sp.ep_count == 0) continue;  // a Service without endpoints: nothing more to read
        // The set decide() picks by the role (a Local policy's short-circuits aside).
        const SetSpan& span = b.pkt[i].vip.role() == AddrRole::cluster_ip ? sp.internal_span : sp.external_span;
        if (span.count) rte_prefetch0(&s.members[span.first]);
        rte_prefetch0(&s.endpoints[sp.ep_first]);
        rte_prefetch0(&s.endpoints[sp.ep_first + sp.ep_count - 1]);  // a few endpoints: 1-2 lines
        rte_prefetch0(ctx.stats->active.line_of(ctx.worker, sp.ep_slot_first));
        rte_prefetch0(&ctx.stats->endpoints.row(ctx.worker)[sp.ep_slot_first]);
    }
    for (const uint16_t i : b.vip_hits) {
        PacketState& p = b.pkt[i];
        select_one<F>(ctx, p, F::new_flows(b)[b.fresh.n], b.trace_of(i));
        if (p.verdict == Verdict::dnat) b.fresh.push(i);
    }
    // The reply tuples' hashes and the lines their inserts touch, in a pass of their own once
    // every selection is made. Issued during selection, each prefetch waited for a free miss
    // buffer behind the selection's own misses (the service ports' lines with many Services): a
    // prefetch instruction held 58% of select_one's samples at 10 Services, 74% at 100,000.
    auto* table = F::table(ctx);
    for (uint16_t x = 0; x < b.fresh.n; ++x) {
        auto& nf = F::new_flows(b)[x];
        table->prepare_insert(ctx.worker, nf.init, x, nf.hint, &b.miss_hash[b.fresh.at[x]]);
    }
}

template <typename F>
void insert_new_flows(Burst& b, WorkerCtx& ctx) noexcept {
    for (uint16_t x = 0; x < b.fresh.n; ++x) {
        const uint16_t i = b.fresh.at[x];
        insert_one<F>(ctx, b.pkt[i], F::new_flows(b)[x], b.trace_of(i));
    }
}

template void select_new_flows<V4>(Burst&, WorkerCtx&) noexcept;
template void select_new_flows<V6>(Burst&, WorkerCtx&) noexcept;
template void insert_new_flows<V4>(Burst&, WorkerCtx&) noexcept;
template void insert_new_flows<V6>(Burst&, WorkerCtx&) noexcept;

}  // namespace svcgate::dp
