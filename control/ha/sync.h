// Flow replication between gateways: the sync thread.
//
// What goes out. A worker hands a flow to its ring (WorkerCtx::sync) when the flow proves itself
// (TCP answered and past the handshake, a datagram flow answered) and when its state changes
// after that (FIN, RST: a replica learns that it closes); the sync thread takes the ids every
// millisecond while there is traffic (backing off to kIdleWaitMs when there is none: an idle
// gateway's sync thread sleeps), reads the records (as a QSBR reader of its own, so no id is reused under it),
// packs them into datagrams (sync_proto.h: up to 24 IPv4 records in one) and sends them to every
// live peer. Every `refresh_seconds` each of this gateway's proven flows is sent again, a slice of
// the table per millisecond of elapsed time: what a lost datagram or a full ring missed is healed, and a replica
// of a long-lived flow does not expire. No deletion is sent: a record carries its idle time, so a
// replica expires when its owner's flow would, and a closing connection's state (replicated as a
// change) shortens it as it does the owner's.
//
// What comes in. Datagrams are checked by sync_proto.h (peer address, MAC, replay, body); a flow
// record becomes a replica: an entry in this gateway's flow table, inserted by the sync thread as
// an owner of its own (the table's last owner), marked with where it came from (Flow::origin), so
// a packet of that flow arriving here is served by it (same endpoint, same masquerade address
// and port) and the worker makes it this gateway's (a takeover). A record of a flow already here
// (a replica refreshed, or a flow of ours a peer carries too) updates its state and idle time when
// it is fresher than ours: whoever saw the last packet knows best. The sync thread ages its own
// records as a worker ages its own.
//
// Liveness. A hello to each peer every `hello_ms`; a peer not heard from for `dead_after_ms` is
// dead (flows are sent only to live peers). A gateway that starts says so in its hellos; each
// peer then sends it a bulk copy of every proven flow it holds (its own and its replicas, paced)
// and says "copied". ready() turns true once every live peer has copied (or after
// kStartWaitSeconds), and the daemon announces nothing before it (health.h).
//
// Taking over addresses. Each hello carries the sender's addresses on ha.takeover_ports (those the
// pods' replies and the nodes' routes point at: its masquerade addresses). When a peer dies, the
// live gateway with the lowest ha.listen address takes them over: adopted() lists them, the
// daemon adds them to its ports and announces them (gratuitous ARP, unsolicited NA), so the
// replies of the dead gateway's connections reach a gateway that holds their replicas. They are
// given back once their owner is heard again and ready.
//
// Handing over (a drain). hand_over() has the sync thread send every flow held here once more to
// every live peer, as a bulk copy; handover() says when every such copy is done. The drained
// gateway then stops in order (its peers take its addresses at once), so a drain with
// replication ends in seconds instead of waiting for its connections.
//
// Runs on: its own thread (start() .. stop()); status(), adopted(), hand_over() and handover()
// from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <rte_rcu_qsbr.h>

#include "control/base/status.h"
#include "control/config/config_model.h"
#include "dataplane/base/enum_names.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/lb/snapshot.h"
#include "control/ha/ha_report.h"
#include "control/ha/sync_proto.h"
#include "dataplane/packet/counters.h"

struct rte_ring;

namespace svcgate::ctl {

// Drops of whole datagrams (sync::Drop) and of single records that were authentic but could not
// be taken (the rest of their datagram is).
#define SVCGATE_RECORD_DROPS(X) X(gone, "gone") X(expired, "expired") X(clash, "clash") X(full, "full")
enum class RecordDrop : uint8_t { SVCGATE_RECORD_DROPS(SVCGATE_ENUM_ID) };
inline constexpr std::array kRecordDropNames{SVCGATE_RECORD_DROPS(SVCGATE_ENUM_NAME)};
inline constexpr unsigned kRecordDrops = kRecordDropNames.size();
inline const char* record_drop_name(RecordDrop d) noexcept { return enum_name(d, kRecordDropNames); }

// Every drop counter by its name: the datagrams' (sync::Drop), then the records' ("record_" +
// RecordDrop); status and the metrics list them so.
report::Keyed<uint64_t> drops_by_name(std::span<const uint64_t, sync::kDrops> datagrams,
                                      std::span<const uint64_t, kRecordDrops> records);

class Syncer {
public:
    // Seconds a starting gateway waits at most for its peers' bulk copies.
    static constexpr double kStartWaitSeconds = 30;
    // Datagrams a bulk copy or the refresh sends per millisecond at most.
    static constexpr unsigned kBulkPerTick = 64;
    // The longest the sync thread sleeps while nothing happens (a datagram wakes it at once):
    // the delay of the first flow event after a quiet spell, and of noticing a dead peer.
    static constexpr uint64_t kIdleWaitMs = 32;
    // Each worker's ring of flow events (ids) for this thread: 1 MiB of ids. At 64-packet
    // bursts one worker proved new flows at 7.4-7.6 M/s in micro_bench, and a ring of 65,536
    // overflowed before this thread had taken the 960,000 events of a run (4 runs of 4); at
    // 262,144 none did. An event a full ring refuses waits for the periodic refresh.
    static constexpr unsigned kEventRing = 1u << 18;
    // Records a bulk copy looks at per millisecond at most (a sparse table is not read at once).
    static constexpr uint32_t kBulkScanPerTick = 65536;

    struct Wiring {
        dp::FlowTable* flows = nullptr;
        dp::FlowTable6* flows6 = nullptr;
        uint16_t owner = 0;            // the tables' owner the replicas are inserted as
        uint16_t workers = 1;          // owners 0..workers-1 are the workers
        std::vector<rte_ring*> rings;  // one per worker
        rte_rcu_qsbr* qsbr = nullptr;
        uint32_t qsbr_id = 0;  // this thread's QSBR reader id (registered by start())
        const std::atomic<const dp::ServiceSnapshot*>* snapshot = nullptr;
        const std::atomic<dp::StatsTable*>* stats = nullptr;
        std::vector<IpAddr> takeover;  // this gateway's addresses on ha.takeover_ports (its hellos)
    };

    Syncer(const HaConfig& cfg, Wiring w);
    ~Syncer();
    Syncer(const Syncer&) = delete;
    Syncer& operator=(const Syncer&) = delete;

    // Opens the socket (ha.listen) and starts the thread.
    Status start();
    void stop();

    bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
    // The dead peers' addresses this gateway holds now, and a number that changes with them.
    std::vector<IpAddr> adopted() const;
    uint64_t adopted_generation() const noexcept { return adopted_gen_.load(std::memory_order_acquire); }
    // Flow replication as status and the metrics show it (ha_report.h): the sync thread's own
    // counts, peers and lag, and the workers' part of replication from their counters `t`.
    // Drops are listed by name: the datagrams' (sync::Drop), then the records' ("record_" +
    // RecordDrop).
    report::Ha status(const dp::WorkerCounters& t) const;

    struct Handover {
        bool started = false, done = false;
        unsigned peers = 0;  // peers whose copy is done
        uint64_t flows = 0;  // flow records sent to each, at most
    };
    void hand_over() noexcept { handover_req_.store(true, std::memory_order_release); }
    Handover handover() const;

private:
    struct Peer;
    void run();
    void tick(uint64_t now_ms);
    void receive(uint64_t now_ms);
    void take_events();
    void refresh_slice(uint64_t now_ms);
    void bulk_copies();
    void start_handover(uint64_t now_ms);
    void hellos(uint64_t now_ms);
    void update_ready(uint64_t now_ms);
    void expire(uint64_t now_ms);
    void takeovers(uint64_t now_ms);
    template <typename K>
    void take_record(dp::BasicFlowInit<K>& in, uint32_t idle, Peer& from);
    template <typename K>
    void add(const dp::BasicFlow<K>& f);
    void flush();
    void send_to_live(const uint8_t* d, size_t n, uint16_t records);
    void send(Peer& p, const uint8_t* d, size_t n, uint16_t records);
    void importer_for_snapshot();

    HaConfig cfg_;
    Wiring w_;
    uint32_t self_id_;  // sync::peer_id of ha.listen
    int fd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> ready_{false};
    sync::Sealer sealer_;
    std::vector<std::unique_ptr<Peer>> peers_;
    uint64_t start_ms_ = 0;

    // The batch being filled (records for every live peer).
    uint8_t body_[sync::kMaxBody];
    size_t body_len_ = 0;
    uint16_t body_records_ = 0;

    // Refresh position: ids of the IPv4 table, then of the IPv6 one.
    uint64_t refresh_pos_ = 0;
    uint64_t refresh_last_ms_ = 0;
    uint64_t hello_last_ms_ = 0;
    bool backlog_ = false;  // the last tick left flows in a ring: no sleep before the next
    std::atomic<bool> handover_req_{false};
    Handover handover_;     // under mu_
    bool active_ = false;   // the last tick received flow records, took events or copied
    uint64_t wait_ms_ = 1;  // the next sleep: 1 ms while active, doubling to kIdleWaitMs while idle
    uint64_t count_last_ms_ = 0, expire_last_ms_ = 0;

    // The importer for the current snapshot (rebuilt when the generation changes).
    struct Importer;
    std::unique_ptr<Importer> importer_;

    std::atomic<uint64_t> adopted_gen_{0};
    std::vector<IpAddr> adopted_;  // under mu_

    // What the sync thread counts, written under mu_, read by status().
    struct Counts {
        uint32_t replicas = 0;   // live replicas held (not taken over)
        uint64_t refreshed = 0;  // flows sent by the periodic refresh
        uint64_t send_errors = 0;
        uint64_t drops[sync::kDrops] = {};
        uint64_t record_drops[kRecordDrops] = {};
    };
    mutable std::mutex mu_;
    Counts counts_;
    std::string listen_;  // ha.listen as ADDRESS:PORT
};

// The sync thread's QSBR reader id and the table owner it inserts as, given the workers: the
// daemon sizes the RCU state and the tables with them.
inline uint16_t sync_owner(uint16_t workers) noexcept { return workers; }
inline uint32_t sync_qsbr_id(uint16_t workers) noexcept { return workers + 1u; }

}  // namespace svcgate::ctl
