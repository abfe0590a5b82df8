// 802.1Q sub-interfaces: several ports on one device (dataplane.ports[].vlan), told apart by
// their tag. A device with VLAN ports has its frames sorted by (device, VLAN ID) once per burst,
// before the parse stage: each frame's tag is read once and the frame goes into the sub-burst of
// its port, its tag left where it is (Burst::tags_checked), as a router-on-a-stick keeps the L2
// header it will rewrite anyway. The parser reads past the tag (the fast path too), so every
// stage after works on one port's frames at their l3_off, and nothing is moved on the way in.
// On the way out every frame leaves with exactly its port's tag, set where every path leaves: as
// the output stage queues a frame (Output::set_trunks: forwards, replies, REJECTs, ICMP errors,
// ARP and ND answers and requests), and in the worker's host path (what the kernel sends). A
// routed frame that came in tagged and leaves tagged has its header rewritten in place, MACs and
// tag (vlan_set_header); one that leaves untagged (the kernel's TAP, a port alone on its device)
// has its tag taken off (vlan_strip); one that came in untagged gets its tag pushed in front.
// A device whose ports are all untagged skips the sort: its frames reach the parser as they came,
// and one tagged with a VLAN ID is counted as vlan_unknown there (ID 0, a priority tag, is parsed).
//
// The tags are inserted and removed in software, within the frame's first cache line. Priority
// bits are not carried from request to reply (flows do not keep them): what svcgate sends has
// priority 0. A priority tag (ID 0) is not forwarded: a routed frame leaves with its port's tag
// or none, as Linux forwards it.
//
// Runs on: the workers, trace and the tests. Owns: nothing.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include "dataplane/packet/verdict.h"

namespace svcgate::dp {

struct Burst;
struct WorkerCtx;

inline constexpr uint16_t kNoPort = 0xffff;
inline constexpr uint16_t kVlanIds = 4096;
// A port's place on its device, by port index (WorkerShared::port_vlans, Output::set_trunks): the
// tag its frames leave with (kPortVlanId bits, 0: none) and kPortOnTrunk when its device has VLAN
// ports; 0 for a port alone on its device.
inline constexpr uint16_t kPortVlanId = 0x0fff, kPortOnTrunk = 0x8000;

// A device's ports by VLAN ID: port[0] is its untagged port (frames with a priority tag, ID 0,
// too), kNoPort where it has none.
struct VlanMap {
    std::array<uint16_t, kVlanIds> port;
    VlanMap() noexcept { port.fill(kNoPort); }
};

// A frame of a device with VLAN ports: the port index it belongs to, the frame as it came (a tag
// stripped by the NIC is read from the mbuf, and the frame stays untagged); kNoPort with the
// reason it cannot be taken (vlan_unknown, vlan_truncated, vlan_stacked, eth_truncated).
uint16_t vlan_receive(const VlanMap& map, rte_mbuf* m, DropReason& why) noexcept;

// Whether the frame at `f` (at least 14 bytes) carries an 802.1Q tag.
inline bool vlan_tagged(const uint8_t* f) noexcept {
    uint16_t type;
    std::memcpy(&type, f + 12, 2);
    return type == RTE_BE16(RTE_ETHER_TYPE_VLAN);
}

// The 12 address bytes of a frame moved to `to` (4 bytes before or after `from`): two loads, then
// two stores, so the ranges may overlap; no call to memmove (bench/HISTORY.md, issue 67).
inline void vlan_move_macs(uint8_t* to, const uint8_t* from) noexcept {
    uint64_t a;
    uint32_t b;
    std::memcpy(&a, from, 8);
    std::memcpy(&b, from + 8, 4);
    std::memcpy(to, &a, 8);
    std::memcpy(to + 8, &b, 4);
}

// Whether a frame can take a tag: 4 bytes of headroom, and its data its own (a clone's is not
// ours to move).
inline bool vlan_can_push(const rte_mbuf* m) noexcept {
    return rte_pktmbuf_headroom(m) >= 4 && RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1;
}

inline void vlan_store_tag(uint8_t* at, uint16_t vid) noexcept {
    const uint32_t tag = rte_cpu_to_be_32(0x81000000u | (vid & kPortVlanId));
    std::memcpy(at, &tag, 4);
}

// The frame's start moved 4 bytes into its headroom, for a tag (vlan_can_push holds): the new
// start.
inline uint8_t* vlan_grow(rte_mbuf* m) noexcept {
    m->data_off = static_cast<uint16_t>(m->data_off - 4);
    m->data_len = static_cast<uint16_t>(m->data_len + 4);
    m->pkt_len += 4;
    return rte_pktmbuf_mtod(m, uint8_t*);
}

// The frame's tag taken off (vlan_tagged holds): its MACs moved 4 bytes on, over it.
inline void vlan_strip(rte_mbuf* m) noexcept {
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    vlan_move_macs(f + 4, f);
    m->data_off = static_cast<uint16_t>(m->data_off + 4);
    m->data_len = static_cast<uint16_t>(m->data_len - 4);
    m->pkt_len -= 4;
}

// Puts an 802.1Q tag of `vid` (priority 0) in front of the frame's EtherType. False when it
// cannot take one (vlan_can_push).
inline bool vlan_insert(rte_mbuf* m, uint16_t vid) noexcept {
    if (!vlan_can_push(m)) [[unlikely]]
        return false;
    uint8_t* f = vlan_grow(m);
    vlan_move_macs(f, f + 4);
    vlan_store_tag(f + 12, vid);
    return true;
}

// A frame's Ethernet header written as it leaves a VLAN port: to `dst` from `src`, an 802.1Q tag
// of `vid` (priority 0), the EtherType after it left as it is. Where the frame is tagged already
// (vlan_tagged holds), its header rewritten in place, nothing moved: the routed frame from one
// VLAN port to another.
inline void vlan_set_header(uint8_t* f, const rte_ether_addr& dst, const rte_ether_addr& src, uint16_t vid) noexcept {
    std::memcpy(f, dst.addr_bytes, RTE_ETHER_ADDR_LEN);
    std::memcpy(f + RTE_ETHER_ADDR_LEN, src.addr_bytes, RTE_ETHER_ADDR_LEN);
    vlan_store_tag(f + 12, vid);
}

// An untagged routed frame's header written whole, its tag in 4 bytes of its headroom
// (vlan_set_header): the MACs' store and vlan_insert in one, the old addresses neither read nor
// moved. False as vlan_insert, nothing written.
inline bool vlan_push_header(rte_mbuf* m, const rte_ether_addr& dst, const rte_ether_addr& src, uint16_t vid) noexcept {
    if (!vlan_can_push(m)) [[unlikely]]
        return false;
    vlan_set_header(vlan_grow(m), dst, src, vid);
    return true;
}

// What a port on a trunk received and sent, counted by the workers (the NIC counts the device).
struct PortSoftCounters {
    uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
};

// The `n` frames in b.mbufs, of one device with VLAN ports (`map`): process_burst() runs once on
// the burst when its frames are all one port's, else once per port that has frames, in the order
// of their first frames, each with Burst::tags_checked set. Frames no port takes are counted
// received and dropped under their reason. `ports`: by port index, what each received
// (PortSoftCounters: bytes without the tag, as the kernel counts a VLAN device's), or null.
void vlan_burst(Burst& b, WorkerCtx& ctx, const VlanMap& map, uint16_t n, PortSoftCounters* ports) noexcept;

}  // namespace svcgate::dp
