// The replication protocol between gateways (issue 19): datagrams of flow records (flow_record.h)
// and liveness, authenticated and protected against replay.
//
// A datagram, little-endian:
//
//   offset  size  field
//        0     4  magic "SGSY"
//        4     1  version (2)
//        5     1  type: 1 flows, 2 hello
//        6     2  records (flows: how many follow; hello: 0)
//        8     4  sender: its peer id (peer_id() of its ha.listen), under the MAC, so that a
//                 datagram of one gateway replayed from another's address is refused
//       12     8  epoch: the sender's, new at each start (Unix microseconds when it started)
//       20     8  sequence: 1, 2, ... within the epoch
//       28     n  body: flow records (flows) or the hello (below)
//     28+n    32  MAC: HMAC-SHA-512-256 (libsodium's crypto_auth) of bytes 0..28+n with the shared key
//
// A hello (one to each peer): u8 flags (HelloFlags), u32 flows it holds, u64 copied_for: the
// receiver's epoch the sender has sent its whole table to (0: none), so a copy made for an earlier
// start of the receiver never counts; u32 to: the receiver's peer id (a hello replayed to another
// gateway is refused); then u8 n and n addresses of 16 bytes (IPv4 as ::ffff:a.b.c.d): the
// sender's addresses a survivor takes over when it dies (ha.takeover_ports), at most
// kHelloAddresses.
//
// What is checked, in this order, each failure a counted drop (Drop) that changes nothing:
// the source is one of ha.peers (unknown_peer); the datagram is long enough for a header and a MAC
// (truncated); magic and version (bad_magic, bad_version); the MAC, in constant time (bad_mac) -
// nothing past the header is read before it verifies; the sender id is the peer's whose address it
// came from (wrong_peer; and a hello's `to` is this gateway's, checked by the caller); the epoch
// is not older than the newest seen
// from that peer and the sequence number is new within a 64-wide window (replayed: the window
// only moves for datagrams whose MAC verified, so forged ones cannot push it); the type and the
// body (malformed: a record that does not decode, a count that does not match the body). A
// datagram is taken whole or not at all.
//
// Runs on: the sync thread. No allocation in open(); Sealer::seal() writes into the caller's buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "control/base/status.h"
#include "dataplane/base/enum_names.h"
#include "dataplane/flow/flow_record.h"

namespace svcgate::ctl::sync {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kHeaderBytes = 28;
// A datagram fits a 1500-byte link without fragmenting, under IPv6 and UDP headers (1452).
inline constexpr size_t kMaxDatagram = 1440;
inline constexpr size_t kMaxBody = kMaxDatagram - kHeaderBytes - kMacBytes;

enum class Type : uint8_t { flows = 1, hello = 2 };
// kHelloStarting: the sender has just started and asks for a bulk copy; kHelloLeaving: it stops
// now (an orderly stop: its peers take over its addresses at once instead of after dead_after_ms).
enum HelloFlags : uint8_t { kHelloStarting = 0x1, kHelloLeaving = 0x2 };

#define SVCGATE_SYNC_DROPS(X)       \
    X(unknown_peer, "unknown_peer") \
    X(truncated, "truncated")       \
    X(bad_magic, "bad_magic")       \
    X(bad_version, "bad_version")   \
    X(bad_mac, "bad_mac")           \
    X(wrong_peer, "wrong_peer")     \
    X(replayed, "replayed")         \
    X(malformed, "malformed")
enum class Drop : uint8_t { SVCGATE_SYNC_DROPS(SVCGATE_ENUM_ID) };
inline constexpr std::array kDropNames{SVCGATE_SYNC_DROPS(SVCGATE_ENUM_NAME)};
inline constexpr unsigned kDrops = kDropNames.size();
inline const char* drop_name(Drop d) noexcept { return enum_name(d, kDropNames); }

using Key = std::array<uint8_t, kKeyBytes>;

struct Header {
    Type type = Type::flows;
    uint16_t records = 0;
    uint32_t sender = 0;
    uint64_t epoch = 0;
    uint64_t seq = 0;
};

inline constexpr size_t kHelloAddresses = 16;
struct Hello {
    uint8_t flags = 0;
    uint32_t flows = 0;
    uint64_t copied_for = 0;
    uint32_t to = 0;
    uint8_t n_addrs = 0;
    std::array<dp::IpAddr, kHelloAddresses> addrs{};
};

// A gateway's id in the protocol: a hash of its ha.listen address and port (16 address bytes, IPv4
// as ::ffff:a.b.c.d, then the port, big-endian).
uint32_t peer_id(const uint8_t (&addr)[16], uint16_t port) noexcept;

// Writes datagrams of one sender and epoch: each gets the next sequence number and its MAC.
class Sealer {
public:
    Sealer(const Key& key, uint32_t sender, uint64_t epoch) noexcept : key_(key), sender_(sender), epoch_(epoch) {}
    // header + body + MAC into out (kMaxDatagram bytes); returns the datagram's length (0 when the
    // body is larger than kMaxBody).
    size_t seal(Type type, uint16_t records, std::span<const uint8_t> body, uint8_t* out) noexcept;
    uint64_t epoch() const noexcept { return epoch_; }

private:
    Key key_;
    uint32_t sender_;
    uint64_t epoch_;
    uint64_t seq_ = 0;
};

// One peer's replay state: the newest epoch and a window of the last 64 sequence numbers in it.
class ReplayWindow {
public:
    // Would (epoch, seq) be new? Reads only.
    bool fresh(uint64_t epoch, uint64_t seq) const noexcept;
    // Records it (call only after fresh() and the MAC both said yes).
    void accept(uint64_t epoch, uint64_t seq) noexcept;
    uint64_t epoch() const noexcept { return epoch_; }

private:
    uint64_t epoch_ = 0;
    uint64_t top_ = 0;   // highest sequence number accepted in epoch_
    uint64_t bits_ = 0;  // bit i: top_ - i accepted
};

// Checks a datagram from a known peer (the caller has matched its source against ha.peers, whose
// id is `sender`): length, magic, version, MAC, sender, replay, body. On success the header and
// body are set and the window moved; `flows` then decodes the records one by one (already
// checked whole).
bool open(const uint8_t* p, size_t n, const Key& key, uint32_t sender, ReplayWindow& window, Header& h,
          std::span<const uint8_t>& body, Drop& why) noexcept;

// The flow records of a body open() accepted (it checked them all), in order: f(const dp::FlowRecord&).
template <typename F>
void for_each_flow(std::span<const uint8_t> body, F&& f) noexcept {
    dp::decode_flows(body.data(), body.size(), f);
}

bool decode_hello(std::span<const uint8_t> body, Hello& out) noexcept;
inline constexpr size_t kHelloFixed = 18;  // through n
inline constexpr size_t kHelloMax = kHelloFixed + 16 * kHelloAddresses;
inline constexpr size_t hello_size(size_t n_addrs) noexcept { return kHelloFixed + 16 * n_addrs; }
// Writes hello_size(h.n_addrs) bytes (n_addrs at most kHelloAddresses); returns how many.
size_t encode_hello(const Hello& h, uint8_t* out) noexcept;

}  // namespace svcgate::ctl::sync
