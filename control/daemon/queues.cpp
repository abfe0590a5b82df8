#include "control/daemon/queues.h"

namespace svcgate::ctl {

QueuePlan plan_queues(std::span<const uint16_t> rx_queues, std::span<const uint16_t> tx_queues, uint16_t workers) {
    QueuePlan plan;
    if (workers == 0) return plan;
    plan.rx.resize(workers);
    plan.tx.assign(workers, std::vector<uint16_t>(tx_queues.size(), 0));
    plan.tx_shared.assign(tx_queues.size(), false);
    for (size_t p = 0; p < rx_queues.size(); ++p)
        for (uint16_t q = 0; q < rx_queues[p]; ++q) plan.rx[(p + q) % workers].push_back({static_cast<uint16_t>(p), q});
    for (size_t p = 0; p < tx_queues.size(); ++p) {
        const uint16_t n = tx_queues[p] ? tx_queues[p] : 1;
        plan.tx_shared[p] = n < workers;
        for (uint16_t w = 0; w < workers; ++w) plan.tx[w][p] = static_cast<uint16_t>(w % n);
    }
    return plan;
}

}  // namespace svcgate::ctl
