// NAT events as IPFIX (RFC 7011) NAT logging (RFC 8158): the encoder of svcgate's four templates
// and their records, and the exporter's thread, which drains the workers' event rings
// (dataplane/flow/nat_event.h) and sends messages to each collector over UDP or TCP.
//
// The encoder is ours, not libfixbuf's: four fixed templates and a record copy are a few lines,
// while the exporter must decide itself what a slow or absent collector costs (drop and count,
// never wait: the rings behind it fill and the workers drop, counted, instead), which a library
// that writes through its own buffers and sockets would decide for it (docs/dependencies.md).
//
// Runs on: the exporter's thread; metrics() and set_services() on others (under its lock).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <deque>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "control/base/metrics_text.h"
#include "control/config/config_model.h"
#include "dataplane/flow/nat_event.h"

struct rte_ring;

namespace svcgate::ctl {

// Information elements (IANA) and svcgate's template ids.
namespace ipfix {
inline constexpr uint16_t kVersion = 10;
inline constexpr uint16_t kTemplateSet = 2;
inline constexpr uint16_t kCreate4 = 256, kEnd4 = 257, kCreate6 = 258, kEnd6 = 259;
// natEvent (IANA "NAT Event Type"): NAT44 session create / delete for IPv4; for IPv6 the
// generic translation create / delete, as no NAT66 event is registered.
inline constexpr uint8_t kNat44Create = 4, kNat44Delete = 5, kNatCreate = 1, kNatDelete = 2;
}  // namespace ipfix

// Messages of at most kMaxMessage bytes (no IP fragmentation on any usual path), each with a
// header whose sequence number counts the data records sent before it, as RFC 7011 asks.
class IpfixEncoder {
public:
    static constexpr size_t kMaxMessage = 1400;
    explicit IpfixEncoder(uint32_t domain) : domain_(domain) {}

    // The four templates, as one message.
    std::string templates(uint32_t export_s) const;
    // One event's record into the message being built; a message with no room for it is
    // finished first (take() gives it). `ms`: when it happened, Unix milliseconds.
    void add(const dp::NatEvent& e, uint64_t ms, std::string_view service, uint32_t export_s);
    struct Message {
        std::string bytes;
        size_t records = 0;
    };
    // The finished messages, and with `flush` the one being built too.
    std::vector<Message> take(bool flush);
    size_t pending_records() const { return records_; }

private:
    void finish();
    uint32_t domain_;
    uint32_t sequence_ = 0;  // data records before the message being built
    std::string msg_;        // being built: header, sets
    size_t set_at_ = 0;      // where the open data set's header is (0: none)
    uint16_t set_id_ = 0;
    size_t records_ = 0;  // in msg_
    uint32_t export_s_ = 0;
    std::vector<Message> done_;
};

class IpfixExporter {
public:
    IpfixExporter(const IpfixConfig& cfg, std::vector<rte_ring*> rings);
    ~IpfixExporter();  // the rings drained a last time, what is built sent
    IpfixExporter(const IpfixExporter&) = delete;
    IpfixExporter& operator=(const IpfixExporter&) = delete;

    // ServicePort::id → "namespace/name:port" after each publish (events carry the id).
    void set_services(std::unordered_map<uint32_t, std::string> names);
    // `ring_dropped`: the workers' events their full rings refused (WorkerCounters).
    void metrics(MetricsText& m, uint64_t ring_dropped) const;

private:
    struct Collector;
    void run();
    void drain(bool final);
    void send_all(const std::vector<IpfixEncoder::Message>& msgs);
    bool send_to(Collector& c, const std::string& msg);
    void connect(Collector& c);
    void send_templates(Collector& c);

    IpfixConfig cfg_;
    std::vector<rte_ring*> rings_;
    IpfixEncoder enc_;
    std::deque<Collector> collectors_;
    uint64_t tsc0_ = 0, unix_ms0_ = 0, tsc_hz_ = 1;
    mutable std::mutex mu_;  // names_ and the counters
    std::unordered_map<uint32_t, std::string> names_;
    uint64_t exported_[2] = {}, dropped_collector_ = 0, templates_sent_ = 0;
    static constexpr std::chrono::milliseconds kLinger{100};
    std::optional<std::chrono::steady_clock::time_point> pending_since_;  // the oldest record not sent
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace svcgate::ctl
