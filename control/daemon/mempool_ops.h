#pragma once

// The mempool handlers of a daemon with DPDK linked in statically (meson option dpdk_link).
//
// A mempool names its handler by an index into a table each process fills for itself as its
// drivers register. dpdk-dumpcap, a secondary process of Debian's shared build, creates its
// capture pool with "ring_mp_sc" at the index its own plugins gave it; the daemon's workers then
// take mbufs from that pool, and give back the ones the capture ring refuses, through the
// daemon's table at that index. A shared daemon loads the same plugins in the same order, so the
// two tables agree; a static one does not load plugins, and an index it gives another handler
// would have its workers run that handler on the capture's ring.
//
// So the static daemon links no mempool driver and fills the whole table with one handler: a ring
// taken by many producers and many consumers (rte_ring_mp_enqueue_bulk, rte_ring_mc_dequeue_bulk),
// which is correct on every ring-backed pool, whatever the flags its creator chose. The four
// classic names are there for pools created by name ("ring_mp_mc" is DPDK's default for mbufs);
// the rest of the table is filled with the same handler under names of its own.

namespace svcgate::ctl {

// Registers the handler under the names the table lacks and fills it. True when every slot of
// the table is this handler; false, with nothing changed in the slots already taken, when a
// driver linked in has registered one of its own (dpdk-dumpcap may then not capture).
bool fill_mempool_ops() noexcept;

}  // namespace svcgate::ctl
