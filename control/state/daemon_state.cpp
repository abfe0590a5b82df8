#include "control/state/daemon_state.h"

namespace svcgate::ctl {

dp::WorkerCounters sum_counters(const DaemonState& st) {
    dp::WorkerCounters t{};
    for (const dp::Worker* w : st.workers) t += w->counters();
    return t;
}

dp::LatencyHistogram sum_latency(const DaemonState& st) {
    dp::LatencyHistogram h;
    for (const dp::Worker* w : st.workers) h += w->latency();
    return h;
}

}  // namespace svcgate::ctl
