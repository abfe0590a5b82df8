// Connection tracking states and timeouts, as plain tables (DPVS style): TCP follows the Linux
// kernel's tcp_conntracks[dir][flag class][state] table (nf_conntrack_proto_tcp.c), UDP and ICMP
// are "unreplied" until the reply direction is seen. Timeouts default to Linux's values with
// kube-proxy's overrides (established 86400 s, close_wait 3600 s).
//
// Runs on: any thread (pure functions over tables). Owns: nothing.
#pragma once

#include <cstdint>

namespace svcgate::dp {

enum class TcpState : uint8_t {
    none,
    syn_sent,
    syn_recv,
    established,
    fin_wait,
    close_wait,
    last_ack,
    time_wait,
    close,
    syn_sent2,
    count_,
    // Results of a transition that are not states:
    ignore = 0xfe,   // sIG: conntrack lets it through without changing state
    invalid = 0xff,  // sIV: conntrack calls it INVALID
};
inline constexpr unsigned kTcpStates = static_cast<unsigned>(TcpState::count_);

enum class Direction : uint8_t { original = 0, reply = 1 };

// The flag class conntrack indexes by (get_conntrack_index): RST beats SYN beats FIN beats ACK.
enum class TcpFlagClass : uint8_t { syn, synack, fin, ack, rst, none, count_ };
TcpFlagClass tcp_flag_class(uint8_t tcp_flags) noexcept;

TcpState tcp_transition(TcpState s, Direction d, TcpFlagClass c) noexcept;
const char* tcp_state_name(TcpState s) noexcept;

// UDP/ICMP states kept in the same byte.
enum class DgramState : uint8_t { unreplied = 0, replied = 1 };

struct Timeouts {
    uint32_t tcp[kTcpStates] = {
        /* none */ 10,      /* syn_sent */ 120,    /* syn_recv */ 60, /* established */ 86400,
        /* fin_wait */ 120, /* close_wait */ 3600, /* last_ack */ 30, /* time_wait */ 120,
        /* close */ 10,     /* syn_sent2 */ 120};
    uint32_t udp_unreplied = 30;
    uint32_t udp_replied = 120;
    uint32_t icmp = 30;
    uint32_t other = 600;  // Linux nf_conntrack_generic_timeout

    bool operator==(const Timeouts&) const = default;
};

}  // namespace svcgate::dp
