#include "flow_state.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "pipeline.h"
#include "yaml_config.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

constexpr char kMagic[8] = {'S', 'G', 'F', 'L', 'O', 'W', 'S', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 32;
constexpr size_t kMaxIdentity = 1 << 16;

uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) noexcept {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

void put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get(const uint8_t* p, int bytes) noexcept {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
    return v;
}

template <typename K>
void append_flows(std::vector<uint8_t>& out, const BasicFlowTable<K>& table, uint32_t now, uint32_t& n) {
    const typename BasicFlowTable<K>::ScanGuard reading(table);
    uint8_t rec[flow_record_size<K>()];
    for (uint32_t id = 0; id < table.capacity(); ++id) {
        const auto& f = table.flow(id);
        if (!f.live.load(std::memory_order_acquire)) continue;
        if (f.state.load(std::memory_order_relaxed) & kStateGone) continue;  // its endpoint is gone
        encode_flow(f, now, rec);
        out.insert(out.end(), rec, rec + sizeof rec);
        ++n;
    }
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

const char* FlowImporter::outcome_name(Outcome o) noexcept {
    switch (o) {
    case Outcome::inserted: return "inserted";
    case Outcome::exists: return "exists";
    case Outcome::gone: return "gone";
    case Outcome::expired: return "expired";
    case Outcome::clash: return "clash";
    case Outcome::full: return "full";
    }
    return "?";
}

FlowImporter::FlowImporter(const ServiceSnapshot& snap, const StatsTable& stats, FlowTable& flows, FlowTable6* flows6)
    : snap_(snap), stats_(stats), flows_(flows), flows6_(flows6) {
    endpoints_.reserve(snap.endpoints.size());
    for (const ServicePort& sp : snap.services) {
        services_.insert(sp.id);
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i)
            endpoints_.emplace(Key{sp.id, snap.endpoints[i].key().word()},
                               NatTarget{.service = sp.slot, .endpoint = snap.endpoints[i].slot});
    }
}

template <typename K>
FlowImporter::Outcome FlowImporter::import_as(BasicFlowInit<K>& in, BasicFlowTable<K>& table, uint16_t owner,
                                              uint32_t now, uint32_t idle) {
    NatTarget target{};
    if (in.kind == FlowKind::nat) {
        const auto it = endpoints_.find(Key{in.svc_id, EndpointKey{IpAddr::of(in.key[1].src), in.key[1].sport}.word()});
        if (it == endpoints_.end()) return Outcome::gone;
        target = it->second;
        in.target = target.encode();
    } else if (!services_.count(in.svc_id)) {
        return Outcome::gone;
    }
    if (owner >= table.owners()) return Outcome::full;  // no such owner: nowhere to put it
    in.gen = snap_.generation;
    // Its timeout as the table would reckon it.
    BasicFlow<K> probe;
    probe.key[0] = in.key[0];
    probe.kind = in.kind;
    probe.aux = in.aux;
    probe.state.store(in.state, std::memory_order_relaxed);
    if (idle > table.timeout_of(probe)) return Outcome::expired;
    const uint32_t seen = now > idle ? now - idle : 1;
    const InsertResult r = table.insert(owner, in, seen);
    switch (r.status) {
    case InsertStatus::inserted:
        if (in.kind == FlowKind::nat) stats_.active[target.endpoint].fetch_add(1, std::memory_order_relaxed);
        return Outcome::inserted;
    case InsertStatus::exists: return Outcome::exists;
    case InsertStatus::reply_clash: return Outcome::clash;
    case InsertStatus::full: return Outcome::full;
    }
    return Outcome::full;
}

FlowImporter::Outcome FlowImporter::import(FlowRecord& r, uint32_t turn, uint32_t now, uint32_t extra_idle) {
    const uint32_t idle = r.idle > UINT32_MAX - extra_idle ? UINT32_MAX : r.idle + extra_idle;
    if (r.family == Family::v4) return import_as(r.v4, flows_, static_cast<uint16_t>(turn % flows_.owners()), now, idle);
    if (!flows6_) return Outcome::full;
    return import_as(r.v6, *flows6_, static_cast<uint16_t>(turn % flows6_->owners()), now, idle);
}

std::string gateway_identity(const Config& cfg) {
    std::string id;
    for (const PortConfig& p : cfg.dataplane.ports) {
        std::vector<std::string> addrs;
        for (const IpCidr& a : p.addresses) addrs.push_back(format_cidr(a));
        std::sort(addrs.begin(), addrs.end());
        id += fmt::format("{}{} {}", id.empty() ? "" : "; ", p.name, fmt::join(addrs, ","));
    }
    return id;
}

std::string save_flow_state(const std::string& path, const std::string& identity, const FlowTable& flows,
                            const FlowTable6* flows6, uint32_t now, uint64_t now_unix, uint32_t& written) {
    written = 0;
    std::vector<uint8_t> out;
    out.reserve(kHeader + identity.size() + size_t{flows.live_total()} * kFlowRecordV4 +
                (flows6 ? size_t{flows6->live_total()} * kFlowRecordV6 : 0) + 8);
    out.insert(out.end(), kMagic, kMagic + sizeof kMagic);
    put(out, kVersion, 4);
    put(out, identity.size(), 4);
    put(out, now_unix, 8);
    put(out, 0, 4);  // flows: filled in below
    put(out, 0, 4);
    out.insert(out.end(), identity.begin(), identity.end());
    append_flows(out, flows, now, written);
    if (flows6) append_flows(out, *flows6, now, written);
    for (int i = 0; i < 4; ++i) out[24 + i] = static_cast<uint8_t>(written >> (8 * i));
    put(out, fnv1a(out.data(), out.size()), 8);

    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return fmt::format("{}: cannot create: {}", tmp, errno_text());
    size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const std::string e = errno_text();
            ::close(fd);
            ::unlink(tmp.c_str());
            return fmt::format("{}: cannot write: {}", tmp, e);
        }
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        const std::string e = errno_text();
        ::unlink(tmp.c_str());
        return fmt::format("{}: cannot write: {}", tmp, e);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string e = errno_text();
        ::unlink(tmp.c_str());
        return fmt::format("{}: cannot rename to {}: {}", tmp, path, e);
    }
    return {};
}

std::string restore_flow_state(const std::string& path, const std::string& identity, uint32_t max_age,
                               FlowImporter& importer, uint32_t now, uint64_t now_unix,
                               RestoreResult& result) {
    result = RestoreResult{};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return {};
        return fmt::format("cannot open: {}", errno_text());
    }
    result.found = true;
    std::vector<uint8_t> in;
    struct stat sb {};
    if (::fstat(fd, &sb) == 0 && sb.st_size > 0) in.reserve(static_cast<size_t>(sb.st_size));
    uint8_t buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const std::string e = errno_text();
            ::close(fd);
            return fmt::format("cannot read: {}", e);
        }
        if (n == 0) break;
        in.insert(in.end(), buf, buf + n);
    }
    ::close(fd);

    if (in.size() < kHeader + 8 || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
        return "not a svcgate flow state file";
    if (const uint64_t v = get(in.data() + 8, 4); v != kVersion)
        return fmt::format("format version {}; this svcgate reads version {}", v, kVersion);
    const size_t id_len = get(in.data() + 12, 4);
    const uint64_t written = get(in.data() + 16, 8);
    result.records = static_cast<uint32_t>(get(in.data() + 24, 4));
    if (id_len > kMaxIdentity || in.size() < kHeader + id_len + 8) return "cut short (the header's sizes do not fit)";
    const size_t body = in.size() - 8;
    if (fnv1a(in.data(), body) != get(in.data() + body, 8))
        return "checksum mismatch: the file was cut short or changed after it was written";
    const std::string theirs(reinterpret_cast<const char*>(in.data() + kHeader), id_len);
    if (theirs != identity)
        return fmt::format("written by another gateway (ports {}); this one has ports {}", theirs, identity);
    if (written > now_unix + 60) return fmt::format("written {} s in the future: is the clock right?", written - now_unix);
    result.age = written > now_unix ? 0 : static_cast<uint32_t>(std::min<uint64_t>(now_unix - written, UINT32_MAX));
    if (result.age > max_age)
        return fmt::format("stale: written {} s ago, more than dataplane.flow_table.state_max_age ({} s)", result.age,
                           max_age);

    // Every record is checked before any is imported: a file is taken whole or not at all.
    std::vector<FlowRecord> flows;
    flows.reserve(std::min<size_t>(result.records, (body - kHeader - id_len) / kFlowRecordV4));  // a forged count
    size_t off = kHeader + id_len;
    while (off < body) {
        FlowRecord r;
        const size_t n = decode_flow(in.data() + off, body - off, r);
        if (n == 0) return fmt::format("flow {} (at byte {}) is malformed", flows.size() + 1, off);
        flows.push_back(r);
        off += n;
    }
    if (flows.size() != result.records)
        return fmt::format("the header counts {} flows, the file holds {}", result.records, flows.size());
    // The owners (workers) in turn: each ages its share.
    uint32_t turn = 0;
    for (FlowRecord& r : flows)
        ++result.outcome[static_cast<unsigned>(importer.import(r, turn++, now, result.age))];
    if (::unlink(path.c_str()) != 0) result.unlink_error = errno_text();
    return {};
}

}  // namespace svcgate::ctl
