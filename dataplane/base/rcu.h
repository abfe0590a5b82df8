// Grace periods over rte_rcu_qsbr, with the ordering spelled out in C11 terms.
//
// rte_rcu_qsbr_check() (DPDK 22.11) may answer from v->acked_token, which another thread stored
// with a relaxed atomic and which is read without acquire: sound on x86 and ARMv8 hardware, but
// it carries no happens-before from the readers' quiescent reports (store-release) to the thread
// that then frees or reuses memory, so the C11 model (and ThreadSanitizer) cannot see that the
// readers are done. These helpers read every reader's counter with acquire instead, and reclaim
// asks once per batch, not once per retired object.
//
// Runs on: any thread. Reads: the QSBR variable's per-thread counters.
#pragma once

#include <cstdint>

#include <rte_pause.h>
#include <rte_rcu_qsbr.h>

namespace svcgate::dp {

// The lowest token every online reader has acknowledged (UINT64_MAX when none is online): an
// object retired under token t may be freed once rcu_acknowledged() >= t.
inline uint64_t rcu_acknowledged(const rte_rcu_qsbr* v) noexcept {
    uint64_t lowest = __RTE_QSBR_CNT_MAX;
    for (uint32_t i = 0; i < v->max_threads; ++i) {
        // acquire: pairs with the reader's store-release in rte_rcu_qsbr_quiescent(), so all it
        // read before reporting happens before what the caller does next.
        const uint64_t c = __atomic_load_n(&v->qsbr_cnt[i].cnt, __ATOMIC_ACQUIRE);
        if (c != __RTE_QSBR_CNT_THR_OFFLINE && c < lowest) lowest = c;
    }
    return lowest;
}

// Blocks until every online reader has passed a quiescent state after this call began.
inline void rcu_synchronize(rte_rcu_qsbr* v) noexcept {
    const uint64_t t = rte_rcu_qsbr_start(v);
    while (rcu_acknowledged(v) < t) rte_pause();
}

}  // namespace svcgate::dp
