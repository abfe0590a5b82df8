// bench/pace: a paced sender and receiver on one DPDK port, for the time a packet spends inside
// the gateway at an offered load (bench/README.md, "Latency"; issue 71).
//
//   pace [EAL options] -- --pcap FILE [--rate PPS] [--warmup S] [--seconds S] [--new-flows]
//
// The port is the first the EAL offers: a net_memif client whose server is svcgate's port (or
// testpmd's, the floor), so the two processes share only that link. The capture's IPv4 frames are
// sent in turn, `rate` packets a second, paced by the TSC (0: as fast as the port takes them).
// Each frame carries its send number in the IPv4 identification (the header checksum redone),
// which svcgate's translation and testpmd's 5tswap both leave alone; what comes back is matched
// by it to its send time, so the round trip of every packet is known without touching the
// payload or the L4 checksum. With --new-flows each frame also gets a source address and port of
// its own (its L4 checksum redone): every packet opens a flow.
//
// After `warmup` seconds, `seconds` of sending and receiving are measured; one JSON object:
// offered and received rates (Mpps), the round trip's p50, p90, p99, p99.9 and max (µs, in 50 ns
// buckets up to 10 ms, then one bucket), what was sent, received and lost in the window, and how
// often the sender fell behind its pace by more than 4 bursts (`late`: it then skips the numbers it
// owes, so the rate offered is lower than asked, and the JSON says what it was) and how often the
// port took less than a burst (`refused`: those frames are freed, not sent).
//
// A send number wraps at 2^16: a packet that comes back after 65,536 later sends is matched to
// the newer one (its round trip reads short), and the newer one then counts as lost. At 10 Mpps
// that is a round trip over 6.5 ms.
//
// The round trip is the sender's view: the port both ways, the peer's receive burst, its work and
// its transmit. svcgate's own histogram (dataplane.latency_sampling, in `svcgatectl stats`) is the
// time inside it; testpmd gives the floor of both.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "control/trace/pcap_io.h"

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint64_t kBucketNs = 50;
constexpr size_t kBuckets = 10'000'000 / kBucketNs;  // up to 10 ms; beyond: the last bucket

struct Options {
    std::string pcap;
    uint64_t rate = 0;  // packets a second; 0: as fast as the port takes them
    double warmup = 2;
    double seconds = 5;
    bool new_flows = false;
};

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "pace: %s\n", why.c_str());
    std::exit(1);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die(a + " needs a value");
            return argv[++i];
        };
        if (a == "--pcap")
            o.pcap = value();
        else if (a == "--rate")
            o.rate = std::strtoull(value().c_str(), nullptr, 10);
        else if (a == "--warmup")
            o.warmup = std::atof(value().c_str());
        else if (a == "--seconds")
            o.seconds = std::atof(value().c_str());
        else if (a == "--new-flows")
            o.new_flows = true;
        else
            die("unknown option " + a + " (--pcap FILE [--rate PPS] [--warmup S] [--seconds S] [--new-flows])");
    }
    if (o.pcap.empty()) die("--pcap FILE is required");
    if (o.seconds <= 0 || o.warmup < 0) die("--seconds must be > 0 and --warmup >= 0");
    return o;
}

// A frame of the capture that can be sent: its bytes and where its IPv4 header starts.
struct Template {
    std::vector<uint8_t> bytes;
    uint16_t l3 = 0;
};

std::vector<Template> templates_of(const std::string& path) {
    std::vector<svcgate::ctl::Frame> frames;
    if (auto st = svcgate::ctl::read_pcap(path, frames); !st) die(st.error());
    std::vector<Template> out;
    for (auto& f : frames) {
        uint16_t l3 = 14;
        if (f.size() >= 18 && f[12] == 0x81 && f[13] == 0x00) l3 = 18;
        // An IPv4 frame that fits one mbuf, its header and (TCP, UDP) its ports in the frame.
        if (f.size() < l3 + sizeof(rte_ipv4_hdr) || f.size() > RTE_MBUF_DEFAULT_DATAROOM) continue;
        if (f[l3 - 2] != 0x08 || f[l3 - 1] != 0x00 || (f[l3] >> 4) != 4 || (f[l3] & 0xf) < 5) continue;
        size_t l4 = l3 + (f[l3] & 0xfu) * 4;
        uint8_t proto = f[l3 + 9];
        if (l4 +
                (proto == IPPROTO_TCP       ? sizeof(rte_tcp_hdr)
                     : proto == IPPROTO_UDP ? sizeof(rte_udp_hdr)
                                            : 0) >
            f.size())
            continue;
        out.push_back({std::move(f), l3});
    }
    if (out.empty()) die(path + " holds no IPv4 frame");
    return out;
}

// The round trips, in 50 ns buckets.
struct Histogram {
    std::vector<uint64_t> counts = std::vector<uint64_t>(kBuckets, 0);
    uint64_t total = 0;
    uint64_t max_ns = 0;

    void add(uint64_t ns) {
        counts[std::min<uint64_t>(ns / kBucketNs, kBuckets - 1)]++;
        total++;
        max_ns = std::max(max_ns, ns);
    }
    // The upper edge of the bucket that holds quantile q, in µs.
    double quantile_us(double q) const {
        if (!total) return 0;
        uint64_t want = static_cast<uint64_t>(q * static_cast<double>(total - 1)) + 1, seen = 0;
        for (size_t b = 0; b < kBuckets; ++b) {
            seen += counts[b];
            if (seen >= want)  // the bucket's upper edge; the last one's is the largest seen
                return static_cast<double>(b + 1 == kBuckets ? max_ns : std::min((b + 1) * kBucketNs, max_ns)) / 1000.0;
        }
        return static_cast<double>(max_ns) / 1000.0;
    }
};

// Writes send number `seq` into the frame (and, for a new flow, a source of its own), the
// checksums redone.
void stamp(uint8_t* frame, const Template& t, uint64_t seq, bool new_flow) {
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(frame + t.l3);
    ip->packet_id = rte_cpu_to_be_16(static_cast<uint16_t>(seq));
    if (new_flow) {
        // 11.0.0.0/8 and ports 1024-65535: 2^24 × 64,512 distinct sources before one repeats.
        ip->src_addr = rte_cpu_to_be_32(0x0B000000u | static_cast<uint32_t>((seq / 64512) & 0xFFFFFF));
        uint16_t sport = rte_cpu_to_be_16(static_cast<uint16_t>(1024 + seq % 64512));
        uint8_t* l4 = frame + t.l3 + rte_ipv4_hdr_len(ip);
        if (ip->next_proto_id == IPPROTO_TCP) {
            auto* tcp = reinterpret_cast<rte_tcp_hdr*>(l4);
            tcp->src_port = sport;
            tcp->cksum = 0;
            tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
        } else if (ip->next_proto_id == IPPROTO_UDP) {
            auto* udp = reinterpret_cast<rte_udp_hdr*>(l4);
            udp->src_port = sport;
            udp->dgram_cksum = 0;
            udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
        }
    }
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
}

uint16_t first_port() {
    uint16_t port;
    RTE_ETH_FOREACH_DEV(port) return port;
    die("no port: give the EAL a --vdev (net_memif0,role=client,socket=...)");
}

void start_port(uint16_t port, rte_mempool* pool) {
    rte_eth_conf conf{};
    if (rte_eth_dev_configure(port, 1, 1, &conf) != 0) die("the port cannot be configured");
    if (rte_eth_rx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), nullptr, pool) != 0 ||
        rte_eth_tx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), nullptr) != 0)
        die("the port's queues cannot be set up");
    if (rte_eth_dev_start(port) != 0) die("the port cannot be started");
    // A memif link is up once its peer has connected: wait for it, at most 60 s.
    for (int i = 0; i < 600; ++i) {
        rte_eth_link link{};
        if (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status) return;
        rte_delay_ms(100);
    }
    die("the port's link did not come up in 60 s (is the peer running?)");
}

// The pace's loop: what it has sent and received, and the round trips of the measured window.
struct Pacer {
    Options o;
    std::vector<Template> tpl;
    uint16_t port = 0;
    rte_mempool* pool = nullptr;
    uint64_t hz = rte_get_tsc_hz();
    double ns_per_tick = 1e9 / static_cast<double>(rte_get_tsc_hz());
    std::vector<uint64_t> sent_at = std::vector<uint64_t>(65536, 0);  // by send number mod 2^16
    Histogram hist;
    uint64_t seq = 0, late = 0, refused = 0, window_sent = 0, window_received = 0;
    uint64_t t0 = 0, measure_from = 0, measure_to = 0;
    size_t next_tpl = 0;
    std::array<rte_mbuf*, kBurst> rx{}, tx{};

    // A burst of what came back: each frame timed against its send, when sent in the window.
    void receive(uint64_t now) {
        uint16_t n = rte_eth_rx_burst(port, 0, rx.data(), kBurst);
        for (uint16_t i = 0; i < n; ++i) {
            const uint8_t* f = rte_pktmbuf_mtod(rx[i], const uint8_t*);
            uint16_t l3 = (rx[i]->data_len >= 18 && f[12] == 0x81 && f[13] == 0x00) ? 18 : 14;
            if (rx[i]->data_len < l3 + sizeof(rte_ipv4_hdr) || f[l3 - 2] != 0x08 || f[l3 - 1] != 0x00) continue;
            auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(f + l3);
            uint64_t& at = sent_at[rte_be_to_cpu_16(ip->packet_id)];
            if (at >= measure_from && at < measure_to) {
                hist.add(static_cast<uint64_t>(static_cast<double>(now - at) * ns_per_tick));
                window_received++;
            }
            at = 0;  // matched once: a duplicate is not a second round trip
        }
        rte_pktmbuf_free_bulk(rx.data(), n);
    }

    // How many the pace owes by `now`, at most a burst (a burst when unpaced); 0: none yet.
    uint64_t owed(uint64_t now) {
        if (!o.rate) return kBurst;
        auto due = static_cast<uint64_t>(static_cast<double>(now - t0) * static_cast<double>(o.rate) /
                                         static_cast<double>(hz));
        if (due <= seq) return 0;
        if (due - seq > 4 * kBurst) {  // behind by more than a few bursts: say so, and catch up at once
            late++;
            seq = due - kBurst;
        }
        return std::min<uint64_t>(due - seq, kBurst);
    }

    // Sends `n` frames, each stamped with its send number; what the port refuses is freed.
    void send(uint64_t n) {
        if (rte_pktmbuf_alloc_bulk(pool, tx.data(), static_cast<unsigned>(n)) != 0) return;
        for (uint64_t i = 0; i < n; ++i) {
            const Template& t = tpl[next_tpl];
            next_tpl = next_tpl + 1 == tpl.size() ? 0 : next_tpl + 1;
            auto* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(tx[i], static_cast<uint16_t>(t.bytes.size())));
            std::memcpy(f, t.bytes.data(), t.bytes.size());
            stamp(f, t, seq + i, o.new_flows);
        }
        uint64_t at = rte_rdtsc();
        for (uint64_t i = 0; i < n; ++i) sent_at[(seq + i) & 0xFFFF] = at;
        uint16_t took = rte_eth_tx_burst(port, 0, tx.data(), static_cast<uint16_t>(n));
        if (took < n) {
            refused++;
            rte_pktmbuf_free_bulk(tx.data() + took, static_cast<unsigned>(n - took));
            for (uint64_t i = took; i < n; ++i) sent_at[(seq + i) & 0xFFFF] = 0;
        }
        if (at >= measure_from && at < measure_to) window_sent += took;
        seq += o.rate ? n : took;
    }

    void run() {
        t0 = rte_rdtsc();
        measure_from = t0 + static_cast<uint64_t>(o.warmup * static_cast<double>(hz));
        measure_to = measure_from + static_cast<uint64_t>(o.seconds * static_cast<double>(hz));
        // Past the window, a short drain: what is still in flight comes back and is counted.
        const uint64_t drain_to = measure_to + hz / 20;
        for (uint64_t now = rte_rdtsc(); now < drain_to; now = rte_rdtsc()) {
            receive(now);
            if (now >= measure_to) continue;
            if (uint64_t n = owed(now)) send(n);
        }
    }

    void print() const {
        if (!hist.total) {
            std::printf("{\"rate_asked\": %" PRIu64 ", \"offered_mpps\": %.4f, \"mpps\": 0, \"sent\": %" PRIu64
                        ", \"received\": 0, \"lost\": %" PRIu64 ", \"late\": %" PRIu64 ", \"refused\": %" PRIu64
                        ", \"rtt_us\": null}\n",
                        o.rate, static_cast<double>(window_sent) / o.seconds / 1e6, window_sent, window_sent, late,
                        refused);
            return;
        }
        std::printf("{\"rate_asked\": %" PRIu64 ", \"offered_mpps\": %.4f, \"mpps\": %.4f, \"sent\": %" PRIu64
                    ", \"received\": %" PRIu64 ", \"lost\": %" PRId64 ", \"late\": %" PRIu64 ", \"refused\": %" PRIu64
                    ", \"rtt_us\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f}}\n",
                    o.rate, static_cast<double>(window_sent) / o.seconds / 1e6,
                    static_cast<double>(window_received) / o.seconds / 1e6, window_sent, window_received,
                    static_cast<int64_t>(window_sent) - static_cast<int64_t>(window_received), late, refused,
                    hist.quantile_us(0.5), hist.quantile_us(0.9), hist.quantile_us(0.99), hist.quantile_us(0.999),
                    static_cast<double>(hist.max_ns) / 1000.0);
    }
};

}  // namespace

int main(int argc, char** argv) {
    int used = rte_eal_init(argc, argv);
    if (used < 0) die("the EAL did not start");
    Pacer p;
    p.o = parse(argc - used - 1, argv + used + 1);
    p.tpl = templates_of(p.o.pcap);
    p.pool = rte_pktmbuf_pool_create("pace", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
    if (!p.pool) die("no mbuf pool");
    p.port = first_port();
    start_port(p.port, p.pool);
    p.run();
    rte_eth_dev_stop(p.port);
    p.print();
    rte_eal_cleanup();
    return 0;
}
