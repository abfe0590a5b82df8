#include "dataplane/flow/conntrack.h"

#include "dataplane/packet/meta.h"

namespace svcgate::dp {

TcpFlagClass tcp_flag_class(uint8_t f) noexcept {
    if (f & kRst) return TcpFlagClass::rst;
    if (f & kSyn) return (f & kAck) ? TcpFlagClass::synack : TcpFlagClass::syn;
    if (f & kFin) return TcpFlagClass::fin;
    if (f & kAck) return TcpFlagClass::ack;
    return TcpFlagClass::none;
}

namespace {
using S = TcpState;
// sNO (none) only heads the columns: no transition leads back to it.
constexpr S sSS = S::syn_sent, sSR = S::syn_recv, sES = S::established, sFW = S::fin_wait, sCW = S::close_wait,
            sLA = S::last_ack, sTW = S::time_wait, sCL = S::close, sS2 = S::syn_sent2, sIV = S::invalid,
            sIG = S::ignore;

// [direction][flag class][current state], states in the order of TcpState. The values are the
// kernel's tcp_conntracks (nf_conntrack_proto_tcp.c) as of Linux 6.1, Debian 12's kernel: a SYN/ACK
// from the client is INVALID outside a simultaneous open, and a SYN from the server side reopens a
// TIME_WAIT connection. tests/unit/conntrack_test.cpp checks all 120 cells.
constexpr S kTable[2][6][kTcpStates] = {
    {
        /* ORIGINAL   sNO  sSS  sSR  sES  sFW  sCW  sLA  sTW  sCL  sS2 */
        /* syn    */ {sSS, sSS, sIG, sIG, sIG, sIG, sIG, sSS, sSS, sS2},
        /* synack */ {sIV, sIV, sSR, sIV, sIV, sIV, sIV, sIV, sIV, sSR},
        /* fin    */ {sIV, sIV, sFW, sFW, sLA, sLA, sLA, sTW, sCL, sIV},
        /* ack    */ {sES, sIV, sES, sES, sCW, sCW, sTW, sTW, sCL, sIV},
        /* rst    */ {sIV, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL},
        /* none   */ {sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV},
    },
    {
        /* REPLY      sNO  sSS  sSR  sES  sFW  sCW  sLA  sTW  sCL  sS2 */
        /* syn    */ {sIV, sS2, sIV, sIV, sIV, sIV, sIV, sSS, sIV, sS2},
        /* synack */ {sIV, sSR, sIG, sIG, sIG, sIG, sIG, sIG, sIG, sSR},
        /* fin    */ {sIV, sIV, sFW, sFW, sLA, sLA, sLA, sTW, sCL, sIV},
        /* ack    */ {sIV, sIG, sSR, sES, sCW, sCW, sTW, sTW, sCL, sIG},
        /* rst    */ {sIV, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL},
        /* none   */ {sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV},
    },
};
}  // namespace

TcpState tcp_transition(TcpState s, Direction d, TcpFlagClass c) noexcept {
    auto si = static_cast<unsigned>(s);
    if (si >= kTcpStates) return TcpState::invalid;
    return kTable[static_cast<unsigned>(d)][static_cast<unsigned>(c)][si];
}

const char* tcp_state_name(TcpState s) noexcept {
    static constexpr const char* kNames[] = {"NONE",       "SYN_SENT", "SYN_RECV",  "ESTABLISHED", "FIN_WAIT",
                                             "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE",       "SYN_SENT2"};
    auto i = static_cast<unsigned>(s);
    if (i < kTcpStates) return kNames[i];
    return s == TcpState::ignore ? "IGNORE" : "INVALID";
}

}  // namespace svcgate::dp
