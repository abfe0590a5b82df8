#include "control/daemon/resources.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pdump.h>

#include "control/base/log.h"
#include "control/daemon/mempool_ops.h"
#include "control/trace/trace.h"
#include "dataplane/pipeline/output.h"

namespace svcgate::ctl {

namespace {

// "net_af_packet0,iface=x" is a virtual device; anything else is a bus address (PCI).
bool is_vdev(const std::string& dev) { return dev.rfind("net_", 0) == 0; }
std::string dev_name(const std::string& dev) { return dev.substr(0, dev.find(',')); }

bool has_lcore_arg(const std::vector<std::string>& v) {
    for (const auto& a : v)
        if (a == "-c" || a.rfind("-l", 0) == 0 || a.rfind("--lcores", 0) == 0) return true;
    return false;
}
}  // namespace

Status Eal::init(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
#ifdef SVCGATE_DPDK_STATIC
    // DPDK linked in: no plugins, so the mempool handlers are ours (mempool_ops.h).
    if (!fill_mempool_ops())
        log_warning("mempool handlers: a linked driver registered its own; dpdk-dumpcap may not capture");
#endif
    if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0)
        return Status::fail(fmt::format("EAL initialisation failed: {}", rte_strerror(rte_errno)));
    up_ = true;
    pdump_ = rte_pdump_init() == 0;
    if (!pdump_) log_warning("packet capture (dpdk-dumpcap) unavailable: multi-process is off (--in-memory?)");
    return {};
}

Eal::~Eal() {
    if (pdump_) rte_pdump_uninit();
    if (up_) rte_eal_cleanup();
}

void RteFree::operator()(void* p) const noexcept { rte_free(p); }

Port::~Port() {
    if (started_) rte_eth_dev_stop(id_);
    if (configured_) rte_eth_dev_close(id_);
}

// What the driver reports of its RSS (after start: some drivers fill the RETA then), as the
// masquerade's steering tables.
void Port::read_steering(const char* driver, uint16_t reta_size, bool rss) {
    if (!rss) {
        steer_note_ =
            rxq_ > 1 ? fmt::format("off: {} spreads its queues without RSS", driver) : "off: one receive queue";
        return;
    }
    uint8_t key[dp::kRssKeyMax] = {};
    rte_eth_rss_conf conf{};
    conf.rss_key = key;
    conf.rss_key_len = sizeof key;
    if (int rc = rte_eth_dev_rss_hash_conf_get(id_, &conf); rc != 0) {
        steer_note_ = fmt::format("off: {} does not report its RSS key ({})", driver, rte_strerror(-rc));
        return;
    }
    if (conf.rss_key_len < dp::kRssInput6 + 4) {
        steer_note_ = fmt::format("off: {}'s RSS key has {} bytes, fewer than IPv6's 40", driver, conf.rss_key_len);
        return;
    }
    if (reta_size == 0 || reta_size > dp::RssSteer::kRetaMax || (reta_size & (reta_size - 1)) != 0) {
        steer_note_ = fmt::format("off: {} has a redirection table of {} entries", driver, reta_size);
        return;
    }
    std::vector<rte_eth_rss_reta_entry64> reta(std::max<size_t>(1, reta_size / RTE_ETH_RETA_GROUP_SIZE));
    for (auto& e : reta) e.mask = ~0ULL;
    if (int rc = rte_eth_dev_rss_reta_query(id_, reta.data(), reta_size); rc != 0) {
        steer_note_ = fmt::format("off: {} does not report its redirection table ({})", driver, rte_strerror(-rc));
        return;
    }
    auto s = std::make_unique<dp::RssSteer>();
    const std::span<const uint8_t> k(key, conf.rss_key_len);
    s->t4.init(k);
    s->t6.init(k);
    s->reta_mask = reta_size - 1u;
    for (uint32_t i = 0; i < reta_size; ++i) {
        s->reta[i] = reta[i / RTE_ETH_RETA_GROUP_SIZE].reta[i % RTE_ETH_RETA_GROUP_SIZE];
        if (s->reta[i] >= rxq_) {
            steer_note_ = fmt::format("off: {}'s redirection table names queue {} of {}", driver, s->reta[i], rxq_);
            return;
        }
    }
    s->tcp4 = conf.rss_hf & RTE_ETH_RSS_NONFRAG_IPV4_TCP;
    s->udp4 = conf.rss_hf & RTE_ETH_RSS_NONFRAG_IPV4_UDP;
    s->tcp6 = conf.rss_hf & RTE_ETH_RSS_NONFRAG_IPV6_TCP;
    s->udp6 = conf.rss_hf & RTE_ETH_RSS_NONFRAG_IPV6_UDP;
    if (!(s->tcp4 || s->udp4 || s->tcp6 || s->udp6)) {
        steer_note_ = fmt::format("off: {} hashes addresses only, not ports", driver);
        return;
    }
    steer_note_ = fmt::format("on: Toeplitz key of {} bytes, redirection table of {} entries over {} queues{}{}{}{}",
                              conf.rss_key_len, reta_size, rxq_, s->tcp4 ? ", tcp4" : "", s->udp4 ? ", udp4" : "",
                              s->tcp6 ? ", tcp6" : "", s->udp6 ? ", udp6" : "");
    steer_ = std::move(s);
}

namespace {

// The port's MTU, where the device takes it, else 0 (what svcgate sends is bounded by the config
// either way: dataplane/l3/mtu.h). A driver may take an MTU past the frames it says it receives
// (net_af_packet: 1518 bytes, whatever its ring's frames hold): ethdev refuses that.
uint16_t device_mtu(const PortConfig& pc, const rte_eth_dev_info& info) {
    const uint32_t frame = pc.mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    if (pc.mtu >= info.min_mtu && pc.mtu <= info.max_mtu && frame <= info.max_rx_pktlen) return pc.mtu;
    log_info(
        fmt::format("port {}: {} takes MTUs {}..{} and frames up to {} bytes; {} is enforced on what "
                    "svcgate sends only",
                    pc.name, info.driver_name, info.min_mtu, info.max_mtu, info.max_rx_pktlen, pc.mtu));
    return 0;
}

}  // namespace

Status Port::open(const PortConfig& pc, uint16_t workers, rte_mempool* pool) {
    const std::string name = dev_name(pc.device);
    if (rte_eth_dev_get_port_by_name(name.c_str(), &id_) != 0)
        return Status::fail(
            fmt::format("port {}: no DPDK device \"{}\" (is it bound / is the vdev right?)", pc.name, name));
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(id_, &info) != 0)
        return Status::fail(fmt::format("port {}: cannot read device info", pc.name));
    rte_eth_conf conf{};
    conf.rxmode.mtu = device_mtu(pc, info);
    // One receive queue per worker where the device has them. With RSS the NIC spreads flows over
    // them; without it each queue is fed on its own (a net_pcap file, an af_packet fanout
    // socket). The flow table is shared, so a flow may arrive on any queue either way.
    const bool rss = workers > 1 && info.max_rx_queues >= workers && info.flow_type_rss_offloads != 0;
    rxq_ = static_cast<uint16_t>(std::clamp<uint32_t>(info.max_rx_queues, 1, workers));
    txq_ = static_cast<uint16_t>(std::min<uint32_t>(workers, std::max<uint16_t>(info.max_tx_queues, 1)));
    if (rss) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf =
            (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_SCTP) & info.flow_type_rss_offloads;
    } else if (workers > 1) {
        log_info(fmt::format("port {}: {} has no RSS; {} receive queue(s) fed by the device itself", pc.name,
                             info.driver_name, rxq_));
    }
    int rc = rte_eth_dev_configure(id_, rxq_, txq_, &conf);
    if (rc != 0 && conf.rxmode.mtu) {
        // A bond says its own limits, and finds its members' only as it configures them (DPDK's
        // TAP driver takes 1522-byte frames): the MTU left to the device.
        log_info(fmt::format("port {}: {} refused MTU {} ({}); {} is enforced on what svcgate sends only", pc.name,
                             info.driver_name, pc.mtu, rte_strerror(-rc), pc.mtu));
        conf.rxmode.mtu = 0;
        rc = rte_eth_dev_configure(id_, rxq_, txq_, &conf);
    }
    if (rc != 0) return Status::fail(fmt::format("port {}: configure: {}", pc.name, rte_strerror(-rc)));
    configured_ = true;
    uint16_t nrx = kRxDesc, ntx = kTxDesc;
    rte_eth_dev_adjust_nb_rx_tx_desc(id_, &nrx, &ntx);
    const int socket = rte_eth_dev_socket_id(id_);
    for (uint16_t q = 0; q < rxq_; ++q)
        if ((rc = rte_eth_rx_queue_setup(id_, q, nrx, socket, nullptr, pool)) != 0)
            return Status::fail(fmt::format("port {}: rx queue {}: {}", pc.name, q, rte_strerror(-rc)));
    for (uint16_t q = 0; q < txq_; ++q)
        if ((rc = rte_eth_tx_queue_setup(id_, q, ntx, socket, nullptr)) != 0)
            return Status::fail(fmt::format("port {}: tx queue {}: {}", pc.name, q, rte_strerror(-rc)));
    if (pc.mac) {
        rte_ether_addr m;
        std::memcpy(m.addr_bytes, pc.mac->data(), 6);
        // A device that cannot take it (net_pcap) still receives every frame (promiscuous
        // below): svcgate sends and answers with the configured MAC all the same.
        if ((rc = rte_eth_dev_default_mac_addr_set(id_, &m)) != 0) {
            if (rc != -ENOTSUP)
                return Status::fail(fmt::format("port {}: {} cannot take MAC {}: {}", pc.name, info.driver_name,
                                                format_mac(m), rte_strerror(-rc)));
            log_info(fmt::format("port {}: {} cannot set its MAC; svcgate uses {} in what it sends and answers",
                                 pc.name, info.driver_name, format_mac(m)));
        }
        mac_ = m;
        have_mac_ = true;
    }
    if ((rc = rte_eth_dev_start(id_)) != 0)
        return Status::fail(fmt::format("port {}: start: {}", pc.name, rte_strerror(-rc)));
    started_ = true;
    rte_eth_promiscuous_enable(id_);  // best effort: ARP for VIPs uses our own MAC anyway
    read_steering(info.driver_name, info.reta_size, rss);
    const rte_ether_addr m = mac();
    const uint8_t* b = m.addr_bytes;
    log_info(fmt::format("port {}: {} ({}), {} rx / {} tx queues, mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                         pc.name, name, info.driver_name, rxq_, txq_, b[0], b[1], b[2], b[3], b[4], b[5]));
    if (workers > 1) log_info(fmt::format("port {}: masquerade ports chosen for RSS: {}", pc.name, steer_note_));
    return {};
}

void Port::share(const Port& device) {
    id_ = device.id_;
    rxq_ = device.rxq_;
    txq_ = device.txq_;
    have_mac_ = device.have_mac_;
    mac_ = device.mac_;
    polls_ = false;
    steer_ = device.steer_;
    steer_note_ = device.steer_note_;
}

rte_ether_addr Port::mac() const {
    if (have_mac_) return mac_;
    rte_ether_addr m{};
    rte_eth_macaddr_get(id_, &m);
    return m;
}

const BondConfig* bond_of(const DataplaneConfig& dpc, const std::string& device) {
    for (const BondConfig& b : dpc.bonds)
        if (b.name == device) return &b;
    return nullptr;
}

std::string bond_device(const BondConfig& b) {
    // DPDK 22.11's bonding arguments: mode 4 is 802.3ad, 1 active-backup; a member is a "slave";
    // the transmit policies l2, l23, l34 are Linux's layer2, layer2+3, layer3+4.
    std::string s = fmt::format("net_bonding_{},mode={}", b.name, b.mode == BondConfig::Mode::lacp ? 4 : 1);
    for (const std::string& m : b.members) s += ",slave=" + dev_name(m);
    const std::string_view hash = b.transmit_hash == "layer2" ? "l2" : b.transmit_hash == "layer2+3" ? "l23" : "l34";
    return s + fmt::format(",xmit_policy={}", hash);
}

Status eal_args(const DataplaneConfig& dpc, const std::vector<std::string>& extra, std::vector<std::string>& args) {
    args = {"svcgate"};
    args.insert(args.end(), dpc.eal.begin(), dpc.eal.end());
    for (size_t i = 0; i < dpc.ports.size(); ++i) {
        const PortConfig& p = dpc.ports[i];
        if (p.device.empty()) return Status::fail(fmt::format("port {} has no device", p.name));
        if (std::any_of(dpc.ports.begin(), dpc.ports.begin() + static_cast<ptrdiff_t>(i),
                        [&](const PortConfig& o) { return o.device == p.device; }))
            continue;  // a VLAN of a device named already
        auto name = [&](const std::string& dev) {
            if (is_vdev(dev))
                args.push_back("--vdev=" + dev);
            else
                args.insert(args.end(), {"-a", dev});
        };
        if (const BondConfig* b = bond_of(dpc, p.device)) {  // its members first: the driver finds them by name
            for (const std::string& m : b->members) name(m);
            name(bond_device(*b));
        } else {
            name(p.device);
        }
    }
    args.insert(args.end(), extra.begin(), extra.end());
    if (!has_lcore_arg(args)) args.insert(args.begin() + 1, {"-l", fmt::format("0-{}", dpc.workers)});
    return {};
}

namespace {

uint32_t pool_size(uint32_t need) {
    uint32_t n = 1;  // 2^n - 1 mbufs suit the pool's ring best
    while (n < need) n <<= 1;
    return n - 1;
}

}  // namespace

Status create_packet_pools(const DataplaneConfig& dpc, MempoolPtr& pool, MempoolPtr& jumbo) {
    const uint32_t nports = static_cast<uint32_t>(dpc.ports.size());
    const uint32_t in_flight =
        dpc.workers * (dp::Output::kHold + nports * dp::Output::kBatch + 2 * dp::kBurst) + dpc.fragments.max_held;
    uint32_t need = nports * dpc.workers * (kRxDesc + kTxDesc) + in_flight + 4096;
    uint32_t jumbo_need = nports * dpc.workers * kTxDesc + in_flight + 1024;
    uint16_t jumbo_mtu = 0;
    for (const PortConfig& p : dpc.ports) {
        if (!p.host_interface.empty())  // a host interface: one queue each way, batches per worker
            need += kRxDesc + kTxDesc + dpc.workers * dp::Output::kBatch;
        if (p.mtu <= kMaxStdMtu) continue;
        jumbo_mtu = std::max(jumbo_mtu, p.mtu);
        jumbo_need += dpc.workers * kRxDesc + (p.host_interface.empty() ? 0 : kRxDesc);
    }
    const uint32_t n = std::max(pool_size(need), dpc.mbufs);  // as configured, when more
    pool.reset(rte_pktmbuf_pool_create("svcgate_mbufs", n, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       static_cast<int>(rte_socket_id())));
    if (!pool) return Status::fail(fmt::format("mempool of {} mbufs: {}", n, rte_strerror(rte_errno)));
    if (!jumbo_mtu) return {};
    // The largest frame: Ethernet header, VLAN tag and the MTU; rounded up to a whole KiB.
    const uint16_t room =
        static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + RTE_ALIGN_CEIL(jumbo_mtu + RTE_ETHER_HDR_LEN + 4u, 1024u));
    const uint32_t nj = pool_size(jumbo_need);
    jumbo.reset(rte_pktmbuf_pool_create("svcgate_jumbo", nj, 256, 0, room, static_cast<int>(rte_socket_id())));
    if (!jumbo)
        return Status::fail(
            fmt::format("jumbo mempool of {} mbufs of {} bytes: {}", nj, room, rte_strerror(rte_errno)));
    log_info(fmt::format("jumbo frames: {} mbufs of {} bytes for the ports over MTU {}", nj, room, kMaxStdMtu));
    return {};
}

QsbrPtr create_qsbr(uint32_t readers) {
    const size_t sz = rte_rcu_qsbr_get_memsize(readers);
    QsbrPtr q(static_cast<rte_rcu_qsbr*>(rte_zmalloc("svcgate_qsbr", sz, RTE_CACHE_LINE_SIZE)));
    if (q && rte_rcu_qsbr_init(q.get(), readers) != 0) q.reset();
    return q;
}

}  // namespace svcgate::ctl
