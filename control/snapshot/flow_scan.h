// The control thread's one scan over a flow table (the flows listing, a drain's count, the state
// file, the sweep after a reload): fn(id, flow) for every live record, read under the table's
// ScanGuard (no record is reused while it is read); fn returns false to stop.
//
// Runs on: the control thread (the table's scanner QSBR id).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "dataplane/flow/flow_table.h"

namespace svcgate::ctl {

template <typename Table, typename Fn>
void scan_live_flows(Table& table, Fn&& fn) {
    const typename std::remove_const_t<Table>::ScanGuard reading(table);
    for (uint32_t id = 0; id < table.capacity(); ++id) {
        auto& f = table.flow(id);
        if (!f.live.load(std::memory_order_acquire)) continue;
        if (!fn(id, f)) return;
    }
}

}  // namespace svcgate::ctl
