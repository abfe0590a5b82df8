#include "control/daemon/mempool_ops.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include <rte_common.h>
#include <rte_errno.h>
#include <rte_mempool.h>
#include <rte_ring.h>

namespace svcgate::ctl {

namespace {

rte_ring* ring_of(const rte_mempool* mp) { return static_cast<rte_ring*>(mp->pool_data); }

// As DPDK's ring handler allocates (drivers/mempool/ring): a ring named after the pool, one
// slot more than the pool's objects, here without single-producer or single-consumer flags.
int ring_alloc(rte_mempool* mp) {
    char name[RTE_RING_NAMESIZE];
    const int n = std::snprintf(name, sizeof name, RTE_MEMPOOL_MZ_FORMAT, mp->name);
    if (n < 0 || n >= static_cast<int>(sizeof name)) {
        rte_errno = ENAMETOOLONG;
        return -rte_errno;
    }
    rte_ring* r = rte_ring_create(name, rte_align32pow2(mp->size + 1), mp->socket_id, 0);
    if (!r) return -rte_errno;
    mp->pool_data = r;
    return 0;
}

void ring_free(rte_mempool* mp) { rte_ring_free(ring_of(mp)); }

int ring_enqueue(rte_mempool* mp, void* const* objs, unsigned n) {
    return rte_ring_mp_enqueue_bulk(ring_of(mp), objs, n, nullptr) ? 0 : -ENOBUFS;
}

int ring_dequeue(rte_mempool* mp, void** objs, unsigned n) {
    return rte_ring_mc_dequeue_bulk(ring_of(mp), objs, n, nullptr) ? 0 : -ENOBUFS;
}

unsigned ring_count(const rte_mempool* mp) { return rte_ring_count(ring_of(mp)); }

bool registered(const char* name) {
    for (unsigned i = 0; i < rte_mempool_ops_table.num_ops; ++i)
        if (std::strcmp(rte_mempool_ops_table.ops[i].name, name) == 0) return true;
    return false;
}

bool add(const char* name) {
    rte_mempool_ops ops{};
    std::snprintf(ops.name, sizeof ops.name, "%s", name);
    ops.alloc = ring_alloc;
    ops.free = ring_free;
    ops.enqueue = ring_enqueue;
    ops.dequeue = ring_dequeue;
    ops.get_count = ring_count;
    return rte_mempool_register_ops(&ops) >= 0;
}

}  // namespace

bool fill_mempool_ops() noexcept {
    for (const char* name : {"ring_mp_mc", "ring_sp_sc", "ring_mp_sc", "ring_sp_mc"})
        if (!registered(name) && !add(name)) return false;
    char name[RTE_MEMPOOL_OPS_NAMESIZE];
    for (unsigned i = rte_mempool_ops_table.num_ops; i < RTE_MEMPOOL_MAX_OPS_IDX; ++i) {
        std::snprintf(name, sizeof name, "svcgate_ring_%u", i);
        if (!add(name)) return false;
    }
    for (unsigned i = 0; i < RTE_MEMPOOL_MAX_OPS_IDX; ++i) {
        const rte_mempool_ops& o = rte_mempool_ops_table.ops[i];
        if (o.enqueue != ring_enqueue || o.dequeue != ring_dequeue) return false;
    }
    return true;
}

}  // namespace svcgate::ctl
