// Which worker polls which receive queue, and which transmit queue each worker uses on each port:
// a pure function of the ports' queue counts and the number of workers, so it is tested without
// a NIC.
//
// Receive: port p's queue q goes to worker (p + q) % workers, so one-queue ports spread over the
// workers instead of all landing on worker 0. Transmit: worker w uses queue w % queues of each
// port; a port with fewer transmit queues than workers shares them, under a lock per queue.
//
// Runs on: the control thread, at start.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace svcgate::ctl {

struct QueuePlan {
    struct Rx {
        uint16_t port, queue;
        bool operator==(const Rx&) const = default;
    };
    std::vector<std::vector<Rx>> rx;        // by worker: the queues it polls
    std::vector<std::vector<uint16_t>> tx;  // by worker, by port: its transmit queue
    std::vector<bool> tx_shared;            // by port: its transmit queues are shared (locked)
};

QueuePlan plan_queues(std::span<const uint16_t> rx_queues, std::span<const uint16_t> tx_queues, uint16_t workers);

}  // namespace svcgate::ctl
