// dataplane/flow/flow_state.h: the state byte's one decoding: flags kept across TCP transitions,
// the TCP predicates as conntrack names the states, datagram states apart from the flags.
#include <gtest/gtest.h>

#include "dataplane/flow/flow_state.h"

using namespace svcgate::dp;

TEST(FlowState, FlagsSurviveTransitions) {
    const FlowState s = FlowState::of(TcpState::syn_sent).with_replied(true);
    EXPECT_TRUE(s.replied());
    EXPECT_FALSE(s.gone());
    const FlowState t = s.with_tcp(TcpState::established);
    EXPECT_EQ(t.tcp(), TcpState::established);
    EXPECT_TRUE(t.replied()) << "a transition keeps the reply seen";
    const FlowState g{static_cast<uint8_t>(t.bits | FlowState::kGone)};
    EXPECT_TRUE(g.gone());
    EXPECT_EQ(g.with_tcp(TcpState::fin_wait).tcp(), TcpState::fin_wait);
    EXPECT_TRUE(g.with_tcp(TcpState::fin_wait).gone()) << "a transition keeps the reload's mark";
    EXPECT_EQ(s.with_replied(false), s) << "replied is never cleared by a packet";
}

TEST(FlowState, TcpPredicatesFollowConntrack) {
    for (unsigned i = 0; i < kTcpStates; ++i) {
        const auto t = static_cast<TcpState>(i);
        const FlowState s = FlowState::of(t);
        const bool handshaking = t == TcpState::syn_sent || t == TcpState::syn_recv || t == TcpState::syn_sent2;
        EXPECT_EQ(s.tcp_handshaking(), handshaking) << i;
        EXPECT_EQ(s.tcp_closing(),
                  t == TcpState::fin_wait || t == TcpState::close_wait || t == TcpState::last_ack ||
                      t == TcpState::time_wait || t == TcpState::close)
            << i;
        EXPECT_EQ(s.tcp_past_handshake(), t >= TcpState::established && t <= TcpState::close) << i;
        EXPECT_EQ(s.tcp_open(), handshaking || t == TcpState::established || t == TcpState::close_wait) << i;
        EXPECT_FALSE(s.tcp_open() && t == TcpState::time_wait) << "a drain does not wait for TIME_WAIT";
    }
}

TEST(FlowState, DatagramStatesIgnoreFlags) {
    EXPECT_FALSE(FlowState::of(DgramState::unreplied).dgram_replied());
    EXPECT_TRUE(FlowState::of(DgramState::replied).dgram_replied());
    EXPECT_TRUE((FlowState{static_cast<uint8_t>(1 | FlowState::kGone)}).dgram_replied());
    EXPECT_EQ(FlowState{static_cast<uint8_t>(1 | FlowState::kGone)}.conntrack(), 1);
}
