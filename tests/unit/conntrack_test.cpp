// Cells of the kernel's TCP state table (nf_conntrack_proto_tcp.c tcp_conntracks), checked one
// by one: a handshake, a close from each side, RST, simultaneous open and the INVALID cells.
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "dataplane/flow/conntrack.h"
#include "dataplane/pipeline/parse.h"

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
    EXPECT_EQ(tcp_transition(S::none, O, C::ack), S::established);  // picked up mid-stream
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

// Every cell (10 states × 6 flag classes × 2 directions), against the kernel's table as Linux 6.1's
// nf_conntrack_proto_tcp.c lists it cell by cell in its comments ("sSS -> sS2  Simultaneous open"):
// one line per (direction, flag class), the results for sNO sSS sSR sES sFW sCW sLA sTW sCL sS2.
TEST(Conntrack, EveryCellOfTheKernelsTable) {
    const std::map<std::string, S> st = {{"sNO", S::none},        {"sSS", S::syn_sent},  {"sSR", S::syn_recv},
                                         {"sES", S::established}, {"sFW", S::fin_wait},  {"sCW", S::close_wait},
                                         {"sLA", S::last_ack},    {"sTW", S::time_wait}, {"sCL", S::close},
                                         {"sS2", S::syn_sent2},   {"sIV", S::invalid},   {"sIG", S::ignore}};
    struct Row {
        Direction dir;
        C cls;
        const char* results;
    };
    const Row kernel[] = {
        {O, C::syn, "sSS sSS sIG sIG sIG sIG sIG sSS sSS sS2"},     // sTW -> sSS: reopened (RFC 1122)
        {O, C::synack, "sIV sIV sSR sIV sIV sIV sIV sIV sIV sSR"},  // the client cannot send SYN/ACK
        {O, C::fin, "sIV sIV sFW sFW sLA sLA sLA sTW sCL sIV"},
        {O, C::ack, "sES sIV sES sES sCW sCW sTW sTW sCL sIV"},  // sNO -> sES: picked up
        {O, C::rst, "sIV sCL sCL sCL sCL sCL sCL sCL sCL sCL"},
        {O, C::none, "sIV sIV sIV sIV sIV sIV sIV sIV sIV sIV"},
        {R, C::syn, "sIV sS2 sIV sIV sIV sIV sIV sSS sIV sS2"},  // simultaneous open; role switch
        {R, C::synack, "sIV sSR sIG sIG sIG sIG sIG sIG sIG sSR"},
        {R, C::fin, "sIV sIV sFW sFW sLA sLA sLA sTW sCL sIV"},
        {R, C::ack, "sIV sIG sSR sES sCW sCW sTW sTW sCL sIG"},  // sSS -> sIG: maybe half-open
        {R, C::rst, "sIV sCL sCL sCL sCL sCL sCL sCL sCL sCL"},
        {R, C::none, "sIV sIV sIV sIV sIV sIV sIV sIV sIV sIV"},
    };
    unsigned cells = 0;
    for (const Row& row : kernel) {
        std::istringstream in(row.results);
        std::string want;
        for (unsigned s = 0; s < kTcpStates && in >> want; ++s, ++cells) {
            EXPECT_EQ(tcp_transition(static_cast<S>(s), row.dir, row.cls), st.at(want))
                << (row.dir == O ? "ORIGINAL " : "REPLY ") << static_cast<int>(row.cls) << " in "
                << tcp_state_name(static_cast<S>(s));
        }
    }
    EXPECT_EQ(cells, 120u);
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
