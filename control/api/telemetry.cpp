#include "control/api/telemetry.h"

#include <cctype>
#include <string>

#include <rte_telemetry.h>

namespace svcgate::ctl {

using namespace svcgate::dp;

namespace {

DaemonState* g_state = nullptr;  // the telemetry callbacks' way to the daemon (under g_state->mu)
std::mutex g_state_mu;           // guards g_state itself

int tel_stats(const char*, const char*, rte_tel_data* d) {
    std::lock_guard g(g_state_mu);
    if (!g_state) return -1;
    std::lock_guard lk(g_state->mu);
    const WorkerCounters t = sum_counters(*g_state);
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "rx_packets", t.rx_packets);
    rte_tel_data_add_dict_u64(d, "rx_bytes", t.rx_bytes);
    rte_tel_data_add_dict_u64(d, "tx_packets", t.tx_packets);
    for (unsigned v = 0; v < kVerdicts; ++v)
        rte_tel_data_add_dict_u64(d, std::string(verdict_name(static_cast<Verdict>(v))).c_str(), t.verdicts[v]);
    for (unsigned r = 1; r < kDropReasons; ++r) {
        const std::string name(drop_reason_name(static_cast<DropReason>(r)));
        if (t.drops[r]) rte_tel_data_add_dict_u64(d, ("drop_" + name).c_str(), t.drops[r]);
        if (t.rejects[r]) rte_tel_data_add_dict_u64(d, ("reject_" + name).c_str(), t.rejects[r]);
    }
    rte_tel_data_add_dict_u64(d, "flows_created", t.flows_created);
    rte_tel_data_add_dict_u64(d, "flows_expired", t.flows_expired);
    rte_tel_data_add_dict_u64(d, "flows_live", g_state->flows_live());
    rte_tel_data_add_dict_u64(d, "flow_capacity", g_state->flows_capacity());
    rte_tel_data_add_dict_u64(d, "generation", g_state->generation());
    rte_tel_data_add_dict_u64(d, "reloads", g_state->reload.ok);
    rte_tel_data_add_dict_u64(d, "reload_failures", g_state->reload.failed);
    return 0;
}

int tel_services(const char*, const char*, rte_tel_data* d) {
    std::lock_guard g(g_state_mu);
    if (!g_state) return -1;
    std::lock_guard lk(g_state->mu);
    const ServiceSnapshot& s = g_state->snap();
    rte_tel_data_start_dict(d);
    // One entry per service port: its packets (the telemetry dict holds up to 256).
    for (size_t i = 0; i < s.services.size(); ++i) {
        // Telemetry names allow letters, digits, '_' and '/': "ns/name:port" → "ns/name_port".
        std::string key = s.info(static_cast<uint32_t>(i)).name;
        for (char& c : key)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '/') c = '_';
        rte_tel_data_add_dict_u64(d, key.c_str(), g_state->slots().service_total(s.services[i].slot).packets);
    }
    return 0;
}

}  // namespace

void register_telemetry(DaemonState& st) {
    {
        std::lock_guard g(g_state_mu);
        g_state = &st;
    }
    rte_telemetry_register_cmd("/svcgate/stats", tel_stats,
                               "svcgate: verdicts, drops and rejects by reason, flows, reloads");
    rte_telemetry_register_cmd("/svcgate/services", tel_services, "svcgate: packets per service port");
}

void unregister_telemetry() {
    std::lock_guard g(g_state_mu);
    g_state = nullptr;
}

}  // namespace svcgate::ctl
