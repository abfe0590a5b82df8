#include "control/ha/state_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "control/snapshot/flow_scan.h"
#include "control/config/yaml_config.h"
#include "dataplane/base/static_hash.h"
#include "dataplane/pipeline/pipeline.h"

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

constexpr char kMagic[8] = {'S', 'G', 'F', 'L', 'O', 'W', 'S', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 32;
constexpr size_t kMaxIdentity = 1 << 16;

constexpr size_t kTrailer = 4;  // CRC32c of everything before it
constexpr uint32_t kCrcSeed = 0xffffffff;

void put(std::vector<uint8_t>& out, uint64_t v, unsigned bytes) {
    out.resize(out.size() + bytes);
    store_le(out.data() + out.size() - bytes, v, bytes);
}

template <typename K>
void append_flows(std::vector<uint8_t>& out, const BasicFlowTable<K>& table, uint32_t now, uint32_t& n) {
    uint8_t rec[flow_record_size<K>()];
    scan_live_flows(table, [&](uint32_t, const BasicFlow<K>& f) {
        if (FlowState::load(f.state).gone()) return true;                // its endpoint is gone
        if (f.origin.load(std::memory_order_relaxed) != 0) return true;  // a peer's (sync.h): the peers have it
        encode_flow(f, now, rec);
        out.insert(out.end(), rec, rec + sizeof rec);
        ++n;
        return true;
    });
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

FlowImporter::FlowImporter(const ServiceSnapshot& snap, const StatsTable& stats, FlowTable& flows, FlowTable6* flows6,
                           uint16_t workers)
    : snap_(snap), stats_(stats), flows_(flows), flows6_(flows6), snat_cursor_(std::max<uint16_t>(workers, 1), 0) {
    endpoints_.reserve(snap.endpoints.size());
    for (const ServicePort& sp : snap.services) {
        services_.insert(sp.id);
        for (uint32_t i = sp.ep_first; i < sp.ep_first + sp.ep_count; ++i)
            endpoints_.emplace(ServiceEndpoint{sp.id, snap.endpoints[i].key().word()},
                               NatTarget{.service = sp.slot, .endpoint = snap.endpoints[i].slot});
    }
}

template <typename K>
FlowImporter::Outcome FlowImporter::import_as(BasicFlowInit<K>& in, BasicFlowTable<K>& table, uint16_t owner,
                                              uint32_t now, uint32_t idle) {
    NatTarget target{};
    if (in.kind == FlowKind::nat) {
        const auto it = endpoints_.find(ServiceEndpoint::of_flow(in));
        if (it == endpoints_.end()) return Outcome::gone;
        target = it->second;
        in.target = target.encode();
    } else if (!services_.count(in.svc_id)) {
        return Outcome::gone;
    }
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
            // A replica counts as active once a worker takes it over (release_flow).
            if (in.kind == FlowKind::nat && in.origin == 0)
                stats_.active.add(stats_.active.control_row(), target.endpoint, 1);
            if ((in.flags & kFlowMasq) && in.origin == 0) hold_snat_port(rte_be_to_cpu_16(in.key[1].dport));
            return Outcome::inserted;
        case InsertStatus::exists:
            return Outcome::exists;
        case InsertStatus::reply_clash:
            return Outcome::clash;
        case InsertStatus::full:
            return Outcome::full;
    }
    return Outcome::full;
}

void FlowImporter::hold_snat_port(uint16_t port) noexcept {
    // A worker hands out the ports ≡ worker (mod workers) of the range, in order (new_flow.cpp).
    const ClusterSettings& c = snap_.cluster;
    if (port < c.snat_port_min || port > c.snat_port_max) return;
    const uint32_t off = port - c.snat_port_min, workers = static_cast<uint32_t>(snat_cursor_.size());
    uint32_t& cur = snat_cursor_[off % workers];
    cur = std::max(cur, off / workers + 1);
}

FlowImporter::Outcome FlowImporter::import(FlowRecord& r, uint32_t turn, uint32_t now, uint32_t extra_idle) {
    return import_to(r, static_cast<uint16_t>(turn % snat_cursor_.size()), 0, now, extra_idle);
}

FlowImporter::Outcome FlowImporter::import_to(FlowRecord& r, uint16_t owner, uint8_t origin, uint32_t now,
                                              uint32_t extra_idle) {
    const uint32_t idle = r.idle > UINT32_MAX - extra_idle ? UINT32_MAX : r.idle + extra_idle;
    if (r.family == Family::v4) {
        r.v4.origin = origin;
        return import_as(r.v4, flows_, owner, now, idle);
    }
    if (!flows6_) return Outcome::full;
    r.v6.origin = origin;
    return import_as(r.v6, *flows6_, owner, now, idle);
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

Status save_flow_state(const std::string& path, const std::string& identity, const FlowTable& flows,
                       const FlowTable6* flows6, uint32_t now, uint64_t now_unix, uint32_t& written) {
    written = 0;
    std::vector<uint8_t> out;
    out.reserve(kHeader + identity.size() + size_t{flows.live_total()} * kFlowRecordV4 +
                (flows6 ? size_t{flows6->live_total()} * kFlowRecordV6 : 0) + kTrailer);
    out.insert(out.end(), kMagic, kMagic + sizeof kMagic);
    put(out, kVersion, 4);
    put(out, identity.size(), 4);
    put(out, now_unix, 8);
    put(out, 0, 4);  // flows: filled in below
    put(out, 0, 4);
    out.insert(out.end(), identity.begin(), identity.end());
    append_flows(out, flows, now, written);
    if (flows6) append_flows(out, *flows6, now, written);
    store_le(out.data() + 24, written, 4);
    put(out, crc32c_bytes(out.data(), out.size(), kCrcSeed), kTrailer);

    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::fail(fmt::format("{}: cannot create: {}", tmp, errno_text()));
    size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const std::string e = errno_text();
            ::close(fd);
            ::unlink(tmp.c_str());
            return Status::fail(fmt::format("{}: cannot write: {}", tmp, e));
        }
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        const std::string e = errno_text();
        ::unlink(tmp.c_str());
        return Status::fail(fmt::format("{}: cannot write: {}", tmp, e));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string e = errno_text();
        ::unlink(tmp.c_str());
        return Status::fail(fmt::format("{}: cannot rename to {}: {}", tmp, path, e));
    }
    return {};
}

Status restore_flow_state(const std::string& path, const std::string& identity, uint32_t max_age,
                          FlowImporter& importer, uint32_t now, uint64_t now_unix, RestoreResult& result) {
    result = RestoreResult{};
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        return ec ? Status::fail(fmt::format("cannot open: {}", ec.message())) : Status();
    result.found = true;
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad() || !f.is_open()) return Status::fail(fmt::format("cannot read: {}", errno_text()));

    if (in.size() < kHeader + kTrailer || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
        return Status::fail("not a svcgate flow state file");
    if (const uint64_t v = load_le(in.data() + 8, 4); v != kVersion)
        return Status::fail(fmt::format("format version {}; this svcgate reads version {}", v, kVersion));
    const size_t id_len = load_le(in.data() + 12, 4);
    const uint64_t written = load_le(in.data() + 16, 8);
    result.records = static_cast<uint32_t>(load_le(in.data() + 24, 4));
    if (id_len > kMaxIdentity || in.size() < kHeader + id_len + kTrailer)
        return Status::fail("cut short (the header's sizes do not fit)");
    const size_t body = in.size() - kTrailer;
    if (crc32c_bytes(in.data(), body, kCrcSeed) != load_le(in.data() + body, kTrailer))
        return Status::fail("checksum mismatch: the file was cut short or changed after it was written");
    const std::string theirs(reinterpret_cast<const char*>(in.data() + kHeader), id_len);
    if (theirs != identity)
        return Status::fail(
            fmt::format("written by another gateway (ports {}); this one has ports {}", theirs, identity));
    if (written > now_unix + 60)
        return Status::fail(fmt::format("written {} s in the future: is the clock right?", written - now_unix));
    result.age = written > now_unix ? 0 : static_cast<uint32_t>(std::min<uint64_t>(now_unix - written, UINT32_MAX));
    if (result.age > max_age)
        return Status::fail(fmt::format("stale: written {} s ago, more than dataplane.flow_table.state_max_age ({} s)",
                                        result.age, max_age));

    // Every record is checked before any is imported: a file is taken whole or not at all.
    const size_t first = kHeader + id_len;
    std::vector<FlowRecord> flows;
    flows.reserve(std::min<size_t>(result.records, (body - first) / kFlowRecordV4));  // a forged count
    const DecodedFlows d =
        decode_flows(in.data() + first, body - first, [&](const FlowRecord& r) { flows.push_back(r); });
    if (!d.ok) return Status::fail(fmt::format("flow {} (at byte {}) is malformed", d.count + 1, first + d.bad_at));
    if (flows.size() != result.records)
        return Status::fail(fmt::format("the header counts {} flows, the file holds {}", result.records, flows.size()));
    // The owners (workers) in turn: each ages its share.
    uint32_t turn = 0;
    for (FlowRecord& r : flows) ++result.outcome[static_cast<unsigned>(importer.import(r, turn++, now, result.age))];
    if (::unlink(path.c_str()) != 0) result.unlink_error = errno_text();
    return {};
}

}  // namespace svcgate::ctl
