#include "control/export/ipfix.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <rte_cycles.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "control/base/address.h"
#include "control/base/log.h"

namespace svcgate::ctl {

using Clock = std::chrono::steady_clock;
using namespace ipfix;

namespace {

void put8(std::string& s, uint8_t v) { s.push_back(static_cast<char>(v)); }
void put16(std::string& s, uint16_t v) { put8(s, v >> 8), put8(s, v & 0xff); }
void put32(std::string& s, uint32_t v) { put16(s, v >> 16), put16(s, v & 0xffff); }
void set16(std::string& s, size_t at, uint16_t v) {
    s[at] = static_cast<char>(v >> 8), s[at + 1] = static_cast<char>(v);
}

struct Field {
    uint16_t id, len;
    uint32_t pen = 0;  // enterprise number; 0: IANA's
};
constexpr uint32_t kReversePen = 29305;  // RFC 5103: the reverse direction of IANA's elements
constexpr uint16_t kVarLen = 65535;
// IANA's elements: addresses, ports and protocol before and after the translation, natEvent,
// the event's time (observationTimeMilliseconds; and flowStart for a creation, flowEnd,
// flowEndReason and the packets and octets each way for an end) and the Service (applicationName,
// a string of variable length: "namespace/name:port").
std::vector<Field> fields(uint16_t tid) {
    const bool v6 = tid == kCreate6 || tid == kEnd6, end = tid == kEnd4 || tid == kEnd6;
    const uint16_t a = v6 ? 16 : 4;
    std::vector<Field> f{{uint16_t(v6 ? 27 : 8), a},    {uint16_t(v6 ? 28 : 12), a},   {7, 2},   {11, 2},  {4, 1},
                         {uint16_t(v6 ? 281 : 225), a}, {uint16_t(v6 ? 282 : 226), a}, {227, 2}, {228, 2}, {230, 1}};
    f.push_back({323, 8});  // observationTimeMilliseconds: the event's time (collectors show it as such)
    // An end's counts each way, as an RFC 5103 biflow: packetDeltaCount and octetDeltaCount from
    // the client, their reverse elements (PEN 29305) back from the endpoint.
    if (end)
        f.insert(f.end(), {{153, 8}, {136, 1}, {2, 8}, {1, 8}, {2, 8, kReversePen}, {1, 8, kReversePen}});
    else
        f.push_back({152, 8});
    f.push_back({96, kVarLen});
    return f;
}

}  // namespace

std::string IpfixEncoder::templates(uint32_t export_s) const {
    std::string m;
    put16(m, kVersion), put16(m, 0), put32(m, export_s), put32(m, sequence_), put32(m, domain_);
    const size_t set = m.size();
    put16(m, kTemplateSet), put16(m, 0);
    for (uint16_t tid : {kCreate4, kEnd4, kCreate6, kEnd6}) {
        const std::vector<Field> f = fields(tid);
        put16(m, tid), put16(m, static_cast<uint16_t>(f.size()));
        for (const Field& x : f) {
            put16(m, x.pen ? x.id | 0x8000 : x.id), put16(m, x.len);
            if (x.pen) put32(m, x.pen);
        }
    }
    set16(m, set + 2, static_cast<uint16_t>(m.size() - set));
    set16(m, 2, static_cast<uint16_t>(m.size()));
    return m;
}

namespace {
// A record written into a buffer of its own (no allocation per record).
struct RecordOut {
    char* p;
    void raw(const void* src, size_t n) { std::memcpy(p, src, n), p += n; }
    void u8(uint8_t v) { *p++ = static_cast<char>(v); }
    void u64(uint64_t v) {
        v = htobe64(v);
        raw(&v, 8);
    }
};
}  // namespace

void IpfixEncoder::add(const dp::NatEvent& e, uint64_t ms, std::string_view service, uint32_t export_s) {
    const bool end = e.type == dp::NatEventType::end;
    const uint16_t tid = e.v6 ? (end ? kEnd6 : kCreate6) : (end ? kEnd4 : kCreate4);
    service = service.substr(0, 254);
    char buf[4 * 16 + 4 * 2 + 1 + 1 + 8 + 8 + 1 + 4 * 8 + 1 + 254];
    RecordOut r{buf};
    if (e.v6) {
        const dp::FlowKey6 &o = e.k6[0], &y = e.k6[1];
        r.raw(o.src.b, 16), r.raw(o.dst.b, 16), r.raw(&o.sport, 2), r.raw(&o.dport, 2), r.u8(o.proto);
        r.raw(y.dst.b, 16), r.raw(y.src.b, 16), r.raw(&y.dport, 2), r.raw(&y.sport, 2);
        r.u8(end ? kNatDelete : kNatCreate);
    } else {
        const dp::FlowKey &o = e.k4[0], &y = e.k4[1];
        r.raw(&o.src.be, 4), r.raw(&o.dst.be, 4), r.raw(&o.sport, 2), r.raw(&o.dport, 2), r.u8(o.proto);
        // After the translation: from the masquerade address (or the client's, kept) to the endpoint.
        r.raw(&y.dst.be, 4), r.raw(&y.src.be, 4), r.raw(&y.dport, 2), r.raw(&y.sport, 2);
        r.u8(end ? kNat44Delete : kNat44Create);
    }
    r.u64(ms);  // observationTimeMilliseconds
    r.u64(ms);  // flowStart, or flowEnd
    if (end) {
        r.u8(static_cast<uint8_t>(e.reason));
        r.u64(e.packets[0]), r.u64(e.octets[0]), r.u64(e.packets[1]), r.u64(e.octets[1]);
    }
    r.u8(static_cast<uint8_t>(service.size()));
    r.raw(service.data(), service.size());
    const size_t size = static_cast<size_t>(r.p - buf);
    const size_t need = size + (set_id_ == tid ? 0 : 4);
    if (!msg_.empty() && msg_.size() + need > kMaxMessage) finish();
    export_s_ = export_s;
    if (msg_.empty()) {
        msg_.reserve(kMaxMessage);
        put16(msg_, kVersion), put16(msg_, 0), put32(msg_, 0), put32(msg_, 0), put32(msg_, domain_);
        set_at_ = 0, set_id_ = 0;
    }
    if (set_id_ != tid) {
        if (set_at_) set16(msg_, set_at_ + 2, static_cast<uint16_t>(msg_.size() - set_at_));
        set_at_ = msg_.size(), set_id_ = tid;
        put16(msg_, tid), put16(msg_, 0);
    }
    msg_.append(buf, size);
    ++records_;
}

void IpfixEncoder::finish() {
    if (msg_.empty()) return;
    if (set_at_) set16(msg_, set_at_ + 2, static_cast<uint16_t>(msg_.size() - set_at_));
    set16(msg_, 2, static_cast<uint16_t>(msg_.size()));
    for (int i = 0; i < 4; ++i) msg_[4 + i] = static_cast<char>(export_s_ >> (24 - 8 * i));
    for (int i = 0; i < 4; ++i) msg_[8 + i] = static_cast<char>(sequence_ >> (24 - 8 * i));
    done_.push_back({std::move(msg_), records_});
    sequence_ += static_cast<uint32_t>(records_);
    msg_.clear();
    records_ = 0, set_at_ = 0, set_id_ = 0;
}

std::vector<IpfixEncoder::Message> IpfixEncoder::take(bool flush) {
    if (flush) finish();
    return std::exchange(done_, {});
}

// ---- the exporter -------------------------------------------------------------------------------

struct IpfixExporter::Collector {
    HostPort addr;
    std::string name;  // ADDRESS:PORT
    int fd = -1;
    bool need_templates = true;
    Clock::time_point next_try{}, templates_at{}, templates_until{};
    std::atomic<bool> up{false};
    std::atomic<uint64_t> messages{0}, failures{0};
};

IpfixExporter::IpfixExporter(const IpfixConfig& cfg, std::vector<rte_ring*> rings)
    : cfg_(cfg), rings_(std::move(rings)), enc_(cfg.observation_domain) {
    for (const HostPort& a : cfg_.collectors) {
        Collector& c = collectors_.emplace_back();
        c.addr = a;
        c.name = format_host_port(a);
    }
    tsc_hz_ = rte_get_tsc_hz();
    tsc0_ = rte_get_tsc_cycles();
    unix_ms0_ = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    thread_ = std::thread([this] { run(); });
}

IpfixExporter::~IpfixExporter() {
    stop_.store(true);
    thread_.join();
    for (Collector& c : collectors_)
        if (c.fd >= 0) close(c.fd);
}

void IpfixExporter::set_services(std::unordered_map<uint32_t, std::string> names) {
    std::lock_guard lk(mu_);
    names_ = std::move(names);
}

void IpfixExporter::connect(Collector& c) {
    const auto now = Clock::now();
    if (c.fd >= 0 || now < c.next_try) return;
    c.next_try = now + std::chrono::seconds(1);
    const int fd = socket(c.addr.addr.is_v4() ? AF_INET : AF_INET6,
                          (cfg_.tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC | (cfg_.tcp ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) return;
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (c.addr.addr.is_v4()) {
        auto* s = reinterpret_cast<sockaddr_in*>(&ss);
        s->sin_family = AF_INET, s->sin_port = htons(c.addr.port), s->sin_addr.s_addr = c.addr.addr.v4().be;
        len = sizeof(sockaddr_in);
    } else {
        auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
        s->sin6_family = AF_INET6, s->sin6_port = htons(c.addr.port);
        std::memcpy(&s->sin6_addr, c.addr.addr.v6().b, 16);
        len = sizeof(sockaddr_in6);
    }
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
    if (rc < 0 && errno == EINPROGRESS) {  // TCP: a bounded wait, on the exporter's thread only
        pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
        int err = ETIMEDOUT;
        socklen_t el = sizeof err;
        if (poll(&p, 1, 200) == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        rc = err ? -1 : 0;
    }
    if (rc < 0) {
        close(fd);
        return;
    }
    if (cfg_.tcp) {  // blocking again, each send bounded
        const timeval tv{.tv_sec = 0, .tv_usec = 200000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        (void)fcntl(fd, F_SETFL, 0);
    }
    c.fd = fd;
    c.need_templates = true;
    if (cfg_.tcp) log_info(fmt::format("ipfix: connected to {}", c.name));
}

void IpfixExporter::send_templates(Collector& c) {
    const std::string t = enc_.templates(static_cast<uint32_t>(std::time(nullptr)));
    // Twice at most: over UDP, the first send may only collect the error an ICMP message left on
    // the socket from before the collector came back, and the data after it would then go alone.
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (send(c.fd, t.data(), t.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(t.size())) continue;
        c.need_templates = false;
        c.templates_at = Clock::now();
        std::lock_guard lk(mu_);
        ++templates_sent_;
        return;
    }
}

bool IpfixExporter::send_to(Collector& c, const std::string& msg) {
    connect(c);
    if (c.fd < 0) return false;
    // UDP shows a collector that went away only through an error on a later send, and one that
    // came back not at all: for template_refresh_s after a failure, every message carries the
    // templates (a collector back later has them from the periodic refresh).
    if (c.need_templates || Clock::now() < c.templates_until) send_templates(c);
    const bool ok =
        !c.need_templates && send(c.fd, msg.data(), msg.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(msg.size());
    if (!ok) {
        c.need_templates = true;  // the next message that goes carries them again
        c.templates_until = Clock::now() + std::chrono::seconds(cfg_.template_refresh_s);
        if (cfg_.tcp) {
            log_warning(fmt::format("ipfix: {}: {}; reconnecting", c.name, std::strerror(errno)));
            close(c.fd);
            c.fd = -1;
        }
    }
    c.up.store(ok);
    (ok ? c.messages : c.failures).fetch_add(1);
    return ok;
}

void IpfixExporter::send_all(const std::vector<IpfixEncoder::Message>& msgs) {
    uint64_t dropped = 0;
    for (Collector& c : collectors_) {
        if (cfg_.tcp) {
            for (const IpfixEncoder::Message& m : msgs)
                if (!send_to(c, m.bytes)) dropped += m.records;
            continue;
        }
        // UDP: up to 64 messages a system call.
        connect(c);
        for (size_t i = 0; i < msgs.size();) {
            if (c.fd < 0) {
                for (; i < msgs.size(); ++i) dropped += msgs[i].records;
                break;
            }
            if (c.need_templates || Clock::now() < c.templates_until) send_templates(c);
            if (c.need_templates) {  // the collector refuses even the templates: these messages are lost
                for (; i < msgs.size(); ++i) dropped += msgs[i].records;
                c.failures.fetch_add(1);
                c.up.store(false);
                c.templates_until = Clock::now() + std::chrono::seconds(cfg_.template_refresh_s);
                break;
            }
            constexpr size_t kBatch = 64;
            mmsghdr v[kBatch];
            iovec io[kBatch];
            const size_t k = std::min(kBatch, msgs.size() - i);
            for (size_t j = 0; j < k; ++j) {
                io[j] = iovec{const_cast<char*>(msgs[i + j].bytes.data()), msgs[i + j].bytes.size()};
                v[j] = mmsghdr{};
                v[j].msg_hdr.msg_iov = &io[j];
                v[j].msg_hdr.msg_iovlen = 1;
            }
            const int sent = std::max(0, sendmmsg(c.fd, v, static_cast<unsigned>(k), MSG_NOSIGNAL));
            c.messages.fetch_add(static_cast<uint64_t>(sent));
            i += static_cast<size_t>(sent);
            if (static_cast<size_t>(sent) == k) {
                c.up.store(true);
                continue;
            }
            // The message at i was refused (the collector's port unreachable, most likely): it is
            // lost, the templates go again.
            dropped += msgs[i++].records;
            c.failures.fetch_add(1);
            c.up.store(false);
            c.need_templates = true;
            c.templates_until = Clock::now() + std::chrono::seconds(cfg_.template_refresh_s);
        }
    }
    std::lock_guard lk(mu_);
    dropped_collector_ += dropped;
}

void IpfixExporter::drain(bool final) {
    static thread_local dp::NatEvent buf[256];
    const uint32_t now_s = static_cast<uint32_t>(std::time(nullptr));
    bool any = false;
    for (rte_ring* r : rings_) {
        for (;;) {
            const unsigned n = rte_ring_sc_dequeue_burst_elem(r, buf, sizeof(dp::NatEvent), 256, nullptr);
            if (n == 0) break;
            any = true;
            std::lock_guard lk(mu_);
            for (unsigned i = 0; i < n; ++i) {
                const dp::NatEvent& e = buf[i];
                const bool end = e.type == dp::NatEventType::end;
                if (end ? !cfg_.end : !cfg_.create) continue;
                const int64_t dt = static_cast<int64_t>(e.tsc - tsc0_);
                const uint64_t ms = unix_ms0_ + static_cast<uint64_t>(dt / static_cast<int64_t>(tsc_hz_ / 1000));
                const auto it = names_.find(e.svc_id);
                enc_.add(e, ms, it == names_.end() ? std::string_view() : std::string_view(it->second), now_s);
                ++exported_[end];
            }
            if (n < 256) break;
        }
    }
    const auto now = Clock::now();
    if (any && !pending_since_) pending_since_ = now;
    // A partial message waits at most 100 ms for company.
    const bool flush = final || (enc_.pending_records() && pending_since_ && now - *pending_since_ >= kLinger);
    std::vector<IpfixEncoder::Message> msgs = enc_.take(flush);
    if (flush) pending_since_.reset();
    if (!msgs.empty()) send_all(msgs);
    if (!cfg_.tcp)  // UDP: the templates again every template_refresh_s
        for (Collector& c : collectors_)
            if (now - c.templates_at >= std::chrono::seconds(cfg_.template_refresh_s)) {
                connect(c);
                if (c.fd >= 0) send_templates(c);
            }
}

void IpfixExporter::run() {
    for (Collector& c : collectors_) {
        connect(c);
        if (c.fd >= 0) send_templates(c);
    }
    while (!stop_.load(std::memory_order_relaxed)) {
        size_t before = 0;
        for (rte_ring* r : rings_) before += rte_ring_count(r);
        drain(false);
        if (before == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    drain(true);
}

void IpfixExporter::metrics(MetricsText& m, uint64_t ring_dropped) const {
    std::lock_guard lk(mu_);
    m.family("svcgate_ipfix_events_total", "counter", "NAT events encoded for the IPFIX collectors, by event");
    m.sample("svcgate_ipfix_events_total", "event=\"create\"", exported_[0]);
    m.sample("svcgate_ipfix_events_total", "event=\"delete\"", exported_[1]);
    m.family("svcgate_ipfix_events_dropped_total", "counter",
             "NAT events not exported: a worker's full ring (ring_full), a collector that refused a message "
             "(collector, per collector)");
    m.sample("svcgate_ipfix_events_dropped_total", "reason=\"ring_full\"", ring_dropped);
    m.sample("svcgate_ipfix_events_dropped_total", "reason=\"collector\"", dropped_collector_);
    m.counter("svcgate_ipfix_templates_total", "Template messages sent", templates_sent_);
    m.family("svcgate_ipfix_messages_total", "counter", "IPFIX messages sent to each collector, and refused");
    for (const Collector& c : collectors_) {
        m.sample("svcgate_ipfix_messages_total", fmt::format("collector=\"{}\",result=\"sent\"", c.name),
                 c.messages.load());
        m.sample("svcgate_ipfix_messages_total", fmt::format("collector=\"{}\",result=\"failed\"", c.name),
                 c.failures.load());
    }
    m.family("svcgate_ipfix_collector_up", "gauge", "1 while the last message to a collector went out");
    for (const Collector& c : collectors_)
        m.sample("svcgate_ipfix_collector_up", fmt::format("collector=\"{}\"", c.name), uint64_t{c.up.load()});
}

}  // namespace svcgate::ctl
