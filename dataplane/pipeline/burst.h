// A burst's state on its way through the pipeline: one PacketState per packet (indexed by the
// packet's position in the burst) and the index lists each stage hands to the next, all in that
// one index space. Filled by process_burst()'s stages in turn; read afterwards by trace and tests.
//
// Runs on: the worker that owns it (or trace, tests). Never shared.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include <rte_ether.h>
#include <rte_mbuf.h>

#include "dataplane/base/enum_names.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/pipeline/parse.h"
#include "dataplane/lb/snapshot.h"
#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

// Packet positions in a burst, in packet order.
struct IndexList {
    uint16_t at[kBurst];
    uint16_t n = 0;

    void push(uint16_t i) noexcept { at[n++] = i; }
    const uint16_t* begin() const noexcept { return at; }
    const uint16_t* end() const noexcept { return at + n; }
};

// What the output stage did with a packet.
#define SVCGATE_L2_OUTCOMES(X)                                                                      \
    X(none, "none")                /* not reached (a drop verdict) */                               \
    X(sent, "sent")                /* queued for transmission (the queue may still refuse it) */    \
    X(held, "held")                /* waits for its next hop's MAC */                               \
    X(dropped, "dropped")          /* freed at L2 (to_gateway, arp_consumed, neighbor_hold_full) */ \
    X(frag_held, "fragment held")  /* a later fragment waiting for its first (frag_table.h) */      \
    X(punted, "to host interface") /* handed to the port's host interface (routing daemon, health) */
enum class L2Outcome : uint8_t { SVCGATE_L2_OUTCOMES(SVCGATE_ENUM_ID) };
inline constexpr std::array kL2OutcomeNames{SVCGATE_L2_OUTCOMES(SVCGATE_ENUM_NAME)};

// A fragment's part in the pipeline (frag_stage.h).
enum class FragRole : uint8_t {
    none,
    first,   // a first fragment: its result is recorded for the rest of its datagram
    follow,  // a later fragment: leaves as its first fragment did (out, out_port, next hop)
};
inline const char* l2_outcome_name(L2Outcome o) noexcept { return enum_name(o, kL2OutcomeNames); }

struct PacketState {
    PacketMeta meta;  // parse
    FlowRef ref;      // flow lookup, in the table of the packet's family
    union {           // the tuple as it leaves, for dnat and reply (forward: meta.key)
        FlowKey out;
        FlowKey6 out6;
    };
    VipEntry vip;        // classify, packets of no flow
    uint32_t local = 0;  // classify: LocalAddr flags of the destination
    NatTarget attr;      // what the packet counts under, when `attributed`
    bool attributed = false;
    FragRole frag = FragRole::none;
    Verdict verdict = Verdict::drop;
    DropReason reason = DropReason::none;
    uint16_t out_port = 0;  // egress port index
    union {                 // dnat/reply/forward: where to resolve L2 (IPv4: ARP, IPv6: ND)
        Ip4 next_hop;
        Ip6 next_hop6;
    };

    PacketState() noexcept : out{}, next_hop{} {}
    L2Outcome l2 = L2Outcome::none;
    // A routed packet's next-hop MAC when the route stage already had it, fresh (HopCache's
    // form: the 6 bytes | kResolved; 0: the output stage resolves it).
    uint64_t next_mac = 0;

    void set(Verdict v, DropReason r = DropReason::none) noexcept {
        verdict = v;
        reason = r;
    }
};

// Why a new connection's source was masqueraded, or kept (trace, docs/client-ip.md): kube-proxy's
// rules, then svcgate's own.
#define SVCGATE_MASQ_RULES(X)                                                                    \
    X(external_cluster, "external traffic, policy Cluster") /* KUBE-EXT-*: KUBE-MARK-MASQ */     \
    X(masquerade_all, "masquerade_all")                                                          \
    X(off_cluster, "ClusterIP from outside cluster_cidrs") /* the local-traffic detector */      \
    X(node_source, "from a node address, policy Local")                                          \
    X(hairpin, "hairpin: the endpoint reaches its own Service")                                  \
    X(one_arm, "one_arm_masquerade: client and endpoint share a next hop")                       \
    X(client_ip_preserve, "client_ip preserve: the client's address kept") /* not masqueraded */ \
    X(kept, "source kept (kube-proxy)")                                    /* not masqueraded */
enum class MasqRule : uint8_t { SVCGATE_MASQ_RULES(SVCGATE_ENUM_ID) };
inline constexpr std::array kMasqRuleNames{SVCGATE_MASQ_RULES(SVCGATE_ENUM_NAME)};
inline const char* masq_rule_name(MasqRule r) noexcept { return enum_name(r, kMasqRuleNames); }
constexpr bool masquerades(MasqRule r) noexcept { return r != MasqRule::client_ip_preserve && r != MasqRule::kept; }

// Optional per-packet record for trace and tests (null in the workers' loop).
struct PacketTrace {
    static constexpr uint32_t kNone = UINT32_MAX;
    uint32_t service_slot = kNone;  // the service port it was classified to or counts under
    std::optional<EndpointKey> endpoint;
    std::optional<AddrRole> role;  // set when the packet was classified as a new connection
    bool masquerade = false;
    std::optional<MasqRule> masq_rule;  // a new connection's: why masqueraded, or not
    bool new_flow = false;
    // L2, from the output stage.
    std::optional<IpAddr> next_hop;
    std::optional<rte_ether_addr> mac;  // the next hop's, when known
    bool arp_requested = false;         // the packet made the worker ask for its next hop
};

// The packet belongs to NAT flow `f`: it counts under the flow's slots, and a trace names them.
template <typename K>
inline void attribute(PacketState& p, const BasicFlow<K>& f, PacketTrace* t) noexcept {
    p.attr = f.nat();
    p.attributed = true;
    if (t) {
        t->service_slot = p.attr.service;
        t->endpoint = EndpointKey{IpAddr::of(f.key[1].src), f.key[1].sport};  // the reply tuple's source
        t->masquerade = f.flags & kFlowMasq;
    }
}

// A new connection between selection and insertion (new_flow.h).
template <typename K>
struct BasicNewFlow {
    BasicFlowInit<K> init;
    InsertHint hint;
    bool masq = false;
    uint16_t out_port = 0;  // masqueraded: the port its replies come back on (the hop's)
};
using NewFlow = BasicNewFlow<FlowKey>;
using NewFlow6 = BasicNewFlow<FlowKey6>;

struct Burst {
    uint16_t n = 0;
    uint16_t in_port = 0;  // port index the burst came from
    // The frames' 802.1Q tags are their port's, checked by the VLAN dispatch (vlan.h): the parser
    // takes a tagged frame of any VLAN ID. False (start()): only a priority tag (ID 0) is parsed.
    // Here, in the padding before mbufs, so that the layout after is as it was without it.
    bool tags_checked = false;
    rte_mbuf* mbufs[kBurst];
    PacketState pkt[kBurst];
    PacketTrace* trace = nullptr;  // kBurst records, or null

    // Handed from stage to stage. The stages from lookup to insert run once per family, over
    // that family's packets (pipeline.cpp); misses, vip_hits and fresh are the current family's.
    IndexList flows;             // parse: IPv4 packets, looked up in the IPv4 flow table
    IndexList flows6;            // parse: IPv6 packets, looked up in the IPv6 flow table
    IndexList misses;            // lookup: of those, no flow and no ICMP error
    IndexList vip_hits;          // classify: of the misses, those to a service address
    IndexList fresh;             // select: new connections to insert, in packet order
    IndexList frags;             // parse: first fragments, whose results frag_resolve records
    KeyHash miss_hash[kBurst];   // lookup: by packet, the hash of the tuple a miss looked up (the insert's key[0])
    NewFlow new_flow[kBurst];    // select: by position in `fresh` (IPv4)
    NewFlow6 new_flow6[kBurst];  // (IPv6)

    // Starts a burst of the n mbufs already in `mbufs`.
    void start(uint16_t count, uint16_t port, PacketTrace* t = nullptr) noexcept {
        n = count > kBurst ? kBurst : count;
        in_port = port;
        trace = t;
        tags_checked = false;
        flows.n = flows6.n = misses.n = vip_hits.n = fresh.n = frags.n = 0;
    }
    PacketTrace* trace_of(uint16_t i) noexcept { return trace ? &trace[i] : nullptr; }
};

}  // namespace svcgate::dp
