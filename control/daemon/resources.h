// The daemon's DPDK resources, each owned by an object that gives it back on every exit path,
// an early failure included: the EAL, the packet pool, the ports, the RCU state, the flow-removal
// rings. Destroyed in reverse order of construction, so a port is closed before the pool its
// queues point into is freed, and the EAL goes last.
//
// Runs on: the control thread, before the workers start and after they stop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <rte_ether.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "control/base/status.h"
#include "control/config/config_model.h"
#include "dataplane/lb/rss_steer.h"

namespace svcgate::ctl {

// rte_eal_init / rte_eal_cleanup (and the packet-capture server in between).
class Eal {
public:
    Status init(std::vector<std::string> args);
    ~Eal();
    bool up() const { return up_; }

private:
    bool up_ = false;
    bool pdump_ = false;
};

struct MempoolDeleter {
    void operator()(rte_mempool* p) const noexcept { rte_mempool_free(p); }
};
using MempoolPtr = std::unique_ptr<rte_mempool, MempoolDeleter>;

struct RingDeleter {
    void operator()(rte_ring* r) const noexcept { rte_ring_free(r); }
};
using RingPtr = std::unique_ptr<rte_ring, RingDeleter>;

struct RteFree {
    void operator()(void* p) const noexcept;
};
using QsbrPtr = std::unique_ptr<rte_rcu_qsbr, RteFree>;

// One started DPDK port; stopped and closed when destroyed.
class Port {
public:
    Port() = default;
    Port(Port&& o) noexcept
        : id_(o.id_),
          rxq_(o.rxq_),
          txq_(o.txq_),
          configured_(std::exchange(o.configured_, false)),
          started_(std::exchange(o.started_, false)),
          have_mac_(o.have_mac_),
          mac_(o.mac_),
          polls_(o.polls_),
          steer_(std::move(o.steer_)),
          steer_note_(std::move(o.steer_note_)) {}
    Port& operator=(Port&&) = delete;
    ~Port();

    // Configures and starts the port: RSS over `workers` queues when the device can, else one
    // receive queue per worker the device has.
    Status open(const PortConfig& pc, uint16_t workers, rte_mempool* pool);
    // A VLAN port on a device an earlier port opened (`device`): the same device, queues, MAC and
    // steering. It opens and closes nothing, and its queues are polled as the device's.
    void share(const Port& device);
    bool polls() const { return polls_; }  // false for a shared one: its frames come with the device's
    uint16_t id() const { return id_; }
    uint16_t rx_queues() const { return rxq_; }
    uint16_t tx_queues() const { return txq_; }
    rte_ether_addr mac() const;
    // The port's RSS as masquerade ports use it (dataplane/lb/rss_steer.h): null where the port
    // has no RSS over the workers' queues, or the driver does not report its key or redirection
    // table; steering_note() says which ("on: ..." or "off: why").
    const dp::RssSteer* steering() const { return steer_.get(); }
    const std::string& steering_note() const { return steer_note_; }

private:
    void read_steering(const char* driver, uint16_t reta_size, bool rss);

    uint16_t id_ = 0;
    uint16_t rxq_ = 1, txq_ = 1;
    bool configured_ = false;  // closed when destroyed (its queues point into the pool)
    bool started_ = false;     // stopped first
    bool have_mac_ = false;    // ports[].mac, kept even where the device could not take it
    rte_ether_addr mac_{};
    bool polls_ = true;
    std::shared_ptr<const dp::RssSteer> steer_;
    std::string steer_note_;
};

inline constexpr uint16_t kRxDesc = 1024;
inline constexpr uint16_t kTxDesc = 1024;

// The EAL's arguments for a config: its own, one --vdev / -a per port, the command line's extras,
// and lcores 0-WORKERS unless given. Fails on a port without a device.
Status eal_args(const DataplaneConfig& dpc, const std::vector<std::string>& extra, std::vector<std::string>& args);

// The bond a port's device names (dataplane.bonds[]), or null; and its DPDK device arguments
// (net_bonding_NAME,mode=...,slave=...), which eal_args names after its members.
const BondConfig* bond_of(const DataplaneConfig& dpc, const std::string& device);
std::string bond_device(const BondConfig& b);

// The packet pool, of 2 KB mbufs: every descriptor, every worker's bursts and held packets, and
// slack. And when a port's MTU is over kMaxStdMtu, the jumbo pool (null otherwise), of mbufs as
// large as the largest port's frames (a VLAN tag included), that the devices and host interfaces
// of those ports receive into: their receive descriptors, every transmit queue, the workers'
// bursts and held packets. The 1500-byte ports keep their 2 KB buffers.
Status create_packet_pools(const DataplaneConfig& dpc, MempoolPtr& pool, MempoolPtr& jumbo);

// The RCU variable for `readers` reader threads.
QsbrPtr create_qsbr(uint32_t readers);

}  // namespace svcgate::ctl
