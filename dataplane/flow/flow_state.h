// A flow's state byte (BasicFlow::state) as a value: the conntrack state (TcpState, or DgramState
// for UDP, SCTP and ICMP) in its low bits and two flags. Every reader decodes it here, the fast
// path, replication, the state file, the sweep after a reload, a drain and the flows listing alike.
//
//   gone     set by the control thread when a reload removed the flow's endpoint: TCP packets of
//            the flow are answered with RST, datagram flows are removed by their owner
//   replied  set by the first TCP packet seen in the reply direction (conntrack's SEEN_REPLY): a
//            connection picked up from a mid-stream ACK is ESTABLISHED but, like a half-open one,
//            evictable until then
//
// Runs on: any thread; the byte itself is an atomic in the record (workers change it by CAS).
#pragma once

#include <atomic>
#include <cstdint>

#include "dataplane/flow/conntrack.h"

namespace svcgate::dp {

struct FlowState {
    static constexpr uint8_t kGone = 0x80, kReplied = 0x40, kMask = 0x3f;
    uint8_t bits = 0;

    static constexpr FlowState of(TcpState s) noexcept { return {static_cast<uint8_t>(s)}; }
    static constexpr FlowState of(DgramState s) noexcept { return {static_cast<uint8_t>(s)}; }
    static FlowState load(const std::atomic<uint8_t>& a) noexcept { return {a.load(std::memory_order_relaxed)}; }

    constexpr bool gone() const noexcept { return bits & kGone; }
    constexpr bool replied() const noexcept { return bits & kReplied; }
    constexpr TcpState tcp() const noexcept { return static_cast<TcpState>(bits & kMask); }
    constexpr uint8_t conntrack() const noexcept { return bits & kMask; }  // TcpState or DgramState
    constexpr bool dgram_replied() const noexcept { return conntrack() == static_cast<uint8_t>(DgramState::replied); }

    // TCP, in conntrack's terms: a handshake not done; past it (established up to close); past the
    // first FIN or a reset; still open (what a drain waits for).
    constexpr bool tcp_handshaking() const noexcept {
        const TcpState t = tcp();
        return t == TcpState::syn_sent || t == TcpState::syn_recv || t == TcpState::syn_sent2;
    }
    constexpr bool tcp_past_handshake() const noexcept {
        return tcp() >= TcpState::established && tcp() <= TcpState::close;
    }
    constexpr bool tcp_closing() const noexcept { return tcp() >= TcpState::fin_wait && tcp() <= TcpState::close; }
    constexpr bool tcp_open() const noexcept {
        return tcp_handshaking() || tcp() == TcpState::established || tcp() == TcpState::close_wait;
    }

    // The same flags with another TCP state; with the reply seen.
    constexpr FlowState with_tcp(TcpState s) const noexcept {
        return {static_cast<uint8_t>(static_cast<uint8_t>(s) | (bits & ~kMask))};
    }
    constexpr FlowState with_replied(bool r) const noexcept {
        return {static_cast<uint8_t>(bits | (r ? kReplied : 0))};
    }
    constexpr bool operator==(const FlowState&) const = default;
};

}  // namespace svcgate::dp
