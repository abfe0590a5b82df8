#include "dataplane/flow/flow_record.h"

#include <cstring>

namespace svcgate::dp {

namespace {

template <typename K>
bool zero_pad(const K& k) noexcept {
    return k.pad[0] == 0 && k.pad[1] == 0 && k.pad[2] == 0;
}

template <typename K>
bool all_zero(const K& k) noexcept {
    static constexpr K zero{};
    return std::memcmp(&k, &zero, sizeof k) == 0;
}

// What the table could hold as written (see the header).
template <typename K>
bool valid(const BasicFlowInit<K>& in, Family family) noexcept {
    if (!zero_pad(in.key[0]) || !zero_pad(in.key[1])) return false;
    if (in.kind == FlowKind::affinity)
        return in.flags == kFlowOneKey && in.key[0].proto == kAffinityProto && all_zero(in.key[1]) && in.target != 0 &&
            in.state == 0;
    if (in.kind != FlowKind::nat || (in.flags & ~(kFlowMasq | kFlowPreserved)) || in.target != 0 || in.aux != 0)
        return false;
    if ((in.flags & kFlowMasq) && (in.flags & kFlowPreserved)) return false;  // one or the other
    const uint8_t proto = in.key[0].proto;
    if (in.key[1].proto != proto) return false;
    const FlowState st{in.state};
    if (st.gone()) return false;
    switch (static_cast<Proto>(proto)) {
        case Proto::tcp:
            return st.conntrack() < kTcpStates;  // replied the only flag left
        case Proto::udp:
        case Proto::sctp:
            return in.state <= static_cast<uint8_t>(DgramState::replied);
        case Proto::icmp:
            return family == Family::v4 && in.state <= static_cast<uint8_t>(DgramState::replied);
        case Proto::icmp6:
            return family == Family::v6 && in.state <= static_cast<uint8_t>(DgramState::replied);
    }
    return false;
}

template <typename K>
size_t decode_as(const uint8_t* p, size_t len, Family family, BasicFlowInit<K>& in, uint32_t& idle) noexcept {
    constexpr size_t n = flow_record_size<K>();
    if (len < n) return 0;
    if (p[1] > static_cast<uint8_t>(FlowKind::affinity)) return 0;
    in = BasicFlowInit<K>{};
    in.kind = static_cast<FlowKind>(p[1]);
    in.flags = p[2];
    in.state = p[3];
    in.svc_id = static_cast<uint32_t>(load_le(p + 4, 4));
    in.aux = static_cast<uint32_t>(load_le(p + 8, 4));
    idle = static_cast<uint32_t>(load_le(p + 12, 4));
    in.target = load_le(p + 16, 8);
    std::memcpy(&in.key[0], p + kFlowRecordHead, sizeof(K));
    std::memcpy(&in.key[1], p + kFlowRecordHead + sizeof(K), sizeof(K));
    return valid(in, family) ? n : 0;
}

}  // namespace

template <typename K>
void encode_flow(const BasicFlow<K>& f, uint32_t now, uint8_t* out) noexcept {
    const uint32_t seen = f.last_seen.load(std::memory_order_relaxed);
    // Another worker's clock may be a second ahead of ours: idle 0, not four billion.
    const uint32_t idle = static_cast<int32_t>(now - seen) > 0 ? now - seen : 0;
    out[0] = sizeof(K) == sizeof(FlowKey) ? 4 : 6;
    out[1] = static_cast<uint8_t>(f.kind);
    out[2] = f.flags;
    out[3] = f.state.load(std::memory_order_relaxed);
    store_le(out + 4, f.svc_id, 4);
    store_le(out + 8, f.kind == FlowKind::affinity ? f.aux : 0, 4);
    store_le(out + 12, idle, 4);
    store_le(out + 16, f.kind == FlowKind::affinity ? f.pinned() : 0, 8);
    std::memcpy(out + kFlowRecordHead, &f.key[0], sizeof(K));
    std::memcpy(out + kFlowRecordHead + sizeof(K), &f.key[1], sizeof(K));
}

size_t decode_flow(const uint8_t* p, size_t len, FlowRecord& out) noexcept {
    if (len < kFlowRecordHead) return 0;
    if (p[0] == 4) {
        out.family = Family::v4;
        return decode_as(p, len, Family::v4, out.v4, out.idle);
    }
    if (p[0] == 6) {
        out.family = Family::v6;
        return decode_as(p, len, Family::v6, out.v6, out.idle);
    }
    return 0;
}

template void encode_flow<FlowKey>(const BasicFlow<FlowKey>&, uint32_t, uint8_t*) noexcept;
template void encode_flow<FlowKey6>(const BasicFlow<FlowKey6>&, uint32_t, uint8_t*) noexcept;

}  // namespace svcgate::dp
