#include "control/ha/sync_proto.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <sodium.h>

#include "dataplane/base/static_hash.h"

namespace svcgate::ctl::sync {

namespace {

constexpr uint8_t kMagic[4] = {'S', 'G', 'S', 'Y'};
constexpr uint8_t kVersion = 2;

// libsodium picks its implementations once, before first use (thread-safe here: a static).
void sodium_ready() noexcept {
    static const int rc = sodium_init();
    (void)rc;  // -1 only when it cannot initialise at all; crypto_auth has a portable fallback
}

using dp::load_le;
using dp::store_le;

// The records of a flows body: exactly `count` of them, each decoding, nothing left over.
bool flows_body_ok(std::span<const uint8_t> body, uint16_t count) noexcept {
    const dp::DecodedFlows d = dp::decode_flows(body.data(), body.size(), [](const dp::FlowRecord&) {});
    return d.ok && d.count == count;
}

// A hello's size matches its address count, within the limit.
bool hello_ok(std::span<const uint8_t> body) noexcept {
    return body.size() >= kHelloFixed && body[kHelloFixed - 1] <= kHelloAddresses &&
        body.size() == hello_size(body[kHelloFixed - 1]);
}

}  // namespace

size_t Sealer::seal(Type type, uint16_t records, std::span<const uint8_t> body, uint8_t* out) noexcept {
    if (body.size() > kMaxBody) return 0;
    sodium_ready();
    std::memcpy(out, kMagic, 4);
    out[4] = kVersion;
    out[5] = static_cast<uint8_t>(type);
    store_le(out + 6, records, 2);
    store_le(out + 8, sender_, 4);
    store_le(out + 12, epoch_, 8);
    store_le(out + 20, ++seq_, 8);
    if (!body.empty()) std::memcpy(out + kHeaderBytes, body.data(), body.size());
    const size_t n = kHeaderBytes + body.size();
    crypto_auth(out + n, out, n, key_.data());
    return n + kMacBytes;
}

bool ReplayWindow::fresh(uint64_t epoch, uint64_t seq) const noexcept {
    if (seq == 0 || epoch < epoch_) return false;
    if (epoch > epoch_) return true;  // the peer started again
    if (seq > top_) return true;
    const uint64_t back = top_ - seq;
    return back < 64 && !(bits_ >> back & 1);
}

void ReplayWindow::accept(uint64_t epoch, uint64_t seq) noexcept {
    if (epoch > epoch_) {
        epoch_ = epoch;
        top_ = seq;
        bits_ = 1;
        return;
    }
    if (seq > top_) {
        const uint64_t shift = seq - top_;
        bits_ = shift >= 64 ? 1 : (bits_ << shift) | 1;
        top_ = seq;
    } else {
        bits_ |= uint64_t{1} << (top_ - seq);
    }
}

uint32_t peer_id(const uint8_t (&addr)[16], uint16_t port) noexcept {
    uint8_t b[18];
    std::memcpy(b, addr, 16);
    b[16] = static_cast<uint8_t>(port >> 8);
    b[17] = static_cast<uint8_t>(port);
    return dp::crc32c_bytes(b, sizeof b, 0xffffffff);
}

bool open(const uint8_t* p, size_t n, const Key& key, uint32_t sender, ReplayWindow& window, Header& h,
          std::span<const uint8_t>& body, Drop& why) noexcept {
    if (n < kHeaderBytes + kMacBytes || n > kMaxDatagram) {
        why = Drop::truncated;
        return false;
    }
    if (std::memcmp(p, kMagic, 4) != 0) {
        why = Drop::bad_magic;
        return false;
    }
    if (p[4] != kVersion) {
        why = Drop::bad_version;
        return false;
    }
    const size_t signed_len = n - kMacBytes;
    sodium_ready();
    if (crypto_auth_verify(p + signed_len, p, signed_len, key.data()) != 0) {
        why = Drop::bad_mac;
        return false;
    }
    h.type = static_cast<Type>(p[5]);
    h.records = static_cast<uint16_t>(load_le(p + 6, 2));
    h.sender = static_cast<uint32_t>(load_le(p + 8, 4));
    h.epoch = load_le(p + 12, 8);
    h.seq = load_le(p + 20, 8);
    if (h.sender != sender) {
        why = Drop::wrong_peer;
        return false;
    }
    if (!window.fresh(h.epoch, h.seq)) {
        why = Drop::replayed;
        return false;
    }
    body = std::span<const uint8_t>(p + kHeaderBytes, signed_len - kHeaderBytes);
    bool ok = false;
    if (h.type == Type::flows)
        ok = flows_body_ok(body, h.records);
    else if (h.type == Type::hello)
        ok = h.records == 0 && hello_ok(body);
    if (!ok) {
        why = Drop::malformed;
        return false;
    }
    window.accept(h.epoch, h.seq);
    return true;
}

bool decode_hello(std::span<const uint8_t> body, Hello& out) noexcept {
    if (!hello_ok(body)) return false;
    out.flags = body[0];
    out.flows = static_cast<uint32_t>(load_le(body.data() + 1, 4));
    out.copied_for = load_le(body.data() + 5, 8);
    out.to = static_cast<uint32_t>(load_le(body.data() + 13, 4));
    out.n_addrs = body[kHelloFixed - 1];
    for (size_t i = 0; i < out.n_addrs; ++i) std::memcpy(out.addrs[i].a.b, body.data() + kHelloFixed + 16 * i, 16);
    return true;
}

size_t encode_hello(const Hello& h, uint8_t* out) noexcept {
    const size_t n = std::min<size_t>(h.n_addrs, kHelloAddresses);
    out[0] = h.flags;
    store_le(out + 1, h.flows, 4);
    store_le(out + 5, h.copied_for, 8);
    store_le(out + 13, h.to, 4);
    out[kHelloFixed - 1] = static_cast<uint8_t>(n);
    for (size_t i = 0; i < n; ++i) std::memcpy(out + kHelloFixed + 16 * i, h.addrs[i].a.b, 16);
    return hello_size(n);
}

}  // namespace svcgate::ctl::sync
