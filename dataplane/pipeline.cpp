#include "pipeline.h"

#include <rte_ip.h>
#include <rte_prefetch.h>

#include "nat.h"
#include "reject.h"
#include "scheduler.h"

namespace svcgate::dp {

namespace {

bool in_any(const std::vector<Cidr4>& cidrs, Ip4 a) noexcept {
    for (const Cidr4& c : cidrs)
        if (c.contains(a)) return true;
    return false;
}

struct Step {
    Verdict verdict;
    DropReason reason;
};

// Which endpoints a new connection may use and whether it is masqueraded: kube-proxy's nftables
// chains for one service port, from the address role the packet hit.
struct Decision {
    uint32_t set = 0;
    bool masq = false;
};

Decision decide(const ServiceSnapshot& s, const ServicePort& sp, AddrRole role, const FlowKey& k) noexcept {
    const bool detector = !s.cluster.cluster_cidrs.empty();
    const bool from_pod = detector && in_any(s.cluster.cluster_cidrs, k.src);
    if (role == AddrRole::cluster_ip) {
        // The internal chain's masquerade rule (daddr == ClusterIP): everything with
        // --masquerade-all, otherwise what the local-traffic detector calls off-cluster.
        return {sp.internal_set, s.cluster.masquerade_all || (detector && !from_pod)};
    }
    if (!sp.external_local) {
        // externalTrafficPolicy Cluster: external traffic may cross nodes, so KUBE-MARK-MASQ.
        return {sp.external_set, true};
    }
    // externalTrafficPolicy Local. Pods reaching an external address are treated as if they had
    // gone out to the load balancer and come back: the Cluster set, source kept.
    if (from_pod) return {sp.cluster_set, false};
    // The node itself (fib saddr type local): its source is a node address, so masquerade, and
    // use the Cluster set.
    if (s.local_flags(k.src) & kNodeAddr) return {sp.cluster_set, true};
    return {sp.external_set, false};
}

uint16_t next_snat_port(WorkerCtx& ctx, const ClusterSettings& c) noexcept {
    // Each worker owns the ports ≡ worker (mod workers) of the range: two workers never hand
    // out the same port, so uniqueness only has to be checked against this worker's flows
    // (the insert does that under the tuple's stripe).
    uint32_t span = uint32_t{c.snat_port_max} - c.snat_port_min + 1;
    uint32_t per = span / ctx.n_workers;
    uint32_t slot = ctx.snat_cursor++ % (per ? per : 1);
    return static_cast<uint16_t>(c.snat_port_min + slot * ctx.n_workers + ctx.worker);
}

int32_t find_in_set(const ServiceSnapshot& s, const EndpointSet& set, uint64_t aff) noexcept {
    for (uint32_t i = 0; i < set.count; ++i) {
        const Endpoint& e = s.endpoints[s.members[set.first + i]];
        if (affinity_target(e.ip, e.port) == aff) return static_cast<int32_t>(s.members[set.first + i]);
    }
    return -1;
}

// sessionAffinity ClientIP: one record per (client address, service port) in the flow table.
uint32_t select_with_affinity(WorkerCtx& ctx, const ServicePort& sp, const SelectCtx& sc) noexcept {
    const ServiceSnapshot& s = ctx.snap[0];
    FlowKey ak{.src = sc.key.src, .dst = Ip4{sp.id}, .proto = kAffinityProto};
    FlowRef ref = ctx.flows->lookup(ak);
    if (ref.hit()) {
        Flow& f = ctx.flows->flow(ref.id);
        int32_t ep = find_in_set(s, sc.set, f.target.load(std::memory_order_relaxed));
        f.last_seen.store(ctx.now, std::memory_order_relaxed);
        if (ep >= 0) {
            ++ctx.counters.affinity_hits;
            return static_cast<uint32_t>(ep);
        }
        uint32_t chosen = select_endpoint(sp.scheduler, sc);
        const Endpoint& e = s.endpoints[chosen];
        f.target.store(affinity_target(e.ip, e.port), std::memory_order_relaxed);
        return chosen;
    }
    uint32_t chosen = select_endpoint(sp.scheduler, sc);
    const Endpoint& e = s.endpoints[chosen];
    FlowInit init{.key = {ak, FlowKey{}},
                  .target = affinity_target(e.ip, e.port),
                  .svc_id = sp.id,
                  .gen = s.generation,
                  .aux = sp.affinity_timeout,
                  .kind = FlowKind::affinity,
                  .flags = kFlowOneKey};
    InsertResult r = ctx.flows->insert(ctx.worker, init, ctx.now);
    if (r.status == InsertStatus::exists) {
        // Another worker pinned this client a moment ago: follow it.
        int32_t ep = find_in_set(s, sc.set, ctx.flows->flow(r.id).target.load(std::memory_order_relaxed));
        if (ep >= 0) return static_cast<uint32_t>(ep);
    }
    return chosen;  // table full: the connection still goes through, unpinned
}

// The reply's path would not cross the gateway when client and endpoint sit behind the same
// next hop (or on the same link): masquerade so that it does. Beyond kube-proxy (a node always
// sees its own replies); needs routes, so it is off when none are configured.
bool one_armed(const ServiceSnapshot& s, Ip4 client, Ip4 ep) noexcept {
    const NextHop* a = s.route(client);
    const NextHop* b = s.route(ep);
    if (!a || !b || a->port != b->port) return false;
    return a->gateway == b->gateway;  // same router, or both directly on the same link
}

// Active-flow counts are per snapshot: a flow from an older generation no longer counts against
// the current one's endpoints.
void release_active(const ServiceSnapshot* s, const Flow& f) noexcept {
    if (s && f.kind == FlowKind::nat && f.gen == s->generation)
        s->active[target_ep(f.target.load(std::memory_order_relaxed))].fetch_sub(1, std::memory_order_relaxed);
}

// A new connection to a service port, between its two halves: selected (select_new_flow, for
// the whole burst first), then inserted (insert_new_flow, in packet order). The burst's inserts
// so find their buckets, lock stripes and records already prefetched: each one's cache misses
// overlap the others' instead of following them.
struct NewFlow {
    FlowInit init;
    InsertHint hint;
    uint32_t ep_idx;
    bool masq;
};

// Storage for a burst's new flows, left uninitialised (FlowInit zeroes itself): a burst of
// established flows pays nothing for it.
union NewFlowSlot {
    NewFlowSlot() noexcept {}
    NewFlow nf;
};

// Guards, endpoint selection and the reply tuple (with its first SNAT port). The endpoint counts
// as active from here on, so a least-connection pick later in the same burst sees it;
// insert_new_flow gives it back when no flow is created.
[[gnu::cold]] [[gnu::noinline]] Step select_new_flow(WorkerCtx& ctx, const PacketMeta& m, uint32_t svc_idx,
                                                     AddrRole role, NewFlow& nf, unsigned nth,
                                                     PacketTrace* t) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    const ServicePort& sp = s.services[svc_idx];
    if (t) t->svc = svc_idx, t->role = role;

    // filter-prerouting: loadBalancerSourceRanges guard the LB IPs (the builder adds the LB IPs
    // themselves when the node may reach its own load balancer).
    if (role == AddrRole::lb_ip && !sp.lb_source_ranges.empty() && !in_any(sp.lb_source_ranges, m.key.src))
        return {Verdict::drop, DropReason::lb_source_range};

    Decision d = decide(s, sp, role, m.key);
    const EndpointSet& set = s.sets[d.set];
    if (set.count == 0) {
        if (sp.no_endpoints == NoEndpoints::drop) return {Verdict::drop, DropReason::no_local_endpoints};
        return {Verdict::reject, DropReason::reject_no_endpoints};
    }

    // conntrack: the first packet must be able to start (or pick up) a connection.
    uint8_t state = static_cast<uint8_t>(DgramState::unreplied);
    if (static_cast<Proto>(m.key.proto) == Proto::tcp) {
        TcpState ts = tcp_transition(TcpState::none, Direction::original, tcp_flag_class(m.tcp_flags));
        if (ts == TcpState::invalid || ts == TcpState::ignore) return {Verdict::drop, DropReason::conntrack_invalid};
        state = static_cast<uint8_t>(ts);
    }
    // A source over its share of new flows this second (flow_table.new_flows_per_source), refused
    // before selection touches the scheduler's or the affinity's state.
    if (!ctx.sources.admit(m.key.src, ctx.now, ctx.flows->new_flows_per_source()))
        return {Verdict::drop, DropReason::source_new_flow_limit};

    SelectCtx sc{.snap = s, .set = set, .set_index = d.set, .key = m.key, .rng = ctx.rng};
    const uint32_t ep_idx = sp.affinity_timeout ? select_with_affinity(ctx, sp, sc) : select_endpoint(sp.scheduler, sc);
    const Endpoint& ep = s.endpoints[ep_idx];

    nf.masq = d.masq || ep.ip == m.key.src /* hairpin: KUBE-SEP-* saddr == endpoint */ ||
              (s.cluster.one_arm_masquerade && one_armed(s, m.key.src, ep.ip));
    nf.ep_idx = ep_idx;
    nf.init = FlowInit{.key = {m.key, FlowKey{}},
                       .target = nat_target(svc_idx, ep_idx),
                       .svc_id = sp.id,
                       .gen = s.generation,
                       .state = state,
                       .flags = static_cast<uint8_t>(nf.masq ? kFlowMasq : 0)};
    nf.init.key[1] = FlowKey{.src = ep.ip, .dst = m.key.src, .sport = ep.port, .dport = m.key.sport,
                             .proto = m.key.proto};
    if (nf.masq) {
        const NextHop* hop = s.route(ep.ip);
        if (!hop) return {Verdict::drop, DropReason::no_route};
        nf.init.key[1].dst = hop->source;
        nf.init.key[1].dport = rte_cpu_to_be_16(next_snat_port(ctx, s.cluster));
    }
    s.active[ep_idx].fetch_add(1, std::memory_order_relaxed);
    nf.hint = ctx.flows->prepare_insert(ctx.worker, nf.init, nth);
    return {Verdict::dnat, DropReason::none};
}

// Creates the flow select_new_flow prepared; returns the packet's out tuple.
Step insert_new_flow(WorkerCtx& ctx, NewFlow& nf, FlowKey& out, uint32_t& ep_out, PacketTrace* t) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    // One in, one out under pressure: a flood of new connections evicts its own kind.
    if (ctx.flows->under_pressure(ctx.worker) &&
        ctx.flows->early_drop(ctx.worker, 16, [&s](const Flow& f) { release_active(&s, f); }))
        ++ctx.counters.flows_early_dropped;
    InsertResult r = ctx.flows->insert(ctx.worker, nf.init, ctx.now, &nf.hint);
    // Masquerade: another port of this worker's share when the reply tuple is taken.
    for (unsigned i = 1; nf.masq && i < 64 && r.status == InsertStatus::reply_clash; ++i) {
        nf.init.key[1].dport = rte_cpu_to_be_16(next_snat_port(ctx, s.cluster));
        r = ctx.flows->insert(ctx.worker, nf.init, ctx.now);
    }
    if (r.status != InsertStatus::inserted) s.active[nf.ep_idx].fetch_sub(1, std::memory_order_relaxed);
    switch (r.status) {
    case InsertStatus::inserted:
        ++ctx.counters.flows_created;
        break;
    case InsertStatus::exists:
        // Two packets (of one burst, or on two workers) raced on this flow: the winner's record.
        ++ctx.counters.flows_joined;
        break;
    case InsertStatus::reply_clash:
        return {Verdict::drop, nf.masq ? DropReason::snat_ports_exhausted : DropReason::flow_reply_clash};
    case InsertStatus::full:
        return {Verdict::drop, DropReason::flow_table_full};
    }
    const Flow& f = ctx.flows->flow(r.id);
    out = f.key[1].reversed();
    ep_out = f.gen == s.generation ? target_ep(f.target.load(std::memory_order_relaxed)) : PacketTrace::kNone;
    if (t) {
        t->endpoint = ep_out;
        t->masquerade = f.flags & kFlowMasq;
        t->new_flow = r.status == InsertStatus::inserted;
    }
    return {Verdict::dnat, DropReason::none};
}

// A packet of no flow (and no ICMP error): what KUBE-SERVICES and the rest make of it, from its
// VIP-table entry `v` and its destination's local flags. A new connection comes back as dnat with
// `nf` selected, still to be inserted.
struct Miss {
    Step st;
    uint32_t svc;
};

Miss classify_miss(WorkerCtx& ctx, const PacketMeta& m, const uint8_t* frame, uint32_t v, uint32_t local,
                   NewFlow& nf, unsigned nth, PacketTrace* t) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    if (v != StaticHash::kNone && frame[m.l3_off + 8] <= 1) {
        // RFC 1812 5.3.1 before conntrack: a packet that cannot be forwarded starts no flow.
        return {{Verdict::drop, DropReason::ip_ttl_exceeded}, PacketTrace::kNone};
    }
    if (v != StaticHash::kNone) {
        const Step st = select_new_flow(ctx, m, v >> 2, static_cast<AddrRole>(v & 3), nf, nth, t);
        return {st, st.verdict == Verdict::dnat ? v >> 2 : PacketTrace::kNone};
    }
    if ((local & kClusterIp) && s.cluster.reject_unknown_port)
        return {{Verdict::reject, DropReason::reject_unknown_port}, PacketTrace::kNone};
    if (local & (kPortAddr | kNodeAddr)) return {{Verdict::local, DropReason::none}, PacketTrace::kNone};
    if (in_any(s.cluster.service_cidrs, m.key.dst))
        return {{Verdict::drop, DropReason::service_cidr_unallocated}, PacketTrace::kNone};
    return {{Verdict::forward, DropReason::none}, PacketTrace::kNone};
}

// conntrack for a packet of a known flow. Returns false for INVALID.
bool track(Flow& f, Direction dir, const PacketMeta& m, uint32_t now) noexcept {
    if (f.last_seen.load(std::memory_order_relaxed) != now) f.last_seen.store(now, std::memory_order_relaxed);
    if (static_cast<Proto>(m.key.proto) != Proto::tcp) {
        if (dir == Direction::reply && f.state.load(std::memory_order_relaxed) == 0)
            f.state.store(static_cast<uint8_t>(DgramState::replied), std::memory_order_relaxed);
        return true;
    }
    TcpFlagClass c = tcp_flag_class(m.tcp_flags);
    const uint8_t seen = dir == Direction::reply ? kStateReplied : 0;
    uint8_t cur = f.state.load(std::memory_order_relaxed);
    for (;;) {
        if (cur & kStateGone) return true;  // marked by a reload meanwhile: the next packet sees it
        TcpState nx = tcp_transition(static_cast<TcpState>(cur & kStateMask), dir, c);
        if (nx == TcpState::invalid) return false;
        const uint8_t want = (nx == TcpState::ignore ? cur : static_cast<uint8_t>(nx) | (cur & ~kStateMask)) | seen;
        if (want == cur) return true;
        // Both directions may update the state from different workers: CAS, retry on change.
        if (f.state.compare_exchange_weak(cur, want, std::memory_order_relaxed)) return true;
    }
}

}  // namespace

void process_burst(rte_mbuf* const* pkts, uint16_t n, uint16_t in_port, WorkerCtx& ctx,
                   PacketResult* res, PacketTrace* trace) noexcept {
    const ServiceSnapshot& s = *ctx.snap;
    PacketMeta meta[kBurst];
    const FlowKey* keys[kBurst] = {};
    uint16_t idx[kBurst];
    FlowRef refs[kBurst];
    uint16_t nk = 0;
    if (n > kBurst) n = kBurst;

    // Phase 1: parse the burst; collect the IPv4 tuples for one bulk flow lookup.
    for (uint16_t i = 0; i < n; ++i) {
        if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
        rte_mbuf* mb = pkts[i];
        ctx.counters.rx_packets++;
        ctx.counters.rx_bytes += mb->pkt_len;
        ParseOptions po{.ip_csum_verified = (mb->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) ==
                                            RTE_MBUF_F_RX_IP_CKSUM_GOOD};
        // A frame larger than one mbuf arrives chained; headers split over segments are not
        // parsed (the data room is sized for an MTU: a jumbo frame here is a misconfiguration).
        DropReason r = mb->nb_segs > 1 ? DropReason::mbuf_chained
                                       : parse_packet(rte_pktmbuf_mtod(mb, const uint8_t*), rte_pktmbuf_data_len(mb), meta[i], po);
        if ((mb->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD && r == DropReason::none)
            r = DropReason::ip_bad_checksum;
        res[i] = PacketResult{.verdict = r == DropReason::none ? Verdict::forward : Verdict::drop, .reason = r, .out_port = 0, .next_hop = Ip4{}};
        if (trace) trace[i] = PacketTrace{};
        if (r == DropReason::none && meta[i].l3 == L3Kind::ipv4) {
            // An ICMP error is looked up as a packet of the flow it is about (RELATED).
            keys[nk] = meta[i].inner_off ? &meta[i].err_key : &meta[i].key;
            idx[nk++] = i;
        } else if (r == DropReason::none) {
            res[i].verdict = Verdict::local;  // ARP: the daemon answers and resolves
        }
    }
    const unsigned misses = ctx.flows->lookup_bulk(keys, nk, refs);

    SvcCounters* const svc_counters = &s.svc_counters[size_t{ctx.worker} * s.services.size()];
    SvcCounters* const ep_counters = &s.ep_counters[size_t{ctx.worker} * s.endpoints.size()];
    // The counters each packet of a flow is added to: with many Services (over 16k counters,
    // 256 KiB per worker) they are far from the cache, so the burst's are prefetched at once (the
    // records are there: the lookup has just compared their keys). With few, pure overhead.
    if (misses < nk && s.services.size() + s.endpoints.size() > 16384) {
        for (uint16_t j = 0; j < nk; ++j) {
            if (!refs[j].hit()) continue;
            const Flow& f = ctx.flows->flow(refs[j].id);
            if (f.kind != FlowKind::nat || f.gen != s.generation) continue;  // not this snapshot's indices
            const uint64_t tg = f.target.load(std::memory_order_relaxed);
            rte_prefetch0(&svc_counters[target_svc(tg)]);
            rte_prefetch0(&ep_counters[target_ep(tg)]);
        }
    }

    // Phase 2: what the packets of no flow are; new connections selected, their inserts
    // prefetched. With many Services the VIP table, the service ports, their endpoint sets and
    // counters are far larger than the cache, and each one's address comes from the one before:
    // one pass per link of that chain, each prefetching the next link for the whole burst, so the
    // misses of a pass overlap instead of following each other.
    Miss miss[kBurst];
    NewFlowSlot nfs[kBurst];  // in packet order: phase 3 takes them in the same order
    uint32_t vip[kBurst];
    uint32_t local[kBurst];
    uint16_t mj[kBurst], nm = 0;  // the misses (as j)
    uint16_t vj[kBurst], nv = 0;  // those that hit a VIP
    unsigned n_new = 0;
    for (uint16_t j = 0; misses && j < nk; ++j) {  // (no misses: the passes below have nothing)
        if (refs[j].hit() || meta[idx[j]].inner_off) continue;
        mj[nm++] = j;
        const FlowKey& k = meta[idx[j]].key;
        s.vips.prefetch(ServiceSnapshot::vip_key(k.dst, k.dport, k.proto));
        s.local_addrs.prefetch(k.dst.be);
    }
    for (uint16_t x = 0; x < nm; ++x) {
        const uint16_t j = mj[x];
        const FlowKey& k = meta[idx[j]].key;
        // KUBE-SERVICES: (VIP, port, proto), then KUBE-NODEPORTS on the NodePort addresses.
        vip[j] = s.vips.find(ServiceSnapshot::vip_key(k.dst, k.dport, k.proto));
        local[j] = s.local_flags(k.dst);
        if (vip[j] == StaticHash::kNone && (local[j] & kNodePortAddr))
            vip[j] = s.vips.find(ServiceSnapshot::vip_key(Ip4{}, k.dport, k.proto));
        if (vip[j] == StaticHash::kNone) continue;
        vj[nv++] = j;
        rte_prefetch0(&s.services[vip[j] >> 2]);
    }
    for (uint16_t x = 0; x < nv; ++x) {
        const ServicePort& sp = s.services[vip[vj[x]] >> 2];
        rte_prefetch0(&s.sets[sp.internal_set]);
        rte_prefetch0(&s.sets[sp.external_set]);
        rte_prefetch0(&svc_counters[vip[vj[x]] >> 2]);
        if (sp.ep_count == 0) continue;  // a Service without endpoints: nothing more to read
        rte_prefetch0(&s.endpoints[sp.ep_first]);
        rte_prefetch0(&s.endpoints[sp.ep_first + sp.ep_count - 1]);  // a few endpoints: 1-2 lines
        rte_prefetch0(&s.active[sp.ep_first]);
        rte_prefetch0(&ep_counters[sp.ep_first]);
    }
    for (uint16_t x = 0; x < nv; ++x) {
        const ServicePort& sp = s.services[vip[vj[x]] >> 2];
        for (const uint32_t set : {sp.internal_set, sp.external_set})
            if (s.sets[set].count) rte_prefetch0(&s.members[s.sets[set].first]);
    }
    for (uint16_t x = 0; x < nm; ++x) {
        const uint16_t j = mj[x], i = idx[j];
        miss[j] = classify_miss(ctx, meta[i], rte_pktmbuf_mtod(pkts[i], const uint8_t*), vip[j], local[j],
                                nfs[n_new].nf, n_new, trace ? &trace[i] : nullptr);
        n_new += miss[j].st.verdict == Verdict::dnat;
    }

    // Phase 3: one exit per packet.
    unsigned next_new = 0;
    for (uint16_t j = 0; j < nk; ++j) {
        const uint16_t i = idx[j];
        rte_mbuf* mb = pkts[i];
        uint8_t* frame = rte_pktmbuf_mtod(mb, uint8_t*);
        const PacketMeta& m = meta[i];
        PacketResult& r = res[i];
        PacketTrace* t = trace ? &trace[i] : nullptr;
        FlowKey out = m.key;
        Step st{Verdict::forward, DropReason::none};
        uint32_t svc_idx = PacketTrace::kNone;
        uint32_t ep_idx = PacketTrace::kNone;

        if (refs[j].hit()) {
            // Established: translate by the flow's other tuple (conntrack's NAT reversal).
            Flow& f = ctx.flows->flow(refs[j].id);
            const unsigned other = refs[j].dir == Direction::original ? 1 : 0;
            if (f.state.load(std::memory_order_relaxed) & kStateGone) [[unlikely]] {
                // A reload removed the endpoint: TCP gets an RST (each side, on its next
                // packet: the RST takes its sequence number from that packet); datagrams are
                // dropped until the owner removes the entry, and then select again.
                const bool tcp = static_cast<Proto>(m.key.proto) == Proto::tcp;
                st = tcp && !(m.tcp_flags & kRst) ? Step{Verdict::reject, DropReason::reject_endpoint_gone}
                                                  : Step{Verdict::drop, DropReason::endpoint_gone};
            } else if (m.inner_off) {
                // RELATED: translated like the flow's packets in this direction, state untouched.
                out = f.key[other].reversed();
                st.verdict = refs[j].dir == Direction::original ? Verdict::dnat : Verdict::reply;
            } else if (!track(f, refs[j].dir, m, ctx.now)) {
                st = {Verdict::drop, DropReason::conntrack_invalid};
            } else {
                out = f.key[other].reversed();
                st.verdict = refs[j].dir == Direction::original ? Verdict::dnat : Verdict::reply;
            }
            if (f.kind == FlowKind::nat && f.gen == s.generation) {
                const uint64_t tg = f.target.load(std::memory_order_relaxed);
                svc_idx = target_svc(tg);
                ep_idx = target_ep(tg);
            }
            if (t) {
                t->svc = svc_idx;
                t->endpoint = ep_idx;
                t->masquerade = f.flags & kFlowMasq;
            }
        } else if (m.inner_off) {
            // An error about no flow of ours: routed as it is, never a new connection.
            const uint32_t local = s.local_flags(m.key.dst);
            if (local & (kPortAddr | kNodeAddr)) st = {Verdict::local, DropReason::none};
        } else {
            st = miss[j].st;
            svc_idx = miss[j].svc;
            if (st.verdict == Verdict::dnat) {
                st = insert_new_flow(ctx, nfs[next_new++].nf, out, ep_idx, t);
                if (st.verdict != Verdict::dnat) svc_idx = ep_idx = PacketTrace::kNone;
            }
        }

        if (st.verdict == Verdict::dnat || st.verdict == Verdict::reply || st.verdict == Verdict::forward) {
            const NextHop* hop = s.route(out.dst);
            if (!hop) {
                st = {Verdict::drop, DropReason::no_route};
            } else if (!decrement_ttl(frame, m)) {
                st = {Verdict::drop, DropReason::ip_ttl_exceeded};
            } else {
                if (m.inner_off && refs[j].hit()) {
                    // nf_nat_icmp_reply_translation: the outer source follows the flow's source
                    // rewrite (the VIP towards the client; the masquerade address towards a pod).
                    const bool outer_src = refs[j].dir == Direction::reply ||
                                           (ctx.flows->flow(refs[j].id).flags & kFlowMasq);
                    rewrite_icmp_error(frame, m, out, outer_src);
                } else if (!m.inner_off && !(out == m.key)) {
                    rewrite_tuple(frame, m, out);
                }
                r.out_port = hop->port;
                r.next_hop = hop->gateway.is_zero() ? out.dst : hop->gateway;
            }
        } else if (st.verdict == Verdict::reject) {
            if (build_reject(mb, m)) {
                r.out_port = in_port;
            } else {
                st = {Verdict::drop, DropReason::reject_failed};
            }
        }
        r.verdict = st.verdict;
        r.reason = st.reason;
        if (svc_idx != PacketTrace::kNone && st.verdict != Verdict::drop) {
            svc_counters[svc_idx].packets++;
            svc_counters[svc_idx].bytes += mb->pkt_len;
            if (ep_idx != PacketTrace::kNone) {
                ep_counters[ep_idx].packets++;
                ep_counters[ep_idx].bytes += mb->pkt_len;
            }
        }
    }

    // One place counts every verdict and drop reason.
    for (uint16_t i = 0; i < n; ++i) {
        ctx.counters.verdicts[static_cast<unsigned>(res[i].verdict)]++;
        if (res[i].reason != DropReason::none) ctx.counters.drops[static_cast<unsigned>(res[i].reason)]++;
    }
}

unsigned worker_housekeeping(WorkerCtx& ctx, unsigned budget) noexcept {
    const ServiceSnapshot* s = ctx.snap;
    unsigned n = ctx.flows->expire_step(ctx.worker, ctx.now, budget, [s](const Flow& f) { release_active(s, f); });
    ctx.counters.flows_expired += n;
    return n;
}

}  // namespace svcgate::dp
