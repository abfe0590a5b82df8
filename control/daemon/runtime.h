// What a running gateway owns (the EAL, the packet pool, the ports and their host interfaces, the
// RCU state, the flow and fragment tables, the rings, the workers, the sync thread), built in that
// order by build_runtime and given back in reverse on every exit path, workers first.
//
// Runs on: the control thread (build, launch, stop); the workers run on the other lcores.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <rte_spinlock.h>

#include "control/config/config_model.h"
#include "control/base/status.h"
#include "control/daemon/resources.h"
#include "control/export/ipfix.h"
#include "control/ha/sync.h"
#include "dataplane/fragment/frag_table.h"
#include "dataplane/pipeline/worker.h"

namespace svcgate::ctl {

// What a running gateway owns, in the order it is built; destroyed in reverse, workers first.
struct Runtime {
    Eal eal;
    MempoolPtr pool;
    MempoolPtr jumbo_pool;  // when a port's MTU is over kMaxStdMtu (create_packet_pools)
    std::vector<Port> ports;
    std::vector<size_t> device_of;  // by port: the first port on its device (itself but for VLANs)
    std::vector<std::unique_ptr<dp::VlanMap>> vlan_maps;  // of the devices with VLAN ports
    std::vector<Port> hosts;        // the ports' host interfaces (TAP devices), closed before the ports
    std::vector<int> host_ifindex;  // by port: its host interface's index, 0 for none
    std::vector<std::vector<IpCidr>> host_addresses;  // by port: what its host interface carries
    QsbrPtr qsbr;
    std::unique_ptr<dp::FlowTable> flows;
    std::unique_ptr<dp::FlowTable6> flows6;
    std::unique_ptr<dp::FragTable> frags;
    std::vector<RingPtr> remove_rings;
    std::unique_ptr<dp::WorkerShared> shared;
    std::vector<std::unique_ptr<rte_spinlock_t[]>> tx_locks;
    std::vector<const dp::RssSteer*> rss;  // by port: its RSS steering (Port::steering), read by the workers
    std::vector<std::unique_ptr<dp::Worker>> workers;
    std::vector<RingPtr> sync_rings;       // per worker, to the sync thread (ha on)
    std::unique_ptr<Syncer> sync;          // stopped before what it reads goes
    std::vector<RingPtr> nat_rings;        // per worker, to the IPFIX exporter (export.ipfix on)
    std::unique_ptr<IpfixExporter> ipfix;  // after the rings: stopped (and its last events sent) first
    bool launched = false;

    ~Runtime() { stop_workers(); }
    void stop_workers() {
        if (!launched) return;
        shared->stop.store(true);
        rte_eal_mp_wait_lcore();
        launched = false;
    }
    // The pool a device or host interface of this MTU receives into.
    rte_mempool* rx_pool(uint16_t mtu) const { return mtu > kMaxStdMtu && jumbo_pool ? jumbo_pool.get() : pool.get(); }
};

// EAL, pool, ports, RCU, flow table, rings, workers (not yet launched); what was built is given
// back by the Runtime either way.
Status build_runtime(Runtime& rt, const DataplaneConfig& dpc, const HaConfig& ha, const IpfixConfig& ipfix,
                     const std::vector<std::string>& eal_extra);
// The workers on the EAL's worker lcores, one each.
void launch_workers(Runtime& rt);
// The interface the announcement routes point at: the first host interface, else lo.
int first_host_interface(const Runtime& rt);

}  // namespace svcgate::ctl
