// Cells of the kernel's TCP state table (nf_conntrack_proto_tcp.c tcp_conntracks), checked one
// by one: a handshake, a close from each side, RST, simultaneous open and the INVALID cells.
#include <gtest/gtest.h>

#include "conntrack.h"
#include "parse.h"

using namespace svcgate::dp;
using S = TcpState;
using C = TcpFlagClass;
constexpr auto O = Direction::original, R = Direction::reply;

TEST(Conntrack, FlagClassPriority) {
    EXPECT_EQ(tcp_flag_class(kRst | kSyn), C::rst);
    EXPECT_EQ(tcp_flag_class(kSyn | kAck), C::synack);
    EXPECT_EQ(tcp_flag_class(kSyn), C::syn);
    EXPECT_EQ(tcp_flag_class(kFin | kAck), C::fin);
    EXPECT_EQ(tcp_flag_class(kAck | kPsh), C::ack);
    EXPECT_EQ(tcp_flag_class(kPsh), C::none);
}

TEST(Conntrack, HandshakeAndCloses) {
    EXPECT_EQ(tcp_transition(S::none, O, C::syn), S::syn_sent);
    EXPECT_EQ(tcp_transition(S::syn_sent, R, C::synack), S::syn_recv);
    EXPECT_EQ(tcp_transition(S::syn_recv, O, C::ack), S::established);
    EXPECT_EQ(tcp_transition(S::established, O, C::fin), S::fin_wait);
    EXPECT_EQ(tcp_transition(S::fin_wait, R, C::ack), S::close_wait);
    EXPECT_EQ(tcp_transition(S::close_wait, R, C::fin), S::last_ack);
    EXPECT_EQ(tcp_transition(S::last_ack, O, C::ack), S::time_wait);
    EXPECT_EQ(tcp_transition(S::time_wait, O, C::syn), S::syn_sent);  // RFC 1122 reopen
    EXPECT_EQ(tcp_transition(S::established, R, C::rst), S::close);
    EXPECT_EQ(tcp_transition(S::none, O, C::ack), S::established);    // picked up mid-stream
}

TEST(Conntrack, SimultaneousOpenAndIgnored) {
    EXPECT_EQ(tcp_transition(S::syn_sent, R, C::syn), S::syn_sent2);
    EXPECT_EQ(tcp_transition(S::syn_sent2, O, C::synack), S::syn_recv);
    EXPECT_EQ(tcp_transition(S::established, O, C::syn), S::ignore);
    EXPECT_EQ(tcp_transition(S::established, R, C::synack), S::ignore);
    EXPECT_EQ(tcp_transition(S::syn_sent, R, C::ack), S::ignore);
}

TEST(Conntrack, InvalidCells) {
    EXPECT_EQ(tcp_transition(S::none, O, C::synack), S::invalid);
    EXPECT_EQ(tcp_transition(S::none, O, C::fin), S::invalid);
    EXPECT_EQ(tcp_transition(S::none, O, C::rst), S::invalid);
    EXPECT_EQ(tcp_transition(S::syn_sent, O, C::ack), S::invalid);
    EXPECT_EQ(tcp_transition(S::syn_sent, O, C::synack), S::invalid);
    EXPECT_EQ(tcp_transition(S::established, R, C::syn), S::invalid);
    for (unsigned s = 0; s < kTcpStates; ++s) {
        EXPECT_EQ(tcp_transition(static_cast<S>(s), O, C::none), S::invalid);
        EXPECT_EQ(tcp_transition(static_cast<S>(s), R, C::none), S::invalid);
    }
}

TEST(Conntrack, KubeProxyTimeouts) {
    Timeouts t;
    EXPECT_EQ(t.tcp[static_cast<unsigned>(S::established)], 86400u);
    EXPECT_EQ(t.tcp[static_cast<unsigned>(S::close_wait)], 3600u);
    EXPECT_EQ(t.tcp[static_cast<unsigned>(S::time_wait)], 120u);
    EXPECT_EQ(t.udp_unreplied, 30u);
    EXPECT_EQ(t.udp_replied, 120u);
    EXPECT_EQ(t.icmp, 30u);
}
